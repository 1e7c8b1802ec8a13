//! Metadata (key 3): brokers, the cluster id, the controller, and topics from the metadata
//! image, with auto-creation when `auto.create.topics.enable` is on. On a node that is not
//! the active controller the creation is sent to the controller (`crate::server::forward`) and the
//! topic answered LEADER_NOT_AVAILABLE until it reaches this node's image.
//!
//! A partition whose log this broker could not open at start is shown as Kafka's KRaft
//! `MetadataCache` shows a replica in an offline log directory once the controller has moved
//! leadership away from it and no other replica could take it: LEADER_NOT_AVAILABLE, leader
//! -1, the replica listed in `offline_replicas` (v5+), replicas and ISR unchanged (KRaft keeps
//! the last ISR member). Clients then hold its records back instead of producing to it.

use std::collections::HashSet;

use strata_kraft::acl::{AclOperation, CLUSTER_NAME, ResourceType};
use strata_kraft::{CreateTopic, MetadataImage, TopicImage};
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use strata_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use uuid::Uuid;

use super::RequestContext;
use crate::server::error::{TopicRefusal, topic_refusal_code};

/// Kafka's "authorized operations not requested" sentinel.
pub(crate) const OPS_NOT_REQUESTED: i32 = i32::MIN;

/// Answers a Metadata request.
#[must_use]
pub async fn handle(ctx: &RequestContext, req: MetadataRequest) -> MetadataResponse {
    let broker = &ctx.broker;
    let mut image = broker.image();
    // v0: an empty list means every topic. v1+: null means every topic, empty means none.
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && ctx.api_version == 0,
    };
    // Auto-creation is on for v0-v3 and when v4+ allows it.
    let may_create =
        broker.config.auto_create_topics && (ctx.api_version < 4 || req.allow_auto_topic_creation);
    // KIP-430: what the authorizer allows this client (every operation without one).
    let include_topic_ops = req.include_topic_authorized_operations;
    let cluster_ops = if req.include_cluster_authorized_operations {
        ctx.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
    } else {
        OPS_NOT_REQUESTED
    };
    let describable = |name: &str| ctx.authorize(AclOperation::Describe, ResourceType::Topic, name);
    let offline = Offline {
        partitions: broker.offline_partitions(),
        node_id: broker.config.node_id,
    };
    let topic_response = |t: &TopicImage| {
        let ops = if include_topic_ops {
            ctx.authorized_operations(ResourceType::Topic, &t.name)
        } else {
            OPS_NOT_REQUESTED
        };
        topic_response(t, ops, &offline)
    };
    let mut topics = Vec::new();
    if all {
        // The coordinators' internal topics (`__consumer_offsets`, `__transaction_state`)
        // are not shown to clients unless they name them.
        topics.extend(
            image
                .topics
                .values()
                .filter(|t| !crate::coordinator::InternalTopic::is_internal(&t.name))
                // Kafka's handleTopicMetadataRequest leaves out, unannounced, the topics
                // the client may not DESCRIBE.
                .filter(|t| describable(&t.name))
                .map(topic_response),
        );
    } else {
        for wanted in req.topics.unwrap_or_default() {
            let by_name = wanted.name.as_ref().map(|n| n.0.to_string());
            let found = match &by_name {
                Some(name) => image.topics.get(name),
                None => image.topic_by_id(wanted.topic_id),
            };
            let named = by_name.as_deref().or(found.map(|t| t.name.as_str()));
            if named.is_some_and(|n| !describable(n)) {
                // A named topic the client may not DESCRIBE, whether or not it exists.
                topics.push(error_topic(
                    by_name.clone(),
                    wanted.topic_id,
                    topic_refusal_code(TopicRefusal::Unauthorized),
                ));
                continue;
            }
            if let Some(t) = found {
                topics.push(topic_response(t));
                continue;
            }
            let Some(name) = by_name else {
                topics.push(error_topic(
                    None,
                    wanted.topic_id,
                    topic_refusal_code(TopicRefusal::UnknownId),
                ));
                continue;
            };
            if !may_create {
                topics.push(error_topic(
                    Some(name),
                    Uuid::nil(),
                    topic_refusal_code(TopicRefusal::Unknown),
                ));
                continue;
            }
            if !ctx.authorize_cluster(AclOperation::Create)
                && !ctx.authorize(AclOperation::Create, ResourceType::Topic, &name)
            {
                // Auto-creation needs CREATE on the cluster or the topic.
                topics.push(error_topic(
                    Some(name),
                    Uuid::nil(),
                    topic_refusal_code(TopicRefusal::Unauthorized),
                ));
                continue;
            }
            if let Err(e) = strata_kraft::validate_topic_name(&name) {
                // Checked here too, since a forwarded creation is not waited for: a name the
                // controller would refuse must not be answered "retry".
                topics.push(error_topic(
                    Some(name),
                    Uuid::nil(),
                    crate::server::error::metadata_error_code(&e),
                ));
                continue;
            }
            if crate::server::forward::auto_create(ctx, &name) {
                // KIP-590: created by the controller; until its entry reaches this node's
                // image the topic has no leader here, which clients retry (Kafka answers the
                // same right after an auto-creation).
                topics.push(error_topic(
                    Some(name),
                    Uuid::nil(),
                    ResponseError::LeaderNotAvailable.code(),
                ));
                continue;
            }
            let create = CreateTopic {
                name: name.clone(),
                num_partitions: -1,
                replication_factor: -1,
                configs: Default::default(),
                validate_only: false,
                assignments: None,
            };
            match broker.create_topic(create).await {
                Ok(_) => {
                    tracing::info!(topic = %name, "auto-created topic");
                    image = broker.image();
                    match image.topics.get(&name) {
                        Some(t) => topics.push(topic_response(t)),
                        None => topics.push(error_topic(
                            Some(name),
                            Uuid::nil(),
                            topic_refusal_code(TopicRefusal::Unknown),
                        )),
                    }
                }
                Err(e) => {
                    // A topic created concurrently by another client is simply there now.
                    image = broker.image();
                    match image.topics.get(&name) {
                        Some(t) => topics.push(topic_response(t)),
                        None => topics.push(error_topic(
                            Some(name),
                            Uuid::nil(),
                            crate::server::error::create_topic_error_code(&e),
                        )),
                    }
                }
            }
        }
    }
    response(ctx, &image, topics, cluster_ops)
}

fn response(
    ctx: &RequestContext,
    image: &MetadataImage,
    topics: Vec<MetadataResponseTopic>,
    cluster_ops: i32,
) -> MetadataResponse {
    MetadataResponse::default()
        .with_brokers(
            image
                .brokers
                .values()
                // Kafka's `getAliveBrokerNodes`: a fenced broker is not offered to clients.
                .filter(|b| !b.fenced)
                .map(|b| {
                    // Each broker's address on the listener this client came in on.
                    let (host, port) = ctx.endpoint_of(b);
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b.node_id))
                        .with_host(StrBytes::from_string(host))
                        .with_port(i32::from(port))
                        .with_rack(b.rack.clone().map(StrBytes::from_string))
                })
                .collect(),
        )
        .with_cluster_id(Some(StrBytes::from_string(image.cluster_id.clone())))
        .with_controller_id(BrokerId(client_controller_id(ctx, image)))
        .with_cluster_authorized_operations(cluster_ops)
        .with_topics(topics)
}

/// The `controller_id` a client is told: the active controller when it is a registered
/// broker (a combined node, which takes admin requests on its broker listener), else a
/// live broker that forwards them, this one first (Kafka's KRaft brokers answer a random
/// live broker). A dedicated controller is not among the brokers a client can reach, and
/// while an election is under way no controller is known; librdkafka's admin client waits
/// for `controller_id` to name a broker it knows, and a broker holds a forwarded request
/// until a controller answers it.
fn client_controller_id(ctx: &RequestContext, image: &MetadataImage) -> i32 {
    if image.brokers.contains_key(&image.controller_id) {
        image.controller_id
    } else {
        live_broker(image, ctx.broker.config.node_id)
    }
}

/// A live (unfenced) broker for a client to send controller-bound requests to: `own` when
/// it is live, else the first live one, -1 when there is none.
pub(crate) fn live_broker(image: &MetadataImage, own: i32) -> i32 {
    if image.brokers.get(&own).is_some_and(|b| !b.fenced) {
        own
    } else {
        image
            .brokers
            .values()
            .find(|b| !b.fenced)
            .map_or(-1, |b| b.node_id)
    }
}

/// This broker's offline partitions, to show in a response.
struct Offline {
    /// (topic, index) of each; usually empty.
    partitions: HashSet<(String, i32)>,
    /// This broker: the replica that is offline.
    node_id: i32,
}

impl Offline {
    fn contains(&self, topic: &str, index: i32) -> bool {
        !self.partitions.is_empty() && self.partitions.contains(&(topic.to_owned(), index))
    }
}

fn topic_response(t: &TopicImage, ops: i32, offline: &Offline) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
        .with_topic_id(t.topic_id)
        .with_is_internal(crate::coordinator::InternalTopic::is_internal(&t.name))
        .with_topic_authorized_operations(ops)
        .with_partitions(
            t.partitions
                .iter()
                .map(|p| {
                    let partition = MetadataResponsePartition::default()
                        .with_partition_index(p.partition)
                        .with_leader_id(BrokerId(p.leader))
                        .with_leader_epoch(p.leader_epoch)
                        .with_replica_nodes(p.replicas.iter().map(|r| BrokerId(*r)).collect())
                        .with_isr_nodes(p.isr.iter().map(|r| BrokerId(*r)).collect());
                    if !offline.contains(&t.name, p.partition) {
                        return partition;
                    }
                    partition
                        .with_error_code(ResponseError::LeaderNotAvailable.code())
                        .with_leader_id(BrokerId(-1))
                        .with_offline_replicas(
                            p.replicas
                                .iter()
                                .filter(|r| **r == offline.node_id)
                                .map(|r| BrokerId(*r))
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn error_topic(name: Option<String>, topic_id: Uuid, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n))))
        .with_topic_id(topic_id)
        .with_topic_authorized_operations(OPS_NOT_REQUESTED)
}
