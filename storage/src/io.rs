//! Segment writes and fsyncs through io_uring (opt-in, `STRATA_IO_URING=1`) where the kernel
//! allows, and through plain `pwrite`/`fdatasync` otherwise.
//!
//! # Why hand-written
//!
//! `tokio-uring` runs its own single-threaded runtime and owns the buffers it writes; our
//! appends happen synchronously inside a request handler, under the partition's lock, from
//! bytes the request already holds. So each worker thread keeps a small ring of its own
//! ([`io_uring`] crate) and every call here submits its operations and waits for all of their
//! completions before it returns. That keeps the buffer borrow sound (see `submit_all`) and
//! lets one `io_uring_enter` carry several operations: [`sync_data_all`] fsyncs a segment's
//! `.log` and both indexes in parallel, where the fallback does three `fdatasync`s in turn.
//!
//! # Choosing
//!
//! The plain calls are the default, because they measured faster: with a ring per thread
//! and a wait for every append, buffered appends to a growing file are handed to the kernel's
//! io-wq workers, and a 1 KB acks=1 producer ran at 0.87× the throughput with ~27× the p50
//! end-to-end latency of `pwrite` on this machine (docs/BENCHMARKS.md). io_uring pays off
//! when operations of many partitions share a submission, which this synchronous design does
//! not do yet. `STRATA_IO_URING=1` (or `on`) turns it on: a thread's first call creates its
//! ring; if the kernel refuses (`ENOSYS`, `EPERM` under a seccomp profile,
//! `io_uring_disabled`), or an operation comes back `EINVAL`/`EOPNOTSUPP` (a kernel without
//! that opcode), the process falls back to the plain calls for good and says so once.
//! [`set_thread_backend`] forces a backend on the calling thread, so tests run both paths.
//! [`counters`] tells how many operations took each path.

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

/// Entries per ring: a call submits at most three operations at a time.
const RING_ENTRIES: u32 = 8;

thread_local! {
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
    static FORCED: Cell<Option<Backend>> = const { Cell::new(None) };
}

/// (operations through io_uring, operations through the plain calls) since start.
#[must_use]
pub fn counters() -> (u64, u64) {
    (
        URING_OPS.load(Ordering::Relaxed),
        STD_OPS.load(Ordering::Relaxed),
    )
}

/// Forces `backend` on the calling thread (`None`: back to the process's choice).
pub fn set_thread_backend(backend: Option<Backend>) {
    FORCED.with(|f| f.set(backend));
}

/// The backend the calling thread uses now.
#[must_use]
pub fn backend() -> Backend {
    // A kernel that refused io_uring gets the plain calls whatever was asked.
    let refused = STATE.load(Ordering::Relaxed) == UNUSABLE;
    let wanted = match FORCED.with(Cell::get) {
        Some(b) => b,
        None if chosen() => Backend::Uring,
        None => Backend::Std,
    };
    if refused { Backend::Std } else { wanted }
}

/// Whether `STRATA_IO_URING` asks for io_uring (read once).
fn chosen() -> bool {
    static CHOSEN: OnceLock<bool> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        std::env::var("STRATA_IO_URING").is_ok_and(|v| matches!(v.trim(), "1" | "on" | "true"))
    })
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
fn with_ring<R>(f: impl FnOnce(&mut IoUring) -> io::Result<R>) -> Option<io::Result<R>> {
    if backend() != Backend::Uring {
        return None;
    }
    RING.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            match IoUring::new(RING_ENTRIES) {
                Ok(r) => {
                    if STATE.swap(USABLE, Ordering::Relaxed) == UNDECIDED {
                        tracing::info!("appends and fsyncs go through io_uring");
                    }
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
        let r = with_ring(|ring| Ok(unsafe { submit_all(ring, &[entry]) }.remove(0)));
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

/// `fdatasync`s every file, in parallel through io_uring (one submission), else in turn.
///
/// # Errors
/// The first file's error.
pub fn sync_data_all(files: &[&File]) -> io::Result<()> {
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
        match with_ring(|ring| Ok(unsafe { submit_all(ring, &entries) })) {
            Some(Ok(results)) => {
                let unsupported_op = results
                    .iter()
                    .any(|r| r.as_ref().err().is_some_and(unsupported));
                if unsupported_op {
                    give_up(&io::Error::from_raw_os_error(Errno::INVAL.raw_os_error()));
                    sync_plain(chunk)?;
                } else {
                    URING_OPS.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    for r in results {
                        r?;
                    }
                }
            }
            Some(Err(e)) => return Err(e),
            None => sync_plain(chunk)?,
        }
    }
    Ok(())
}

fn sync_plain(files: &[&File]) -> io::Result<()> {
    for f in files {
        STD_OPS.fetch_add(1, Ordering::Relaxed);
        f.sync_data()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

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
