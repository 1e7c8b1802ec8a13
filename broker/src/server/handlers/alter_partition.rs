//! AlterPartition (key 56, controller listener; KIP-497): a leader's ISR change, committed by
//! the active controller.

use strata_protocol::ResponseError;
use strata_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, alter_partition_request,
    alter_partition_response,
};

use crate::broker::Broker;
use crate::server::error::controller_error_code;

/// The controller listener's answer to AlterPartition (KIP-497; v2 and v3, topics by id):
/// the changes go through [`Broker::controller_alter_partition`] and each partition is
/// answered with its committed state or its own error; a failure of the request as a whole
/// (NOT_CONTROLLER off the active controller, STALE_BROKER_EPOCH) is the top-level error.
/// v2 carries the new ISR as broker ids; v3 with each member's broker epoch (KIP-903).
#[must_use]
pub async fn handle(
    broker: &Broker,
    version: i16,
    req: &AlterPartitionRequest,
) -> AlterPartitionResponse {
    use strata_kraft::cluster_control::{self as cc, IsrMember};
    use strata_kraft::record::LeaderRecoveryState;
    // An unknown recovery state is this partition's INVALID_REQUEST; the rest go on.
    let recovery = |p: &alter_partition_request::PartitionData| {
        LeaderRecoveryState::from_value(p.leader_recovery_state)
    };
    let request = cc::AlterPartitionRequest {
        broker_id: req.broker_id.0,
        broker_epoch: req.broker_epoch,
        topics: req
            .topics
            .iter()
            .map(|t| cc::AlterPartitionTopic {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .filter_map(|p| {
                        let new_isr = if version >= 3 {
                            p.new_isr_with_epochs
                                .iter()
                                .map(|m| IsrMember {
                                    broker_id: m.broker_id.0,
                                    broker_epoch: m.broker_epoch,
                                })
                                .collect()
                        } else {
                            p.new_isr
                                .iter()
                                .map(|b| IsrMember {
                                    broker_id: b.0,
                                    broker_epoch: -1,
                                })
                                .collect()
                        };
                        Some(cc::AlterPartitionData {
                            partition_index: p.partition_index,
                            leader_epoch: p.leader_epoch,
                            new_isr,
                            leader_recovery_state: recovery(p)?,
                            partition_epoch: p.partition_epoch,
                        })
                    })
                    .collect(),
            })
            .collect(),
    };
    let results = match broker.controller_alter_partition(&request).await {
        Ok(results) => results,
        Err(e) => {
            return AlterPartitionResponse::default().with_error_code(controller_error_code(&e));
        }
    };
    // The controller answers the entries in request order.
    let mut results = results.into_iter();
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = alter_partition_response::PartitionData::default()
                        .with_partition_index(p.partition_index);
                    if recovery(p).is_none() {
                        return answer.with_error_code(ResponseError::InvalidRequest.code());
                    }
                    match results.next().map(|r| r.result) {
                        Some(Ok(state)) => answer
                            .with_leader_id(state.leader.into())
                            .with_leader_epoch(state.leader_epoch)
                            .with_isr(state.isr.into_iter().map(Into::into).collect())
                            .with_leader_recovery_state(state.leader_recovery_state.value())
                            .with_partition_epoch(state.partition_epoch),
                        Some(Err(e)) => answer
                            .with_error_code(crate::server::error::alter_partition_error_code(&e)),
                        None => answer.with_error_code(ResponseError::UnknownServerError.code()),
                    }
                })
                .collect();
            alter_partition_response::TopicData::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionResponse::default().with_topics(topics)
}
