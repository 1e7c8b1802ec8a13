//! One partition on this broker.

pub mod group_commit;

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
        })
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

    /// Appends a record set and advances the high watermark, or, when the flush policy wants
    /// an fsync first (or an earlier append still waits for one), asks the group commit for
    /// it and returns what to wait on: the high watermark moves, and the producer may be
    /// answered, once that resolves.
    ///
    /// # Errors
    ///
    /// [`LogError`] when validation or the write fails; nothing is appended then.
    pub fn append(
        self: &Arc<Self>,
        records: &mut [u8],
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<FlushWait>), LogError> {
        let mut log = self.log();
        let info = log.append_unflushed(records, 0, now_ms)?;
        let leo = log.log_end_offset();
        let mut marks = self.marks();
        if log.flush_due(now_ms) || marks.pending() {
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
        drop(log);
        self.advance_high_watermark(leo);
        Ok((info, None))
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

    /// A group commit fsynced everything below `end_offset`: those records may be read.
    fn flushed(&self, end_offset: i64) {
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
