//! Metadata snapshots on disk (KIP-630): the `.checkpoint` files of `__cluster_metadata-0`.
//!
//! A snapshot is named as Kafka names it, `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`:
//! it holds the state of every entry below the end offset, the last of which has that epoch.
//! Its bytes are what FetchSnapshot sends, unchanged, so a fetched snapshot is stored as it
//! arrived. See [`Checkpoint`] for the byte format and the crash policy.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use strata_kraft::raft::{Snapshot, SnapshotId, VoterSet};
use strata_kraft::{MetadataError, MetadataRecord};
use strata_protocol::record_batch::{
    RecordBatchView, SimpleRecord, encode_batch, set_base_offset, set_partition_leader_epoch,
};

use super::disk::{KRAFT_VOTERS, control_batch, control_record, decode_voters, voters_value};

/// Kafka's `ControlRecordType.SNAPSHOT_HEADER`.
const SNAPSHOT_HEADER: i16 = 3;
/// Kafka's `ControlRecordType.SNAPSHOT_FOOTER`.
const SNAPSHOT_FOOTER: i16 = 4;
/// Kafka's `ControlRecordType.KRAFT_VERSION`: skipped on load (a Kafka snapshot has one).
const KRAFT_VERSION: i16 = 5;
/// A data batch is closed once its records' values pass this many bytes (Kafka's
/// snapshot writer batches up to its 8 MiB `MAX_BATCH_SIZE_BYTES`; smaller batches only
/// cost a header each).
const BATCH_BYTES: usize = 512 * 1024;
/// The suffix of a finished snapshot.
const SUFFIX: &str = ".checkpoint";
/// The suffix of a snapshot being written (Kafka's `.checkpoint.part`).
const PART_SUFFIX: &str = ".checkpoint.part";
/// The suffix a snapshot that failed to load is renamed to, kept for inspection.
const CORRUPT_SUFFIX: &str = ".checkpoint.corrupt";

/// Why a snapshot could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A file operation failed.
    #[error("snapshot {path}: {source}")]
    Io {
        /// Which file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bytes end before the footer: a torn write or a short transfer.
    #[error("snapshot ends at byte {at} without its footer")]
    Torn {
        /// Where the bytes end.
        at: usize,
    },
    /// A batch does not parse, fails its CRC, or is not where the format puts it.
    #[error("snapshot is corrupt at byte {at}: {reason}")]
    Corrupt {
        /// The batch's position.
        at: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A metadata record does not decode.
    #[error("snapshot record at byte {at}: {source}")]
    Record {
        /// The batch's position.
        at: usize,
        /// Why.
        source: MetadataError,
    },
}

/// A metadata snapshot file, byte by byte. Every part is a Kafka v2 record batch (CRC32C
/// over the batch), with base offsets counting records from 0 and the snapshot's epoch as
/// each batch's partition leader epoch, as Kafka's `RecordsSnapshotWriter` lays them out:
///
/// 1. A control batch whose one record has Kafka's control key of type 3
///    (`SNAPSHOT_HEADER`) and the value `SnapshotHeaderRecord` v0: `i16 version = 0`,
///    `i64 last_contained_log_timestamp` (when the snapshot was taken, ms), no tagged fields.
/// 2. If the log below the end offset held a voter set (KIP-853), a control batch with key
///    type 6 (`KRAFT_VOTERS`) and a `VotersRecord` value, as in the metadata log.
/// 3. Data batches: each record's value is one [`MetadataRecord`] in Kafka's framing
///    (`MetadataImage::records`: the records that rebuild the image); no keys.
/// 4. A control batch with key type 4 (`SNAPSHOT_FOOTER`) and the value
///    `SnapshotFooterRecord` v0: `i16 version = 0`, no tagged fields.
///
/// Crash policy: a snapshot is written to `<name>.checkpoint.part`, fsynced, renamed to
/// `<name>.checkpoint`, and the directory fsynced, so a `.checkpoint` file was complete
/// when written. A load still checks every CRC and requires the footer last: a file that
/// fails is renamed to `.checkpoint.corrupt` and the next older snapshot is tried (the
/// driver then discards whatever of the log that snapshot does not reach). Leftover
/// `.part` files are deleted at start.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The voter set in force at the end offset, if the log had one.
    pub voters: Option<VoterSet>,
    /// The records that rebuild the metadata image.
    pub records: Vec<MetadataRecord>,
}

impl Checkpoint {
    /// The file's bytes, stamped with `epoch` and the time `now_ms`.
    #[must_use]
    pub fn encode(&self, epoch: i32, now_ms: i64) -> Bytes {
        let mut out = BytesMut::new();
        let mut next_offset = 0i64;
        let mut push = |out: &mut BytesMut, mut batch: Vec<u8>, count: i64| {
            set_base_offset(&mut batch, next_offset);
            set_partition_leader_epoch(&mut batch, epoch);
            next_offset += count;
            out.put_slice(&batch);
        };
        let mut header = BytesMut::with_capacity(11);
        header.put_i16(0);
        header.put_i64(now_ms);
        header.put_u8(0);
        push(
            &mut out,
            control_batch(SNAPSHOT_HEADER, header.freeze(), now_ms),
            1,
        );
        if let Some(voters) = &self.voters {
            push(
                &mut out,
                control_batch(KRAFT_VOTERS, voters_value(voters), now_ms),
                1,
            );
        }
        let mut batch: Vec<SimpleRecord> = Vec::new();
        let mut batch_bytes = 0;
        for record in &self.records {
            let value = Bytes::from(record.encode());
            batch_bytes += value.len();
            batch.push(SimpleRecord {
                key: None,
                value: Some(value),
                timestamp: now_ms,
                headers: Vec::new(),
            });
            if batch_bytes >= BATCH_BYTES {
                push(
                    &mut out,
                    encode_batch(0, &batch).to_vec(),
                    batch.len() as i64,
                );
                batch.clear();
                batch_bytes = 0;
            }
        }
        if !batch.is_empty() {
            push(
                &mut out,
                encode_batch(0, &batch).to_vec(),
                batch.len() as i64,
            );
        }
        let mut footer = BytesMut::with_capacity(3);
        footer.put_i16(0);
        footer.put_u8(0);
        push(
            &mut out,
            control_batch(SNAPSHOT_FOOTER, footer.freeze(), now_ms),
            1,
        );
        out.freeze()
    }

    /// Reads a snapshot's bytes back, checking every batch.
    ///
    /// # Errors
    ///
    /// [`SnapshotError::Torn`] when the footer is missing, [`SnapshotError::Corrupt`] or
    /// [`SnapshotError::Record`] when a batch or record is bad. Never panics.
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint, SnapshotError> {
        let mut at = 0;
        let mut voters = None;
        let mut records = Vec::new();
        let mut seen_header = false;
        while at < bytes.len() {
            let rest = &bytes[at..];
            let corrupt = |reason| SnapshotError::Corrupt { at, reason };
            let batch = match RecordBatchView::parse(rest) {
                Ok(b) => b,
                // A batch cut short is a torn tail; anything else is damage.
                Err(_)
                    if strata_protocol::record_batch::peek_total_len(rest)
                        .map_or(true, |len| len > rest.len()) =>
                {
                    return Err(SnapshotError::Torn { at });
                }
                Err(_) => return Err(corrupt("batch does not parse")),
            };
            batch.verify_crc().map_err(|_| corrupt("CRC mismatch"))?;
            let next = at + batch.total_len();
            if batch.is_control() {
                let (kind, value) = control_record(&batch).ok_or(corrupt("bad control record"))?;
                match kind {
                    SNAPSHOT_HEADER if !seen_header => {
                        if value.len() < 2 || value[..2] != [0, 0] {
                            return Err(corrupt("unknown header version"));
                        }
                        seen_header = true;
                    }
                    _ if !seen_header => return Err(corrupt("does not start with a header")),
                    KRAFT_VOTERS => {
                        voters = Some(decode_voters(value).ok_or(corrupt("bad voters record"))?);
                    }
                    KRAFT_VERSION => {}
                    SNAPSHOT_FOOTER => {
                        if next != bytes.len() {
                            return Err(corrupt("bytes after the footer"));
                        }
                        return Ok(Checkpoint { voters, records });
                    }
                    _ => return Err(corrupt("unexpected control record")),
                }
            } else {
                if !seen_header {
                    return Err(corrupt("does not start with a header"));
                }
                for record in batch.records().map_err(|_| corrupt("bad records"))? {
                    let record = record.map_err(|_| corrupt("bad record"))?;
                    let value = record.value.ok_or(corrupt("record without a value"))?;
                    records.push(
                        MetadataRecord::decode(value)
                            .map_err(|source| SnapshotError::Record { at, source })?,
                    );
                }
            }
            at = next;
        }
        Err(SnapshotError::Torn { at })
    }
}

/// The file name of snapshot `id`.
#[must_use]
pub fn file_name(id: SnapshotId) -> String {
    format!("{:020}-{:010}{SUFFIX}", id.end_offset, id.epoch)
}

/// The snapshot id a file name stands for, if it is a finished snapshot's name.
#[must_use]
pub fn parse_file_name(name: &str) -> Option<SnapshotId> {
    let stem = name.strip_suffix(SUFFIX)?;
    let (offset, epoch) = stem.split_once('-')?;
    if offset.len() != 20 || epoch.len() != 10 {
        return None;
    }
    Some(SnapshotId {
        end_offset: offset.parse().ok()?,
        epoch: epoch.parse().ok()?,
    })
}

/// Writes `snapshot` durably into `dir` (see [`Checkpoint`] for the steps).
///
/// # Errors
///
/// [`SnapshotError::Io`].
pub fn write(dir: &Path, snapshot: &Snapshot) -> Result<PathBuf, SnapshotError> {
    let name = file_name(snapshot.id);
    let path = dir.join(&name);
    let part = dir.join(format!("{name}.part"));
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| SnapshotError::Io { path, source }
    };
    let mut file = File::create(&part).map_err(io(&part))?;
    file.write_all(&snapshot.data).map_err(io(&part))?;
    file.sync_all().map_err(io(&part))?;
    drop(file);
    fs::rename(&part, &path).map_err(io(&path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))?;
    Ok(path)
}

/// The finished snapshots in `dir`, oldest first.
///
/// # Errors
///
/// [`SnapshotError::Io`] when the directory cannot be listed.
pub fn list(dir: &Path) -> Result<Vec<SnapshotId>, SnapshotError> {
    let mut ids = Vec::new();
    let entries = fs::read_dir(dir).map_err(|source| SnapshotError::Io {
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries.flatten() {
        if let Some(id) = entry.file_name().to_str().and_then(parse_file_name) {
            ids.push(id);
        }
    }
    ids.sort();
    Ok(ids)
}

/// Deletes every finished snapshot but the newest `keep` (Kafka keeps older ones for
/// `metadata.max.retention.*`; here the latest two are enough to fall back on).
pub fn prune(dir: &Path, keep: usize) {
    let Ok(ids) = list(dir) else {
        return;
    };
    for id in &ids[..ids.len().saturating_sub(keep)] {
        let path = dir.join(file_name(*id));
        if let Err(e) = fs::remove_file(&path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot delete an old snapshot");
        }
    }
}

/// What start-up found: the newest snapshot that loads, and its contents.
#[derive(Debug)]
pub struct Loaded {
    /// The snapshot as the Raft core holds it (its bytes are the file's).
    pub snapshot: Snapshot,
    /// The decoded file.
    pub checkpoint: Checkpoint,
}

/// Deletes leftover `.part` files, then loads the newest snapshot that reads back whole,
/// renaming any newer one that does not to `.checkpoint.corrupt`. `None` when no snapshot
/// loads.
///
/// # Errors
///
/// [`SnapshotError::Io`] when the directory cannot be listed.
pub fn load_latest(dir: &Path) -> Result<Option<Loaded>, SnapshotError> {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_str().is_some_and(|n| n.ends_with(PART_SUFFIX)) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    for id in list(dir)?.into_iter().rev() {
        let path = dir.join(file_name(id));
        let loaded = fs::read(&path)
            .map_err(|source| SnapshotError::Io {
                path: path.clone(),
                source,
            })
            .and_then(|bytes| {
                let checkpoint = Checkpoint::decode(&bytes)?;
                Ok(Loaded {
                    snapshot: Snapshot {
                        id,
                        data: Bytes::from(bytes),
                        voters: checkpoint.voters.clone(),
                    },
                    checkpoint,
                })
            });
        match loaded {
            Ok(l) => return Ok(Some(l)),
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e,
                    "metadata snapshot does not load; trying an older one");
                let mut bad = path.clone().into_os_string();
                bad.push(CORRUPT_SUFFIX.trim_start_matches(SUFFIX));
                let _ = fs::rename(&path, PathBuf::from(bad));
            }
        }
    }
    Ok(None)
}

/// Puts a snapshot fetched from the leader together from its chunks (FetchSnapshot pages
/// a snapshot by byte position, KIP-630). Trusts no size: the buffer grows only by the
/// bytes that arrive, and a snapshot larger than [`MAX_SNAPSHOT_BYTES`] is refused.
#[derive(Debug, Default)]
pub struct Assembly {
    /// The bytes so far; the next chunk must start at their length.
    bytes: BytesMut,
    /// The total size the leader announced with the first chunk.
    size: Option<i64>,
}

/// The largest snapshot a follower accepts.
pub const MAX_SNAPSHOT_BYTES: i64 = 1 << 30;

/// What a chunk did to an [`Assembly`].
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// More to fetch, from this position.
    Next(i64),
    /// The snapshot is whole.
    Done(Bytes),
    /// The chunk does not fit (wrong position, size changed or too large): start over.
    Refused,
}

impl Assembly {
    /// The position to fetch next.
    #[must_use]
    pub fn position(&self) -> i64 {
        self.bytes.len() as i64
    }

    /// Takes the chunk `data` that the leader says starts at `position` of a snapshot of
    /// `size` bytes.
    pub fn accept(&mut self, size: i64, position: i64, data: &[u8]) -> Progress {
        let fits = (0..=MAX_SNAPSHOT_BYTES).contains(&size)
            && self.size.is_none_or(|s| s == size)
            && position == self.position()
            && position + data.len() as i64 <= size
            && (!data.is_empty() || position == size);
        if !fits {
            return Progress::Refused;
        }
        self.size = Some(size);
        self.bytes.put_slice(data);
        if self.position() == size {
            Progress::Done(std::mem::take(&mut self.bytes).freeze())
        } else {
            Progress::Next(self.position())
        }
    }
}

#[cfg(test)]
mod tests {
    use strata_kraft::raft::{NodeId, ReplicaKey};
    use strata_kraft::record::{RemoveTopicRecord, TopicRecord};
    use strata_kraft::{MetadataImage, Uuid};

    use super::*;

    fn checkpoint(n: usize) -> Checkpoint {
        let mut image = MetadataImage::new("c", 1);
        for i in 0..n {
            image
                .apply(&MetadataRecord::Topic(TopicRecord {
                    name: format!("topic-{i}-{}", "x".repeat(i % 50)),
                    topic_id: Uuid::from_u128(i as u128 + 1),
                }))
                .unwrap();
        }
        Checkpoint {
            voters: Some(VoterSet::of(vec![ReplicaKey {
                id: NodeId(3),
                directory_id: Uuid::from_u128(9),
            }])),
            records: image.records(),
        }
    }

    fn snapshot(dir: &Path, end_offset: i64, epoch: i32, c: &Checkpoint) -> Snapshot {
        let s = Snapshot {
            id: SnapshotId { end_offset, epoch },
            data: c.encode(epoch, 7),
            voters: c.voters.clone(),
        };
        write(dir, &s).unwrap();
        s
    }

    #[test]
    fn a_checkpoint_round_trips_in_several_batches() {
        for n in [0, 1, 20_000] {
            let c = checkpoint(n);
            let bytes = c.encode(4, 1234);
            assert_eq!(Checkpoint::decode(&bytes).unwrap(), c);
        }
        let c = Checkpoint {
            voters: None,
            records: vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: Uuid::from_u128(5),
            })],
        };
        assert_eq!(Checkpoint::decode(&c.encode(1, 0)).unwrap(), c);
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_refused_without_a_panic() {
        let bytes = checkpoint(30).encode(2, 99);
        for cut in 0..bytes.len() {
            assert!(Checkpoint::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.to_vec();
            bad[at] ^= 0x40;
            // A flip in a batch's base offset or leader epoch is outside the CRC (as in
            // Kafka); everything else must be caught.
            if let Ok(c) = Checkpoint::decode(&bad) {
                assert_eq!(c, checkpoint(30), "flip at {at} changed the contents");
            }
        }
        let mut longer = bytes.to_vec();
        longer.extend_from_slice(&bytes);
        assert!(Checkpoint::decode(&longer).is_err());
    }

    #[test]
    fn names_are_kafkas() {
        let id = SnapshotId {
            end_offset: 123,
            epoch: 4,
        };
        assert_eq!(file_name(id), "00000000000000000123-0000000004.checkpoint");
        assert_eq!(parse_file_name(&file_name(id)), Some(id));
        assert_eq!(parse_file_name("00000000000000000123.log"), None);
        assert_eq!(
            parse_file_name("00000000000000000123-0000000004.checkpoint.part"),
            None
        );
    }

    #[test]
    fn the_newest_good_snapshot_loads_and_a_torn_one_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let c = checkpoint(5);
        assert!(load_latest(dir.path()).unwrap().is_none());
        let old = snapshot(dir.path(), 10, 1, &c);
        let new = snapshot(dir.path(), 20, 2, &c);
        fs::write(
            dir.path()
                .join("00000000000000000030-0000000002.checkpoint.part"),
            b"x",
        )
        .unwrap();
        let loaded = load_latest(dir.path()).unwrap().unwrap();
        assert_eq!(loaded.snapshot, new);
        assert_eq!(loaded.checkpoint, c);
        assert_eq!(list(dir.path()).unwrap().len(), 2, "the .part file is gone");

        // Tear the newest: the older one loads, the torn one is renamed.
        let path = dir.path().join(file_name(new.id));
        fs::write(&path, &new.data[..new.data.len() - 3]).unwrap();
        let loaded = load_latest(dir.path()).unwrap().unwrap();
        assert_eq!(loaded.snapshot, old);
        assert!(!path.exists());
        assert!(
            dir.path()
                .join("00000000000000000020-0000000002.checkpoint.corrupt")
                .exists()
        );

        // Garbage in the only one left: nothing loads, nothing panics.
        fs::write(dir.path().join(file_name(old.id)), b"not a snapshot").unwrap();
        assert!(load_latest(dir.path()).unwrap().is_none());
    }

    #[test]
    fn prune_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let c = checkpoint(1);
        for end in [5, 10, 15, 20] {
            snapshot(dir.path(), end, 1, &c);
        }
        prune(dir.path(), 2);
        let ends: Vec<i64> = list(dir.path())
            .unwrap()
            .iter()
            .map(|id| id.end_offset)
            .collect();
        assert_eq!(ends, vec![15, 20]);
    }

    #[test]
    fn an_assembly_takes_chunks_in_order_only() {
        let data = b"0123456789";
        let mut a = Assembly::default();
        assert_eq!(a.accept(10, 0, &data[..4]), Progress::Next(4));
        assert_eq!(a.accept(10, 0, &data[..4]), Progress::Refused, "repeat");
        assert_eq!(
            a.accept(11, 4, &data[4..8]),
            Progress::Refused,
            "size moved"
        );
        assert_eq!(
            a.accept(10, 4, &data[4..]),
            Progress::Done(Bytes::from(&data[..]))
        );
        let mut a = Assembly::default();
        assert_eq!(
            a.accept(4, 0, &data[..5]),
            Progress::Refused,
            "past the size"
        );
        assert_eq!(a.accept(MAX_SNAPSHOT_BYTES + 1, 0, data), Progress::Refused);
        assert_eq!(a.accept(-1, 0, data), Progress::Refused);
        assert_eq!(a.accept(10, 0, &[]), Progress::Refused, "no progress");
    }
}
