//! BrokerRegistration (key 62, controller listener; KIP-631): a broker registers with the
//! active controller and gets its broker epoch.

use strata_kraft::cluster_control::BrokerRegistrationRequest;
use strata_kraft::record::BrokerEndpoint;
use strata_protocol::ResponseError;
use strata_protocol::messages::{
    BrokerRegistrationRequest as WireRegistration, BrokerRegistrationResponse,
};

use crate::broker::Broker;
use crate::server::error::controller_error_code;

/// The controller listener's answer to BrokerRegistration.
#[must_use]
pub async fn handle(broker: &Broker, req: &WireRegistration) -> BrokerRegistrationResponse {
    let cluster_id = broker.image().cluster_id.clone();
    if req.cluster_id.as_str() != cluster_id {
        return BrokerRegistrationResponse::default()
            .with_error_code(ResponseError::InconsistentClusterId.code())
            .with_broker_epoch(-1);
    }
    let request = BrokerRegistrationRequest {
        broker_id: req.broker_id.0,
        incarnation_id: req.incarnation_id,
        listeners: req
            .listeners
            .iter()
            .map(|l| BrokerEndpoint {
                name: l.name.to_string(),
                host: l.host.to_string(),
                port: l.port,
                security_protocol: l.security_protocol,
            })
            .collect(),
        rack: req.rack.as_ref().map(ToString::to_string),
        features: Vec::new(),
    };
    match broker.controller_register(&request).await {
        Ok(epoch) => BrokerRegistrationResponse::default().with_broker_epoch(epoch),
        Err(e) => BrokerRegistrationResponse::default()
            .with_error_code(controller_error_code(&e))
            .with_broker_epoch(-1),
    }
}
