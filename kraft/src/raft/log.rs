//! The core's in-memory view of the metadata log.
//!
//! Offsets start at 0 and every entry holds one record, stamped with the epoch of the
//! leader that appended it. Epochs never decrease along the log, so the epoch cache (the
//! start offset of each epoch, as in Kafka's `leader-epoch-checkpoint`) answers "where does
//! epoch `e` end" without a scan. The driver owns the durable copy and mirrors the
//! [`crate::raft::Action::AppendToLog`] / [`crate::raft::Action::TruncateLog`] actions;
//! at start it hands the core the entries it recovered.
//!
//! With a snapshot (KIP-630) the log starts at the snapshot's end offset; the snapshot's
//! id (end offset and last epoch) stands in for the entries it replaced, so
//! `end_offset_for_epoch` and up-to-dateness still answer.

use bytes::Bytes;

use std::collections::BTreeMap;

use super::{Endpoint, NodeId, ReplicaKey};

/// A voter set as KIP-853's `VotersRecord` holds it: who votes, and where each voter's
/// controller listener is (a voter from a static `controller.quorum.voters` has none here;
/// the configuration says where it is).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VoterSet {
    /// The voters.
    pub keys: Vec<ReplicaKey>,
    /// Each voter's endpoint, by node id, where one was given.
    pub endpoints: BTreeMap<NodeId, Endpoint>,
}

impl VoterSet {
    /// Voters with no endpoints recorded.
    pub fn of(keys: Vec<ReplicaKey>) -> Self {
        VoterSet {
            keys,
            endpoints: BTreeMap::new(),
        }
    }
}

/// One log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The epoch of the leader that appended it.
    pub epoch: i32,
    /// What it carries.
    pub payload: Payload,
}

/// The contents of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// KRaft's `LeaderChangeMessage` control record: a new leader's first entry. Committing
    /// it commits everything before it (Raft §5.4.2, §8).
    LeaderChange {
        /// The leader that wrote it.
        leader: NodeId,
    },
    /// KIP-853's `VotersRecord` control record: the voter set from this entry on. It takes
    /// effect when appended, committed or not, and is undone if truncated.
    Voters(VoterSet),
    /// An application record (a metadata record batch).
    Data(Bytes),
}

/// Identifies a snapshot (KIP-630): it holds the state of every entry below `end_offset`,
/// and the last of those entries has `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapshotId {
    /// The offset of the first entry not in the snapshot.
    pub end_offset: i64,
    /// The epoch of the entry at `end_offset - 1`.
    pub epoch: i32,
}

/// A snapshot of the state machine over a committed prefix of the log (KIP-630).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// What it covers.
    pub id: SnapshotId,
    /// The application's encoding of the state; opaque to the core.
    pub data: Bytes,
    /// The voter set in force at `end_offset` (KIP-853 keeps it in the snapshot), if the
    /// log below changed it.
    pub voters: Option<VoterSet>,
}

/// The log as the core sees it: an optional snapshot, then the entries after it.
#[derive(Debug, Clone, Default)]
pub struct RaftLog {
    /// The latest snapshot; the log starts at its end offset.
    snapshot: Option<Snapshot>,
    /// `entries[k]` is the entry at offset `start_offset() + k`.
    entries: Vec<Entry>,
    /// `(epoch, start offset)` for each epoch among `entries`, ascending in both.
    epochs: Vec<(i32, i64)>,
    /// `(offset, voters)` of each `Voters` entry among `entries`, ascending.
    voter_changes: Vec<(i64, VoterSet)>,
}

impl RaftLog {
    /// A log holding `snapshot` (if any) and then `entries` from its end offset (or 0).
    ///
    /// # Panics
    ///
    /// If the epochs decrease along `entries` (a corrupt log).
    pub fn new(snapshot: Option<Snapshot>, entries: Vec<Entry>) -> Self {
        let mut log = RaftLog {
            snapshot,
            ..RaftLog::default()
        };
        for entry in entries {
            log.append(entry);
        }
        log
    }

    /// A log holding `entries` from offset 0.
    ///
    /// # Panics
    ///
    /// If the epochs decrease along `entries` (a corrupt log).
    pub fn from_entries(entries: Vec<Entry>) -> Self {
        RaftLog::new(None, entries)
    }

    /// The first offset held as an entry: the snapshot's end offset, or 0.
    pub fn start_offset(&self) -> i64 {
        self.snapshot.as_ref().map_or(0, |s| s.id.end_offset)
    }

    /// The latest voter set in the log (committed or not), if the log has one.
    pub fn voters(&self) -> Option<&[ReplicaKey]> {
        self.voter_set().map(|v| v.keys.as_slice())
    }

    /// The latest voter set in the log with its endpoints, if the log has one.
    pub fn voter_set(&self) -> Option<&VoterSet> {
        self.voter_changes
            .last()
            .map(|(_, v)| v)
            .or(self.snapshot.as_ref().and_then(|s| s.voters.as_ref()))
    }

    /// The offset of the latest `Voters` entry, if one is after the snapshot.
    pub fn last_voters_offset(&self) -> Option<i64> {
        self.voter_changes.last().map(|&(o, _)| o)
    }

    /// The voter set in force at `offset` (set by an entry below it).
    pub fn voters_at(&self, offset: i64) -> Option<VoterSet> {
        let idx = self.voter_changes.partition_point(|&(o, _)| o < offset);
        match idx {
            0 => self.snapshot.as_ref().and_then(|s| s.voters.clone()),
            _ => Some(self.voter_changes[idx - 1].1.clone()),
        }
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    /// The offset the next entry will take.
    pub fn end_offset(&self) -> i64 {
        self.start_offset() + self.entries.len() as i64
    }

    /// The epoch of the last entry (or of the snapshot's last entry), 0 for an empty log.
    pub fn last_epoch(&self) -> i32 {
        self.entries
            .last()
            .map(|e| e.epoch)
            .or(self.snapshot.as_ref().map(|s| s.id.epoch))
            .unwrap_or(0)
    }

    /// The epoch of the entry at `offset`, if the log (or the snapshot's boundary) knows.
    pub fn epoch_at(&self, offset: i64) -> Option<i32> {
        if let Some(s) = &self.snapshot
            && offset == s.id.end_offset - 1
        {
            return Some(s.id.epoch);
        }
        self.index(offset)
            .and_then(|k| self.entries.get(k))
            .map(|e| e.epoch)
    }

    /// The entries after the snapshot.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn index(&self, offset: i64) -> Option<usize> {
        usize::try_from(offset - self.start_offset()).ok()
    }

    /// Up to `max` entries from `offset` on (none if `offset` is outside the entries).
    pub fn read(&self, offset: i64, max: usize) -> Vec<Entry> {
        self.index(offset)
            .and_then(|k| self.entries.get(k..))
            .map(|rest| rest.iter().take(max).cloned().collect())
            .unwrap_or_default()
    }

    /// KIP-595's `endOffsetForEpoch`: the largest epoch in the log that is `<= epoch`, and
    /// the offset where it ends (the start of the next epoch, or the log end). The
    /// snapshot's last epoch counts, ending at the log start. `(0, 0)` if every epoch the
    /// log knows is larger.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let idx = self.epochs.partition_point(|&(e, _)| e <= epoch);
        if idx == 0 {
            return match &self.snapshot {
                Some(s) if s.id.epoch <= epoch => (s.id.epoch, s.id.end_offset),
                _ => (0, 0),
            };
        }
        let end = self
            .epochs
            .get(idx)
            .map_or(self.end_offset(), |&(_, start)| start);
        (self.epochs[idx - 1].0, end)
    }

    /// Appends one entry.
    ///
    /// # Panics
    ///
    /// If `entry.epoch` is below the last epoch: the core never does that.
    pub fn append(&mut self, entry: Entry) {
        let last = self.last_epoch();
        assert!(entry.epoch >= last, "epoch {} after {last}", entry.epoch);
        if entry.epoch > last || self.entries.is_empty() {
            self.epochs.push((entry.epoch, self.end_offset()));
        }
        if let Payload::Voters(voters) = &entry.payload {
            self.voter_changes.push((self.end_offset(), voters.clone()));
        }
        self.entries.push(entry);
    }

    /// Removes every entry at `end_offset` and after; never below the snapshot.
    pub fn truncate(&mut self, end_offset: i64) {
        let Some(end) = self.index(end_offset.max(self.start_offset())) else {
            return;
        };
        if end >= self.entries.len() {
            return;
        }
        self.entries.truncate(end);
        let keep = self
            .epochs
            .partition_point(|&(_, start)| start < end_offset);
        self.epochs.truncate(keep);
        let keep = self.voter_changes.partition_point(|&(o, _)| o < end_offset);
        self.voter_changes.truncate(keep);
    }

    /// Takes `snapshot` (of a prefix this log holds) as the new start: the entries below
    /// its end offset are dropped (KIP-630 log cleaning).
    pub fn compact(&mut self, snapshot: Snapshot) {
        let drop = self
            .index(snapshot.id.end_offset)
            .unwrap_or(0)
            .min(self.entries.len());
        let rest = self.entries.split_off(drop);
        *self = RaftLog::new(Some(snapshot), rest);
    }

    /// Replaces the whole log by `snapshot` (fetched from the leader): the log is empty and
    /// starts at its end offset.
    pub fn install(&mut self, snapshot: Snapshot) {
        *self = RaftLog::new(Some(snapshot), Vec::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(epochs: &[i32]) -> RaftLog {
        RaftLog::from_entries(
            epochs
                .iter()
                .map(|&epoch| Entry {
                    epoch,
                    payload: Payload::Data(Bytes::new()),
                })
                .collect(),
        )
    }

    #[test]
    fn end_offset_for_epoch_answers_the_largest_epoch_at_or_below() {
        let l = log(&[1, 1, 3, 3, 3, 5]);
        assert_eq!(l.end_offset_for_epoch(0), (0, 0));
        assert_eq!(l.end_offset_for_epoch(1), (1, 2));
        assert_eq!(l.end_offset_for_epoch(2), (1, 2));
        assert_eq!(l.end_offset_for_epoch(3), (3, 5));
        assert_eq!(l.end_offset_for_epoch(4), (3, 5));
        assert_eq!(l.end_offset_for_epoch(5), (5, 6));
        assert_eq!(l.end_offset_for_epoch(9), (5, 6));
    }

    #[test]
    fn truncate_drops_emptied_epochs() {
        let mut l = log(&[1, 1, 3, 3, 5]);
        l.truncate(3);
        assert_eq!(l.end_offset(), 3);
        assert_eq!(l.last_epoch(), 3);
        assert_eq!(l.end_offset_for_epoch(5), (3, 3));
        l.truncate(2);
        assert_eq!(l.last_epoch(), 1);
        assert_eq!(l.end_offset_for_epoch(3), (1, 2));
        l.append(Entry {
            epoch: 4,
            payload: Payload::Data(Bytes::new()),
        });
        assert_eq!(l.end_offset_for_epoch(3), (1, 2));
        assert_eq!(l.end_offset_for_epoch(4), (4, 3));
        l.truncate(0);
        assert_eq!(l.end_offset_for_epoch(4), (0, 0));
        assert_eq!(l.read(0, 10), vec![]);
    }

    #[test]
    fn a_snapshot_stands_in_for_the_entries_it_replaced() {
        let mut l = log(&[1, 1, 3, 3, 5]);
        l.compact(Snapshot {
            id: SnapshotId {
                end_offset: 3,
                epoch: 3,
            },
            data: Bytes::new(),
            voters: None,
        });
        assert_eq!(l.start_offset(), 3);
        assert_eq!(l.end_offset(), 5);
        assert_eq!(l.epoch_at(2), Some(3));
        assert_eq!(l.epoch_at(1), None);
        assert_eq!(l.read(2, 10), vec![]);
        assert_eq!(l.read(3, 10).len(), 2);
        assert_eq!(l.end_offset_for_epoch(3), (3, 4));
        assert_eq!(l.end_offset_for_epoch(4), (3, 4));
        assert_eq!(l.end_offset_for_epoch(2), (0, 0));
        l.truncate(3);
        assert_eq!(l.last_epoch(), 3);
        assert_eq!(l.end_offset_for_epoch(4), (3, 3));
        l.truncate(1);
        assert_eq!(l.end_offset(), 3);
        l.install(Snapshot {
            id: SnapshotId {
                end_offset: 9,
                epoch: 6,
            },
            data: Bytes::new(),
            voters: None,
        });
        assert_eq!(
            (l.start_offset(), l.end_offset(), l.last_epoch()),
            (9, 9, 6)
        );
    }
}
