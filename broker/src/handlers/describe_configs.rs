//! DescribeConfigs (key 32): topic and broker configs with Kafka's names, values, sources and
//! synonyms.

use strata_kraft::topic_config_defaults;
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use strata_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::RequestContext;
use crate::config::BrokerConfig;

/// Kafka's ConfigResource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// Kafka's ConfigSource values.
pub const SOURCE_DYNAMIC_TOPIC: i8 = 1;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// One described config: its effective value, source, and the chain of synonyms behind it.
pub struct Described {
    pub name: String,
    pub value: String,
    pub source: i8,
    pub synonyms: Vec<(String, String, i8)>,
}

/// The broker keys that supply a topic config's default, most specific first (Kafka's
/// LogConfig synonyms).
fn broker_synonyms(topic_key: &str) -> &'static [&'static str] {
    match topic_key {
        "retention.ms" => &[
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ],
        "retention.bytes" => &["log.retention.bytes"],
        "segment.bytes" => &["log.segment.bytes"],
        "segment.ms" => &["log.roll.ms", "log.roll.hours"],
        "max.message.bytes" => &["message.max.bytes"],
        "message.timestamp.type" => &["log.message.timestamp.type"],
        "cleanup.policy" => &["log.cleanup.policy"],
        "min.insync.replicas" => &["min.insync.replicas"],
        "compression.type" => &["compression.type"],
        "flush.messages" => &["log.flush.interval.messages"],
        "flush.ms" => &["log.flush.interval.ms"],
        "index.interval.bytes" => &["log.index.interval.bytes"],
        "segment.index.bytes" => &["log.index.size.max.bytes"],
        _ => &[],
    }
}

/// The broker-level value of a topic config, normalised to the topic key's unit.
fn broker_value(cfg: &BrokerConfig, topic_key: &str) -> Option<String> {
    let explicit = broker_synonyms(topic_key)
        .iter()
        .any(|k| cfg.explicit.contains_key(*k));
    if !explicit {
        return None;
    }
    Some(match topic_key {
        "retention.ms" => cfg.log_retention_ms.to_string(),
        "segment.ms" => cfg.log_roll_ms.to_string(),
        "retention.bytes" => cfg.log_retention_bytes.to_string(),
        "segment.bytes" => cfg.log_segment_bytes.to_string(),
        "max.message.bytes" => cfg.message_max_bytes.to_string(),
        _ => {
            let key = broker_synonyms(topic_key)
                .iter()
                .find(|k| cfg.explicit.contains_key(**k))?;
            cfg.explicit.get(*key)?.clone()
        }
    })
}

/// Describes every topic config: override, else broker setting, else Kafka's default.
#[must_use]
pub fn describe_topic(
    cfg: &BrokerConfig,
    overrides: &std::collections::BTreeMap<String, String>,
) -> Vec<Described> {
    topic_config_defaults()
        .iter()
        .map(|(name, default)| {
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(*name) {
                synonyms.push(((*name).to_owned(), v.clone(), SOURCE_DYNAMIC_TOPIC));
            }
            if let Some(v) = broker_value(cfg, name) {
                let key = broker_synonyms(name)
                    .iter()
                    .find(|k| cfg.explicit.contains_key(**k))
                    .copied()
                    .unwrap_or("");
                synonyms.push((key.to_owned(), v, SOURCE_STATIC_BROKER));
            }
            let default_key = broker_synonyms(name).first().copied().unwrap_or(name);
            synonyms.push((
                default_key.to_owned(),
                (*default).to_owned(),
                SOURCE_DEFAULT,
            ));
            let (value, source) = (synonyms[0].1.clone(), synonyms[0].2);
            Described {
                name: (*name).to_owned(),
                value,
                source,
                synonyms,
            }
        })
        .collect()
}

fn describe_broker(cfg: &BrokerConfig) -> Vec<Described> {
    cfg.values
        .iter()
        .map(|(k, v)| {
            let source = if cfg.explicit.contains_key(k) {
                SOURCE_STATIC_BROKER
            } else {
                SOURCE_DEFAULT
            };
            Described {
                name: k.clone(),
                value: v.clone(),
                source,
                synonyms: vec![(k.clone(), v.clone(), source)],
            }
        })
        .collect()
}

/// Answers each resource.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let cfg = &ctx.broker.config;
    let image = ctx.broker.image();
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name);
            let described = match r.resource_type {
                RESOURCE_TOPIC => match image.topics.get(&name) {
                    Some(t) => describe_topic(cfg, &t.configs),
                    None => {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    }
                },
                RESOURCE_BROKER if name.is_empty() || name == cfg.node_id.to_string() => {
                    describe_broker(cfg)
                }
                RESOURCE_BROKER => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "unknown broker id {name}"
                        ))));
                }
                _ => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(StrBytes::from_static_str(
                            "unsupported resource type",
                        )));
                }
            };
            let keys: Option<Vec<String>> = r
                .configuration_keys
                .map(|ks| ks.iter().map(ToString::to_string).collect());
            let configs = described
                .into_iter()
                .filter(|d| keys.as_ref().is_none_or(|ks| ks.contains(&d.name)))
                .map(|d| {
                    let synonyms = if req.include_synonyms {
                        d.synonyms
                            .iter()
                            .map(|(n, v, s)| {
                                DescribeConfigsSynonym::default()
                                    .with_name(StrBytes::from_string(n.clone()))
                                    .with_value(Some(StrBytes::from_string(v.clone())))
                                    .with_source(*s)
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_string(d.name))
                        .with_value(Some(StrBytes::from_string(d.value)))
                        .with_read_only(r.resource_type == RESOURCE_BROKER)
                        .with_config_source(d.source)
                        .with_synonyms(synonyms)
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}
