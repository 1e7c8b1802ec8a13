//! Unit tests of the cluster rules, one scenario each, on a small cluster whose image
//! changes only by applying the records the rules return.

use uuid::Uuid;

use super::*;
use crate::record::{BrokerEndpoint, LeaderRecoveryState, MetadataRecord, NO_LEADER};
use crate::{
    AlterPartitionError, ClusterControlError, ControllerConfig, CreateTopic, ElectionError,
    InvalidAlterPartition, MetadataError, MetadataImage, PartitionImage, create_topic_records,
};

/// A controller's view: the image, the sessions, the log's next offset and a clock.
pub(super) struct Cluster {
    pub(super) image: MetadataImage,
    pub(super) heartbeats: BrokerHeartbeats,
    pub(super) config: ClusterControlConfig,
    pub(super) next_offset: i64,
    pub(super) now: i64,
    /// Every record applied, encoded: the metadata log an observer would replay.
    pub(super) log: Vec<Vec<u8>>,
}

impl Cluster {
    pub(super) fn new() -> Self {
        let config = ClusterControlConfig::default();
        Cluster {
            image: MetadataImage::new("c", 0),
            heartbeats: BrokerHeartbeats::new(config.broker_session_timeout_ms),
            config,
            next_offset: 0,
            now: 0,
            log: Vec::new(),
        }
    }

    /// Applies records as one batch; panics if the image refuses one.
    pub(super) fn apply(&mut self, records: &[MetadataRecord]) {
        for r in records {
            self.image.apply(r).unwrap_or_else(|e| panic!("{r:?}: {e}"));
            // Every record must survive Kafka's encoding.
            let bytes = r.encode();
            assert_eq!(&MetadataRecord::decode(&bytes).unwrap(), r);
            self.log.push(bytes);
        }
        self.next_offset += records.len() as i64;
    }

    pub(super) fn register(
        &mut self,
        id: i32,
        rack: &str,
        incarnation: u128,
    ) -> Result<i64, ClusterControlError> {
        let req = BrokerRegistrationRequest {
            broker_id: id,
            incarnation_id: Uuid::from_u128(incarnation),
            listeners: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: format!("b{id}"),
                port: 9092,
                security_protocol: 0,
            }],
            rack: (!rack.is_empty()).then(|| rack.to_owned()),
            features: vec![],
        };
        let (epoch, records) = register_broker(
            &self.image,
            &mut self.heartbeats,
            &self.config,
            &req,
            self.next_offset,
            self.now,
        )?;
        self.apply(&records);
        Ok(epoch)
    }

    pub(super) fn heartbeat_with(
        &mut self,
        id: i32,
        want_shut_down: bool,
        offset: i64,
    ) -> Result<BrokerHeartbeatReply, ClusterControlError> {
        let epoch = self.image.brokers.get(&id).map_or(-1, |b| b.broker_epoch);
        let req = BrokerHeartbeatRequest {
            broker_id: id,
            broker_epoch: epoch,
            current_metadata_offset: offset,
            want_fence: false,
            want_shut_down,
        };
        let (reply, records) = broker_heartbeat(
            &self.image,
            &mut self.heartbeats,
            &self.config,
            &req,
            self.next_offset,
            self.now,
        )?;
        self.apply(&records);
        Ok(reply)
    }

    /// A caught-up heartbeat.
    pub(super) fn heartbeat(&mut self, id: i32) -> BrokerHeartbeatReply {
        let offset = self.next_offset - 1;
        self.heartbeat_with(id, false, offset).unwrap()
    }

    /// Registers and unfences brokers `1..=n`, racks r1, r2, r3 in turn.
    pub(super) fn with_live_brokers(n: i32) -> Self {
        let mut c = Cluster::new();
        for id in 1..=n {
            c.register(id, &format!("r{}", (id - 1) % 3 + 1), id as u128)
                .unwrap();
        }
        for id in 1..=n {
            assert!(!c.heartbeat(id).is_fenced);
        }
        c
    }

    pub(super) fn create_topic(&mut self, name: &str, partitions: i32, rf: i16) -> Uuid {
        let id = Uuid::from_u128(0x1000 + self.image.topics.len() as u128);
        let req = CreateTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            ..Default::default()
        };
        let records =
            create_topic_records(&self.image, &req, &ControllerConfig::default(), id).unwrap();
        self.apply(&records);
        id
    }

    pub(super) fn partition(&self, topic: &str, p: usize) -> &PartitionImage {
        &self.image.topics[topic].partitions[p]
    }

    /// Fences every broker whose session expired.
    pub(super) fn expire(&mut self) -> Vec<i32> {
        let mut fenced = Vec::new();
        while let Some((id, records)) =
            fence_stale_broker(&self.image, &self.heartbeats, &self.config, self.now)
        {
            self.apply(&records);
            fenced.push(id);
        }
        fenced
    }

    /// Sends AlterPartition from the partition's leader with the given ISR.
    pub(super) fn alter_isr(
        &mut self,
        topic: &str,
        p: usize,
        isr: &[i32],
    ) -> Result<alter_partition::PartitionState, AlterPartitionError> {
        let part = self.partition(topic, p).clone();
        let req = AlterPartitionRequest {
            broker_id: part.leader,
            broker_epoch: self.image.brokers[&part.leader].broker_epoch,
            topics: vec![AlterPartitionTopic {
                topic_id: self.image.topics[topic].topic_id,
                partitions: vec![AlterPartitionData {
                    partition_index: p as i32,
                    leader_epoch: part.leader_epoch,
                    new_isr: isr
                        .iter()
                        .map(|&b| IsrMember {
                            broker_id: b,
                            broker_epoch: -1,
                        })
                        .collect(),
                    leader_recovery_state: part.leader_recovery_state,
                    partition_epoch: part.partition_epoch,
                }],
            }],
        };
        let (records, results) = super::alter_partition(&self.image, &self.config, &req).unwrap();
        self.apply(&records);
        results.into_iter().next().unwrap().result
    }
}

#[test]
fn a_registration_starts_fenced_until_a_heartbeat_shows_it_caught_up() {
    let mut c = Cluster::new();
    let epoch = c.register(1, "", 1).unwrap();
    assert_eq!(epoch, 0, "the epoch is the registration record's offset");
    assert!(c.image.brokers[&1].fenced);
    // Behind its own registration: stays fenced, nothing written.
    let reply = c.heartbeat_with(1, false, -1).unwrap();
    assert!(reply.is_fenced && !reply.is_caught_up);
    assert_eq!(c.next_offset, 1);
    let reply = c.heartbeat_with(1, false, 0).unwrap();
    assert!(!reply.is_fenced && reply.is_caught_up);
    assert!(c.image.is_active(1));
}

#[test]
fn heartbeats_from_unknown_or_stale_registrations_are_refused() {
    let mut c = Cluster::with_live_brokers(1);
    assert_eq!(
        c.heartbeat_with(7, false, 0),
        Err(ClusterControlError::BrokerNotRegistered(7))
    );
    let req = BrokerHeartbeatRequest {
        broker_id: 1,
        broker_epoch: 99,
        current_metadata_offset: 0,
        want_fence: false,
        want_shut_down: false,
    };
    assert!(matches!(
        broker_heartbeat(&c.image, &mut c.heartbeats, &c.config, &req, 0, 0),
        Err(ClusterControlError::StaleBrokerEpoch {
            requested: 99,
            current: 0,
            ..
        })
    ));
}

#[test]
fn a_new_incarnation_waits_for_the_old_session_then_replaces_it_fenced() {
    let mut c = Cluster::with_live_brokers(3);
    c.create_topic("t", 3, 3);
    let led_by_1: Vec<usize> = (0..3)
        .filter(|&p| c.partition("t", p).leader == 1)
        .collect();
    // A restart (new incarnation) while the old session is live is refused.
    assert_eq!(
        c.register(1, "r1", 100),
        Err(ClusterControlError::DuplicateBrokerRegistration(1))
    );
    c.now += 1;
    for id in 2..=3 {
        c.heartbeat(id);
    }
    c.now += c.config.broker_session_timeout_ms;
    for id in 2..=3 {
        c.heartbeat(id);
    }
    let before = c.next_offset;
    let epoch = c.register(1, "r1", 100).unwrap();
    assert!(
        epoch > before,
        "partition changes come first, then the registration"
    );
    assert!(c.image.brokers[&1].fenced);
    for p in 0..3 {
        let part = c.partition("t", p);
        assert!(!part.isr.contains(&1) && part.leader != 1, "{part:?}");
    }
    for p in led_by_1 {
        assert_eq!(c.partition("t", p).leader_epoch, 1);
    }
}

#[test]
fn registration_without_listeners_is_invalid() {
    let mut c = Cluster::new();
    let req = BrokerRegistrationRequest {
        broker_id: 1,
        incarnation_id: Uuid::nil(),
        listeners: vec![],
        rack: None,
        features: vec![],
    };
    assert!(matches!(
        register_broker(&c.image, &mut c.heartbeats, &c.config, &req, 0, 0),
        Err(ClusterControlError::InvalidRegistration { broker_id: 1, .. })
    ));
}

#[test]
fn an_expired_session_fences_the_broker_and_moves_its_leaderships() {
    let mut c = Cluster::with_live_brokers(3);
    c.create_topic("t", 6, 3);
    let before: Vec<PartitionImage> = c.image.topics["t"].partitions.clone();
    c.now += c.config.broker_session_timeout_ms;
    c.heartbeat(2);
    c.heartbeat(3);
    assert!(
        c.expire().is_empty(),
        "the timeout itself is still within the session"
    );
    c.now += 1;
    c.heartbeat(2);
    c.heartbeat(3);
    assert_eq!(c.expire(), vec![1]);
    assert!(c.image.brokers[&1].fenced);
    for (old, new) in before.iter().zip(&c.image.topics["t"].partitions) {
        assert!(!new.isr.contains(&1));
        assert_ne!(new.leader, 1);
        assert!(new.isr.contains(&new.leader));
        assert_eq!(new.partition_epoch, old.partition_epoch + 1);
        if old.leader == 1 {
            assert_eq!(new.leader_epoch, old.leader_epoch + 1);
            // The next live replica in replica order takes over.
            let expected = old.replicas.iter().copied().find(|&r| r != 1).unwrap();
            assert_eq!(new.leader, expected);
        } else {
            assert_eq!(new.leader_epoch, old.leader_epoch);
        }
    }
}

#[test]
fn the_last_isr_member_stays_and_the_partition_waits_leaderless_for_it() {
    let mut c = Cluster::with_live_brokers(2);
    c.create_topic("t", 1, 2);
    let leader = c.partition("t", 0).leader;
    let other = 3 - leader;
    c.alter_isr("t", 0, &[leader]).unwrap();
    // The leader's session expires: no clean successor.
    c.now += c.config.broker_session_timeout_ms + 1;
    c.heartbeat(other);
    assert_eq!(c.expire(), vec![leader]);
    let p = c.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone()), (NO_LEADER, vec![leader]));
    // An unclean ElectLeaders is the operator's way out; here the leader comes back
    // and is elected as it is unfenced.
    c.heartbeat(leader);
    let p = c.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone()), (leader, vec![leader]));
    assert_eq!(p.leader_epoch, 2);
}

#[test]
fn with_unclean_election_enabled_a_live_out_of_sync_replica_takes_over() {
    let mut c = Cluster::with_live_brokers(2);
    c.create_topic("t", 1, 2);
    let leader = c.partition("t", 0).leader;
    let other = 3 - leader;
    c.alter_isr("t", 0, &[leader]).unwrap();
    c.apply(
        &crate::set_topic_config_records(
            &c.image,
            "t",
            "unclean.leader.election.enable",
            Some("true"),
        )
        .unwrap(),
    );
    c.now += c.config.broker_session_timeout_ms + 1;
    c.heartbeat(other);
    c.expire();
    let p = c.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone()), (other, vec![other]));
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
    // The new leader reports its log recovered.
    let part = c.partition("t", 0).clone();
    let req = AlterPartitionRequest {
        broker_id: other,
        broker_epoch: c.image.brokers[&other].broker_epoch,
        topics: vec![AlterPartitionTopic {
            topic_id: c.image.topics["t"].topic_id,
            partitions: vec![AlterPartitionData {
                partition_index: 0,
                leader_epoch: part.leader_epoch,
                new_isr: vec![IsrMember {
                    broker_id: other,
                    broker_epoch: -1,
                }],
                leader_recovery_state: LeaderRecoveryState::Recovered,
                partition_epoch: part.partition_epoch,
            }],
        }],
    };
    let (records, results) = alter_partition(&c.image, &c.config, &req).unwrap();
    c.apply(&records);
    assert!(results[0].result.is_ok());
    assert_eq!(
        c.partition("t", 0).leader_recovery_state,
        LeaderRecoveryState::Recovered
    );
}

#[test]
fn controlled_shutdown_moves_leaderships_then_lets_the_broker_stop() {
    let mut c = Cluster::with_live_brokers(3);
    c.create_topic("t", 6, 2);
    let offset = c.next_offset - 1;
    let reply = c.heartbeat_with(1, true, offset).unwrap();
    assert!(reply.in_controlled_shutdown && !reply.should_shut_down && !reply.is_fenced);
    assert!(c.image.brokers[&1].in_controlled_shutdown);
    for p in &c.image.topics["t"].partitions {
        assert_ne!(p.leader, 1, "{p:?}");
        assert!(!p.isr.contains(&1) || p.isr == vec![1]);
    }
    // Broker 3 has not read the shutdown's records yet: broker 1 must wait.
    let offset = c.next_offset - 1;
    let reply = c.heartbeat_with(1, true, offset).unwrap();
    assert!(reply.in_controlled_shutdown && !reply.should_shut_down);
    c.heartbeat(2);
    c.heartbeat(3);
    let offset = c.next_offset - 1;
    let reply = c.heartbeat_with(1, true, offset).unwrap();
    assert!(reply.should_shut_down && reply.is_fenced);
    assert!(c.image.brokers[&1].fenced);
    // Having shut down, it comes back only by registering again.
    let reply = c.heartbeat(1);
    assert!(reply.is_fenced && !reply.should_shut_down);
    c.register(1, "r1", 1000).unwrap();
    assert!(!c.heartbeat(1).is_fenced);
    assert!(c.image.is_active(1));
}

#[test]
fn a_broker_leading_nothing_shuts_down_at_once() {
    let mut c = Cluster::with_live_brokers(2);
    let offset = c.next_offset - 1;
    let reply = c.heartbeat_with(2, true, offset).unwrap();
    assert!(reply.should_shut_down && reply.is_fenced);
}

#[test]
fn preferred_election_and_its_errors() {
    let mut c = Cluster::with_live_brokers(3);
    c.create_topic("t", 3, 3);
    let preferred = c.partition("t", 0).preferred_leader();
    // Fence the preferred leader, bring it back, and let it rejoin the ISR.
    c.now += c.config.broker_session_timeout_ms + 1;
    for id in (1..=3).filter(|&b| b != preferred) {
        c.heartbeat(id);
    }
    c.expire();
    let (_, results) = elect_leaders(&c.image, ElectionType::Preferred, Some(&[("t".into(), 0)]));
    assert_eq!(
        results[0].error,
        Some(ElectionError::PreferredLeaderNotAvailable)
    );
    c.heartbeat(preferred);
    let (_, results) = elect_leaders(&c.image, ElectionType::Preferred, Some(&[("t".into(), 0)]));
    assert_eq!(
        results[0].error,
        Some(ElectionError::PreferredLeaderNotAvailable),
        "not in the ISR yet"
    );
    let isr: Vec<i32> = c.partition("t", 0).replicas.clone();
    c.alter_isr("t", 0, &isr).unwrap();
    assert!(imbalanced_partitions(&c.image).contains(&("t".into(), 0)));

    let (records, results) = elect_leaders(
        &c.image,
        ElectionType::Preferred,
        Some(&[("t".into(), 0), ("t".into(), 9), ("u".into(), 0)]),
    );
    assert_eq!(results[0].error, None);
    assert_eq!(
        results[1].error,
        Some(ElectionError::UnknownTopicOrPartition)
    );
    assert_eq!(
        results[2].error,
        Some(ElectionError::UnknownTopicOrPartition)
    );
    c.apply(&records);
    assert_eq!(c.partition("t", 0).leader, preferred);
    let (_, results) = elect_leaders(&c.image, ElectionType::Preferred, Some(&[("t".into(), 0)]));
    assert_eq!(results[0].error, Some(ElectionError::ElectionNotNeeded));
    // For every partition, those that need nothing are left out.
    let (_, results) = elect_leaders(&c.image, ElectionType::Preferred, None);
    assert!(
        results
            .iter()
            .all(|r| r.error != Some(ElectionError::ElectionNotNeeded))
    );
}

#[test]
fn unclean_election_type_only_helps_leaderless_partitions() {
    let mut c = Cluster::with_live_brokers(2);
    c.create_topic("t", 1, 2);
    let (_, results) = elect_leaders(&c.image, ElectionType::Unclean, Some(&[("t".into(), 0)]));
    assert_eq!(results[0].error, Some(ElectionError::ElectionNotNeeded));
    let leader = c.partition("t", 0).leader;
    let other = 3 - leader;
    c.alter_isr("t", 0, &[leader]).unwrap();
    c.now += c.config.broker_session_timeout_ms + 1;
    c.heartbeat(other);
    c.expire();
    assert_eq!(c.partition("t", 0).leader, NO_LEADER);
    let (records, results) =
        elect_leaders(&c.image, ElectionType::Unclean, Some(&[("t".into(), 0)]));
    assert_eq!(results[0].error, None);
    c.apply(&records);
    let p = c.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone()), (other, vec![other]));

    // With no live replica at all, nobody is eligible.
    let mut c = Cluster::with_live_brokers(1);
    c.create_topic("t", 1, 1);
    c.now += c.config.broker_session_timeout_ms + 1;
    c.expire();
    let (_, results) = elect_leaders(&c.image, ElectionType::Unclean, Some(&[("t".into(), 0)]));
    assert_eq!(
        results[0].error,
        Some(ElectionError::EligibleLeadersNotAvailable)
    );
}

#[test]
fn automatic_rebalancing_respects_its_switch_and_its_cap() {
    let mut c = Cluster::with_live_brokers(2);
    c.create_topic("t", 4, 2);
    // Fence broker 1 and bring it back into every ISR.
    c.now += c.config.broker_session_timeout_ms + 1;
    c.heartbeat(2);
    c.expire();
    c.heartbeat(1);
    for p in 0..4 {
        c.alter_isr("t", p, &[1, 2]).unwrap();
    }
    let imbalanced = imbalanced_partitions(&c.image);
    assert_eq!(imbalanced.len(), 2);
    assert_eq!(rebalance_leaders_records(&c.image, &c.config, 1).len(), 1);
    let off = ClusterControlConfig {
        auto_leader_rebalance_enable: false,
        ..c.config
    };
    assert!(rebalance_leaders_records(&c.image, &off, 10).is_empty());
    let records = rebalance_leaders_records(&c.image, &c.config, 10);
    c.apply(&records);
    assert!(imbalanced_partitions(&c.image).is_empty());
}

#[test]
fn alter_partition_validates_like_kafka() {
    let mut c = Cluster::with_live_brokers(3);
    c.create_topic("t", 1, 3);
    let part = c.partition("t", 0).clone();
    let leader = part.leader;
    let follower = part
        .replicas
        .iter()
        .copied()
        .find(|&r| r != leader)
        .unwrap();
    let topic_id = c.image.topics["t"].topic_id;
    let run = |c: &Cluster, broker: i32, f: &dyn Fn(&mut AlterPartitionData)| {
        let mut data = AlterPartitionData {
            partition_index: 0,
            leader_epoch: part.leader_epoch,
            new_isr: vec![IsrMember {
                broker_id: leader,
                broker_epoch: -1,
            }],
            leader_recovery_state: LeaderRecoveryState::Recovered,
            partition_epoch: part.partition_epoch,
        };
        f(&mut data);
        let req = AlterPartitionRequest {
            broker_id: broker,
            broker_epoch: c.image.brokers[&broker].broker_epoch,
            topics: vec![AlterPartitionTopic {
                topic_id,
                partitions: vec![data],
            }],
        };
        alter_partition(&c.image, &c.config, &req)
            .unwrap()
            .1
            .remove(0)
            .result
    };
    use AlterPartitionError as E;
    use InvalidAlterPartition as I;
    assert_eq!(
        run(&c, leader, &|d| d.leader_epoch += 1),
        Err(E::NotController)
    );
    assert_eq!(
        run(&c, leader, &|d| d.partition_epoch += 1),
        Err(E::NotController)
    );
    assert_eq!(
        run(&c, leader, &|d| d.leader_epoch -= 1),
        Err(E::FencedLeaderEpoch)
    );
    assert_eq!(
        run(&c, follower, &|_| {}),
        Err(E::InvalidRequest(I::NotLeader))
    );
    assert_eq!(
        run(&c, leader, &|d| d.partition_epoch -= 1),
        Err(E::InvalidUpdateVersion)
    );
    assert_eq!(
        run(&c, leader, &|d| d.partition_index = 5),
        Err(E::UnknownTopicOrPartition)
    );
    assert_eq!(
        run(&c, leader, &|d| d.new_isr.push(IsrMember {
            broker_id: 42,
            broker_epoch: -1
        })),
        Err(E::InvalidRequest(I::IsrNotInReplicas))
    );
    assert_eq!(
        run(&c, leader, &|d| d.new_isr.push(d.new_isr[0])),
        Err(E::InvalidRequest(I::IsrNotInReplicas))
    );
    assert_eq!(
        run(&c, leader, &|d| d.new_isr = vec![IsrMember {
            broker_id: follower,
            broker_epoch: -1
        }]),
        Err(E::InvalidRequest(I::IsrWithoutLeader))
    );
    assert_eq!(
        run(&c, leader, &|d| {
            d.leader_recovery_state = LeaderRecoveryState::Recovering;
        }),
        Err(E::InvalidRequest(I::RecoveredToRecovering))
    );
    assert_eq!(
        run(&c, leader, &|d| d.new_isr.push(IsrMember {
            broker_id: follower,
            broker_epoch: 77
        })),
        Err(E::IneligibleReplica(follower))
    );
    // Unknown topic id.
    let req = AlterPartitionRequest {
        broker_id: leader,
        broker_epoch: c.image.brokers[&leader].broker_epoch,
        topics: vec![AlterPartitionTopic {
            topic_id: Uuid::from_u128(9),
            partitions: vec![AlterPartitionData {
                partition_index: 0,
                leader_epoch: 0,
                new_isr: vec![],
                leader_recovery_state: LeaderRecoveryState::Recovered,
                partition_epoch: 0,
            }],
        }],
    };
    assert_eq!(
        alter_partition(&c.image, &c.config, &req).unwrap().1[0].result,
        Err(E::UnknownTopicId)
    );
    let stale = AlterPartitionRequest {
        broker_epoch: 1234,
        ..req
    };
    assert!(matches!(
        alter_partition(&c.image, &c.config, &stale),
        Err(ClusterControlError::StaleBrokerEpoch { .. })
    ));

    // A shrink succeeds: partition epoch moves, leader epoch stays.
    let state = c.alter_isr("t", 0, &[leader]).unwrap();
    assert_eq!(state.isr, vec![leader]);
    assert_eq!(state.partition_epoch, part.partition_epoch + 1);
    assert_eq!(state.leader_epoch, part.leader_epoch);
    assert_eq!(c.partition("t", 0).partition_epoch, state.partition_epoch);
    // The same ISR again changes nothing and writes nothing.
    let before = c.next_offset;
    assert_eq!(c.alter_isr("t", 0, &[leader]).unwrap(), state);
    assert_eq!(c.next_offset, before);
    // A fenced broker may not join.
    c.now += c.config.broker_session_timeout_ms + 1;
    c.heartbeat(leader);
    c.expire();
    assert_eq!(
        c.alter_isr("t", 0, &[leader, follower]),
        Err(E::IneligibleReplica(follower))
    );
}

#[test]
fn placement_uses_only_live_brokers_and_spreads_racks() {
    let mut c = Cluster::with_live_brokers(4);
    c.create_topic("t", 8, 3);
    let racks = |c: &Cluster, b: i32| c.image.brokers[&b].rack.clone();
    for p in &c.image.topics["t"].partitions {
        let mut r: Vec<_> = p.replicas.iter().map(|&b| racks(&c, b)).collect();
        r.sort();
        r.dedup();
        assert_eq!(r.len(), 3, "{:?}", p.replicas);
    }
    // Fence two brokers: three replicas no longer fit.
    c.now += c.config.broker_session_timeout_ms + 1;
    c.heartbeat(1);
    c.heartbeat(2);
    c.expire();
    let req = CreateTopic {
        name: "u".into(),
        num_partitions: 1,
        replication_factor: 3,
        ..Default::default()
    };
    assert!(matches!(
        create_topic_records(
            &c.image,
            &req,
            &ControllerConfig::default(),
            Uuid::from_u128(77)
        ),
        Err(MetadataError::InvalidReplicationFactor {
            requested: 3,
            available_brokers: 2
        })
    ));
}

#[test]
fn unregistering_takes_the_broker_out_of_isrs_then_removes_it() {
    let mut c = Cluster::with_live_brokers(3);
    c.create_topic("t", 3, 3);
    let records = unregister_broker(&c.image, &mut c.heartbeats, &c.config, 2).unwrap();
    assert!(matches!(
        records.last(),
        Some(MetadataRecord::UnregisterBroker(_))
    ));
    c.apply(&records);
    assert!(!c.image.brokers.contains_key(&2));
    for p in &c.image.topics["t"].partitions {
        assert!(!p.isr.contains(&2) && p.leader != 2);
    }
    assert_eq!(
        unregister_broker(&c.image, &mut c.heartbeats, &c.config, 2),
        Err(ClusterControlError::BrokerNotRegistered(2))
    );
}

#[test]
fn create_partitions_continues_the_placement_round() {
    let mut c = Cluster::with_live_brokers(3);
    c.create_topic("t", 3, 2);
    let records = crate::create_partitions_records(&c.image, "t", 6, None).unwrap();
    c.apply(&records);
    let mut leaders = std::collections::BTreeMap::new();
    for p in &c.image.topics["t"].partitions {
        assert_eq!(p.replicas.len(), 2);
        assert_ne!(p.replicas[0], p.replicas[1]);
        *leaders.entry(p.leader).or_insert(0) += 1;
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
    // The same topic id places the same way: placement is deterministic.
    let again = crate::create_partitions_records(&c.image, "t", 7, None).unwrap();
    assert_eq!(
        again,
        crate::create_partitions_records(&c.image, "t", 7, None).unwrap()
    );
}
