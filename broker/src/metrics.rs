//! The counters behind the metrics endpoint, beneath every other layer: it imports nothing
//! from the rest of the crate. The endpoint that renders them (with the gauges read at scrape
//! time) is the server's `observe` module.
//!
//! - [`registry`]: the counters. Hooks on the request path are relaxed atomic adds; traffic
//!   is counted per partition in a sharded map (a read lock per partition per request).
//!
//! The hooks below are what the rest of the broker calls, one line each.

pub mod registry;

use std::sync::atomic::Ordering;
use std::time::Instant;

use registry::{CONNECTIONS, FETCH_PURGATORY, FetchFrom, GaugeGuard, PRODUCE_PURGATORY, traffic};
use strata_protocol::messages::RequestKind;
use strata_storage::FileRegion;

/// A produce appended `bytes` of record batches holding `records` records to `partition`.
pub fn record_produce(topic: &str, partition: i32, bytes: usize, records: u32) {
    let t = traffic().get(topic, partition);
    t.bytes_in
        .fetch_add(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::Relaxed);
    t.messages_in
        .fetch_add(u64::from(records), Ordering::Relaxed);
}

/// A fetch answered `regions` of partition `index` of `topic`.
pub fn record_fetch(topic: &str, index: i32, regions: &[FileRegion]) {
    let bytes: u64 = regions.iter().map(|r| u64::from(r.len)).sum();
    if bytes > 0 {
        traffic()
            .get(topic, index)
            .bytes_out
            .fetch_add(bytes, Ordering::Relaxed);
    }
}

/// KIP-392: this follower replica answered a consumer's fetch with `regions`.
pub fn record_follower_fetch(regions: &[FileRegion]) {
    let bytes: u64 = regions.iter().map(|r| u64::from(r.len)).sum();
    registry::FOLLOWER_FETCH_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

/// KIP-392: this leader answered a partition with a preferred read replica.
pub fn record_preferred_read_replica() {
    registry::PREFERRED_READ_REPLICA_ANSWERS.fetch_add(1, Ordering::Relaxed);
}

/// A leader's ISR went from `before` to `after` members (an AlterPartition answer): a
/// commit that shrank or grew it counts once.
pub fn record_isr_change(before: usize, after: usize) {
    match after.cmp(&before) {
        std::cmp::Ordering::Less => registry::ISR_SHRINKS.fetch_add(1, Ordering::Relaxed),
        std::cmp::Ordering::Greater => registry::ISR_EXPANDS.fetch_add(1, Ordering::Relaxed),
        std::cmp::Ordering::Equal => 0,
    };
}

/// A SASL authentication failed.
pub fn authentication_failed() {
    registry::FAILED_AUTHENTICATIONS.fetch_add(1, Ordering::Relaxed);
}

/// A SASL authentication succeeded.
pub fn authentication_succeeded() {
    registry::SUCCESSFUL_AUTHENTICATIONS.fetch_add(1, Ordering::Relaxed);
}

/// A connection was closed because a frame's body did not arrive in time.
pub fn frame_timed_out() {
    registry::FRAME_TIMEOUTS.fetch_add(1, Ordering::Relaxed);
}

/// A new connection was closed at once: its address held `max.connections.per.ip`.
pub fn connection_refused_per_ip() {
    registry::CONNECTIONS_REFUSED_PER_IP.fetch_add(1, Ordering::Relaxed);
}

/// `bytes` of fetched records went out through user-space TLS.
pub fn record_tls_fetch(bytes: u64) {
    registry::FETCH_TLS_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

/// `bytes` of fetched records went out with `sendfile` through kernel TLS.
pub fn record_ktls_fetch(bytes: u64) {
    registry::FETCH_KTLS_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

/// `bytes` of fetched records went out from a segment's tail cache (direct I/O).
pub fn record_tail_cache_fetch(bytes: u64) {
    registry::FETCH_TAIL_CACHE_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

/// Counts an open client connection until the guard drops.
#[must_use]
pub fn connection_opened() -> GaugeGuard {
    GaugeGuard::enter(&CONNECTIONS)
}

/// Counts a parked fetch until the guard drops.
#[must_use]
pub fn fetch_parked() -> GaugeGuard {
    GaugeGuard::enter(&FETCH_PURGATORY)
}

/// Counts a produce waiting for its group commit until the guard drops.
#[must_use]
pub fn produce_waiting() -> GaugeGuard {
    GaugeGuard::enter(&PRODUCE_PURGATORY)
}

/// What a request is timed as: its API, and for a Fetch who sent it.
#[derive(Debug, Clone, Copy)]
pub struct RequestTimer {
    api_key: i16,
    fetch: Option<FetchFrom>,
    started: Instant,
}

impl RequestTimer {
    /// Starts timing a request that was just decoded.
    #[must_use]
    pub fn start(api_key: i16, api_version: i16, body: &RequestKind) -> Self {
        let fetch = match body {
            RequestKind::Fetch(r) => {
                // Fetch v15 (KIP-903) moved the follower's id into ReplicaState.
                let replica_id = if api_version >= 15 {
                    r.replica_state.replica_id.0
                } else {
                    r.replica_id.0
                };
                Some(if replica_id >= 0 {
                    FetchFrom::Follower
                } else {
                    FetchFrom::Consumer
                })
            }
            _ => None,
        };
        RequestTimer {
            api_key,
            fetch,
            started: Instant::now(),
        }
    }

    /// Records the request's latency: call it when its response is ready.
    pub fn record(self) {
        registry::record_api(self.api_key, self.fetch, self.started.elapsed());
    }
}
