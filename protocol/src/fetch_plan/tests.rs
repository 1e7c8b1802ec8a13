//! The plan must put on the wire exactly the bytes the copying encoder would.

use super::*;
use crate::codec;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData, SnapshotId,
};
use kafka_protocol::messages::{ResponseKind, TopicName};
use proptest::prelude::*;

/// A region stand-in that carries its bytes, so the plan can be flattened.
#[derive(Debug, Clone)]
struct Chunk(Bytes);

impl RegionLen for Chunk {
    fn region_len(&self) -> u32 {
        self.0.len() as u32
    }
}

fn flatten(plan: &ResponsePlan<Chunk>) -> Vec<u8> {
    let mut out = Vec::new();
    for p in &plan.pieces {
        match p {
            Piece::Bytes(b) => out.extend_from_slice(b),
            Piece::Region(c) => out.extend_from_slice(&c.0),
        }
    }
    out
}

#[derive(Debug, Clone)]
struct PartSpec {
    index: i32,
    error: i16,
    hw: i64,
    chunks: Vec<Vec<u8>>,
    aborted: Option<Vec<(i64, i64)>>,
    replica: i32,
    leader: Option<(i32, i32)>,
    diverging: Option<(i32, i64)>,
    snapshot: Option<(i64, i32)>,
}

fn part_spec() -> impl Strategy<Value = PartSpec> {
    (
        (
            0i32..100,
            prop_oneof![Just(0i16), Just(1i16), Just(3i16)],
            any::<i64>(),
        ),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..3),
        prop::option::of(prop::collection::vec((any::<i64>(), any::<i64>()), 0..3)),
        -1i32..3,
        prop::option::of((0i32..5, 0i32..50)),
        prop::option::of((0i32..5, any::<i64>())),
        prop::option::of((any::<i64>(), 0i32..9)),
    )
        .prop_map(
            |((index, error, hw), chunks, aborted, replica, leader, diverging, snapshot)| {
                PartSpec {
                    index,
                    error,
                    hw,
                    chunks,
                    aborted,
                    replica,
                    leader,
                    diverging,
                    snapshot,
                }
            },
        )
}

/// A topic: name, id, partitions.
type TopicSpec = (String, [u8; 16], Vec<PartSpec>);

fn spec() -> impl Strategy<Value = (i16, Vec<TopicSpec>, bool)> {
    (
        4i16..=16,
        prop::collection::vec(
            (
                "[a-zA-Z0-9._-]{1,20}",
                any::<[u8; 16]>(),
                prop::collection::vec(part_spec(), 0..5),
            ),
            0..4,
        ),
        any::<bool>(),
    )
}

/// Builds the response (records left empty) and each partition's chunks.
fn build(version: i16, topics: &[TopicSpec], endpoints: bool) -> (FetchResponse, Vec<Vec<Chunk>>) {
    let mut records = Vec::new();
    let mut responses = Vec::new();
    for (name, id, parts) in topics {
        let mut t = FetchableTopicResponse::default();
        if version >= 13 {
            t.topic_id = uuid::Uuid::from_bytes(*id);
        } else {
            t.topic = TopicName(crate::StrBytes::from_string(name.clone()));
        }
        for p in parts {
            let mut pd = PartitionData::default()
                .with_partition_index(p.index)
                .with_error_code(p.error)
                .with_high_watermark(p.hw)
                .with_last_stable_offset(p.hw)
                .with_log_start_offset(if version >= 5 { 0 } else { -1 })
                .with_aborted_transactions(p.aborted.as_ref().map(|a| {
                    a.iter()
                        .map(|&(pid, first)| {
                            AbortedTransaction::default()
                                .with_producer_id(pid.into())
                                .with_first_offset(first)
                        })
                        .collect()
                }));
            if version >= 11 {
                pd.preferred_read_replica = p.replica.into();
            }
            if version >= 12 {
                if let Some((l, e)) = p.leader {
                    pd.current_leader = LeaderIdAndEpoch::default()
                        .with_leader_id(l.into())
                        .with_leader_epoch(e);
                }
                if let Some((e, o)) = p.diverging {
                    pd.diverging_epoch = EpochEndOffset::default().with_epoch(e).with_end_offset(o);
                }
                if let Some((o, e)) = p.snapshot {
                    pd.snapshot_id = SnapshotId::default().with_end_offset(o).with_epoch(e);
                }
            }
            t.partitions.push(pd);
            records.push(
                p.chunks
                    .iter()
                    .map(|c| Chunk(Bytes::from(c.clone())))
                    .collect(),
            );
        }
        responses.push(t);
    }
    let mut body = FetchResponse::default()
        .with_session_id(if version >= 7 { 7 } else { 0 })
        .with_responses(responses);
    if version >= 16 && endpoints {
        body.node_endpoints = vec![
            NodeEndpoint::default()
                .with_node_id(1.into())
                .with_host(crate::StrBytes::from_static_str("localhost"))
                .with_port(9092),
        ];
    }
    (body, records)
}

/// The copying encoder's frame for the same response.
fn copied(version: i16, body: &FetchResponse, records: &[Vec<Chunk>]) -> Bytes {
    let mut body = body.clone();
    let mut i = 0;
    for t in &mut body.responses {
        for p in &mut t.partitions {
            let mut all = Vec::new();
            for c in &records[i] {
                all.extend_from_slice(&c.0);
            }
            p.records = Some(Bytes::from(all));
            i += 1;
        }
    }
    codec::encode_response(ApiKey::Fetch, version, 99, &ResponseKind::Fetch(body)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn plan_matches_the_copied_encoding((version, topics, endpoints) in spec()) {
        let (body, records) = build(version, &topics, endpoints);
        let want = copied(version, &body, &records);
        let plan = encode_fetch_plan(version, 99, body, records.clone()).unwrap();
        let got = flatten(&plan);
        prop_assert_eq!(plan.total_len, got.len() as u64);
        prop_assert_eq!(&got[..], &want[..]);
        let region_bytes: u64 = records.iter().flatten().map(|c| c.0.len() as u64).sum();
        prop_assert_eq!(plan.region_bytes(), region_bytes);
    }
}

#[test]
fn every_version_with_large_records() {
    // Lengths past one varint byte (>= 127) and past 2^14, at every version.
    for version in 4..=16 {
        let parts = vec![
            PartSpec {
                index: 0,
                error: 0,
                hw: 10,
                chunks: vec![vec![1; 20_000], vec![2; 130]],
                aborted: Some(vec![]),
                replica: -1,
                leader: None,
                diverging: None,
                snapshot: None,
            },
            PartSpec {
                index: 1,
                error: 0,
                hw: 0,
                chunks: vec![],
                aborted: None,
                replica: -1,
                leader: None,
                diverging: None,
                snapshot: None,
            },
        ];
        let topics = vec![
            ("t".to_string(), [3; 16], parts.clone()),
            ("u".into(), [4; 16], parts),
        ];
        let (body, records) = build(version, &topics, true);
        let want = copied(version, &body, &records);
        let plan = encode_fetch_plan(version, 99, body, records).unwrap();
        assert_eq!(flatten(&plan), &want[..], "version {version}");
    }
}

#[test]
fn mismatched_record_lists_are_refused() {
    let (body, _) = build(12, &[("t".into(), [1; 16], vec![])], false);
    let err = encode_fetch_plan::<Chunk>(12, 1, body, vec![vec![]]).unwrap_err();
    assert!(matches!(
        err,
        PlanError::Mismatch {
            given: 1,
            expected: 0
        }
    ));
}
