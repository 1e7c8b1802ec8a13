//! One partition on this broker.

use std::sync::{Arc, Mutex, MutexGuard};

use strata_storage::{AppendInfo, Log, LogError, ReadResult};
use tokio::sync::watch;
use uuid::Uuid;

/// A partition this broker leads: its log, and the high watermark fetchers wait on.
///
/// With one replica, the high watermark is the log end offset: an append is committed as soon
/// as it is in the leader's log (the ISR is the leader alone).
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
        })
    }

    /// Locks the log. A poisoned lock (a panic elsewhere while appending) still yields the log:
    /// the storage layer keeps its own invariants on every write.
    pub fn log(&self) -> MutexGuard<'_, Log> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends a record set and advances the high watermark.
    ///
    /// # Errors
    ///
    /// [`LogError`] when validation or the write fails; nothing is appended then.
    pub fn append(&self, records: &mut [u8], now_ms: i64) -> Result<AppendInfo, LogError> {
        let mut log = self.log();
        let info = log.append(records, 0, now_ms)?;
        log.maybe_flush(now_ms)?;
        let leo = log.log_end_offset();
        drop(log);
        self.high_watermark.send_replace(leo);
        Ok(info)
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
    pub fn refresh_high_watermark(&self) {
        let leo = self.log().log_end_offset();
        self.high_watermark.send_replace(leo);
    }
}
