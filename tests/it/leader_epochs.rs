//! Leader epochs in the data path against the real binary (KIP-101, KIP-320): Fetch and
//! ListOffsets check `current_leader_epoch`, OffsetForLeaderEpoch answers from the leader's
//! `leader-epoch-checkpoint` (also after kill -9), and a librdkafka group consumer resumes
//! from its committed position with the API advertised.
//!
//! One node leads every partition at leader epoch 0 (nothing moves leadership yet), so
//! FENCED_LEADER_EPOCH is reached with an epoch below 0 other than -1: Kafka compares any
//! value but -1 (`RecordBatch.NO_PARTITION_LEADER_EPOCH`). NOT_LEADER_OR_FOLLOWER needs a
//! second node to lead; the handlers' unit tests cover it with such an image.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::message::Message;
use strata_protocol::StrBytes;
use strata_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use strata_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use strata_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use strata_protocol::messages::{
    ApiKey, FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest, RequestKind,
    ResponseKind, TopicName,
};
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_tests::Broker;
use strata_tests::wire::{self, recv, send};

use crate::rdkafka_clients;

/// Sends `body` at `version` and decodes the answer, whichever response header it has.
fn call(b: &Broker, key: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
    crate::acl_client::call(b.port(), key, version, body)
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// Creates `topic` (auto-creation through Metadata) and appends `batches` batches of 3
/// records to partition 0.
fn produce(b: &Broker, topic: &str, batches: usize) {
    let mut s = wire::connect(b.port());
    send(&mut s, &wire::metadata_request(1, topic));
    recv(&mut s).expect("metadata (auto-creates the topic)");
    for i in 0..batches {
        let records: Vec<SimpleRecord> = (0..3)
            .map(|r| SimpleRecord {
                key: None,
                value: Some(Bytes::from(format!("v{i}-{r}"))),
                // Recent, so that retention (seven days) keeps them.
                timestamp: rdkafka_clients::now_ms(),
                headers: vec![],
            })
            .collect();
        let corr = i32::try_from(i).unwrap() + 2;
        send(
            &mut s,
            &wire::produce_request(corr, topic, &encode_batch(0, &records)),
        );
        let resp = recv(&mut s).expect("produce response");
        assert_eq!(
            wire::produce_result(&resp, topic),
            (0, i64::try_from(i * 3).unwrap())
        );
    }
}

/// (error code, high watermark, record bytes) of partition 0 fetched at v12 (by name).
fn fetch(b: &Broker, topic: &str, current_leader_epoch: i32) -> (i16, i64, usize) {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(current_leader_epoch)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    match call(b, ApiKey::Fetch, 12, RequestKind::Fetch(req)) {
        ResponseKind::Fetch(r) => {
            let p = &r.responses[0].partitions[0];
            (
                p.error_code,
                p.high_watermark,
                p.records.as_ref().map_or(0, Bytes::len),
            )
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// (error code, offset, leader epoch) of ListOffsets v7 for partition 0 at `timestamp`.
fn list_offsets(
    b: &Broker,
    topic: &str,
    timestamp: i64,
    current_leader_epoch: i32,
) -> (i16, i64, i32) {
    let req = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_current_leader_epoch(current_leader_epoch)
                        .with_timestamp(timestamp),
                ]),
        ]);
    match call(b, ApiKey::ListOffsets, 7, RequestKind::ListOffsets(req)) {
        ResponseKind::ListOffsets(r) => {
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.offset, p.leader_epoch)
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// (error code, leader epoch, end offset) of OffsetForLeaderEpoch for partition 0.
fn offset_for_leader_epoch(
    b: &Broker,
    version: i16,
    topic: &str,
    current_leader_epoch: i32,
    leader_epoch: i32,
) -> (i16, i32, i64) {
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(current_leader_epoch)
                        .with_leader_epoch(leader_epoch),
                ]),
        ]);
    match call(
        b,
        ApiKey::OffsetForLeaderEpoch,
        version,
        RequestKind::OffsetForLeaderEpoch(req),
    ) {
        ResponseKind::OffsetForLeaderEpoch(r) => {
            assert_eq!(r.topics.len(), 1);
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.leader_epoch, p.end_offset)
        }
        other => panic!("unexpected {other:?}"),
    }
}

const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

#[test]
fn fetch_and_list_offsets_check_the_current_leader_epoch() {
    let b = Broker::start(&[]).unwrap();
    produce(&b, "epochs", 2);
    // No epoch, or the leader's (0): served.
    let (code, hw, bytes) = fetch(&b, "epochs", -1);
    assert_eq!((code, hw), (0, 6));
    assert!(bytes > 0);
    assert_eq!(fetch(&b, "epochs", 0).0, 0);
    // Newer than the leader knows: UNKNOWN_LEADER_EPOCH; older: FENCED_LEADER_EPOCH. No
    // records either way.
    assert_eq!(fetch(&b, "epochs", 1), (UNKNOWN_LEADER_EPOCH, -1, 0));
    assert_eq!(fetch(&b, "epochs", -2), (FENCED_LEADER_EPOCH, -1, 0));

    // ListOffsets reports the epoch of what it answers (v4+).
    assert_eq!(list_offsets(&b, "epochs", -1, -1), (0, 6, 0));
    assert_eq!(list_offsets(&b, "epochs", -2, 0), (0, 0, 0));
    assert_eq!(list_offsets(&b, "epochs", 0, 0), (0, 0, 0));
    assert_eq!(
        list_offsets(&b, "epochs", -1, 1),
        (UNKNOWN_LEADER_EPOCH, -1, -1)
    );
    assert_eq!(
        list_offsets(&b, "epochs", -1, -2),
        (FENCED_LEADER_EPOCH, -1, -1)
    );
}

#[test]
fn offset_for_leader_epoch_answers_from_the_checkpoint_across_a_kill_9() {
    let mut b = Broker::start(&[]).unwrap();
    produce(&b, "ofle", 3);
    for version in 2..=4 {
        // The current (and only) epoch ends at the log end.
        assert_eq!(
            offset_for_leader_epoch(&b, version, "ofle", 0, 0),
            (0, 0, 9)
        );
        assert_eq!(
            offset_for_leader_epoch(&b, version, "ofle", -1, 0),
            (0, 0, 9)
        );
        // An epoch newer than any: nothing known (Kafka answers so, with no error).
        assert_eq!(
            offset_for_leader_epoch(&b, version, "ofle", 0, 1),
            (0, -1, -1)
        );
        assert_eq!(
            offset_for_leader_epoch(&b, version, "ofle", 1, 0),
            (UNKNOWN_LEADER_EPOCH, -1, -1)
        );
        assert_eq!(
            offset_for_leader_epoch(&b, version, "ofle", -3, 0),
            (FENCED_LEADER_EPOCH, -1, -1)
        );
        assert_eq!(
            offset_for_leader_epoch(&b, version, "no-such-topic", -1, 0),
            (3, -1, -1)
        );
    }
    let checkpoint = b.data_dir().join("ofle-0").join("leader-epoch-checkpoint");
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "0\n1\n0 0\n");
    rdkafka_clients::group::kill9_and_restart(&mut b).unwrap();
    // The restarted broker registers again, and its controller elects it leader again in a
    // new epoch (as Kafka's does): epoch 0, read back from the checkpoint, ends where the
    // log ended before the crash, and the new epoch starts there.
    assert_eq!(offset_for_leader_epoch(&b, 4, "ofle", -1, 0), (0, 0, 9));
    produce_more(&b, "ofle");
    assert_eq!(offset_for_leader_epoch(&b, 4, "ofle", -1, 0), (0, 0, 9));
    let entries: Vec<(i32, i64)> = std::fs::read_to_string(&checkpoint)
        .unwrap()
        .lines()
        .skip(2)
        .map(|l| {
            let (e, o) = l.split_once(' ').unwrap();
            (e.parse().unwrap(), o.parse().unwrap())
        })
        .collect();
    let &(latest, start) = entries.last().unwrap();
    assert_eq!((entries[0], start), ((0, 0), 9), "{entries:?}");
    assert!(latest > 0, "{entries:?}");
    assert_eq!(
        offset_for_leader_epoch(&b, 4, "ofle", latest, latest),
        (0, latest, 12)
    );
}

/// One more batch of 3 records after a restart.
fn produce_more(b: &Broker, topic: &str) {
    let records: Vec<SimpleRecord> = (0..3)
        .map(|r| SimpleRecord {
            key: None,
            value: Some(Bytes::from(format!("after-{r}"))),
            timestamp: rdkafka_clients::now_ms(),
            headers: vec![],
        })
        .collect();
    let mut s = wire::connect(b.port());
    send(
        &mut s,
        &wire::produce_request(1, topic, &encode_batch(0, &records)),
    );
    let resp = recv(&mut s).expect("produce response");
    assert_eq!(wire::produce_result(&resp, topic), (0, 9));
}

/// Keeps librdkafka's fetch-state debug lines (offset validation and resets among them).
#[derive(Default)]
struct FetchLog(Arc<Mutex<Vec<String>>>);

impl ClientContext for FetchLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        rdkafka_clients::print_client_log("consumer", level, fac, message);
        self.0.lock().unwrap().push(format!("{fac}: {message}"));
    }
}

impl ConsumerContext for FetchLog {}

fn group_consumer(b: &Broker, group: &str, reset: &str) -> BaseConsumer<FetchLog> {
    let consumer: BaseConsumer<FetchLog> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", reset)
        .set("debug", "fetch")
        .set_log_level(RDKafkaLogLevel::Debug)
        .create_with_context(FetchLog::default())
        .unwrap();
    consumer.subscribe(&["resume"]).unwrap();
    consumer
}

/// The offsets of the next `n` messages (at most 30 s).
fn read(consumer: &BaseConsumer<FetchLog>, n: usize) -> Vec<i64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            out.push(m.unwrap().offset());
        }
    }
    out
}

/// With OffsetForLeaderEpoch advertised, librdkafka commits each position with its leader
/// epoch and a consumer resuming from that commit carries on from it: no truncation is
/// detected and no reset to `latest` skips what follows. (librdkafka validates a position
/// with OffsetForLeaderEpoch when the leader epoch in Metadata moves or on a seek with an
/// epoch; a single node never moves it, so the answers themselves are checked above.)
#[test]
fn a_librdkafka_consumer_resumes_from_its_committed_position() {
    let b = Broker::start(&[]).unwrap();
    produce_to(&b, "resume", 5);
    let first = group_consumer(&b, "resumers", "earliest");
    assert_eq!(read(&first, 5), (0..5).collect::<Vec<_>>());
    first.commit_consumer_state(CommitMode::Sync).unwrap();
    drop(first);
    produce_to(&b, "resume", 4);

    let second = group_consumer(&b, "resumers", "latest");
    let log = second.context().0.clone();
    assert_eq!(read(&second, 4), (5..9).collect::<Vec<_>>());
    let log = log.lock().unwrap().clone();
    assert!(
        !log.iter().any(|l| l.contains("truncation")),
        "no log truncation reported: {log:#?}"
    );
}

/// `n` messages to partition 0 of `topic`, acknowledged.
fn produce_to(b: &Broker, topic: &str, n: usize) {
    let (producer, deliveries) = rdkafka_clients::producer(b, &[]).unwrap();
    for i in 0..n {
        rdkafka_clients::send_to_partition(&producer, topic, 0, i, b"x").unwrap();
    }
    rdkafka_clients::await_reports(&producer, &deliveries, n, Duration::from_secs(30)).unwrap();
    assert!(deliveries.failed.lock().unwrap().is_empty());
}
