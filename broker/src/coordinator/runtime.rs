//! The coordinator runtime both stores share (Kafka's `CoordinatorRuntime`): an internal
//! compacted topic whose partitions this node coordinates while it leads them.
//!
//! - [`Partitions`]: the partitions of the topic, each a [`Slot`] with this node's [`Role`]
//!   for it (not leading, loading, active) and its live state while active.
//! - [`append_records`]: a write, as the partition's leader in the epoch its load began in.
//! - [`PendingWrite`]: what a write's answer waits for (acks=all: the high watermark past it).
//! - [`replay`]: the load, every record of the partition's log, oldest first.
//!
//! `__consumer_offsets` ([`super::offsets::OffsetStore`]) and `__transaction_state`
//! ([`super::txn::store::TxnStore`]) keep their own live state over it; the runtime knows
//! only keys and values.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strata_protocol::record_batch::{self, BatchError, SimpleRecord};
use strata_storage::LogError;
use thiserror::Error;

use crate::partition::{AckError, FlushWait, LeaderAppendError, Partition};

/// Records of one write go into batches of at most this many bytes, so a batch always fits
/// the topic's `max.message.bytes`, and a compaction rewrite is a series of batches.
pub const MAX_BATCH_BYTES: usize = 512 * 1024;

/// How many bytes replay reads at a time (at least one whole batch).
const REPLAY_READ_BYTES: u32 = 1 << 20;

/// A failure of a coordinator partition of `topic`.
#[derive(Debug, Error)]
pub enum CoordinatorError {
    /// This node does not lead the partition (NOT_COORDINATOR).
    #[error("{topic}-{partition} is not led by this node")]
    NotCoordinator { topic: &'static str, partition: i32 },
    /// This node leads the partition and is still loading it (COORDINATOR_LOAD_IN_PROGRESS).
    #[error("{topic}-{partition} is loading")]
    LoadInProgress { topic: &'static str, partition: i32 },
    /// The partition's leader refused or failed the append.
    #[error("{topic}-{partition}: {source}")]
    Append {
        topic: &'static str,
        partition: i32,
        source: LeaderAppendError,
    },
    /// The records were appended and not committed (leadership ended, the ISR is too
    /// small, or the wait timed out): the client retries.
    #[error("{topic}-{partition}: not committed: {cause:?}")]
    NotCommitted {
        topic: &'static str,
        partition: i32,
        cause: AckError,
    },
    /// The fsync an append waited for failed.
    #[error("{topic}-{partition}: {source}")]
    Flush {
        topic: &'static str,
        partition: i32,
        source: crate::partition::FlushError,
    },
    /// A partition log could not be read or trimmed.
    #[error("{topic}-{partition}: {source}")]
    Log {
        topic: &'static str,
        partition: i32,
        source: LogError,
    },
    /// A batch read back during replay does not parse (damage after it was written).
    #[error("{topic}-{partition}: corrupt batch on replay: {source}")]
    CorruptBatch {
        topic: &'static str,
        partition: i32,
        source: BatchError,
    },
    /// Reading a replayed region failed.
    #[error("{topic}-{partition}: read failed: {source}")]
    Read {
        topic: &'static str,
        partition: i32,
        source: std::io::Error,
    },
}

/// Where this node stands for one coordinator partition.
pub enum Role {
    /// It does not lead the partition.
    NotLeader,
    /// It leads the partition in `epoch` and is replaying its log.
    Loading {
        epoch: i32,
        partition: Arc<Partition>,
    },
    /// It leads the partition in `epoch` and serves its keys.
    Active {
        epoch: i32,
        partition: Arc<Partition>,
    },
}

impl Role {
    /// `Ok` with the leader epoch and the partition when active; else why not.
    ///
    /// # Errors
    /// [`CoordinatorError::LoadInProgress`] or [`CoordinatorError::NotCoordinator`].
    pub fn serving(
        &self,
        topic: &'static str,
        partition: i32,
    ) -> Result<(i32, &Arc<Partition>), CoordinatorError> {
        match self {
            Role::Active {
                epoch,
                partition: p,
            } => Ok((*epoch, p)),
            Role::Loading { .. } => Err(CoordinatorError::LoadInProgress { topic, partition }),
            Role::NotLeader => Err(CoordinatorError::NotCoordinator { topic, partition }),
        }
    }

    /// The leader epoch of a load or an activity, if any.
    #[must_use]
    pub fn epoch(&self) -> Option<i32> {
        match self {
            Role::Loading { epoch, .. } | Role::Active { epoch, .. } => Some(*epoch),
            Role::NotLeader => None,
        }
    }

    /// The partition being loaded in `epoch`, if that load is still this node's role.
    #[must_use]
    pub fn loading_in(&self, epoch: i32) -> Option<Arc<Partition>> {
        match self {
            Role::Loading {
                epoch: e,
                partition,
            } if *e == epoch => Some(partition.clone()),
            _ => None,
        }
    }
}

/// One partition of a coordinator topic: this node's role for it and, while active, its live
/// state `S` (the default while not).
pub struct Slot<S> {
    pub index: i32,
    pub role: Role,
    pub shard: S,
}

impl<S> Slot<S> {
    /// `Ok` with the leader epoch and the partition when active; else why not.
    ///
    /// # Errors
    /// As [`Role::serving`].
    pub fn serving(&self, topic: &'static str) -> Result<(i32, &Arc<Partition>), CoordinatorError> {
        self.role.serving(topic, self.index)
    }
}

/// The partitions of one coordinator topic, one lock each: the requests of a key serialise
/// on its partition only.
pub struct Partitions<S> {
    topic: &'static str,
    slots: Vec<Mutex<Slot<S>>>,
    /// Bumped whenever a load ends, for [`Partitions::wait_loaded`].
    loads: tokio::sync::watch::Sender<u64>,
}

impl<S: Default> Partitions<S> {
    /// `count` partitions of `topic`, none led here.
    #[must_use]
    pub fn new(topic: &'static str, count: i32) -> Self {
        Partitions {
            topic,
            slots: (0..count)
                .map(|index| {
                    Mutex::new(Slot {
                        index,
                        role: Role::NotLeader,
                        shard: S::default(),
                    })
                })
                .collect(),
            loads: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Partition `index`, locked; `None` past the configured count (a topic created with
    /// more partitions than this node is configured with: those are never coordinated here).
    pub fn try_lock(&self, index: i32) -> Option<MutexGuard<'_, Slot<S>>> {
        let p = self.slots.get(usize::try_from(index).ok()?)?;
        Some(p.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Partition `index`, locked, for an index a key hashed to (within the count).
    ///
    /// # Panics
    /// For an index out of range.
    pub fn lock(&self, index: i32) -> MutexGuard<'_, Slot<S>> {
        self.try_lock(index)
            .expect("a key's partition is within the count")
    }

    /// Every partition, locked one at a time.
    pub fn each(&self) -> impl Iterator<Item = MutexGuard<'_, Slot<S>>> {
        self.slots
            .iter()
            .map(|p| p.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// This node leads `partition` (its replica of partition `index`) in `epoch`: its
    /// state is to be loaded. `true` when a load must run; `false` when this leadership is
    /// already loading or loaded.
    pub fn begin_load(&self, index: i32, partition: Arc<Partition>, epoch: i32) -> bool {
        let Some(mut p) = self.try_lock(index) else {
            return false;
        };
        if p.role.epoch() == Some(epoch) {
            return false;
        }
        p.role = Role::Loading { epoch, partition };
        p.shard = S::default();
        true
    }

    /// The partition a load of `index` in `epoch` replays, if that load is still this
    /// node's role.
    #[must_use]
    pub fn loading_in(&self, index: i32, epoch: i32) -> Option<Arc<Partition>> {
        self.try_lock(index)?.role.loading_in(epoch)
    }

    /// Ends the load of `index` in `epoch` with the replayed `shard`, unless the node
    /// stopped leading the partition in that epoch meanwhile. `loaded` sees the shard
    /// first, under the partition's lock, so no request comes before it. Returns whether
    /// the partition became active.
    pub fn activate(
        &self,
        index: i32,
        epoch: i32,
        mut shard: S,
        loaded: impl FnOnce(&mut S),
    ) -> bool {
        let Some(mut p) = self.try_lock(index) else {
            return false;
        };
        let Some(partition) = p.role.loading_in(epoch) else {
            return false;
        };
        loaded(&mut shard);
        p.shard = shard;
        p.role = Role::Active { epoch, partition };
        drop(p);
        self.loads.send_modify(|n| *n += 1);
        true
    }

    /// Whether partition `index` is led here and loading.
    #[must_use]
    pub fn is_loading(&self, index: i32) -> bool {
        self.try_lock(index)
            .is_some_and(|p| matches!(p.role, Role::Loading { .. }))
    }

    /// Waits (at most `max`) until no partition led here is loading. `false` on time out.
    pub async fn wait_loaded(&self, max: Duration) -> bool {
        let mut loads = self.loads.subscribe();
        let count = i32::try_from(self.slots.len()).unwrap_or(i32::MAX);
        let all_loaded = |_: &u64| (0..count).all(|i| !self.is_loading(i));
        tokio::time::timeout(max, loads.wait_for(all_loaded))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// This node no longer leads partition `index`: its state goes. `unloaded` sees it
    /// first. Returns whether it was led here.
    pub fn resign(&self, index: i32, unloaded: impl FnOnce(&S)) -> bool {
        let Some(mut p) = self.try_lock(index) else {
            return false;
        };
        if matches!(p.role, Role::NotLeader) {
            return false;
        }
        unloaded(&p.shard);
        p.role = Role::NotLeader;
        p.shard = S::default();
        tracing::info!(partition = index, "unloaded {} partition", self.topic);
        true
    }
}

/// What a write waits for before it is answered.
#[must_use = "a write is answered only once it is committed"]
pub struct PendingWrite {
    topic: &'static str,
    partition_index: i32,
    /// Nothing to wait for when `None` (nothing was written).
    wait: Option<Committing>,
}

struct Committing {
    partition: Arc<Partition>,
    epoch: i32,
    end: i64,
    flushes: Vec<FlushWait>,
}

impl PendingWrite {
    /// A write of nothing: committed at once.
    pub fn nothing(topic: &'static str, partition_index: i32) -> Self {
        PendingWrite {
            topic,
            partition_index,
            wait: None,
        }
    }

    /// A wait for the offsets below `end` of `partition`, appended as its leader in
    /// `epoch`, and for `flushes`.
    pub fn until(
        topic: &'static str,
        partition: Arc<Partition>,
        epoch: i32,
        end: i64,
        flushes: Vec<FlushWait>,
    ) -> Self {
        PendingWrite {
            topic,
            partition_index: partition.index,
            wait: Some(Committing {
                partition,
                epoch,
                end,
                flushes,
            }),
        }
    }

    /// Whether this write wrote nothing (nothing to wait for).
    #[cfg(test)]
    pub(crate) fn is_nothing(&self) -> bool {
        self.wait.is_none()
    }

    /// What the write waits for, and where its partition stands (for a test's failure).
    #[cfg(test)]
    pub(crate) fn debug_state(&self) -> String {
        match &self.wait {
            None => "nothing".into(),
            Some(c) => format!(
                "epoch {} end {}; the partition: high watermark {}, leading in {:?}, log end {}, {}",
                c.epoch,
                c.end,
                c.partition.high_watermark(),
                c.partition.replicated_leader_epoch(),
                c.partition.log().log_end_offset(),
                c.partition.debug_marks()
            ),
        }
    }

    /// The write's commit, if it is decided now (one poll, so no timer fires): `Ok` once
    /// the high watermark passed it, `Err` once it cannot; `None` while undecided. The
    /// fsyncs are not waited for. For the simulation, inside a runtime.
    #[cfg(test)]
    pub(crate) fn decided_now(&self) -> Option<Result<(), ()>> {
        use futures_util::FutureExt;
        let c = self.wait.as_ref()?;
        let far = tokio::time::Instant::now() + Duration::from_secs(3600);
        c.partition
            .wait_committed(c.epoch, c.end, far)
            .now_or_never()
            .map(|r| r.map_err(|_| ()))
    }

    /// Waits until the write is committed (every fsync it asked for done, and the high
    /// watermark past its records in the epoch it was appended in), at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`CoordinatorError::NotCommitted`] or [`CoordinatorError::Flush`].
    pub async fn committed(self, timeout: Duration) -> Result<(), CoordinatorError> {
        let Some(c) = self.wait else {
            return Ok(());
        };
        let (topic, partition) = (self.topic, self.partition_index);
        for f in c.flushes {
            f.wait().await.map_err(|source| CoordinatorError::Flush {
                topic,
                partition,
                source,
            })?;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        c.partition
            .wait_committed(c.epoch, c.end, deadline)
            .await
            .map_err(|cause| CoordinatorError::NotCommitted {
                topic,
                partition,
                cause,
            })
    }
}

/// Encodes `records` (key, value or `None` for a tombstone) into batches of at most
/// [`MAX_BATCH_BYTES`] and appends them as the leader in `epoch`. Returns the offset after
/// the last record, and the fsyncs to wait for.
///
/// # Errors
/// The leader's refusal of a batch; the batches before it stay appended.
pub fn append_records(
    partition: &Arc<Partition>,
    epoch: i32,
    records: impl IntoIterator<Item = (Bytes, Option<Bytes>)>,
    now_ms: i64,
) -> Result<(i64, Vec<FlushWait>), LeaderAppendError> {
    append_records_as(partition, epoch, None, records, now_ms)
}

/// [`append_records`] as transactional batches of `producer` (id, epoch): a coordinator's
/// records inside that producer's transaction (TxnOffsetCommit), which its marker commits
/// or aborts.
///
/// # Errors
/// As [`append_records`].
pub fn append_transactional_records(
    partition: &Arc<Partition>,
    epoch: i32,
    producer: (i64, i16),
    records: impl IntoIterator<Item = (Bytes, Option<Bytes>)>,
    now_ms: i64,
) -> Result<(i64, Vec<FlushWait>), LeaderAppendError> {
    append_records_as(partition, epoch, Some(producer), records, now_ms)
}

fn append_records_as(
    partition: &Arc<Partition>,
    epoch: i32,
    producer: Option<(i64, i16)>,
    records: impl IntoIterator<Item = (Bytes, Option<Bytes>)>,
    now_ms: i64,
) -> Result<(i64, Vec<FlushWait>), LeaderAppendError> {
    let mut end = 0;
    let mut flushes = Vec::new();
    let mut batch: Vec<SimpleRecord> = Vec::new();
    let mut batch_bytes = 0;
    let mut flush_batch = |batch: &[SimpleRecord]| -> Result<(), LeaderAppendError> {
        let mut buf = BytesMut::from(&record_batch::encode_batch(0, batch)[..]);
        let (info, wait) = match producer {
            None => partition.append_as_leader(&mut buf, epoch, now_ms)?,
            Some((id, producer_epoch)) => {
                record_batch::set_producer(&mut buf, id, producer_epoch, record_batch::NO_SEQUENCE);
                record_batch::set_transactional(&mut buf);
                record_batch::write_crc(&mut buf);
                partition.append_as_coordinator(&mut buf, epoch, now_ms)?
            }
        };
        end = info.last_offset + 1;
        flushes.extend(wait);
        Ok(())
    };
    for (key, value) in records {
        let len = key.len() + value.as_ref().map_or(0, Bytes::len);
        if !batch.is_empty() && batch_bytes + len > MAX_BATCH_BYTES {
            flush_batch(&batch)?;
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
        flush_batch(&batch)?;
    }
    Ok((end, flushes))
}

/// What a coordinator's log replays, in log order.
#[derive(Debug, Clone, Copy)]
pub enum Replayed<'a> {
    /// A data record: its offset, key and value, and the producer id of its batch when that
    /// is transactional (the record counts once the producer's COMMIT marker follows).
    Record {
        offset: i64,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
        transactional: Option<i64>,
    },
    /// A transaction marker of `producer_id`.
    Marker { producer_id: i64, commit: bool },
}

/// Reads the partition's whole log and hands every data record to `apply` as (offset, key,
/// value), skipping control batches ([`replay_with_markers`]).
///
/// # Errors
/// As [`replay_with_markers`].
pub fn replay(
    partition: &Partition,
    topic: &'static str,
    mut apply: impl FnMut(i64, Option<&[u8]>, Option<&[u8]>),
) -> Result<(), CoordinatorError> {
    replay_with_markers(partition, topic, |r| {
        if let Replayed::Record {
            offset, key, value, ..
        } = r
        {
            apply(offset, key, value);
        }
    })
    .map(|_| ())
}

/// Reads the partition's whole log, a chunk at a time (the log's lock is held for one chunk
/// only, so the followers' fetches go on), and hands every data record and transaction
/// marker to `apply`. An unreadable batch or record is skipped loudly, so one bad record
/// does not cost every other key its state. Returns the offset it read up to (the log end
/// when it began).
///
/// # Errors
/// [`CoordinatorError`] when the log cannot be read or a batch's frame is corrupt.
pub fn replay_with_markers(
    partition: &Partition,
    topic: &'static str,
    mut apply: impl FnMut(Replayed<'_>),
) -> Result<i64, CoordinatorError> {
    let index = partition.index;
    let (mut next, end) = {
        let log = partition.log();
        (log.log_start_offset(), log.log_end_offset())
    };
    let mut buf = Vec::new();
    while next < end {
        buf.clear();
        {
            let log = partition.log();
            let read = log
                .read(next, REPLAY_READ_BYTES, end, true)
                .map_err(|source| CoordinatorError::Log {
                    topic,
                    partition: index,
                    source,
                })?;
            if read.bytes == 0 {
                break;
            }
            for region in &read.regions {
                region
                    .read_into(&mut buf)
                    .map_err(|source| CoordinatorError::Read {
                        topic,
                        partition: index,
                        source,
                    })?;
            }
        }
        let before = next;
        for batch in record_batch::batches(&buf) {
            let batch = batch.map_err(|source| CoordinatorError::CorruptBatch {
                topic,
                partition: index,
                source,
            })?;
            next = batch.last_offset() + 1;
            if batch.is_control() {
                if let Some(m) = batch.end_txn_marker() {
                    apply(Replayed::Marker {
                        producer_id: batch.producer_id(),
                        commit: m.commit,
                    });
                }
                continue;
            }
            let transactional = batch.is_transactional().then(|| batch.producer_id());
            let records = match batch.records() {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(topic, partition = index, base_offset = batch.base_offset(), error = %e,
                        "skipping an unreadable coordinator batch");
                    continue;
                }
            };
            for rec in records {
                match rec {
                    Ok(rec) => apply(Replayed::Record {
                        offset: rec.offset,
                        key: rec.key,
                        value: rec.value,
                        transactional,
                    }),
                    Err(e) => {
                        tracing::error!(topic, partition = index, error = %e,
                            "skipping the rest of an unreadable coordinator batch");
                        break;
                    }
                }
            }
        }
        if next == before {
            break;
        }
    }
    Ok(end)
}

/// For the stores' tests: partition `index` of `topic`, its log opened under `dir` with
/// `config`, led by `replicas[0]` in `epoch` with `replicas` all in the ISR.
#[cfg(test)]
pub(crate) fn led_partition(
    dir: &std::path::Path,
    topic: &str,
    index: i32,
    config: strata_storage::LogConfig,
    epoch: i32,
    replicas: Vec<i32>,
) -> Arc<Partition> {
    let log = strata_storage::Log::open(&dir.join(format!("{topic}-{index}")), config, 0).unwrap();
    let p = Partition::new(topic.to_owned(), uuid::Uuid::nil(), index, log);
    p.become_leader(epoch).unwrap();
    p.make_leader(
        replicas[0],
        &strata_replication::leader::PartitionRegistration {
            isr: replicas.clone(),
            replicas,
            leader_epoch: epoch,
            partition_epoch: epoch,
        },
        strata_replication::leader::ReplicationConfig::default(),
    );
    p
}
