//! EndTxn (key 26): a transactional producer commits or aborts its transaction (Kafka's
//! `TransactionCoordinator.handleEndTransaction`, transaction version 1: EndTxn v0-4).
//!
//! WRITE on the transactional id is required (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). The
//! coordinator decides the transaction (PrepareCommit or PrepareAbort in
//! `__transaction_state`) and answers once that is committed; the markers then go to every
//! partition of the transaction, and the transaction completes once all are written, while
//! the producer's next AddPartitionsToTxn or EndTxn gets CONCURRENT_TRANSACTIONS. A retry of
//! an end already complete succeeds; ending the other way is INVALID_TXN_STATE; PRODUCER_FENCED
//! is INVALID_PRODUCER_EPOCH before v2. Version 5 (transaction version 2) is not served, as
//! ApiVersions finalizes no `transaction.version`.

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
            crate::now_ms(),
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
