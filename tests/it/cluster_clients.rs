//! librdkafka clients as the cluster tests drive them: CreateTopics through the admin
//! client, acks=all producers whose every delivery report is collected, and a reader that
//! checks each acknowledged `(partition, offset)` holds its value; plus the Metadata checks
//! that go with them (every partition led, leaders moved within the ISR). Every wait is
//! bounded.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::admin::{AdminClient, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use strata_tests::cluster::{Cluster, Metadata};

use crate::admin_client::{admin_opts, block};

/// The bound on a metadata change the controller makes once it has decided (CreateTopics
/// reaching every node, a fenced broker's partitions moving) beyond the session timeout.
pub const MARGIN: Duration = Duration::from_secs(10);

/// The bound on an admin operation.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(15);

pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

/// CreateTopics through librdkafka bootstrapped at `bootstrap` (it sends the request to the
/// controller it learns from Metadata): the topic's result.
pub fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    rf: i32,
) -> Result<(), RDKafkaErrorCode> {
    create(bootstrap, topic, partitions, TopicReplication::Fixed(rf))
}

/// [`create_topic`] with a manual assignment: one replica list per partition, from
/// partition 0.
pub fn create_topic_assigned(
    bootstrap: &str,
    topic: &str,
    assignment: &[&[i32]],
) -> Result<(), RDKafkaErrorCode> {
    let partitions = i32::try_from(assignment.len()).unwrap();
    create(
        bootstrap,
        topic,
        partitions,
        TopicReplication::Variable(assignment),
    )
}

fn create(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: TopicReplication<'_>,
) -> Result<(), RDKafkaErrorCode> {
    let a = admin(bootstrap);
    let topics = [NewTopic::new(topic, partitions, replication)];
    let results = block(a.create_topics(&topics, &admin_opts(ADMIN_TIMEOUT)))
        .unwrap_or_else(|e| panic!("CreateTopics {topic}: {e}"));
    match results.as_slice() {
        [Ok(name)] if name == topic => Ok(()),
        [Err((name, code))] if name == topic => Err(*code),
        other => panic!("CreateTopics {topic}: {other:?}"),
    }
}

/// Whether every partition of `topic` is listed without error and has a leader.
pub fn all_led(m: &Metadata, topic: &str, partitions: i32) -> bool {
    let p = m.partitions(topic);
    p.len() == usize::try_from(partitions).unwrap()
        && p.values().all(|p| p.error == 0 && p.leader >= 0)
}

/// Checks that `gone` leads nothing and is in no ISR in `after`, and that every leader
/// in `after` was in the partition's ISR in `before`.
pub fn check_moved_within_isr(before: &Metadata, after: &Metadata, topic: &str, gone: i32) {
    for (id, p) in after.partitions(topic) {
        let old = &before.partitions(topic)[&id];
        assert!(
            old.isr.contains(&p.leader),
            "partition {id}: new leader {} from the old ISR {:?}",
            p.leader,
            old.isr
        );
        assert!(
            p.leader != gone && !p.isr.contains(&gone),
            "partition {id} without {gone}: {p:?}"
        );
        assert!(p.isr.contains(&p.leader), "partition {id}: {p:?}");
    }
}

/// Waits until every node in `ids` lists every partition of `topic` with a leader, all in
/// the same state at once; returns the first node's Metadata.
///
/// Every node is asked again on each round: a view that matched an earlier round may be
/// overtaken by a later change (an ISR expansion, a preferred leader coming back), and
/// the nodes must agree on the latest one. On timeout it panics with every node's last
/// answer, so a node left behind is visible.
pub fn wait_topic(c: &Cluster, ids: &[i32], topic: &str, partitions: i32) -> Metadata {
    assert!(!ids.is_empty(), "at least one node");
    let deadline = Instant::now() + MARGIN;
    loop {
        let views: Vec<(i32, anyhow::Result<Metadata>)> =
            ids.iter().map(|&id| (id, c.metadata(id))).collect();
        let first = views[0].1.as_ref().ok();
        let agreed = first.is_some_and(|f| {
            views.iter().all(|(_, m)| {
                m.as_ref().is_ok_and(|m| {
                    all_led(m, topic, partitions) && m.partitions(topic) == f.partitions(topic)
                })
            })
        });
        if agreed {
            return views
                .into_iter()
                .next()
                .and_then(|(_, m)| m.ok())
                .expect("checked");
        }
        if Instant::now() >= deadline {
            let mut report = String::new();
            for (id, m) in &views {
                match m {
                    Ok(m) => report += &format!("node {id}: {:#?}\n", m.partitions(topic)),
                    Err(e) => report += &format!("node {id}: {e:#}\n"),
                }
            }
            panic!(
                "timed out after {MARGIN:?}: {topic} led and the same on nodes {ids:?}\n{report}"
            );
        }
        std::thread::sleep(strata_tests::cluster::POLL);
    }
}

/// A producer bootstrapped at `bootstrap`, acks=all, not idempotent, retrying for up to
/// 30 s per message.
pub fn producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "30000")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .set("retry.backoff.ms", "100")
        .set("linger.ms", "5")
        .create()
        .expect("producer")
}

/// Sends `count` messages to each of `partitions` of `topic`, values `<tag>-<partition>-<i>`,
/// and waits for every report: `(partition, offset) -> value` of the acknowledged ones and
/// the errors of the others.
pub fn produce(
    p: &FutureProducer,
    topic: &str,
    partitions: i32,
    count: usize,
    tag: &str,
) -> (BTreeMap<(i32, i64), String>, Vec<String>) {
    let mut pending = Vec::new();
    for partition in 0..partitions {
        for i in 0..count {
            let value = format!("{tag}-{partition}-{i}");
            let record = FutureRecord::<(), _>::to(topic)
                .partition(partition)
                .payload(&value);
            match p.send_result(record) {
                Ok(f) => pending.push((value, f)),
                Err((e, _)) => panic!("enqueue {value}: {e}"),
            }
        }
    }
    await_reports(pending, Duration::from_secs(60))
}

/// Waits for the delivery report of each `(value, report)`, at most `each` for one:
/// `(partition, offset) -> value` of the acknowledged ones, and the errors of the others.
pub fn await_reports(
    pending: Vec<(String, DeliveryFuture)>,
    each: Duration,
) -> (BTreeMap<(i32, i64), String>, Vec<String>) {
    let mut acked = BTreeMap::new();
    let mut errors = Vec::new();
    block(async {
        for (value, f) in pending {
            match tokio::time::timeout(each, f).await {
                Ok(Ok(Ok(d))) => {
                    acked.insert((d.partition, d.offset), value);
                }
                Ok(Ok(Err((e, _)))) => errors.push(format!("{value}: {e}")),
                Ok(Err(_)) => errors.push(format!("{value}: report dropped")),
                Err(_) => errors.push(format!("{value}: no report within {each:?}")),
            }
        }
    });
    (acked, errors)
}

/// Reads every partition of `topic` from the beginning through `bootstrap` until each
/// `(partition, offset) -> value` of `want` has been read (at most 30 s); the missing or
/// different ones.
pub fn read_back(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    want: &BTreeMap<(i32, i64), String>,
) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "cluster-reader")
        .set("enable.auto.commit", "false")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for partition in 0..partitions {
        tpl.add_partition_offset(topic, partition, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).expect("assign");
    let mut read = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && !want.keys().all(|k| read.contains_key(k)) {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                read.insert((m.partition(), m.offset()), value);
            }
            Some(Err(e)) => eprintln!("consumer: {e}"),
            None => {}
        }
    }
    want.iter()
        .filter(|(k, v)| read.get(k) != Some(v))
        .map(|(k, v)| format!("{k:?} {v}: read {:?}", read.get(k)))
        .collect()
}
