//! Draining the connections at shutdown: the step between "stop accepting" and "flush".
//!
//! Kafka's shutdown stops its socket server's acceptors, then lets the request handlers
//! finish what they hold before the log manager flushes. Strata does the same per
//! connection: once [`begin`] is called every connection stops reading requests (an idle
//! one closes at once), its requests already read are answered (a parked fetch when its
//! wait ends, a produce when it is appended), and then it closes. [`wait`] returns when
//! no connection is left, or when its bound passes, so a client that keeps a produce
//! waiting for replicas cannot hold the exit up for longer.
//!
//! The state is process-wide: one process runs one node.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

/// Set to `true` once, by [`begin`].
static DRAINING: LazyLock<watch::Sender<bool>> = LazyLock::new(|| watch::Sender::new(false));

/// Connections being served, and a wake-up for [`wait`] when one ends.
static OPEN: AtomicUsize = AtomicUsize::new(0);
static CLOSED: Notify = Notify::const_new();

/// Held by a connection while it is served.
#[derive(Debug)]
pub struct Serving(());

impl Drop for Serving {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::AcqRel);
        CLOSED.notify_waiters();
    }
}

/// Counts a connection as open until the guard drops.
#[must_use]
pub fn serving() -> Serving {
    OPEN.fetch_add(1, Ordering::AcqRel);
    Serving(())
}

/// Resolves once draining has begun (at once if it already has).
pub async fn begun() {
    let mut rx = DRAINING.subscribe();
    // The sender lives in a static, so `wait_for` cannot fail.
    let _ = rx.wait_for(|draining| *draining).await;
}

/// Tells every connection to stop reading requests and close once answered.
pub fn begin() {
    DRAINING.send_replace(true);
}

/// Waits until no connection is open, at most `max`; returns how many are still open.
pub async fn wait(max: Duration) -> usize {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let closed = CLOSED.notified();
        let open = OPEN.load(Ordering::Acquire);
        if open == 0 {
            return 0;
        }
        if tokio::time::timeout_at(deadline, closed).await.is_err() {
            return OPEN.load(Ordering::Acquire);
        }
    }
}
