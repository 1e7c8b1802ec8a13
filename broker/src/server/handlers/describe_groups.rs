//! DescribeGroups (key 15): state, protocol and members of each group. Member metadata and
//! assignments are reported only for a Stable group, as Kafka does. An unknown group is
//! reported in state Dead; v6+ (KIP-1043) also gives it GROUP_ID_NOT_FOUND.

use strata_protocol::StrBytes;
use strata_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use strata_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use strata_kraft::acl::{AclOperation, ResourceType};

use super::RequestContext;
use crate::server::error::{GroupRefusal, coordinator_unavailable_code, group_refusal_code};

/// Kafka's "authorized operations not requested" sentinel.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Describes the groups.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let v = ctx.api_version;
    let groups = req
        .groups
        .into_iter()
        .map(|id| {
            // KIP-430: what the authorizer allows (every group operation without one).
            let ops = if req.include_authorized_operations {
                ctx.authorized_operations(ResourceType::Group, &id.0)
            } else {
                AUTHORIZED_OPERATIONS_OMITTED
            };
            let out = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(ops);
            if !ctx.authorize(AclOperation::Describe, ResourceType::Group, &id.0) {
                return out
                    .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
                    .with_error_code(group_refusal_code(GroupRefusal::Unauthorized));
            }
            // Only the group's coordinator knows it (Kafka's `handleDescribeGroup`).
            if let Err(e) = crate::server::placement::check(&ctx.broker, &id.0) {
                // Kafka's `groupError`: the state is unknown, an empty string.
                return out.with_error_code(coordinator_unavailable_code(e));
            }
            // KIP-848 consumer groups (Kafka's `ConsumerGroup.asDescribedGroup`), without the
            // serialized subscription and assignment bytes.
            if let Some(g) = ctx.broker.consumer_groups.describe(&id.0) {
                let members = g
                    .members
                    .into_iter()
                    .map(|(m, _)| {
                        let dm = DescribedGroupMember::default()
                            .with_member_id(StrBytes::from_string(m.member_id))
                            .with_client_id(StrBytes::from_string(m.client_id))
                            .with_client_host(StrBytes::from_string(m.client_host));
                        if v >= 4 {
                            dm.with_group_instance_id(m.instance_id.map(StrBytes::from_string))
                        } else {
                            dm
                        }
                    })
                    .collect();
                return out
                    .with_group_state(StrBytes::from_static_str(g.state))
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                    .with_protocol_data(StrBytes::from_string(g.assignor_name))
                    .with_members(members);
            }
            // A group known only by its committed offsets is Empty, as in Kafka.
            let simple = || {
                (ctx.broker.offsets.has_group(&id.0))
                    .then(crate::coordinator::group::classic::DescribedGroup::simple)
            };
            let Some(g) = ctx.broker.groups.describe(&id.0).or_else(simple) else {
                let out = out.with_group_state(StrBytes::from_static_str("Dead"));
                return if v >= 6 {
                    out.with_error_code(group_refusal_code(GroupRefusal::NotFound))
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "Group {} not found.",
                            &*id.0
                        ))))
                } else {
                    out
                };
            };
            let members = g
                .members
                .into_iter()
                .map(|m| {
                    let mut dm = DescribedGroupMember::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_client_id(StrBytes::from_string(m.client_id))
                        .with_client_host(StrBytes::from_string(m.client_host))
                        .with_member_metadata(m.metadata)
                        .with_member_assignment(m.assignment);
                    if v >= 4 {
                        dm = dm
                            .with_group_instance_id(m.group_instance_id.map(StrBytes::from_string));
                    }
                    dm
                })
                .collect();
            out.with_group_state(StrBytes::from_static_str(g.state))
                .with_protocol_type(StrBytes::from_string(g.protocol_type))
                .with_protocol_data(StrBytes::from_string(g.protocol))
                .with_members(members)
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
