//! DeleteTopics (key 20): by name (all versions) or by topic id (v6+, KIP-516).

use futures_util::StreamExt;
use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::StrBytes;
use strata_protocol::messages::delete_topics_response::DeletableTopicResult;
use strata_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use uuid::Uuid;

use super::RequestContext;
use crate::server::error::{TopicRefusal, metadata_error_code, topic_refusal_code};

/// Deletes each named topic through the metadata log.
#[must_use]
pub async fn handle(ctx: &RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<String>, Uuid)> = if ctx.api_version >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n.0.to_string()), Uuid::nil()))
            .collect()
    };
    let responses = futures_util::stream::iter(wanted)
        .then(|(name, id)| async move {
            let image = ctx.broker.image();
            // Kafka's handleDeleteTopicsRequest: DELETE on the topic, named or found by
            // id, refused whether or not a named topic exists.
            let topic_name = name
                .clone()
                .or_else(|| image.topic_by_id(id).map(|t| t.name.clone()));
            let authorized = topic_name
                .as_deref()
                .is_none_or(|n| ctx.authorize(AclOperation::Delete, ResourceType::Topic, n));
            let resolved = match &name {
                _ if !authorized => Err(topic_refusal_code(TopicRefusal::Unauthorized)),
                Some(n) => image
                    .topics
                    .get(n)
                    .map(|t| t.topic_id)
                    .ok_or(topic_refusal_code(TopicRefusal::Unknown)),
                None => image
                    .topic_by_id(id)
                    .map(|t| t.topic_id)
                    .ok_or(topic_refusal_code(TopicRefusal::UnknownId)),
            };
            let result = DeletableTopicResult::default()
                .with_name(name.clone().map(|n| TopicName(StrBytes::from_string(n))))
                .with_topic_id(id);
            let deleted = match resolved {
                Ok(id) => Ok((id, ctx.broker.delete_topic(id).await)),
                Err(code) => Err(code),
            };
            match deleted {
                Ok((id, Ok(deleted))) => {
                    tracing::info!(topic = %deleted, "deleted topic");
                    result
                        .with_name(Some(TopicName(StrBytes::from_string(deleted))))
                        .with_topic_id(id)
                }
                Ok((_, Err(e))) => result
                    .with_error_code(metadata_error_code(&e))
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                Err(code) => result.with_error_code(code),
            }
        })
        .collect::<Vec<_>>()
        .await;
    DeleteTopicsResponse::default().with_responses(responses)
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: DeleteTopicsRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::DeleteTopics(handle(&ctx, req).await)
}
