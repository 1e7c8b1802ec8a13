//! The Raft log on disk: `<log_dir>/__cluster_metadata-0`, through `strata_storage::Log`.
//!
//! Each core [`Entry`] is one record batch of one record, stamped with the entry's epoch as
//! its partition leader epoch, so the epoch cache (`leader-epoch-checkpoint`) and the
//! diverging-epoch lookup work on the file as they do in Kafka:
//!
//! - `Payload::Data(bytes)`: a plain batch whose one record's value is `bytes`.
//! - `Payload::LeaderChange`: a control batch (attribute bit 5) whose record key is
//!   Kafka's control key (version 0, type 2, `LEADER_CHANGE`) and whose value is
//!   `LeaderChangeMessage` v0 (flexible): `i16 version`, `i32 leader_id`, an empty compact
//!   `Voters` array, an empty compact `GrantingVoters` array, no tagged fields.
//! - `Payload::Voters`: a control batch with key type 6 (`KRAFT_VOTERS`) and value
//!   `VotersRecord` v0: `i16 version`, a compact array of `{i32 id, uuid directory_id,
//!   empty compact endpoints array, {i16 min 0, i16 max 1, no tags}, no tags}`, no tags.
//!
//! Crash policy: every append and truncation is fsynced before the driver carries out the
//! next action. A torn final batch is cut by storage recovery on the next open, and the
//! core then learns the log end from what [`RaftDisk::open`] reads back.

use std::path::Path;

use bytes::{BufMut, Bytes, BytesMut};
use strata_kraft::Uuid;
use strata_kraft::raft::{Endpoint, Entry, NodeId, Payload, ReplicaKey, VoterSet};
use strata_protocol::record_batch::{
    RecordBatchView, SimpleRecord, encode_batch, peek_total_len, write_crc,
};
use strata_storage::{Log, LogConfig, LogError};

/// Byte position of the batch attributes in a v2 batch header.
const ATTRIBUTES_AT: usize = 21;
/// The control-batch attribute bit.
const CONTROL_BIT: i16 = 0x20;
/// Kafka's `ControlRecordType` codes.
const LEADER_CHANGE: i16 = 2;
/// Kafka's `ControlRecordType.KRAFT_VOTERS`: a `VotersRecord`.
pub const KRAFT_VOTERS: i16 = 6;
/// KafkaRaftClient's `MAX_BATCH_SIZE_BYTES`.
const MAX_BATCH_BYTES: u32 = 8 * 1024 * 1024;
/// How much one recovery read asks for.
const READ_BYTES: u32 = 16 * 1024 * 1024;

/// Why the Raft log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The storage layer refused.
    #[error(transparent)]
    Storage(#[from] LogError),
    /// A batch of the metadata log does not parse as an entry.
    #[error("metadata log batch at offset {offset} is not a Raft entry")]
    Corrupt {
        /// Where.
        offset: i64,
    },
    /// The core asked to append somewhere other than the log end.
    #[error("append at {base_offset}, but the log ends at {log_end}")]
    Misplaced {
        /// Where the core wanted the entries.
        base_offset: i64,
        /// Where the log ends.
        log_end: i64,
    },
}

/// The durable copy of the core's log.
#[derive(Debug)]
pub struct RaftDisk {
    /// `__cluster_metadata-0`.
    log: Log,
}

impl RaftDisk {
    /// Opens (and recovers) the log in `dir`, rolling segments at `segment_bytes`
    /// (`metadata.log.segment.bytes`).
    ///
    /// # Errors
    ///
    /// [`DiskError`] when the log cannot be opened.
    pub fn open(dir: &Path, now_ms: i64, segment_bytes: u32) -> Result<Self, DiskError> {
        let config = LogConfig {
            retention_ms: -1,
            retention_bytes: -1,
            max_message_bytes: MAX_BATCH_BYTES,
            segment_bytes,
            ..LogConfig::default()
        };
        let log = Log::open(dir, config, now_ms)?;
        Ok(RaftDisk { log })
    }

    /// The entries from `from` (at least the log start) to the log end.
    ///
    /// # Errors
    ///
    /// [`DiskError::Corrupt`] when a batch is not an entry; storage errors.
    pub fn entries_from(&self, from: i64) -> Result<Vec<Entry>, DiskError> {
        self.read_entries(
            from.max(self.log.log_start_offset()),
            self.log.log_end_offset(),
        )
    }

    /// The epoch of the entry at `offset`, if the log holds it.
    ///
    /// # Errors
    ///
    /// As [`RaftDisk::entries_from`].
    pub fn epoch_at(&self, offset: i64) -> Result<Option<i32>, DiskError> {
        if offset < self.log.log_start_offset() || offset >= self.log.log_end_offset() {
            return Ok(None);
        }
        Ok(self
            .read_entries(offset, offset + 1)?
            .first()
            .map(|e| e.epoch))
    }

    /// The first offset the log holds.
    pub fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    /// KIP-630 log cleaning: deletes every whole segment below `offset` (a snapshot holds
    /// their state). The segment holding `offset` stays, so the log may still start below
    /// it; at start the driver reads entries only from the snapshot's end.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn delete_before(&mut self, offset: i64) -> Result<usize, DiskError> {
        Ok(self.log.delete_segments_before(offset)?)
    }

    /// Empties the log and restarts it at `offset`, durably: a snapshot fetched from the
    /// leader replaces the whole log (Kafka's `truncateFullyAndStartAt`).
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn reset_to(&mut self, offset: i64) -> Result<(), DiskError> {
        self.log.truncate_fully_and_start_at(offset)?;
        self.log.flush()?;
        Ok(())
    }

    /// The log end offset.
    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Appends `entries` at `base_offset` (the log end) and fsyncs them.
    ///
    /// # Errors
    ///
    /// [`DiskError::Misplaced`] if `base_offset` is not the log end; storage errors.
    pub fn append(
        &mut self,
        base_offset: i64,
        entries: &[Entry],
        now_ms: i64,
    ) -> Result<(), DiskError> {
        let log_end = self.log.log_end_offset();
        if base_offset != log_end {
            return Err(DiskError::Misplaced {
                base_offset,
                log_end,
            });
        }
        for entry in entries {
            let mut batch = encode_entry(entry, now_ms);
            self.log
                .append_raft_unflushed(&mut batch, entry.epoch, now_ms)?;
        }
        self.log.flush()?;
        Ok(())
    }

    /// Removes every entry at `end_offset` and after, durably.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn truncate(&mut self, end_offset: i64) -> Result<(), DiskError> {
        self.log.truncate_to(end_offset)?;
        self.log.flush()?;
        Ok(())
    }

    /// Flushes and closes the log.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn close(self) -> Result<(), DiskError> {
        self.log.close()?;
        Ok(())
    }

    /// The entries in `[from, to)`.
    fn read_entries(&self, from: i64, to: i64) -> Result<Vec<Entry>, DiskError> {
        let mut entries = Vec::new();
        for_each_batch(
            &self.log,
            from,
            to,
            |offset| DiskError::Corrupt { offset },
            |offset, batch| {
                entries.push(decode_entry(batch).ok_or(DiskError::Corrupt { offset })?);
                Ok(())
            },
        )?;
        Ok(entries)
    }
}

/// Hands `on_batch` each whole batch of `log` in `[from, to)`, in order, with the offset
/// it was read at. A read of the storage layer may end inside a batch; the next read takes
/// that batch up again. `corrupt(offset)` is the error for bytes at `offset` that are not a
/// batch, or for a read that returns none.
///
/// # Errors
///
/// Storage errors, `corrupt`'s, and `on_batch`'s.
pub fn for_each_batch<E: From<LogError>>(
    log: &Log,
    from: i64,
    to: i64,
    corrupt: impl Fn(i64) -> E,
    mut on_batch: impl FnMut(i64, &RecordBatchView<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let mut offset = from;
    let mut buf = Vec::new();
    while offset < to {
        let read = log.read(offset, READ_BYTES, to, true)?;
        buf.clear();
        for region in &read.regions {
            region.read_into(&mut buf).map_err(|source| LogError::Io {
                path: log.dir().to_owned(),
                source,
            })?;
        }
        let start = offset;
        let mut rest = buf.as_slice();
        while !rest.is_empty() {
            let complete = peek_total_len(rest).is_ok_and(|len| len <= rest.len());
            if !complete && offset > start {
                break;
            }
            let batch = RecordBatchView::parse(rest).map_err(|_| corrupt(offset))?;
            rest = &rest[batch.total_len()..];
            on_batch(offset, &batch)?;
            offset = offset.max(batch.last_offset() + 1);
        }
        if offset == start {
            return Err(corrupt(offset));
        }
    }
    Ok(())
}

/// A control batch (attribute bit 5) of one record: Kafka's control key of type `kind`
/// and `value`, base offset 0.
pub fn control_batch(kind: i16, value: Bytes, now_ms: i64) -> Vec<u8> {
    let record = SimpleRecord {
        key: Some(control_key(kind)),
        value: Some(value),
        timestamp: now_ms,
        headers: Vec::new(),
    };
    let mut batch = encode_batch(0, &[record]).to_vec();
    let attributes =
        i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]) | CONTROL_BIT;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    write_crc(&mut batch);
    batch
}

/// The control record type of a control batch's first record (Kafka's `ControlRecordType`),
/// with that record's value.
pub fn control_record<'a>(batch: &RecordBatchView<'a>) -> Option<(i16, &'a [u8])> {
    if !batch.is_control() {
        return None;
    }
    let record = batch.records().ok()?.next()?.ok()?;
    let key = record.key?;
    if key.len() != 4 {
        return None;
    }
    Some((i16::from_be_bytes([key[2], key[3]]), record.value?))
}

/// `VotersRecord` v0's value for `voters` (see the module doc).
pub fn voters_value(voters: &VoterSet) -> Bytes {
    let mut v = BytesMut::new();
    v.put_i16(0);
    put_uvarint(&mut v, voters.keys.len() as u64 + 1);
    for voter in &voters.keys {
        v.put_i32(voter.id.0);
        v.put_slice(voter.directory_id.as_bytes());
        // Endpoints: the controller listener the voter was added with, if any.
        let endpoint = voters.endpoints.get(&voter.id);
        put_uvarint(&mut v, u64::from(endpoint.is_some()) + 1);
        if let Some(e) = endpoint {
            put_compact_string(&mut v, &e.name);
            put_compact_string(&mut v, &e.host);
            v.put_u16(e.port);
            v.put_u8(0); // no tagged fields
        }
        v.put_i16(0); // KRaftVersionFeature.MinSupportedVersion
        v.put_i16(1); // KRaftVersionFeature.MaxSupportedVersion
        v.put_u8(0);
        v.put_u8(0);
    }
    v.put_u8(0);
    v.freeze()
}

fn put_compact_string(out: &mut BytesMut, s: &str) {
    put_uvarint(out, s.len() as u64 + 1);
    out.put_slice(s.as_bytes());
}

/// One entry as one batch (see the module doc), base offset 0 (the log assigns it).
pub fn encode_entry(entry: &Entry, now_ms: i64) -> Vec<u8> {
    let (control, key, value) = match &entry.payload {
        Payload::Data(data) => (false, None, data.clone()),
        Payload::LeaderChange { leader } => {
            let mut v = BytesMut::new();
            v.put_i16(0);
            v.put_i32(leader.0);
            v.put_u8(1); // Voters: empty compact array
            v.put_u8(1); // GrantingVoters: empty compact array
            v.put_u8(0); // no tagged fields
            (true, Some(control_key(LEADER_CHANGE)), v.freeze())
        }
        Payload::Voters(voters) => (true, Some(control_key(KRAFT_VOTERS)), voters_value(voters)),
    };
    let record = SimpleRecord {
        key,
        value: Some(value),
        timestamp: now_ms,
        headers: Vec::new(),
    };
    let mut batch = encode_batch(0, &[record]).to_vec();
    if control {
        let attributes =
            i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]) | CONTROL_BIT;
        batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
        write_crc(&mut batch);
    }
    batch
}

/// The entries of a record set received from the leader (one batch per entry).
pub fn decode_entries(records: &[u8]) -> Option<Vec<Entry>> {
    let mut out = Vec::new();
    let mut rest = records;
    while !rest.is_empty() {
        let batch = RecordBatchView::parse(rest).ok()?;
        batch.verify_crc().ok()?;
        rest = &rest[batch.total_len()..];
        out.push(decode_entry(&batch)?);
    }
    Some(out)
}

/// One batch back to its entry; `None` if it is not one this module wrote.
pub fn decode_entry(batch: &RecordBatchView<'_>) -> Option<Entry> {
    let epoch = batch.partition_leader_epoch();
    let mut records = batch.records().ok()?;
    let record = records.next()?.ok()?;
    let value = record.value?;
    let payload = if batch.is_control() {
        let key = record.key?;
        if key.len() != 4 {
            return None;
        }
        let kind = i16::from_be_bytes([key[2], key[3]]);
        match kind {
            LEADER_CHANGE => {
                if value.len() < 6 {
                    return None;
                }
                let leader = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
                Payload::LeaderChange {
                    leader: NodeId(leader),
                }
            }
            KRAFT_VOTERS => Payload::Voters(decode_voters(value)?),
            _ => return None,
        }
    } else {
        Payload::Data(Bytes::copy_from_slice(value))
    };
    Some(Entry { epoch, payload })
}

/// A `VotersRecord` value back to the voter set. Every count and length is checked
/// against the bytes that are there before anything is allocated for it.
pub fn decode_voters(value: &[u8]) -> Option<VoterSet> {
    let mut r = Reader { buf: value, pos: 2 }; // version
    let count = r.count(21)?;
    let mut voters = VoterSet::default();
    for _ in 0..count {
        let id = NodeId(i32::from_be_bytes(r.take(4)?.try_into().ok()?));
        let directory_id = Uuid::from_slice(r.take(16)?).ok()?;
        for i in 0..r.count(4)? {
            let name = r.string()?;
            let host = r.string()?;
            let port = u16::from_be_bytes(r.take(2)?.try_into().ok()?);
            r.skip_tagged_fields()?;
            // KIP-853 allows several listeners; the first is the one a voter is reached at.
            if i == 0 {
                voters.endpoints.insert(id, Endpoint { name, host, port });
            }
        }
        r.take(4)?; // KRaftVersionFeature: min and max supported versions
        r.skip_tagged_fields()?;
        r.skip_tagged_fields()?;
        voters.keys.push(ReplicaKey { id, directory_id });
    }
    r.skip_tagged_fields()?;
    Some(voters)
}

/// A bounds-checked cursor over a record value.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let out = self.buf.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(out)
    }

    fn uvarint(&mut self) -> Option<u64> {
        let (v, used) = get_uvarint(self.buf.get(self.pos..)?)?;
        self.pos += used;
        Some(v)
    }

    /// A compact array's length, refused when the remaining bytes cannot hold that many
    /// elements of at least `min_size` bytes.
    fn count(&mut self, min_size: usize) -> Option<usize> {
        let n = usize::try_from(self.uvarint()?.checked_sub(1)?).ok()?;
        (n.checked_mul(min_size)? <= self.buf.len() - self.pos).then_some(n)
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.uvarint()?.checked_sub(1)?).ok()?;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }

    fn skip_tagged_fields(&mut self) -> Option<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?; // tag
            let len = usize::try_from(self.uvarint()?).ok()?;
            self.take(len)?;
        }
        Some(())
    }
}

fn control_key(kind: i16) -> Bytes {
    let mut k = BytesMut::with_capacity(4);
    k.put_i16(0);
    k.put_i16(kind);
    k.freeze()
}

fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn get_uvarint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, b) in buf.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_the_disk_and_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("__cluster_metadata-0");
        let key = ReplicaKey {
            id: NodeId(2),
            directory_id: Uuid::from_u128(7),
        };
        let entries = vec![
            Entry {
                epoch: 1,
                payload: Payload::LeaderChange { leader: NodeId(1) },
            },
            Entry {
                epoch: 1,
                payload: Payload::Data(Bytes::from_static(b"abc")),
            },
            Entry {
                epoch: 2,
                payload: Payload::Voters(VoterSet {
                    keys: vec![key],
                    endpoints: [(
                        key.id,
                        Endpoint {
                            name: "CONTROLLER".into(),
                            host: "127.0.0.1".into(),
                            port: 9093,
                        },
                    )]
                    .into(),
                }),
            },
        ];
        let mut disk = RaftDisk::open(&path, 0, 1 << 30).unwrap();
        assert!(disk.entries_from(0).unwrap().is_empty());
        disk.append(0, &entries, 0).unwrap();
        assert!(disk.append(0, &entries, 0).is_err());
        disk.close().unwrap();
        let mut disk = RaftDisk::open(&path, 0, 1 << 30).unwrap();
        assert_eq!(disk.entries_from(0).unwrap(), entries);
        assert_eq!(disk.epoch_at(2).unwrap(), Some(2));
        assert_eq!(disk.epoch_at(3).unwrap(), None);
        disk.truncate(1).unwrap();
        disk.close().unwrap();
        let disk = RaftDisk::open(&path, 0, 1 << 30).unwrap();
        assert_eq!(disk.entries_from(0).unwrap(), entries[..1]);
    }

    #[test]
    fn segments_roll_and_go_whole_below_a_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("__cluster_metadata-0");
        let mut disk = RaftDisk::open(&path, 0, 1024).unwrap();
        let entries: Vec<Entry> = (0..100)
            .map(|i| Entry {
                epoch: 1 + i / 40,
                payload: Payload::Data(Bytes::from(vec![7u8; 60])),
            })
            .collect();
        disk.append(0, &entries, 0).unwrap();
        assert_eq!(disk.delete_before(0).unwrap(), 0);
        let deleted = disk.delete_before(70).unwrap();
        assert!(deleted > 1, "{deleted} segments deleted");
        let start = disk.log_start_offset();
        assert!(start > 0 && start <= 70, "log start {start}");
        assert_eq!(disk.entries_from(70).unwrap(), entries[70..]);
        assert_eq!(disk.epoch_at(70).unwrap(), Some(2));
        assert_eq!(disk.epoch_at(99).unwrap(), Some(3));
        assert_eq!(disk.epoch_at(100).unwrap(), None);
        assert_eq!(disk.epoch_at(start - 1).unwrap(), None);
        disk.close().unwrap();
        // Reopened, the log starts where the deletion left it.
        let mut disk = RaftDisk::open(&path, 0, 1024).unwrap();
        assert_eq!(disk.log_start_offset(), start);
        assert_eq!(disk.entries_from(0).unwrap(), entries[start as usize..]);
        // A fetched snapshot empties the log.
        disk.reset_to(500).unwrap();
        assert_eq!((disk.log_start_offset(), disk.log_end_offset()), (500, 500));
        disk.append(500, &entries[..1], 0).unwrap();
        disk.close().unwrap();
        let disk = RaftDisk::open(&path, 0, 1024).unwrap();
        assert_eq!(disk.entries_from(0).unwrap(), entries[..1]);
        assert_eq!(disk.log_start_offset(), 500);
    }

    #[test]
    fn a_record_set_decodes_to_its_entries() {
        let entries = vec![
            Entry {
                epoch: 3,
                payload: Payload::LeaderChange { leader: NodeId(3) },
            },
            Entry {
                epoch: 3,
                payload: Payload::Data(Bytes::from_static(b"x")),
            },
        ];
        let mut set = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let mut b = encode_entry(e, 5);
            strata_protocol::record_batch::set_base_offset(&mut b, i as i64);
            strata_protocol::record_batch::set_partition_leader_epoch(&mut b, e.epoch);
            set.extend_from_slice(&b);
        }
        assert_eq!(decode_entries(&set).unwrap(), entries);
        assert!(decode_entries(&set[..set.len() - 1]).is_none());
    }

    /// KIP-853's `VotersRecord`: endpoints survive a round trip; a value cut anywhere, or
    /// with a count larger than its bytes could hold, is refused without a panic or a
    /// large allocation; the old form without endpoints still reads.
    #[test]
    fn voters_records_round_trip_and_refuse_bad_bytes() {
        let set = VoterSet {
            keys: vec![
                ReplicaKey {
                    id: NodeId(1),
                    directory_id: Uuid::from_u128(11),
                },
                ReplicaKey {
                    id: NodeId(2),
                    directory_id: Uuid::from_u128(22),
                },
            ],
            endpoints: [(
                NodeId(2),
                Endpoint {
                    name: "CONTROLLER".into(),
                    host: "controller-2.example".into(),
                    port: 9093,
                },
            )]
            .into(),
        };
        let value = voters_value(&set);
        assert_eq!(decode_voters(&value), Some(set.clone()));
        for cut in 0..value.len() {
            assert_eq!(decode_voters(&value[..cut]), None, "cut at {cut}");
        }
        // A voter count of 2^32 in a value of a few bytes.
        let mut huge = vec![0, 0];
        huge.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x10]);
        assert_eq!(decode_voters(&huge), None);
        // The form written before endpoints: an empty Endpoints array per voter.
        let old = voters_value(&VoterSet::of(set.keys.clone()));
        assert_eq!(decode_voters(&old), Some(VoterSet::of(set.keys)));
    }
}
