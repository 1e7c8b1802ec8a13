//! One partition on this broker.

pub mod group_commit;
pub mod read_replica;

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use strata_replication::ReplicationError;
use strata_replication::fetch::FetchAnswer;
use strata_replication::leader::{
    AlterPartitionOutcome, AlterPartitionProposal, LeaderState, PartitionRegistration,
    ReplicationConfig,
};
use strata_storage::{AppendInfo, Log, LogError, ReadResult};
use tokio::sync::watch;
use uuid::Uuid;

pub use group_commit::{FlushError, FlushWait};

/// A partition this broker leads: its log, and the high watermark fetchers wait on.
///
/// With one replica, the high watermark is the log end offset: an append is committed as soon
/// as it is in the leader's log (the ISR is the leader alone), except that when the flush
/// policy asks for an fsync (`flush.messages`), records become visible only once they are
/// fsynced, as in Kafka, where the append fsyncs before the high watermark moves. That fsync
/// is not made under the lock: the append hands it to the broker's group commit
/// ([`group_commit`]), which fsyncs every partition waiting at once.
pub struct Partition {
    /// Topic name, for logs and responses.
    pub topic: String,
    /// Topic id (KIP-516), for Fetch v13+.
    pub topic_id: Uuid,
    /// Partition index.
    pub index: i32,
    /// The log. Held only for the append or the index lookup, never across an await.
    log: Mutex<Log>,
    /// Publishes the high watermark; long-polling fetches subscribe and wake on change
    /// (ARCHITECTURE.md decision 6: never busy-poll).
    high_watermark: watch::Sender<i64>,
    /// Group-commit bookkeeping; taken only while `log` is held, or alone.
    flush: Mutex<FlushMarks>,
    /// The newest leader epoch the log's epoch cache holds, so that the data path can tell
    /// without the log's lock that the image's epoch is already recorded
    /// ([`Partition::become_leader`]).
    leader_epoch: AtomicI32,
    /// While this node leads the partition: the replication state (followers' progress, the
    /// ISR, the high watermark over it). `None` on a follower, and before the image that
    /// makes this node the leader is applied.
    replica: Mutex<Option<LeaderState>>,
    /// The log end offset after each append, which parked follower fetches wait on (the
    /// high watermark only moves once they fetch).
    log_end: watch::Sender<i64>,
    /// Whether an AlterPartition for this partition is in flight.
    alter_in_flight: std::sync::atomic::AtomicBool,
    /// Whether the high watermark came from a leader's Fetch answer (the replica fetcher,
    /// [`Partition::set_high_watermark`]). A log opened at start has its log end as high
    /// watermark (nothing is checkpointed), which on a follower may cover records the
    /// leader never committed and that the first fetch truncates: consumers of a follower
    /// (KIP-392) read nothing until the leader has told it its high watermark.
    high_watermark_from_leader: std::sync::atomic::AtomicBool,
    /// Whether this node has led the partition since it opened the log. The replication
    /// state of the first leadership after an open starts its high watermark at the log
    /// start unless a leader told this node one: the log end found at open may cover
    /// records that were never committed (Kafka starts from its checkpointed high
    /// watermark), and followers would take it as committed. The ISR's fetches move it to
    /// the right place; the published high watermark (what consumers read up to) is
    /// untouched.
    led_since_open: std::sync::atomic::AtomicBool,
}

/// Why [`Partition::append_as_leader`] appended nothing.
#[derive(Debug, thiserror::Error)]
pub enum LeaderAppendError {
    /// This node does not lead the partition in the epoch the produce was checked against
    /// (it became a follower, or leads in a newer epoch): NOT_LEADER_OR_FOLLOWER.
    #[error("not the replicated leader in epoch {leader_epoch} (leading in {leading:?})")]
    NotLeader {
        /// The epoch the produce was checked against.
        leader_epoch: i32,
        /// The epoch this node leads in, if any.
        leading: Option<i32>,
    },
    /// The log refused or failed the append.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// Why an acks=all append is not acknowledged (the server's `error::ack_error_code` gives
/// its Kafka code).
#[derive(Debug)]
pub enum AckError {
    /// This node no longer leads in the append's epoch.
    LeadershipEnded,
    /// The ISR shrank below `min.insync.replicas` after the high watermark passed the
    /// records.
    Replication(ReplicationError),
    /// The deadline passed first.
    TimedOut,
}

/// Where the partition's group-commit fsyncs stand.
#[derive(Debug, Clone, Copy)]
struct FlushMarks {
    /// The log end offset of the last append that waits for an fsync.
    requested: i64,
    /// Every offset below this was fsynced by a group commit.
    flushed: i64,
}

impl FlushMarks {
    /// Whether an append waits on a group commit that has not finished: then no later append
    /// may expose the log end before it.
    fn pending(self) -> bool {
        self.requested > self.flushed
    }
}

impl Partition {
    /// Wraps an opened log.
    #[must_use]
    pub fn new(topic: String, topic_id: Uuid, index: i32, log: Log) -> Arc<Self> {
        let hw = log.log_end_offset();
        let leader_epoch = log.leader_epochs().latest_epoch().unwrap_or(-1);
        Arc::new(Partition {
            topic,
            topic_id,
            index,
            log: Mutex::new(log),
            high_watermark: watch::Sender::new(hw),
            flush: Mutex::new(FlushMarks {
                requested: hw,
                flushed: hw,
            }),
            leader_epoch: AtomicI32::new(leader_epoch),
            replica: Mutex::new(None),
            log_end: watch::Sender::new(hw),
            alter_in_flight: std::sync::atomic::AtomicBool::new(false),
            high_watermark_from_leader: std::sync::atomic::AtomicBool::new(false),
            led_since_open: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn replica(&self) -> MutexGuard<'_, Option<LeaderState>> {
        self.replica
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes or updates the leadership of a replicated partition (Kafka's
    /// `Partition.makeLeader`): the same leader epoch updates the ISR and partition epoch
    /// the controller committed, and the configs (`min.insync.replicas` changes live); a
    /// new one starts the followers' progress afresh.
    pub fn make_leader(
        &self,
        local_id: i32,
        registration: &PartitionRegistration,
        config: ReplicationConfig,
    ) {
        let now = crate::now_ms();
        // The log's lock first, as appends and follower fetches take them: an append checks
        // the leadership under the log's lock, so none is half-way through meanwhile.
        let log = self.log();
        let mut replica = self.replica();
        if let Some(state) = replica.as_mut()
            && state.leader_epoch() == registration.leader_epoch
        {
            state.set_config(config, now);
            // The image can carry this leader's own ISR change before the AlterPartition
            // answer does (the controller applies its commit before it answers), and then
            // it settles the proposal: counted here, as the answer would have been.
            let before = state.isr().len();
            let proposed = state.pending_proposal().map(|p| sorted(p.isr_ids()));
            state.on_partition_change(registration, now);
            if proposed.is_some_and(|p| p == sorted(state.isr().to_vec())) {
                crate::metrics::record_isr_change(before, state.isr().len());
            }
            let hw = state.high_watermark();
            drop(replica);
            drop(log);
            self.advance_high_watermark_to(hw);
            return;
        }
        let leo = self.committable_end_locked(&log);
        let known = self.led_since_open.swap(true, Ordering::AcqRel)
            || self.high_watermark_from_leader.load(Ordering::Acquire);
        let hw = if known {
            self.high_watermark()
        } else {
            log.log_start_offset()
        };
        let state = LeaderState::become_leader(local_id, registration, config, leo, hw, now);
        let hw = state.high_watermark();
        *replica = Some(state);
        drop(replica);
        drop(log);
        self.alter_in_flight.store(false, Ordering::Release);
        self.advance_high_watermark_to(hw);
    }

    /// Gives up the leadership (this node follows, or no longer hosts the partition). Taken
    /// under the log's lock, so that an append that found this node leading (see
    /// [`Partition::append_as_leader`]) is written before, and none after.
    pub fn resign(&self) {
        let _log = self.log();
        *self.replica() = None;
    }

    /// Whether this node leads the partition as a replicated leader.
    #[must_use]
    pub fn is_replicated_leader(&self) -> bool {
        self.replica().is_some()
    }

    /// The leader epoch this node leads the partition in as a replicated leader, if it does.
    #[must_use]
    pub fn replicated_leader_epoch(&self) -> Option<i32> {
        self.replica().as_ref().map(LeaderState::leader_epoch)
    }

    /// The log end offset that counts as written here: the log end, or, while a group
    /// commit is pending, what it has fsynced. Call with the log locked.
    fn committable_end_locked(&self, log: &Log) -> i64 {
        let marks = *self.marks();
        if marks.pending() {
            marks.flushed
        } else {
            log.log_end_offset()
        }
    }

    /// acks=all's check before the append: NOT_ENOUGH_REPLICAS while the ISR is below
    /// `min.insync.replicas`. Always passes on an unreplicated partition.
    ///
    /// # Errors
    ///
    /// [`ReplicationError::NotEnoughReplicas`].
    pub fn check_produce(&self, acks: i16) -> Result<(), ReplicationError> {
        match self.replica().as_ref() {
            Some(state) => state.check_produce(acks),
            None => Ok(()),
        }
    }

    /// acks=all's check once the high watermark has passed the records (Kafka's
    /// `checkEnoughReplicasReachOffset`). Always passes on an unreplicated partition.
    ///
    /// # Errors
    ///
    /// [`ReplicationError::NotEnoughReplicasAfterAppend`] when the ISR shrank below
    /// `min.insync.replicas` after the append.
    pub fn check_after_append(&self) -> Result<(), ReplicationError> {
        match self.replica().as_ref() {
            Some(state) => state.check_enough_replicas_after_append(),
            None => Ok(()),
        }
    }

    /// A follower's fetch of this partition, on its leader: checks it (epochs, divergence),
    /// records the follower's progress, and moves the high watermark. The caller reads the
    /// records up to the answer's `read_to`.
    ///
    /// # Errors
    ///
    /// What [`LeaderState::on_fetch`] refuses; NOT_LEADER_OR_FOLLOWER when this node does
    /// not lead the partition.
    pub fn follower_fetch(
        &self,
        req: &strata_replication::fetch::FetchPartition,
        local_id: i32,
    ) -> Result<FetchAnswer, ReplicationError> {
        let now = crate::now_ms();
        let log = self.log();
        let mut replica = self.replica();
        let Some(state) = replica.as_mut() else {
            return Err(ReplicationError::NotLeaderOrFollower { node: local_id });
        };
        let answer = state.on_fetch(req, log.log_start_offset(), log.leader_epochs(), now)?;
        let hw = state.high_watermark();
        drop(replica);
        drop(log);
        self.advance_high_watermark_to(hw);
        Ok(answer)
    }

    /// Reads from `offset` up to `max_offset` (a follower reads up to the log end).
    ///
    /// # Errors
    ///
    /// [`LogError::OffsetOutOfRange`] outside the log.
    pub fn read_up_to(
        &self,
        offset: i64,
        max_bytes: u32,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        self.log()
            .read(offset, max_bytes, max_offset, min_one_batch)
    }

    /// A receiver that changes whenever an append moves the log end.
    #[must_use]
    pub fn subscribe_log_end(&self) -> watch::Receiver<i64> {
        self.log_end.subscribe()
    }

    /// The ISR change this leader wants the controller to commit, if any and if none is in
    /// flight: a shrink of members that stopped catching up within
    /// `replica.lag.time.max.ms`, or an expansion proposed by a follower's fetch. The caller
    /// sends it with AlterPartition and hands the answer to
    /// [`Partition::on_alter_partition`].
    pub fn isr_proposal(&self, now_ms: i64) -> Option<AlterPartitionProposal> {
        if self.alter_in_flight.load(Ordering::Acquire) {
            return None;
        }
        let mut replica = self.replica();
        let state = replica.as_mut()?;
        let proposal = match state.pending_proposal() {
            Some(p) => p.clone(),
            None => state.maybe_shrink_isr(now_ms)?.clone(),
        };
        self.alter_in_flight.store(true, Ordering::Release);
        Some(proposal)
    }

    /// The controller's answer to the AlterPartition sent for [`Partition::isr_proposal`].
    pub fn on_alter_partition(&self, outcome: &AlterPartitionOutcome) {
        let now = crate::now_ms();
        let mut replica = self.replica();
        let hw = replica.as_mut().map(|state| {
            let before = state.isr().len();
            state.on_alter_partition(outcome, now);
            // Kafka's IsrShrinksPerSec and IsrExpandsPerSec count the leader's own changes
            // once the controller commits them (`handleAlterPartitionUpdate`); an ISR the
            // controller changes itself (a fenced broker) arrives as metadata and is not
            // counted, as in Kafka.
            crate::metrics::record_isr_change(before, state.isr().len());
            state.high_watermark()
        });
        drop(replica);
        self.alter_in_flight.store(false, Ordering::Release);
        if let Some(hw) = hw {
            self.advance_high_watermark_to(hw);
        }
    }

    /// Whether this node leads the partition and its committed ISR is below the effective
    /// `min.insync.replicas` (Kafka's `UnderMinIsrPartitionCount` counts these).
    #[must_use]
    pub fn is_under_min_isr(&self) -> bool {
        self.replica()
            .as_ref()
            .is_some_and(LeaderState::is_under_min_isr)
    }

    /// Records that this node leads the partition in `leader_epoch` (KIP-101): a newer epoch
    /// than the log's cache holds starts at the log end, as Kafka's `Partition.makeLeader`
    /// assigns it, so OffsetForLeaderEpoch for the current epoch answers the log end before
    /// any record of it is written. Cheap when the epoch is already recorded.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] when the epoch checkpoint cannot be written.
    pub fn become_leader(&self, leader_epoch: i32) -> Result<(), LogError> {
        if self.leader_epoch.load(Ordering::Acquire) >= leader_epoch {
            return Ok(());
        }
        let mut log = self.log();
        log.maybe_assign_leader_epoch(leader_epoch)?;
        let latest = log.leader_epochs().latest_epoch().unwrap_or(-1);
        self.leader_epoch.fetch_max(latest, Ordering::AcqRel);
        Ok(())
    }

    /// Locks the log. A poisoned lock (a panic elsewhere while appending) still yields the log:
    /// the storage layer keeps its own invariants on every write.
    pub fn log(&self) -> MutexGuard<'_, Log> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The flush marks, the leader's own log end as its replication state knows it, and the
    /// published log end (for a test's failure).
    #[cfg(test)]
    pub(crate) fn debug_marks(&self) -> String {
        let m = *self.marks();
        let leo = self.replica().as_ref().map(LeaderState::log_end_offset);
        format!(
            "{m:?}, replication's log end {leo:?}, published log end {}",
            *self.log_end.borrow()
        )
    }

    fn marks(&self) -> MutexGuard<'_, FlushMarks> {
        self.flush
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends a record set, each batch stamped with `leader_epoch` (the image's, KIP-101),
    /// and advances the high watermark, or, when the flush policy wants an fsync first (or an
    /// earlier append still waits for one), asks the group commit for it and returns what to
    /// wait on: the high watermark moves, and the producer may be answered, once that
    /// resolves.
    ///
    /// # Errors
    ///
    /// [`LogError`] when validation or the write fails; nothing is appended then.
    pub fn append(
        self: &Arc<Self>,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<FlushWait>), LogError> {
        let log = self.log();
        self.append_locked(log, now_ms, |log| {
            log.append_unflushed(records, leader_epoch, now_ms)
        })
    }

    /// [`Partition::append`] on a node of a cluster: only while this node leads the partition
    /// as a replicated leader in `leader_epoch` (the image's epoch the produce was checked
    /// against), checked under the log's lock, which [`Partition::resign`] and
    /// [`Partition::make_leader`] also take (Kafka's `appendRecordsToLeader` under the
    /// partition's leader-ISR lock). Without it, a produce checked against the image just
    /// before this node became a follower would be appended to the follower's log, and,
    /// with no replication state left to wait on, acknowledged at once.
    ///
    /// # Errors
    ///
    /// [`LeaderAppendError::NotLeader`] when this node does not lead in `leader_epoch`
    /// (nothing appended); [`LeaderAppendError::Log`] as [`Partition::append`].
    pub fn append_as_leader(
        self: &Arc<Self>,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<FlushWait>), LeaderAppendError> {
        self.append_leading(leader_epoch, now_ms, |log| {
            log.append_unflushed(records, leader_epoch, now_ms)
        })
    }

    /// [`Partition::append_as_leader`] for a coordinator's transactional records
    /// ([`strata_storage::Log::append_coordinator_unflushed`]).
    ///
    /// # Errors
    /// As [`Partition::append_as_leader`].
    pub fn append_as_coordinator(
        self: &Arc<Self>,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<FlushWait>), LeaderAppendError> {
        self.append_leading(leader_epoch, now_ms, |log| {
            log.append_coordinator_unflushed(records, leader_epoch, now_ms)
        })
    }

    /// Appends a transaction marker (WriteTxnMarkers) as the partition's leader in
    /// `leader_epoch`, as [`Partition::append_as_leader`] appends records: replicated like
    /// any batch, and durable by the same flush policy.
    ///
    /// # Errors
    ///
    /// As [`Partition::append_as_leader`]; the log refuses a marker from a fenced producer
    /// epoch or an older coordinator ([`strata_storage::Log::append_marker`]).
    pub fn append_marker_as_leader(
        self: &Arc<Self>,
        marker: &strata_storage::TxnMarker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<FlushWait>), LeaderAppendError> {
        self.append_leading(leader_epoch, now_ms, |log| {
            log.append_marker(marker, leader_epoch, now_ms)
        })
    }

    /// Locks the log and, if this node leads the partition as a replicated leader in
    /// `leader_epoch`, appends with `append` ([`Partition::append_locked`]).
    fn append_leading(
        self: &Arc<Self>,
        leader_epoch: i32,
        now_ms: i64,
        append: impl FnOnce(&mut Log) -> Result<AppendInfo, LogError>,
    ) -> Result<(AppendInfo, Option<FlushWait>), LeaderAppendError> {
        let log = self.log();
        let leading = self.replicated_leader_epoch();
        if leading != Some(leader_epoch) {
            return Err(LeaderAppendError::NotLeader {
                leader_epoch,
                leading,
            });
        }
        Ok(self.append_locked(log, now_ms, append)?)
    }

    /// The body of [`Partition::append`], with the log locked: `append` writes to the log.
    fn append_locked(
        self: &Arc<Self>,
        mut log: MutexGuard<'_, Log>,
        now_ms: i64,
        append: impl FnOnce(&mut Log) -> Result<AppendInfo, LogError>,
    ) -> Result<(AppendInfo, Option<FlushWait>), LogError> {
        let info = append(&mut log)?;
        if let Some(latest) = log.leader_epochs().latest_epoch() {
            self.leader_epoch.fetch_max(latest, Ordering::AcqRel);
        }
        // A roll sealed a segment: its fsync runs on the group-commit thread, off this path
        // and outside this lock (Kafka's roll schedules `flush-log` the same way), and the
        // recovery point moves once it is done. A group commit requested below takes the
        // sealed segment along.
        let rolled = log.take_roll_flush_request();
        let leo = log.log_end_offset();
        let mut marks = self.marks();
        if log.flush_messages_due() || marks.pending() {
            marks.requested = marks.requested.max(leo);
            // Queued while the log is locked, so the group commit's look at the log (which
            // takes the lock) comes after this append.
            if let Some(wait) = group_commit::request(self.clone()) {
                return Ok((info, Some(wait)));
            }
            // No group-commit thread: fsync here, as Kafka does.
            log.flush()?;
            marks.flushed = marks.flushed.max(leo);
        }
        drop(marks);
        if rolled {
            self.queue_roll_flush(&mut log)?;
        }
        // `flush.ms`: an fsync that gates nothing, made here as before (and by housekeeping).
        let flushed = log.maybe_flush(now_ms);
        drop(log);
        self.advance_high_watermark(leo);
        flushed?;
        Ok((info, None))
    }

    /// Queues the fsync of the segments a roll sealed (no one waits for it); fsyncs here if
    /// there is no group-commit thread. Call with the log locked.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] from that fallback fsync.
    pub fn queue_roll_flush(self: &Arc<Self>, log: &mut Log) -> Result<(), LogError> {
        if group_commit::request(self.clone()).is_none() {
            log.flush()?;
        }
        Ok(())
    }

    /// Records `offset` as written on this node (appended, and fsynced where the flush
    /// policy asks) and moves the high watermark: to `offset` on an unreplicated partition,
    /// to the smallest log end over the ISR on a replicated leader.
    fn advance_high_watermark(&self, offset: i64) {
        self.log_end.send_if_modified(|end| {
            let moved = offset > *end;
            if moved {
                *end = offset;
            }
            moved
        });
        let target = match self.replica().as_mut() {
            Some(state) => {
                state.on_local_append(offset, crate::now_ms());
                state.high_watermark()
            }
            None => offset,
        };
        self.advance_high_watermark_to(target);
    }

    /// Moves the high watermark up to `offset` (never down: concurrent appends may publish
    /// out of order).
    fn advance_high_watermark_to(&self, offset: i64) {
        self.high_watermark.send_if_modified(|hw| {
            let moved = offset > *hw;
            if moved {
                *hw = offset;
            }
            moved
        });
    }

    /// A group commit fsynced everything below `end_offset`: those records may be read, and
    /// the recovery point moves there.
    fn flushed(&self, end_offset: i64) {
        // A flush begun before a truncation (this node followed meanwhile, and may lead
        // again) covered offsets the log no longer holds: only what it holds is reported, or
        // a leader would count records it does not have.
        let end_offset = {
            let mut log = self.log();
            log.complete_flush(end_offset);
            end_offset.min(log.log_end_offset())
        };
        {
            let mut marks = self.marks();
            marks.flushed = marks.flushed.max(end_offset);
        }
        self.advance_high_watermark(end_offset);
    }

    /// Reads from `offset` up to the high watermark.
    ///
    /// # Errors
    ///
    /// [`LogError::OffsetOutOfRange`] outside the log.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        let hw = self.high_watermark();
        self.log().read(offset, max_bytes, hw, min_one_batch)
    }

    /// Waits until the high watermark (the ISR's) reaches `target` while this node still
    /// leads in `leader_epoch`, the epoch of the append that ends at `target` (Kafka's
    /// DelayedProduce for acks=all), or until `deadline`.
    ///
    /// # Errors
    ///
    /// [`AckError::LeadershipEnded`] when this node stops leading in that epoch,
    /// [`AckError::Replication`] when the ISR is below `min.insync.replicas` once the
    /// records are committed, [`AckError::TimedOut`] at the deadline.
    pub async fn wait_committed(
        &self,
        leader_epoch: i32,
        target: i64,
        deadline: tokio::time::Instant,
    ) -> Result<(), AckError> {
        let mut hw = self.subscribe();
        loop {
            let reached = *hw.borrow_and_update() >= target;
            // Checked after reading the high watermark: a follower's high watermark (the new
            // leader's, over a log truncated and refilled) must not answer for records this
            // node appended as leader; the epoch never comes back, so still leading in it
            // means the value read was this leadership's.
            if self.replicated_leader_epoch() != Some(leader_epoch) {
                return Err(AckError::LeadershipEnded);
            }
            if reached {
                // KIP-966 holds the high watermark while the ISR is below
                // min.insync.replicas, but the ISR can shrink between the high watermark
                // passing the records and this check: Kafka then answers
                // NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay; the producer retries,
                // which the idempotent producer deduplicates).
                return self.check_after_append().map_err(AckError::Replication);
            }
            tokio::select! {
                changed = hw.changed() => if changed.is_err() {
                    return Err(AckError::LeadershipEnded);
                },
                () = tokio::time::sleep_until(deadline) => return Err(AckError::TimedOut),
                // Leadership can end without the high watermark moving.
                () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
            }
        }
    }

    /// The high watermark.
    #[must_use]
    pub fn high_watermark(&self) -> i64 {
        *self.high_watermark.borrow()
    }

    /// The last stable offset at the high watermark (see [`Log::last_stable_offset`]): what
    /// a read_committed consumer may read up to.
    #[must_use]
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        self.last_stable_offset_at(hw)
    }

    /// The last stable offset at the high watermark `hw` (a follower serving consumers
    /// passes its own, KIP-392).
    #[must_use]
    pub fn last_stable_offset_at(&self, hw: i64) -> i64 {
        self.log().last_stable_offset(hw)
    }

    /// The aborted transactions a read_committed read from `fetch_offset` below
    /// `upper_bound` reports (see [`Log::aborted_transactions`]).
    #[must_use]
    pub fn aborted_transactions(
        &self,
        fetch_offset: i64,
        upper_bound: i64,
    ) -> Vec<strata_storage::txn_index::AbortedTxn> {
        self.log().aborted_transactions(fetch_offset, upper_bound)
    }

    /// The log start offset.
    #[must_use]
    pub fn log_start_offset(&self) -> i64 {
        self.log().log_start_offset()
    }

    /// A receiver that changes whenever the high watermark moves.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.high_watermark.subscribe()
    }

    /// Sets the high watermark of a follower replica: its leader's, capped at its own log
    /// end (the replica fetcher computes it).
    pub fn set_high_watermark(&self, hw: i64) {
        self.high_watermark.send_if_modified(|cur| {
            // Flagged under the watch's lock, so that whoever sees the flag and then reads
            // the high watermark reads this one, not the log end found at open; the first
            // one wakes parked consumers even if the value is the same.
            let first = !self.high_watermark_from_leader.swap(true, Ordering::AcqRel);
            let changed = *cur != hw;
            *cur = hw;
            changed || first
        });
    }

    /// The last stable offset the log cleaner may clean up to: below what every ISR member
    /// is known to hold as a leader, or below the high watermark a leader gave this node as
    /// a follower. `None` until that is known: a log opened at start has its log end as high
    /// watermark (nothing is checkpointed), and a tail past the real one may be truncated,
    /// so cleaning it could drop an acknowledged record for a later one that never survives.
    #[must_use]
    pub fn cleanable_last_stable_offset(&self) -> Option<i64> {
        let leading = self.replica().as_ref().map(|state| {
            let mut end = state.high_watermark();
            for &id in state.isr() {
                if id != state.local_id() {
                    let fetched = state.follower_log_end_offset(id).filter(|o| *o >= 0)?;
                    end = end.min(fetched);
                }
            }
            Some(end)
        });
        let hw = match leading {
            Some(end) => end?.min(self.high_watermark()),
            None => self.follower_high_watermark()?,
        };
        Some(self.last_stable_offset_at(hw))
    }

    /// KIP-392: the high watermark a consumer of this follower replica reads up to, once
    /// a leader's Fetch answer has set it ([`Partition::set_high_watermark`]); `None`
    /// before, when the high watermark is still the log end found at open.
    #[must_use]
    pub fn follower_high_watermark(&self) -> Option<i64> {
        self.high_watermark_from_leader
            .load(Ordering::Acquire)
            .then(|| self.high_watermark())
    }

    /// KIP-392, on the leader: the replica a consumer in `client_rack` should fetch
    /// `fetch_offset` from instead, if any (Kafka's `findPreferredReadReplica` with the
    /// `RackAwareReplicaSelector`). `rack_of` gives a replica's rack, none for a broker
    /// that is not alive ([`read_replica::live_rack`]). `None` when this node is not a
    /// replicated leader, or the leader is the best choice.
    #[must_use]
    pub fn preferred_read_replica(
        &self,
        client_rack: &str,
        fetch_offset: i64,
        rack_of: &dyn Fn(i32) -> Option<String>,
    ) -> Option<i32> {
        self.replica().as_ref()?.preferred_read_replica(
            Some(client_rack),
            fetch_offset,
            rack_of,
            crate::now_ms(),
        )
    }

    /// Called after retention or truncation changes the log outside an append.
    /// Records still waiting for their group commit stay invisible.
    pub fn refresh_high_watermark(&self) {
        if self.is_replicated_leader() {
            // The high watermark is the ISR's, not this log's end.
            return;
        }
        let log = self.log();
        let marks = *self.marks();
        let leo = log.log_end_offset();
        let hw = if marks.pending() {
            self.high_watermark().min(leo)
        } else {
            leo
        };
        drop(log);
        self.high_watermark.send_replace(hw);
    }
}

/// `ids` in ascending order, to compare ISRs as sets.
fn sorted(mut ids: Vec<i32>) -> Vec<i32> {
    ids.sort_unstable();
    ids
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use strata_protocol::record_batch::{SimpleRecord, encode_batch};
    use strata_storage::LogConfig;

    use super::*;

    fn records(n: usize) -> Vec<u8> {
        let recs: Vec<SimpleRecord> = (0..n)
            .map(|i| SimpleRecord {
                key: None,
                value: Some(Bytes::from(vec![b'v'; 10 + i])),
                timestamp: 1,
                headers: vec![],
            })
            .collect();
        encode_batch(0, &recs).to_vec()
    }

    fn partition(dir: &std::path::Path, flush_messages: i64) -> Arc<Partition> {
        let config = LogConfig {
            flush_interval_messages: flush_messages,
            ..LogConfig::default()
        };
        let log = Log::open(dir, config, 0).unwrap();
        Partition::new("t".to_owned(), Uuid::nil(), 0, log)
    }

    #[tokio::test]
    async fn without_a_flush_policy_the_append_is_visible_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = partition(dir.path(), i64::MAX);
        let (info, wait) = p.append(&mut records(3), 0, 0).unwrap();
        assert!(wait.is_none());
        assert_eq!((info.base_offset, p.high_watermark()), (0, 3));
    }

    /// flush.messages=1: each append waits for the group commit, which moves the high
    /// watermark; concurrent appends to several partitions all get there.
    #[tokio::test]
    async fn with_flush_messages_the_group_commit_moves_the_high_watermark() {
        let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
        let parts: Vec<_> = dirs.iter().map(|d| partition(d.path(), 1)).collect();
        let mut waits = Vec::new();
        for round in 0..5 {
            for p in &parts {
                let (info, wait) = p.append(&mut records(2), 0, 0).unwrap();
                assert_eq!(info.base_offset, round * 2);
                waits.push(wait.expect("flush.messages=1 waits for an fsync"));
            }
        }
        for w in waits {
            w.wait().await.unwrap();
        }
        for p in &parts {
            assert_eq!(p.high_watermark(), 10);
            assert!(!p.marks().pending());
        }
    }

    /// A roll does not fsync in the append: the sealed segment's fsync is queued to the
    /// group commit, nothing waits for it, and the recovery point moves once it is done.
    #[tokio::test]
    async fn a_roll_fsyncs_the_sealed_segment_off_the_append_path() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1000,
            ..LogConfig::default()
        };
        let log = Log::open_with(&dir.path().join("t-0"), config, 0, false).unwrap();
        let p = Partition::new("t".to_owned(), Uuid::nil(), 0, log);
        let mut i = 0;
        while p.log().segment_count() < 3 {
            let (_, wait) = p.append(&mut records(5), 0, 0).unwrap();
            assert!(wait.is_none(), "nothing waits for a roll's fsync");
            i += 1;
            assert!(i < 1000, "the log never rolled");
        }
        let sealed_end = p.high_watermark();
        for _ in 0..500 {
            if p.log().recovery_point() >= sealed_end - 5 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // The last append rolled first, at the log end before it.
        let rp = p.log().recovery_point();
        assert!(
            rp >= sealed_end - 5 && rp <= sealed_end,
            "recovery point {rp}, log end {sealed_end}"
        );
        assert_eq!(
            p.log().begin_flush(0).unwrap().files.len(),
            1,
            "nothing sealed waits"
        );
    }

    /// While a group commit is pending, a refresh (retention) does not expose the records.
    #[test]
    fn a_refresh_does_not_expose_records_waiting_for_their_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let p = partition(dir.path(), i64::MAX);
        p.append(&mut records(1), 0, 0).unwrap();
        // As if an append had asked for an fsync that has not finished.
        p.log().append_unflushed(&mut records(1), 0, 0).unwrap();
        p.marks().requested = 2;
        p.refresh_high_watermark();
        assert_eq!(p.high_watermark(), 1);
        // A later append joins the pending fsync instead of publishing.
        let (_, wait) = p.append(&mut records(1), 0, 0).unwrap();
        assert!(wait.is_some());
    }

    /// Leads partition `p` as node 1 in `epoch`, with node 2 in the ISR (so the high
    /// watermark waits for node 2's fetches).
    fn lead(p: &Partition, epoch: i32) {
        let registration = PartitionRegistration {
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader_epoch: epoch,
            partition_epoch: epoch,
        };
        p.make_leader(1, &registration, ReplicationConfig::default());
    }

    /// An append checked against an image's leader epoch is written only while this node
    /// leads in that epoch: not after it resigned, not in an older or newer epoch.
    #[test]
    fn only_the_replicated_leader_of_the_epoch_appends() {
        let dir = tempfile::tempdir().unwrap();
        let p = partition(dir.path(), i64::MAX);
        assert!(matches!(
            p.append_as_leader(&mut records(1), 5, 0),
            Err(LeaderAppendError::NotLeader { leading: None, .. })
        ));
        lead(&p, 5);
        assert_eq!(p.replicated_leader_epoch(), Some(5));
        let (info, _) = p.append_as_leader(&mut records(2), 5, 0).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (0, 1));
        assert_eq!(p.high_watermark(), 0, "node 2 has not fetched");
        assert!(matches!(
            p.append_as_leader(&mut records(1), 4, 0),
            Err(LeaderAppendError::NotLeader {
                leader_epoch: 4,
                leading: Some(5)
            })
        ));
        p.resign();
        assert!(matches!(
            p.append_as_leader(&mut records(1), 5, 0),
            Err(LeaderAppendError::NotLeader { leading: None, .. })
        ));
        assert_eq!(p.log().log_end_offset(), 2, "nothing appended once refused");
    }
}
