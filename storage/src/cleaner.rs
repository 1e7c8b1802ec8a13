//! The log cleaner: compaction of a log whose `cleanup.policy` includes `compact`, as Kafka's
//! `Cleaner` does it (Kafka 4.1).
//!
//! # One pass
//!
//! 1. Under the log's lock, [`crate::Log::cleanable_span`] finds the dirty range
//!    `[first_dirty, first_uncleanable)`: from the `cleaner-offset-checkpoint` entry (or the
//!    log start) up to the first segment holding the last stable offset, the active segment,
//!    or a batch younger than `min.compaction.lag.ms`; whole segments only, so cleaning never
//!    reaches past the high watermark. [`crate::Log::clean_plan`] then takes what the pass
//!    reads: the sealed segments' files (immutable once sealed), their aborted transactions,
//!    and each producer's last offset.
//! 2. Without the lock, [`clean`] builds an [`OffsetMap`] (key hash to latest offset) over the
//!    dirty range, and rewrites every segment below the map's end, in groups that fit
//!    `segment.bytes`, each into one `<base>.log.cleaned` file named after the group's first
//!    segment. A record is kept when it is its key's latest, or past the map; a keyless
//!    record is dropped; a tombstone is kept until its batch's delete horizon (KIP-534: set
//!    to now + `delete.retention.ms` by the first pass that keeps it, dropped by a pass after
//!    that); records of aborted transactions go, and a transaction marker goes once nothing
//!    of its transaction is left and its own horizon passed. A batch keeps its base offset,
//!    last offset delta, producer fields and codec ([`strata_protocol::record_batch::rebuild_batch`]);
//!    an emptied batch that holds a producer's last sequence, or ends the cleaned range, stays
//!    as a 61-byte header.
//! 3. Under the lock again, each group is installed ([`crate::Log::install_cleaned`]) with
//!    Kafka's swap protocol: `.cleaned` renamed `.swap`, the replaced segments' files removed,
//!    `.swap` renamed to the `.log`. A crash at any step recovers on open: a `.cleaned` is
//!    dropped, a `.swap` completes (the segments it overlaps go). A group whose segments
//!    changed meanwhile (retention, truncation) is not installed.
//!
//! The caller records the pass's end offset in the log directory's `cleaner-offset-checkpoint`
//! (Kafka's format, [`crate::checkpoint`]).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::hash::Hasher;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_protocol::compression::{Compression, decompress};
use strata_protocol::record_batch::{
    self, BATCH_HEADER_LEN, LOG_OVERHEAD, NO_PRODUCER_ID, RecordBatchView, RecordView,
};

use crate::error::{IoContext, LogError};
use crate::segment::DECOMPRESS_LIMIT;
use crate::txn_index::AbortedTxn;

/// One offset-map entry's share of `log.cleaner.dedupe.buffer.size`: Kafka's 16-byte key hash
/// and 8-byte offset.
const ENTRY_BYTES: u64 = 24;
/// How much of a segment is read at a time.
const READ_CHUNK: usize = 1 << 20;

/// Broker settings of the cleaner (Kafka's `CleanerConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerSettings {
    /// `log.cleaner.dedupe.buffer.size` divided by `log.cleaner.threads`.
    pub dedupe_buffer_bytes: u64,
    /// `log.cleaner.io.buffer.load.factor`: how full the offset map may get.
    pub load_factor: f64,
    /// `log.cleaner.io.max.bytes.per.second`: read and written bytes, `f64::MAX` for no limit.
    pub max_io_bytes_per_sec: f64,
}

impl Default for CleanerSettings {
    fn default() -> Self {
        CleanerSettings {
            dedupe_buffer_bytes: 128 << 20,
            load_factor: 0.9,
            max_io_bytes_per_sec: f64::MAX,
        }
    }
}

/// A compacted topic's settings (Kafka's topic configs of the same names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionConfig {
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone (and a spent transaction marker) stays
    /// readable after the pass that first keeps it.
    pub delete_retention_ms: i64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

/// What of a log a pass may clean ([`crate::Log::cleanable_span`]; Kafka's `LogToClean`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanableSpan {
    /// Where the dirty part starts: the checkpointed end of the last pass, or the log start.
    pub first_dirty: i64,
    /// Where cleaning stops: a segment's base offset.
    pub first_uncleanable: i64,
    /// Bytes of the segments below `first_dirty`.
    pub clean_bytes: u64,
    /// Bytes of the segments in `[first_dirty, first_uncleanable)`.
    pub cleanable_bytes: u64,
    /// How long past `max.compaction.lag.ms` the oldest dirty batch is, 0 if not.
    pub max_compaction_delay_ms: i64,
    /// The checkpoint was below the log start or past its end, and was replaced.
    pub checkpoint_reset: bool,
}

impl CleanableSpan {
    /// `cleanable / (clean + cleanable)`: the dirty ratio compared with
    /// `min.cleanable.dirty.ratio`.
    #[must_use]
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            0.0
        } else {
            self.cleanable_bytes as f64 / total as f64
        }
    }

    /// Whether a pass is due: a dirty ratio above `min.cleanable.dirty.ratio`, or a dirty
    /// batch older than `max.compaction.lag.ms`.
    #[must_use]
    pub fn needs_cleaning(&self, config: &CompactionConfig) -> bool {
        self.cleanable_bytes > 0
            && (self.max_compaction_delay_ms > 0
                || self.dirty_ratio() > config.min_cleanable_dirty_ratio)
    }
}

/// A sealed segment as a pass reads it.
#[derive(Debug, Clone)]
pub struct SegmentRef {
    pub base_offset: i64,
    /// The next segment's base offset: where this one's offsets end.
    pub next_base: i64,
    pub size: u64,
    pub file: Arc<File>,
}

/// What a pass reads, taken under the log's lock ([`crate::Log::clean_plan`]).
#[derive(Debug, Clone)]
pub struct CleanPlan {
    pub dir: PathBuf,
    pub span: CleanableSpan,
    /// Every segment below `span.first_uncleanable`, in order.
    pub segments: Vec<SegmentRef>,
    /// The aborted transactions whose markers are in those segments, by first offset.
    pub aborted: Vec<AbortedTxn>,
    /// Each producer's last data offset (`None`: it wrote only markers) and epoch.
    pub active_producers: HashMap<i64, (Option<i64>, i16)>,
    pub delete_retention_ms: i64,
    /// `segment.bytes`: a group's cleaned size stays under it.
    pub segment_bytes: u64,
}

/// One group of segments rewritten into a `.cleaned` file, to install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanedGroup {
    /// The first replaced segment's base offset: the cleaned segment's name.
    pub base_offset: i64,
    /// The replaced segments: base offset and size when read.
    pub replaces: Vec<(i64, u64)>,
    /// The `<base>.log.cleaned` file.
    pub path: PathBuf,
    /// The aborted transactions the cleaned segment still holds markers of.
    pub aborted: Vec<AbortedTxn>,
}

/// What one pass did (Kafka's `CleanerStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CleanStats {
    /// Bytes read while building the map and while rewriting.
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_retained: u64,
    /// Offset map fill at the end of the pass (entries / capacity).
    pub map_utilization: f64,
    /// Groups installed, and groups dropped because their segments changed meanwhile.
    pub groups_installed: u32,
    pub groups_skipped: u32,
    pub elapsed: Duration,
}

/// The end of a pass: the offset to checkpoint, and what it did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanOutcome {
    pub end_offset: i64,
    pub stats: CleanStats,
}

/// A bytes-per-second limit shared by a cleaner's reads and writes (Kafka's `Throttler`):
/// each call sleeps until the bytes counted since the window began are within the rate, and
/// the window starts again every 300 ms. (Kafka checks only once a window has passed, which
/// lets a pass shorter than a window run unthrottled.)
#[derive(Debug)]
pub struct Throttler {
    rate: f64,
    window_start: Instant,
    observed: f64,
}

impl Throttler {
    #[must_use]
    pub fn new(bytes_per_sec: f64) -> Self {
        Throttler {
            rate: bytes_per_sec,
            window_start: Instant::now(),
            observed: 0.0,
        }
    }

    /// Counts `bytes` and sleeps if the window ran above the rate.
    pub fn throttle(&mut self, bytes: u64) {
        if !self.rate.is_finite() || self.rate >= f64::MAX {
            return;
        }
        self.observed += bytes as f64;
        let elapsed = self.window_start.elapsed();
        let want = Duration::from_secs_f64(self.observed / self.rate);
        if want > elapsed {
            std::thread::sleep(want - elapsed);
        }
        if self.window_start.elapsed() >= Duration::from_millis(300) {
            self.window_start = Instant::now();
            self.observed = 0.0;
        }
    }
}

/// A 128-bit hash of a record key (Kafka keys its map by MD5); two SipHash-1-3 runs with
/// different prefixes, so that a collision, which would drop a live record, is as unlikely
/// as MD5's.
fn key_hash(key: &[u8]) -> u128 {
    let half = |salt: u8| {
        let mut h = std::hash::DefaultHasher::new();
        h.write_u8(salt);
        h.write(key);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// Each key's latest offset over the dirty range (Kafka's `SkimpyOffsetMap`), bounded by the
/// dedupe buffer.
#[derive(Debug)]
pub struct OffsetMap {
    offsets: HashMap<u128, i64>,
    capacity: usize,
    /// The last offset the map covers: records past it are not judged by it.
    latest_offset: i64,
}

impl OffsetMap {
    /// A map holding at most `settings`' share of keys.
    #[must_use]
    pub fn new(settings: &CleanerSettings) -> Self {
        let slots = (settings.dedupe_buffer_bytes / ENTRY_BYTES).max(2);
        let capacity = ((slots as f64) * settings.load_factor).max(1.0) as usize;
        OffsetMap {
            offsets: HashMap::new(),
            capacity,
            latest_offset: -1,
        }
    }

    fn is_full(&self) -> bool {
        self.offsets.len() >= self.capacity
    }

    fn put(&mut self, key: &[u8], offset: i64) {
        self.offsets.insert(key_hash(key), offset);
        self.latest_offset = offset;
    }

    fn get(&self, key: &[u8]) -> i64 {
        self.offsets.get(&key_hash(key)).copied().unwrap_or(-1)
    }

    fn utilization(&self) -> f64 {
        self.offsets.len() as f64 / self.capacity as f64
    }
}

/// Transactions as a pass meets them in offset order (Kafka's `CleanedTransactionMetadata`):
/// which data batches belong to aborted transactions, and which markers may go.
#[derive(Debug, Default)]
struct TxnTracker {
    /// Aborted transactions not reached yet, by first offset.
    aborted: VecDeque<AbortedTxn>,
    /// Aborted transactions under way: the entry, and whether any of its data was seen.
    ongoing_aborted: HashMap<i64, (AbortedTxn, bool)>,
    /// Producers whose committed (or not aborted) transactional data was seen.
    ongoing_committed: HashSet<i64>,
    /// The entries the cleaned segment's `.txnindex` keeps.
    kept: Vec<AbortedTxn>,
}

impl TxnTracker {
    fn new(mut aborted: Vec<AbortedTxn>) -> Self {
        aborted.sort_by_key(|a| a.first_offset);
        TxnTracker {
            aborted: aborted.into(),
            ..TxnTracker::default()
        }
    }

    fn reach(&mut self, offset: i64) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.first_offset <= offset)
        {
            let a = self.aborted.pop_front().expect("checked");
            self.ongoing_aborted
                .entry(a.producer_id)
                .or_insert((a, false));
        }
    }

    /// A data batch: whether it belongs to an aborted transaction.
    fn on_batch(&mut self, b: &RecordBatchView<'_>) -> bool {
        self.reach(b.last_offset());
        if !b.is_transactional() {
            return false;
        }
        if let Some(entry) = self.ongoing_aborted.get_mut(&b.producer_id()) {
            entry.1 = true;
            return true;
        }
        self.ongoing_committed.insert(b.producer_id());
        false
    }

    /// A control batch: whether its marker may go (nothing of its transaction is left).
    fn on_control(&mut self, b: &RecordBatchView<'_>) -> bool {
        self.reach(b.last_offset());
        if b.record_count() == 0 {
            return true;
        }
        let pid = b.producer_id();
        match b.end_txn_marker() {
            Some(m) if !m.commit => match self.ongoing_aborted.remove(&pid) {
                Some((entry, true)) => {
                    self.kept.push(entry);
                    false
                }
                _ => true,
            },
            Some(_) => !self.ongoing_committed.remove(&pid),
            None => false,
        }
    }
}

/// Reads a segment's batches in order, a chunk at a time, with positional reads (the file is
/// shared with readers).
struct BatchReader<'a> {
    seg: &'a SegmentRef,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    buf_at: u64,
    /// Parse position within `buf`.
    pos: usize,
}

impl<'a> BatchReader<'a> {
    fn new(seg: &'a SegmentRef) -> Self {
        BatchReader {
            seg,
            buf: Vec::new(),
            buf_at: 0,
            pos: 0,
        }
    }

    /// The next whole batch's bytes, `None` at the end of the segment as it was planned.
    fn next_batch(
        &mut self,
        throttle: &mut Throttler,
        read: &mut u64,
    ) -> Result<Option<Vec<u8>>, LogError> {
        loop {
            let rest = &self.buf[self.pos..];
            if rest.len() >= LOG_OVERHEAD {
                let total = record_batch::peek_total_len(rest)
                    .map_err(|e| corrupt(self.path(), &e.to_string()))?;
                if rest.len() >= total {
                    let out = rest[..total].to_vec();
                    self.pos += total;
                    return Ok(Some(out));
                }
            }
            let file_pos = self.buf_at + self.pos as u64;
            if file_pos >= self.seg.size {
                return Ok(None);
            }
            // Refill from the first unparsed byte, at least a chunk or the batch's length.
            let need = if rest.len() >= LOG_OVERHEAD {
                record_batch::peek_total_len(rest).unwrap_or(READ_CHUNK)
            } else {
                READ_CHUNK
            };
            let want = need.max(READ_CHUNK) as u64;
            let len = want.min(self.seg.size - file_pos) as usize;
            let mut chunk = vec![0u8; len];
            self.seg
                .file
                .read_exact_at(&mut chunk, file_pos)
                .at(&self.path())?;
            throttle.throttle(len as u64);
            *read += len as u64;
            self.buf = chunk;
            self.buf_at = file_pos;
            self.pos = 0;
            if self.buf.len() < LOG_OVERHEAD
                || record_batch::peek_total_len(&self.buf).is_ok_and(|t| t > self.buf.len())
            {
                return Err(corrupt(
                    self.path(),
                    &format!("a batch at {file_pos} runs past the end of its segment"),
                ));
            }
        }
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("segment {}", self.seg.base_offset))
    }
}

/// The records of a batch, decompressed into `scratch` if need be.
fn records_of<'b>(
    view: &RecordBatchView<'_>,
    scratch: &'b mut Vec<u8>,
    raw: &'b [u8],
) -> Result<Vec<RecordView<'b>>, LogError> {
    let section: &'b [u8] = if view.compression() == Compression::None {
        &raw[BATCH_HEADER_LEN..]
    } else {
        *scratch = decompress(
            view.compression(),
            &raw[BATCH_HEADER_LEN..],
            DECOMPRESS_LIMIT,
        )
        .map_err(|e| corrupt_batch(view, &e.to_string()))?;
        scratch
    };
    view.records_in(section)
        .map(|r| r.map_err(|e| corrupt_batch(view, &e.to_string())))
        .collect()
}

fn corrupt_batch(view: &RecordBatchView<'_>, reason: &str) -> LogError {
    corrupt(
        PathBuf::from(format!("batch at offset {}", view.base_offset())),
        reason,
    )
}

/// A batch the cleaner cannot read: the pass stops, and the log is left as it was.
fn corrupt(path: PathBuf, reason: &str) -> LogError {
    LogError::Io {
        path,
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason.to_owned()),
    }
}

/// Builds the offset map over `[start, end)` (Kafka's `buildOffsetMap`): returns the offset
/// the pass covers up to (exclusive), which is `end` unless the map filled.
fn build_offset_map(
    plan: &CleanPlan,
    map: &mut OffsetMap,
    throttle: &mut Throttler,
    stats: &mut CleanStats,
) -> Result<i64, LogError> {
    let (start, end) = (plan.span.first_dirty, plan.span.first_uncleanable);
    let mut txns = TxnTracker::new(plan.aborted.clone());
    let mut scratch = Vec::new();
    for seg in plan
        .segments
        .iter()
        .filter(|s| s.next_base > start && s.base_offset < end)
    {
        let mut reader = BatchReader::new(seg);
        while let Some(raw) = reader.next_batch(throttle, &mut stats.bytes_read)? {
            let view =
                RecordBatchView::parse(&raw).map_err(|e| corrupt(reader.path(), &e.to_string()))?;
            if view.is_control() {
                txns.on_control(&view);
                continue;
            }
            if txns.on_batch(&view) || view.last_offset() < start {
                continue;
            }
            for r in records_of(&view, &mut scratch, &raw)? {
                let Some(key) = r.key else { continue };
                if r.offset < start {
                    continue;
                }
                if map.is_full() {
                    return Ok(map.latest_offset + 1);
                }
                map.put(key, r.offset);
            }
            map.latest_offset = map.latest_offset.max(view.last_offset());
        }
        map.latest_offset = map.latest_offset.max(seg.next_base.min(end) - 1);
    }
    Ok(end)
}

/// Groups the segments below `end` so that each group's bytes fit `segment.bytes` and its
/// offsets a 32-bit relative offset (Kafka's `groupSegmentsBySize`).
fn group_segments(plan: &CleanPlan, end: i64) -> Vec<Vec<&SegmentRef>> {
    let mut groups: Vec<Vec<&SegmentRef>> = Vec::new();
    let mut bytes = 0u64;
    for seg in plan.segments.iter().filter(|s| s.base_offset < end) {
        let fits = groups.last().is_some_and(|g| {
            bytes + seg.size <= plan.segment_bytes
                && (seg.size == 0 || seg.next_base - 1 - g[0].base_offset <= i64::from(i32::MAX))
        });
        if fits {
            groups.last_mut().expect("checked").push(seg);
            bytes += seg.size;
        } else {
            groups.push(vec![seg]);
            bytes = seg.size;
        }
    }
    groups
}

/// Runs one pass over `plan` and installs each cleaned group with `install` (which takes the
/// log's lock: [`crate::Log::install_cleaned`]; `Ok(false)` when the group's segments
/// changed meanwhile). Returns the offset to checkpoint.
///
/// # Errors
/// [`LogError`] reading a segment or writing a cleaned one; a `.cleaned` file left behind is
/// removed by the next pass or the next open.
pub fn clean(
    plan: &CleanPlan,
    settings: &CleanerSettings,
    now_ms: i64,
    throttle: &mut Throttler,
    install: &mut dyn FnMut(CleanedGroup) -> Result<bool, LogError>,
) -> Result<CleanOutcome, LogError> {
    let started = Instant::now();
    let mut stats = CleanStats::default();
    let mut map = OffsetMap::new(settings);
    let end_offset = build_offset_map(plan, &mut map, throttle, &mut stats)?;
    let mut txns = TxnTracker::new(plan.aborted.clone());
    for group in group_segments(plan, end_offset) {
        let cleaned = clean_group(plan, &group, &map, &mut txns, now_ms, throttle, &mut stats)?;
        let path = cleaned.path.clone();
        match install(cleaned) {
            Ok(true) => stats.groups_installed += 1,
            Ok(false) => {
                stats.groups_skipped += 1;
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        }
    }
    stats.map_utilization = map.utilization();
    stats.elapsed = started.elapsed();
    Ok(CleanOutcome { end_offset, stats })
}

/// What happens to a batch (Kafka's `BatchRetention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retention {
    /// Drop it whole.
    Delete,
    /// Filter its records; drop it if none is left.
    DeleteEmpty,
    /// Filter its records; keep its header if none is left.
    RetainEmpty,
}

/// Rewrites one group into `<base>.log.cleaned`.
#[allow(clippy::too_many_arguments)]
fn clean_group(
    plan: &CleanPlan,
    group: &[&SegmentRef],
    map: &OffsetMap,
    txns: &mut TxnTracker,
    now_ms: i64,
    throttle: &mut Throttler,
    stats: &mut CleanStats,
) -> Result<CleanedGroup, LogError> {
    let base = group[0].base_offset;
    let path = plan.dir.join(format!(
        "{}.cleaned",
        crate::segment::file_name(base, "log")
    ));
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .at(&path)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let upper_bound = plan.span.first_uncleanable;
    txns.kept.clear();
    let mut scratch = Vec::new();
    for seg in group {
        let mut reader = BatchReader::new(seg);
        while let Some(raw) = reader.next_batch(throttle, &mut stats.bytes_read)? {
            let view =
                RecordBatchView::parse(&raw).map_err(|e| corrupt_batch_at(seg, &e.to_string()))?;
            let can_discard = if view.is_control() {
                txns.on_control(&view)
            } else {
                txns.on_batch(&view)
            };
            let horizon = view.delete_horizon_ms();
            let discard_records = if view.is_control() {
                can_discard && horizon.is_some_and(|h| h <= now_ms)
            } else {
                can_discard
            };
            let pid = view.producer_id();
            let last_of_active = match plan.active_producers.get(&pid) {
                Some((Some(last_data), _)) => view.last_offset() == *last_data,
                Some((None, epoch)) => view.is_control() && view.producer_epoch() == *epoch,
                None => false,
            };
            let retention = if pid != NO_PRODUCER_ID && last_of_active
                || view.last_offset() + 1 == upper_bound
            {
                Retention::RetainEmpty
            } else if discard_records {
                Retention::Delete
            } else {
                Retention::DeleteEmpty
            };
            if retention == Retention::Delete {
                continue;
            }
            let records = records_of(&view, &mut scratch, &raw)?;
            stats.records_read += records.len() as u64;
            let keep = |r: &RecordView<'_>| -> bool {
                if discard_records {
                    return false;
                }
                if view.is_control() {
                    return true;
                }
                if r.offset > map.latest_offset {
                    return true;
                }
                let Some(key) = r.key else { return false };
                let latest = r.offset >= map.get(key);
                let retain_deletes = horizon.is_none_or(|h| now_ms < h);
                latest && (r.value.is_some() || retain_deletes)
            };
            let kept: Vec<RecordView<'_>> = records.iter().copied().filter(|r| keep(r)).collect();
            stats.records_retained += kept.len() as u64;
            let holds_tombstone = !view.is_control() && kept.iter().any(|r| r.value.is_none());
            let marker_of_empty_txn = can_discard && view.is_control();
            let set_horizon =
                !kept.is_empty() && (holds_tombstone || marker_of_empty_txn) && horizon.is_none();
            let bytes: Option<Vec<u8>> = if kept.is_empty() {
                (retention == Retention::RetainEmpty).then(|| record_batch::empty_header_of(&view))
            } else if kept.len() == records.len() && !set_horizon {
                Some(raw.clone())
            } else {
                let new_horizon = if set_horizon {
                    Some(now_ms.saturating_add(plan.delete_retention_ms))
                } else {
                    horizon
                };
                Some(
                    record_batch::rebuild_batch(&view, &kept, new_horizon)
                        .map_err(|e| corrupt_batch_at(seg, &e.to_string()))?,
                )
            };
            if let Some(bytes) = bytes {
                out.write_all(&bytes).at(&path)?;
                stats.bytes_written += bytes.len() as u64;
                throttle.throttle(bytes.len() as u64);
            }
        }
    }
    let file = out.into_inner().map_err(|e| e.into_error()).at(&path)?;
    file.sync_all().at(&path)?;
    Ok(CleanedGroup {
        base_offset: base,
        replaces: group.iter().map(|s| (s.base_offset, s.size)).collect(),
        path,
        aborted: std::mem::take(&mut txns.kept),
    })
}

fn corrupt_batch_at(seg: &SegmentRef, reason: &str) -> LogError {
    corrupt(
        PathBuf::from(format!("segment {}", seg.base_offset)),
        reason,
    )
}

/// The `cleaner-offset-checkpoint` file of a log directory (Kafka's name).
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// Reads a log directory's `cleaner-offset-checkpoint`: (topic, partition) to first dirty
/// offset. A missing or unreadable file is empty (every log is then dirty from its start).
#[must_use]
pub fn read_checkpoint(log_dir: &std::path::Path) -> BTreeMap<(String, i32), i64> {
    crate::checkpoint::read_offsets(&log_dir.join(CHECKPOINT_FILE))
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// Replaces a log directory's `cleaner-offset-checkpoint` atomically.
///
/// # Errors
/// [`LogError::Io`].
pub fn write_checkpoint(
    log_dir: &std::path::Path,
    entries: &BTreeMap<(String, i32), i64>,
) -> Result<(), LogError> {
    let lines: Vec<(String, i32, i64)> = entries
        .iter()
        .map(|((t, p), o)| (t.clone(), *p, *o))
        .collect();
    crate::checkpoint::write_offsets(&log_dir.join(CHECKPOINT_FILE), &lines)
}
