//! CreatePartitions (key 37): grows topics through the metadata log (Kafka's
//! `ReplicationControlManager.createPartitions`). Each topic gets its own result: a topic
//! named twice is INVALID_REQUEST, a count that is not an increase INVALID_PARTITIONS, a
//! manual assignment that does not fit INVALID_REPLICA_ASSIGNMENT, with Kafka's messages.
//! With `validate_only` everything is checked and nothing is written. The new partitions'
//! logs are created before the records are written; if one cannot be, the topic keeps its
//! old count and gets KAFKA_STORAGE_ERROR (see `Broker::create_partitions`).

use futures_util::StreamExt;
use std::collections::HashMap;

use strata_protocol::StrBytes;
use strata_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use strata_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use strata_protocol::ResponseError;

use super::RequestContext;
use crate::server::error::{TopicRefusal, create_topic_error_code, topic_refusal_code};

/// Grows each topic of the request.
#[must_use]
pub async fn handle(
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut times: HashMap<String, usize> = HashMap::new();
    for t in &req.topics {
        *times.entry(t.name.0.to_string()).or_default() += 1;
    }
    let times = &times;
    let results = futures_util::stream::iter(req.topics)
        .then(|t| async move {
            let name = t.name.0.to_string();
            let result = CreatePartitionsTopicResult::default().with_name(t.name);
            if times.get(&name).is_some_and(|n| *n > 1) {
                return result
                    .with_error_code(topic_refusal_code(TopicRefusal::Duplicate))
                    .with_error_message(Some(StrBytes::from_static_str("Duplicate topic name.")));
            }
            // KafkaApis: ALTER on the topic.
            if !ctx.authorize(
                strata_kraft::acl::AclOperation::Alter,
                strata_kraft::acl::ResourceType::Topic,
                &name,
            ) {
                return result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str("Authorization failed.")));
            }
            let assignments: Option<Vec<Vec<i32>>> = t.assignments.map(|a| {
                a.into_iter()
                    .map(|a| a.broker_ids.into_iter().map(|b| b.0).collect())
                    .collect()
            });
            match ctx
                .broker
                .create_partitions(&name, t.count, assignments.as_deref(), req.validate_only)
                .await
            {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(create_topic_error_code(&e))
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect::<Vec<_>>()
        .await;
    CreatePartitionsResponse::default().with_results(results)
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: CreatePartitionsRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::CreatePartitions(handle(&ctx, req).await)
}
