//! Opening a data directory of the single-node layout of earlier releases, whose lone node
//! kept the metadata in `__cluster_metadata-0` as a plain log of its own: one batch of
//! metadata records per operation, every batch stamped with epoch 1, no `quorum-state`, no
//! snapshot. Every node runs the Raft quorum now, and its log holds one entry per batch
//! (see [`super::disk`]), so such a directory is converted once, on the first start of the
//! new release, before the quorum opens it:
//!
//! 1. The old log is replayed into an image (a torn final batch is cut by the storage
//!    layer's recovery, as the old release did on every start).
//! 2. A staging directory, `__cluster_metadata-0.upgrading`, gets a snapshot of that image
//!    ending at the old log's end offset with epoch 1 ([`super::snapshot`]), an empty Raft
//!    log starting there, and a `quorum-state` naming this node the leader of epoch 1; each
//!    file is written durably, then the directory is fsynced.
//! 3. `__cluster_metadata-0` is renamed to `__cluster_metadata-0.legacy` (kept for an
//!    operator; nothing reads it again), the staging directory to `__cluster_metadata-0`,
//!    and the data directory is fsynced.
//!
//! The quorum then starts from the snapshot: the node stands at once as the only voter
//! (epoch 2), and the image it publishes is the one the old release served, so topics,
//! configs, ACLs, quotas, SCRAM credentials and producer id blocks carry over. Partition
//! logs and `__consumer_offsets` (offsets and groups) are not touched: their layout did not
//! change.
//!
//! Crash policy: a crash before the first rename leaves the old directory as it was and a
//! staging directory, which the next start removes and builds again; a crash between the
//! renames leaves the staging directory and the `.legacy` one, and the next start finishes
//! the second rename.
//!
//! A directory is of the old layout when `__cluster_metadata-0` holds no `quorum-state` and
//! no snapshot, and its first batch, at offset 0, is not a control batch: a Raft log that
//! starts at 0 starts with a control batch (the first leader's `LeaderChange`, or a dynamic
//! quorum's `Voters`), and one that starts later has a snapshot.

use std::path::{Path, PathBuf};

use strata_kraft::quorum_state::{QuorumStateData, QuorumStateStore};
use strata_kraft::raft::{Snapshot, SnapshotId};
use strata_kraft::{MetadataImage, MetadataRecord, Uuid};
use strata_storage::{Log, LogConfig, LogError};

use super::{QuorumError, disk, snapshot};

/// Where the old metadata log is kept after the upgrade, beside `__cluster_metadata-0`.
pub const LEGACY_SUFFIX: &str = ".legacy";
/// The directory the new layout is assembled in before it takes the place of the old one.
const STAGING_SUFFIX: &str = ".upgrading";
/// The epoch the old release stamped on every batch.
const LEGACY_EPOCH: i32 = 1;
/// The batch attributes' position in a v2 header, and the control bit.
const ATTRIBUTES_AT: usize = 21;
const CONTROL_BIT: u8 = 0x20;
/// A v2 batch header's length.
const HEADER_BYTES: usize = 61;

/// Why the old layout could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// Which file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The old log could not be read.
    #[error("the single-node metadata log: {0}")]
    Storage(#[from] LogError),
    /// A batch of the old log does not parse or fails its CRC.
    #[error("the single-node metadata log is corrupt at offset {offset}: {reason}")]
    Corrupt {
        /// Where.
        offset: i64,
        /// What.
        reason: String,
    },
}

/// Converts `<log_dir>/<metadata_dir>` if it is of the old single-node layout (see the
/// module doc), for node `node_id`, the quorum's only voter. Returns whether it did (or
/// finished a conversion a crash interrupted).
///
/// # Errors
///
/// [`QuorumError`] when the old log cannot be read or the new layout cannot be written;
/// the old directory is then left as it was.
pub fn upgrade_single_node_log(
    log_dir: &Path,
    metadata_dir: &str,
    node_id: i32,
    segment_bytes: u32,
    now_ms: i64,
) -> Result<bool, QuorumError> {
    let live = log_dir.join(metadata_dir);
    let legacy = log_dir.join(format!("{metadata_dir}{LEGACY_SUFFIX}"));
    let staging = log_dir.join(format!("{metadata_dir}{STAGING_SUFFIX}"));
    if !live.exists() && staging.is_dir() && legacy.is_dir() {
        // A crash between the two renames.
        rename(&staging, &live)?;
        sync_dir(log_dir)?;
        tracing::warn!(dir = %live.display(), "finished an upgrade of the metadata log a crash interrupted");
        return Ok(true);
    }
    if staging.exists() {
        // A crash before the first rename: the old directory is intact.
        std::fs::remove_dir_all(&staging).map_err(|source| io(&staging, source))?;
    }
    if !is_legacy(&live)? {
        return Ok(false);
    }
    let (records, end_offset) = replay(&live, now_ms).map_err(upgrade)?;
    std::fs::create_dir_all(&staging).map_err(|source| io(&staging, source))?;
    let checkpoint = snapshot::Checkpoint {
        voters: None,
        records,
    };
    let snapshot = Snapshot {
        id: SnapshotId {
            end_offset,
            epoch: LEGACY_EPOCH,
        },
        data: checkpoint.encode(LEGACY_EPOCH, now_ms),
        voters: None,
    };
    snapshot::write(&staging, &snapshot)?;
    let mut raft_log = disk::RaftDisk::open(&staging, now_ms, segment_bytes)?;
    raft_log.reset_to(end_offset)?;
    drop(raft_log);
    QuorumStateStore::new(&staging).write(&QuorumStateData {
        leader_id: node_id,
        leader_epoch: LEGACY_EPOCH,
        voted_id: node_id,
        voted_directory_id: Uuid::nil(),
    })?;
    sync_dir(&staging)?;
    rename(&live, &legacy)?;
    rename(&staging, &live)?;
    sync_dir(log_dir)?;
    tracing::info!(
        end_offset,
        records = checkpoint.records.len(),
        kept = %legacy.display(),
        "upgraded the single-node metadata log: the quorum starts from a snapshot of it"
    );
    Ok(true)
}

/// Whether `dir` holds a metadata log of the old single-node layout.
fn is_legacy(dir: &Path) -> Result<bool, QuorumError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(io(dir, source)),
    };
    for entry in entries {
        let name = entry.map_err(|source| io(dir, source))?.file_name();
        let name = name.to_string_lossy();
        if name == strata_kraft::quorum_state::QUORUM_STATE_FILE || name.ends_with(".checkpoint") {
            return Ok(false);
        }
    }
    // The first segment's first batch header (a Raft log or an old one both start at 0).
    let first = dir.join(format!("{:020}.log", 0));
    let mut header = [0u8; HEADER_BYTES];
    let read = match std::fs::File::open(&first) {
        Ok(mut f) => {
            std::io::Read::read(&mut f, &mut header).map_err(|source| io(&first, source))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(io(&first, source)),
    };
    // The attributes' low byte is the second of the big-endian i16.
    Ok(read == HEADER_BYTES && header[ATTRIBUTES_AT + 1] & CONTROL_BIT == 0)
}

/// The old log's records, in order, and its end offset.
fn replay(dir: &Path, now_ms: i64) -> Result<(Vec<MetadataRecord>, i64), UpgradeError> {
    let config = LogConfig {
        retention_ms: -1,
        retention_bytes: -1,
        ..LogConfig::default()
    };
    let log = Log::open(dir, config, now_ms)?;
    let end = log.log_end_offset();
    // Applying each record checks, as the old release's start did, that the log builds an
    // image; a record that does not apply stops the upgrade instead of being lost.
    let mut image = MetadataImage::new(String::new(), -1);
    let corrupt = |offset: i64, reason: String| UpgradeError::Corrupt { offset, reason };
    disk::for_each_batch(
        &log,
        log.log_start_offset(),
        end,
        |offset| corrupt(offset, "not a record batch".into()),
        |offset, batch| {
            batch
                .verify_crc()
                .map_err(|e| corrupt(offset, e.to_string()))?;
            if batch.is_control() {
                return Ok(());
            }
            for record in batch
                .records()
                .map_err(|e| corrupt(offset, e.to_string()))?
            {
                let record = record.map_err(|e| corrupt(offset, e.to_string()))?;
                if record.offset < offset {
                    continue;
                }
                let at = |reason: String| corrupt(record.offset, reason);
                let value = record
                    .value
                    .ok_or_else(|| at("a null record value".into()))?;
                let decoded = MetadataRecord::decode(value).map_err(|e| at(e.to_string()))?;
                image.apply(&decoded).map_err(|e| at(e.to_string()))?;
            }
            Ok(())
        },
    )?;
    Ok((image.records(), end))
}

fn rename(from: &Path, to: &Path) -> Result<(), QuorumError> {
    std::fs::rename(from, to).map_err(|source| io(from, source))
}

fn sync_dir(dir: &Path) -> Result<(), QuorumError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| io(dir, source))
}

fn io(path: &Path, source: std::io::Error) -> QuorumError {
    QuorumError::Io {
        path: path.to_owned(),
        source,
    }
}

fn upgrade(e: UpgradeError) -> QuorumError {
    QuorumError::Upgrade(e)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strata_kraft::raft::{Entry, NodeId, Payload};
    use strata_kraft::record::TopicRecord;
    use strata_protocol::record_batch::{SimpleRecord, encode_batch};

    use super::*;

    const DIR: &str = "__cluster_metadata-0";

    fn topic(name: &str, id: u128) -> MetadataRecord {
        MetadataRecord::Topic(TopicRecord {
            name: name.to_owned(),
            topic_id: Uuid::from_u128(id),
        })
    }

    /// A metadata log as the old release wrote it: one plain batch per operation, epoch 1.
    fn legacy_log(log_dir: &Path, operations: &[&[MetadataRecord]]) {
        let mut log = Log::open(&log_dir.join(DIR), LogConfig::default(), 0).unwrap();
        for records in operations {
            let batch: Vec<SimpleRecord> = records
                .iter()
                .map(|r| SimpleRecord {
                    key: None,
                    value: Some(Bytes::from(r.encode())),
                    timestamp: 0,
                    headers: Vec::new(),
                })
                .collect();
            let mut bytes = encode_batch(0, &batch).to_vec();
            log.append(&mut bytes, LEGACY_EPOCH, 0).unwrap();
        }
        log.flush().unwrap();
    }

    fn upgrade(log_dir: &Path) -> bool {
        upgrade_single_node_log(log_dir, DIR, 1, 1 << 20, 0).unwrap()
    }

    /// The topics the snapshot in `<log_dir>/__cluster_metadata-0` rebuilds, and its end.
    fn snapshot_topics(log_dir: &Path) -> (Vec<String>, i64) {
        let loaded = snapshot::load_latest(&log_dir.join(DIR)).unwrap().unwrap();
        let mut image = MetadataImage::new(String::new(), -1);
        for r in &loaded.checkpoint.records {
            image.apply(r).unwrap();
        }
        (
            image.topics.keys().cloned().collect(),
            loaded.snapshot.id.end_offset,
        )
    }

    #[test]
    fn an_old_log_becomes_a_snapshot_and_is_kept_beside() {
        let t = tempfile::tempdir().unwrap();
        legacy_log(
            t.path(),
            &[&[topic("a", 1)], &[topic("b", 2), topic("c", 3)]],
        );
        assert!(upgrade(t.path()));
        assert_eq!(
            snapshot_topics(t.path()),
            (vec!["a".into(), "b".into(), "c".into()], 3)
        );
        let state = QuorumStateStore::new(&t.path().join(DIR))
            .read()
            .unwrap()
            .unwrap();
        assert_eq!((state.leader_id, state.leader_epoch), (1, LEGACY_EPOCH));
        let disk = disk::RaftDisk::open(&t.path().join(DIR), 0, 1 << 20).unwrap();
        assert_eq!((disk.log_start_offset(), disk.log_end_offset()), (3, 3));
        assert!(t.path().join(format!("{DIR}{LEGACY_SUFFIX}")).is_dir());
        assert!(!t.path().join(format!("{DIR}{STAGING_SUFFIX}")).exists());
        // Once only.
        assert!(!upgrade(t.path()));
    }

    #[test]
    fn a_raft_log_and_an_empty_directory_are_left_alone() {
        let t = tempfile::tempdir().unwrap();
        assert!(!upgrade(t.path()), "nothing there");
        let mut disk = disk::RaftDisk::open(&t.path().join(DIR), 0, 1 << 20).unwrap();
        let entries = [
            Entry {
                epoch: 1,
                payload: Payload::LeaderChange { leader: NodeId(1) },
            },
            Entry {
                epoch: 1,
                payload: Payload::Data(Bytes::from(topic("a", 1).encode())),
            },
        ];
        disk.append(0, &entries, 0).unwrap();
        drop(disk);
        assert!(!upgrade(t.path()));
        assert!(!t.path().join(format!("{DIR}{LEGACY_SUFFIX}")).exists());
    }

    #[test]
    fn a_crash_before_the_renames_starts_over_and_one_between_them_finishes() {
        // Before the first rename: the old log is intact, the staging directory half made.
        let t = tempfile::tempdir().unwrap();
        legacy_log(t.path(), &[&[topic("a", 1)]]);
        let staging = t.path().join(format!("{DIR}{STAGING_SUFFIX}"));
        std::fs::create_dir_all(&staging).unwrap();
        std::fs::write(staging.join("junk.checkpoint.part"), b"half").unwrap();
        assert!(upgrade(t.path()));
        assert_eq!(snapshot_topics(t.path()), (vec!["a".into()], 1));
        // Between the renames: the old log is `.legacy`, the new one still staged.
        let t = tempfile::tempdir().unwrap();
        legacy_log(t.path(), &[&[topic("a", 1)], &[topic("b", 2)]]);
        assert!(upgrade(t.path()));
        std::fs::rename(
            t.path().join(DIR),
            t.path().join(format!("{DIR}{STAGING_SUFFIX}")),
        )
        .unwrap();
        assert!(upgrade(t.path()));
        assert_eq!(snapshot_topics(t.path()), (vec!["a".into(), "b".into()], 2));
    }

    #[test]
    fn a_torn_last_batch_loses_only_that_operation() {
        let t = tempfile::tempdir().unwrap();
        legacy_log(
            t.path(),
            &[&[topic("a", 1)], &[topic("b", 2), topic("c", 3)]],
        );
        let segment = t.path().join(DIR).join(format!("{:020}.log", 0));
        let len = std::fs::metadata(&segment).unwrap().len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&segment)
            .unwrap();
        f.set_len(len - 5).unwrap();
        drop(f);
        assert!(upgrade(t.path()));
        assert_eq!(snapshot_topics(t.path()), (vec!["a".into()], 1));
    }
}
