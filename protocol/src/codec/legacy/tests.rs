//! The old versions byte by byte, as their schemas (Kafka 3.9's message JSON) lay them out.
//!
//! Requests are written here field by field, as an old client writes them, and must decode
//! to the codec's struct with the same values; responses are encoded by the codec module and
//! read back here field by field. Every prefix of every request is refused without a panic.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsResponse, DescribeConfigsResponse, ListOffsetsResponse, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use proptest::prelude::*;

use crate::codec::{DecodeError, Decoded, decode_request, encode_response};
use crate::versions::{SUPPORTED_APIS, supported};

/// Old-version bytes, field by field.
#[derive(Default)]
struct W(BytesMut);

impl W {
    fn i8(mut self, v: i8) -> Self {
        self.0.put_i8(v);
        self
    }
    fn i16(mut self, v: i16) -> Self {
        self.0.put_i16(v);
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.put_i32(v);
        self
    }
    fn i64(mut self, v: i64) -> Self {
        self.0.put_i64(v);
        self
    }
    fn str(self, s: &str) -> Self {
        let mut w = self.i16(s.len() as i16);
        w.0.put_slice(s.as_bytes());
        w
    }
    fn nullable(self, s: Option<&str>) -> Self {
        match s {
            Some(s) => self.str(s),
            None => self.i16(-1),
        }
    }
    fn array<T>(self, items: &[T], f: impl Fn(W, &T) -> W) -> Self {
        let mut w = self.i32(items.len() as i32);
        for item in items {
            w = f(w, item);
        }
        w
    }
    /// A request frame: header v1 (key, version, correlation id, client id), then this body.
    fn frame(self, key: ApiKey, version: i16) -> Bytes {
        let mut f = W::default()
            .i16(key as i16)
            .i16(version)
            .i32(7)
            .str("old-client")
            .0;
        f.put_slice(&self.0);
        f.freeze()
    }
}

/// Reads old-version response bytes, field by field; panics (fails the test) on a short read.
struct R(Bytes);

impl R {
    fn take(&mut self, n: usize) -> Bytes {
        assert!(self.0.len() >= n, "response ends early");
        self.0.split_to(n)
    }
    fn i8(&mut self) -> i8 {
        self.take(1)[0] as i8
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2)[..].try_into().unwrap())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4)[..].try_into().unwrap())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8)[..].try_into().unwrap())
    }
    fn nullable(&mut self) -> Option<String> {
        let len = self.i16();
        (len >= 0).then(|| String::from_utf8(self.take(len as usize).to_vec()).unwrap())
    }
    fn str(&mut self) -> String {
        self.nullable().expect("a non-null string")
    }
    fn array<T>(&mut self, mut f: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let n = self.i32();
        (0..n).map(|_| f(self)).collect()
    }
}

fn decode(frame: Bytes) -> RequestKind {
    match decode_request(frame) {
        Ok(Decoded::Request(r)) => {
            assert_eq!(r.header.correlation_id, 7);
            assert_eq!(r.header.client_id.as_deref(), Some("old-client"));
            r.body
        }
        other => panic!("not decoded: {other:?}"),
    }
}

/// The response body after the size prefix and the v0 header (correlation id 7).
fn encoded(key: ApiKey, version: i16, body: ResponseKind) -> R {
    let frame = encode_response(key, version, 7, &body).unwrap();
    let mut r = R(frame);
    let size = r.i32();
    assert_eq!(size as usize, r.0.len());
    assert_eq!(r.i32(), 7, "correlation id");
    r
}

/// Every prefix of a request frame (past the fixed header fields) is refused, as is the
/// whole frame with one more byte (a translated body is read to its end, so that a stray
/// byte can never be taken for a field the old version lacks); none panics.
fn refuses_every_prefix(frame: &Bytes) {
    refuses_prefixes(frame);
    let mut longer = frame.to_vec();
    longer.push(0);
    assert!(matches!(
        decode_request(Bytes::from(longer)),
        Err(DecodeError::Malformed { .. })
    ));
}

/// Every prefix of a request frame, past the fixed header fields, is refused.
fn refuses_prefixes(frame: &Bytes) {
    for cut in 8..frame.len() {
        assert!(
            matches!(
                decode_request(frame.slice(..cut)),
                Err(DecodeError::Malformed { .. })
            ),
            "prefix of {cut} of {} bytes accepted",
            frame.len()
        );
    }
}

#[derive(Debug, Clone)]
struct Part {
    index: i32,
    offset: i64,
    stamp: i64,
    metadata: Option<String>,
}

fn topics() -> impl Strategy<Value = Vec<(String, Vec<Part>)>> {
    let part = (
        0..1000i32,
        -2..i64::MAX,
        any::<i64>(),
        proptest::option::of("[ -~]{0,20}"),
    )
        .prop_map(|(index, offset, stamp, metadata)| Part {
            index,
            offset,
            stamp,
            metadata,
        });
    proptest::collection::vec(
        (
            "[a-zA-Z0-9._-]{1,30}",
            proptest::collection::vec(part, 0..4),
        ),
        0..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// ListOffsets v0: replica_id, topics [name, partitions [partition_index, timestamp,
    /// max_num_offsets]].
    #[test]
    fn list_offsets_v0_request(replica in -1..3i32, topics in topics()) {
        let frame = W::default()
            .i32(replica)
            .array(&topics, |w, (name, parts)| {
                w.str(name).array(parts, |w, p| w.i32(p.index).i64(p.stamp).i32(1))
            })
            .frame(ApiKey::ListOffsets, 0);
        let RequestKind::ListOffsets(req) = decode(frame.clone()) else { panic!() };
        prop_assert_eq!(req.replica_id.0, replica);
        prop_assert_eq!(req.topics.len(), topics.len());
        for (t, (name, parts)) in req.topics.iter().zip(&topics) {
            prop_assert_eq!(t.name.0.as_str(), name.as_str());
            let got: Vec<(i32, i64)> =
                t.partitions.iter().map(|p| (p.partition_index, p.timestamp)).collect();
            let want: Vec<(i32, i64)> = parts.iter().map(|p| (p.index, p.stamp)).collect();
            prop_assert_eq!(got, want);
        }
        refuses_every_prefix(&frame);
    }

    /// OffsetCommit v0: group_id, topics [name, partitions [partition_index,
    /// committed_offset, committed_metadata]]; v1 adds generation_id and member_id after the
    /// group, and commit_timestamp after each offset.
    #[test]
    fn offset_commit_v0_v1_request(v in 0..2i16, generation in -1..100i32, topics in topics()) {
        let mut w = W::default().str("g");
        if v == 1 {
            w = w.i32(generation).str("member-1");
        }
        let frame = w
            .array(&topics, |w, (name, parts)| {
                w.str(name).array(parts, |w, p| {
                    let w = w.i32(p.index).i64(p.offset);
                    let w = if v == 1 { w.i64(p.stamp) } else { w };
                    w.nullable(p.metadata.as_deref())
                })
            })
            .frame(ApiKey::OffsetCommit, v);
        let RequestKind::OffsetCommit(req) = decode(frame.clone()) else { panic!() };
        prop_assert_eq!(req.group_id.0.as_str(), "g");
        // v0 is a commit outside any generation, as Kafka's simple commits.
        let (want_generation, want_member) = if v == 1 { (generation, "member-1") } else { (-1, "") };
        prop_assert_eq!(req.generation_id_or_member_epoch, want_generation);
        prop_assert_eq!(req.member_id.as_str(), want_member);
        prop_assert_eq!(req.retention_time_ms, -1);
        for (t, (name, parts)) in req.topics.iter().zip(&topics) {
            prop_assert_eq!(t.name.0.as_str(), name.as_str());
            prop_assert_eq!(t.partitions.len(), parts.len());
            for (p, want) in t.partitions.iter().zip(parts) {
                prop_assert_eq!(p.partition_index, want.index);
                prop_assert_eq!(p.committed_offset, want.offset);
                prop_assert_eq!(p.committed_leader_epoch, -1);
                prop_assert_eq!(p.committed_metadata.as_deref(), want.metadata.as_deref());
            }
        }
        refuses_every_prefix(&frame);
    }

    /// OffsetFetch v0 is v1's bytes: group_id, topics [name, partition_indexes].
    #[test]
    fn offset_fetch_v0_request(topics in topics()) {
        let frame = W::default()
            .str("g")
            .array(&topics, |w, (name, parts)| w.str(name).array(parts, |w, p| w.i32(p.index)))
            .frame(ApiKey::OffsetFetch, 0);
        let RequestKind::OffsetFetch(req) = decode(frame.clone()) else { panic!() };
        prop_assert_eq!(req.group_id.0.as_str(), "g");
        let got = req.topics.unwrap_or_default();
        prop_assert_eq!(got.len(), topics.len());
        for (t, (name, parts)) in got.iter().zip(&topics) {
            prop_assert_eq!(t.name.0.as_str(), name.as_str());
            let want: Vec<i32> = parts.iter().map(|p| p.index).collect();
            prop_assert_eq!(&t.partition_indexes, &want);
        }
        refuses_every_prefix(&frame);
    }

    /// CreateTopics v0: topics [name, num_partitions, replication_factor, assignments
    /// [partition_index, broker_ids], configs [name, value]], timeout_ms; v1 adds
    /// validate_only.
    #[test]
    fn create_topics_v0_v1_request(v in 0..2i16, validate in any::<bool>(), topics in topics()) {
        let w = W::default()
            .array(&topics, |w, (name, parts)| {
                w.str(name)
                    .i32(parts.len() as i32)
                    .i16(1)
                    .array(parts, |w, p| w.i32(p.index).array(&[1, 2], |w, b| w.i32(*b)))
                    .array(parts, |w, p| w.str("retention.ms").nullable(p.metadata.as_deref()))
            })
            .i32(5000);
        let frame = if v == 1 { w.i8(i8::from(validate)) } else { w }.frame(ApiKey::CreateTopics, v);
        let RequestKind::CreateTopics(req) = decode(frame.clone()) else { panic!() };
        prop_assert_eq!(req.timeout_ms, 5000);
        prop_assert_eq!(req.validate_only, v == 1 && validate);
        prop_assert_eq!(req.topics.len(), topics.len());
        for (t, (name, parts)) in req.topics.iter().zip(&topics) {
            prop_assert_eq!(t.name.0.as_str(), name.as_str());
            prop_assert_eq!(t.num_partitions, parts.len() as i32);
            prop_assert_eq!(t.replication_factor, 1);
            prop_assert_eq!(t.assignments.len(), parts.len());
            for (a, p) in t.assignments.iter().zip(parts) {
                prop_assert_eq!(a.partition_index, p.index);
                prop_assert_eq!(a.broker_ids.iter().map(|b| b.0).collect::<Vec<_>>(), vec![1, 2]);
            }
            for (c, p) in t.configs.iter().zip(parts) {
                prop_assert_eq!(c.name.as_str(), "retention.ms");
                prop_assert_eq!(c.value.as_deref(), p.metadata.as_deref());
            }
        }
        refuses_every_prefix(&frame);
    }

    /// DeleteTopics v0 is v1's bytes: topic_names, timeout_ms.
    #[test]
    fn delete_topics_v0_request(topics in topics()) {
        let names: Vec<&str> = topics.iter().map(|(n, _)| n.as_str()).collect();
        let frame = W::default()
            .array(&names, |w, n| w.str(n))
            .i32(3000)
            .frame(ApiKey::DeleteTopics, 0);
        let RequestKind::DeleteTopics(req) = decode(frame.clone()) else { panic!() };
        prop_assert_eq!(req.timeout_ms, 3000);
        let got: Vec<&str> = req.topic_names.iter().map(|n| n.0.as_str()).collect();
        prop_assert_eq!(got, names);
        refuses_every_prefix(&frame);
    }

    /// DescribeConfigs v0: resources [resource_type, resource_name, configuration_keys
    /// (nullable)]; v1 added include_synonyms.
    #[test]
    fn describe_configs_v0_request(topics in topics(), all_keys in any::<bool>()) {
        let frame = W::default()
            .array(&topics, |w, (name, _)| {
                let w = w.i8(2).str(name);
                if all_keys { w.i32(-1) } else { w.array(&["retention.ms"], |w, k| w.str(k)) }
            })
            .frame(ApiKey::DescribeConfigs, 0);
        let RequestKind::DescribeConfigs(req) = decode(frame.clone()) else { panic!() };
        prop_assert!(!req.include_synonyms);
        prop_assert_eq!(req.resources.len(), topics.len());
        for (r, (name, _)) in req.resources.iter().zip(&topics) {
            prop_assert_eq!(r.resource_type, 2);
            prop_assert_eq!(r.resource_name.as_str(), name.as_str());
            prop_assert_eq!(r.configuration_keys.is_none(), all_keys);
        }
        refuses_every_prefix(&frame);
    }
}

/// JoinGroup v0 and v1 are still in the codec: group_id, session_timeout_ms,
/// rebalance_timeout_ms (v1), member_id, protocol_type, protocols [name, metadata]. Written
/// as Sarama 1.22 writes v1, they decode, and every prefix is refused.
#[test]
fn join_group_v0_v1_request() {
    for v in 0..2 {
        let mut w = W::default().str("group").i32(10_000);
        if v == 1 {
            w = w.i32(30_000);
        }
        let frame = w
            .str("")
            .str("consumer")
            .array(&["range", "roundrobin"], |w, name| {
                w.str(name).i32(2).i16(0)
            })
            .frame(ApiKey::JoinGroup, v);
        let RequestKind::JoinGroup(req) = decode(frame.clone()) else {
            panic!()
        };
        assert_eq!(req.group_id.0.as_str(), "group");
        assert_eq!(req.session_timeout_ms, 10_000);
        if v == 1 {
            assert_eq!(req.rebalance_timeout_ms, 30_000);
        }
        assert_eq!(req.protocol_type.as_str(), "consumer");
        let names: Vec<&str> = req.protocols.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["range", "roundrobin"]);
        assert!(req.protocols.iter().all(|p| p.metadata.as_ref() == [0, 0]));
        // Through the codec, as every version it decodes: trailing bytes are not checked.
        refuses_prefixes(&frame);
        // A protocol count that lies is refused before anything is allocated for it.
        let mut lying = frame.to_vec();
        let count_at = lying.len() - (2 + 5 + 4 + 2) - (2 + 10 + 4 + 2) - 4;
        lying[count_at..count_at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            decode_request(Bytes::from(lying)),
            Err(DecodeError::Malformed { .. })
        ));
    }
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// ListOffsets v0 response: topics [name, partitions [partition_index, error_code,
/// old_style_offsets [int64]]], no throttle time. The one offset v1 would give, or none.
#[test]
fn list_offsets_v0_response() {
    let body = ListOffsetsResponse::default()
        .with_throttle_time_ms(9)
        .with_topics(vec![
            ListOffsetsTopicResponse::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(0)
                        .with_timestamp(-1)
                        .with_offset(42),
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(1)
                        .with_offset(-1),
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(2)
                        .with_error_code(3)
                        .with_offset(-1),
                ]),
        ]);
    let mut r = encoded(ApiKey::ListOffsets, 0, ResponseKind::ListOffsets(body));
    let topics = r.array(|r| {
        let name = r.str();
        let parts = r.array(|r| (r.i32(), r.i16(), r.array(|r| r.i64())));
        (name, parts)
    });
    assert!(r.0.is_empty());
    assert_eq!(
        topics,
        vec![(
            "t".to_owned(),
            vec![(0, 0, vec![42]), (1, 0, vec![]), (2, 3, vec![])]
        )]
    );
}

/// OffsetCommit v0 and v1 answer v2's bytes: topics [name, partitions [partition_index,
/// error_code]], no throttle time (added in v3).
#[test]
fn offset_commit_v0_v1_response() {
    use kafka_protocol::messages::offset_commit_response::*;
    for v in 0..2 {
        let body = OffsetCommitResponse::default()
            .with_throttle_time_ms(9)
            .with_topics(vec![
                OffsetCommitResponseTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(3)
                            .with_error_code(22),
                    ]),
            ]);
        let mut r = encoded(ApiKey::OffsetCommit, v, ResponseKind::OffsetCommit(body));
        let topics = r.array(|r| (r.str(), r.array(|r| (r.i32(), r.i16()))));
        assert!(r.0.is_empty());
        assert_eq!(topics, vec![("t".to_owned(), vec![(3, 22)])]);
    }
}

/// OffsetFetch v0 answers v1's bytes: topics [name, partitions [partition_index,
/// committed_offset, metadata, error_code]], no top-level error (v2) or throttle (v3).
#[test]
fn offset_fetch_v0_response() {
    use kafka_protocol::messages::offset_fetch_response::*;
    let body = OffsetFetchResponse::default()
        .with_error_code(16)
        .with_topics(vec![
            OffsetFetchResponseTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(1)
                        .with_committed_offset(17)
                        .with_metadata(Some(StrBytes::from_static_str("m")))
                        .with_error_code(0),
                ]),
        ]);
    let mut r = encoded(ApiKey::OffsetFetch, 0, ResponseKind::OffsetFetch(body));
    let topics = r.array(|r| {
        let name = r.str();
        (name, r.array(|r| (r.i32(), r.i64(), r.nullable(), r.i16())))
    });
    assert!(r.0.is_empty());
    assert_eq!(
        topics,
        vec![("t".to_owned(), vec![(1, 17, Some("m".to_owned()), 0)])]
    );
}

fn create_topics_body() -> CreateTopicsResponse {
    use kafka_protocol::messages::create_topics_response::*;
    CreateTopicsResponse::default()
        .with_throttle_time_ms(9)
        .with_topics(vec![
            CreatableTopicResult::default()
                .with_name(topic_name("a"))
                .with_error_code(0)
                .with_error_message(None),
            CreatableTopicResult::default()
                .with_name(topic_name("b"))
                .with_error_code(36)
                .with_error_message(Some(StrBytes::from_static_str("exists"))),
        ])
}

/// CreateTopics v0 response: topics [name, error_code]; v1 adds error_message; neither has
/// the throttle time (v2).
#[test]
fn create_topics_v0_v1_response() {
    let mut r = encoded(
        ApiKey::CreateTopics,
        0,
        ResponseKind::CreateTopics(create_topics_body()),
    );
    let topics = r.array(|r| (r.str(), r.i16()));
    assert!(r.0.is_empty());
    assert_eq!(topics, vec![("a".to_owned(), 0), ("b".to_owned(), 36)]);

    let mut r = encoded(
        ApiKey::CreateTopics,
        1,
        ResponseKind::CreateTopics(create_topics_body()),
    );
    let topics = r.array(|r| (r.str(), r.i16(), r.nullable()));
    assert!(r.0.is_empty());
    assert_eq!(
        topics,
        vec![
            ("a".to_owned(), 0, None),
            ("b".to_owned(), 36, Some("exists".to_owned()))
        ]
    );
}

/// DeleteTopics v0 response: responses [name, error_code], no throttle time (v1).
#[test]
fn delete_topics_v0_response() {
    use kafka_protocol::messages::delete_topics_response::*;
    let body = DeleteTopicsResponse::default()
        .with_throttle_time_ms(9)
        .with_responses(vec![
            DeletableTopicResult::default()
                .with_name(Some(topic_name("gone")))
                .with_error_code(3),
        ]);
    let mut r = encoded(ApiKey::DeleteTopics, 0, ResponseKind::DeleteTopics(body));
    let topics = r.array(|r| (r.str(), r.i16()));
    assert!(r.0.is_empty());
    assert_eq!(topics, vec![("gone".to_owned(), 3)]);
}

/// DescribeConfigs v0 response: throttle_time_ms, results [error_code, error_message,
/// resource_type, resource_name, configs [name, value, read_only, is_default,
/// is_sensitive]]: `is_default` where v1 has `config_source`, and no synonyms.
#[test]
fn describe_configs_v0_response() {
    let config = |name: &'static str, value: Option<&'static str>, source: i8, sensitive| {
        DescribeConfigsResourceResult::default()
            .with_name(StrBytes::from_static_str(name))
            .with_value(value.map(StrBytes::from_static_str))
            .with_config_source(source)
            .with_is_sensitive(sensitive)
    };
    let body = DescribeConfigsResponse::default()
        .with_throttle_time_ms(9)
        .with_results(vec![
            DescribeConfigsResult::default()
                .with_error_message(None)
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t"))
                .with_configs(vec![
                    config("retention.ms", Some("1000"), 1, false),
                    config("cleanup.policy", Some("delete"), 5, false),
                    config("sasl.jaas.config", None, 4, true).with_read_only(true),
                ]),
            DescribeConfigsResult::default()
                .with_error_code(3)
                .with_error_message(Some(StrBytes::from_static_str("unknown topic")))
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("nope")),
        ]);
    let mut r = encoded(
        ApiKey::DescribeConfigs,
        0,
        ResponseKind::DescribeConfigs(body),
    );
    assert_eq!(r.i32(), 9, "throttle_time_ms");
    let results = r.array(|r| {
        let head = (r.i16(), r.nullable(), r.i8(), r.str());
        let configs = r.array(|r| (r.str(), r.nullable(), r.i8(), r.i8(), r.i8()));
        (head, configs)
    });
    assert!(r.0.is_empty());
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        results,
        vec![
            (
                (0, None, 2, "t".to_owned()),
                vec![
                    ("retention.ms".to_owned(), s("1000"), 0, 0, 0),
                    ("cleanup.policy".to_owned(), s("delete"), 0, 1, 0),
                    ("sasl.jaas.config".to_owned(), None, 1, 0, 1),
                ]
            ),
            ((3, s("unknown topic"), 2, "nope".to_owned()), vec![]),
        ]
    );
}

/// KAFKA-18659: Produce is advertised from v0 (librdkafka before 2.11 compresses only then)
/// but v0-2 are refused like any unserved version, and so are Fetch v0-3: both carry magic 0
/// and 1 message sets.
#[test]
fn produce_is_advertised_from_v0_and_served_from_v3() {
    let produce = supported(ApiKey::Produce).unwrap();
    assert_eq!((produce.advertised_min, produce.min), (0, 3));
    let advertised = crate::codec::api_versions_body(0);
    let entry = advertised
        .api_keys
        .iter()
        .find(|a| a.api_key == ApiKey::Produce as i16)
        .unwrap();
    assert_eq!((entry.min_version, entry.max_version), (0, produce.max));
    // Every other API advertises what it serves.
    for a in SUPPORTED_APIS.iter().filter(|a| a.key != ApiKey::Produce) {
        assert_eq!(a.advertised_min, a.min, "{:?}", a.key);
    }
    for (key, v) in [
        (ApiKey::Produce, 0),
        (ApiKey::Produce, 2),
        (ApiKey::Fetch, 3),
    ] {
        let frame = W::default().i16(1).i32(1000).i32(0).frame(key, v);
        assert!(
            matches!(
                decode_request(frame),
                Err(DecodeError::UnsupportedVersion { version, .. }) if version == v
            ),
            "{key:?} v{v}"
        );
    }
}

/// The versions Kafka 4 removed and clients still send are served on the client listener.
#[test]
fn kip_896_versions_served() {
    for (key, oldest) in [
        (ApiKey::JoinGroup, 0),
        (ApiKey::SyncGroup, 0),
        (ApiKey::Heartbeat, 0),
        (ApiKey::LeaveGroup, 0),
        (ApiKey::OffsetCommit, 0),
        (ApiKey::OffsetFetch, 0),
        (ApiKey::ListOffsets, 0),
        (ApiKey::Metadata, 0),
        (ApiKey::FindCoordinator, 0),
        (ApiKey::DescribeConfigs, 0),
        (ApiKey::CreateTopics, 0),
        (ApiKey::DeleteTopics, 0),
    ] {
        assert_eq!(supported(key).unwrap().min, oldest, "{key:?}");
    }
}
