//! DeleteGroups (key 42): removes empty groups and their committed offsets. A group with
//! members is refused with NON_EMPTY_GROUP; a group known only by its committed offsets (a
//! "simple" group) is deleted too; anything else is GROUP_ID_NOT_FOUND.

use strata_protocol::messages::delete_groups_response::DeletableGroupResult;
use strata_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::RequestContext;
use crate::error::{group_error_code, offset_store_error_code};
use crate::group::GroupError;
use crate::now_ms;

/// Deletes each group.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let broker = &ctx.broker;
    let results = req
        .groups_names
        .into_iter()
        .map(|id| {
            let code = match broker.groups.delete(&id.0) {
                // Not known to the coordinator, but its offsets make it a (simple) group.
                Err(GroupError::GroupIdNotFound { .. }) if broker.offsets.has_group(&id.0) => {
                    delete_offsets(ctx, &id.0)
                }
                Err(e) => group_error_code(&e),
                Ok(()) => delete_offsets(ctx, &id.0),
            };
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}

/// A deleted group's offsets and stored metadata go with it.
fn delete_offsets(ctx: &RequestContext, group: &str) -> i16 {
    match ctx.broker.offsets.delete_group(group, now_ms()) {
        Ok(_) => 0,
        Err(e) => offset_store_error_code(&e),
    }
}
