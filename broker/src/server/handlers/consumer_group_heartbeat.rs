//! ConsumerGroupHeartbeat (key 68, v0–v1): KIP-848's one group API for members. Joins
//! (epoch 0), heartbeats, and leaves (-1, static -2) a consumer group, and carries the
//! member's assignment back. v1 (KIP-1082): the client names itself.

use std::collections::BTreeMap;

use strata_protocol::StrBytes;
use strata_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use strata_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use super::RequestContext;
use crate::coordinator::group::consumer::{
    ConsumerGroupError, HeartbeatRequest, coordinator::JOIN_EPOCH,
};
use crate::server::error::{
    GroupRefusal, consumer_group_error_code, coordinator_unavailable_code, group_refusal_code,
};

/// Runs the heartbeat through the consumer-group coordinator.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let group_id = req.group_id.0.to_string();
    if !ctx.authorize_group(strata_kraft::acl::AclOperation::Read, &group_id) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(group_refusal_code(GroupRefusal::Unauthorized))
            .with_member_epoch(-1);
    }
    // Kafka's handleConsumerGroupHeartbeat: a member may subscribe only to topics it may
    // DESCRIBE, or it would learn of the others from its assignment.
    if let Some(names) = &req.subscribed_topic_names {
        let refused: Vec<&str> = names
            .iter()
            .map(|t| &*t.0)
            .filter(|t| {
                !ctx.authorize(
                    strata_kraft::acl::AclOperation::Describe,
                    strata_kraft::acl::ResourceType::Topic,
                    t,
                )
            })
            .collect();
        if !refused.is_empty() {
            return ConsumerGroupHeartbeatResponse::default()
                .with_error_code(strata_protocol::ResponseError::TopicAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_string(format!(
                    "Not authorized to describe the subscribed topics {}.",
                    refused.join(", ")
                ))))
                .with_member_epoch(-1);
        }
    }
    if let Err(e) = crate::server::placement::check(&ctx.broker, &group_id) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(coordinator_unavailable_code(e))
            .with_member_epoch(-1);
    }
    if req.member_epoch == JOIN_EPOCH
        && let Err(e) = claim_group_id(ctx, &group_id)
    {
        return error(&e);
    }
    let hb = HeartbeatRequest {
        api_version: ctx.api_version,
        group_id,
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|ts| ts.into_iter().map(|t| t.0.to_string()).collect()),
        // Null: unchanged; empty: none (librdkafka sends it along with plain topic names).
        subscribed_topic_regex: req.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: req.server_assignor.map(|s| s.to_string()),
        owned: req.topic_partitions.map(|tps| {
            let mut owned = BTreeMap::new();
            for tp in tps {
                owned
                    .entry(tp.topic_id)
                    .or_insert_with(std::collections::BTreeSet::new)
                    .extend(tp.partitions);
            }
            owned
        }),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: String::new(),
    };
    match ctx
        .broker
        .consumer_groups
        .heartbeat(hb, &ctx.broker.image())
    {
        Ok(r) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(r.member_id)))
            .with_member_epoch(r.member_epoch)
            .with_heartbeat_interval_ms(r.heartbeat_interval_ms)
            .with_assignment(r.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(topic_id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(e) => error(&e),
    }
}

/// A group id is classic or consumer, never both: a classic group with members keeps its id
/// (GROUP_ID_NOT_FOUND, as Kafka answers without online migration), an empty one gives it up.
fn claim_group_id(ctx: &RequestContext, group_id: &str) -> Result<(), ConsumerGroupError> {
    let not_consumer = || ConsumerGroupError::NotConsumerGroup {
        group_id: group_id.to_owned(),
    };
    match ctx.broker.groups.group_state(group_id) {
        None => Ok(()),
        Some("Empty" | "Dead") => ctx
            .broker
            .groups
            .delete(group_id)
            .map_err(|_| not_consumer()),
        Some(_) => Err(not_consumer()),
    }
}

/// The answer once the group's partition committed what it held: as built, or the wait's
/// error (the member heartbeats again, at the coordinator it looks up).
#[must_use]
pub fn failed(
    resp: ConsumerGroupHeartbeatResponse,
    failed: &[(String, i16)],
) -> ConsumerGroupHeartbeatResponse {
    match failed.first() {
        None => resp,
        Some((_, code)) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(*code)
            .with_member_epoch(-1),
    }
}

fn error(e: &ConsumerGroupError) -> ConsumerGroupHeartbeatResponse {
    tracing::debug!(error = %e, "consumer group heartbeat refused");
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(consumer_group_error_code(e))
        .with_error_message(Some(StrBytes::from_string(e.to_string())))
        .with_member_epoch(-1)
}
