//! The transaction coordinator's runtime over `__transaction_state` (Kafka's
//! `TransactionStateManager`): which partitions this node coordinates, their loads, and the
//! two-phase writes of [`super::state`]'s transitions.
//!
//! The topic is created by the controller like `__consumer_offsets`
//! (`transaction.state.log.num.partitions` partitions of
//! `transaction.state.log.replication.factor` replicas, `min.insync.replicas` from
//! `transaction.state.log.min.isr`, compacted) and replicated like any topic. A transactional
//! id belongs to partition `abs(javaHashCode(id)) % n`, and its coordinator is that
//! partition's leader. The roles, the load and the writes are the shared
//! [`crate::coordinator::runtime`]'s: a transition is prepared under the partition's lock,
//! appended as the partition's leader, and completed in memory once the high watermark passes
//! it (acks=all), or abandoned if it does not get there; only then is the client answered.
//! A decided transaction (EndTxn, a fence, a timeout, or one a load finds decided) becomes a
//! [`MarkerJob`] for the server's marker sender, which calls
//! [`TxnStore::complete_markers`] once every marker is written.
//!
//! A state is one record per transactional id, so the topic's live size is the number of ids;
//! the leader compacts nothing yet (see the module map's notes): ids expire after
//! `transactional.id.expiration.ms` with a tombstone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use strata_protocol::ResponseError;
use tokio::sync::mpsc;

use super::records::{self, TRANSACTION_STATE_TOPIC, TxnLogValue, TxnState};
use super::state::{EXHAUSTED_EPOCH, EndOutcome, InitOutcome, TxnMetadata, TxnStates};
use crate::coordinator::runtime::{self, CoordinatorError, Partitions, PendingWrite, Slot};
use crate::partition::Partition;

/// How long a transition's write waits to be committed (Kafka's `request.timeout.ms`
/// default, which its transaction log appends wait for).
pub const WRITE_TIMEOUT: Duration = Duration::from_millis(30_000);

/// The broker settings the store needs, with Kafka's names.
#[derive(Debug, Clone, Copy)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions`.
    pub num_partitions: i32,
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub remove_expired_interval_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_timed_out_interval_ms: i64,
    /// The finalized level of the `transaction.version` feature: 2 makes the coordinator's
    /// own aborts (a fencing InitProducerId, a timeout) end as version 2 does, with the
    /// epoch bumped in the PrepareAbort, as Kafka's `transactionVersionLevel` decides them.
    /// A client's requests choose their version themselves (EndTxn v5, Produce v12,
    /// TxnOffsetCommit v5).
    pub transaction_version: i16,
}

impl TxnConfig {
    /// Whether the coordinator's own aborts are version-2 ends.
    #[must_use]
    pub fn tv2(&self) -> bool {
        self.transaction_version >= 2
    }
}

/// Why a transaction request failed.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// The partition is not served here, or its write failed.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// The state machine's refusal, as a Kafka error code.
    #[error("refused with error code {0}")]
    Refused(i16),
    /// A producer id could not be allocated (the code to answer).
    #[error("no producer id: error code {0}")]
    ProducerId(i16),
}

/// The transactional ids of every `__transaction_state` partition this node leads.
pub struct TxnStore {
    config: TxnConfig,
    partitions: Partitions<TxnStates>,
    /// Broker time of the last expiry pass.
    last_expiry_ms: std::sync::atomic::AtomicI64,
    /// Broker time of the last pass over timed-out transactions.
    last_timeout_ms: std::sync::atomic::AtomicI64,
    /// Decided transactions whose markers are to be sent, to the sender (the server's
    /// `txn_markers` task, which takes the receiving end once).
    markers: mpsc::UnboundedSender<MarkerJob>,
    marker_jobs: std::sync::Mutex<Option<mpsc::UnboundedReceiver<MarkerJob>>>,
}

/// The markers of one decided transaction: what the sender writes to each of its
/// partitions, before [`TxnStore::complete_markers`] writes its CompleteCommit or
/// CompleteAbort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    /// The `__transaction_state` partition of the id.
    pub txn_partition: i32,
    /// The leader epoch of that partition when the transaction was decided: the markers'
    /// coordinator epoch, which fences an older coordinator's markers.
    pub coordinator_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub partitions: BTreeMap<String, BTreeSet<i32>>,
}

impl MarkerJob {
    fn of(id: &str, txn_partition: i32, coordinator_epoch: i32, m: &TxnMetadata) -> Self {
        MarkerJob {
            transactional_id: id.to_owned(),
            txn_partition,
            coordinator_epoch,
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            commit: m.state == TxnState::PrepareCommit,
            partitions: m.partitions.clone(),
        }
    }
}

/// A prepared transition appended under the partition's lock, waiting to be committed.
struct Appended {
    next: TxnMetadata,
    epoch: i32,
    pending: PendingWrite,
}

impl TxnStore {
    /// A store that leads no partition yet.
    ///
    /// # Panics
    /// If `config.num_partitions` is not positive (the configuration refuses that).
    #[must_use]
    pub fn new(config: TxnConfig, now_ms: i64) -> Self {
        assert!(
            config.num_partitions > 0,
            "transaction.state.log.num.partitions must be positive"
        );
        let (markers, marker_jobs) = mpsc::unbounded_channel();
        TxnStore {
            config,
            partitions: Partitions::new(TRANSACTION_STATE_TOPIC, config.num_partitions),
            last_expiry_ms: std::sync::atomic::AtomicI64::new(now_ms),
            last_timeout_ms: std::sync::atomic::AtomicI64::new(now_ms),
            markers,
            marker_jobs: std::sync::Mutex::new(Some(marker_jobs)),
        }
    }

    /// The store's settings.
    #[must_use]
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The `__transaction_state` partition of `id`.
    #[must_use]
    pub fn partition_for(&self, id: &str) -> i32 {
        records::partition_for(id, self.config.num_partitions)
    }

    fn lock(&self, id: &str) -> MutexGuard<'_, Slot<TxnStates>> {
        self.partitions.lock(self.partition_for(id))
    }

    /// This node leads `__transaction_state`-`index` in `epoch`: `true` when a load must
    /// run ([`TxnStore::load`]), `false` when this leadership is loading or loaded already.
    pub fn begin_load(&self, index: i32, partition: Arc<Partition>, epoch: i32) -> bool {
        self.partitions.begin_load(index, partition, epoch)
    }

    /// Replays partition `index`'s log for the leadership of `epoch` that
    /// [`TxnStore::begin_load`] began, and makes it active unless that leadership ended
    /// meanwhile. Returns whether it became active.
    ///
    /// # Errors
    /// [`CoordinatorError`] when the log cannot be read; the partition stays loading (its
    /// ids get COORDINATOR_LOAD_IN_PROGRESS) until the next leadership change.
    pub fn load(&self, index: i32, epoch: i32) -> Result<bool, CoordinatorError> {
        let Some(partition) = self.partitions.loading_in(index, epoch) else {
            return Ok(false);
        };
        let started = std::time::Instant::now();
        let mut states = TxnStates::default();
        runtime::replay(&partition, TRANSACTION_STATE_TOPIC, |offset, key, value| {
            let decoded = key
                .ok_or(records::TxnRecordError::MissingKey)
                .and_then(records::decode_key)
                .and_then(|id| Ok((id, value.map(TxnLogValue::decode).transpose()?)));
            match decoded {
                Ok((id, value)) => states.replay(id, value),
                // Kafka's loader fails the partition on a record it cannot read; one bad
                // record should not cost every other id its state, so skip it loudly.
                Err(e) => tracing::error!(partition = index, offset, error = %e,
                    "skipping undecodable {TRANSACTION_STATE_TOPIC} record"),
            }
        })?;
        let activated = self.partitions.activate(index, epoch, states, |states| {
            tracing::info!(
                partition = index,
                epoch,
                ids = states.iter().count(),
                elapsed_ms = started.elapsed().as_millis(),
                "loaded {TRANSACTION_STATE_TOPIC} partition"
            );
        });
        if activated {
            // The transactions decided but not completed by the previous coordinator: their
            // markers are sent again (a partition that has them already ignores a repeat).
            let p = self.partitions.lock(index);
            if p.role.epoch() == Some(epoch) {
                for (id, m) in p.shard.iter() {
                    if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
                        let _ = self.markers.send(MarkerJob::of(id, index, epoch, m));
                    }
                }
            }
        }
        Ok(activated)
    }

    /// Whether partition `index` is led here and loading.
    #[must_use]
    pub fn is_loading(&self, index: i32) -> bool {
        self.partitions.is_loading(index)
    }

    /// This node no longer leads partition `index`: its ids go. Returns whether it was led
    /// here.
    pub fn resign(&self, index: i32) -> bool {
        self.partitions.resign(index, |_| {})
    }

    /// Whether this node serves `id` now.
    ///
    /// # Errors
    /// [`CoordinatorError::NotCoordinator`] or [`CoordinatorError::LoadInProgress`].
    pub fn check(&self, id: &str) -> Result<(), CoordinatorError> {
        self.lock(id).serving(TRANSACTION_STATE_TOPIC).map(|_| ())
    }

    /// Every transactional id of the partitions this node serves, with its state, sorted
    /// (ListTransactions).
    ///
    /// # Errors
    /// [`CoordinatorError::LoadInProgress`] while a partition led here is loading, as Kafka
    /// answers rather than list part of its ids.
    pub fn list(&self) -> Result<Vec<(String, TxnMetadata)>, CoordinatorError> {
        let mut out = Vec::new();
        for p in self.partitions.each() {
            match p.serving(TRANSACTION_STATE_TOPIC) {
                Ok(_) => out.extend(p.shard.iter().map(|(id, m)| (id.clone(), m.clone()))),
                Err(e @ CoordinatorError::LoadInProgress { .. }) => return Err(e),
                Err(_) => {}
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The state of `id`, if this node serves it and knows it.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<TxnMetadata> {
        self.lock(id).shard.get(id).cloned()
    }

    /// InitProducerId with a transactional id: the producer id and epoch to answer, once the
    /// new state is committed. `expected` is the id and epoch the producer holds (v3+);
    /// `allocate` hands out a fresh producer id when the state machine needs one.
    ///
    /// # Errors
    /// [`TxnError`]: not served here, the state machine's refusal, a failed write.
    pub async fn init_producer_id<F, Fut>(
        &self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now_ms: i64,
        mut allocate: F,
    ) -> Result<(i64, i16), TxnError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<i64, i16>>,
    {
        // A fresh id is allocated (asynchronously, so without the lock) when the id is new
        // or its epochs ran out; one allocated for a state that changed meanwhile is unused,
        // as Kafka leaves gaps in its blocks too.
        let mut fresh = None;
        let written = loop {
            let needs_fresh = {
                let p = self.lock(id);
                p.serving(TRANSACTION_STATE_TOPIC)?;
                p.shard
                    .get(id)
                    .is_none_or(|m| m.producer_epoch >= EXHAUSTED_EPOCH)
            };
            if needs_fresh && fresh.is_none() {
                fresh = Some(allocate().await.map_err(TxnError::ProducerId)?);
            }
            let mut p = self.lock(id);
            p.serving(TRANSACTION_STATE_TOPIC)?;
            let needs_fresh = p
                .shard
                .get(id)
                .is_none_or(|m| m.producer_epoch >= EXHAUSTED_EPOCH);
            if needs_fresh && fresh.is_none() {
                continue;
            }
            let mut take = || fresh.take().unwrap_or(-1);
            let outcome = p
                .shard
                .init_producer_id(
                    id,
                    timeout_ms,
                    expected,
                    self.config.tv2(),
                    now_ms,
                    &mut take,
                )
                .map_err(TxnError::Refused)?;
            break match outcome {
                InitOutcome::Write(next) => (false, Self::append(&mut p, id, next, now_ms)?),
                InitOutcome::Fence(next) => (true, Self::append(&mut p, id, next, now_ms)?),
            };
        };
        let (fenced, appended) = written;
        let (next, epoch) = self.finish(id, appended).await?;
        if fenced {
            // The fenced transaction is aborted by its markers; the producer retries until
            // that is complete (Kafka answers the same).
            let job = MarkerJob::of(id, self.partition_for(id), epoch, &next);
            let _ = self.markers.send(job);
            return Err(TxnError::Refused(
                ResponseError::ConcurrentTransactions.code(),
            ));
        }
        Ok((next.producer_id, next.producer_epoch))
    }

    /// Appends the prepared `next` of `id` as the partition's leader, under its lock `p`; the
    /// pending state is cleared if the append fails.
    fn append(
        p: &mut Slot<TxnStates>,
        id: &str,
        next: TxnMetadata,
        now_ms: i64,
    ) -> Result<Appended, TxnError> {
        let (epoch, partition) = match p.serving(TRANSACTION_STATE_TOPIC) {
            Ok((epoch, partition)) => (epoch, partition.clone()),
            Err(e) => {
                p.shard.abandon(id);
                return Err(e.into());
            }
        };
        let record = (records::encode_key(id), Some(next.log_value().encode()));
        match runtime::append_records(&partition, epoch, [record], now_ms) {
            Ok((end, flushes)) => Ok(Appended {
                next,
                epoch,
                pending: PendingWrite::until(
                    TRANSACTION_STATE_TOPIC,
                    partition,
                    epoch,
                    end,
                    flushes,
                ),
            }),
            Err(source) => {
                p.shard.abandon(id);
                Err(CoordinatorError::Append {
                    topic: TRANSACTION_STATE_TOPIC,
                    partition: p.index,
                    source,
                }
                .into())
            }
        }
    }

    /// Waits for an appended transition to be committed, then makes it `id`'s state (or
    /// abandons it): the new state and the leader epoch it was written in.
    async fn finish(&self, id: &str, a: Appended) -> Result<(TxnMetadata, i32), TxnError> {
        let committed = a.pending.committed(WRITE_TIMEOUT).await;
        let mut p = self.lock(id);
        let same_leadership = p.role.epoch() == Some(a.epoch);
        match committed {
            Ok(()) => {
                if same_leadership {
                    p.shard.complete(id, a.next.clone());
                }
                Ok((a.next, a.epoch))
            }
            Err(e) => {
                if same_leadership {
                    p.shard.abandon(id);
                }
                Err(e.into())
            }
        }
    }

    /// AddPartitionsToTxn (v0-3 from a client, or v4+ without `verify_only` from a
    /// partition leader adding implicitly for a version-2 producer: `tv2`) and
    /// AddOffsetsToTxn: adds `partitions` to the transaction of `id`, starting one if none
    /// is ongoing, answered once that is committed.
    ///
    /// # Errors
    /// [`TxnError`]: not served here, the state machine's refusal, a failed write.
    pub async fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeMap<String, BTreeSet<i32>>,
        tv2: bool,
        now_ms: i64,
    ) -> Result<(), TxnError> {
        let appended = {
            let mut p = self.lock(id);
            p.serving(TRANSACTION_STATE_TOPIC)?;
            let prepared = p
                .shard
                .add_partitions(id, producer_id, producer_epoch, partitions, tv2, now_ms)
                .map_err(TxnError::Refused)?;
            match prepared {
                None => return Ok(()),
                Some(next) => Self::append(&mut p, id, next, now_ms)?,
            }
        };
        self.finish(id, appended).await.map(|_| ())
    }

    /// AddPartitionsToTxn v4+ with `verify_only`: whether each partition is in the ongoing
    /// transaction of `id` (NONE, or TRANSACTION_ABORTABLE).
    ///
    /// # Errors
    /// [`TxnError`]: not served here, or the state machine's refusal for every partition.
    pub fn verify(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeMap<String, BTreeSet<i32>>,
    ) -> Result<BTreeMap<(String, i32), i16>, TxnError> {
        let p = self.lock(id);
        p.serving(TRANSACTION_STATE_TOPIC)?;
        p.shard
            .verify(id, producer_id, producer_epoch, partitions)
            .map_err(TxnError::Refused)
    }

    /// EndTxn: decides the transaction of `id` (PrepareCommit or PrepareAbort), answered
    /// once that is committed, with the producer id and epoch the producer goes on with;
    /// its markers are then sent, and the transaction completed, in the background.
    ///
    /// `tv2` is EndTxn v5 (transaction version 2, KIP-890): every end bumps the epoch, an
    /// abort is accepted with no transaction ongoing, and once the epochs run out the end
    /// moves the producer to a fresh id from `allocate` (answered with epoch 0).
    ///
    /// # Errors
    /// [`TxnError`]: not served here, the state machine's refusal, a failed write.
    #[allow(clippy::too_many_arguments)]
    pub async fn end_txn<F, Fut>(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        tv2: bool,
        now_ms: i64,
        mut allocate: F,
    ) -> Result<(i64, i16), TxnError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<i64, i16>>,
    {
        // As in InitProducerId: a fresh id is allocated without the lock, and one taken for a
        // state that changed meanwhile is left unused.
        let exhausted = |p: &Slot<TxnStates>| {
            tv2 && p
                .shard
                .get(id)
                .is_some_and(|m| m.producer_epoch >= EXHAUSTED_EPOCH)
        };
        let mut fresh = None;
        let appended = loop {
            let needs_fresh = {
                let p = self.lock(id);
                p.serving(TRANSACTION_STATE_TOPIC)?;
                exhausted(&p)
            };
            if needs_fresh && fresh.is_none() {
                fresh = Some(allocate().await.map_err(TxnError::ProducerId)?);
            }
            let mut p = self.lock(id);
            p.serving(TRANSACTION_STATE_TOPIC)?;
            if exhausted(&p) && fresh.is_none() {
                continue;
            }
            let mut take = || fresh.take().unwrap_or(-1);
            let outcome = p
                .shard
                .end_txn(
                    id,
                    producer_id,
                    producer_epoch,
                    commit,
                    tv2,
                    now_ms,
                    &mut take,
                )
                .map_err(TxnError::Refused)?;
            match outcome {
                EndOutcome::Done {
                    producer_id,
                    producer_epoch,
                } => return Ok((producer_id, producer_epoch)),
                EndOutcome::Prepare(next) => break Self::append(&mut p, id, next, now_ms)?,
            }
        };
        let (next, epoch) = self.finish(id, appended).await?;
        let _ = self
            .markers
            .send(MarkerJob::of(id, self.partition_for(id), epoch, &next));
        // The producer goes on with what the completion will hold: under version 2 an end
        // that exhausted the epoch moves it to the next producer id at epoch 0 (the markers
        // still carry the old id, at the last epoch).
        if next.next_producer_id >= 0 {
            Ok((next.next_producer_id, 0))
        } else {
            Ok((next.producer_id, next.producer_epoch))
        }
    }

    /// The receiving end of the marker jobs, for the one sender (`None` once taken).
    pub fn take_marker_jobs(&self) -> Option<mpsc::UnboundedReceiver<MarkerJob>> {
        self.marker_jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Whether this node still leads the job's `__transaction_state` partition in the epoch
    /// the transaction was decided in (a new leader resumes it from its log).
    #[must_use]
    pub fn still_coordinates(&self, job: &MarkerJob) -> bool {
        self.partitions.lock(job.txn_partition).role.epoch() == Some(job.coordinator_epoch)
    }

    /// Every marker of `job` is written: its CompleteCommit or CompleteAbort, committed.
    /// Nothing is done when the transaction is no longer the one decided (this node lost
    /// the partition, or the state moved on).
    ///
    /// # Errors
    /// [`TxnError`] when the write failed; the sender retries while it still coordinates.
    pub async fn complete_markers(&self, job: &MarkerJob, now_ms: i64) -> Result<(), TxnError> {
        let id = job.transactional_id.as_str();
        let appended = {
            let mut p = self.lock(id);
            if p.role.epoch() != Some(job.coordinator_epoch) {
                return Ok(());
            }
            let decided = p.shard.get(id).is_some_and(|m| {
                m.pending.is_none()
                    && m.producer_id == job.producer_id
                    && m.producer_epoch == job.producer_epoch
                    && m.state
                        == if job.commit {
                            TxnState::PrepareCommit
                        } else {
                            TxnState::PrepareAbort
                        }
            });
            if !decided {
                return Ok(());
            }
            let Some(next) = p.shard.prepare_complete(id, now_ms) else {
                return Ok(());
            };
            Self::append(&mut p, id, next, now_ms)?
        };
        self.finish(id, appended).await.map(|_| ())
    }

    /// Aborts, with a bumped epoch that fences their producers, the ongoing transactions
    /// that outlived their timeout, if `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    /// has passed since the last pass (`abortTimedOutTransactions`). Returns how many were
    /// decided (`None`: no pass was due); their markers follow.
    pub async fn maybe_abort_timed_out(&self, now_ms: i64) -> Option<usize> {
        use std::sync::atomic::Ordering;
        let last = self.last_timeout_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) < self.config.abort_timed_out_interval_ms {
            return None;
        }
        self.last_timeout_ms.store(now_ms, Ordering::Relaxed);
        let mut appended = Vec::new();
        for mut p in self.partitions.each() {
            if p.serving(TRANSACTION_STATE_TOPIC).is_err() {
                continue;
            }
            for (id, next) in p.shard.abort_timed_out(self.config.tv2(), now_ms) {
                tracing::info!(transactional_id = %id, producer_id = next.producer_id,
                    "aborting a transaction that outlived its timeout");
                match Self::append(&mut p, &id, next, now_ms) {
                    Ok(a) => appended.push((id, a)),
                    Err(e) => tracing::warn!(transactional_id = %id, error = %e,
                        "cannot abort a timed-out transaction"),
                }
            }
        }
        let mut count = 0;
        for (id, a) in appended {
            if let Ok((next, epoch)) = self.finish(&id, a).await {
                let _ =
                    self.markers
                        .send(MarkerJob::of(&id, self.partition_for(&id), epoch, &next));
                count += 1;
            }
        }
        Some(count)
    }

    /// Removes, with tombstones, the transactional ids idle for longer than
    /// `transactional.id.expiration.ms`, if `transaction.remove.expired.transaction.cleanup.interval.ms`
    /// has passed since the last pass. Returns how many tombstones were appended (`None`:
    /// no pass was due). Nothing waits for them: an id whose tombstone is lost is expired
    /// again by the next leader.
    pub fn maybe_expire(&self, now_ms: i64) -> Option<usize> {
        use std::sync::atomic::Ordering;
        let last = self.last_expiry_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) < self.config.remove_expired_interval_ms {
            return None;
        }
        self.last_expiry_ms.store(now_ms, Ordering::Relaxed);
        let mut total = 0;
        for mut p in self.partitions.each() {
            let Ok((epoch, partition)) = p.serving(TRANSACTION_STATE_TOPIC) else {
                continue;
            };
            let partition = partition.clone();
            let ids = p.shard.expire(now_ms, self.config.id_expiration_ms);
            if ids.is_empty() {
                continue;
            }
            let tombstones = ids.iter().map(|id| (records::encode_key(id), None));
            match runtime::append_records(&partition, epoch, tombstones, now_ms) {
                Ok(_) => {
                    for id in &ids {
                        p.shard.complete_dead(id);
                    }
                    total += ids.len();
                    tracing::info!(
                        partition = p.index,
                        ids = ids.len(),
                        "expired transactional ids"
                    );
                }
                Err(e) => {
                    for id in &ids {
                        p.shard.abandon(id);
                    }
                    tracing::warn!(partition = p.index, error = %e, "cannot expire transactional ids");
                }
            }
        }
        Some(total)
    }
}

/// Kafka's topic configs for `__transaction_state` (`TransactionLog.transactionTopicConfigs`):
/// compacted, uncompressed, `transaction.state.log.segment.bytes`, and `min.insync.replicas`.
#[must_use]
pub fn topic_configs(segment_bytes: i32, min_isr: i32) -> Vec<(String, String)> {
    vec![
        ("cleanup.policy".to_owned(), "compact".to_owned()),
        ("compression.type".to_owned(), "uncompressed".to_owned()),
        ("segment.bytes".to_owned(), segment_bytes.to_string()),
        ("min.insync.replicas".to_owned(), min_isr.to_string()),
        (
            "unclean.leader.election.enable".to_owned(),
            "false".to_owned(),
        ),
        (
            "max.message.bytes".to_owned(),
            (runtime::MAX_BATCH_BYTES * 4).to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests;
