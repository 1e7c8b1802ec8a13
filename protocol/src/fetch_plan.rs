//! The zero-copy Fetch response plan (ARCHITECTURE.md decision 4).
//!
//! A Fetch response is encoded as a list of [`Piece`]s: encoded bytes (the size prefix, the
//! header and every field the codec writes) and, in place of each partition's record bytes,
//! the caller's file regions. The connection writer sends the bytes with `write` and the
//! regions with `sendfile`, so record bytes never pass through user space. The total size is
//! known before the first byte is written.
//!
//! # How the records' place is found
//!
//! The codec writes each partition's `records` field as a length prefix (INT32 below v12,
//! an unsigned varint of length + 1 from v12, KIP-482) followed by the bytes verbatim. We
//! encode the whole response once, with the codec, giving each partition that has regions a
//! small *marker* as its records: a per-response random 8-byte nonce followed by the
//! partition's ordinal (u32, big-endian). Then we count every occurrence of the nonce in the
//! encoded buffer. The codec wrote each marker contiguously, so each marker contributes one
//! occurrence at its start. If the count equals the number of markers, no other field (a
//! client-chosen topic name, say) contains the nonce, so every occurrence is a records field,
//! and the ordinal after it says whose. Each marker and its fixed-width prefix are then cut out
//! and replaced by the real prefix and the regions. If the count is off (a 2^-64 event per
//! field), a fresh nonce is drawn; after a few tries the caller falls back to copying.
//!
//! This keeps every byte of the layout (flexible versions, tagged fields, array counts) the
//! codec's own: the plan never re-implements the FetchResponse schema.

use std::hash::{BuildHasher, Hasher};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader};
use kafka_protocol::protocol::Encodable;

use crate::codec::EncodeError;

/// Bytes of the random nonce that starts every marker.
const NONCE_LEN: usize = 8;
/// A marker: the nonce, then the partition's ordinal as a big-endian u32.
const MARKER_LEN: usize = NONCE_LEN + 4;
/// Fresh nonces tried before giving up on a response.
const MAX_ATTEMPTS: usize = 4;

/// One piece of a response on the wire.
#[derive(Debug, Clone)]
pub enum Piece<R> {
    /// Encoded bytes, written as they are.
    Bytes(Bytes),
    /// Record bytes that live in a file, sent with `sendfile`.
    Region(R),
}

/// A region of record bytes that the plan places but never reads.
pub trait RegionLen {
    /// The region's length in bytes.
    fn region_len(&self) -> u32;
}

/// A whole response frame (size prefix included) as pieces.
#[derive(Debug, Clone)]
pub struct ResponsePlan<R> {
    /// In wire order.
    pub pieces: Vec<Piece<R>>,
    /// The frame's total length on the wire, size prefix included.
    pub total_len: u64,
}

impl<R: RegionLen> ResponsePlan<R> {
    /// A plan of encoded bytes only (no regions).
    #[must_use]
    pub fn from_bytes(bytes: Bytes) -> Self {
        ResponsePlan {
            total_len: bytes.len() as u64,
            pieces: vec![Piece::Bytes(bytes)],
        }
    }

    /// Bytes that go out as regions.
    #[must_use]
    pub fn region_bytes(&self) -> u64 {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Region(r) => u64::from(r.region_len()),
                Piece::Bytes(_) => 0,
            })
            .sum()
    }
}

/// Why a plan could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The codec refused the response (a broker bug).
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A partition's regions add up to more than a records field can hold.
    #[error("partition {ordinal}'s records are {len} bytes, more than a Fetch response holds")]
    TooLarge { ordinal: usize, len: u64 },
    /// `records` does not have one entry per partition in the response.
    #[error("{given} record lists for {expected} partitions")]
    Mismatch { given: usize, expected: usize },
    /// Every nonce tried also appeared elsewhere in the response (astronomically unlikely).
    #[error("no unique marker found for the records")]
    NoUniqueMarker,
}

/// Encodes a Fetch response frame whose records are file regions.
///
/// `records` holds one list of regions per partition, in response order (topics in order, then
/// each topic's partitions in order). Each partition's `records` field in `body` is replaced:
/// with its regions when it has any, else with an empty record set (never null; librdkafka
/// treats a null record set as a parse failure).
///
/// # Errors
///
/// [`PlanError`] when the response cannot be encoded at `version`, a partition's regions
/// exceed `i32::MAX` bytes, or `records` does not match the partitions.
pub fn encode_fetch_plan<R: RegionLen>(
    version: i16,
    correlation_id: i32,
    mut body: FetchResponse,
    records: Vec<Vec<R>>,
) -> Result<ResponsePlan<R>, PlanError> {
    let expected: usize = body.responses.iter().map(|t| t.partitions.len()).sum();
    if records.len() != expected {
        return Err(PlanError::Mismatch {
            given: records.len(),
            expected,
        });
    }
    let mut lens = Vec::with_capacity(records.len());
    for (ordinal, regions) in records.iter().enumerate() {
        let len: u64 = regions.iter().map(|r| u64::from(r.region_len())).sum();
        // Compact bytes carry len + 1 in a u32 varint; plain bytes an i32.
        if len >= i32::MAX as u64 {
            return Err(PlanError::TooLarge { ordinal, len });
        }
        lens.push(len as u32);
    }
    let flexible = version >= 12;
    for _ in 0..MAX_ATTEMPTS {
        let nonce = random_nonce();
        let mut markers = 0usize;
        let mut ordinal = 0u32;
        for t in &mut body.responses {
            for p in &mut t.partitions {
                p.records = Some(if lens[ordinal as usize] > 0 {
                    markers += 1;
                    marker(nonce, ordinal)
                } else {
                    Bytes::new()
                });
                ordinal += 1;
            }
        }
        let frame = encode_frame(version, correlation_id, &body)?;
        let found = find_all(&frame, &nonce);
        if found.len() != markers {
            // The nonce also occurs outside a records field: try another.
            continue;
        }
        return Ok(splice(frame, &found, records, &lens, flexible));
    }
    Err(PlanError::NoUniqueMarker)
}

/// The codec's encoding of the whole frame, size prefix included.
fn encode_frame(
    version: i16,
    correlation_id: i32,
    body: &FetchResponse,
) -> Result<Bytes, EncodeError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, ApiKey::Fetch.response_header_version(version))
        .map_err(|e| EncodeError::new(ApiKey::Fetch, version, e))?;
    body.encode(&mut buf, version)
        .map_err(|e| EncodeError::new(ApiKey::Fetch, version, e))?;
    let len = buf.len() - crate::frame::SIZE_PREFIX_LEN;
    let len = i32::try_from(len).map_err(|e| EncodeError::new(ApiKey::Fetch, version, e))?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

/// Cuts each marker (and its fixed-width prefix) out of `frame` and puts the real prefix and
/// the regions in its place; rewrites the frame's size prefix.
fn splice<R: RegionLen>(
    frame: Bytes,
    found: &[usize],
    records: Vec<Vec<R>>,
    lens: &[u32],
    flexible: bool,
) -> ResponsePlan<R> {
    // The marker's own prefix: INT32 12, or varint 13 (one byte).
    let marker_prefix = if flexible { 1 } else { 4 };
    let mut by_ordinal: Vec<Option<usize>> = vec![None; records.len()];
    for &at in found {
        let o = &frame[at + NONCE_LEN..at + MARKER_LEN];
        let ordinal = u32::from_be_bytes([o[0], o[1], o[2], o[3]]) as usize;
        // Every occurrence is one of our markers (the count check), so the ordinal is ours.
        if let Some(slot) = by_ordinal.get_mut(ordinal) {
            *slot = Some(at);
        }
    }
    let prefix_len = |len: u32| -> u64 {
        if flexible {
            u64::from((32 - (len + 1).leading_zeros()).div_ceil(7).max(1))
        } else {
            4
        }
    };
    let mut total = frame.len() as u64;
    total -= (found.len() * (marker_prefix + MARKER_LEN)) as u64;
    for &len in lens.iter().filter(|&&l| l > 0) {
        total += prefix_len(len) + u64::from(len);
    }
    let mut pieces = Vec::with_capacity(found.len() * 2 + 1);
    // Encoded bytes between two regions are gathered into one piece (one write each).
    let mut pending = BytesMut::with_capacity(frame.len());
    // The size prefix counts everything after itself.
    let size = (total - crate::frame::SIZE_PREFIX_LEN as u64) as u32;
    pending.put_u32(size);
    let mut cursor = crate::frame::SIZE_PREFIX_LEN;
    for (ordinal, regions) in records.into_iter().enumerate() {
        let Some(at) = by_ordinal[ordinal] else {
            continue;
        };
        pending.put_slice(&frame[cursor..at - marker_prefix]);
        let len = lens[ordinal];
        if flexible {
            // KIP-482 compact bytes: unsigned varint of length + 1.
            put_unsigned_varint(&mut pending, len + 1);
        } else {
            pending.put_i32(len as i32);
        }
        pieces.push(Piece::Bytes(pending.split().freeze()));
        pieces.extend(regions.into_iter().map(Piece::Region));
        cursor = at + MARKER_LEN;
    }
    pending.put_slice(&frame[cursor..]);
    pieces.push(Piece::Bytes(pending.freeze()));
    ResponsePlan {
        pieces,
        total_len: total,
    }
}

/// Protobuf-style unsigned varint, as the codec writes `UnsignedVarInt`.
fn put_unsigned_varint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn marker(nonce: [u8; NONCE_LEN], ordinal: u32) -> Bytes {
    let mut m = BytesMut::with_capacity(MARKER_LEN);
    m.put_slice(&nonce);
    m.put_u32(ordinal);
    m.freeze()
}

/// Every position where `needle` starts in `hay`, overlapping ones included.
fn find_all(hay: &[u8], needle: &[u8; NONCE_LEN]) -> Vec<usize> {
    let mut out = Vec::new();
    if hay.len() < NONCE_LEN {
        return out;
    }
    for i in 0..=hay.len() - NONCE_LEN {
        if hay[i] == needle[0] && &hay[i..i + NONCE_LEN] == needle {
            out.push(i);
        }
    }
    out
}

/// A random nonce from the standard library's randomly seeded hasher (no RNG dependency).
fn random_nonce() -> [u8; NONCE_LEN] {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    h.finish().to_be_bytes()
}

#[cfg(test)]
mod tests;
