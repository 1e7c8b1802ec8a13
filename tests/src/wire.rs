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

/// The correlation id at the start of a response (header v0).
#[must_use]
pub fn correlation_id(resp: &[u8]) -> i32 {
    i32::from_be_bytes([resp[0], resp[1], resp[2], resp[3]])
}

/// A Produce v3 request (acks=all) of `records` to `topic` partition 0.
#[must_use]
pub fn produce_request(corr: i32, topic: &str, records: &[u8]) -> Vec<u8> {
    let mut body = header(0, 3, corr);
    body.extend_from_slice(&(-1i16).to_be_bytes()); // transactional id: null
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
