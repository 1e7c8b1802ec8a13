//! InitProducerId (key 22): a producer id and epoch for an idempotent producer (KIP-98), or
//! for a transactional one, from its transaction coordinator.
//!
//! Without a transactional id Kafka's `TransactionCoordinator.handleInitProducerId` always
//! hands out a fresh producer id with epoch 0, even when the client passes its current id
//! and epoch to bump it (KIP-360, v3+): a new id restarts every partition's sequences just
//! as a bumped epoch would. We do the same.
//!
//! With a transactional id, the coordinator of the id ([`crate::server::placement::check_txn`])
//! bumps the id's epoch, which fences every older instance of the producer, and answers once
//! the new state is committed in `__transaction_state`
//! ([`crate::coordinator::txn::store::TxnStore::init_producer_id`]).

use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::ResponseError;
use strata_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::RequestContext;
use crate::server::error::{
    coordinator_unavailable_code, fenced_for_version, producer_id_error_code, txn_error_code,
};
use crate::server::placement;

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
    // KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id first.
    if let Some(id) = &req.transactional_id
        && !ctx.authorize_transactional_id(AclOperation::Write, id)
    {
        return error(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    // The id and the epoch come together or not at all.
    let expected = match (req.producer_id.0, req.producer_epoch) {
        (NO_PRODUCER_ID, NO_PRODUCER_EPOCH) => None,
        (NO_PRODUCER_ID, _) | (_, NO_PRODUCER_EPOCH) => {
            return error(ResponseError::InvalidRequest.code());
        }
        (id, epoch) => Some((id, epoch)),
    };
    let Some(id) = req.transactional_id else {
        // KafkaApis: an idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE
        // on some topic (`authorizeByResourceType`; here: on a topic that exists).
        if !ctx.authorize_cluster(AclOperation::IdempotentWrite) {
            let image = ctx.broker.image();
            let writes_somewhere = image
                .topics
                .keys()
                .any(|t| ctx.authorize(AclOperation::Write, ResourceType::Topic, t));
            if !writes_somewhere {
                return error(ResponseError::ClusterAuthorizationFailed.code());
            }
        }
        return match ctx.broker.next_producer_id().await {
            Ok(id) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Err(e) => {
                tracing::warn!(error = %e, "cannot allocate a producer id");
                error(producer_id_error_code(&e))
            }
        };
    };
    match transactional(ctx, &id, req.transaction_timeout_ms, expected).await {
        Ok((producer_id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch),
        // PRODUCER_FENCED is v4's (KIP-588).
        Err(code) => error(fenced_for_version(code, ctx.api_version, 4)),
    }
}

/// `TransactionCoordinator.handleInitProducerId` for transactional id `id`: its checks in
/// Kafka's order, then the coordinator's transition.
async fn transactional(
    ctx: &RequestContext,
    id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> Result<(i64, i16), i16> {
    if id.is_empty() {
        return Err(ResponseError::InvalidRequest.code());
    }
    let txns = &ctx.broker.txns;
    if timeout_ms <= 0 || timeout_ms > txns.config().max_timeout_ms {
        return Err(ResponseError::InvalidTransactionTimeout.code());
    }
    placement::check_txn(&ctx.broker, id).map_err(coordinator_unavailable_code)?;
    let allocate = || allocate(ctx.broker.clone());
    txns.init_producer_id(id, timeout_ms, expected, crate::now_ms(), allocate)
        .await
        .map_err(|e| {
            tracing::debug!(transactional_id = id, error = %e, "InitProducerId not served");
            txn_error_code(&e)
        })
}

/// A fresh producer id for the transaction coordinator, or the code to answer.
pub(super) async fn allocate(broker: std::sync::Arc<crate::broker::Broker>) -> Result<i64, i16> {
    broker.next_producer_id().await.map_err(|e| {
        tracing::warn!(error = %e, "cannot allocate a producer id");
        producer_id_error_code(&e)
    })
}
