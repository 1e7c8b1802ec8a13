//! ConsumerGroupDescribe (key 69, v0–v1): a consumer group's epochs, assignor, and each
//! member's current and target assignment. An unknown id, or a classic group's, gets
//! GROUP_ID_NOT_FOUND.
//!
//! Authorization, as Kafka's `handleConsumerGroupDescribe`: DESCRIBE on the group
//! (GROUP_AUTHORIZATION_FAILED), and DESCRIBE on every topic its members are assigned or
//! subscribed to, else the group answers TOPIC_AUTHORIZATION_FAILED and no members, so a
//! description cannot show topics the client may not see.

use strata_kraft::MetadataImage;
use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::StrBytes;
use strata_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use strata_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};

use super::RequestContext;
use crate::coordinator::group::consumer::Assignment as Partitions;
use crate::server::error::{GroupRefusal, coordinator_unavailable_code, group_refusal_code};

/// Without an authorizer, Kafka reports no authorized operations as `i32::MIN`.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;
/// KIP-1099's member type (v1+): 1 for a member of the consumer protocol.
const CONSUMER_MEMBER: i8 = 1;

/// Describes each group.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let image = ctx.broker.image();
    let groups = req
        .group_ids
        .into_iter()
        .map(|id| {
            let out = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
            if !ctx.authorize_group(AclOperation::Describe, &id.0) {
                return out.with_error_code(group_refusal_code(GroupRefusal::Unauthorized));
            }
            if let Err(e) = crate::server::placement::check(&ctx.broker, &id.0) {
                // Kafka's `groupError`: the state is unknown, an empty string.
                return out.with_error_code(coordinator_unavailable_code(e));
            }
            let Some(g) = ctx.broker.consumer_groups.describe(&id.0) else {
                let classic = ctx.broker.groups.group_state(&id.0).is_some();
                let msg = if classic {
                    format!("Group {} is not a consumer group.", &*id.0)
                } else {
                    format!("Group {} not found.", &*id.0)
                };
                return out
                    .with_error_code(group_refusal_code(GroupRefusal::NotFound))
                    .with_error_message(Some(StrBytes::from_string(msg)))
                    .with_group_state(StrBytes::from_static_str("Dead"));
            };
            let hidden = g.members.iter().any(|(m, target)| {
                m.subscribed_topic_names
                    .iter()
                    .cloned()
                    .chain(
                        [&m.assigned, target]
                            .into_iter()
                            .flat_map(|a| a.keys())
                            .filter_map(|id| image.topic_names_by_id.get(id).cloned()),
                    )
                    .any(|t| !ctx.authorize(AclOperation::Describe, ResourceType::Topic, &t))
            });
            if hidden {
                return out
                    .with_error_code(strata_protocol::ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "The group has described topic(s) that the client is not authorized to describe.",
                    )));
            }
            let ops = if req.include_authorized_operations {
                ctx.authorized_operations(ResourceType::Group, &id.0)
            } else {
                AUTHORIZED_OPERATIONS_OMITTED
            };
            let members = g
                .members
                .into_iter()
                .map(|(m, target)| {
                    let out = Member::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_instance_id(m.instance_id.map(StrBytes::from_string))
                        .with_rack_id(m.rack_id.map(StrBytes::from_string))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(StrBytes::from_string(m.client_id))
                        .with_client_host(StrBytes::from_string(m.client_host))
                        .with_subscribed_topic_names(
                            m.subscribed_topic_names
                                .into_iter()
                                .map(|t| TopicName(StrBytes::from_string(t)))
                                .collect(),
                        )
                        .with_subscribed_topic_regex(
                            m.subscribed_topic_regex.map(StrBytes::from_string),
                        )
                        .with_assignment(assignment(&image, m.assigned))
                        .with_target_assignment(assignment(&image, target));
                    if ctx.api_version >= 1 {
                        out.with_member_type(CONSUMER_MEMBER)
                    } else {
                        out
                    }
                })
                .collect();
            out.with_authorized_operations(ops)
                .with_group_state(StrBytes::from_static_str(g.state))
                .with_group_epoch(g.group_epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(StrBytes::from_string(g.assignor_name))
                .with_members(members)
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

/// Partitions by topic id, with the names the image knows (a deleted topic's is empty).
fn assignment(image: &MetadataImage, a: Partitions) -> Assignment {
    Assignment::default().with_topic_partitions(
        a.into_iter()
            .map(|(id, ps)| {
                let name = image
                    .topic_names_by_id
                    .get(&id)
                    .cloned()
                    .unwrap_or_default();
                TopicPartitions::default()
                    .with_topic_id(id)
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(ps.into_iter().collect())
            })
            .collect(),
    )
}
