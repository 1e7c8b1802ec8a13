//! Group commit: the fsyncs that the flush policy (`flush.messages`) asks for after an
//! append, shared between every produce waiting at the same time.
//!
//! An append that needs an fsync does not make it under the partition's lock. It queues a
//! request here and the produce waits (asynchronously) for the answer. One thread takes
//! every request queued so far, notes for each distinct partition its active `.log` and log
//! end offset ([`strata_storage::Log::begin_flush`], under that partition's lock, briefly),
//! fsyncs all those files together ([`strata_storage::io::sync_data_many`]: one io_uring
//! submission, or parallel `fdatasync`s), then moves each partition's high watermark to what
//! is now durable and answers the waiters. Requests that arrive during the fsyncs form the
//! next batch, so the more produces wait, the more each fsync serves; concurrent produces to
//! one partition share one fsync, and produces to many partitions share one journal commit.
//!
//! Kafka makes this fsync inside the append (`UnifiedLog.append` flushes when
//! `unflushedMessages >= flushInterval`), before the high watermark moves and before the
//! produce is answered; both stay true here. Only the lock is not held meanwhile.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use strata_storage::{LogError, PendingFlush};
use tokio::sync::oneshot;

use super::Partition;

/// Why a group commit did not make an append durable. The server's `error` module turns it into
/// the produce's Kafka error code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FlushError {
    /// The log could not begin the flush.
    #[error("{0}")]
    Log(Arc<LogError>),
    /// The fsync failed, or the group commit lost the request.
    #[error("{0}")]
    Storage(String),
}

/// A group commit's answer.
pub type FlushResult = Result<(), FlushError>;

/// What an append waits on before its records count as written.
pub struct FlushWait(oneshot::Receiver<FlushResult>);

impl FlushWait {
    /// Resolves once the append's records are fsynced (or the fsync failed).
    pub async fn wait(self) -> FlushResult {
        self.0
            .await
            .unwrap_or_else(|_| Err(FlushError::Storage("the group commit stopped".to_owned())))
    }
}

/// (appends that waited for an fsync, batches fsynced, `.log` files fsynced) since start.
/// With concurrent produces the first is larger than the last two: fsyncs were shared.
#[must_use]
pub fn counters() -> (u64, u64, u64) {
    (
        REQUESTS.load(Ordering::Relaxed),
        BATCHES.load(Ordering::Relaxed),
        FILES.load(Ordering::Relaxed),
    )
}

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static BATCHES: AtomicU64 = AtomicU64::new(0);
static FILES: AtomicU64 = AtomicU64::new(0);

struct Request {
    partition: Arc<Partition>,
    done: oneshot::Sender<FlushResult>,
}

/// The requests not yet taken by the group-commit thread.
struct Queue {
    pending: Mutex<Vec<Request>>,
    /// Signalled when `pending` becomes non-empty.
    ready: Condvar,
}

/// The process's queue, its thread started on first use; `None` if the thread could not be
/// started.
fn queue() -> Option<&'static Queue> {
    static QUEUE: OnceLock<Option<&'static Queue>> = OnceLock::new();
    *QUEUE.get_or_init(|| {
        let q: &'static Queue = Box::leak(Box::new(Queue {
            pending: Mutex::new(Vec::new()),
            ready: Condvar::new(),
        }));
        match std::thread::Builder::new()
            .name("strata-group-commit".to_owned())
            .spawn(move || run(q))
        {
            Ok(_) => Some(q),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the group-commit thread; fsyncing on the request's thread");
                None
            }
        }
    })
}

/// Queues an fsync of `partition`'s log up to its current end, with the segments a roll
/// sealed. Call with the partition's log locked, right after the append, so the batch that
/// serves the request sees the append. `None` when there is no group-commit thread: the
/// caller fsyncs by itself. A roll's fsync drops the [`FlushWait`]: nothing waits on it.
pub(super) fn request(partition: Arc<Partition>) -> Option<FlushWait> {
    #[cfg(test)]
    if INLINE.with(std::cell::Cell::get) {
        return None;
    }
    let q = queue()?;
    let (done, rx) = oneshot::channel();
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    let mut pending = q
        .pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    pending.push(Request { partition, done });
    q.ready.notify_one();
    Some(FlushWait(rx))
}

#[cfg(test)]
thread_local! {
    static INLINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Appends made on this thread fsync by themselves instead of through the group-commit
/// thread, so that a seeded simulation does not depend on that thread's timing.
#[cfg(test)]
pub(crate) fn fsync_inline_on_this_thread() {
    INLINE.with(|c| c.set(true));
}

fn run(q: &'static Queue) {
    let mut batch = Vec::new();
    loop {
        {
            let mut pending = q
                .pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            while pending.is_empty() {
                pending = q
                    .ready
                    .wait(pending)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            std::mem::swap(&mut batch, &mut *pending);
        }
        // A panic must not leave later produces waiting for a thread that is gone: the
        // waiters of this batch are answered with an error (their senders are dropped) and
        // the thread carries on.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit(&mut batch))).is_err() {
            tracing::error!(
                requests = batch.len(),
                "group commit panicked; answering its produces with an error"
            );
            batch.clear();
        }
    }
}

/// fsyncs every partition `batch` names, once each, and answers the requests; leaves `batch`
/// empty.
fn commit(batch: &mut Vec<Request>) {
    // One fsync per partition however many of its appends wait.
    let mut partitions: Vec<Arc<Partition>> = batch.iter().map(|r| r.partition.clone()).collect();
    partitions.sort_by_key(|p| Arc::as_ptr(p) as usize);
    partitions.dedup_by(|a, b| Arc::ptr_eq(a, b));
    let now = crate::now_ms();
    let begun: Vec<Result<PendingFlush, FlushError>> = partitions
        .iter()
        .map(|p| {
            p.log()
                .begin_flush(now)
                .map_err(|e| FlushError::Log(Arc::new(e)))
        })
        .collect();
    // A partition's own files (segments sealed by a roll, then the active `.log`) are
    // consecutive, and its flush counts only if every one of them was fsynced.
    let files: Vec<&std::fs::File> = begun
        .iter()
        .filter_map(|b| b.as_ref().ok())
        .flat_map(|f| f.files.iter().map(|f| &**f))
        .collect();
    let mut synced = strata_storage::io::sync_data_many(&files).into_iter();
    BATCHES.fetch_add(1, Ordering::Relaxed);
    FILES.fetch_add(files.len() as u64, Ordering::Relaxed);
    let outcomes: Vec<FlushResult> = partitions
        .iter()
        .zip(begun)
        .map(|(p, b)| {
            let flush = b?;
            let mut outcome = Some(Ok(()));
            for _ in 0..flush.files.len() {
                match synced.next() {
                    Some(Ok(())) => {}
                    failed => {
                        if matches!(outcome, Some(Ok(()))) {
                            outcome = failed;
                        }
                    }
                }
            }
            match outcome {
                Some(Ok(())) => {
                    p.flushed(flush.end_offset);
                    Ok(())
                }
                Some(Err(e)) => {
                    tracing::error!(topic = %p.topic, partition = p.index, file = %flush.path.display(), error = %e, "fsync failed");
                    Err(FlushError::Storage(format!(
                        "fsync {}: {e}",
                        flush.path.display()
                    )))
                }
                None => Err(FlushError::Storage("fsync result missing".to_owned())),
            }
        })
        .collect();
    for req in batch.drain(..) {
        let i = partitions
            .binary_search_by_key(&(Arc::as_ptr(&req.partition) as usize), |p| {
                Arc::as_ptr(p) as usize
            })
            .unwrap_or(usize::MAX);
        let outcome = outcomes.get(i).cloned().unwrap_or_else(|| {
            Err(FlushError::Storage(
                "partition missing from its group commit".to_owned(),
            ))
        });
        // A produce with acks=0 does not wait: its receiver is gone.
        let _ = req.done.send(outcome);
    }
}
