//! DescribeConfigs (key 32): topic and broker configs with Kafka's names, values, sources,
//! types and synonyms.
//!
//! Sources and synonyms follow Kafka's `ConfigHelper`: a config's synonyms are the broker
//! keys that can set it (`log.retention.ms`, `log.retention.minutes`, `log.retention.hours`
//! for `retention.ms`), listed source by source (this broker's dynamic value, then the
//! cluster-wide dynamic default, then `server.properties`, then Kafka's default) and, within
//! a source, key by key; entries before the first one naming the described key itself are
//! dropped, so a topic whose `retention.ms` comes only from a static `log.retention.hours`
//! reports DEFAULT_CONFIG and no synonyms, exactly as Kafka does. A topic override comes
//! first, as DYNAMIC_TOPIC_CONFIG. The config's source is its first synonym's.
//!
//! Names, defaults, types, synonyms and the read-only and sensitive flags come from
//! [`strata_kraft::config_catalogue`].
//!
//! A BROKER resource named by this node's id describes every known broker key, read-only
//! unless it is a dynamic config ([`crate::config::dynamic`]); the cluster-wide default
//! resource (empty name) describes only the dynamic defaults that are set. Another broker's
//! id is INVALID_REQUEST: clients send a broker's describe to that broker.

use std::collections::BTreeMap;

use strata_kraft::config_catalogue::{self, ConfigKey};
use strata_kraft::{MetadataImage, topic_config_defaults, topic_config_type};
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use strata_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::RequestContext;
use super::incremental_alter_configs::ConfigRefusal;
use crate::config::BrokerConfig;
use crate::config::dynamic::{self, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER};
use crate::config::dynamic_keys;
use crate::server::error::{TopicRefusal, config_refusal_code, topic_refusal_code};

/// Kafka's ConfigResource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// Kafka's ConfigSource values.
pub const SOURCE_DYNAMIC_TOPIC: i8 = 1;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// Kafka's ConfigType ids (DescribeConfigs v3+).
const TYPE_UNKNOWN: i8 = 0;
const TYPE_STRING: i8 = 2;

/// One synonym: the key, its value and where it comes from.
pub type Synonym = (String, String, i8);

/// One described config: its effective value, source, and the chain of synonyms behind it.
pub struct Described {
    pub name: String,
    /// `None` where Kafka's value is null (no default), or the config is sensitive.
    pub value: Option<String>,
    pub source: i8,
    pub read_only: bool,
    pub config_type: i8,
    /// A password: its value and its synonyms' are never sent (Kafka's `isSensitive`).
    pub sensitive: bool,
    pub synonyms: Vec<Synonym>,
}

/// The broker key that supplies a topic config's default (Kafka's
/// `ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS`).
fn topic_synonym(topic_key: &str) -> Option<&'static str> {
    dynamic::broker_key(topic_key)
}

/// The broker keys that set one broker value, most specific first (Kafka's
/// `DynamicBrokerConfig.brokerConfigSynonyms`).
fn broker_config_synonyms(key: &str) -> Vec<&str> {
    match key {
        "log.roll.ms" | "log.roll.hours" => vec!["log.roll.ms", "log.roll.hours"],
        "log.roll.jitter.ms" | "log.roll.jitter.hours" => {
            vec!["log.roll.jitter.ms", "log.roll.jitter.hours"]
        }
        "log.flush.interval.ms" => vec!["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        "log.retention.ms" | "log.retention.minutes" | "log.retention.hours" => vec![
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ],
        other => vec![other],
    }
}

/// Kafka's default of a broker key, `None` where Kafka's is null (or, for a key Strata
/// reads, where it starts empty).
fn static_default(key: &str) -> Option<String> {
    config_catalogue::broker_key(key)
        .and_then(|k| k.default)
        .map(str::to_owned)
}

/// Kafka's `ConfigHelper.configSynonyms` for broker key `name` (see the module doc).
fn config_synonyms(
    cfg: &BrokerConfig,
    image: &MetadataImage,
    name: &str,
    synonyms: &[&str],
) -> Vec<Synonym> {
    let none = BTreeMap::new();
    let own = image
        .broker_configs
        .get(&cfg.node_id.to_string())
        .unwrap_or(&none);
    let default = image.broker_configs.get("").unwrap_or(&none);
    let mut all: Vec<Synonym> = Vec::new();
    for (map, source) in [
        (own, SOURCE_DYNAMIC_BROKER),
        (default, SOURCE_DYNAMIC_DEFAULT_BROKER),
        (&cfg.explicit, SOURCE_STATIC_BROKER),
    ] {
        all.extend(
            synonyms
                .iter()
                .filter_map(|s| map.get(*s).map(|v| ((*s).to_owned(), v.clone(), source))),
        );
    }
    all.extend(
        synonyms
            .iter()
            .filter_map(|s| static_default(s).map(|v| ((*s).to_owned(), v, SOURCE_DEFAULT))),
    );
    match all.iter().position(|(n, _, _)| n == name) {
        Some(i) => all.split_off(i),
        None => Vec::new(),
    }
}

/// The static broker value of a topic config, normalised to the topic key's unit, when
/// `server.properties` sets one of its synonyms.
fn static_topic_value(cfg: &BrokerConfig, topic_key: &str) -> Option<String> {
    let primary = topic_synonym(topic_key)?;
    let synonyms = broker_config_synonyms(primary);
    let key = synonyms.iter().find(|k| cfg.explicit.contains_key(**k))?;
    Some(match topic_key {
        "retention.ms" => cfg.log_retention_ms.to_string(),
        "segment.ms" => cfg.log_roll_ms.to_string(),
        "retention.bytes" => cfg.log_retention_bytes.to_string(),
        "segment.bytes" => cfg.log_segment_bytes.to_string(),
        "max.message.bytes" => cfg.message_max_bytes.to_string(),
        _ => cfg.explicit.get(*key)?.clone(),
    })
}

/// Describes every topic config: the override, else this node's dynamic broker value, else
/// the static broker setting, else Kafka's default.
#[must_use]
pub fn describe_topic(
    cfg: &BrokerConfig,
    image: &MetadataImage,
    overrides: &BTreeMap<String, String>,
) -> Vec<Described> {
    topic_config_defaults()
        .iter()
        .map(|(name, default)| {
            let mut synonyms = topic_synonym(name)
                .map(|b| config_synonyms(cfg, image, b, &broker_config_synonyms(b)))
                .unwrap_or_default();
            if let Some(v) = overrides.get(*name) {
                synonyms.insert(0, ((*name).to_owned(), v.clone(), SOURCE_DYNAMIC_TOPIC));
            }
            let value = dynamic::topic_value(image, cfg.node_id, overrides, name)
                .map(str::to_owned)
                .or_else(|| static_topic_value(cfg, name))
                .unwrap_or_else(|| (*default).to_owned());
            Described {
                name: (*name).to_owned(),
                value: Some(value),
                source: synonyms.first().map_or(SOURCE_DEFAULT, |s| s.2),
                read_only: false,
                config_type: topic_config_type(name).unwrap_or(TYPE_UNKNOWN),
                sensitive: false,
                synonyms,
            }
        })
        .collect()
}

/// The catalogue entry of a broker key, or of the key a listener-prefixed one sets.
fn broker_entry(key: &str) -> Option<&'static ConfigKey> {
    config_catalogue::broker_key(key).or_else(|| dynamic_keys::listener_base(key))
}

/// Kafka's ConfigType of a broker key (STRING for a key the catalogue does not know).
fn broker_config_type(key: &str) -> i8 {
    broker_entry(key).map_or(TYPE_STRING, ConfigKey::config_type)
}

/// Whether a broker key is a password (Kafka's `isSensitive`).
fn is_sensitive(key: &str) -> bool {
    broker_entry(key).is_some_and(ConfigKey::is_sensitive)
}

/// Describes this broker's configs (`name` is its id), or the cluster-wide dynamic
/// defaults (`name` is empty).
fn describe_broker(cfg: &BrokerConfig, image: &MetadataImage, name: &str) -> Vec<Described> {
    if name.is_empty() {
        let none = BTreeMap::new();
        let defaults = image.broker_configs.get("").unwrap_or(&none);
        return defaults
            .iter()
            .map(|(k, v)| Described {
                name: k.clone(),
                value: Some(v.clone()),
                source: SOURCE_DYNAMIC_DEFAULT_BROKER,
                read_only: !dynamic::is_dynamic(k),
                config_type: broker_config_type(k),
                sensitive: is_sensitive(k),
                synonyms: config_synonyms(cfg, image, k, &broker_config_synonyms(k))
                    .into_iter()
                    .filter(|s| s.2 == SOURCE_DYNAMIC_DEFAULT_BROKER)
                    .collect(),
            })
            .collect();
    }
    // Every key Strata reads, every dynamic key of Kafka's (with Kafka's default where it
    // has one), and whatever dynamic value is set (a listener-prefixed key, say).
    let mut keys: BTreeMap<&str, Option<&str>> = cfg
        .values
        .iter()
        .map(|(k, v)| (k.as_str(), Some(v.as_str())))
        .collect();
    for k in config_catalogue::broker_keys().filter(|k| dynamic_keys::find(k.name).is_some()) {
        keys.entry(k.name).or_insert(k.default);
    }
    for resource in [cfg.node_id.to_string(), String::new()] {
        for k in image
            .broker_configs
            .get(&resource)
            .into_iter()
            .flat_map(|c| c.keys())
        {
            keys.entry(k.as_str()).or_insert(None);
        }
    }
    keys.into_iter()
        .map(|(k, v)| {
            let synonyms = config_synonyms(cfg, image, k, &broker_config_synonyms(k));
            let value = dynamic::broker_value(image, cfg.node_id, k)
                .map(|(d, _)| d.to_owned())
                .or_else(|| v.map(str::to_owned));
            Described {
                name: k.to_owned(),
                value,
                source: synonyms.first().map_or(SOURCE_DEFAULT, |s| s.2),
                read_only: !dynamic::is_dynamic(k),
                config_type: broker_config_type(k),
                sensitive: is_sensitive(k),
                synonyms,
            }
        })
        .collect()
}

/// A resource's result carrying the refusal's code and message.
fn refused(result: DescribeConfigsResult, refusal: &ConfigRefusal) -> DescribeConfigsResult {
    result
        .with_error_code(config_refusal_code(refusal))
        .with_error_message(Some(StrBytes::from_string(refusal.to_string())))
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
                    Some(t) => describe_topic(cfg, &image, &t.configs),
                    None => {
                        return result.with_error_code(topic_refusal_code(TopicRefusal::Unknown));
                    }
                },
                RESOURCE_BROKER if name.is_empty() || name == cfg.node_id.to_string() => {
                    describe_broker(cfg, &image, &name)
                }
                RESOURCE_BROKER => {
                    return refused(
                        result,
                        &ConfigRefusal::InvalidRequest(format!(
                            "Unexpected broker id, expected {} or empty string, but received {name}",
                            cfg.node_id
                        )),
                    );
                }
                _ => {
                    return refused(
                        result,
                        &ConfigRefusal::InvalidRequest("unsupported resource type".to_owned()),
                    );
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
                                let value = (!d.sensitive).then(|| StrBytes::from_string(v.clone()));
                                DescribeConfigsSynonym::default()
                                    .with_name(StrBytes::from_string(n.clone()))
                                    .with_value(value)
                                    .with_source(*s)
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_string(d.name))
                        .with_value(d.value.filter(|_| !d.sensitive).map(StrBytes::from_string))
                        .with_read_only(d.read_only)
                        .with_config_source(d.source)
                        .with_is_sensitive(d.sensitive)
                        .with_config_type(d.config_type)
                        .with_synonyms(synonyms)
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use strata_kraft::MetadataRecord;
    use strata_kraft::record::{ConfigRecord, RESOURCE_TYPE_BROKER};

    use super::*;

    const TYPE_BOOLEAN: i8 = 1;
    const TYPE_INT: i8 = 3;
    const TYPE_SHORT: i8 = 4;
    const TYPE_LONG: i8 = 5;
    const TYPE_LIST: i8 = 7;
    const TYPE_CLASS: i8 = 8;
    const TYPE_PASSWORD: i8 = 9;

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        BrokerConfig::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
        .unwrap()
    }

    fn set(image: &mut MetadataImage, resource: &str, key: &str, value: &str) {
        image
            .apply(&MetadataRecord::Config(ConfigRecord {
                resource_type: RESOURCE_TYPE_BROKER,
                resource_name: resource.to_owned(),
                name: key.to_owned(),
                value: Some(value.to_owned()),
            }))
            .unwrap();
    }

    fn find<'a>(all: &'a [Described], name: &str) -> &'a Described {
        all.iter().find(|d| d.name == name).unwrap()
    }

    fn chain(d: &Described) -> Vec<(&str, &str, i8)> {
        d.synonyms
            .iter()
            .map(|(n, v, s)| (n.as_str(), v.as_str(), *s))
            .collect()
    }

    #[test]
    fn broker_defaults_types_and_flags_are_the_catalogues() {
        // A key Strata reads that starts empty has no default; a log default Strata does not
        // read has its topic config's; Kafka's other dynamic keys have Kafka's.
        assert_eq!(static_default("log.retention.ms"), None);
        assert_eq!(
            static_default("log.retention.hours").as_deref(),
            Some("168")
        );
        assert_eq!(
            static_default("log.cleaner.delete.retention.ms").as_deref(),
            Some("86400000")
        );
        assert_eq!(static_default("config.providers").as_deref(), Some(""));
        assert_eq!(
            static_default("listeners").as_deref(),
            Some("PLAINTEXT://localhost:9092")
        );
        assert_eq!(static_default("log.roll.jitter.hours"), None);
        assert_eq!(broker_config_type("log.roll.ms"), TYPE_LONG);
        assert_eq!(broker_config_type("log.cleanup.policy"), TYPE_LIST);
        assert_eq!(
            broker_config_type("offsets.topic.replication.factor"),
            TYPE_SHORT
        );
        assert_eq!(broker_config_type("replica.selector.class"), TYPE_CLASS);
        assert_eq!(
            broker_config_type("controller.quorum.auto.join.enable"),
            TYPE_STRING
        );
        assert_eq!(broker_config_type("delete.topic.enable"), TYPE_BOOLEAN);
        assert_eq!(broker_config_type("listeners"), TYPE_STRING);
        assert_eq!(
            broker_config_type("listener.name.x.ssl.keystore.password"),
            TYPE_PASSWORD
        );
        assert_eq!(broker_config_type("nope"), TYPE_STRING);
        assert!(is_sensitive("sasl.jaas.config"));
        assert!(is_sensitive("listener.name.x.ssl.key.password"));
        assert!(!is_sensitive("ssl.keystore.location"));
    }

    #[test]
    fn topic_synonyms_in_kafkas_order() {
        let cfg = config(&[("node.id", "1"), ("log.retention.hours", "2")]);
        let mut image = MetadataImage::new("c", 1);
        let none = BTreeMap::new();
        // Only a static log.retention.hours: Kafka drops the chain (it does not name
        // log.retention.ms) and reports DEFAULT_CONFIG, with the effective value.
        let d = describe_topic(&cfg, &image, &none);
        let r = find(&d, "retention.ms");
        assert_eq!(
            (r.value.as_deref().unwrap(), r.source),
            ("7200000", SOURCE_DEFAULT)
        );
        assert!(r.synonyms.is_empty());
        // segment.bytes: Kafka's default only.
        let s = find(&d, "segment.bytes");
        assert_eq!(
            chain(s),
            [("log.segment.bytes", "1073741824", SOURCE_DEFAULT)]
        );
        assert_eq!(s.config_type, TYPE_INT);
        set(&mut image, "", "log.retention.ms", "5000");
        set(&mut image, "1", "log.retention.ms", "6000");
        let overrides: BTreeMap<String, String> =
            [("retention.ms".to_owned(), "7".to_owned())].into();
        let d = describe_topic(&cfg, &image, &overrides);
        let r = find(&d, "retention.ms");
        assert_eq!(
            (r.value.as_deref().unwrap(), r.source),
            ("7", SOURCE_DYNAMIC_TOPIC)
        );
        assert_eq!(
            chain(r),
            [
                ("retention.ms", "7", SOURCE_DYNAMIC_TOPIC),
                ("log.retention.ms", "6000", SOURCE_DYNAMIC_BROKER),
                ("log.retention.ms", "5000", SOURCE_DYNAMIC_DEFAULT_BROKER),
                ("log.retention.hours", "2", SOURCE_STATIC_BROKER),
                ("log.retention.hours", "168", SOURCE_DEFAULT),
            ]
        );
        assert_eq!(r.config_type, TYPE_LONG);
        let d = describe_topic(&cfg, &image, &none);
        let r = find(&d, "retention.ms");
        assert_eq!(
            (r.value.as_deref().unwrap(), r.source),
            ("6000", SOURCE_DYNAMIC_BROKER)
        );
    }

    #[test]
    fn broker_resources() {
        let cfg = config(&[("node.id", "1"), ("log.segment.bytes", "100000")]);
        let mut image = MetadataImage::new("c", 1);
        set(&mut image, "", "log.segment.bytes", "200000");
        let d = describe_broker(&cfg, &image, "1");
        let s = find(&d, "log.segment.bytes");
        assert_eq!(
            (s.value.as_deref().unwrap(), s.source, s.read_only),
            ("200000", SOURCE_DYNAMIC_DEFAULT_BROKER, false)
        );
        assert_eq!(
            chain(s),
            [
                ("log.segment.bytes", "200000", SOURCE_DYNAMIC_DEFAULT_BROKER),
                ("log.segment.bytes", "100000", SOURCE_STATIC_BROKER),
                ("log.segment.bytes", "1073741824", SOURCE_DEFAULT),
            ]
        );
        let h = find(&d, "log.retention.check.interval.ms");
        assert!(h.read_only);
        assert_eq!((h.source, h.config_type), (SOURCE_DEFAULT, TYPE_LONG));
        let defaults = describe_broker(&cfg, &image, "");
        assert_eq!(defaults.len(), 1);
        assert_eq!(chain(&defaults[0]).len(), 1);
    }
}
