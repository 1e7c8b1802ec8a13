//! The broker-wide budget for request bytes read from sockets (`queued.max.request.bytes`),
//! which every connection draws on before it reads a frame's body (back-pressure). The
//! connections (the server's `connection` module) take and return it; the node owns it so that
//! every listener shares one budget.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::BytesMut;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, TryAcquireError};

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
///
/// **One owner's share** (not in Kafka either). An [`Owner`] (an authenticated principal, or
/// the address of an anonymous client) may hold, or wait for, at most half of a pool at a
/// time: a frame that would take it past that waits for the owner's own frames to be
/// handled before it joins the pool's queue, so it neither holds memory nor stands in line
/// ahead of other owners. An owner with nothing held is always let in, whatever the frame's
/// size, so no owner is starved by its share. Many connections from one address, each
/// sending a large size prefix and then nothing, thus hold at most half of the pool, and
/// only until the frame deadline cuts them off (the server's `connection` module).
pub struct RequestMemory {
    /// `None` when `queued.max.request.bytes` is <= 0 (Kafka's -1): unbounded.
    pools: Option<[Pool; 2]>,
    /// How many times a connection had to wait for memory before reading a frame's body: the
    /// throttling counter (logged with each "reads paused" line).
    pub throttled_reads: AtomicU64,
    /// How many times a frame waited because its owner was at its share of a pool.
    pub owner_waits: AtomicU64,
    /// When each kind of "reads paused" line (the pool is exhausted; a client is at its
    /// share) was last logged (ms since the epoch), to log each at most every
    /// `THROTTLE_LOG_EVERY_MS`.
    last_logged_ms: [AtomicI64; 2],
}

/// Whose frames a share of the budget is counted against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// An authenticated principal (SASL, or a client certificate), wherever it connects from.
    Principal(Arc<str>),
    /// An anonymous client (`User:ANONYMOUS`), by its address.
    Address(IpAddr),
}

impl Owner {
    /// The owner of a connection from `peer` whose principal is `principal`.
    pub(crate) fn of(principal: &Arc<str>, peer: SocketAddr) -> Owner {
        if &**principal == crate::security::principal::ANONYMOUS {
            Owner::Address(peer.ip())
        } else {
            Owner::Principal(principal.clone())
        }
    }
}

/// One share of the budget.
struct Pool {
    /// For logs.
    name: &'static str,
    /// Bytes; tokio takes permits in `u32`s, so a pool holds at most 4 GiB.
    semaphore: Arc<Semaphore>,
    /// The semaphore's total permits: the cap on what one frame asks for.
    capacity: u32,
    /// What each owner holds or waits for in this pool, and a wake-up for the frames that
    /// wait for their owner's share.
    owners: Arc<Owners>,
}

#[derive(Default)]
struct Owners {
    held: Mutex<HashMap<Owner, u64>>,
    released: Notify,
}

impl Owners {
    /// Counts `want` bytes against `owner` unless that takes it past `share` while it already
    /// holds something.
    fn try_take(&self, owner: &Owner, want: u64, share: u64) -> bool {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let now = held.get(owner).copied().unwrap_or(0);
        if now > 0 && now + want > share {
            return false;
        }
        *held.entry(owner.clone()).or_insert(0) += want;
        true
    }

    fn give_back(&self, owner: &Owner, bytes: u64) {
        {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(now) = held.get_mut(owner) {
                *now = now.saturating_sub(bytes);
                if *now == 0 {
                    held.remove(owner);
                }
            }
        }
        self.released.notify_waiters();
    }
}

/// An owner's count in a pool, given back when dropped (with the frame's permit, or when a
/// waiting frame is cancelled).
struct OwnerShare {
    owners: Arc<Owners>,
    owner: Owner,
    bytes: u64,
}

impl Drop for OwnerShare {
    fn drop(&mut self) {
        self.owners.give_back(&self.owner, self.bytes);
    }
}

impl Pool {
    fn new(name: &'static str, bytes: u64) -> Self {
        let capacity = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
        Pool {
            name,
            semaphore: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            owners: Arc::default(),
        }
    }

    /// The most one owner may hold or wait for at a time: half the pool.
    fn share(&self) -> u64 {
        u64::from(self.capacity / 2).max(1)
    }

    /// Counts `want` more bytes against `owner`'s share, if that stays within it.
    fn try_owner_share(&self, owner: &Owner, want: u32) -> Option<OwnerShare> {
        let want = u64::from(want);
        self.owners
            .try_take(owner, want, self.share())
            .then(|| OwnerShare {
                owners: self.owners.clone(),
                owner: owner.clone(),
                bytes: want,
            })
    }

    /// Waits until `owner` may count `want` more bytes against its share, and counts them.
    async fn owner_share(&self, owner: &Owner, want: u32) -> OwnerShare {
        loop {
            // Registered before the check, so a release between the two is not missed.
            let released = self.owners.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if let Some(share) = self.try_owner_share(owner, want) {
                return share;
            }
            released.await;
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
            owner_waits: AtomicU64::new(0),
            last_logged_ms: [AtomicI64::new(i64::MIN), AtomicI64::new(i64::MIN)],
        }
    }

    /// Whether a "reads paused" line of kind `kind` (0: the pool, 1: a client's share) may
    /// be logged now (each at most every `THROTTLE_LOG_EVERY_MS`).
    fn log_due(&self, kind: usize) -> bool {
        let cell = &self.last_logged_ms[kind];
        let now = crate::now_ms();
        let last = cell.load(Ordering::Relaxed);
        now.saturating_sub(last) >= THROTTLE_LOG_EVERY_MS
            && cell
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Takes `frame_len` bytes from the budget (capped at the pool's capacity), waiting while
    /// `owner` is at its share or the bytes are not available. Cancel-safe: dropping the
    /// future gives back what it took.
    pub(crate) async fn acquire(&self, frame_len: usize, peer: SocketAddr, owner: Owner) -> Lease {
        let Some(pools) = &self.pools else {
            return Lease::default();
        };
        let pool = &pools[usize::from(frame_len > SMALL_FRAME)];
        let want = u32::try_from(frame_len)
            .unwrap_or(u32::MAX)
            .min(pool.capacity);
        let share = match pool.try_owner_share(&owner, want) {
            Some(share) => share,
            None => {
                let waits = self.owner_waits.fetch_add(1, Ordering::Relaxed) + 1;
                if self.log_due(1) {
                    tracing::warn!(
                        ?owner,
                        pool = pool.name,
                        frame_bytes = frame_len,
                        share = pool.share(),
                        owner_waits = waits,
                        "reads paused: a client at its share of queued.max.request.bytes"
                    );
                }
                tracing::debug!(%peer, ?owner, pool = pool.name, frame_bytes = frame_len, "waiting for this client's share of request memory");
                pool.owner_share(&owner, want).await
            }
        };
        let permit = match pool.semaphore.clone().try_acquire_many_owned(want) {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => return Lease::default(), // never closed
            Err(TryAcquireError::NoPermits) => {
                let throttled = self.throttled_reads.fetch_add(1, Ordering::Relaxed) + 1;
                if self.log_due(0) {
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
        Lease(Some(Arc::new(Mutex::new(Some(Held {
            _permit: permit,
            _share: share,
        })))))
    }
}

/// What a frame holds of the budget: its bytes in the pool, and its count in its owner's
/// share; both go back when this is dropped.
pub(crate) struct Held {
    _permit: OwnedSemaphorePermit,
    _share: OwnerShare,
}

/// One frame's share of the budget. It goes back at the earlier of two moments: the last
/// slice of the frame's bytes is dropped (see `LeasedFrame`; for a parked fetch, when its
/// task ends), or the request has been handled (inline: when `dispatch` returns; in a task:
/// when the writer has its result). The second bounds handlers that keep a slice of the
/// frame (a group member's metadata), which must not hold the budget for the member's
/// lifetime. `Lease::default()` holds nothing (no budget).
#[derive(Clone, Default)]
pub(crate) struct Lease(Option<Arc<Mutex<Option<Held>>>>);

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

    fn anon() -> Owner {
        Owner::Address(peer().ip())
    }

    fn other() -> Owner {
        Owner::Principal(Arc::from("User:other"))
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
        let lease =
            tokio::time::timeout(Duration::from_secs(5), m.acquire(2 << 20, peer(), anon()))
                .await
                .expect("an oversized frame is admitted when the pool is idle");
        assert_eq!(available(&m), [128 << 10, 0]);
        lease.release();
        assert_eq!(available(&m), [128 << 10, 896 << 10]);
    }

    #[tokio::test]
    async fn a_waiting_large_frame_does_not_hold_up_small_ones() {
        let m = Arc::new(RequestMemory::new(Some(1 << 20), 100 << 20));
        let held = m.acquire(900 << 10, peer(), anon()).await;
        let waiter = tokio::spawn({
            let m = m.clone();
            async move { m.acquire(900 << 10, peer(), other()).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second large frame waits");
        assert_eq!(m.throttled_reads.load(Ordering::Relaxed), 1);
        let small = tokio::time::timeout(Duration::from_secs(5), m.acquire(1000, peer(), anon()))
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
    async fn one_owner_holds_at_most_half_a_pool_while_others_get_the_rest() {
        // The large pool is 896 KiB; an owner's share is 448 KiB.
        let m = Arc::new(RequestMemory::new(Some(1 << 20), 100 << 20));
        // Nothing held yet: a frame past the share is let in (no owner is starved).
        let first = m.acquire(500 << 10, peer(), anon()).await;
        // The same owner's next large frame waits for its own, outside the pool's queue...
        let second = tokio::spawn({
            let m = m.clone();
            async move { m.acquire(300 << 10, peer(), anon()).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "the owner is past its share");
        assert_eq!(m.owner_waits.load(Ordering::Relaxed), 1);
        assert_eq!(
            m.throttled_reads.load(Ordering::Relaxed),
            0,
            "not queued in the pool"
        );
        // ...while another owner takes what is left at once.
        let theirs = tokio::time::timeout(
            Duration::from_secs(5),
            m.acquire(396 << 10, peer(), other()),
        )
        .await
        .expect("another owner is not held up by the first one's waiting frame");
        assert_eq!(available(&m)[1], 0);
        theirs.release();
        // Within its share, the owner's small frames pass (a pool of their own).
        let small = tokio::time::timeout(Duration::from_secs(5), m.acquire(1000, peer(), anon()))
            .await
            .expect("small frames are counted apart");
        small.release();
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("the owner's next frame goes once its first is handled")
            .expect("task");
        assert_eq!(available(&m)[1], (896 - 300) << 10);
        drop(second);
        assert_eq!(available(&m)[1], 896 << 10);
        let pools = m.pools.as_ref().expect("bounded");
        assert!(
            pools[1].owners.held.lock().unwrap().is_empty(),
            "every count went back"
        );
    }

    #[tokio::test]
    async fn a_frame_cancelled_while_waiting_for_its_share_gives_its_count_back() {
        let m = Arc::new(RequestMemory::new(Some(1 << 20), 100 << 20));
        let first = m.acquire(500 << 10, peer(), anon()).await;
        let waiting = tokio::time::timeout(
            Duration::from_millis(50),
            m.acquire(500 << 10, peer(), anon()),
        )
        .await;
        assert!(waiting.is_err(), "past the share, it waits");
        drop(first);
        let pools = m.pools.as_ref().expect("bounded");
        assert!(pools[1].owners.held.lock().unwrap().is_empty());
        assert_eq!(available(&m)[1], 896 << 10);
    }

    #[tokio::test]
    async fn a_lease_returns_when_the_frame_is_dropped_or_released() {
        let m = RequestMemory::new(Some(1 << 20), 100 << 20);
        // Dropping the last slice of the frame returns it...
        let lease = m.acquire(1000, peer(), anon()).await;
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
        let lease = m.acquire(1000, peer(), anon()).await;
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
