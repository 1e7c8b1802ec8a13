//! KIP-890: before a transactional batch opens a transaction on a partition, the
//! partition's leader asks the producer's transaction coordinator (AddPartitionsToTxn v5 to
//! another node, or the local store when this node coordinates the id):
//! - part 1, Produce v3-11 ([`Operation::Verify`], `verify_only`): whether the partition is
//!   in the producer's ongoing transaction, which its AddPartitionsToTxn put it in;
//! - part 2, Produce v12 ([`Operation::Add`], transaction version 2, whose producer sends no
//!   AddPartitionsToTxn): to add the partition, starting the transaction if none is ongoing.
//!
//! A batch the coordinator does not confirm is refused, never appended: a stray
//! transactional batch would open a transaction nobody ends and hold every read_committed
//! consumer at its first offset.
//!
//! Only the first transactional batch of a transaction on a partition is verified (Kafka's
//! `UnifiedLog.maybeStartTransactionVerification`): when the producer already has an open
//! transaction there in the same epoch, nothing is asked; an older epoch is left to the
//! append, which refuses it (INVALID_PRODUCER_EPOCH).
//!
//! The codes the producer gets, as Kafka's `ReplicaManager` and `AddPartitionsToTxnManager`
//! map them: TRANSACTION_ABORTABLE is INVALID_TXN_STATE for Produce v10 and older;
//! PRODUCER_FENCED is INVALID_PRODUCER_EPOCH; a coordinator that cannot answer (unreachable,
//! loading, moved) is NOT_ENOUGH_REPLICAS, which the producer retries. CONCURRENT_TRANSACTIONS
//! (the previous transaction's markers are still being written) is NOT_ENOUGH_REPLICAS for a
//! verification; an add retries it here for up to 100 ms, 20 ms apart (Kafka's
//! `add.partitions.to.txn.retry.backoff.max.ms` and `.backoff.ms` defaults), and then answers
//! it as it is, which the producer retries too.
//!
//! Not done, as in Kafka: a verification guard that would refuse the append if the
//! transaction ended between the coordinator's answer and the append.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use strata_protocol::ResponseError;
use strata_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use strata_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ProduceRequest, ProducerId, RequestKind, ResponseKind,
    TopicName, TransactionalId,
};

use super::RequestContext;
use crate::peer_client::{self, Decoding, PeerClient};
use crate::server::error::txn_error_code;
use crate::server::placement::{self, Placement};

/// Partitions by topic.
type TopicPartitions = BTreeMap<String, BTreeSet<i32>>;

/// One verification exchange with another node (Kafka's `request.timeout.ms` bounds it).
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_RESPONSE_BYTES: usize = 4 << 20;
/// How long, and how often, an add retries CONCURRENT_TRANSACTIONS before answering it.
const CONCURRENT_RETRY_FOR: Duration = Duration::from_millis(100);
const CONCURRENT_RETRY_EVERY: Duration = Duration::from_millis(20);

/// What the leader asks the coordinator (Kafka's `TransactionSupportedOperation`, reduced to
/// the two requests it leads to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Is the partition in the ongoing transaction (transaction versions 0 and 1)?
    Verify,
    /// Add the partition to the transaction (transaction version 2).
    Add,
}

impl Operation {
    /// The operation of a request whose version adds implicitly from `first_adding`
    /// (Produce v12, TxnOffsetCommit v5).
    #[must_use]
    pub fn for_version(version: i16, first_adding: i16) -> Self {
        if version >= first_adding {
            Operation::Add
        } else {
            Operation::Verify
        }
    }
}

/// The partitions of `req` whose transactional batches are refused, with the code each
/// answers. Partitions that need no verification, or that the handler refuses for another
/// reason (not led here, no transactional id), are not in it.
pub async fn refused(ctx: &RequestContext, req: &ProduceRequest) -> BTreeMap<(String, i32), i16> {
    let Some(id) = req.transactional_id.as_ref().map(|id| id.0.to_string()) else {
        return BTreeMap::new();
    };
    if id.is_empty() {
        return BTreeMap::new();
    }
    let mut needed: BTreeMap<(i64, i16), TopicPartitions> = BTreeMap::new();
    for t in &req.topic_data {
        let name = t.name.0.to_string();
        for pd in &t.partition_data {
            let Some(records) = pd.records.as_deref() else {
                continue;
            };
            let Some(first) = strata_protocol::record_batch::batches(records)
                .map_while(Result::ok)
                .find(|v| v.is_transactional() && !v.is_control())
            else {
                continue;
            };
            let (pid, epoch) = (first.producer_id(), first.producer_epoch());
            let Ok(partition) = ctx.broker.hosted_partition(&name, pd.index) else {
                continue;
            };
            let open = {
                let log = partition.log();
                log.producer_state().entry(pid).map(|e| {
                    (
                        e.producer_epoch,
                        e.current_txn_first_offset >= 0 && e.producer_epoch == epoch,
                    )
                })
            };
            match open {
                Some((_, true)) => {}
                Some((current, false)) if epoch < current => {}
                _ => {
                    needed
                        .entry((pid, epoch))
                        .or_default()
                        .entry(name.clone())
                        .or_default()
                        .insert(pd.index);
                }
            }
        }
    }
    let op = Operation::for_version(ctx.api_version, 12);
    let mut out = BTreeMap::new();
    for ((pid, epoch), partitions) in needed {
        let codes = ask(ctx, &id, pid, epoch, &partitions, op).await;
        for (tp, code) in codes {
            let code = for_producer(code, ctx.api_version);
            if code != 0 {
                out.insert(tp, code);
            }
        }
    }
    out
}

/// The coordinator's code for a partition, as the producer of Produce `version` gets it.
fn for_producer(code: i16, version: i16) -> i16 {
    let c = |e: ResponseError| e.code();
    if code == c(ResponseError::TransactionAbortable) && version <= 10 {
        c(ResponseError::InvalidTxnState)
    } else if code == c(ResponseError::ProducerFenced) {
        c(ResponseError::InvalidProducerEpoch)
    } else if code == c(ResponseError::ConcurrentTransactions) && version >= 12 {
        code
    } else if [
        c(ResponseError::NetworkException),
        c(ResponseError::CoordinatorLoadInProgress),
        c(ResponseError::CoordinatorNotAvailable),
        c(ResponseError::NotCoordinator),
        c(ResponseError::ConcurrentTransactions),
        c(ResponseError::RequestTimedOut),
    ]
    .contains(&code)
    {
        c(ResponseError::NotEnoughReplicas)
    } else {
        code
    }
}

/// Each partition's code from the coordinator of `id` (before the producer's mapping). An
/// add that meets CONCURRENT_TRANSACTIONS is retried for a moment first.
pub(crate) async fn ask(
    ctx: &RequestContext,
    id: &str,
    pid: i64,
    epoch: i16,
    partitions: &TopicPartitions,
    op: Operation,
) -> BTreeMap<(String, i32), i16> {
    let concurrent = ResponseError::ConcurrentTransactions.code();
    let deadline = tokio::time::Instant::now() + CONCURRENT_RETRY_FOR;
    loop {
        let codes = ask_once(ctx, id, pid, epoch, partitions, op).await;
        let retry = op == Operation::Add
            && codes.values().any(|c| *c == concurrent)
            && tokio::time::Instant::now() + CONCURRENT_RETRY_EVERY <= deadline;
        if !retry {
            return codes;
        }
        tokio::time::sleep(CONCURRENT_RETRY_EVERY).await;
    }
}

async fn ask_once(
    ctx: &RequestContext,
    id: &str,
    pid: i64,
    epoch: i16,
    partitions: &TopicPartitions,
    op: Operation,
) -> BTreeMap<(String, i32), i16> {
    let every = |code: i16| -> BTreeMap<(String, i32), i16> {
        partitions
            .iter()
            .flat_map(|(t, ids)| ids.iter().map(move |p| ((t.clone(), *p), code)))
            .collect()
    };
    match placement::txn_coordinator(&ctx.broker, id) {
        Placement::Local => {
            let txns = &ctx.broker.txns;
            let outcome = match op {
                Operation::Verify => txns.verify(id, pid, epoch, partitions),
                Operation::Add => txns
                    .add_partitions(id, pid, epoch, partitions, true, crate::now_ms())
                    .await
                    .map(|()| every(0)),
            };
            outcome.unwrap_or_else(|e| every(txn_error_code(&e)))
        }
        Placement::Remote(node) => match remote(ctx, node, id, pid, epoch, partitions, op).await {
            Some(codes) => {
                let mut all = every(ResponseError::NetworkException.code());
                all.extend(codes);
                all
            }
            None => every(ResponseError::NetworkException.code()),
        },
        Placement::NotAvailable => every(ResponseError::CoordinatorNotAvailable.code()),
    }
}

/// AddPartitionsToTxn v5 to `node` (`verify_only` for [`Operation::Verify`]), as Kafka's
/// `AddPartitionsToTxnManager` sends it: each partition's code, `None` when the exchange
/// failed.
async fn remote(
    ctx: &RequestContext,
    node: i32,
    id: &str,
    pid: i64,
    epoch: i16,
    partitions: &TopicPartitions,
    op: Operation,
) -> Option<BTreeMap<(String, i32), i16>> {
    let broker = &ctx.broker;
    let (host, port) = crate::broker::inter_broker_endpoint(broker, &broker.image(), node)?;
    let topics = partitions
        .iter()
        .map(|(t, ids)| {
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(t.clone().into()))
                .with_partitions(ids.iter().copied().collect())
        })
        .collect();
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(id.to_owned().into()))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(op == Operation::Verify)
            .with_topics(topics),
    ]);
    let mut client = PeerClient::new(
        format!("strata-txn-verify-{}", broker.config.node_id),
        MAX_RESPONSE_BYTES,
    )
    .with_decoding(Decoding::Client)
    .secured(broker.peers.inter_broker.clone());
    let body = RequestKind::AddPartitionsToTxn(request);
    let exchange = async {
        client.connect((host.as_str(), port)).await?;
        client.request(ApiKey::AddPartitionsToTxn, 5, &body).await
    };
    match peer_client::within(EXCHANGE_TIMEOUT, exchange).await {
        Ok(ResponseKind::AddPartitionsToTxn(r)) => {
            if r.error_code != 0 {
                // Kafka: CLUSTER_AUTHORIZATION_FAILED is INVALID_TXN_STATE for every
                // partition; any other top-level code goes to every partition.
                let code = if r.error_code == ResponseError::ClusterAuthorizationFailed.code() {
                    ResponseError::InvalidTxnState.code()
                } else {
                    r.error_code
                };
                return Some(
                    partitions
                        .iter()
                        .flat_map(|(t, ids)| ids.iter().map(move |p| ((t.clone(), *p), code)))
                        .collect(),
                );
            }
            Some(
                r.results_by_transaction
                    .into_iter()
                    .flat_map(|t| t.topic_results)
                    .flat_map(|t| {
                        let name = t.name.0.to_string();
                        t.results_by_partition.into_iter().map(move |p| {
                            ((name.clone(), p.partition_index), p.partition_error_code)
                        })
                    })
                    .collect(),
            )
        }
        Ok(other) => {
            tracing::warn!(node, answer = ?other, "unexpected answer to AddPartitionsToTxn");
            None
        }
        Err(e) => {
            tracing::debug!(node, error = %e, "transaction verification not answered");
            None
        }
    }
}
