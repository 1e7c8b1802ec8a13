//! BrokerHeartbeat (key 63, controller listener; KIP-631): a registered broker's liveness, and
//! the controller's answer whether it is fenced, caught up, or may shut down.

use strata_kraft::cluster_control::BrokerHeartbeatRequest;
use strata_protocol::messages::{BrokerHeartbeatRequest as WireHeartbeat, BrokerHeartbeatResponse};

use crate::broker::Broker;
use crate::server::error::controller_error_code;

/// The controller listener's answer to BrokerHeartbeat.
#[must_use]
pub async fn handle(broker: &Broker, req: &WireHeartbeat) -> BrokerHeartbeatResponse {
    let request = BrokerHeartbeatRequest {
        broker_id: req.broker_id.0,
        broker_epoch: req.broker_epoch,
        current_metadata_offset: req.current_metadata_offset,
        want_fence: req.want_fence,
        want_shut_down: req.want_shut_down,
    };
    match broker.controller_heartbeat(&request).await {
        Ok(reply) => BrokerHeartbeatResponse::default()
            .with_is_caught_up(reply.is_caught_up)
            .with_is_fenced(reply.is_fenced)
            .with_should_shut_down(reply.should_shut_down),
        Err(e) => BrokerHeartbeatResponse::default()
            .with_error_code(controller_error_code(&e))
            .with_is_fenced(true),
    }
}
