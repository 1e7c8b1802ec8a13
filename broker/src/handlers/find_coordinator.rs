//! FindCoordinator (key 10): on a single node, this node coordinates every group and
//! transactional id.

use strata_protocol::StrBytes;
use strata_protocol::messages::find_coordinator_response::Coordinator;
use strata_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::RequestContext;

/// Answers with this node for each key (v4+ batches keys, KIP-699).
#[must_use]
pub fn handle(ctx: &RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse {
    let cfg = &ctx.broker.config;
    // The address on the listener the client used, as Kafka answers.
    let (host, port) = ctx.own_endpoint();
    let host = StrBytes::from_string(host);
    let port = i32::from(port);
    if ctx.api_version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(cfg.node_id))
                    .with_host(host.clone())
                    .with_port(port)
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        FindCoordinatorResponse::default()
            .with_node_id(BrokerId(cfg.node_id))
            .with_host(host)
            .with_port(port)
    }
}
