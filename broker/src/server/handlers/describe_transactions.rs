//! DescribeTransactions (key 65, KIP-664): the state of transactional ids, from their
//! coordinator (Kafka's `TransactionCoordinator.handleDescribeTransactions`).
//!
//! Each id is answered on its own: TRANSACTIONAL_ID_AUTHORIZATION_FAILED without DESCRIBE on
//! it, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS where this node does not serve it (yet),
//! TRANSACTIONAL_ID_NOT_FOUND for an id it does not know. The partitions of the transaction
//! are listed for the topics the client may DESCRIBE.

use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use strata_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
    TransactionalId,
};
use strata_protocol::{ResponseError, StrBytes};

use super::RequestContext;
use crate::server::error::coordinator_unavailable_code;
use crate::server::placement;

/// Answers each transactional id.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| describe(ctx, id))
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

fn describe(ctx: &RequestContext, id: TransactionalId) -> TransactionState {
    let answer = TransactionState::default().with_transactional_id(id.clone());
    let error = |e: ResponseError| answer.clone().with_error_code(e.code());
    if !ctx.authorize_transactional_id(AclOperation::Describe, &id) {
        return error(ResponseError::TransactionalIdAuthorizationFailed);
    }
    if let Err(e) = placement::check_txn(&ctx.broker, &id) {
        return answer
            .clone()
            .with_error_code(coordinator_unavailable_code(e));
    }
    let Some(meta) = ctx.broker.txns.get(&id) else {
        return error(ResponseError::TransactionalIdNotFound);
    };
    let topics = meta
        .partitions
        .iter()
        .filter(|(topic, _)| ctx.authorize(AclOperation::Describe, ResourceType::Topic, topic))
        .map(|(topic, partitions)| {
            TopicData::default()
                .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                .with_partitions(partitions.iter().copied().collect())
        })
        .collect();
    answer
        .with_transaction_state(StrBytes::from_static_str(meta.state.name()))
        .with_transaction_timeout_ms(meta.timeout_ms)
        .with_transaction_start_time_ms(meta.start_ms)
        .with_producer_id(ProducerId(meta.producer_id))
        .with_producer_epoch(meta.producer_epoch)
        .with_topics(topics)
}
