//! Metadata records: Kafka's KRaft record types, their framing, encode and decode.
//!
//! Each record type lives in its own file with its byte layout, encode and decode side by
//! side; [`MetadataRecord`] is the one enum that dispatches them.

mod access_control_entry;
mod broker_registration_change;
mod client_quota;
pub(crate) mod compact;
mod config;
mod fence_broker;
mod partition;
mod partition_change;
mod producer_ids;
mod register_broker;
mod remove_topic;
mod topic;
mod unfence_broker;
mod unregister_broker;
mod user_scram_credential;

pub use access_control_entry::{AccessControlEntryRecord, RemoveAccessControlEntryRecord};
pub use broker_registration_change::{BrokerRegistrationChangeRecord, FencingChange};
pub use client_quota::{ClientQuotaRecord, QuotaEntityPart};
pub use compact::DecodeError;
pub use config::{ConfigRecord, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC};
pub use fence_broker::FenceBrokerRecord;
pub use partition::{LeaderRecoveryState, PartitionRecord};
pub use partition_change::{NO_LEADER, NO_LEADER_CHANGE, PartitionChangeRecord};
pub use producer_ids::{PRODUCER_ID_BLOCK_SIZE, ProducerIdsBlock, ProducerIdsRecord};
pub use register_broker::{
    BrokerEndpoint, BrokerFeature, RegisterBrokerRecord, SECURITY_PROTOCOL_PLAINTEXT,
};
pub use remove_topic::RemoveTopicRecord;
pub use topic::TopicRecord;
pub use unfence_broker::UnfenceBrokerRecord;
pub use unregister_broker::UnregisterBrokerRecord;
pub use user_scram_credential::{RemoveUserScramCredentialRecord, UserScramCredentialRecord};

use compact::{Reader, Writer};

use crate::MetadataError;

/// The frame version of Kafka's `MetadataRecordSerde` (KIP-631).
const FRAME_VERSION: u32 = 1;

/// Kafka's metadata record type ids (the `apiKey` of each `*Record.json` schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum MetadataRecordType {
    /// [`RegisterBrokerRecord`].
    RegisterBroker = 0,
    /// [`UnregisterBrokerRecord`].
    UnregisterBroker = 1,
    /// [`TopicRecord`].
    Topic = 2,
    /// [`PartitionRecord`].
    Partition = 3,
    /// [`ConfigRecord`].
    Config = 4,
    /// [`PartitionChangeRecord`].
    PartitionChange = 5,
    /// [`FenceBrokerRecord`].
    FenceBroker = 7,
    /// [`UnfenceBrokerRecord`].
    UnfenceBroker = 8,
    /// [`RemoveTopicRecord`].
    RemoveTopic = 9,
    /// [`UserScramCredentialRecord`].
    UserScramCredential = 11,
    /// [`RemoveUserScramCredentialRecord`].
    RemoveUserScramCredential = 12,
    /// [`ClientQuotaRecord`].
    ClientQuota = 14,
    /// [`ProducerIdsRecord`].
    ProducerIds = 15,
    /// [`BrokerRegistrationChangeRecord`].
    BrokerRegistrationChange = 17,
    /// [`AccessControlEntryRecord`].
    AccessControlEntry = 23,
    /// [`RemoveAccessControlEntryRecord`].
    RemoveAccessControlEntry = 24,
}

impl MetadataRecordType {
    fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::RegisterBroker,
            1 => Self::UnregisterBroker,
            2 => Self::Topic,
            3 => Self::Partition,
            4 => Self::Config,
            5 => Self::PartitionChange,
            7 => Self::FenceBroker,
            8 => Self::UnfenceBroker,
            9 => Self::RemoveTopic,
            11 => Self::UserScramCredential,
            12 => Self::RemoveUserScramCredential,
            14 => Self::ClientQuota,
            15 => Self::ProducerIds,
            17 => Self::BrokerRegistrationChange,
            23 => Self::AccessControlEntry,
            24 => Self::RemoveAccessControlEntry,
            _ => return None,
        })
    }

    /// The highest record version we read. Each record is written at the lowest version
    /// that carries the fields it sets, so a record without newer fields stays readable
    /// by older Kafka tooling.
    fn max_version(self) -> u32 {
        match self {
            Self::RegisterBroker | Self::PartitionChange | Self::BrokerRegistrationChange => 1,
            Self::UnregisterBroker
            | Self::Topic
            | Self::Partition
            | Self::Config
            | Self::FenceBroker
            | Self::UnfenceBroker
            | Self::RemoveTopic
            | Self::UserScramCredential
            | Self::RemoveUserScramCredential
            | Self::ClientQuota
            | Self::ProducerIds
            | Self::AccessControlEntry
            | Self::RemoveAccessControlEntry => 0,
        }
    }
}

/// One change to cluster metadata: the value of one record in `__cluster_metadata`.
///
/// Framing of the record value (Kafka's `MetadataRecordSerde`; the record key is null):
///
/// ```text
/// frame_version   unsigned varint, always 1
/// record_type     unsigned varint, the MetadataRecordType id
/// record_version  unsigned varint: 0, or 1 for the types and fields noted below
/// fields          the type's fields in the flexible ("compact") encoding, ending with a
///                 tagged-field section; see each record type's docs
/// ```
///
/// Each record is written at the lowest version that carries its fields: version 0,
/// except `RegisterBroker` and `BrokerRegistrationChange` with `in_controlled_shutdown`
/// set and `PartitionChange` with `directories` set (version 1). Kafka's tooling
/// (`kafka-dump-log --cluster-metadata-decoder`) can read our metadata log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A broker registered (type 0).
    RegisterBroker(RegisterBrokerRecord),
    /// A broker's registration was removed (type 1).
    UnregisterBroker(UnregisterBrokerRecord),
    /// A topic was created (type 2).
    Topic(TopicRecord),
    /// A partition was created or restated (type 3).
    Partition(PartitionRecord),
    /// A config override changed (type 4).
    Config(ConfigRecord),
    /// A partition's leader, ISR or assignment changed (type 5).
    PartitionChange(PartitionChangeRecord),
    /// A broker was fenced (type 7).
    FenceBroker(FenceBrokerRecord),
    /// A broker was unfenced (type 8).
    UnfenceBroker(UnfenceBrokerRecord),
    /// A topic was deleted (type 9).
    RemoveTopic(RemoveTopicRecord),
    /// A user's SCRAM credential was set (type 11).
    UserScramCredential(UserScramCredentialRecord),
    /// A user's SCRAM credential was removed (type 12).
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    /// A client quota was set or removed (type 14).
    ClientQuota(ClientQuotaRecord),
    /// A block of producer ids was allocated (type 15).
    ProducerIds(ProducerIdsRecord),
    /// A broker's fencing or controlled-shutdown state changed (type 17).
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    /// An ACL binding was created (type 23).
    AccessControlEntry(AccessControlEntryRecord),
    /// An ACL binding was deleted (type 24).
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
}

impl MetadataRecord {
    /// The record's Kafka type id.
    pub fn record_type(&self) -> MetadataRecordType {
        match self {
            MetadataRecord::RegisterBroker(_) => MetadataRecordType::RegisterBroker,
            MetadataRecord::UnregisterBroker(_) => MetadataRecordType::UnregisterBroker,
            MetadataRecord::Topic(_) => MetadataRecordType::Topic,
            MetadataRecord::Partition(_) => MetadataRecordType::Partition,
            MetadataRecord::Config(_) => MetadataRecordType::Config,
            MetadataRecord::PartitionChange(_) => MetadataRecordType::PartitionChange,
            MetadataRecord::FenceBroker(_) => MetadataRecordType::FenceBroker,
            MetadataRecord::UnfenceBroker(_) => MetadataRecordType::UnfenceBroker,
            MetadataRecord::RemoveTopic(_) => MetadataRecordType::RemoveTopic,
            MetadataRecord::UserScramCredential(_) => MetadataRecordType::UserScramCredential,
            MetadataRecord::RemoveUserScramCredential(_) => {
                MetadataRecordType::RemoveUserScramCredential
            }
            MetadataRecord::ClientQuota(_) => MetadataRecordType::ClientQuota,
            MetadataRecord::ProducerIds(_) => MetadataRecordType::ProducerIds,
            MetadataRecord::BrokerRegistrationChange(_) => {
                MetadataRecordType::BrokerRegistrationChange
            }
            MetadataRecord::AccessControlEntry(_) => MetadataRecordType::AccessControlEntry,
            MetadataRecord::RemoveAccessControlEntry(_) => {
                MetadataRecordType::RemoveAccessControlEntry
            }
        }
    }

    /// The record version this record is written at.
    pub fn version(&self) -> u32 {
        match self {
            MetadataRecord::RegisterBroker(r) => r.version(),
            MetadataRecord::PartitionChange(r) => r.version(),
            MetadataRecord::BrokerRegistrationChange(r) => r.version(),
            MetadataRecord::UnregisterBroker(_)
            | MetadataRecord::Topic(_)
            | MetadataRecord::Partition(_)
            | MetadataRecord::Config(_)
            | MetadataRecord::FenceBroker(_)
            | MetadataRecord::UnfenceBroker(_)
            | MetadataRecord::RemoveTopic(_)
            | MetadataRecord::UserScramCredential(_)
            | MetadataRecord::RemoveUserScramCredential(_)
            | MetadataRecord::ClientQuota(_)
            | MetadataRecord::ProducerIds(_)
            | MetadataRecord::AccessControlEntry(_)
            | MetadataRecord::RemoveAccessControlEntry(_) => 0,
        }
    }

    /// Encodes the record value, framing included.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.uvarint(FRAME_VERSION);
        w.uvarint(self.record_type() as u32);
        w.uvarint(self.version());
        match self {
            MetadataRecord::RegisterBroker(r) => r.encode(&mut w),
            MetadataRecord::UnregisterBroker(r) => r.encode(&mut w),
            MetadataRecord::Topic(r) => r.encode(&mut w),
            MetadataRecord::Partition(r) => r.encode(&mut w),
            MetadataRecord::Config(r) => r.encode(&mut w),
            MetadataRecord::PartitionChange(r) => r.encode(&mut w),
            MetadataRecord::FenceBroker(r) => r.encode(&mut w),
            MetadataRecord::UnfenceBroker(r) => r.encode(&mut w),
            MetadataRecord::RemoveTopic(r) => r.encode(&mut w),
            MetadataRecord::UserScramCredential(r) => r.encode(&mut w),
            MetadataRecord::RemoveUserScramCredential(r) => r.encode(&mut w),
            MetadataRecord::ClientQuota(r) => r.encode(&mut w),
            MetadataRecord::ProducerIds(r) => r.encode(&mut w),
            MetadataRecord::BrokerRegistrationChange(r) => r.encode(&mut w),
            MetadataRecord::AccessControlEntry(r) => r.encode(&mut w),
            MetadataRecord::RemoveAccessControlEntry(r) => r.encode(&mut w),
        }
        w.buf
    }

    /// Decodes one record value, framing included.
    ///
    /// # Errors
    ///
    /// [`MetadataError::CorruptRecord`] (with `offset: None`) when the bytes are not a
    /// complete record of a known type and version with nothing after it. Never panics.
    pub fn decode(value: &[u8]) -> Result<Self, MetadataError> {
        Self::decode_inner(value).map_err(|source| MetadataError::CorruptRecord {
            offset: None,
            source,
        })
    }

    fn decode_inner(value: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(value);
        let frame = r.uvarint("frame_version")?;
        if frame != FRAME_VERSION {
            return Err(DecodeError::UnsupportedFrameVersion(frame));
        }
        let type_id = r.uvarint("record_type")?;
        let record_type =
            MetadataRecordType::from_id(type_id).ok_or(DecodeError::UnknownRecordType(type_id))?;
        let version = r.uvarint("record_version")?;
        if version > record_type.max_version() {
            return Err(DecodeError::UnsupportedRecordVersion {
                record_type: record_type as u16,
                version,
            });
        }
        let record = match record_type {
            MetadataRecordType::RegisterBroker => {
                MetadataRecord::RegisterBroker(RegisterBrokerRecord::decode(&mut r, version)?)
            }
            MetadataRecordType::UnregisterBroker => {
                MetadataRecord::UnregisterBroker(UnregisterBrokerRecord::decode(&mut r)?)
            }
            MetadataRecordType::PartitionChange => {
                MetadataRecord::PartitionChange(PartitionChangeRecord::decode(&mut r, version)?)
            }
            MetadataRecordType::FenceBroker => {
                MetadataRecord::FenceBroker(FenceBrokerRecord::decode(&mut r)?)
            }
            MetadataRecordType::UnfenceBroker => {
                MetadataRecord::UnfenceBroker(UnfenceBrokerRecord::decode(&mut r)?)
            }
            MetadataRecordType::BrokerRegistrationChange => {
                MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord::decode(
                    &mut r, version,
                )?)
            }
            MetadataRecordType::Topic => MetadataRecord::Topic(TopicRecord::decode(&mut r)?),
            MetadataRecordType::Partition => {
                MetadataRecord::Partition(PartitionRecord::decode(&mut r)?)
            }
            MetadataRecordType::Config => MetadataRecord::Config(ConfigRecord::decode(&mut r)?),
            MetadataRecordType::RemoveTopic => {
                MetadataRecord::RemoveTopic(RemoveTopicRecord::decode(&mut r)?)
            }
            MetadataRecordType::UserScramCredential => {
                MetadataRecord::UserScramCredential(UserScramCredentialRecord::decode(&mut r)?)
            }
            MetadataRecordType::RemoveUserScramCredential => {
                MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord::decode(
                    &mut r,
                )?)
            }
            MetadataRecordType::ClientQuota => {
                MetadataRecord::ClientQuota(ClientQuotaRecord::decode(&mut r)?)
            }
            MetadataRecordType::ProducerIds => {
                MetadataRecord::ProducerIds(ProducerIdsRecord::decode(&mut r)?)
            }
            MetadataRecordType::AccessControlEntry => {
                MetadataRecord::AccessControlEntry(AccessControlEntryRecord::decode(&mut r)?)
            }
            MetadataRecordType::RemoveAccessControlEntry => {
                MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord::decode(
                    &mut r,
                )?)
            }
        };
        r.finish()?;
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use uuid::Uuid;

    fn uuid() -> impl Strategy<Value = Uuid> {
        any::<u128>().prop_map(Uuid::from_u128)
    }
    fn ids() -> impl Strategy<Value = Vec<i32>> {
        proptest::collection::vec(any::<i32>(), 0..6)
    }

    fn record() -> impl Strategy<Value = MetadataRecord> {
        let endpoint = (".{0,12}", ".{0,20}", any::<u16>(), any::<i16>()).prop_map(
            |(name, host, port, sp)| BrokerEndpoint {
                name,
                host,
                port,
                security_protocol: sp,
            },
        );
        let feature =
            (".{0,12}", any::<i16>(), any::<i16>()).prop_map(|(name, min, max)| BrokerFeature {
                name,
                min_supported_version: min,
                max_supported_version: max,
            });
        let broker = (
            any::<i32>(),
            uuid(),
            any::<i64>(),
            proptest::collection::vec(endpoint, 0..3),
            proptest::collection::vec(feature, 0..3),
            proptest::option::of(".{0,8}"),
            any::<[bool; 2]>(),
        )
            .prop_map(
                |(
                    broker_id,
                    incarnation_id,
                    broker_epoch,
                    endpoints,
                    features,
                    rack,
                    [fenced, in_controlled_shutdown],
                )| {
                    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                        broker_id,
                        incarnation_id,
                        broker_epoch,
                        endpoints,
                        features,
                        rack,
                        fenced,
                        in_controlled_shutdown,
                    })
                },
            );
        let topic = (".{0,30}", uuid())
            .prop_map(|(name, topic_id)| MetadataRecord::Topic(TopicRecord { name, topic_id }));
        let partition = (
            any::<i32>(),
            uuid(),
            ids(),
            ids(),
            ids(),
            ids(),
            any::<[i32; 3]>(),
            recovery_state(),
        )
            .prop_map(
                |(
                    partition_id,
                    topic_id,
                    replicas,
                    isr,
                    removing_replicas,
                    adding_replicas,
                    [leader, le, pe],
                    leader_recovery_state,
                )| {
                    MetadataRecord::Partition(PartitionRecord {
                        partition_id,
                        topic_id,
                        replicas,
                        isr,
                        removing_replicas,
                        adding_replicas,
                        leader,
                        leader_epoch: le,
                        partition_epoch: pe,
                        leader_recovery_state,
                    })
                },
            );
        let partition_change = (
            (any::<i32>(), uuid(), any::<i32>()),
            proptest::option::of(ids()),
            proptest::option::of(ids()),
            proptest::option::of(ids()),
            proptest::option::of(ids()),
            proptest::option::of(recovery_state()),
            proptest::option::of(proptest::collection::vec(uuid(), 0..4)),
        )
            .prop_map(
                |(
                    (partition_id, topic_id, leader),
                    isr,
                    replicas,
                    removing_replicas,
                    adding_replicas,
                    leader_recovery_state,
                    directories,
                )| {
                    MetadataRecord::PartitionChange(PartitionChangeRecord {
                        partition_id,
                        topic_id,
                        isr,
                        leader,
                        replicas,
                        removing_replicas,
                        adding_replicas,
                        leader_recovery_state,
                        directories,
                    })
                },
            );
        let broker_state = (
            any::<i32>(),
            any::<i64>(),
            0..6u8,
            prop_oneof![
                Just(FencingChange::None),
                Just(FencingChange::Fence),
                Just(FencingChange::Unfence)
            ],
            any::<bool>(),
        )
            .prop_map(
                |(broker_id, broker_epoch, kind, fenced, in_controlled_shutdown)| match kind {
                    0 => MetadataRecord::FenceBroker(FenceBrokerRecord {
                        broker_id,
                        broker_epoch,
                    }),
                    1 => MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                        broker_id,
                        broker_epoch,
                    }),
                    2 => MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                        broker_id,
                        broker_epoch,
                    }),
                    _ => MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
                        broker_id,
                        broker_epoch,
                        fenced,
                        in_controlled_shutdown,
                    }),
                },
            );
        let config = (
            any::<i8>(),
            ".{0,20}",
            ".{0,20}",
            proptest::option::of(".{0,20}"),
        )
            .prop_map(|(resource_type, resource_name, name, value)| {
                MetadataRecord::Config(ConfigRecord {
                    resource_type,
                    resource_name,
                    name,
                    value,
                })
            });
        let remove =
            uuid().prop_map(|topic_id| MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id }));
        let producer_ids = (any::<i32>(), any::<i64>(), any::<i64>()).prop_map(
            |(broker_id, broker_epoch, next_producer_id)| {
                MetadataRecord::ProducerIds(ProducerIdsRecord {
                    broker_id,
                    broker_epoch,
                    next_producer_id,
                })
            },
        );
        let part = (
            prop_oneof![Just("user"), Just("client-id")],
            proptest::option::of(".{0,12}"),
        )
            .prop_map(|(t, entity_name)| QuotaEntityPart {
                entity_type: t.to_owned(),
                entity_name,
            });
        let client_quota = (
            proptest::collection::vec(part, 0..3),
            ".{0,20}",
            -1e12..1e12f64,
            any::<bool>(),
        )
            .prop_map(|(entity, key, value, remove)| {
                MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity,
                    key,
                    value,
                    remove,
                })
            });
        let acl = (uuid(), any::<[i8; 4]>(), ".{0,12}", ".{0,12}", ".{0,8}").prop_map(
            |(id, [rt, pt, op, perm], resource_name, principal, host)| {
                use crate::acl::*;
                MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
                    id,
                    binding: AclBinding {
                        resource_type: ResourceType::from_code(rt.rem_euclid(8)),
                        resource_name,
                        pattern_type: PatternType::from_code(pt.rem_euclid(5)),
                        principal,
                        host,
                        operation: AclOperation::from_code(op.rem_euclid(15)),
                        permission_type: AclPermissionType::from_code(perm.rem_euclid(4)),
                    },
                })
            },
        );
        let remove_acl = uuid().prop_map(|id| {
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord { id })
        });
        let scram = (
            ".{0,12}",
            any::<i8>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..64),
            proptest::collection::vec(any::<u8>(), 0..64),
            any::<i32>(),
        )
            .prop_map(
                |(name, mechanism, salt, stored_key, server_key, iterations)| {
                    MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                        name,
                        mechanism,
                        salt,
                        stored_key,
                        server_key,
                        iterations,
                    })
                },
            );
        let remove_scram = (".{0,12}", any::<i8>()).prop_map(|(name, mechanism)| {
            MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
                name,
                mechanism,
            })
        });
        prop_oneof![
            broker,
            topic,
            partition,
            config,
            remove,
            producer_ids,
            partition_change,
            broker_state,
            client_quota,
            acl,
            remove_acl,
            scram,
            remove_scram
        ]
    }

    fn recovery_state() -> impl Strategy<Value = LeaderRecoveryState> {
        prop_oneof![
            Just(LeaderRecoveryState::Recovered),
            Just(LeaderRecoveryState::Recovering)
        ]
    }

    proptest! {
        #[test]
        fn records_round_trip(rec in record()) {
            let bytes = rec.encode();
            prop_assert_eq!(MetadataRecord::decode(&bytes).unwrap(), rec);
        }

        #[test]
        fn every_truncation_is_an_error(rec in record()) {
            let bytes = rec.encode();
            for cut in 0..bytes.len() {
                let is_corrupt = matches!(
                    MetadataRecord::decode(&bytes[..cut]),
                    Err(MetadataError::CorruptRecord { offset: None, .. })
                );
                prop_assert!(is_corrupt, "cut at {}", cut);
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = MetadataRecord::decode(&bytes);
        }

        #[test]
        fn garbage_after_a_valid_header_never_panics(
            ty in prop_oneof![
                Just(0u8), Just(1), Just(2), Just(3), Just(4), Just(5), Just(7), Just(8),
                Just(9), Just(14), Just(15), Just(17), Just(23), Just(24)
            ],
            version in 0..2u8,
            tail in proptest::collection::vec(any::<u8>(), 0..128),
        ) {
            let mut bytes = vec![1, ty, version];
            bytes.extend(tail);
            let _ = MetadataRecord::decode(&bytes);
        }
    }

    #[test]
    fn topic_record_matches_kafka_bytes() {
        // frame 1, type 2, version 0, name "foo" (len+1 = 4), 16-byte id, no tagged fields.
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let bytes = MetadataRecord::Topic(TopicRecord {
            name: "foo".into(),
            topic_id: id,
        })
        .encode();
        let mut expected = vec![1, 2, 0, 4, b'f', b'o', b'o'];
        expected.extend_from_slice(id.as_bytes());
        expected.push(0);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn config_delete_encodes_null_value() {
        let rec = MetadataRecord::Config(ConfigRecord {
            resource_type: RESOURCE_TYPE_TOPIC,
            resource_name: "t".into(),
            name: "k".into(),
            value: None,
        });
        assert_eq!(rec.encode(), vec![1, 4, 0, 2, 2, b't', 2, b'k', 0, 0]);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        let mut bytes = MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: Uuid::nil(),
        })
        .encode();
        // Replace the empty tagged section with one field: tag 5, 2 bytes.
        bytes.pop();
        bytes.extend_from_slice(&[1, 5, 2, 0xaa, 0xbb]);
        assert!(MetadataRecord::decode(&bytes).is_ok());
    }

    #[test]
    fn unknown_type_and_version_are_reported() {
        assert!(matches!(
            MetadataRecord::decode(&[1, 6, 0]),
            Err(MetadataError::CorruptRecord {
                source: DecodeError::UnknownRecordType(6),
                ..
            })
        ));
        // Version 2 of PartitionChangeRecord carries KIP-966 fields we do not read.
        assert!(matches!(
            MetadataRecord::decode(&[1, 5, 2]),
            Err(MetadataError::CorruptRecord {
                source: DecodeError::UnsupportedRecordVersion {
                    record_type: 5,
                    version: 2
                },
                ..
            })
        ));
        assert!(matches!(
            MetadataRecord::decode(&[1, 2, 1]),
            Err(MetadataError::CorruptRecord {
                source: DecodeError::UnsupportedRecordVersion { .. },
                ..
            })
        ));
        assert!(matches!(
            MetadataRecord::decode(&[0, 2, 0]),
            Err(MetadataError::CorruptRecord {
                source: DecodeError::UnsupportedFrameVersion(0),
                ..
            })
        ));
    }

    #[test]
    fn partition_change_record_matches_kafka_bytes() {
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let mut change = PartitionChangeRecord::new(id, 3);
        change.isr = Some(vec![1, 2]);
        change.leader = 2;
        let bytes = MetadataRecord::PartitionChange(change.clone()).encode();
        // frame 1, type 5, version 0, partition 3, topic id, then two tagged fields:
        // tag 0 (isr) of 9 bytes, tag 1 (leader) of 4 bytes.
        let mut expected = vec![1, 5, 0, 0, 0, 0, 3];
        expected.extend_from_slice(id.as_bytes());
        expected.extend_from_slice(&[2, 0, 9, 3, 0, 0, 0, 1, 0, 0, 0, 2, 1, 4, 0, 0, 0, 2]);
        assert_eq!(bytes, expected);

        // Directories need version 1; a version-0 record's tag 8 is an unknown tag.
        change.isr = None;
        change.leader = NO_LEADER_CHANGE;
        change.directories = Some(vec![Uuid::nil()]);
        let bytes = MetadataRecord::PartitionChange(change.clone()).encode();
        assert_eq!(bytes[2], 1);
        assert_eq!(&bytes[bytes.len() - 20..bytes.len() - 16], &[1, 8, 17, 2]);
        let mut v0 = bytes.clone();
        v0[2] = 0;
        let MetadataRecord::PartitionChange(decoded) = MetadataRecord::decode(&v0).unwrap() else {
            panic!("not a PartitionChangeRecord");
        };
        assert_eq!(decoded.directories, None);
    }

    #[test]
    fn broker_state_records_match_kafka_bytes() {
        let fence = MetadataRecord::FenceBroker(FenceBrokerRecord {
            broker_id: 1,
            broker_epoch: 5,
        });
        assert_eq!(
            fence.encode(),
            vec![1, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0]
        );
        let unfence = MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: 1,
            broker_epoch: 5,
            fenced: FencingChange::Unfence,
            in_controlled_shutdown: false,
        });
        assert_eq!(
            unfence.encode(),
            vec![1, 17, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 1, 0, 1, 0xff]
        );
        let shutdown = MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: 1,
            broker_epoch: 5,
            fenced: FencingChange::None,
            in_controlled_shutdown: true,
        });
        assert_eq!(
            shutdown.encode(),
            vec![1, 17, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 1, 1, 1, 1]
        );
        // An undefined fencing value is a decode error, not a panic or a guess.
        let mut bad = unfence.encode();
        *bad.last_mut().unwrap() = 7;
        assert!(matches!(
            MetadataRecord::decode(&bad),
            Err(MetadataError::CorruptRecord {
                source: DecodeError::InvalidValue { value: 7, .. },
                ..
            })
        ));
    }

    #[test]
    fn partition_record_writes_recovering_as_tag_zero() {
        let rec = PartitionRecord {
            partition_id: 0,
            topic_id: Uuid::nil(),
            replicas: vec![],
            isr: vec![],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: -1,
            leader_epoch: 0,
            partition_epoch: 0,
            leader_recovery_state: LeaderRecoveryState::Recovering,
        };
        let bytes = MetadataRecord::Partition(rec.clone()).encode();
        assert_eq!(&bytes[bytes.len() - 4..], &[1, 0, 1, 1]);
        let recovered = PartitionRecord {
            leader_recovery_state: LeaderRecoveryState::Recovered,
            ..rec
        };
        let bytes = MetadataRecord::Partition(recovered).encode();
        assert_eq!(bytes.last(), Some(&0));
    }

    #[test]
    fn a_version_zero_registration_change_ignores_the_version_one_tag() {
        // Version 0 knows only tag 0; tag 1 (in controlled shutdown) is skipped unread.
        let bytes = [1, 17, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 1, 1, 1, 1];
        assert_eq!(
            MetadataRecord::decode(&bytes).unwrap(),
            MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
                broker_id: 1,
                broker_epoch: 5,
                fenced: FencingChange::None,
                in_controlled_shutdown: false,
            })
        );
    }
}
