//! ListTransactions (key 66, KIP-664; v1's duration filter is KIP-994): the transactional
//! ids this node coordinates, as Kafka's `TransactionStateManager.listTransactionStates`
//! filters them. A client lists a cluster's transactions by asking every broker.
//!
//! - COORDINATOR_LOAD_IN_PROGRESS while a partition led here is loading;
//! - a state filter that names no state is returned in `unknown_state_filters`, and, like
//!   every state filter, keeps out every id not in a known filtered state;
//! - producer id filters keep only those ids; a duration filter (v1+, -1 for none) keeps
//!   only transactions running for longer than it;
//! - ids the client may not DESCRIBE are left out, unannounced.

use strata_kraft::acl::AclOperation;
use strata_protocol::messages::list_transactions_response::TransactionState as Listed;
use strata_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use strata_protocol::{ResponseError, StrBytes};

use super::RequestContext;
use crate::coordinator::txn::records::TxnState;

/// Lists the transactional ids this node serves.
#[must_use]
pub fn handle(ctx: &RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse {
    let Ok(all) = ctx.broker.txns.list() else {
        return ListTransactionsResponse::default()
            .with_error_code(ResponseError::CoordinatorLoadInProgress.code());
    };
    let mut states = Vec::new();
    let mut unknown = Vec::new();
    for name in &req.state_filters {
        match TxnState::from_name(name) {
            Some(s) => states.push(s),
            None => unknown.push(name.clone()),
        }
    }
    let duration = if ctx.api_version >= 1 {
        req.duration_filter
    } else {
        -1
    };
    let now = crate::now_ms();
    let listed = all
        .into_iter()
        .filter(|(_, m)| m.state != TxnState::Dead)
        .filter(|(_, m)| {
            req.producer_id_filters.is_empty()
                || req.producer_id_filters.contains(&ProducerId(m.producer_id))
        })
        .filter(|(_, m)| req.state_filters.is_empty() || states.contains(&m.state))
        .filter(|(_, m)| duration < 0 || now.saturating_sub(m.start_ms) > duration)
        .filter(|(id, _)| ctx.authorize_transactional_id(AclOperation::Describe, id))
        .map(|(id, m)| {
            Listed::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(StrBytes::from_static_str(m.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(listed)
}
