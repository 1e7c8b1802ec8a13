//! Client quotas (KIP-13, KIP-546, KIP-219) against the real `strata` binary:
//!
//! - AlterClientQuotas and DescribeClientQuotas round trips in raw frames encoded by the
//!   protocol crate (no client here has a quota API: the rdkafka crate has none, and
//!   kafka-python's admin client does not send these requests): client-id, user and
//!   default entities, the three match types and `strict`, `validate_only`, removal, the
//!   INVALID_REQUEST and UNSUPPORTED_VERSION answers, and survival across a restart;
//! - on a three-node cluster, a quota set through a node that is not the controller
//!   (forwarded) is described by every node;
//! - a librdkafka producer with a 1 MB/s `producer_byte_rate` on its client id, pushing as
//!   hard as it can, is held within ±20% of the quota once the first quota window (11 s)
//!   has passed, and sees throttle times in its statistics, while a producer with another
//!   client id on the same broker is not throttled;
//! - a librdkafka consumer with a 1 MB/s `consumer_byte_rate` reads within ±40% of it over
//!   the whole run (its first burst included: a fetch quota lets a consumer read in
//!   bursts), and sees throttle times.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use strata_protocol::StrBytes;
use strata_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, RequestKind, ResponseKind, alter_client_quotas_request,
    describe_client_quotas_request,
};
use strata_tests::cluster::{self, Cluster, POLL};
use strata_tests::{Broker, serial, wait_until};

/// Kafka's INVALID_REQUEST.
const INVALID_REQUEST: i16 = 42;
/// Kafka's UNSUPPORTED_VERSION.
const UNSUPPORTED_VERSION: i16 = 35;

/// The bound on every wait for a metadata change to reach a node.
const WAIT: Duration = Duration::from_secs(60);

/// Sends `body` at v1 (flexible: the response header carries a tagged-field section) to
/// 127.0.0.1:`port` and decodes the answer.
fn call(port: u16, key: ApiKey, body: RequestKind) -> anyhow::Result<ResponseKind> {
    crate::acl_client::try_call(port, key, 1, &body, std::time::Duration::from_secs(15))
}

/// An entity as (type, name) pairs, `None` for the default.
type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

/// One AlterClientQuotas entry: an entity and its ops (key, `Some(value)` or `None` to
/// remove).
fn entry(
    entity: Entity<'_>,
    ops: &[(&str, Option<f64>)],
) -> alter_client_quotas_request::EntryData {
    alter_client_quotas_request::EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    alter_client_quotas_request::EntityData::default()
                        .with_entity_type(StrBytes::from_string((*t).to_owned()))
                        .with_entity_name(n.map(|n| StrBytes::from_string(n.to_owned())))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    alter_client_quotas_request::OpData::default()
                        .with_key(StrBytes::from_string((*k).to_owned()))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

/// Sends an AlterClientQuotas and returns each entry's error code.
fn alter(
    port: u16,
    entries: Vec<alter_client_quotas_request::EntryData>,
    validate_only: bool,
) -> Vec<i16> {
    let req = AlterClientQuotasRequest::default()
        .with_entries(entries)
        .with_validate_only(validate_only);
    match call(
        port,
        ApiKey::AlterClientQuotas,
        RequestKind::AlterClientQuotas(req),
    ) {
        Ok(ResponseKind::AlterClientQuotas(AlterClientQuotasResponse { entries, .. })) => {
            entries.iter().map(|e| e.error_code).collect()
        }
        other => panic!("AlterClientQuotas: {other:?}"),
    }
}

/// A DescribeClientQuotas filter component: entity type, match type, match.
type Component<'a> = (&'a str, i8, Option<&'a str>);

/// The described entities, each as sorted "type=name" parts (`type=<default>` for a
/// default) with its sorted (key, value) pairs.
type Described = Vec<(Vec<String>, Vec<(String, f64)>)>;

/// Sends a DescribeClientQuotas; `Err` carries the top-level error code.
fn describe(
    port: u16,
    components: &[Component<'_>],
    strict: bool,
) -> anyhow::Result<Result<Described, i16>> {
    let req = DescribeClientQuotasRequest::default()
        .with_components(
            components
                .iter()
                .map(|(t, m, n)| {
                    describe_client_quotas_request::ComponentData::default()
                        .with_entity_type(StrBytes::from_string((*t).to_owned()))
                        .with_match_type(*m)
                        .with_match(n.map(|n| StrBytes::from_string(n.to_owned())))
                })
                .collect(),
        )
        .with_strict(strict);
    let ResponseKind::DescribeClientQuotas(DescribeClientQuotasResponse {
        error_code,
        entries,
        ..
    }) = call(
        port,
        ApiKey::DescribeClientQuotas,
        RequestKind::DescribeClientQuotas(req),
    )?
    else {
        anyhow::bail!("not a DescribeClientQuotas answer");
    };
    if error_code != 0 {
        anyhow::ensure!(entries.is_none(), "entries with an error");
        return Ok(Err(error_code));
    }
    let mut out: Described = entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let mut entity: Vec<String> = e
                .entity
                .iter()
                .map(|p| {
                    format!(
                        "{}={}",
                        p.entity_type,
                        p.entity_name.as_deref().unwrap_or("<default>")
                    )
                })
                .collect();
            entity.sort();
            let mut values: Vec<(String, f64)> = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            values.sort_by(|a, b| a.0.cmp(&b.0));
            (entity, values)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Ok(out))
}

fn entities(d: &Described) -> Vec<String> {
    d.iter().map(|(e, _)| e.join(",")).collect()
}

#[test]
fn alter_and_describe_client_quotas_round_trip_and_survive_a_restart() {
    let _serial = serial();
    let mut b = Broker::start(&[]).expect("broker");
    let port = b.port();
    let ok = |d: anyhow::Result<Result<Described, i16>>| d.expect("answer").expect("no error");

    assert_eq!(ok(describe(port, &[], false)), vec![], "no quotas yet");
    assert_eq!(
        alter(
            port,
            vec![
                entry(
                    &[("client-id", Some("app"))],
                    &[("producer_byte_rate", Some(1_048_576.0))]
                ),
                entry(&[("user", None)], &[("consumer_byte_rate", Some(2048.0))]),
                entry(
                    &[("user", Some("alice")), ("client-id", None)],
                    &[
                        ("request_percentage", Some(12.5)),
                        ("producer_byte_rate", Some(4096.0))
                    ],
                ),
                entry(
                    &[("client-id", None)],
                    &[("consumer_byte_rate", Some(512.0))]
                ),
            ],
            false,
        ),
        vec![0, 0, 0, 0]
    );
    let all = ok(describe(port, &[], false));
    assert_eq!(
        entities(&all),
        [
            "client-id=<default>",
            "client-id=<default>,user=alice",
            "client-id=app",
            "user=<default>"
        ]
    );
    assert_eq!(
        all[1].1,
        vec![
            ("producer_byte_rate".to_owned(), 4096.0),
            ("request_percentage".to_owned(), 12.5)
        ]
    );
    assert_eq!(
        all[2].1,
        vec![("producer_byte_rate".to_owned(), 1_048_576.0)]
    );

    // The match types: exact, default, any; strict leaves out entities with other types.
    assert_eq!(
        entities(&ok(describe(port, &[("client-id", 0, Some("app"))], true))),
        ["client-id=app"]
    );
    assert_eq!(
        entities(&ok(describe(port, &[("client-id", 1, None)], false))),
        ["client-id=<default>", "client-id=<default>,user=alice"]
    );
    assert_eq!(
        entities(&ok(describe(port, &[("client-id", 1, None)], true))),
        ["client-id=<default>"]
    );
    assert_eq!(
        entities(&ok(describe(port, &[("user", 2, None)], false))),
        ["client-id=<default>,user=alice", "user=<default>"]
    );
    assert_eq!(
        entities(&ok(describe(
            port,
            &[("user", 0, Some("alice")), ("client-id", 2, None)],
            true
        ))),
        ["client-id=<default>,user=alice"]
    );
    assert_eq!(
        ok(describe(port, &[("user", 0, Some("bob"))], false)),
        vec![]
    );
    assert_eq!(
        ok(describe(port, &[], true)),
        vec![],
        "strict with no components"
    );

    // validate_only checks and writes nothing.
    assert_eq!(
        alter(
            port,
            vec![entry(
                &[("client-id", Some("vo"))],
                &[("consumer_byte_rate", Some(1.0))]
            )],
            true
        ),
        vec![0]
    );
    assert_eq!(
        alter(
            port,
            vec![entry(
                &[("client-id", Some("vo"))],
                &[("retention.ms", Some(1.0))]
            )],
            true
        ),
        vec![INVALID_REQUEST],
        "validate_only still validates"
    );
    assert_eq!(
        ok(describe(port, &[("client-id", 0, Some("vo"))], false)),
        vec![]
    );

    // Kafka's refusals, each for its own entry only; the good entry beside them is written.
    assert_eq!(
        alter(
            port,
            vec![
                entry(&[("client-id", Some("x"))], &[("retention.ms", Some(1.0))]),
                entry(
                    &[("client-id", Some("x"))],
                    &[("producer_byte_rate", Some(1.5))]
                ),
                entry(
                    &[("group", Some("g"))],
                    &[("producer_byte_rate", Some(1.0))]
                ),
                entry(&[("user", Some(""))], &[("producer_byte_rate", Some(1.0))]),
                entry(&[], &[("producer_byte_rate", Some(1.0))]),
                entry(
                    &[("client-id", Some("y"))],
                    &[("consumer_byte_rate", Some(-1.0))]
                ),
                entry(
                    &[("client-id", Some("z"))],
                    &[
                        ("consumer_byte_rate", Some(1.0)),
                        ("consumer_byte_rate", None)
                    ],
                ),
                entry(
                    &[("client-id", Some("good"))],
                    &[("consumer_byte_rate", Some(100.0))]
                ),
            ],
            false,
        ),
        vec![
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST,
            INVALID_REQUEST,
            0
        ]
    );
    assert_eq!(
        entities(&ok(describe(
            port,
            &[("client-id", 0, Some("good"))],
            false
        ))),
        ["client-id=good"]
    );
    assert_eq!(
        ok(describe(port, &[("client-id", 0, Some("x"))], false)),
        vec![]
    );
    // One filter refused with INVALID_REQUEST, an unknown entity type with
    // UNSUPPORTED_VERSION, as Kafka answers them.
    for (filter, code) in [
        (vec![("user", 0, None)], INVALID_REQUEST),
        (vec![("user", 1, Some("a"))], INVALID_REQUEST),
        (vec![("user", 9, None)], INVALID_REQUEST),
        (vec![("user", 2, None), ("user", 1, None)], INVALID_REQUEST),
        (vec![("group", 2, None)], UNSUPPORTED_VERSION),
    ] {
        assert_eq!(
            describe(port, &filter, false).expect("answer"),
            Err(code),
            "{filter:?}"
        );
    }

    // Removal: the key goes; an entity left without quotas goes.
    assert_eq!(
        alter(
            port,
            vec![
                entry(
                    &[("client-id", Some("good"))],
                    &[("consumer_byte_rate", None)]
                ),
                entry(
                    &[("user", Some("alice")), ("client-id", None)],
                    &[("request_percentage", None)],
                ),
            ],
            false,
        ),
        vec![0, 0]
    );
    let after = ok(describe(port, &[], false));
    assert_eq!(
        entities(&after),
        [
            "client-id=<default>",
            "client-id=<default>,user=alice",
            "client-id=app",
            "user=<default>"
        ]
    );
    assert_eq!(after[1].1, vec![("producer_byte_rate".to_owned(), 4096.0)]);

    // The quotas are metadata records: a restart replays them.
    b.restart().expect("restart");
    let replayed = ok(describe(port, &[], false));
    assert_eq!(replayed, after, "the quotas survive a restart");
}

#[test]
fn a_quota_set_through_a_non_controller_applies_on_every_node() {
    let _serial = serial();
    let cluster = Cluster::start(3, &[]);
    let controller = cluster.wait_ready(WAIT);
    let other = *cluster
        .ids()
        .iter()
        .find(|id| **id != controller)
        .expect("a node that is not the controller");
    assert_eq!(
        alter(
            cluster.port(other),
            vec![entry(
                &[("client-id", Some("everywhere"))],
                &[("producer_byte_rate", Some(65_536.0))]
            )],
            false,
        ),
        vec![0],
        "forwarded to controller {controller}"
    );
    for id in cluster.ids() {
        let port = cluster.port(id);
        wait_until("the quota reaches the node", WAIT, POLL, || {
            Ok(
                describe(port, &[("client-id", 0, Some("everywhere"))], true)?
                    == Ok(vec![(
                        vec!["client-id=everywhere".to_owned()],
                        vec![("producer_byte_rate".to_owned(), 65_536.0)],
                    )]),
            )
        })
        .unwrap_or_else(|e| panic!("node {id}: {e:?}"));
    }
}

/// A producer's or consumer's context: the bytes delivered or consumed, and the largest
/// throttle time librdkafka's statistics reported.
#[derive(Default)]
struct Meter {
    bytes: AtomicU64,
    max_throttle_ms: AtomicI64,
}

#[derive(Clone, Default)]
struct MeterContext(Arc<Meter>);

impl ClientContext for MeterContext {
    fn stats(&self, statistics: Statistics) {
        for b in statistics.brokers.values() {
            if let Some(t) = &b.throttle {
                self.0.max_throttle_ms.fetch_max(t.max, Ordering::Relaxed);
            }
        }
    }
}

impl ProducerContext for MeterContext {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, (): ()) {
        if let Ok(m) = result {
            let len = m.payload().map_or(0, <[u8]>::len);
            self.0.bytes.fetch_add(len as u64, Ordering::Relaxed);
        }
    }
}

impl ConsumerContext for MeterContext {}

/// The quota under test: 1 MB/s.
const QUOTA: f64 = 1_000_000.0;
/// Each message's payload.
const PAYLOAD: usize = 10_000;
/// The first quota window: Kafka's rate spreads a client's first burst over ten samples
/// and lets the oldest go after eleven, so the rate holds from here on.
const FIRST_WINDOW: Duration = Duration::from_secs(12);
/// How long the rate is measured after the first window: two full quota windows.
const MEASURED: Duration = Duration::from_secs(22);

/// A producer with `client_id` pushing as hard as it can for `run`, sampling its
/// delivered bytes; returns the bytes delivered at `FIRST_WINDOW` and at the end, and the
/// largest throttle time seen.
fn push(bootstrap: &str, client_id: &str, topic: &str, run: Duration) -> (u64, u64, i64) {
    let meter = MeterContext::default();
    let producer: ThreadedProducer<MeterContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        .set("linger.ms", "5")
        .set("batch.size", "65536")
        .set("queue.buffering.max.kbytes", "4096")
        .set("statistics.interval.ms", "500")
        .set("message.timeout.ms", "120000")
        .create_with_context(meter.clone())
        .expect("producer");
    let payload = vec![b'q'; PAYLOAD];
    let started = Instant::now();
    let mut at_first_window = None;
    // Bounded by `run`: each pass either queues a message or sleeps.
    while started.elapsed() < run {
        if at_first_window.is_none() && started.elapsed() >= FIRST_WINDOW {
            at_first_window = Some(meter.0.bytes.load(Ordering::Relaxed));
        }
        match producer.send(BaseRecord::<(), [u8]>::to(topic).payload(&payload[..])) {
            Ok(()) => {}
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err((e, _)) => panic!("produce: {e}"),
        }
    }
    let end = meter.0.bytes.load(Ordering::Relaxed);
    // One more statistics interval, so the last throttle is in the maximum.
    std::thread::sleep(Duration::from_millis(700));
    drop(producer.flush(Duration::from_secs(1)));
    (
        at_first_window.unwrap_or(0),
        end,
        meter.0.max_throttle_ms.load(Ordering::Relaxed),
    )
}

fn rate(bytes: u64, over: Duration) -> f64 {
    bytes as f64 / over.as_secs_f64()
}

#[test]
fn a_producer_is_held_to_its_byte_rate_quota_and_sees_throttle_times() {
    let _serial = serial();
    let b = Broker::start(&[]).expect("broker");
    assert_eq!(
        alter(
            b.port(),
            vec![entry(
                &[("client-id", Some("limited"))],
                &[("producer_byte_rate", Some(QUOTA))]
            )],
            false,
        ),
        vec![0]
    );
    cluster::create_topic_raw(b.port(), "quota-produce", 1, 1).expect("create");
    let bootstrap = b.bootstrap();
    let free = {
        let bootstrap = bootstrap.clone();
        std::thread::spawn(move || {
            push(
                &bootstrap,
                "unlimited",
                "quota-produce",
                Duration::from_secs(6),
            )
        })
    };
    let (first, end, throttle) = push(
        &bootstrap,
        "limited",
        "quota-produce",
        FIRST_WINDOW + MEASURED,
    );
    let measured = rate(end - first, MEASURED);
    assert!(
        (QUOTA * 0.8..=QUOTA * 1.2).contains(&measured),
        "held at {measured:.0} B/s after the first window (quota {QUOTA}; {first} B in the first window)"
    );
    assert!(throttle > 0, "librdkafka saw no throttle time");
    let (_, free_bytes, free_throttle) = free.join().expect("unlimited producer");
    assert_eq!(
        free_throttle, 0,
        "a client id without a quota is not throttled"
    );
    let free_rate = rate(free_bytes, Duration::from_secs(6));
    assert!(
        free_rate > 2.0 * QUOTA,
        "the unlimited producer managed only {free_rate:.0} B/s"
    );
}

#[test]
fn a_consumer_is_held_to_its_byte_rate_quota() {
    let _serial = serial();
    let b = Broker::start(&[]).expect("broker");
    cluster::create_topic_raw(b.port(), "quota-fetch", 1, 1).expect("create");
    // More than the consumer can read in the test at its quota: 60 MB.
    let (_, produced, _) = {
        let bootstrap = b.bootstrap();
        let meter = MeterContext::default();
        let producer: ThreadedProducer<MeterContext> = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("linger.ms", "5")
            .create_with_context(meter.clone())
            .expect("producer");
        let payload = vec![b'c'; PAYLOAD];
        let started = Instant::now();
        let mut queued = 0usize;
        while queued < 6_000 && started.elapsed() < WAIT {
            match producer.send(BaseRecord::<(), [u8]>::to("quota-fetch").payload(&payload[..])) {
                Ok(()) => queued += 1,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((e, _)) => panic!("produce: {e}"),
            }
        }
        producer.flush(WAIT).expect("flush");
        (0, meter.0.bytes.load(Ordering::Relaxed), 0)
    };
    assert_eq!(produced, 6_000 * PAYLOAD as u64);
    assert_eq!(
        alter(
            b.port(),
            vec![entry(
                &[("client-id", Some("slow-reader"))],
                &[("consumer_byte_rate", Some(QUOTA))]
            )],
            false,
        ),
        vec![0]
    );
    let meter = MeterContext::default();
    let consumer: BaseConsumer<MeterContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("client.id", "slow-reader")
        .set("group.id", "quota-readers")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("statistics.interval.ms", "500")
        // Small fetches, so the rate moves in small steps.
        .set("max.partition.fetch.bytes", "65536")
        .create_with_context(meter.clone())
        .expect("consumer");
    // Assigned, not subscribed: fetching starts at once, with no group join before it.
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset("quota-fetch", 0, Offset::Beginning)
        .expect("offset");
    consumer.assign(&assignment).expect("assign");
    let started = Instant::now();
    let run = FIRST_WINDOW + MEASURED;
    while started.elapsed() < run {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let len = m.payload().map_or(0, <[u8]>::len);
            meter.0.bytes.fetch_add(len as u64, Ordering::Relaxed);
        }
    }
    let end = meter.0.bytes.load(Ordering::Relaxed);
    assert!(
        end < produced,
        "the consumer read everything: the quota did not hold it"
    );
    // A throttled fetch answers nothing and is taken back out of the rate (Kafka's
    // `unrecordQuotaSensor`), so a consumer reads in bursts of up to ten seconds of quota
    // each time its oldest samples leave the window: its rate is steady only over the
    // whole run, first burst included.
    let measured = rate(end, run);
    assert!(
        (QUOTA * 0.6..=QUOTA * 1.4).contains(&measured),
        "read at {measured:.0} B/s over {run:?} (quota {QUOTA})"
    );
    assert!(
        meter.0.max_throttle_ms.load(Ordering::Relaxed) > 0,
        "librdkafka saw no throttle time"
    );
}
