//! Log compaction on a three-node cluster of real `strata` processes, with librdkafka (the
//! rdkafka crate) as the client: each replica cleans its own log, and every replica's
//! cleaned log gives the same consumer view.
//!
//! A compacted topic of one partition, replication factor 3, 16 KiB segments and
//! `min.cleanable.dirty.ratio=0.01` gets 3,000 updates over 50 keys (lz4 batches, acks=all),
//! then tombstones for 5 keys. Once every node's cleaner has written cleaned segments, the
//! partition is read from the start from each replica in turn (KIP-392: `client.rack` names
//! the replica's rack), and:
//!
//! - each replica was cleaned: it serves far fewer records than were written (a follower's
//!   `strata_fetch_follower_served_bytes_total` shows it served them);
//! - each replica's view (each key's last value, the tombstones as deletions) is the model's;
//! - a record served at an offset by two replicas is the same record, and offsets only
//!   increase.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use strata_tests::{serial, strata_bin};

use crate::metrics_scrape::scrape;

const ELECTION: Duration = Duration::from_secs(30);
const MARGIN: Duration = Duration::from_secs(15);
const TOPIC: &str = "compacted-rf3";
const KEYS: usize = 50;
const UPDATES: usize = 3_000;
const DELETED: usize = 5;

const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("replica.selector.class", "RackAwareReplicaSelector"),
    ("log.cleaner.backoff.ms", "100"),
];

/// A record as a consumer sees it: offset, key, value (`None`: a tombstone).
type Read = (i64, Vec<u8>, Option<Vec<u8>>);

/// Reads the partition from the start to `end` from the replica in `rack`.
fn read_replica(bootstrap: &str, rack: &str, end: i64) -> Vec<Read> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "compaction-rf3")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "200")
        .set("client.rack", rack)
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)
        .expect("offset");
    c.assign(&tpl).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got: Vec<Read> = Vec::new();
    while got.last().is_none_or(|r| r.0 + 1 < end) {
        assert!(
            Instant::now() < deadline,
            "rack {rack}: read only to {:?} of {end}",
            got.last().map(|r| r.0)
        );
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => got.push((
                m.offset(),
                m.key().map(<[u8]>::to_vec).unwrap_or_default(),
                m.payload().map(<[u8]>::to_vec),
            )),
            Some(Err(e)) => println!("consumer error (retried by librdkafka): {e}"),
            None => {}
        }
    }
    got
}

/// Each key's last value in `records` (`None`: deleted).
fn view(records: &[Read]) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    records
        .iter()
        .map(|(_, k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn every_replica_cleans_its_own_log_to_the_same_view() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let (c, metrics_ports) = crate::cluster_follower_fetch::racked_cluster(SETTINGS);
    c.wait_ready(ELECTION);
    let all = c.bootstrap(&c.ids());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &all)
        .create()
        .expect("admin");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(3))
        .set("cleanup.policy", "compact")
        .set("segment.bytes", "16384")
        .set("min.cleanable.dirty.ratio", "0.01");
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(20)));
    for r in runtime
        .block_on(admin.create_topics([&topic], &opts))
        .expect("CreateTopics")
    {
        r.expect("topic created");
    }
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

    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &all)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("compression.type", "lz4")
        .set("linger.ms", "2")
        .set("batch.size", "4096")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    let mut send = |key: String, value: Option<String>| {
        loop {
            let mut record = BaseRecord::<str, str>::to(TOPIC)
                .partition(0)
                .key(key.as_str());
            if let Some(v) = &value {
                record = record.payload(v.as_str());
            }
            match p.send(record) {
                Ok(()) => break,
                Err((e, _)) => {
                    println!("send: {e}; polling");
                    p.poll(Duration::from_millis(10));
                }
            }
        }
        p.poll(Duration::ZERO);
        model.insert(key.into_bytes(), value.map(String::into_bytes));
    };
    for i in 0..UPDATES {
        let key = format!("key-{:02}", i % KEYS);
        let noise = crate::compaction::noise(i, 10);
        send(key.clone(), Some(format!("{key}-update-{i}-{noise}")));
    }
    for k in 0..DELETED {
        send(format!("key-{k:02}"), None);
    }
    p.flush(Duration::from_secs(60)).expect("records delivered");
    let end = i64::try_from(UPDATES + DELETED).unwrap();

    // Every node's cleaner has cleaned its replica: bytes written, and this log's dirty
    // ratio back under the topic's minimum.
    let ratio = format!("strata_log_cleaner_dirty_ratio{{topic=\"{TOPIC}\",partition=\"0\"}}");
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in c.ids() {
        loop {
            let s = scrape(metrics_ports[&id]).unwrap_or_else(|e| panic!("scrape {id}: {e:?}"));
            let written = s
                .get("strata_log_cleaner_written_bytes_total")
                .copied()
                .unwrap_or(0.0);
            let dirty = s.get(&ratio).copied().unwrap_or(1.0);
            if written > 0.0 && dirty <= 0.01 {
                println!(
                    "measured: node {id} cleaned: {written} bytes written, dirty ratio {dirty}"
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {id} never cleaned its replica: written {written}, dirty ratio {dirty}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    // Each replica, read by a consumer in its rack.
    let mut by_offset: BTreeMap<i64, (Vec<u8>, Option<Vec<u8>>)> = BTreeMap::new();
    for id in c.ids() {
        let records = read_replica(&all, &format!("r{id}"), end);
        let role = if id == leader { "leader" } else { "follower" };
        println!(
            "measured: node {id} ({role}) serves {} of {end} records",
            records.len()
        );
        if id != leader {
            let served = scrape(metrics_ports[&id])
                .ok()
                .and_then(|s| s.get("strata_fetch_follower_served_bytes_total").copied())
                .unwrap_or(0.0);
            assert!(served > 0.0, "node {id} served no bytes as a follower");
        }
        assert!(
            records.len() < UPDATES / 4,
            "node {id} ({role}) serves {} records: not cleaned",
            records.len()
        );
        assert!(
            records.windows(2).all(|w| w[0].0 < w[1].0),
            "node {id}: offsets go back"
        );
        assert_eq!(
            view(&records),
            model,
            "node {id} ({role}): the view differs"
        );
        for (o, k, v) in records {
            let seen = by_offset.entry(o).or_insert_with(|| (k.clone(), v.clone()));
            assert_eq!(
                *seen,
                (k, v),
                "offset {o} differs between replicas (node {id})"
            );
        }
    }
}
