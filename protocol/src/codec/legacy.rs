//! The request versions that Kafka 4.0 removed (KIP-896) but clients still in service send,
//! served by translation to and from the oldest version the codec knows.
//!
//! Why this is hand-written: `kafka-protocol` is generated from Kafka 4.0's schemas, which no
//! longer describe these versions, so its decoders refuse them. Each old version differs from
//! the codec's oldest by a few fields, so each is translated here instead of re-implementing
//! a codec:
//!
//! | API | old | request | response |
//! |---|---|---|---|
//! | ListOffsets | v0 | v1 plus `max_num_offsets` per partition | `old_style_offsets` (an array) instead of `timestamp` and `offset` |
//! | OffsetCommit | v0 | v2 without `generation_id`, `member_id`, `retention_time_ms` | the same bytes as v2 |
//! | OffsetCommit | v1 | v2 with a `commit_timestamp` per partition, without `retention_time_ms` | the same bytes as v2 |
//! | OffsetFetch | v0 | the same bytes as v1 | the same bytes as v1 |
//! | CreateTopics | v0 | v1 without `validate_only` | `name` and `error_code` per topic |
//! | CreateTopics | v1 | the same bytes as v2 | v2 without `throttle_time_ms` |
//! | DeleteTopics | v0 | the same bytes as v1 | v1 without `throttle_time_ms` |
//! | DescribeConfigs | v0 | v1 without `include_synonyms` | `is_default` instead of `config_source`; no synonyms |
//!
//! (Schemas: Kafka 3.9's `clients/src/main/resources/common/message/*.json`, the last to
//! carry them.) None of these versions is flexible: strings carry an int16 length, arrays an
//! int32 count, and there are no tagged fields. The structural walk in [`crate::shape`] runs
//! on the old bytes before anything here decodes them, and nothing here preallocates from a
//! wire count. Unlike the codec's own versions, a translated body must end at its last field:
//! a stray byte after a CreateTopics v0 body would otherwise be read as v1's
//! `validate_only`.
//!
//! The typed request a handler receives is the codec's struct, filled as the old version
//! means it (an OffsetCommit v0 has no generation: -1, as Kafka's simple commits); the
//! handler still sees the old version number, so a field that exists only in newer versions
//! is never relied on. Two meanings are approximated, and said so: OffsetCommit v1's
//! per-partition `commit_timestamp` is not kept (the commit is stamped on arrival, as v2 and
//! later are), and ListOffsets v0 answers at most one offset per partition, the one v1 would
//! answer, whatever `max_num_offsets` asks (librdkafka, Sarama and kafka-python all ask for
//! one). For the latest (-1) and earliest (-2) offsets that is what Kafka's v0 answered; for a
//! real timestamp Kafka's v0 listed the base offsets of segments modified before it, where
//! this answers v1's first offset at or after it.
//!
//! Produce v0-2 and Fetch v0-3 are not here: they carry message sets of magic 0 and 1, which
//! Strata does not convert (`docs/ARCHITECTURE.md`, "Old clients").

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, GroupId, ListOffsetsRequest, OffsetCommitRequest, RequestKind, ResponseKind,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use thiserror::Error;

use super::BoxError;

/// Why an old-version body could not be read. The walk in [`crate::shape`] has already
/// proved every length present, so these are a second line of defence.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LegacyError {
    /// A field runs past the end of the body.
    #[error("field at byte {at} runs past the end of the frame")]
    Truncated { at: usize },
    /// A length or count is negative where the schema allows no null.
    #[error("invalid length {len} at byte {at}")]
    InvalidLength { at: usize, len: i32 },
    /// Bytes are left over after the last field.
    #[error("{left} bytes after the last field")]
    TrailingBytes { left: usize },
}

/// The version whose bytes the codec reads and writes in place of `version` of `key`: the
/// codec's oldest for an old version, `version` itself otherwise. A broker that forwards an
/// old request to the controller sends it at this version (the same request, as the old
/// version means it), and answers its client at the old one.
#[must_use]
pub fn codec_version(key: ApiKey, version: i16) -> i16 {
    match (key, version) {
        (ApiKey::ListOffsets, 0) => 1,
        (ApiKey::OffsetCommit, 0 | 1) => 2,
        (ApiKey::OffsetFetch, 0) => 1,
        (ApiKey::CreateTopics, 0 | 1) => 2,
        (ApiKey::DeleteTopics, 0) => 1,
        (ApiKey::DescribeConfigs, 0) => 1,
        _ => version,
    }
}

/// Whether `version` of `key` is one of the old versions translated here.
#[must_use]
pub fn is_legacy(key: ApiKey, version: i16) -> bool {
    codec_version(key, version) != version
}

/// Decodes the body of an old-version request into the codec's struct.
pub(crate) fn decode_request(
    key: ApiKey,
    version: i16,
    body: Bytes,
) -> Result<RequestKind, BoxError> {
    let codec = codec_version(key, version);
    match (key, version) {
        (ApiKey::ListOffsets, 0) => Ok(RequestKind::ListOffsets(list_offsets_v0(body)?)),
        (ApiKey::OffsetCommit, 0 | 1) => Ok(RequestKind::OffsetCommit(offset_commit_v0_v1(
            version, body,
        )?)),
        // v0 lacks only the trailing field v1 added: append that field's "off" value and
        // read it as v1 (whose bytes CreateTopics v2 shares).
        (ApiKey::CreateTopics | ApiKey::DescribeConfigs, 0) => {
            let mut with = BytesMut::with_capacity(body.len() + 1);
            with.extend_from_slice(&body);
            with.put_i8(0); // CreateTopics v1 validate_only; DescribeConfigs v1 include_synonyms
            decode_as(key, with.freeze(), codec)
        }
        // The same bytes as the codec's oldest.
        _ => decode_as(key, body, codec),
    }
}

fn decode_as(key: ApiKey, mut body: Bytes, version: i16) -> Result<RequestKind, BoxError> {
    let kind = RequestKind::decode(key, &mut body, version)?;
    if body.has_remaining() {
        return Err(LegacyError::TrailingBytes {
            left: body.remaining(),
        }
        .into());
    }
    Ok(kind)
}

/// Encodes the body of a response to an old-version request (no header, no size prefix).
pub(crate) fn encode_response(
    key: ApiKey,
    version: i16,
    body: &ResponseKind,
    buf: &mut BytesMut,
) -> Result<(), BoxError> {
    match (key, version, body) {
        (ApiKey::ListOffsets, 0, ResponseKind::ListOffsets(r)) => {
            put_array(buf, &r.topics, |buf, t| {
                put_str(buf, &t.name.0);
                put_array(buf, &t.partitions, |buf, p| {
                    buf.put_i32(p.partition_index);
                    buf.put_i16(p.error_code);
                    // The one offset v1 would answer; none where it has none (-1).
                    let offsets: &[i64] = if p.error_code == 0 && p.offset >= 0 {
                        std::slice::from_ref(&p.offset)
                    } else {
                        &[]
                    };
                    put_array(buf, offsets, |buf, o| buf.put_i64(*o));
                });
            });
            Ok(())
        }
        (ApiKey::CreateTopics, 0, ResponseKind::CreateTopics(r)) => {
            put_array(buf, &r.topics, |buf, t| {
                put_str(buf, &t.name.0);
                buf.put_i16(t.error_code);
            });
            Ok(())
        }
        (ApiKey::DescribeConfigs, 0, ResponseKind::DescribeConfigs(r)) => {
            buf.put_i32(r.throttle_time_ms);
            put_array(buf, &r.results, |buf, res| {
                buf.put_i16(res.error_code);
                put_nullable_str(buf, res.error_message.as_ref());
                buf.put_i8(res.resource_type);
                put_str(buf, &res.resource_name);
                put_array(buf, &res.configs, |buf, c| {
                    put_str(buf, &c.name);
                    put_nullable_str(buf, c.value.as_ref());
                    buf.put_i8(i8::from(c.read_only));
                    // v1 replaced is_default with config_source; DEFAULT_CONFIG is 5.
                    buf.put_i8(i8::from(c.config_source == DEFAULT_CONFIG));
                    buf.put_i8(i8::from(c.is_sensitive));
                });
            });
            Ok(())
        }
        // v1 of CreateTopics and v0 of DeleteTopics are their successors without the
        // leading throttle_time_ms.
        (ApiKey::CreateTopics, 1, _) | (ApiKey::DeleteTopics, 0, _) => {
            let mut full = BytesMut::new();
            body.encode(&mut full, codec_version(key, version))?;
            if full.len() < 4 {
                return Err(LegacyError::Truncated { at: full.len() }.into());
            }
            buf.extend_from_slice(&full[4..]);
            Ok(())
        }
        // The same bytes as the codec's oldest.
        _ => {
            body.encode(buf, codec_version(key, version))?;
            Ok(())
        }
    }
}

/// DescribeConfigs' `config_source` for a value nobody set.
const DEFAULT_CONFIG: i8 = 5;

fn list_offsets_v0(body: Bytes) -> Result<ListOffsetsRequest, LegacyError> {
    let mut r = Reader::new(&body);
    let replica_id = r.i32()?;
    let topics = r.array(|r| {
        let name = r.string()?;
        let partitions = r.array(|r| {
            let partition_index = r.i32()?;
            let timestamp = r.i64()?;
            let _max_num_offsets = r.i32()?;
            Ok(ListOffsetsPartition::default()
                .with_partition_index(partition_index)
                .with_timestamp(timestamp))
        })?;
        Ok(ListOffsetsTopic::default()
            .with_name(TopicName(name))
            .with_partitions(partitions))
    })?;
    r.finish()?;
    Ok(ListOffsetsRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_topics(topics))
}

fn offset_commit_v0_v1(version: i16, body: Bytes) -> Result<OffsetCommitRequest, LegacyError> {
    let mut r = Reader::new(&body);
    let mut req = OffsetCommitRequest::default().with_group_id(GroupId(r.string()?));
    if version >= 1 {
        req = req
            .with_generation_id_or_member_epoch(r.i32()?)
            .with_member_id(r.string()?);
    }
    let topics = r.array(|r| {
        let name = r.string()?;
        let partitions = r.array(|r| {
            let partition_index = r.i32()?;
            let committed_offset = r.i64()?;
            if version == 1 {
                let _commit_timestamp = r.i64()?;
            }
            let committed_metadata = r.nullable_string()?;
            Ok(OffsetCommitRequestPartition::default()
                .with_partition_index(partition_index)
                .with_committed_offset(committed_offset)
                .with_committed_metadata(committed_metadata))
        })?;
        Ok(OffsetCommitRequestTopic::default()
            .with_name(TopicName(name))
            .with_partitions(partitions))
    })?;
    r.finish()?;
    Ok(req.with_topics(topics))
}

/// A reader of non-flexible fields over a borrowed body. Arrays grow as elements are read,
/// never from the wire count.
struct Reader<'a> {
    body: &'a Bytes,
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(body: &'a Bytes) -> Self {
        Reader { body, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], LegacyError> {
        let bytes = self
            .body
            .get(self.at..self.at.saturating_add(n))
            .ok_or(LegacyError::Truncated { at: self.at })?;
        self.at += n;
        Ok(bytes)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], LegacyError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, LegacyError> {
        self.fixed().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Result<i32, LegacyError> {
        self.fixed().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Result<i64, LegacyError> {
        self.fixed().map(i64::from_be_bytes)
    }

    fn nullable_string(&mut self) -> Result<Option<StrBytes>, LegacyError> {
        let at = self.at;
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let start = self.at;
        self.take(usize::from(len.unsigned_abs()))?;
        let bytes = self.body.slice(start..self.at);
        StrBytes::from_utf8(bytes)
            .map(Some)
            .map_err(|_| LegacyError::InvalidLength {
                at,
                len: i32::from(len),
            })
    }

    fn string(&mut self) -> Result<StrBytes, LegacyError> {
        let at = self.at;
        self.nullable_string()?
            .ok_or(LegacyError::InvalidLength { at, len: -1 })
    }

    fn array<T>(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Result<T, LegacyError>,
    ) -> Result<Vec<T>, LegacyError> {
        let at = self.at;
        let count = self.i32()?;
        let count =
            usize::try_from(count).map_err(|_| LegacyError::InvalidLength { at, len: count })?;
        let mut out = Vec::new();
        for _ in 0..count {
            out.push(element(self)?);
        }
        Ok(out)
    }

    fn finish(self) -> Result<(), LegacyError> {
        match self.body.len() - self.at {
            0 => Ok(()),
            left => Err(LegacyError::TrailingBytes { left }),
        }
    }
}

fn put_str(buf: &mut BytesMut, s: &str) {
    // Names come from the broker's own state, bounded by Kafka's limits (249 bytes for a
    // topic, int16 for the rest); a longer one is cut rather than mis-framed.
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    buf.put_i16(bytes.len() as i16);
    buf.put_slice(bytes);
}

fn put_nullable_str(buf: &mut BytesMut, s: Option<&StrBytes>) {
    match s {
        Some(s) => put_str(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_array<T>(buf: &mut BytesMut, items: &[T], mut element: impl FnMut(&mut BytesMut, &T)) {
    buf.put_i32(i32::try_from(items.len()).unwrap_or(i32::MAX));
    for item in items {
        element(buf, item);
    }
}

#[cfg(test)]
mod tests;
