//! The tables of supported APIs and versions, one per listener type.
//!
//! They are the single source of truth for what Strata advertises in ApiVersions and what the
//! codec accepts. [`SUPPORTED_APIS`] is what clients see: an API is listed there only once its
//! handler implements every listed version completely, and the broker's dispatch `match` has
//! one arm per entry. [`CONTROLLER_APIS`] is what a controller listener accepts (see its
//! docs for which of them are answered yet).

use kafka_protocol::messages::ApiKey;

/// A supported API and its inclusive version range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedApi {
    /// The API key.
    pub key: ApiKey,
    /// Oldest version accepted. Kafka 4.0 dropped the older versions of several APIs (KIP-896),
    /// and the codec (generated from Kafka 4.0's schemas) cannot decode them; those that
    /// Strata still serves are translated in `codec::legacy`.
    pub min: i16,
    /// Newest version accepted.
    pub max: i16,
    /// Oldest version advertised in ApiVersions: `min`, except where a client needs to see
    /// an older one that is still refused (Produce, KAFKA-18659).
    pub advertised_min: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> SupportedApi {
    SupportedApi {
        key,
        min,
        max,
        advertised_min: min,
    }
}

/// Every API Strata serves, in API-key order.
///
/// Version notes:
/// - Produce is advertised from v0 but served from v3, as Kafka 4.0 does (KAFKA-18659):
///   librdkafka before 2.11 compresses only when the broker's Produce range starts at v0, so
///   a range starting at v3 silently turns compression off in every distribution's librdkafka.
///   Clients pick the newest version both sides know, so none sends v0-2 because of it; one
///   that does anyway (an old message format) is refused as any unserved version is.
///   Produce v0-2 and Fetch v0-3 carry magic 0 and 1 message sets, which Strata does not
///   convert (`docs/ARCHITECTURE.md`, "Old clients").
/// - Produce stops at v12 (KIP-890's transaction version 2: the partition's leader adds the
///   partition to its producer's transaction); v13 addresses topics by id.
/// - EndTxn v5 and TxnOffsetCommit v5 are transaction version 2's (an epoch bump at every end,
///   and the offsets partition added implicitly); ApiVersions finalizes `transaction.version`
///   2, which is what makes Kafka's Java producer use them.
/// - Fetch stops at v16: v17 and later only add replica fields for follower fetching.
/// - Metadata stops at v12: v13 adds a top-level error code used for re-bootstrap (KIP-1102).
/// - ListOffsets stops at v8: v9 (tiered storage) and v10 (KIP-1075 timeouts) are not served.
/// - ListTransactions stops at v1: v2's transactional id pattern (KIP-1152) is not served.
/// - InitProducerId stops at v5: v6 adds two-phase commit (KIP-939), which Kafka 4.1 marks
///   unstable and serves only with `unstable.api.versions.enable` (its `keep_prepared_txn`
///   answers UNSUPPORTED_VERSION there).
/// - Versions Kafka 4.0 removed (KIP-896) that clients still in service send are served
///   (as Redpanda does): JoinGroup v0-1 through the codec, and ListOffsets v0, OffsetCommit
///   v0-1, OffsetFetch v0, CreateTopics v0-1, DeleteTopics v0 and DescribeConfigs v0
///   translated in `codec::legacy`.
/// - IncrementalAlterConfigs and AlterConfigs serve topic and broker resources (KIP-226's
///   dynamic broker configs); BROKER_LOGGER resources are refused.
/// - DescribeTopicPartitions (KIP-966) has no eligible leader replicas to report: ELR is off.
/// - DescribeLogDirs starts at v1: Kafka 4.0 removed v0 (KIP-896), and no client in service
///   sends it.
/// - DescribeAcls, CreateAcls and DeleteAcls start at v1 (KIP-290's pattern types): Kafka
///   4.0 removed v0 (KIP-896). Without `authorizer.class.name` they answer
///   SECURITY_DISABLED, as Kafka does.
/// - OffsetForLeaderEpoch starts at v2, the first with `current_leader_epoch` (KIP-320),
///   where Kafka 4.0's codec starts too; consumers use it to validate positions, and a
///   follower's `replica_id` (v3+) is answered as a consumer's.
/// - DescribeQuorum is forwarded to the active controller, as Kafka's brokers do for
///   `kafka-metadata-quorum.sh --bootstrap-server`.
pub const SUPPORTED_APIS: &[SupportedApi] = &[
    SupportedApi {
        key: ApiKey::Produce,
        min: 3,
        max: 12,
        advertised_min: 0,
    },
    api(ApiKey::Fetch, 4, 16),
    api(ApiKey::ListOffsets, 0, 8),
    api(ApiKey::Metadata, 0, 12),
    api(ApiKey::OffsetCommit, 0, 9),
    api(ApiKey::OffsetFetch, 0, 9),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 0, 7),
    api(ApiKey::DeleteTopics, 0, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::AddPartitionsToTxn, 0, 5),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 5),
    api(ApiKey::WriteTxnMarkers, 1, 1),
    api(ApiKey::TxnOffsetCommit, 0, 5),
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    api(ApiKey::DescribeConfigs, 0, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::DescribeLogDirs, 1, 4),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::ElectLeaders, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::AlterPartitionReassignments, 0, 1),
    api(ApiKey::ListPartitionReassignments, 0, 0),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::DescribeQuorum, 0, 2),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 1),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    api(ApiKey::DescribeTopicPartitions, 0, 0),
];

/// The APIs of the controller listener (`controller.listener.names`): the KRaft quorum's
/// own RPCs (KIP-595, KIP-853), the broker-to-controller RPCs (KIP-631, KIP-497,
/// KIP-730) and the forwarded metadata writes, as Kafka's controller exposes them. They are never advertised to clients: a connection on
/// a client listener sees [`SUPPORTED_APIS`] only, and one on the controller listener sees
/// this table only, as Kafka's `ApiVersionManager` does for its two listener types.
///
/// The codec decodes and encodes every entry; which of them the broker answers is up to
/// its controller-listener dispatch.
///
/// Version notes:
/// - Fetch is the Raft replication fetch (KIP-595); v12 is the first with its fields
///   (`LastFetchedEpoch`, `ClusterId`, the diverging epoch), v17 adds `ReplicaDirectoryId`
///   (KIP-853), which a dynamic quorum's leader needs to count a voter's fetches.
/// - AlterPartition starts at v2: Kafka 4.0's codec has no v0 or v1 (topic names).
/// - CreateTopics, DeleteTopics, CreateAcls, DeleteAcls, AlterConfigs, CreatePartitions,
///   ElectLeaders, IncrementalAlterConfigs and AlterPartitionReassignments are the metadata writes
///   brokers forward to a dedicated controller (Kafka's controller serves them on this
///   listener too), at the client table's versions, since a broker forwards them at the
///   version its client sent; an old version translated in `codec::legacy` is
///   forwarded as the codec's oldest, which means the same. ListPartitionReassignments is a read Kafka's brokers forward
///   as well, since only the controller knows the pending moves for sure (KIP-455).
///   AlterClientQuotas (KIP-546) and AlterUserScramCredentials (KIP-554) are forwarded too:
///   quotas and SCRAM credentials are metadata records.
/// - SaslHandshake and SaslAuthenticate: a SASL controller listener authenticates nodes
///   (and admin clients) as a client listener does.
pub const CONTROLLER_APIS: &[SupportedApi] = &[
    api(ApiKey::Fetch, 12, 17),
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::ElectLeaders, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::AlterPartitionReassignments, 0, 1),
    api(ApiKey::ListPartitionReassignments, 0, 0),
    api(ApiKey::AlterClientQuotas, 0, 1),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::Vote, 0, 2),
    api(ApiKey::BeginQuorumEpoch, 0, 1),
    api(ApiKey::EndQuorumEpoch, 0, 1),
    api(ApiKey::DescribeQuorum, 0, 2),
    api(ApiKey::AlterPartition, 2, 3),
    api(ApiKey::FetchSnapshot, 0, 1),
    api(ApiKey::BrokerRegistration, 0, 4),
    api(ApiKey::BrokerHeartbeat, 0, 1),
    api(ApiKey::AllocateProducerIds, 0, 0),
    api(ApiKey::AddRaftVoter, 0, 0),
    api(ApiKey::RemoveRaftVoter, 0, 0),
    api(ApiKey::UpdateRaftVoter, 0, 0),
];

/// Which table a connection is served from: Kafka's `ListenerType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListenerType {
    /// A client listener (`listeners` minus the controller's): [`SUPPORTED_APIS`].
    Broker,
    /// A listener named in `controller.listener.names`: [`CONTROLLER_APIS`].
    Controller,
}

impl ListenerType {
    /// The APIs served on this kind of listener.
    #[must_use]
    pub fn apis(self) -> &'static [SupportedApi] {
        match self {
            ListenerType::Broker => SUPPORTED_APIS,
            ListenerType::Controller => CONTROLLER_APIS,
        }
    }

    /// Looks up the range served for an API key on this kind of listener.
    #[must_use]
    pub fn supported(self, key: ApiKey) -> Option<&'static SupportedApi> {
        self.apis().iter().find(|a| a.key == key)
    }

    /// Whether `version` of `key` is served on this kind of listener.
    #[must_use]
    pub fn is_supported(self, key: ApiKey, version: i16) -> bool {
        self.supported(key)
            .is_some_and(|a| (a.min..=a.max).contains(&version))
    }
}

/// Looks up the supported range for an API key on a client listener.
#[must_use]
pub fn supported(key: ApiKey) -> Option<&'static SupportedApi> {
    ListenerType::Broker.supported(key)
}

/// Whether `version` of `key` is served on a client listener.
#[must_use]
pub fn is_supported(key: ApiKey, version: i16) -> bool {
    ListenerType::Broker.is_supported(key, version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Message;

    /// Every advertised range must lie inside what the codec can decode and encode.
    #[test]
    fn advertised_ranges_are_within_the_codec() {
        use kafka_protocol::messages::*;
        for a in SUPPORTED_APIS.iter().chain(CONTROLLER_APIS) {
            let codec = match a.key {
                ApiKey::Produce => ProduceRequest::VERSIONS,
                ApiKey::Fetch => FetchRequest::VERSIONS,
                ApiKey::ListOffsets => ListOffsetsRequest::VERSIONS,
                ApiKey::Metadata => MetadataRequest::VERSIONS,
                ApiKey::OffsetCommit => OffsetCommitRequest::VERSIONS,
                ApiKey::OffsetFetch => OffsetFetchRequest::VERSIONS,
                ApiKey::FindCoordinator => FindCoordinatorRequest::VERSIONS,
                ApiKey::JoinGroup => JoinGroupRequest::VERSIONS,
                ApiKey::Heartbeat => HeartbeatRequest::VERSIONS,
                ApiKey::LeaveGroup => LeaveGroupRequest::VERSIONS,
                ApiKey::SyncGroup => SyncGroupRequest::VERSIONS,
                ApiKey::DescribeGroups => DescribeGroupsRequest::VERSIONS,
                ApiKey::ListGroups => ListGroupsRequest::VERSIONS,
                ApiKey::SaslHandshake => SaslHandshakeRequest::VERSIONS,
                ApiKey::SaslAuthenticate => SaslAuthenticateRequest::VERSIONS,
                ApiKey::ApiVersions => ApiVersionsRequest::VERSIONS,
                ApiKey::CreateTopics => CreateTopicsRequest::VERSIONS,
                ApiKey::DeleteTopics => DeleteTopicsRequest::VERSIONS,
                ApiKey::DeleteRecords => DeleteRecordsRequest::VERSIONS,
                ApiKey::DescribeConfigs => DescribeConfigsRequest::VERSIONS,
                ApiKey::DescribeAcls => DescribeAclsRequest::VERSIONS,
                ApiKey::CreateAcls => CreateAclsRequest::VERSIONS,
                ApiKey::DeleteAcls => DeleteAclsRequest::VERSIONS,
                ApiKey::AlterConfigs => AlterConfigsRequest::VERSIONS,
                ApiKey::DescribeLogDirs => DescribeLogDirsRequest::VERSIONS,
                ApiKey::DescribeCluster => DescribeClusterRequest::VERSIONS,
                ApiKey::ElectLeaders => ElectLeadersRequest::VERSIONS,
                ApiKey::CreatePartitions => CreatePartitionsRequest::VERSIONS,
                ApiKey::DeleteGroups => DeleteGroupsRequest::VERSIONS,
                ApiKey::IncrementalAlterConfigs => IncrementalAlterConfigsRequest::VERSIONS,
                ApiKey::AlterPartitionReassignments => AlterPartitionReassignmentsRequest::VERSIONS,
                ApiKey::ListPartitionReassignments => ListPartitionReassignmentsRequest::VERSIONS,
                ApiKey::OffsetDelete => OffsetDeleteRequest::VERSIONS,
                ApiKey::InitProducerId => InitProducerIdRequest::VERSIONS,
                ApiKey::OffsetForLeaderEpoch => OffsetForLeaderEpochRequest::VERSIONS,
                ApiKey::DescribeProducers => DescribeProducersRequest::VERSIONS,
                ApiKey::DescribeTransactions => DescribeTransactionsRequest::VERSIONS,
                ApiKey::WriteTxnMarkers => WriteTxnMarkersRequest::VERSIONS,
                ApiKey::AddPartitionsToTxn => AddPartitionsToTxnRequest::VERSIONS,
                ApiKey::AddOffsetsToTxn => AddOffsetsToTxnRequest::VERSIONS,
                ApiKey::EndTxn => EndTxnRequest::VERSIONS,
                ApiKey::TxnOffsetCommit => TxnOffsetCommitRequest::VERSIONS,
                ApiKey::ListTransactions => ListTransactionsRequest::VERSIONS,
                ApiKey::DescribeClientQuotas => DescribeClientQuotasRequest::VERSIONS,
                ApiKey::AlterClientQuotas => AlterClientQuotasRequest::VERSIONS,
                ApiKey::DescribeUserScramCredentials => {
                    DescribeUserScramCredentialsRequest::VERSIONS
                }
                ApiKey::AlterUserScramCredentials => AlterUserScramCredentialsRequest::VERSIONS,
                ApiKey::ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest::VERSIONS,
                ApiKey::ConsumerGroupDescribe => ConsumerGroupDescribeRequest::VERSIONS,
                ApiKey::DescribeTopicPartitions => DescribeTopicPartitionsRequest::VERSIONS,
                ApiKey::Vote => VoteRequest::VERSIONS,
                ApiKey::BeginQuorumEpoch => BeginQuorumEpochRequest::VERSIONS,
                ApiKey::EndQuorumEpoch => EndQuorumEpochRequest::VERSIONS,
                ApiKey::DescribeQuorum => DescribeQuorumRequest::VERSIONS,
                ApiKey::AlterPartition => AlterPartitionRequest::VERSIONS,
                ApiKey::FetchSnapshot => FetchSnapshotRequest::VERSIONS,
                ApiKey::BrokerRegistration => BrokerRegistrationRequest::VERSIONS,
                ApiKey::BrokerHeartbeat => BrokerHeartbeatRequest::VERSIONS,
                ApiKey::AllocateProducerIds => AllocateProducerIdsRequest::VERSIONS,
                ApiKey::AddRaftVoter => AddRaftVoterRequest::VERSIONS,
                ApiKey::RemoveRaftVoter => RemoveRaftVoterRequest::VERSIONS,
                ApiKey::UpdateRaftVoter => UpdateRaftVoterRequest::VERSIONS,
                other => panic!("no codec range recorded for {other:?}"),
            };
            // Versions older than the codec's must each be translated (`codec::legacy`).
            let translated = (a.min..codec.min).all(|v| crate::codec::legacy::is_legacy(a.key, v));
            assert!(
                translated && a.max <= codec.max,
                "{:?} {}..{} outside {codec}",
                a.key,
                a.min,
                a.max
            );
        }
    }

    #[test]
    fn table_is_sorted_by_key_and_unique() {
        for table in [SUPPORTED_APIS, CONTROLLER_APIS] {
            let keys: Vec<i16> = table.iter().map(|a| a.key as i16).collect();
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(keys, sorted);
        }
    }

    /// Clients never see the controller's RPCs, and the controller listener serves none of
    /// the client APIs except ApiVersions, Fetch and the forwarded metadata writes, as
    /// Kafka's controller exposes them.
    #[test]
    fn the_controller_rpcs_are_not_on_the_client_listener() {
        for a in CONTROLLER_APIS {
            // DescribeQuorum: clients ask any broker, which forwards it (as Kafka's do).
            let shared = matches!(
                a.key,
                ApiKey::ApiVersions
                    | ApiKey::Fetch
                    | ApiKey::DescribeQuorum
                    | ApiKey::SaslHandshake
                    | ApiKey::SaslAuthenticate
            ) || crate::codec::FORWARDED_APIS.contains(&a.key);
            assert_eq!(supported(a.key).is_some(), shared, "{:?}", a.key);
        }
        // A broker forwards a write at the version its client sent, or at the codec's
        // oldest for an old one (`codec::legacy::codec_version`): the controller listener
        // takes every such version.
        for key in crate::codec::FORWARDED_APIS {
            let client = supported(key).unwrap();
            let controller = ListenerType::Controller.supported(key).unwrap();
            assert_eq!(controller.max, client.max, "{key:?}");
            assert_eq!(
                controller.min,
                crate::codec::legacy::codec_version(key, client.min),
                "{key:?}"
            );
        }
        assert!(!ListenerType::Controller.is_supported(ApiKey::Metadata, 12));
        for key in [
            ApiKey::Vote,
            ApiKey::BrokerHeartbeat,
            ApiKey::AlterPartition,
            ApiKey::AllocateProducerIds,
        ] {
            assert!(!is_supported(key, 0));
            assert!(ListenerType::Controller.supported(key).is_some());
        }
        assert!(!ListenerType::Controller.is_supported(ApiKey::Produce, 9));
        assert!(!ListenerType::Controller.is_supported(ApiKey::Fetch, 11));
    }
}
