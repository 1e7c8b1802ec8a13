//! LeaveGroup (key 13): members leave at once instead of waiting for their session to
//! expire. v3+ (KIP-345) batches members, each with its own error, and lets the admin client
//! remove a static member by its `group.instance.id` alone.

use strata_protocol::StrBytes;
use strata_protocol::messages::leave_group_response::MemberResponse;
use strata_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::RequestContext;
use crate::server::error::{
    GroupRefusal, coordinator_unavailable_code, group_error_code, group_refusal_code,
};

/// Removes the members and rebalances the group.
#[must_use]
pub fn handle(ctx: &RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse {
    if !ctx.authorize_group(strata_kraft::acl::AclOperation::Read, &req.group_id.0) {
        return LeaveGroupResponse::default()
            .with_error_code(group_refusal_code(GroupRefusal::Unauthorized));
    }
    if let Err(e) = crate::server::placement::check(&ctx.broker, &req.group_id.0) {
        return LeaveGroupResponse::default().with_error_code(coordinator_unavailable_code(e));
    }
    let batch = ctx.api_version >= 3;
    let members: Vec<(String, Option<String>)> = if batch {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(ToString::to_string),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let results = match ctx.broker.groups.leave(&req.group_id.0, &members) {
        Ok(r) => r,
        Err(e) => return LeaveGroupResponse::default().with_error_code(group_error_code(&e)),
    };
    let code = |r: &Result<(), _>| r.as_ref().err().map_or(0, group_error_code);
    if !batch {
        // v0-2 carry the single member's error at the top level.
        return LeaveGroupResponse::default().with_error_code(results.first().map_or(0, code));
    }
    LeaveGroupResponse::default().with_members(
        members
            .into_iter()
            .zip(&results)
            .map(|((member_id, instance), r)| {
                MemberResponse::default()
                    .with_member_id(StrBytes::from_string(member_id))
                    .with_group_instance_id(instance.map(StrBytes::from_string))
                    .with_error_code(code(r))
            })
            .collect(),
    )
}

/// The answer once the group's partition committed what it held: as built, or the wait's
/// error alone (Kafka answers a LeaveGroup whose write failed with the error, no members).
#[must_use]
pub fn failed(resp: LeaveGroupResponse, failed: &[(String, i16)]) -> LeaveGroupResponse {
    match failed.first() {
        None => resp,
        Some((_, code)) => LeaveGroupResponse::default().with_error_code(*code),
    }
}
