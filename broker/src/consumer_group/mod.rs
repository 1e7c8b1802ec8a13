//! # The consumer-group coordinator (KIP-848)
//!
//! The next-generation consumer protocol: members heartbeat with ConsumerGroupHeartbeat, the
//! broker computes every member's target assignment with a server-side assignor (`uniform`,
//! `range`), and each member converges to its target incrementally. Classic groups are
//! [`crate::group`]'s; a group id belongs to one or the other.
//!
//! # Layout
//!
//! - [`assignor`]: the `uniform` and `range` assignors, pure functions.
//! - [`group`]: one group: members, the group / assignment / member epochs, the partition
//!   owners, and reconciliation (Kafka's `CurrentAssignmentBuilder`).
//! - [`coordinator`]: every group and the API entry points. Sans-IO: `(now_ms, request,
//!   metadata)` in, answers out.
//! - [`driver`]: [`ConsumerGroupCoordinator`] (in `Broker::consumer_groups`): a mutex around
//!   the core and a task that sleeps until the next session or revocation deadline.
//! - [`error`]: [`ConsumerGroupError`], mapped to Kafka codes in `crate::error`.
//!
//! # Invariants
//!
//! - A partition has at most one owner: a member is given a partition only after its previous
//!   owner's heartbeat no longer lists it, or the owner left or expired.
//! - A member's epoch never passes the assignment epoch, and the assignment epoch never passes
//!   the group epoch.
//! - Groups live in memory only: after a restart members get UNKNOWN_MEMBER_ID and rejoin
//!   (committed offsets persist in `__consumer_offsets`).

pub mod assignor;
pub mod coordinator;
pub mod driver;
pub mod error;
pub mod group;

pub use assignor::{Assignment, Assignor};
pub use coordinator::{ConsumerGroupConfig, HeartbeatRequest, HeartbeatResponse};
pub use driver::ConsumerGroupCoordinator;
pub use error::ConsumerGroupError;
