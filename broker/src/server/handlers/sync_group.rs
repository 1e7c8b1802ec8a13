//! SyncGroup (key 14): the leader hands in the assignment; every member, the leader
//! included, waits for its share. Followers park until the leader's SyncGroup arrives, so the
//! request runs in a task of its own (see `dispatch`).

use strata_protocol::StrBytes;
use strata_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::RequestContext;
use crate::coordinator::group::classic::SyncRequest;
use crate::server::error::{
    GroupRefusal, coordinator_unavailable_code, group_error_code, group_refusal_code,
};

/// Syncs with the group and waits for this member's assignment.
pub async fn handle(ctx: &RequestContext, req: SyncGroupRequest) -> SyncGroupResponse {
    if !ctx.authorize_group(strata_kraft::acl::AclOperation::Read, &req.group_id.0) {
        return SyncGroupResponse::default()
            .with_error_code(group_refusal_code(GroupRefusal::Unauthorized));
    }
    if let Err(e) = crate::server::placement::check(&ctx.broker, &req.group_id.0) {
        return SyncGroupResponse::default().with_error_code(coordinator_unavailable_code(e));
    }
    let sync = SyncRequest {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.map(|i| i.to_string()),
        protocol_type: req.protocol_type.map(|p| p.to_string()),
        protocol_name: req.protocol_name.map(|p| p.to_string()),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let group = sync.group_id.clone();
    let r = ctx.broker.groups.sync(sync).await;
    // The assignment is answered once the partition holds it committed (Kafka answers the
    // leader's SyncGroup after its group record commits, and the others' not before).
    if r.error.is_none()
        && let Err(code) = crate::server::placement::committed(&ctx.broker, &group).await
    {
        return SyncGroupResponse::default().with_error_code(code);
    }
    let mut resp = SyncGroupResponse::default()
        .with_error_code(r.error.as_ref().map_or(0, group_error_code))
        .with_assignment(r.assignment);
    if ctx.api_version >= 5 {
        resp = resp
            .with_protocol_type(r.protocol_type.map(StrBytes::from_string))
            .with_protocol_name(r.protocol_name.map(StrBytes::from_string));
    }
    resp
}
