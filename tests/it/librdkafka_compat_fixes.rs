//! Regression tests for broker deviations found by librdkafka's own test suite
//! (`compat-tests/run-librdkafka.sh`), each against the real `strata` binary.
//!
//! - 0011_produce_batch (`test_message_single_partition_record_fail`): IncrementalAlterConfigs
//!   (KIP-339) APPEND/SUBTRACT of `cleanup.policy`, and a compacted topic refusing records
//!   without a key with INVALID_RECORD plus per-record `record_errors`, so the client fails
//!   only the keyless records and the rest of the batch with `_INVALID_DIFFERENT_RECORD`.
//!   IncrementalAlterConfigs is driven with hand-built frames (librdkafka's admin API in the
//!   `rdkafka` crate has no incremental variant); the produce side uses librdkafka itself.

use std::net::TcpStream;
use std::time::Duration;

use rdkafka::admin::{AdminClient, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use strata_tests::Broker;
use strata_tests::wire;

use crate::admin_client::{admin, admin_opts, block};

const TIMEOUT: Duration = Duration::from_secs(15);

const OP_SET: i8 = 0;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

fn cleanup_policy(a: &AdminClient<DefaultClientContext>, topic: &str) -> String {
    let r = block(a.describe_configs(&[ResourceSpecifier::Topic(topic)], &admin_opts(TIMEOUT)))
        .expect("DescribeConfigs");
    let res = r.into_iter().next().unwrap().expect("resource");
    res.get("cleanup.policy")
        .and_then(|e| e.value.clone())
        .unwrap_or_default()
}

/// Sends an IncrementalAlterConfigs v0 request for one resource and returns
/// (error code, error message) of its result.
fn incremental_alter(
    s: &mut TcpStream,
    corr: i32,
    resource_type: i8,
    name: &str,
    configs: &[(&str, i8, Option<&str>)],
) -> (i16, Option<String>) {
    let mut body = wire::header(44, 0, corr);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.push(resource_type as u8);
    wire::put_str(&mut body, name);
    body.extend_from_slice(&(configs.len() as i32).to_be_bytes());
    for (key, op, value) in configs {
        wire::put_str(&mut body, key);
        body.push(*op as u8);
        match value {
            Some(v) => wire::put_str(&mut body, v),
            None => body.extend_from_slice(&(-1i16).to_be_bytes()),
        }
    }
    body.push(0); // validate_only
    wire::send(s, &body);
    let resp = wire::recv(s).expect("IncrementalAlterConfigs response");
    assert_eq!(wire::correlation_id(&resp), corr);
    // corr(4) throttle(4) count(4) error_code(2) error_message(2+n) resource_type(1) name
    assert_eq!(i32::from_be_bytes(resp[8..12].try_into().unwrap()), 1);
    let code = i16::from_be_bytes([resp[12], resp[13]]);
    let len = i16::from_be_bytes([resp[14], resp[15]]);
    let message =
        (len >= 0).then(|| String::from_utf8_lossy(&resp[16..16 + len as usize]).into_owned());
    let at = 16 + len.max(0) as usize;
    assert_eq!(resp[at] as i8, resource_type);
    (code, message)
}

/// Produces `keys` (in one batch: linger) and returns each delivery's outcome.
fn produce_batch(
    b: &Broker,
    topic: &str,
    keys: &[Option<&str>],
) -> Vec<Result<(), RDKafkaErrorCode>> {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("linger.ms", "200")
        .set("message.timeout.ms", "15000")
        .create()
        .expect("producer");
    block(async {
        let futures: Vec<_> = keys
            .iter()
            .map(|k| {
                let mut r = FutureRecord::<str, str>::to(topic)
                    .payload("v")
                    .partition(0);
                if let Some(k) = k {
                    r = r.key(*k);
                }
                p.send_result(r).expect("enqueue")
            })
            .collect();
        let mut out = Vec::new();
        for f in futures {
            out.push(match f.await.expect("delivery report") {
                Ok(_) => Ok(()),
                Err((KafkaError::MessageProduction(code), _)) => Err(code),
                Err((e, _)) => panic!("unexpected delivery error {e}"),
            });
        }
        out
    })
}

#[test]
fn incremental_alter_configs_and_compacted_topic_rejects_keyless_records() {
    let b = Broker::start(&[]).unwrap();
    let a = admin(&b);
    let topic = "compacting";
    let r = block(a.create_topics(
        &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
        &admin_opts(TIMEOUT),
    ))
    .expect("CreateTopics");
    assert!(r[0].is_ok(), "{r:?}");
    assert_eq!(cleanup_policy(&a, topic), "delete");

    // Before: a keyless record is fine on a delete-policy topic.
    assert_eq!(produce_batch(&b, topic, &[None]), vec![Ok(())]);

    let mut s = wire::connect(b.port());
    // APPEND starts from the topic default ("delete"), as Kafka's ConfigAdminManager does.
    let (code, msg) = incremental_alter(
        &mut s,
        1,
        2,
        topic,
        &[("cleanup.policy", OP_APPEND, Some("compact"))],
    );
    assert_eq!((code, msg), (0, None));
    assert_eq!(cleanup_policy(&a, topic), "delete,compact");

    // One batch with keyless records among keyed ones: only those are INVALID_RECORD (87); the
    // client fails the others as _INVALID_DIFFERENT_RECORD because the response names the
    // bad records in record_errors. (With a single record error librdkafka reports the
    // partition-level error for every message of the batch, so two are needed to see it.)
    let outcomes = produce_batch(&b, topic, &[Some("k0"), None, Some("k2"), None]);
    assert_eq!(
        outcomes,
        vec![
            Err(RDKafkaErrorCode::InvalidDifferentRecord),
            Err(RDKafkaErrorCode::InvalidRecord),
            Err(RDKafkaErrorCode::InvalidDifferentRecord),
            Err(RDKafkaErrorCode::InvalidRecord),
        ]
    );
    // Keyed records alone are accepted.
    assert_eq!(
        produce_batch(&b, topic, &[Some("a"), Some("b")]),
        vec![Ok(()), Ok(())]
    );

    // SUBTRACT removes it again; keyless records are accepted once more.
    let (code, _) = incremental_alter(
        &mut s,
        2,
        2,
        topic,
        &[("cleanup.policy", OP_SUBTRACT, Some("compact"))],
    );
    assert_eq!(code, 0);
    assert_eq!(cleanup_policy(&a, topic), "delete");
    assert_eq!(produce_batch(&b, topic, &[None]), vec![Ok(())]);

    // Kafka's error codes: APPEND on a non-list config is INVALID_CONFIG (40), an invalid value
    // INVALID_CONFIG, an unknown topic UNKNOWN_TOPIC_OR_PARTITION (3), and nothing is written.
    let (code, _) = incremental_alter(
        &mut s,
        3,
        2,
        topic,
        &[("retention.ms", OP_APPEND, Some("1"))],
    );
    assert_eq!(code, 40);
    let (code, _) = incremental_alter(
        &mut s,
        4,
        2,
        topic,
        &[("cleanup.policy", OP_SET, Some("archive"))],
    );
    assert_eq!(code, 40);
    let (code, _) = incremental_alter(
        &mut s,
        5,
        2,
        "no-such-topic",
        &[("cleanup.policy", OP_SET, Some("compact"))],
    );
    assert_eq!(code, 3);
    assert_eq!(cleanup_policy(&a, topic), "delete");

    // SET takes effect too (and is what DescribeConfigs reports).
    let (code, _) = incremental_alter(
        &mut s,
        6,
        2,
        topic,
        &[("cleanup.policy", OP_SET, Some("compact"))],
    );
    assert_eq!(code, 0);
    assert_eq!(cleanup_policy(&a, topic), "compact");
    assert_eq!(
        produce_batch(&b, topic, &[None]),
        vec![Err(RDKafkaErrorCode::InvalidRecord)]
    );
}
