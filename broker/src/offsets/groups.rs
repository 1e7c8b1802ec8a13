//! What the offset APIs ask of the group coordinators, in one place.
//!
//! OffsetCommit must check the committer's generation and membership, OffsetDelete and offset
//! expiry must know whether a group is empty and which topics it subscribes to. The classic
//! group coordinator ([`Broker::groups`]) and the KIP-848 one ([`Broker::consumer_groups`])
//! answer these (a group id belongs to one or the other); this file is the only place the
//! offset APIs reach into them, and it adds what Kafka decides outside the group itself (the
//! OffsetCommit version that picks the error for an unknown group, whether a simple group
//! exists).

use std::collections::BTreeSet;

use strata_protocol::ResponseError;

use crate::broker::Broker;

/// The generation, member and instance an OffsetCommit carries.
#[derive(Debug, Clone, Copy)]
pub struct Committer<'a> {
    pub generation_id: i32,
    pub member_id: &'a str,
    pub group_instance_id: Option<&'a str>,
}

/// The group coordinator's state name for `group` ("Empty", "Stable", ...), `None` if the
/// coordinator does not know it.
#[must_use]
pub fn group_state(broker: &Broker, group: &str) -> Option<&'static str> {
    broker
        .groups
        .group_state(group)
        .or_else(|| broker.consumer_groups.group_state(group))
}

/// The topics the active members of `group` subscribe to, when the group uses the consumer
/// protocol and its subscriptions are known.
#[must_use]
pub fn subscribed_topics(broker: &Broker, group: &str) -> Option<BTreeSet<String>> {
    broker
        .groups
        .subscribed_topics(group)
        .or_else(|| broker.consumer_groups.subscribed_topics(group))
}

/// Whether `group` has no members (or is not known to the coordinator).
#[must_use]
pub fn is_empty_or_unknown(broker: &Broker, group: &str) -> bool {
    broker.groups.is_empty_or_unknown(group) && !broker.consumer_groups.is_active(group)
}

/// Kafka's `OffsetMetadataManager.validateOffsetCommit`: a commit to a group the coordinator
/// does not know is accepted without generation and member (the admin client, or a consumer
/// that assigns partitions itself: a "simple" group), and otherwise refused with
/// GROUP_ID_NOT_FOUND from OffsetCommit v9 and ILLEGAL_GENERATION before, for compatibility.
/// A known group's rules (generation, member, state) are the group coordinator's
/// (`ClassicGroup.validateOffsetCommit`).
///
/// # Errors
/// The Kafka error code every partition of the request gets.
pub fn validate_commit(
    broker: &Broker,
    group: &str,
    committer: Committer<'_>,
    api_version: i16,
    now_ms: i64,
) -> Result<(), i16> {
    // KIP-848 consumer groups check the member epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID);
    // OffsetCommit's generation id carries it.
    if let Some(verdict) = broker.consumer_groups.validate_offset_commit(
        group,
        committer.member_id,
        committer.generation_id,
        api_version,
    ) {
        return verdict;
    }
    if group_state(broker, group).is_none() {
        if committer.generation_id < 0 {
            return Ok(());
        }
        return Err(if api_version >= 9 {
            ResponseError::GroupIdNotFound.code()
        } else {
            ResponseError::IllegalGeneration.code()
        });
    }
    broker.groups.validate_offset_commit(
        group,
        committer.generation_id,
        committer.member_id,
        committer.group_instance_id,
        now_ms,
    )
}

/// Whether `group` exists: the coordinator knows it, or it has committed offsets or stored
/// metadata (a simple group exists by virtue of its offsets).
#[must_use]
pub fn group_exists(broker: &Broker, group: &str) -> bool {
    group_state(broker, group).is_some() || broker.offsets.has_group(group)
}

/// Offset expiry's question (see [`crate::offsets`]): may the offsets of `group` for `topic`
/// expire? Yes when the group is empty or unknown, or when it is a stable consumer group that
/// no longer subscribes to the topic.
#[must_use]
pub fn offsets_expirable(broker: &Broker, group: &str, topic: &str) -> bool {
    if is_empty_or_unknown(broker, group) {
        return true;
    }
    group_state(broker, group) == Some("Stable")
        && subscribed_topics(broker, group).is_some_and(|t| !t.contains(topic))
}
