//! ListPartitionReassignments (key 46, v0, KIP-455): the partitions being moved, with their
//! replicas and the ones being added and removed, from the active controller's image (see
//! `Broker::list_partition_reassignments`). A null `topics` lists every pending move;
//! otherwise unknown topics and partitions not being moved are left out, as Kafka's
//! `ReplicationControlManager.listPartitionReassignments` answers. A failure of the whole
//! request (not the controller, a timeout) is the top-level error with no topics
//! (`ListPartitionReassignmentsRequest.getErrorResponse`).

use strata_protocol::StrBytes;
use strata_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use strata_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};

use super::RequestContext;
use crate::server::error::metadata_error_code;

/// Lists the pending reassignments the request asks about.
#[must_use]
pub async fn handle(
    ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    // Kafka: DESCRIBE on the cluster.
    if !ctx.authorize_cluster(strata_kraft::acl::AclOperation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(strata_protocol::ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
    }
    let named: Option<Vec<(String, Vec<i32>)>> = req.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    match ctx
        .broker
        .list_partition_reassignments(named.as_deref())
        .await
    {
        Ok(topics) => ListPartitionReassignmentsResponse::default().with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    OngoingTopicReassignment::default()
                        .with_name(TopicName(StrBytes::from_string(name)))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|p| {
                                    OngoingPartitionReassignment::default()
                                        .with_partition_index(p.partition)
                                        .with_replicas(ids(&p.replicas))
                                        .with_adding_replicas(ids(&p.adding))
                                        .with_removing_replicas(ids(&p.removing))
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
        Err(e) => ListPartitionReassignmentsResponse::default()
            .with_error_code(metadata_error_code(&e))
            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
    }
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::ListPartitionReassignments(handle(&ctx, req).await)
}
