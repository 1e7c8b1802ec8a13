//! The log's side of compaction ([`crate::cleaner`]): what a pass may clean, the snapshot it
//! reads, the swap that installs a cleaned group, and the completion of an interrupted swap
//! at open.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use strata_protocol::record_batch::{self, RecordBatchView};

use super::{Log, sync_dir};
use crate::cleaner::{CleanPlan, CleanableSpan, CleanedGroup, CompactionConfig, SegmentRef};
use crate::error::{IoContext, LogError};
use crate::segment::{self, LogSegment};

/// Every file one segment may have.
const SEGMENT_SUFFIXES: [&str; 4] = ["log", "index", "timeindex", "txnindex"];

impl Log {
    /// What a cleaning pass may clean now (Kafka's `cleanableOffsets` and `LogToClean`):
    /// `checkpoint` is the log's `cleaner-offset-checkpoint` entry, `last_stable_offset` the
    /// partition's (at most its high watermark).
    ///
    /// # Errors
    /// [`LogError::Io`] reading a segment's timestamps.
    pub fn cleanable_span(
        &self,
        checkpoint: Option<i64>,
        last_stable_offset: i64,
        config: &CompactionConfig,
        now_ms: i64,
    ) -> Result<CleanableSpan, LogError> {
        let start = self.log_start_offset;
        let end = self.log_end_offset();
        let (first_dirty, checkpoint_reset) = match checkpoint {
            Some(cp) if cp >= start && cp <= end => (cp, false),
            Some(_) => (start, true),
            None => (start, false),
        };
        let active_base = self.active().base_offset;
        let mut bound = last_stable_offset.min(active_base);
        if config.min_compaction_lag_ms > 0 {
            let young = now_ms.saturating_sub(config.min_compaction_lag_ms);
            for seg in self.sealed_from(first_dirty) {
                if seg.largest_timestamp()? > young {
                    bound = bound.min(seg.base_offset);
                    break;
                }
            }
        }
        // Rounded down to a segment's start: the segment holding the bound is not cleaned.
        let first_uncleanable = self
            .segments
            .iter()
            .filter(|s| s.base_offset <= bound)
            .map(|s| s.base_offset)
            .next_back()
            .unwrap_or(first_dirty)
            .max(first_dirty);
        let bytes = |from: i64, to: i64| -> u64 {
            self.segments
                .iter()
                .enumerate()
                .filter(|(i, s)| {
                    let next = self.segments.get(i + 1).map_or(i64::MAX, |n| n.base_offset);
                    from < to && next > from && s.base_offset < to
                })
                .map(|(_, s)| s.size())
                .sum()
        };
        let mut delay = 0;
        if config.max_compaction_lag_ms < i64::MAX {
            let clean_until = now_ms.saturating_sub(config.max_compaction_lag_ms.max(0));
            let earliest = self
                .sealed_from(first_dirty)
                .filter_map(|s| s.first_batch_max_timestamp().ok().flatten())
                .filter(|t| *t > 0)
                .min();
            if let Some(t) = earliest
                && t < clean_until
            {
                delay = clean_until - t;
            }
        }
        Ok(CleanableSpan {
            first_dirty,
            first_uncleanable,
            clean_bytes: bytes(i64::MIN, first_dirty),
            cleanable_bytes: bytes(first_dirty, first_uncleanable),
            max_compaction_delay_ms: delay,
            checkpoint_reset,
        })
    }

    /// The sealed segments that hold offsets at or after `from`.
    fn sealed_from(&self, from: i64) -> impl Iterator<Item = &LogSegment> {
        let sealed = self.segments.len() - 1;
        self.segments[..sealed]
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.segments[i + 1].base_offset > from)
            .map(|(_, s)| s)
    }

    /// What a pass over `span` reads, taken under the lock: the sealed segments below
    /// `span.first_uncleanable` (their files do not change once sealed), their aborted
    /// transactions, and each producer's last offset and epoch.
    ///
    /// # Errors
    /// [`LogError::Io`] opening a segment's file.
    pub fn clean_plan(
        &self,
        span: CleanableSpan,
        config: &CompactionConfig,
    ) -> Result<CleanPlan, LogError> {
        let mut segments = Vec::new();
        let mut aborted = Vec::new();
        for (i, seg) in self.segments.iter().enumerate() {
            if seg.base_offset >= span.first_uncleanable || i + 1 == self.segments.len() {
                break;
            }
            segments.push(SegmentRef {
                base_offset: seg.base_offset,
                next_base: self.segments[i + 1].base_offset,
                size: seg.size(),
                file: seg.file()?,
            });
            aborted.extend(seg.txn_index.entries().iter().copied());
        }
        let active_producers: HashMap<i64, (Option<i64>, i16)> = self
            .producer_state
            .table
            .entries()
            .map(|e| {
                let last = e.last_data_offset();
                (
                    e.producer_id,
                    ((last >= 0).then_some(last), e.producer_epoch),
                )
            })
            .collect();
        Ok(CleanPlan {
            dir: self.dir.clone(),
            span,
            segments,
            aborted,
            active_producers,
            delete_retention_ms: config.delete_retention_ms,
            segment_bytes: self.config.effective_segment_bytes(),
        })
    }

    /// Installs a cleaned group (Kafka's `replaceSegments`): unless the segments it replaces
    /// changed since the plan (retention, truncation), `<base>.log.cleaned` becomes
    /// `<base>.log.swap`, the replaced segments' files go, and the `.swap` becomes the
    /// segment. Returns whether it was installed; a group not installed leaves the log as it
    /// was (the caller removes the `.cleaned` file).
    ///
    /// # Errors
    /// [`LogError::Io`]; a failure after the `.swap` rename is completed by the next open.
    pub fn install_cleaned(&mut self, group: CleanedGroup, now_ms: i64) -> Result<bool, LogError> {
        let sealed = self.segments.len() - 1;
        let Some(first) = self.segments[..sealed]
            .iter()
            .position(|s| s.base_offset == group.base_offset)
        else {
            return Ok(false);
        };
        let n = group.replaces.len();
        let unchanged = first + n <= sealed
            && self.segments[first..first + n]
                .iter()
                .zip(&group.replaces)
                .all(|(s, (base, size))| s.base_offset == *base && s.size() == *size);
        if !unchanged {
            return Ok(false);
        }
        let dir = self.dir.clone();
        let swap = dir.join(format!(
            "{}.swap",
            segment::file_name(group.base_offset, "log")
        ));
        fs::rename(&group.path, &swap).at(&group.path)?;
        sync_dir(&dir)?;
        let replaced: Vec<LogSegment> = self.segments.drain(first..first + n).collect();
        for seg in &replaced {
            seg.delete_files()?;
        }
        let target = dir.join(segment::file_name(group.base_offset, "log"));
        fs::rename(&swap, &target).at(&swap)?;
        sync_dir(&dir)?;
        let interval = u64::from(self.config.index_interval_bytes);
        let (mut seg, _) =
            LogSegment::open(&dir, group.base_offset, false, false, interval, now_ms)?;
        seg.txn_index.reset()?;
        for entry in group.aborted {
            seg.txn_index.push(entry);
        }
        seg.txn_index_stale = false;
        seg.flush()?;
        seg.release_log();
        self.segments.insert(first, seg);
        Ok(true)
    }
}

/// At open, before the segments are read: a `.cleaned` file is an unfinished clean, and
/// goes; a `<base>.log.swap` is a finished one whose install was interrupted, and completes:
/// the segment files it overlaps (`[base, its next offset)`) go, and it becomes
/// `<base>.log` (Kafka's `LogLoader`). Index files of the new segment are rebuilt by the
/// open that follows.
///
/// # Errors
/// [`LogError::Io`].
pub(super) fn complete_interrupted_swaps(dir: &Path) -> Result<(), LogError> {
    let mut swaps = Vec::new();
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.ends_with(".cleaned") {
            tracing::info!(file = %path.display(), "removing an unfinished clean");
            fs::remove_file(&path).at(&path)?;
        } else if let Some(stem) = name.strip_suffix(".log.swap")
            && let Ok(base) = stem.parse::<i64>()
        {
            swaps.push((base, path));
        } else if name.ends_with(".swap") {
            // An index's swap (Strata writes none; Kafka's): rebuilt from the log.
            fs::remove_file(&path).at(&path)?;
        }
    }
    for (base, swap) in swaps {
        let next = next_offset_of(&swap)?.unwrap_or(base);
        for entry in fs::read_dir(dir).at(dir)? {
            let entry = entry.at(dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((stem, ext)) = name.split_once('.') else {
                continue;
            };
            if !SEGMENT_SUFFIXES.contains(&ext) {
                continue;
            }
            if let Ok(other) = stem.parse::<i64>()
                && other >= base
                && other < next.max(base + 1)
            {
                fs::remove_file(entry.path()).at(&entry.path())?;
            }
        }
        let target = dir.join(segment::file_name(base, "log"));
        tracing::info!(file = %swap.display(), "completing an interrupted clean");
        fs::rename(&swap, &target).at(&swap)?;
    }
    sync_dir(dir)
}

/// One past the last offset of the batches in a `.log` file, `None` when it holds none.
fn next_offset_of(path: &Path) -> Result<Option<i64>, LogError> {
    let bytes = fs::read(path).at(path)?;
    let mut next = None;
    for view in record_batch::batches(&bytes).map_while(Result::ok) {
        let view: RecordBatchView<'_> = view;
        next = Some(view.last_offset() + 1);
    }
    Ok(next)
}
