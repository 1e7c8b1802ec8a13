//! Metadata records: Kafka's KRaft record types, their framing, encode and decode.
//!
//! Each record type lives in its own file with its byte layout, encode and decode side by
//! side; [`MetadataRecord`] is the one enum that dispatches them.

pub(crate) mod compact;
mod config;
mod partition;
mod producer_ids;
mod register_broker;
mod remove_topic;
mod topic;

pub use compact::DecodeError;
pub use config::{ConfigRecord, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC};
pub use partition::PartitionRecord;
pub use producer_ids::{PRODUCER_ID_BLOCK_SIZE, ProducerIdsBlock, ProducerIdsRecord};
pub use register_broker::{
    BrokerEndpoint, BrokerFeature, RegisterBrokerRecord, SECURITY_PROTOCOL_PLAINTEXT,
};
pub use remove_topic::RemoveTopicRecord;
pub use topic::TopicRecord;

use compact::{Reader, Writer};

use crate::MetadataError;

/// The frame version of Kafka's `MetadataRecordSerde` (KIP-631).
const FRAME_VERSION: u32 = 1;
/// The only record version we write and read for every type.
const RECORD_VERSION: u32 = 0;

/// Kafka's metadata record type ids (the `apiKey` of each `*Record.json` schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum MetadataRecordType {
    /// [`RegisterBrokerRecord`].
    RegisterBroker = 0,
    /// [`TopicRecord`].
    Topic = 2,
    /// [`PartitionRecord`].
    Partition = 3,
    /// [`ConfigRecord`].
    Config = 4,
    /// [`RemoveTopicRecord`].
    RemoveTopic = 9,
    /// [`ProducerIdsRecord`].
    ProducerIds = 15,
}

impl MetadataRecordType {
    fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::RegisterBroker,
            2 => Self::Topic,
            3 => Self::Partition,
            4 => Self::Config,
            9 => Self::RemoveTopic,
            15 => Self::ProducerIds,
            _ => return None,
        })
    }
}

/// One change to cluster metadata: the value of one record in `__cluster_metadata`.
///
/// Framing of the record value (Kafka's `MetadataRecordSerde`; the record key is null):
///
/// ```text
/// frame_version   unsigned varint, always 1
/// record_type     unsigned varint, the MetadataRecordType id
/// record_version  unsigned varint, always 0 here
/// fields          the type's fields in the flexible ("compact") encoding, ending with an
///                 empty tagged-field section; see each record type's docs
/// ```
///
/// Version 0 of every type is written, so Kafka's tooling (`kafka-dump-log
/// --cluster-metadata-decoder`) can read our metadata log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A broker registered (type 0).
    RegisterBroker(RegisterBrokerRecord),
    /// A topic was created (type 2).
    Topic(TopicRecord),
    /// A partition was created or restated (type 3).
    Partition(PartitionRecord),
    /// A config override changed (type 4).
    Config(ConfigRecord),
    /// A topic was deleted (type 9).
    RemoveTopic(RemoveTopicRecord),
    /// A block of producer ids was allocated (type 15).
    ProducerIds(ProducerIdsRecord),
}

impl MetadataRecord {
    /// The record's Kafka type id.
    pub fn record_type(&self) -> MetadataRecordType {
        match self {
            MetadataRecord::RegisterBroker(_) => MetadataRecordType::RegisterBroker,
            MetadataRecord::Topic(_) => MetadataRecordType::Topic,
            MetadataRecord::Partition(_) => MetadataRecordType::Partition,
            MetadataRecord::Config(_) => MetadataRecordType::Config,
            MetadataRecord::RemoveTopic(_) => MetadataRecordType::RemoveTopic,
            MetadataRecord::ProducerIds(_) => MetadataRecordType::ProducerIds,
        }
    }

    /// Encodes the record value, framing included.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.uvarint(FRAME_VERSION);
        w.uvarint(self.record_type() as u32);
        w.uvarint(RECORD_VERSION);
        match self {
            MetadataRecord::RegisterBroker(r) => r.encode(&mut w),
            MetadataRecord::Topic(r) => r.encode(&mut w),
            MetadataRecord::Partition(r) => r.encode(&mut w),
            MetadataRecord::Config(r) => r.encode(&mut w),
            MetadataRecord::RemoveTopic(r) => r.encode(&mut w),
            MetadataRecord::ProducerIds(r) => r.encode(&mut w),
        }
        w.buf
    }

    /// Decodes one record value, framing included.
    ///
    /// # Errors
    ///
    /// [`MetadataError::CorruptRecord`] (with `offset: None`) when the bytes are not a
    /// complete, known, version-0 record with nothing after it. Never panics.
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
        if version != RECORD_VERSION {
            return Err(DecodeError::UnsupportedRecordVersion {
                record_type: record_type as u16,
                version,
            });
        }
        let record = match record_type {
            MetadataRecordType::RegisterBroker => {
                MetadataRecord::RegisterBroker(RegisterBrokerRecord::decode(&mut r)?)
            }
            MetadataRecordType::Topic => MetadataRecord::Topic(TopicRecord::decode(&mut r)?),
            MetadataRecordType::Partition => {
                MetadataRecord::Partition(PartitionRecord::decode(&mut r)?)
            }
            MetadataRecordType::Config => MetadataRecord::Config(ConfigRecord::decode(&mut r)?),
            MetadataRecordType::RemoveTopic => {
                MetadataRecord::RemoveTopic(RemoveTopicRecord::decode(&mut r)?)
            }
            MetadataRecordType::ProducerIds => {
                MetadataRecord::ProducerIds(ProducerIdsRecord::decode(&mut r)?)
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
            any::<bool>(),
        )
            .prop_map(
                |(broker_id, incarnation_id, broker_epoch, endpoints, features, rack, fenced)| {
                    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                        broker_id,
                        incarnation_id,
                        broker_epoch,
                        endpoints,
                        features,
                        rack,
                        fenced,
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
                    })
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
        prop_oneof![broker, topic, partition, config, remove, producer_ids]
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
            ty in prop_oneof![Just(0u8), Just(2), Just(3), Just(4), Just(9), Just(15)],
            tail in proptest::collection::vec(any::<u8>(), 0..128),
        ) {
            let mut bytes = vec![1, ty, 0];
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
            MetadataRecord::decode(&[1, 17, 0]),
            Err(MetadataError::CorruptRecord {
                source: DecodeError::UnknownRecordType(17),
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
}
