//! Incremental fetch sessions (KIP-227) on the wire: a full fetch at epoch 0 gets a session,
//! incremental fetches name only what changed and are answered only the partitions with
//! news, forgotten partitions are no longer read, and each of Kafka's session errors comes
//! back as its top-level code. Raw Fetch requests, since librdkafka always fetches
//! sessionless; kafka-python's sessions are driven in tests/python/test_fetch_sessions.py and
//! the followers' in `cluster_fetch_sessions`.

use std::time::Duration;

use anyhow::ensure;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use strata_protocol::StrBytes;
use strata_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use strata_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, RequestKind, ResponseKind, TopicName,
};
use strata_tests::{Broker, with_broker};

use crate::rdkafka_clients;

const TOPIC: &str = "sessions";
const PARTITIONS: i32 = 4;

fn produce(b: &Broker, partition: i32, n: usize) -> anyhow::Result<()> {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("linger.ms", "0")
        .create()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for i in 0..n {
        let payload = format!("{partition}-{i}");
        let record = FutureRecord::<(), _>::to(TOPIC)
            .payload(&payload)
            .partition(partition);
        rt.block_on(p.send(record, Duration::from_secs(30)))
            .map_err(|(e, _)| e)?;
    }
    Ok(())
}

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// Fetch v12 (topics by name) of `parts` (partition, fetch offset), as session `id` at
/// `epoch`, forgetting `forget`.
fn request(id: i32, epoch: i32, parts: &[(i32, i64)], forget: &[i32]) -> FetchRequest {
    let topics = if parts.is_empty() {
        Vec::new()
    } else {
        vec![
            FetchTopic::default().with_topic(name()).with_partitions(
                parts
                    .iter()
                    .map(|&(p, offset)| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            ),
        ]
    };
    let forgotten = if forget.is_empty() {
        Vec::new()
    } else {
        vec![
            ForgottenTopic::default()
                .with_topic(name())
                .with_partitions(forget.to_vec()),
        ]
    };
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten)
}

fn fetch(b: &Broker, version: i16, req: FetchRequest) -> FetchResponse {
    match crate::acl_client::call(b.port(), ApiKey::Fetch, version, RequestKind::Fetch(req)) {
        ResponseKind::Fetch(r) => r,
        other => panic!("not a fetch response: {other:?}"),
    }
}

/// The answered partitions: (index, records?, high watermark).
fn answered(r: &FetchResponse) -> Vec<(i32, bool, i64)> {
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            (
                p.partition_index,
                p.records.as_ref().is_some_and(|r| !r.is_empty()),
                p.high_watermark,
            )
        })
        .collect()
}

#[test]
fn a_session_answers_only_what_changed_and_refuses_what_kafka_refuses() {
    with_broker(&[], |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce(b, 0, 3)?;
        produce(b, 1, 2)?;
        let all: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();

        // Sessionless (epoch -1): every partition, session id 0.
        let r = fetch(b, 12, request(0, -1, &all, &[]));
        ensure!(r.error_code == 0 && r.session_id == 0, "{r:?}");
        ensure!(answered(&r).len() == 4);

        // Epoch 0: the full answer, and a session.
        let r = fetch(b, 12, request(0, 0, &all, &[]));
        let id = r.session_id;
        ensure!(r.error_code == 0 && id != 0, "no session: {r:?}");
        ensure!(
            answered(&r) == vec![(0, true, 3), (1, true, 2), (2, false, 0), (3, false, 0)],
            "{:?}",
            answered(&r)
        );

        // Epoch 1 moves two fetch offsets past the records: nothing is new.
        let r = fetch(b, 12, request(id, 1, &[(0, 3), (1, 2)], &[]));
        ensure!(r.error_code == 0 && r.session_id == id, "{r:?}");
        ensure!(answered(&r).is_empty(), "{:?}", answered(&r));

        // New records in partition 2: only it is answered, though the request names none.
        produce(b, 2, 1)?;
        let r = fetch(b, 12, request(id, 2, &[], &[]));
        ensure!(answered(&r) == vec![(2, true, 1)], "{:?}", answered(&r));

        // The same epoch again, an unknown session, topics by id on a session of names.
        let r = fetch(b, 12, request(id, 2, &[], &[]));
        ensure!(r.error_code == 71 && r.session_id == 0, "{r:?}");
        let r = fetch(b, 12, request(id.wrapping_add(1), 3, &[], &[]));
        ensure!(r.error_code == 70 && r.session_id == 0, "{r:?}");
        let r = fetch(b, 13, request(id, 3, &[], &[]));
        ensure!(r.error_code == 106 && r.session_id == 0, "{r:?}");

        // None of those moved the session. Partition 2 is forgotten (its offset was never
        // moved past its record, which the session would otherwise answer again).
        let r = fetch(b, 12, request(id, 3, &[], &[2]));
        ensure!(answered(&r).is_empty(), "{:?}", answered(&r));
        produce(b, 2, 1)?;
        produce(b, 3, 1)?;
        let r = fetch(b, 12, request(id, 4, &[], &[]));
        ensure!(answered(&r) == vec![(3, true, 1)], "{:?}", answered(&r));

        // Epoch -1 closes the session; it is gone.
        let r = fetch(b, 12, request(id, -1, &[(0, 0)], &[]));
        ensure!(r.error_code == 0 && r.session_id == 0, "{r:?}");
        ensure!(answered(&r) == vec![(0, true, 3)], "{:?}", answered(&r));
        let r = fetch(b, 12, request(id, 5, &[], &[]));
        ensure!(r.error_code == 70, "{r:?}");
        Ok(())
    });
}

#[test]
fn with_no_slots_every_fetch_is_full() {
    with_broker(&[("max.incremental.fetch.session.cache.slots", "0")], |b| {
        rdkafka_clients::create_topic(b, TOPIC, 1)?;
        let r = fetch(b, 12, request(0, 0, &[(0, 0)], &[]));
        ensure!(r.error_code == 0 && r.session_id == 0, "{r:?}");
        ensure!(answered(&r) == vec![(0, false, 0)]);
        Ok(())
    });
}
