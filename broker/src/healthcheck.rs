//! `strata healthcheck`: asks a broker's listener whether it answers, for container
//! health checks (Docker's `HEALTHCHECK`, Compose's `healthcheck`). Part of the `strata`
//! binary, not of the library.
//!
//! ```text
//! strata healthcheck [--bootstrap host:port] [--timeout-ms N] [server.properties] [--override key=value]...
//! ```
//!
//! It connects, sends one ApiVersions request (v3, as librdkafka does first) and exits 0 when
//! the answer is a well-formed ApiVersions response with no error, 1 otherwise (Docker
//! reserves 2). The whole check, connect included, ends within `--timeout-ms` (5000).
//!
//! Without `--bootstrap` the address comes from the same configuration the server reads
//! (file, `KAFKA_*` / `STRATA_*` environment, overrides): the first client listener, with
//! a wildcard host (`0.0.0.0`, `::`, empty) asked on loopback. With no configuration at all
//! that is `localhost:9092`, the server's default.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use strata_broker::config::BrokerConfig;
use strata_broker::peer_client::{PeerError, blocking};
use strata_protocol::StrBytes;
use strata_protocol::messages::{ApiKey, ApiVersionsRequest, RequestKind, ResponseKind};

const USAGE: &str = "usage: strata healthcheck [--bootstrap host:port] [--timeout-ms N] \
                     [server.properties] [--override key=value]...";

/// The default bound on the whole check.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The ApiVersions version asked: v3 (KIP-511) is what librdkafka and the Java client send.
const API_VERSIONS_VERSION: i16 = 3;

/// The largest response read. Strata's ApiVersions answer is about 1 KiB; a size prefix
/// beyond this is not an ApiVersions response, and is not allocated for.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Runs the subcommand on its arguments (those after `healthcheck`).
pub fn main(args: &[String]) -> ExitCode {
    match check(args) {
        Ok(Outcome::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Outcome::Healthy { addr, apis }) => {
            println!("strata healthcheck: {addr} answered ApiVersions ({apis} APIs)");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("strata healthcheck: unhealthy: {e:#}");
            ExitCode::FAILURE
        }
    }
}

enum Outcome {
    Help,
    Healthy { addr: String, apis: usize },
}

fn check(args: &[String]) -> anyhow::Result<Outcome> {
    let mut bootstrap = None;
    let mut timeout = DEFAULT_TIMEOUT;
    let mut config_args = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = |name: &str| {
            iter.next()
                .cloned()
                .with_context(|| format!("{name} needs a value ({USAGE})"))
        };
        match arg.as_str() {
            "--help" | "-h" => return Ok(Outcome::Help),
            "--bootstrap" => bootstrap = Some(value("--bootstrap")?),
            "--timeout-ms" => {
                let ms: u64 = value("--timeout-ms")?
                    .parse()
                    .context("--timeout-ms must be a number of milliseconds")?;
                ensure!(ms > 0, "--timeout-ms must be positive");
                timeout = Duration::from_millis(ms);
            }
            _ => config_args.push(arg.clone()),
        }
    }
    let deadline = Instant::now() + timeout;
    let addr = match bootstrap {
        Some(addr) => {
            ensure!(
                config_args.is_empty(),
                "--bootstrap takes no configuration arguments, got {config_args:?}"
            );
            addr
        }
        None => {
            let env: Vec<(String, String)> = std::env::vars().collect();
            let config = BrokerConfig::from_args(&config_args, &env)
                .context("cannot read the broker's configuration")?;
            local_address(&config.listen_host, config.listen_port)
        }
    };
    let apis = ask_api_versions(&addr, deadline)
        .with_context(|| format!("{addr} (timeout {} ms)", timeout.as_millis()))?;
    Ok(Outcome::Healthy { addr, apis })
}

/// Where to reach a listener bound to `host` from the same machine: a wildcard host is
/// asked on loopback.
fn local_address(host: &str, port: u16) -> String {
    match host {
        "" | "0.0.0.0" => format!("127.0.0.1:{port}"),
        "::" | "[::]" => format!("[::1]:{port}"),
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]:{port}"),
        h => format!("{h}:{port}"),
    }
}

/// Sends ApiVersions to `addr` and returns how many APIs the answer lists.
fn ask_api_versions(addr: &str, deadline: Instant) -> anyhow::Result<usize> {
    let mut conn =
        blocking::Connection::connect(addr, "strata-healthcheck", MAX_RESPONSE_BYTES, deadline)
            .with_context(|| format!("connect {addr}"))?;
    let body = RequestKind::ApiVersions(
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("strata-healthcheck"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION"))),
    );
    let answer = conn
        .request(ApiKey::ApiVersions, API_VERSIONS_VERSION, &body, deadline)
        .map_err(|e| match e {
            PeerError::Decode(_) => anyhow::Error::new(e).context("decode the response"),
            e => e.into(),
        })?;
    let ResponseKind::ApiVersions(r) = answer else {
        bail!("the answer is not an ApiVersions response");
    };
    ensure!(
        r.error_code == 0,
        "ApiVersions answered error code {}",
        r.error_code
    );
    ensure!(
        r.api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::ApiVersions as i16),
        "the ApiVersions answer does not list ApiVersions"
    );
    Ok(r.api_keys.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_hosts_are_asked_on_loopback() {
        assert_eq!(local_address("", 9092), "127.0.0.1:9092");
        assert_eq!(local_address("0.0.0.0", 9092), "127.0.0.1:9092");
        assert_eq!(local_address("::", 9092), "[::1]:9092");
        assert_eq!(local_address("::1", 9092), "[::1]:9092");
        assert_eq!(local_address("localhost", 9092), "localhost:9092");
        assert_eq!(local_address("strata-1", 19092), "strata-1:19092");
    }
}
