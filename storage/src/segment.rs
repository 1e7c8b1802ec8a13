//! One log segment: a `.log` file of record batches plus its two sparse indexes.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use strata_protocol::record_batch::{
    self, BatchError, Compression, MAGIC_V2, RecordBatchView, TimestampType,
};

use strata_protocol::compression::decompress;
use strata_protocol::record_batch::BATCH_HEADER_LEN;

use crate::direct::{DirectAppender, TailCache};
use crate::error::{IoContext, LogError};
use crate::index::{OffsetEntry, OffsetIndex, TimeEntry, TimeIndex};
use crate::txn_index::{self, TxnIndex};
use crate::{FileRegion, TimestampOffset};

/// The prefix of a batch header that offset lookups read: up to and including
/// `lastOffsetDelta` (@23..27). See `strata_protocol::record_batch` for the layout.
const HEADER_PREFIX_LEN: usize = 27;
/// The prefix that timestamp lookups read: up to and including `maxTimestamp` (@35..43).
const TIMESTAMP_PREFIX_LEN: usize = 43;
/// The most a compressed batch may inflate to when a lookup must read its records: the
/// largest batch Kafka accepts by default (1 MiB) times a generous compression ratio.
pub(crate) const DECOMPRESS_LIMIT: usize = 256 << 20;

/// What a short header read tells about a batch in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    /// Where the batch starts in the `.log`.
    pub position: u64,
    /// The first offset of the batch.
    pub base_offset: i64,
    /// `base_offset + lastOffsetDelta`: what offset lookups compare against.
    pub last_offset: i64,
    /// `12 + batchLength`.
    pub len: u64,
    /// The partition leader epoch the leader stamped on the batch (KIP-101).
    pub leader_epoch: i32,
}

/// The file name of a segment file: the base offset zero-padded to 20 digits, as Kafka names
/// them so an operator (or Kafka's `kafka-dump-log`) can read our directory.
pub(crate) fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

/// How many sealed `.log` handles the process keeps open after their last reader let go
/// ([`RECENT_READERS`]).
const RECENT_READERS_MAX: usize = 64;

/// The sealed `.log` handles opened most recently, oldest first, kept open so that a consumer
/// reading a sealed segment (one behind the active segment, after a roll) does not reopen it
/// on every fetch. Process-wide and bounded, so the descriptors at rest stay one per
/// partition plus at most [`RECENT_READERS_MAX`]. A segment's handle leaves the cache when
/// the segment is dropped (retention, truncation, topic deletion), so an unlinked file's
/// space is not held.
static RECENT_READERS: Mutex<VecDeque<Arc<File>>> = Mutex::new(VecDeque::new());

fn recent_readers() -> std::sync::MutexGuard<'static, VecDeque<Arc<File>>> {
    RECENT_READERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A segment's `.log` handle. The active segment holds it open for writing. A sealed segment
/// holds nothing itself: a reader opens the file read-only and shares that handle with
/// whoever reads at the same time (a [`Weak`] remembers it), and [`RECENT_READERS`] keeps the
/// most recently opened ones open a while longer; otherwise the descriptor closes when the
/// last [`crate::FileRegion`] using it is dropped. So a partition keeps one descriptor open at
/// rest however many segments it has. A handle outlives retention's unlink (unix semantics).
#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    writable: Option<Arc<File>>,
    reader: Mutex<Weak<File>>,
    /// Under `STRATA_DIRECT_IO`, the active segment's appender ([`crate::direct`]): made at
    /// the first append, and dropped, which cuts its padding, when the writable handle is let
    /// go or before the file is shortened.
    direct: Option<DirectAppender>,
    /// The latest appends made through `direct`, for reads at the tail (see
    /// [`crate::direct`]); emptied whenever `direct` goes.
    tail: TailCache,
}

impl LogFile {
    fn open(path: &Path, file: File) -> Self {
        Self {
            path: path.to_path_buf(),
            writable: Some(Arc::new(file)),
            reader: Mutex::new(Weak::new()),
            direct: None,
            tail: TailCache::default(),
        }
    }

    /// The handle to read with: the writable one, a reader's still alive, or a new one.
    fn get(&self) -> Result<Arc<File>, LogError> {
        if let Some(f) = &self.writable {
            return Ok(f.clone());
        }
        let mut reader = self
            .reader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(f) = reader.upgrade() {
            return Ok(f);
        }
        let f = Arc::new(File::open(&self.path).at(&self.path)?);
        *reader = Arc::downgrade(&f);
        let mut recent = recent_readers();
        recent.push_back(f.clone());
        if recent.len() > RECENT_READERS_MAX {
            recent.pop_front();
        }
        Ok(f)
    }

    /// The handle to write with, reopened read-write if the segment had let it go (a sealed
    /// segment being recovered or truncated).
    fn writable(&mut self) -> Result<Arc<File>, LogError> {
        if let Some(f) = &self.writable {
            return Ok(f.clone());
        }
        let f = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.path)
                .at(&self.path)?,
        );
        self.writable = Some(f.clone());
        Ok(f)
    }

    /// Lets the writable handle go (readers keep theirs).
    fn release(&mut self) {
        self.end_direct();
        self.writable = None;
    }

    /// Drops the direct appender (cutting its padding) and the tail cache, before the file
    /// is shortened or let go.
    fn end_direct(&mut self) {
        self.direct = None;
        self.tail.clear();
    }

    /// Writes `bytes` at `at`, the logical end: through the direct appender under
    /// `STRATA_DIRECT_IO`, through `pwrite` otherwise (and when the file system refuses direct
    /// I/O). Returns the writable handle.
    fn append(&mut self, bytes: &[u8], at: u64) -> Result<Arc<File>, LogError> {
        let file = self.writable()?;
        if crate::direct::enabled() {
            if self.direct.as_ref().is_some_and(|d| d.end() != at) {
                // Nothing else moves the end while an appender is held; if something did,
                // start again from the end as the segment knows it.
                self.end_direct();
            }
            if self.direct.is_none() {
                match DirectAppender::open(&self.path, &file, at) {
                    Ok(d) => self.direct = Some(d),
                    Err(e) => crate::direct::refuse(&self.path, &e),
                }
            }
            if let Some(d) = &mut self.direct {
                d.append(bytes).at(&self.path)?;
                self.tail.push(at, bytes);
                return Ok(file);
            }
        }
        crate::io::write_all_at(&file, bytes, at).at(&self.path)?;
        Ok(file)
    }
}

impl Drop for LogFile {
    /// The segment is gone (deleted, truncated away, or its log closed): its cached reader
    /// goes too, so an unlinked file's space is freed once the last region is dropped.
    fn drop(&mut self) {
        let reader = self
            .reader
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(f) = reader.upgrade() {
            recent_readers().retain(|r| !Arc::ptr_eq(r, &f));
        }
    }
}

/// A segment of a partition log.
///
/// # Byte format
///
/// `<base>.log` is a sequence of RecordBatch v2 exactly as produced (with base offset and
/// partition leader epoch stamped by the broker), back to back, no padding or framing of our
/// own. `<base>.index` and `<base>.timeindex` are described on
/// [`OffsetEntry`] and [`TimeEntry`].
///
/// # Crash policy
///
/// Batches are written with one positional write at the end of the valid bytes, and indexes
/// are written after the batch. A crash can leave a torn batch at the end of the `.log` or
/// index entries pointing past it; [`LogSegment::recover`] rescans the log, truncates at the
/// first batch that fails its length or CRC check, and rebuilds both indexes.
#[derive(Debug)]
pub(crate) struct LogSegment {
    /// The offset of the first batch this segment may hold; also its file name.
    pub base_offset: i64,
    log_path: PathBuf,
    /// The `.log`, open while the segment is active; see [`LogFile`].
    log: LogFile,
    /// Bytes of valid batches; the next write goes here.
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    /// Bytes appended since the last `.index` entry (Kafka's `bytesSinceLastIndexEntry`).
    bytes_since_last_index: u64,
    /// One past the last offset held, or `base_offset` when empty.
    pub next_offset: i64,
    /// The largest batch max-timestamp held and the offset of the record carrying it.
    max_timestamp: Option<TimestampOffset>,
    /// When `segment.ms` starts counting: the broker clock at the first append, or after a
    /// restart the first batch's timestamp (Kafka's `rollingBasedTimestamp`) capped at now.
    roll_base_ms: Option<i64>,
    /// The aborted transactions whose ABORT marker is in this segment (`.txnindex`).
    pub txn_index: TxnIndex,
    /// Opening found `.txnindex` untrustworthy, or recovered the segment: its entries must
    /// be rebuilt by replaying the log (the log does it with the producer state).
    pub txn_index_stale: bool,
}

impl LogSegment {
    /// Creates an empty segment, replacing any files of the same name.
    pub fn create(dir: &Path, base_offset: i64) -> Result<Self, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)
            .at(&log_path)?;
        Ok(Self {
            base_offset,
            log: LogFile::open(&log_path, log),
            log_path,
            size: 0,
            offset_index: OffsetIndex::create(&dir.join(file_name(base_offset, "index")))?,
            time_index: TimeIndex::create(&dir.join(file_name(base_offset, "timeindex")))?,
            bytes_since_last_index: 0,
            next_offset: base_offset,
            max_timestamp: None,
            roll_base_ms: None,
            txn_index: TxnIndex::empty(txn_index::path_for(dir, base_offset)),
            txn_index_stale: false,
        })
    }

    /// Opens the existing segment `base_offset`. With `trust` (a sealed segment below the
    /// log's recovery point, or any segment after a clean shutdown) the `.log` is trusted and
    /// the indexes loaded, rebuilt (with a full recovery) when missing or inconsistent; an
    /// active one also gets the batches after its last index entry CRC-checked. Without
    /// `trust` the segment is recovered: rescanned and truncated at the first torn or corrupt
    /// batch. Returns the segment and the bytes recovery cut off.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        active: bool,
        trust: bool,
        index_interval: u64,
        now_ms: i64,
    ) -> Result<(Self, u64), LogError> {
        let (mut seg, cut) =
            Self::open_inner(dir, base_offset, active, trust, index_interval, now_ms)?;
        if !active {
            seg.log.release();
        } else if trust && seg.size > 0 && seg.roll_base_ms.is_none() {
            // What recovery would have found: the first batch's timestamp, capped at now.
            let mut b = [0u8; TIMESTAMP_PREFIX_LEN];
            seg.read_prefix(0, &mut b)?;
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&b[35..43]);
            let ts = i64::from_be_bytes(ts);
            seg.roll_base_ms = Some(if ts >= 0 { ts.min(now_ms) } else { now_ms });
            let last_indexed = seg.offset_index.last().map_or(0, |e| u64::from(e.position));
            seg.bytes_since_last_index = seg.size - last_indexed;
        }
        Ok((seg, cut))
    }

    /// Makes this (sealed, recovered) segment the active one again: recovery cut it short, so
    /// the segments after it are gone and appends continue here.
    pub fn reactivate(&mut self) -> Result<(), LogError> {
        self.log.writable()?;
        let last_indexed = self
            .offset_index
            .last()
            .map_or(0, |e| u64::from(e.position));
        self.bytes_since_last_index = self.size - last_indexed;
        Ok(())
    }

    fn open_inner(
        dir: &Path,
        base_offset: i64,
        active: bool,
        trust: bool,
        index_interval: u64,
        now_ms: i64,
    ) -> Result<(Self, u64), LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log_path)
            .at(&log_path)?;
        let size = log.metadata().at(&log_path)?.len();
        let index_path = dir.join(file_name(base_offset, "index"));
        let time_path = dir.join(file_name(base_offset, "timeindex"));
        if trust {
            let offset_index = OffsetIndex::load(&index_path, |e| u64::from(e.position) < size)?;
            let time_index = TimeIndex::load(&time_path, |_| true)?;
            if let (Some(offset_index), Some(time_index)) = (offset_index, time_index) {
                let txn_path = txn_index::path_for(dir, base_offset);
                let (txn_index, txn_index_stale) = match TxnIndex::load(
                    txn_path.clone(),
                    base_offset,
                )? {
                    Some(index) => (index, false),
                    None => {
                        tracing::warn!(file = %txn_path.display(), "transaction index corrupt; rebuilding");
                        let mut empty = TxnIndex::empty(txn_path);
                        empty.reset()?;
                        (empty, true)
                    }
                };
                let mut seg = Self {
                    base_offset,
                    log: LogFile::open(&log_path, log),
                    log_path,
                    size,
                    offset_index,
                    time_index,
                    bytes_since_last_index: 0,
                    next_offset: base_offset,
                    max_timestamp: None,
                    roll_base_ms: None,
                    txn_index,
                    txn_index_stale,
                };
                if seg.load_sealed_tail(active)? {
                    return Ok((seg, 0));
                }
                tracing::warn!(segment = %seg.log_path.display(), "index inconsistent with log; rebuilding");
                let cut = seg.recover(index_interval, now_ms)?;
                return Ok((seg, cut));
            }
            tracing::warn!(segment = %log_path.display(), "index missing or corrupt; rebuilding");
        }
        let mut seg = Self {
            base_offset,
            log: LogFile::open(&log_path, log),
            log_path,
            size,
            offset_index: OffsetIndex::create(&index_path)?,
            time_index: TimeIndex::create(&time_path)?,
            bytes_since_last_index: 0,
            next_offset: base_offset,
            max_timestamp: None,
            roll_base_ms: None,
            txn_index: TxnIndex::empty(txn_index::path_for(dir, base_offset)),
            txn_index_stale: true,
        };
        let cut = seg.recover(index_interval, now_ms)?;
        Ok((seg, cut))
    }

    /// For a sealed segment with loaded indexes: finds `next_offset` by walking the headers
    /// after the last index entry (at most about `index.interval.bytes` of them), and takes
    /// the largest timestamp from the last `.timeindex` entry. Returns false when the headers
    /// or the time index disagree with the log, so the caller rebuilds.
    ///
    /// With `verify` (an active segment after a clean shutdown) every batch after the last
    /// index entry is read whole and its CRC checked, and its timestamp counts towards the
    /// largest one: batches written after the indexes were last flushed are seen and checked.
    fn load_sealed_tail(&mut self, verify: bool) -> Result<bool, LogError> {
        let mut pos = self
            .offset_index
            .last()
            .map_or(0, |e| u64::from(e.position));
        let mut first = true;
        let mut tail_max: Option<TimestampOffset> = None;
        let mut buf = Vec::new();
        while pos < self.size {
            let Ok(h) = self.read_header(pos) else {
                return Ok(false);
            };
            if first
                && let Some(e) = self.offset_index.last()
                && h.last_offset != self.base_offset + i64::from(e.relative_offset)
            {
                return Ok(false);
            }
            if verify {
                buf.resize(h.len as usize, 0);
                self.log
                    .get()?
                    .read_exact_at(&mut buf, pos)
                    .at(&self.log_path)?;
                let Ok(view) = RecordBatchView::parse(&buf) else {
                    return Ok(false);
                };
                if view.verify_crc().is_err() {
                    return Ok(false);
                }
                if tail_max.is_none_or(|m| view.max_timestamp() > m.timestamp) {
                    tail_max = Some(TimestampOffset {
                        timestamp: view.max_timestamp(),
                        offset: offset_of_max_timestamp(&view),
                    });
                }
            }
            first = false;
            self.next_offset = h.last_offset + 1;
            pos += h.len;
        }
        if let Some(t) = self.time_index.last() {
            let offset = self.base_offset + i64::from(t.relative_offset);
            if offset >= self.next_offset {
                return Ok(false);
            }
            self.max_timestamp = Some(TimestampOffset {
                timestamp: t.timestamp,
                offset,
            });
        }
        if let Some(m) = tail_max
            && self
                .max_timestamp
                .is_none_or(|cur| m.timestamp > cur.timestamp)
        {
            self.max_timestamp = Some(m);
        }
        Ok(true)
    }

    /// Rescans the whole `.log`: each batch must parse, pass its CRC and have offsets above
    /// the previous batch's. The file is truncated before the first batch that does not, and
    /// both indexes are rebuilt. Returns the bytes cut off.
    pub fn recover(&mut self, index_interval: u64, now_ms: i64) -> Result<u64, LogError> {
        self.log.end_direct();
        let file = self.log.writable()?;
        let file_len = file.metadata().at(&self.log_path)?.len();
        self.offset_index.truncate_entries(0)?;
        self.time_index.truncate_entries(0)?;
        // Rebuilt by the log, which replays the recovered batches through the producer state.
        self.txn_index.reset()?;
        self.txn_index_stale = true;
        self.bytes_since_last_index = 0;
        self.next_offset = self.base_offset;
        self.max_timestamp = None;
        self.roll_base_ms = None;
        let mut pos = 0u64;
        let mut buf = Vec::new();
        while pos < file_len {
            let mut prefix = [0u8; record_batch::LOG_OVERHEAD];
            if file_len - pos < prefix.len() as u64 {
                break;
            }
            file.read_exact_at(&mut prefix, pos).at(&self.log_path)?;
            let Ok(len) = record_batch::peek_total_len(&prefix) else {
                break;
            };
            if (len as u64) > file_len - pos {
                break;
            }
            buf.resize(len, 0);
            file.read_exact_at(&mut buf, pos).at(&self.log_path)?;
            let Ok(view) = RecordBatchView::parse(&buf) else {
                break;
            };
            if view.verify_crc().is_err()
                || view.base_offset() < self.next_offset
                || view.last_offset_delta() < 0
                || view.last_offset() - self.base_offset > i64::from(u32::MAX)
            {
                break;
            }
            let max = TimestampOffset {
                timestamp: view.max_timestamp(),
                offset: offset_of_max_timestamp(&view),
            };
            if self.roll_base_ms.is_none() {
                self.roll_base_ms = Some(if max.timestamp >= 0 {
                    max.timestamp.min(now_ms)
                } else {
                    now_ms
                });
            }
            self.size = pos;
            self.index_batch(pos, len as u64, view.last_offset(), max, index_interval)?;
            self.next_offset = view.last_offset() + 1;
            pos += len as u64;
        }
        self.size = pos;
        let cut = file_len - pos;
        if cut > 0 {
            tracing::warn!(segment = %self.log_path.display(), position = pos, bytes = cut,
                "truncating torn or corrupt tail");
            file.set_len(pos).at(&self.log_path)?;
            file.sync_all().at(&self.log_path)?;
        }
        Ok(cut)
    }

    /// Updates the in-memory max timestamp and, every `index_interval` bytes, both indexes,
    /// for a batch already in the file at `position` (Kafka's `LogSegment.append` loop).
    fn index_batch(
        &mut self,
        position: u64,
        len: u64,
        last_offset: i64,
        max: TimestampOffset,
        index_interval: u64,
    ) -> Result<(), LogError> {
        if self
            .max_timestamp
            .is_none_or(|m| max.timestamp > m.timestamp)
        {
            self.max_timestamp = Some(max);
        }
        if self.bytes_since_last_index > index_interval {
            self.offset_index.push(OffsetEntry {
                relative_offset: self.relative(last_offset),
                position: position as u32,
            });
            self.maybe_append_time_entry();
            self.bytes_since_last_index = 0;
        }
        self.bytes_since_last_index += len;
        Ok(())
    }

    /// Appends the running max timestamp to `.timeindex` (in memory) if it grew since the
    /// last entry. Timestamps below 0 (NO_TIMESTAMP) are never indexed, as in Kafka's
    /// `TimeIndex`. Sealing and a clean shutdown call it so the last entry is the maximum.
    pub fn maybe_append_time_entry(&mut self) {
        let Some(max) = self.max_timestamp else {
            return;
        };
        let last = self.time_index.last().map_or(-1, |e| e.timestamp);
        if max.timestamp > last {
            self.time_index.push(TimeEntry {
                timestamp: max.timestamp,
                relative_offset: self.relative(max.offset),
            });
        }
    }

    fn relative(&self, offset: i64) -> u32 {
        // The log rolls before a relative offset could exceed u32 (see `Log::needs_roll`).
        u32::try_from(offset - self.base_offset).unwrap_or(u32::MAX)
    }

    /// Writes already-validated, already-stamped batches at the end of the segment and indexes
    /// them. `batches` yields (position within `bytes`, length, last offset, max timestamp).
    pub fn append(
        &mut self,
        bytes: &[u8],
        batches: &[(usize, usize, i64, TimestampOffset)],
        index_interval: u64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let start = self.size;
        let file = self.log.append(bytes, start)?;
        if let Some((from, len)) = crate::io::completed_chunks(
            start,
            start + bytes.len() as u64,
            crate::io::writeback_bytes(),
        ) && let Err(e) = crate::io::start_writeback(&file, from, len)
        {
            // Only a hint to the kernel: the data is written either way.
            tracing::debug!(path = %self.log_path.display(), error = %e, "early writeback refused");
        }
        if self.roll_base_ms.is_none() {
            self.roll_base_ms = Some(now_ms);
        }
        for &(pos, len, last_offset, max) in batches {
            self.index_batch(
                start + pos as u64,
                len as u64,
                last_offset,
                max,
                index_interval,
            )?;
            self.next_offset = last_offset + 1;
        }
        self.size = start + bytes.len() as u64;
        Ok(())
    }

    /// Reads the header prefix of the batch at `position`, checking that it is a v2 batch
    /// that lies entirely within the segment.
    ///
    /// # Errors
    /// [`LogError::CorruptSegment`] when it does not.
    pub fn read_header(&self, position: u64) -> Result<BatchHeader, LogError> {
        let mut b = [0u8; HEADER_PREFIX_LEN];
        self.read_prefix(position, &mut b)?;
        self.header_from(position, &b)
    }

    fn read_prefix(&self, position: u64, b: &mut [u8]) -> Result<(), LogError> {
        if self.size.saturating_sub(position) < b.len() as u64 {
            return Err(self.corrupt(
                position,
                BatchError::Truncated {
                    need: b.len(),
                    have: self.size.saturating_sub(position) as usize,
                },
            ));
        }
        if self.log.tail.read(position, b) {
            return Ok(());
        }
        self.log
            .get()?
            .read_exact_at(b, position)
            .at(&self.log_path)
    }

    /// The region of this segment's `.log` from `position` for `len` bytes (whole batches),
    /// pushed onto `out`: as slices of the tail cache when it holds them all, one region per
    /// cached append, else one file region.
    pub fn push_regions(
        &self,
        position: u64,
        len: u64,
        out: &mut Vec<FileRegion>,
    ) -> Result<(), LogError> {
        let file = self.file()?;
        if let Some(parts) = self.log.tail.slices(position, len) {
            let mut at = position;
            for b in parts {
                let n = b.len() as u64;
                out.push(FileRegion {
                    file: file.clone(),
                    position: at,
                    len: u32::try_from(n).unwrap_or(u32::MAX),
                    cached: Some(b),
                });
                at += n;
            }
            return Ok(());
        }
        out.push(FileRegion {
            file,
            position,
            // A segment is at most i32::MAX bytes (segment.bytes cap).
            len: u32::try_from(len).unwrap_or(u32::MAX),
            cached: None,
        });
        Ok(())
    }

    fn header_from(&self, position: u64, b: &[u8]) -> Result<BatchHeader, LogError> {
        let len = record_batch::peek_total_len(b).map_err(|e| self.corrupt(position, e))? as u64;
        let magic = b[16] as i8;
        if magic != MAGIC_V2 {
            return Err(self.corrupt(position, BatchError::UnsupportedMagic(magic)));
        }
        if len > self.size - position {
            return Err(self.corrupt(
                position,
                BatchError::Truncated {
                    need: len as usize,
                    have: (self.size - position) as usize,
                },
            ));
        }
        let base_offset = i64::from_be_bytes(b[0..8].try_into().unwrap_or_default());
        let delta = i32::from_be_bytes(b[23..27].try_into().unwrap_or_default());
        let leader_epoch = i32::from_be_bytes(b[12..16].try_into().unwrap_or_default());
        Ok(BatchHeader {
            position,
            base_offset,
            last_offset: base_offset.saturating_add(i64::from(delta)),
            len,
            leader_epoch,
        })
    }

    fn corrupt(&self, position: u64, source: BatchError) -> LogError {
        LogError::CorruptSegment {
            path: self.log_path.clone(),
            position,
            source,
        }
    }

    /// The first batch whose last offset is >= `offset`, found through the offset index and a
    /// short scan of headers; `None` if every batch ends before `offset`.
    pub fn find_batch(&self, offset: i64) -> Result<Option<BatchHeader>, LogError> {
        let rel = u32::try_from(offset.saturating_sub(self.base_offset).max(0)).unwrap_or(u32::MAX);
        let mut pos = u64::from(self.offset_index.lookup(rel));
        while pos < self.size {
            let h = self.read_header(pos)?;
            if h.last_offset >= offset {
                return Ok(Some(h));
            }
            pos += h.len;
        }
        Ok(None)
    }

    /// The header of the batch starting at `position` (`None` at the end of the segment).
    pub fn header_at(&self, position: u64) -> Result<Option<BatchHeader>, LogError> {
        if position >= self.size {
            return Ok(None);
        }
        self.read_header(position).map(Some)
    }

    /// The earliest record at or after `start_offset` with timestamp >= `timestamp`, if this
    /// segment holds one (Kafka's `LogSegment.findOffsetByTimestamp` with its starting
    /// offset, the log start). Starts from the time index, then scans batch headers; a
    /// CreateTime batch is read whole, and decompressed if need be (bounded), to find the
    /// exact record; every record of a LogAppendTime batch has the batch's max timestamp, so
    /// its first offset at or after `start_offset` is the answer.
    pub fn find_timestamp(
        &self,
        timestamp: i64,
        start_offset: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        if self.max_timestamp.is_none_or(|m| m.timestamp < timestamp) {
            return Ok(None);
        }
        let mut pos = match self.time_index.last_below(timestamp) {
            Some(e) => u64::from(self.offset_index.lookup(e.relative_offset)),
            None => 0,
        };
        let mut buf = Vec::new();
        while pos < self.size {
            let mut b = [0u8; TIMESTAMP_PREFIX_LEN];
            self.read_prefix(pos, &mut b)?;
            let h = self.header_from(pos, &b)?;
            let max_ts = i64::from_be_bytes(b[35..43].try_into().unwrap_or_default());
            if max_ts >= timestamp && h.last_offset >= start_offset {
                let attributes = i16::from_be_bytes([b[21], b[22]]);
                // Under LogAppendTime every record carries the batch's max timestamp, so the
                // batch's first offset is the answer; otherwise find the exact record, inside
                // the compressed payload if need be (Kafka's findOffsetByTimestamp).
                let create_time = attributes & 0x08 == 0;
                if create_time {
                    buf.resize(h.len as usize, 0);
                    self.log
                        .get()?
                        .read_exact_at(&mut buf, pos)
                        .at(&self.log_path)?;
                    let view = RecordBatchView::parse(&buf).map_err(|e| self.corrupt(pos, e))?;
                    let decompressed;
                    let records = if attributes & 0x07 == 0 {
                        view.records().map_err(|e| self.corrupt(pos, e))?
                    } else {
                        decompressed = decompress(
                            view.compression(),
                            &buf[BATCH_HEADER_LEN..],
                            DECOMPRESS_LIMIT,
                        )
                        .map_err(|source| LogError::Decompress {
                            path: self.log_path.clone(),
                            position: pos,
                            source,
                        })?;
                        view.records_in(&decompressed)
                    };
                    let found = records
                        .map_while(Result::ok)
                        .find(|r| r.offset >= start_offset && r.timestamp >= timestamp);
                    if let Some(r) = found {
                        return Ok(Some(TimestampOffset {
                            timestamp: r.timestamp,
                            offset: r.offset,
                        }));
                    }
                    // The header's maxTimestamp overstated the records: keep looking.
                } else {
                    return Ok(Some(TimestampOffset {
                        timestamp: max_ts,
                        offset: h.base_offset.max(start_offset),
                    }));
                }
            }
            pos += h.len;
        }
        Ok(None)
    }

    /// Drops every batch from the one holding `offset` on (a batch containing `offset` goes
    /// entirely). Returns false if nothing was cut.
    pub fn truncate_to(&mut self, offset: i64) -> Result<bool, LogError> {
        let Some(h) = self.find_batch(offset)? else {
            return Ok(false);
        };
        let cut_at = h.position;
        let keep_offsets = self
            .offset_index
            .entries()
            .partition_point(|e| u64::from(e.position) < cut_at);
        self.offset_index.truncate_entries(keep_offsets)?;
        let new_end_rel = h.base_offset - self.base_offset;
        let keep_times = self
            .time_index
            .entries()
            .partition_point(|e| i64::from(e.relative_offset) < new_end_rel);
        self.time_index.truncate_entries(keep_times)?;
        self.txn_index.truncate_to(h.base_offset)?;
        self.log.end_direct();
        self.log.writable()?.set_len(cut_at).at(&self.log_path)?;
        self.size = cut_at;
        self.next_offset = h.base_offset.max(self.base_offset);
        // Recompute the running maximum: the last kept time entry covers every batch up to the
        // last kept offset entry (both are written together), so only the tail is rescanned.
        self.max_timestamp = self.time_index.last().map(|e| TimestampOffset {
            timestamp: e.timestamp,
            offset: self.base_offset + i64::from(e.relative_offset),
        });
        let mut pos = self
            .offset_index
            .last()
            .map_or(0, |e| u64::from(e.position));
        self.bytes_since_last_index = 0;
        let mut buf = Vec::new();
        while pos < self.size {
            let h = self.read_header(pos)?;
            buf.resize(h.len as usize, 0);
            self.log
                .get()?
                .read_exact_at(&mut buf, pos)
                .at(&self.log_path)?;
            let view = RecordBatchView::parse(&buf).map_err(|e| self.corrupt(pos, e))?;
            let max = TimestampOffset {
                timestamp: view.max_timestamp(),
                offset: offset_of_max_timestamp(&view),
            };
            if self
                .max_timestamp
                .is_none_or(|m| max.timestamp > m.timestamp)
            {
                self.max_timestamp = Some(max);
            }
            self.bytes_since_last_index += h.len;
            pos += h.len;
        }
        if self.size == 0 {
            self.roll_base_ms = None;
        }
        Ok(true)
    }

    /// Reserves the `.log`'s blocks up to `bytes` (see [`crate::io::preallocate`]). Only a
    /// hint: a file system that refuses keeps allocating as it writes.
    pub fn preallocate(&mut self, bytes: u64) {
        let reserved = self
            .log
            .writable()
            .and_then(|f| crate::io::reserve(&f, bytes).at(&self.log_path));
        if let Err(e) = reserved {
            tracing::debug!(error = %e, "segment preallocation refused");
        }
    }

    /// Called when the segment stops being the active one: records its final largest
    /// timestamp in `.timeindex` (so reopening can trust the last entry) and writes both
    /// indexes, without fsyncing anything. Returns the `.log` and index handles for the fsync
    /// the caller makes later, off the append path (Kafka's roll schedules `flush-log`).
    pub fn seal(&mut self) -> Result<Vec<Arc<File>>, LogError> {
        self.maybe_append_time_entry();
        let offsets = self.offset_index.write_out()?;
        let times = self.time_index.write_out()?;
        let txns = self.txn_index.write_out()?;
        let log = self.log.writable()?;
        if crate::io::preallocate() {
            // Gives back the blocks reserved past the last batch.
            log.set_len(self.size).at(&self.log_path)?;
        }
        self.log.release();
        let mut files = vec![log, Arc::new(offsets), Arc::new(times)];
        files.extend(txns.map(Arc::new));
        Ok(files)
    }

    /// fsyncs the log and both indexes (in parallel where io_uring is in use).
    pub fn flush(&mut self) -> Result<(), LogError> {
        let offsets = self.offset_index.write_out()?;
        let times = self.time_index.write_out()?;
        let log = self.log.writable()?;
        match self.txn_index.write_out()? {
            Some(txns) => crate::io::sync_data_all(&[&*log, &offsets, &times, &txns]),
            None => crate::io::sync_data_all(&[&*log, &offsets, &times]),
        }
        .at(&self.log_path)
    }

    /// Lets a sealed segment's writable `.log` handle go (readers open their own).
    pub fn release_log(&mut self) {
        self.log.release();
    }

    /// The `.log`'s writable handle, for an fsync outside the log's lock.
    pub fn writable_log(&mut self) -> Result<Arc<File>, LogError> {
        self.log.writable()
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Unlinks the three files. Open [`crate::FileRegion`]s keep reading the old inode.
    pub fn delete_files(&self) -> Result<(), LogError> {
        for p in [
            self.log_path.as_path(),
            self.offset_index.path(),
            self.time_index.path(),
            self.txn_index.path(),
        ] {
            match fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(p),
            }
        }
        Ok(())
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The `.log` for a reader (a [`crate::FileRegion`] keeps it open while it lives).
    pub fn file(&self) -> Result<Arc<File>, LogError> {
        self.log.get()
    }

    pub fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.max_timestamp
    }

    pub fn roll_base_ms(&self) -> Option<i64> {
        self.roll_base_ms
    }

    /// Whether either index has reached `segment.index.bytes`.
    pub fn indexes_full(&self, segment_index_bytes: u64) -> bool {
        self.offset_index.size_bytes() + 8 > segment_index_bytes
            || self.time_index.size_bytes() + 12 > segment_index_bytes
    }

    /// The timestamp retention compares against: the largest record timestamp, or the file's
    /// modification time when no batch carries one (Kafka's `LogSegment.largestTimestamp`).
    /// The first batch's max timestamp (Kafka's `getFirstBatchTimestamp`, which
    /// `max.compaction.lag.ms` counts from), `None` for an empty segment.
    ///
    /// # Errors
    /// [`LogError::Io`] or a corrupt header.
    pub fn first_batch_max_timestamp(&self) -> Result<Option<i64>, LogError> {
        if self.size < TIMESTAMP_PREFIX_LEN as u64 {
            return Ok(None);
        }
        let mut b = [0u8; TIMESTAMP_PREFIX_LEN];
        self.read_prefix(0, &mut b)?;
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[35..43]);
        Ok(Some(i64::from_be_bytes(ts)))
    }

    pub fn largest_timestamp(&self) -> Result<i64, LogError> {
        if let Some(m) = self.max_timestamp
            && m.timestamp >= 0
        {
            return Ok(m.timestamp);
        }
        let modified = fs::metadata(&self.log_path)
            .and_then(|m| m.modified())
            .at(&self.log_path)?;
        Ok(modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64))
    }
}

/// The offset of the record carrying the batch's largest timestamp (KIP-734). Uncompressed
/// CreateTime batches are walked; for the rest the base offset is exact (LogAppendTime: every
/// record has the same time, the first wins) or the best we can do without decompressing.
pub(crate) fn offset_of_max_timestamp(view: &RecordBatchView<'_>) -> i64 {
    if view.compression() != Compression::None
        || view.timestamp_type() == TimestampType::LogAppendTime
    {
        return view.base_offset();
    }
    let Ok(records) = view.records() else {
        return view.base_offset();
    };
    let mut best: Option<(i64, i64)> = None;
    for r in records.map_while(Result::ok) {
        if best.is_none_or(|(ts, _)| r.timestamp > ts) {
            best = Some((r.timestamp, r.offset));
        }
    }
    best.map_or(view.base_offset(), |(_, o)| o)
}
