//! CreateAcls (key 30): each binding is checked (Kafka's `validateNewAcl`: INVALID_REQUEST
//! for an UNKNOWN or filter-only type, an empty name, a cluster not named `kafka-cluster`,
//! a principal without `type:`) and the valid ones are committed to the metadata log as
//! one entry of `AccessControlEntryRecord`s, on the controller (other nodes forward it).
//! Without an authorizer every binding is SECURITY_DISABLED; the client needs ALTER on the
//! cluster.

use strata_kraft::acl::{AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType};
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::create_acls_response::AclCreationResult;
use strata_protocol::messages::{CreateAclsRequest, CreateAclsResponse, ResponseKind};

use super::RequestContext;
use super::describe_acls::NO_AUTHORIZER;
use crate::server::error::{acl_error_code, metadata_error_code};

/// Creates the bindings; one result per creation, in order.
#[must_use]
pub async fn handle(ctx: &RequestContext, req: CreateAclsRequest) -> CreateAclsResponse {
    let all = |code: i16, msg: &str| {
        let result = AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(msg.to_owned())));
        CreateAclsResponse::default().with_results(vec![result; req.creations.len()])
    };
    if ctx.broker.config.authorizer.is_none() {
        return all(ResponseError::SecurityDisabled.code(), NO_AUTHORIZER);
    }
    if !ctx.authorize_cluster(AclOperation::Alter) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return all(e.code(), &e.to_string());
    }
    let bindings: Vec<AclBinding> = req
        .creations
        .iter()
        .map(|c| AclBinding {
            resource_type: ResourceType::from_code(c.resource_type),
            resource_name: c.resource_name.to_string(),
            pattern_type: PatternType::from_code(c.resource_pattern_type),
            principal: c.principal.to_string(),
            host: c.host.to_string(),
            operation: AclOperation::from_code(c.operation),
            permission_type: AclPermissionType::from_code(c.permission_type),
        })
        .collect();
    match ctx.broker.create_acls(&bindings).await {
        Ok(results) => CreateAclsResponse::default().with_results(
            results
                .into_iter()
                .map(|r| match r {
                    Ok(()) => AclCreationResult::default(),
                    Err(e) => AclCreationResult::default()
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
pub async fn handle_kind(ctx: RequestContext, req: CreateAclsRequest) -> ResponseKind {
    ResponseKind::CreateAcls(handle(&ctx, req).await)
}
