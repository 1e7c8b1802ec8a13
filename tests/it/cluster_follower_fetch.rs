//! KIP-392 (fetch from the closest replica) on a three-node cluster of real `strata`
//! processes, with librdkafka (the rdkafka crate) as the client.
//!
//! Each node has a rack of its own (`broker.rack=r<id>`), the rack-aware selector
//! (`replica.selector.class=RackAwareReplicaSelector`) and a metrics endpoint. A topic of one
//! partition, replication factor 3, gets N records produced with acks=all. Then:
//!
//! - a consumer with `client.rack` set to a follower's rack reads all N back: the leader
//!   answers its first fetch with that follower as `preferred_read_replica`, and the
//!   follower serves the records. The evidence is each node's
//!   `strata_fetch_follower_served_bytes_total` (at least the records' bytes on that
//!   follower, 0 on the other follower and on the leader) and the leader's
//!   `strata_fetch_preferred_read_replica_total` (> 0), whose records-out counter for the
//!   partition stays at 0;
//! - a consumer without `client.rack`, and one in the leader's rack, read all N from the
//!   leader: no follower serves a byte more, the leader sends no one elsewhere, and its
//!   `strata_partition_bytes_out_total` for the partition grows.
//!
//! Every wait is bounded; the test prints what it measured as `measured: ...` lines.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use strata_tests::cluster::{Cluster, create_topic_raw};
use strata_tests::{free_port, serial, strata_bin};

use crate::metrics_scrape::scrape;

/// The bound on the cluster's first election and on its brokers registering.
const ELECTION: Duration = Duration::from_secs(30);
/// The bound on a metadata change reaching every node.
const MARGIN: Duration = Duration::from_secs(15);
/// The bound on one consumer reading every record.
const CONSUME: Duration = Duration::from_secs(60);
/// Records produced.
const N: usize = 500;
const TOPIC: &str = "nearby";

/// Settings of every node.
const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("replica.selector.class", "RackAwareReplicaSelector"),
];

const FOLLOWER_SERVED: &str = "strata_fetch_follower_served_bytes_total";
const PREFERRED: &str = "strata_fetch_preferred_read_replica_total";

/// One sample of node `id`'s metrics.
fn sample(metrics_ports: &BTreeMap<i32, u16>, id: i32, series: &str) -> f64 {
    let samples = scrape(metrics_ports[&id]).unwrap_or_else(|e| panic!("scrape node {id}: {e:?}"));
    *samples
        .get(series)
        .unwrap_or_else(|| panic!("node {id} has no sample {series}"))
}

/// Produces `record-0` .. `record-{n-1}` to partition 0 with acks=all and waits for them.
fn produce(bootstrap: &str, n: usize) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("message.timeout.ms", "20000")
        .create()
        .expect("producer");
    for i in 0..n {
        let payload = format!("record-{i}");
        p.send(
            BaseRecord::<(), _>::to(TOPIC)
                .partition(0)
                .payload(&payload),
        )
        .expect("queue a record");
    }
    p.flush(Duration::from_secs(30)).expect("records delivered");
}

/// Reads partition 0 from the beginning with `client.rack` = `rack` (none for `None`) until
/// `n` records arrive or [`CONSUME`] passes; returns the payloads in order.
fn consume(bootstrap: &str, rack: Option<&str>, n: usize) -> Vec<String> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "kip392")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "200");
    if let Some(rack) = rack {
        config.set("client.rack", rack);
    }
    let c: BaseConsumer = config.create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)
        .expect("offset");
    c.assign(&tpl).expect("assign");
    let deadline = Instant::now() + CONSUME;
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => got.push(
                m.payload()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .unwrap_or_default(),
            ),
            Some(Err(e)) => println!("consumer error (retried by librdkafka): {e}"),
            None => {}
        }
    }
    got
}

/// Three nodes with `settings`, each in a rack of its own (`r<id>`) and with a metrics
/// endpoint; the endpoints' ports by node id.
pub fn racked_cluster(settings: &[(&str, &str)]) -> (Cluster, BTreeMap<i32, u16>) {
    let metrics_ports: BTreeMap<i32, u16> = (1..=3).map(|id| (id, free_port().unwrap())).collect();
    let c = Cluster::start_with_node_settings(3, settings, |id| {
        vec![
            ("broker.rack".to_owned(), format!("r{id}")),
            (
                "metrics.listener".to_owned(),
                format!("http://127.0.0.1:{}/metrics", metrics_ports[&id]),
            ),
        ]
    });
    (c, metrics_ports)
}

#[test]
fn a_consumer_reads_from_the_follower_in_its_rack() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let (c, metrics_ports) = racked_cluster(SETTINGS);
    let t0 = Instant::now();
    let controller = c.wait_ready(ELECTION);
    let port = c.port(controller);
    assert_eq!(
        create_topic_raw(port, TOPIC, 1, 3).expect("CreateTopics"),
        0
    );
    let mut leader = -1;
    for id in c.ids() {
        let m = c
            .wait_metadata(id, "the partition led with 3 in sync", MARGIN, |m| {
                m.partitions(TOPIC)
                    .get(&0)
                    .is_some_and(|p| p.leader >= 0 && p.isr.len() == 3)
            })
            .unwrap_or_else(|e| panic!("{e:?}"));
        leader = m.partitions(TOPIC)[&0].leader;
    }
    let followers: Vec<i32> = c.ids().into_iter().filter(|&id| id != leader).collect();
    let (near, other) = (followers[0], followers[1]);
    println!(
        "measured: topic led by node {leader} with 3 in sync, {} ms after spawn; the consumer's rack is r{near} (node {near})",
        t0.elapsed().as_millis()
    );
    let all = c.bootstrap(&c.ids());
    produce(&all, N);
    let want: Vec<String> = (0..N).map(|i| format!("record-{i}")).collect();
    let payload_bytes: usize = want.iter().map(String::len).sum();

    // A consumer in the rack of follower `near`.
    let t1 = Instant::now();
    let got = consume(&all, Some(&format!("r{near}")), N);
    assert_eq!(
        got, want,
        "every record, in order, from the follower of its rack"
    );
    let served_near = sample(&metrics_ports, near, FOLLOWER_SERVED);
    let served_other = sample(&metrics_ports, other, FOLLOWER_SERVED);
    let served_leader = sample(&metrics_ports, leader, FOLLOWER_SERVED);
    let redirects = sample(&metrics_ports, leader, PREFERRED);
    println!(
        "measured: {N} records ({payload_bytes} payload bytes) read in {} ms; follower-served bytes: node {near} {served_near}, node {other} {served_other}, leader {served_leader}; leader's preferred-read-replica answers {redirects}",
        t1.elapsed().as_millis()
    );
    assert!(
        served_near >= payload_bytes as f64,
        "follower {near} served {served_near} bytes, fewer than the {payload_bytes} payload bytes"
    );
    assert_eq!(served_other, 0.0, "the other follower served nothing");
    assert_eq!(served_leader, 0.0, "the leader is no follower here");
    assert!(redirects > 0.0, "the leader named a preferred read replica");
    let bytes_out =
        format!("strata_partition_bytes_out_total{{topic=\"{TOPIC}\",partition=\"0\"}}");
    assert_eq!(
        sample(&metrics_ports, leader, &bytes_out),
        0.0,
        "the leader answered that consumer no records"
    );

    // Without a rack, and in the leader's rack: the leader serves.
    for rack in [None, Some(format!("r{leader}"))] {
        let out_before = sample(&metrics_ports, leader, &bytes_out);
        let got = consume(&all, rack.as_deref(), N);
        assert_eq!(
            got, want,
            "every record, in order, from the leader ({rack:?})"
        );
        let out_after = sample(&metrics_ports, leader, &bytes_out);
        let now_near = sample(&metrics_ports, near, FOLLOWER_SERVED);
        let now_other = sample(&metrics_ports, other, FOLLOWER_SERVED);
        println!(
            "measured: client.rack {rack:?}: leader bytes out {out_before} -> {out_after}; follower-served node {near} {now_near}, node {other} {now_other}"
        );
        assert!(
            out_after - out_before >= payload_bytes as f64,
            "the leader answered the records ({rack:?})"
        );
        assert_eq!(now_near, served_near, "no follower read ({rack:?})");
        assert_eq!(now_other, 0.0, "no follower read ({rack:?})");
        assert_eq!(
            sample(&metrics_ports, leader, PREFERRED),
            redirects,
            "nobody sent elsewhere ({rack:?})"
        );
    }
}
