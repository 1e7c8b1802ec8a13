//! The transaction coordinator's state machine, sans IO: what each transactional id holds,
//! and how InitProducerId, AddPartitionsToTxn (add and verify), EndTxn, the fencing of an
//! ongoing transaction, its completion after the markers, timeouts and expiry change it, as
//! Kafka 4.1's `TransactionCoordinator` and `TransactionMetadata` decide (transaction
//! versions 0/1 and 2, KIP-890).
//!
//! # Two phases
//!
//! A change is prepared under the state (the entry gets a *pending* state, and every other
//! request meanwhile answers CONCURRENT_TRANSACTIONS), written to `__transaction_state`, and
//! then completed ([`TxnStates::complete`]) or, if the write failed, abandoned
//! ([`TxnStates::abandon`]). A prepared change is a whole next [`TxnMetadata`] (Kafka's
//! `TxnTransitMetadata`), which is also the record to write ([`TxnMetadata::log_value`]).
//!
//! # Ending a transaction
//!
//! EndTxn prepares PrepareCommit or PrepareAbort. Once that is written the client is
//! answered, the markers go to every partition of the transaction with the prepared
//! (producer id, epoch), and once every marker is written the CompleteCommit or
//! CompleteAbort record is ([`TxnStates::prepare_complete`]). Under transaction version 2
//! the epoch is bumped at every end, and when it runs out the next producer id is taken at
//! the end rather than at the next InitProducerId.
//!
//! Errors are Kafka's codes; the caller maps the versions that predate a code (PRODUCER_FENCED
//! is INVALID_PRODUCER_EPOCH before InitProducerId v4, AddPartitionsToTxn and EndTxn v2).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use strata_protocol::ResponseError;

use super::records::{TxnLogValue, TxnState};

/// A producer id's epochs are exhausted once its epoch reaches this: the next bump would
/// leave no epoch for fencing (Kafka's `producerEpoch >= Short.MaxValue - 1`).
pub const EXHAUSTED_EPOCH: i16 = i16::MAX - 1;

/// What the coordinator holds for one transactional id (Kafka's `TransactionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    /// The producer id before the last change (differs only right after a rotation).
    pub previous_producer_id: i64,
    /// The producer id a transaction-version-2 end moves to when the epoch ran out, or -1.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, to recognise a retry; not persisted (-1 after a load).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeMap<String, BTreeSet<i32>>,
    /// When the ongoing transaction started, -1 if none.
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// 2 when the client speaks transaction version 2, else 0.
    pub client_transaction_version: i16,
    /// The state a prepared change is moving to; while set, other changes wait.
    pub pending: Option<TxnState>,
    /// A version-1 fence whose PrepareAbort write failed left the epoch bumped in memory:
    /// the next fence must not bump again.
    pub failed_epoch_fence: bool,
}

impl TxnMetadata {
    /// The record of this state in `__transaction_state`.
    #[must_use]
    pub fn log_value(&self) -> TxnLogValue {
        TxnLogValue {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
            client_transaction_version: self.client_transaction_version,
        }
    }

    /// The state a record loads into.
    #[must_use]
    pub fn from_log_value(v: TxnLogValue) -> Self {
        TxnMetadata {
            producer_id: v.producer_id,
            previous_producer_id: v.previous_producer_id,
            next_producer_id: v.next_producer_id,
            producer_epoch: v.producer_epoch,
            last_producer_epoch: -1,
            timeout_ms: v.timeout_ms,
            state: v.state,
            partitions: if v.state == TxnState::Empty {
                BTreeMap::new()
            } else {
                v.partitions
            },
            start_ms: v.start_ms,
            last_update_ms: v.last_update_ms,
            client_transaction_version: v.client_transaction_version,
            pending: None,
            failed_epoch_fence: false,
        }
    }

    fn is_prepare(&self) -> bool {
        matches!(self.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// A change is pending, or the transaction is decided and its markers are being written:
    /// Kafka holds a pending CompleteCommit or CompleteAbort from the moment PrepareCommit or
    /// PrepareAbort is written (`prepareComplete`), so every request but a retry of the end
    /// itself answers CONCURRENT_TRANSACTIONS until the transaction completes.
    fn busy(&self) -> bool {
        self.pending.is_some() || self.is_prepare()
    }

    fn is_complete(&self) -> bool {
        matches!(
            self.state,
            TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    fn holds_all(&self, partitions: &BTreeMap<String, BTreeSet<i32>>) -> bool {
        partitions.iter().all(|(topic, ids)| {
            self.partitions
                .get(topic)
                .is_some_and(|have| ids.is_subset(have))
        })
    }
}

/// What an InitProducerId for a transactional id leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// Write this Empty state; once written, answer its producer id and epoch.
    Write(TxnMetadata),
    /// The ongoing transaction is fenced: write this PrepareAbort, send its markers, complete
    /// it; the caller answers CONCURRENT_TRANSACTIONS and the producer retries.
    Fence(TxnMetadata),
}

/// What an EndTxn leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// Write this PrepareCommit or PrepareAbort; once written, answer, and send the markers.
    Prepare(TxnMetadata),
    /// A retry of an end already complete: answer at once with this producer id and epoch.
    Done {
        producer_id: i64,
        producer_epoch: i16,
    },
}

/// The transactional ids of one `__transaction_state` partition.
#[derive(Debug, Clone, Default)]
pub struct TxnStates {
    entries: HashMap<String, TxnMetadata>,
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

impl TxnStates {
    /// The state of `id`, if any.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<&TxnMetadata> {
        self.entries.get(id)
    }

    /// Every transactional id and its state.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &TxnMetadata)> {
        self.entries.iter()
    }

    /// Applies a record read back from the log on load: the latest value per id wins, a
    /// tombstone removes it.
    pub fn replay(&mut self, id: String, value: Option<TxnLogValue>) {
        match value {
            Some(v) => {
                self.entries.insert(id, TxnMetadata::from_log_value(v));
            }
            None => {
                self.entries.remove(&id);
            }
        }
    }

    /// InitProducerId with a transactional id (`handleInitProducerId`): `expected` is the
    /// producer id and epoch the producer already holds (v3+, KIP-360), `new_producer_id`
    /// hands out a fresh id. The timeout was checked by the caller.
    ///
    /// # Errors
    /// CONCURRENT_TRANSACTIONS while a change is pending or a transaction is being decided,
    /// PRODUCER_FENCED for an `expected` that is not this producer's.
    pub fn init_producer_id(
        &mut self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        tv2: bool,
        now_ms: i64,
        new_producer_id: &mut dyn FnMut() -> i64,
    ) -> Result<InitOutcome, i16> {
        let meta = self
            .entries
            .entry(id.to_owned())
            .or_insert_with(|| TxnMetadata {
                producer_id: new_producer_id(),
                previous_producer_id: -1,
                next_producer_id: -1,
                producer_epoch: -1,
                last_producer_epoch: -1,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeMap::new(),
                start_ms: -1,
                last_update_ms: now_ms,
                client_transaction_version: 0,
                pending: None,
                failed_epoch_fence: false,
            });
        if meta.pending.is_some() {
            return Err(code(ResponseError::ConcurrentTransactions));
        }
        if let Some((pid, epoch)) = expected {
            let valid = meta.producer_epoch == -1
                || pid == meta.producer_id
                || (pid == meta.previous_producer_id && epoch >= EXHAUSTED_EPOCH);
            if !valid {
                return Err(code(ResponseError::ProducerFenced));
            }
        }
        match meta.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(code(ResponseError::ConcurrentTransactions))
            }
            TxnState::Ongoing => {
                let fence = Self::fence(meta, tv2, now_ms)?;
                Ok(InitOutcome::Fence(fence))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let e = meta.producer_epoch;
                let expected_epoch = expected.map(|(_, epoch)| epoch);
                let mut next = meta.clone();
                next.previous_producer_id = meta.producer_id;
                if e >= EXHAUSTED_EPOCH {
                    if expected_epoch.is_some_and(|x| x != e) {
                        return Err(code(ResponseError::ProducerFenced));
                    }
                    next.producer_id = new_producer_id();
                    next.producer_epoch = 0;
                    next.last_producer_epoch = if expected_epoch.is_some() { e } else { -1 };
                } else {
                    match expected_epoch {
                        None => {
                            next.producer_epoch = e + 1;
                            next.last_producer_epoch = -1;
                        }
                        Some(x) if e == -1 || x == e => {
                            next.producer_epoch = e + 1;
                            next.last_producer_epoch = e;
                        }
                        // A retry whose answer was lost: the bump already happened.
                        Some(x) if x == meta.last_producer_epoch => {}
                        Some(_) => return Err(code(ResponseError::ProducerFenced)),
                    }
                }
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.start_ms = -1;
                next.timeout_ms = timeout_ms;
                next.last_update_ms = now_ms;
                next.pending = None;
                meta.pending = Some(TxnState::Empty);
                Ok(InitOutcome::Write(next))
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                Err(code(ResponseError::UnknownServerError))
            }
        }
    }

    /// Fences the ongoing transaction of `meta` (an InitProducerId from a newer instance,
    /// or the timeout): prepares its abort at a bumped epoch, as a server-initiated EndTxn.
    fn fence(meta: &mut TxnMetadata, tv2: bool, now_ms: i64) -> Result<TxnMetadata, i16> {
        if meta.producer_epoch == i16::MAX {
            return Err(code(ResponseError::ConcurrentTransactions));
        }
        let mut next = meta.clone();
        next.previous_producer_id = meta.producer_id;
        next.state = TxnState::PrepareAbort;
        next.last_update_ms = now_ms;
        next.pending = None;
        if tv2 {
            next.producer_epoch = meta.producer_epoch + 1;
            next.last_producer_epoch = meta.producer_epoch;
            next.client_transaction_version = 2;
        } else {
            // Version 1 moves the epoch in memory before the write, so a failed write does
            // not let the fenced producer carry on, and the next fence does not bump again
            // (`hasFailedEpochFence`, cleared by the successful write).
            if !meta.failed_epoch_fence {
                meta.producer_epoch += 1;
            }
            meta.failed_epoch_fence = true;
            meta.last_producer_epoch = -1;
            next.producer_epoch = meta.producer_epoch;
            next.last_producer_epoch = -1;
            next.client_transaction_version = 0;
            next.failed_epoch_fence = false;
        }
        meta.pending = Some(TxnState::PrepareAbort);
        Ok(next)
    }

    /// The transaction timeout: fences each ongoing transaction started more than its timeout
    /// ago with nothing pending, and returns their PrepareAbort states to write
    /// (`abortTimedOutTransactions`).
    pub fn abort_timed_out(&mut self, tv2: bool, now_ms: i64) -> Vec<(String, TxnMetadata)> {
        let mut out = Vec::new();
        for (id, meta) in &mut self.entries {
            if meta.state == TxnState::Ongoing
                && meta.pending.is_none()
                && meta.start_ms.saturating_add(i64::from(meta.timeout_ms)) < now_ms
                && let Ok(next) = Self::fence(meta, tv2, now_ms)
            {
                out.push((id.clone(), next));
            }
        }
        out
    }

    /// AddPartitionsToTxn v0-3 from a client, or v4+ with `verify_only` false (a partition
    /// leader adding implicitly under version 2), and AddOffsetsToTxn. `Ok(None)`: every
    /// partition is in the transaction already, nothing to write.
    ///
    /// # Errors
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS.
    pub fn add_partitions(
        &mut self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeMap<String, BTreeSet<i32>>,
        tv2: bool,
        now_ms: i64,
    ) -> Result<Option<TxnMetadata>, i16> {
        let meta = self
            .entries
            .get_mut(id)
            .ok_or(code(ResponseError::InvalidProducerIdMapping))?;
        // First, as Kafka checks it (KAFKA-18660): while a version-2 end's markers are
        // written the producer may already hold the next producer id.
        if meta.busy() {
            return Err(code(ResponseError::ConcurrentTransactions));
        }
        if producer_id != meta.producer_id {
            return Err(code(ResponseError::InvalidProducerIdMapping));
        }
        if producer_epoch != meta.producer_epoch {
            return Err(code(ResponseError::ProducerFenced));
        }
        if meta.state == TxnState::Ongoing && meta.holds_all(partitions) {
            return Ok(None);
        }
        let mut next = meta.clone();
        for (topic, ids) in partitions {
            next.partitions
                .entry(topic.clone())
                .or_default()
                .extend(ids);
        }
        if meta.state != TxnState::Ongoing {
            next.start_ms = now_ms;
        }
        next.state = TxnState::Ongoing;
        next.client_transaction_version = if tv2 { 2 } else { 0 };
        next.previous_producer_id = meta.producer_id;
        next.last_update_ms = now_ms;
        next.pending = None;
        meta.pending = Some(TxnState::Ongoing);
        Ok(Some(next))
    }

    /// AddPartitionsToTxn v4+ with `verify_only` (a partition leader checking a
    /// transactional produce, KIP-890 part 1): each partition's code, NONE when it is in the
    /// ongoing transaction, TRANSACTION_ABORTABLE when not. Pending changes are not checked.
    ///
    /// # Errors
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, for every
    /// partition.
    pub fn verify(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeMap<String, BTreeSet<i32>>,
    ) -> Result<BTreeMap<(String, i32), i16>, i16> {
        let meta = self
            .entries
            .get(id)
            .filter(|m| m.producer_id == producer_id)
            .ok_or(code(ResponseError::InvalidProducerIdMapping))?;
        if producer_epoch != meta.producer_epoch {
            return Err(code(ResponseError::ProducerFenced));
        }
        if meta.is_prepare() {
            return Err(code(ResponseError::ConcurrentTransactions));
        }
        Ok(partitions
            .iter()
            .flat_map(|(topic, ids)| ids.iter().map(move |p| (topic.clone(), *p)))
            .map(|(topic, p)| {
                let held = meta.partitions.get(&topic).is_some_and(|s| s.contains(&p));
                let c = if held {
                    0
                } else {
                    code(ResponseError::TransactionAbortable)
                };
                ((topic, p), c)
            })
            .collect())
    }

    /// EndTxn (`handleEndTransaction`): `tv2` for EndTxn v5 (and server-initiated ends on a
    /// version-2 cluster), `from_client` false for the coordinator's own fencing abort.
    ///
    /// # Errors
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS,
    /// INVALID_TXN_STATE.
    #[allow(clippy::too_many_arguments)]
    pub fn end_txn(
        &mut self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        tv2: bool,
        now_ms: i64,
        new_producer_id: &mut dyn FnMut() -> i64,
    ) -> Result<EndOutcome, i16> {
        let meta = self
            .entries
            .get_mut(id)
            .ok_or(code(ResponseError::InvalidProducerIdMapping))?;
        let itx = code(ResponseError::InvalidTxnState);
        let ct = code(ResponseError::ConcurrentTransactions);
        let e = meta.producer_epoch;
        if !tv2 {
            if producer_id != meta.producer_id {
                return Err(code(ResponseError::InvalidProducerIdMapping));
            }
            if producer_epoch != e {
                return Err(code(ResponseError::ProducerFenced));
            }
            if meta.busy() {
                return Err(ct);
            }
            return match (meta.state, commit) {
                (TxnState::Ongoing, _) => {
                    let mut next = meta.clone();
                    next.state = if commit {
                        TxnState::PrepareCommit
                    } else {
                        TxnState::PrepareAbort
                    };
                    next.client_transaction_version = 0;
                    next.previous_producer_id = meta.producer_id;
                    next.last_update_ms = now_ms;
                    meta.pending = Some(next.state);
                    Ok(EndOutcome::Prepare(next))
                }
                (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Err(ct),
                (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                    Ok(EndOutcome::Done {
                        producer_id: meta.producer_id,
                        producer_epoch: e,
                    })
                }
                _ => Err(itx),
            };
        }
        if meta.busy() {
            return Err(ct);
        }
        let retry_on_bump = e > 0 && i32::from(e) == i32::from(producer_epoch) + 1;
        let retry_on_overflow =
            meta.previous_producer_id == producer_id && producer_epoch == EXHAUSTED_EPOCH && e == 0;
        let retry = retry_on_bump || retry_on_overflow;
        if producer_id != meta.producer_id && !retry_on_overflow {
            return Err(code(ResponseError::InvalidProducerIdMapping));
        }
        let current = producer_epoch == e;
        let valid = match meta.state {
            TxnState::Ongoing | TxnState::Empty => current,
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => retry || current,
            TxnState::Dead | TxnState::PrepareEpochFence => false,
        };
        if !valid {
            return Err(code(ResponseError::ProducerFenced));
        }
        let empty_abort = match (meta.state, commit) {
            (TxnState::Ongoing, _) => false,
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => return Err(ct),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => {
                return Ok(EndOutcome::Done {
                    producer_id: meta.producer_id,
                    producer_epoch: e,
                });
            }
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false)
                if current =>
            {
                true
            }
            _ => return Err(itx),
        };
        if e == i16::MAX {
            return Err(code(ResponseError::ProducerFenced));
        }
        let mut next = meta.clone();
        next.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        next.producer_epoch = e + 1;
        next.last_producer_epoch = e;
        next.client_transaction_version = 2;
        next.previous_producer_id = meta.producer_id;
        next.last_update_ms = now_ms;
        if empty_abort {
            next.partitions.clear();
            next.start_ms = now_ms;
        }
        if e >= EXHAUSTED_EPOCH {
            next.next_producer_id = new_producer_id();
        }
        next.pending = None;
        meta.pending = Some(next.state);
        Ok(EndOutcome::Prepare(next))
    }

    /// Once every marker of the prepared end of `id` is written: its CompleteCommit or
    /// CompleteAbort state (`prepareComplete`), marked pending. Under version 2 an end that
    /// exhausted the epoch moves to the next producer id at epoch 0.
    #[must_use]
    pub fn prepare_complete(&mut self, id: &str, now_ms: i64) -> Option<TxnMetadata> {
        let meta = self.entries.get_mut(id)?;
        let target = match meta.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        let mut next = meta.clone();
        next.state = target;
        next.partitions.clear();
        next.last_update_ms = now_ms;
        next.failed_epoch_fence = false;
        next.previous_producer_id = meta.producer_id;
        if meta.client_transaction_version == 2 && meta.next_producer_id != -1 {
            next.producer_id = meta.next_producer_id;
            next.producer_epoch = 0;
        }
        next.next_producer_id = -1;
        next.pending = None;
        meta.pending = Some(target);
        Some(next)
    }

    /// The transactional ids to expire (`transactional.id.expiration.ms`): Empty or complete,
    /// nothing pending, not updated since `now - expiration_ms`. Each is marked pending Dead;
    /// write its tombstone and then [`TxnStates::complete`] it with [`TxnState::Dead`].
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> Vec<String> {
        let mut out = Vec::new();
        for (id, meta) in &mut self.entries {
            if (meta.state == TxnState::Empty || meta.is_complete())
                && meta.pending.is_none()
                && meta.last_update_ms <= now_ms.saturating_sub(expiration_ms)
            {
                meta.pending = Some(TxnState::Dead);
                out.push(id.clone());
            }
        }
        out
    }

    /// The prepared change of `id` was written: it becomes the state (`completeTransitionTo`),
    /// or, for a tombstone, the id is forgotten. A change that is no longer the one pending
    /// (the partition was reloaded meanwhile) is ignored.
    pub fn complete(&mut self, id: &str, next: TxnMetadata) {
        let Some(meta) = self.entries.get_mut(id) else {
            return;
        };
        if meta.pending != Some(next.state) {
            return;
        }
        if next.state == TxnState::Dead {
            self.entries.remove(id);
            return;
        }
        *meta = TxnMetadata {
            pending: None,
            ..next
        };
    }

    /// Expiry's tombstone for `id` was written.
    pub fn complete_dead(&mut self, id: &str) {
        if self
            .entries
            .get(id)
            .is_some_and(|m| m.pending == Some(TxnState::Dead))
        {
            self.entries.remove(id);
        }
    }

    /// The prepared change of `id` was not written: the pending state is cleared (a
    /// version-1 fence keeps its bump, see `fence`).
    pub fn abandon(&mut self, id: &str) {
        if let Some(meta) = self.entries.get_mut(id) {
            meta.pending = None;
        }
    }

    /// After a load: the transactions decided but not completed, whose markers must be sent
    /// again, with their CompleteCommit or CompleteAbort states prepared.
    pub fn resume_prepared(&mut self, now_ms: i64) -> Vec<(String, TxnMetadata, TxnMetadata)> {
        let ids: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, m)| m.is_prepare() && m.pending.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        ids.into_iter()
            .filter_map(|id| {
                let prepared = self.entries.get(&id)?.clone();
                let complete = self.prepare_complete(&id, now_ms)?;
                Some((id, prepared, complete))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
