//! The transactions of one partition, as its log shows them: which are open, which are
//! decided but not yet replicated, and from them the first unstable offset and the last
//! stable offset (Kafka's `ProducerStateManager` transaction bookkeeping and
//! `UnifiedLog.lastStableOffset`). Pure: no I/O, no clock.
//!
//! - A producer's transactional batch opens its transaction at the batch's first offset,
//!   unless one is open already ([`TxnTracker::begin`]).
//! - A COMMIT or ABORT marker of a producer with an open transaction completes it
//!   ([`TxnTracker::complete`]); a marker of a producer with none completes nothing (a
//!   marker for a partition the producer never wrote, or a retried one).
//! - A completed transaction stays unstable until its marker is below the high watermark
//!   ([`TxnTracker::on_high_watermark`]): a consumer must never read up to a transaction whose
//!   outcome a leader change could lose.
//! - The first unstable offset is the first offset of the earliest open or unreplicated
//!   transaction; the last stable offset is that, at least the log start offset, if below the
//!   high watermark, else the high watermark ([`TxnTracker::last_stable_offset`]).
//! - An abort is indexed with the last stable offset at its marker, Kafka's
//!   `lastStableOffset(completedTxn)`: the first offset of the earliest other open
//!   transaction, else the offset after the marker ([`crate::txn_index`] stops its search on
//!   it).

use std::collections::BTreeMap;

use crate::txn_index::AbortedTxn;

/// A transaction a marker completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub aborted: bool,
}

/// The open and unreplicated transactions of a partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnTracker {
    /// Open transactions: first offset to producer id.
    ongoing: BTreeMap<i64, i64>,
    /// The first offset of each producer's open transaction.
    open_by_producer: BTreeMap<i64, i64>,
    /// Decided transactions whose marker is not yet below the high watermark: first offset
    /// to marker offset.
    unreplicated: BTreeMap<i64, i64>,
}

impl TxnTracker {
    /// The first offset of the producer's open transaction, if it has one.
    #[must_use]
    pub fn open_first_offset(&self, producer_id: i64) -> Option<i64> {
        self.open_by_producer.get(&producer_id).copied()
    }

    /// A transactional batch of `producer_id` starting at `first_offset` was appended: it
    /// opens the producer's transaction unless one is open.
    pub fn begin(&mut self, producer_id: i64, first_offset: i64) {
        if self.open_by_producer.contains_key(&producer_id) {
            return;
        }
        self.open_by_producer.insert(producer_id, first_offset);
        self.ongoing.insert(first_offset, producer_id);
    }

    /// A marker of `producer_id` was appended at `marker_offset`. Returns the transaction it
    /// completes, if the producer had one open, and for an abort the index entry to add.
    pub fn complete(
        &mut self,
        producer_id: i64,
        marker_offset: i64,
        aborted: bool,
    ) -> Option<(CompletedTxn, Option<AbortedTxn>)> {
        let first_offset = self.open_by_producer.remove(&producer_id)?;
        self.ongoing.remove(&first_offset);
        // Kafka's `lastStableOffset(completedTxn)`: the other open transactions only, and
        // neither the unreplicated ones nor the high watermark.
        let last_stable_offset = self
            .ongoing
            .keys()
            .next()
            .copied()
            .unwrap_or(marker_offset + 1);
        self.unreplicated.insert(first_offset, marker_offset);
        let done = CompletedTxn {
            producer_id,
            first_offset,
            last_offset: marker_offset,
            aborted,
        };
        let entry = aborted.then_some(AbortedTxn {
            producer_id,
            first_offset,
            last_offset: marker_offset,
            last_stable_offset,
        });
        Some((done, entry))
    }

    /// The high watermark moved to `hw`: a decided transaction whose marker is below it is
    /// stable.
    pub fn on_high_watermark(&mut self, hw: i64) {
        self.unreplicated.retain(|_, marker| *marker >= hw);
    }

    /// The log start offset moved to `log_start`: decided transactions whose marker went
    /// with the log are forgotten (open ones stay open; their first offset is clamped).
    pub fn on_log_start(&mut self, log_start: i64) {
        self.unreplicated.retain(|_, marker| *marker >= log_start);
    }

    /// The first offset of the earliest open or unreplicated transaction.
    #[must_use]
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let open = self.ongoing.keys().next().copied();
        let decided = self.unreplicated.keys().next().copied();
        match (open, decided) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How many transactions are open.
    #[must_use]
    pub fn open_count(&self) -> usize {
        self.ongoing.len()
    }

    /// The first offset of the earliest open transaction (Kafka's `firstUndecidedOffset`).
    #[must_use]
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// The last stable offset for the high watermark `hw` and log start `log_start`.
    #[must_use]
    pub fn last_stable_offset(&self, hw: i64, log_start: i64) -> i64 {
        match self.first_unstable_offset() {
            Some(fuo) if fuo.max(log_start) < hw => fuo.max(log_start),
            _ => hw,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, BinaryHeap};

    use proptest::prelude::*;

    use super::*;
    use crate::txn_index::{TxnIndex, collect_aborted};

    /// One offset of a partition's log, as the model sees it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Rec {
        /// A record of no transaction.
        Plain,
        /// A transactional record of a producer.
        Txn(i64),
        /// A marker of a producer.
        Marker { producer_id: i64, abort: bool },
    }

    /// A history: each step appends one record (producer, kind) and moves the high
    /// watermark up by 0 to 3 offsets, never past the log end, as lagging followers do.
    fn history() -> impl Strategy<Value = Vec<(i64, u8, i64)>> {
        prop::collection::vec((0i64..4, 0u8..5, 0i64..4), 0..150)
    }

    /// Runs a history through the tracker (and the aborted index, cut into segments of 20
    /// offsets), checking the last stable offset after every step against its definition.
    /// Returns the log, the high watermark at the end, and the indexes.
    fn run(steps: &[(i64, u8, i64)]) -> (Vec<Rec>, i64, Vec<TxnIndex>) {
        let mut t = TxnTracker::default();
        let mut log: Vec<Rec> = Vec::new();
        let mut indexes: Vec<TxnIndex> = Vec::new();
        let mut hw = 0i64;
        for &(pid, kind, advance) in steps {
            let offset = i64::try_from(log.len()).unwrap();
            if offset % 20 == 0 {
                indexes.push(TxnIndex::empty(std::path::PathBuf::from("unused")));
            }
            let rec = match kind {
                0 => Rec::Plain,
                1 | 2 => Rec::Txn(pid),
                k => Rec::Marker {
                    producer_id: pid,
                    abort: k == 4,
                },
            };
            match rec {
                Rec::Plain => {}
                Rec::Txn(p) => t.begin(p, offset),
                Rec::Marker { producer_id, abort } => {
                    if let Some((_, Some(entry))) = t.complete(producer_id, offset, abort) {
                        indexes.last_mut().unwrap().push(entry);
                    }
                }
            }
            log.push(rec);
            hw = (hw + advance).min(offset + 1);
            t.on_high_watermark(hw);
            assert_eq!(
                t.last_stable_offset(hw, 0),
                model_lso(&log, hw),
                "after {log:?}, hw {hw}"
            );
        }
        (log, hw, indexes)
    }

    /// The last stable offset by its definition, offset by offset: the first offset below
    /// the high watermark holding a transactional record whose transaction has no marker
    /// below the high watermark; the high watermark if there is none.
    fn model_lso(log: &[Rec], hw: i64) -> i64 {
        let below = &log[..usize::try_from(hw).unwrap()];
        for (i, r) in below.iter().enumerate() {
            if let Rec::Txn(pid) = r {
                let decided = below[i..]
                    .iter()
                    .any(|m| matches!(m, Rec::Marker { producer_id, .. } if *producer_id == *pid));
                if !decided {
                    return i64::try_from(i).unwrap();
                }
            }
        }
        hw
    }

    /// Whether the record at `offset` belongs to a transaction that was aborted, by the
    /// log's definition: the producer's next marker after it is an ABORT.
    fn aborted(log: &[Rec], offset: usize) -> bool {
        let Rec::Txn(pid) = log[offset] else {
            return false;
        };
        log[offset..].iter().find_map(|r| match r {
            Rec::Marker { producer_id, abort } if *producer_id == pid => Some(*abort),
            _ => None,
        }) == Some(true)
    }

    /// A read_committed consumer, as Kafka's client filters (`CompletedFetch`): aborted
    /// transactions by first offset; a producer's records are dropped from its aborted
    /// transaction's first offset to its ABORT marker. Returns the data offsets it delivers.
    fn consume(log: &[Rec], from: i64, to: i64, mut aborted_txns: Vec<AbortedTxn>) -> Vec<i64> {
        aborted_txns.sort_by_key(|a| a.first_offset);
        let mut heap: BinaryHeap<std::cmp::Reverse<(i64, i64)>> = aborted_txns
            .iter()
            .map(|a| std::cmp::Reverse((a.first_offset, a.producer_id)))
            .collect();
        let mut aborting: BTreeSet<i64> = BTreeSet::new();
        let mut out = Vec::new();
        for offset in from..to {
            let rec = log[usize::try_from(offset).unwrap()];
            while let Some(std::cmp::Reverse((first, pid))) = heap.peek().copied() {
                if first > offset {
                    break;
                }
                heap.pop();
                aborting.insert(pid);
            }
            match rec {
                Rec::Plain => out.push(offset),
                Rec::Txn(pid) => {
                    if !aborting.contains(&pid) {
                        out.push(offset);
                    }
                }
                Rec::Marker { producer_id, abort } => {
                    if abort {
                        aborting.remove(&producer_id);
                    }
                }
            }
        }
        out
    }

    #[test]
    fn an_abort_records_the_earliest_other_open_transaction() {
        let mut t = TxnTracker::default();
        t.begin(1, 10);
        t.begin(2, 12);
        t.begin(1, 13); // already open: nothing changes
        assert_eq!(t.open_first_offset(1), Some(10));
        let (done, entry) = t.complete(1, 15, true).unwrap();
        assert_eq!(
            (done.first_offset, done.last_offset, done.aborted),
            (10, 15, true)
        );
        assert_eq!(entry.unwrap().last_stable_offset, 12);
        // Decided, not yet replicated: still unstable.
        assert_eq!(t.first_unstable_offset(), Some(10));
        assert_eq!(t.last_stable_offset(20, 0), 10);
        t.on_high_watermark(16);
        assert_eq!(t.last_stable_offset(20, 0), 12);
        // A commit indexes nothing; a marker with no open transaction completes nothing.
        assert_eq!(t.complete(2, 16, false).map(|(_, e)| e), Some(None));
        assert_eq!(t.complete(2, 17, true), None);
        // With no other transaction open, an abort's last stable offset is past its marker.
        t.begin(4, 17);
        let (_, entry) = t.complete(4, 18, true).unwrap();
        assert_eq!(entry.unwrap().last_stable_offset, 19);
        t.on_high_watermark(19);
        t.on_high_watermark(17);
        assert_eq!(t.last_stable_offset(20, 0), 20);
        // An open transaction whose start went with the log: clamped to the log start.
        t.begin(3, 19);
        assert_eq!(t.last_stable_offset(22, 0), 19);
        assert_eq!(t.last_stable_offset(22, 20), 20);
        assert_eq!(t.last_stable_offset(20, 20), 20);
    }

    proptest! {
        /// The last stable offset after every step is its definition's; and a
        /// read_committed consumer reading from any offset up to it, with the aborted
        /// transactions the index search reports, delivers exactly the records that are not
        /// of an aborted transaction.
        #[test]
        fn read_committed_sees_exactly_the_committed_records(
            steps in history(),
            from_permille in 0i64..1000,
        ) {
            let (log, hw, indexes) = run(&steps);
            let lso = model_lso(&log, hw);
            let from = lso * from_permille / 1000;
            let first_segment = usize::try_from(from / 20).unwrap();
            let reported = collect_aborted(
                indexes.iter().skip(first_segment),
                from,
                lso,
            );
            let got = consume(&log, from, lso, reported);
            let want: Vec<i64> = (from..lso)
                .filter(|&o| {
                    let i = usize::try_from(o).unwrap();
                    !matches!(log[i], Rec::Marker { .. }) && !aborted(&log, i)
                })
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
