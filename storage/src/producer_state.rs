//! Producer state of one partition: what the idempotent producer (KIP-98) needs the leader to
//! remember, and its `.snapshot` files.
//!
//! For each producer id that wrote to the partition the log keeps a [`ProducerStateEntry`]:
//! the producer epoch and the metadata of its last [`NUM_BATCHES_TO_RETAIN`] batches (Kafka's
//! `ProducerStateEntry`). On append, every batch carrying a producer id is checked against it
//! (Kafka's `ProducerAppendInfo` and `UnifiedLog.analyzeAndValidateProducerState`):
//!
//! - a retry of one of the retained batches (same epoch, same first and last sequence) is a
//!   duplicate: nothing is written and the original offsets are returned, with no error
//!   (Kafka stopped answering DUPLICATE_SEQUENCE_NUMBER in 1.0);
//! - an epoch below the current one is INVALID_PRODUCER_EPOCH (Kafka 2.7+ answers this rather
//!   than PRODUCER_FENCED on produce, KIP-588);
//! - a new epoch must start at sequence 0, and within an epoch the first sequence must follow
//!   the last one, wrapping from `i32::MAX` to 0; otherwise OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - a producer the partition has no state for may start at any sequence (KIP-360: since
//!   Kafka 2.5 the leader no longer answers UNKNOWN_PRODUCER_ID, because the state may have
//!   been removed by retention or expiration while the producer was idle).
//!
//! The state is rebuilt on open from the latest snapshot file plus a scan of the log after it
//! (Kafka's `UnifiedLog.rebuildProducerState`), so that after a crash a retried batch is still
//! recognised as a duplicate.
//!
//! Transactions (KIP-98) are tracked here too, as Kafka's `ProducerAppendInfo` does:
//!
//! - a transactional data batch opens its producer's transaction at the batch's first offset
//!   unless one is open (`current_txn_first_offset`);
//! - a non-transactional batch from a producer with an open transaction is INVALID_TXN_STATE;
//! - an end-transaction marker (a control batch, written only by the transaction
//!   coordinator, never by a client) must carry the producer's current epoch or a newer one
//!   (transaction version 2, KIP-890, writes it with the epoch bumped at the end; Kafka 4.0
//!   and 4.1 accept an equal epoch in either version), and a coordinator epoch at least the
//!   last one seen (else TRANSACTION_COORDINATOR_FENCED); it closes the transaction.
//!
//! The partition's open and unreplicated transactions, from which the last stable offset
//! follows, are kept in a [`TxnTracker`]; an abort yields the [`AbortedTxn`] entry the log
//! puts in the marker's segment's `.txnindex`. Snapshots carry each producer's open
//! transaction, so that a restart rebuilds the open set from the snapshot plus the scan.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use strata_protocol::record_batch::{
    self, BatchSummary, EndTxnMarker, NO_PRODUCER_ID, RecordBatchView,
};

use crate::Log;
use crate::error::{IoContext, LogError};
use crate::txn_index::AbortedTxn;
use crate::txn_state::TxnTracker;

/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: a producer has at most 5 requests in
/// flight per partition (`max.in.flight.requests.per.connection` with idempotence), so the
/// last 5 batches cover every retry it can send.
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
/// Kafka's `producer.id.expiration.ms` default: a producer idle this long is forgotten.
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;
/// The only snapshot version Kafka writes (`ProducerStateManager.PRODUCER_SNAPSHOT_VERSION`).
pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;
/// `RecordBatch.NO_PRODUCER_EPOCH`.
const NO_PRODUCER_EPOCH: i16 = -1;
/// `RecordBatch.NO_SEQUENCE`.
const NO_SEQUENCE: i32 = -1;
/// Bytes before the first entry: version, crc, entry count.
const SNAPSHOT_HEADER_LEN: usize = 10;
/// The CRC covers everything after itself (`PRODUCER_ENTRIES_OFFSET`).
const SNAPSHOT_CRC_FROM: usize = 6;
/// One entry: 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8 bytes.
const SNAPSHOT_ENTRY_LEN: usize = 46;
/// How much of the log one rebuild read asks for.
const SCAN_READ_BYTES: u32 = 8 * 1024 * 1024;

/// `DefaultRecordBatch.incrementSequence`: sequences wrap from `i32::MAX` to 0.
#[must_use]
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// `DefaultRecordBatch.decrementSequence`, the inverse of [`increment_sequence`].
#[must_use]
pub fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        i32::MAX - (decrement - sequence) + 1
    } else {
        sequence - decrement
    }
}

/// `ProducerAppendInfo.inSequence`: `next` directly follows `last`, across the wrap.
fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// One retained batch of a producer (Kafka's `BatchMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// The sequence of the batch's last record.
    pub last_seq: i32,
    /// The offset of the batch's last record.
    pub last_offset: i64,
    /// `last_offset - first_offset` (the batch's last offset delta).
    pub offset_delta: i32,
    /// The batch's max timestamp as stored (the append time under LogAppendTime).
    pub timestamp: i64,
}

impl BatchMetadata {
    /// The sequence of the batch's first record.
    #[must_use]
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }

    /// The offset of the batch's first record.
    #[must_use]
    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// What a partition remembers about one producer id (Kafka's `ProducerStateEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    /// The producer id.
    pub producer_id: i64,
    /// The epoch of the batches in `batches`; older epochs are fenced.
    pub producer_epoch: i16,
    /// The transaction coordinator epoch of the last marker, or -1.
    pub coordinator_epoch: i32,
    /// The max timestamp of the last batch, which expiration compares against.
    pub last_timestamp: i64,
    /// First offset of the producer's open transaction in this partition, or -1.
    pub current_txn_first_offset: i64,
    /// The last [`NUM_BATCHES_TO_RETAIN`] batches, oldest first.
    batches: VecDeque<BatchMetadata>,
}

impl ProducerStateEntry {
    /// The state of a producer the partition has never seen.
    #[must_use]
    pub fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            coordinator_epoch: -1,
            last_timestamp: record_batch::NO_TIMESTAMP,
            current_txn_first_offset: -1,
            batches: VecDeque::new(),
        }
    }

    /// The sequence of the last record written, or -1.
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// The offset of the last record written, or -1.
    #[must_use]
    pub fn last_data_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }

    /// The retained batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    fn last_offset_delta(&self) -> i32 {
        self.batches.back().map_or(0, |b| b.offset_delta)
    }

    /// A new epoch forgets the old epoch's batches (`maybeUpdateProducerEpoch`).
    fn set_epoch(&mut self, epoch: i16) {
        if self.producer_epoch != epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
    }

    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.set_epoch(epoch);
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_timestamp = batch.timestamp;
    }

    /// The retained batch with exactly this sequence range in this epoch
    /// (`findDuplicateBatch`).
    fn find_duplicate(&self, epoch: i16, first_seq: i32, last_seq: i32) -> Option<BatchMetadata> {
        if epoch != self.producer_epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|b| b.first_seq() == first_seq && b.last_seq == last_seq)
            .copied()
    }
}

/// The producer fields of one batch, with the offsets the log gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_offset_delta: i32,
    /// The offset the batch's first record takes.
    pub first_offset: i64,
    /// The max timestamp as it will be stored.
    pub max_timestamp: i64,
    /// The batch has the transactional bit.
    pub transactional: bool,
    /// For a control batch, the end-transaction marker it holds.
    pub marker: Option<EndTxnMarker>,
}

impl ProducerBatch {
    fn from_view(view: &RecordBatchView<'_>, first_offset: i64, max_timestamp: i64) -> Self {
        ProducerBatch {
            producer_id: view.producer_id(),
            producer_epoch: view.producer_epoch(),
            base_sequence: view.base_sequence(),
            last_offset_delta: view.last_offset_delta(),
            first_offset,
            max_timestamp,
            transactional: view.is_transactional(),
            marker: view.end_txn_marker(),
        }
    }

    fn last_seq(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }

    fn metadata(&self) -> BatchMetadata {
        BatchMetadata {
            last_seq: self.last_seq(),
            last_offset: self.first_offset + i64::from(self.last_offset_delta),
            offset_delta: self.last_offset_delta,
            timestamp: self.max_timestamp,
        }
    }
}

/// Who appends a record set (Kafka's `AppendOrigin`): it decides which checks apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer's Produce request: sequence, epoch and transaction checks; no control
    /// batches.
    Client,
    /// The metadata quorum's own log (Kafka's `RAFT_LEADER`): its control records (leader
    /// changes, voter sets) are written by the quorum, and carry no producer.
    RaftLeader,
    /// The transaction coordinator's markers (WriteTxnMarkers).
    Coordinator,
}

/// A change to the partition's transactions that an append makes, in log order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnEvent {
    /// A transactional batch opened the producer's transaction.
    Begin { producer_id: i64, first_offset: i64 },
    /// A marker ended the producer's transaction.
    End {
        producer_id: i64,
        marker_offset: i64,
        aborted: bool,
    },
}

/// What a validated append changes in the producer state: the updated entries (batches
/// added in this request only; [`ProducerStateTable::commit`] merges them) and the
/// transaction events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerUpdates {
    pub entries: Vec<ProducerStateEntry>,
    pub txn_events: Vec<TxnEvent>,
}

/// The outcome of checking a produced record set against the producer state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendPlan {
    /// Write the records, then [`ProducerStateTable::commit`] these updates.
    Append(ProducerUpdates),
    /// A retry of a batch already in the log: write nothing and answer with its offsets.
    Duplicate(BatchMetadata),
}

/// The producer state of one partition, in memory. Pure: no I/O, no clock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateTable {
    /// Entries by producer id.
    producers: BTreeMap<i64, ProducerStateEntry>,
    /// The offset up to which the log has been applied (exclusive): where a snapshot of this
    /// table is named.
    map_end_offset: i64,
    /// The partition's open and unreplicated transactions.
    txns: TxnTracker,
}

impl ProducerStateTable {
    /// An empty table covering the log up to `map_end_offset`.
    #[must_use]
    pub fn new(map_end_offset: i64) -> Self {
        ProducerStateTable {
            producers: BTreeMap::new(),
            map_end_offset,
            txns: TxnTracker::default(),
        }
    }

    /// The partition's open and unreplicated transactions.
    #[must_use]
    pub fn txns(&self) -> &TxnTracker {
        &self.txns
    }

    pub(crate) fn txns_mut(&mut self) -> &mut TxnTracker {
        &mut self.txns
    }

    /// The offset up to which the log has been applied (exclusive).
    #[must_use]
    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    /// The entry of `producer_id`, if the partition has one.
    #[must_use]
    pub fn entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer, by id (DescribeProducers).
    pub fn entries(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values()
    }

    /// Checks the batches of one produce request, in order, as a client append
    /// (`AppendOrigin.CLIENT`). Nothing changes until [`Self::commit`].
    ///
    /// # Errors
    /// As [`Self::validate_from`].
    pub fn validate(&self, batches: &[ProducerBatch]) -> Result<AppendPlan, LogError> {
        self.validate_from(batches, AppendOrigin::Client)
    }

    /// Checks the batches of one append from `origin`, in order. Nothing changes until
    /// [`Self::commit`].
    ///
    /// # Errors
    /// [`LogError::InvalidProducerSequence`], [`LogError::InvalidProducerEpoch`],
    /// [`LogError::OutOfOrderSequence`], [`LogError::InvalidTxnState`] for a
    /// non-transactional batch inside an open transaction,
    /// [`LogError::ControlBatchFromClient`], [`LogError::TransactionCoordinatorFenced`].
    pub fn validate_from(
        &self,
        batches: &[ProducerBatch],
        origin: AppendOrigin,
    ) -> Result<AppendPlan, LogError> {
        let mut updated: Vec<ProducerStateEntry> = Vec::new();
        let mut txn_events = Vec::new();
        for b in batches {
            if let Some(marker) = b.marker {
                if origin != AppendOrigin::Coordinator {
                    return Err(LogError::ControlBatchFromClient);
                }
                let entry = Self::updated_entry(
                    &mut updated,
                    self.producers.get(&b.producer_id),
                    b.producer_id,
                );
                // ProducerAppendInfo.appendEndTxnMarker: checkProducerEpoch (an older epoch
                // is fenced), then checkCoordinatorEpoch.
                if b.producer_epoch < entry.producer_epoch {
                    return Err(LogError::InvalidProducerEpoch {
                        producer_id: b.producer_id,
                        epoch: b.producer_epoch,
                        current_epoch: entry.producer_epoch,
                    });
                }
                if entry.coordinator_epoch > marker.coordinator_epoch {
                    return Err(LogError::TransactionCoordinatorFenced {
                        producer_id: b.producer_id,
                        coordinator_epoch: marker.coordinator_epoch,
                        current: entry.coordinator_epoch,
                    });
                }
                entry.set_epoch(b.producer_epoch);
                entry.coordinator_epoch = marker.coordinator_epoch;
                entry.current_txn_first_offset = -1;
                entry.last_timestamp = b.max_timestamp;
                txn_events.push(TxnEvent::End {
                    producer_id: b.producer_id,
                    marker_offset: b.first_offset,
                    aborted: !marker.commit,
                });
                continue;
            }
            if b.producer_id == NO_PRODUCER_ID {
                continue;
            }
            // A coordinator's transactional write (TxnOffsetCommit into `__consumer_offsets`)
            // carries no sequence: Kafka checks only its epoch and transaction
            // (`ProducerAppendInfo.maybeValidateDataBatch`, for `AppendOrigin.COORDINATOR`).
            let sequenced = origin != AppendOrigin::Coordinator;
            // LogValidator.validateBatch.
            if sequenced && b.base_sequence < 0 {
                return Err(LogError::InvalidProducerSequence {
                    producer_id: b.producer_id,
                    base_sequence: b.base_sequence,
                });
            }
            let current = self.producers.get(&b.producer_id);
            let last_seq = b.last_seq();
            // UnifiedLog.analyzeAndValidateProducerState: a retry of a retained batch.
            if sequenced
                && let Some(dup) = current
                    .and_then(|e| e.find_duplicate(b.producer_epoch, b.base_sequence, last_seq))
            {
                return Ok(AppendPlan::Duplicate(dup));
            }
            let empty = ProducerStateEntry::empty(b.producer_id);
            let current = current.unwrap_or(&empty);
            let entry = Self::updated_entry(&mut updated, Some(current), b.producer_id);
            // ProducerAppendInfo.checkProducerEpoch.
            if b.producer_epoch < entry.producer_epoch {
                return Err(LogError::InvalidProducerEpoch {
                    producer_id: b.producer_id,
                    epoch: b.producer_epoch,
                    current_epoch: entry.producer_epoch,
                });
            }
            // ProducerAppendInfo.checkSequence.
            if sequenced {
                if b.producer_epoch != entry.producer_epoch {
                    if b.base_sequence != 0 && entry.producer_epoch != NO_PRODUCER_EPOCH {
                        return Err(LogError::OutOfOrderSequence {
                            producer_id: b.producer_id,
                            epoch: b.producer_epoch,
                            sequence: b.base_sequence,
                            last_sequence: NO_SEQUENCE,
                        });
                    }
                } else {
                    let current_last_seq = if !entry.batches.is_empty() {
                        entry.last_seq()
                    } else if b.producer_epoch == current.producer_epoch {
                        current.last_seq()
                    } else {
                        NO_SEQUENCE
                    };
                    // KIP-360: no state (expired, or removed with the log) accepts any sequence.
                    if current.producer_epoch != NO_PRODUCER_EPOCH
                        && !in_sequence(current_last_seq, b.base_sequence)
                    {
                        return Err(LogError::OutOfOrderSequence {
                            producer_id: b.producer_id,
                            epoch: b.producer_epoch,
                            sequence: b.base_sequence,
                            last_sequence: current_last_seq,
                        });
                    }
                }
            }
            // ProducerAppendInfo.updateCurrentTxnFirstOffset.
            if b.transactional {
                if entry.current_txn_first_offset < 0 {
                    entry.current_txn_first_offset = b.first_offset;
                    txn_events.push(TxnEvent::Begin {
                        producer_id: b.producer_id,
                        first_offset: b.first_offset,
                    });
                }
            } else if entry.current_txn_first_offset >= 0 {
                return Err(LogError::InvalidTxnState {
                    producer_id: b.producer_id,
                    first_offset: entry.current_txn_first_offset,
                });
            }
            if sequenced {
                entry.add_batch(b.producer_epoch, b.metadata());
            } else {
                if b.producer_epoch > entry.producer_epoch {
                    entry.set_epoch(b.producer_epoch);
                }
                entry.last_timestamp = b.max_timestamp;
            }
        }
        Ok(AppendPlan::Append(ProducerUpdates {
            entries: updated,
            txn_events,
        }))
    }

    /// The entry of `producer_id` among those this append updates, added from `current`
    /// (without its batches: the append's own are collected) on first use.
    fn updated_entry<'u>(
        updated: &'u mut Vec<ProducerStateEntry>,
        current: Option<&ProducerStateEntry>,
        producer_id: i64,
    ) -> &'u mut ProducerStateEntry {
        let pos = match updated.iter().position(|e| e.producer_id == producer_id) {
            Some(p) => p,
            None => {
                let mut e = current
                    .cloned()
                    .unwrap_or_else(|| ProducerStateEntry::empty(producer_id));
                e.batches.clear();
                updated.push(e);
                updated.len() - 1
            }
        };
        &mut updated[pos]
    }

    /// Merges the updates of a validated, written append (`ProducerStateManager.update`
    /// and `completeTxn`) and moves the map end to `map_end_offset`. Returns the entries of
    /// the transactions it aborted, for the `.txnindex` of the marker's segment.
    pub fn commit(&mut self, updates: ProducerUpdates, map_end_offset: i64) -> Vec<AbortedTxn> {
        for u in updates.entries {
            let entry = self
                .producers
                .entry(u.producer_id)
                .or_insert_with(|| ProducerStateEntry::empty(u.producer_id));
            entry.set_epoch(u.producer_epoch);
            for b in u.batches {
                entry.add_batch(u.producer_epoch, b);
            }
            entry.last_timestamp = u.last_timestamp;
            entry.coordinator_epoch = u.coordinator_epoch;
            entry.current_txn_first_offset = u.current_txn_first_offset;
        }
        let mut aborted = Vec::new();
        for event in updates.txn_events {
            match event {
                TxnEvent::Begin {
                    producer_id,
                    first_offset,
                } => self.txns.begin(producer_id, first_offset),
                TxnEvent::End {
                    producer_id,
                    marker_offset,
                    aborted: abort,
                } => {
                    if let Some((_, Some(entry))) =
                        self.txns.complete(producer_id, marker_offset, abort)
                    {
                        aborted.push(entry);
                    }
                }
            }
        }
        self.map_end_offset = self.map_end_offset.max(map_end_offset);
        aborted
    }

    /// Applies a batch read back from the log, without sequence checks (Kafka's
    /// `AppendOrigin.REPLICATION`: what is in the log was validated when it was written).
    /// Returns the index entry of the transaction it aborted, if it is an ABORT marker that
    /// ended one.
    pub fn replay(&mut self, b: &ProducerBatch) -> Option<AbortedTxn> {
        let mut aborted = None;
        if b.producer_id != NO_PRODUCER_ID {
            let entry = self
                .producers
                .entry(b.producer_id)
                .or_insert_with(|| ProducerStateEntry::empty(b.producer_id));
            if let Some(marker) = b.marker {
                entry.set_epoch(b.producer_epoch);
                entry.coordinator_epoch = marker.coordinator_epoch;
                entry.current_txn_first_offset = -1;
                entry.last_timestamp = b.max_timestamp;
                aborted = self
                    .txns
                    .complete(b.producer_id, b.first_offset, !marker.commit)
                    .and_then(|(_, entry)| entry);
            } else {
                entry.add_batch(b.producer_epoch, b.metadata());
                if b.transactional && entry.current_txn_first_offset < 0 {
                    entry.current_txn_first_offset = b.first_offset;
                    self.txns.begin(b.producer_id, b.first_offset);
                }
            }
        }
        let end = b.first_offset + i64::from(b.last_offset_delta) + 1;
        self.map_end_offset = self.map_end_offset.max(end);
        aborted
    }

    /// Forgets producers idle for `expiration_ms` (`removeExpiredProducers`); a producer
    /// with an open transaction is never expired (Kafka's `isProducerExpired`).
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) {
        self.producers.retain(|_, e| {
            e.current_txn_first_offset >= 0
                || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
    }

    /// Encodes the table in Kafka's producer snapshot format, version 1
    /// (`ProducerStateManager.writeSnapshot`). All integers big-endian:
    ///
    /// ```text
    /// @0   version                  i16  1
    /// @2   crc                      u32  CRC32C of bytes @6 .. end
    /// @6   entry count              i32
    /// @10  entries, 46 bytes each:
    ///      +0  producer_id              i64
    ///      +8  epoch                    i16
    ///      +10 last_sequence            i32  -1 when no batch is retained
    ///      +14 last_offset              i64  -1 when no batch is retained
    ///      +22 offset_delta             i32  last_offset - first offset of the last batch
    ///      +26 timestamp                i64  max timestamp of the last batch
    ///      +34 coordinator_epoch        i32  of the last marker, or -1
    ///      +38 current_txn_first_offset i64  first offset of the open transaction, or -1
    /// ```
    ///
    /// Only the last batch of each producer is kept, as in Kafka: after a restart from a
    /// snapshot, batches older than it are no longer recognised as duplicates unless the
    /// log scan after the snapshot re-adds them.
    #[must_use]
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(SNAPSHOT_HEADER_LEN + self.producers.len() * SNAPSHOT_ENTRY_LEN);
        out.extend_from_slice(&PRODUCER_SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        let count = i32::try_from(self.producers.len()).unwrap_or(i32::MAX);
        out.extend_from_slice(&count.to_be_bytes());
        for e in self.producers.values().take(count as usize) {
            out.extend_from_slice(&e.producer_id.to_be_bytes());
            out.extend_from_slice(&e.producer_epoch.to_be_bytes());
            out.extend_from_slice(&e.last_seq().to_be_bytes());
            out.extend_from_slice(&e.last_data_offset().to_be_bytes());
            out.extend_from_slice(&e.last_offset_delta().to_be_bytes());
            out.extend_from_slice(&e.last_timestamp.to_be_bytes());
            out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            out.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out[SNAPSHOT_CRC_FROM..]);
        out[2..6].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes a snapshot written by [`Self::encode_snapshot`] (or by Kafka) into a table
    /// ending at `map_end_offset`, dropping producers expired at `now_ms`.
    ///
    /// # Errors
    /// [`SnapshotError`] when the version, CRC or length is wrong.
    pub fn decode_snapshot(
        bytes: &[u8],
        map_end_offset: i64,
        now_ms: i64,
        expiration_ms: i64,
    ) -> Result<Self, SnapshotError> {
        if bytes.len() < SNAPSHOT_HEADER_LEN {
            return Err(SnapshotError::Truncated { len: bytes.len() });
        }
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        if version != PRODUCER_SNAPSHOT_VERSION {
            return Err(SnapshotError::UnknownVersion(version));
        }
        let stored = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
        let computed = crc32c::crc32c(&bytes[SNAPSHOT_CRC_FROM..]);
        if stored != computed {
            return Err(SnapshotError::Crc { stored, computed });
        }
        let count = i32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
        let body = &bytes[SNAPSHOT_HEADER_LEN..];
        if usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(SNAPSHOT_ENTRY_LEN))
            != Some(body.len())
        {
            return Err(SnapshotError::Length {
                count,
                len: body.len(),
            });
        }
        let mut table = ProducerStateTable::new(map_end_offset);
        for e in body.chunks_exact(SNAPSHOT_ENTRY_LEN) {
            let i64_at = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().unwrap_or([0; 8]));
            let i32_at = |at: usize| i32::from_be_bytes(e[at..at + 4].try_into().unwrap_or([0; 4]));
            let producer_id = i64_at(0);
            let last_offset = i64_at(14);
            let timestamp = i64_at(26);
            let mut entry = ProducerStateEntry {
                producer_id,
                producer_epoch: i16::from_be_bytes([e[8], e[9]]),
                coordinator_epoch: i32_at(34),
                last_timestamp: timestamp,
                current_txn_first_offset: i64_at(38),
                batches: VecDeque::new(),
            };
            if last_offset >= 0 {
                entry.batches.push_back(BatchMetadata {
                    last_seq: i32_at(10),
                    last_offset,
                    offset_delta: i32_at(22),
                    timestamp,
                });
            }
            if entry.current_txn_first_offset >= 0 {
                table
                    .txns
                    .begin(producer_id, entry.current_txn_first_offset);
            } else if now_ms.saturating_sub(timestamp) >= expiration_ms {
                continue;
            }
            table.producers.insert(producer_id, entry);
        }
        Ok(table)
    }
}

/// Why a snapshot file was not used. The file is deleted and an older snapshot (or a full log
/// scan) takes its place, as Kafka does on `CorruptSnapshotException`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot of {len} bytes is shorter than its header")]
    Truncated { len: usize },
    #[error("unknown snapshot version {0}")]
    UnknownVersion(i16),
    #[error("snapshot CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("snapshot claims {count} entries but holds {len} bytes of them")]
    Length { count: i32, len: usize },
}

/// The file name of the producer snapshot at `offset`: `<20-digit offset>.snapshot`.
#[must_use]
pub fn snapshot_file_name(offset: i64) -> String {
    format!("{offset:020}.snapshot")
}

/// The producer state of a [`Log`] and its snapshot files in the partition directory.
///
/// # Crash policy
///
/// A snapshot is written to `<name>.tmp`, fsynced and renamed, so a snapshot file is whole or
/// absent; a damaged one fails its CRC and is deleted. Snapshots are taken on segment roll and
/// on clean close; after a crash, the state is whatever the latest snapshot held plus a scan
/// of the log after it, which is exactly what was acknowledged.
#[derive(Debug)]
pub(crate) struct ProducerState {
    /// The partition directory.
    dir: PathBuf,
    /// The state itself.
    pub(crate) table: ProducerStateTable,
    /// Offsets of the snapshot files on disk.
    snapshots: BTreeSet<i64>,
    /// The map end offset of the last snapshot written or loaded (Kafka's `lastSnapOffset`).
    last_snap_offset: i64,
}

impl ProducerState {
    /// Applies batches a follower copied from its leader, offsets as the leader assigned
    /// them, without sequence checks (Kafka's `AppendOrigin.REPLICATION`).
    /// Returns the index entries of the transactions the batches aborted.
    pub(crate) fn replay_replicated(
        &mut self,
        records: &[u8],
        summaries: &[BatchSummary],
    ) -> Vec<AbortedTxn> {
        let mut aborted = Vec::new();
        for s in summaries {
            if let Ok(view) = RecordBatchView::parse(&records[s.position..s.position + s.len]) {
                let b = ProducerBatch::from_view(&view, view.base_offset(), view.max_timestamp());
                aborted.extend(self.table.replay(&b));
            }
        }
        aborted
    }

    /// Empty state for a log being opened; [`ProducerState::load`] fills it.
    pub(crate) fn placeholder(dir: &Path) -> Self {
        ProducerState {
            dir: dir.to_path_buf(),
            table: ProducerStateTable::new(0),
            snapshots: BTreeSet::new(),
            last_snap_offset: 0,
        }
    }

    /// Rebuilds the state of `log`: deletes snapshots past the log end (their batches were
    /// truncated) and leftover `.tmp` files, loads the latest valid snapshot at or below
    /// `scan_from_at_most` and scans the log from there (from the log start without one).
    /// Unlike Kafka, no snapshot is taken right after the scan; the next roll or clean close
    /// writes one.
    ///
    /// Returns the state, the offset the scan started at, and the index entries of the
    /// transactions aborted at or after it: the caller makes the segments' `.txnindex` agree
    /// with them, which rebuilds the indexes of every segment from that offset on.
    ///
    /// # Errors
    /// [`LogError::Io`], or [`LogError::CorruptSegment`] if a batch in the way does not parse.
    pub(crate) fn load(
        log: &Log,
        now_ms: i64,
        scan_from_at_most: i64,
    ) -> Result<(Self, i64, Vec<AbortedTxn>), LogError> {
        let dir = log.dir().to_path_buf();
        let log_start = log.log_start_offset();
        let log_end = log.log_end_offset();
        let mut snapshots = BTreeSet::new();
        for entry in fs::read_dir(&dir).at(&dir)? {
            let path = entry.at(&dir)?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name.ends_with(".snapshot.tmp") {
                fs::remove_file(&path).at(&path)?;
                continue;
            }
            let Some(stem) = name.strip_suffix(".snapshot") else {
                continue;
            };
            if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(offset) = stem.parse::<i64>() else {
                continue;
            };
            if offset > log_end {
                tracing::info!(file = %path.display(), "removing producer snapshot past the log end");
                fs::remove_file(&path).at(&path)?;
                continue;
            }
            snapshots.insert(offset);
        }
        let mut state = ProducerState {
            dir,
            table: ProducerStateTable::new(log_start),
            snapshots,
            last_snap_offset: log_start,
        };
        while let Some(&offset) = state.snapshots.range(..=scan_from_at_most).next_back() {
            let path = state.dir.join(snapshot_file_name(offset));
            let bytes = fs::read(&path).at(&path)?;
            match ProducerStateTable::decode_snapshot(
                &bytes,
                offset,
                now_ms,
                DEFAULT_PRODUCER_ID_EXPIRATION_MS,
            ) {
                Ok(table) => {
                    state.table = table;
                    state.last_snap_offset = offset;
                    break;
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "deleting unusable producer snapshot");
                    state.delete_snapshot(offset)?;
                }
            }
        }
        let from = state.table.map_end_offset().max(log_start);
        state.table.map_end_offset = from;
        let aborted = scan(log, from, &mut state.table)?;
        Ok((state, from, aborted))
    }

    /// Writes a snapshot at the map end offset unless one was already written there
    /// (`ProducerStateManager.takeSnapshot`).
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub(crate) fn take_snapshot(&mut self) -> Result<(), LogError> {
        if let Some(f) = self.take_snapshot_unsynced()? {
            f.sync_all().at(&self.dir)?;
        }
        Ok(())
    }

    /// [`ProducerState::take_snapshot`] without the fsync, which the caller makes later (a
    /// roll's flush, as Kafka's roll defers `flushProducerStateSnapshot`); returns the file
    /// to fsync, `None` if no snapshot was written. Until then a crash may leave the file
    /// short or empty: its CRC then fails and [`ProducerState::load`] deletes it and falls
    /// back on an older snapshot and a longer scan of the log.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub(crate) fn take_snapshot_unsynced(&mut self) -> Result<Option<fs::File>, LogError> {
        let offset = self.table.map_end_offset();
        // Kafka: "If not a new offset, then it is not worth taking another snapshot".
        if offset <= self.last_snap_offset {
            return Ok(None);
        }
        let path = self.dir.join(snapshot_file_name(offset));
        let tmp = self.dir.join(format!("{}.tmp", snapshot_file_name(offset)));
        let bytes = self.table.encode_snapshot();
        let mut f = fs::File::create(&tmp).at(&tmp)?;
        f.write_all(&bytes).at(&tmp)?;
        fs::rename(&tmp, &path).at(&path)?;
        tracing::debug!(file = %path.display(), producers = self.table.producers.len(), "wrote producer snapshot");
        self.snapshots.insert(offset);
        self.last_snap_offset = offset;
        Ok(Some(f))
    }

    /// Deletes the snapshots below `offset` (retention, and keeping only recent ones).
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub(crate) fn delete_snapshots_before(&mut self, offset: i64) -> Result<(), LogError> {
        let old: Vec<i64> = self.snapshots.range(..offset).copied().collect();
        for o in old {
            self.delete_snapshot(o)?;
        }
        Ok(())
    }

    fn delete_snapshot(&mut self, offset: i64) -> Result<(), LogError> {
        self.snapshots.remove(&offset);
        let path = self.dir.join(snapshot_file_name(offset));
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).at(&path),
        }
    }

    /// Checks a produced record set whose first batch takes `base_offset`. `records` and
    /// `summaries` are what validation produced; `log_append_time` is the broker time under
    /// LogAppendTime, else -1.
    ///
    /// # Errors
    /// See [`ProducerStateTable::validate`].
    pub(crate) fn plan_append(
        &self,
        records: &[u8],
        summaries: &[BatchSummary],
        base_offset: i64,
        log_append_time: i64,
        origin: AppendOrigin,
    ) -> Result<AppendPlan, LogError> {
        let mut batches = Vec::new();
        let mut next = base_offset;
        for s in summaries {
            let view = RecordBatchView::parse(&records[s.position..s.position + s.len])
                .map_err(|e| LogError::from_batch(s.position, e))?;
            // LogValidator: only the transaction coordinator writes control batches.
            if view.is_control() && origin == AppendOrigin::Client {
                return Err(LogError::ControlBatchFromClient);
            }
            if view.producer_id() != NO_PRODUCER_ID {
                let ts = if log_append_time >= 0 {
                    log_append_time
                } else {
                    s.max_timestamp
                };
                batches.push(ProducerBatch::from_view(&view, next, ts));
            }
            next += i64::from(s.last_offset_delta) + 1;
        }
        self.table.validate_from(&batches, origin)
    }
}

/// Replays every batch of `log` at or after `from` into `table` (`loadProducersFromRecords`).
/// Returns the index entries of the transactions aborted on the way.
fn scan(log: &Log, from: i64, table: &mut ProducerStateTable) -> Result<Vec<AbortedTxn>, LogError> {
    let mut aborted = Vec::new();
    let end = log.log_end_offset();
    let mut offset = from;
    let mut buf = Vec::new();
    while offset < end {
        let read = log.read(offset, SCAN_READ_BYTES, end, true)?;
        if read.regions.is_empty() {
            break;
        }
        buf.clear();
        for region in &read.regions {
            region.read_into(&mut buf).at(log.dir())?;
        }
        let start = offset;
        let mut pos = 0u64;
        for view in record_batch::batches(&buf) {
            let view = view.map_err(|source| LogError::CorruptSegment {
                path: log.dir().to_path_buf(),
                position: pos,
                source,
            })?;
            pos += view.total_len() as u64;
            if view.last_offset() < offset {
                continue;
            }
            aborted.extend(table.replay(&ProducerBatch::from_view(
                &view,
                view.base_offset(),
                view.max_timestamp(),
            )));
            offset = view.last_offset() + 1;
        }
        if offset == start {
            break;
        }
    }
    table.map_end_offset = table.map_end_offset.max(end);
    Ok(aborted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, seq: i32, count: i32, first_offset: i64) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            last_offset_delta: count - 1,
            first_offset,
            max_timestamp: 1000 + first_offset,
            transactional: false,
            marker: None,
        }
    }

    /// Validates and commits one batch, as an append would.
    fn append(t: &mut ProducerStateTable, b: ProducerBatch) -> Result<AppendPlan, LogError> {
        let plan = t.validate(&[b])?;
        if let AppendPlan::Append(u) = &plan {
            t.commit(
                u.clone(),
                b.first_offset + i64::from(b.last_offset_delta) + 1,
            );
        }
        Ok(plan)
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        assert_eq!(decrement_sequence(8, 3), 5);
        assert!(in_sequence(i32::MAX, 0));
        assert!(!in_sequence(i32::MAX, 1));
    }

    #[test]
    fn in_sequence_batches_are_accepted_and_gaps_refused() {
        let mut t = ProducerStateTable::new(0);
        assert!(matches!(
            append(&mut t, batch(7, 0, 0, 10, 0)),
            Ok(AppendPlan::Append(_))
        ));
        assert!(append(&mut t, batch(7, 0, 10, 5, 10)).is_ok());
        assert!(matches!(
            append(&mut t, batch(7, 0, 16, 1, 15)),
            Err(LogError::OutOfOrderSequence {
                sequence: 16,
                last_sequence: 14,
                ..
            })
        ));
        assert_eq!(t.entry(7).unwrap().last_seq(), 14);
        assert_eq!(t.map_end_offset(), 15);
    }

    #[test]
    fn any_of_the_last_five_batches_is_a_duplicate() {
        let mut t = ProducerStateTable::new(0);
        for i in 0..7 {
            append(&mut t, batch(1, 0, i * 2, 2, i64::from(i) * 2)).unwrap();
        }
        // Batches 2..=6 are retained; 0 and 1 are not.
        for i in 2..7 {
            let plan = t.validate(&[batch(1, 0, i * 2, 2, 99)]).unwrap();
            assert_eq!(
                plan,
                AppendPlan::Duplicate(BatchMetadata {
                    last_seq: i * 2 + 1,
                    last_offset: i64::from(i) * 2 + 1,
                    offset_delta: 1,
                    timestamp: 1000 + i64::from(i) * 2,
                })
            );
        }
        assert!(matches!(
            t.validate(&[batch(1, 0, 2, 2, 99)]),
            Err(LogError::OutOfOrderSequence { .. })
        ));
        // Same sequences, other range: not a duplicate.
        assert!(t.validate(&[batch(1, 0, 4, 3, 99)]).is_err());
    }

    #[test]
    fn epochs_fence_and_restart_sequences() {
        let mut t = ProducerStateTable::new(0);
        append(&mut t, batch(1, 3, 0, 1, 0)).unwrap();
        assert!(matches!(
            t.validate(&[batch(1, 2, 1, 1, 1)]),
            Err(LogError::InvalidProducerEpoch {
                epoch: 2,
                current_epoch: 3,
                ..
            })
        ));
        // A new epoch must start at 0.
        assert!(matches!(
            t.validate(&[batch(1, 4, 5, 1, 1)]),
            Err(LogError::OutOfOrderSequence { .. })
        ));
        append(&mut t, batch(1, 4, 0, 1, 1)).unwrap();
        assert_eq!(t.entry(1).unwrap().producer_epoch, 4);
        assert_eq!(t.entry(1).unwrap().batches().count(), 1);
    }

    #[test]
    fn unknown_producers_may_start_anywhere_and_bad_sequences_are_invalid() {
        let t = ProducerStateTable::new(0);
        assert!(t.validate(&[batch(9, 0, 500, 1, 0)]).is_ok());
        assert!(matches!(
            t.validate(&[batch(9, 0, -1, 1, 0)]),
            Err(LogError::InvalidProducerSequence { .. })
        ));
        assert_eq!(
            t.validate(&[batch(NO_PRODUCER_ID, -1, -1, 1, 0)]).unwrap(),
            AppendPlan::Append(ProducerUpdates::default())
        );
    }

    #[test]
    fn one_request_may_carry_consecutive_batches() {
        let t = ProducerStateTable::new(0);
        let plan = t
            .validate(&[batch(1, 0, 0, 2, 0), batch(1, 0, 2, 2, 2)])
            .unwrap();
        let AppendPlan::Append(u) = plan else {
            panic!()
        };
        assert_eq!(u.entries[0].batches().count(), 2);
        assert!(
            t.validate(&[batch(1, 0, 0, 2, 0), batch(1, 0, 3, 2, 2)])
                .is_ok(),
            "no state yet: the first batch sets the baseline, the second is in the same request"
        );
    }

    #[test]
    fn sequences_wrap_in_the_log() {
        let mut t = ProducerStateTable::new(0);
        append(&mut t, batch(1, 0, i32::MAX - 1, 2, 0)).unwrap();
        assert_eq!(t.entry(1).unwrap().last_seq(), i32::MAX);
        append(&mut t, batch(1, 0, 0, 3, 2)).unwrap();
        // A batch spanning the wrap is found as a duplicate too.
        let mut t = ProducerStateTable::new(0);
        append(&mut t, batch(1, 0, i32::MAX - 1, 4, 0)).unwrap();
        assert_eq!(t.entry(1).unwrap().last_seq(), 1);
        assert!(matches!(
            t.validate(&[batch(1, 0, i32::MAX - 1, 4, 9)]),
            Ok(AppendPlan::Duplicate(_))
        ));
    }

    mod with_log {
        //! The snapshot files' life cycle through a real [`Log`].
        use super::super::*;
        use crate::LogConfig;
        use bytes::Bytes;
        use strata_protocol::record_batch::{SimpleRecord, encode_batch, set_producer};

        fn idempotent(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
            let records: Vec<SimpleRecord> = (0..n)
                .map(|_| SimpleRecord {
                    value: Some(Bytes::from(vec![b'v'; 100])),
                    timestamp: 1_000,
                    ..Default::default()
                })
                .collect();
            let mut b = encode_batch(0, &records).to_vec();
            set_producer(&mut b, pid, epoch, seq);
            b
        }

        fn snapshots(dir: &Path) -> Vec<String> {
            let mut v: Vec<String> = fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.ends_with(".snapshot"))
                .collect();
            v.sort();
            v
        }

        fn config() -> LogConfig {
            LogConfig {
                segment_bytes: 600,
                retention_ms: -1,
                ..LogConfig::default()
            }
        }

        #[test]
        fn rolls_snapshot_and_reopen_rebuilds_from_snapshot_plus_scan() {
            let dir = tempfile::tempdir().unwrap();
            let mut log = Log::open(dir.path(), config(), 0).unwrap();
            for i in 0..12 {
                log.append(&mut idempotent(7, 0, i * 2, 2), 0, 0).unwrap();
            }
            let snaps = snapshots(dir.path());
            assert!(!snaps.is_empty(), "a roll writes a snapshot");
            assert!(snaps.len() <= 2, "only the latest two are kept: {snaps:?}");
            assert_eq!(snaps.last().unwrap().len(), 29);
            let end = log.log_end_offset();
            drop(log); // a crash: no snapshot at the end
            let mut log = Log::open(dir.path(), config(), 0).unwrap();
            assert_eq!(log.producer_state().entry(7).unwrap().last_seq(), 23);
            // The batches scanned after the latest snapshot are duplicates, and so is the one
            // batch the snapshot keeps; older ones are not remembered (as in Kafka).
            let snap: i64 = snaps.last().unwrap()[..20].parse().unwrap();
            for i in 7..12 {
                let first = i64::from(i) * 2;
                let result = log.append(&mut idempotent(7, 0, i * 2, 2), 0, 0);
                if first >= snap - 2 {
                    let info = result.unwrap();
                    assert_eq!((info.base_offset, info.record_count), (first, 0));
                } else {
                    assert!(matches!(result, Err(LogError::OutOfOrderSequence { .. })));
                }
            }
            assert_eq!(log.log_end_offset(), end);
            log.close().unwrap();
            assert!(snapshots(dir.path()).contains(&snapshot_file_name(end)));
        }

        #[test]
        fn damaged_snapshot_falls_back_to_a_scan_and_truncation_reloads() {
            let dir = tempfile::tempdir().unwrap();
            let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
            log.append(&mut idempotent(3, 0, 0, 2), 0, 0).unwrap();
            log.append(&mut idempotent(3, 0, 2, 2), 0, 0).unwrap();
            log.close().unwrap();
            let snap = dir.path().join(snapshot_file_name(4));
            let mut bytes = fs::read(&snap).unwrap();
            bytes[20] ^= 0xff;
            fs::write(&snap, bytes).unwrap();
            // A clean start trusts the segment, so the snapshot at its end is read (after a
            // crash the recovered segment is replayed from a snapshot at or below its base).
            let mut log = Log::open_with(dir.path(), LogConfig::default(), 0, true).unwrap();
            assert!(!snap.exists(), "the damaged snapshot is deleted");
            assert_eq!(log.producer_state().entry(3).unwrap().last_seq(), 3);
            log.truncate_to(2).unwrap();
            assert_eq!(log.producer_state().entry(3).unwrap().last_seq(), 1);
            // The truncated batch may be written again.
            assert_eq!(
                log.append(&mut idempotent(3, 0, 2, 2), 0, 0)
                    .unwrap()
                    .base_offset,
                2
            );
        }

        #[test]
        fn retention_deletes_snapshots_below_the_log_start() {
            let dir = tempfile::tempdir().unwrap();
            let mut log = Log::open(dir.path(), config(), 0).unwrap();
            for i in 0..12 {
                log.append(&mut idempotent(7, 0, i * 2, 2), 0, 0).unwrap();
            }
            log.set_config(LogConfig {
                retention_bytes: 0,
                ..config()
            });
            log.apply_retention(0).unwrap();
            let start = log.log_start_offset();
            for s in snapshots(dir.path()) {
                let offset: i64 = s[..20].parse().unwrap();
                assert!(offset >= start, "{s} below the log start {start}");
            }
        }
    }

    #[test]
    fn snapshot_round_trips_and_rejects_damage() {
        let mut t = ProducerStateTable::new(0);
        append(&mut t, batch(1, 0, 0, 3, 0)).unwrap();
        append(&mut t, batch(2, 5, 7, 1, 3)).unwrap();
        let bytes = t.encode_snapshot();
        assert_eq!(bytes.len(), 10 + 2 * 46);
        assert_eq!(&bytes[0..2], &1i16.to_be_bytes());
        // Entry 1: producer id then epoch, last sequence 2, last offset 2, delta 2.
        assert_eq!(&bytes[10..18], &1i64.to_be_bytes());
        assert_eq!(&bytes[20..24], &2i32.to_be_bytes());
        assert_eq!(&bytes[24..32], &2i64.to_be_bytes());
        let back = ProducerStateTable::decode_snapshot(&bytes, 4, 0, i64::MAX).unwrap();
        assert_eq!(back.map_end_offset(), 4);
        assert_eq!(back.entry(1).unwrap().last_seq(), 2);
        assert_eq!(back.entry(2).unwrap().producer_epoch, 5);
        assert!(matches!(
            back.validate(&[batch(1, 0, 0, 3, 9)]),
            Ok(AppendPlan::Duplicate(_))
        ));
        let mut bad = bytes.clone();
        bad[30] ^= 1;
        assert!(matches!(
            ProducerStateTable::decode_snapshot(&bad, 4, 0, i64::MAX),
            Err(SnapshotError::Crc { .. })
        ));
        assert!(ProducerStateTable::decode_snapshot(&bytes[..50], 4, 0, i64::MAX).is_err());
        // Expired producers are dropped on load.
        let back = ProducerStateTable::decode_snapshot(&bytes, 4, 1000 + 10, 10).unwrap();
        assert!(back.entry(1).is_none());
        assert!(back.entry(2).is_some());
    }
}
