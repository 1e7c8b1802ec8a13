//! IncrementalAlterConfigs (key 44, KIP-339): SET, DELETE, APPEND and SUBTRACT on topic config
//! overrides, written through the metadata log as `ConfigRecord`s. Broker resources are
//! refused: Strata has no dynamic broker configs yet.
//!
//! The legacy AlterConfigs (`alter_configs.rs`) shares this file's resource types, its
//! answer to broker resources and its write path ([`write_topic_configs`]).

use std::collections::{BTreeMap, BTreeSet};

use strata_kraft::topic_config_default;
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use strata_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use strata_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::RequestContext;
use crate::error::metadata_error_code;

/// Kafka's ConfigResource types.
pub(super) const RESOURCE_TOPIC: i8 = 2;
pub(super) const RESOURCE_BROKER: i8 = 4;
pub(super) const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Kafka's AlterConfigOp types.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Topic configs of Kafka type LIST: the only ones APPEND and SUBTRACT apply to.
const LIST_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
];

/// A resource's error code and message.
pub(super) type Failure = (i16, String);

/// The answer to a broker resource: there are no dynamic broker configs to alter.
pub(super) fn broker_resource_refused() -> Failure {
    (
        ResponseError::InvalidRequest.code(),
        "dynamic broker configs are not supported".to_owned(),
    )
}

/// A topic's current overrides.
///
/// # Errors
///
/// UNKNOWN_TOPIC_OR_PARTITION when the topic does not exist.
pub(super) fn topic_overrides(
    ctx: &RequestContext,
    topic: &str,
) -> Result<BTreeMap<String, String>, Failure> {
    ctx.broker
        .image()
        .topics
        .get(topic)
        .map(|t| t.configs.clone())
        .ok_or_else(|| {
            (
                ResponseError::UnknownTopicOrPartition.code(),
                format!("topic {topic} does not exist"),
            )
        })
}

/// Validates and (unless `validate_only`) writes a topic's override changes, `None`
/// removing an override, through the metadata log.
///
/// # Errors
///
/// The metadata error's Kafka code and message (an unknown key or a bad value is
/// INVALID_CONFIG).
pub(super) fn write_topic_configs(
    ctx: &RequestContext,
    topic: &str,
    changes: &[(String, Option<String>)],
    validate_only: bool,
    now_ms: i64,
) -> Result<(), Failure> {
    ctx.broker
        .alter_topic_configs(topic, changes, validate_only, now_ms)
        .map_err(|e| (metadata_error_code(&e), e.to_string()))
}

/// Applies each resource's changes independently and answers one result per resource.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let now = crate::now_ms();
    let responses = req
        .resources
        .into_iter()
        .map(|res| {
            let outcome = match res.resource_type {
                RESOURCE_TOPIC => alter_topic(ctx, &res, req.validate_only, now),
                RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => Err(broker_resource_refused()),
                other => Err((
                    ResponseError::InvalidRequest.code(),
                    format!("unknown resource type {other}"),
                )),
            };
            let (code, message) = match outcome {
                Ok(()) => (0, None),
                Err((code, message)) => (code, Some(StrBytes::from_string(message))),
            };
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

fn alter_topic(
    ctx: &RequestContext,
    res: &AlterConfigsResource,
    validate_only: bool,
    now_ms: i64,
) -> Result<(), Failure> {
    let topic = res.resource_name.to_string();
    let current = topic_overrides(ctx, &topic)?;
    let mut seen = BTreeSet::new();
    let mut changes = Vec::with_capacity(res.configs.len());
    for c in &res.configs {
        let key = c.name.to_string();
        if !seen.insert(key.clone()) {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!("duplicate config key {key}"),
            ));
        }
        let value = c.value.as_ref().map(ToString::to_string);
        let new_value = match c.config_operation {
            OP_SET => match value {
                Some(v) => Some(v),
                None => {
                    return Err((
                        ResponseError::InvalidRequest.code(),
                        format!("null value not supported for {key}"),
                    ));
                }
            },
            OP_DELETE => None,
            OP_APPEND | OP_SUBTRACT => {
                if !LIST_CONFIGS.contains(&key.as_str()) {
                    return Err((
                        ResponseError::InvalidConfig.code(),
                        format!("config value append/subtract is not allowed for config key {key}"),
                    ));
                }
                // Kafka's base is the override, else the topic-level default (not the broker's).
                let base = current
                    .get(&key)
                    .map(String::as_str)
                    .or_else(|| topic_config_default(&key))
                    .unwrap_or("");
                let mut list: Vec<String> = split_list(base);
                let operand = split_list(value.as_deref().unwrap_or(""));
                if c.config_operation == OP_APPEND {
                    for v in operand {
                        if !list.contains(&v) {
                            list.push(v);
                        }
                    }
                } else {
                    list.retain(|v| !operand.contains(v));
                }
                Some(list.join(","))
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    format!("unknown config operation {other} for {key}"),
                ));
            }
        };
        changes.push((key, new_value));
    }
    write_topic_configs(ctx, &topic, &changes, validate_only, now_ms)
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}
