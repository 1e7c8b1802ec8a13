//! The request versions Kafka 4.0 removed (KIP-896) that old clients still send, against the
//! real broker over raw sockets with hand-built frames (independent of Strata's codec): each
//! is answered in its own version's layout, with the same outcome a new version gets. Old
//! message formats (Produce v0-2, Fetch v0-3) close the connection as Kafka 4 does, Produce
//! is advertised from v0 (KAFKA-18659), and a truncated old frame closes only its own
//! connection.

use bytes::Bytes;
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_tests::Broker;
use strata_tests::wire::{self, header, put_str, recv, send};

const TOPIC: &str = "old-versions";
const RECORDS: usize = 5;

/// Reads a response field by field; a short response fails the test.
struct Resp {
    bytes: Vec<u8>,
    at: usize,
}

impl Resp {
    /// After the correlation id (response header v0), which must be `corr`.
    fn new(bytes: Vec<u8>, corr: i32) -> Self {
        let mut r = Resp { bytes, at: 0 };
        assert_eq!(r.i32(), corr, "correlation id");
        r
    }
    fn take(&mut self, n: usize) -> &[u8] {
        assert!(self.at + n <= self.bytes.len(), "response ends early");
        self.at += n;
        &self.bytes[self.at - n..self.at]
    }
    fn i8(&mut self) -> i8 {
        self.take(1)[0] as i8
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().unwrap())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
    fn nullable(&mut self) -> Option<String> {
        let len = self.i16();
        (len >= 0).then(|| String::from_utf8(self.take(len as usize).to_vec()).unwrap())
    }
    fn str(&mut self) -> String {
        self.nullable().expect("a non-null string")
    }
    fn bytes(&mut self) -> Vec<u8> {
        let len = self.i32();
        self.take(len as usize).to_vec()
    }
    fn array<T>(&mut self, mut f: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let n = self.i32();
        (0..n).map(|_| f(self)).collect()
    }
    fn end(&self) {
        assert_eq!(self.at, self.bytes.len(), "bytes left after the last field");
    }
}

/// Sends one request on a new connection and reads its response.
fn call(b: &Broker, body: &[u8], corr: i32) -> Resp {
    let mut s = wire::connect(b.port());
    send(&mut s, body);
    let r = recv(&mut s).unwrap_or_else(|| panic!("no response:\n{}", b.stderr_tail()));
    Resp::new(r, corr)
}

fn i32s(v: &mut Vec<u8>, xs: &[i32]) {
    for x in xs {
        v.extend_from_slice(&x.to_be_bytes());
    }
}

fn records() -> Vec<u8> {
    let records: Vec<SimpleRecord> = (0..RECORDS)
        .map(|i| SimpleRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            timestamp: 1_700_000_000_000 + i as i64,
            headers: vec![],
        })
        .collect();
    encode_batch(0, &records).to_vec()
}

/// CreateTopics v0: topics [name, num_partitions, replication_factor, assignments, configs],
/// timeout_ms. Answer: topics [name, error_code].
fn create_topics_v0(b: &Broker, name: &str) -> Vec<(String, i16)> {
    let mut body = header(19, 0, 1);
    i32s(&mut body, &[1]);
    put_str(&mut body, name);
    i32s(&mut body, &[2]);
    body.extend_from_slice(&1i16.to_be_bytes());
    i32s(&mut body, &[0, 1]); // no assignments; one config
    put_str(&mut body, "retention.ms");
    put_str(&mut body, "3600000");
    i32s(&mut body, &[10_000]);
    let mut r = call(b, &body, 1);
    let topics = r.array(|r| (r.str(), r.i16()));
    r.end();
    topics
}

/// ListOffsets v0 for partition 0 at `timestamp`: replica_id, topics [name, partitions
/// [partition, timestamp, max_num_offsets]]. Answer: topics [name, partitions [partition,
/// error_code, old_style_offsets]].
fn list_offsets_v0(b: &Broker, timestamp: i64) -> (i16, Vec<i64>) {
    let mut body = header(2, 0, 2);
    i32s(&mut body, &[-1, 1]);
    put_str(&mut body, TOPIC);
    i32s(&mut body, &[1, 0]);
    body.extend_from_slice(&timestamp.to_be_bytes());
    i32s(&mut body, &[1]);
    let mut r = call(b, &body, 2);
    let topics = r.array(|r| {
        let name = r.str();
        let parts = r.array(|r| (r.i32(), r.i16(), r.array(|r| r.i64())));
        (name, parts)
    });
    r.end();
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].0, TOPIC);
    let (partition, code, offsets) = topics[0].1[0].clone();
    assert_eq!(partition, 0);
    (code, offsets)
}

/// OffsetCommit v0 (`generation` None) or v1 of `offset` for partition 0. Answer: topics
/// [name, partitions [partition, error_code]].
fn offset_commit(b: &Broker, group: &str, generation: Option<(i32, &str)>, offset: i64) -> i16 {
    let mut body = header(8, i16::from(generation.is_some()), 3);
    put_str(&mut body, group);
    if let Some((generation, member)) = generation {
        i32s(&mut body, &[generation]);
        put_str(&mut body, member);
    }
    i32s(&mut body, &[1]);
    put_str(&mut body, TOPIC);
    i32s(&mut body, &[1, 0]);
    body.extend_from_slice(&offset.to_be_bytes());
    if generation.is_some() {
        body.extend_from_slice(&(-1i64).to_be_bytes()); // commit_timestamp
    }
    put_str(&mut body, "meta");
    let mut r = call(b, &body, 3);
    let topics = r.array(|r| (r.str(), r.array(|r| (r.i32(), r.i16()))));
    r.end();
    assert_eq!(
        topics,
        vec![(TOPIC.to_owned(), vec![(0, topics[0].1[0].1)])]
    );
    topics[0].1[0].1
}

/// OffsetFetch v0 for partition 0: group_id, topics [name, partitions]. Answer: topics
/// [name, partitions [partition, offset, metadata, error_code]].
fn offset_fetch_v0(b: &Broker, group: &str) -> (i64, Option<String>, i16) {
    let mut body = header(9, 0, 4);
    put_str(&mut body, group);
    i32s(&mut body, &[1]);
    put_str(&mut body, TOPIC);
    i32s(&mut body, &[1, 0]);
    let mut r = call(b, &body, 4);
    let topics = r.array(|r| {
        let name = r.str();
        (name, r.array(|r| (r.i32(), r.i64(), r.nullable(), r.i16())))
    });
    r.end();
    let (partition, offset, metadata, code) = topics[0].1[0].clone();
    assert_eq!((topics[0].0.as_str(), partition), (TOPIC, 0));
    (offset, metadata, code)
}

#[test]
fn old_versions_are_answered_in_their_own_layout() {
    let b = Broker::start(&[("group.initial.rebalance.delay.ms", "0")]).expect("broker");

    // ApiVersions v0: Produce from v0 (KAFKA-18659); the KIP-896 versions from v0.
    let mut r = call(&b, &header(18, 0, 9), 9);
    assert_eq!(r.i16(), 0);
    let ranges = r.array(|r| (r.i16(), r.i16(), r.i16()));
    r.end();
    let min = |key: i16| ranges.iter().find(|a| a.0 == key).map(|a| a.1);
    assert_eq!(min(0), Some(0), "Produce advertised from v0");
    assert_eq!(min(1), Some(4), "Fetch from v4");
    for key in [2, 3, 8, 9, 10, 11, 12, 13, 14, 19, 20, 32] {
        assert_eq!(min(key), Some(0), "API {key} from v0");
    }

    // CreateTopics v0, then v1 (validate only, with an error message slot) for an existing
    // name.
    assert_eq!(create_topics_v0(&b, TOPIC), vec![(TOPIC.to_owned(), 0)]);
    assert_eq!(
        create_topics_v0(&b, TOPIC),
        vec![(TOPIC.to_owned(), 36)],
        "TOPIC_ALREADY_EXISTS"
    );
    let mut body = header(19, 1, 5);
    i32s(&mut body, &[1]);
    put_str(&mut body, "validate-me");
    i32s(&mut body, &[1]);
    body.extend_from_slice(&1i16.to_be_bytes());
    i32s(&mut body, &[0, 0, 5000]);
    body.push(1); // validate_only
    let mut r = call(&b, &body, 5);
    let topics = r.array(|r| (r.str(), r.i16(), r.nullable()));
    r.end();
    assert_eq!(topics.len(), 1);
    assert_eq!((topics[0].0.as_str(), topics[0].1), ("validate-me", 0));

    let mut s = wire::connect(b.port());
    send(&mut s, &wire::produce_request(7, TOPIC, &records()));
    let produced = recv(&mut s).expect("produce response");
    assert_eq!(wire::produce_result(&produced, TOPIC), (0, 0));

    // ListOffsets v0: the one offset v1 would answer, in old_style_offsets.
    assert_eq!(list_offsets_v0(&b, -1), (0, vec![RECORDS as i64]));
    assert_eq!(list_offsets_v0(&b, -2), (0, vec![0]));
    assert_eq!(list_offsets_v0(&b, 1_700_000_000_002), (0, vec![2]));
    assert_eq!(list_offsets_v0(&b, 1_800_000_000_000), (0, vec![]));

    // OffsetCommit v0 is a simple commit (no generation); OffsetFetch v0 reads it back; v1
    // with generation -1 is one too.
    assert_eq!(offset_commit(&b, "old-simple", None, 3), 0);
    assert_eq!(
        offset_fetch_v0(&b, "old-simple"),
        (3, Some("meta".into()), 0)
    );
    assert_eq!(offset_commit(&b, "old-simple", Some((-1, "")), 4), 0);
    assert_eq!(
        offset_fetch_v0(&b, "old-simple"),
        (4, Some("meta".into()), 0)
    );
    assert_eq!(
        offset_fetch_v0(&b, "never-committed"),
        (-1, Some(String::new()), 0)
    );

    // DescribeConfigs v0: is_default where v1 has config_source, and no synonyms.
    let mut body = header(32, 0, 6);
    i32s(&mut body, &[1]);
    body.push(2); // TOPIC
    put_str(&mut body, TOPIC);
    i32s(&mut body, &[-1]); // every key
    let mut r = call(&b, &body, 6);
    let _throttle = r.i32();
    let results = r.array(|r| {
        let head = (r.i16(), r.nullable(), r.i8(), r.str());
        let configs = r.array(|r| (r.str(), r.nullable(), r.i8(), r.i8(), r.i8()));
        (head, configs)
    });
    r.end();
    assert_eq!(results.len(), 1);
    let ((code, _, kind, name), configs) = &results[0];
    assert_eq!((*code, *kind, name.as_str()), (0, 2, TOPIC));
    let find = |key: &str| configs.iter().find(|c| c.0 == key).cloned();
    let retention = find("retention.ms").expect("retention.ms listed");
    assert_eq!((retention.1.as_deref(), retention.3), (Some("3600000"), 0));
    let policy = find("cleanup.policy").expect("cleanup.policy listed");
    assert_eq!((policy.1.as_deref(), policy.3), (Some("delete"), 1));

    // JoinGroup v0 (no rebalance timeout: the session timeout serves), SyncGroup v0,
    // Heartbeat v0, OffsetCommit v1 in that generation, LeaveGroup v0.
    let mut body = header(11, 0, 7);
    put_str(&mut body, "old-group");
    i32s(&mut body, &[10_000]);
    put_str(&mut body, ""); // member id
    put_str(&mut body, "consumer");
    i32s(&mut body, &[1]);
    put_str(&mut body, "range");
    i32s(&mut body, &[3]);
    body.extend_from_slice(b"abc");
    let mut r = call(&b, &body, 7);
    let (code, generation, protocol, leader, member) =
        (r.i16(), r.i32(), r.str(), r.str(), r.str());
    let members = r.array(|r| (r.str(), r.bytes()));
    r.end();
    assert_eq!((code, generation, protocol.as_str()), (0, 1, "range"));
    assert_eq!(leader, member);
    assert_eq!(members, vec![(member.clone(), b"abc".to_vec())]);

    let mut body = header(14, 0, 8);
    put_str(&mut body, "old-group");
    i32s(&mut body, &[generation]);
    put_str(&mut body, &member);
    i32s(&mut body, &[1]);
    put_str(&mut body, &member);
    i32s(&mut body, &[2]);
    body.extend_from_slice(b"xy");
    let mut r = call(&b, &body, 8);
    assert_eq!((r.i16(), r.bytes()), (0, b"xy".to_vec()));
    r.end();

    let mut body = header(12, 0, 10);
    put_str(&mut body, "old-group");
    i32s(&mut body, &[generation]);
    put_str(&mut body, &member);
    let mut r = call(&b, &body, 10);
    assert_eq!(r.i16(), 0, "heartbeat");
    r.end();

    assert_eq!(
        offset_commit(&b, "old-group", Some((generation, &member)), 2),
        0
    );
    assert_eq!(
        offset_commit(&b, "old-group", Some((generation + 1, &member)), 2),
        22,
        "ILLEGAL_GENERATION"
    );
    assert_eq!(offset_fetch_v0(&b, "old-group").0, 2);

    let mut body = header(13, 0, 11);
    put_str(&mut body, "old-group");
    put_str(&mut body, &member);
    let mut r = call(&b, &body, 11);
    assert_eq!(r.i16(), 0, "leave");
    r.end();

    // DeleteTopics v0: topic_names, timeout_ms. Answer: responses [name, error_code].
    let mut body = header(20, 0, 12);
    i32s(&mut body, &[1]);
    put_str(&mut body, TOPIC);
    i32s(&mut body, &[10_000]);
    let mut r = call(&b, &body, 12);
    let gone = r.array(|r| (r.str(), r.i16()));
    r.end();
    assert_eq!(gone, vec![(TOPIC.to_owned(), 0)]);
}

#[test]
fn old_message_formats_and_truncated_old_frames_close_only_their_connection() {
    let b = Broker::start(&[]).expect("broker");
    let closes: Vec<(&str, Vec<u8>)> = vec![
        // Kafka 4 refuses these versions by closing the connection; so does Strata.
        ("Produce v2", {
            let mut body = header(0, 2, 1);
            body.extend_from_slice(&1i16.to_be_bytes());
            i32s(&mut body, &[1000, 0]);
            body
        }),
        ("Fetch v3", {
            let mut body = header(1, 3, 1);
            i32s(&mut body, &[-1, 100, 1, 1 << 20, 0]);
            body
        }),
        // An old version whose body ends inside its last partition.
        ("truncated ListOffsets v0", {
            let mut body = header(2, 0, 1);
            i32s(&mut body, &[-1, 1]);
            put_str(&mut body, "t");
            i32s(&mut body, &[1, 0]);
            body.extend_from_slice(&(-1i64).to_be_bytes()); // no max_num_offsets
            body
        }),
        ("truncated OffsetCommit v1", {
            let mut body = header(8, 1, 1);
            put_str(&mut body, "g");
            i32s(&mut body, &[1]);
            put_str(&mut body, "m");
            i32s(&mut body, &[1]);
            put_str(&mut body, "t");
            i32s(&mut body, &[1, 0]);
            body.extend_from_slice(&5i64.to_be_bytes()); // no commit_timestamp or metadata
            body
        }),
        ("OffsetCommit v0 with a lying count", {
            let mut body = header(8, 0, 1);
            put_str(&mut body, "g");
            i32s(&mut body, &[i32::MAX]);
            body
        }),
        ("CreateTopics v0 with a trailing byte", {
            let mut body = header(19, 0, 1);
            i32s(&mut body, &[0, 1000]);
            body.push(1);
            body
        }),
    ];
    for (what, body) in closes {
        let mut s = wire::connect(b.port());
        send(&mut s, &body);
        wire::assert_closed(&mut s, what);
        // The broker still serves, on a new connection.
        let mut r = call(&b, &header(18, 0, 99), 99);
        assert_eq!(r.i16(), 0, "ApiVersions after {what}");
    }
}
