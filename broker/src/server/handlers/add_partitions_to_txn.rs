//! AddPartitionsToTxn (key 24): a transactional producer adds partitions to its ongoing
//! transaction before it writes to them (v0-3, one transaction), or a partition leader
//! checks that a transactional batch's partition is in its producer's transaction (v4+,
//! batched, KIP-890's `verify_only`). Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`
//! and `TransactionCoordinator.handleAddPartitionsToTransaction`.
//!
//! - v4+ is a broker's request: CLUSTER_ACTION on the cluster is required, or the whole
//!   answer is CLUSTER_AUTHORIZATION_FAILED; it covers the ids and topics.
//! - Each transaction of a client (v0-3): WRITE on its transactional id, or every partition
//!   gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and WRITE on each topic, never granted for
//!   an internal topic (TOPIC_AUTHORIZATION_FAILED). Then each partition must exist
//!   (UNKNOWN_TOPIC_OR_PARTITION);
//!   if any fails, the others get OPERATION_NOT_ATTEMPTED and nothing is added.
//! - Then the coordinator: NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS where this node
//!   does not serve the id (yet), INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
//!   (INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS while the previous
//!   transaction completes; each code for every partition. The answer waits until the new
//!   state is committed in `__transaction_state`.

use std::collections::{BTreeMap, BTreeSet};

use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::ResponseError;
use strata_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use strata_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use strata_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName, TransactionalId,
};

use super::RequestContext;
use crate::coordinator::InternalTopic;
use crate::server::error::{coordinator_unavailable_code, fenced_for_version, txn_error_code};
use crate::server::placement;

/// The partitions of a request, by topic.
pub type TopicPartitions = BTreeMap<String, BTreeSet<i32>>;

/// Answers every transaction of the request.
pub async fn handle(
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if ctx.api_version >= 4 {
        if !ctx.authorize_cluster(AclOperation::ClusterAction) {
            return AddPartitionsToTxnResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        }
        let mut results = Vec::with_capacity(req.transactions.len());
        for t in req.transactions {
            let codes = transaction(ctx, &t).await;
            results.push(
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(t.transactional_id)
                    .with_topic_results(topic_results(codes)),
            );
        }
        return AddPartitionsToTxnResponse::default().with_results_by_transaction(results);
    }
    let t = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(req.v3_and_below_transactional_id)
        .with_producer_id(req.v3_and_below_producer_id)
        .with_producer_epoch(req.v3_and_below_producer_epoch)
        .with_topics(req.v3_and_below_topics);
    let codes = transaction(ctx, &t).await;
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topic_results(codes))
}

/// Each partition's code for one transaction.
async fn transaction(
    ctx: &RequestContext,
    t: &AddPartitionsToTxnTransaction,
) -> BTreeMap<(String, i32), i16> {
    let partitions = partitions_of(&t.topics);
    let every = |code: i16| -> BTreeMap<(String, i32), i16> {
        partitions
            .iter()
            .flat_map(|(topic, ids)| ids.iter().map(move |p| ((topic.clone(), *p), code)))
            .collect()
    };
    let id: &TransactionalId = &t.transactional_id;
    // v4+ comes from brokers, which CLUSTER_ACTION covers: the id and the topics are
    // authorized for a client's request only.
    let from_client = ctx.api_version < 4;
    if from_client && !ctx.authorize_transactional_id(AclOperation::Write, id) {
        return every(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let refused = refused_partitions(ctx, &partitions);
    if !refused.is_empty() {
        let mut codes = every(ResponseError::OperationNotAttempted.code());
        codes.extend(refused);
        return codes;
    }
    if id.is_empty() {
        return every(ResponseError::InvalidRequest.code());
    }
    if let Err(e) = placement::check_txn(&ctx.broker, id) {
        return every(coordinator_unavailable_code(e));
    }
    let txns = &ctx.broker.txns;
    let (producer_id, epoch) = (t.producer_id.0, t.producer_epoch);
    let outcome = if t.verify_only {
        txns.verify(id, producer_id, epoch, &partitions)
    } else {
        // v4+ without `verify_only`: a leader adding for a version-2 producer.
        let tv2 = ctx.api_version >= 4;
        txns.add_partitions(id, producer_id, epoch, &partitions, tv2, crate::now_ms())
            .await
            .map(|()| BTreeMap::new())
    };
    match outcome {
        Ok(verified) if t.verify_only => verified,
        Ok(_) => every(0),
        Err(e) => {
            tracing::debug!(transactional_id = %id.0, error = %e, "AddPartitionsToTxn refused");
            // PRODUCER_FENCED is v2's (KIP-588).
            every(fenced_for_version(txn_error_code(&e), ctx.api_version, 2))
        }
    }
}

/// The request's partitions, by topic (a partition named twice counts once).
#[must_use]
pub fn partitions_of(topics: &[AddPartitionsToTxnTopic]) -> TopicPartitions {
    let mut out = TopicPartitions::new();
    for t in topics {
        out.entry(t.name.0.to_string())
            .or_default()
            .extend(t.partitions.iter().copied());
    }
    out
}

/// The partitions the client may not add: TOPIC_AUTHORIZATION_FAILED without WRITE on the
/// topic, UNKNOWN_TOPIC_OR_PARTITION where the partition does not exist.
fn refused_partitions(
    ctx: &RequestContext,
    partitions: &TopicPartitions,
) -> BTreeMap<(String, i32), i16> {
    let image = ctx.broker.image();
    let mut refused = BTreeMap::new();
    for (topic, ids) in partitions {
        // Kafka filters the internal topics out before it authorizes: a client never adds
        // one itself (AddOffsetsToTxn adds the group's `__consumer_offsets` partition).
        let authorized = ctx.api_version >= 4
            || (!InternalTopic::is_internal(topic)
                && ctx.authorize(AclOperation::Write, ResourceType::Topic, topic));
        let known = image.topics.get(topic.as_str());
        for &p in ids {
            let code = if !authorized {
                ResponseError::TopicAuthorizationFailed.code()
            } else if known.is_none_or(|t| !t.partitions.iter().any(|x| x.partition == p)) {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                continue;
            };
            refused.insert((topic.clone(), p), code);
        }
    }
    refused
}

/// The codes by topic, as the response lists them.
fn topic_results(codes: BTreeMap<(String, i32), i16>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut by_topic: BTreeMap<String, Vec<AddPartitionsToTxnPartitionResult>> = BTreeMap::new();
    for ((topic, p), code) in codes {
        by_topic.entry(topic).or_default().push(
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(p)
                .with_partition_error_code(code),
        );
    }
    by_topic
        .into_iter()
        .map(|(topic, results)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(topic.into()))
                .with_results_by_partition(results)
        })
        .collect()
}
