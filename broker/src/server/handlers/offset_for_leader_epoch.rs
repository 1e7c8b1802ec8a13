//! OffsetForLeaderEpoch (key 23, v2-4, KIP-101/KIP-320): the end offset of a leader epoch in
//! this leader's log. A consumer that resumes from a position of some epoch asks for that
//! epoch's end after a leader change; an end below its position means the log was truncated.
//!
//! Per partition: the leadership and `current_leader_epoch` checks of the data path (only the
//! image's leader answers, Kafka's `fetchOnlyFromLeader = true`), then Kafka's
//! `LeaderEpochFileCache.endOffsetFor` over the log's epoch cache: the newest epoch ends at
//! the log end, an older one where the next starts, an unknown one between two answers with
//! the epoch below it, and one the cache cannot place answers `(-1, -1)` with no error.

use strata_kraft::MetadataImage;
use strata_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use strata_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::RequestContext;
use crate::broker::leadership;
use crate::server::error::leadership_error_code;

/// Answers each partition's epoch lookup.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    answer(ctx, &ctx.broker.image(), req)
}

/// [`handle`] against a given metadata image: who leads each partition, at which epoch.
fn answer(
    ctx: &RequestContext,
    image: &MetadataImage,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    // KafkaApis: a node may ask about every topic (CLUSTER_ACTION); a consumer checking for
    // truncation (KIP-320) needs DESCRIBE on each topic it names.
    let node = ctx.authorize_cluster(strata_kraft::acl::AclOperation::ClusterAction);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.topic.0.to_string();
            let described = node
                || ctx.authorize(
                    strata_kraft::acl::AclOperation::Describe,
                    strata_kraft::acl::ResourceType::Topic,
                    &name,
                );
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let resp = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    if !described {
                        return resp.with_error_code(
                            strata_protocol::ResponseError::TopicAuthorizationFailed.code(),
                        );
                    }
                    match leadership::leader_partition(
                        &ctx.broker,
                        image,
                        &name,
                        p.partition,
                        p.current_leader_epoch,
                    ) {
                        Ok(led) => {
                            let (epoch, end) =
                                led.partition.log().end_offset_for_epoch(p.leader_epoch);
                            resp.with_leader_epoch(epoch).with_end_offset(end)
                        }
                        Err(e) => resp.with_error_code(leadership_error_code(e)),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use strata_protocol::StrBytes;
    use strata_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use strata_protocol::messages::{ApiKey, TopicName};

    use super::*;
    use crate::server::handlers::fixture::{self, OTHER};

    /// (error code, leader epoch, end offset) for `leader_epoch` of `topic`-0.
    fn ask(
        ctx: &RequestContext,
        image: &MetadataImage,
        topic: &str,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> (i16, i32, i64) {
        let req = OffsetForLeaderEpochRequest::default().with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(current_leader_epoch)
                        .with_leader_epoch(leader_epoch),
                ]),
        ]);
        let resp = answer(ctx, image, req);
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.leader_epoch, p.end_offset)
    }

    /// Two leaderships of this node (epochs 3 and 7): each epoch ends where the next starts,
    /// the current one at the log end, even before anything was written in it.
    #[tokio::test]
    async fn answers_from_the_epoch_cache_after_the_checks() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let node = broker.config.node_id;
        let ctx = fixture::ctx(&broker, ApiKey::OffsetForLeaderEpoch, 4);
        let part = broker.partition("t", 0).unwrap();
        let epoch3 = fixture::led_by(&broker, "t", node, 3);
        assert_eq!(ask(&ctx, &epoch3, "t", 3, 3), (0, 3, 0));
        part.append(&mut fixture::records(2).to_vec(), 3, 0)
            .unwrap();
        assert_eq!(ask(&ctx, &epoch3, "t", 3, 3), (0, 3, 2));
        // A new leadership: epoch 7 starts at the log end on the first request.
        let epoch7 = fixture::led_by(&broker, "t", node, 7);
        assert_eq!(ask(&ctx, &epoch7, "t", 7, 7), (0, 7, 2));
        assert_eq!(ask(&ctx, &epoch7, "t", 7, 3), (0, 3, 2));
        part.append(&mut fixture::records(3).to_vec(), 7, 0)
            .unwrap();
        assert_eq!(ask(&ctx, &epoch7, "t", -1, 7), (0, 7, 5));
        assert_eq!(ask(&ctx, &epoch7, "t", 7, 3), (0, 3, 2));
        // Between two epochs: the one below; below all: itself, ending at the first start.
        assert_eq!(ask(&ctx, &epoch7, "t", 7, 5), (0, 3, 2));
        assert_eq!(ask(&ctx, &epoch7, "t", 7, 1), (0, 1, 0));
        // Past the newest epoch, or undefined: nothing known, and no error (as Kafka).
        assert_eq!(ask(&ctx, &epoch7, "t", 7, 8), (0, -1, -1));
        assert_eq!(ask(&ctx, &epoch7, "t", 7, -1), (0, -1, -1));
        // The checks of the data path.
        assert_eq!(ask(&ctx, &epoch7, "t", 6, 3), (74, -1, -1));
        assert_eq!(ask(&ctx, &epoch7, "t", 8, 3), (75, -1, -1));
        let elsewhere = fixture::led_by(&broker, "t", OTHER, 8);
        assert_eq!(ask(&ctx, &elsewhere, "t", 8, 3), (6, -1, -1));
        assert_eq!(ask(&ctx, &elsewhere, "t", 7, 3), (74, -1, -1));
        assert_eq!(ask(&ctx, &elsewhere, "nope", -1, 3), (3, -1, -1));
    }
}
