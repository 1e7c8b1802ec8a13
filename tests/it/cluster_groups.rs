//! Consumer groups on a three-node cluster of real `strata` processes, driven by librdkafka:
//!
//! - every node names the same coordinator for a group (FindCoordinator, raw), the leader of
//!   the group's `__consumer_offsets` partition, which the first FindCoordinator has the
//!   controller create; the other nodes answer a DescribeGroups or DeleteGroups for the
//!   group with NOT_COORDINATOR;
//! - a group's committed offsets are found by a consumer bootstrapped at another node: it
//!   resumes after them instead of reading everything again;
//! - the coordinator killed with SIGKILL: another replica of the group's offsets partition
//!   (three replicas, `offsets.topic.replication.factor`'s default) takes the group over, and
//!   a consumer resumes from the offsets committed through the killed node; then the new
//!   coordinator killed and its data directory deleted: the third node takes over, and the
//!   wiped node rejoins.
//!
//! Every wait is bounded; what is measured is printed as `measured:` lines.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use strata_tests::cluster::{self, Cluster, group_error_raw};
use strata_tests::{serial, strata_bin};

use crate::cluster_clients::{create_topic, produce, producer, wait_topic};

const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    // Fewer partitions than Kafka's 50 keep the image small; the placement is the same.
    ("offsets.topic.num.partitions", "6"),
];

/// The bound on the cluster's start and on the coordinator's return.
const WAIT: Duration = Duration::from_secs(30);

const GROUP: &str = "shared-group";
/// Kafka's NOT_COORDINATOR error code.
const NOT_COORDINATOR: i16 = 16;
const TOPIC: &str = "grouped";
const PARTITIONS: i32 = 3;

/// A consumer of `GROUP` subscribed to `TOPIC`, bootstrapped at `bootstrap` only.
fn consumer(bootstrap: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()
        .expect("consumer");
    c.subscribe(&[TOPIC]).expect("subscribe");
    c
}

/// Polls `c` until `want` messages are read (at most 60 s), or, for `want` 0, for
/// `listen`; returns `(partition, offset) -> value` of what it read.
fn drain(c: &BaseConsumer, want: usize, listen: Duration) -> BTreeMap<(i32, i64), String> {
    let mut read = BTreeMap::new();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(60);
    loop {
        let done = if want == 0 {
            started.elapsed() >= listen
        } else {
            read.len() >= want
        };
        if done || Instant::now() >= deadline {
            return read;
        }
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let v = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                read.insert((m.partition(), m.offset()), v);
            }
            Some(Err(e)) => eprintln!("consumer: {e}"),
            None => {}
        }
    }
}

/// Waits until every node in `ids` names one coordinator (one of `ids`) for `GROUP`.
fn agreed_coordinator(c: &Cluster, ids: &[i32]) -> i32 {
    cluster::agreed_coordinator(c, ids, GROUP, 0, WAIT)
}

/// Produces 10 messages labelled `label`, and checks that a consumer of the group
/// bootstrapped at `bootstrap` reads exactly those (it starts at the group's committed
/// offsets, whichever node coordinates it now), then commits them.
fn resumes_at_its_commits(p: &rdkafka::producer::FutureProducer, bootstrap: &str, label: &str) {
    let (batch, errors) = produce(p, TOPIC, PARTITIONS, 10, label);
    assert!(errors.is_empty(), "{errors:?}");
    let c = consumer(bootstrap);
    let read = drain(&c, batch.len(), Duration::ZERO);
    assert_eq!(
        read, batch,
        "batch {label}: the group resumes from its committed offsets"
    );
    c.commit_consumer_state(CommitMode::Sync).expect("commit");
}

#[test]
fn a_group_s_offsets_are_found_through_every_node() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let mut c = Cluster::start(3, SETTINGS);
    let all = c.ids();
    c.wait_ready(WAIT);
    create_topic(&c.bootstrap(&[1]), TOPIC, PARTITIONS, 3).expect("CreateTopics");
    wait_topic(&c, &all, TOPIC, PARTITIONS);

    // The first FindCoordinator creates __consumer_offsets; then all agree.
    let t = Instant::now();
    let coordinator = agreed_coordinator(&c, &all);
    println!(
        "measured: node {coordinator} coordinates {GROUP} on all three nodes, {} ms after the first FindCoordinator",
        t.elapsed().as_millis()
    );
    // Only the coordinator answers for the group: the others send clients to it.
    for &id in &all {
        let want = if id == coordinator {
            0
        } else {
            NOT_COORDINATOR
        };
        let port = c.port(id);
        let described = group_error_raw(port, 15, GROUP).expect("DescribeGroups");
        assert_eq!(described, want, "DescribeGroups on node {id}");
        if id != coordinator {
            let deleted = group_error_raw(port, 42, GROUP).expect("DeleteGroups");
            assert_eq!(deleted, NOT_COORDINATOR, "DeleteGroups on node {id}");
        }
    }
    let m = c.metadata(1).expect("metadata");
    assert!(
        !m.topics.contains_key("__consumer_offsets"),
        "the internal topic is not listed to clients"
    );

    let p = producer(&c.bootstrap(&all));
    let (first, errors) = produce(&p, TOPIC, PARTITIONS, 100, "first");
    assert!(errors.is_empty(), "{errors:?}");

    // Read and committed through one node...
    let others: Vec<i32> = all.iter().copied().filter(|&i| i != coordinator).collect();
    let a = consumer(&c.bootstrap(&[others[0]]));
    let read = drain(&a, first.len(), Duration::ZERO);
    assert_eq!(read, first, "the first consumer reads everything");
    a.commit_consumer_state(CommitMode::Sync).expect("commit");
    drop(a);

    // ...found through another: nothing is read again, only what comes next.
    let b = consumer(&c.bootstrap(&[others[1]]));
    let again = drain(&b, 0, Duration::from_secs(8));
    assert!(
        again.is_empty(),
        "a consumer at another node re-read {} committed messages",
        again.len()
    );
    let (second, errors) = produce(&p, TOPIC, PARTITIONS, 20, "second");
    assert!(errors.is_empty(), "{errors:?}");
    let read = drain(&b, second.len(), Duration::ZERO);
    assert_eq!(read, second, "the second consumer resumes after the commit");
    b.commit_consumer_state(CommitMode::Sync).expect("commit");
    drop(b);

    // The coordinator killed: another replica of the group's `__consumer_offsets` partition
    // (three replicas) leads it, loads the group and serves its committed offsets.
    c.node(coordinator).kill9();
    let t = Instant::now();
    let successor = agreed_coordinator(&c, &others);
    assert_ne!(successor, coordinator);
    println!(
        "measured: node {coordinator} killed: node {successor} coordinates {GROUP} {} ms later",
        t.elapsed().as_millis()
    );
    resumes_at_its_commits(&p, &c.bootstrap(&[others[0]]), "third");

    // The killed node back; then the new coordinator killed with its data directory
    // deleted: the third replica takes over, and the wiped node, once restarted, copies
    // the partition back from the leader.
    c.node(coordinator).restart();
    agreed_coordinator(&c, &all);
    c.node(successor).kill9();
    std::fs::remove_dir_all(&c.node(successor).data_dir).expect("wipe the data directory");
    let t = Instant::now();
    let remaining: Vec<i32> = all.iter().copied().filter(|&i| i != successor).collect();
    let third_coordinator = agreed_coordinator(&c, &remaining);
    println!(
        "measured: node {successor} killed and wiped: node {third_coordinator} coordinates {GROUP} {} ms later",
        t.elapsed().as_millis()
    );
    resumes_at_its_commits(&p, &c.bootstrap(&[third_coordinator]), "fourth");
    c.node(successor).restart();
    let t = Instant::now();
    agreed_coordinator(&c, &all);
    println!(
        "measured: the wiped node {successor} restarted: all three agree on the coordinator {} ms later",
        t.elapsed().as_millis()
    );
}
