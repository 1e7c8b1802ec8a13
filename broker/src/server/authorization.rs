//! Authorization of client requests (KIP-801's StandardAuthorizer, see
//! `strata_kraft::acl`): who asks and from where, as a handler sees it.
//!
//! The principal is the connection's (`security`): the SASL user, the TLS client
//! certificate's mapped name, or Kafka's `User:ANONYMOUS`; the host is the peer's IP
//! address. A request forwarded by another node
//! (`forward.rs`) arrives from that node's address, so a host-restricted binding is
//! checked against the forwarding node's address for the forwarded writes.
//!
//! The checks of APIs whose handlers live elsewhere (ListOffsets and the config APIs) are
//! wrappers here: the resources the client may not touch are taken out of the request,
//! answered with Kafka's authorization error, and the rest go to the handler unchanged.

use strata_kraft::acl::{AclOperation, Requester, ResourceType};
use strata_protocol::messages::describe_configs_response::DescribeConfigsResult;
use strata_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use strata_protocol::messages::{
    AlterConfigsRequest, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, ListOffsetsRequest, ListOffsetsResponse, ResponseKind,
    alter_configs_response, incremental_alter_configs_response,
};
use strata_protocol::{ResponseError, StrBytes};

use crate::server::handlers::RequestContext;

pub use crate::security::principal::ANONYMOUS;

impl RequestContext {
    /// The peer's IP address as Kafka's `InetAddress.getHostAddress` prints it; empty
    /// where there is no socket.
    fn peer_host(&self) -> String {
        self.peer.map(|p| p.ip().to_string()).unwrap_or_default()
    }

    /// Whether this request's client may perform `operation` on the resource.
    #[must_use]
    pub fn authorize(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> bool {
        if self.broker.config.authorizer.is_none() {
            return true;
        }
        let host = self.peer_host();
        self.broker.authorize(
            Requester {
                principal: &self.principal,
                host: &host,
            },
            operation,
            resource_type,
            resource_name,
        )
    }

    /// Whether this request's client may perform `operation` on the cluster.
    #[must_use]
    pub fn authorize_cluster(&self, operation: AclOperation) -> bool {
        self.authorize(
            operation,
            ResourceType::Cluster,
            strata_kraft::acl::CLUSTER_NAME,
        )
    }

    /// Whether this request's client may perform `operation` on the group: the group
    /// APIs' check, GROUP_AUTHORIZATION_FAILED when it fails.
    #[must_use]
    pub fn authorize_group(&self, operation: AclOperation, group: &str) -> bool {
        self.authorize(operation, ResourceType::Group, group)
    }

    /// Whether this request's client may perform `operation` on the transactional id: the
    /// transaction APIs' check, TRANSACTIONAL_ID_AUTHORIZATION_FAILED when it fails.
    #[must_use]
    pub fn authorize_transactional_id(&self, operation: AclOperation, id: &str) -> bool {
        self.authorize(operation, ResourceType::TransactionalId, id)
    }

    /// `authorized_operations` of a resource for this request's client.
    #[must_use]
    pub fn authorized_operations(&self, resource_type: ResourceType, resource_name: &str) -> i32 {
        let host = self.peer_host();
        self.broker.authorized_operations(
            Requester {
                principal: &self.principal,
                host: &host,
            },
            resource_type,
            resource_name,
        )
    }
}

/// The ACL resource a config resource (DescribeConfigs, AlterConfigs,
/// IncrementalAlterConfigs) is authorized on, and the error it gets when the client may
/// not: a topic on itself, a group on itself, a broker (and every other type) on the
/// cluster, as Kafka's `ConfigHelper` and `AuthHelper` check them.
fn config_resource(resource_type: i8, name: &str) -> (ResourceType, String, ResponseError) {
    match resource_type {
        strata_kraft::record::RESOURCE_TYPE_TOPIC => (
            ResourceType::Topic,
            name.to_owned(),
            ResponseError::TopicAuthorizationFailed,
        ),
        CONFIG_RESOURCE_GROUP => (
            ResourceType::Group,
            name.to_owned(),
            ResponseError::GroupAuthorizationFailed,
        ),
        _ => (
            ResourceType::Cluster,
            strata_kraft::acl::CLUSTER_NAME.to_owned(),
            ResponseError::ClusterAuthorizationFailed,
        ),
    }
}

/// Kafka's `ConfigResource.Type.GROUP` (KIP-848 group configs).
const CONFIG_RESOURCE_GROUP: i8 = 32;

/// Whether the client may perform `operation` on a config resource; the error if not.
fn config_denied(
    ctx: &RequestContext,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<ResponseError> {
    let (rt, resource, error) = config_resource(resource_type, name);
    (!ctx.authorize(operation, rt, &resource)).then_some(error)
}

/// ListOffsets behind Kafka's check of DESCRIBE on each topic: the topics the client may
/// not describe are answered TOPIC_AUTHORIZATION_FAILED for every partition, and the rest
/// go to `handle`.
pub fn list_offsets(
    ctx: &RequestContext,
    mut req: ListOffsetsRequest,
    handle: fn(&RequestContext, ListOffsetsRequest) -> ListOffsetsResponse,
) -> ListOffsetsResponse {
    let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics)
        .into_iter()
        .partition(|t| ctx.authorize(AclOperation::Describe, ResourceType::Topic, &t.name.0));
    req.topics = allowed;
    let mut resp = handle(ctx, req);
    resp.topics.extend(denied.into_iter().map(|t| {
        ListOffsetsTopicResponse::default()
            .with_name(t.name)
            .with_partitions(
                t.partitions
                    .iter()
                    .map(|p| {
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                            .with_timestamp(-1)
                            .with_offset(-1)
                            .with_leader_epoch(-1)
                    })
                    .collect(),
            )
    }));
    resp
}

/// DescribeConfigs behind DESCRIBE_CONFIGS on each resource (see [`config_resource`]).
pub fn describe_configs(
    ctx: &RequestContext,
    mut req: DescribeConfigsRequest,
    handle: fn(&RequestContext, DescribeConfigsRequest) -> DescribeConfigsResponse,
) -> DescribeConfigsResponse {
    let mut denied = Vec::new();
    req.resources.retain(|r| {
        match config_denied(
            ctx,
            AclOperation::DescribeConfigs,
            r.resource_type,
            &r.resource_name,
        ) {
            Some(e) => {
                denied.push(
                    DescribeConfigsResult::default()
                        .with_error_code(e.code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string())))
                        .with_resource_type(r.resource_type)
                        .with_resource_name(r.resource_name.clone()),
                );
                false
            }
            None => true,
        }
    });
    let mut resp = handle(ctx, req);
    resp.results.extend(denied);
    resp
}

/// AlterConfigs behind ALTER_CONFIGS on each resource (see [`config_resource`]).
pub async fn alter_configs<F, A>(
    ctx: RequestContext,
    mut req: AlterConfigsRequest,
    handle: F,
) -> ResponseKind
where
    F: FnOnce(RequestContext, AlterConfigsRequest) -> A,
    A: std::future::Future<Output = ResponseKind>,
{
    let mut denied = Vec::new();
    req.resources.retain(|r| {
        match config_denied(
            &ctx,
            AclOperation::AlterConfigs,
            r.resource_type,
            &r.resource_name,
        ) {
            Some(e) => {
                denied.push(
                    alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_error_code(e.code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string())))
                        .with_resource_type(r.resource_type)
                        .with_resource_name(r.resource_name.clone()),
                );
                false
            }
            None => true,
        }
    });
    let mut resp = handle(ctx, req).await;
    if let ResponseKind::AlterConfigs(r) = &mut resp {
        r.responses.extend(denied);
    }
    resp
}

/// IncrementalAlterConfigs behind ALTER_CONFIGS on each resource (see
/// [`config_resource`]).
pub async fn incremental_alter_configs<F, A>(
    ctx: RequestContext,
    mut req: IncrementalAlterConfigsRequest,
    handle: F,
) -> ResponseKind
where
    F: FnOnce(RequestContext, IncrementalAlterConfigsRequest) -> A,
    A: std::future::Future<Output = ResponseKind>,
{
    let mut denied = Vec::new();
    req.resources.retain(|r| {
        match config_denied(
            &ctx,
            AclOperation::AlterConfigs,
            r.resource_type,
            &r.resource_name,
        ) {
            Some(e) => {
                denied.push(
                    incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_error_code(e.code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string())))
                        .with_resource_type(r.resource_type)
                        .with_resource_name(r.resource_name.clone()),
                );
                false
            }
            None => true,
        }
    });
    let mut resp = handle(ctx, req).await;
    if let ResponseKind::IncrementalAlterConfigs(r) = &mut resp {
        r.responses.extend(denied);
    }
    resp
}
