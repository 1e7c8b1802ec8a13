//! InitProducerId (key 22): a producer id and epoch for an idempotent producer (KIP-98).
//!
//! Without a transactional id Kafka's `TransactionCoordinator.handleInitProducerId` always
//! hands out a fresh producer id with epoch 0, even when the client passes its current id
//! and epoch to bump it (KIP-360, v3+): a new id restarts every partition's sequences just
//! as a bumped epoch would. We do the same. Transactions are not supported, so a
//! transactional id gets COORDINATOR_NOT_AVAILABLE, what Kafka answers while its transaction
//! coordinator cannot run (`__transaction_state` unavailable); the client retries until its
//! own timeout.

use strata_protocol::ResponseError;
use strata_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::RequestContext;
use crate::server::error::{coordinator_unavailable_code, producer_id_error_code};
use crate::server::placement::CoordinatorUnavailable;

/// `RecordBatch.NO_PRODUCER_ID` / `NO_PRODUCER_EPOCH`.
const NO_PRODUCER_ID: i64 = -1;
const NO_PRODUCER_EPOCH: i16 = -1;

/// Allocates a producer id, or answers the error.
#[must_use]
pub async fn handle(ctx: &RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let error = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH)
    };
    if req.transactional_id.is_some() {
        return error(coordinator_unavailable_code(
            CoordinatorUnavailable::NotAvailable,
        ));
    }
    // KafkaApis.handleInitProducerIdRequest: the id and the epoch come together or not at all.
    match (req.producer_id.0, req.producer_epoch) {
        (NO_PRODUCER_ID, NO_PRODUCER_EPOCH) => {}
        (NO_PRODUCER_ID, _) | (_, NO_PRODUCER_EPOCH) => {
            return error(ResponseError::InvalidRequest.code());
        }
        _ => {}
    }
    match ctx.broker.next_producer_id().await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::warn!(error = %e, "cannot allocate a producer id");
            error(producer_id_error_code(&e))
        }
    }
}
