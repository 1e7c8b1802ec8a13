//! Appends through direct I/O (`O_DIRECT`): the bytes go from a reused, block-aligned buffer
//! to the device, without the copy into fresh page-cache pages that half of a buffered
//! append's CPU goes to (docs/BENCHMARKS.md, "Where the broker's CPU goes").
//!
//! # Why hand-written
//!
//! Direct I/O wants the buffer, the file offset and the length all aligned to the device's
//! block, while a log appends batches of any length. No crate holds a file's partial last
//! block between appends, so this module does: [`DirectAppender`] keeps the bytes of the block
//! the last append ended in, and each append writes that block again with the new bytes behind
//! it, padded with zeros to the next block boundary. The file's size on disk is therefore
//! rounded up to a block; [`DirectAppender::end`] is the logical end, and dropping the appender
//! cuts the padding off. A crash leaves at most one block of zeros after the last whole batch,
//! which recovery cuts off like any torn tail (a zero batch length is not a batch).
//!
//! Rewriting the partial block is safe against a crash in the middle of it: the bytes already
//! acknowledged are written again with the same values, so whichever of the old and the new
//! block the device holds, they are intact.
//!
//! The staging buffer is per thread and grows to the largest append (a request's batches), so
//! a log of thousands of partitions holds one block per active segment, not a buffer each.
//!
//! # Choosing
//!
//! `STRATA_DIRECT_IO=1` ([`enabled`], off by default) makes each active segment append through
//! a [`DirectAppender`]. A file system without direct I/O (tmpfs) refuses the first open; the
//! process then says so once and appends through `pwrite` for good.
//!
//! # Reads
//!
//! Readers keep the segment's ordinary (buffered) descriptor. The kernel drops the page-cache
//! pages a direct write covers, so a buffered read or `sendfile` after it would read the new
//! bytes from the device, on the thread that serves the fetch. So the active segment keeps its
//! most recent appends in memory too ([`TailCache`], [`tail_cache_bytes`]): a fetch at the tail
//! gets those bytes (Redpanda's model), and the header walk that plans a read finds its
//! headers there. Reads behind the cache keep `sendfile`.

#![allow(unsafe_code)]

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;

/// The alignment of every direct write's buffer, offset and length. 4 KiB covers devices with
/// 512-byte and 4 KiB logical blocks, and the page size, which some file systems require.
pub const BLOCK: usize = 4096;

/// A zeroed heap buffer aligned to [`BLOCK`] whose length is a multiple of it.
struct Aligned {
    ptr: NonNull<u8>,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let len = round_up(len.max(BLOCK));
        let layout = Layout::from_size_align(len, BLOCK).expect("a block-aligned layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Self { ptr, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` owns `len` initialised (zeroed, then written) bytes, borrowed mutably
        // through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, BLOCK).expect("the layout it was made with");
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) };
    }
}

static REFUSED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static STAGING: RefCell<Option<Aligned>> = const { RefCell::new(None) };
    static FORCED: Cell<Option<bool>> = const { Cell::new(None) };
    static FORCED_TAIL: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Forces direct appends on or off for the calling thread (`None`: back to
/// `STRATA_DIRECT_IO`), so tests run both paths in one process.
pub fn set_thread_forced(on: Option<bool>) {
    FORCED.with(|f| f.set(on));
}

/// Forces the tail cache's size for segments appended to by the calling thread (`None`: back
/// to [`tail_cache_bytes`]), so tests reach reads behind the cache without writing megabytes.
pub fn set_thread_tail_cache_bytes(bytes: Option<usize>) {
    FORCED_TAIL.with(|f| f.set(bytes));
}

/// Whether segments append through direct I/O: `STRATA_DIRECT_IO=1` (read once), and the
/// file system has not refused it.
#[must_use]
pub fn enabled() -> bool {
    static ASKED: OnceLock<bool> = OnceLock::new();
    let asked = *ASKED.get_or_init(|| crate::io::env_switch("STRATA_DIRECT_IO"));
    FORCED.with(Cell::get).unwrap_or(asked) && !REFUSED.load(Ordering::Relaxed)
}

/// Records that the file system refused direct I/O (`e`, at `path`): appends go through
/// `pwrite` from now on.
pub fn refuse(path: &Path, e: &io::Error) {
    if !REFUSED.swap(true, Ordering::Relaxed) {
        tracing::warn!(path = %path.display(), error = %e,
            "direct I/O refused (STRATA_DIRECT_IO=1); appending through pwrite");
    }
}

/// `n` rounded up to a whole number of blocks.
#[must_use]
pub const fn round_up(n: usize) -> usize {
    n.div_ceil(BLOCK) * BLOCK
}

/// Appends to one file through `O_DIRECT`, holding the partial last block between appends.
pub struct DirectAppender {
    file: File,
    /// The bytes from the last block boundary at or below `end` up to `end`.
    tail: Vec<u8>,
    /// The logical end of the file: the bytes appended, without the padding.
    end: u64,
}

impl DirectAppender {
    /// Opens `path` for direct appends at its logical end `end`, reading the partial block
    /// below `end` through `buffered` (the file's ordinary descriptor).
    ///
    /// # Errors
    /// What the kernel returned: `EINVAL` from a file system without direct I/O (tmpfs),
    /// for one.
    pub fn open(path: &Path, buffered: &File, end: u64) -> io::Result<Self> {
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)?;
        let partial = (end % BLOCK as u64) as usize;
        let mut tail = vec![0u8; partial];
        buffered.read_exact_at(&mut tail, end - partial as u64)?;
        tail.reserve(BLOCK - partial);
        Ok(Self { file, tail, end })
    }

    /// The logical end of the file.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Writes `bytes` at the logical end: the partial last block and `bytes`, padded with
    /// zeros to a block boundary, in one direct write. Returns once the device has the bytes
    /// (not durably: that still takes an fsync).
    ///
    /// # Errors
    /// What the kernel returned, or `WriteZero` for a short write; the logical end is then
    /// unchanged, and the next append writes the same block again.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let start = self.end - self.tail.len() as u64;
        let total = self.tail.len() + bytes.len();
        let padded = round_up(total);
        STAGING.with(|cell| {
            let mut staging = cell.borrow_mut();
            if staging.as_ref().is_none_or(|b| b.len < padded) {
                *staging = Some(Aligned::new(padded.next_power_of_two()));
            }
            let buf = staging.as_mut().expect("allocated above").as_mut();
            buf[..self.tail.len()].copy_from_slice(&self.tail);
            buf[self.tail.len()..total].copy_from_slice(bytes);
            buf[total..padded].fill(0);
            let written = self.file.write_at(&buf[..padded], start)?;
            if written != padded {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("direct write of {padded} bytes wrote {written}"),
                ));
            }
            let keep = total % BLOCK;
            self.tail.clear();
            self.tail.extend_from_slice(&buf[total - keep..total]);
            Ok(())
        })?;
        self.end += bytes.len() as u64;
        Ok(())
    }
}

impl std::fmt::Debug for DirectAppender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectAppender")
            .field("end", &self.end)
            .field("tail", &self.tail.len())
            .finish_non_exhaustive()
    }
}

impl Drop for DirectAppender {
    /// Cuts the padding off, so the file's size is its logical end again. Whoever shortens
    /// the file drops the appender first, so this never lengthens it.
    fn drop(&mut self) {
        if let Err(e) = self.file.set_len(self.end) {
            tracing::warn!(error = %e, "cutting a direct-I/O segment's padding failed; recovery cuts it");
        }
    }
}

/// How many bytes of its latest appends the active segment keeps in memory under direct I/O
/// by default: at 300 MB/s into one partition, a consumer more than about 13 ms behind reads
/// from the device (docs/BENCHMARKS.md, "Direct I/O", measures 4, 32 and 256 MiB).
pub const TAIL_CACHE_BYTES: usize = 4 << 20;

/// How many bytes of its latest appends the active segment keeps in memory under direct I/O:
/// `STRATA_TAIL_CACHE_KB` (read once), else [`TAIL_CACHE_BYTES`].
#[must_use]
pub fn tail_cache_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        let bytes = crate::io::env_kib("STRATA_TAIL_CACHE_KB", TAIL_CACHE_BYTES as u64);
        usize::try_from(bytes).unwrap_or(usize::MAX)
    })
}

/// The most all tail caches together hold beyond each one's latest append: past it, a segment
/// that appends keeps only its latest append. Unlike the page cache, the kernel cannot take
/// this memory back, so it is bounded for the process, not only per partition.
pub const TAIL_CACHE_TOTAL_BYTES: usize = 512 << 20;

static TAIL_CACHED: AtomicUsize = AtomicUsize::new(0);

/// Bytes held by every tail cache of the process (`strata_tail_cache_bytes`).
#[must_use]
pub fn tail_cached_bytes() -> usize {
    TAIL_CACHED.load(Ordering::Relaxed)
}

/// The latest appends of an active segment, whole and contiguous, up to [`tail_cache_bytes`],
/// or only the last one while all caches together hold more than [`TAIL_CACHE_TOTAL_BYTES`].
/// Each append is one chunk of whole batches, so a read that starts at a batch inside the
/// cache is served with slices of chunks, not copies.
#[derive(Debug, Default)]
pub struct TailCache {
    /// (file position, bytes), in position order, each starting where the one before ends.
    chunks: VecDeque<(u64, Bytes)>,
    bytes: usize,
}

impl TailCache {
    /// Adds the bytes just appended at `position`; a gap (something else moved the end)
    /// empties the cache first.
    pub fn push(&mut self, position: u64, data: &[u8]) {
        if self.end() != Some(position) {
            self.clear();
        }
        self.chunks
            .push_back((position, Bytes::copy_from_slice(data)));
        self.bytes += data.len();
        let total = TAIL_CACHED.fetch_add(data.len(), Ordering::Relaxed) + data.len();
        let cap = if total > TAIL_CACHE_TOTAL_BYTES {
            0
        } else {
            FORCED_TAIL.with(Cell::get).unwrap_or_else(tail_cache_bytes)
        };
        while self.bytes > cap && self.chunks.len() > 1 {
            if let Some((_, b)) = self.chunks.pop_front() {
                self.bytes -= b.len();
                TAIL_CACHED.fetch_sub(b.len(), Ordering::Relaxed);
            }
        }
    }

    /// Forgets everything (truncation, recovery, seal).
    pub fn clear(&mut self) {
        self.chunks.clear();
        TAIL_CACHED.fetch_sub(self.bytes, Ordering::Relaxed);
        self.bytes = 0;
    }

    fn end(&self) -> Option<u64> {
        self.chunks.back().map(|(p, b)| p + b.len() as u64)
    }

    /// The chunks holding the bytes from `position` for `len`, each with the range of it that
    /// they take, if the cache holds all of them.
    fn span(
        &self,
        position: u64,
        len: u64,
    ) -> Option<impl Iterator<Item = (&Bytes, std::ops::Range<usize>)>> {
        let first = self.chunks.front()?.0;
        let stop = position + len;
        if position < first || stop > self.end()? {
            return None;
        }
        let i = self.chunks.partition_point(|(p, _)| *p <= position) - 1;
        Some(
            self.chunks
                .iter()
                .skip(i)
                .take_while(move |(p, _)| *p < stop)
                .map(move |(p, b)| {
                    // Within the chunk: both ends are inside it, so they fit a usize.
                    let from = usize::try_from(position.saturating_sub(*p)).unwrap_or(0);
                    let to = usize::try_from((stop - p).min(b.len() as u64)).unwrap_or(b.len());
                    (b, from..to)
                })
                .filter(|(_, range)| !range.is_empty()),
        )
    }

    /// The bytes from `position` for `len`, as slices of the chunks, if the cache holds all
    /// of them.
    #[must_use]
    pub fn slices(&self, position: u64, len: u64) -> Option<Vec<Bytes>> {
        Some(
            self.span(position, len)?
                .map(|(b, range)| b.slice(range))
                .collect(),
        )
    }

    /// Copies the bytes at `position` into `out` if the cache holds all of them (a header
    /// read while a fetch is planned: no allocation).
    #[must_use]
    pub fn read(&self, position: u64, out: &mut [u8]) -> bool {
        let Some(parts) = self.span(position, out.len() as u64) else {
            return false;
        };
        let mut at = 0;
        for (b, range) in parts {
            let n = range.len();
            out[at..at + n].copy_from_slice(&b[range]);
            at += n;
        }
        true
    }
}

impl Drop for TailCache {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_cache_serves_what_it_holds_in_slices_and_forgets_the_oldest() {
        let mut c = TailCache::default();
        assert!(c.slices(0, 1).is_none());
        c.push(100, &[1; 10]);
        c.push(110, &[2; 5]);
        c.push(115, &[3; 20]);
        assert!(c.slices(99, 5).is_none(), "before the cache");
        assert!(c.slices(130, 6).is_none(), "past its end");
        let parts = c.slices(105, 20).unwrap();
        let lens: Vec<usize> = parts.iter().map(Bytes::len).collect();
        assert_eq!(lens, [5, 5, 10]);
        let mut out = [0u8; 12];
        assert!(c.read(108, &mut out));
        assert_eq!(out, [1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3]);
        // A gap empties it; the oldest chunks go past the bound, but never the last.
        let cap = 1 << 20;
        set_thread_tail_cache_bytes(Some(cap));
        c.push(500, &[4; 3]);
        assert!(c.slices(115, 1).is_none());
        c.push(503, &vec![5; cap]);
        assert!(c.slices(500, 1).is_none());
        assert_eq!(c.slices(503, 4).unwrap().concat(), [5; 4]);
        c.push(503 + cap as u64, &vec![6; cap + 1]);
        assert!(c.slices(503, 1).is_none());
        assert!(c.slices(503 + cap as u64, 1).is_some());
        set_thread_tail_cache_bytes(None);
    }

    fn direct_dir() -> Option<tempfile::TempDir> {
        // A temporary directory on tmpfs has no direct I/O: the test then says so and passes.
        let dir = tempfile::tempdir().ok()?;
        let probe = dir.path().join("probe");
        File::create(&probe).ok()?;
        let ok = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&probe)
            .is_ok();
        ok.then_some(dir)
    }

    #[test]
    fn appends_of_every_length_read_back_and_dropping_cuts_the_padding() {
        let Some(dir) = direct_dir() else {
            eprintln!("no direct I/O here; skipped");
            return;
        };
        let path = dir.path().join("seg.log");
        let buffered = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut a = DirectAppender::open(&path, &buffered, 0).unwrap();
        let mut expect = Vec::new();
        // Lengths that end below, on and across block boundaries, and one of many blocks.
        for (i, len) in [1, 4094, 1, 1, 4096, 100, 12_288, 3, 70_000, 4093]
            .into_iter()
            .enumerate()
        {
            let chunk: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8 | 1).collect();
            a.append(&chunk).unwrap();
            expect.extend_from_slice(&chunk);
            assert_eq!(a.end(), expect.len() as u64);
            let on_disk = buffered.metadata().unwrap().len();
            assert_eq!(on_disk, round_up(expect.len()) as u64, "padded to a block");
            let mut back = vec![0u8; expect.len()];
            buffered.read_exact_at(&mut back, 0).unwrap();
            assert!(back == expect, "bytes after append {i} differ");
        }
        // Dropping cuts the padding; a reopened appender continues from the partial block.
        drop(a);
        assert_eq!(buffered.metadata().unwrap().len(), expect.len() as u64);
        let mut a = DirectAppender::open(&path, &buffered, expect.len() as u64).unwrap();
        a.append(b"more").unwrap();
        expect.extend_from_slice(b"more");
        drop(a);
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut File::open(&path).unwrap(), &mut back).unwrap();
        assert!(
            back == expect,
            "the finished file is exactly the appended bytes"
        );
    }
}
