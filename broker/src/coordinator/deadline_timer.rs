//! The timer the group coordinators share: one task per coordinator that sleeps until the
//! core's next deadline (a session, join, sync or revocation timeout) or until a request may
//! have moved that deadline earlier. It never polls.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::monotonic_ms;

/// With no deadline at all, sleep in long steps; a request wakes the task anyway.
const IDLE: Duration = Duration::from_secs(3600);

/// A lazily started deadline timer.
#[derive(Default)]
pub struct DeadlineTimer {
    /// Wakes the task when a deadline may have moved earlier.
    wake: Notify,
    /// The task starts with the first request, because it needs a runtime.
    started: AtomicBool,
}

impl DeadlineTimer {
    /// Starts the timer task (`start()`) on the current runtime the first time, then nudges
    /// it: the request just handled may have set an earlier deadline. Outside a runtime the
    /// start is retried on the next call.
    pub fn wake<F>(&self, start: impl FnOnce() -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if !self.started.swap(true, Ordering::AcqRel) {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(start());
                }
                Err(_) => self.started.store(false, Ordering::Release),
            }
        }
        self.wake.notify_one();
    }

    /// Waits until the deadline `next_deadline()` returns (on [`crate::monotonic_ms`]), or until
    /// [`DeadlineTimer::wake`] is called. The wake-up is registered before the deadline is
    /// read, so a request that lands in between is never missed.
    pub async fn wait(&self, next_deadline: impl FnOnce() -> Option<i64>) {
        let notified = self.wake.notified();
        let wait = next_deadline().map_or(IDLE, |d| {
            Duration::from_millis(u64::try_from(d - monotonic_ms()).unwrap_or(0))
        });
        if !wait.is_zero() {
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
