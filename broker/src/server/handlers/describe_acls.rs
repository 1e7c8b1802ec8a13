//! DescribeAcls (key 29): the bindings of this node's image that match the filter, grouped
//! by resource pattern as Kafka's `AclApis.handleDescribeAcls` answers. Without an
//! authorizer it is SECURITY_DISABLED; the client needs DESCRIBE on the cluster.

use std::collections::BTreeMap;

use strata_kraft::acl::{
    AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
};
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use strata_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};

use super::RequestContext;

/// Kafka's message when no authorizer is configured.
pub(super) const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Answers the filter from the image.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let fail = |e: ResponseError, msg: String| {
        DescribeAclsResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(StrBytes::from_string(msg)))
    };
    if ctx.broker.config.authorizer.is_none() {
        return fail(ResponseError::SecurityDisabled, NO_AUTHORIZER.to_owned());
    }
    if !ctx.authorize_cluster(AclOperation::Describe) {
        return fail(
            ResponseError::ClusterAuthorizationFailed,
            ResponseError::ClusterAuthorizationFailed.to_string(),
        );
    }
    let filter = AclBindingFilter {
        resource_type: ResourceType::from_code(req.resource_type_filter),
        resource_name: req.resource_name_filter.map(|n| n.to_string()),
        pattern_type: PatternType::from_code(req.pattern_type_filter),
        principal: req.principal_filter.map(|p| p.to_string()),
        host: req.host_filter.map(|h| h.to_string()),
        operation: AclOperation::from_code(req.operation),
        permission_type: AclPermissionType::from_code(req.permission_type),
    };
    if let Err(e) = filter.validate() {
        return fail(ResponseError::InvalidRequest, e.to_string());
    }
    let image = ctx.broker.image();
    let mut resources: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for b in image.acls.values().filter(|b| filter.matches(b)) {
        resources
            .entry((
                b.resource_type.code(),
                b.resource_name.clone(),
                b.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(b.principal.clone()))
                    .with_host(StrBytes::from_string(b.host.clone()))
                    .with_operation(b.operation.code())
                    .with_permission_type(b.permission_type.code()),
            );
    }
    DescribeAclsResponse::default().with_resources(
        resources
            .into_iter()
            .map(|((rt, name, pt), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(rt)
                    .with_resource_name(StrBytes::from_string(name))
                    .with_pattern_type(pt)
                    .with_acls(acls)
            })
            .collect(),
    )
}
