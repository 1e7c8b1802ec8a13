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
//! - [`state`]: the sans-IO live state of one partition, and the compaction and expiry rules.
//! - this module: [`OffsetStore`], the driver that owns the partition logs.
//!
//! Partition `n` lives in `<log.dirs>/__consumer_offsets-<n>/`, a [`strata_storage::Log`]. A
//! partition's log is created on its first write, so a fresh broker does not create 50 empty
//! directories; at start the directories that exist are opened and replayed (latest value per
//! key wins, a null value deletes the key). The topic is not in the metadata image: it is the
//! coordinator's storage, not a user topic, and the broker's orphan-directory sweep skips it.
//!
//! # Durability
//!
//! One OffsetCommit request becomes one record batch (Kafka appends a request's records
//! atomically too), and the response is sent after the append, so an acknowledged commit is
//! in the page cache and survives a `kill -9` of the broker. As for user topics, fsync is a
//! policy: segments are fsynced when they roll and on clean shutdown.
//!
//! # Compaction policy
//!
//! Kafka's log cleaner compacts `__consumer_offsets` in the background. Here each partition
//! compacts itself after an append, when its log is larger than twice its live state plus
//! 1 MiB ([`state::PartitionState::needs_compaction`]): it rolls the active segment, appends
//! the live records as new batches, then deletes every older segment. A crash in between
//! leaves old and new copies of the same keys, which replay resolves (the rewrite comes last),
//! so no step can lose a committed offset. The rewrite costs the live size and follows at least
//! as much new data, so compaction adds a constant factor to each write, and the log stays
//! within `2 x live + 1 MiB` plus one batch.
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

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use strata_protocol::record_batch::{self, BatchError, SimpleRecord};
use strata_storage::{Log, LogConfig, LogError};
use thiserror::Error;

pub use records::{CommittedOffset, CoordinatorRecord, OffsetKey};
use state::PartitionState;

/// The internal topic's name.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Records of one request go into batches of at most this many bytes, so a batch always fits
/// the log's `max.message.bytes` below, and a compaction rewrite is a series of batches.
const MAX_BATCH_BYTES: usize = 512 * 1024;

/// How many bytes replay reads at a time (at least one whole batch).
const REPLAY_READ_BYTES: u32 = 1 << 20;

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
#[derive(Debug, Error)]
pub enum OffsetStoreError {
    /// A partition log could not be opened, read or appended to.
    #[error("{OFFSETS_TOPIC}-{partition}: {source}")]
    Log { partition: i32, source: LogError },
    /// A batch read back during replay does not parse (damage after it was written).
    #[error("{OFFSETS_TOPIC}-{partition}: corrupt batch on replay: {source}")]
    CorruptBatch { partition: i32, source: BatchError },
    /// Reading a replayed region failed.
    #[error("{OFFSETS_TOPIC}-{partition}: read failed: {source}")]
    Read {
        partition: i32,
        source: std::io::Error,
    },
}

/// One `__consumer_offsets` partition: its log, created on first write, and its live state.
struct OffsetsPartition {
    index: i32,
    log: Option<Log>,
    state: PartitionState,
}

/// The committed offsets and group metadata of every group this node coordinates.
pub struct OffsetStore {
    /// `log.dirs`; partition `n` is `<log_dir>/__consumer_offsets-<n>/`.
    log_dir: PathBuf,
    config: OffsetsConfig,
    /// One lock per partition: a group's requests serialise on its partition only.
    partitions: Vec<Mutex<OffsetsPartition>>,
    /// Broker time of the last expiry pass, so housekeeping can tick more often.
    last_expiry_ms: AtomicI64,
}

impl OffsetStore {
    /// Opens and replays the partition directories that exist under `log_dir`.
    ///
    /// # Errors
    /// [`OffsetStoreError`] when an existing partition log cannot be opened or read.
    ///
    /// # Panics
    /// If `config.num_partitions` is not positive (the configuration refuses that).
    pub fn open(
        log_dir: &Path,
        config: OffsetsConfig,
        now_ms: i64,
    ) -> Result<Self, OffsetStoreError> {
        assert!(
            config.num_partitions > 0,
            "offsets.topic.num.partitions must be positive"
        );
        let mut partitions = Vec::new();
        for index in 0..config.num_partitions {
            let dir = partition_dir(log_dir, index);
            let mut p = OffsetsPartition {
                index,
                log: None,
                state: PartitionState::default(),
            };
            if dir.is_dir() {
                let log = Log::open(&dir, log_config(), now_ms).map_err(|source| {
                    OffsetStoreError::Log {
                        partition: index,
                        source,
                    }
                })?;
                replay(&log, index, &mut p.state)?;
                tracing::info!(
                    partition = index,
                    live_bytes = p.state.live_bytes(),
                    log_bytes = log.size_bytes(),
                    "loaded {OFFSETS_TOPIC} partition"
                );
                p.log = Some(log);
            }
            partitions.push(Mutex::new(p));
        }
        if let Ok(entries) = std::fs::read_dir(log_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(n) = name
                    .strip_prefix(OFFSETS_TOPIC)
                    .and_then(|s| s.strip_prefix('-'))
                    && n.parse::<i32>().is_ok_and(|n| n >= config.num_partitions)
                {
                    tracing::warn!(dir = %name, num_partitions = config.num_partitions,
                        "ignoring {OFFSETS_TOPIC} partition beyond offsets.topic.num.partitions");
                }
            }
        }
        Ok(OffsetStore {
            log_dir: log_dir.to_path_buf(),
            config,
            partitions,
            last_expiry_ms: AtomicI64::new(now_ms),
        })
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
        self.lock_index(self.partition_for(group))
    }

    fn lock_index(&self, index: i32) -> MutexGuard<'_, OffsetsPartition> {
        // partition_for returns 0..num_partitions, the length of the vector.
        self.partitions[index as usize]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Commits offsets of `group` as one batch; `offsets` are (topic, partition, value).
    ///
    /// # Errors
    /// [`OffsetStoreError::Log`] when the append fails; nothing is committed then.
    pub fn commit(
        &self,
        group: &str,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        let records = offsets
            .into_iter()
            .map(|(topic, partition, v)| CoordinatorRecord::OffsetCommit {
                key: OffsetKey {
                    group: group.to_owned(),
                    topic,
                    partition,
                },
                value: Some(v),
            })
            .collect::<Vec<_>>();
        self.lock(group).write(&self.log_dir, records, now_ms)
    }

    /// The committed offset of one partition.
    #[must_use]
    pub fn fetch(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        self.lock(group)
            .state
            .offset(group, topic, partition)
            .cloned()
    }

    /// Every committed offset of `group` as (topic, partition, value), sorted.
    #[must_use]
    pub fn fetch_all(&self, group: &str) -> Vec<(String, i32, CommittedOffset)> {
        self.lock(group)
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
        p.state.group_offsets(group).is_some() || p.state.has_group_metadata(group)
    }

    /// Whether `group` has any committed offset (Kafka deletes an Empty group once it has
    /// none left).
    #[must_use]
    pub fn has_offsets(&self, group: &str) -> bool {
        self.lock(group).state.group_offsets(group).is_some()
    }

    /// Every group with committed offsets or stored group metadata, sorted (ListGroups lists
    /// the groups that exist only through their offsets).
    #[must_use]
    pub fn group_ids(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.partitions {
            let p = p.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            out.extend(p.state.group_ids().cloned());
        }
        out.sort();
        out
    }

    /// Deletes the committed offsets of the given (topic, partition)s of `group` with
    /// tombstones; partitions without an offset are skipped. Returns how many were deleted.
    ///
    /// # Errors
    /// [`OffsetStoreError::Log`] when the append fails; nothing is deleted then.
    pub fn delete_offsets(
        &self,
        group: &str,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> Result<usize, OffsetStoreError> {
        let mut p = self.lock(group);
        let tombstones: Vec<CoordinatorRecord> = partitions
            .iter()
            .filter(|(t, i)| p.state.offset(group, t, *i).is_some())
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
        p.write(&self.log_dir, tombstones, now_ms)?;
        Ok(n)
    }

    /// Deletes a group's offsets and its group metadata (DeleteGroups): tombstones for each,
    /// in one batch. Returns how many offsets were deleted.
    ///
    /// # Errors
    /// [`OffsetStoreError::Log`] when the append fails; nothing is deleted then.
    pub fn delete_group(&self, group: &str, now_ms: i64) -> Result<usize, OffsetStoreError> {
        let mut p = self.lock(group);
        let mut tombstones: Vec<CoordinatorRecord> = p
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
        if p.state.has_group_metadata(group) {
            tombstones.push(CoordinatorRecord::GroupMetadata {
                group: group.to_owned(),
                value: None,
            });
        }
        for key in p.state.consumer_group_keys(group) {
            tombstones.push(CoordinatorRecord::ConsumerGroup {
                key,
                group: group.to_owned(),
                value: None,
            });
        }
        p.write(&self.log_dir, tombstones, now_ms)?;
        Ok(n)
    }

    /// Deletes, with tombstones, every group's committed offsets for `topic` (the topic was
    /// deleted: Kafka's `OffsetMetadataManager.onPartitionsDeleted`). Returns how many.
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

    /// Appends, in each partition, the tombstones `pick` chooses from its state; returns how
    /// many were written. `what` names the pass in the log.
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
            let mut p = self.lock_index(index);
            let tombstones = pick(&p.state);
            if tombstones.is_empty() {
                continue;
            }
            let n = tombstones.len();
            match p.write(&self.log_dir, tombstones, now_ms) {
                Ok(()) => {
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

    /// The same piece of every partition's state, as `f` copies it out, in partition order.
    fn collect<T>(&self, f: impl Fn(&PartitionState) -> Vec<T>) -> Vec<T> {
        self.partitions
            .iter()
            .flat_map(|p| {
                f(&p.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .state)
            })
            .collect()
    }

    /// Appends records of the KIP-848 consumer group `group` as one batch: (encoded key,
    /// encoded value or `None` for a tombstone). The keys must be of record types 3 to 8 and
    /// start with `group`; the bytes are otherwise opaque here (see
    /// `crate::coordinator::group::consumer::persist`).
    ///
    /// # Errors
    /// [`OffsetStoreError::Log`] when the append fails; nothing is stored then.
    pub fn append_consumer_group_records(
        &self,
        group: &str,
        records: Vec<(Bytes, Option<Bytes>)>,
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let records = records
            .into_iter()
            .map(|(key, value)| CoordinatorRecord::ConsumerGroup {
                key,
                group: group.to_owned(),
                value,
            })
            .collect();
        self.lock(group).write(&self.log_dir, records, now_ms)
    }

    /// Every stored KIP-848 consumer-group record, (encoded key, encoded value), as replayed at
    /// start and written since.
    #[must_use]
    pub fn consumer_group_records(&self) -> Vec<(Bytes, Bytes)> {
        self.collect(|state| {
            state
                .consumer_group_records()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
    }

    /// Stores the group coordinator's encoded GroupMetadataValue for `group` (`None` writes a
    /// tombstone). The bytes are opaque here and come back from [`OffsetStore::group_metadata`]
    /// after a restart.
    ///
    /// # Errors
    /// [`OffsetStoreError::Log`] when the append fails.
    pub fn store_group_metadata(
        &self,
        group: &str,
        value: Option<Bytes>,
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        let record = CoordinatorRecord::GroupMetadata {
            group: group.to_owned(),
            value,
        };
        self.lock(group).write(&self.log_dir, vec![record], now_ms)
    }

    /// Every group's stored GroupMetadataValue, as replayed at start and written since.
    #[must_use]
    pub fn group_metadata(&self) -> Vec<(String, Bytes)> {
        self.collect(|state| {
            state
                .group_metadata()
                .map(|(g, v)| (g.clone(), v.clone()))
                .collect()
        })
    }

    /// Runs [`OffsetStore::expire`] if `offsets.retention.check.interval.ms` has passed since
    /// the last pass. The broker's housekeeping calls this on each tick. `None` when no pass
    /// was due.
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

    /// fsyncs every open partition log (clean shutdown).
    pub fn flush(&self) {
        for p in &self.partitions {
            let mut p = p.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let index = p.index;
            if let Some(log) = p.log.as_mut()
                && let Err(e) = log.flush()
            {
                tracing::warn!(partition = index, error = %e, "flush of {OFFSETS_TOPIC} failed");
            }
        }
    }

    /// Bytes in the `.log` files of every open partition (for tests and metrics).
    #[must_use]
    pub fn log_bytes(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| {
                let p = p.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                p.log.as_ref().map_or(0, Log::size_bytes)
            })
            .sum()
    }
}

impl OffsetsPartition {
    /// Appends `records` (nothing for an empty list), then applies them to the live state,
    /// then compacts if the log has outgrown it. The state changes only after the append
    /// succeeded, so memory never runs ahead of disk.
    fn write(
        &mut self,
        log_dir: &Path,
        records: Vec<CoordinatorRecord>,
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let index = self.index;
        let err = |source| OffsetStoreError::Log {
            partition: index,
            source,
        };
        if self.log.is_none() {
            let dir = partition_dir(log_dir, index);
            self.log = Some(Log::open(&dir, log_config(), now_ms).map_err(err)?);
            tracing::info!(partition = index, "created {OFFSETS_TOPIC} partition");
        }
        let log = self.log.as_mut().expect("opened above");
        append_records(log, &records, now_ms).map_err(err)?;
        for r in records {
            self.state.apply(r);
        }
        if self.state.needs_compaction(log.size_bytes()) {
            let before = log.size_bytes();
            log.roll_if_not_empty().map_err(err)?;
            let mark = log.log_end_offset();
            append_records(log, &self.state.live_records(), now_ms).map_err(err)?;
            let deleted = log.delete_segments_before(mark).map_err(err)?;
            tracing::info!(
                partition = index,
                before,
                after = log.size_bytes(),
                segments = deleted,
                "compacted {OFFSETS_TOPIC} partition"
            );
        }
        Ok(())
    }
}

/// Encodes `records` into batches of at most [`MAX_BATCH_BYTES`] and appends them.
fn append_records(
    log: &mut Log,
    records: &[CoordinatorRecord],
    now_ms: i64,
) -> Result<(), LogError> {
    let mut batch: Vec<SimpleRecord> = Vec::new();
    let mut batch_bytes = 0;
    for r in records {
        let (key, value) = r.encode();
        let len = key.len() + value.as_ref().map_or(0, Bytes::len);
        if !batch.is_empty() && batch_bytes + len > MAX_BATCH_BYTES {
            append_batch(log, &batch, now_ms)?;
            batch.clear();
            batch_bytes = 0;
        }
        batch_bytes += len;
        batch.push(SimpleRecord {
            key: Some(key),
            value,
            timestamp: now_ms,
            headers: Vec::new(),
        });
    }
    if !batch.is_empty() {
        append_batch(log, &batch, now_ms)?;
    }
    Ok(())
}

fn append_batch(log: &mut Log, records: &[SimpleRecord], now_ms: i64) -> Result<(), LogError> {
    let mut buf = BytesMut::from(&record_batch::encode_batch(0, records)[..]);
    log.append(&mut buf, 0, now_ms).map(|_| ())
}

/// Reads the whole log and applies every record to `state`.
fn replay(log: &Log, partition: i32, state: &mut PartitionState) -> Result<(), OffsetStoreError> {
    let end = log.log_end_offset();
    let mut next = log.log_start_offset();
    let mut buf = Vec::new();
    while next < end {
        let read = log
            .read(next, REPLAY_READ_BYTES, end, true)
            .map_err(|source| OffsetStoreError::Log { partition, source })?;
        if read.bytes == 0 {
            break;
        }
        buf.clear();
        for region in &read.regions {
            region
                .read_into(&mut buf)
                .map_err(|source| OffsetStoreError::Read { partition, source })?;
        }
        for batch in record_batch::batches(&buf) {
            let batch =
                batch.map_err(|source| OffsetStoreError::CorruptBatch { partition, source })?;
            next = batch.last_offset() + 1;
            if batch.is_control() {
                continue;
            }
            let records = batch
                .records()
                .map_err(|source| OffsetStoreError::CorruptBatch { partition, source })?;
            for rec in records {
                let rec =
                    rec.map_err(|source| OffsetStoreError::CorruptBatch { partition, source })?;
                match CoordinatorRecord::decode(rec.key, rec.value) {
                    Ok(Some(r)) => state.apply(r),
                    Ok(None) => {}
                    // Kafka's loader fails the partition on a record it cannot read; one bad
                    // record should not cost every other group its offsets, so skip it loudly.
                    Err(e) => tracing::error!(partition, offset = rec.offset, error = %e,
                        "skipping undecodable {OFFSETS_TOPIC} record"),
                }
            }
        }
    }
    Ok(())
}

fn partition_dir(log_dir: &Path, index: i32) -> PathBuf {
    log_dir.join(format!("{OFFSETS_TOPIC}-{index}"))
}

/// Kafka's settings for `__consumer_offsets`: compacted (here by the store itself, so no time
/// or size retention may delete live records), 100 MiB segments (`offsets.topic.segment.bytes`).
fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 104_857_600,
        retention_ms: -1,
        retention_bytes: -1,
        max_message_bytes: u32::try_from(MAX_BATCH_BYTES * 4).unwrap_or(u32::MAX),
        ..LogConfig::default()
    }
}

#[cfg(test)]
mod tests;
