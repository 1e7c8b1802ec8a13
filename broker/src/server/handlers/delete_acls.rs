//! DeleteAcls (key 31): each filter removes the bindings it matches (Kafka's
//! `AclControlManager.deleteAcls`; a filter with an UNKNOWN field is INVALID_REQUEST), all
//! removals committed as one entry of `RemoveAccessControlEntryRecord`s on the controller
//! (other nodes forward it). Without an authorizer every filter is SECURITY_DISABLED; the
//! client needs ALTER on the cluster.

use strata_kraft::acl::{
    AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
};
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use strata_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse, ResponseKind};

use super::RequestContext;
use super::describe_acls::NO_AUTHORIZER;
use crate::server::error::{acl_error_code, metadata_error_code};

/// Deletes what each filter matches; one result per filter, in order.
#[must_use]
pub async fn handle(ctx: &RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let all = |code: i16, msg: &str| {
        let result = DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(msg.to_owned())));
        DeleteAclsResponse::default().with_filter_results(vec![result; req.filters.len()])
    };
    if ctx.broker.config.authorizer.is_none() {
        return all(ResponseError::SecurityDisabled.code(), NO_AUTHORIZER);
    }
    if !ctx.authorize_cluster(AclOperation::Alter) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return all(e.code(), &e.to_string());
    }
    let filters: Vec<AclBindingFilter> = req
        .filters
        .iter()
        .map(|f| AclBindingFilter {
            resource_type: ResourceType::from_code(f.resource_type_filter),
            resource_name: f.resource_name_filter.as_ref().map(ToString::to_string),
            pattern_type: PatternType::from_code(f.pattern_type_filter),
            principal: f.principal_filter.as_ref().map(ToString::to_string),
            host: f.host_filter.as_ref().map(ToString::to_string),
            operation: AclOperation::from_code(f.operation),
            permission_type: AclPermissionType::from_code(f.permission_type),
        })
        .collect();
    match ctx.broker.delete_acls(&filters).await {
        Ok(results) => DeleteAclsResponse::default().with_filter_results(
            results
                .into_iter()
                .map(|r| match r {
                    Ok(matched) => DeleteAclsFilterResult::default().with_matching_acls(
                        matched
                            .into_iter()
                            .map(|b| {
                                DeleteAclsMatchingAcl::default()
                                    .with_resource_type(b.resource_type.code())
                                    .with_resource_name(StrBytes::from_string(b.resource_name))
                                    .with_pattern_type(b.pattern_type.code())
                                    .with_principal(StrBytes::from_string(b.principal))
                                    .with_host(StrBytes::from_string(b.host))
                                    .with_operation(b.operation.code())
                                    .with_permission_type(b.permission_type.code())
                            })
                            .collect(),
                    ),
                    Err(e) => DeleteAclsFilterResult::default()
                        .with_error_code(acl_error_code(&e))
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                })
                .collect(),
        ),
        Err(e) => all(metadata_error_code(&e), &e.to_string()),
    }
}

/// [`handle`] as a [`ResponseKind`], the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(ctx: RequestContext, req: DeleteAclsRequest) -> ResponseKind {
    ResponseKind::DeleteAcls(handle(&ctx, req).await)
}
