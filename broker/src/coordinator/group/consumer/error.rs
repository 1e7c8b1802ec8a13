//! Why the consumer-group coordinator refused a request; mapped to Kafka codes in
//! the server's `error` module (`consumer_group_error_code`, `delete_consumer_group_error_code`,
//! `consumer_group_in_use_code`).

/// A refusal of ConsumerGroupHeartbeat, or of an offset API for a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerGroupError {
    /// The request breaks KIP-848's rules for its fields (INVALID_REQUEST).
    #[error("invalid request: {reason}")]
    InvalidRequest { reason: &'static str },
    /// The group's records could not be appended: this node no longer leads its
    /// `__consumer_offsets` partition, or the log failed (NOT_COORDINATOR).
    #[error("this node cannot write the group's records: not its coordinator")]
    NotCoordinator,
    /// The member is not (or no longer) in the group.
    #[error("unknown member {member_id} in group {group_id}")]
    UnknownMemberId { group_id: String, member_id: String },
    /// The member's epoch is not one the coordinator accepts: it must rejoin with epoch 0.
    #[error("member {member_id} sent epoch {received}, its epoch is {current}")]
    FencedMemberEpoch {
        member_id: String,
        received: i32,
        current: i32,
    },
    /// An offset request carries an older member epoch than the member's (KIP-848).
    #[error("stale member epoch {received}, the member's epoch is {current}")]
    StaleMemberEpoch { received: i32, current: i32 },
    /// The group id belongs to a classic group with members.
    #[error("group {group_id} is not a consumer group")]
    NotConsumerGroup { group_id: String },
    /// `server_assignor` names no configured assignor.
    #[error("unsupported assignor {name}")]
    UnsupportedAssignor { name: String },
    /// A static member joins while another member with its instance id is still active.
    #[error("instance id {instance_id} is still in use by member {member_id}")]
    UnreleasedInstanceId {
        instance_id: String,
        member_id: String,
    },
    /// A static member's instance id maps to another member id.
    #[error("instance id {instance_id} belongs to another member")]
    FencedInstanceId { instance_id: String },
    /// `group.consumer.max.size` members already.
    #[error("group {group_id} has reached its maximum size {max}")]
    GroupMaxSizeReached { group_id: String, max: usize },
    /// `SubscribedTopicRegex` does not compile (INVALID_REGULAR_EXPRESSION).
    #[error("SubscribedTopicRegex `{regex}` is not a valid regular expression: {reason}")]
    InvalidRegularExpression { regex: String, reason: String },
    /// KIP-848 members must commit with OffsetCommit v9+.
    #[error("OffsetCommit v{version} from a consumer-protocol member (v9+ is required)")]
    UnsupportedCommitVersion { version: i16 },
}

/// Why the consumer-group coordinator does not delete a group (DeleteGroups).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeleteConsumerGroupError {
    /// No consumer group has this id (it may be a classic group, or a simple one known only
    /// by its offsets).
    #[error("no consumer group has this id")]
    NotConsumerGroup,
    /// The group still has members.
    #[error("the consumer group has members")]
    NonEmpty,
}

/// Why a consumer group does not give its id up to a classic group (a classic JoinGroup).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerGroupInUse {
    /// The group has members (Kafka without online migration keeps the id).
    #[error("the consumer group has members")]
    HasMembers,
}
