//! The `MetadataImage`: cluster state as of some offset of the metadata log, built only by
//! applying records, so a broker replaying the log and the controller writing it agree.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use crate::ApplyError;
use crate::client_quotas::ClientQuotas;
use crate::record::{
    BrokerEndpoint, BrokerRegistrationChangeRecord, ConfigRecord, FencingChange,
    LeaderRecoveryState, MetadataRecord, NO_LEADER_CHANGE, PartitionChangeRecord, PartitionRecord,
    ProducerIdsRecord, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC, RegisterBrokerRecord,
    RemoveTopicRecord, TopicRecord,
};

/// A snapshot of cluster metadata. Brokers serve Metadata, DescribeConfigs and friends
/// from it; it is shared as `Arc<MetadataImage>` and never mutated once published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// Kafka's 22-character cluster id from `meta.properties`; clients see it in Metadata.
    pub cluster_id: String,
    /// The active controller's node id, reported in Metadata responses.
    pub controller_id: i32,
    /// Registered brokers by node id.
    pub brokers: BTreeMap<i32, BrokerImage>,
    /// Live topics by name: Metadata requests arrive by name.
    pub topics: BTreeMap<String, TopicImage>,
    /// KIP-516: Fetch v13+ and DeleteTopics v6+ address topics by id.
    pub topic_names_by_id: HashMap<Uuid, String>,
    /// The first producer id of the next block to allocate (Kafka's
    /// `ProducerIdControlManager.nextProducerBlock`); 0 until a `ProducerIdsRecord`.
    pub next_producer_id: i64,
    /// Dynamic broker configs by resource name: a broker id (`"1"`), or `""` for the
    /// cluster-wide default that every broker without its own value inherits (Kafka's
    /// `ConfigResource` of type BROKER). Only keys with a value are kept, and a resource
    /// left with none is dropped, so equal states compare equal.
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// KIP-546: the client quotas of each user and client-id entity, from
    /// `ClientQuotaRecord`s; brokers enforce them and DescribeClientQuotas reads them.
    pub client_quotas: ClientQuotas,
    /// ACL bindings by id (KIP-801: `AccessControlEntryRecord`s); the authorizer reads
    /// them, DeleteAcls removes by id.
    pub acls: BTreeMap<Uuid, crate::acl::AclBinding>,
    /// KIP-554: each user's SCRAM credentials, from `UserScramCredentialRecord`s;
    /// DescribeUserScramCredentials reads them (Strata does not authenticate with them yet).
    pub scram: crate::scram::ScramCredentials,
}

/// A registered broker, as clients need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerImage {
    /// The broker's `node.id`.
    pub node_id: i32,
    /// Advertised host of its first listener.
    pub host: String,
    /// Advertised port of its first listener.
    pub port: u16,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
    /// KIP-631: the epoch of the registration (the offset of its record), which
    /// heartbeats, `ProducerIdsRecord`s and fencing records must match.
    pub broker_epoch: i64,
    /// KIP-631: random per process start; a new one means the broker restarted.
    pub incarnation_id: Uuid,
    /// Every listener the broker registered, in its order (`host`/`port` are the first).
    pub endpoints: Vec<BrokerEndpoint>,
    /// A fenced broker leads nothing and is in no ISR but as its last member (KIP-631).
    pub fenced: bool,
    /// The broker is moving its leaderships away before it stops; like a fenced one it
    /// may not lead or join an ISR.
    pub in_controlled_shutdown: bool,
}

impl BrokerImage {
    /// Kafka's `ClusterControlManager.isActive`: registered, unfenced and not shutting
    /// down, so it may lead, join an ISR and take new replicas.
    #[must_use]
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// A live topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    /// The topic name.
    pub name: String,
    /// KIP-516 topic id.
    pub topic_id: Uuid,
    /// Partitions, indexed by partition id (`partitions[i].partition == i`).
    pub partitions: Vec<PartitionImage>,
    /// Config overrides only; defaults come from `topic_config_defaults` and the broker.
    pub configs: BTreeMap<String, String>,
}

/// One partition's assignment and leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionImage {
    /// The partition id.
    pub partition: i32,
    /// The leader's node id, or -1.
    pub leader: i32,
    /// The leader epoch clients send back in Fetch/ListOffsets (KIP-320); bumped by
    /// every record that sets the leader.
    pub leader_epoch: i32,
    /// KIP-497: bumped by every change, so a stale AlterPartition is refused.
    pub partition_epoch: i32,
    /// All replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// KIP-455 replicas being moved off the partition.
    pub removing_replicas: Vec<i32>,
    /// KIP-455 replicas being moved onto the partition.
    pub adding_replicas: Vec<i32>,
    /// KIP-704: whether an uncleanly elected leader is still recovering.
    pub leader_recovery_state: LeaderRecoveryState,
}

impl PartitionImage {
    /// The preferred leader: the first replica, or -1 without replicas.
    #[must_use]
    pub fn preferred_leader(&self) -> i32 {
        self.replicas.first().copied().unwrap_or(-1)
    }

    /// KIP-455: whether replicas are being moved onto or off the partition.
    #[must_use]
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// Kafka's `PartitionRegistration.merge`: the partition after `change`. The partition
    /// epoch always moves on; the leader epoch moves on whenever the leader is set, even
    /// to the same broker.
    #[must_use]
    pub fn merge(&self, change: &PartitionChangeRecord) -> PartitionImage {
        let mut next = self.clone();
        if let Some(isr) = &change.isr {
            next.isr.clone_from(isr);
        }
        if change.leader != NO_LEADER_CHANGE {
            next.leader = change.leader;
            next.leader_epoch = self.leader_epoch.wrapping_add(1);
        }
        if let Some(replicas) = &change.replicas {
            next.replicas.clone_from(replicas);
        }
        if let Some(removing) = &change.removing_replicas {
            next.removing_replicas.clone_from(removing);
        }
        if let Some(adding) = &change.adding_replicas {
            next.adding_replicas.clone_from(adding);
        }
        if let Some(state) = change.leader_recovery_state {
            next.leader_recovery_state = state;
        }
        next.partition_epoch = self.partition_epoch.wrapping_add(1);
        next
    }
}

impl MetadataImage {
    /// An empty image for a cluster: no brokers, no topics.
    pub fn new(cluster_id: impl Into<String>, controller_id: i32) -> Self {
        MetadataImage {
            cluster_id: cluster_id.into(),
            controller_id,
            ..Default::default()
        }
    }

    /// The live topic with this id.
    pub fn topic_by_id(&self, topic_id: Uuid) -> Option<&TopicImage> {
        self.topic_names_by_id
            .get(&topic_id)
            .and_then(|name| self.topics.get(name))
    }

    /// Whether `broker_id` is registered, unfenced and not in controlled shutdown.
    pub fn is_active(&self, broker_id: i32) -> bool {
        self.brokers
            .get(&broker_id)
            .is_some_and(BrokerImage::is_active)
    }

    /// Applies one record. Pure: no I/O, no clock.
    ///
    /// # Errors
    ///
    /// An [`ApplyError`] when the record contradicts the image (for example a partition
    /// of a topic that does not exist). The image is then unchanged, so callers applying
    /// a multi-record operation should apply to a clone and publish it only on success.
    pub fn apply(&mut self, record: &MetadataRecord) -> Result<(), ApplyError> {
        match record {
            MetadataRecord::RegisterBroker(r) => self.apply_register_broker(r),
            MetadataRecord::UnregisterBroker(r) => {
                self.registered_broker(r.broker_id, r.broker_epoch)?;
                self.brokers.remove(&r.broker_id);
                Ok(())
            }
            MetadataRecord::Topic(r) => self.apply_topic(r),
            MetadataRecord::Partition(r) => self.apply_partition(r),
            MetadataRecord::Config(r) => self.apply_config(r),
            MetadataRecord::PartitionChange(r) => self.apply_partition_change(r),
            MetadataRecord::FenceBroker(r) => {
                self.registered_broker(r.broker_id, r.broker_epoch)?.fenced = true;
                Ok(())
            }
            MetadataRecord::UnfenceBroker(r) => {
                self.registered_broker(r.broker_id, r.broker_epoch)?.fenced = false;
                Ok(())
            }
            MetadataRecord::RemoveTopic(r) => self.apply_remove_topic(r),
            MetadataRecord::ProducerIds(r) => self.apply_producer_ids(r),
            MetadataRecord::ClientQuota(r) => {
                self.client_quotas.apply(r);
                Ok(())
            }
            MetadataRecord::UserScramCredential(r) => {
                self.scram.apply_set(r);
                Ok(())
            }
            MetadataRecord::RemoveUserScramCredential(r) => {
                self.scram.apply_remove(r);
                Ok(())
            }
            MetadataRecord::BrokerRegistrationChange(r) => self.apply_broker_registration_change(r),
            MetadataRecord::AccessControlEntry(r) => {
                self.acls.insert(r.id, r.binding.clone());
                Ok(())
            }
            // Kafka's AclControlManager treats an unknown id as a corrupt log; here the
            // binding is simply gone either way.
            MetadataRecord::RemoveAccessControlEntry(r) => {
                self.acls.remove(&r.id);
                Ok(())
            }
        }
    }

    /// The registration a broker-state record refers to. Like Kafka's
    /// `ClusterControlManager.replayRegistrationChange`, a record for an unknown broker or
    /// another registration's epoch is an inconsistency, not something to skip.
    fn registered_broker(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<&mut BrokerImage, ApplyError> {
        let broker = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(ApplyError::UnknownBroker(broker_id))?;
        if broker.broker_epoch != broker_epoch {
            return Err(ApplyError::BrokerEpochMismatch {
                broker_id,
                record_epoch: broker_epoch,
                registered_epoch: broker.broker_epoch,
            });
        }
        Ok(broker)
    }

    fn apply_broker_registration_change(
        &mut self,
        r: &BrokerRegistrationChangeRecord,
    ) -> Result<(), ApplyError> {
        let broker = self.registered_broker(r.broker_id, r.broker_epoch)?;
        match r.fenced {
            FencingChange::None => {}
            FencingChange::Fence => broker.fenced = true,
            FencingChange::Unfence => broker.fenced = false,
        }
        if r.in_controlled_shutdown {
            broker.in_controlled_shutdown = true;
        }
        Ok(())
    }

    fn apply_partition_change(&mut self, r: &PartitionChangeRecord) -> Result<(), ApplyError> {
        let topic = self.topic_mut(r.topic_id)?;
        let partition = usize::try_from(r.partition_id)
            .ok()
            .and_then(|i| topic.partitions.get_mut(i))
            .ok_or(ApplyError::UnknownPartition {
                topic_id: r.topic_id,
                partition: r.partition_id,
            })?;
        *partition = partition.merge(r);
        Ok(())
    }

    fn apply_register_broker(&mut self, r: &RegisterBrokerRecord) -> Result<(), ApplyError> {
        let endpoint = r
            .endpoints
            .first()
            .ok_or(ApplyError::NoEndpoints(r.broker_id))?;
        // A re-registration replaces the old one whole (KIP-631).
        self.brokers.insert(
            r.broker_id,
            BrokerImage {
                node_id: r.broker_id,
                host: endpoint.host.clone(),
                port: endpoint.port,
                rack: r.rack.clone(),
                broker_epoch: r.broker_epoch,
                incarnation_id: r.incarnation_id,
                endpoints: r.endpoints.clone(),
                fenced: r.fenced,
                in_controlled_shutdown: r.in_controlled_shutdown,
            },
        );
        Ok(())
    }

    /// Kafka's `ProducerIdControlManager.replay`: the next block only moves forward, so an
    /// id is never handed out twice.
    fn apply_producer_ids(&mut self, r: &ProducerIdsRecord) -> Result<(), ApplyError> {
        if r.next_producer_id <= self.next_producer_id {
            return Err(ApplyError::ProducerIdsNotIncreasing {
                next_producer_id: r.next_producer_id,
                current: self.next_producer_id,
            });
        }
        self.next_producer_id = r.next_producer_id;
        Ok(())
    }

    fn apply_topic(&mut self, r: &TopicRecord) -> Result<(), ApplyError> {
        if self.topics.contains_key(&r.name) {
            return Err(ApplyError::DuplicateTopicName(r.name.clone()));
        }
        if self.topic_names_by_id.contains_key(&r.topic_id) {
            return Err(ApplyError::DuplicateTopicId(r.topic_id));
        }
        self.topic_names_by_id.insert(r.topic_id, r.name.clone());
        self.topics.insert(
            r.name.clone(),
            TopicImage {
                name: r.name.clone(),
                topic_id: r.topic_id,
                partitions: Vec::new(),
                configs: BTreeMap::new(),
            },
        );
        Ok(())
    }

    fn topic_mut(&mut self, topic_id: Uuid) -> Result<&mut TopicImage, ApplyError> {
        let name = self
            .topic_names_by_id
            .get(&topic_id)
            .ok_or(ApplyError::UnknownTopicId(topic_id))?;
        self.topics
            .get_mut(name)
            .ok_or(ApplyError::UnknownTopicId(topic_id))
    }

    fn apply_partition(&mut self, r: &PartitionRecord) -> Result<(), ApplyError> {
        let topic = self.topic_mut(r.topic_id)?;
        let existing = topic.partitions.len();
        let partition = PartitionImage {
            partition: r.partition_id,
            leader: r.leader,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            replicas: r.replicas.clone(),
            isr: r.isr.clone(),
            removing_replicas: r.removing_replicas.clone(),
            adding_replicas: r.adding_replicas.clone(),
            leader_recovery_state: r.leader_recovery_state,
        };
        // A PartitionRecord states the partition's whole state, so one for an existing
        // partition replaces it; a new one must be the next id.
        match usize::try_from(r.partition_id) {
            Ok(i) if i < existing => topic.partitions[i] = partition,
            Ok(i) if i == existing => topic.partitions.push(partition),
            _ => {
                return Err(ApplyError::PartitionOutOfSequence {
                    topic_id: r.topic_id,
                    partition: r.partition_id,
                    existing,
                });
            }
        }
        Ok(())
    }

    fn apply_config(&mut self, r: &ConfigRecord) -> Result<(), ApplyError> {
        if r.resource_type == RESOURCE_TYPE_BROKER {
            let configs = self
                .broker_configs
                .entry(r.resource_name.clone())
                .or_default();
            match &r.value {
                Some(v) => configs.insert(r.name.clone(), v.clone()),
                None => configs.remove(&r.name),
            };
            if configs.is_empty() {
                self.broker_configs.remove(&r.resource_name);
            }
            return Ok(());
        }
        if r.resource_type != RESOURCE_TYPE_TOPIC {
            // Other resource types (client metrics, groups) are not part of the image. A
            // metadata snapshot holds only the image, so once a snapshot lets the log
            // segment holding such a record go, the record is gone (see `image_records.rs`).
            return Ok(());
        }
        let topic = self
            .topics
            .get_mut(&r.resource_name)
            .ok_or_else(|| ApplyError::UnknownTopicName(r.resource_name.clone()))?;
        match &r.value {
            Some(v) => topic.configs.insert(r.name.clone(), v.clone()),
            None => topic.configs.remove(&r.name),
        };
        Ok(())
    }

    fn apply_remove_topic(&mut self, r: &RemoveTopicRecord) -> Result<(), ApplyError> {
        let name = self
            .topic_names_by_id
            .remove(&r.topic_id)
            .ok_or(ApplyError::UnknownTopicId(r.topic_id))?;
        // Partitions and config overrides live inside the TopicImage, so they go with it.
        self.topics.remove(&name);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BrokerEndpoint, RESOURCE_TYPE_BROKER};

    fn topic(name: &str, id: u128) -> MetadataRecord {
        MetadataRecord::Topic(TopicRecord {
            name: name.into(),
            topic_id: Uuid::from_u128(id),
        })
    }
    fn partition(id: u128, p: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: p,
            topic_id: Uuid::from_u128(id),
            replicas: vec![1],
            isr: vec![1],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        })
    }
    fn config(ty: i8, resource: &str, key: &str, value: Option<&str>) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecord {
            resource_type: ty,
            resource_name: resource.into(),
            name: key.into(),
            value: value.map(Into::into),
        })
    }

    #[test]
    fn topic_partitions_and_configs_apply() {
        let mut img = MetadataImage::new("c", 1);
        for r in [
            topic("a", 1),
            partition(1, 0),
            partition(1, 1),
            config(RESOURCE_TYPE_TOPIC, "a", "retention.ms", Some("1")),
        ] {
            img.apply(&r).unwrap();
        }
        let t = &img.topics["a"];
        assert_eq!(t.partitions.len(), 2);
        assert_eq!(t.partitions[1].partition, 1);
        assert_eq!(t.configs["retention.ms"], "1");
        assert_eq!(img.topic_by_id(Uuid::from_u128(1)).unwrap().name, "a");

        img.apply(&config(RESOURCE_TYPE_TOPIC, "a", "retention.ms", None))
            .unwrap();
        assert!(img.topics["a"].configs.is_empty());
    }

    #[test]
    fn remove_topic_drops_partitions_and_configs_and_frees_the_name() {
        let mut img = MetadataImage::new("c", 1);
        img.apply(&topic("a", 1)).unwrap();
        img.apply(&partition(1, 0)).unwrap();
        img.apply(&config(
            RESOURCE_TYPE_TOPIC,
            "a",
            "cleanup.policy",
            Some("compact"),
        ))
        .unwrap();
        img.apply(&MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: Uuid::from_u128(1),
        }))
        .unwrap();
        assert!(img.topics.is_empty() && img.topic_names_by_id.is_empty());

        // Re-created under a new id, it starts with no overrides.
        img.apply(&topic("a", 2)).unwrap();
        assert!(img.topics["a"].configs.is_empty());
        assert!(img.topics["a"].partitions.is_empty());
    }

    #[test]
    fn inconsistent_records_are_rejected() {
        let mut img = MetadataImage::new("c", 1);
        assert_eq!(
            img.apply(&partition(9, 0)),
            Err(ApplyError::UnknownTopicId(Uuid::from_u128(9)))
        );
        img.apply(&topic("a", 1)).unwrap();
        assert_eq!(
            img.apply(&topic("a", 2)),
            Err(ApplyError::DuplicateTopicName("a".into()))
        );
        assert_eq!(
            img.apply(&topic("b", 1)),
            Err(ApplyError::DuplicateTopicId(Uuid::from_u128(1)))
        );
        assert!(matches!(
            img.apply(&partition(1, 1)),
            Err(ApplyError::PartitionOutOfSequence { existing: 0, .. })
        ));
        assert!(matches!(
            img.apply(&partition(1, -1)),
            Err(ApplyError::PartitionOutOfSequence { .. })
        ));
        assert_eq!(
            img.apply(&config(RESOURCE_TYPE_TOPIC, "zz", "k", Some("v"))),
            Err(ApplyError::UnknownTopicName("zz".into()))
        );
        assert_eq!(
            img.apply(&MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: Uuid::from_u128(7)
            })),
            Err(ApplyError::UnknownTopicId(Uuid::from_u128(7)))
        );
        // Broker configs are imaged by resource name; removing the last drops the resource.
        img.apply(&config(RESOURCE_TYPE_BROKER, "1", "k", Some("v")))
            .unwrap();
        assert_eq!(img.broker_configs["1"]["k"], "v");
        img.apply(&config(RESOURCE_TYPE_BROKER, "1", "k", None))
            .unwrap();
        assert!(img.broker_configs.is_empty());
    }

    #[test]
    fn broker_registration_replaces_the_previous_one() {
        let mut img = MetadataImage::new("c", 1);
        let reg = |host: &str| {
            MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: 1,
                incarnation_id: Uuid::nil(),
                broker_epoch: 0,
                endpoints: vec![BrokerEndpoint {
                    name: "PLAINTEXT".into(),
                    host: host.into(),
                    port: 9092,
                    security_protocol: 0,
                }],
                features: vec![],
                rack: None,
                fenced: false,
                in_controlled_shutdown: false,
            })
        };
        img.apply(&reg("a")).unwrap();
        img.apply(&reg("b")).unwrap();
        assert_eq!(
            (img.brokers[&1].host.as_str(), img.brokers[&1].port),
            ("b", 9092)
        );
        assert_eq!(img.brokers[&1].endpoints.len(), 1);
        assert!(img.is_active(1));

        let MetadataRecord::RegisterBroker(mut r) = reg("x") else {
            unreachable!()
        };
        r.endpoints.clear();
        assert_eq!(
            img.apply(&MetadataRecord::RegisterBroker(r)),
            Err(ApplyError::NoEndpoints(1))
        );
    }

    #[test]
    fn broker_state_records_need_the_current_registration() {
        use crate::record::{FenceBrokerRecord, UnfenceBrokerRecord, UnregisterBrokerRecord};
        let mut img = MetadataImage::new("c", 1);
        img.apply(&MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: Uuid::from_u128(3),
            broker_epoch: 10,
            endpoints: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "h".into(),
                port: 1,
                security_protocol: 0,
            }],
            features: vec![],
            rack: Some("r".into()),
            fenced: true,
            in_controlled_shutdown: false,
        }))
        .unwrap();
        assert!(img.brokers[&1].fenced && !img.is_active(1));
        assert_eq!(img.brokers[&1].incarnation_id, Uuid::from_u128(3));
        let unfence = |epoch| {
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                broker_id: 1,
                broker_epoch: epoch,
            })
        };
        assert_eq!(
            img.apply(&unfence(9)),
            Err(ApplyError::BrokerEpochMismatch {
                broker_id: 1,
                record_epoch: 9,
                registered_epoch: 10
            })
        );
        img.apply(&unfence(10)).unwrap();
        assert!(img.is_active(1));
        img.apply(&MetadataRecord::BrokerRegistrationChange(
            BrokerRegistrationChangeRecord {
                broker_id: 1,
                broker_epoch: 10,
                fenced: FencingChange::None,
                in_controlled_shutdown: true,
            },
        ))
        .unwrap();
        assert!(!img.brokers[&1].fenced && !img.is_active(1));
        img.apply(&MetadataRecord::FenceBroker(FenceBrokerRecord {
            broker_id: 1,
            broker_epoch: 10,
        }))
        .unwrap();
        assert!(img.brokers[&1].fenced);
        assert_eq!(
            img.apply(&MetadataRecord::FenceBroker(FenceBrokerRecord {
                broker_id: 2,
                broker_epoch: 10,
            })),
            Err(ApplyError::UnknownBroker(2))
        );
        img.apply(&MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: 1,
            broker_epoch: 10,
        }))
        .unwrap();
        assert!(img.brokers.is_empty());
    }

    #[test]
    fn partition_changes_bump_epochs_as_kafka_merges_them() {
        let mut img = MetadataImage::new("c", 1);
        img.apply(&topic("a", 1)).unwrap();
        img.apply(&partition(1, 0)).unwrap();
        let change = |f: &dyn Fn(&mut PartitionChangeRecord)| {
            let mut c = PartitionChangeRecord::new(Uuid::from_u128(1), 0);
            f(&mut c);
            MetadataRecord::PartitionChange(c)
        };
        // An ISR change moves only the partition epoch.
        img.apply(&change(&|c| c.isr = Some(vec![1, 2]))).unwrap();
        let p = &img.topics["a"].partitions[0];
        assert_eq!(
            (p.isr.clone(), p.leader_epoch, p.partition_epoch),
            (vec![1, 2], 0, 1)
        );
        // Setting the leader moves both, even to the same broker.
        img.apply(&change(&|c| c.leader = 1)).unwrap();
        let p = &img.topics["a"].partitions[0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 1, 2));
        img.apply(&change(&|c| {
            c.leader = crate::record::NO_LEADER;
            c.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
            c.replicas = Some(vec![1, 2, 3]);
        }))
        .unwrap();
        let p = &img.topics["a"].partitions[0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (-1, 2, 3));
        assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
        assert_eq!(p.replicas, vec![1, 2, 3]);
        assert_eq!(p.isr, vec![1, 2]);

        let mut missing = PartitionChangeRecord::new(Uuid::from_u128(1), 1);
        missing.leader = 1;
        assert_eq!(
            img.apply(&MetadataRecord::PartitionChange(missing)),
            Err(ApplyError::UnknownPartition {
                topic_id: Uuid::from_u128(1),
                partition: 1
            })
        );
    }
}
