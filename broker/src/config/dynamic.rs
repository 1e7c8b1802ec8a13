//! Dynamic broker configs (KIP-226, Kafka's `DynamicBrokerConfig`): the broker keys that
//! AlterConfigs and IncrementalAlterConfigs may change on a BROKER resource with no
//! restart.
//!
//! A value is set on one broker (resource name `"1"`) or as the cluster-wide default
//! (resource name `""`), and recorded in the metadata log as a `ConfigRecord` of resource
//! type BROKER, so every node's image holds every broker's values and they survive restarts.
//! Each node resolves a key as Kafka does: its own dynamic value, else the cluster default,
//! else its static `server.properties` value, else Kafka's default.
//!
//! Strata's dynamic configs are the log defaults Kafka reconfigures live
//! (`DynamicLogConfig.ReconfigurableConfigs`, each the broker synonym of a topic config) that
//! Strata acts on. Every other known broker key is read-only, as in Kafka: changing it is
//! INVALID_REQUEST "Cannot update these configs dynamically" (a bad value of a dynamic key is
//! INVALID_REQUEST too, Kafka's KAFKA-13609 behaviour). `log.retention.check.interval.ms` is
//! read-only in Kafka (the retention task is scheduled once at start) and so here.

use std::collections::BTreeMap;

use strata_kraft::MetadataImage;

/// Kafka's `ConfigSource` of a dynamic value set on this broker.
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
/// Kafka's `ConfigSource` of a dynamic value set as the cluster-wide default.
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;

/// The dynamic broker keys and the topic config each is the default of (Kafka's
/// `ServerTopicConfigSynonyms`), in broker-key order.
pub const DYNAMIC_LOG_CONFIGS: &[(&str, &str)] = &[
    ("log.cleanup.policy", "cleanup.policy"),
    ("log.flush.interval.messages", "flush.messages"),
    ("log.flush.interval.ms", "flush.ms"),
    ("log.index.interval.bytes", "index.interval.bytes"),
    ("log.index.size.max.bytes", "segment.index.bytes"),
    ("log.message.timestamp.type", "message.timestamp.type"),
    ("log.retention.bytes", "retention.bytes"),
    ("log.retention.ms", "retention.ms"),
    ("log.roll.ms", "segment.ms"),
    ("log.segment.bytes", "segment.bytes"),
    ("message.max.bytes", "max.message.bytes"),
    ("min.insync.replicas", "min.insync.replicas"),
];

/// The topic config a dynamic broker key is the default of; `None` for a read-only key.
#[must_use]
pub fn topic_key(broker_key: &str) -> Option<&'static str> {
    DYNAMIC_LOG_CONFIGS
        .iter()
        .find(|(b, _)| *b == broker_key)
        .map(|(_, t)| *t)
}

/// The dynamic broker key that supplies a topic config's default, if there is one.
#[must_use]
pub fn broker_key(topic_key: &str) -> Option<&'static str> {
    DYNAMIC_LOG_CONFIGS
        .iter()
        .find(|(_, t)| *t == topic_key)
        .map(|(b, _)| *b)
}

/// Whether `key` may change on a BROKER resource.
#[must_use]
pub fn is_dynamic(key: &str) -> bool {
    topic_key(key).is_some()
}

/// The dynamic value of a broker key on `node_id`, and its source: the broker's own value,
/// else the cluster-wide default.
#[must_use]
pub fn broker_value<'a>(
    image: &'a MetadataImage,
    node_id: i32,
    key: &str,
) -> Option<(&'a str, i8)> {
    let own = image
        .broker_configs
        .get(&node_id.to_string())
        .and_then(|c| c.get(key))
        .map(|v| (v.as_str(), SOURCE_DYNAMIC_BROKER));
    own.or_else(|| {
        image
            .broker_configs
            .get("")
            .and_then(|c| c.get(key))
            .map(|v| (v.as_str(), SOURCE_DYNAMIC_DEFAULT_BROKER))
    })
}

/// A topic config's value above the static broker config: the topic's override, else the
/// dynamic broker value that the topic inherits on `node_id`. `None` leaves it to the
/// static configuration.
#[must_use]
pub fn topic_value<'a>(
    image: &'a MetadataImage,
    node_id: i32,
    overrides: &'a BTreeMap<String, String>,
    topic_key: &str,
) -> Option<&'a str> {
    overrides.get(topic_key).map(String::as_str).or_else(|| {
        broker_key(topic_key)
            .and_then(|b| broker_value(image, node_id, b))
            .map(|(v, _)| v)
    })
}

/// A topic's overrides with the dynamic broker defaults of `node_id` filled in beneath them:
/// what the topic's log config is built from before the static configuration.
#[must_use]
pub fn with_dynamic_defaults(
    image: &MetadataImage,
    node_id: i32,
    overrides: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged = overrides.clone();
    for (broker, topic) in DYNAMIC_LOG_CONFIGS {
        if !merged.contains_key(*topic)
            && let Some((v, _)) = broker_value(image, node_id, broker)
        {
            merged.insert((*topic).to_owned(), v.to_owned());
        }
    }
    merged
}

/// Checks one change to a BROKER resource: the key is dynamic and the value (unless the
/// change removes it) is valid for the topic config it is the default of.
///
/// # Errors
///
/// Kafka's message for the INVALID_REQUEST answer.
pub fn validate(key: &str, value: Option<&str>) -> Result<(), String> {
    let Some(topic) = topic_key(key) else {
        return Err(format!(
            "Cannot update these configs dynamically: Set({key})"
        ));
    };
    if value.is_none() {
        return Ok(());
    }
    strata_kraft::validate_topic_config(topic, value).map_err(|e| match e {
        strata_kraft::MetadataError::InvalidConfig { reason, .. } => {
            format!(
                "Invalid value {} for configuration {key}: {reason}",
                value.unwrap_or("")
            )
        }
        other => other.to_string(),
    })
}

/// Checks a BROKER resource's name: empty (the cluster-wide default) or a broker id.
///
/// # Errors
///
/// Kafka's message for the INVALID_REQUEST answer.
pub fn validate_resource_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.parse::<i32>().is_ok_and(|id| id >= 0) {
        Ok(())
    } else {
        Err(format!(
            "Unable to parse broker name as a base 10 number: {name}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use strata_kraft::MetadataRecord;
    use strata_kraft::record::{ConfigRecord, RESOURCE_TYPE_BROKER};

    use super::*;

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

    #[test]
    fn a_broker_value_beats_the_default_and_an_override_beats_both() {
        let mut image = MetadataImage::new("c", 1);
        set(&mut image, "", "log.retention.ms", "1000");
        set(&mut image, "2", "log.retention.ms", "2000");
        let none = BTreeMap::new();
        assert_eq!(topic_value(&image, 1, &none, "retention.ms"), Some("1000"));
        assert_eq!(topic_value(&image, 2, &none, "retention.ms"), Some("2000"));
        assert_eq!(
            broker_value(&image, 2, "log.retention.ms"),
            Some(("2000", SOURCE_DYNAMIC_BROKER))
        );
        let overrides: BTreeMap<String, String> =
            [("retention.ms".to_owned(), "5".to_owned())].into();
        assert_eq!(
            topic_value(&image, 2, &overrides, "retention.ms"),
            Some("5")
        );
        assert_eq!(topic_value(&image, 2, &none, "segment.bytes"), None);
        let merged = with_dynamic_defaults(&image, 1, &none);
        assert_eq!(merged["retention.ms"], "1000");
        assert_eq!(merged.len(), 1);
    }

    #[test]
    fn only_dynamic_keys_with_valid_values_change() {
        assert!(validate("log.retention.ms", Some("60000")).is_ok());
        assert!(validate("log.retention.ms", None).is_ok());
        assert!(validate("log.retention.ms", Some("soon")).is_err());
        assert!(validate("min.insync.replicas", Some("0")).is_err());
        assert!(validate("log.message.timestamp.type", Some("LogAppendTime")).is_ok());
        let e = validate("log.retention.hours", Some("1")).unwrap_err();
        assert!(
            e.starts_with("Cannot update these configs dynamically"),
            "{e}"
        );
        assert!(validate("log.retention.check.interval.ms", Some("1")).is_err());
        assert!(validate_resource_name("").is_ok());
        assert!(validate_resource_name("3").is_ok());
        assert!(validate_resource_name("x").is_err());
    }
}
