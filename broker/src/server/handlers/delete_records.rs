//! DeleteRecords (key 21, KIP-107): moves partitions' log start offsets up, as Kafka's
//! `ReplicaManager.deleteRecords` and `Partition.deleteRecordsOnLeader` do.
//!
//! Per partition: an offset of -1 means the high watermark; the log start offset moves up
//! to the offset (never down), OFFSET_OUT_OF_RANGE when it is above the high watermark; the
//! answer's `low_watermark` is the log start offset afterwards. A topic whose
//! `cleanup.policy` lacks `delete` answers POLICY_VIOLATION, an internal topic
//! INVALID_TOPIC_EXCEPTION, an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
//!
//! Durability: the new log start offsets are written to `log-start-offset-checkpoint`
//! (fsynced) before the answer, so a deletion the client saw acknowledged survives a crash;
//! only then are the segments wholly below the new start deleted. With one replica there
//! is nothing to wait for, so `timeout_ms` is not used.

use strata_protocol::ResponseError;
use strata_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use strata_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::RequestContext;
use crate::server::error::{log_error_code, partition_unavailable_code};

/// DeleteRecordsRequest's "delete up to the high watermark" offset.
const HIGH_WATERMARK: i64 = -1;

/// The low watermark of a partition that answers an error (Kafka's
/// `DeleteRecordsResponse.INVALID_LOW_WATERMARK`).
const INVALID_LOW_WATERMARK: i64 = -1;

/// Moves every requested partition's log start offset, persists the new starts, then
/// deletes the segments below them.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let broker = &ctx.broker;
    let image = broker.image();
    let mut moved = Vec::new();
    let mut topics: Vec<DeleteRecordsTopicResult> = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let deletable = image.topics.get(&name).map(|topic| {
                crate::config::dynamic::topic_value(
                    &image,
                    broker.config.node_id,
                    &topic.configs,
                    "cleanup.policy",
                )
                .unwrap_or(&broker.config.log_cleanup_policy)
                .split(',')
                .any(|p| p.trim() == "delete")
            });
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(INVALID_LOW_WATERMARK);
                    let code = |e: ResponseError| result.clone().with_error_code(e.code());
                    // KafkaApis: DELETE on the topic, before anything else is told.
                    if !ctx.authorize(
                        strata_kraft::acl::AclOperation::Delete,
                        strata_kraft::acl::ResourceType::Topic,
                        &name,
                    ) {
                        return code(ResponseError::TopicAuthorizationFailed);
                    }
                    if crate::coordinator::InternalTopic::is_internal(&name) {
                        return code(ResponseError::InvalidTopicException);
                    }
                    let part = match broker.hosted_partition(&name, p.partition_index) {
                        Ok(part) => part,
                        Err(e) => {
                            return result.with_error_code(partition_unavailable_code(e));
                        }
                    };
                    if deletable == Some(false) {
                        return code(ResponseError::PolicyViolation);
                    }
                    let high_watermark = part.high_watermark();
                    let target = if p.offset == HIGH_WATERMARK {
                        high_watermark
                    } else {
                        p.offset
                    };
                    // Kafka: "The offset {offset} for partition {tp} is not valid".
                    if target < 0 {
                        return code(ResponseError::OffsetOutOfRange);
                    }
                    match part
                        .log()
                        .increment_log_start_offset(target, high_watermark)
                    {
                        Ok(start) => {
                            moved.push(part.clone());
                            result.with_low_watermark(start)
                        }
                        Err(e) => result.with_error_code(log_error_code(&e)),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    if moved.is_empty() {
        return DeleteRecordsResponse::default().with_topics(topics);
    }
    // Persist before answering: an acknowledged deletion must not come back after a crash.
    if let Err(e) = broker.checkpoint_log_start_offsets() {
        tracing::error!(error = %e, "cannot write the log start offset checkpoint");
        // The starts moved in memory, but the client must not take the deletion as durable.
        let failed = log_error_code(&e);
        for t in &mut topics {
            for p in &mut t.partitions {
                if p.error_code == 0 {
                    p.error_code = failed;
                    p.low_watermark = INVALID_LOW_WATERMARK;
                }
            }
        }
        return DeleteRecordsResponse::default().with_topics(topics);
    }
    for part in moved {
        let mut log = part.log();
        if let Err(e) = log.delete_segments_below_log_start() {
            // The start is durable; retention retries the deletion on its next pass.
            tracing::warn!(topic = %part.topic, partition = part.index, error = %e,
                "cannot delete segments below the log start offset");
        }
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
