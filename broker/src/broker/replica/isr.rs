//! The leader side of AlterPartition (KIP-497): every half second, on a node of a
//! cluster, the ISR changes this node's replicated leaders want (a shrink of followers that
//! fell behind for `replica.lag.time.max.ms`, an expansion a caught-up follower's fetch
//! proposed) go to the active controller in one request, and each partition's answer goes
//! back to its leader state.
//!
//! - **Transport.** In process ([`Broker::controller_alter_partition`]) when this node leads
//!   the quorum, else AlterPartition v3 (KIP-903: the new ISR with each member's broker
//!   epoch) over the controller listener, with this broker's id and registration epoch.
//! - **Answers.** [`outcome`] maps each partition's answer to an [`AlterPartitionOutcome`]
//!   as Kafka's `Partition.handleAlterPartitionError` does: committed; OPERATION_NOT_ATTEMPTED
//!   and INELIGIBLE_REPLICA go back to the committed ISR; everything else keeps the proposal
//!   pending, so a later round sends it again (Kafka's `AlterPartitionManager` retries)
//!   until an answer or newer metadata settles it. A failed exchange keeps it pending too.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use strata_kraft::AlterPartitionError;
use strata_kraft::cluster_control::{self as cc, AlterPartitionResult};
use strata_kraft::raft::RoleKind;
use strata_kraft::record::LeaderRecoveryState;
use strata_protocol::ResponseError;
use strata_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use strata_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, ApiKey, RequestKind, ResponseKind,
};
use strata_replication::leader::{AlterPartitionOutcome, AlterPartitionProposal};
use uuid::Uuid;

use crate::broker::Broker;
use crate::broker::lifecycle::{ControllerClient, Failure};
use crate::partition::Partition;

/// How often the leaders' proposals are collected and sent.
const ROUND: Duration = Duration::from_millis(500);
/// AlterPartition version sent: v3 carries the ISR members' broker epochs (KIP-903).
const ALTER_PARTITION_VERSION: i16 = 3;

/// One partition's answer: its committed (leader epoch, partition epoch, ISR), or why the
/// controller refused the change.
type Answer = Result<(i32, i32, Vec<i32>), Refusal>;

/// Why the controller refused one partition's change: its own error when this node is the
/// active controller, the error code of the wire answer otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    Local(AlterPartitionError),
    Remote(i16),
}

/// What one partition's answer means to its leader (Kafka's
/// `Partition.handleAlterPartitionError`).
#[must_use]
fn outcome(answer: &Answer) -> AlterPartitionOutcome {
    match answer {
        Ok((leader_epoch, partition_epoch, isr)) => AlterPartitionOutcome::Committed {
            leader_epoch: *leader_epoch,
            partition_epoch: *partition_epoch,
            isr: isr.clone(),
        },
        Err(Refusal::Local(AlterPartitionError::IneligibleReplica(_))) => {
            AlterPartitionOutcome::NotAttempted
        }
        Err(Refusal::Remote(code))
            if *code == ResponseError::OperationNotAttempted.code()
                || *code == ResponseError::IneligibleReplica.code() =>
        {
            AlterPartitionOutcome::NotAttempted
        }
        // FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, NEW_LEADER_ELECTED, unknown topic or
        // partition: our metadata is stale. NOT_CONTROLLER, INVALID_REQUEST and anything
        // else: Kafka retries. Both keep the proposal pending.
        Err(_) => AlterPartitionOutcome::AwaitMetadata,
    }
}

/// Runs the rounds for as long as the node runs (started by `lifecycle::start`).
pub async fn run(broker: Arc<Broker>) {
    let mut client = ControllerClient::default();
    loop {
        tokio::time::sleep(ROUND).await;
        round(&broker, &mut client).await;
    }
}

/// One round: collects every leader's proposal, sends them as one request, hands out the
/// answers. Every partition that gave a proposal gets an outcome, so none stays in flight.
async fn round(broker: &Arc<Broker>, client: &mut ControllerClient) {
    let now = crate::now_ms();
    let proposals: Vec<(Arc<Partition>, AlterPartitionProposal)> = broker
        .all_partitions()
        .into_iter()
        .filter_map(|p| {
            let proposal = p.isr_proposal(now)?;
            Some((p, proposal))
        })
        .collect();
    if proposals.is_empty() {
        return;
    }
    let answers = match send(broker, client, &proposals).await {
        Ok(answers) => answers,
        Err(why) => {
            tracing::debug!(why, "AlterPartition failed; sending again next round");
            HashMap::new()
        }
    };
    for (partition, proposal) in &proposals {
        let outcome = answers
            .get(&(partition.topic_id, partition.index))
            .map_or(AlterPartitionOutcome::AwaitMetadata, outcome);
        if let AlterPartitionOutcome::Committed { isr, .. } = &outcome {
            tracing::info!(topic = %partition.topic, partition = partition.index,
                ?isr, "ISR change committed");
        } else {
            tracing::debug!(topic = %partition.topic, partition = partition.index,
                proposed = ?proposal.isr_ids(), ?outcome, "ISR change not committed");
        }
        partition.on_alter_partition(&outcome);
    }
}

/// Sends the proposals to the active controller; the answers by (topic id, partition).
async fn send(
    broker: &Arc<Broker>,
    client: &mut ControllerClient,
    proposals: &[(Arc<Partition>, AlterPartitionProposal)],
) -> Result<HashMap<(Uuid, i32), Answer>, String> {
    let broker_epoch = broker.broker_epoch();
    if broker_epoch < 0 {
        return Err("this broker is not registered".into());
    }
    let node_id = broker.config.node_id;
    let leader = crate::broker::lifecycle::current_leader(broker).map_err(reason)?;
    let leads = leader == node_id
        && broker
            .quorum()
            .is_some_and(|q| q.status().role == RoleKind::Leader);
    if leads {
        let req = controller_request(node_id, broker_epoch, proposals);
        let results = broker
            .controller_alter_partition(&req)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(from_results(results));
    }
    let body = RequestKind::AlterPartition(wire_request(node_id, broker_epoch, proposals));
    let answer = client
        .exchange(
            broker,
            leader,
            ApiKey::AlterPartition,
            ALTER_PARTITION_VERSION,
            &body,
        )
        .await
        .map_err(reason)?;
    let ResponseKind::AlterPartition(r) = answer else {
        return Err("unexpected response".into());
    };
    from_response(&r)
}

fn reason(f: Failure) -> String {
    match f {
        Failure::Retry(why) | Failure::Reregister(why) => why,
    }
}

/// The proposals grouped by topic, in the order first seen.
fn by_topic(
    proposals: &[(Arc<Partition>, AlterPartitionProposal)],
) -> Vec<(Uuid, Vec<(i32, &AlterPartitionProposal)>)> {
    let mut topics: Vec<(Uuid, Vec<(i32, &AlterPartitionProposal)>)> = Vec::new();
    for (p, proposal) in proposals {
        match topics.iter_mut().find(|(id, _)| *id == p.topic_id) {
            Some((_, parts)) => parts.push((p.index, proposal)),
            None => topics.push((p.topic_id, vec![(p.index, proposal)])),
        }
    }
    topics
}

fn controller_request(
    broker_id: i32,
    broker_epoch: i64,
    proposals: &[(Arc<Partition>, AlterPartitionProposal)],
) -> cc::AlterPartitionRequest {
    cc::AlterPartitionRequest {
        broker_id,
        broker_epoch,
        topics: by_topic(proposals)
            .into_iter()
            .map(|(topic_id, parts)| cc::AlterPartitionTopic {
                topic_id,
                partitions: parts
                    .into_iter()
                    .map(|(index, p)| cc::AlterPartitionData {
                        partition_index: index,
                        leader_epoch: p.leader_epoch,
                        new_isr: p
                            .new_isr
                            .iter()
                            .map(|m| cc::IsrMember {
                                broker_id: m.broker_id,
                                broker_epoch: m.broker_epoch,
                            })
                            .collect(),
                        leader_recovery_state: LeaderRecoveryState::Recovered,
                        partition_epoch: p.partition_epoch,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn wire_request(
    broker_id: i32,
    broker_epoch: i64,
    proposals: &[(Arc<Partition>, AlterPartitionProposal)],
) -> AlterPartitionRequest {
    let topics = by_topic(proposals)
        .into_iter()
        .map(|(topic_id, parts)| {
            TopicData::default()
                .with_topic_id(topic_id)
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(index, p)| {
                            PartitionData::default()
                                .with_partition_index(index)
                                .with_leader_epoch(p.leader_epoch)
                                .with_new_isr_with_epochs(
                                    p.new_isr
                                        .iter()
                                        .map(|m| {
                                            BrokerState::default()
                                                .with_broker_id(m.broker_id.into())
                                                .with_broker_epoch(m.broker_epoch)
                                        })
                                        .collect(),
                                )
                                .with_leader_recovery_state(LeaderRecoveryState::Recovered.value())
                                .with_partition_epoch(p.partition_epoch)
                        })
                        .collect(),
                )
        })
        .collect();
    AlterPartitionRequest::default()
        .with_broker_id(broker_id.into())
        .with_broker_epoch(broker_epoch)
        .with_topics(topics)
}

fn from_results(results: Vec<AlterPartitionResult>) -> HashMap<(Uuid, i32), Answer> {
    results
        .into_iter()
        .map(|r| {
            let answer = match r.result {
                Ok(s) => Ok((s.leader_epoch, s.partition_epoch, s.isr)),
                Err(e) => Err(Refusal::Local(e)),
            };
            ((r.topic_id, r.partition_index), answer)
        })
        .collect()
}

/// The wire response's answers; a top-level error fails the whole exchange.
fn from_response(r: &AlterPartitionResponse) -> Result<HashMap<(Uuid, i32), Answer>, String> {
    if r.error_code != 0 {
        return Err(format!("AlterPartition error {}", r.error_code));
    }
    let mut answers = HashMap::new();
    for t in &r.topics {
        for p in &t.partitions {
            let answer = if p.error_code == 0 {
                Ok((
                    p.leader_epoch,
                    p.partition_epoch,
                    p.isr.iter().map(|b| b.0).collect(),
                ))
            } else {
                Err(Refusal::Remote(p.error_code))
            };
            answers.insert((t.topic_id, p.partition_index), answer);
        }
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use strata_kraft::InvalidAlterPartition;
    use strata_protocol::messages::alter_partition_response;

    use super::*;

    #[test]
    fn committed_answers_carry_the_new_state() {
        assert_eq!(
            outcome(&Ok((4, 7, vec![1, 2]))),
            AlterPartitionOutcome::Committed {
                leader_epoch: 4,
                partition_epoch: 7,
                isr: vec![1, 2],
            }
        );
    }

    #[test]
    fn not_attempted_and_ineligible_replica_go_back_to_the_committed_isr() {
        for code in [
            ResponseError::OperationNotAttempted.code(),
            ResponseError::IneligibleReplica.code(),
        ] {
            assert_eq!(
                outcome(&Err(Refusal::Remote(code))),
                AlterPartitionOutcome::NotAttempted
            );
        }
    }

    #[test]
    fn stale_state_and_other_errors_keep_the_proposal_pending() {
        for code in [
            ResponseError::FencedLeaderEpoch.code(),
            ResponseError::InvalidUpdateVersion.code(),
            ResponseError::NewLeaderElected.code(),
            ResponseError::UnknownTopicOrPartition.code(),
            ResponseError::UnknownTopicId.code(),
            ResponseError::NotController.code(),
            ResponseError::InvalidRequest.code(),
            ResponseError::UnknownServerError.code(),
        ] {
            assert_eq!(
                outcome(&Err(Refusal::Remote(code))),
                AlterPartitionOutcome::AwaitMetadata
            );
        }
    }

    #[test]
    fn the_controllers_own_refusals_mean_what_their_codes_mean() {
        assert_eq!(
            outcome(&Err(Refusal::Local(
                AlterPartitionError::IneligibleReplica(3)
            ))),
            AlterPartitionOutcome::NotAttempted
        );
        for e in [
            AlterPartitionError::UnknownTopicId,
            AlterPartitionError::UnknownTopicOrPartition,
            AlterPartitionError::NotController,
            AlterPartitionError::FencedLeaderEpoch,
            AlterPartitionError::InvalidUpdateVersion,
            AlterPartitionError::InvalidRequest(InvalidAlterPartition::NotLeader),
            AlterPartitionError::NewLeaderElected,
        ] {
            assert_eq!(
                outcome(&Err(Refusal::Local(e))),
                AlterPartitionOutcome::AwaitMetadata,
                "{e:?}"
            );
        }
    }

    #[test]
    fn a_top_level_error_fails_the_exchange() {
        let r =
            AlterPartitionResponse::default().with_error_code(ResponseError::NotController.code());
        assert!(from_response(&r).is_err());
    }

    #[test]
    fn wire_answers_are_keyed_by_topic_id_and_partition() {
        let id = Uuid::from_u128(7);
        let r = AlterPartitionResponse::default().with_topics(vec![
            alter_partition_response::TopicData::default()
                .with_topic_id(id)
                .with_partitions(vec![
                    alter_partition_response::PartitionData::default()
                        .with_partition_index(0)
                        .with_leader_epoch(2)
                        .with_partition_epoch(5)
                        .with_isr(vec![1.into(), 3.into()]),
                    alter_partition_response::PartitionData::default()
                        .with_partition_index(1)
                        .with_error_code(ResponseError::FencedLeaderEpoch.code()),
                ]),
        ]);
        let answers = from_response(&r).expect("no top-level error");
        assert_eq!(answers[&(id, 0)], Ok((2, 5, vec![1, 3])));
        assert_eq!(
            answers[&(id, 1)],
            Err(Refusal::Remote(ResponseError::FencedLeaderEpoch.code()))
        );
    }
}
