//! WriteTxnMarkers (key 27, v1): a transaction coordinator has the leader of each partition
//! of a decided transaction append its COMMIT or ABORT marker (Kafka's
//! `KafkaApis.handleWriteTxnMarkersRequest`).
//!
//! - CLUSTER_ACTION on the cluster is required (brokers hold it); without it every partition
//!   gets CLUSTER_AUTHORIZATION_FAILED.
//! - Each marker is appended as a control batch by the partition's leader in its current
//!   epoch ([`crate::partition::Partition::append_marker_as_leader`]), internal topics
//!   included, and answered once committed (acks=all, bounded by Kafka's 30 s
//!   `request.timeout.ms`): NOT_LEADER_OR_FOLLOWER off the leader,
//!   UNKNOWN_TOPIC_OR_PARTITION for a partition not hosted here, INVALID_PRODUCER_EPOCH for
//!   an epoch older than the producer's, TRANSACTION_COORDINATOR_FENCED for a coordinator
//!   epoch older than the last marker's.

use std::sync::Arc;
use std::time::Duration;

use strata_kraft::acl::AclOperation;
use strata_protocol::ResponseError;
use strata_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use strata_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use strata_storage::TxnMarker;

use super::RequestContext;
use crate::broker::Broker;
use crate::server::error::{
    ack_error_code, flush_error_code, leader_append_error_code, partition_unavailable_code,
};

/// How long a marker waits to be committed: Kafka's `request.timeout.ms` default, which its
/// marker appends are bounded by.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Appends every marker and answers each partition.
pub async fn handle(ctx: &RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let authorized = ctx.authorize_cluster(AclOperation::ClusterAction);
    let mut markers = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = TxnMarker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            coordinator_epoch: m.coordinator_epoch,
            commit: m.transaction_result,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let mut partitions = Vec::with_capacity(t.partition_indexes.len());
            for index in t.partition_indexes {
                let code = if authorized {
                    append(&ctx.broker, &t.name, index, &marker).await
                } else {
                    ResponseError::ClusterAuthorizationFailed.code()
                };
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// Appends `marker` to partition `index` of `topic` as its leader and waits until it is
/// committed: the partition's error code (0 when committed).
pub(crate) async fn append(
    broker: &Arc<Broker>,
    topic: &str,
    index: i32,
    marker: &TxnMarker,
) -> i16 {
    let partition = match broker.hosted_partition(topic, index) {
        Ok(p) => p,
        Err(e) => return partition_unavailable_code(e),
    };
    let Some(epoch) = partition.replicated_leader_epoch() else {
        return ResponseError::NotLeaderOrFollower.code();
    };
    let (info, flush) = match partition.append_marker_as_leader(marker, epoch, crate::now_ms()) {
        Ok(appended) => appended,
        Err(e) => return leader_append_error_code(&e),
    };
    // The group coordinator applies a transaction's offsets on its marker
    // (`onTransactionCompleted`).
    if topic == crate::coordinator::offsets::OFFSETS_TOPIC {
        broker.offsets.complete_transaction(
            index,
            marker.producer_id,
            marker.commit,
            info.last_offset,
        );
    }
    if let Some(flush) = flush
        && let Err(e) = flush.wait().await
    {
        return flush_error_code(&e);
    }
    let deadline = tokio::time::Instant::now() + COMMIT_TIMEOUT;
    match partition
        .wait_committed(epoch, info.last_offset + 1, deadline)
        .await
    {
        Ok(()) => 0,
        Err(e) => ack_error_code(&e),
    }
}
