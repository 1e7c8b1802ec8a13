//! Hand-built Kafka frames over a plain `TcpStream`, for tests that must not depend on
//! Strata's own codec (a shared codec bug would otherwise cancel itself out) or that need
//! exact control over bytes and pipelining.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Connects to 127.0.0.1:`port` with a 10 s read timeout.
///
/// # Panics
///
/// If the connection fails.
#[must_use]
pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set timeout");
    s
}

/// Request header v1: api key, version, correlation id, client id "test".
#[must_use]
pub fn header(api: i16, version: i16, corr: i32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&api.to_be_bytes());
    v.extend_from_slice(&version.to_be_bytes());
    v.extend_from_slice(&corr.to_be_bytes());
    put_str(&mut v, "test");
    v
}

/// Appends a classic (int16-length) string.
pub fn put_str(v: &mut Vec<u8>, s: &str) {
    v.extend_from_slice(&(s.len() as i16).to_be_bytes());
    v.extend_from_slice(s.as_bytes());
}

/// Prefixes `body` with its size and writes it.
///
/// # Panics
///
/// If the write fails.
pub fn send(s: &mut TcpStream, body: &[u8]) {
    let mut f = (body.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    s.write_all(&f).expect("write");
}

/// Reads one response frame, or `None` when the broker closed the connection.
pub fn recv(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(len)).ok()?];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// Asserts that the broker closed the connection (end of stream or a reset) rather than
/// answering; `what` names the case in the failure.
///
/// # Panics
///
/// If the broker sent bytes, or the read timed out.
pub fn assert_closed(s: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("{what}: expected the broker to close the connection, got {other:?}"),
    }
}

/// The correlation id at the start of a response (header v0).
#[must_use]
pub fn correlation_id(resp: &[u8]) -> i32 {
    i32::from_be_bytes([resp[0], resp[1], resp[2], resp[3]])
}

/// A Produce v3 request (acks=all) of `records` to `topic` partition 0.
#[must_use]
pub fn produce_request(corr: i32, topic: &str, records: &[u8]) -> Vec<u8> {
    transactional_produce_request(corr, None, topic, records)
}

/// [`produce_request`] with a `transactional_id` (null for `None`).
#[must_use]
pub fn transactional_produce_request(
    corr: i32,
    transactional_id: Option<&str>,
    topic: &str,
    records: &[u8],
) -> Vec<u8> {
    let mut body = header(0, 3, corr);
    match transactional_id {
        Some(id) => put_str(&mut body, id),
        None => body.extend_from_slice(&(-1i16).to_be_bytes()),
    }
    body.extend_from_slice(&(-1i16).to_be_bytes()); // acks=all
    body.extend_from_slice(&5000i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut body, topic);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes()); // partition 0
    body.extend_from_slice(&(records.len() as i32).to_be_bytes());
    body.extend_from_slice(records);
    body
}

/// (error code, base offset) of the single partition in a Produce v3 response to `topic`.
#[must_use]
pub fn produce_result(resp: &[u8], topic: &str) -> (i16, i64) {
    // corr(4) topics(4) name(2+n) partitions(4) index(4) error(2) base_offset(8)
    let at = 4 + 4 + 2 + topic.len() + 4 + 4;
    let code = i16::from_be_bytes([resp[at], resp[at + 1]]);
    let base = i64::from_be_bytes(resp[at + 2..at + 10].try_into().expect("8 bytes"));
    (code, base)
}

/// A Metadata v4 request for one topic with auto-creation allowed.
#[must_use]
pub fn metadata_request(corr: i32, topic: &str) -> Vec<u8> {
    let mut body = header(3, 4, corr);
    body.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut body, topic);
    body.push(1); // allow_auto_topic_creation
    body
}

/// A Fetch v4 request for `topic` partition 0 at `offset`.
#[must_use]
pub fn fetch_request(
    corr: i32,
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
) -> Vec<u8> {
    let mut body = header(1, 4, corr);
    body.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    body.extend_from_slice(&max_wait_ms.to_be_bytes());
    body.extend_from_slice(&min_bytes.to_be_bytes());
    body.extend_from_slice(&(1i32 << 20).to_be_bytes()); // max bytes
    body.push(0); // read_uncommitted
    body.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut body, topic);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes()); // partition
    body.extend_from_slice(&offset.to_be_bytes());
    body.extend_from_slice(&(1i32 << 20).to_be_bytes()); // partition max bytes
    body
}

/// A ListOffsets v1 request for `topic` partition 0 at `timestamp` (-1 latest, -2 earliest).
#[must_use]
pub fn list_offsets_request(corr: i32, topic: &str, timestamp: i64) -> Vec<u8> {
    let mut body = header(2, 1, corr);
    body.extend_from_slice(&(-1i32).to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut body, topic);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&timestamp.to_be_bytes());
    body
}

/// (error code, offset) of the single partition in a ListOffsets v1 response to `topic`.
#[must_use]
pub fn list_offsets_result(resp: &[u8], topic: &str) -> (i16, i64) {
    // corr(4) topics(4) name(2+n) partitions(4) index(4) error(2) timestamp(8) offset(8)
    let at = 4 + 4 + 2 + topic.len() + 4 + 4;
    let code = i16::from_be_bytes([resp[at], resp[at + 1]]);
    let offset = i64::from_be_bytes(resp[at + 10..at + 18].try_into().expect("8 bytes"));
    (code, offset)
}

/// An InitProducerId v0 request (KIP-98): a null transactional id asks for an idempotent
/// producer id.
#[must_use]
pub fn init_producer_id_request(corr: i32, transactional_id: Option<&str>) -> Vec<u8> {
    let mut body = header(22, 0, corr);
    match transactional_id {
        Some(id) => put_str(&mut body, id),
        None => body.extend_from_slice(&(-1i16).to_be_bytes()),
    }
    body.extend_from_slice(&60_000i32.to_be_bytes()); // transaction timeout
    body
}

/// (error code, producer id, producer epoch) of an InitProducerId v0 response.
#[must_use]
pub fn init_producer_id_result(resp: &[u8]) -> (i16, i64, i16) {
    // corr(4) throttle(4) error(2) producer_id(8) epoch(2)
    let code = i16::from_be_bytes([resp[8], resp[9]]);
    let id = i64::from_be_bytes(resp[10..18].try_into().expect("8 bytes"));
    let epoch = i16::from_be_bytes([resp[18], resp[19]]);
    (code, id, epoch)
}

/// An InitProducerId v4 request (flexible, KIP-360 and KIP-588): `transactional_id`, the
/// transaction timeout, and the producer id and epoch the producer holds (-1, -1 for none).
#[must_use]
pub fn init_producer_id_v4_request(
    corr: i32,
    transactional_id: Option<&str>,
    timeout_ms: i32,
    producer_id: i64,
    epoch: i16,
) -> Vec<u8> {
    let mut body = header(22, 4, corr);
    body.push(0); // header tagged fields
    match transactional_id {
        Some(id) => {
            put_uvarint(&mut body, id.len() as u64 + 1);
            body.extend_from_slice(id.as_bytes());
        }
        None => body.push(0),
    }
    body.extend_from_slice(&timeout_ms.to_be_bytes());
    body.extend_from_slice(&producer_id.to_be_bytes());
    body.extend_from_slice(&epoch.to_be_bytes());
    body.push(0); // tagged fields
    body
}

/// (error code, producer id, producer epoch) of an InitProducerId v4 response.
#[must_use]
pub fn init_producer_id_v4_result(resp: &[u8]) -> (i16, i64, i16) {
    // corr(4) header-tags(1) throttle(4) error(2) producer_id(8) epoch(2)
    init_producer_id_result(&resp[1..])
}

/// Appends an unsigned varint.
fn put_uvarint(v: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        v.push((n as u8) | 0x80);
        n >>= 7;
    }
    v.push(n as u8);
}

// ---- Classic group APIs (non-flexible versions: JoinGroup v5, SyncGroup v3, Heartbeat v3) ----

/// Appends a nullable classic string.
fn put_opt_str(v: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(v, s),
        None => v.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

/// Reads a classic (int16-length) string at `*at`, advancing it.
fn take_str(resp: &[u8], at: &mut usize) -> String {
    let len = i16::from_be_bytes([resp[*at], resp[*at + 1]]);
    *at += 2;
    let Ok(len) = usize::try_from(len) else {
        return String::new(); // null
    };
    let s = String::from_utf8_lossy(&resp[*at..*at + len]).into_owned();
    *at += len;
    s
}

/// A JoinGroup v5 request with protocol type "consumer" and one protocol.
#[must_use]
#[allow(clippy::too_many_arguments)]
pub fn join_group_request(
    corr: i32,
    group: &str,
    member_id: &str,
    group_instance_id: Option<&str>,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocol: &str,
    metadata: &[u8],
) -> Vec<u8> {
    let mut body = header(11, 5, corr);
    put_str(&mut body, group);
    body.extend_from_slice(&session_timeout_ms.to_be_bytes());
    body.extend_from_slice(&rebalance_timeout_ms.to_be_bytes());
    put_str(&mut body, member_id);
    put_opt_str(&mut body, group_instance_id);
    put_str(&mut body, "consumer");
    body.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut body, protocol);
    body.extend_from_slice(&(metadata.len() as i32).to_be_bytes());
    body.extend_from_slice(metadata);
    body
}

/// A JoinGroup v5 response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResult {
    pub error: i16,
    pub generation_id: i32,
    pub protocol_name: String,
    pub leader: String,
    pub member_id: String,
    /// (member id, metadata) for the leader; empty for followers.
    pub members: Vec<(String, Vec<u8>)>,
}

/// Parses a JoinGroup v5 response.
#[must_use]
pub fn join_group_result(resp: &[u8]) -> JoinGroupResult {
    // corr(4) throttle(4) error(2) generation(4) protocol_name leader member_id members
    let error = i16::from_be_bytes([resp[8], resp[9]]);
    let generation_id = i32::from_be_bytes(resp[10..14].try_into().expect("4 bytes"));
    let mut at = 14;
    let protocol_name = take_str(resp, &mut at);
    let leader = take_str(resp, &mut at);
    let member_id = take_str(resp, &mut at);
    let n = i32::from_be_bytes(resp[at..at + 4].try_into().expect("4 bytes"));
    at += 4;
    let mut members = Vec::new();
    for _ in 0..n {
        let id = take_str(resp, &mut at);
        let _instance = take_str(resp, &mut at);
        let len = i32::from_be_bytes(resp[at..at + 4].try_into().expect("4 bytes"));
        at += 4;
        let len = usize::try_from(len).unwrap_or(0);
        members.push((id, resp[at..at + len].to_vec()));
        at += len;
    }
    JoinGroupResult {
        error,
        generation_id,
        protocol_name,
        leader,
        member_id,
        members,
    }
}

/// A SyncGroup v3 request (no group instance id).
#[must_use]
pub fn sync_group_request(
    corr: i32,
    group: &str,
    generation_id: i32,
    member_id: &str,
    assignments: &[(&str, &[u8])],
) -> Vec<u8> {
    let mut body = header(14, 3, corr);
    put_str(&mut body, group);
    body.extend_from_slice(&generation_id.to_be_bytes());
    put_str(&mut body, member_id);
    put_opt_str(&mut body, None);
    body.extend_from_slice(&(assignments.len() as i32).to_be_bytes());
    for (m, a) in assignments {
        put_str(&mut body, m);
        body.extend_from_slice(&(a.len() as i32).to_be_bytes());
        body.extend_from_slice(a);
    }
    body
}

/// (error code, assignment) of a SyncGroup v3 response.
#[must_use]
pub fn sync_group_result(resp: &[u8]) -> (i16, Vec<u8>) {
    // corr(4) throttle(4) error(2) assignment(bytes)
    let error = i16::from_be_bytes([resp[8], resp[9]]);
    let len = i32::from_be_bytes(resp[10..14].try_into().expect("4 bytes"));
    let len = usize::try_from(len).unwrap_or(0);
    (error, resp[14..14 + len].to_vec())
}

/// A Heartbeat v3 request.
#[must_use]
pub fn heartbeat_request(
    corr: i32,
    group: &str,
    generation_id: i32,
    member_id: &str,
    group_instance_id: Option<&str>,
) -> Vec<u8> {
    let mut body = header(12, 3, corr);
    put_str(&mut body, group);
    body.extend_from_slice(&generation_id.to_be_bytes());
    put_str(&mut body, member_id);
    put_opt_str(&mut body, group_instance_id);
    body
}

/// The error code of a Heartbeat v3 response: corr(4) throttle(4) error(2).
#[must_use]
pub fn heartbeat_result(resp: &[u8]) -> i16 {
    i16::from_be_bytes([resp[8], resp[9]])
}
