//! OffsetDelete (key 47, KIP-496): remove a group's committed offsets for some partitions.
//!
//! Kafka's rules (`OffsetMetadataManager.deleteOffsets`, `ClassicGroup.validateOffsetDelete`):
//! an empty group id is INVALID_GROUP_ID and a group that does not exist GROUP_ID_NOT_FOUND;
//! a group with members that does not use the consumer protocol cannot have offsets deleted
//! (NON_EMPTY_GROUP), since nobody can tell which topics it still reads. Otherwise each
//! partition of a topic the group subscribes to gets GROUP_SUBSCRIBED_TO_TOPIC, an unknown
//! topic UNKNOWN_TOPIC_OR_PARTITION, and the rest are deleted with tombstones (a partition
//! with no offset simply succeeds). A group-level error leaves the topic list empty.

use strata_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use strata_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::RequestContext;
use super::offset_commit::valid_group_id;
use crate::broker::groups;
use crate::coordinator::group::OffsetDeleteRefusal;
use crate::server::error::{
    GroupRefusal, TopicRefusal, coordinator_error_code, coordinator_unavailable_code,
    group_refusal_code, offset_delete_refusal_code, topic_refusal_code,
};

/// Validates the group, then deletes what may be deleted.
#[must_use]
pub fn handle(ctx: &RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let broker = &ctx.broker;
    let group = req.group_id.0.to_string();
    let fail = |code: i16| OffsetDeleteResponse::default().with_error_code(code);
    // KafkaApis: DELETE on the group before anything else; then READ on each topic.
    if !ctx.authorize_group(strata_kraft::acl::AclOperation::Delete, &group) {
        return fail(strata_protocol::ResponseError::GroupAuthorizationFailed.code());
    }
    if !valid_group_id(&group) {
        return fail(group_refusal_code(GroupRefusal::InvalidId));
    }
    if let Err(e) = crate::server::placement::check(broker, &group) {
        return fail(coordinator_unavailable_code(e));
    }
    let subscribed = match groups::offset_delete_check(broker, &group) {
        Ok(subscribed) => subscribed,
        Err(e) => return fail(offset_delete_refusal_code(e)),
    };
    let image = broker.image();
    let mut to_delete = Vec::new();
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let code = if !ctx.authorize(
            strata_kraft::acl::AclOperation::Read,
            strata_kraft::acl::ResourceType::Topic,
            &name,
        ) {
            strata_protocol::ResponseError::TopicAuthorizationFailed.code()
        } else if subscribed.as_ref().is_some_and(|s| s.contains(&name)) {
            offset_delete_refusal_code(OffsetDeleteRefusal::SubscribedTopic)
        } else if !image.topics.contains_key(&name) {
            topic_refusal_code(TopicRefusal::Unknown)
        } else {
            0
        };
        let partitions = topic
            .partitions
            .into_iter()
            .map(|p| {
                if code == 0 {
                    to_delete.push((name.clone(), p.partition_index));
                }
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            })
            .collect();
        topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    if let Err(e) = broker
        .offsets
        .delete_offsets(&group, &to_delete, crate::now_ms())
    {
        tracing::warn!(group = %group, error = %e, "offset delete failed");
        return fail(coordinator_error_code(&e));
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
