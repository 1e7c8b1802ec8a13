//! `strata admin` against a real single-node broker, with rdkafka producing, consuming and
//! checking: topics (create, describe, alter-config, add-partitions, delete, checked through
//! Metadata and DescribeConfigs), a group's lag and offset resets (checked through
//! OffsetFetch), `partitions --hot` on a skewed and on a uniform key distribution, and the
//! `kafka-topics.sh` wrapper librdkafka's tests call.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::ResourceSpecifier;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{Broker, run_with_timeout, strata_bin, wait_until};

use crate::admin_cli_run::{admin, admin_ok, table};
use crate::admin_client;

const TIMEOUT: Duration = Duration::from_secs(20);

fn partition_count(b: &Broker, topic: &str) -> Option<usize> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()
        .unwrap();
    let md = c.fetch_metadata(Some(topic), TIMEOUT).expect("metadata");
    let t = md.topics().first()?;
    if t.error().is_some() {
        return None;
    }
    Some(t.partitions().len())
}

/// `key → (value, source)` of the topic's configs, from rdkafka's DescribeConfigs.
fn configs(b: &Broker, topic: &str) -> BTreeMap<String, (String, String)> {
    let a = admin_client::admin(b);
    let r = admin_client::block(a.describe_configs(
        &[ResourceSpecifier::Topic(topic)],
        &admin_client::admin_opts(TIMEOUT),
    ))
    .expect("DescribeConfigs");
    let res = r.into_iter().next().unwrap().expect("resource");
    res.entries
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                (
                    e.value.clone().unwrap_or_default(),
                    format!("{:?}", e.source),
                ),
            )
        })
        .collect()
}

fn producer(b: &Broker) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("linger.ms", "5")
        .create()
        .expect("producer")
}

/// Sends `n` records to `partition` and waits for them all to be acknowledged.
fn produce_to(p: &BaseProducer, topic: &str, partition: i32, n: usize) {
    for i in 0..n {
        let v = format!("value-{i}");
        p.send(
            BaseRecord::<(), str>::to(topic)
                .payload(&v)
                .partition(partition),
        )
        .expect("enqueue");
    }
    p.flush(TIMEOUT).expect("flush");
}

/// The group's committed offsets, from OffsetFetch (rdkafka's `committed_offsets`).
fn committed(b: &Broker, group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = c.committed_offsets(tpl, TIMEOUT).expect("OffsetFetch");
    got.elements()
        .iter()
        .map(|e| {
            let o = match e.offset() {
                Offset::Offset(o) => o,
                _ => -1,
            };
            (e.partition(), o)
        })
        .collect()
}

#[test]
fn topics_create_describe_alter_add_partitions_delete() {
    let b = Broker::start(&[]).unwrap();
    let bs = b.bootstrap();
    let out = admin_ok(
        &bs,
        &[
            "topics",
            "create",
            "--topic",
            "orders",
            "--partitions",
            "2",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=3600000",
        ],
    );
    assert!(out.contains("Created topic orders"), "{out}");
    assert_eq!(partition_count(&b, "orders"), Some(2));
    let c = configs(&b, "orders");
    assert_eq!(c["retention.ms"].0, "3600000");
    assert_eq!(c["retention.ms"].1, "DynamicTopic");

    // A second create fails with Kafka's error name and a non-zero status.
    let again = admin(
        &bs,
        &["topics", "create", "--topic", "orders", "--partitions", "2"],
    );
    assert_eq!(again.code, Some(1), "{again:?}");
    assert!(again.stderr.contains("TOPIC_ALREADY_EXISTS"), "{again:?}");
    // A misspelt option is a usage error.
    let bad = admin(
        &bs,
        &["topics", "create", "--topic", "x", "--partitons", "2"],
    );
    assert_eq!(bad.code, Some(2), "{bad:?}");

    let p = producer(&b);
    produce_to(&p, "orders", 0, 25);
    produce_to(&p, "orders", 1, 7);
    let out = admin_ok(&bs, &["topics", "describe", "--topic", "orders"]);
    assert!(out.contains("PartitionCount: 2"), "{out}");
    assert!(out.contains("retention.ms=3600000"), "{out}");
    let rows = table(&out, "TOPIC");
    assert_eq!(rows.len(), 2, "{out}");
    let ends: Vec<&str> = rows.iter().map(|r| r["LOG-END"].as_str()).collect();
    assert_eq!(ends, ["25", "7"], "{out}");
    for r in &rows {
        assert_eq!(r["LOG-START"], "0", "{out}");
        assert_eq!(r["REPLICAS"], r["LEADER"], "{out}");
        assert_eq!(r["ISR"], r["LEADER"], "{out}");
        assert!(r["SIZE"].parse::<i64>().unwrap() > 0, "{out}");
        assert_eq!(r["DIRTY-RATIO"], "-", "not compacted: {out}");
    }
    let size0: i64 = rows[0]["SIZE"].parse().unwrap();
    let size1: i64 = rows[1]["SIZE"].parse().unwrap();
    assert!(size0 > size1, "25 records take more room than 7: {out}");

    admin_ok(
        &bs,
        &[
            "topics",
            "alter-config",
            "--topic",
            "orders",
            "--set",
            "cleanup.policy=compact",
            "--delete",
            "retention.ms",
        ],
    );
    let c = configs(&b, "orders");
    assert_eq!(
        c["cleanup.policy"],
        ("compact".to_owned(), "DynamicTopic".to_owned())
    );
    assert_ne!(
        c["retention.ms"].1, "DynamicTopic",
        "{:?}",
        c["retention.ms"]
    );
    let bad = admin(
        &bs,
        &[
            "topics",
            "alter-config",
            "--topic",
            "orders",
            "--set",
            "cleanup.policy=nope",
        ],
    );
    assert_eq!(bad.code, Some(1), "{bad:?}");
    assert!(bad.stderr.contains("INVALID_CONFIG"), "{bad:?}");

    admin_ok(
        &bs,
        &[
            "topics",
            "add-partitions",
            "--topic",
            "orders",
            "--partitions",
            "5",
        ],
    );
    assert_eq!(partition_count(&b, "orders"), Some(5));
    let fewer = admin(
        &bs,
        &[
            "topics",
            "add-partitions",
            "--topic",
            "orders",
            "--partitions",
            "3",
        ],
    );
    assert!(
        !fewer.ok && fewer.stderr.contains("INVALID_PARTITIONS"),
        "{fewer:?}"
    );

    let list = admin_ok(&bs, &["topics", "list"]);
    assert!(list.lines().any(|l| l == "orders"), "{list}");
    admin_ok(&bs, &["topics", "delete", "--topic", "orders"]);
    wait_until(
        "orders deleted",
        TIMEOUT,
        Duration::from_millis(100),
        || Ok(partition_count(&b, "orders").is_none()),
    )
    .unwrap();
    let gone = admin(&bs, &["topics", "describe", "--topic", "orders"]);
    assert!(
        !gone.ok && gone.stderr.contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{gone:?}"
    );
    // Nothing listens here: a clear failure, not a hang.
    let port = strata_tests::free_port().unwrap();
    let down = admin(
        &format!("127.0.0.1:{port}"),
        &["topics", "list", "--timeout-ms", "3000"],
    );
    assert_eq!(down.code, Some(1), "{down:?}");
}

#[test]
fn group_lag_and_offset_resets() {
    let b = Broker::start(&[]).unwrap();
    let bs = b.bootstrap();
    admin_ok(
        &bs,
        &["topics", "create", "--topic", "lagged", "--partitions", "3"],
    );
    let p = producer(&b);
    for part in 0..3 {
        produce_to(&p, "lagged", part, 100);
    }
    // A live member that has consumed and committed 40, 50, 60.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bs)
        .set("group.id", "g1")
        .set("client.id", "lag-reader")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set_log_level(RDKafkaLogLevel::Warning)
        .create()
        .unwrap();
    consumer.subscribe(&["lagged"]).unwrap();
    let deadline = Instant::now() + TIMEOUT * 3;
    while consumer.assignment().map_or(0, |a| a.count()) < 3 {
        assert!(Instant::now() < deadline, "no assignment");
        let _ = consumer.poll(Duration::from_millis(100));
    }
    let mut tpl = TopicPartitionList::new();
    for (part, o) in [(0, 40), (1, 50), (2, 60)] {
        tpl.add_partition_offset("lagged", part, Offset::Offset(o))
            .unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).unwrap();

    let out = admin_ok(&bs, &["groups", "describe", "--group", "g1"]);
    assert!(out.contains("State: Stable"), "{out}");
    assert!(out.contains("Members: 1"), "{out}");
    let rows = table(&out, "GROUP");
    assert_eq!(rows.len(), 3, "{out}");
    for (r, committed) in rows.iter().zip([40, 50, 60]) {
        assert_eq!(r["CURRENT-OFFSET"], committed.to_string(), "{out}");
        assert_eq!(r["LOG-END-OFFSET"], "100", "{out}");
        assert_eq!(r["LAG"], (100 - committed).to_string(), "{out}");
        assert_eq!(r["CLIENT-ID"], "lag-reader", "{out}");
        assert_ne!(r["CONSUMER-ID"], "-", "{out}");
    }
    let members = table(&out, "CONSUMER-ID");
    assert_eq!(members.len(), 1, "{out}");
    assert_eq!(members[0]["#PARTITIONS"], "3", "{out}");
    let list = admin_ok(&bs, &["groups", "list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("g1 ") && l.contains("Stable")),
        "{list}"
    );

    // Kafka's tool refuses to reset a group with active members.
    let refused = admin(
        &bs,
        &[
            "groups",
            "reset-offsets",
            "--group",
            "g1",
            "--all-topics",
            "--to-earliest",
            "--execute",
        ],
    );
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("inactive"), "{refused:?}");
    assert_eq!(
        committed(&b, "g1", "lagged", 3),
        BTreeMap::from([(0, 40), (1, 50), (2, 60)])
    );

    consumer.unsubscribe();
    drop(consumer);
    wait_until("g1 empty", TIMEOUT * 3, Duration::from_millis(200), || {
        Ok(admin_ok(&bs, &["groups", "describe", "--group", "g1"]).contains("State: Empty"))
    })
    .unwrap();

    // The dry run (the default) prints the plan and changes nothing.
    let plan = admin_ok(
        &bs,
        &[
            "groups",
            "reset-offsets",
            "--group",
            "g1",
            "--all-topics",
            "--to-offset",
            "10",
        ],
    );
    let rows = table(&plan, "GROUP");
    assert_eq!(rows.len(), 3, "{plan}");
    assert!(rows.iter().all(|r| r["NEW-OFFSET"] == "10"), "{plan}");
    assert!(plan.contains("Dry run"), "{plan}");
    assert_eq!(
        committed(&b, "g1", "lagged", 3),
        BTreeMap::from([(0, 40), (1, 50), (2, 60)])
    );

    // --execute moves them; an offset past the end is held to the end, as Kafka's tool does.
    admin_ok(
        &bs,
        &[
            "groups",
            "reset-offsets",
            "--group",
            "g1",
            "--topic",
            "lagged:1",
            "--to-offset",
            "500",
            "--execute",
        ],
    );
    assert_eq!(
        committed(&b, "g1", "lagged", 3),
        BTreeMap::from([(0, 40), (1, 100), (2, 60)])
    );
    admin_ok(
        &bs,
        &[
            "groups",
            "reset-offsets",
            "--group",
            "g1",
            "--topic",
            "lagged",
            "--to-earliest",
            "--execute",
        ],
    );
    assert_eq!(
        committed(&b, "g1", "lagged", 3),
        BTreeMap::from([(0, 0), (1, 0), (2, 0)])
    );
    admin_ok(
        &bs,
        &[
            "groups",
            "reset-offsets",
            "--group",
            "g1",
            "--all-topics",
            "--to-latest",
            "--execute",
        ],
    );
    assert_eq!(
        committed(&b, "g1", "lagged", 3),
        BTreeMap::from([(0, 100), (1, 100), (2, 100)])
    );
    // Every record was written just now: a time before them all is the log start.
    admin_ok(
        &bs,
        &[
            "groups",
            "reset-offsets",
            "--group",
            "g1",
            "--all-topics",
            "--to-datetime",
            "2001-09-09T01:46:40Z",
            "--execute",
        ],
    );
    assert_eq!(
        committed(&b, "g1", "lagged", 3),
        BTreeMap::from([(0, 0), (1, 0), (2, 0)])
    );
    let out = admin_ok(&bs, &["groups", "describe", "--group", "g1"]);
    assert!(
        table(&out, "GROUP").iter().all(|r| r["LAG"] == "100"),
        "{out}"
    );

    admin_ok(&bs, &["groups", "delete", "--group", "g1"]);
    let list = admin_ok(&bs, &["groups", "list"]);
    assert!(!list.lines().any(|l| l.starts_with("g1 ")), "{list}");
}

/// Produces to `topic` from a background thread until `stop`, ~600 records/s, each key
/// from `key(i)`; bounded to a minute.
fn produce_in_background(
    b: &Broker,
    topic: &'static str,
    key: fn(usize) -> String,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<usize> {
    let p = producer(b);
    thread::spawn(move || {
        let started = Instant::now();
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
            for _ in 0..60 {
                let k = key(i);
                let v = format!("{k}:{i}");
                while let Err((e, _)) = p.send(BaseRecord::to(topic).key(&k).payload(&v)) {
                    assert!(started.elapsed() < Duration::from_secs(60), "send: {e}");
                    p.poll(Duration::from_millis(5));
                }
                i += 1;
            }
            p.poll(Duration::from_millis(100));
        }
        p.flush(TIMEOUT).expect("flush");
        i
    })
}

fn hot_run(b: &Broker, topic: &'static str, key: fn(usize) -> String) -> String {
    let bs = b.bootstrap();
    admin_ok(
        &bs,
        &["topics", "create", "--topic", topic, "--partitions", "6"],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let producing = produce_in_background(b, topic, key, stop.clone());
    // Traffic before and through the whole window.
    thread::sleep(Duration::from_millis(500));
    let out = admin_ok(
        &bs,
        &["partitions", "--hot", "--topic", topic, "--window", "4"],
    );
    stop.store(true, Ordering::Relaxed);
    let sent = producing.join().unwrap();
    assert!(sent > 600, "only {sent} records sent");
    out
}

#[test]
fn hot_partitions_flag_a_skewed_key_and_not_a_uniform_one() {
    let b = Broker::start(&[]).unwrap();
    // Four records in five carry one key.
    let skewed = hot_run(&b, "skewed", |i| {
        if i % 5 == 0 {
            format!("user-{}", i % 600)
        } else {
            "hot-user".to_owned()
        }
    });
    let flagged: Vec<&str> = skewed
        .lines()
        .filter(|l| l.starts_with("HOT PARTITION: skewed:"))
        .collect();
    assert_eq!(flagged.len(), 1, "{skewed}");
    assert!(skewed.contains("salting"), "{skewed}");
    assert!(skewed.contains("1 hot topic(s)."), "{skewed}");
    // The ranking leads with the hot partition.
    let rows = table(&skewed, "TOPIC");
    assert_eq!(rows.len(), 6, "{skewed}");
    let hot = flagged[0]
        .trim_start_matches("HOT PARTITION: skewed:")
        .split_whitespace()
        .next()
        .unwrap();
    assert_eq!(rows[0]["PARTITION"], hot, "{skewed}");

    // 600 keys spread over six partitions.
    let uniform = hot_run(&b, "uniform", |i| format!("user-{}", i % 600));
    assert!(!uniform.contains("HOT PARTITION"), "{uniform}");
    assert!(uniform.contains("uniform: balanced"), "{uniform}");
    assert!(uniform.contains("0 hot topic(s)."), "{uniform}");
    assert_eq!(table(&uniform, "TOPIC").len(), 6, "{uniform}");
}

#[test]
fn kafka_topics_wrapper_speaks_kafkas_arguments() {
    let b = Broker::start(&[]).unwrap();
    let bs = b.bootstrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../compat-tests/kafka-stub/bin/kafka-topics.sh");
    let run = |args: &[&str]| {
        let out = run_with_timeout(
            Command::new("bash")
                .arg(&script)
                .args(["--bootstrap-server", &bs])
                .args(args)
                .env("STRATA_BIN", strata_bin()),
            b"",
            TIMEOUT * 3,
        )
        .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    // The forms librdkafka's tests 0052 and 0077 use.
    let (ok, out) = run(&[
        "--create",
        "--topic",
        "kt",
        "--replication-factor",
        "1",
        "--partitions",
        "3",
        "--config",
        "cleanup.policy=compact",
    ]);
    assert!(ok, "{out}");
    assert_eq!(partition_count(&b, "kt"), Some(3));
    assert_eq!(configs(&b, "kt")["cleanup.policy"].0, "compact");
    let (ok, out) = run(&["--alter", "--topic", "kt", "--partitions", "4"]);
    assert!(ok, "{out}");
    assert_eq!(partition_count(&b, "kt"), Some(4));
    let (ok, out) = run(&["--describe", "--topic", "kt"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Topic: kt\tTopicId:") && out.contains("PartitionCount: 4"),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("\tTopic: kt\tPartition: "))
            .count(),
        4,
        "{out}"
    );
    let (ok, out) = run(&["--list"]);
    assert!(ok && out.lines().any(|l| l == "kt"), "{out}");
    let (ok, out) = run(&["--create", "--topic", "kt", "--partitions", "1"]);
    assert!(!ok && out.contains("TOPIC_ALREADY_EXISTS"), "{out}");
    let (ok, out) = run(&["--delete", "--topic", "kt"]);
    assert!(ok, "{out}");
    wait_until("kt deleted", TIMEOUT, Duration::from_millis(100), || {
        Ok(partition_count(&b, "kt").is_none())
    })
    .unwrap();
    let (ok, out) = run(&["--delete", "--topic", "kt", "--if-exists"]);
    assert!(ok, "{out}");
}
