//! Committed offsets, stored the way Kafka stores them: in the internal, compacted topic
//! `__consumer_offsets`.
//!
//! # Why a log
//!
//! Offsets must survive a crash, and Kafka keeps them as records of its own topic, so that an
//! operator who knows Kafka can read our data directory and a migration tool can move groups
//! between the two (ARCHITECTURE.md decision 2). Each group belongs to one of
//! `offsets.topic.num.partitions` partitions, `abs(javaHashCode(group)) % n`
//! ([`records::partition_for`], Kafka's `GroupCoordinatorShard` placement), and everything
//! about a group (its offsets and its group metadata) is written to that partition only. The
//! records are Kafka's `OffsetCommitKey`/`OffsetCommitValue` and `GroupMetadataKey`, see
//! [`records`].
//!
//! # Layout
//!
//! - [`records`]: the key and value encodings, the partition hash.
//! - [`state`]: the sans-IO live state of one partition, and the expiry rules.
//! - this module: [`OffsetStore`], the coordinator runtime of the partitions: which of them
//!   this node coordinates, their loading, and their writes.
//!
//! # A coordinator runtime (Kafka's `CoordinatorRuntime`)
//!
//! `__consumer_offsets` is a topic like any other to the broker: created by the controller
//! with `offsets.topic.num.partitions` partitions of `offsets.topic.replication.factor`
//! replicas, compacted, replicated by the followers' fetchers, its ISR kept by the leader.
//! The store owns no log. For each partition it keeps a role:
//!
//! - not the leader here: every request for its groups gets NOT_COORDINATOR;
//! - leader, loading: when the broker applies an image that makes this node the partition's
//!   leader, [`OffsetStore::begin_load`] records the epoch, and [`OffsetStore::load`]
//!   replays the replica's log (latest value per key wins, a null value deletes the key) on
//!   a blocking thread. Meanwhile requests get COORDINATOR_LOAD_IN_PROGRESS;
//! - leader, active: the live state answers reads, and writes are appended through the
//!   partition as its leader ([`crate::partition::Partition::append_as_leader`], stamped
//!   with the leader epoch the load began in), then answered once the high watermark
//!   passes them ([`PendingWrite::committed`]: acks=all, Kafka's
//!   `CoordinatorRuntime.CoordinatorWriteEvent` completing at the high watermark).
//!
//! When the node stops leading a partition (a newer image names another leader, or the
//! replica moves away), [`OffsetStore::resign`] drops its state; the new leader rebuilds it
//! from its own replica, which holds every committed record.
//!
//! # Durability
//!
//! One OffsetCommit request becomes one record batch (Kafka appends a request's records
//! atomically too), and the response is sent once the batch is committed: in the log of
//! every replica of the ISR, at least `min.insync.replicas` of them. An acknowledged commit
//! survives a `kill -9` of its coordinator, and the loss of its disk. As for user topics,
//! fsync is a policy: segments are fsynced when they roll and on clean shutdown.
//!
//! The state is applied when the batch is appended, before it is committed, as Kafka's
//! runtime applies it to its timeline at the append. Kafka reads its timeline at the last
//! committed offset; here an answer read from the live state waits instead until everything
//! its partition had appended when it was read is committed ([`OffsetStore::written_through`]),
//! so an answer never shows what a leader change could lose, and fails with the write if
//! that is lost.
//!
//! # Compaction
//!
//! As in Kafka, the log cleaner compacts `__consumer_offsets` like any compacted topic
//! (`broker::log_cleaner`): each replica cleans its own log below its last stable offset,
//! keeping each key's latest record, tombstones for `delete.retention.ms`, and what Kafka's
//! rules keep of transactions. Replay reads a cleaned log as any other: offsets with gaps,
//! and batches that lost records. Its segments are `offsets.topic.segment.bytes` (100 MiB,
//! Kafka's default), and the active segment is never cleaned, so the log holds at most about
//! one segment more than its live records, plus what waits for `min.cleanable.dirty.ratio`.
//!
//! # Expiry
//!
//! Every `offsets.retention.check.interval.ms`, offsets older than `offsets.retention.minutes`
//! (measured from their commit, or an explicit expire timestamp from OffsetCommit v2-v4) are
//! deleted with tombstones when their group no longer needs them: the group is empty or
//! unknown, or it is a stable consumer group that no longer subscribes to the topic (Kafka's
//! `OffsetMetadataManager.cleanupExpiredOffsets` with the classic group's expiration condition).

pub mod records;
pub mod state;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
#[cfg(test)]
use strata_storage::LogConfig;

pub use records::{CommittedOffset, CoordinatorRecord, OffsetKey};
pub use state::PartitionState;

pub use super::runtime::PendingWrite;
use super::runtime::{self, CoordinatorError, MAX_BATCH_BYTES, Partitions, Role, Slot};
use crate::partition::{FlushWait, LeaderAppendError, Partition};

/// The internal topic's name.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// How long a write waits to be committed: Kafka's default `offsets.commit.timeout.ms`.
pub const COMMIT_TIMEOUT: Duration = Duration::from_millis(5_000);

/// The broker settings the store needs, with Kafka's names.
#[derive(Debug, Clone, Copy)]
pub struct OffsetsConfig {
    /// `offsets.topic.num.partitions`. Like Kafka, changing it later moves groups to other
    /// partitions, whose old offsets are then not found.
    pub num_partitions: i32,
    /// `offsets.retention.minutes`, in milliseconds.
    pub retention_ms: i64,
    /// `offsets.retention.check.interval.ms`.
    pub retention_check_interval_ms: i64,
    /// `offset.metadata.max.bytes`: longer commit metadata is refused.
    pub metadata_max_bytes: usize,
}

/// A failure of the offsets store.
pub type OffsetStoreError = CoordinatorError;

/// A transaction marker appended while its partition loads: (producer id, commit, offset).
type DeferredMarker = (i64, bool, i64);

/// The live state of one `__consumer_offsets` partition led here.
#[derive(Default)]
struct OffsetsShard {
    state: PartitionState,
}

/// One `__consumer_offsets` partition: this node's role and, while active, the live state.
type OffsetsPartition = Slot<OffsetsShard>;

/// The committed offsets and group metadata of every group this node coordinates.
pub struct OffsetStore {
    config: OffsetsConfig,
    partitions: Partitions<OffsetsShard>,
    /// Broker time of the last expiry pass, so housekeeping can tick more often.
    last_expiry_ms: AtomicI64,
    /// Transaction markers appended to a partition while it loads, by partition.
    deferred: std::sync::Mutex<HashMap<i32, Vec<DeferredMarker>>>,
}

impl OffsetStore {
    /// A store that leads no partition yet.
    ///
    /// # Panics
    /// If `config.num_partitions` is not positive (the configuration refuses that).
    #[must_use]
    pub fn new(config: OffsetsConfig, now_ms: i64) -> Self {
        assert!(
            config.num_partitions > 0,
            "offsets.topic.num.partitions must be positive"
        );
        OffsetStore {
            config,
            partitions: Partitions::new(OFFSETS_TOPIC, config.num_partitions),
            last_expiry_ms: AtomicI64::new(now_ms),
            deferred: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The store's settings.
    #[must_use]
    pub fn config(&self) -> &OffsetsConfig {
        &self.config
    }

    /// The `__consumer_offsets` partition that holds `group`.
    #[must_use]
    pub fn partition_for(&self, group: &str) -> i32 {
        records::partition_for(group, self.config.num_partitions)
    }

    fn lock(&self, group: &str) -> MutexGuard<'_, OffsetsPartition> {
        self.partitions.lock(self.partition_for(group))
    }

    /// This node leads `partition` (its replica of `__consumer_offsets`-`index`) in
    /// `epoch`: its state is to be loaded. `true` when a load must run
    /// ([`OffsetStore::load`]); `false` when this leadership is already loading or loaded.
    pub fn begin_load(&self, index: i32, partition: Arc<Partition>, epoch: i32) -> bool {
        self.partitions.begin_load(index, partition, epoch)
    }

    /// Replays partition `index`'s log for the leadership of `epoch` that
    /// [`OffsetStore::begin_load`] began, and makes it active, unless the node stopped
    /// leading it in that epoch meanwhile. `loaded` sees the state just before the
    /// partition becomes active (the group coordinators take their groups from it); it runs
    /// under the partition's lock, so no request of these groups comes before it.
    ///
    /// Returns whether the partition became active.
    ///
    /// # Errors
    /// [`OffsetStoreError`] when the log cannot be read; the partition stays loading
    /// (its groups get COORDINATOR_LOAD_IN_PROGRESS) until the next leadership change.
    pub fn load(
        &self,
        index: i32,
        epoch: i32,
        loaded: impl FnOnce(&PartitionState),
    ) -> Result<bool, OffsetStoreError> {
        let Some(partition) = self.partitions.loading_in(index, epoch) else {
            return Ok(false);
        };
        let mut shard = OffsetsShard::default();
        let started = std::time::Instant::now();
        let replayed_to = replay(&partition, &mut shard.state)?;
        Ok(self.partitions.activate(index, epoch, shard, |shard| {
            // The markers appended while the log was read, past what the replay saw.
            for (producer_id, commit, offset) in self.take_deferred(index) {
                if offset >= replayed_to {
                    shard.state.complete_transaction(producer_id, commit);
                }
            }
            loaded(&shard.state);
            tracing::info!(
                partition = index,
                epoch,
                live_bytes = shard.state.live_bytes(),
                log_bytes = partition.log().size_bytes(),
                elapsed_ms = started.elapsed().as_millis(),
                "loaded {OFFSETS_TOPIC} partition"
            );
        }))
    }

    /// Waits (at most `max`) until no partition led here is loading. `false` on time out.
    pub async fn wait_loaded(&self, max: Duration) -> bool {
        self.partitions.wait_loaded(max).await
    }

    /// This node no longer leads partition `index`: its state goes. `unloaded` sees it
    /// first (the group coordinators drop its groups). Returns whether it was led here.
    pub fn resign(&self, index: i32, unloaded: impl FnOnce(&PartitionState)) -> bool {
        self.partitions.resign(index, |shard| {
            self.take_deferred(index);
            unloaded(&shard.state);
        })
    }

    /// Whether this node serves `group` now.
    ///
    /// # Errors
    /// [`OffsetStoreError::NotCoordinator`] or [`OffsetStoreError::LoadInProgress`].
    pub fn check(&self, group: &str) -> Result<(), OffsetStoreError> {
        self.lock(group).serving(OFFSETS_TOPIC).map(|_| ())
    }

    /// A wait for everything appended so far to the partition of `group`, this node's
    /// previous leaders' records included. An answer built from the live state (a group's
    /// generation, its members' assignments, its offsets) waits on it, as Kafka's runtime
    /// defers an operation to its partition's last written offset: no client then learns
    /// of a state a leader change could still lose.
    ///
    /// # Errors
    /// [`OffsetStoreError::NotCoordinator`] or [`OffsetStoreError::LoadInProgress`].
    pub fn written_through(&self, group: &str) -> Result<PendingWrite, OffsetStoreError> {
        let p = self.lock(group);
        let (epoch, partition) = p.serving(OFFSETS_TOPIC)?;
        let end = partition.log().log_end_offset();
        Ok(PendingWrite::until(
            OFFSETS_TOPIC,
            partition.clone(),
            epoch,
            end,
            Vec::new(),
        ))
    }

    /// Whether partition `index` is led here and loading.
    #[must_use]
    pub fn is_loading(&self, index: i32) -> bool {
        self.partitions.is_loading(index)
    }

    /// Commits offsets of `group` as one batch; `offsets` are (topic, partition, value).
    ///
    /// # Errors
    /// [`OffsetStoreError`] when this node does not serve the group, or the append fails;
    /// nothing is committed then.
    pub fn commit(
        &self,
        group: &str,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now_ms: i64,
    ) -> Result<PendingWrite, OffsetStoreError> {
        let records = offset_records(group, offsets);
        self.lock(group).write(records, now_ms)
    }

    /// TxnOffsetCommit: appends offsets of `group` inside the transaction of `producer`
    /// (id, epoch), as one transactional batch; they count once the producer's COMMIT marker
    /// is written ([`OffsetStore::complete_transaction`]), and go on ABORT.
    ///
    /// # Errors
    /// As [`OffsetStore::commit`]; the log refuses an older producer epoch
    /// (INVALID_PRODUCER_EPOCH).
    pub fn txn_commit(
        &self,
        group: &str,
        producer: (i64, i16),
        offsets: Vec<(String, i32, CommittedOffset)>,
        now_ms: i64,
    ) -> Result<PendingWrite, OffsetStoreError> {
        let mut p = self.lock(group);
        let index = p.index;
        let (epoch, partition) = p.serving(OFFSETS_TOPIC)?;
        let partition = partition.clone();
        let records = offset_records(group, offsets);
        if records.is_empty() {
            return Ok(PendingWrite::nothing(OFFSETS_TOPIC, index));
        }
        let (end, flushes) = runtime::append_transactional_records(
            &partition,
            epoch,
            producer,
            records.iter().map(CoordinatorRecord::encode),
            now_ms,
        )
        .map_err(|source| OffsetStoreError::Append {
            topic: OFFSETS_TOPIC,
            partition: index,
            source,
        })?;
        for r in records {
            p.shard.state.apply_transactional(producer.0, r);
        }
        Ok(PendingWrite::until(
            OFFSETS_TOPIC,
            partition,
            epoch,
            end,
            flushes,
        ))
    }

    /// The marker of `producer_id`'s transaction was appended to partition `index` at
    /// `offset`: its offsets there count (COMMIT) or go (ABORT). While the partition loads,
    /// the marker waits for the load's end, and applies if the load's replay did not reach
    /// it; a partition not led here replays it at its next load.
    pub fn complete_transaction(&self, index: i32, producer_id: i64, commit: bool, offset: i64) {
        if index < 0 || index >= self.config.num_partitions {
            return;
        }
        let mut p = self.partitions.lock(index);
        match p.role {
            Role::Active { .. } => p.shard.state.complete_transaction(producer_id, commit),
            Role::Loading { .. } => self.defer_marker(index, (producer_id, commit, offset)),
            Role::NotLeader => {}
        }
    }

    /// The markers deferred for partition `index` (taken; see [`Self::defer_marker`]).
    fn take_deferred(&self, index: i32) -> Vec<DeferredMarker> {
        self.deferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&index)
            .unwrap_or_default()
    }

    /// Keeps a marker (producer id, commit, offset) appended to partition `index` while it
    /// loads. Called, and taken, under the partition's lock, so none is missed between the
    /// load and its activation.
    fn defer_marker(&self, index: i32, marker: DeferredMarker) {
        self.deferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(index)
            .or_default()
            .push(marker);
    }

    /// Whether a transaction holds an offset of `group`'s `topic`-`partition` that is not
    /// decided yet.
    #[must_use]
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.lock(group)
            .shard
            .state
            .has_pending_offset(group, topic, partition)
    }

    /// The committed offset of one partition.
    #[must_use]
    pub fn fetch(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        self.lock(group)
            .shard
            .state
            .offset(group, topic, partition)
            .cloned()
    }

    /// Every committed offset of `group` as (topic, partition, value), sorted.
    #[must_use]
    pub fn fetch_all(&self, group: &str) -> Vec<(String, i32, CommittedOffset)> {
        self.lock(group)
            .shard
            .state
            .group_offsets(group)
            .map(|o| {
                o.iter()
                    .map(|((t, p), v)| (t.clone(), *p, v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether `group` has any committed offset or group metadata. A group that only ever
    /// committed offsets (a "simple" group) exists in Kafka by virtue of them.
    #[must_use]
    pub fn has_group(&self, group: &str) -> bool {
        let p = self.lock(group);
        p.shard.state.group_offsets(group).is_some() || p.shard.state.has_group_metadata(group)
    }

    /// Whether `group` has any committed offset (Kafka deletes an Empty group once it has
    /// none left).
    #[must_use]
    pub fn has_offsets(&self, group: &str) -> bool {
        self.lock(group).shard.state.group_offsets(group).is_some()
    }

    /// Every group with committed offsets or stored group metadata in the partitions this
    /// node serves, sorted (ListGroups lists the groups that exist only through their
    /// offsets).
    #[must_use]
    pub fn group_ids(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.partitions.each() {
            out.extend(p.shard.state.group_ids().cloned());
        }
        out.sort();
        out
    }

    /// Deletes the committed offsets of the given (topic, partition)s of `group` with
    /// tombstones; partitions without an offset are skipped. Returns how many were deleted.
    ///
    /// # Errors
    /// As [`OffsetStore::commit`]; nothing is deleted then.
    pub fn delete_offsets(
        &self,
        group: &str,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> Result<(usize, PendingWrite), OffsetStoreError> {
        let mut p = self.lock(group);
        let tombstones: Vec<CoordinatorRecord> = partitions
            .iter()
            .filter(|(t, i)| p.shard.state.offset(group, t, *i).is_some())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|(topic, partition)| CoordinatorRecord::OffsetCommit {
                key: OffsetKey {
                    group: group.to_owned(),
                    topic: topic.clone(),
                    partition: *partition,
                },
                value: None,
            })
            .collect();
        let n = tombstones.len();
        let pending = p.write(tombstones, now_ms)?;
        Ok((n, pending))
    }

    /// Deletes a group's offsets and its group metadata (DeleteGroups): tombstones for each,
    /// in one batch. Returns how many offsets were deleted.
    ///
    /// # Errors
    /// As [`OffsetStore::commit`]; nothing is deleted then.
    pub fn delete_group(
        &self,
        group: &str,
        now_ms: i64,
    ) -> Result<(usize, PendingWrite), OffsetStoreError> {
        let mut p = self.lock(group);
        let mut tombstones: Vec<CoordinatorRecord> = p
            .shard
            .state
            .group_offsets(group)
            .map(|o| {
                o.keys()
                    .map(|(topic, partition)| CoordinatorRecord::OffsetCommit {
                        key: OffsetKey {
                            group: group.to_owned(),
                            topic: topic.clone(),
                            partition: *partition,
                        },
                        value: None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let n = tombstones.len();
        if p.shard.state.has_group_metadata(group) {
            tombstones.push(CoordinatorRecord::GroupMetadata {
                group: group.to_owned(),
                value: None,
            });
        }
        for key in p.shard.state.consumer_group_keys(group) {
            tombstones.push(CoordinatorRecord::ConsumerGroup {
                key,
                group: group.to_owned(),
                value: None,
            });
        }
        let pending = p.write(tombstones, now_ms)?;
        Ok((n, pending))
    }

    /// Deletes, with tombstones, every group's committed offsets for `topic` in the
    /// partitions this node serves (the topic was deleted: Kafka's
    /// `OffsetMetadataManager.onPartitionsDeleted`). Returns how many.
    ///
    /// # Errors
    /// The first partition whose append fails; the others are still processed.
    pub fn delete_topic_offsets(
        &self,
        topic: &str,
        now_ms: i64,
    ) -> Result<usize, OffsetStoreError> {
        self.tombstone_each_partition(
            now_ms,
            "deleted committed offsets of a deleted topic",
            |state| {
                state
                    .offsets_of_topic(topic)
                    .into_iter()
                    .map(|key| CoordinatorRecord::OffsetCommit { key, value: None })
                    .collect()
            },
        )
    }

    /// Appends, in each partition this node serves, the tombstones `pick` chooses from its
    /// state; returns how many were written. `what` names the pass in the log. Nothing
    /// waits for these writes to be committed: a leader change that loses them leaves the
    /// records for the next pass of the new leader.
    ///
    /// # Errors
    /// The first partition whose append fails; the others are still processed.
    fn tombstone_each_partition(
        &self,
        now_ms: i64,
        what: &str,
        mut pick: impl FnMut(&PartitionState) -> Vec<CoordinatorRecord>,
    ) -> Result<usize, OffsetStoreError> {
        let mut total = 0;
        let mut first_error = None;
        for index in 0..self.config.num_partitions {
            let mut p = self.partitions.lock(index);
            if !matches!(p.role, Role::Active { .. }) {
                continue;
            }
            let tombstones = pick(&p.shard.state);
            if tombstones.is_empty() {
                continue;
            }
            let n = tombstones.len();
            match p.write(tombstones, now_ms) {
                Ok(_) => {
                    tracing::info!(partition = index, offsets = n, "{what}");
                    total += n;
                }
                Err(e) => {
                    tracing::warn!(partition = index, error = %e, "{what}: append failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(total), Err)
    }

    /// Appends records of the KIP-848 consumer group `group` as one batch: (encoded key,
    /// encoded value or `None` for a tombstone). The keys must be of record types 3 to 8 and
    /// start with `group`; the bytes are otherwise opaque here (see
    /// `crate::coordinator::group::consumer::persist`).
    ///
    /// # Errors
    /// As [`OffsetStore::commit`]; nothing is stored then.
    pub fn append_consumer_group_records(
        &self,
        group: &str,
        records: Vec<(Bytes, Option<Bytes>)>,
        now_ms: i64,
    ) -> Result<PendingWrite, OffsetStoreError> {
        let records = records
            .into_iter()
            .map(|(key, value)| CoordinatorRecord::ConsumerGroup {
                key,
                group: group.to_owned(),
                value,
            })
            .collect();
        self.lock(group).write(records, now_ms)
    }

    /// Stores the group coordinator's encoded GroupMetadataValue for `group` (`None` writes a
    /// tombstone). The bytes are opaque here and come back, through the load of the
    /// partition, on whichever node leads it next.
    ///
    /// # Errors
    /// As [`OffsetStore::commit`].
    pub fn store_group_metadata(
        &self,
        group: &str,
        value: Option<Bytes>,
        now_ms: i64,
    ) -> Result<PendingWrite, OffsetStoreError> {
        let record = CoordinatorRecord::GroupMetadata {
            group: group.to_owned(),
            value,
        };
        self.lock(group).write(vec![record], now_ms)
    }

    /// Runs [`OffsetStore::expire`] if `offsets.retention.check.interval.ms` has passed since
    /// the last pass. The broker's housekeeping calls this on each tick. `None` when no
    /// expiry pass was due.
    ///
    /// # Errors
    /// As [`OffsetStore::expire`].
    pub fn maybe_expire(
        &self,
        now_ms: i64,
        expirable: impl FnMut(&str, &str) -> bool,
    ) -> Result<Option<usize>, OffsetStoreError> {
        let last = self.last_expiry_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) < self.config.retention_check_interval_ms {
            return Ok(None);
        }
        self.last_expiry_ms.store(now_ms, Ordering::Relaxed);
        self.expire(now_ms, expirable).map(Some)
    }

    /// Deletes, with tombstones, the expired offsets of groups that no longer need them
    /// (see the module docs); `expirable(group, topic)` answers the latter. Returns how many
    /// offsets were deleted.
    ///
    /// # Errors
    /// The first partition whose append fails; the others are still processed.
    pub fn expire(
        &self,
        now_ms: i64,
        mut expirable: impl FnMut(&str, &str) -> bool,
    ) -> Result<usize, OffsetStoreError> {
        let retention_ms = self.config.retention_ms;
        self.tombstone_each_partition(now_ms, "expired committed offsets", |state| {
            state.expired(now_ms, retention_ms, &mut expirable)
        })
    }

    /// Bytes in the `.log` files of every partition this node leads.
    #[cfg(test)]
    #[must_use]
    pub fn log_bytes(&self) -> u64 {
        self.partitions
            .each()
            .map(|p| match &p.role {
                Role::Active { partition, .. } | Role::Loading { partition, .. } => {
                    partition.log().size_bytes()
                }
                Role::NotLeader => 0,
            })
            .sum()
    }
}

impl OffsetsPartition {
    /// Appends `records` through the partition's leader (nothing for an empty list), then
    /// applies them to the live state. The state changes only after the append succeeded,
    /// so memory never runs ahead of the leader's log.
    fn write(
        &mut self,
        records: Vec<CoordinatorRecord>,
        now_ms: i64,
    ) -> Result<PendingWrite, OffsetStoreError> {
        let index = self.index;
        let (epoch, partition) = self.serving(OFFSETS_TOPIC)?;
        let partition = partition.clone();
        if records.is_empty() {
            return Ok(PendingWrite::nothing(OFFSETS_TOPIC, index));
        }
        let append_err = |source| OffsetStoreError::Append {
            topic: OFFSETS_TOPIC,
            partition: index,
            source,
        };
        let (end, flushes) =
            append_records(&partition, epoch, &records, now_ms).map_err(append_err)?;
        for r in records {
            self.shard.state.apply(r);
        }
        Ok(PendingWrite::until(
            OFFSETS_TOPIC,
            partition,
            epoch,
            end,
            flushes,
        ))
    }
}

/// The OffsetCommit records of `group`'s `offsets` (topic, partition, value).
fn offset_records(
    group: &str,
    offsets: Vec<(String, i32, CommittedOffset)>,
) -> Vec<CoordinatorRecord> {
    offsets
        .into_iter()
        .map(|(topic, partition, v)| CoordinatorRecord::OffsetCommit {
            key: OffsetKey {
                group: group.to_owned(),
                topic,
                partition,
            },
            value: Some(v),
        })
        .collect()
}

/// Reads the partition's whole log and applies every record to `state`, transactional
/// offsets on their producer's marker. Returns the offset it read up to.
fn replay(partition: &Partition, state: &mut PartitionState) -> Result<i64, OffsetStoreError> {
    let index = partition.index;
    runtime::replay_with_markers(partition, OFFSETS_TOPIC, |replayed| {
        let (offset, key, value, transactional) = match replayed {
            runtime::Replayed::Marker {
                producer_id,
                commit,
            } => {
                state.complete_transaction(producer_id, commit);
                return;
            }
            runtime::Replayed::Record {
                offset,
                key,
                value,
                transactional,
            } => (offset, key, value, transactional),
        };
        match CoordinatorRecord::decode(key, value) {
            Ok(Some(r)) => match transactional {
                Some(producer_id) => state.apply_transactional(producer_id, r),
                None => state.apply(r),
            },
            Ok(None) => {}
            // Kafka's loader fails the partition on a record it cannot read; one bad
            // record should not cost every other group its offsets, so skip it loudly.
            Err(e) => tracing::error!(partition = index, offset, error = %e,
                "skipping undecodable {OFFSETS_TOPIC} record"),
        }
    })
}

/// Appends `records` as the leader of `partition` in `epoch`.
fn append_records(
    partition: &Arc<Partition>,
    epoch: i32,
    records: &[CoordinatorRecord],
    now_ms: i64,
) -> Result<(i64, Vec<FlushWait>), LeaderAppendError> {
    runtime::append_records(
        partition,
        epoch,
        records.iter().map(CoordinatorRecord::encode),
        now_ms,
    )
}

/// Kafka's topic configs for `__consumer_offsets` (`GroupCoordinator.groupMetadataTopicConfigs`):
/// compacted, `offsets.topic.segment.bytes` segments, and room for the store's batches.
#[must_use]
pub fn topic_configs(segment_bytes: i32) -> Vec<(String, String)> {
    vec![
        ("cleanup.policy".to_owned(), "compact".to_owned()),
        ("compression.type".to_owned(), "producer".to_owned()),
        ("segment.bytes".to_owned(), segment_bytes.to_string()),
        (
            "max.message.bytes".to_owned(),
            (MAX_BATCH_BYTES * 4).to_string(),
        ),
    ]
}

/// The log settings [`topic_configs`] comes to, for tests, with small segments (so that
/// logs roll and the cleaner has segments to clean).
#[cfg(test)]
fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 10,
        retention_ms: -1,
        retention_bytes: -1,
        max_message_bytes: u32::try_from(MAX_BATCH_BYTES * 4).unwrap_or(u32::MAX),
        ..LogConfig::default()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod simulation;
