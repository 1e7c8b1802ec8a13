//! One partition on this broker.

pub mod group_commit;
pub mod leadership;

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use strata_storage::{AppendInfo, Log, LogError, ReadResult};
use tokio::sync::watch;
use uuid::Uuid;

pub use group_commit::FlushWait;

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
        })
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
        let mut log = self.log();
        let info = log.append_unflushed(records, leader_epoch, now_ms)?;
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

    /// Moves the high watermark up to `offset` (never down: concurrent appends may publish
    /// out of order).
    fn advance_high_watermark(&self, offset: i64) {
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
        self.log().complete_flush(end_offset);
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

    /// The high watermark.
    #[must_use]
    pub fn high_watermark(&self) -> i64 {
        *self.high_watermark.borrow()
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
            let changed = *cur != hw;
            *cur = hw;
            changed
        });
    }

    /// Called after retention or truncation changes the log outside an append.
    /// Records still waiting for their group commit stay invisible.
    pub fn refresh_high_watermark(&self) {
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
}
