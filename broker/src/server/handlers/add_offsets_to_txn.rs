//! AddOffsetsToTxn (key 25): a transactional producer about to commit a consumer group's
//! offsets in its transaction (`send_offsets_to_transaction`) adds the group's
//! `__consumer_offsets` partition to the transaction (Kafka's
//! `KafkaApis.handleAddOffsetsToTxnRequest`).
//!
//! WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the
//! group (GROUP_AUTHORIZATION_FAILED); then the coordinator adds the partition as
//! AddPartitionsToTxn does, with its codes (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before
//! v2), and answers once that is committed.

use std::collections::{BTreeMap, BTreeSet};

use strata_kraft::acl::AclOperation;
use strata_protocol::ResponseError;
use strata_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::RequestContext;
use crate::coordinator::offsets::OFFSETS_TOPIC;
use crate::server::error::{coordinator_unavailable_code, fenced_for_version, txn_error_code};
use crate::server::placement;

/// Adds the group's partition, or answers why not.
pub async fn handle(ctx: &RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    let answer = |code: i16| AddOffsetsToTxnResponse::default().with_error_code(code);
    let id = req.transactional_id.0.as_str();
    if !ctx.authorize_transactional_id(AclOperation::Write, id) {
        return answer(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if !ctx.authorize_group(AclOperation::Read, &req.group_id) {
        return answer(ResponseError::GroupAuthorizationFailed.code());
    }
    if id.is_empty() {
        return answer(ResponseError::InvalidRequest.code());
    }
    if let Err(e) = placement::check_txn(&ctx.broker, id) {
        return answer(coordinator_unavailable_code(e));
    }
    let partition = ctx.broker.offsets.partition_for(&req.group_id);
    let partitions = BTreeMap::from([(OFFSETS_TOPIC.to_owned(), BTreeSet::from([partition]))]);
    match ctx
        .broker
        .txns
        .add_partitions(
            id,
            req.producer_id.0,
            req.producer_epoch,
            &partitions,
            false,
            crate::now_ms(),
        )
        .await
    {
        Ok(()) => answer(0),
        Err(e) => {
            tracing::debug!(transactional_id = id, error = %e, "AddOffsetsToTxn refused");
            answer(fenced_for_version(txn_error_code(&e), ctx.api_version, 2))
        }
    }
}
