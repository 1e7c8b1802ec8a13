//! JoinGroup (key 11): join or rejoin a classic group. The request parks until the join
//! phase completes, so it runs in a task of its own (see `dispatch`).

use strata_protocol::StrBytes;
use strata_protocol::messages::join_group_response::JoinGroupResponseMember;
use strata_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use super::RequestContext;
use crate::coordinator::group::classic::{JoinRequest, Protocol};
use crate::server::error::{
    GroupRefusal, consumer_group_in_use_code, coordinator_unavailable_code, group_error_code,
    group_refusal_code,
};

/// Joins the group and waits for the generation to form.
pub async fn handle(ctx: &RequestContext, req: JoinGroupRequest) -> JoinGroupResponse {
    let v = ctx.api_version;
    if !ctx.authorize_group(strata_kraft::acl::AclOperation::Read, &req.group_id.0) {
        return JoinGroupResponse::default()
            .with_error_code(group_refusal_code(GroupRefusal::Unauthorized))
            .with_generation_id(-1)
            .with_protocol_name((v < 7).then(StrBytes::default))
            .with_member_id(req.member_id);
    }
    if let Err(e) = crate::server::placement::check(&ctx.broker, &req.group_id.0) {
        return JoinGroupResponse::default()
            .with_error_code(coordinator_unavailable_code(e))
            .with_generation_id(-1)
            .with_protocol_name((v < 7).then(StrBytes::default))
            .with_member_id(req.member_id);
    }
    // KIP-848: a consumer group with members keeps its id (Kafka without online migration);
    // an empty one gives it up to the classic group.
    if let Err(e) = ctx.broker.consumer_groups.remove_if_empty(&req.group_id.0) {
        return JoinGroupResponse::default()
            .with_error_code(consumer_group_in_use_code(e))
            .with_generation_id(-1)
            .with_protocol_name((v < 7).then(StrBytes::default))
            .with_member_id(req.member_id);
    }
    let join = JoinRequest {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.map(|i| i.to_string()),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout for both.
        rebalance_timeout_ms: if v == 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata,
            })
            .collect(),
        require_known_member_id: v >= 4,
        supports_skip_assignment: v >= 9,
    };
    let group = join.group_id.clone();
    let r = ctx.broker.groups.join(join).await;
    // The generation is answered once the partition holds it committed.
    if r.error.is_none()
        && let Err(code) = crate::server::placement::committed(&ctx.broker, &group).await
    {
        return JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
            .with_protocol_name((v < 7).then(StrBytes::default))
            .with_member_id(StrBytes::from_string(r.member_id));
    }
    let members = r
        .members
        .into_iter()
        .map(|m| {
            let mut out = JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_string(m.member_id))
                .with_metadata(m.metadata);
            if v >= 5 {
                out = out.with_group_instance_id(m.group_instance_id.map(StrBytes::from_string));
            }
            out
        })
        .collect();
    // Before v7 the protocol name is not nullable: Kafka sends "" for none.
    let protocol_name = match r.protocol_name {
        Some(n) => Some(StrBytes::from_string(n)),
        None if v < 7 => Some(StrBytes::default()),
        None => None,
    };
    let mut resp = JoinGroupResponse::default()
        .with_error_code(r.error.as_ref().map_or(0, group_error_code))
        .with_generation_id(r.generation_id)
        .with_protocol_name(protocol_name)
        .with_leader(StrBytes::from_string(r.leader))
        .with_member_id(StrBytes::from_string(r.member_id))
        .with_members(members);
    if v >= 7 {
        resp = resp.with_protocol_type(r.protocol_type.map(StrBytes::from_string));
    }
    if v >= 9 {
        resp = resp.with_skip_assignment(r.skip_assignment);
    }
    resp
}
