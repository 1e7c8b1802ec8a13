//! AllocateProducerIds (key 67, controller listener; KIP-730): a block of producer ids for a
//! broker, from the active controller.

use strata_protocol::ResponseError;
use strata_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, ProducerId,
};

use crate::broker::Broker;
use crate::server::error::controller_error_code;

/// The controller listener's answer to AllocateProducerIds: a block on the active
/// controller, NOT_CONTROLLER elsewhere, STALE_BROKER_EPOCH for a broker epoch that is not
/// the one of the broker's registration.
#[must_use]
pub async fn handle(
    broker: &Broker,
    req: &AllocateProducerIdsRequest,
) -> AllocateProducerIdsResponse {
    match broker
        .controller_allocate_producer_ids(req.broker_id.0, req.broker_epoch)
        .await
    {
        Ok(block) => match i32::try_from(block.size) {
            Ok(len) => AllocateProducerIdsResponse::default()
                .with_producer_id_start(ProducerId(block.first_producer_id))
                .with_producer_id_len(len),
            // The block is PRODUCER_ID_BLOCK_SIZE (1000) ids; the wire length is an int32.
            Err(_) => AllocateProducerIdsResponse::default()
                .with_error_code(ResponseError::UnknownServerError.code()),
        },
        // Kafka leaves the block's fields at 0 on an error.
        Err(e) => AllocateProducerIdsResponse::default().with_error_code(controller_error_code(&e)),
    }
}
