//! The metadata store against the real storage layer: durability across reopen and
//! recovery from a torn final batch.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use strata_kraft::{
    CreateTopic, METADATA_LOG_DIR, MetadataError, MetadataImage, MetadataRecord, MetadataStore,
};

const NOW: i64 = 1_700_000_000_000;

fn topic(name: &str, partitions: i32, configs: &[(&str, &str)]) -> CreateTopic {
    CreateTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: 1,
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        validate_only: false,
        assignments: None,
    }
}

fn open(dir: &Path) -> MetadataStore {
    let mut store = MetadataStore::open(dir, 1, NOW).unwrap();
    store
        .register_broker(1, "localhost", 9092, None, NOW)
        .unwrap();
    store
}

fn segment(dir: &Path) -> PathBuf {
    let log_dir = dir.join(METADATA_LOG_DIR);
    let mut logs: Vec<PathBuf> = fs::read_dir(&log_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a segment file")
}

#[test]
fn reopen_rebuilds_an_identical_image() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let mut store = open(dir.path());
        store
            .create_topic(
                topic(
                    "orders",
                    3,
                    &[("retention.ms", "1000"), ("cleanup.policy", "compact")],
                ),
                NOW,
            )
            .unwrap();
        let payments = store.create_topic(topic("payments", 2, &[]), NOW).unwrap();
        store
            .create_topic(topic("audit", -1, &[("segment.bytes", "1048576")]), NOW)
            .unwrap();
        store
            .set_topic_config("orders", "max.message.bytes", Some("2000000"), NOW)
            .unwrap();
        store
            .set_topic_config("orders", "retention.ms", None, NOW)
            .unwrap();
        assert_eq!(store.delete_topic(payments, NOW).unwrap(), "payments");
        let image = store.image();
        store.close().unwrap();
        image
    };
    assert_eq!(
        before.topics.keys().collect::<Vec<_>>(),
        ["audit", "orders"]
    );
    assert_eq!(
        before.topics["orders"].configs,
        BTreeMap::from([
            ("cleanup.policy".to_owned(), "compact".to_owned()),
            ("max.message.bytes".to_owned(), "2000000".to_owned())
        ])
    );
    assert_eq!(before.topics["orders"].partitions.len(), 3);
    assert_eq!(before.controller_id, 1);
    assert_eq!(before.cluster_id.len(), 22);

    let store = open(dir.path());
    assert_eq!(*store.image(), *before);

    let props = fs::read_to_string(dir.path().join("meta.properties")).unwrap();
    assert!(props.contains("version=1\n"));
    assert!(props.contains(&format!("cluster.id={}\n", before.cluster_id)));
    assert!(props.contains("node.id=1\n"));
}

#[test]
fn unchanged_registration_is_not_rewritten_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let end = {
        let store = open(dir.path());
        store.log_end_offset()
    };
    assert_eq!(end, 1);
    let mut store = open(dir.path());
    assert_eq!(store.log_end_offset(), end);
    store
        .register_broker(1, "localhost", 9093, None, NOW)
        .unwrap();
    assert_eq!(store.log_end_offset(), end + 1);
    assert_eq!(store.image().brokers[&1].port, 9093);
}

#[test]
fn validate_only_and_failed_validation_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    let end = store.log_end_offset();
    let mut req = topic("t", 4, &[]);
    req.validate_only = true;
    store.create_topic(req, NOW).unwrap();
    assert!(matches!(
        store.create_topic(topic("t", 1, &[("retention.ms", "soon")]), NOW),
        Err(MetadataError::InvalidConfig { .. })
    ));
    assert!(matches!(
        store.create_topic(
            CreateTopic {
                replication_factor: 3,
                ..topic("t", 1, &[])
            },
            NOW
        ),
        Err(MetadataError::InvalidReplicationFactor { .. })
    ));
    assert_eq!(store.log_end_offset(), end);
    assert!(store.image().topics.is_empty());
}

/// What a broker's `prepare` failing looks like: the log of a partition could not be created.
#[derive(Debug, PartialEq)]
enum PrepareError {
    Metadata(String),
    NoLog { partitions: usize },
}

impl From<MetadataError> for PrepareError {
    fn from(e: MetadataError) -> Self {
        PrepareError::Metadata(e.to_string())
    }
}

#[test]
fn a_failed_prepare_writes_nothing_and_a_retry_commits() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    store.create_topic(topic("grown", 1, &[]), NOW).unwrap();
    let end = store.log_end_offset();
    let before = store.image();

    // `prepare` sees the image the commit would publish, then refuses it.
    let refused = store.create_topic_prepared(topic("t", 3, &[]), NOW, |next| {
        Err(PrepareError::NoLog {
            partitions: next.topics["t"].partitions.len(),
        })
    });
    assert_eq!(refused, Err(PrepareError::NoLog { partitions: 3 }));
    let refused = store.create_partitions_prepared("grown", 4, None, false, NOW, |next| {
        Err(PrepareError::NoLog {
            partitions: next.topics["grown"].partitions.len(),
        })
    });
    assert_eq!(refused, Err(PrepareError::NoLog { partitions: 4 }));
    assert_eq!(store.log_end_offset(), end, "nothing was written");
    assert_eq!(store.image(), before);
    assert_eq!(store.reader().load(), before);

    // Validation still comes first: `prepare` is not called for a refused request.
    let invalid = store.create_topic_prepared(topic("grown", 1, &[]), NOW, |_| {
        panic!("prepare called for an existing topic")
    });
    assert!(matches!(invalid, Err(PrepareError::Metadata(_))));

    // Once the cause is gone, the same requests commit.
    let id = store
        .create_topic_prepared(topic("t", 3, &[]), NOW, |_| Ok::<(), PrepareError>(()))
        .unwrap();
    store
        .create_partitions_prepared("grown", 4, None, false, NOW, |_| Ok::<(), PrepareError>(()))
        .unwrap();
    store.close().unwrap();
    let reopened = open(dir.path());
    assert_eq!(reopened.image().topics["t"].topic_id, id);
    assert_eq!(reopened.image().topics["t"].partitions.len(), 3);
    assert_eq!(reopened.image().topics["grown"].partitions.len(), 4);
}

#[test]
fn readers_see_each_committed_operation() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path());
    let reader = store.reader();
    let old = reader.load();
    store.create_topic(topic("t", 1, &[]), NOW).unwrap();
    assert!(old.topics.is_empty(), "published images never change");
    assert!(reader.load().topics.contains_key("t"));
}

#[test]
fn another_node_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    assert!(matches!(
        MetadataStore::open(dir.path(), 2, NOW),
        Err(MetadataError::NodeIdMismatch {
            configured: 2,
            stored: 1,
            ..
        })
    ));
}

/// What the log held before and after the last of three operations.
struct ThreeOperations {
    after_second: MetadataImage,
    after_third: MetadataImage,
    /// Segment size before the third operation's batch.
    second_end: u64,
    /// Log end offset before the third operation.
    second_end_offset: i64,
    /// Segment size after it.
    third_end: u64,
}

/// Runs three operations (register, create "a", create "b"), then "crashes": drops the
/// store without closing it.
fn three_operations(dir: &Path) -> ThreeOperations {
    let mut store = open(dir);
    store
        .create_topic(topic("a", 2, &[("cleanup.policy", "compact")]), NOW)
        .unwrap();
    let after_second = (*store.image()).clone();
    let second_end = fs::metadata(segment(dir)).unwrap().len();
    let second_end_offset = store.log_end_offset();
    // The last operation is a multi-record batch: 1 topic + 1 config + 5 partitions.
    store
        .create_topic(topic("b", 5, &[("retention.ms", "5")]), NOW)
        .unwrap();
    let after_third = (*store.image()).clone();
    let third_end = fs::metadata(segment(dir)).unwrap().len();
    drop(store);
    ThreeOperations {
        after_second,
        after_third,
        second_end,
        second_end_offset,
        third_end,
    }
}

#[test]
fn a_torn_last_batch_loses_only_that_whole_operation() {
    let probe = three_operations(tempfile::tempdir().unwrap().path());
    assert!(
        probe.third_end - probe.second_end > 300,
        "a multi-record batch"
    );
    // Cut anywhere inside the last batch: in its length prefix, header, or records.
    for keep in (probe.second_end..probe.third_end)
        .step_by(23)
        .chain([probe.third_end - 1])
    {
        let dir = tempfile::tempdir().unwrap();
        let ops = three_operations(dir.path());
        assert_eq!(ops.third_end, probe.third_end);
        OpenOptions::new()
            .write(true)
            .open(segment(dir.path()))
            .unwrap()
            .set_len(keep)
            .unwrap();

        let store = MetadataStore::open(dir.path(), 1, NOW).unwrap();
        assert_eq!(*store.image(), ops.after_second, "kept {keep} bytes");
        assert_eq!(
            store.log_end_offset(),
            ops.second_end_offset,
            "kept {keep} bytes"
        );
    }
}

#[test]
fn garbage_after_the_last_batch_is_dropped() {
    for garbage in [
        &[0u8; 5][..],
        &[0xff; 100],
        b"not a record batch at all, just bytes",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ops = three_operations(dir.path());
        OpenOptions::new()
            .append(true)
            .open(segment(dir.path()))
            .unwrap()
            .write_all(garbage)
            .unwrap();

        let mut store = MetadataStore::open(dir.path(), 1, NOW).unwrap();
        assert_eq!(*store.image(), ops.after_third);
        // The log is writable again after recovery, and the new write survives.
        store.create_topic(topic("c", 1, &[]), NOW).unwrap();
        let expected = store.image();
        drop(store);
        assert_eq!(
            *MetadataStore::open(dir.path(), 1, NOW).unwrap().image(),
            *expected
        );
    }
}

#[test]
fn each_operation_is_one_batch_of_kafka_framed_records() {
    let dir = tempfile::tempdir().unwrap();
    let ops = three_operations(dir.path());
    let bytes = fs::read(segment(dir.path())).unwrap();
    let batches: Vec<_> = strata_protocol::record_batch::batches(&bytes)
        .map(Result::unwrap)
        .collect();
    let counts: Vec<i32> = batches.iter().map(|b| b.record_count()).collect();
    // register; topic + config + 2 partitions; topic + config + 5 partitions.
    assert_eq!(counts, [1, 4, 7]);
    let mut image = MetadataImage::new(ops.after_third.cluster_id.clone(), 1);
    for batch in &batches {
        batch.verify_crc().unwrap();
        for record in batch.records().unwrap() {
            let record = record.unwrap();
            assert_eq!(record.key, None);
            image
                .apply(&MetadataRecord::decode(record.value.unwrap()).unwrap())
                .unwrap();
        }
    }
    assert_eq!(image, ops.after_third);
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        topic: usize,
        partitions: i32,
        retention: Option<i64>,
    },
    Delete {
        topic: usize,
    },
    SetConfig {
        topic: usize,
        key: usize,
        value: Option<&'static str>,
    },
}

const TOPICS: [&str; 3] = ["t0", "t1", "t2"];
const KEYS: [&str; 3] = ["retention.ms", "cleanup.policy", "no.such.key"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, -1..4i32, proptest::option::of(-2..100i64)).prop_map(
            |(topic, partitions, retention)| Op::Create {
                topic,
                partitions,
                retention
            }
        ),
        (0..3usize).prop_map(|topic| Op::Delete { topic }),
        (
            0..3usize,
            0..3usize,
            proptest::option::of(prop_oneof![Just("compact"), Just("5"), Just("x")])
        )
            .prop_map(|(topic, key, value)| Op::SetConfig { topic, key, value }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever mix of operations succeeds or fails, a failed one writes nothing and the
    /// log replays to exactly the image that was served.
    #[test]
    fn any_operation_sequence_replays_to_the_same_image(ops in proptest::collection::vec(op(), 1..12)) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        for op in ops {
            let end = store.log_end_offset();
            let result = match op {
                Op::Create { topic: t, partitions, retention } => {
                    let retention = retention.map(|r| r.to_string());
                    let configs: Vec<(&str, &str)> =
                        retention.iter().map(|r| ("retention.ms", r.as_str())).collect();
                    store.create_topic(topic(TOPICS[t], partitions, &configs), NOW).map(drop)
                }
                Op::Delete { topic } => match store.image().topics.get(TOPICS[topic]) {
                    Some(t) => store.delete_topic(t.topic_id, NOW).map(drop),
                    None => Ok(()),
                },
                Op::SetConfig { topic, key, value } => {
                    store.set_topic_config(TOPICS[topic], KEYS[key], value, NOW)
                }
            };
            if result.is_err() {
                prop_assert_eq!(store.log_end_offset(), end);
            }
        }
        let served = store.image();
        drop(store);
        prop_assert_eq!(&*MetadataStore::open(dir.path(), 1, NOW).unwrap().image(), &*served);
    }
}

#[test]
fn a_lost_meta_properties_is_not_silently_reformatted() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    fs::remove_file(dir.path().join("meta.properties")).unwrap();
    assert!(matches!(
        MetadataStore::open(dir.path(), 1, NOW),
        Err(MetadataError::InvalidMetaProperties {
            reason: strata_kraft::MetaPropertiesError::MissingWithExistingLog,
            ..
        })
    ));
}
