//! # The classic group coordinator
//!
//! Kafka's classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and
//! the admin APIs ListGroups, DescribeGroups, DeleteGroups), including static membership
//! (KIP-345), MEMBER_ID_REQUIRED (KIP-394) and `group.initial.rebalance.delay.ms`. Incremental
//! cooperative rebalancing (KIP-429) needs nothing of the broker beyond relaying metadata and
//! assignments, which the classic protocol already does.
//!
//! # Layout
//!
//! - [`state`]: one group's data, its states and bookkeeping (Kafka's `ClassicGroup`).
//! - [`member`]: one member (`ClassicGroupMember`).
//! - [`rebalance`]: the join / sync / heartbeat / leave protocol and its timers on one group.
//! - [`coordinator`]: every group, the API entry points, and the offset APIs' questions.
//!   Sans-IO: `(now_ms, request)` in, answers and [`Completion`]s out.
//! - [`persist`]: Kafka's GroupMetadataValue record, and a group to and from it.
//! - [`driver`]: the tokio side ([`GroupCoordinator`], stored in `Broker::groups`): a mutex
//!   around the core, oneshot channels for parked requests, and a task that sleeps until the
//!   next deadline. Requests that read or delete groups fire the timers already due first,
//!   so an ended session is over when they look, however late that task wakes.
//! - [`error`]: [`GroupError`], mapped to Kafka codes by the server's `error` module.
//!
//! # Invariants
//!
//! - Every parked JoinGroup and SyncGroup is eventually answered: by the phase completing,
//!   by a timer, or with an error when its member is removed or replaced.
//! - Only the leader's SyncGroup assignments are used.
//! - Group metadata is durable in `__consumer_offsets` (Kafka's GroupMetadata records): a
//!   completed generation, an Empty group and a replaced static member are written before
//!   the answers that reveal them, a deleted group gets a tombstone. After a restart a group
//!   with members is Stable at its generation and its members carry on; members that do not
//!   heartbeat within their session are expired.

pub mod coordinator;
pub mod driver;
pub mod error;
pub mod member;
pub mod persist;
pub mod rebalance;
pub mod state;

pub use coordinator::{
    ClassicGroupCore, Completion, DescribedGroup, DescribedMember, GroupConfig, JoinRequest,
    JoinResponse, JoinedMember, ListedGroup, SyncRequest, SyncResponse, Ticket,
};
pub use driver::GroupCoordinator;
pub use error::GroupError;
pub use member::{Member, Protocol};
pub use persist::{GroupLog, GroupMetadataValue};
pub use state::{ClassicGroup, GroupState};
