//! The partition log: an ordered list of segments, the last of which takes appends.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_protocol::record_batch::{self, RecordBatchView, TimestampType};

use crate::error::{IoContext, LogError};
use crate::leader_epoch::{self, LeaderEpochCache, LeaderEpochCheckpointError};
use crate::producer_state::{
    AppendOrigin, AppendPlan, DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerState,
};
use crate::region::{AppendInfo, ReadResult, TimestampOffset};
use crate::segment::LogSegment;
use crate::txn_index::{AbortedTxn, collect_aborted};
use crate::{LogConfig, segment};

mod clean;
/// Suffixes of files that Kafka leaves behind mid-operation (async segment deletion,
/// compaction output). A `.deleted` segment was already dropped from the log; `.cleaned` and
/// `.swap` files are dealt with first, by [`clean::complete_interrupted_swaps`].
const LEFTOVER_SUFFIXES: [&str; 1] = [".deleted"];

/// One partition's log in Kafka's on-disk layout (see the crate docs).
///
/// Not internally synchronised: the broker holds it behind a mutex. `read` and the other
/// `&self` methods only do positional reads of a few header bytes per batch.
///
/// The log start offset moves past the first segment's base offset only through
/// [`Log::increment_log_start_offset`] (DeleteRecords); the broker persists it in the log
/// directory's `log-start-offset-checkpoint` and gives it back after a restart through
/// [`Log::restore_log_start_offset`]. The leader epoch cache is persisted too
/// (`leader-epoch-checkpoint`, KIP-101; see [`Log::leader_epochs`]).
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    /// Sorted by base offset, never empty; the last is the active segment.
    segments: Vec<LogSegment>,
    /// The first offset readable; at or after the first segment's base offset.
    log_start_offset: i64,
    /// Records appended since the last fsync (`flush.messages`).
    unflushed_messages: i64,
    /// The lowest offset a truncation cut the log at since [`Log::take_truncation`] last
    /// asked: the log cleaner lowers its checkpoint there (Kafka's `maybeTruncateCheckpoint`).
    truncated_at: Option<i64>,
    /// Broker time of the last fsync, or of opening (`flush.ms`).
    last_flush_ms: i64,
    /// Idempotent producers' sequence state (KIP-98) and its `.snapshot` files.
    producer_state: ProducerState,
    /// Every offset below this is on disk (Kafka's `recoveryPoint`): an unclean start trusts
    /// the segments that end at or below it and recovers the rest. Advanced when an fsync that
    /// covered every segment below it completes; persisted by the broker in the log
    /// directory's `recovery-point-offset-checkpoint`.
    recovery_point: i64,
    /// Segments sealed by a roll whose fsync has not completed yet, oldest first: a roll
    /// leaves the fsync to the caller, off the append path, and any flush takes these along.
    unflushed_sealed: Vec<SealedFlush>,
    /// A roll happened since [`Log::take_roll_flush_request`] last said so.
    roll_flush_wanted: bool,
    /// KIP-101: the first offset of each leader epoch in this log, mirrored in
    /// `leader-epoch-checkpoint`. The file is written (and fsynced) before the first batch of
    /// a new epoch, so after a crash it never lacks an epoch the log holds; entries past the
    /// recovered log end are dropped at open.
    leader_epochs: LeaderEpochCache,
}

/// A sealed segment's files waiting for their fsync, and where that leaves the log.
#[derive(Debug)]
struct SealedFlush {
    /// The segment's end (the next segment's base offset): the recovery point once this and
    /// every earlier segment are on disk.
    end_offset: i64,
    /// `.log`, `.index`, `.timeindex`, and the directory (the new segment's name).
    files: Vec<Arc<fs::File>>,
}

impl Log {
    /// Opens the log in `dir` (`<topic>-<partition>/`), creating it if needed, and recovers:
    /// leftover `.deleted`/`.cleaned`/`.swap` files and indexes without a `.log` are removed,
    /// the active segment is rescanned and truncated at the first torn or corrupt batch, and
    /// sealed segments get their indexes rebuilt if missing or inconsistent.
    ///
    /// # Errors
    /// [`LogError::Io`] when the directory or a segment cannot be read or written.
    /// This is for logs whose rolls fsync before they return (every caller that appends
    /// through [`Log::append`] and rolls through [`Log::roll_if_not_empty`]), so sealed
    /// segments are trusted. The broker's partitions, whose rolls leave the fsync for later,
    /// open through [`Log::open_with`].
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<Log, LogError> {
        Self::open_recovering_from(dir, config, now_ms, false, i64::MAX)
    }

    /// Opens a broker partition's log. After a clean shutdown (`clean`: the broker's marker
    /// was there, so every log was closed by [`Log::prepare_clean_shutdown`]) every segment's
    /// indexes are loaded and its tail checked, the active one's CRC-checked, instead of
    /// rescanning; if they do not match the log the segment is recovered as after a crash.
    ///
    /// After an unclean shutdown the log's recovery point is read from its log directory's
    /// `recovery-point-offset-checkpoint` (0, recover everything, when missing, as in Kafka)
    /// and every segment holding offsets at or above it is recovered, not only the active
    /// one: a roll's fsync runs after the roll, so a sealed segment above the recovery point
    /// may have lost its tail. A recovered segment that was cut short becomes the active one
    /// and every later segment is deleted, as Kafka's recovery does.
    ///
    /// # Errors
    /// As [`Log::open`].
    pub fn open_with(
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
        clean: bool,
    ) -> Result<Log, LogError> {
        Self::open_recovering_from(dir, config, now_ms, clean, -1)
    }

    /// As [`Log::open_with`], with the recovery point given by the caller instead of read
    /// from the checkpoint file (0 recovers every segment): a broker opening many partitions
    /// reads the file once ([`crate::checkpoint::recovery_points`]).
    ///
    /// # Errors
    /// As [`Log::open`].
    pub fn open_with_recovery_point(
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
        clean: bool,
        recovery_point: i64,
    ) -> Result<Log, LogError> {
        Self::open_recovering_from(dir, config, now_ms, clean, recovery_point.max(0))
    }

    /// `recovery_point`: -1 to read it from the checkpoint file when unclean.
    fn open_recovering_from(
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
        clean: bool,
        recovery_point: i64,
    ) -> Result<Log, LogError> {
        fs::create_dir_all(dir).at(dir)?;
        clean::complete_interrupted_swaps(dir)?;
        let mut logs = Vec::new();
        let mut indexes = Vec::new();
        for entry in fs::read_dir(dir).at(dir)? {
            let entry = entry.at(dir)?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if LEFTOVER_SUFFIXES.iter().any(|s| name.ends_with(s)) {
                tracing::info!(file = %path.display(), "removing leftover file");
                fs::remove_file(&path).at(&path)?;
                continue;
            }
            let Some((stem, ext)) = name.split_once('.') else {
                continue;
            };
            // Exactly 20 ASCII digits: rejects "-000…1" and names we did not write.
            let Some(base) = (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
                .then(|| stem.parse::<i64>().ok())
                .flatten()
            else {
                continue;
            };
            match ext {
                "log" => logs.push(base),
                "index" | "timeindex" | "txnindex" => indexes.push((base, path)),
                _ => {}
            }
        }
        logs.sort_unstable();
        for (base, path) in indexes {
            if logs.binary_search(&base).is_err() {
                // Kafka: "Found an orphaned index file"; its segment was deleted or never made.
                tracing::info!(file = %path.display(), "removing orphaned index");
                fs::remove_file(&path).at(&path)?;
            }
        }
        let interval = u64::from(config.index_interval_bytes);
        // Only a log with sealed segments has anything to look up.
        let recovery_point = if clean || logs.len() < 2 {
            i64::MAX
        } else if recovery_point < 0 {
            crate::checkpoint::recovery_point_of(dir)
        } else {
            recovery_point
        };
        let above = logs
            .windows(2)
            .filter(|w| !clean && w[1] > recovery_point)
            .count();
        if above > 0 {
            // Kafka: "Recovering unflushed segment".
            tracing::info!(dir = %dir.display(), recovery_point, sealed_segments = above,
                "recovering sealed segments above the recovery point");
        }
        let mut segments = Vec::with_capacity(logs.len().max(1));
        let mut recovered = Vec::with_capacity(logs.len());
        for (i, &base) in logs.iter().enumerate() {
            let active = i + 1 == logs.len();
            // A sealed segment is below the recovery point when the next one starts at or
            // below it (Kafka recovers the segments holding offsets >= the recovery point).
            let trust = clean || (!active && logs[i + 1] <= recovery_point);
            let (mut seg, cut) = LogSegment::open(dir, base, active, trust, interval, now_ms)?;
            recovered.push(!trust);
            // Below the recovery point a cut is damage to fsynced data, not a lost tail: the
            // later segments are durable and stay.
            if cut > 0 && !active && !trust {
                tracing::warn!(dir = %dir.display(), base_offset = base, next_offset = seg.next_offset,
                    later_segments = logs.len() - i - 1,
                    "sealed segment above the recovery point was torn; deleting the segments after it");
                for &later in &logs[i + 1..] {
                    for suffix in ["log", "index", "timeindex", "txnindex"] {
                        let p = dir.join(segment::file_name(later, suffix));
                        match fs::remove_file(&p) {
                            Ok(()) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                            Err(e) => return Err(e).at(&p),
                        }
                    }
                }
                sync_dir(dir)?;
                seg.reactivate()?;
                segments.push(seg);
                break;
            }
            segments.push(seg);
        }
        // Recovered sealed segments were read from the page cache, which a process crash
        // leaves unwritten: make them durable before they count as below the recovery point.
        let sealed = segments.len().saturating_sub(1);
        for (seg, _) in segments[..sealed]
            .iter_mut()
            .zip(&recovered)
            .filter(|(_, r)| **r)
        {
            seg.flush()?;
            seg.release_log();
        }
        if segments.is_empty() {
            segments.push(new_active_segment(dir, 0, &config)?);
            sync_dir(dir)?;
        }
        let log_start_offset = segments[0].base_offset;
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            unflushed_messages: 0,
            truncated_at: None,
            last_flush_ms: now_ms,
            producer_state: ProducerState::placeholder(dir),
            recovery_point: 0,
            unflushed_sealed: Vec::new(),
            roll_flush_wanted: false,
            leader_epochs: LeaderEpochCache::new(),
        };
        // Everything sealed is on disk now (trusted or flushed above); the active segment is
        // too after a clean shutdown, and after a crash counts from its base.
        log.recovery_point = if clean {
            log.log_end_offset()
        } else {
            log.active().base_offset
        };
        // The transaction indexes of recovered segments, and of any whose file was damaged,
        // are rebuilt by replaying the log from a producer snapshot at or below the first.
        let rebuild_from = log
            .segments
            .iter()
            .filter(|s| s.txn_index_stale)
            .map(|s| s.base_offset)
            .min()
            .unwrap_or(i64::MAX);
        log.reload_producer_state(now_ms, rebuild_from)?;
        log.load_leader_epochs()?;
        Ok(log)
    }

    /// Rebuilds the producer state from the latest snapshot at or below `scan_from_at_most`
    /// plus a scan of the log after it, and makes every segment's `.txnindex` agree with the
    /// scan: entries from the scan's start on are replaced by the aborts the scan found.
    /// Sealed segments whose index changed are written out and fsynced at once, since
    /// nothing else writes a sealed segment again.
    fn reload_producer_state(
        &mut self,
        now_ms: i64,
        scan_from_at_most: i64,
    ) -> Result<(), LogError> {
        let (state, from, aborted) = ProducerState::load(self, now_ms, scan_from_at_most)?;
        self.producer_state = state;
        let mut touched = vec![false; self.segments.len()];
        for (seg, touched) in self.segments.iter_mut().zip(&mut touched) {
            let before = seg.txn_index.entries().len();
            seg.txn_index.truncate_to(from)?;
            *touched = seg.txn_index.entries().len() != before;
            seg.txn_index_stale = false;
        }
        for entry in aborted {
            let i = self.segment_index_for(entry.last_offset);
            self.segments[i].txn_index.push(entry);
            touched[i] = true;
        }
        let sealed = self.segments.len() - 1;
        for (seg, _) in self.segments[..sealed]
            .iter_mut()
            .zip(touched)
            .filter(|(_, t)| *t)
        {
            if let Some(f) = seg.txn_index.write_out()? {
                f.sync_data().at(seg.txn_index.path())?;
            }
        }
        Ok(())
    }

    /// Loads `leader-epoch-checkpoint` and makes it agree with the recovered log (Kafka's
    /// `LogLoader`: `truncateFromEnd(logEndOffset)`, `truncateFromStart(logStartOffset)`). A
    /// log with records but no checkpoint (written before the cache existed) or with one that
    /// does not parse gets its cache rebuilt from the batch headers, as Kafka's segment
    /// recovery assigns each batch's epoch; the file is rewritten when anything changed.
    fn load_leader_epochs(&mut self) -> Result<(), LogError> {
        let path = self.dir.join(leader_epoch::LEADER_EPOCH_CHECKPOINT_FILE);
        let exists = fs::symlink_metadata(&path).is_ok();
        let has_records = self.log_end_offset() > self.log_start_offset;
        let (mut cache, mut changed) = match leader_epoch::read_checkpoint(&self.dir) {
            Ok(cache) if exists || !has_records => (cache, false),
            Ok(_) => (self.scan_leader_epochs()?, true),
            Err(LeaderEpochCheckpointError::Corrupt { line, reason, .. }) => {
                tracing::warn!(dir = %self.dir.display(), line, reason,
                    "corrupt leader epoch checkpoint; rebuilding it from the log");
                (self.scan_leader_epochs()?, true)
            }
            Err(LeaderEpochCheckpointError::Io { path, source }) => {
                return Err(LogError::Io { path, source });
            }
        };
        changed |= cache.truncate_from_end(self.log_end_offset());
        changed |= cache.truncate_from_start(self.log_start_offset);
        if changed {
            self.write_leader_epochs(&cache)?;
        }
        self.leader_epochs = cache;
        Ok(())
    }

    /// The epoch cache the batch headers imply: each batch whose epoch is newer than every
    /// epoch before it starts that epoch (Kafka's `LogSegment.recover`).
    fn scan_leader_epochs(&self) -> Result<LeaderEpochCache, LogError> {
        let mut cache = LeaderEpochCache::new();
        for seg in &self.segments {
            let mut pos = 0;
            while let Some(h) = seg.header_at(pos)? {
                if cache.latest_epoch().is_none_or(|e| h.leader_epoch > e) {
                    cache.assign(h.leader_epoch, h.base_offset.max(self.log_start_offset));
                }
                pos += h.len;
            }
        }
        Ok(cache)
    }

    /// Writes `cache` to `leader-epoch-checkpoint` (atomically, fsynced).
    fn write_leader_epochs(&self, cache: &LeaderEpochCache) -> Result<(), LogError> {
        leader_epoch::write_checkpoint(&self.dir, cache).map_err(|e| match e {
            LeaderEpochCheckpointError::Io { path, source } => LogError::Io { path, source },
            LeaderEpochCheckpointError::Corrupt { path, reason, .. } => LogError::Io {
                path,
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason),
            },
        })
    }

    /// Applies a change to the epoch cache and persists it. The cache takes the change only
    /// once the file holds it, so it never claims what the checkpoint does not.
    fn change_leader_epochs(
        &mut self,
        change: impl FnOnce(&mut LeaderEpochCache) -> bool,
    ) -> Result<bool, LogError> {
        let mut next = self.leader_epochs.clone();
        if !change(&mut next) {
            return Ok(false);
        }
        self.write_leader_epochs(&next)?;
        self.leader_epochs = next;
        Ok(true)
    }

    /// The leader epoch cache (KIP-101): the first offset of each epoch in this log.
    pub fn leader_epochs(&self) -> &LeaderEpochCache {
        &self.leader_epochs
    }

    /// OffsetForLeaderEpoch's answer for `epoch`: `(epoch, end offset)` as Kafka's
    /// `LeaderEpochFileCache.endOffsetFor` gives it, the newest epoch ending at the log end;
    /// `(-1, -1)` when the cache cannot place it.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.leader_epochs
            .end_offset_for(epoch, self.log_end_offset())
    }

    /// Starts `epoch` at the log end if it is newer than every epoch in the cache: what
    /// Kafka's `Partition.makeLeader` does on becoming leader, so OffsetForLeaderEpoch for
    /// the leader's own epoch answers the log end before anything is written in it. Returns
    /// whether the cache changed.
    ///
    /// # Errors
    /// [`LogError::Io`] when the checkpoint cannot be written (the cache is then unchanged).
    pub fn maybe_assign_leader_epoch(&mut self, epoch: i32) -> Result<bool, LogError> {
        if self
            .leader_epochs
            .latest_epoch()
            .is_some_and(|e| e >= epoch)
        {
            return Ok(false);
        }
        let start = self.log_end_offset();
        self.change_leader_epochs(|c| c.assign(epoch, start))
    }

    fn active(&self) -> &LogSegment {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments
            .last_mut()
            .expect("a log always has an active segment")
    }

    /// Validates, stamps and appends a produced record set.
    ///
    /// Every batch is validated before anything is written, so a bad batch rejects the whole
    /// set (Kafka does the same per partition). Each batch then gets the next offsets and
    /// `leader_epoch` written into its header, and under LogAppendTime `now_ms` as its max
    /// timestamp (the only case where the CRC is recomputed). The active segment is rolled
    /// first if the set would overflow it, it is older than `segment.ms`, or its indexes
    /// are full.
    ///
    /// An empty record set appends nothing and answers offsets -1.
    ///
    /// # Errors
    /// [`LogError::CorruptMessage`], [`LogError::InvalidRecord`] and
    /// [`LogError::MessageTooLarge`] for bad input (nothing written); [`LogError::Io`].
    pub fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let info = self.append_unflushed(records, leader_epoch, now_ms)?;
        // This path has nobody to hand a roll's fsync to: make it here, as a roll used to.
        self.roll_flush_wanted = false;
        self.flush_sealed()?;
        self.maybe_flush(now_ms)?;
        Ok(info)
    }

    /// [`Log::append`] without the flush policy: nothing is fsynced here. The caller checks
    /// [`Log::flush_messages_due`] and, when it says so, fsyncs through [`Log::begin_flush`] before it
    /// exposes or acknowledges the records (the broker's group commit).
    ///
    /// # Errors
    /// As [`Log::append`].
    pub fn append_unflushed(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append_from(records, leader_epoch, now_ms, AppendOrigin::Client)
    }

    /// [`Log::append_unflushed`] for the metadata quorum's log, whose own control records
    /// (Kafka's `AppendOrigin.RAFT_LEADER`) a client's append refuses.
    ///
    /// # Errors
    /// As [`Log::append`].
    pub fn append_raft_unflushed(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append_from(records, leader_epoch, now_ms, AppendOrigin::RaftLeader)
    }

    /// [`Log::append_unflushed`] for a coordinator's own transactional records (Kafka's
    /// `AppendOrigin.COORDINATOR`: TxnOffsetCommit's offsets): the producer's epoch and
    /// transaction are checked, its sequence is not (the coordinator writes none).
    ///
    /// # Errors
    /// As [`Log::append`], and [`LogError::InvalidProducerEpoch`].
    pub fn append_coordinator_unflushed(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append_from(records, leader_epoch, now_ms, AppendOrigin::Coordinator)
    }

    /// Appends a transaction marker for `producer_id` as the partition's leader (Kafka's
    /// `appendAsLeader` with `AppendOrigin.COORDINATOR`): the control batch of Kafka's
    /// layout, checked against the producer state (epoch, coordinator epoch; see
    /// [`crate::producer_state`]). An ABORT that ends an open transaction adds its entry to
    /// the `.txnindex`. Nothing is fsynced here, as with [`Log::append_unflushed`].
    ///
    /// # Errors
    /// [`LogError::InvalidProducerEpoch`], [`LogError::TransactionCoordinatorFenced`] (nothing
    /// written); [`LogError::Io`].
    pub fn append_marker(
        &mut self,
        marker: &TxnMarker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let mut batch = record_batch::encode_end_txn_marker(
            marker.producer_id,
            marker.producer_epoch,
            record_batch::EndTxnMarker {
                commit: marker.commit,
                coordinator_epoch: marker.coordinator_epoch,
            },
            now_ms,
        )
        .to_vec();
        self.append_from(&mut batch, leader_epoch, now_ms, AppendOrigin::Coordinator)
    }

    fn append_from(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
        origin: AppendOrigin,
    ) -> Result<AppendInfo, LogError> {
        let max = self.config.max_message_bytes as usize;
        let mut summaries = Vec::new();
        let mut pos = 0;
        while pos < records.len() {
            let rest = &records[pos..];
            let len =
                record_batch::peek_total_len(rest).map_err(|e| LogError::from_batch(pos, e))?;
            if len > max {
                return Err(LogError::MessageTooLarge { size: len, max });
            }
            let summary = record_batch::validate_batch(rest, pos)
                .map_err(|e| LogError::from_batch(pos, e))?;
            pos += summary.len;
            summaries.push(summary);
        }
        let log_append_time = match self.config.timestamp_type {
            TimestampType::LogAppendTime => now_ms,
            TimestampType::CreateTime => -1,
        };
        if summaries.is_empty() {
            return Ok(AppendInfo {
                base_offset: -1,
                last_offset: -1,
                log_append_time,
                record_count: 0,
                log_start_offset: self.log_start_offset,
            });
        }
        let record_count: i64 = summaries.iter().map(|s| i64::from(s.record_count)).sum();
        let base_offset = self.log_end_offset();
        let last_offset = base_offset + record_count - 1;
        // KIP-98: sequence and epoch checks, before anything is written.
        let producer_updates = match self.producer_state.plan_append(
            records,
            &summaries,
            base_offset,
            log_append_time,
            origin,
        )? {
            AppendPlan::Append(updates) => updates,
            AppendPlan::Duplicate(dup) => {
                // Rare (a retry after a lost response), and worth seeing when it happens.
                tracing::info!(dir = %self.dir.display(), first_offset = dup.first_offset(),
                    last_offset = dup.last_offset, "duplicate idempotent batch acknowledged with its original offsets");
                return Ok(AppendInfo {
                    base_offset: dup.first_offset(),
                    last_offset: dup.last_offset,
                    log_append_time: if log_append_time >= 0 {
                        dup.timestamp
                    } else {
                        -1
                    },
                    record_count: 0,
                    log_start_offset: self.log_start_offset,
                });
            }
        };
        if self.needs_roll(records.len() as u64, last_offset, now_ms) {
            self.roll()?;
        }
        // KIP-101 (Kafka's `maybeAssignEpochStartOffset`): a new epoch's first offset is in
        // the checkpoint before any of its batches is written.
        if let Some(latest) = self.leader_epochs.latest_epoch()
            && leader_epoch < latest
        {
            // Kafka's `assign` warns alike: the newer epochs are dropped from the cache.
            tracing::warn!(dir = %self.dir.display(), leader_epoch, latest_epoch = latest,
                base_offset, "append in a leader epoch older than the newest in the epoch cache");
        }
        if self.leader_epochs.latest_epoch() != Some(leader_epoch) {
            self.change_leader_epochs(|c| c.assign(leader_epoch, base_offset))?;
        }
        let mut next = base_offset;
        let mut placed = Vec::with_capacity(summaries.len());
        for s in &summaries {
            let batch = &mut records[s.position..s.position + s.len];
            record_batch::set_base_offset(batch, next);
            record_batch::set_partition_leader_epoch(batch, leader_epoch);
            let max_ts = if log_append_time >= 0 {
                record_batch::set_log_append_time(batch, now_ms);
                TimestampOffset {
                    timestamp: now_ms,
                    offset: next,
                }
            } else {
                TimestampOffset {
                    timestamp: s.max_timestamp,
                    offset: next + i64::from(s.offset_delta_of_max_timestamp),
                }
            };
            let last = next + i64::from(s.last_offset_delta);
            placed.push((s.position, s.len, last, max_ts));
            next = last + 1;
        }
        let interval = u64::from(self.config.index_interval_bytes);
        self.active_mut()
            .append(records, &placed, interval, now_ms)?;
        let aborted = self
            .producer_state
            .table
            .commit(producer_updates, last_offset + 1);
        self.index_aborted(aborted);
        self.unflushed_messages = self.unflushed_messages.saturating_add(record_count);
        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_append_time,
            record_count: u32::try_from(record_count).unwrap_or(u32::MAX),
            log_start_offset: self.log_start_offset,
        })
    }

    /// Appends record batches a follower fetched from its partition leader (Kafka's
    /// `appendAsFollower`): offsets, leader epochs and timestamps stay as the leader wrote
    /// them, and nothing is fsynced here. Each batch is validated (CRC, counts) as a
    /// produced one is; batches wholly below the log end are skipped (a fetch answers the
    /// whole batch holding its offset), and the first kept batch must start exactly at the
    /// log end, each next one right after the previous one.
    ///
    /// # Errors
    /// [`LogError::CorruptMessage`] and [`LogError::InvalidRecord`] for a batch that does not
    /// validate, [`LogError::UnexpectedOffset`] for a gap or overlap (nothing written);
    /// [`LogError::Io`].
    pub fn append_as_follower(
        &mut self,
        records: &mut [u8],
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let end = self.log_end_offset();
        let mut summaries = Vec::new();
        let mut pos = 0;
        let mut start = None;
        let mut next = end;
        while pos < records.len() {
            let rest = &records[pos..];
            let len =
                record_batch::peek_total_len(rest).map_err(|e| LogError::from_batch(pos, e))?;
            if len > rest.len() {
                // A fetch response may end with a partial batch: it is left for the next fetch.
                break;
            }
            // The leader's log may have been cleaned: a batch may hold fewer records than
            // its offsets, or none, and offsets may jump (Kafka's follower append allows both).
            let summary = record_batch::validate_replicated_batch(&rest[..len], pos)
                .map_err(|e| LogError::from_batch(pos, e))?;
            let view =
                RecordBatchView::parse(&rest[..len]).map_err(|e| LogError::from_batch(pos, e))?;
            let base = view.base_offset();
            let last = base + i64::from(summary.last_offset_delta);
            pos += summary.len;
            if last < end {
                continue;
            }
            if base < next {
                return Err(LogError::UnexpectedOffset {
                    expected: next,
                    found: base,
                });
            }
            start.get_or_insert(summary.position);
            next = last + 1;
            summaries.push(summary);
        }
        let Some(start) = start else {
            return Ok(AppendInfo {
                base_offset: -1,
                last_offset: -1,
                log_append_time: -1,
                record_count: 0,
                log_start_offset: self.log_start_offset,
            });
        };
        let records = &mut records[start..pos];
        for s in &mut summaries {
            s.position -= start;
        }
        let last_offset = next - 1;
        let bytes = records.len() as u64;
        if self.needs_roll(bytes, last_offset, now_ms) {
            self.roll()?;
        }
        let mut placed = Vec::with_capacity(summaries.len());
        for s in &summaries {
            let batch = &records[s.position..s.position + s.len];
            let view =
                RecordBatchView::parse(batch).map_err(|e| LogError::from_batch(s.position, e))?;
            let offset = view.base_offset();
            let epoch = view.partition_leader_epoch();
            // KIP-101: a batch of a newer epoch starts it in the cache before it is written.
            if self.leader_epochs.latest_epoch().is_none_or(|e| epoch > e) {
                self.change_leader_epochs(|c| c.assign(epoch, offset))?;
            }
            let last = offset + i64::from(s.last_offset_delta);
            let max_ts = TimestampOffset {
                timestamp: view.max_timestamp(),
                offset: if view.max_timestamp() == s.max_timestamp {
                    offset + i64::from(s.offset_delta_of_max_timestamp)
                } else {
                    last
                },
            };
            placed.push((s.position, s.len, last, max_ts));
        }
        let interval = u64::from(self.config.index_interval_bytes);
        self.active_mut()
            .append(records, &placed, interval, now_ms)?;
        let aborted = self.producer_state.replay_replicated(records, &summaries);
        self.index_aborted(aborted);
        let record_count = next - end;
        self.unflushed_messages = self.unflushed_messages.saturating_add(record_count);
        Ok(AppendInfo {
            base_offset: end,
            last_offset,
            log_append_time: -1,
            record_count: u32::try_from(record_count).unwrap_or(u32::MAX),
            log_start_offset: self.log_start_offset,
        })
    }

    /// Adds the entries of transactions an append aborted to the active segment's
    /// `.txnindex`, where their markers are.
    fn index_aborted(&mut self, aborted: Vec<AbortedTxn>) {
        for entry in aborted {
            self.active_mut().txn_index.push(entry);
        }
    }

    /// Kafka's `LogSegment.shouldRoll`, checked before appending `bytes` ending at
    /// `last_offset`. An empty segment never rolls: anything fits in it.
    fn needs_roll(&self, bytes: u64, last_offset: i64, now_ms: i64) -> bool {
        let seg = self.active();
        if seg.size() == 0 {
            return false;
        }
        let full = seg.size() + bytes > self.config.effective_segment_bytes();
        let aged = seg
            .roll_base_ms()
            .is_some_and(|t| now_ms.saturating_sub(t) > self.config.segment_ms);
        let indexes_full = seg.indexes_full(u64::from(self.config.segment_index_bytes));
        // Relative offsets in the indexes are 4 bytes.
        let offset_overflow = last_offset - seg.base_offset > i64::from(i32::MAX);
        full || aged || indexes_full || offset_overflow
    }

    /// Seals the active segment (final time index entry, indexes written) and starts a new
    /// one at the log end offset. Nothing is fsynced here: as Kafka's roll schedules
    /// `flush-log` up to the new segment's base offset, the sealed segment's files (and the
    /// directory, for the new name) wait in `unflushed_sealed` for the next flush, and
    /// [`Log::take_roll_flush_request`] tells the caller to arrange one.
    fn roll(&mut self) -> Result<(), LogError> {
        let next = self.log_end_offset();
        let sealed_base = self.active().base_offset;
        let mut files = self.active_mut().seal()?;
        let seg = new_active_segment(&self.dir, next, &self.config)?;
        // Kafka snapshots producer state on roll and keeps the latest two snapshots; the
        // snapshot's fsync goes with the segment's.
        if let Some(snapshot) = self.producer_state.take_snapshot_unsynced()? {
            files.push(Arc::new(snapshot));
        }
        files.push(Arc::new(fs::File::open(&self.dir).at(&self.dir)?));
        self.unflushed_sealed.push(SealedFlush {
            end_offset: next,
            files,
        });
        self.roll_flush_wanted = true;
        self.producer_state.delete_snapshots_before(sealed_base)?;
        tracing::debug!(dir = %self.dir.display(), base_offset = next, "rolled segment");
        self.segments.push(seg);
        Ok(())
    }

    /// Reads whole batches from the one holding `offset` (a fetch offset inside a batch
    /// returns the whole batch, as in Kafka; the client skips the earlier records).
    ///
    /// Stops before the first batch whose last offset is >= `max_offset` (the high watermark)
    /// or that would take the total past `max_bytes`, except that with `min_one_batch` the
    /// first batch is returned whatever its size (KIP-74). The read continues into the next
    /// segments while the budget allows; each segment contributes at most one region.
    ///
    /// # Errors
    /// [`LogError::OffsetOutOfRange`] unless `log_start <= offset <= log_end`;
    /// [`LogError::CorruptSegment`] if a batch header in the way does not parse.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u32,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        let log_end = self.log_end_offset();
        if offset < self.log_start_offset || offset > log_end {
            return Err(LogError::OffsetOutOfRange {
                requested: offset,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        let mut result = ReadResult::default();
        if offset == log_end || offset >= max_offset {
            return Ok(result);
        }
        let max_bytes = u64::from(max_bytes);
        let first = self.segment_index_for(offset);
        for (i, seg) in self.segments.iter().enumerate().skip(first) {
            let start = if i == first {
                match seg.find_batch(offset)? {
                    Some(h) => h.position,
                    None => continue,
                }
            } else {
                0
            };
            let mut pos = start;
            let mut stop = false;
            while let Some(h) = seg.header_at(pos)? {
                let allowed = h.last_offset < max_offset
                    && (result.bytes + (pos - start) + h.len <= max_bytes
                        || (min_one_batch && result.bytes == 0 && pos == start));
                if !allowed {
                    stop = true;
                    break;
                }
                pos += h.len;
            }
            if pos > start {
                let len = pos - start;
                seg.push_regions(start, len, &mut result.regions)?;
                result.bytes += len;
            }
            if stop {
                break;
            }
        }
        Ok(result)
    }

    /// Index of the segment whose range holds `offset`: the last with base <= offset.
    fn segment_index_for(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1)
    }

    /// The first readable offset.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The base offset of the oldest segment: where the log would start after a restart if
    /// nothing recorded a later start.
    pub fn first_segment_base_offset(&self) -> i64 {
        self.segments[0].base_offset
    }

    /// One past the last offset appended.
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }

    /// ListOffsets by timestamp: the earliest record at or after the log start offset with
    /// timestamp >= `ts`, looking inside batches (compressed ones decompressed, bounded), as
    /// Kafka's `fetchOffsetByTimestamp` does. `None` if no record is that late. The special
    /// timestamps (-1 latest, -2 earliest) are the broker's to resolve; -3 is
    /// [`Log::max_timestamp`].
    ///
    /// # Errors
    /// [`LogError::CorruptSegment`], [`LogError::Io`], [`LogError::Decompress`].
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<TimestampOffset>, LogError> {
        for seg in &self.segments {
            // A segment wholly below the log start (DeleteRecords moved it, retention has
            // not dropped it yet) holds nothing to answer with.
            if seg.next_offset <= self.log_start_offset {
                continue;
            }
            if let Some(found) = seg.find_timestamp(ts, self.log_start_offset)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The largest timestamp and where the append path saw it (KIP-734's MAX_TIMESTAMP); the
    /// earliest wins a tie. Batch granularity (base offset) for compressed batches, which the
    /// append path does not decompress; [`Log::max_timestamp_record`] finds the record.
    pub fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.max_timestamp_segment().map(|(m, _)| m)
    }

    /// ListOffsets' MAX_TIMESTAMP: the record with the largest timestamp, found inside its
    /// batch (compressed ones decompressed, bounded), as Kafka does since KAFKA-16310.
    ///
    /// # Errors
    /// [`LogError::CorruptSegment`], [`LogError::Io`], [`LogError::Decompress`].
    pub fn max_timestamp_record(&self) -> Result<Option<TimestampOffset>, LogError> {
        let Some((m, seg)) = self.max_timestamp_segment() else {
            return Ok(None);
        };
        Ok(Some(
            seg.find_timestamp(m.timestamp, m.offset)?.unwrap_or(m),
        ))
    }

    fn max_timestamp_segment(&self) -> Option<(TimestampOffset, &LogSegment)> {
        let mut best: Option<(TimestampOffset, &LogSegment)> = None;
        for seg in &self.segments {
            if let Some(m) = seg.max_timestamp()
                && best.is_none_or(|(b, _)| m.timestamp > b.timestamp)
            {
                best = Some((m, seg));
            }
        }
        best
    }

    /// Kafka's `maybeIncrementLogStartOffset` for DeleteRecords: moves the log start offset up
    /// to `offset`, never down (an offset at or below the current start changes nothing), and
    /// returns the log start offset after the call. Reads below it fail with
    /// [`LogError::OffsetOutOfRange`] from now on. Nothing is deleted or written here: the
    /// caller persists the new start first, then drops the segments wholly below it with
    /// [`Log::delete_segments_below_log_start`] (retention does too).
    ///
    /// # Errors
    /// [`LogError::LogStartAboveHighWatermark`] when `offset > high_watermark`; the log is
    /// unchanged.
    pub fn increment_log_start_offset(
        &mut self,
        offset: i64,
        high_watermark: i64,
    ) -> Result<i64, LogError> {
        if offset > high_watermark {
            return Err(LogError::LogStartAboveHighWatermark {
                requested: offset,
                high_watermark,
            });
        }
        if offset > self.log_start_offset {
            tracing::info!(dir = %self.dir.display(), from = self.log_start_offset, to = offset,
                "log start offset incremented (record deletion)");
            self.log_start_offset = offset;
            self.producer_state.table.txns_mut().on_log_start(offset);
            // Kafka's `maybeIncrementLogStartOffset`: the epoch covering the new start moves
            // up to it.
            self.change_leader_epochs(|c| c.truncate_from_start(offset))?;
        }
        Ok(self.log_start_offset)
    }

    /// Sets the log start offset read back from `log-start-offset-checkpoint` at start,
    /// bounded by the log: never below the first segment's base offset, never past the log
    /// end (a crash may have cut the tail the checkpoint was taken over). Segments wholly
    /// below it are deleted (a crash after the checkpoint and before their deletion leaves
    /// them behind). Returns the log start offset.
    ///
    /// # Errors
    /// [`LogError::Io`] when a segment cannot be deleted.
    pub fn restore_log_start_offset(&mut self, checkpointed: i64) -> Result<i64, LogError> {
        let start = checkpointed.min(self.log_end_offset());
        if start > self.log_start_offset {
            self.log_start_offset = start;
            self.producer_state.table.txns_mut().on_log_start(start);
            self.change_leader_epochs(|c| c.truncate_from_start(start))?;
            self.delete_segments_below_log_start()?;
        }
        Ok(self.log_start_offset)
    }

    /// Deletes every segment whose offsets all lie below the log start offset (Kafka's
    /// `deleteLogStartOffsetBreachedSegments`: a segment goes when the next one starts at or
    /// below the log start). The active segment always stays. Returns how many went.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn delete_segments_below_log_start(&mut self) -> Result<usize, LogError> {
        self.delete_segments_before(self.log_start_offset)
    }

    /// Deletes the oldest segments that are past `retention.ms` (newest timestamp older than
    /// `now - retention.ms`), then those that `retention.bytes` allows dropping, as Kafka's
    /// `deleteRetentionMsBreachedSegments` / `deleteRetentionSizeBreachedSegments` do. If the
    /// active segment itself goes, a fresh empty one is rolled at the log end first, so the log
    /// end offset never moves back. Returns the number of segments deleted.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<usize, LogError> {
        self.producer_state
            .table
            .remove_expired(now_ms, DEFAULT_PRODUCER_ID_EXPIRATION_MS);
        // Segments left below a log start that DeleteRecords moved go first, as in Kafka.
        let mut deleted = self.delete_segments_below_log_start()?;
        // An empty sealed segment (the cleaner can leave one) holds nothing to keep: it goes
        // with the segments around it rather than stopping retention; the empty active
        // segment stops it.
        let last = self.segments.len() - 1;
        if self.config.retention_ms >= 0 {
            let mut n = 0;
            for (i, seg) in self.segments.iter().enumerate() {
                let empty = seg.size() == 0;
                if (empty && i == last)
                    || (!empty
                        && now_ms.saturating_sub(seg.largest_timestamp()?)
                            <= self.config.retention_ms)
                {
                    break;
                }
                n += 1;
            }
            deleted += self.delete_oldest(n)?;
        }
        if self.config.retention_bytes >= 0 {
            let last = self.segments.len() - 1;
            let mut excess = self.size_bytes() as i64 - self.config.retention_bytes;
            let mut n = 0;
            for (i, seg) in self.segments.iter().enumerate() {
                let size = seg.size() as i64;
                if (size == 0 && i == last) || excess - size < 0 {
                    break;
                }
                excess -= size;
                n += 1;
            }
            deleted += self.delete_oldest(n)?;
        }
        Ok(deleted)
    }

    /// Drops the first `n` segments, rolling first if that would include the active one.
    fn delete_oldest(&mut self, n: usize) -> Result<usize, LogError> {
        if n == 0 {
            return Ok(0);
        }
        if n >= self.segments.len() {
            self.roll()?;
        }
        let gone: Vec<LogSegment> = self.segments.drain(..n).collect();
        self.log_start_offset = self.log_start_offset.max(self.segments[0].base_offset);
        self.producer_state
            .delete_snapshots_before(self.log_start_offset)?;
        let start = self.log_start_offset;
        self.producer_state.table.txns_mut().on_log_start(start);
        self.change_leader_epochs(|c| c.truncate_from_start(start))?;
        for seg in &gone {
            tracing::info!(dir = %self.dir.display(), base_offset = seg.base_offset, "deleting segment by retention");
            seg.delete_files()?;
        }
        Ok(gone.len())
    }

    /// Seals the active segment and starts a new one at the log end, unless the active
    /// segment is empty (then it already starts there). The group coordinator calls this
    /// before it rewrites its live state, so that everything older sits in sealed segments
    /// that [`Log::delete_segments_before`] can drop whole.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn roll_if_not_empty(&mut self) -> Result<(), LogError> {
        if self.active().size() == 0 {
            return Ok(());
        }
        self.roll()?;
        // The coordinator relies on the sealed segment being durable, as it was before rolls
        // left their fsync for later.
        self.roll_flush_wanted = false;
        self.flush_sealed()
    }

    /// Deletes every segment all of whose offsets are below `offset` (a segment goes when
    /// the next one starts at or before `offset`). The active segment is never deleted, so
    /// roll first to include it. The log start offset moves to the first remaining segment.
    /// Returns the number of segments deleted.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn delete_segments_before(&mut self, offset: i64) -> Result<usize, LogError> {
        let n = self
            .segments
            .windows(2)
            .take_while(|w| w[1].base_offset <= offset)
            .count();
        if n == 0 {
            return Ok(0);
        }
        let gone: Vec<LogSegment> = self.segments.drain(..n).collect();
        self.log_start_offset = self.log_start_offset.max(self.segments[0].base_offset);
        self.producer_state
            .delete_snapshots_before(self.log_start_offset)?;
        let start = self.log_start_offset;
        self.producer_state.table.txns_mut().on_log_start(start);
        self.change_leader_epochs(|c| c.truncate_from_start(start))?;
        for seg in &gone {
            tracing::debug!(dir = %self.dir.display(), base_offset = seg.base_offset, "deleting segment below {offset}");
            seg.delete_files()?;
        }
        Ok(gone.len())
    }

    /// fsyncs if `flush.messages` records have been appended since the last fsync or the
    /// oldest unflushed data is `flush.ms` old. The broker calls this periodically; `append`
    /// calls it too.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn maybe_flush(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.unflushed_messages == 0 {
            self.last_flush_ms = now_ms;
            return Ok(());
        }
        if self.unflushed_messages >= self.config.flush_interval_messages
            || now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_interval_ms
        {
            self.flush()?;
            self.last_flush_ms = now_ms;
        }
        Ok(())
    }

    /// Whether `flush.messages` records have been appended since the last fsync: the test
    /// Kafka's append makes (`unflushedMessages >= flushInterval`) before it fsyncs.
    /// `flush.ms` is left to [`Log::maybe_flush`].
    pub fn flush_messages_due(&self) -> bool {
        self.unflushed_messages > 0
            && self.unflushed_messages >= self.config.flush_interval_messages
    }

    /// Starts an fsync that runs outside the log's lock: takes the files of the segments
    /// sealed since the last flush, the active segment's `.log` handle and the log end offset,
    /// and counts everything appended so far as flushed. Once every one of
    /// [`PendingFlush::files`] is fsynced (`fdatasync`), every offset below
    /// [`PendingFlush::end_offset`] is on disk. A roll after this call seals the very file
    /// being fsynced and queues it again, with its indexes, for the next flush.
    ///
    /// The indexes are not written: the active segment's are rebuilt from the `.log` after a
    /// crash (see the crate's crash policy), and a seal or clean shutdown writes them out.
    ///
    /// # Errors
    /// [`LogError::Io`] when the `.log` cannot be reopened for writing.
    pub fn begin_flush(&mut self, now_ms: i64) -> Result<PendingFlush, LogError> {
        let mut files: Vec<Arc<fs::File>> = self
            .unflushed_sealed
            .iter()
            .flat_map(|s| s.files.iter().cloned())
            .collect();
        files.push(self.active_mut().writable_log()?);
        let end_offset = self.log_end_offset();
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
        Ok(PendingFlush {
            files,
            path: self.active().log_path().to_path_buf(),
            end_offset,
        })
    }

    /// Every file of a [`PendingFlush`] that ended at `end_offset` was fsynced: the sealed
    /// segments it took along are done, and the recovery point moves up to `end_offset`.
    pub fn complete_flush(&mut self, end_offset: i64) {
        // `>=`: a segment sealed after the flush began, with no append in between, ends at
        // `end_offset` too, and its indexes and the new segment's name were not in the flush.
        self.unflushed_sealed.retain(|s| s.end_offset >= end_offset);
        let end = end_offset.min(self.log_end_offset());
        if end > self.recovery_point {
            self.recovery_point = end;
        }
    }

    /// Whether a roll sealed a segment since the last call: the caller then queues a flush
    /// ([`Log::begin_flush`]) to make it durable off the append path. Answers true once per
    /// roll, however many later appends ask.
    pub fn take_roll_flush_request(&mut self) -> bool {
        std::mem::take(&mut self.roll_flush_wanted)
    }

    /// Every offset below this is on disk (Kafka's `recoveryPoint`); see [`Log::open_with`].
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    /// fsyncs the sealed segments whose fsync is still waiting, here and now.
    fn flush_sealed(&mut self) -> Result<(), LogError> {
        let Some(last) = self.unflushed_sealed.last() else {
            return Ok(());
        };
        let end_offset = last.end_offset;
        let files: Vec<&fs::File> = self
            .unflushed_sealed
            .iter()
            .flat_map(|s| s.files.iter().map(|f| &**f))
            .collect();
        crate::io::sync_data_all(&files).at(&self.dir)?;
        self.unflushed_sealed.clear();
        self.recovery_point = self.recovery_point.max(end_offset);
        Ok(())
    }

    /// The last writes before a clean shutdown: records the active segment's largest timestamp
    /// in its `.timeindex` (as sealing does, so a clean start can trust the last entry), then
    /// fsyncs it with both indexes.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn prepare_clean_shutdown(&mut self) -> Result<(), LogError> {
        self.active_mut().maybe_append_time_entry();
        self.flush()
    }

    /// fsyncs the sealed segments still waiting for their fsync, then the active segment,
    /// and moves the recovery point to the log end.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.flush_sealed()?;
        self.active_mut().flush()?;
        self.unflushed_messages = 0;
        self.recovery_point = self.log_end_offset();
        Ok(())
    }

    /// Empties the log and restarts it at `offset` (Kafka's `truncateFullyAndStartAt`): a
    /// follower whose log ends below its leader's log start.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.note_truncation(offset);
        for seg in self.segments.drain(..) {
            seg.delete_files()?;
        }
        self.segments
            .push(new_active_segment(&self.dir, offset, &self.config)?);
        sync_dir(&self.dir)?;
        self.log_start_offset = offset;
        self.unflushed_messages = 0;
        self.unflushed_sealed.clear();
        self.recovery_point = offset;
        self.producer_state.delete_snapshots_before(i64::MAX)?;
        self.reload_producer_state(0, i64::MAX)?;
        // Kafka's `truncateFullyAndStartAt` clears the cache.
        self.change_leader_epochs(LeaderEpochCache::clear)?;
        Ok(())
    }

    /// The lowest offset a truncation cut the log at since the last call, if any (see
    /// `truncated_at`); the next call answers `None` until the log is truncated again.
    pub fn take_truncation(&mut self) -> Option<i64> {
        self.truncated_at.take()
    }

    fn note_truncation(&mut self, offset: i64) {
        self.truncated_at = Some(self.truncated_at.map_or(offset, |t| t.min(offset)));
    }

    /// Removes every offset >= `offset` (follower truncation, KIP-101). Later segments are
    /// deleted and the segment holding `offset` is cut at a batch boundary; if `offset` falls
    /// inside a batch the whole batch goes, so the log end may land below `offset`. A target
    /// below the log start empties the log and restarts it at `offset`.
    ///
    /// # Errors
    /// [`LogError::Io`], [`LogError::CorruptSegment`].
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        let end = self.log_end_offset();
        if offset >= end {
            // No record goes, but the epoch cache is cut at the log end all the same, as
            // Kafka's `truncateTo` does: a replica that led an epoch without writing in it
            // holds an entry no record carries, and a follower that kept it would send it as
            // its last fetched epoch for ever, diverging at its own log end (KIP-595).
            self.change_leader_epochs(|c| c.truncate_from_end(end))?;
            return Ok(());
        }
        if offset < self.log_start_offset {
            return self.truncate_fully_and_start_at(offset);
        }
        self.note_truncation(offset);
        let keep = self.segment_index_for(offset) + 1;
        for seg in self.segments.drain(keep..) {
            seg.delete_files()?;
        }
        self.active_mut().truncate_to(offset)?;
        self.flush()?;
        // KIP-101: epochs that started in the removed records go with them.
        let end = self.log_end_offset();
        self.change_leader_epochs(|c| c.truncate_from_end(end))?;
        // Kafka's truncateAndReload: drop snapshots past the new end and rebuild.
        // Expiration is retention's job (it has the clock), so time 0 expires nothing here.
        self.reload_producer_state(0, i64::MAX)?;
        Ok(())
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// The idempotent producers' state (DescribeProducers).
    pub fn producer_state(&self) -> &crate::ProducerStateTable {
        &self.producer_state.table
    }

    /// The last stable offset for the high watermark `hw` (Kafka's
    /// `UnifiedLog.lastStableOffset`): the first offset of the earliest transaction that is
    /// open, or whose marker is not yet below `hw`, at least the log start; `hw` when there
    /// is none below it. Transactions whose marker `hw` passed are forgotten as stable.
    pub fn last_stable_offset(&mut self, hw: i64) -> i64 {
        let txns = self.producer_state.table.txns_mut();
        txns.on_high_watermark(hw);
        txns.last_stable_offset(hw, self.log_start_offset)
    }

    /// The aborted transactions a read_committed read from `fetch_offset` below
    /// `upper_bound` must report (Kafka's `collectAbortedTransactions`): the entries of the
    /// `.txnindex` of the segment holding `fetch_offset` and of the later ones.
    #[must_use]
    pub fn aborted_transactions(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let first = self.segment_index_for(fetch_offset);
        collect_aborted(
            self.segments[first..].iter().map(|s| &s.txn_index),
            fetch_offset,
            upper_bound,
        )
    }

    /// Writes a producer snapshot at the log end unless one is there: the clean-shutdown
    /// path, so that a restart need not scan the log (Kafka snapshots on close).
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn take_producer_snapshot(&mut self) -> Result<(), LogError> {
        self.producer_state.take_snapshot()
    }

    /// Bytes in all `.log` files.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(LogSegment::size).sum()
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of segments, the active one included.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// fsyncs what is not yet on disk, snapshots the producer state and closes the files.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn close(mut self) -> Result<(), LogError> {
        self.flush()?;
        self.producer_state.take_snapshot()?;
        Ok(())
    }

    /// Removes the partition directory and everything in it (topic deletion).
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn delete(self) -> Result<(), LogError> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir).at(&dir)
    }
}

/// A transaction marker to append as the partition's leader ([`Log::append_marker`]): what
/// WriteTxnMarkers asks of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    /// The epoch the marker is written with: with transaction version 2, the epoch the
    /// coordinator bumped to when the transaction ended. An epoch older than the
    /// producer's is fenced.
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    /// COMMIT, else ABORT.
    pub commit: bool,
}

/// An fsync of a log's active `.log`, and of the segments sealed since the last flush, that
/// the caller runs outside the log's lock ([`Log::begin_flush`]); many of them go to the disk
/// in one batch through [`crate::io::sync_data_many`]. Report success with
/// [`Log::complete_flush`].
#[derive(Debug, Clone)]
pub struct PendingFlush {
    /// The sealed segments' `.log`, indexes and directory, then the active segment's `.log`
    /// when the flush began.
    pub files: Vec<Arc<fs::File>>,
    /// The active `.log`'s path, for errors.
    pub path: PathBuf,
    /// Every offset below this is durable once `file` is fsynced.
    pub end_offset: i64,
}

/// fsyncs a directory so a newly created or removed file name survives a crash.
/// A new, empty segment that appends go to next, its blocks reserved when
/// [`crate::io::preallocate`] asks for it.
fn new_active_segment(
    dir: &Path,
    base_offset: i64,
    config: &LogConfig,
) -> Result<LogSegment, LogError> {
    let mut seg = LogSegment::create(dir, base_offset)?;
    if crate::io::preallocate() {
        seg.preallocate(config.effective_segment_bytes());
    }
    Ok(seg)
}

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    fs::File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// The file name a segment with `base_offset` uses for `suffix` (`log`, `index`, `timeindex`).
pub fn segment_file_name(base_offset: i64, suffix: &str) -> String {
    segment::file_name(base_offset, suffix)
}
