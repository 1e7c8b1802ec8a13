use strata_storage::leader_epoch::{EpochEntry, LeaderEpochCache};

use super::*;

const T0: i64 = 1_000_000;
const LAG: i64 = DEFAULT_REPLICA_LAG_TIME_MAX_MS;

fn registration(isr: &[i32]) -> PartitionRegistration {
    PartitionRegistration {
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
        leader_epoch: 5,
        partition_epoch: 10,
    }
}

fn leader(isr: &[i32], leo: i64, hw: i64, min_isr: usize) -> LeaderState {
    let config = ReplicationConfig {
        min_insync_replicas: min_isr,
        ..ReplicationConfig::default()
    };
    LeaderState::become_leader(1, &registration(isr), config, leo, hw, T0)
}

fn epochs(leo_at_leadership: i64) -> LeaderEpochCache {
    LeaderEpochCache::from_entries([
        EpochEntry {
            epoch: 2,
            start_offset: 0,
        },
        EpochEntry {
            epoch: 5,
            start_offset: leo_at_leadership,
        },
    ])
}

fn fetch(l: &mut LeaderState, id: i32, offset: i64, now: i64) -> FetchAnswer {
    let req = FetchPartition {
        replica_id: id,
        fetch_offset: offset,
        current_leader_epoch: 5,
        last_fetched_epoch: -1,
        replica_epoch: 100 + id as i64,
        log_start_offset: 0,
    };
    l.on_fetch(&req, 0, &epochs(10), now).unwrap()
}

fn commit(l: &mut LeaderState, now: i64) {
    let p = l.pending_proposal().unwrap().clone();
    let outcome = AlterPartitionOutcome::Committed {
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch + 1,
        isr: p.isr_ids(),
    };
    l.on_alter_partition(&outcome, now);
}

#[test]
fn high_watermark_is_the_smallest_isr_log_end_and_never_moves_back() {
    let mut l = leader(&[1, 2, 3], 10, 4, 1);
    assert_eq!(l.high_watermark(), 4);
    l.on_local_append(20, T0);
    fetch(&mut l, 2, 15, T0);
    assert_eq!(l.high_watermark(), 4, "follower 3 has not fetched yet");
    let a = fetch(&mut l, 3, 12, T0);
    assert_eq!((l.high_watermark(), a.high_watermark), (12, 12));
    // A follower fetching an older offset again (it truncated) does not move it back.
    fetch(&mut l, 3, 11, T0);
    assert_eq!(l.high_watermark(), 12);
    fetch(&mut l, 3, 20, T0);
    assert_eq!(l.high_watermark(), 15);
}

#[test]
fn a_leader_alone_moves_the_high_watermark_with_its_appends() {
    let mut l = leader(&[1], 10, 10, 1);
    l.on_local_append(13, T0);
    assert_eq!(l.high_watermark(), 13);
}

#[test]
fn a_late_report_of_an_earlier_log_end_does_not_move_it_back() {
    // A roll's fsync begun at 13 reports after an append published 15: followers must still
    // be told of 15, or they never fetch 13..15 and the high watermark stays at 13.
    let mut l = leader(&[1, 2], 10, 10, 1);
    l.on_local_append(15, T0);
    l.on_local_append(13, T0);
    assert_eq!(l.log_end_offset(), 15);
    let a = fetch(&mut l, 2, 13, T0);
    assert_eq!(
        a.log_end_offset, 15,
        "the follower is told of the whole log"
    );
    fetch(&mut l, 2, 15, T0);
    assert_eq!(l.high_watermark(), 15);
}

#[test]
fn last_caught_up_time_follows_kafkas_rules() {
    let mut l = leader(&[1, 2, 3], 10, 10, 1);
    fetch(&mut l, 3, 10, T0);
    // Follower 2 fetches at the leader's end: caught up now.
    fetch(&mut l, 2, 10, T0 + 1_000);
    l.on_local_append(30, T0 + 1_000);
    // At T0+2000 it fetches 20: behind the end (30), but past the end at its previous fetch
    // (10), so it was caught up at that previous fetch (T0+1000).
    fetch(&mut l, 2, 20, T0 + 2_000);
    fetch(&mut l, 3, 30, T0 + 2_000);
    // Still behind from then on: out of the ISR once the lag time passes since T0+1000.
    assert!(l.maybe_shrink_isr(T0 + 1_000 + LAG).is_none());
    fetch(&mut l, 3, 30, T0 + 1_000 + LAG + 1);
    let p = l.maybe_shrink_isr(T0 + 1_000 + LAG + 1).unwrap().clone();
    assert_eq!(p.isr_ids(), [1, 3]);
    assert_eq!((p.leader_epoch, p.partition_epoch), (5, 10));
}

#[test]
fn a_shrink_is_only_proposed_and_the_high_watermark_waits_until_it_commits() {
    let mut l = leader(&[1, 2, 3], 10, 10, 1);
    l.on_local_append(20, T0);
    fetch(&mut l, 2, 20, T0);
    fetch(&mut l, 3, 10, T0);
    let now = T0 + LAG + 1;
    fetch(&mut l, 2, 20, now);
    assert_eq!(l.maybe_shrink_isr(now).unwrap().isr_ids(), [1, 2]);
    assert_eq!(l.isr(), [1, 2, 3], "nothing applied before the commit");
    assert_eq!(l.maximal_isr(), [1, 2, 3]);
    assert_eq!(l.high_watermark(), 10);
    // At most one in flight.
    assert!(l.maybe_shrink_isr(now + 1).is_none());
    commit(&mut l, now);
    assert_eq!(l.isr(), [1, 2]);
    assert_eq!(l.partition_epoch(), 11);
    assert_eq!(l.high_watermark(), 20);
}

#[test]
fn expansion_needs_the_high_watermark_and_the_epoch_start() {
    // Leadership began at 10; the high watermark lags at 4.
    let mut l = leader(&[1, 2], 10, 4, 1);
    fetch(&mut l, 2, 10, T0);
    assert_eq!(l.high_watermark(), 10);
    l.on_local_append(30, T0);
    fetch(&mut l, 2, 30, T0);
    assert_eq!(l.high_watermark(), 30);
    // Follower 3 at 8: below the high watermark and the epoch start.
    fetch(&mut l, 3, 8, T0);
    assert!(l.pending_proposal().is_none());
    let a = fetch(&mut l, 3, 30, T0);
    assert_eq!(l.pending_proposal().unwrap().isr_ids(), [1, 2, 3]);
    assert_eq!(l.maximal_isr(), [1, 2, 3]);
    assert_eq!(a.high_watermark, 30);
    commit(&mut l, T0);
    assert_eq!(l.isr(), [1, 2, 3]);
}

#[test]
fn a_follower_below_the_epoch_start_stays_out_even_at_the_high_watermark() {
    // Leadership began at 10; the high watermark is 4 until follower 2 fetches.
    let mut l = leader(&[1, 2], 10, 4, 1);
    assert_eq!(l.high_watermark(), 4);
    fetch(&mut l, 3, 6, T0);
    assert!(
        l.pending_proposal().is_none(),
        "6 is past the high watermark, not the epoch start"
    );
    fetch(&mut l, 3, 10, T0);
    assert_eq!(l.pending_proposal().unwrap().isr_ids(), [1, 2, 3]);
}

#[test]
fn the_pending_expansion_holds_the_high_watermark() {
    let mut l = leader(&[1], 10, 10, 1);
    fetch(&mut l, 2, 10, T0);
    assert!(l.pending_proposal().is_some());
    l.on_local_append(15, T0);
    assert_eq!(
        l.high_watermark(),
        10,
        "the proposed member has not fetched 15 yet"
    );
}

#[test]
fn alter_partition_answers() {
    let mut l = leader(&[1, 2], 10, 10, 1);
    fetch(&mut l, 2, 10, T0);
    fetch(&mut l, 3, 10, T0);
    assert!(l.pending_proposal().is_some());
    // A commit from another leader epoch or an older partition epoch is ignored.
    let stale = AlterPartitionOutcome::Committed {
        leader_epoch: 4,
        partition_epoch: 11,
        isr: vec![1, 2, 3],
    };
    l.on_alter_partition(&stale, T0);
    assert_eq!(l.isr(), [1, 2]);
    l.on_alter_partition(&AlterPartitionOutcome::AwaitMetadata, T0);
    assert!(l.pending_proposal().is_some());
    l.on_alter_partition(&AlterPartitionOutcome::NotAttempted, T0);
    assert!(l.pending_proposal().is_none());
    assert_eq!(l.isr(), [1, 2]);
    // Newer metadata replaces the ISR and drops what is in flight.
    fetch(&mut l, 3, 10, T0);
    assert!(l.pending_proposal().is_some());
    let mut newer = registration(&[1, 3]);
    newer.partition_epoch = 12;
    assert!(l.on_partition_change(&newer, T0));
    assert_eq!(l.isr(), [1, 3]);
    assert!(l.pending_proposal().is_none());
    newer.leader_epoch = 6;
    assert!(!l.on_partition_change(&newer, T0));
}

#[test]
fn acks_all_and_min_insync_replicas() {
    let mut l = leader(&[1, 2], 10, 10, 2);
    assert_eq!(l.check_produce(-1), Ok(()));
    l.on_local_append(12, T0);
    l.await_acks(7, 12);
    l.on_local_append(15, T0);
    assert!(l.take_completed_acks().is_empty());
    fetch(&mut l, 2, 12, T0);
    assert_eq!(l.take_completed_acks(), [(7, Ok(()))]);
    // Follower 2 falls out of the ISR.
    let now = T0 + LAG + 1;
    l.maybe_shrink_isr(now);
    commit(&mut l, now);
    assert_eq!(l.isr(), [1]);
    // acks=all is refused before the append; other acks go on.
    assert_eq!(
        l.check_produce(-1),
        Err(ReplicationError::NotEnoughReplicas { isr: 1, min_isr: 2 })
    );
    assert_eq!(l.check_produce(1), Ok(()));
    // Under min ISR the high watermark stands still (Kafka 4, KIP-966).
    l.on_local_append(20, now);
    assert_eq!(l.high_watermark(), 12);
    // A produce whose records were already below the high watermark when the ISR shrank
    // is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    l.await_acks(8, 12);
    assert_eq!(
        l.take_completed_acks(),
        [(
            8,
            Err(ReplicationError::NotEnoughReplicasAfterAppend { isr: 1, min_isr: 2 })
        )]
    );
    l.await_acks(9, 15);
    assert!(l.take_completed_acks().is_empty());
    assert_eq!(
        l.resign(),
        [(9, Err(ReplicationError::NotLeaderOrFollower { node: 1 }))]
    );
}

#[test]
fn min_insync_replicas_is_capped_at_the_replication_factor() {
    let l = leader(&[1, 2, 3], 10, 10, 5);
    assert_eq!(l.effective_min_isr(), 3);
    assert_eq!(l.check_produce(-1), Ok(()));
}

#[test]
fn fetch_epoch_checks_and_divergence_leave_the_state_alone() {
    let mut l = leader(&[1, 2, 3], 10, 10, 1);
    let mut req = FetchPartition {
        replica_id: 2,
        fetch_offset: 10,
        current_leader_epoch: 4,
        last_fetched_epoch: -1,
        replica_epoch: -1,
        log_start_offset: 0,
    };
    assert!(matches!(
        l.on_fetch(&req, 0, &epochs(10), T0),
        Err(ReplicationError::FencedLeaderEpoch { .. })
    ));
    req.current_leader_epoch = 6;
    assert!(matches!(
        l.on_fetch(&req, 0, &epochs(10), T0),
        Err(ReplicationError::UnknownLeaderEpoch { .. })
    ));
    // Follower 2 has epoch 2 up to 12 but epoch 2 ended at 10 here.
    req.current_leader_epoch = 5;
    req.fetch_offset = 12;
    req.last_fetched_epoch = 2;
    let a = l.on_fetch(&req, 0, &epochs(10), T0).unwrap();
    assert_eq!(
        a.diverging_epoch,
        Some(EpochEndOffset {
            epoch: 2,
            end_offset: 10
        })
    );
    assert_eq!(l.follower_log_end_offset(2), Some(-1));
    // A broker that is not a replica: perhaps newer metadata than ours, so it retries.
    req.replica_id = 9;
    assert!(matches!(
        l.on_fetch(&req, 0, &epochs(10), T0),
        Err(ReplicationError::UnknownLeaderEpoch { .. })
    ));
    req.current_leader_epoch = -1;
    assert!(matches!(
        l.on_fetch(&req, 0, &epochs(10), T0),
        Err(ReplicationError::NotLeaderOrFollower { .. })
    ));
    assert_eq!(
        l.offset_for_leader_epoch(5, 2, &epochs(10)),
        Ok(EpochEndOffset {
            epoch: 2,
            end_offset: 10
        })
    );
}

#[test]
fn preferred_read_replica_is_an_in_sync_follower_of_the_clients_rack() {
    let mut l = leader(&[1, 2, 3], 10, 10, 1);
    fetch(&mut l, 2, 10, T0);
    fetch(&mut l, 3, 10, T0);
    let rack = |id: i32| Some(["x", "a", "b", "b"][id as usize].to_string());
    assert_eq!(l.preferred_read_replica(Some("b"), 5, &rack, T0), Some(2));
    assert_eq!(l.preferred_read_replica(Some("a"), 5, &rack, T0), None);
    assert_eq!(l.preferred_read_replica(None, 5, &rack, T0), None);
    // Beyond what the followers hold: the leader.
    l.on_local_append(20, T0);
    assert_eq!(l.preferred_read_replica(Some("b"), 15, &rack, T0), None);
}

#[test]
fn proposals_carry_the_broker_epochs_the_followers_fetched_with() {
    let mut l = leader(&[1, 2], 10, 10, 1);
    fetch(&mut l, 2, 10, T0);
    fetch(&mut l, 3, 10, T0);
    let p = l.pending_proposal().unwrap();
    assert_eq!(
        p.new_isr,
        [
            IsrMember {
                broker_id: 1,
                broker_epoch: -1
            },
            IsrMember {
                broker_id: 2,
                broker_epoch: 102
            },
            IsrMember {
                broker_id: 3,
                broker_epoch: 103
            },
        ]
    );
}

#[test]
fn preferred_read_replica_must_still_hold_the_offset() {
    let mut l = leader(&[1, 2, 3], 10, 10, 1);
    fetch(&mut l, 3, 10, T0);
    // Follower 2 has deleted its records below 6.
    let req = FetchPartition {
        replica_id: 2,
        fetch_offset: 10,
        current_leader_epoch: 5,
        last_fetched_epoch: -1,
        replica_epoch: 102,
        log_start_offset: 6,
    };
    l.on_fetch(&req, 0, &epochs(10), T0).unwrap();
    let rack = |id: i32| Some(["x", "a", "b", "c"][id as usize].to_string());
    assert_eq!(l.preferred_read_replica(Some("b"), 5, &rack, T0), None);
    assert_eq!(l.preferred_read_replica(Some("b"), 6, &rack, T0), Some(2));
}
