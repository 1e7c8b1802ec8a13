use strata_kraft::{AlterPartitionError, InvalidAlterPartition};
use strata_replication::ReplicationError;

use super::*;

#[test]
fn controller_errors_get_kafkas_codes() {
    let cases = [
        (AlterPartitionError::UnknownTopicId, 100),
        (AlterPartitionError::UnknownTopicOrPartition, 3),
        (AlterPartitionError::NotController, 41),
        (AlterPartitionError::FencedLeaderEpoch, 74),
        (AlterPartitionError::InvalidUpdateVersion, 95),
        (
            AlterPartitionError::InvalidRequest(InvalidAlterPartition::NotLeader),
            42,
        ),
        (AlterPartitionError::IneligibleReplica(3), 107),
        (AlterPartitionError::NewLeaderElected, 108),
    ];
    for (e, code) in cases {
        assert_eq!(alter_partition_error_code(&e), code, "{e:?}");
    }
}

#[test]
fn topic_refusals_get_kafkas_codes() {
    let cases = [
        (TopicRefusal::Unauthorized, 29),
        (TopicRefusal::Unknown, 3),
        (TopicRefusal::UnknownId, 100),
        (TopicRefusal::Duplicate, 42),
    ];
    for (r, code) in cases {
        assert_eq!(topic_refusal_code(r), code, "{r:?}");
    }
}

#[test]
fn group_refusals_get_kafkas_codes() {
    let cases = [
        (GroupRefusal::Unauthorized, 30),
        (GroupRefusal::InvalidId, 24),
        (GroupRefusal::NotFound, 69),
        (GroupRefusal::NonEmpty, 68),
    ];
    for (r, code) in cases {
        assert_eq!(group_refusal_code(r), code, "{r:?}");
    }
}

#[test]
fn an_unavailable_coordinator_gets_kafkas_codes() {
    assert_eq!(
        coordinator_unavailable_code(CoordinatorUnavailable::Elsewhere),
        16
    );
    assert_eq!(
        coordinator_unavailable_code(CoordinatorUnavailable::NotAvailable),
        15
    );
}

#[test]
fn commit_refusals_get_kafkas_codes() {
    let cases = [
        (
            CommitRefusal::ConsumerGroup(ConsumerGroupError::StaleMemberEpoch {
                received: 1,
                current: 2,
            }),
            113,
        ),
        (CommitRefusal::Group(GroupError::RebalanceInProgress), 27),
        (CommitRefusal::UnknownGroup, 69),
        (CommitRefusal::UnknownGroupBeforeV9, 22),
    ];
    for (e, code) in cases {
        assert_eq!(commit_refusal_code(&e), code, "{e:?}");
    }
}

#[test]
fn acl_errors_are_invalid_requests() {
    let cases = [
        AclError::InvalidResourceType("UNKNOWN"),
        AclError::InvalidPatternType("ANY"),
        AclError::InvalidOperation("ANY"),
        AclError::InvalidPermissionType("ANY"),
        AclError::EmptyResourceName,
        AclError::InvalidClusterName,
        AclError::InvalidPrincipal("alice".to_owned()),
        AclError::UnknownInFilter("operation"),
    ];
    for e in cases {
        assert_eq!(acl_error_code(&e), 42, "{e:?}");
    }
}

#[test]
fn a_producer_id_block_not_handed_out_gets_kafkas_codes() {
    let cases = [
        (MetadataError::NotController, 15),
        (MetadataError::Timeout, 15),
        (MetadataError::UnknownTopic("t".to_owned()), 3),
        (MetadataError::LogFailed, 56),
    ];
    for (e, code) in cases {
        assert_eq!(producer_id_error_code(&e), code, "{e:?}");
    }
}

#[test]
fn leader_append_errors_get_kafkas_codes() {
    let not_leader = LeaderAppendError::NotLeader {
        leader_epoch: 3,
        leading: Some(4),
    };
    assert_eq!(leader_append_error_code(&not_leader), 6);
    let too_large = LeaderAppendError::Log(LogError::MessageTooLarge { size: 2, max: 1 });
    assert_eq!(leader_append_error_code(&too_large), 10);
}

#[test]
fn produce_refusals_get_kafkas_codes() {
    let cases = [
        (ProduceRefusal::Topic(TopicRefusal::Unauthorized), 29),
        (ProduceRefusal::InvalidRequiredAcks, 21),
        (
            ProduceRefusal::Unavailable(LeadershipError::NotLeaderOrFollower),
            6,
        ),
        (
            ProduceRefusal::Unavailable(LeadershipError::UnknownTopicOrPartition),
            3,
        ),
        (ProduceRefusal::NullRecords, 87),
        (ProduceRefusal::KeylessRecordInCompactedTopic, 87),
        (
            ProduceRefusal::Replication(ReplicationError::NotEnoughReplicas { isr: 1, min_isr: 2 }),
            19,
        ),
        (
            ProduceRefusal::Append(LeaderAppendError::NotLeader {
                leader_epoch: 3,
                leading: None,
            }),
            6,
        ),
    ];
    for (e, code) in cases {
        assert_eq!(produce_refusal_code(&e), code, "{e:?}");
    }
}

#[test]
fn unacknowledged_appends_get_kafkas_codes() {
    let cases = [
        (AckError::LeadershipEnded, 6),
        (
            AckError::Replication(ReplicationError::NotEnoughReplicasAfterAppend {
                isr: 1,
                min_isr: 2,
            }),
            20,
        ),
        (AckError::TimedOut, 7),
    ];
    for (e, code) in cases {
        assert_eq!(ack_error_code(&e), code, "{e:?}");
    }
}

#[test]
fn config_refusals_get_kafkas_codes_and_messages() {
    use crate::server::handlers::incremental_alter_configs::ConfigRefusal;
    let cases = [
        (
            ConfigRefusal::InvalidRequest("duplicate config key a".to_owned()),
            ResponseError::InvalidRequest.code(),
            "duplicate config key a",
        ),
        (
            ConfigRefusal::NotAList {
                key: "segment.ms".to_owned(),
            },
            ResponseError::InvalidConfig.code(),
            "config value append/subtract is not allowed for config key segment.ms",
        ),
        (
            ConfigRefusal::UnknownTopic {
                topic: "t".to_owned(),
            },
            ResponseError::UnknownTopicOrPartition.code(),
            "topic t does not exist",
        ),
        (
            ConfigRefusal::Metadata(MetadataError::NotController),
            ResponseError::NotController.code(),
            &MetadataError::NotController.to_string(),
        ),
    ];
    for (refusal, code, message) in cases {
        assert_eq!(config_refusal_code(&refusal), code, "{refusal:?}");
        assert_eq!(refusal.to_string(), message);
    }
}

#[test]
fn consumer_groups_not_deleted_get_kafkas_codes() {
    use crate::coordinator::group::consumer::DeleteConsumerGroupError;
    assert_eq!(
        delete_consumer_group_error_code(DeleteConsumerGroupError::NotConsumerGroup),
        ResponseError::GroupIdNotFound.code()
    );
    assert_eq!(
        delete_consumer_group_error_code(DeleteConsumerGroupError::NonEmpty),
        ResponseError::NonEmptyGroup.code()
    );
}

#[test]
fn a_consumer_group_keeping_its_id_is_an_inconsistent_protocol() {
    use crate::coordinator::group::consumer::ConsumerGroupInUse;
    assert_eq!(
        consumer_group_in_use_code(ConsumerGroupInUse::HasMembers),
        ResponseError::InconsistentGroupProtocol.code()
    );
}

#[test]
fn offset_delete_refusals_get_kafkas_codes() {
    use crate::coordinator::group::OffsetDeleteRefusal;
    assert_eq!(
        offset_delete_refusal_code(OffsetDeleteRefusal::GroupNotFound),
        ResponseError::GroupIdNotFound.code()
    );
    assert_eq!(
        offset_delete_refusal_code(OffsetDeleteRefusal::NonEmpty),
        ResponseError::NonEmptyGroup.code()
    );
    assert_eq!(
        offset_delete_refusal_code(OffsetDeleteRefusal::SubscribedTopic),
        ResponseError::GroupSubscribedToTopic.code()
    );
}
