//! Heartbeat (key 12): keeps a member's session alive, and tells it (REBALANCE_IN_PROGRESS)
//! when it must rejoin.

use strata_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::RequestContext;
use crate::server::error::{
    GroupRefusal, coordinator_unavailable_code, group_error_code, group_refusal_code,
};

/// Records the heartbeat.
#[must_use]
pub fn handle(ctx: &RequestContext, req: HeartbeatRequest) -> HeartbeatResponse {
    if !ctx.authorize_group(strata_kraft::acl::AclOperation::Read, &req.group_id.0) {
        return HeartbeatResponse::default()
            .with_error_code(group_refusal_code(GroupRefusal::Unauthorized));
    }
    if let Err(e) = crate::server::placement::check(&ctx.broker, &req.group_id.0) {
        return HeartbeatResponse::default().with_error_code(coordinator_unavailable_code(e));
    }
    let r = ctx.broker.groups.heartbeat(
        &req.group_id.0,
        &req.member_id,
        req.group_instance_id.as_deref(),
        req.generation_id,
    );
    HeartbeatResponse::default().with_error_code(r.err().as_ref().map_or(0, group_error_code))
}
