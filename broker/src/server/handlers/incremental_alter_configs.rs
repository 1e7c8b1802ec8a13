//! IncrementalAlterConfigs (key 44, KIP-339): SET, DELETE, APPEND and SUBTRACT on topic config
//! overrides and on dynamic broker configs (KIP-226, a broker id or the cluster-wide default),
//! written through the metadata log as `ConfigRecord`s. BROKER_LOGGER resources are refused.
//!
//! The legacy AlterConfigs (`alter_configs.rs`) shares this file's resource types and its
//! write paths ([`write_topic_configs`], [`write_broker_configs`]).

use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet};

use strata_kraft::config_catalogue::{self, ConfigKey};
use strata_kraft::{
    MetadataError, topic_config_default, validate_topic_config, validate_topic_configs,
};
use strata_protocol::StrBytes;
use strata_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use strata_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use strata_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::RequestContext;
use crate::config::dynamic;
use crate::server::error::config_refusal_code;

/// Kafka's ConfigResource types.
pub(super) const RESOURCE_TOPIC: i8 = 2;
pub(super) const RESOURCE_BROKER: i8 = 4;
pub(super) const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Kafka's AlterConfigOp types.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Why a config resource of AlterConfigs or IncrementalAlterConfigs is refused; its
/// `Display` is the resource's error message.
#[derive(Debug, thiserror::Error)]
pub enum ConfigRefusal {
    /// The request is malformed for this resource (an unknown or unsupported resource type,
    /// a resource or key named twice, a null value, an unknown operation, a broker resource
    /// name or a dynamic broker change that is not valid). Carries the message.
    #[error("{0}")]
    InvalidRequest(String),
    /// An append or subtract on a key that is not a list.
    #[error("config value append/subtract is not allowed for config key {key}")]
    NotAList {
        /// The config key.
        key: String,
    },
    /// The topic the resource names does not exist.
    #[error("topic {topic} does not exist")]
    UnknownTopic {
        /// The topic name.
        topic: String,
    },
    /// The metadata log refuses the change or fails to write it.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
}

/// The answer to a BROKER_LOGGER resource: broker log levels cannot be changed here.
fn broker_logger_refused() -> ConfigRefusal {
    ConfigRefusal::InvalidRequest("dynamic broker logger configs are not supported".to_owned())
}

/// A BROKER resource's current dynamic configs (`""`: the cluster-wide default).
pub(super) fn broker_overrides(ctx: &RequestContext, resource: &str) -> BTreeMap<String, String> {
    ctx.broker
        .image()
        .broker_configs
        .get(resource)
        .cloned()
        .unwrap_or_default()
}

/// Validates and (unless `validate_only`) writes a BROKER resource's changes, `None`
/// removing a value, through the metadata log. As Kafka's `ConfigAdminManager` does, a key
/// that is not dynamic and a value that does not parse are both INVALID_REQUEST
/// (KAFKA-13609), and so is a resource name that is not a broker id.
///
/// # Errors
///
/// [`ConfigRefusal::InvalidRequest`] as above; [`ConfigRefusal::Metadata`] when the write
/// fails.
pub(super) async fn write_broker_configs(
    ctx: &RequestContext,
    resource: &str,
    changes: &[(String, Option<String>)],
    validate_only: bool,
) -> Result<(), ConfigRefusal> {
    let invalid = ConfigRefusal::InvalidRequest;
    dynamic::validate_resource_name(resource).map_err(invalid)?;
    let image = ctx.broker.image();
    let statics = &ctx.broker.config.values;
    let current = |key: &str| {
        let dynamic = if resource.is_empty() {
            image
                .broker_configs
                .get("")
                .and_then(|c| c.get(key))
                .cloned()
        } else {
            resource
                .parse::<i32>()
                .ok()
                .and_then(|id| dynamic::broker_value(&image, id, key))
                .map(|(v, _)| v.to_owned())
        };
        dynamic
            .or_else(|| statics.get(key).cloned())
            .or_else(|| dynamic::key_default(key).map(str::to_owned))
    };
    dynamic::validate_changes(resource, changes, current).map_err(invalid)?;
    ctx.broker
        .alter_broker_configs(resource, changes, validate_only)
        .await
        .map_err(ConfigRefusal::Metadata)
}

/// A topic's current overrides.
///
/// # Errors
///
/// [`ConfigRefusal::UnknownTopic`] when the topic does not exist.
pub(super) fn topic_overrides(
    ctx: &RequestContext,
    topic: &str,
) -> Result<BTreeMap<String, String>, ConfigRefusal> {
    ctx.broker
        .image()
        .topics
        .get(topic)
        .map(|t| t.configs.clone())
        .ok_or_else(|| ConfigRefusal::UnknownTopic {
            topic: topic.to_owned(),
        })
}

/// Validates and (unless `validate_only`) writes a topic's override changes, `None`
/// removing an override, through the metadata log.
///
/// Kafka validates each key and value, then the resulting set as a whole
/// (`LogConfig.validateValues`): a rule that spans two keys (KIP-354's
/// `max.compaction.lag.ms >= min.compaction.lag.ms`) applies to the final set only. The
/// metadata log takes one `ConfigRecord` at a time and checks the set after each, so the
/// changes are written in an order whose every step is valid ([`write_order`]), one at a
/// time.
///
/// # Errors
///
/// [`ConfigRefusal::UnknownTopic`]; [`ConfigRefusal::Metadata`] with the metadata error (an
/// unknown key or a bad value is INVALID_CONFIG).
pub(super) async fn write_topic_configs(
    ctx: &RequestContext,
    topic: &str,
    changes: &[(String, Option<String>)],
    validate_only: bool,
) -> Result<(), ConfigRefusal> {
    let current = topic_overrides(ctx, topic)?;
    let ordered = write_order(&current, changes)?;
    if validate_only {
        // The topic exists and every step is valid: all the metadata log would check.
        return Ok(());
    }
    for change in ordered {
        ctx.broker
            .alter_topic_configs(topic, std::slice::from_ref(change), false)
            .await?;
    }
    Ok(())
}

/// The changes in an order that keeps the overrides valid after each one, found greedily
/// (each step takes the first change, in request order, that keeps the set valid).
///
/// # Errors
///
/// When no such order exists: the first key or value in request order that is invalid on
/// its own, else what is wrong with the final set, as Kafka reports them.
fn write_order<'a>(
    current: &BTreeMap<String, String>,
    changes: &'a [(String, Option<String>)],
) -> Result<Vec<&'a (String, Option<String>)>, MetadataError> {
    fn apply(configs: &mut BTreeMap<String, String>, (key, value): &(String, Option<String>)) {
        match value {
            Some(v) => configs.insert(key.clone(), v.clone()),
            None => configs.remove(key),
        };
    }
    let fits = |configs: &BTreeMap<String, String>, change: &(String, Option<String>)| {
        let mut next = configs.clone();
        apply(&mut next, change);
        validate_topic_config(&change.0, change.1.as_deref()).is_ok()
            && validate_topic_configs(&next).is_ok()
    };
    let mut configs = current.clone();
    let mut rest: Vec<&(String, Option<String>)> = changes.iter().collect();
    let mut ordered = Vec::with_capacity(rest.len());
    while !rest.is_empty() {
        let Some(i) = rest.iter().position(|c| fits(&configs, c)) else {
            for (key, value) in &rest {
                validate_topic_config(key, value.as_deref())?;
            }
            for c in &rest {
                apply(&mut configs, c);
            }
            validate_topic_configs(&configs)?;
            // Every key is valid and so is the final set, yet no step fits. With valid
            // current overrides an order always exists (one cross-key rule, two keys); this
            // is a current set that is already invalid. Write in request order and let the
            // metadata log's own check answer.
            ordered.append(&mut rest);
            break;
        };
        let change = rest.remove(i);
        apply(&mut configs, change);
        ordered.push(change);
    }
    Ok(ordered)
}

/// Applies each resource's changes independently and answers one result per resource.
#[must_use]
pub async fn handle(
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let responses = futures_util::stream::iter(req.resources)
        .then(|res| async move {
            let outcome = match res.resource_type {
                RESOURCE_TOPIC => alter_topic(ctx, &res, req.validate_only).await,
                RESOURCE_BROKER => alter_broker(ctx, &res, req.validate_only).await,
                RESOURCE_BROKER_LOGGER => Err(broker_logger_refused()),
                other => Err(ConfigRefusal::InvalidRequest(format!(
                    "unknown resource type {other}"
                ))),
            };
            let (code, message) = match outcome {
                Ok(()) => (0, None),
                Err(e) => (
                    config_refusal_code(&e),
                    Some(StrBytes::from_string(e.to_string())),
                ),
            };
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name)
        })
        .collect::<Vec<_>>()
        .await;
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

async fn alter_topic(
    ctx: &RequestContext,
    res: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ConfigRefusal> {
    let topic = res.resource_name.to_string();
    let current = topic_overrides(ctx, &topic)?;
    let mut seen = BTreeSet::new();
    let mut changes = Vec::with_capacity(res.configs.len());
    for c in &res.configs {
        let key = c.name.to_string();
        if !seen.insert(key.clone()) {
            return Err(ConfigRefusal::InvalidRequest(format!(
                "duplicate config key {key}"
            )));
        }
        let value = c.value.as_ref().map(ToString::to_string);
        let new_value = match c.config_operation {
            OP_SET => match value {
                Some(v) => Some(v),
                None => {
                    return Err(ConfigRefusal::InvalidRequest(format!(
                        "null value not supported for {key}"
                    )));
                }
            },
            OP_DELETE => None,
            OP_APPEND | OP_SUBTRACT => {
                // Kafka's `prepareIncrementalConfigs`: only LIST configs append or subtract.
                if !config_catalogue::topic_key(&key).is_some_and(ConfigKey::is_list) {
                    return Err(ConfigRefusal::NotAList { key });
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
                return Err(ConfigRefusal::InvalidRequest(format!(
                    "unknown config operation {other} for {key}"
                )));
            }
        };
        changes.push((key, new_value));
    }
    write_topic_configs(ctx, &topic, &changes, validate_only).await
}

async fn alter_broker(
    ctx: &RequestContext,
    res: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ConfigRefusal> {
    let resource = res.resource_name.to_string();
    let current = broker_overrides(ctx, &resource);
    let mut seen = BTreeSet::new();
    let mut changes = Vec::with_capacity(res.configs.len());
    for c in &res.configs {
        let key = c.name.to_string();
        if !seen.insert(key.clone()) {
            return Err(ConfigRefusal::InvalidRequest(format!(
                "duplicate config key {key}"
            )));
        }
        let value = c.value.as_ref().map(ToString::to_string);
        let new_value = match c.config_operation {
            OP_SET => match value {
                Some(v) => Some(v),
                None => {
                    return Err(ConfigRefusal::InvalidRequest(format!(
                        "null value not supported for {key}"
                    )));
                }
            },
            OP_DELETE => None,
            OP_APPEND | OP_SUBTRACT => {
                // Kafka's `prepareIncrementalConfigs`: only LIST configs append or subtract.
                if !dynamic::is_list(&key) {
                    return Err(ConfigRefusal::NotAList { key });
                }
                // The base is the resource's dynamic value, else this broker's static one.
                let base = current
                    .get(&key)
                    .or_else(|| ctx.broker.config.values.get(&key))
                    .map(String::as_str)
                    .or_else(|| dynamic::key_default(&key))
                    .unwrap_or("");
                let mut list = split_list(base);
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
                return Err(ConfigRefusal::InvalidRequest(format!(
                    "unknown config operation {other} for {key}"
                )));
            }
        };
        changes.push((key, new_value));
    }
    write_broker_configs(ctx, &resource, &changes, validate_only).await
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::IncrementalAlterConfigs(handle(&ctx, req).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(k: &str, v: Option<&str>) -> (String, Option<String>) {
        (k.to_owned(), v.map(str::to_owned))
    }

    fn keys(order: &[&(String, Option<String>)]) -> Vec<String> {
        order.iter().map(|(k, _)| k.clone()).collect()
    }

    #[test]
    fn append_and_subtract_take_list_configs_only() {
        let topic_list = |k: &str| config_catalogue::topic_key(k).is_some_and(ConfigKey::is_list);
        assert!(topic_list("cleanup.policy"));
        assert!(topic_list("leader.replication.throttled.replicas"));
        assert!(topic_list("follower.replication.throttled.replicas"));
        assert!(!topic_list("retention.ms"));
        assert!(!topic_list("log.cleanup.policy"));
        assert!(dynamic::is_list("log.cleanup.policy"));
        assert!(dynamic::is_list("ssl.cipher.suites"));
        assert!(dynamic::is_list("listener.name.external.ssl.cipher.suites"));
        assert!(!dynamic::is_list("log.retention.ms"));
        // A read-only list is refused later, as not dynamic.
        assert!(!dynamic::is_list("process.roles"));
    }

    #[test]
    fn write_order_keeps_every_step_valid() {
        let current: BTreeMap<String, String> = [
            ("min.compaction.lag.ms", "100"),
            ("max.compaction.lag.ms", "200"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        // Raising both past the old maximum: the maximum first.
        let up = [
            change("min.compaction.lag.ms", Some("1000")),
            change("max.compaction.lag.ms", Some("2000")),
        ];
        let order = write_order(&current, &up).unwrap();
        assert_eq!(
            keys(&order),
            ["max.compaction.lag.ms", "min.compaction.lag.ms"]
        );
        // Lowering both below the old minimum: the minimum first (request order kept).
        let down = [
            change("max.compaction.lag.ms", Some("20")),
            change("min.compaction.lag.ms", Some("10")),
        ];
        let order = write_order(&current, &down).unwrap();
        assert_eq!(
            keys(&order),
            ["min.compaction.lag.ms", "max.compaction.lag.ms"]
        );
        // A final set that breaks the rule, and a bad value, are refused.
        let bad_final = [
            change("min.compaction.lag.ms", Some("3000")),
            change("max.compaction.lag.ms", Some("2500")),
        ];
        assert!(matches!(
            write_order(&current, &bad_final),
            Err(MetadataError::InvalidConfig { .. })
        ));
        let bad_value = [
            change("retention.ms", Some("1")),
            change("segment.ms", Some("soon")),
        ];
        match write_order(&current, &bad_value) {
            Err(MetadataError::InvalidConfig { key, .. }) => assert_eq!(key, "segment.ms"),
            other => panic!("unexpected {other:?}"),
        }
        // Removing the minimum's override (default 0) is always a valid step.
        let remove = [change("min.compaction.lag.ms", None)];
        let order = write_order(&current, &remove).unwrap();
        assert_eq!(keys(&order), ["min.compaction.lag.ms"]);
    }
}
