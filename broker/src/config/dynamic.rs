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
//! The dynamic keys are Kafka's (`DynamicBrokerConfig.AllDynamicConfigs`), the dynamic broker
//! keys of [`strata_kraft::config_catalogue`]: the log defaults Kafka reconfigures live
//! (`DynamicLogConfig`, each the broker synonym of a topic config) and the rest of Kafka's
//! set ([`super::dynamic_keys`]: thread pools, listeners, SSL and SASL, connection limits,
//! the log cleaner, tiered storage, ...).
//! Strata acts on the log defaults it implements; the others are validated, stored and
//! described exactly as Kafka does, though nothing in Strata reads them yet (it has no SASL
//! or TLS). Every other known broker key is read-only, as in Kafka: changing it is
//! INVALID_REQUEST "Cannot update these configs dynamically" (a bad value of a dynamic key is
//! INVALID_REQUEST too, Kafka's KAFKA-13609 behaviour). `log.retention.check.interval.ms` is
//! read-only in Kafka (the retention task is scheduled once at start) and so here.

use std::collections::BTreeMap;

use strata_kraft::MetadataImage;
use strata_kraft::config_catalogue::{self, ConfigKey, Scope};

use super::dynamic_keys;

/// Kafka's `ConfigSource` of a dynamic value set on this broker.
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
/// Kafka's `ConfigSource` of a dynamic value set as the cluster-wide default.
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;

/// The topic config a dynamic broker key is the default of (Kafka's
/// `ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS`); `None` for any other key.
#[must_use]
pub fn topic_key(broker_key: &str) -> Option<&'static str> {
    config_catalogue::topic_of_synonym(broker_key).map(|t| t.name)
}

/// The dynamic broker key that supplies a topic config's default, if there is one.
#[must_use]
pub fn broker_key(topic_key: &str) -> Option<&'static str> {
    config_catalogue::topic_key(topic_key).and_then(|t| t.synonym)
}

/// Whether `key` may change on a BROKER resource: a log default, another of Kafka's dynamic
/// broker configs, or a listener-prefixed form of one.
#[must_use]
pub fn is_dynamic(key: &str) -> bool {
    config_catalogue::broker_key(key).is_some_and(ConfigKey::is_dynamic)
        || dynamic_keys::listener_base(key).is_some()
}

/// Kafka's ConfigType id of a dynamic broker key that is not a log default, and whether
/// it is sensitive (a password, never described in clear).
#[must_use]
pub fn key_type(key: &str) -> Option<(i8, bool)> {
    dynamic_keys::find(key)
        .or_else(|| dynamic_keys::listener_base(key))
        .map(|k| (k.config_type(), k.is_sensitive()))
}

/// Whether a dynamic broker key (or a listener-prefixed one) is a list: the keys APPEND and
/// SUBTRACT apply to (Kafka's `prepareIncrementalConfigs`).
#[must_use]
pub fn is_list(key: &str) -> bool {
    config_catalogue::broker_key(key)
        .filter(|k| k.is_dynamic())
        .or_else(|| dynamic_keys::listener_base(key))
        .is_some_and(ConfigKey::is_list)
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
    for topic in config_catalogue::topic_keys() {
        if let Some(broker) = topic.synonym
            && !merged.contains_key(topic.name)
            && let Some((v, _)) = broker_value(image, node_id, broker)
        {
            merged.insert(topic.name.to_owned(), v.to_owned());
        }
    }
    merged
}

/// Checks a BROKER resource's changes (`None` removes a value) as Kafka's
/// `DynamicBrokerConfig.validateConfigs` and `DynamicThreadPool` do, in Kafka's order: keys
/// that are not dynamic, security configs without a listener prefix, values that do not
/// parse, per-broker keys on the cluster-wide default (`resource` empty), and thread pools
/// resized beyond half or double their current size. `current` gives a key's value before
/// the change (dynamic, else static, else Kafka's default).
///
/// Kafka also accepts names it does not know (custom configs for plugins); Strata refuses
/// them as not dynamic, since nothing here could read them.
///
/// # Errors
///
/// Kafka's message for the INVALID_REQUEST answer.
pub fn validate_changes(
    resource: &str,
    changes: &[(String, Option<String>)],
    current: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let set_of = |keys: Vec<&str>| format!("Set({})", keys.join(", "));
    let fixed: Vec<&str> = changes
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !is_dynamic(k))
        .collect();
    if !fixed.is_empty() {
        return Err(format!(
            "Cannot update these configs dynamically: {}",
            set_of(fixed)
        ));
    }
    let unprefixed: Vec<&str> = changes
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| dynamic_keys::find(k).is_some_and(|d| d.scope == Scope::ListenerOnly))
        .collect();
    if !unprefixed.is_empty() {
        return Err(format!(
            "These security configs can be dynamically updated only per-listener using the \
             listener prefix: {}",
            set_of(unprefixed)
        ));
    }
    for (key, value) in changes {
        let Some(value) = value else { continue };
        // A log default is checked by its topic config's rule.
        let checked = match config_catalogue::topic_of_synonym(key) {
            Some(topic) => topic.check(value).map_err(|reason| reason.to_string()),
            None => dynamic_keys::find(key)
                .or_else(|| dynamic_keys::listener_base(key))
                .map_or(Ok(()), |d| dynamic_keys::check(d, value)),
        };
        checked
            .map_err(|reason| format!("Invalid value {value} for configuration {key}: {reason}"))?;
    }
    if resource.is_empty() {
        let per_broker: Vec<&str> = changes
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| {
                dynamic_keys::find(k).is_some_and(|d| d.scope != Scope::ClusterWide)
                    || dynamic_keys::listener_base(k).is_some_and(|d| {
                        !matches!(d.name, "max.connections" | "max.connection.creation.rate")
                    })
            })
            .collect();
        if !per_broker.is_empty() {
            return Err(format!(
                "Cannot update these configs at default cluster level, broker id must be \
                 specified: {}",
                set_of(per_broker)
            ));
        }
    }
    for (key, value) in changes {
        if !config_catalogue::broker_key(key).is_some_and(|k| k.thread_pool) {
            continue;
        }
        let (Some(new), Some(old)) = (
            value.as_deref().and_then(|v| v.trim().parse::<i64>().ok()),
            current(key).and_then(|v| v.trim().parse::<i64>().ok()),
        ) else {
            continue;
        };
        if new == old {
            continue;
        }
        let failed = format!("Dynamic thread count update validation failed for {key}={new}");
        if new < old / 2 {
            return Err(format!(
                "{failed}, value should be at least half the current value {old}"
            ));
        }
        if new > old * 2 {
            return Err(format!(
                "{failed}, value should not be greater than double the current value {old}"
            ));
        }
    }
    Ok(())
}

/// Kafka's default of a dynamic broker key that is not a log default.
#[must_use]
pub fn key_default(key: &str) -> Option<&'static str> {
    dynamic_keys::find(key).and_then(|k| k.default)
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

    fn check(resource: &str, key: &str, value: Option<&str>) -> Result<(), String> {
        let changes = [(key.to_owned(), value.map(str::to_owned))];
        validate_changes(resource, &changes, |k| {
            (k == "background.threads").then(|| "10".to_owned())
        })
    }

    #[test]
    fn only_dynamic_keys_with_valid_values_change() {
        assert!(check("1", "log.retention.ms", Some("60000")).is_ok());
        assert!(check("1", "log.retention.ms", None).is_ok());
        assert!(check("1", "log.retention.ms", Some("soon")).is_err());
        assert!(check("1", "min.insync.replicas", Some("0")).is_err());
        assert!(check("1", "log.message.timestamp.type", Some("LogAppendTime")).is_ok());
        let e = check("1", "log.retention.hours", Some("1")).unwrap_err();
        assert_eq!(
            e,
            "Cannot update these configs dynamically: Set(log.retention.hours)"
        );
        assert!(check("1", "log.retention.check.interval.ms", Some("1")).is_err());
        assert!(validate_resource_name("").is_ok());
        assert!(validate_resource_name("3").is_ok());
        assert!(validate_resource_name("x").is_err());
    }

    #[test]
    fn kafkas_other_dynamic_keys_follow_kafkas_rules() {
        // Kafka's DynamicListenerConfig: a SASL key, per broker only.
        assert!(check("1", "sasl.kerberos.min.time.before.relogin", Some("58000")).is_ok());
        let e = check("", "sasl.kerberos.min.time.before.relogin", Some("58000")).unwrap_err();
        assert!(
            e.starts_with("Cannot update these configs at default cluster level"),
            "{e}"
        );
        let e = check("1", "sasl.kerberos.min.time.before.relogin", Some("x")).unwrap_err();
        assert!(e.starts_with("Invalid value x for configuration"), "{e}");
        // Keystores only under a listener prefix.
        let e = check("1", "ssl.keystore.location", Some("/k.jks")).unwrap_err();
        assert!(e.starts_with("These security configs"), "{e}");
        assert!(
            check(
                "1",
                "listener.name.external.ssl.keystore.location",
                Some("/k")
            )
            .is_ok()
        );
        // Thread pools resize within half and double of the current size (10).
        assert!(check("", "background.threads", Some("9")).is_ok());
        assert!(check("", "background.threads", None).is_ok());
        assert!(check("", "background.threads", Some("21")).is_err());
        assert!(check("", "background.threads", Some("4")).is_err());
        assert!(check("", "background.threads", Some("0")).is_err());
        assert!(is_dynamic("compression.type"));
        assert!(!is_dynamic("node.id"));
        assert_eq!(key_type("sasl.jaas.config"), Some((9, true)));
    }
}
