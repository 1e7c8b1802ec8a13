//! Segment writes and fsyncs through io_uring where the kernel allows and it pays, and
//! through plain `pwrite`/`fdatasync` otherwise.
//!
//! # Why hand-written
//!
//! `tokio-uring` runs its own single-threaded runtime and owns the buffers it writes; our
//! appends happen synchronously inside a request handler, under the partition's lock, from
//! bytes the request already holds. So each thread keeps a ring of its own ([`io_uring`]
//! crate) and every call here submits its operations and waits for all of their completions
//! before it returns. That keeps the buffer borrow sound (see `submit_all`) and lets one
//! `io_uring_enter` carry many operations: [`sync_data_many`] fsyncs every file of a group
//! commit in one submission, and [`sync_data_all`] a segment's `.log` and both indexes.
//!
//! # Choosing
//!
//! `STRATA_IO_URING` ([`Mode`]): unset or `sync` (the default) sends batches of fsyncs
//! through the ring and keeps appends on `pwrite`; `1` sends appends too; `0` sends nothing.
//! Appends stay on `pwrite` because on ext4 a buffered write cannot complete without blocking,
//! so io_uring hands every one to an io-wq worker and the waiting append pays two wakeups more
//! than a `pwrite` (a copy into the page cache): the same throughput and ~20× the p50
//! end-to-end latency at moderate load on this machine. A lone fsync is handed to io-wq as
//! well, so it is called directly; several in one submission run in parallel in the kernel,
//! which is where the ring pays (docs/bench/io-uring-group-commit.md). [`detect`] probes the
//! kernel at startup and says which path is in use; if the kernel refuses (`ENOSYS`, `EPERM`
//! under a seccomp profile, `io_uring_disabled`), or an operation comes back
//! `EINVAL`/`EOPNOTSUPP` (a kernel without that opcode), the process falls back to the plain
//! calls for good and says so once. [`set_thread_backend`] forces a backend on the calling
//! thread, so tests run both paths. [`counters`] tells how many operations took each path.

#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use io_uring::{IoUring, opcode, types};
use rustix::io::Errno;

/// Where a thread's writes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// io_uring (`IORING_OP_WRITE`, `IORING_OP_FSYNC`).
    Uring,
    /// `pwrite` and `fdatasync`.
    Std,
}

/// Process-wide state: not yet decided, io_uring usable, or not.
const UNDECIDED: u8 = 0;
const USABLE: u8 = 1;
const UNUSABLE: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNDECIDED);

static URING_OPS: AtomicU64 = AtomicU64::new(0);
static STD_OPS: AtomicU64 = AtomicU64::new(0);

/// Entries per ring: the most operations one submission carries. Batched fsyncs
/// ([`sync_data_many`]) of more files go in several submissions of this many.
const RING_ENTRIES: u32 = 256;

thread_local! {
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
    static FORCED: Cell<Option<Backend>> = const { Cell::new(None) };
}

/// What `STRATA_IO_URING` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `0`/`off`: plain calls only.
    Off,
    /// Unset (the default) or `sync`: fsyncs through io_uring, appends through `pwrite`.
    Sync,
    /// `1`/`on`/`all`: appends and fsyncs through io_uring.
    All,
}

/// What an operation is, for choosing its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Sync,
}

/// (operations through io_uring, operations through the plain calls) since start.
#[must_use]
pub fn counters() -> (u64, u64) {
    (
        URING_OPS.load(Ordering::Relaxed),
        STD_OPS.load(Ordering::Relaxed),
    )
}

/// Forces `backend` on the calling thread for every operation (`None`: back to the
/// process's choice).
pub fn set_thread_backend(backend: Option<Backend>) {
    FORCED.with(|f| f.set(backend));
}

/// The backend the calling thread uses now for appends.
#[must_use]
pub fn backend() -> Backend {
    backend_for(Op::Write)
}

/// The backend the calling thread uses now for fsyncs.
#[must_use]
pub fn sync_backend() -> Backend {
    backend_for(Op::Sync)
}

fn backend_for(op: Op) -> Backend {
    // A kernel that refused io_uring gets the plain calls whatever was asked.
    let refused = STATE.load(Ordering::Relaxed) == UNUSABLE;
    let wanted = match (FORCED.with(Cell::get), mode(), op) {
        (Some(b), _, _) => b,
        (None, Mode::All, _) | (None, Mode::Sync, Op::Sync) => Backend::Uring,
        (None, Mode::Off, _) | (None, Mode::Sync, Op::Write) => Backend::Std,
    };
    if refused { Backend::Std } else { wanted }
}

/// What `STRATA_IO_URING` asks for (read once).
#[must_use]
pub fn mode() -> Mode {
    static MODE: OnceLock<Mode> = OnceLock::new();
    *MODE.get_or_init(|| {
        parse_mode(std::env::var("STRATA_IO_URING").ok().as_deref()).unwrap_or_else(|| {
            tracing::warn!(
                "STRATA_IO_URING is not one of 0, off, sync, 1, on, all; using the default"
            );
            Mode::Sync
        })
    })
}

/// `STRATA_IO_URING`'s value as a [`Mode`]; `None` for a value we do not know.
fn parse_mode(v: Option<&str>) -> Option<Mode> {
    match v.map(str::trim) {
        None | Some("" | "sync" | "fsync") => Some(Mode::Sync),
        Some("0" | "off" | "false") => Some(Mode::Off),
        Some("1" | "on" | "true" | "all") => Some(Mode::All),
        Some(_) => None,
    }
}

/// Decides at startup whether this kernel gives us io_uring, so the first produce does not
/// find out, and returns one line for the log saying which path is in use and why. Creates a
/// ring and asks the kernel (`IORING_REGISTER_PROBE`) whether it has `IORING_OP_WRITE` and
/// `IORING_OP_FSYNC`; anything missing or refused means the plain calls for good.
pub fn detect() -> String {
    let m = mode();
    if m == Mode::Off {
        return "io: pwrite and fdatasync (STRATA_IO_URING=0)".to_owned();
    }
    let verdict = IoUring::new(4).and_then(|ring| {
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if probe.is_supported(opcode::Write::CODE) && probe.is_supported(opcode::Fsync::CODE) {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(
                Errno::OPNOTSUPP.raw_os_error(),
            ))
        }
    });
    match verdict {
        Err(e) => {
            STATE.store(UNUSABLE, Ordering::Relaxed);
            format!("io: pwrite and fdatasync (the kernel refused io_uring: {e})")
        }
        Ok(()) => {
            STATE.store(USABLE, Ordering::Relaxed);
            match m {
                Mode::All => {
                    "io: appends and fsyncs through io_uring (STRATA_IO_URING=1)".to_owned()
                }
                _ => "io: appends through pwrite, fsyncs through io_uring, batched \
                      (the default where the kernel has io_uring; STRATA_IO_URING=0 or 1 to change)"
                    .to_owned(),
            }
        }
    }
}

/// Bytes of the active segment after which the kernel is asked to start writing them back
/// (`STRATA_WRITEBACK_KB`, read once; 0, the default, asks nothing). Each append that crosses
/// a multiple of this many bytes starts writeback of the whole chunks behind it, so dirty
/// data of a growing segment stays bounded instead of waiting for the flusher threads, the
/// 30 s dirty expiry or the roll's fsync. Measured in docs/BENCHMARKS.md ("Early writeback").
#[must_use]
pub fn writeback_bytes() -> u64 {
    static BYTES: OnceLock<u64> = OnceLock::new();
    *BYTES.get_or_init(|| env_kib("STRATA_WRITEBACK_KB", 0))
}

/// The storage switches' reading of a variable that is on or off: `1`, `true` or `on` is on,
/// anything else (or nothing) off.
pub(crate) fn env_switch(name: &str) -> bool {
    matches!(
        std::env::var(name).ok().as_deref().map(str::trim),
        Some("1" | "true" | "on")
    )
}

/// The storage switches' reading of a size in KiB, as bytes: `default` (bytes) when unset or
/// empty, and with a warning when it is not a number.
pub(crate) fn env_kib(name: &str, default: u64) -> u64 {
    match std::env::var(name).ok().as_deref().map(str::trim) {
        None | Some("") => default,
        Some(s) => s.parse::<u64>().map_or_else(
            |_| {
                tracing::warn!("{name} is not a number of KiB; using {default} bytes");
                default
            },
            |kb| kb.saturating_mul(1024),
        ),
    }
}

/// The whole `chunk`-byte chunks an append from `start` to `end` completed: the range to
/// start writing back, or `None` if the append crossed no chunk boundary.
#[must_use]
pub fn completed_chunks(start: u64, end: u64, chunk: u64) -> Option<(u64, u64)> {
    if chunk == 0 {
        return None;
    }
    let (from, to) = (start / chunk * chunk, end / chunk * chunk);
    (to > from).then_some((from, to - from))
}

/// Starts writeback of `len` bytes at `offset` (`sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`): the kernel queues the dirty pages for writing and returns without
/// waiting for them, so nothing here is made durable.
///
/// # Errors
/// What the kernel returned.
pub fn start_writeback(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Ok(());
    };
    // SAFETY: a plain system call on a descriptor `file` keeps open for the call; no memory
    // is passed.
    let r = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a new segment's `.log` reserves its blocks up to `segment.bytes` when it is
/// created (`STRATA_PREALLOCATE=1`, read once; off by default). The reservation keeps the
/// file's size (`FALLOC_FL_KEEP_SIZE`), so recovery and readers see only appended bytes;
/// sealing gives back what the segment did not use. Measured in docs/BENCHMARKS.md.
#[must_use]
pub fn preallocate() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| env_switch("STRATA_PREALLOCATE"))
}

/// Reserves `len` bytes of blocks for `file` from its start without changing its size.
///
/// # Errors
/// What the kernel returned (`EOPNOTSUPP` on a file system without `fallocate`).
pub fn reserve(file: &File, len: u64) -> io::Result<()> {
    rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, len)?;
    Ok(())
}

fn give_up(e: &io::Error) {
    if STATE.swap(UNUSABLE, Ordering::Relaxed) != UNUSABLE {
        tracing::warn!(error = %e, "io_uring unavailable; using pwrite/fdatasync");
    }
}

/// Whether an operation's error means the kernel lacks it (not that the file failed).
fn unsupported(e: &io::Error) -> bool {
    e.raw_os_error().is_some_and(|code| {
        code == Errno::INVAL.raw_os_error() || code == Errno::OPNOTSUPP.raw_os_error()
    })
}

/// Runs `f` with this thread's ring, creating it on first use. `None` when io_uring is not
/// usable (then the caller takes the plain path).
fn with_ring<R>(op: Op, f: impl FnOnce(&mut IoUring) -> io::Result<R>) -> Option<io::Result<R>> {
    if backend_for(op) != Backend::Uring {
        return None;
    }
    RING.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            match IoUring::new(RING_ENTRIES) {
                Ok(r) => {
                    let _ = STATE.compare_exchange(
                        UNDECIDED,
                        USABLE,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    *slot = Some(r);
                }
                Err(e) => {
                    give_up(&e);
                    return None;
                }
            }
        }
        let ring = slot.as_mut()?;
        Some(f(ring))
    })
}

/// Submits `entries` and waits until every one of them has completed; returns each result
/// (bytes or 0, or the error), in the order given.
///
/// # Safety
///
/// Every buffer an entry points at must stay valid and unmodified until this returns. This
/// function does not return while any submitted entry is still in flight: it waits for as
/// many completions as it pushed entries, retrying interrupted waits. (Should the wait itself
/// fail for another reason, the ring is dropped, which tears the kernel side down; io_uring's
/// teardown waits for requests in flight before the memory they use can be reused.)
unsafe fn submit_all(
    ring: &mut IoUring,
    entries: &[io_uring::squeue::Entry],
) -> Vec<io::Result<u32>> {
    let n = entries.len();
    {
        let mut sq = ring.submission();
        // All or nothing: an entry left queued would be submitted by a later call, after its
        // buffer is gone.
        if sq.capacity() - sq.len() < n {
            return (0..n)
                .map(|_| Err(io::Error::other("io_uring submission queue full")))
                .collect();
        }
        for (i, e) in entries.iter().enumerate() {
            let e = e.clone().user_data(i as u64);
            // SAFETY: the caller keeps every buffer alive until we return, and we return only
            // after all `n` completions (see above). There is room for every entry (checked
            // above), so no push fails.
            let _ = unsafe { sq.push(&e) };
        }
    }
    let mut out: Vec<Option<io::Result<u32>>> = (0..n).map(|_| None).collect();
    let mut done = 0;
    while done < n {
        match ring.submit_and_wait(n - done) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // The completion queue is full: reap, then wait again.
            Err(e) if e.raw_os_error() == Some(Errno::BUSY.raw_os_error()) => {}
            Err(e) => {
                give_up(&e);
                return (0..n)
                    .map(|_| Err(io::Error::new(e.kind(), e.to_string())))
                    .collect();
            }
        }
        for cqe in ring.completion() {
            let i = usize::try_from(cqe.user_data()).unwrap_or(usize::MAX);
            let r = cqe.result();
            if let Some(slot) = out.get_mut(i)
                && slot.is_none()
            {
                *slot = Some(if r < 0 {
                    Err(io::Error::from_raw_os_error(-r))
                } else {
                    Ok(u32::try_from(r).unwrap_or(0))
                });
                done += 1;
            }
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(io::Error::other("io_uring completion lost"))))
        .collect()
}

/// Writes all of `buf` at `offset` (a positional write that resumes after short writes).
///
/// # Errors
/// The write's I/O error.
pub fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        let entry = opcode::Write::new(types::Fd(file.as_raw_fd()), buf.as_ptr(), len)
            .offset(offset)
            .build();
        // SAFETY: `buf` is borrowed for the whole call and `submit_all` returns only after the
        // write completed.
        let r = with_ring(Op::Write, |ring| {
            Ok(unsafe { submit_all(ring, &[entry]) }.remove(0))
        });
        let written = match r {
            Some(Ok(Ok(n))) => {
                URING_OPS.fetch_add(1, Ordering::Relaxed);
                n as usize
            }
            Some(Ok(Err(e))) if unsupported(&e) => {
                give_up(&e);
                continue;
            }
            Some(Ok(Err(e)) | Err(e)) => return Err(e),
            None => {
                STD_OPS.fetch_add(1, Ordering::Relaxed);
                file.write_all_at(buf, offset)?;
                buf.len()
            }
        };
        if written == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0"));
        }
        buf = &buf[written.min(buf.len())..];
        offset += written as u64;
    }
    Ok(())
}

/// `fdatasync`s a segment's files: in parallel through io_uring (one submission), else in turn.
///
/// # Errors
/// The first failed file's error.
pub fn sync_data_all(files: &[&File]) -> io::Result<()> {
    sync_files(files, false).into_iter().collect()
}

/// `fdatasync`s every file and returns each one's result, in the order given. Through
/// io_uring all of them go in one submission (up to [`RING_ENTRIES`] at a time) and the
/// kernel runs them in parallel; on the plain path up to [`PLAIN_PARALLEL`] threads call
/// `fdatasync` at once. Either way the file system can serve concurrent fsyncs with one
/// journal commit, which is what group commit and the shutdown flush rely on.
pub fn sync_data_many(files: &[&File]) -> Vec<io::Result<()>> {
    sync_files(files, true)
}

fn sync_files(files: &[&File], parallel: bool) -> Vec<io::Result<()>> {
    // A lone fsync gains nothing from the ring: io_uring always hands an fsync to an io-wq
    // worker, two more wakeups than calling `fdatasync` here (measured slower; see
    // docs/bench/io-uring-group-commit.md). Only `STRATA_IO_URING=1` or a forced backend
    // sends it through the ring anyway.
    if files.len() == 1 && FORCED.with(Cell::get).is_none() && mode() == Mode::Sync {
        return sync_plain(files, false);
    }
    let mut out = Vec::with_capacity(files.len());
    for chunk in files.chunks(RING_ENTRIES as usize) {
        let entries: Vec<_> = chunk
            .iter()
            .map(|f| {
                opcode::Fsync::new(types::Fd(f.as_raw_fd()))
                    .flags(types::FsyncFlags::DATASYNC)
                    .build()
            })
            .collect();
        // SAFETY: fsync entries point at no memory of ours.
        match with_ring(Op::Sync, |ring| Ok(unsafe { submit_all(ring, &entries) })) {
            Some(Ok(results)) => {
                let unsupported_op = results
                    .iter()
                    .any(|r| r.as_ref().err().is_some_and(unsupported));
                if unsupported_op {
                    give_up(&io::Error::from_raw_os_error(Errno::INVAL.raw_os_error()));
                    out.extend(sync_plain(chunk, parallel));
                } else {
                    URING_OPS.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    out.extend(results.into_iter().map(|r| r.map(|_| ())));
                }
            }
            Some(Err(e)) => out.extend(
                chunk
                    .iter()
                    .map(|_| Err(io::Error::new(e.kind(), e.to_string()))),
            ),
            None => out.extend(sync_plain(chunk, parallel)),
        }
    }
    out
}

/// Threads the plain path uses at most for one batch of fsyncs.
pub const PLAIN_PARALLEL: usize = 16;

fn sync_plain(files: &[&File], parallel: bool) -> Vec<io::Result<()>> {
    STD_OPS.fetch_add(files.len() as u64, Ordering::Relaxed);
    if !parallel || files.len() < 2 {
        return files.iter().map(|f| f.sync_data()).collect();
    }
    let per = files.len().div_ceil(PLAIN_PARALLEL);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(per)
            .map(|part| {
                let h = scope.spawn(move || part.iter().map(|f| f.sync_data()).collect());
                (part.len(), h)
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(n, h)| {
                h.join().unwrap_or_else(|_| {
                    (0..n)
                        .map(|_| Err(io::Error::other("fsync thread panicked")))
                        .collect::<Vec<_>>()
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn writeback_covers_each_completed_chunk_once() {
        let mb = 1 << 20;
        assert_eq!(completed_chunks(0, 100, 0), None, "0 turns it off");
        assert_eq!(completed_chunks(0, mb - 1, mb), None);
        assert_eq!(completed_chunks(0, mb, mb), Some((0, mb)));
        assert_eq!(
            completed_chunks(mb, mb + 10, mb),
            None,
            "the chunk was started already"
        );
        assert_eq!(completed_chunks(mb - 10, 3 * mb + 5, mb), Some((0, 3 * mb)));
        // Appends of any sizes start every chunk exactly once, in order.
        let mut started = 0;
        let mut at = 0;
        for len in [1, 700_000, 400_000, 5, 3 * mb, 17, mb] {
            if let Some((from, n)) = completed_chunks(at, at + len, mb) {
                assert_eq!(from, started);
                started = from + n;
            }
            at += len;
        }
        assert_eq!(started, at / mb * mb);
    }

    #[test]
    fn a_reservation_keeps_the_size_and_truncation_gives_it_back() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        if let Err(e) = reserve(&f, 16 << 20) {
            assert!(unsupported(&e), "{e}");
            return;
        }
        f.write_all_at(&[1u8; 4096], 0).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 4096);
        assert!(f.metadata().unwrap().blocks() * 512 >= 16 << 20);
        f.set_len(4096).unwrap();
        assert!(f.metadata().unwrap().blocks() * 512 < 1 << 20);
    }

    #[test]
    fn start_writeback_accepts_a_written_range() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("f")).unwrap();
        f.write_all_at(&[7u8; 8192], 0).unwrap();
        start_writeback(&f, 0, 8192).unwrap();
        // Past the end is not an error either: there is nothing dirty to write.
        start_writeback(&f, 1 << 30, 4096).unwrap();
    }

    fn roundtrip(backend: Backend) {
        set_thread_backend(Some(backend));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        write_all_at(&f, b"hello", 0).unwrap();
        write_all_at(&f, &big, 5).unwrap();
        write_all_at(&f, b"HE", 0).unwrap();
        let g = File::open(&path).unwrap();
        sync_data_all(&[&f, &g]).unwrap();
        let mut back = Vec::new();
        File::open(&path).unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(&back[..5], b"HEllo");
        assert_eq!(&back[5..], &big[..]);
        set_thread_backend(None);
    }

    #[test]
    fn writes_and_fsyncs_through_io_uring() {
        let before = counters().0;
        roundtrip(Backend::Uring);
        // Where the kernel refuses io_uring the plain path ran; both must give the same bytes.
        if STATE.load(Ordering::Relaxed) == USABLE {
            assert!(counters().0 > before, "no operation went through io_uring");
        }
    }

    #[test]
    fn the_fallback_writes_and_fsyncs_the_same() {
        let before = counters().1;
        roundtrip(Backend::Std);
        assert!(counters().1 >= before + 5, "the plain path was not taken");
    }

    #[test]
    fn modes_parse() {
        assert_eq!(parse_mode(None), Some(Mode::Sync));
        assert_eq!(parse_mode(Some("")), Some(Mode::Sync));
        assert_eq!(parse_mode(Some("sync")), Some(Mode::Sync));
        assert_eq!(parse_mode(Some("0")), Some(Mode::Off));
        assert_eq!(parse_mode(Some(" off ")), Some(Mode::Off));
        assert_eq!(parse_mode(Some("1")), Some(Mode::All));
        assert_eq!(parse_mode(Some("on")), Some(Mode::All));
        assert_eq!(parse_mode(Some("maybe")), None);
    }

    /// More files than one submission carries: one result per file, on both paths.
    #[test]
    fn many_fsyncs_answer_each_file() {
        for backend in [Backend::Uring, Backend::Std] {
            set_thread_backend(Some(backend));
            let (uring_before, std_before) = counters();
            let dir = tempfile::tempdir().unwrap();
            let files: Vec<File> = (0..RING_ENTRIES as usize + 40)
                .map(|i| File::create(dir.path().join(i.to_string())).unwrap())
                .collect();
            let refs: Vec<&File> = files.iter().collect();
            let results = sync_data_many(&refs);
            assert_eq!(results.len(), refs.len());
            assert!(
                results.iter().all(Result::is_ok),
                "{backend:?}: {results:?}"
            );
            let (uring, std) = counters();
            if backend == Backend::Std {
                assert!(std >= std_before + refs.len() as u64);
            } else if STATE.load(Ordering::Relaxed) == USABLE {
                assert!(uring >= uring_before + refs.len() as u64);
            }
            set_thread_backend(None);
        }
    }

    #[test]
    fn errors_come_back() {
        set_thread_backend(Some(Backend::Uring));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro");
        std::fs::write(&path, b"x").unwrap();
        let ro = File::open(&path).unwrap();
        assert!(write_all_at(&ro, b"nope", 0).is_err());
        set_thread_backend(Some(Backend::Std));
        assert!(write_all_at(&ro, b"nope", 0).is_err());
        set_thread_backend(None);
    }
}
