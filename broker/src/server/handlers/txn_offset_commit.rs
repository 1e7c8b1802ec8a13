//! TxnOffsetCommit (key 28): a transactional producer commits a consumer group's offsets
//! inside its transaction (`send_offsets_to_transaction`), after AddOffsetsToTxn added the
//! group's `__consumer_offsets` partition to it. Kafka's `KafkaApis.handleTxnOffsetCommitRequest`
//! and `GroupCoordinatorService.commitTransactionalOffsets`, in their order:
//!
//! - WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the
//!   group (GROUP_AUTHORIZATION_FAILED), for every partition; then each topic's READ
//!   (TOPIC_AUTHORIZATION_FAILED) and each partition's existence (UNKNOWN_TOPIC_OR_PARTITION).
//! - The group's coordinator must be this node (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE;
//!   COORDINATOR_LOAD_IN_PROGRESS, which is COORDINATOR_NOT_AVAILABLE before v2); an empty
//!   group id is INVALID_GROUP_ID.
//! - KIP-890: the first commit of a transaction into the partition is verified with the
//!   transaction coordinator, as a produce is ([`super::produce::verification`]): a partition
//!   not in the transaction is INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4). From v5
//!   (transaction version 2, whose producer sends no AddOffsetsToTxn) the coordinator adds
//!   the group's partition to the transaction instead, starting it if none is ongoing;
//!   CONCURRENT_TRANSACTIONS then comes back as it is, and the producer retries.
//! - The member: a commit with generation -1 and no member is accepted (v0-2 carry none);
//!   otherwise the group's generation and member are checked (ILLEGAL_GENERATION,
//!   UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID), but a rebalance does not refuse it.
//! - Metadata longer than `offset.metadata.max.bytes` is OFFSET_METADATA_TOO_LARGE.
//!
//! The offsets are written as one transactional batch of the producer into
//! `__consumer_offsets` (the log refuses an older producer epoch: INVALID_PRODUCER_EPOCH),
//! answered once committed, and count from the producer's COMMIT marker on.

use std::collections::{BTreeMap, BTreeSet};

use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::ResponseError;
use strata_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use strata_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::RequestContext;
use super::offset_commit::{Committer, valid_group_id, validate_commit};
use super::produce::verification::Operation;
use crate::coordinator::offsets::{COMMIT_TIMEOUT, CommittedOffset, OFFSETS_TOPIC};
use crate::coordinator::runtime::CoordinatorError;
use crate::server::error::{
    commit_refusal_code, coordinator_error_code, coordinator_unavailable_code,
    leader_append_error_code,
};
use crate::server::placement;

/// Writes the offsets in the transaction, or answers why not, per partition.
pub async fn handle(ctx: &RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse {
    let broker = &ctx.broker;
    let now = crate::now_ms();
    let id = req.transactional_id.0.to_string();
    let group = req.group_id.0.to_string();
    let every = if !ctx.authorize_transactional_id(AclOperation::Write, &id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else if !ctx.authorize_group(AclOperation::Read, &group) {
        Some(ResponseError::GroupAuthorizationFailed.code())
    } else {
        None
    };
    let image = broker.image();
    let known = |topic: &str, index: i32| {
        image
            .topics
            .get(topic)
            .is_some_and(|t| t.partitions.iter().any(|p| p.partition == index))
    };
    let max_metadata = broker.offsets.config().metadata_max_bytes;
    // Each partition's code (0: to write), in the request's order, and what to write.
    let mut codes: Vec<(String, Vec<(i32, i16)>)> = Vec::with_capacity(req.topics.len());
    let mut to_write = Vec::new();
    for t in &req.topics {
        let name = t.name.0.to_string();
        let readable = ctx.authorize(AclOperation::Read, ResourceType::Topic, &name);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let metadata = p
                .committed_metadata
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            let code = if let Some(code) = every {
                code
            } else if !readable {
                ResponseError::TopicAuthorizationFailed.code()
            } else if !known(&name, p.partition_index) {
                ResponseError::UnknownTopicOrPartition.code()
            } else if metadata.len() > max_metadata {
                ResponseError::OffsetMetadataTooLarge.code()
            } else {
                to_write.push((
                    name.clone(),
                    p.partition_index,
                    CommittedOffset {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata,
                        commit_timestamp: now,
                        expire_timestamp: None,
                    },
                ));
                0
            };
            partitions.push((p.partition_index, code));
        }
        codes.push((name, partitions));
    }
    if !to_write.is_empty() {
        let outcome = write(ctx, &req, &id, &group, to_write, now).await;
        if let Err(code) = outcome {
            for (_, partitions) in &mut codes {
                for (_, c) in partitions.iter_mut().filter(|(_, c)| *c == 0) {
                    *c = code;
                }
            }
        }
    }
    TxnOffsetCommitResponse::default().with_topics(
        codes
            .into_iter()
            .map(|(name, partitions)| {
                TxnOffsetCommitResponseTopic::default()
                    .with_name(strata_protocol::messages::TopicName(name.into()))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(index, code)| {
                                TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// The group coordinator's checks and the write: the code every offset gets on failure.
async fn write(
    ctx: &RequestContext,
    req: &TxnOffsetCommitRequest,
    id: &str,
    group: &str,
    offsets: Vec<(String, i32, CommittedOffset)>,
    now: i64,
) -> Result<(), i16> {
    let broker = &ctx.broker;
    if !valid_group_id(group) {
        return Err(ResponseError::InvalidGroupId.code());
    }
    placement::check(broker, group).map_err(|e| {
        let code = coordinator_unavailable_code(e);
        if ctx.api_version < 2 && code == ResponseError::CoordinatorLoadInProgress.code() {
            ResponseError::CoordinatorNotAvailable.code()
        } else {
            code
        }
    })?;
    let producer = (req.producer_id.0, req.producer_epoch);
    verify(ctx, id, group, producer).await?;
    let anonymous =
        req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
    if !anonymous {
        let committer = Committer {
            generation_id: req.generation_id,
            member_id: &req.member_id,
            group_instance_id: req.group_instance_id.as_deref(),
        };
        // OffsetCommit v8's answers (ILLEGAL_GENERATION for an unknown group).
        if let Err(e) = validate_commit(broker, group, committer, 8) {
            let code = commit_refusal_code(&e);
            let c = |e: ResponseError| e.code();
            if code == c(ResponseError::StaleMemberEpoch) {
                return Err(c(ResponseError::IllegalGeneration));
            }
            // A transactional commit is not refused for a rebalance.
            if code != c(ResponseError::RebalanceInProgress) {
                return Err(code);
            }
        }
    }
    let written = broker
        .offsets
        .txn_commit(group, producer, offsets, now)
        .map_err(|e| store_code(&e))?;
    written.committed(COMMIT_TIMEOUT).await.map_err(|e| {
        tracing::warn!(group, error = %e, "transactional offset commit not committed");
        store_code(&e)
    })
}

/// The store's failure: the log's refusal of the producer as it is, anything else as a
/// coordinator's.
fn store_code(e: &CoordinatorError) -> i16 {
    if let CoordinatorError::Append { source, .. } = e {
        let code = leader_append_error_code(source);
        if code == ResponseError::InvalidProducerEpoch.code()
            || code == ResponseError::InvalidTxnState.code()
        {
            return code;
        }
    }
    coordinator_error_code(e)
}

/// KIP-890 for the group's `__consumer_offsets` partition: nothing to ask when the producer
/// has a transaction open there in this epoch.
async fn verify(
    ctx: &RequestContext,
    id: &str,
    group: &str,
    producer: (i64, i16),
) -> Result<(), i16> {
    let index = ctx.broker.offsets.partition_for(group);
    let open = ctx
        .broker
        .hosted_partition(OFFSETS_TOPIC, index)
        .ok()
        .and_then(|p| {
            let log = p.log();
            log.producer_state()
                .entry(producer.0)
                .map(|e| e.current_txn_first_offset >= 0 && e.producer_epoch == producer.1)
        })
        .unwrap_or(false);
    if open {
        return Ok(());
    }
    let partitions = BTreeMap::from([(OFFSETS_TOPIC.to_owned(), BTreeSet::from([index]))]);
    let op = Operation::for_version(ctx.api_version, 5);
    let codes =
        super::produce::verification::ask(ctx, id, producer.0, producer.1, &partitions, op).await;
    let code = codes.values().copied().find(|c| *c != 0).unwrap_or(0);
    let c = |e: ResponseError| e.code();
    let code = if code == 0 {
        return Ok(());
    } else if code == c(ResponseError::TransactionAbortable) && ctx.api_version <= 3 {
        c(ResponseError::InvalidTxnState)
    } else if code == c(ResponseError::ProducerFenced) {
        c(ResponseError::InvalidProducerEpoch)
    } else if code == c(ResponseError::NetworkException) {
        c(ResponseError::CoordinatorLoadInProgress)
    } else if [
        c(ResponseError::UnknownTopicOrPartition),
        c(ResponseError::NotEnoughReplicas),
        c(ResponseError::RequestTimedOut),
    ]
    .contains(&code)
    {
        c(ResponseError::CoordinatorNotAvailable)
    } else {
        code
    };
    Err(code)
}
