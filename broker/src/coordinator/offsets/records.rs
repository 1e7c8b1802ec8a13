//! The records of `__consumer_offsets`, byte for byte as Kafka writes them, and the mapping of
//! a group to its partition.
//!
//! Kafka's group coordinator (`GroupCoordinatorRecordSerde`, schemas in
//! `group-coordinator/src/main/resources/common/message/`) prefixes every key with an int16
//! record type (historically "key version") and every value with an int16 value version;
//! the rest is the non-flexible encoding of the schema. Strings are an int16 length and UTF-8.
//!
//! # Keys
//!
//! ```text
//! OffsetCommitKey    type i16 = 1 (0 is the same layout, written by Kafka before 0.10)
//!                    group string | topic string | partition i32
//! GroupMetadataKey   type i16 = 2
//!                    group string
//! ```
//!
//! Types 3 to 8 are the records of KIP-848 consumer groups (`ConsumerGroupMetadataKey` and
//! friends). Each of those keys starts with the group id; the store keeps them by their key
//! bytes, opaque, and hands them to the consumer-group coordinator (`consumer_group::persist`),
//! which owns their schemas. Types 9 and up (share and streams groups) are skipped on replay,
//! as Kafka skips record types it does not know.
//!
//! # OffsetCommitValue
//!
//! ```text
//! v0, v2  offset i64 | metadata string | commitTimestamp i64
//! v1      offset i64 | metadata string | commitTimestamp i64 | expireTimestamp i64
//! v3      offset i64 | leaderEpoch i32 | metadata string | commitTimestamp i64
//! v4      as v3, flexible: metadata is a compact string (uvarint length + 1), then tagged fields
//! ```
//!
//! We write v3, or v1 when the commit carried an explicit retention (OffsetCommit v2-v4's
//! `retention_time_ms`), exactly as Kafka's `GroupCoordinatorRecordHelpers.newOffsetCommitRecord`
//! chooses. A null value is a tombstone: the offset was deleted or expired.
//!
//! # GroupMetadataValue
//!
//! Opaque here: the group coordinator hands us the encoded value (its own version prefix
//! included) and gets the same bytes back on replay.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

/// Record type of an offset commit key.
const OFFSET_COMMIT_KEY: i16 = 1;
/// Kafka before 0.10 wrote offset commit keys with type 0; the layout is the same.
const OFFSET_COMMIT_KEY_LEGACY: i16 = 0;
/// Record type of a group metadata key.
const GROUP_METADATA_KEY: i16 = 2;
/// The record types of KIP-848 consumer groups, kept opaque.
const CONSUMER_GROUP_KEYS: std::ops::RangeInclusive<i16> = 3..=8;

/// Where one committed offset lives: Kafka's `OffsetCommitKey`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OffsetKey {
    pub group: String,
    pub topic: String,
    pub partition: i32,
}

/// A committed offset: Kafka's `OffsetAndMetadata` / `OffsetCommitValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record (KIP-320), -1 when unknown.
    pub leader_epoch: i32,
    /// The client's opaque string, at most `offset.metadata.max.bytes` bytes.
    pub metadata: String,
    /// Broker time of the commit; offsets expire relative to it.
    pub commit_timestamp: i64,
    /// An absolute expiry from an explicit `retention_time_ms` (OffsetCommit v2-v4).
    pub expire_timestamp: Option<i64>,
}

/// One record of `__consumer_offsets`, decoded. `None` values are tombstones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorRecord {
    OffsetCommit {
        key: OffsetKey,
        value: Option<CommittedOffset>,
    },
    GroupMetadata {
        group: String,
        value: Option<Bytes>,
    },
    /// A record of a KIP-848 consumer group (types 3 to 8): `key` is the whole encoded key,
    /// `group` the group id it starts with.
    ConsumerGroup {
        key: Bytes,
        group: String,
        value: Option<Bytes>,
    },
}

/// Why a record of `__consumer_offsets` could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    #[error("record has no key")]
    MissingKey,
    #[error("{what} runs past the end of the record")]
    Truncated { what: &'static str },
    #[error("{what} is not valid UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("unknown offset commit value version {version}")]
    UnknownValueVersion { version: i16 },
}

impl CoordinatorRecord {
    /// The encoded key and value (`None` for a tombstone).
    #[must_use]
    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        match self {
            CoordinatorRecord::OffsetCommit { key, value } => {
                let mut k = BytesMut::with_capacity(8 + key.group.len() + key.topic.len());
                k.put_i16(OFFSET_COMMIT_KEY);
                put_str(&mut k, &key.group);
                put_str(&mut k, &key.topic);
                k.put_i32(key.partition);
                (k.freeze(), value.as_ref().map(encode_offset_value))
            }
            CoordinatorRecord::GroupMetadata { group, value } => {
                let mut k = BytesMut::with_capacity(4 + group.len());
                k.put_i16(GROUP_METADATA_KEY);
                put_str(&mut k, group);
                (k.freeze(), value.clone())
            }
            CoordinatorRecord::ConsumerGroup { key, value, .. } => (key.clone(), value.clone()),
        }
    }

    /// Decodes a record read back from the log. `Ok(None)` for record types this broker does
    /// not keep (share and streams groups), which replay skips.
    ///
    /// # Errors
    /// [`RecordError`] when the bytes do not follow the schema.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Option<Self>, RecordError> {
        let raw = key.ok_or(RecordError::MissingKey)?;
        let mut k = Reader(raw);
        match k.i16("key type")? {
            OFFSET_COMMIT_KEY | OFFSET_COMMIT_KEY_LEGACY => {
                let key = OffsetKey {
                    group: k.string("group")?,
                    topic: k.string("topic")?,
                    partition: k.i32("partition")?,
                };
                let value = value.map(decode_offset_value).transpose()?;
                Ok(Some(CoordinatorRecord::OffsetCommit { key, value }))
            }
            GROUP_METADATA_KEY => Ok(Some(CoordinatorRecord::GroupMetadata {
                group: k.string("group")?,
                value: value.map(Bytes::copy_from_slice),
            })),
            t if CONSUMER_GROUP_KEYS.contains(&t) => Ok(Some(CoordinatorRecord::ConsumerGroup {
                group: k.string("group")?,
                key: Bytes::copy_from_slice(raw),
                value: value.map(Bytes::copy_from_slice),
            })),
            _ => Ok(None),
        }
    }

    /// Encoded key plus value length: what this record costs in a compacted log, give or take
    /// the few bytes of record framing.
    #[must_use]
    pub fn encoded_len(&self) -> u64 {
        let (k, v) = self.encode();
        (k.len() + v.map_or(0, |v| v.len())) as u64
    }
}

fn encode_offset_value(v: &CommittedOffset) -> Bytes {
    let mut out = BytesMut::with_capacity(32 + v.metadata.len());
    match v.expire_timestamp {
        Some(expire) => {
            out.put_i16(1);
            out.put_i64(v.offset);
            put_str(&mut out, &v.metadata);
            out.put_i64(v.commit_timestamp);
            out.put_i64(expire);
        }
        None => {
            out.put_i16(3);
            out.put_i64(v.offset);
            out.put_i32(v.leader_epoch);
            put_str(&mut out, &v.metadata);
            out.put_i64(v.commit_timestamp);
        }
    }
    out.freeze()
}

fn decode_offset_value(bytes: &[u8]) -> Result<CommittedOffset, RecordError> {
    let mut r = Reader(bytes);
    let version = r.i16("value version")?;
    let offset = r.i64("offset")?;
    let mut v = CommittedOffset {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: -1,
        expire_timestamp: None,
    };
    match version {
        0 | 2 => {
            v.metadata = r.string("metadata")?;
            v.commit_timestamp = r.i64("commit timestamp")?;
        }
        1 => {
            v.metadata = r.string("metadata")?;
            v.commit_timestamp = r.i64("commit timestamp")?;
            v.expire_timestamp = Some(r.i64("expire timestamp")?).filter(|t| *t >= 0);
        }
        3 => {
            v.leader_epoch = r.i32("leader epoch")?;
            v.metadata = r.string("metadata")?;
            v.commit_timestamp = r.i64("commit timestamp")?;
        }
        4 => {
            // Flexible; the trailing tagged fields hold nothing we keep.
            v.leader_epoch = r.i32("leader epoch")?;
            v.metadata = r.compact_string("metadata")?;
            v.commit_timestamp = r.i64("commit timestamp")?;
        }
        version => return Err(RecordError::UnknownValueVersion { version }),
    }
    Ok(v)
}

fn put_str(out: &mut BytesMut, s: &str) {
    // Group ids, topic names and metadata are bounded far below i16::MAX by the callers
    // (topic names: 249, metadata: offset.metadata.max.bytes); a longer group id is cut to
    // fit rather than written with a wrapped length.
    let len = s.len().min(i16::MAX as usize);
    out.put_i16(len as i16);
    out.put_slice(&s.as_bytes()[..len]);
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], RecordError> {
        if self.0.len() < n {
            return Err(RecordError::Truncated { what });
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i16(&mut self, what: &'static str) -> Result<i16, RecordError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self, what: &'static str) -> Result<i32, RecordError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self, what: &'static str) -> Result<i64, RecordError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn utf8(&mut self, n: usize, what: &'static str) -> Result<String, RecordError> {
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| RecordError::NotUtf8 { what })
    }
    /// A non-nullable classic string (a null reads as empty, as Kafka's readers tolerate).
    fn string(&mut self, what: &'static str) -> Result<String, RecordError> {
        let len = self.i16(what)?;
        if len < 0 {
            return Ok(String::new());
        }
        self.utf8(len as usize, what)
    }
    fn compact_string(&mut self, what: &'static str) -> Result<String, RecordError> {
        let mut n: u64 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1, what)?[0];
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return match n {
                    0 => Ok(String::new()),
                    n => self.utf8(usize::try_from(n - 1).unwrap_or(usize::MAX), what),
                };
            }
        }
        Err(RecordError::Truncated { what })
    }
}

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, in
/// wrapping 32-bit arithmetic.
#[must_use]
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The `__consumer_offsets` partition that coordinates `group`:
/// `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`, where Kafka's `Utils.abs`
/// maps `Integer.MIN_VALUE` to 0. Clients never compute this, but an operator reading the data
/// directory (or a migration tool) finds a group where Kafka would have put it.
///
/// # Panics
/// If `num_partitions` is not positive (the configuration refuses that).
#[must_use]
pub fn partition_for(group: &str, num_partitions: i32) -> i32 {
    assert!(
        num_partitions > 0,
        "offsets.topic.num.partitions must be positive"
    );
    let h = java_string_hash(group);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % num_partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(v: i64, expire: Option<i64>) -> CommittedOffset {
        CommittedOffset {
            offset: v,
            leader_epoch: if expire.is_some() { -1 } else { 7 },
            metadata: "meta ☃".to_owned(),
            commit_timestamp: 1_700_000_000_000,
            expire_timestamp: expire,
        }
    }

    #[test]
    fn java_hash_matches_known_values() {
        // Values from Java's "...".hashCode().
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Utils.abs maps to 0.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // Non-BMP characters hash as two UTF-16 code units.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn partition_is_abs_hash_mod_n() {
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        for g in ["", "g", "my-group", "x".repeat(300).as_str()] {
            let p = partition_for(g, 50);
            assert!((0..50).contains(&p));
        }
    }

    #[test]
    fn offset_commit_key_layout_is_kafkas() {
        let r = CoordinatorRecord::OffsetCommit {
            key: OffsetKey {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
            },
            value: None,
        };
        let (k, v) = r.encode();
        assert_eq!(&k[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        assert_eq!(v, None);
    }

    #[test]
    fn offset_commit_value_v3_layout_is_kafkas() {
        let r = CoordinatorRecord::OffsetCommit {
            key: OffsetKey {
                group: "g".into(),
                topic: "t".into(),
                partition: 0,
            },
            value: Some(CommittedOffset {
                offset: 5,
                leader_epoch: 2,
                metadata: "m".into(),
                commit_timestamp: 9,
                expire_timestamp: None,
            }),
        };
        let v = r.encode().1.unwrap();
        let mut want = vec![0, 3];
        want.extend_from_slice(&5i64.to_be_bytes());
        want.extend_from_slice(&2i32.to_be_bytes());
        want.extend_from_slice(&[0, 1, b'm']);
        want.extend_from_slice(&9i64.to_be_bytes());
        assert_eq!(&v[..], &want[..]);
    }

    #[test]
    fn records_round_trip() {
        let records = [
            CoordinatorRecord::OffsetCommit {
                key: OffsetKey {
                    group: "group-1".into(),
                    topic: "orders".into(),
                    partition: 7,
                },
                value: Some(offset(42, None)),
            },
            CoordinatorRecord::OffsetCommit {
                key: OffsetKey {
                    group: "group-1".into(),
                    topic: "orders".into(),
                    partition: 7,
                },
                value: Some(offset(43, Some(1_700_000_100_000))),
            },
            CoordinatorRecord::GroupMetadata {
                group: "group-1".into(),
                value: Some(Bytes::from_static(b"\x00\x03opaque")),
            },
            CoordinatorRecord::GroupMetadata {
                group: "group-1".into(),
                value: None,
            },
        ];
        for r in records {
            let (k, v) = r.encode();
            let back = CoordinatorRecord::decode(Some(&k), v.as_deref()).unwrap();
            assert_eq!(back, Some(r));
        }
    }

    #[test]
    fn older_and_flexible_values_decode() {
        let mut v0 = vec![0, 0];
        v0.extend_from_slice(&11i64.to_be_bytes());
        v0.extend_from_slice(&[0, 2, b'a', b'b']);
        v0.extend_from_slice(&77i64.to_be_bytes());
        let d = decode_offset_value(&v0).unwrap();
        assert_eq!(
            (d.offset, d.metadata.as_str(), d.commit_timestamp),
            (11, "ab", 77)
        );
        assert_eq!(d.leader_epoch, -1);

        let mut v4 = vec![0, 4];
        v4.extend_from_slice(&12i64.to_be_bytes());
        v4.extend_from_slice(&3i32.to_be_bytes());
        v4.extend_from_slice(&[3, b'x', b'y']); // compact string "xy"
        v4.extend_from_slice(&88i64.to_be_bytes());
        v4.push(0); // no tagged fields
        let d = decode_offset_value(&v4).unwrap();
        assert_eq!(
            (d.offset, d.leader_epoch, d.metadata.as_str()),
            (12, 3, "xy")
        );
        assert_eq!(
            decode_offset_value(&[0, 9, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(RecordError::UnknownValueVersion { version: 9 })
        );
    }

    #[test]
    fn consumer_group_records_are_kept_whole_by_their_key() {
        // ConsumerGroupMemberMetadataKey: type 5, group "g", member "m".
        let key = [0, 5, 0, 1, b'g', 0, 1, b'm'];
        let r = CoordinatorRecord::decode(Some(&key), Some(&[0, 0, 7])).unwrap();
        let Some(CoordinatorRecord::ConsumerGroup {
            key: k,
            group,
            value,
        }) = r.clone()
        else {
            panic!("{r:?}");
        };
        assert_eq!((&k[..], group.as_str()), (&key[..], "g"));
        assert_eq!(value.as_deref(), Some(&[0u8, 0, 7][..]));
        let r = r.unwrap();
        assert_eq!(r.encode(), (k, value));
    }

    #[test]
    fn other_record_types_are_skipped_and_garbage_is_an_error() {
        // A share group's metadata key (type 9).
        assert_eq!(
            CoordinatorRecord::decode(Some(&[0, 9, 0, 0]), None),
            Ok(None)
        );
        assert_eq!(
            CoordinatorRecord::decode(None, None),
            Err(RecordError::MissingKey)
        );
        assert!(CoordinatorRecord::decode(Some(&[0, 1, 0, 9, b'g']), None).is_err());
        assert!(CoordinatorRecord::decode(Some(&[0, 5, 0, 9, b'g']), None).is_err());
        assert!(
            CoordinatorRecord::decode(
                Some(&[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 1]),
                Some(&[0, 3, 1])
            )
            .is_err()
        );
    }
}
