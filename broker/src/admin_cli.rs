//! `strata admin ...`: the operator's command line for a running cluster, in the spirit of
//! Kafka's `kafka-topics.sh`, `kafka-consumer-groups.sh` and `kafka-metadata-quorum.sh`.
//! Part of the `strata` binary, not of the library.
//!
//! ```text
//! strata admin [--bootstrap-server HOST:PORT | --bootstrap-controller HOST:PORT] [--timeout-ms N]
//!              (topics | groups | transactions | cluster | partitions --hot | kafka-topics | users | acls) ...
//! ```
//!
//! It speaks the Kafka protocol (the `kafka-protocol` message types through this project's
//! codec) to any Kafka-compatible broker: a single node or a cluster, whose partition
//! requests go to each partition's leader and group requests to the group's coordinator.
//! Results print as aligned tables on stdout, progress on stderr; a failure prints Kafka's
//! error name on stderr and exits 1 (2 for a bad command line).
//!
//! # Layout
//!
//! The client (connections, ApiVersions, routing, error names), the partition reads
//! (offsets and sizes from each leader) and the hot-partition ranking are the library's
//! [`strata_broker::admin`], which the web console shares.
//!
//! | file | what |
//! |---|---|
//! | `args.rs` | the small option parser the subcommands share |
//! | `table.rs` | aligned tables |
//! | `topics.rs` | `topics create/list/describe/alter-config/add-partitions/delete` |
//! | `groups.rs` | `groups list/describe/reset-offsets/delete` |
//! | `transactions.rs` | `transactions list/describe` |
//! | `cluster.rs` | `cluster brokers/controller/quorum/under-replicated` |
//! | `hot.rs` | `partitions --hot` |
//! | `kafka_topics.rs` | `kafka-topics`, Kafka's `kafka-topics.sh` argument forms |
//! | `users.rs` | `users list/add/remove`: SCRAM credentials |
//! | `acls.rs` | `acls list/add/remove`, Kafka's `kafka-acls.sh` |

mod acls;
mod args;
mod cluster;
mod groups;
mod hot;
mod kafka_topics;
mod table;
mod topics;
mod transactions;
mod users;

use std::process::ExitCode;
use std::time::Duration;

use strata_broker::admin::{client, logs};

use client::Client;

const USAGE: &str = "\
usage: strata admin [--bootstrap-server HOST:PORT] [--bootstrap-controller HOST:PORT] [--command-config FILE] [--timeout-ms N] COMMAND ...

  --bootstrap-server      brokers of the cluster, HOST:PORT[,HOST:PORT...], the first that answers (default localhost:9092)
  --bootstrap-controller  a controller listener instead (KIP-919), for `cluster quorum`
  --command-config        Kafka client properties: security.protocol, sasl.mechanism (PLAIN, SCRAM-SHA-256/512),
                          sasl.jaas.config (username, password), ssl.truststore.*, ssl.keystore.* (mutual TLS),
                          ssl.endpoint.identification.algorithm
  --timeout-ms            the bound on each request (default 30000)

commands:";

/// `--bootstrap-server`'s default, Kafka's.
const DEFAULT_BOOTSTRAP: &str = "localhost:9092";

/// Each request's default bound: Kafka's `request.timeout.ms` for its admin client.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A failure of the command line itself (exit 2), as opposed to one the cluster answered.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Runs the subcommand on its arguments (those after `admin`).
pub fn main(args: &[String]) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            eprintln!("strata admin: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("strata admin: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> String {
    format!(
        "{USAGE}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
        topics::USAGE,
        groups::USAGE,
        transactions::USAGE,
        cluster::USAGE,
        hot::USAGE,
        kafka_topics::USAGE,
        users::USAGE,
        acls::USAGE
    )
}

fn run(args: &[String]) -> anyhow::Result<()> {
    // The connection options may come anywhere (Kafka's tools take them among the others).
    let mut bootstrap = None;
    let mut controller = None;
    let mut command_config = None;
    let mut timeout = DEFAULT_TIMEOUT;
    let mut rest = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| iter.next().cloned())
                .ok_or_else(|| UsageError(format!("{name} needs a value")))
        };
        match name {
            "--bootstrap-server" => bootstrap = Some(value()?),
            "--bootstrap-controller" => controller = Some(value()?),
            "--command-config" => command_config = Some(value()?),
            "--timeout-ms" => {
                let v = value()?;
                let ms: u64 = v.parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                    UsageError(format!("--timeout-ms must be a positive number, not {v:?}"))
                })?;
                timeout = Duration::from_millis(ms);
            }
            "--help" | "-h" => {
                println!("{}", usage());
                return Ok(());
            }
            _ => rest.push(arg.clone()),
        }
    }
    let Some((command, rest)) = rest.split_first() else {
        return Err(UsageError(usage()).into());
    };
    let mut client = match (&bootstrap, &controller) {
        (Some(_), Some(_)) => {
            return Err(UsageError(
                "--bootstrap-server and --bootstrap-controller exclude each other".to_owned(),
            )
            .into());
        }
        (_, Some(c)) => Client::new_controller(c, timeout),
        (b, None) => Client::new(b.as_deref().unwrap_or(DEFAULT_BOOTSTRAP), timeout),
    };
    if let Some(path) = &command_config {
        client = client.with_security(client_security(std::path::Path::new(path))?);
    }
    if client.is_controller_listener() && command != "cluster" {
        return Err(
            UsageError("--bootstrap-controller serves only `cluster quorum`".to_owned()).into(),
        );
    }
    match command.as_str() {
        "topics" => topics::run(&mut client, rest),
        "groups" => groups::run(&mut client, rest),
        "transactions" => transactions::run(&mut client, rest),
        "cluster" => cluster::run(&mut client, rest),
        "partitions" => hot::run(&mut client, rest),
        "kafka-topics" => kafka_topics::run(&mut client, rest),
        "users" => users::run(&mut client, rest),
        "acls" => acls::run(&mut client, rest),
        other => Err(UsageError(format!("unknown command {other:?}\n{}", usage())).into()),
    }
}

/// The security `--command-config`'s file asks for.
fn client_security(
    path: &std::path::Path,
) -> anyhow::Result<std::sync::Arc<strata_broker::security::peer::PeerSecurity>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("--command-config {}: {e}", path.display())))?;
    let properties = strata_broker::config::parse_properties(&text, path)?;
    strata_broker::security::peer::PeerSecurity::for_client(&properties)
        .map_err(|e| UsageError(format!("--command-config {}: {e:#}", path.display())).into())
}
