//! # strata-broker
//!
//! The Strata broker: a tokio server that speaks the Kafka wire protocol.
//!
//! # Layout
//!
//! - [`admin`]: the blocking admin client `strata admin` and the console share, and the
//!   partition reads and hot-partition ranking built on it.
//! - [`client_quotas`]: produce and fetch byte-rate quotas (KIP-13): Kafka's rate
//!   sensors, the quota that applies to a client, and the connection mute of KIP-219.
//! - [`config`]: `server.properties` with Kafka's key names, environment and `--override`s.
//! - [`broker`]: the node's shared state: configuration, the metadata store (single KRaft
//!   voter) with its current image, and the open partitions.
//! - [`partition`]: one partition's log behind a short critical section, and the high
//!   watermark that parked fetches wait on.
//! - [`connection`]: one task per client connection. Requests are decoded and processed in
//!   arrival order; responses leave strictly in request order. A parked fetch runs in its own
//!   task so that the requests behind it keep being processed.
//! - [`handlers`]: one file per Kafka API, each `handle(ctx, request) -> response`, and one
//!   dispatch `match`.
//! - [`deadline_timer`]: the lazily started task both group coordinators use to sleep until
//!   their core's next deadline.
//! - [`error`]: the one place where domain errors become Kafka error codes.
//! - [`forward`]: on a clustered node that is not the active controller, controller-bound
//!   requests (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, the two
//!   AlterConfigs, Metadata's auto-creation) sent to the controller's client listener
//!   (KIP-590).
//! - [`group`]: the classic group coordinator (a sans-IO core and its tokio driver).
//! - [`consumer_group`]: the KIP-848 consumer-group coordinator (sans-IO core, server-side
//!   assignors, tokio driver).
//! - [`housekeeping`]: the periodic retention and flush task.
//! - [`metrics`]: the Prometheus endpoint (`metrics.listener`) and the counters behind it.
//! - [`offsets`]: committed offsets in `__consumer_offsets`, Kafka's internal compacted topic.
//! - [`peer_client`]: the one client this node runs against another node (quorum peers,
//!   the controller client, forwarding, the replica fetcher), and its blocking façade for
//!   the command-line clients. A base layer: it knows the wire, not the node.
//! - [`security`]: TLS and SASL, both sides: each listener's settings and the principal a
//!   connection carries (the server), and what this node presents to another node (the
//!   peer client). A base layer beside `config`: it reads keys and files, and knows
//!   nothing of the node.
//!
//! # Invariants
//!
//! - Appends to a partition are serialised by that partition's lock only.
//! - Nothing on the request path panics on client input; a frame that cannot be answered
//!   closes only its own connection.

pub mod admin;
pub mod broker;
pub mod config;
pub mod coordinator;
pub mod fetch_session;
pub mod metrics;
pub mod partition;
pub mod peer_client;
pub mod quorum;
pub mod security;
pub mod server;

/// Milliseconds since the Unix epoch: the clock the storage and metadata cores are given.
/// It follows the wall clock, steps included: record timestamps, retention and offset
/// expiry are wall-clock times, as in Kafka.
#[must_use]
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Milliseconds on a clock that never jumps: the wall clock read once, at the first call,
/// plus the monotonic time elapsed since. In-memory deadlines use it (group members'
/// sessions and the rebalance timeouts, brokers' sessions at the controller), so that a
/// step of the machine's clock neither expires every session at once nor holds a timer
/// back for the length of the step; Kafka's controller and group coordinator also time
/// sessions on a monotonic clock. It reads close to [`now_ms`] (apart by the steps since
/// the process started), so a value that a core also stores still reads as a time.
#[must_use]
pub fn monotonic_ms() -> i64 {
    static ANCHOR: std::sync::OnceLock<(std::time::Instant, i64)> = std::sync::OnceLock::new();
    let (at, wall) = ANCHOR.get_or_init(|| (std::time::Instant::now(), now_ms()));
    wall.saturating_add(i64::try_from(at.elapsed().as_millis()).unwrap_or(i64::MAX))
}
