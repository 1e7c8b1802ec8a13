//! The server layer: what faces the network. It may import every layer below it (`broker`,
//! `coordinator`, `quorum`, `partition`, `config`, `metrics`); nothing below imports it.
//!
//! - [`connection`]: one task per client connection; requests are decoded and processed in
//!   arrival order, responses leave strictly in request order.
//! - [`handlers`]: one file per Kafka API (client and controller listeners), and one
//!   dispatch `match`.
//! - [`error`]: the one place where domain errors become Kafka error codes.
//! - [`forward`]: controller-bound requests from a node that is not the active controller
//!   (KIP-590).
//! - [`authorization`]: the ACL check of each request.
//! - [`client_quotas`]: produce and fetch byte-rate quotas (KIP-13) and the mute of KIP-219.
//! - [`placement`]: which node coordinates a group (and the `__consumer_offsets` topic's
//!   creation).
//! - [`drain`]: the graceful-shutdown drain of open connections.
//! - [`housekeeping`]: the periodic retention, flush and checkpoint task.
//! - [`observe`]: the Prometheus endpoint, rendering what the layers below count.
//! - [`start`]: starting a node: its quorum, its broker, the controller and the lifecycle.

pub mod authorization;
pub mod client_quotas;
pub mod connection;
pub mod connection_limits;
pub mod console;
pub mod drain;
pub mod error;
pub mod forward;
pub mod handlers;
pub mod housekeeping;
pub mod observe;
pub mod placement;
pub mod start;
pub mod txn_markers;
