//! CreateTopics (key 19): validated by the controller; the partitions' logs are created,
//! and only then are the records written to the metadata log. A topic whose logs cannot be
//! created is not committed and gets KAFKA_STORAGE_ERROR with Kafka's message; the other
//! topics of the request are created independently (see `Broker::create_topic`).

use futures_util::StreamExt;
use std::collections::{BTreeMap, HashSet};

use strata_kraft::CreateTopic;
use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use strata_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::RequestContext;
use super::describe_configs::describe_topic;
use crate::server::error::{TopicRefusal, create_topic_error_code, topic_refusal_code};

/// Creates each topic; failures are per topic.
#[must_use]
pub async fn handle(ctx: &RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = req
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !seen.insert(n.clone()))
        .collect();
    // Kafka's handleCreateTopicsRequest: CREATE on the cluster, or else on each topic.
    let cluster_create = ctx.authorize_cluster(AclOperation::Create);
    let duplicates = &duplicates;
    let topics = futures_util::stream::iter(req.topics)
        .then(|t| async move {
            let name = t.name.0.to_string();
            let fail = |code: i16, msg: String| {
                CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(msg)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            };
            if duplicates.contains(&name) {
                return fail(
                    topic_refusal_code(TopicRefusal::Duplicate),
                    format!("topic {name} appears more than once"),
                );
            }
            let from_a_node = crate::coordinator::InternalTopic::is_internal(&name)
                && ctx.client_id.as_deref() == Some(crate::server::forward::INTERNAL_CLIENT_ID);
            if !from_a_node
                && !cluster_create
                && !ctx.authorize(AclOperation::Create, ResourceType::Topic, &name)
            {
                return fail(
                    topic_refusal_code(TopicRefusal::Unauthorized),
                    "Authorization failed.".to_owned(),
                );
            }
            // A manual assignment (Kafka's `ReplicationControlManager.createTopic`): the
            // partitions 0..n in order, each placed as given; the controller checks the
            // brokers (`strata_kraft::create_topic_records`).
            let (num_partitions, replication_factor, assignments) = if t.assignments.is_empty() {
                (t.num_partitions, t.replication_factor, None)
            } else {
                if t.replication_factor != -1 {
                    return fail(
                        ResponseError::InvalidRequest.code(),
                        "A manual partition assignment was specified, but replication \
                             factor was not set to -1."
                            .to_owned(),
                    );
                }
                if t.num_partitions != -1 {
                    return fail(
                        ResponseError::InvalidRequest.code(),
                        "A manual partition assignment was specified, but numPartitions \
                             was not set to -1."
                            .to_owned(),
                    );
                }
                let mut ordered: Vec<_> = t.assignments.iter().collect();
                ordered.sort_by_key(|a| a.partition_index);
                if ordered
                    .iter()
                    .zip(0..)
                    .any(|(a, i): (&&_, i32)| a.partition_index != i)
                {
                    return fail(
                        ResponseError::InvalidReplicaAssignment.code(),
                        "partitions should be a consecutive 0-based integer sequence".to_owned(),
                    );
                }
                let lists: Vec<Vec<i32>> = ordered
                    .iter()
                    .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                    .collect();
                (
                    i32::try_from(lists.len()).unwrap_or(i32::MAX),
                    i16::try_from(lists[0].len()).unwrap_or(i16::MAX),
                    Some(lists),
                )
            };
            let configs: BTreeMap<String, String> = t
                .configs
                .iter()
                .filter_map(|c| {
                    c.value
                        .as_ref()
                        .map(|v| (c.name.to_string(), v.to_string()))
                })
                .collect();
            let create = CreateTopic {
                name: name.clone(),
                num_partitions,
                replication_factor,
                configs: configs.clone(),
                validate_only: req.validate_only,
                assignments,
            };
            // A node of the cluster asking for a coordinator's internal topic
            // (`server::placement::ensure_topic`); clients may not create them.
            let internal = crate::coordinator::InternalTopic::from_name(&name).filter(|_| {
                ctx.client_id.as_deref() == Some(crate::server::forward::INTERNAL_CLIENT_ID)
            });
            let created = match internal {
                Some(topic) => ctx.broker.create_internal_topic(topic).await,
                None => ctx.broker.create_topic(create).await,
            };
            match created {
                Ok(id) => {
                    if !req.validate_only {
                        tracing::info!(topic = %name, "created topic");
                    }
                    let image = ctx.broker.image();
                    let (parts, rf) = image.topics.get(&name).map_or(
                        (num_partitions, replication_factor),
                        |ti| {
                            (
                                ti.partitions.len() as i32,
                                ti.partitions.first().map_or(1, |p| p.replicas.len() as i16),
                            )
                        },
                    );
                    let described = describe_topic(&ctx.broker.config, &image, &configs)
                        .into_iter()
                        .map(|d| {
                            CreatableTopicConfigs::default()
                                .with_name(StrBytes::from_string(d.name))
                                .with_value(d.value.map(StrBytes::from_string))
                                .with_config_source(d.source)
                        })
                        .collect();
                    CreatableTopicResult::default()
                        .with_name(t.name.clone())
                        .with_topic_id(id)
                        .with_num_partitions(if parts == -1 {
                            ctx.broker.config.num_partitions
                        } else {
                            parts
                        })
                        .with_replication_factor(if rf == -1 {
                            ctx.broker.config.default_replication_factor
                        } else {
                            rf
                        })
                        .with_configs(Some(described))
                }
                Err(e) => fail(create_topic_error_code(&e), e.to_string()),
            }
        })
        .collect::<Vec<_>>()
        .await;
    CreateTopicsResponse::default().with_topics(topics)
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: CreateTopicsRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::CreateTopics(handle(&ctx, req).await)
}
