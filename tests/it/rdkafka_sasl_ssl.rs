//! The rdkafka crate (librdkafka built with OpenSSL, the crate's `ssl` feature) over
//! `SASL_SSL` with SCRAM-SHA-256, against credentials that `strata admin users add` stores
//! through AlterUserScramCredentials on the node's PLAINTEXT listener.
//!
//! - `scram_sha_256_over_sasl_ssl_produces_and_consumes`: a producer and a consumer that
//!   verify the broker's certificate against the test authority, log in as a SCRAM user and
//!   move 2,000 keyed records through three partitions, each read back exactly once.
//! - `a_wrong_scram_password_is_an_authentication_error`: the same client with a wrong
//!   password, or a user that has no SCRAM-SHA-256 credential, gets librdkafka's
//!   authentication error and no metadata; the good client still works beside it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, ensure};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::topic_partition_list::Offset;
use strata_tests::{Broker, free_port, workspace_root};

use crate::admin_cli_run::admin;
use crate::rdkafka_clients::*;

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";

/// A node with PLAINTEXT (the harness's probe, and `strata admin`) and SASL_SSL listeners,
/// SCRAM-SHA-256 enabled, and user alice's credential stored. Returns the node, the
/// certificate directory (kept by the caller) and the SASL_SSL address.
fn secured_node(certs: &Path) -> anyhow::Result<(Broker, String)> {
    let out = Command::new(workspace_root().join("tests/make-certs.sh"))
        .arg(certs)
        .output()
        .context("run tests/make-certs.sh")?;
    ensure!(
        out.status.success(),
        "make-certs.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port()?;
    let listener = format!("SASL_SSL://127.0.0.1:{port}");
    let keystore = certs.join("server-keystore.pem").display().to_string();
    let broker = Broker::start_with_listeners(
        &[&listener],
        &[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &keystore),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
            ("num.partitions", "3"),
        ],
        &[],
    )?;
    let run = admin(
        &broker.bootstrap(),
        &[
            "users",
            "add",
            "--user",
            USER,
            "--password",
            PASSWORD,
            "--mechanism",
            "SCRAM-SHA-256",
        ],
    );
    ensure!(run.ok, "strata admin users add: {run:?}");
    Ok((broker, format!("127.0.0.1:{port}")))
}

/// The client settings for the SASL_SSL listener as `user`.
fn sasl_ssl<'a>(
    bootstrap: &'a str,
    ca: &'a str,
    user: &'a str,
    password: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("bootstrap.servers", bootstrap),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("sasl.username", user),
        ("sasl.password", password),
        ("ssl.ca.location", ca),
        // The certificate names localhost and 127.0.0.1; librdkafka checks the host name.
        ("ssl.endpoint.identification.algorithm", "https"),
    ]
}

fn certs_dir(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("certs")
}

#[test]
fn scram_sha_256_over_sasl_ssl_produces_and_consumes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let certs = certs_dir(&tmp);
    let (broker, bootstrap) = secured_node(&certs).expect("secured node");
    let ca = certs.join("ca.pem").display().to_string();
    let settings = sasl_ssl(&bootstrap, &ca, USER, PASSWORD);
    let run = || -> anyhow::Result<()> {
        let topic = "scram-over-tls";
        let sent = 2_000;
        let (producer, deliveries) = producer(&broker, &settings)?;
        for i in 0..sent {
            send(
                &producer,
                topic,
                i,
                &key_of(i),
                &value_of("tls", i),
                &[],
                now_ms(),
            )?;
        }
        await_reports(&producer, &deliveries, sent, PHASE_TIMEOUT)?;
        let failed = deliveries.failed.lock().unwrap().clone();
        ensure!(failed.is_empty(), "deliveries failed: {:?}", failed.first());
        let acked = deliveries.acked.lock().unwrap().clone();
        ensure!(acked.len() == sent, "acked {} of {sent}", acked.len());

        let consumer = consumer(&broker, &settings)?;
        let got = consume(&consumer, topic, 3, Offset::Beginning, sent, PHASE_TIMEOUT)?;
        let mut seqs: Vec<usize> = got.iter().map(Consumed::seq).collect::<Result<_, _>>()?;
        seqs.sort_unstable();
        ensure!(
            seqs == (0..sent).collect::<Vec<_>>(),
            "read back {} records, not each of the {sent} once",
            got.len()
        );
        for r in &got {
            let i = r.seq()?;
            ensure!(
                r.value.as_deref() == Some(value_of("tls", i).as_slice()),
                "record {i}'s value changed on the way"
            );
            ensure!(
                acked.get(&i) == Some(&(r.partition, r.offset)),
                "record {i} read at {}:{}, acknowledged at {:?}",
                r.partition,
                r.offset,
                acked.get(&i)
            );
        }
        Ok(())
    };
    if let Err(e) = run() {
        panic!("{e:?}\nbroker stderr:\n{}", broker.stderr_tail());
    }
}

/// Records librdkafka's global errors, to see the authentication failure itself.
#[derive(Clone, Default)]
struct ErrorLog(Arc<Mutex<Vec<(KafkaError, String)>>>);

impl ClientContext for ErrorLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        print_client_log("client", level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.0.lock().unwrap().push((error, reason.to_owned()));
    }
}

impl rdkafka::consumer::ConsumerContext for ErrorLog {}

/// Asks for metadata as `user` and returns librdkafka's global errors: empty when it got in.
fn login_errors(
    bootstrap: &str,
    ca: &str,
    user: &str,
    password: &str,
) -> anyhow::Result<Vec<(KafkaError, String)>> {
    let log = ErrorLog::default();
    let mut config = ClientConfig::new();
    for (k, v) in sasl_ssl(bootstrap, ca, user, password) {
        config.set(k, v);
    }
    let client: BaseConsumer<ErrorLog> = config
        .set("group.id", "login-check")
        .create_with_context(log.clone())
        .context("create client")?;
    let metadata = client.fetch_metadata(None, Duration::from_secs(5));
    if metadata.is_err() {
        // librdkafka hands its errors to the error callback from poll.
        for _ in 0..20 {
            let _ = client.poll(Duration::from_millis(100));
            if !log.0.lock().unwrap().is_empty() {
                break;
            }
        }
    }
    let errors = log.0.lock().unwrap().clone();
    if errors.is_empty() {
        metadata.context("metadata without a login error")?;
    } else {
        ensure!(
            metadata.is_err(),
            "metadata answered despite login errors {errors:?}"
        );
    }
    Ok(errors)
}

#[test]
fn a_wrong_scram_password_is_an_authentication_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let certs = certs_dir(&tmp);
    let (broker, bootstrap) = secured_node(&certs).expect("secured node");
    let ca = certs.join("ca.pem").display().to_string();
    let run = || -> anyhow::Result<()> {
        for (user, password) in [(USER, "not-the-password"), ("mallory", PASSWORD)] {
            let errors = login_errors(&bootstrap, &ca, user, password)?;
            ensure!(
                errors.iter().any(|(e, reason)| {
                    matches!(e, KafkaError::Global(RDKafkaErrorCode::Authentication))
                        && reason.contains("SASL authentication error")
                }),
                "{user}/{password}: no authentication error, got {errors:?}"
            );
        }
        let errors = login_errors(&bootstrap, &ca, USER, PASSWORD)?;
        ensure!(errors.is_empty(), "the right password failed: {errors:?}");
        Ok(())
    };
    if let Err(e) = run() {
        panic!("{e:?}\nbroker stderr:\n{}", broker.stderr_tail());
    }
}
