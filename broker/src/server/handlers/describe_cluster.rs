//! DescribeCluster (key 60, KIP-700): the cluster id, a controller id and the live brokers,
//! from the metadata image, as Kafka's KRaft broker answers it.
//!
//! - Endpoint type (v1+, KIP-919): a broker serves BROKER (1) only. CONTROLLER (2) is
//!   MISMATCHED_ENDPOINT_TYPE and any other value UNSUPPORTED_ENDPOINT_TYPE; v0 has no such
//!   codes, so there both are INVALID_REQUEST.
//! - Brokers: fenced brokers are left out, unless a v2 request sets `include_fenced_brokers`
//!   (KIP-1073), which lists them with `is_fenced`.
//! - Controller id: clients cannot reach a KRaft controller (KIP-590 forwards their admin
//!   requests), so Kafka names a live broker; this broker names itself while it is live.
//!   An id that is not in the broker list is reported as -1, as Kafka does.
//! - Cluster authorized operations: the full cluster set when asked for (there is no
//!   authorizer, and Kafka without one reports every operation that applies), else
//!   Kafka's "not requested" sentinel.

use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use strata_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::RequestContext;
use super::metadata::OPS_NOT_REQUESTED;

/// Kafka's `EndpointType` ids.
const ENDPOINT_BROKER: i8 = 1;
const ENDPOINT_CONTROLLER: i8 = 2;

/// Describes the cluster as this broker's metadata image sees it.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse {
    if req.endpoint_type != ENDPOINT_BROKER {
        let (code, message) = if req.endpoint_type == ENDPOINT_CONTROLLER {
            (
                ResponseError::MismatchedEndpointType,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint \
                 of type CONTROLLER"
                    .to_owned(),
            )
        } else {
            (
                ResponseError::UnsupportedEndpointType,
                format!("Unsupported endpoint type {}", req.endpoint_type),
            )
        };
        let code = if ctx.api_version == 0 {
            ResponseError::InvalidRequest.code()
        } else {
            code.code()
        };
        return DescribeClusterResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)));
    }
    let image = ctx.broker.image();
    let include_fenced = ctx.api_version >= 2 && req.include_fenced_brokers;
    let brokers: Vec<DescribeClusterBroker> = image
        .brokers
        .values()
        .filter(|b| include_fenced || !b.fenced)
        .map(|b| {
            let (host, port) = ctx.endpoint_of(b);
            let broker = DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(host))
                .with_port(i32::from(port))
                .with_rack(b.rack.clone().map(StrBytes::from_string));
            if ctx.api_version >= 2 {
                broker.with_is_fenced(b.fenced)
            } else {
                broker
            }
        })
        .collect();
    let controller_id = super::metadata::live_broker(&image, ctx.broker.config.node_id);
    let cluster_ops = if req.include_cluster_authorized_operations {
        ctx.authorized_operations(
            strata_kraft::acl::ResourceType::Cluster,
            strata_kraft::acl::CLUSTER_NAME,
        )
    } else {
        OPS_NOT_REQUESTED
    };
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(image.cluster_id.clone()))
        .with_controller_id(BrokerId(controller_id))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(cluster_ops)
}
