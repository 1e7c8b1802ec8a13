//! The active controller's cluster state machine, sans-IO: broker lifecycle (registration,
//! heartbeats, session expiry, controlled shutdown) and leader election (on fencing, on
//! unfencing, through ElectLeaders, automatic rebalancing and AlterPartition), after
//! Kafka's `ClusterControlManager`, `BrokerHeartbeatManager`, `ReplicationControlManager`
//! and `PartitionChangeBuilder`.
//!
//! Each operation takes the current [`MetadataImage`] and returns the records that carry
//! it out (or a Kafka error); nothing here writes, and the image changes only when the
//! caller applies the records. The one piece of state outside the image is
//! [`BrokerHeartbeats`], the controller's in-memory record of when each broker last
//! heartbeated, which Kafka does not replicate either: a new active controller starts
//! every session afresh ([`BrokerHeartbeats::activate`]). Time comes in as `now_ms`.
//!
//! The caller must apply every record an operation returned before running the next one
//! (the active controller applies its own records as it appends them, before they
//! commit), so each operation sees the state the previous one produced.
//!
//! | file | what it holds |
//! |---|---|
//! | `partition_change.rs` | `PartitionChangeBuilder`: one partition's election and ISR change → `PartitionChangeRecord` |
//! | `heartbeats.rs` | [`BrokerHeartbeats`]: sessions, metadata offsets, the next broker state |
//! | `brokers.rs` | register, heartbeat, fence a stale broker, unregister |
//! | `election.rs` | ElectLeaders (PREFERRED, UNCLEAN) and `auto.leader.rebalance.enable` |
//! | `alter_partition.rs` | AlterPartition from a partition leader |
//! | `placement.rs` | rack-aware replica placement for CreateTopics and CreatePartitions |
//! | `reassignment.rs` | AlterPartitionReassignments and ListPartitionReassignments (KIP-455) |

mod alter_partition;
mod brokers;
mod election;
mod heartbeats;
mod partition_change;
pub(crate) mod placement;
mod reassignment;
#[cfg(test)]
mod simulation;
#[cfg(test)]
mod tests;

pub use alter_partition::{
    AlterPartitionData, AlterPartitionRequest, AlterPartitionResult, AlterPartitionTopic,
    IsrMember, PartitionState, alter_partition,
};
pub use brokers::{
    BrokerHeartbeatReply, BrokerHeartbeatRequest, BrokerRegistrationRequest, broker_heartbeat,
    fence_stale_broker, register_broker, unregister_broker,
};
pub use election::{
    ElectLeadersResult, ElectionType, elect_leaders, imbalanced_partitions,
    rebalance_leaders_records,
};
pub use heartbeats::BrokerHeartbeats;
pub use reassignment::{
    OngoingReassignment, ReassignmentResult, ReassignmentTarget, alter_partition_reassignments,
    list_partition_reassignments,
};

use crate::{MetadataImage, TopicImage};

/// Kafka's default `broker.session.timeout.ms`.
pub const DEFAULT_BROKER_SESSION_TIMEOUT_MS: i64 = 9_000;

/// The controller settings the cluster rules read, under Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterControlConfig {
    /// `broker.session.timeout.ms`: a broker that has not heartbeated for this long is
    /// fenced.
    pub broker_session_timeout_ms: i64,
    /// `unclean.leader.election.enable`, the broker default; a topic's own
    /// `unclean.leader.election.enable` overrides it.
    pub unclean_leader_election_enable: bool,
    /// `auto.leader.rebalance.enable`: move leadership back to preferred replicas.
    pub auto_leader_rebalance_enable: bool,
}

impl Default for ClusterControlConfig {
    /// Kafka's defaults: 9 s sessions, unclean election off, automatic rebalancing on.
    fn default() -> Self {
        ClusterControlConfig {
            broker_session_timeout_ms: DEFAULT_BROKER_SESSION_TIMEOUT_MS,
            unclean_leader_election_enable: false,
            auto_leader_rebalance_enable: true,
        }
    }
}

impl ClusterControlConfig {
    /// Whether `topic` may elect a leader from outside its ISR: its own
    /// `unclean.leader.election.enable` if set (Kafka parses booleans case-insensitively),
    /// else the broker default.
    pub(crate) fn unclean_enabled(&self, topic: &TopicImage) -> bool {
        topic
            .configs
            .get("unclean.leader.election.enable")
            .and_then(|v| match v.to_ascii_lowercase().as_str() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            })
            .unwrap_or(self.unclean_leader_election_enable)
    }
}

/// Every partition as `(topic, partition)`, in topic-name then partition order, so the
/// records an operation returns come out in the same order on every run.
pub(crate) fn all_partitions(
    image: &MetadataImage,
) -> impl Iterator<Item = (&TopicImage, &crate::PartitionImage)> {
    image
        .topics
        .values()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
}
