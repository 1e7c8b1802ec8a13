//! The one place where domain errors become Kafka error codes.
//!
//! Each function matches exhaustively with no catch-all arm, so a new variant in a domain
//! crate fails the build here until someone decides its Kafka code.

use strata_kraft::acl::AclError;
use strata_kraft::client_quotas::ClientQuotaError;
use strata_kraft::scram::ScramError;
use strata_kraft::{
    AlterPartitionError, ClusterControlError, ElectionError, InvalidReassignment, MetadataError,
    ReassignmentError,
};
use strata_protocol::ResponseError;
use strata_replication::ReplicationError;
use strata_storage::LogError;

use crate::broker::leadership::LeadershipError;
use crate::broker::{ControllerError, CreateTopicError, PartitionUnavailable};
use crate::coordinator::group::OffsetDeleteRefusal;
use crate::coordinator::group::classic::GroupError;
use crate::coordinator::group::consumer::{
    ConsumerGroupError, ConsumerGroupInUse, DeleteConsumerGroupError,
};
use crate::coordinator::runtime::CoordinatorError;
use crate::coordinator::txn::store::TxnError;
use crate::partition::{FlushError, LeaderAppendError};
use crate::server::handlers::incremental_alter_configs::ConfigRefusal;
use crate::server::handlers::offset_commit::CommitRefusal;
use crate::server::handlers::produce::{AckError, ProduceRefusal};
use crate::server::placement::CoordinatorUnavailable;

// The Raft APIs' codes are mapped beside their codec, one layer down (`quorum` is below
// `server`, and imports nothing above it); re-exported so every mapping is reachable here.
pub use crate::quorum::wire::refusal::{QuorumRefusal, quorum_refusal_code};

/// A storage error as a partition-level Kafka error code.
#[must_use]
pub fn log_error_code(e: &LogError) -> i16 {
    match e {
        LogError::OffsetOutOfRange { .. } | LogError::LogStartAboveHighWatermark { .. } => {
            ResponseError::OffsetOutOfRange.code()
        }
        LogError::CorruptMessage { .. } => ResponseError::CorruptMessage.code(),
        LogError::InvalidRecord { .. } => ResponseError::InvalidRecord.code(),
        LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge.code(),
        LogError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber.code(),
        LogError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch.code(),
        LogError::InvalidProducerSequence { .. } | LogError::ControlBatchFromClient => {
            ResponseError::InvalidRecord.code()
        }
        LogError::InvalidTxnState { .. } => ResponseError::InvalidTxnState.code(),
        LogError::TransactionCoordinatorFenced { .. } => {
            ResponseError::TransactionCoordinatorFenced.code()
        }
        LogError::UnexpectedOffset { .. } => ResponseError::UnknownServerError.code(),
        LogError::CorruptSegment { .. } | LogError::Decompress { .. } | LogError::Io { .. } => {
            ResponseError::KafkaStorageError.code()
        }
    }
}

/// A group commit's failure as the produce's error code: the log's own code, else
/// KAFKA_STORAGE_ERROR (the fsync failed).
#[must_use]
pub fn flush_error_code(e: &FlushError) -> i16 {
    match e {
        FlushError::Log(e) => log_error_code(e),
        FlushError::Storage(_) => ResponseError::KafkaStorageError.code(),
    }
}

/// A client-quota entity, key or filter refused (KIP-546), as Kafka's error code: an
/// unknown filter entity type is UNSUPPORTED_VERSION, as Kafka answers it; everything else
/// is INVALID_REQUEST.
#[must_use]
pub fn client_quota_error_code(e: &ClientQuotaError) -> i16 {
    match e {
        ClientQuotaError::UnsupportedEntityType { .. } => ResponseError::UnsupportedVersion.code(),
        ClientQuotaError::EmptyEntity
        | ClientQuotaError::DuplicateEntityType { .. }
        | ClientQuotaError::UnknownEntityType { .. }
        | ClientQuotaError::EmptyName { .. }
        | ClientQuotaError::InvalidCombination
        | ClientQuotaError::IpNotSupported
        | ClientQuotaError::UnknownKey { .. }
        | ClientQuotaError::NotALong { .. }
        | ClientQuotaError::InvalidValue { .. }
        | ClientQuotaError::DuplicateKey { .. }
        | ClientQuotaError::DuplicateEntity
        | ClientQuotaError::EmptyFilterType
        | ClientQuotaError::DuplicateFilterType { .. }
        | ClientQuotaError::ExactWithoutMatch
        | ClientQuotaError::DefaultWithMatch
        | ClientQuotaError::SpecifiedWithMatch
        | ClientQuotaError::UnknownMatchType { .. }
        | ClientQuotaError::IpFilterCombination => ResponseError::InvalidRequest.code(),
    }
}

/// A SCRAM credential error (KIP-554) as Kafka's error code (`ScramControlManager`,
/// `ScramImage.describe`).
#[must_use]
pub fn scram_error_code(e: &ScramError) -> i16 {
    match e {
        ScramError::AlteredTwice | ScramError::DescribedTwice { .. } => {
            ResponseError::DuplicateResource.code()
        }
        ScramError::EmptyUser
        | ScramError::TooFewIterations { .. }
        | ScramError::TooManyIterations { .. } => ResponseError::UnacceptableCredential.code(),
        ScramError::UnknownMechanism { .. } => ResponseError::UnsupportedSaslMechanism.code(),
        ScramError::DeleteUnknown | ScramError::DescribeUnknown { .. } => {
            ResponseError::ResourceNotFound.code()
        }
    }
}

/// A metadata (controller) error as a topic-level Kafka error code.
#[must_use]
pub fn metadata_error_code(e: &MetadataError) -> i16 {
    match e {
        MetadataError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists.code(),
        MetadataError::InvalidTopicName { .. } => ResponseError::InvalidTopicException.code(),
        MetadataError::InvalidPartitions(_) | MetadataError::PartitionCountNotIncreased(_) => {
            ResponseError::InvalidPartitions.code()
        }
        MetadataError::InvalidReplicaAssignment(_) => {
            ResponseError::InvalidReplicaAssignment.code()
        }
        MetadataError::InvalidReplicationFactor { .. } => {
            ResponseError::InvalidReplicationFactor.code()
        }
        MetadataError::InvalidConfig { .. } => ResponseError::InvalidConfig.code(),
        MetadataError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition.code(),
        MetadataError::UnknownTopicId(_) => ResponseError::UnknownTopicId.code(),
        MetadataError::BrokerNotRegistered(_) => ResponseError::BrokerIdNotRegistered.code(),
        // Kafka's ProducerIdControlManager throws UnknownServerException here.
        MetadataError::ProducerIdsExhausted { .. } => ResponseError::UnknownServerError.code(),
        MetadataError::CorruptRecord { .. }
        | MetadataError::CorruptBatch { .. }
        | MetadataError::InconsistentRecord { .. }
        | MetadataError::NodeIdMismatch { .. }
        | MetadataError::InvalidMetaProperties { .. }
        | MetadataError::Io { .. }
        | MetadataError::Storage(_)
        | MetadataError::LogFailed => ResponseError::KafkaStorageError.code(),
        MetadataError::NotController => ResponseError::NotController.code(),
        MetadataError::Timeout => ResponseError::RequestTimedOut.code(),
        MetadataError::CorruptEntry(_) => ResponseError::UnknownServerError.code(),
    }
}

/// One partition's ElectLeaders outcome as its Kafka error code (KIP-460).
#[must_use]
pub fn election_error_code(e: ElectionError) -> i16 {
    match e {
        ElectionError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition.code(),
        ElectionError::ElectionNotNeeded => ResponseError::ElectionNotNeeded.code(),
        ElectionError::PreferredLeaderNotAvailable => {
            ResponseError::PreferredLeaderNotAvailable.code()
        }
        ElectionError::EligibleLeadersNotAvailable => {
            ResponseError::EligibleLeadersNotAvailable.code()
        }
    }
}

/// One partition's AlterPartitionReassignments outcome as its Kafka error code (KIP-455,
/// KIP-860).
#[must_use]
pub fn reassignment_error_code(e: &ReassignmentError) -> i16 {
    match e {
        ReassignmentError::UnknownTopic(_) | ReassignmentError::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition.code()
        }
        ReassignmentError::InvalidReplicaAssignment(
            InvalidReassignment::Empty
            | InvalidReassignment::UnregisteredBroker(_)
            | InvalidReassignment::DuplicateBroker(_)
            | InvalidReassignment::UncleanRevert { .. },
        ) => ResponseError::InvalidReplicaAssignment.code(),
        ReassignmentError::ReplicationFactorChanged { .. } => {
            ResponseError::InvalidReplicationFactor.code()
        }
        ReassignmentError::NoReassignmentInProgress => {
            ResponseError::NoReassignmentInProgress.code()
        }
    }
}

/// A topic-creation failure as a Kafka error code.
#[must_use]
pub fn create_topic_error_code(e: &CreateTopicError) -> i16 {
    match e {
        CreateTopicError::Metadata(m) => metadata_error_code(m),
    }
}

/// A partition this broker does not serve as the partition-level code of Produce, Fetch
/// and ListOffsets, as Kafka's `ReplicaManager.getPartitionOrException` answers: an offline
/// partition is a `KafkaStorageException` ("Partition ... is in an offline log directory").
#[must_use]
pub fn partition_unavailable_code(e: PartitionUnavailable) -> i16 {
    match e {
        PartitionUnavailable::Unknown => ResponseError::UnknownTopicOrPartition.code(),
        PartitionUnavailable::Offline => ResponseError::KafkaStorageError.code(),
    }
}

/// Why this node does not serve a partition's data, as the partition-level code of Produce,
/// Fetch, ListOffsets and OffsetForLeaderEpoch (Kafka's `ReplicaManager` and
/// `Partition.getLocalLog`). An epoch cache that cannot be written is a storage failure.
#[must_use]
pub fn leadership_error_code(e: LeadershipError) -> i16 {
    match e {
        LeadershipError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition.code(),
        LeadershipError::Offline | LeadershipError::Storage => {
            ResponseError::KafkaStorageError.code()
        }
        LeadershipError::NotLeaderOrFollower => ResponseError::NotLeaderOrFollower.code(),
        LeadershipError::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch.code(),
        LeadershipError::UnknownLeaderEpoch => ResponseError::UnknownLeaderEpoch.code(),
    }
}

/// A failure of a coordinator store (`__consumer_offsets` or `__transaction_state`) as the
/// code of a coordinator API. The storage error's code is normalised as Kafka's
/// `GroupCoordinatorService.normalizeException` does: a storage failure means this
/// coordinator cannot serve the key (NOT_COORDINATOR, so the client rediscovers it and
/// retries); a write the log refuses is the broker's own fault
/// (UNKNOWN_SERVER_ERROR), since the coordinator built the batch.
#[must_use]
pub fn coordinator_error_code(e: &CoordinatorError) -> i16 {
    let code = match e {
        CoordinatorError::NotCoordinator { .. } => return ResponseError::NotCoordinator.code(),
        CoordinatorError::LoadInProgress { .. } => {
            return ResponseError::CoordinatorLoadInProgress.code();
        }
        CoordinatorError::Append { source, .. } => leader_append_error_code(source),
        CoordinatorError::NotCommitted { cause, .. } => ack_error_code(cause),
        CoordinatorError::Flush { source, .. } => flush_error_code(source),
        CoordinatorError::Log { source, .. } => log_error_code(source),
        CoordinatorError::CorruptBatch { .. } | CoordinatorError::Read { .. } => {
            ResponseError::KafkaStorageError.code()
        }
    };
    if code == ResponseError::KafkaStorageError.code()
        || code == ResponseError::NotLeaderOrFollower.code()
    {
        ResponseError::NotCoordinator.code()
    } else if code == ResponseError::UnknownTopicOrPartition.code()
        || code == ResponseError::NotEnoughReplicas.code()
        || code == ResponseError::NotEnoughReplicasAfterAppend.code()
        || code == ResponseError::RequestTimedOut.code()
    {
        ResponseError::CoordinatorNotAvailable.code()
    } else {
        ResponseError::UnknownServerError.code()
    }
}

/// A transaction coordinator request's failure as its code, before any version mapping:
/// the state machine's own code, or the store's failure as [`coordinator_error_code`] says.
#[must_use]
pub fn txn_error_code(e: &TxnError) -> i16 {
    match e {
        TxnError::Refused(code) | TxnError::ProducerId(code) => *code,
        TxnError::Coordinator(e) => coordinator_error_code(e),
    }
}

/// PRODUCER_FENCED came with KIP-588 (InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn,
/// EndTxn and TxnOffsetCommit v2 or v3); older versions know INVALID_PRODUCER_EPOCH.
#[must_use]
pub fn fenced_for_version(code: i16, version: i16, first_with_fenced: i16) -> i16 {
    if code == ResponseError::ProducerFenced.code() && version < first_with_fenced {
        ResponseError::InvalidProducerEpoch.code()
    } else {
        code
    }
}

/// A group coordinator refusal as its Kafka error code.
#[must_use]
pub fn group_error_code(e: &GroupError) -> i16 {
    match e {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId.code(),
        GroupError::InvalidSessionTimeout { .. } => ResponseError::InvalidSessionTimeout.code(),
        GroupError::MemberIdRequired { .. } => ResponseError::MemberIdRequired.code(),
        GroupError::UnknownMemberId { .. } => ResponseError::UnknownMemberId.code(),
        GroupError::FencedInstanceId { .. } => ResponseError::FencedInstanceId.code(),
        GroupError::IllegalGeneration { .. } => ResponseError::IllegalGeneration.code(),
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress.code(),
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol.code(),
        GroupError::GroupIdNotFound { .. } => ResponseError::GroupIdNotFound.code(),
        GroupError::NonEmptyGroup { .. } => ResponseError::NonEmptyGroup.code(),
        GroupError::NotCoordinator => ResponseError::NotCoordinator.code(),
    }
}

/// A consumer-group (KIP-848) coordinator refusal as its Kafka error code.
#[must_use]
pub fn consumer_group_error_code(e: &ConsumerGroupError) -> i16 {
    match e {
        ConsumerGroupError::InvalidRequest { .. } => ResponseError::InvalidRequest.code(),
        ConsumerGroupError::UnknownMemberId { .. } => ResponseError::UnknownMemberId.code(),
        ConsumerGroupError::NotCoordinator => ResponseError::NotCoordinator.code(),
        ConsumerGroupError::FencedMemberEpoch { .. } => ResponseError::FencedMemberEpoch.code(),
        ConsumerGroupError::StaleMemberEpoch { .. } => ResponseError::StaleMemberEpoch.code(),
        ConsumerGroupError::NotConsumerGroup { .. } => ResponseError::GroupIdNotFound.code(),
        ConsumerGroupError::UnsupportedAssignor { .. } => ResponseError::UnsupportedAssignor.code(),
        ConsumerGroupError::UnreleasedInstanceId { .. } => {
            ResponseError::UnreleasedInstanceId.code()
        }
        ConsumerGroupError::FencedInstanceId { .. } => ResponseError::FencedInstanceId.code(),
        ConsumerGroupError::GroupMaxSizeReached { .. } => ResponseError::GroupMaxSizeReached.code(),
        ConsumerGroupError::UnsupportedCommitVersion { .. } => {
            ResponseError::UnsupportedVersion.code()
        }
        ConsumerGroupError::InvalidRegularExpression { .. } => {
            ResponseError::InvalidRegularExpression.code()
        }
    }
}

/// A consumer group DeleteGroups does not delete as the group's code: one with members is
/// NON_EMPTY_GROUP; an id no consumer group has is GROUP_ID_NOT_FOUND (the handler first asks
/// the classic coordinator, which may know it).
#[must_use]
pub fn delete_consumer_group_error_code(e: DeleteConsumerGroupError) -> i16 {
    match e {
        DeleteConsumerGroupError::NotConsumerGroup => group_refusal_code(GroupRefusal::NotFound),
        DeleteConsumerGroupError::NonEmpty => group_refusal_code(GroupRefusal::NonEmpty),
    }
}

/// A consumer group that keeps its id as a classic JoinGroup's code: Kafka without online
/// migration answers INCONSISTENT_GROUP_PROTOCOL.
#[must_use]
pub fn consumer_group_in_use_code(e: ConsumerGroupInUse) -> i16 {
    match e {
        ConsumerGroupInUse::HasMembers => group_error_code(&GroupError::InconsistentGroupProtocol),
    }
}

/// An OffsetDelete refusal as its Kafka code: GROUP_ID_NOT_FOUND and NON_EMPTY_GROUP for
/// the group, GROUP_SUBSCRIBED_TO_TOPIC for each partition of a subscribed topic.
#[must_use]
pub fn offset_delete_refusal_code(e: OffsetDeleteRefusal) -> i16 {
    match e {
        OffsetDeleteRefusal::GroupNotFound => group_refusal_code(GroupRefusal::NotFound),
        OffsetDeleteRefusal::NonEmpty => group_refusal_code(GroupRefusal::NonEmpty),
        OffsetDeleteRefusal::SubscribedTopic => ResponseError::GroupSubscribedToTopic.code(),
    }
}

/// Kafka's error code for a failed controller operation.
#[must_use]
pub fn controller_error_code(e: &ControllerError) -> i16 {
    match e {
        ControllerError::Metadata(MetadataError::NotController) => {
            ResponseError::NotController.code()
        }
        ControllerError::Metadata(MetadataError::Timeout) => ResponseError::RequestTimedOut.code(),
        ControllerError::Metadata(_) => ResponseError::UnknownServerError.code(),
        ControllerError::Cluster(c) => match c {
            ClusterControlError::StaleBrokerEpoch { .. } => ResponseError::StaleBrokerEpoch.code(),
            ClusterControlError::BrokerNotRegistered(_) => {
                ResponseError::BrokerIdNotRegistered.code()
            }
            ClusterControlError::DuplicateBrokerRegistration(_) => {
                ResponseError::DuplicateBrokerRegistration.code()
            }
            ClusterControlError::InvalidRegistration { .. } => ResponseError::InvalidRequest.code(),
        },
    }
}

/// Kafka's error code for one partition's AlterPartition error.
#[must_use]
pub fn alter_partition_error_code(e: &AlterPartitionError) -> i16 {
    match e {
        AlterPartitionError::UnknownTopicId => ResponseError::UnknownTopicId.code(),
        AlterPartitionError::UnknownTopicOrPartition => {
            ResponseError::UnknownTopicOrPartition.code()
        }
        AlterPartitionError::NotController => ResponseError::NotController.code(),
        AlterPartitionError::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch.code(),
        AlterPartitionError::InvalidUpdateVersion => ResponseError::InvalidUpdateVersion.code(),
        AlterPartitionError::InvalidRequest(_) => ResponseError::InvalidRequest.code(),
        AlterPartitionError::IneligibleReplica(_) => ResponseError::IneligibleReplica.code(),
        AlterPartitionError::NewLeaderElected => ResponseError::NewLeaderElected.code(),
    }
}

/// A replication refusal as Kafka's error code.
#[must_use]
pub fn replication_error_code(e: &ReplicationError) -> i16 {
    match e {
        ReplicationError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch.code(),
        ReplicationError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch.code(),
        ReplicationError::NotLeaderOrFollower { .. } => ResponseError::NotLeaderOrFollower.code(),
        ReplicationError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        ReplicationError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas.code(),
        ReplicationError::NotEnoughReplicasAfterAppend { .. } => {
            ResponseError::NotEnoughReplicasAfterAppend.code()
        }
    }
}

/// Why a topic named in a request is refused before anything is done with it: a decision
/// the handlers share (Kafka's `KafkaApis` makes it inline in each handler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicRefusal {
    /// The client may not perform the request's operation on the topic.
    Unauthorized,
    /// No topic by that name, or no such partition of it, is known here.
    Unknown,
    /// No topic has the id the request names.
    UnknownId,
    /// The request names the topic more than once.
    Duplicate,
}

/// A refused topic as its Kafka error code.
#[must_use]
pub fn topic_refusal_code(r: TopicRefusal) -> i16 {
    match r {
        TopicRefusal::Unauthorized => ResponseError::TopicAuthorizationFailed.code(),
        TopicRefusal::Unknown => ResponseError::UnknownTopicOrPartition.code(),
        TopicRefusal::UnknownId => ResponseError::UnknownTopicId.code(),
        TopicRefusal::Duplicate => ResponseError::InvalidRequest.code(),
    }
}

/// Why a group named in a request is refused by the handler before its coordinator answers:
/// a decision the group and offset handlers share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupRefusal {
    /// The client may not perform the request's operation on the group.
    Unauthorized,
    /// The group id is not one the offset APIs take (empty, or too long for a key).
    InvalidId,
    /// No group by that id is known here.
    NotFound,
    /// The group still has members.
    NonEmpty,
}

/// A refused group as its Kafka error code.
#[must_use]
pub fn group_refusal_code(r: GroupRefusal) -> i16 {
    match r {
        GroupRefusal::Unauthorized => ResponseError::GroupAuthorizationFailed.code(),
        GroupRefusal::InvalidId => ResponseError::InvalidGroupId.code(),
        GroupRefusal::NotFound => ResponseError::GroupIdNotFound.code(),
        GroupRefusal::NonEmpty => ResponseError::NonEmptyGroup.code(),
    }
}

/// A group this node does not coordinate as the code of a group request: NOT_COORDINATOR
/// when another node does (the client looks the coordinator up again),
/// COORDINATOR_NOT_AVAILABLE when none does right now.
#[must_use]
pub fn coordinator_unavailable_code(e: CoordinatorUnavailable) -> i16 {
    match e {
        CoordinatorUnavailable::Elsewhere => ResponseError::NotCoordinator.code(),
        CoordinatorUnavailable::NotAvailable => ResponseError::CoordinatorNotAvailable.code(),
        CoordinatorUnavailable::Loading => ResponseError::CoordinatorLoadInProgress.code(),
    }
}

/// An OffsetCommit the group coordinator refuses as the code every partition gets.
#[must_use]
pub fn commit_refusal_code(e: &CommitRefusal) -> i16 {
    match e {
        CommitRefusal::ConsumerGroup(e) => consumer_group_error_code(e),
        CommitRefusal::Group(e) => group_error_code(e),
        CommitRefusal::UnknownGroup => ResponseError::GroupIdNotFound.code(),
        CommitRefusal::UnknownGroupBeforeV9 => ResponseError::IllegalGeneration.code(),
    }
}

/// An ACL binding or filter refused (Kafka's `validateNewAcl`, `AclControlManager`) as its
/// Kafka error code: INVALID_REQUEST for every reason.
#[must_use]
pub fn acl_error_code(e: &AclError) -> i16 {
    match e {
        AclError::InvalidResourceType(_)
        | AclError::InvalidPatternType(_)
        | AclError::InvalidOperation(_)
        | AclError::InvalidPermissionType(_)
        | AclError::EmptyResourceName
        | AclError::InvalidClusterName
        | AclError::InvalidPrincipal(_)
        | AclError::UnknownInFilter(_) => ResponseError::InvalidRequest.code(),
    }
}

/// A producer-id block the controller did not hand out, as InitProducerId's code. No block
/// from the active controller (not reachable, no registration yet) is
/// COORDINATOR_NOT_AVAILABLE, a retriable error that sends the client to try again,
/// possibly elsewhere; anything else is the metadata error's own code.
#[must_use]
pub fn producer_id_error_code(e: &MetadataError) -> i16 {
    match e {
        MetadataError::NotController | MetadataError::Timeout => {
            ResponseError::CoordinatorNotAvailable.code()
        }
        MetadataError::TopicAlreadyExists(_)
        | MetadataError::InvalidTopicName { .. }
        | MetadataError::InvalidPartitions(_)
        | MetadataError::PartitionCountNotIncreased(_)
        | MetadataError::InvalidReplicaAssignment(_)
        | MetadataError::InvalidReplicationFactor { .. }
        | MetadataError::InvalidConfig { .. }
        | MetadataError::UnknownTopic(_)
        | MetadataError::UnknownTopicId(_)
        | MetadataError::BrokerNotRegistered(_)
        | MetadataError::ProducerIdsExhausted { .. }
        | MetadataError::CorruptRecord { .. }
        | MetadataError::CorruptBatch { .. }
        | MetadataError::InconsistentRecord { .. }
        | MetadataError::NodeIdMismatch { .. }
        | MetadataError::InvalidMetaProperties { .. }
        | MetadataError::Io { .. }
        | MetadataError::Storage(_)
        | MetadataError::LogFailed
        | MetadataError::CorruptEntry(_) => metadata_error_code(e),
    }
}

/// A leader's append refused or failed as the produce's partition code: a node that no
/// longer leads in the produce's epoch is NOT_LEADER_OR_FOLLOWER, a log error its own code.
#[must_use]
pub fn leader_append_error_code(e: &LeaderAppendError) -> i16 {
    match e {
        LeaderAppendError::NotLeader { .. } => ResponseError::NotLeaderOrFollower.code(),
        LeaderAppendError::Log(e) => log_error_code(e),
    }
}

/// Why a partition of a produce is not appended, as its partition code (Kafka's
/// `handleProduceRequest` and `ReplicaManager.appendRecords`).
#[must_use]
pub fn produce_refusal_code(e: &ProduceRefusal) -> i16 {
    match e {
        ProduceRefusal::Topic(r) => topic_refusal_code(*r),
        ProduceRefusal::InvalidRequiredAcks => ResponseError::InvalidRequiredAcks.code(),
        ProduceRefusal::Unavailable(e) => leadership_error_code(*e),
        ProduceRefusal::NullRecords
        | ProduceRefusal::KeylessRecordInCompactedTopic
        | ProduceRefusal::ControlBatch => ResponseError::InvalidRecord.code(),
        ProduceRefusal::Unverified(code) => *code,
        ProduceRefusal::TransactionalIdAuthorization => {
            ResponseError::TransactionalIdAuthorizationFailed.code()
        }
        ProduceRefusal::Replication(e) => replication_error_code(e),
        ProduceRefusal::Append(e) => leader_append_error_code(e),
    }
}

/// Why an appended acks=all produce is not acknowledged, as its partition code (Kafka's
/// `DelayedProduce`): the producer retries.
#[must_use]
pub fn ack_error_code(e: &AckError) -> i16 {
    match e {
        AckError::LeadershipEnded => ResponseError::NotLeaderOrFollower.code(),
        AckError::Replication(e) => replication_error_code(e),
        AckError::TimedOut => ResponseError::RequestTimedOut.code(),
    }
}

/// A refused config resource of DescribeConfigs, AlterConfigs or IncrementalAlterConfigs
/// as its Kafka error code (Kafka's `ConfigAdminManager` and
/// `ConfigurationControlManager`): an append or subtract on a non-list key is
/// INVALID_CONFIG, a metadata error its own code.
#[must_use]
pub fn config_refusal_code(e: &ConfigRefusal) -> i16 {
    match e {
        ConfigRefusal::InvalidRequest(_) => ResponseError::InvalidRequest.code(),
        ConfigRefusal::NotAList { .. } => ResponseError::InvalidConfig.code(),
        ConfigRefusal::UnknownTopic { .. } => topic_refusal_code(TopicRefusal::Unknown),
        ConfigRefusal::Metadata(e) => metadata_error_code(e),
    }
}

#[cfg(test)]
mod tests;
