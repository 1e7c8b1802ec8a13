//! EndTxn (key 26): a transactional producer commits or aborts its transaction (Kafka's
//! `TransactionCoordinator.handleEndTransaction`: transaction version 1 for EndTxn v0-4, and
//! version 2 for v5).
//!
//! WRITE on the transactional id is required (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). The
//! coordinator decides the transaction (PrepareCommit or PrepareAbort in
//! `__transaction_state`) and answers once that is committed; the markers then go to every
//! partition of the transaction, and the transaction completes once all are written, while
//! the producer's next AddPartitionsToTxn or EndTxn gets CONCURRENT_TRANSACTIONS. A retry of
//! an end already complete succeeds; ending the other way is INVALID_TXN_STATE; PRODUCER_FENCED
//! is INVALID_PRODUCER_EPOCH before v2.
//!
//! Version 5 is transaction version 2 (KIP-890): every end bumps the producer's epoch (the
//! markers carry the new one, which fences any request of the ended transaction still in
//! flight), and the answer names the producer id and epoch to go on with; when the epochs run
//! out, that is a fresh producer id at epoch 0. A retry whose answer was lost (the epoch one
//! below the current, the end complete) gets the same answer. An abort with no transaction
//! ongoing is accepted (it bumps the epoch, with no markers), as the Java producer sends one
//! for a transaction whose records never reached a partition.

use strata_kraft::acl::AclOperation;
use strata_protocol::ResponseError;
use strata_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::RequestContext;
use crate::server::error::{coordinator_unavailable_code, fenced_for_version, txn_error_code};
use crate::server::placement;

/// Ends the transaction, or answers why not.
pub async fn handle(ctx: &RequestContext, req: EndTxnRequest) -> EndTxnResponse {
    let answer = |code: i16| {
        EndTxnResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let id = req.transactional_id.0.as_str();
    if !ctx.authorize_transactional_id(AclOperation::Write, id) {
        return answer(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if id.is_empty() {
        return answer(ResponseError::InvalidRequest.code());
    }
    if let Err(e) = placement::check_txn(&ctx.broker, id) {
        return answer(coordinator_unavailable_code(e));
    }
    match ctx
        .broker
        .txns
        .end_txn(
            id,
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
            ctx.api_version >= 5,
            crate::now_ms(),
            || super::init_producer_id::allocate(ctx.broker.clone()),
        )
        .await
    {
        Ok((producer_id, epoch)) => EndTxnResponse::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch),
        Err(e) => {
            tracing::debug!(transactional_id = id, error = %e, "EndTxn refused");
            answer(fenced_for_version(txn_error_code(&e), ctx.api_version, 2))
        }
    }
}
