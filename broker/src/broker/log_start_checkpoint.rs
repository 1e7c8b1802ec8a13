//! The log directory's `log-start-offset-checkpoint` (Kafka's `LogManager`
//! `checkpointLogStartOffsets`), written in Kafka's offset checkpoint format
//! (`strata_storage::checkpoint`).
//!
//! # When it is written
//!
//! A log start offset above the first segment's base offset comes only from DeleteRecords
//! (retention and truncation move the start by deleting or recreating segments, which the
//! directory itself records). So instead of Kafka's timer
//! (`log.flush.start.offset.checkpoint.interval.ms`, 60 s) the file is rewritten at once:
//! by DeleteRecords before it answers, and by topic deletion before the directories go, so
//! that a topic created again under the same name never inherits a stale start.
//!
//! # Crash policy
//!
//! The file is replaced atomically (temp file, fsync, rename, directory fsync). A crash
//! before the rename leaves the old starts: the deletion was not acknowledged, and the
//! records below the requested offset stay readable. A crash after it and before the
//! segments are deleted leaves segments below the start, which the restore at the next start
//! deletes. Only partitions whose start lies above their first segment's base are listed,
//! and offline partitions (never opened) keep the entry they had.

use std::sync::Mutex;

use strata_storage::LogError;
use strata_storage::checkpoint::{LOG_START_OFFSET_CHECKPOINT, read_offsets, write_offsets};

use super::Broker;

/// Serialises writers: two DeleteRecords at once would otherwise share the temp file.
static WRITER: Mutex<()> = Mutex::new(());

impl Broker {
    /// Rewrites `log-start-offset-checkpoint` from every hosted partition's log start offset,
    /// keeping the entries of offline partitions.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] when the file cannot be written, or read while a partition is
    /// offline.
    pub fn checkpoint_log_start_offsets(&self) -> Result<(), LogError> {
        let _writer = WRITER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut entries: Vec<(String, i32, i64)> = self
            .all_partitions()
            .iter()
            .filter_map(|p| {
                let log = p.log();
                let start = log.log_start_offset();
                (start > log.first_segment_base_offset()).then(|| (p.topic.clone(), p.index, start))
            })
            .collect();
        // An offline partition's log was never opened: keep its entry from the file as it
        // was, or a repair would bring back the records DeleteRecords removed.
        let offline = self.offline_partitions();
        if !offline.is_empty() {
            let path = self.config.log_dir.join(LOG_START_OFFSET_CHECKPOINT);
            entries.extend(
                read_offsets(&path)?
                    .into_iter()
                    .filter(|(key, _)| offline.contains(key))
                    .map(|((topic, partition), offset)| (topic, partition, offset)),
            );
        }
        entries.sort();
        write_offsets(
            &self.config.log_dir.join(LOG_START_OFFSET_CHECKPOINT),
            &entries,
        )
    }

    /// [`Broker::checkpoint_log_start_offsets`] for callers that can only log a failure.
    pub(crate) fn checkpoint_log_start_offsets_or_warn(&self) {
        if let Err(e) = self.checkpoint_log_start_offsets() {
            tracing::warn!(error = %e, "cannot write the log start offset checkpoint");
        }
    }
}
