//! DeleteGroups (key 42): removes empty groups, classic or KIP-848, and their committed
//! offsets and stored records. A group with members is refused with NON_EMPTY_GROUP; a group
//! known only by its committed offsets (a "simple" group) is deleted too; anything else is
//! GROUP_ID_NOT_FOUND.

use strata_protocol::messages::delete_groups_response::DeletableGroupResult;
use strata_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::RequestContext;
use crate::coordinator::group::classic::GroupError;
use crate::coordinator::group::consumer::DeleteConsumerGroupError;
use crate::now_ms;
use crate::server::error::{
    GroupRefusal, coordinator_error_code, coordinator_unavailable_code,
    delete_consumer_group_error_code, group_error_code, group_refusal_code,
};

/// Deletes each group.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let broker = &ctx.broker;
    let results = req
        .groups_names
        .into_iter()
        .map(|id| {
            if !ctx.authorize_group(strata_kraft::acl::AclOperation::Delete, &id.0) {
                return DeletableGroupResult::default()
                    .with_group_id(id)
                    .with_error_code(group_refusal_code(GroupRefusal::Unauthorized));
            }
            let code = if let Err(e) = crate::server::placement::check(broker, &id.0) {
                // Only the group's coordinator may delete it.
                coordinator_unavailable_code(e)
            } else {
                match broker.consumer_groups.delete(&id.0) {
                    Ok(()) => delete_offsets(ctx, &id.0),
                    Err(DeleteConsumerGroupError::NotConsumerGroup) => delete_classic(ctx, &id.0),
                    Err(e) => delete_consumer_group_error_code(e),
                }
            };
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}

/// A classic group, or a simple group known only by its offsets.
fn delete_classic(ctx: &RequestContext, group: &str) -> i16 {
    let broker = &ctx.broker;
    match broker.groups.delete(group) {
        // Not known to the coordinator, but its offsets make it a (simple) group.
        Err(GroupError::GroupIdNotFound { .. }) if broker.offsets.has_group(group) => {
            delete_offsets(ctx, group)
        }
        Err(e) => group_error_code(&e),
        Ok(()) => delete_offsets(ctx, group),
    }
}

/// The groups the answer says were deleted: their answers wait for the tombstones' commit.
#[must_use]
pub fn deleted(resp: &DeleteGroupsResponse) -> Vec<String> {
    resp.results
        .iter()
        .filter(|r| r.error_code == 0)
        .map(|r| r.group_id.0.to_string())
        .collect()
}

/// The answer once each deleted group's tombstones are committed; a group whose wait failed
/// gets its error (a leader change that lost them leaves the group as it was).
#[must_use]
pub fn failed(mut resp: DeleteGroupsResponse, failed: &[(String, i16)]) -> DeleteGroupsResponse {
    for r in &mut resp.results {
        if let Some((_, code)) = failed.iter().find(|(g, _)| *g == *r.group_id.0) {
            r.error_code = *code;
        }
    }
    resp
}

/// A deleted group's offsets and stored metadata go with it; the answer waits for the
/// tombstones' commit (see [`failed`]).
fn delete_offsets(ctx: &RequestContext, group: &str) -> i16 {
    match ctx.broker.offsets.delete_group(group, now_ms()) {
        Ok((_, _pending)) => 0,
        Err(e) => coordinator_error_code(&e),
    }
}
