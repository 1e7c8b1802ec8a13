//! OffsetCommit (key 8): store a group's consumed positions in `__consumer_offsets`.
//!
//! Checks run in Kafka's order (`KafkaApis.handleOffsetCommitRequest`, then
//! `OffsetMetadataManager.commitOffset`): an empty group id fails every partition with
//! INVALID_GROUP_ID; the group coordinator's verdict on generation and member applies to every
//! partition; then each partition on its own: an unknown topic or partition gets
//! UNKNOWN_TOPIC_OR_PARTITION, metadata longer than `offset.metadata.max.bytes` gets
//! OFFSET_METADATA_TOO_LARGE. The rest are written as one batch.

use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::ResponseError;
use strata_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use strata_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::RequestContext;
use crate::broker::{Broker, groups};
use crate::coordinator::group::classic::GroupError;
use crate::coordinator::group::consumer::ConsumerGroupError;
use crate::coordinator::offsets::{
    COMMIT_TIMEOUT, CommittedOffset, OffsetStoreError, PendingWrite,
};
use crate::server::error::{
    GroupRefusal, TopicRefusal, commit_refusal_code, coordinator_error_code,
    coordinator_unavailable_code, group_refusal_code, topic_refusal_code,
};

/// `retention_time_ms` of -1: keep the offset for `offsets.retention.minutes`.
const DEFAULT_RETENTION: i64 = -1;

/// An OffsetCommit appended, its answer waiting for the commit.
#[must_use = "the answer waits for the commit"]
pub struct PendingCommit {
    response: OffsetCommitResponse,
    write: Option<Written>,
}

/// An appended commit: the write, its group, and (topic index, partition index) of each
/// offset it holds.
struct Written {
    write: PendingWrite,
    group: String,
    at: Vec<(usize, usize)>,
}

impl PendingCommit {
    /// Waits until the offsets are committed (acks=all over the partition's ISR, as Kafka's
    /// coordinator runtime completes a write at the high watermark), at most Kafka's
    /// `offsets.commit.timeout.ms` default; each offset written answers the failure if not.
    pub async fn wait(self) -> OffsetCommitResponse {
        let PendingCommit {
            mut response,
            write,
        } = self;
        if let Some(Written { write, group, at }) = write
            && let Err(e) = write.committed(COMMIT_TIMEOUT).await
        {
            tracing::warn!(group = %group, error = %e, "offset commit not committed");
            fail(&mut response, &at, &e);
        }
        response
    }
}

fn fail(response: &mut OffsetCommitResponse, written: &[(usize, usize)], e: &OffsetStoreError) {
    let code = coordinator_error_code(e);
    for &(ti, pi) in written {
        let p: &mut OffsetCommitResponsePartition = &mut response.topics[ti].partitions[pi];
        p.error_code = code;
    }
}

/// Validates and appends; answers per partition once the append is committed. The append
/// is made here, in the order the connection's requests arrive (a later commit of the same
/// partition must win); only the answer waits, in a task of its own.
pub fn handle(ctx: &RequestContext, req: OffsetCommitRequest) -> PendingCommit {
    let broker = &ctx.broker;
    let now = crate::now_ms();
    let group = req.group_id.0.to_string();
    let committer = Committer {
        generation_id: req.generation_id_or_member_epoch,
        member_id: &req.member_id,
        group_instance_id: req.group_instance_id.as_deref(),
    };
    // Kafka's handleOffsetCommitRequest: READ on the group, then READ on each topic.
    let group_error = if !ctx.authorize_group(AclOperation::Read, &group) {
        Some(group_refusal_code(GroupRefusal::Unauthorized))
    } else if !valid_group_id(&group) {
        Some(group_refusal_code(GroupRefusal::InvalidId))
    } else if let Err(e) = crate::server::placement::check(broker, &group) {
        Some(coordinator_unavailable_code(e))
    } else {
        validate_commit(broker, &group, committer, ctx.api_version)
            .err()
            .map(|e| commit_refusal_code(&e))
    };
    let image = broker.image();
    // The coordinator need not replicate the partition: the image knows it.
    let known = |topic: &str, index: i32| {
        image
            .topics
            .get(topic)
            .is_some_and(|t| t.partitions.iter().any(|p| p.partition == index))
    };
    // OffsetCommit v2-v4 may ask for an explicit retention (removed by KIP-211 in v5).
    let expire_timestamp = (req.retention_time_ms != DEFAULT_RETENTION)
        .then(|| now.saturating_add(req.retention_time_ms));
    let max_metadata = broker.offsets.config().metadata_max_bytes;

    // (topic index, partition index in the response) of each offset to write.
    let mut pending = Vec::new();
    let mut to_commit = Vec::new();
    let mut topics = Vec::with_capacity(req.topics.len());
    for (ti, topic) in req.topics.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let topic_authorized = ctx.authorize(AclOperation::Read, ResourceType::Topic, &name);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let metadata = p
                .committed_metadata
                .map(|m| m.to_string())
                .unwrap_or_default();
            let code = if let Some(code) = group_error {
                code
            } else if !topic_authorized {
                topic_refusal_code(TopicRefusal::Unauthorized)
            } else if !known(&name, p.partition_index) {
                topic_refusal_code(TopicRefusal::Unknown)
            } else if metadata.len() > max_metadata {
                ResponseError::OffsetMetadataTooLarge.code()
            } else {
                pending.push((ti, partitions.len()));
                to_commit.push((
                    name.clone(),
                    p.partition_index,
                    CommittedOffset {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata,
                        commit_timestamp: now,
                        expire_timestamp,
                    },
                ));
                0
            };
            partitions.push(
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code),
            );
        }
        topics.push(
            OffsetCommitResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    let mut response = OffsetCommitResponse::default().with_topics(topics);
    if to_commit.is_empty() {
        return PendingCommit {
            response,
            write: None,
        };
    }
    match broker.offsets.commit(&group, to_commit, now) {
        Ok(write) => PendingCommit {
            response,
            write: Some(Written {
                write,
                group,
                at: pending,
            }),
        },
        Err(e) => {
            tracing::warn!(group = %group, error = %e, "offset commit failed");
            fail(&mut response, &pending, &e);
            PendingCommit {
                response,
                write: None,
            }
        }
    }
}

/// Kafka's `isValidGroupId` for the offset APIs: not empty. Also short enough for the int16
/// string length of `__consumer_offsets` keys.
#[must_use]
pub fn valid_group_id(group: &str) -> bool {
    !group.is_empty() && group.len() <= i16::MAX as usize
}

/// Why the group coordinator refuses an OffsetCommit (Kafka's `validateOffsetCommit`).
#[derive(Debug)]
pub enum CommitRefusal {
    /// A KIP-848 consumer group refuses the member or its epoch.
    ConsumerGroup(ConsumerGroupError),
    /// A classic group refuses the generation, member or state.
    Group(GroupError),
    /// A generation for a group the coordinator does not know, from OffsetCommit v9
    /// (GROUP_ID_NOT_FOUND).
    UnknownGroup,
    /// The same before v9, answered as Kafka does for compatibility (ILLEGAL_GENERATION).
    UnknownGroupBeforeV9,
}

/// The generation, member and instance an OffsetCommit carries.
#[derive(Debug, Clone, Copy)]
pub struct Committer<'a> {
    pub generation_id: i32,
    pub member_id: &'a str,
    pub group_instance_id: Option<&'a str>,
}

/// Kafka's `OffsetMetadataManager.validateOffsetCommit`: a commit to a group the coordinator
/// does not know is accepted without generation and member (the admin client, or a consumer
/// that assigns partitions itself: a "simple" group), and otherwise refused with
/// GROUP_ID_NOT_FOUND from OffsetCommit v9 and ILLEGAL_GENERATION before, for compatibility.
/// A known group's rules (generation, member, state) are the group coordinator's
/// (`ClassicGroup.validateOffsetCommit`).
///
/// # Errors
/// Why the coordinator refuses the commit, for every partition of the request
/// ([`crate::server::error::commit_refusal_code`]).
pub fn validate_commit(
    broker: &Broker,
    group: &str,
    committer: Committer<'_>,
    api_version: i16,
) -> Result<(), CommitRefusal> {
    // KIP-848 consumer groups check the member epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID);
    // OffsetCommit's generation id carries it.
    if let Some(verdict) = broker.consumer_groups.validate_offset_commit(
        group,
        committer.member_id,
        committer.generation_id,
        api_version,
    ) {
        return verdict.map_err(CommitRefusal::ConsumerGroup);
    }
    if groups::group_state(broker, group).is_none() {
        if committer.generation_id < 0 {
            return Ok(());
        }
        return Err(if api_version >= 9 {
            CommitRefusal::UnknownGroup
        } else {
            CommitRefusal::UnknownGroupBeforeV9
        });
    }
    broker
        .groups
        .validate_offset_commit(
            group,
            committer.generation_id,
            committer.member_id,
            committer.group_instance_id,
        )
        .map_err(CommitRefusal::Group)
}
