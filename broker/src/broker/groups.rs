//! What the offset APIs ask of the group coordinators, in one place.
//!
//! OffsetDelete and offset expiry must know whether a group is empty and which topics it
//! subscribes to. The classic group coordinator ([`Broker::groups`]) and the KIP-848 one
//! ([`Broker::consumer_groups`]) answer these (a group id belongs to one or the other); this
//! file asks both, and adds what Kafka decides outside the group itself (whether a simple
//! group exists). OffsetCommit's own checks are in its handler.

use std::collections::BTreeSet;

use crate::broker::Broker;
use crate::coordinator::group::OffsetDeleteRefusal;

/// Classic group states in which the group has members.
const STATES_WITH_MEMBERS: [&str; 3] = ["PreparingRebalance", "CompletingRebalance", "Stable"];

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

/// Whether `group` exists: the coordinator knows it, or it has committed offsets or stored
/// metadata (a simple group exists by virtue of its offsets).
#[must_use]
pub fn group_exists(broker: &Broker, group: &str) -> bool {
    group_state(broker, group).is_some() || broker.offsets.has_group(group)
}

/// OffsetDelete's check of `group`: the topics its members subscribe to, when it uses the
/// consumer protocol and they are known (their offsets may not be deleted).
///
/// # Errors
///
/// [`OffsetDeleteRefusal::GroupNotFound`] when the group does not exist ([`group_exists`]);
/// [`OffsetDeleteRefusal::NonEmpty`] when it has members whose subscriptions are not known.
pub fn offset_delete_check(
    broker: &Broker,
    group: &str,
) -> Result<Option<BTreeSet<String>>, OffsetDeleteRefusal> {
    if !group_exists(broker, group) {
        return Err(OffsetDeleteRefusal::GroupNotFound);
    }
    let subscribed = subscribed_topics(broker, group);
    let has_members = group_state(broker, group).is_some_and(|s| STATES_WITH_MEMBERS.contains(&s));
    if has_members && subscribed.is_none() {
        return Err(OffsetDeleteRefusal::NonEmpty);
    }
    Ok(subscribed)
}

/// Offset expiry's question (see [`crate::coordinator::offsets`]): may the offsets of `group` for `topic`
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
