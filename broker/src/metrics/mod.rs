//! The metrics endpoint (`metrics.listener`): Prometheus text format 0.0.4 over HTTP, with
//! Kafka's metric names (see [`exposition`] and README's "Metrics").
//!
//! # Layout
//!
//! - [`registry`]: the counters. Hooks on the request path are relaxed atomic adds; traffic
//!   is counted per partition in a sharded map (a read lock per partition per request).
//! - [`exposition`]: renders every metric; per-partition log gauges are read at scrape time.
//! - `replication`: ReplicaManager, controller and quorum gauges, from the image and the
//!   quorum's status at scrape time.
//! - `lag`: consumer-group lag of the groups this node coordinates, at scrape time.
//! - [`http`]: the listener, a minimal HTTP/1.1 server.
//!
//! The hooks below are what the rest of the broker calls, one line each.

pub mod exposition;
pub mod http;
mod lag;
pub mod registry;
mod replication;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub use http::MetricsListener;
use registry::{CONNECTIONS, FETCH_PURGATORY, FetchFrom, GaugeGuard, PRODUCE_PURGATORY, traffic};
use strata_protocol::messages::RequestKind;
use strata_storage::FileRegion;

use crate::broker::Broker;
use crate::connection::Slot;
use crate::partition::Partition;

/// Binds `metrics.listener`, when set, and serves it in a task of its own.
///
/// # Errors
///
/// The bind failure: a configured endpoint that cannot listen stops the node, as a client
/// listener does.
pub async fn start(broker: Arc<Broker>) -> std::io::Result<()> {
    let Some(listener) = broker.config.metrics_listener.clone() else {
        return Ok(());
    };
    let socket = http::bind(&listener).await?;
    tracing::info!(address = %socket.local_addr()?, path = %listener.path, "metrics listening");
    tokio::spawn(http::serve(socket, listener.path, broker));
    Ok(())
}

/// A produce appended `bytes` of record batches holding `records` records to `partition`.
pub fn record_produce(partition: &Partition, bytes: usize, records: u32) {
    let t = traffic().get(&partition.topic, partition.index);
    t.bytes_in
        .fetch_add(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::Relaxed);
    t.messages_in
        .fetch_add(u64::from(records), Ordering::Relaxed);
}

/// A fetch answered `regions` of `partition` (nothing for a partition in error).
pub fn record_fetch(partition: Option<&Arc<Partition>>, regions: &[FileRegion]) {
    let Some(p) = partition else { return };
    let bytes: u64 = regions.iter().map(|r| u64::from(r.len)).sum();
    if bytes > 0 {
        traffic()
            .get(&p.topic, p.index)
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

    fn record(self) {
        registry::record_api(self.api_key, self.fetch, self.started.elapsed());
    }

    /// Records the request's latency when its response is ready: now for an inline
    /// answer, when the task ends for one computed in a task (a parked fetch, a join, a
    /// produce waiting for its fsync). A request whose connection closes is counted too.
    #[must_use]
    pub fn finish(self, slot: Slot) -> Slot {
        match slot {
            Slot::Ready(_) | Slot::NoResponse | Slot::Close => {
                self.record();
                slot
            }
            Slot::Pending(handle) => Slot::Pending(tokio::spawn(async move {
                let done = handle.await;
                self.record();
                done.unwrap_or_else(|e| {
                    tracing::error!(error = %e, "request task failed; closing connection");
                    None
                })
            })),
            Slot::PendingPlan(handle) => Slot::PendingPlan(tokio::spawn(async move {
                let done = handle.await;
                self.record();
                done.unwrap_or_else(|e| {
                    tracing::error!(error = %e, "request task failed; closing connection");
                    None
                })
            })),
        }
    }
}
