//! Snapshots in the driver (KIP-630): when to take one, taking it, installing one fetched
//! from the leader, and what start-up replays after the latest one. See the module doc of
//! [`super`] for the rules, and [`super::snapshot`] for the file.

use std::time::{Duration, Instant};

use strata_kraft::raft::{Entry, Input, Snapshot, SnapshotId};
use strata_kraft::{MetadataImage, MetadataRecord};

use super::{Driver, QuorumError, SNAPSHOTS_KEPT, disk, snapshot};

/// The entries to hand the core after the snapshot `snapshot` (or from 0 without one). A
/// log that does not continue the snapshot (it ends before the snapshot's end, starts after
/// it, or its entry just below the end has another epoch, as after a crash between storing
/// a fetched snapshot and emptying the log) is emptied to start at the snapshot's end: the
/// core then fetches what follows from the leader.
pub(super) fn entries_after(
    disk: &mut disk::RaftDisk,
    snapshot: Option<SnapshotId>,
) -> Result<Vec<Entry>, QuorumError> {
    let (end, epoch) = snapshot.map_or((0, None), |s| (s.end_offset, Some(s.epoch)));
    let start = disk.log_start_offset();
    let continues = start <= end
        && disk.log_end_offset() >= end
        && (end == start || disk.epoch_at(end - 1)? == epoch);
    if !continues {
        tracing::warn!(
            snapshot_end_offset = end,
            log_start_offset = start,
            log_end_offset = disk.log_end_offset(),
            "the metadata log does not continue the latest snapshot; emptying it"
        );
        disk.reset_to(end)?;
        return Ok(Vec::new());
    }
    Ok(disk.entries_from(end)?)
}

/// Applies a snapshot's records to `image`; a record that does not apply is logged and
/// skipped, as a committed entry's would be.
pub(super) fn apply_all(image: &mut MetadataImage, records: &[MetadataRecord], end_offset: i64) {
    for record in records {
        if let Err(e) = image.apply(record) {
            tracing::error!(end_offset, error = %e, "cannot apply a metadata snapshot record");
        }
    }
}

/// When the driver takes a snapshot (KIP-630's two triggers, with Kafka's names).
#[derive(Debug, Clone, Copy)]
pub(super) struct SnapshotPolicy {
    /// `metadata.log.max.record.bytes.between.snapshots`.
    pub(super) max_bytes: u64,
    /// `metadata.log.max.snapshot.interval.ms`; `None` (0) disables the time trigger.
    pub(super) interval: Option<Duration>,
}

impl Driver {
    /// Takes a snapshot of the image at the applied offset if a trigger is due (see the
    /// module doc).
    pub(super) fn maybe_snapshot(&mut self) -> Result<(), QuorumError> {
        let end_offset = self.applied;
        let log = self.node.log();
        if end_offset <= log.start_offset() {
            return Ok(());
        }
        let due = self.bytes_since_snapshot >= self.snapshot_policy.max_bytes
            || self
                .snapshot_policy
                .interval
                .is_some_and(|i| self.last_snapshot_at.elapsed() >= i);
        let newer = self
            .unreleased
            .as_ref()
            .is_none_or(|(e, _)| *e < end_offset);
        if !due || !newer {
            return Ok(());
        }
        let Some(epoch) = log.epoch_at(end_offset - 1) else {
            return Ok(());
        };
        let began = Instant::now();
        let checkpoint = snapshot::Checkpoint {
            voters: log.voters_at(end_offset),
            records: self.image.records(),
        };
        let data = checkpoint.encode(epoch, crate::now_ms());
        let bytes = data.len();
        self.bytes_since_snapshot = 0;
        self.last_snapshot_at = Instant::now();
        let snapshot = Snapshot {
            id: SnapshotId { end_offset, epoch },
            data,
            voters: checkpoint.voters.clone(),
        };
        snapshot::write(&self.dir, &snapshot)?;
        snapshot::prune(&self.dir, SNAPSHOTS_KEPT);
        // The core gets the previous snapshot, not this one (see `unreleased`).
        let previous = self.unreleased.replace((end_offset, snapshot.data));
        if let Some((end_offset, data)) = previous {
            let actions = self
                .node
                .step(self.now(), Input::Snapshot { end_offset, data });
            let mut no_reply = None;
            for action in actions {
                self.carry_out(action, &mut no_reply)?;
            }
        }
        tracing::info!(
            end_offset,
            epoch,
            bytes,
            records = checkpoint.records.len(),
            took_ms = began.elapsed().as_millis() as u64,
            "metadata snapshot taken"
        );
        Ok(())
    }

    /// KIP-630: a snapshot fetched from the leader replaces the log and the image. The
    /// file goes first, then the log is emptied; a crash between leaves a log that does
    /// not continue the snapshot, which the next start empties (see [`entries_after`]).
    pub(super) fn install(&mut self, s: &Snapshot) -> Result<(), QuorumError> {
        let end_offset = s.id.end_offset;
        snapshot::write(&self.dir, s)?;
        self.disk.reset_to(end_offset)?;
        snapshot::prune(&self.dir, SNAPSHOTS_KEPT);
        let mut image = MetadataImage::new(self.image.cluster_id.clone(), self.image.controller_id);
        // The peer checked the whole file before handing it over.
        match snapshot::Checkpoint::decode(&s.data) {
            Ok(c) => apply_all(&mut image, &c.records, end_offset),
            Err(e) => {
                tracing::error!(end_offset, error = %e, "an installed snapshot does not decode")
            }
        }
        self.image = image;
        self.applied = end_offset;
        // The core's snapshot is now this one; an older one of ours is no use.
        self.unreleased = None;
        self.bytes_since_snapshot = 0;
        self.last_snapshot_at = Instant::now();
        tracing::info!(
            end_offset,
            epoch = s.id.epoch,
            bytes = s.data.len(),
            "metadata snapshot installed from the leader"
        );
        self.publish();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strata_kraft::raft::Payload;

    use super::*;

    fn entries(epochs: &[i32]) -> Vec<Entry> {
        epochs
            .iter()
            .map(|&epoch| Entry {
                epoch,
                payload: Payload::Data(Bytes::from_static(b"x")),
            })
            .collect()
    }

    fn disk_with(dir: &std::path::Path, start: i64, epochs: &[i32]) -> disk::RaftDisk {
        let mut d = disk::RaftDisk::open(dir, 0, 1 << 20).unwrap();
        if start > 0 {
            d.reset_to(start).unwrap();
        }
        d.append(start, &entries(epochs), 0).unwrap();
        d
    }

    fn id(end_offset: i64, epoch: i32) -> Option<SnapshotId> {
        Some(SnapshotId { end_offset, epoch })
    }

    #[test]
    fn start_up_replays_only_what_follows_the_snapshot() {
        let t = tempfile::tempdir().unwrap();
        let mut d = disk_with(&t.path().join("a"), 0, &[1, 1, 2, 2, 3]);
        assert_eq!(entries_after(&mut d, id(3, 2)).unwrap(), entries(&[2, 3]));
        assert_eq!(entries_after(&mut d, None).unwrap().len(), 5);
        assert_eq!(entries_after(&mut d, id(5, 3)).unwrap(), vec![]);
        assert_eq!(d.log_end_offset(), 5, "a log that reaches the end is kept");
    }

    #[test]
    fn a_log_that_does_not_continue_the_snapshot_is_emptied() {
        let t = tempfile::tempdir().unwrap();
        // It ends before the snapshot (a crash after a fetched snapshot was stored).
        let mut d = disk_with(&t.path().join("short"), 0, &[1, 1]);
        assert_eq!(entries_after(&mut d, id(9, 2)).unwrap(), vec![]);
        assert_eq!((d.log_start_offset(), d.log_end_offset()), (9, 9));
        // It disagrees on the snapshot's last epoch.
        let mut d = disk_with(&t.path().join("diverged"), 0, &[1, 1, 1, 1]);
        assert_eq!(entries_after(&mut d, id(3, 2)).unwrap(), vec![]);
        assert_eq!((d.log_start_offset(), d.log_end_offset()), (3, 3));
        // It starts after the snapshot (the newest one did not load).
        let mut d = disk_with(&t.path().join("gap"), 10, &[4, 4]);
        assert_eq!(entries_after(&mut d, id(5, 3)).unwrap(), vec![]);
        assert_eq!((d.log_start_offset(), d.log_end_offset()), (5, 5));
        // No snapshot at all, and a log that does not start at 0.
        let mut d = disk_with(&t.path().join("headless"), 10, &[4]);
        assert_eq!(entries_after(&mut d, None).unwrap(), vec![]);
        assert_eq!((d.log_start_offset(), d.log_end_offset()), (0, 0));
        // A log that starts exactly at the snapshot's end continues it.
        let mut d = disk_with(&t.path().join("exact"), 5, &[4]);
        assert_eq!(entries_after(&mut d, id(5, 3)).unwrap(), entries(&[4]));
    }
}
