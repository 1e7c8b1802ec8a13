//! AlterPartitionReassignments (key 45, v0-1, KIP-455): sets the target replicas of
//! partitions, or with null `replicas` cancels a pending move, on the controller (see
//! `Broker::alter_partition_reassignments`). v1 carries KIP-860's
//! `allow_replication_factor_change` (v0 always allows it) and echoes it back.
//!
//! Per-partition outcomes use Kafka's codes and messages: UNKNOWN_TOPIC_OR_PARTITION,
//! INVALID_REPLICA_ASSIGNMENT (an empty list, a broker named twice or not registered, a
//! cancellation that would need an unclean election), INVALID_REPLICATION_FACTOR,
//! NO_REASSIGNMENT_IN_PROGRESS. A failure of the whole request (not the controller, a
//! timeout) is Kafka's `AlterPartitionReassignmentsRequest.getErrorResponse`: the
//! top-level error and the same code and message for every partition named.

use strata_kraft::cluster_control::{ReassignmentResult, ReassignmentTarget};
use strata_protocol::StrBytes;
use strata_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use strata_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, TopicName,
};

use super::RequestContext;
use crate::server::error::{metadata_error_code, reassignment_error_code};

/// Runs the reassignments the request asks for.
#[must_use]
pub async fn handle(
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let targets: Vec<ReassignmentTarget> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| ReassignmentTarget {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                replicas: p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect()),
            })
        })
        .collect();
    // v0 has no flag; the field's default (true) stands for it.
    let allow = req.allow_replication_factor_change;
    let response =
        AlterPartitionReassignmentsResponse::default().with_allow_replication_factor_change(allow);
    // Kafka: ALTER on the cluster; refused, the error is on the response and every partition.
    if !ctx.authorize_cluster(strata_kraft::acl::AclOperation::Alter) {
        return refused(
            response,
            targets,
            strata_protocol::ResponseError::ClusterAuthorizationFailed.code(),
            "Cluster authorization failed.".to_owned(),
        );
    }
    match ctx
        .broker
        .alter_partition_reassignments(allow, &targets)
        .await
    {
        Ok(results) => response.with_responses(by_topic(results, |r| {
            r.error.as_ref().map_or((0, None), |e| {
                (reassignment_error_code(e), Some(e.to_string()))
            })
        })),
        Err(e) => refused(response, targets, metadata_error_code(&e), e.to_string()),
    }
}

/// The whole request refused: `code` and `message` on the response and on every partition
/// it named, as Kafka's error response has them.
fn refused(
    response: AlterPartitionReassignmentsResponse,
    targets: Vec<ReassignmentTarget>,
    code: i16,
    message: String,
) -> AlterPartitionReassignmentsResponse {
    let named = targets.into_iter().map(|t| ReassignmentResult {
        topic: t.topic,
        partition: t.partition,
        error: None,
    });
    response
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message.clone())))
        .with_responses(by_topic(named.collect(), |_| (code, Some(message.clone()))))
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::AlterPartitionReassignments(handle(&ctx, req).await)
}

/// Groups consecutive results of one topic, as the request listed them.
fn by_topic(
    results: Vec<ReassignmentResult>,
    outcome: impl Fn(&ReassignmentResult) -> (i16, Option<String>),
) -> Vec<ReassignableTopicResponse> {
    let mut out: Vec<ReassignableTopicResponse> = Vec::new();
    for r in results {
        let (code, message) = outcome(&r);
        let partition = ReassignablePartitionResponse::default()
            .with_partition_index(r.partition)
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string));
        match out.last_mut() {
            Some(last) if last.name.0.as_str() == r.topic => last.partitions.push(partition),
            _ => out.push(
                ReassignableTopicResponse::default()
                    .with_name(TopicName(StrBytes::from_string(r.topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_kraft::{InvalidReassignment, ReassignmentError};

    fn result(topic: &str, partition: i32, error: Option<ReassignmentError>) -> ReassignmentResult {
        ReassignmentResult {
            topic: topic.to_owned(),
            partition,
            error,
        }
    }

    #[test]
    fn results_keep_the_request_order_by_topic() {
        let out = by_topic(
            vec![
                result("a", 0, None),
                result(
                    "a",
                    1,
                    Some(ReassignmentError::InvalidReplicaAssignment(
                        InvalidReassignment::UnregisteredBroker(7),
                    )),
                ),
                result("b", 0, Some(ReassignmentError::NoReassignmentInProgress)),
            ],
            |r| {
                r.error.as_ref().map_or((0, None), |e| {
                    (reassignment_error_code(e), Some(e.to_string()))
                })
            },
        );
        let shape: Vec<(String, Vec<(i32, i16)>)> = out
            .iter()
            .map(|t| {
                (
                    t.name.0.to_string(),
                    t.partitions
                        .iter()
                        .map(|p| (p.partition_index, p.error_code))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                ("a".into(), vec![(0, 0), (1, 39)]),
                ("b".into(), vec![(0, 85)]),
            ]
        );
        assert_eq!(out[0].partitions[0].error_message, None);
        assert_eq!(
            out[0].partitions[1].error_message.as_deref(),
            Some(
                "The manual partition assignment includes broker 7, but no such broker is registered."
            )
        );
    }

    #[test]
    fn reassignment_codes_are_kafkas() {
        let code = |e: ReassignmentError| reassignment_error_code(&e);
        assert_eq!(code(ReassignmentError::UnknownTopic("t".into())), 3);
        assert_eq!(
            code(ReassignmentError::InvalidReplicaAssignment(
                InvalidReassignment::Empty
            )),
            39
        );
        assert_eq!(
            code(ReassignmentError::ReplicationFactorChanged { from: 2, to: 3 }),
            38
        );
        assert_eq!(code(ReassignmentError::NoReassignmentInProgress), 85);
    }
}
