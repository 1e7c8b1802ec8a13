//! Partition reassignment (KIP-455): AlterPartitionReassignments sets a partition's target
//! replicas or cancels a pending move, ListPartitionReassignments shows the pending ones,
//! as Kafka's `ReplicationControlManager.alterPartitionReassignments` and
//! `listPartitionReassignments` do.
//!
//! A move goes through the partition's own records, never a separate state:
//!
//! 1. The reassignment writes `replicas` = target then the replicas being removed (Kafka's
//!    `PartitionReassignmentReplicas`), `adding_replicas` = target − current and
//!    `removing_replicas` = current − target (both in id order). The ISR and the leader
//!    stay; the new replicas start following the leader and catch up.
//! 2. The leader adds each caught-up new replica to the ISR through AlterPartition.
//! 3. The change that brings every target replica into the ISR completes the move in the
//!    same record (`PartitionChangeBuilder`): replicas = target, ISR = ISR − removed,
//!    nothing adding or removing, and a leader outside the target is replaced from the
//!    target ∩ ISR. Whenever a replica leaves the list the leader epoch moves on.
//!
//! A target that is already in sync (a reorder, or a shrink to in-sync replicas) completes
//! in the reassignment's own record. A `None` target cancels: the replicas go back to the
//! current ones minus those being added, the ISR loses them too.
//!
//! One difference from Kafka: a new target for a partition already being moved replaces
//! the adding and removing lists whole, where Kafka keeps the old list when the new one
//! would be empty (so that a replica the new target keeps could still be removed).

use std::collections::BTreeSet;

use super::ClusterControlConfig;
use super::partition_change::{Election, PartitionChangeBuilder};
use crate::record::{MetadataRecord, PartitionChangeRecord};
use crate::{InvalidReassignment, MetadataImage, PartitionImage, ReassignmentError, TopicImage};

/// One partition an AlterPartitionReassignments names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentTarget {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// The replicas to move to, preferred leader first; `None` cancels a pending move.
    pub replicas: Option<Vec<i32>>,
}

/// One partition's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentResult {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// `None` when the reassignment (or cancellation) was written or needed no change.
    pub error: Option<ReassignmentError>,
}

/// A partition being moved, as ListPartitionReassignments shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    /// The partition index.
    pub partition: i32,
    /// Every replica: the target ones, then the ones being removed.
    pub replicas: Vec<i32>,
    /// The replicas being added.
    pub adding: Vec<i32>,
    /// The replicas being removed.
    pub removing: Vec<i32>,
}

/// AlterPartitionReassignments: one result per target, in request order, and the records
/// that carry them out (one `PartitionChangeRecord` per partition that changes). Each
/// target sees the records of the ones before it, so a partition named twice ends at the
/// last target. With `allow_replication_factor_change` false (KIP-860), a target of
/// another length than the partition's (or its pending target's) is refused.
pub fn alter_partition_reassignments(
    image: &MetadataImage,
    config: &ClusterControlConfig,
    allow_replication_factor_change: bool,
    targets: &[ReassignmentTarget],
) -> (Vec<MetadataRecord>, Vec<ReassignmentResult>) {
    let mut work = image.clone();
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(targets.len());
    for target in targets {
        let outcome = reassign_one(&work, config, allow_replication_factor_change, target);
        let error = match outcome {
            Ok(Some(change)) => {
                let record = MetadataRecord::PartitionChange(change);
                match work.apply(&record) {
                    Ok(()) => {
                        records.push(record);
                        None
                    }
                    // The record was built from this very image, so this cannot happen;
                    // if it did, the partition is reported unknown rather than written.
                    Err(_) => Some(ReassignmentError::UnknownPartition {
                        topic: target.topic.clone(),
                        partition: target.partition,
                    }),
                }
            }
            Ok(None) => None,
            Err(e) => Some(e),
        };
        results.push(ReassignmentResult {
            topic: target.topic.clone(),
            partition: target.partition,
            error,
        });
    }
    (records, results)
}

/// Kafka's `alterPartitionReassignment` for one partition.
fn reassign_one(
    image: &MetadataImage,
    config: &ClusterControlConfig,
    allow_replication_factor_change: bool,
    target: &ReassignmentTarget,
) -> Result<Option<PartitionChangeRecord>, ReassignmentError> {
    let topic = image
        .topics
        .get(&target.topic)
        .ok_or_else(|| ReassignmentError::UnknownTopic(target.topic.clone()))?;
    let partition = usize::try_from(target.partition)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or_else(|| ReassignmentError::UnknownPartition {
            topic: target.topic.clone(),
            partition: target.partition,
        })?;
    match &target.replicas {
        None => cancel(image, config, topic, partition),
        Some(replicas) => {
            if !allow_replication_factor_change {
                let from = headed_for(partition).len();
                if from != replicas.len() {
                    return Err(ReassignmentError::ReplicationFactorChanged {
                        from,
                        to: replicas.len(),
                    });
                }
            }
            change(image, topic, partition, replicas)
        }
    }
}

/// The replicas a partition will have once its pending move (if any) is done.
fn headed_for(p: &PartitionImage) -> BTreeSet<i32> {
    p.replicas
        .iter()
        .chain(&p.adding_replicas)
        .copied()
        .filter(|r| !p.removing_replicas.contains(r))
        .collect()
}

/// Kafka's `validateManualPartitionAssignment`: a non-empty list of distinct registered
/// brokers (fenced ones included: a replica may wait for its broker to come back).
fn validate_target(image: &MetadataImage, target: &[i32]) -> Result<(), InvalidReassignment> {
    if target.is_empty() {
        return Err(InvalidReassignment::Empty);
    }
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for b in sorted {
        if !image.brokers.contains_key(&b) {
            return Err(InvalidReassignment::UnregisteredBroker(b));
        }
        if previous == Some(b) {
            return Err(InvalidReassignment::DuplicateBroker(b));
        }
        previous = Some(b);
    }
    Ok(())
}

/// Kafka's `changePartitionReassignment`: the record that starts the move (and completes
/// it at once when the target is already in the ISR), or `None` when nothing changes.
fn change(
    image: &MetadataImage,
    topic: &TopicImage,
    p: &PartitionImage,
    target: &[i32],
) -> Result<Option<PartitionChangeRecord>, ReassignmentError> {
    validate_target(image, target).map_err(ReassignmentError::InvalidReplicaAssignment)?;
    let removing: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect::<BTreeSet<i32>>()
        .into_iter()
        .collect();
    let adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|r| !p.replicas.contains(r))
        .collect::<BTreeSet<i32>>()
        .into_iter()
        .collect();
    let mut merged = target.to_vec();
    merged.extend(&removing);
    let acceptable = |b: i32| image.is_active(b);
    Ok(PartitionChangeBuilder::new(p, topic.topic_id, &acceptable)
        .target_assignment(merged, removing, adding)
        .build())
}

/// Kafka's `cancelPartitionReassignment` (`PartitionReassignmentRevert`): back to the
/// replicas before the move, without the ones being added, in the ISR too. An ISR of only
/// added replicas would leave none, so the first original replica becomes the ISR, which
/// is an unclean election and needs the topic to allow it.
fn cancel(
    image: &MetadataImage,
    config: &ClusterControlConfig,
    topic: &TopicImage,
    p: &PartitionImage,
) -> Result<Option<PartitionChangeRecord>, ReassignmentError> {
    if !p.is_reassigning() {
        return Err(ReassignmentError::NoReassignmentInProgress);
    }
    let replicas: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !p.adding_replicas.contains(r))
        .collect();
    let mut isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| !p.adding_replicas.contains(r))
        .collect();
    let unclean_enabled = config.unclean_enabled(topic);
    if isr.is_empty() {
        let Some(&first) = replicas.first() else {
            // Every replica is being added: there is nothing to go back to.
            return Err(ReassignmentError::InvalidReplicaAssignment(
                InvalidReassignment::Empty,
            ));
        };
        if !unclean_enabled {
            return Err(ReassignmentError::InvalidReplicaAssignment(
                InvalidReassignment::UncleanRevert {
                    topic: topic.name.clone(),
                    partition: p.partition,
                },
            ));
        }
        isr.push(first);
    }
    let acceptable = |b: i32| image.is_active(b);
    let election = if unclean_enabled {
        Election::Unclean
    } else {
        Election::Online
    };
    Ok(PartitionChangeBuilder::new(p, topic.topic_id, &acceptable)
        .election(election)
        .target_isr(isr)
        .target_assignment(replicas, Vec::new(), Vec::new())
        .build())
}

/// ListPartitionReassignments: the partitions being moved, by topic. `None` lists every
/// one, in topic-name order; otherwise the partitions named, in request order, where
/// unknown topics and partitions not being moved are left out, as are topics with none.
pub fn list_partition_reassignments(
    image: &MetadataImage,
    topics: Option<&[(String, Vec<i32>)]>,
) -> Vec<(String, Vec<OngoingReassignment>)> {
    let ongoing = |p: &PartitionImage| OngoingReassignment {
        partition: p.partition,
        replicas: p.replicas.clone(),
        adding: p.adding_replicas.clone(),
        removing: p.removing_replicas.clone(),
    };
    let mut out = Vec::new();
    match topics {
        None => {
            for t in image.topics.values() {
                let moving: Vec<OngoingReassignment> = t
                    .partitions
                    .iter()
                    .filter(|p| p.is_reassigning())
                    .map(ongoing)
                    .collect();
                if !moving.is_empty() {
                    out.push((t.name.clone(), moving));
                }
            }
        }
        Some(named) => {
            for (name, partitions) in named {
                let Some(t) = image.topics.get(name) else {
                    continue;
                };
                let moving: Vec<OngoingReassignment> = partitions
                    .iter()
                    .filter_map(|&i| usize::try_from(i).ok().and_then(|i| t.partitions.get(i)))
                    .filter(|p| p.is_reassigning())
                    .map(ongoing)
                    .collect();
                if !moving.is_empty() {
                    out.push((name.clone(), moving));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AlterPartitionError;
    use crate::cluster_control::tests::Cluster;
    use crate::record::{LeaderRecoveryState, PartitionRecord};

    /// A cluster of `n` live brokers with topic "t" (one partition) placed on `replicas`,
    /// ISR `isr`, led by the first ISR member.
    fn cluster(n: i32, replicas: &[i32], isr: &[i32]) -> Cluster {
        let mut c = Cluster::with_live_brokers(n);
        let id = c.create_topic("t", 1, 1);
        c.apply(&[MetadataRecord::Partition(PartitionRecord {
            partition_id: 0,
            topic_id: id,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: isr[0],
            leader_epoch: 3,
            partition_epoch: 7,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        })]);
        c
    }

    fn target(partition: i32, replicas: Option<&[i32]>) -> ReassignmentTarget {
        ReassignmentTarget {
            topic: "t".into(),
            partition,
            replicas: replicas.map(<[i32]>::to_vec),
        }
    }

    /// Runs one AlterPartitionReassignments and applies its records.
    fn reassign(c: &mut Cluster, replicas: Option<&[i32]>) -> Option<ReassignmentError> {
        let (records, results) =
            alter_partition_reassignments(&c.image, &c.config, true, &[target(0, replicas)]);
        c.apply(&records);
        results.into_iter().next().unwrap().error
    }

    fn state(c: &Cluster) -> (Vec<i32>, Vec<i32>, i32, Vec<i32>, Vec<i32>) {
        let p = c.partition("t", 0);
        (
            p.replicas.clone(),
            p.isr.clone(),
            p.leader,
            p.adding_replicas.clone(),
            p.removing_replicas.clone(),
        )
    }

    #[test]
    fn a_move_puts_the_target_first_and_keeps_leader_and_isr() {
        let mut c = cluster(3, &[1, 2], &[1, 2]);
        let before = c.partition("t", 0).clone();
        assert_eq!(reassign(&mut c, Some(&[2, 3])), None);
        assert_eq!(state(&c), (vec![2, 3, 1], vec![1, 2], 1, vec![3], vec![1]));
        let p = c.partition("t", 0);
        // Only the partition epoch moves: nobody leaves the replica list yet.
        assert_eq!(p.leader_epoch, before.leader_epoch);
        assert_eq!(p.partition_epoch, before.partition_epoch + 1);
        let listed = list_partition_reassignments(&c.image, None);
        assert_eq!(
            listed,
            vec![(
                "t".to_owned(),
                vec![OngoingReassignment {
                    partition: 0,
                    replicas: vec![2, 3, 1],
                    adding: vec![3],
                    removing: vec![1],
                }]
            )]
        );
    }

    #[test]
    fn the_last_new_replica_joining_the_isr_completes_the_move_and_elects_from_the_target() {
        let mut c = cluster(3, &[1, 2], &[1, 2]);
        reassign(&mut c, Some(&[2, 3]));
        let epoch = c.partition("t", 0).leader_epoch;
        // The leader (being removed) adds 3: the move completes in the same record.
        assert_eq!(
            c.alter_isr("t", 0, &[1, 2, 3]),
            Err(AlterPartitionError::NewLeaderElected)
        );
        assert_eq!(state(&c), (vec![2, 3], vec![2, 3], 2, vec![], vec![]));
        assert_eq!(c.partition("t", 0).leader_epoch, epoch + 1);
        assert!(list_partition_reassignments(&c.image, None).is_empty());
    }

    #[test]
    fn a_leader_that_stays_still_gets_a_new_epoch_when_a_replica_leaves() {
        let mut c = cluster(3, &[1, 2], &[1, 2]);
        reassign(&mut c, Some(&[1, 3]));
        let epoch = c.partition("t", 0).leader_epoch;
        let got = c.alter_isr("t", 0, &[1, 2, 3]).unwrap();
        assert_eq!(state(&c), (vec![1, 3], vec![1, 3], 1, vec![], vec![]));
        // Kafka's triggerLeaderEpochBumpForReplicaReassignmentIfNeeded.
        assert_eq!(got.leader_epoch, epoch + 1);
        assert_eq!(got.isr, vec![1, 3]);
    }

    #[test]
    fn a_target_already_in_sync_completes_at_once() {
        let mut c = cluster(3, &[1, 2, 3], &[1, 2, 3]);
        assert_eq!(reassign(&mut c, Some(&[3, 2])), None);
        assert_eq!(state(&c), (vec![3, 2], vec![2, 3], 3, vec![], vec![]));
        // A reorder is no move at all: the leader stays, no epoch bump.
        let mut c = cluster(2, &[1, 2], &[1, 2]);
        let epoch = c.partition("t", 0).leader_epoch;
        assert_eq!(reassign(&mut c, Some(&[2, 1])), None);
        assert_eq!(state(&c), (vec![2, 1], vec![1, 2], 1, vec![], vec![]));
        assert_eq!(c.partition("t", 0).leader_epoch, epoch);
        // The same target again changes nothing and writes nothing.
        let (records, results) =
            alter_partition_reassignments(&c.image, &c.config, true, &[target(0, Some(&[2, 1]))]);
        assert!(records.is_empty() && results[0].error.is_none());
    }

    #[test]
    fn a_shrink_waits_for_the_remaining_replicas_to_be_in_sync() {
        let mut c = cluster(3, &[1, 2, 3], &[1, 3]);
        reassign(&mut c, Some(&[1, 2]));
        assert_eq!(state(&c), (vec![1, 2, 3], vec![1, 3], 1, vec![], vec![3]));
        c.alter_isr("t", 0, &[1, 2, 3]).unwrap();
        assert_eq!(state(&c), (vec![1, 2], vec![1, 2], 1, vec![], vec![]));
    }

    #[test]
    fn cancelling_goes_back_to_the_original_replicas() {
        let mut c = cluster(4, &[1, 2], &[1, 2]);
        assert_eq!(
            reassign(&mut c, None),
            Some(ReassignmentError::NoReassignmentInProgress)
        );
        reassign(&mut c, Some(&[3, 4]));
        assert_eq!(
            state(&c),
            (vec![3, 4, 1, 2], vec![1, 2], 1, vec![3, 4], vec![1, 2])
        );
        // 3 caught up meanwhile; cancelling takes it out of the ISR as well.
        c.alter_isr("t", 0, &[1, 2, 3]).unwrap();
        assert_eq!(reassign(&mut c, None), None);
        assert_eq!(state(&c), (vec![1, 2], vec![1, 2], 1, vec![], vec![]));
        assert!(list_partition_reassignments(&c.image, None).is_empty());
    }

    #[test]
    fn a_cancel_that_needs_an_unclean_election_is_refused_unless_allowed() {
        // An ISR of added replicas only: 1 was fenced out after 2 joined.
        let mut c = cluster(2, &[1], &[1]);
        reassign(&mut c, Some(&[2, 1]));
        let p = c.partition("t", 0).clone();
        let mut shrink = PartitionChangeRecord::new(c.image.topics["t"].topic_id, 0);
        shrink.isr = Some(vec![2]);
        shrink.leader = 2;
        c.apply(&[MetadataRecord::PartitionChange(shrink)]);
        assert_eq!(c.partition("t", 0).adding_replicas, p.adding_replicas);
        assert!(matches!(
            reassign(&mut c, None),
            Some(ReassignmentError::InvalidReplicaAssignment(
                InvalidReassignment::UncleanRevert { .. }
            ))
        ));
        c.config.unclean_leader_election_enable = true;
        assert_eq!(reassign(&mut c, None), None);
        assert_eq!(state(&c), (vec![1], vec![1], 1, vec![], vec![]));
    }

    #[test]
    fn bad_targets_get_kafkas_errors() {
        let mut c = cluster(3, &[1, 2], &[1, 2]);
        let unknown_topic = ReassignmentTarget {
            topic: "nope".into(),
            partition: 0,
            replicas: Some(vec![1]),
        };
        let (records, results) = alter_partition_reassignments(
            &c.image,
            &c.config,
            true,
            &[
                unknown_topic,
                target(5, Some(&[1])),
                target(-1, Some(&[1])),
                target(0, Some(&[])),
                target(0, Some(&[1, 1])),
                target(0, Some(&[1, 9])),
            ],
        );
        assert!(records.is_empty());
        let errors: Vec<String> = results
            .iter()
            .map(|r| r.error.as_ref().unwrap().to_string())
            .collect();
        assert_eq!(
            errors,
            vec![
                "Unable to find a topic named nope.",
                "Unable to find partition t:5.",
                "Unable to find partition t:-1.",
                "The manual partition assignment includes an empty replica list.",
                "The manual partition assignment includes the broker 1 more than once.",
                "The manual partition assignment includes broker 9, but no such broker is registered.",
            ]
        );
        // KIP-860: without allow_replication_factor_change the length must stay.
        let (_, results) =
            alter_partition_reassignments(&c.image, &c.config, false, &[target(0, Some(&[3]))]);
        assert_eq!(
            results[0].error,
            Some(ReassignmentError::ReplicationFactorChanged { from: 2, to: 1 })
        );
        // ... measured against where a pending move is headed.
        reassign(&mut c, Some(&[2, 3]));
        let (_, results) =
            alter_partition_reassignments(&c.image, &c.config, false, &[target(0, Some(&[3, 1]))]);
        assert_eq!(results[0].error, None);
    }

    #[test]
    fn a_partition_named_twice_ends_at_the_last_target() {
        let c = cluster(4, &[1, 2], &[1, 2]);
        let (records, results) = alter_partition_reassignments(
            &c.image,
            &c.config,
            true,
            &[target(0, Some(&[2, 3])), target(0, Some(&[3, 4]))],
        );
        assert!(results.iter().all(|r| r.error.is_none()));
        let mut c = c;
        c.apply(&records);
        // The second target is measured against the first one's replica list, which
        // already holds 3 (as Kafka measures it against the partition's replicas).
        assert_eq!(
            state(&c),
            (vec![3, 4, 1, 2], vec![1, 2], 1, vec![4], vec![1, 2])
        );
    }

    #[test]
    fn fencing_the_leader_being_removed_elects_from_the_isr() {
        let mut c = cluster(3, &[1, 2], &[1, 2]);
        reassign(&mut c, Some(&[2, 3]));
        c.now += 20_000;
        for b in [2, 3] {
            c.heartbeat(b);
        }
        assert_eq!(c.expire(), vec![1]);
        let (replicas, isr, leader, adding, removing) = state(&c);
        assert_eq!((isr, leader), (vec![2], 2));
        // Still moving: 3 has not joined.
        assert_eq!(
            (replicas, adding, removing),
            (vec![2, 3, 1], vec![3], vec![1])
        );
        c.alter_isr("t", 0, &[2, 3]).unwrap();
        assert_eq!(state(&c), (vec![2, 3], vec![2, 3], 2, vec![], vec![]));
    }

    #[test]
    fn listing_named_partitions_leaves_out_the_ones_not_moving() {
        let mut c = cluster(3, &[1, 2], &[1, 2]);
        reassign(&mut c, Some(&[2, 3]));
        let named = vec![
            ("t".to_owned(), vec![0, 1, -1]),
            ("missing".to_owned(), vec![0]),
        ];
        let listed = list_partition_reassignments(&c.image, Some(&named));
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].1.len(), 1);
        assert!(
            list_partition_reassignments(&c.image, Some(&[("t".to_owned(), vec![1])])).is_empty()
        );
    }
}
