//! The metrics endpoint (`metrics.listener`): Prometheus text format 0.0.4 over HTTP, with
//! Kafka's metric names (see [`exposition`] and docs/OPERATIONS.md's "Metrics"). The
//! counters it renders are `crate::metrics`.
//!
//! - [`exposition`]: renders every metric; per-partition log gauges are read at scrape time.
//! - `replication`: ReplicaManager, controller and quorum gauges, from the image and the
//!   quorum's status at scrape time.
//! - `lag`: consumer-group lag of the groups this node coordinates, at scrape time.
//! - [`http`]: the listener, a minimal HTTP/1.1 server.

pub mod exposition;
pub mod http;
mod lag;
mod replication;

use std::sync::Arc;

use crate::broker::Broker;

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
