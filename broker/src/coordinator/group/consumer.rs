//! # The consumer-group coordinator (KIP-848)
//!
//! The next-generation consumer protocol: members heartbeat with ConsumerGroupHeartbeat, the
//! broker computes every member's target assignment with a server-side assignor (`uniform`,
//! `range`), and each member converges to its target incrementally. Classic groups are
//! [`crate::coordinator::group::classic`]'s; a group id belongs to one or the other.
//!
//! # Layout
//!
//! - [`assignor`]: the `uniform` and `range` assignors, pure functions.
//! - [`group`]: one group: members, the group / assignment / member epochs, the partition
//!   owners, and reconciliation (Kafka's `CurrentAssignmentBuilder`).
//! - [`coordinator`]: every group and the API entry points. Sans-IO: `(now_ms, request,
//!   metadata)` in, answers out.
//! - [`persist`]: the group's records in `__consumer_offsets` (Kafka's record types 3 to 8),
//!   what changed since the last write, and the rebuild on start.
//! - [`driver`]: [`ConsumerGroupCoordinator`] (in `Broker::consumer_groups`): a mutex around
//!   the core, the appends of its records before each answer, and a task that sleeps until
//!   the next session or revocation deadline.
//! - [`error`]: [`ConsumerGroupError`], mapped to Kafka codes by the server's `error` module.
//!
//! # Invariants
//!
//! - A partition has at most one owner: a member is given a partition only after its previous
//!   owner's heartbeat no longer lists it, or the owner left or expired.
//! - A member's epoch never passes the assignment epoch, and the assignment epoch never passes
//!   the group epoch.
//! - What a member was told is durable before it is told: a heartbeat's records are appended
//!   before its response goes out, so after a restart (clean or `kill -9`) every member finds
//!   its id, epoch and partitions as it last heard them, and carries on without a rebalance.

pub mod assignor;
pub mod coordinator;
pub mod driver;
pub mod error;
pub mod group;
pub mod persist;

pub use assignor::{Assignment, Assignor};
pub use coordinator::{ConsumerGroupConfig, HeartbeatRequest, HeartbeatResponse};
pub use driver::ConsumerGroupCoordinator;
pub use error::{ConsumerGroupError, ConsumerGroupInUse, DeleteConsumerGroupError};
