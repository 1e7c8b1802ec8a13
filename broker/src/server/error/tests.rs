use strata_kraft::{AlterPartitionError, InvalidAlterPartition};

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
