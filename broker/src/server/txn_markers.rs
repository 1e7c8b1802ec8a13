//! The transaction coordinator's marker sender (Kafka's `TransactionMarkerChannelManager`):
//! once a transaction is decided, its COMMIT or ABORT marker is written to every partition
//! of the transaction by that partition's leader, and then the coordinator writes the
//! transaction's CompleteCommit or CompleteAbort
//! ([`crate::coordinator::txn::store::TxnStore::complete_markers`]).
//!
//! The store hands each decided transaction over as a [`MarkerJob`] (after an EndTxn, a
//! fencing InitProducerId, a timeout, or a load that found it decided). A job writes the
//! markers of the partitions led here directly (as the WriteTxnMarkers handler does) and
//! sends one WriteTxnMarkers v1 to each other leader, on its inter-broker listener. It
//! retries, following leader changes, until every marker is written, as Kafka's
//! `TransactionMarkerRequestCompletionHandler` does:
//!
//! - retried: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION while the topic exists,
//!   NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, any
//!   failure to reach the leader, and any other code (logged);
//! - a partition whose topic is gone is dropped (Kafka skips deleted topics);
//! - INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED end the job: a newer producer
//!   epoch or a newer coordinator owns the transaction now, and completes it.
//!
//! The job also ends, silently, when this node stops leading the transaction's
//! `__transaction_state` partition in the epoch it was decided in: the next leader loads
//! the decided transaction and sends its markers again (a repeated marker is harmless).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use strata_protocol::ResponseError;
use strata_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use strata_protocol::messages::{
    ApiKey, ProducerId, RequestKind, ResponseKind, TopicName, WriteTxnMarkersRequest,
};
use strata_storage::TxnMarker;

use crate::broker::Broker;
use crate::coordinator::txn::store::MarkerJob;
use crate::peer_client::{self, Decoding, PeerClient};
use crate::server::handlers::write_txn_markers;
use crate::server::placement::{self, Placement};

/// The first wait between two rounds of a job, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// One WriteTxnMarkers exchange: Kafka's `request.timeout.ms` default, plus the connect.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(35);
/// The largest WriteTxnMarkers answer read.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Takes the store's marker jobs and runs each on a task of its own, for as long as the
/// node runs. Does nothing when another sender took them.
pub async fn run(broker: Arc<Broker>) {
    let Some(mut jobs) = broker.txns.take_marker_jobs() else {
        return;
    };
    while let Some(job) = jobs.recv().await {
        tokio::spawn(send(broker.clone(), job));
    }
}

/// Writes every marker of `job`, then completes the transaction.
async fn send(broker: Arc<Broker>, job: MarkerJob) {
    let marker = TxnMarker {
        producer_id: job.producer_id,
        producer_epoch: job.producer_epoch,
        coordinator_epoch: job.coordinator_epoch,
        commit: job.commit,
    };
    let mut remaining: BTreeSet<(String, i32)> = job
        .partitions
        .iter()
        .flat_map(|(t, ids)| ids.iter().map(move |p| (t.clone(), *p)))
        .collect();
    let mut backoff = FIRST_BACKOFF;
    let mut rounds = 0u64;
    loop {
        if !broker.txns.still_coordinates(&job) {
            tracing::debug!(transactional_id = %job.transactional_id,
                "no longer the coordinator of a decided transaction; its next one resumes it");
            return;
        }
        if !remaining.is_empty() {
            match round(&broker, &marker, &remaining).await {
                Ok(written) => remaining.retain(|tp| !written.contains(tp)),
                Err(code) => {
                    tracing::info!(transactional_id = %job.transactional_id, code,
                        "markers refused: a newer producer epoch or coordinator owns the transaction");
                    return;
                }
            }
        }
        if remaining.is_empty() {
            match broker.txns.complete_markers(&job, crate::now_ms()).await {
                Ok(()) => return,
                Err(e) => tracing::warn!(transactional_id = %job.transactional_id, error = %e,
                    "cannot write a transaction's completion; retrying"),
            }
        }
        rounds += 1;
        if rounds.is_multiple_of(20) {
            tracing::warn!(transactional_id = %job.transactional_id, rounds,
                pending = remaining.len(), "transaction markers still unwritten");
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One attempt at every remaining partition: the partitions written (or whose topic is
/// gone).
///
/// # Errors
/// INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED from any partition.
async fn round(
    broker: &Arc<Broker>,
    marker: &TxnMarker,
    remaining: &BTreeSet<(String, i32)>,
) -> Result<BTreeSet<(String, i32)>, i16> {
    // The newest committed image, not the applied one: a coordinator loaded while its node
    // applies an image (at a restart, the first after replaying the log) would otherwise
    // look up the transaction's partitions in the image before it, find their topic
    // missing, take it for deleted, and skip the marker, leaving an acknowledged commit
    // open in that partition until a later epoch aborted it (found by the verification
    // harness, seed 722647549).
    let image = broker.committed_image();
    let me = broker.config.node_id;
    let mut done = BTreeSet::new();
    let mut local = Vec::new();
    let mut remote: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for (topic, p) in remaining {
        let Some(t) = image.topics.get(topic.as_str()) else {
            tracing::info!(topic, partition = p, "no marker for a deleted topic");
            done.insert((topic.clone(), *p));
            continue;
        };
        if !t.partitions.iter().any(|x| x.partition == *p) {
            done.insert((topic.clone(), *p));
            continue;
        }
        match placement::leader_of(&image, topic, *p, me) {
            Placement::Local => local.push((topic.clone(), *p)),
            Placement::Remote(node) => remote.entry(node).or_default().push((topic.clone(), *p)),
            Placement::NotAvailable => {}
        }
    }
    let mut codes: Vec<((String, i32), i16)> = Vec::new();
    for (topic, p) in local {
        let code = write_txn_markers::append(broker, &topic, p, marker).await;
        codes.push(((topic, p), code));
    }
    let sends = remote.into_iter().map(|(node, partitions)| {
        let broker = broker.clone();
        async move { send_to(&broker, node, marker, partitions).await }
    });
    for answered in futures_util::future::join_all(sends).await {
        codes.extend(answered);
    }
    for (tp, code) in codes {
        if code == 0 {
            done.insert(tp);
        } else if code == ResponseError::InvalidProducerEpoch.code()
            || code == ResponseError::TransactionCoordinatorFenced.code()
        {
            return Err(code);
        } else {
            tracing::debug!(topic = %tp.0, partition = tp.1, code, "marker not written; retrying");
        }
    }
    Ok(done)
}

/// One WriteTxnMarkers to `node` for `partitions`: each partition's code (the ones not
/// answered, or every one if the exchange failed, are left out and retried).
async fn send_to(
    broker: &Broker,
    node: i32,
    marker: &TxnMarker,
    partitions: Vec<(String, i32)>,
) -> Vec<((String, i32), i16)> {
    let Some((host, port)) = crate::broker::inter_broker_endpoint(broker, &broker.image(), node)
    else {
        return Vec::new();
    };
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(p);
    }
    let request = WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(marker.producer_id))
            .with_producer_epoch(marker.producer_epoch)
            .with_transaction_result(marker.commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(TopicName(t.into()))
                            .with_partition_indexes(ps)
                    })
                    .collect(),
            ),
    ]);
    let mut client = PeerClient::new(
        format!("strata-txn-markers-{}", broker.config.node_id),
        MAX_RESPONSE_BYTES,
    )
    .with_decoding(Decoding::Client)
    .secured(broker.peers.inter_broker.clone());
    let body = RequestKind::WriteTxnMarkers(request);
    let exchange = async {
        client.connect((host.as_str(), port)).await?;
        client.request(ApiKey::WriteTxnMarkers, 1, &body).await
    };
    match peer_client::within(EXCHANGE_TIMEOUT, exchange).await {
        Ok(ResponseKind::WriteTxnMarkers(r)) => r
            .markers
            .into_iter()
            .flat_map(|m| m.topics)
            .flat_map(|t| {
                let name = t.name.0.to_string();
                t.partitions
                    .into_iter()
                    .map(move |p| ((name.clone(), p.partition_index), p.error_code))
            })
            .collect(),
        Ok(other) => {
            tracing::warn!(node, answer = ?other, "unexpected answer to WriteTxnMarkers");
            Vec::new()
        }
        Err(e) => {
            tracing::debug!(node, error = %e, "WriteTxnMarkers not answered; retrying");
            Vec::new()
        }
    }
}
