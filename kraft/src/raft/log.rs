//! The core's in-memory view of the metadata log.
//!
//! Offsets start at 0 and every entry holds one record, stamped with the epoch of the
//! leader that appended it. Epochs never decrease along the log, so the epoch cache (the
//! start offset of each epoch, as in Kafka's `leader-epoch-checkpoint`) answers "where does
//! epoch `e` end" without a scan. The driver owns the durable copy and mirrors the
//! [`crate::raft::Action::AppendToLog`] / [`crate::raft::Action::TruncateLog`] actions;
//! at start it hands the core the entries it recovered.

use bytes::Bytes;

use super::NodeId;

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
    /// An application record (a metadata record batch).
    Data(Bytes),
}

/// The log as the core sees it.
#[derive(Debug, Clone, Default)]
pub struct RaftLog {
    /// `entries[o]` is the entry at offset `o`.
    entries: Vec<Entry>,
    /// `(epoch, start offset)` for each epoch present, ascending in both.
    epochs: Vec<(i32, i64)>,
}

impl RaftLog {
    /// A log holding `entries` from offset 0.
    ///
    /// # Panics
    ///
    /// If the epochs decrease along `entries` (a corrupt log).
    pub fn from_entries(entries: Vec<Entry>) -> Self {
        let mut log = RaftLog::default();
        for entry in entries {
            log.append(entry);
        }
        log
    }

    /// The offset the next entry will take.
    pub fn end_offset(&self) -> i64 {
        self.entries.len() as i64
    }

    /// The epoch of the last entry, or 0 for an empty log.
    pub fn last_epoch(&self) -> i32 {
        self.entries.last().map_or(0, |e| e.epoch)
    }

    /// The epoch of the entry at `offset`, if there is one.
    pub fn epoch_at(&self, offset: i64) -> Option<i32> {
        usize::try_from(offset)
            .ok()
            .and_then(|o| self.entries.get(o))
            .map(|e| e.epoch)
    }

    /// All entries, from offset 0.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Up to `max` entries from `offset` on (none if `offset` is at or past the end).
    pub fn read(&self, offset: i64, max: usize) -> Vec<Entry> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        self.entries
            .get(start..)
            .map(|rest| rest.iter().take(max).cloned().collect())
            .unwrap_or_default()
    }

    /// KIP-595's `endOffsetForEpoch`: the largest epoch in the log that is `<= epoch`, and
    /// the offset where it ends (the start of the next epoch, or the log end). `(0, 0)` if
    /// every epoch in the log is larger.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let idx = self.epochs.partition_point(|&(e, _)| e <= epoch);
        if idx == 0 {
            return (0, 0);
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
        self.entries.push(entry);
    }

    /// Removes every entry at `end_offset` and after.
    pub fn truncate(&mut self, end_offset: i64) {
        let end = usize::try_from(end_offset.max(0)).unwrap_or(usize::MAX);
        if end >= self.entries.len() {
            return;
        }
        self.entries.truncate(end);
        let keep = self
            .epochs
            .partition_point(|&(_, start)| start < end_offset);
        self.epochs.truncate(keep);
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
}
