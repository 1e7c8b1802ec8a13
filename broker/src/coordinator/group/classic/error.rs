//! Why the group coordinator refused a request. Each variant is one of Kafka's group error
//! codes; the server's `error::group_error_code` is the one place that maps them.

use thiserror::Error;

/// A refusal by the classic group coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GroupError {
    /// The group id is empty (INVALID_GROUP_ID).
    #[error("the group id is empty")]
    InvalidGroupId,
    /// The session timeout is outside `group.min.session.timeout.ms` ..
    /// `group.max.session.timeout.ms` (INVALID_SESSION_TIMEOUT).
    #[error("session timeout {timeout_ms} ms is outside {min_ms}..={max_ms} ms")]
    InvalidSessionTimeout {
        timeout_ms: i32,
        min_ms: i32,
        max_ms: i32,
    },
    /// KIP-394: a new dynamic member must rejoin with the member id it was given
    /// (MEMBER_ID_REQUIRED).
    #[error("member id {member_id} assigned; rejoin with it")]
    MemberIdRequired { member_id: String },
    /// The member (or the group) is not known (UNKNOWN_MEMBER_ID).
    #[error("unknown member {member_id:?}")]
    UnknownMemberId { member_id: String },
    /// KIP-345: another member id now holds this static instance id (FENCED_INSTANCE_ID).
    #[error("instance {group_instance_id} is held by another member than {member_id}")]
    FencedInstanceId {
        group_instance_id: String,
        member_id: String,
    },
    /// The request names another generation than the group's (ILLEGAL_GENERATION).
    #[error("generation {requested} is not the group's generation {current}")]
    IllegalGeneration { requested: i32, current: i32 },
    /// The group is rebalancing; the member must rejoin (REBALANCE_IN_PROGRESS).
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    /// The protocol type or names do not match the group's (INCONSISTENT_GROUP_PROTOCOL).
    #[error("protocol type or names inconsistent with the group's")]
    InconsistentGroupProtocol,
    /// The group does not exist (GROUP_ID_NOT_FOUND).
    #[error("group {group_id} not found")]
    GroupIdNotFound { group_id: String },
    /// This node stopped coordinating the group while the request waited
    /// (NOT_COORDINATOR: the client finds the new coordinator and rejoins there).
    #[error("this node no longer coordinates the group")]
    NotCoordinator,
    /// DeleteGroups on a group that still has members (NON_EMPTY_GROUP).
    #[error("group {group_id} has members")]
    NonEmptyGroup { group_id: String },
}
