//! A seeded randomized run of the cluster rules: 3–5 brokers registering, heartbeating,
//! dying, restarting, shutting down under control, with AlterPartition, elections,
//! rebalancing and partition reassignments (KIP-455: moves, cancellations) in between, and
//! now and then a controller failover (fresh sessions).
//! Every record is applied to the image, and after every step the invariants below must
//! hold; at the end, replaying the encoded records from scratch must rebuild the same
//! image. A failure prints its seed; `STRATA_SIM_SEED=<n>`
//! replays one run.
//!
//! Invariants, for every partition:
//! - the ISR is non-empty, without duplicates, and within the replicas;
//! - a leader is in the ISR and live (registered, unfenced, not shutting down), so no
//!   fenced broker leads;
//! - a leaderless partition has no live ISR member (the controller elects whenever it
//!   cleanly can), and an ISR of more than one holds only live brokers;
//! - leader epoch and partition epoch never go back, the leader epoch moves on every
//!   leader change, and the partition epoch on every change;
//! - with unclean election off (and no UNCLEAN ElectLeaders), a new leader was in the
//!   previous ISR, or in the ISR of the change that completed a reassignment;
//! - replicas are distinct; the replicas being added and removed are replicas, and none is
//!   both; a partition being moved lists its latest target then the replicas being
//!   removed; a completed move has exactly its target as replicas, a cancelled one its
//!   replicas from before the move; a replica leaving the list moves the leader epoch on.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::tests::Cluster;
use super::*;
use crate::record::{LeaderRecoveryState, MetadataRecord, NO_LEADER};
use crate::{
    ControllerConfig, CreateTopic, MetadataImage, PartitionImage, create_topic_records,
    set_topic_config_records,
};

/// splitmix64: small, seedable, and enough for choosing steps.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The simulated broker process, as far as the controller can tell.
#[derive(Debug, Clone, Copy)]
struct Process {
    /// Running: it heartbeats. A stopped process only comes back by registering anew.
    running: bool,
    /// It asked to shut down and keeps asking until told it may.
    stopping: bool,
    /// Its incarnation id.
    incarnation: u128,
}

type Snapshot = BTreeMap<(Uuid, i32), PartitionImage>;

/// What a run exercised, so the test can show it reached the interesting paths.
#[derive(Debug, Default)]
struct Coverage {
    /// Brokers fenced (session expiry or end of controlled shutdown).
    fences: usize,
    /// Controlled shutdowns that ended with "shut down now".
    clean_shutdowns: usize,
    /// Leader changes to a broker.
    elections: usize,
    /// Partitions that went leaderless.
    offline: usize,
    /// Leader changes to a broker outside the previous ISR.
    unclean_elections: usize,
    /// AlterPartition entries accepted and refused.
    alter_ok: usize,
    alter_refused: usize,
    /// Reassignments started, refused, completed (at once or later) and cancelled.
    moves_started: usize,
    moves_refused: usize,
    moves_completed: usize,
    moves_cancelled: usize,
}

/// The latest target of every partition being moved, by (topic id, partition).
type Targets = BTreeMap<(Uuid, i32), Vec<i32>>;

fn snapshot(c: &Cluster) -> Snapshot {
    all_partitions(&c.image)
        .map(|(t, p)| ((t.topic_id, p.partition), p.clone()))
        .collect()
}

fn check(
    c: &Cluster,
    before: &Snapshot,
    targets: &mut Targets,
    unclean_allowed: bool,
    step: &str,
    cov: &mut Coverage,
) {
    for (t, p) in all_partitions(&c.image) {
        let at = format!("{step}: {}-{} {p:?}", t.name, p.partition);
        assert!(!p.replicas.is_empty(), "{at}");
        let mut replicas = p.replicas.clone();
        replicas.sort_unstable();
        replicas.dedup();
        assert_eq!(replicas.len(), p.replicas.len(), "duplicate replica: {at}");
        assert!(
            p.adding_replicas
                .iter()
                .chain(&p.removing_replicas)
                .all(|r| p.replicas.contains(r)),
            "adding or removing outside the replicas: {at}"
        );
        assert!(
            !p.adding_replicas
                .iter()
                .any(|r| p.removing_replicas.contains(r)),
            "a replica both added and removed: {at}"
        );
        let key = (t.topic_id, p.partition);
        if p.is_reassigning() {
            let target = targets
                .get(&key)
                .unwrap_or_else(|| panic!("moving with no target: {at}"));
            let mut listed = target.clone();
            listed.extend(&p.removing_replicas);
            assert_eq!(
                &p.replicas, &listed,
                "not the target then the removing: {at}"
            );
        } else if let Some(target) = targets.remove(&key) {
            assert_eq!(
                p.replicas, target,
                "a completed move is not at its target: {at}"
            );
            cov.moves_completed += 1;
        }
        assert!(!p.isr.is_empty(), "empty ISR: {at}");
        let mut isr = p.isr.clone();
        isr.sort_unstable();
        isr.dedup();
        assert_eq!(isr.len(), p.isr.len(), "duplicate ISR member: {at}");
        assert!(
            p.isr.iter().all(|b| p.replicas.contains(b)),
            "ISR outside replicas: {at}"
        );
        if p.leader == NO_LEADER {
            assert!(
                !p.isr.iter().any(|&b| c.image.is_active(b)),
                "leaderless with a live ISR member: {at}"
            );
        } else {
            assert!(p.isr.contains(&p.leader), "leader outside the ISR: {at}");
            assert!(c.image.is_active(p.leader), "leader not live: {at}");
        }
        if p.isr.len() > 1 {
            assert!(
                p.isr.iter().all(|&b| c.image.is_active(b)),
                "dead member in a larger ISR: {at}"
            );
        }
        if p.leader_recovery_state == LeaderRecoveryState::Recovering {
            assert_eq!(p.isr.len(), 1, "a recovering leader grew its ISR: {at}");
        }
        let Some(old) = before.get(&(t.topic_id, p.partition)) else {
            continue;
        };
        assert!(
            p.leader_epoch >= old.leader_epoch,
            "leader epoch went back: {at}"
        );
        assert!(
            p.partition_epoch >= old.partition_epoch,
            "partition epoch went back: {at}"
        );
        if p != old {
            assert!(
                p.partition_epoch > old.partition_epoch,
                "unversioned change: {at}"
            );
        }
        if old.replicas.iter().any(|r| !p.replicas.contains(r)) {
            // A replica left: it must see a new leader epoch to stop fetching.
            assert!(
                p.leader_epoch > old.leader_epoch,
                "a replica left, the leader epoch did not move: {at}"
            );
        }
        if p.leader != old.leader {
            if p.leader == NO_LEADER {
                cov.offline += 1;
            } else {
                cov.elections += 1;
                if !old.isr.contains(&p.leader) {
                    cov.unclean_elections += 1;
                }
            }
            assert!(
                p.leader_epoch > old.leader_epoch,
                "leader changed, epoch did not: {at}"
            );
            // Completing a move may elect a target replica the same change put in the ISR.
            let completed = old.is_reassigning() && !p.is_reassigning();
            if p.leader != NO_LEADER
                && !unclean_allowed
                && !(completed && p.isr.contains(&p.leader))
            {
                assert!(
                    old.isr.contains(&p.leader),
                    "unclean leader {}: was {old:?}: {at}",
                    p.leader
                );
            }
        }
    }
}

fn run(seed: u64, steps: usize, cov: &mut Coverage) {
    let mut rng = Rng(seed);
    let mut c = Cluster::new();
    let brokers = 3 + rng.below(3) as i32;
    let unclean_config = rng.chance(25);
    c.config.unclean_leader_election_enable = unclean_config;
    let mut procs: BTreeMap<i32, Process> = BTreeMap::new();
    let mut next_incarnation = 1u128;
    for id in 1..=brokers {
        let rack = format!("r{}", rng.below(3));
        c.register(id, &rack, next_incarnation).unwrap();
        procs.insert(
            id,
            Process {
                running: true,
                stopping: false,
                incarnation: next_incarnation,
            },
        );
        next_incarnation += 1;
    }
    let mut topics = 0;
    let mut targets = Targets::new();
    for step in 0..steps {
        let before = snapshot(&c);
        let before_fenced: Vec<i32> = c
            .image
            .brokers
            .values()
            .filter(|b| b.fenced)
            .map(|b| b.node_id)
            .collect();
        let mut unclean_allowed =
            unclean_config || c.image.topics.values().any(|t| c.config.unclean_enabled(t));
        let id = 1 + rng.below(brokers as u64) as i32;
        let what = rng.below(112);
        let label = format!("seed {seed} step {step} op {what} broker {id}");
        match what {
            // Time passes; the running brokers mostly keep up.
            0..=14 => {
                c.now += rng.below(4_000) as i64;
                for (&b, p) in &procs {
                    if p.running && c.image.brokers.contains_key(&b) && rng.chance(80) {
                        let offset = c.next_offset - 1 - rng.below(2) as i64;
                        let _ = c.heartbeat_with(b, p.stopping, offset);
                    }
                }
            }
            15..=24 => {
                c.expire();
            }
            // One heartbeat, sometimes lagging.
            25..=44 => {
                let p = procs[&id];
                if p.running && c.image.brokers.contains_key(&id) {
                    let lag = if rng.chance(20) {
                        rng.below(5) as i64
                    } else {
                        0
                    };
                    let reply = c
                        .heartbeat_with(id, p.stopping, c.next_offset - 1 - lag)
                        .unwrap();
                    if reply.should_shut_down {
                        cov.clean_shutdowns += usize::from(p.stopping);
                        procs.get_mut(&id).unwrap().running = false;
                        procs.get_mut(&id).unwrap().stopping = false;
                    }
                }
            }
            // A process dies, asks to stop, or (re)starts.
            45..=49 => procs.get_mut(&id).unwrap().running = false,
            50..=53 => {
                if procs[&id].running {
                    procs.get_mut(&id).unwrap().stopping = true;
                }
            }
            54..=59 => {
                let restart = !procs[&id].running || rng.chance(20);
                let incarnation = if restart {
                    next_incarnation
                } else {
                    procs[&id].incarnation
                };
                next_incarnation += 1;
                let rack = format!("r{}", rng.below(3));
                if c.register(id, &rack, incarnation).is_ok() {
                    procs.insert(
                        id,
                        Process {
                            running: true,
                            stopping: false,
                            incarnation,
                        },
                    );
                }
            }
            60..=64 => {
                if topics < 6 {
                    let partitions = 1 + rng.below(4) as i32;
                    let rf = 1 + rng.below(3) as i16;
                    let name = format!("t{topics}");
                    let req = CreateTopic {
                        name: name.clone(),
                        num_partitions: partitions,
                        replication_factor: rf,
                        ..Default::default()
                    };
                    let topic_id = Uuid::from_u128(0x100 + topics as u128);
                    if let Ok(records) =
                        create_topic_records(&c.image, &req, &ControllerConfig::default(), topic_id)
                    {
                        c.apply(&records);
                        topics += 1;
                        if rng.chance(15) {
                            let records = set_topic_config_records(
                                &c.image,
                                &name,
                                "unclean.leader.election.enable",
                                Some("true"),
                            )
                            .unwrap();
                            c.apply(&records);
                        }
                    }
                }
            }
            // A leader shrinks or expands its ISR, sometimes from stale state.
            65..=84 => {
                let parts: Vec<(String, usize)> = all_partitions(&c.image)
                    .filter(|(_, p)| p.leader != NO_LEADER)
                    .map(|(t, p)| (t.name.clone(), p.partition as usize))
                    .collect();
                if !parts.is_empty() {
                    let (topic, p) = parts[rng.below(parts.len() as u64) as usize].clone();
                    let part = c.partition(&topic, p).clone();
                    let mut isr = vec![part.leader];
                    for &r in &part.replicas {
                        if r != part.leader && rng.chance(60) {
                            isr.push(r);
                        }
                    }
                    let mut data = AlterPartitionData {
                        partition_index: p as i32,
                        leader_epoch: part.leader_epoch,
                        new_isr: isr
                            .iter()
                            .map(|&b| IsrMember {
                                broker_id: b,
                                broker_epoch: -1,
                            })
                            .collect(),
                        leader_recovery_state: LeaderRecoveryState::Recovered,
                        partition_epoch: part.partition_epoch,
                    };
                    if rng.chance(10) {
                        data.partition_epoch -= 1;
                    }
                    if rng.chance(10) {
                        data.leader_epoch -= 1;
                    }
                    let req = AlterPartitionRequest {
                        broker_id: part.leader,
                        broker_epoch: c.image.brokers[&part.leader].broker_epoch,
                        topics: vec![AlterPartitionTopic {
                            topic_id: c.image.topics[&topic].topic_id,
                            partitions: vec![data],
                        }],
                    };
                    let (records, results) = alter_partition(&c.image, &c.config, &req).unwrap();
                    c.apply(&records);
                    match &results[0].result {
                        Ok(state) => {
                            cov.alter_ok += 1;
                            assert_eq!(state.isr, c.partition(&topic, p).isr, "{label}");
                        }
                        Err(_) => cov.alter_refused += 1,
                    }
                }
            }
            85..=89 => {
                let (records, _) = elect_leaders(&c.image, ElectionType::Preferred, None);
                c.apply(&records);
            }
            90..=92 => {
                let (records, _) = elect_leaders(&c.image, ElectionType::Unclean, None);
                unclean_allowed = true;
                c.apply(&records);
            }
            93..=97 => {
                let records = rebalance_leaders_records(&c.image, &c.config, 3);
                c.apply(&records);
            }
            98 => {
                // The active controller fails over: the new one has no sessions and
                // starts everyone's afresh.
                c.heartbeats = BrokerHeartbeats::new(c.config.broker_session_timeout_ms);
                c.heartbeats.activate(&c.image, c.now, None);
            }
            99 => {
                if c.image.brokers.contains_key(&id) && rng.chance(60) {
                    let records =
                        unregister_broker(&c.image, &mut c.heartbeats, &c.config, id).unwrap();
                    c.apply(&records);
                    procs.get_mut(&id).unwrap().running = false;
                }
            }
            // A reassignment to 1-3 brokers, now and then naming one never registered.
            100..=107 => {
                let parts: Vec<(String, i32, Uuid)> = all_partitions(&c.image)
                    .map(|(t, p)| (t.name.clone(), p.partition, t.topic_id))
                    .collect();
                if !parts.is_empty() {
                    let (topic, p, topic_id) =
                        parts[rng.below(parts.len() as u64) as usize].clone();
                    let mut target: Vec<i32> = Vec::new();
                    for _ in 0..1 + rng.below(3) {
                        let b = if rng.chance(5) {
                            brokers + 1
                        } else {
                            1 + rng.below(brokers as u64) as i32
                        };
                        if !target.contains(&b) {
                            target.push(b);
                        }
                    }
                    let allow_rf_change = rng.chance(80);
                    let req = ReassignmentTarget {
                        topic,
                        partition: p,
                        replicas: Some(target.clone()),
                    };
                    let (records, results) =
                        alter_partition_reassignments(&c.image, &c.config, allow_rf_change, &[req]);
                    c.apply(&records);
                    if results[0].error.is_none() {
                        cov.moves_started += 1;
                        targets.insert((topic_id, p), target);
                    } else {
                        assert!(records.is_empty(), "{label}");
                        cov.moves_refused += 1;
                    }
                }
            }
            // Cancel a pending move: back to the replicas before it.
            _ => {
                let moving: Vec<(String, i32, Uuid)> = all_partitions(&c.image)
                    .filter(|(_, p)| p.is_reassigning())
                    .map(|(t, p)| (t.name.clone(), p.partition, t.topic_id))
                    .collect();
                if !moving.is_empty() {
                    let (topic, p, topic_id) =
                        moving[rng.below(moving.len() as u64) as usize].clone();
                    let old = c.partition(&topic, p as usize).clone();
                    let listed = list_partition_reassignments(&c.image, None);
                    assert!(
                        listed
                            .iter()
                            .any(|(t, ps)| t == &topic && ps.iter().any(|o| o.partition == p)),
                        "{label}: a move not listed"
                    );
                    let req = ReassignmentTarget {
                        topic: topic.clone(),
                        partition: p,
                        replicas: None,
                    };
                    let (records, results) =
                        alter_partition_reassignments(&c.image, &c.config, true, &[req]);
                    c.apply(&records);
                    if results[0].error.is_none() {
                        cov.moves_cancelled += 1;
                        targets.remove(&(topic_id, p));
                        let original: Vec<i32> = old
                            .replicas
                            .iter()
                            .copied()
                            .filter(|r| !old.adding_replicas.contains(r))
                            .collect();
                        let now = c.partition(&topic, p as usize);
                        assert_eq!(now.replicas, original, "{label}: cancelled");
                        assert!(!now.is_reassigning(), "{label}: cancelled");
                    }
                }
            }
        }
        let fenced_before = before_fenced;
        cov.fences += c
            .image
            .brokers
            .values()
            .filter(|b| b.fenced && !fenced_before.contains(&b.node_id))
            .count();
        check(&c, &before, &mut targets, unclean_allowed, &label, cov);
    }
    // A broker following the log as an observer rebuilds exactly the controller's image.
    let mut replayed = MetadataImage::new("c", 0);
    for bytes in &c.log {
        replayed
            .apply(&MetadataRecord::decode(bytes).unwrap())
            .unwrap();
    }
    assert_eq!(replayed, c.image, "seed {seed}: replay differs");
}

#[test]
fn seeded_cluster_runs_keep_the_invariants() {
    let mut cov = Coverage::default();
    if let Some(seed) = std::env::var("STRATA_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed, 400, &mut cov);
        return;
    }
    for seed in 0..300u64 {
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed, 400, &mut cov)));
        if let Err(e) = result {
            eprintln!("cluster simulation failed; replay with STRATA_SIM_SEED={seed}");
            std::panic::resume_unwind(e);
        }
    }
    eprintln!("{cov:?}");
    // The runs reached every path the invariants are about.
    assert!(cov.fences > 300 && cov.clean_shutdowns > 50, "{cov:?}");
    assert!(
        cov.elections > 1000 && cov.offline > 100 && cov.unclean_elections > 10,
        "{cov:?}"
    );
    assert!(cov.alter_ok > 1000 && cov.alter_refused > 100, "{cov:?}");
    assert!(
        cov.moves_started > 1000
            && cov.moves_refused > 50
            && cov.moves_completed > 300
            && cov.moves_cancelled > 50,
        "{cov:?}"
    );
}
