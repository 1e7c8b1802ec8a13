//! The broker-wide budget for request bytes read from sockets (`queued.max.request.bytes`),
//! which every connection draws on before it reads a frame's body (back-pressure). The
//! connections (the server's `connection` module) take and return it; the node owns it so that
//! every listener shares one budget.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::BytesMut;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// Frames up to this size are "small" (every control request, fetches, heartbeats, small
/// produces) and draw on a reserve of the budget of their own, so that a large produce
/// waiting for memory never holds them up.
const SMALL_FRAME: usize = 64 * 1024;

/// How often, at most, the broker logs that reads are paused for memory.
const THROTTLE_LOG_EVERY_MS: i64 = 10_000;

/// The broker-wide budget for request bytes read from sockets and not yet handled: Kafka's
/// `queued.max.request.bytes` (KIP-72; Kafka's `SimpleMemoryPool`).
///
/// The budget is a byte-counting [`Semaphore`] (tokio's is fair: waiters are served in
/// arrival order, so a large frame is not starved by a stream of smaller ones). It is split
/// in two, which is the part Kafka does not have: one eighth (at least `SMALL_FRAME`,
/// at most half) serves small frames, the rest large ones. A fair semaphore lets the
/// first waiter hold back everyone behind it; with one pool, a 900 KiB produce waiting for
/// memory would stop every heartbeat, metadata request and fetch on the broker behind it. With
/// two, the small requests keep flowing while large produces wait their turn.
///
/// A frame asks for its size, capped at its pool's capacity: a frame larger than the whole
/// pool takes all of it, so it is served as soon as the pool is otherwise idle instead of
/// never (Kafka's pool is likewise non-strict). Request bodies therefore hold at most the
/// budget or, while a frame larger than the large share is in, that frame plus the small
/// share.
pub struct RequestMemory {
    /// `None` when `queued.max.request.bytes` is <= 0 (Kafka's -1): unbounded.
    pools: Option<[Pool; 2]>,
    /// How many times a connection had to wait for memory before reading a frame's body: the
    /// throttling counter (logged with each "reads paused" line).
    pub throttled_reads: AtomicU64,
    /// When "reads paused" was last logged (ms since the epoch), to log it at most every
    /// `THROTTLE_LOG_EVERY_MS`.
    last_logged_ms: AtomicI64,
}

/// One share of the budget.
struct Pool {
    /// For logs.
    name: &'static str,
    /// Bytes; tokio takes permits in `u32`s, so a pool holds at most 4 GiB.
    semaphore: Arc<Semaphore>,
    /// The semaphore's total permits: the cap on what one frame asks for.
    capacity: u32,
}

impl Pool {
    fn new(name: &'static str, bytes: u64) -> Self {
        let capacity = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
        Pool {
            name,
            semaphore: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
        }
    }
}

impl RequestMemory {
    /// The budget for `queued.max.request.bytes` (`None`: unbounded). `max_frame` is
    /// `socket.request.max.bytes`, only for a warning when frames can exceed the budget.
    #[must_use]
    pub fn new(budget: Option<u64>, max_frame: usize) -> Self {
        let pools = budget.map(|total| {
            let small = (total / 8).max(SMALL_FRAME as u64).min(total / 2);
            let large = total - small;
            tracing::info!(
                queued_max_request_bytes = total,
                small_frames = small,
                large_frames = large,
                "request memory budget"
            );
            if max_frame as u64 > large {
                tracing::warn!(
                    socket_request_max_bytes = max_frame,
                    large_frames = large,
                    "queued.max.request.bytes is below socket.request.max.bytes: a larger \
                     frame waits until no other large frame is held"
                );
            }
            [Pool::new("small", small), Pool::new("large", large)]
        });
        RequestMemory {
            pools,
            throttled_reads: AtomicU64::new(0),
            last_logged_ms: AtomicI64::new(i64::MIN),
        }
    }

    /// Takes `frame_len` bytes from the budget (capped at the pool's capacity), waiting while
    /// they are not available. Cancel-safe: dropping the future gives back what it took.
    pub(crate) async fn acquire(&self, frame_len: usize, peer: SocketAddr) -> Lease {
        let Some(pools) = &self.pools else {
            return Lease::default();
        };
        let pool = &pools[usize::from(frame_len > SMALL_FRAME)];
        let want = u32::try_from(frame_len)
            .unwrap_or(u32::MAX)
            .min(pool.capacity);
        let permit = match pool.semaphore.clone().try_acquire_many_owned(want) {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => return Lease::default(), // never closed
            Err(TryAcquireError::NoPermits) => {
                let throttled = self.throttled_reads.fetch_add(1, Ordering::Relaxed) + 1;
                let now = crate::now_ms();
                let last = self.last_logged_ms.load(Ordering::Relaxed);
                if now.saturating_sub(last) >= THROTTLE_LOG_EVERY_MS
                    && self
                        .last_logged_ms
                        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    tracing::warn!(
                        pool = pool.name,
                        frame_bytes = frame_len,
                        available = pool.semaphore.available_permits(),
                        capacity = pool.capacity,
                        throttled_reads = throttled,
                        "reads paused: queued.max.request.bytes exhausted"
                    );
                }
                tracing::debug!(%peer, pool = pool.name, frame_bytes = frame_len, "waiting for request memory");
                match pool.semaphore.clone().acquire_many_owned(want).await {
                    Ok(permit) => permit,
                    Err(_) => return Lease::default(), // never closed
                }
            }
        };
        Lease(Some(Arc::new(Mutex::new(Some(permit)))))
    }
}

/// One frame's share of the budget. It goes back at the earlier of two moments: the last
/// slice of the frame's bytes is dropped (see `LeasedFrame`; for a parked fetch, when its
/// task ends), or the request has been handled (inline: when `dispatch` returns; in a task:
/// when the writer has its result). The second bounds handlers that keep a slice of the
/// frame (a group member's metadata), which must not hold the budget for the member's
/// lifetime. `Lease::default()` holds nothing (no budget).
#[derive(Clone, Default)]
pub(crate) struct Lease(Option<Arc<Mutex<Option<OwnedSemaphorePermit>>>>);

impl Lease {
    /// Gives the bytes back; the second call does nothing.
    pub(crate) fn release(&self) {
        if let Some(cell) = &self.0 {
            drop(cell.lock().unwrap_or_else(PoisonError::into_inner).take());
        }
    }
}

/// The owner of one frame's bytes, behind `Bytes::from_owner`: the decoded request's slices
/// (strings, record sets) keep it alive, and dropping the last of them returns the lease.
pub(crate) struct LeasedFrame {
    pub(crate) body: BytesMut,
    pub(crate) lease: Lease,
}

impl AsRef<[u8]> for LeasedFrame {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

impl Drop for LeasedFrame {
    fn drop(&mut self) {
        self.lease.release();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;

    fn peer() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9))
    }

    fn available(m: &RequestMemory) -> [usize; 2] {
        let pools = m.pools.as_ref().expect("bounded");
        [
            pools[0].semaphore.available_permits(),
            pools[1].semaphore.available_permits(),
        ]
    }

    #[tokio::test]
    async fn the_budget_is_split_between_small_and_large_frames() {
        let m = RequestMemory::new(Some(1 << 20), 100 << 20);
        assert_eq!(available(&m), [128 << 10, 896 << 10]);
        let tiny = RequestMemory::new(Some(100 << 10), 100 << 20);
        assert_eq!(available(&tiny), [50 << 10, 50 << 10]);
        assert!(RequestMemory::new(None, 100 << 20).pools.is_none());
    }

    #[tokio::test]
    async fn a_frame_larger_than_its_share_takes_the_whole_share() {
        let m = RequestMemory::new(Some(1 << 20), 100 << 20);
        let lease = tokio::time::timeout(Duration::from_secs(5), m.acquire(2 << 20, peer()))
            .await
            .expect("an oversized frame is admitted when the pool is idle");
        assert_eq!(available(&m), [128 << 10, 0]);
        lease.release();
        assert_eq!(available(&m), [128 << 10, 896 << 10]);
    }

    #[tokio::test]
    async fn a_waiting_large_frame_does_not_hold_up_small_ones() {
        let m = Arc::new(RequestMemory::new(Some(1 << 20), 100 << 20));
        let held = m.acquire(900 << 10, peer()).await;
        let waiter = tokio::spawn({
            let m = m.clone();
            async move { m.acquire(900 << 10, peer()).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second large frame waits");
        assert_eq!(m.throttled_reads.load(Ordering::Relaxed), 1);
        let small = tokio::time::timeout(Duration::from_secs(5), m.acquire(1000, peer()))
            .await
            .expect("a small frame passes a waiting large one");
        drop(held); // the last reference: the permit goes back
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter is admitted once the memory is back")
            .expect("task");
        small.release();
    }

    #[tokio::test]
    async fn a_lease_returns_when_the_frame_is_dropped_or_released() {
        let m = RequestMemory::new(Some(1 << 20), 100 << 20);
        // Dropping the last slice of the frame returns it...
        let lease = m.acquire(1000, peer()).await;
        let body = Bytes::from_owner(LeasedFrame {
            body: BytesMut::from(&[0u8; 1000][..]),
            lease: lease.clone(),
        });
        let slice = body.slice(10..20);
        drop(body);
        assert_eq!(available(&m)[0], (128 << 10) - 1000, "a slice keeps it");
        drop(slice);
        assert_eq!(available(&m)[0], 128 << 10);
        // ...and so does `release` while a slice is still kept (a handled request).
        let lease = m.acquire(1000, peer()).await;
        let kept = Bytes::from_owner(LeasedFrame {
            body: BytesMut::from(&[0u8; 1000][..]),
            lease: lease.clone(),
        });
        lease.release();
        assert_eq!(available(&m)[0], 128 << 10);
        drop(kept);
        assert_eq!(available(&m)[0], 128 << 10, "returned once only");
    }
}
