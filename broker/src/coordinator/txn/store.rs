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
//!
//! A state is one record per transactional id, so the topic's live size is the number of ids;
//! the leader compacts nothing yet (see the module map's notes): ids expire after
//! `transactional.id.expiration.ms` with a tombstone.

use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use strata_protocol::ResponseError;

use super::records::{self, TRANSACTION_STATE_TOPIC, TxnLogValue};
use super::state::{EXHAUSTED_EPOCH, InitOutcome, TxnMetadata, TxnStates};
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
        TxnStore {
            config,
            partitions: Partitions::new(TRANSACTION_STATE_TOPIC, config.num_partitions),
            last_expiry_ms: std::sync::atomic::AtomicI64::new(now_ms),
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
        Ok(self.partitions.activate(index, epoch, states, |states| {
            let decided = states
                .iter()
                .filter(|(_, m)| {
                    matches!(
                        m.state,
                        records::TxnState::PrepareCommit | records::TxnState::PrepareAbort
                    )
                })
                .count();
            if decided > 0 {
                // The markers of a decided transaction are sent by its coordinator, which
                // WriteTxnMarkers will do; until then such a transaction stays decided.
                tracing::warn!(
                    partition = index,
                    decided,
                    "loaded decided transactions whose markers are not sent"
                );
            }
            tracing::info!(
                partition = index,
                epoch,
                ids = states.iter().count(),
                elapsed_ms = started.elapsed().as_millis(),
                "loaded {TRANSACTION_STATE_TOPIC} partition"
            );
        }))
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
        let (next, pending) = loop {
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
            let (epoch, partition) = p.serving(TRANSACTION_STATE_TOPIC)?;
            let partition = partition.clone();
            let needs_fresh = p
                .shard
                .get(id)
                .is_none_or(|m| m.producer_epoch >= EXHAUSTED_EPOCH);
            if needs_fresh && fresh.is_none() {
                continue;
            }
            let mut take = || fresh.take().unwrap_or(-1);
            // Transaction version 2 is not offered to clients yet (ApiVersions finalizes no
            // `transaction.version`), so every producer ends transactions as version 1 does.
            let outcome = p
                .shard
                .init_producer_id(id, timeout_ms, expected, false, now_ms, &mut take)
                .map_err(TxnError::Refused)?;
            let next = match outcome {
                InitOutcome::Write(next) => next,
                InitOutcome::Fence(_) => {
                    // An ongoing transaction needs its markers to be aborted, which this node
                    // cannot send yet; no transaction becomes ongoing here before it can.
                    p.shard.abandon(id);
                    return Err(TxnError::Refused(
                        ResponseError::ConcurrentTransactions.code(),
                    ));
                }
            };
            let record = (records::encode_key(id), Some(next.log_value().encode()));
            match runtime::append_records(&partition, epoch, [record], now_ms) {
                Ok((end, flushes)) => {
                    let pending = PendingWrite::until(
                        TRANSACTION_STATE_TOPIC,
                        partition,
                        epoch,
                        end,
                        flushes,
                    );
                    break (next, (epoch, pending));
                }
                Err(source) => {
                    p.shard.abandon(id);
                    return Err(CoordinatorError::Append {
                        topic: TRANSACTION_STATE_TOPIC,
                        partition: p.index,
                        source,
                    }
                    .into());
                }
            }
        };
        let (epoch, pending) = pending;
        let committed = pending.committed(WRITE_TIMEOUT).await;
        let mut p = self.lock(id);
        let same_leadership = p.role.epoch() == Some(epoch);
        match committed {
            Ok(()) => {
                if same_leadership {
                    p.shard.complete(id, next.clone());
                }
                Ok((next.producer_id, next.producer_epoch))
            }
            Err(e) => {
                if same_leadership {
                    p.shard.abandon(id);
                }
                Err(e.into())
            }
        }
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
