//! One partition's change, as Kafka's `PartitionChangeBuilder` (without KIP-966's
//! eligible leader replicas, as KRaft 3.x runs by default): given a target ISR, target
//! replicas (KIP-455 reassignment) and an election policy, the `PartitionChangeRecord` that
//! gets there, or nothing if nothing would change.
//!
//! Every change completes a pending reassignment whose target replicas are all in the
//! target ISR (Kafka's `completeReassignmentIfNeeded`), whatever asked for the change: an
//! AlterPartition that adds the last new replica to the ISR, a fence that shrinks it, or
//! the reassignment itself when its target is already in sync.

use uuid::Uuid;

use crate::PartitionImage;
use crate::record::{LeaderRecoveryState, MetadataRecord, NO_LEADER, PartitionChangeRecord};

/// How a leader may be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Election {
    /// Keep a valid leader; otherwise the first valid replica in replica order.
    Online,
    /// The preferred (first) replica if valid; otherwise as `Online`.
    Preferred,
    /// As `Online`, and failing that any acceptable replica, even outside the ISR.
    Unclean,
}

/// The inputs of one partition change.
pub(crate) struct PartitionChangeBuilder<'a> {
    /// The partition as it is.
    partition: &'a PartitionImage,
    /// Its topic.
    topic_id: Uuid,
    /// Who may lead at all: live (unfenced, not shutting down) brokers, give or take
    /// the broker being fenced or unfenced by this change.
    is_acceptable_leader: &'a dyn Fn(i32) -> bool,
    /// The election policy.
    election: Election,
    /// The ISR the change aims at.
    target_isr: Vec<i32>,
    /// The leader recovery state the change aims at.
    target_leader_recovery_state: LeaderRecoveryState,
    /// The replica list the change aims at (KIP-455: during a reassignment, the target
    /// replicas followed by the ones being removed).
    target_replicas: Vec<i32>,
    /// The replicas a reassignment is moving off the partition.
    target_removing: Vec<i32>,
    /// The replicas a reassignment is moving onto the partition.
    target_adding: Vec<i32>,
}

impl<'a> PartitionChangeBuilder<'a> {
    pub(crate) fn new(
        partition: &'a PartitionImage,
        topic_id: Uuid,
        is_acceptable_leader: &'a dyn Fn(i32) -> bool,
    ) -> Self {
        PartitionChangeBuilder {
            partition,
            topic_id,
            is_acceptable_leader,
            election: Election::Online,
            target_isr: partition.isr.clone(),
            target_leader_recovery_state: partition.leader_recovery_state,
            target_replicas: partition.replicas.clone(),
            target_removing: partition.removing_replicas.clone(),
            target_adding: partition.adding_replicas.clone(),
        }
    }

    /// The replica list, and the replicas being removed and added (KIP-455).
    pub(crate) fn target_assignment(
        mut self,
        replicas: Vec<i32>,
        removing: Vec<i32>,
        adding: Vec<i32>,
    ) -> Self {
        self.target_replicas = replicas;
        self.target_removing = removing;
        self.target_adding = adding;
        self
    }

    pub(crate) fn election(mut self, election: Election) -> Self {
        self.election = election;
        self
    }

    pub(crate) fn target_isr(mut self, isr: Vec<i32>) -> Self {
        self.target_isr = isr;
        self
    }

    pub(crate) fn target_leader_recovery_state(mut self, state: LeaderRecoveryState) -> Self {
        self.target_leader_recovery_state = state;
        self
    }

    /// A replica that may lead cleanly: in the target ISR and acceptable.
    fn is_valid_leader(&self, replica: i32) -> bool {
        self.target_isr.contains(&replica) && (self.is_acceptable_leader)(replica)
    }

    /// Kafka's `completeReassignmentIfNeeded` (`PartitionReassignmentReplicas.
    /// maybeCompleteReassignment`): once the target ISR, less the replicas being removed,
    /// is non-empty and holds every remaining replica, the replicas become the target, the
    /// ISR loses the removed ones and nothing is being added or removed any more. Kafka does
    /// not check `min.insync.replicas` here: the ISR holds the whole target.
    fn complete_reassignment_if_needed(&mut self) {
        if self.target_removing.is_empty() && self.target_adding.is_empty() {
            return;
        }
        let removing = &self.target_removing;
        let isr: Vec<i32> = self
            .target_isr
            .iter()
            .copied()
            .filter(|r| !removing.contains(r))
            .collect();
        let replicas: Vec<i32> = self
            .target_replicas
            .iter()
            .copied()
            .filter(|r| !removing.contains(r))
            .collect();
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
            return;
        }
        self.target_isr = isr;
        self.target_replicas = replicas;
        self.target_removing = Vec::new();
        self.target_adding = Vec::new();
    }

    /// The elected leader (or [`NO_LEADER`]) and whether the election was unclean.
    fn elect_leader(&self) -> (i32, bool) {
        let replicas = &self.target_replicas;
        if self.election == Election::Preferred
            && let Some(&preferred) = replicas.first()
            && self.is_valid_leader(preferred)
        {
            return (preferred, false);
        }
        if self.is_valid_leader(self.partition.leader) {
            // The current leader meets every constraint: no reason to move it.
            return (self.partition.leader, false);
        }
        if let Some(&r) = replicas.iter().find(|&&r| self.is_valid_leader(r)) {
            return (r, false);
        }
        if self.election == Election::Unclean
            && let Some(&r) = replicas.iter().find(|&&r| (self.is_acceptable_leader)(r))
        {
            return (r, true);
        }
        (NO_LEADER, false)
    }

    /// The record that makes the change, or `None` when nothing would change.
    pub(crate) fn build(mut self) -> Option<PartitionChangeRecord> {
        let mut record = PartitionChangeRecord::new(self.topic_id, self.partition.partition);
        self.complete_reassignment_if_needed();
        let (leader, unclean) = self.elect_leader();
        if leader != self.partition.leader {
            record.leader = leader;
            if unclean {
                // An unclean leader may lack committed data, so it starts a new ISR of
                // one and recovers before it may grow it (KIP-704). This can lose data.
                record.isr = Some(vec![leader]);
                if self.partition.leader_recovery_state != LeaderRecoveryState::Recovering {
                    record.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
                }
            }
        }
        // Without eligible leader replicas the ISR never becomes empty: a change that
        // would empty it leaves the last member in place (the partition goes leaderless
        // instead), so that replica can lead again when it comes back.
        if record.isr.is_none()
            && !self.target_isr.is_empty()
            && self.target_isr != self.partition.isr
        {
            record.isr = Some(self.target_isr.clone());
        }
        // Kafka's `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`: a replica leaving
        // the list must see a new leader epoch, so that it stops fetching and the leader
        // stops counting it.
        if record.leader == crate::record::NO_LEADER_CHANGE
            && !self
                .partition
                .replicas
                .iter()
                .all(|r| self.target_replicas.contains(r))
        {
            record.leader = self.partition.leader;
        }
        if !self.target_replicas.is_empty() && self.target_replicas != self.partition.replicas {
            record.replicas = Some(self.target_replicas.clone());
        }
        if self.target_removing != self.partition.removing_replicas {
            record.removing_replicas = Some(self.target_removing.clone());
        }
        if self.target_adding != self.partition.adding_replicas {
            record.adding_replicas = Some(self.target_adding.clone());
        }
        if self.target_leader_recovery_state != self.partition.leader_recovery_state {
            record.leader_recovery_state = Some(self.target_leader_recovery_state);
        }
        let no_op = record.isr.is_none()
            && record.leader == crate::record::NO_LEADER_CHANGE
            && record.leader_recovery_state.is_none()
            && record.replicas.is_none()
            && record.removing_replicas.is_none()
            && record.adding_replicas.is_none();
        (!no_op).then_some(record)
    }
}

/// Kafka's `generateLeaderAndIsrUpdates`: for each partition, drop `broker_to_remove`
/// from the ISR and elect a leader among acceptable brokers, where `broker_to_remove`
/// never is and `broker_to_add` always is (it is being unfenced in the same batch).
/// Unclean election is used where the topic allows it.
pub(crate) fn leader_and_isr_updates<'a>(
    image: &crate::MetadataImage,
    config: &super::ClusterControlConfig,
    broker_to_remove: Option<i32>,
    broker_to_add: Option<i32>,
    partitions: impl Iterator<Item = (&'a crate::TopicImage, &'a PartitionImage)>,
) -> Vec<MetadataRecord> {
    let acceptable =
        |b: i32| Some(b) != broker_to_remove && (Some(b) == broker_to_add || image.is_active(b));
    let mut records = Vec::new();
    for (topic, partition) in partitions {
        let mut target_isr = partition.isr.clone();
        if let Some(removed) = broker_to_remove {
            target_isr.retain(|&b| b != removed);
        }
        let election = if config.unclean_enabled(topic) {
            Election::Unclean
        } else {
            Election::Online
        };
        if let Some(change) = PartitionChangeBuilder::new(partition, topic.topic_id, &acceptable)
            .election(election)
            .target_isr(target_isr)
            .build()
        {
            records.push(MetadataRecord::PartitionChange(change));
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionImage {
        PartitionImage {
            partition: 0,
            leader,
            leader_epoch: 5,
            partition_epoch: 9,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader_recovery_state: LeaderRecoveryState::Recovered,
        }
    }

    fn build(
        p: &PartitionImage,
        live: &[i32],
        election: Election,
        isr: Option<Vec<i32>>,
    ) -> Option<PartitionChangeRecord> {
        let acceptable = |b: i32| live.contains(&b);
        let mut builder =
            PartitionChangeBuilder::new(p, Uuid::nil(), &acceptable).election(election);
        if let Some(isr) = isr {
            builder = builder.target_isr(isr);
        }
        builder.build()
    }

    #[test]
    fn a_valid_leader_stays_and_nothing_is_written() {
        let p = partition(&[1, 2, 3], &[1, 2, 3], 2);
        assert_eq!(build(&p, &[1, 2, 3], Election::Online, None), None);
    }

    #[test]
    fn a_lost_leader_is_replaced_by_the_first_live_isr_member_in_replica_order() {
        let p = partition(&[1, 2, 3], &[3, 2], 1);
        let r = build(&p, &[2, 3], Election::Online, Some(vec![3, 2])).unwrap();
        assert_eq!(r.leader, 2);
        assert_eq!(r.isr, None);
    }

    #[test]
    fn removing_the_last_isr_member_keeps_it_and_leaves_no_leader() {
        let p = partition(&[1, 2], &[1], 1);
        let r = build(&p, &[2], Election::Online, Some(vec![])).unwrap();
        assert_eq!((r.leader, r.isr), (NO_LEADER, None));
    }

    #[test]
    fn unclean_election_resets_the_isr_and_marks_recovering() {
        let p = partition(&[1, 2], &[1], NO_LEADER);
        assert_eq!(build(&p, &[2], Election::Online, None), None);
        let r = build(&p, &[2], Election::Unclean, None).unwrap();
        assert_eq!(r.leader, 2);
        assert_eq!(r.isr, Some(vec![2]));
        assert_eq!(
            r.leader_recovery_state,
            Some(LeaderRecoveryState::Recovering)
        );
    }

    #[test]
    fn preferred_election_moves_to_the_first_replica_only_if_it_is_valid() {
        let p = partition(&[1, 2, 3], &[1, 2, 3], 2);
        assert_eq!(
            build(&p, &[1, 2, 3], Election::Preferred, None)
                .unwrap()
                .leader,
            1
        );
        // Preferred replica fenced: the current leader stays.
        assert_eq!(build(&p, &[2, 3], Election::Preferred, None), None);
        // Preferred replica out of sync: likewise.
        let p = partition(&[1, 2, 3], &[2, 3], 2);
        assert_eq!(build(&p, &[1, 2, 3], Election::Preferred, None), None);
    }
}
