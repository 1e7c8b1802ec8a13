//! DescribeTopicPartitions (key 75, KIP-966): topics and their partitions from the metadata
//! image, paged. librdkafka's admin DescribeTopics and Kafka's Admin.describeTopics use it
//! when the broker advertises it, instead of Metadata.
//!
//! As Kafka's `DescribeTopicPartitionsRequestHandler` answers it: an empty topic list means
//! every topic (`__consumer_offsets` only when named, as Metadata shows it); topics go in
//! name order, starting at the request's cursor (its topic must be among those named, else
//! every named topic is INVALID_REQUEST); at most `response_partition_limit` partitions are
//! answered, capped at `max.request.partition.size.limit` (2000, Kafka's default) and at
//! least 1, and `next_cursor` names where the next page starts: the first partition left
//! out of a topic cut short, or the next topic when the page filled up at a topic's end. A
//! named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (with the zero topic id)
//! and takes no room. With an authorizer, only topics the client may DESCRIBE are listed,
//! and a named one it may not is TOPIC_AUTHORIZATION_FAILED; each topic's authorized
//! operations are filled (every topic operation with no authorizer, as Kafka reports
//! them), an error topic's left at the schema's default. Strata has no eligible leader replicas (KIP-966's
//! ELR is off), so both ELR fields are empty lists.

use std::collections::BTreeSet;

use strata_kraft::TopicImage;
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use strata_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use uuid::Uuid;

use strata_kraft::acl::{AclOperation, ResourceType};

use super::RequestContext;
use crate::server::error::{TopicRefusal, topic_refusal_code};

/// The schema's default for an error topic's authorized operations.
const OPS_UNSET: i32 = i32::MIN;

/// Kafka's `max.request.partition.size.limit` default: the most partitions one response
/// carries.
const MAX_REQUEST_PARTITION_SIZE_LIMIT: i32 = 2000;

/// Answers one page of topics.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let image = ctx.broker.image();
    let offline = ctx.broker.offline_partitions();
    let me = ctx.broker.config.node_id;
    let named: BTreeSet<String> = req.topics.iter().map(|t| t.name.0.to_string()).collect();
    let all = named.is_empty();
    let (cursor_topic, cursor_partition) = req.cursor.as_ref().map_or((String::new(), 0), |c| {
        (c.topic_name.0.to_string(), c.partition_index)
    });
    if req.cursor.is_some() && !all && !named.contains(&cursor_topic) {
        let topics = named
            .into_iter()
            .map(|n| error_topic(n, ResponseError::InvalidRequest.code()))
            .collect();
        return DescribeTopicPartitionsResponse::default().with_topics(topics);
    }
    let names: Vec<String> = if all {
        image
            .topics
            .keys()
            .filter(|n| !crate::coordinator::InternalTopic::is_internal(n))
            .filter(|n| ctx.authorize(AclOperation::Describe, ResourceType::Topic, n))
            .cloned()
            .collect()
    } else {
        named.into_iter().collect()
    };
    let limit = req
        .response_partition_limit
        .clamp(1, MAX_REQUEST_PARTITION_SIZE_LIMIT);
    let mut remaining = usize::try_from(limit).unwrap_or(1);
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names.into_iter().filter(|n| *n >= cursor_topic) {
        if remaining == 0 {
            next_cursor = Some(cursor(&name, 0));
            break;
        }
        if !all && !ctx.authorize(AclOperation::Describe, ResourceType::Topic, &name) {
            topics.push(error_topic(
                name,
                topic_refusal_code(TopicRefusal::Unauthorized),
            ));
            continue;
        }
        let Some(t) = image.topics.get(&name) else {
            topics.push(error_topic(name, topic_refusal_code(TopicRefusal::Unknown)));
            continue;
        };
        let start = if name == cursor_topic {
            usize::try_from(cursor_partition.max(0)).unwrap_or(0)
        } else {
            0
        };
        let end = t.partitions.len().min(start.saturating_add(remaining));
        let partitions: Vec<_> = t
            .partitions
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .map(|p| {
                let part = DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(p.partition)
                    .with_leader_id(BrokerId(p.leader))
                    .with_leader_epoch(p.leader_epoch)
                    .with_replica_nodes(p.replicas.iter().map(|r| BrokerId(*r)).collect())
                    .with_isr_nodes(p.isr.iter().map(|r| BrokerId(*r)).collect())
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new()));
                // This broker's replica whose log could not be opened, as Metadata shows it.
                if offline.contains(&(t.name.clone(), p.partition)) {
                    part.with_offline_replicas(vec![BrokerId(me)])
                } else {
                    part
                }
            })
            .collect();
        remaining -= partitions.len();
        let ops = ctx.authorized_operations(ResourceType::Topic, &name);
        topics.push(topic_response(t, partitions, ops));
        if end < t.partitions.len() {
            next_cursor = Some(cursor(&name, i32::try_from(end).unwrap_or(i32::MAX)));
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(TopicName(StrBytes::from_string(topic.to_owned())))
        .with_partition_index(partition)
}

fn topic_response(
    t: &TopicImage,
    partitions: Vec<DescribeTopicPartitionsResponsePartition>,
    ops: i32,
) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
        .with_topic_id(t.topic_id)
        .with_is_internal(crate::coordinator::InternalTopic::is_internal(&t.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(ops)
}

fn error_topic(name: String, code: i16) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(code)
        .with_is_internal(crate::coordinator::InternalTopic::is_internal(&name))
        .with_name(Some(TopicName(StrBytes::from_string(name))))
        .with_topic_id(Uuid::nil())
        .with_topic_authorized_operations(OPS_UNSET)
}

#[cfg(test)]
mod tests {
    use strata_protocol::messages::ApiKey;
    use strata_protocol::messages::describe_topic_partitions_request::{
        Cursor as RequestCursor, TopicRequest,
    };

    use super::*;
    use crate::server::handlers::fixture;

    fn request(
        topics: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        let name = |n: &str| TopicName(StrBytes::from_string(n.to_owned()));
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|t| TopicRequest::default().with_name(name(t)))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                RequestCursor::default()
                    .with_topic_name(name(t))
                    .with_partition_index(p)
            }))
    }

    /// (topic, error, partition indexes) of each answered topic, and the next cursor.
    type Page = (Vec<(String, i16, Vec<i32>)>, Option<(String, i32)>);

    fn page(resp: &DescribeTopicPartitionsResponse) -> Page {
        let topics = resp
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                    t.error_code,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        let cursor = resp
            .next_cursor
            .as_ref()
            .map(|c| (c.topic_name.0.to_string(), c.partition_index));
        (topics, cursor)
    }

    fn owned(topics: &[(&str, i16, &[i32])], cursor: Option<(&str, i32)>) -> Page {
        (
            topics
                .iter()
                .map(|(t, e, p)| ((*t).to_owned(), *e, p.to_vec()))
                .collect(),
            cursor.map(|(t, p)| (t.to_owned(), p)),
        )
    }

    #[tokio::test]
    async fn pages_follow_the_cursor_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "a").await;
        fixture::create_topic(&broker, "b", 3).await;
        let ctx = fixture::ctx(&broker, ApiKey::DescribeTopicPartitions, 0);
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        // Every topic, two partitions a page: a (1) and b's first; then the rest of b.
        let first = handle(&ctx, request(&[], 2, None));
        assert_eq!(
            page(&first),
            owned(&[("a", 0, &[0]), ("b", 0, &[0])], Some(("b", 1)))
        );
        let second = handle(&ctx, request(&[], 2, Some(("b", 1))));
        assert_eq!(page(&second), owned(&[("b", 0, &[1, 2])], None));
        // A page that fills up at a topic's end points at the next topic.
        let exact = handle(&ctx, request(&["b", "a"], 1, None));
        assert_eq!(page(&exact), owned(&[("a", 0, &[0])], Some(("b", 0))));
        // An unknown topic takes no room; a limit of 0 still answers one partition.
        let named = handle(&ctx, request(&["zz", "a"], 0, None));
        assert_eq!(page(&named), owned(&[("a", 0, &[0])], Some(("zz", 0))));
        let named = handle(&ctx, request(&["zz", "a"], 10, None));
        assert_eq!(
            page(&named),
            owned(&[("a", 0, &[0]), ("zz", unknown, &[])], None)
        );
        let t = &handle(&ctx, request(&["a"], 10, None)).topics[0];
        assert_eq!(t.topic_id, broker.image().topics["a"].topic_id);
        assert_eq!(
            t.topic_authorized_operations,
            ctx.authorized_operations(ResourceType::Topic, "a")
        );
        assert_eq!(t.partitions[0].eligible_leader_replicas, Some(Vec::new()));
        // A cursor naming a topic the request does not: INVALID_REQUEST for each.
        let bad = handle(&ctx, request(&["a"], 10, Some(("b", 0))));
        assert_eq!(
            page(&bad),
            owned(&[("a", ResponseError::InvalidRequest.code(), &[])], None)
        );
    }
}
