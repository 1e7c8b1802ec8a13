//! AlterPartition (KIP-497): a partition leader asks the controller to change its ISR
//! or, after an unclean election, to mark its log recovered (KIP-704).

use uuid::Uuid;

use super::ClusterControlConfig;
use super::partition_change::{Election, PartitionChangeBuilder};
use crate::record::{LeaderRecoveryState, MetadataRecord, NO_LEADER_CHANGE};
use crate::{
    AlterPartitionError, ClusterControlError, InvalidAlterPartition, MetadataImage, PartitionImage,
};

/// An AlterPartition request (v2+: topics by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    /// The requesting leader.
    pub broker_id: i32,
    /// Its registration's epoch.
    pub broker_epoch: i64,
    /// The changes, by topic.
    pub topics: Vec<AlterPartitionTopic>,
}

/// One topic's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionTopic {
    /// The topic id.
    pub topic_id: Uuid,
    /// One entry per partition.
    pub partitions: Vec<AlterPartitionData>,
}

/// One partition's requested state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionData {
    /// The partition index.
    pub partition_index: i32,
    /// The leader epoch the leader holds.
    pub leader_epoch: i32,
    /// The proposed ISR.
    pub new_isr: Vec<IsrMember>,
    /// The leader's recovery state (KIP-704).
    pub leader_recovery_state: LeaderRecoveryState,
    /// The partition epoch the leader computed the change from.
    pub partition_epoch: i32,
}

/// A proposed ISR member (AlterPartition v3+ `NewIsrWithEpochs`, KIP-903).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsrMember {
    /// The broker.
    pub broker_id: i32,
    /// The epoch of the registration the leader saw fetching, or -1 to skip the check.
    pub broker_epoch: i64,
}

/// The partition's state after a successful entry, as the response carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The leader.
    pub leader: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The ISR.
    pub isr: Vec<i32>,
    /// The leader recovery state.
    pub leader_recovery_state: LeaderRecoveryState,
    /// The partition epoch the leader uses in its next request.
    pub partition_epoch: i32,
}

/// One entry's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionResult {
    /// The topic id.
    pub topic_id: Uuid,
    /// The partition index.
    pub partition_index: i32,
    /// The new state, or the per-partition error.
    pub result: Result<PartitionState, AlterPartitionError>,
}

/// AlterPartition (Kafka's `ReplicationControlManager.alterPartition`): one
/// `PartitionChangeRecord` per changed partition and one result per entry.
///
/// # Errors
///
/// [`ClusterControlError::BrokerNotRegistered`] or
/// [`ClusterControlError::StaleBrokerEpoch`] for the requester as a whole.
pub fn alter_partition(
    image: &MetadataImage,
    config: &ClusterControlConfig,
    req: &AlterPartitionRequest,
) -> Result<(Vec<MetadataRecord>, Vec<AlterPartitionResult>), ClusterControlError> {
    let broker = image
        .brokers
        .get(&req.broker_id)
        .ok_or(ClusterControlError::BrokerNotRegistered(req.broker_id))?;
    if broker.broker_epoch != req.broker_epoch {
        return Err(ClusterControlError::StaleBrokerEpoch {
            broker_id: req.broker_id,
            requested: req.broker_epoch,
            current: broker.broker_epoch,
        });
    }
    let mut records = Vec::new();
    let mut results = Vec::new();
    for topic_data in &req.topics {
        let topic = image.topic_by_id(topic_data.topic_id);
        for data in &topic_data.partitions {
            let result = match topic {
                None => Err(AlterPartitionError::UnknownTopicId),
                Some(topic) => {
                    let partition = usize::try_from(data.partition_index)
                        .ok()
                        .and_then(|i| topic.partitions.get(i));
                    validate(image, req.broker_id, partition, data).and_then(|partition| {
                        let acceptable = |b: i32| image.is_active(b);
                        let election = if config.unclean_enabled(topic) {
                            Election::Unclean
                        } else {
                            Election::Online
                        };
                        let change =
                            PartitionChangeBuilder::new(partition, topic.topic_id, &acceptable)
                                .election(election)
                                .target_isr(data.new_isr.iter().map(|m| m.broker_id).collect())
                                .target_leader_recovery_state(data.leader_recovery_state)
                                .build();
                        let Some(change) = change else {
                            return Ok(state(partition));
                        };
                        let after = partition.merge(&change);
                        let moved =
                            change.leader != NO_LEADER_CHANGE && change.leader != req.broker_id;
                        records.push(MetadataRecord::PartitionChange(change));
                        if moved {
                            // Only a reassignment could move leadership here; the
                            // requester must refresh its metadata.
                            Err(AlterPartitionError::NewLeaderElected)
                        } else {
                            Ok(state(&after))
                        }
                    })
                }
            };
            results.push(AlterPartitionResult {
                topic_id: topic_data.topic_id,
                partition_index: data.partition_index,
                result,
            });
        }
    }
    Ok((records, results))
}

fn state(p: &PartitionImage) -> PartitionState {
    PartitionState {
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        isr: p.isr.clone(),
        leader_recovery_state: p.leader_recovery_state,
        partition_epoch: p.partition_epoch,
    }
}

/// Kafka's `validateAlterPartitionData`, in its order of checks.
fn validate<'a>(
    image: &MetadataImage,
    broker_id: i32,
    partition: Option<&'a PartitionImage>,
    data: &AlterPartitionData,
) -> Result<&'a PartitionImage, AlterPartitionError> {
    let p = partition.ok_or(AlterPartitionError::UnknownTopicOrPartition)?;
    // Epochs newer than ours mean this controller has fallen behind.
    if data.leader_epoch > p.leader_epoch || data.partition_epoch > p.partition_epoch {
        return Err(AlterPartitionError::NotController);
    }
    if data.leader_epoch < p.leader_epoch {
        return Err(AlterPartitionError::FencedLeaderEpoch);
    }
    let invalid = |r| Err(AlterPartitionError::InvalidRequest(r));
    if broker_id != p.leader {
        return invalid(InvalidAlterPartition::NotLeader);
    }
    if data.partition_epoch < p.partition_epoch {
        return Err(AlterPartitionError::InvalidUpdateVersion);
    }
    let isr: Vec<i32> = data.new_isr.iter().map(|m| m.broker_id).collect();
    let distinct = isr.iter().enumerate().all(|(i, b)| !isr[..i].contains(b));
    if !distinct || !isr.iter().all(|b| p.replicas.contains(b)) {
        return invalid(InvalidAlterPartition::IsrNotInReplicas);
    }
    if !isr.contains(&p.leader) {
        return invalid(InvalidAlterPartition::IsrWithoutLeader);
    }
    if data.leader_recovery_state == LeaderRecoveryState::Recovering && isr.len() > 1 {
        return invalid(InvalidAlterPartition::RecoveringWithOtherMembers);
    }
    if p.leader_recovery_state == LeaderRecoveryState::Recovered
        && data.leader_recovery_state == LeaderRecoveryState::Recovering
    {
        return invalid(InvalidAlterPartition::RecoveredToRecovering);
    }
    for member in &data.new_isr {
        let eligible = image.brokers.get(&member.broker_id).is_some_and(|b| {
            b.is_active() && (member.broker_epoch == -1 || member.broker_epoch == b.broker_epoch)
        });
        if !eligible {
            return Err(AlterPartitionError::IneligibleReplica(member.broker_id));
        }
    }
    Ok(p)
}
