//! A [`MetadataImage`] written back out as the [`MetadataRecord`]s that rebuild it: the
//! body of a metadata snapshot (KIP-630), as Kafka's `MetadataImage.write` produces one.
//!
//! Applying [`MetadataImage::records`] to an empty image gives back the image exactly,
//! except for `cluster_id` and `controller_id`, which no record carries (they come from
//! `meta.properties` and the quorum). A record type the image does not keep (`ConfigRecord`s
//! of other resource types than topics and brokers, broker features) is not in a snapshot
//! either: the image is the state a snapshot preserves, so imaging such a record later means
//! writing it into both.
//!
//! The order is the one replay needs: brokers first (their registrations carry their
//! fencing and shutdown state whole), then each topic followed by its partitions in id
//! order and its config overrides, then the dynamic broker configs, then the client quotas,
//! then the ACL bindings, then the producer-id block.

use crate::image::MetadataImage;
use crate::record::{
    ConfigRecord, MetadataRecord, PartitionRecord, ProducerIdsRecord, RESOURCE_TYPE_BROKER,
    RESOURCE_TYPE_TOPIC, RegisterBrokerRecord, TopicRecord,
};

impl MetadataImage {
    /// The records that rebuild this image from an empty one (see the module doc).
    #[must_use]
    pub fn records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for b in self.brokers.values() {
            out.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: b.node_id,
                incarnation_id: b.incarnation_id,
                broker_epoch: b.broker_epoch,
                endpoints: b.endpoints.clone(),
                features: Vec::new(),
                rack: b.rack.clone(),
                fenced: b.fenced,
                in_controlled_shutdown: b.in_controlled_shutdown,
            }));
        }
        for t in self.topics.values() {
            out.push(MetadataRecord::Topic(TopicRecord {
                name: t.name.clone(),
                topic_id: t.topic_id,
            }));
            for p in &t.partitions {
                out.push(MetadataRecord::Partition(PartitionRecord {
                    partition_id: p.partition,
                    topic_id: t.topic_id,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    removing_replicas: p.removing_replicas.clone(),
                    adding_replicas: p.adding_replicas.clone(),
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    leader_recovery_state: p.leader_recovery_state,
                }));
            }
            for (name, value) in &t.configs {
                out.push(MetadataRecord::Config(ConfigRecord {
                    resource_type: RESOURCE_TYPE_TOPIC,
                    resource_name: t.name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                }));
            }
        }
        for (resource, configs) in &self.broker_configs {
            for (name, value) in configs {
                out.push(MetadataRecord::Config(ConfigRecord {
                    resource_type: RESOURCE_TYPE_BROKER,
                    resource_name: resource.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                }));
            }
        }
        out.extend(self.client_quotas.records());
        out.extend(self.scram.records());
        for (id, binding) in &self.acls {
            out.push(MetadataRecord::AccessControlEntry(
                crate::record::AccessControlEntryRecord::new(*id, binding),
            ));
        }
        if self.next_producer_id > 0 {
            // Kafka's `ProducerIdControlManager` snapshots its next block the same way,
            // with no broker behind it.
            out.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: -1,
                broker_epoch: -1,
                next_producer_id: self.next_producer_id,
            }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use uuid::Uuid;

    use crate::record::{
        BrokerEndpoint, BrokerRegistrationChangeRecord, FenceBrokerRecord, FencingChange,
        LeaderRecoveryState, PartitionChangeRecord, RESOURCE_TYPE_BROKER, RemoveTopicRecord,
        UnfenceBrokerRecord, UnregisterBrokerRecord,
    };

    use super::*;

    /// One operation over a small universe of names, ids and brokers, so that sequences
    /// hit the same topics and brokers again (re-creation, changes, removal).
    fn op() -> impl Strategy<Value = MetadataRecord> {
        let broker = 1..4i32;
        let topic_id = (1..6u128).prop_map(Uuid::from_u128);
        let name = prop_oneof![Just("a"), Just("b"), Just("c"), Just("d")];
        let ids = proptest::collection::vec(1..4i32, 0..4);
        prop_oneof![
            (
                broker.clone(),
                0..3i64,
                any::<u128>(),
                proptest::option::of("[a-z]{1,3}"),
                any::<[bool; 2]>(),
                1..3usize
            )
                .prop_map(|(id, epoch, inc, rack, [f, s], n)| {
                    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                        broker_id: id,
                        incarnation_id: Uuid::from_u128(inc),
                        broker_epoch: epoch,
                        endpoints: (0..n)
                            .map(|k| BrokerEndpoint {
                                name: format!("L{k}"),
                                host: format!("h{id}"),
                                port: 9000 + k as u16,
                                security_protocol: 0,
                            })
                            .collect(),
                        features: Vec::new(),
                        rack,
                        fenced: f,
                        in_controlled_shutdown: s,
                    })
                }),
            (broker.clone(), 0..3i64, 0..4u8).prop_map(|(id, epoch, kind)| match kind {
                0 => MetadataRecord::FenceBroker(FenceBrokerRecord {
                    broker_id: id,
                    broker_epoch: epoch,
                }),
                1 => MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                    broker_id: id,
                    broker_epoch: epoch,
                }),
                2 => MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                    broker_id: id,
                    broker_epoch: epoch,
                }),
                _ => MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
                    broker_id: id,
                    broker_epoch: epoch,
                    fenced: FencingChange::Unfence,
                    in_controlled_shutdown: true,
                }),
            }),
            (name.clone(), topic_id.clone()).prop_map(|(n, id)| {
                MetadataRecord::Topic(TopicRecord {
                    name: n.into(),
                    topic_id: id,
                })
            }),
            (
                topic_id.clone(),
                0..3i32,
                ids.clone(),
                0..4i32,
                any::<bool>()
            )
                .prop_map(|(id, p, replicas, leader, recovering)| {
                    MetadataRecord::Partition(PartitionRecord {
                        partition_id: p,
                        topic_id: id,
                        isr: replicas.clone(),
                        replicas,
                        removing_replicas: vec![],
                        adding_replicas: vec![leader],
                        leader,
                        leader_epoch: leader * 3,
                        partition_epoch: p * 5,
                        leader_recovery_state: if recovering {
                            LeaderRecoveryState::Recovering
                        } else {
                            LeaderRecoveryState::Recovered
                        },
                    })
                },),
            (
                topic_id.clone(),
                0..3i32,
                -2..4i32,
                proptest::option::of(ids.clone()),
                proptest::option::of(ids)
            )
                .prop_map(|(id, p, leader, isr, removing)| {
                    let mut c = PartitionChangeRecord::new(id, p);
                    c.leader = leader;
                    c.isr = isr;
                    c.removing_replicas = removing;
                    MetadataRecord::PartitionChange(c)
                }),
            (
                name,
                prop_oneof![Just("retention.ms"), Just("cleanup.policy")],
                proptest::option::of("[0-9]{1,4}"),
                any::<bool>()
            )
                .prop_map(|(n, key, value, topic)| {
                    MetadataRecord::Config(ConfigRecord {
                        resource_type: if topic {
                            RESOURCE_TYPE_TOPIC
                        } else {
                            RESOURCE_TYPE_BROKER
                        },
                        resource_name: n.into(),
                        name: key.into(),
                        value,
                    })
                }),
            topic_id.prop_map(|id| MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: id })),
            (
                prop_oneof![Just("user"), Just("client-id")],
                proptest::option::of(prop_oneof![Just("a"), Just("b")]),
                prop_oneof![Just("producer_byte_rate"), Just("consumer_byte_rate")],
                1..4u8,
                any::<bool>()
            )
                .prop_map(|(t, name, key, value, remove)| {
                    MetadataRecord::ClientQuota(crate::record::ClientQuotaRecord {
                        entity: vec![crate::record::QuotaEntityPart {
                            entity_type: t.into(),
                            entity_name: name.map(Into::into),
                        }],
                        key: key.into(),
                        value: f64::from(value) * 1024.0,
                        remove,
                    })
                }),
            (1..4u128, 0..3i8).prop_map(|(id, op)| {
                MetadataRecord::AccessControlEntry(crate::record::AccessControlEntryRecord::new(
                    Uuid::from_u128(id),
                    &crate::acl::AclBinding {
                        resource_type: crate::acl::ResourceType::Topic,
                        resource_name: format!("t{op}"),
                        pattern_type: crate::acl::PatternType::Literal,
                        principal: "User:*".into(),
                        host: "*".into(),
                        operation: crate::acl::AclOperation::from_code(op + 2),
                        permission_type: crate::acl::AclPermissionType::Allow,
                    },
                ))
            }),
            (1..4u128).prop_map(|id| MetadataRecord::RemoveAccessControlEntry(
                crate::record::RemoveAccessControlEntryRecord {
                    id: Uuid::from_u128(id)
                }
            )),
            (1..5000i64).prop_map(|next| MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: 1,
                broker_epoch: 0,
                next_producer_id: next,
            })),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// KIP-630: a snapshot's records rebuild the image they were written from, also
        /// after each record has been through its encoding.
        #[test]
        fn an_image_rebuilds_from_its_records(ops in proptest::collection::vec(op(), 0..60)) {
            let mut image = MetadataImage::new("cluster", 2);
            for r in &ops {
                // Records that contradict the image leave it unchanged, as on replay.
                let _ = image.apply(r);
            }
            let mut rebuilt = MetadataImage::new("cluster", 2);
            for r in image.records() {
                let r = MetadataRecord::decode(&r.encode()).unwrap();
                rebuilt.apply(&r).unwrap();
            }
            prop_assert_eq!(&rebuilt, &image);
            prop_assert_eq!(rebuilt.records(), image.records());
        }
    }

    #[test]
    fn an_empty_image_has_no_records() {
        assert!(MetadataImage::new("c", 1).records().is_empty());
    }
}
