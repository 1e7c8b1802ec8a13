//! Kafka's per-topic configs: their names, default values and value checks (Kafka's
//! `TopicConfig` / `LogConfig` definitions), read from the topic entries of
//! [`crate::config_catalogue`], and the rules that span two configs.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::config_catalogue::{self, ConfigKey};
use crate::{ConfigValueError, MetadataError};

/// Kafka's topic configs and their default values, in name order, for DescribeConfigs
/// (`config_source = DEFAULT_CONFIG`). Broker-level overrides such as
/// `log.retention.hours` are the broker's to layer on top.
pub fn topic_config_defaults() -> &'static [(&'static str, &'static str)] {
    static DEFAULTS: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    DEFAULTS.get_or_init(|| {
        config_catalogue::topic_keys()
            .map(|k| (k.name, k.default.unwrap_or("")))
            .collect()
    })
}

/// Kafka's default for one topic config, or `None` if the key is not a topic config.
pub fn topic_config_default(key: &str) -> Option<&'static str> {
    config_catalogue::topic_key(key).and_then(|k| k.default)
}

/// Kafka's `DescribeConfigsResponse.ConfigType` id of a topic config (DescribeConfigs v3+):
/// 1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 6 DOUBLE, 7 LIST; `None` if the key is not a topic
/// config.
pub fn topic_config_type(key: &str) -> Option<i8> {
    config_catalogue::topic_key(key).map(ConfigKey::config_type)
}

fn invalid(key: &str, value: Option<&str>, reason: ConfigValueError) -> MetadataError {
    MetadataError::InvalidConfig {
        key: key.to_owned(),
        value: value.map(str::to_owned),
        reason,
    }
}

/// Checks that `key` is a topic config and, when `value` is `Some`, that it parses and is
/// in range. `None` (delete the override) only checks the key.
///
/// # Errors
///
/// [`MetadataError::InvalidConfig`] naming the key, the value and why.
pub fn validate_topic_config(key: &str, value: Option<&str>) -> Result<(), MetadataError> {
    let entry = config_catalogue::topic_key(key)
        .ok_or_else(|| invalid(key, value, ConfigValueError::UnknownKey))?;
    let Some(raw) = value else { return Ok(()) };
    entry
        .check(raw)
        .map_err(|reason| invalid(key, value, reason))
}

/// The effective value of a `LONG` config under a set of overrides.
fn effective_long(configs: &BTreeMap<String, String>, key: &'static str) -> i64 {
    configs
        .get(key)
        .map(String::as_str)
        .or_else(|| topic_config_default(key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(i64::MAX)
}

/// Validates a topic's whole override set: each entry, then the rules that span two
/// configs (Kafka's `LogConfig.validateValues`).
///
/// # Errors
///
/// [`MetadataError::InvalidConfig`] for the first offending entry.
pub fn validate_topic_configs(configs: &BTreeMap<String, String>) -> Result<(), MetadataError> {
    for (k, v) in configs {
        validate_topic_config(k, Some(v))?;
    }
    // KIP-354: a record must become compactable no later than it must be compacted.
    let min_lag = effective_long(configs, "min.compaction.lag.ms");
    let max_lag = effective_long(configs, "max.compaction.lag.ms");
    if max_lag < min_lag {
        let key = "max.compaction.lag.ms";
        return Err(invalid(
            key,
            Some(&max_lag.to_string()),
            ConfigValueError::LessThan {
                other: "min.compaction.lag.ms",
                other_value: min_lag,
            },
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(key: &str, value: &str) -> Option<ConfigValueError> {
        match validate_topic_config(key, Some(value)) {
            Ok(()) => None,
            Err(MetadataError::InvalidConfig { reason, .. }) => Some(reason),
            Err(e) => panic!("unexpected {e}"),
        }
    }

    #[test]
    fn every_default_passes_its_own_check() {
        for (k, v) in topic_config_defaults() {
            assert_eq!(reason(k, v), None, "{k}={v}");
        }
        assert!(
            topic_config_defaults().windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, no duplicates"
        );
    }

    #[test]
    fn kafka_defaults_are_reported() {
        let d: BTreeMap<_, _> = topic_config_defaults().iter().copied().collect();
        assert_eq!(d["cleanup.policy"], "delete");
        assert_eq!(d["retention.ms"], "604800000");
        assert_eq!(d["segment.bytes"], "1073741824");
        assert_eq!(d["max.message.bytes"], "1048588");
        assert_eq!(d["message.timestamp.type"], "CreateTime");
        assert_eq!(d["min.insync.replicas"], "1");
        assert_eq!(d["compression.type"], "producer");
    }

    #[test]
    fn values_are_checked_like_kafka() {
        assert_eq!(reason("cleanup.policy", "compact,delete"), None);
        assert_eq!(reason("cleanup.policy", "delete, compact"), None);
        assert!(matches!(
            reason("cleanup.policy", "archive"),
            Some(ConfigValueError::NotOneOf { .. })
        ));
        assert!(matches!(
            reason("cleanup.policy", ""),
            Some(ConfigValueError::NotOneOf { .. })
        ));
        assert_eq!(reason("segment.bytes", "14"), None);
        assert_eq!(
            reason("segment.bytes", "13"),
            Some(ConfigValueError::BelowMinimum { min: 14 })
        );
        assert_eq!(
            reason("segment.bytes", "4294967296"),
            Some(ConfigValueError::NotAnInteger)
        );
        assert_eq!(reason("retention.ms", "-1"), None);
        assert_eq!(
            reason("retention.ms", "-2"),
            Some(ConfigValueError::BelowMinimum { min: -1 })
        );
        assert_eq!(
            reason("retention.ms", "abc"),
            Some(ConfigValueError::NotAnInteger)
        );
        assert_eq!(reason("retention.bytes", "-5"), None);
        assert_eq!(reason("message.timestamp.type", "LogAppendTime"), None);
        assert!(matches!(
            reason("message.timestamp.type", "logappendtime"),
            Some(ConfigValueError::NotOneOf { .. })
        ));
        assert_eq!(reason("preallocate", "TRUE"), None);
        assert_eq!(
            reason("preallocate", "yes"),
            Some(ConfigValueError::NotABoolean)
        );
        assert_eq!(reason("min.cleanable.dirty.ratio", "0.1"), None);
        assert!(matches!(
            reason("min.cleanable.dirty.ratio", "1.5"),
            Some(ConfigValueError::OutOfRange { .. })
        ));
        assert!(matches!(
            reason("min.cleanable.dirty.ratio", "NaN"),
            Some(ConfigValueError::OutOfRange { .. })
        ));
        assert_eq!(
            reason("min.insync.replicas", "0"),
            Some(ConfigValueError::BelowMinimum { min: 1 })
        );
        assert_eq!(reason("compression.type", "zstd"), None);
        assert_eq!(
            reason("leader.replication.throttled.replicas", "0:1, 1:1"),
            None
        );
        assert_eq!(
            reason("leader.replication.throttled.replicas", "0-1"),
            Some(ConfigValueError::NotAReplicaList)
        );
        assert_eq!(
            reason("log.retention.hours", "1"),
            Some(ConfigValueError::UnknownKey)
        );
        // Deleting an override checks only the key.
        assert!(validate_topic_config("retention.ms", None).is_ok());
        assert!(validate_topic_config("nope", None).is_err());
    }

    #[test]
    fn types_are_kafkas() {
        assert_eq!(topic_config_type("cleanup.policy"), Some(7));
        assert_eq!(topic_config_type("compression.type"), Some(2));
        assert_eq!(topic_config_type("segment.bytes"), Some(3));
        assert_eq!(topic_config_type("retention.ms"), Some(5));
        assert_eq!(topic_config_type("min.cleanable.dirty.ratio"), Some(6));
        assert_eq!(topic_config_type("preallocate"), Some(1));
        assert_eq!(
            topic_config_type("leader.replication.throttled.replicas"),
            Some(7)
        );
        assert_eq!(topic_config_type("log.retention.ms"), None);
        assert_eq!(topic_config_defaults().len(), 33);
        assert_eq!(topic_config_default("compression.zstd.level"), Some("3"));
        assert_eq!(
            reason("compression.zstd.level", "-131073"),
            Some(ConfigValueError::OutOfRange {
                min: -131_072.0,
                max: 22.0
            })
        );
    }

    #[test]
    fn compaction_lags_must_be_ordered() {
        let mut c = BTreeMap::new();
        c.insert("min.compaction.lag.ms".to_owned(), "100".to_owned());
        assert!(validate_topic_configs(&c).is_ok());
        c.insert("max.compaction.lag.ms".to_owned(), "10".to_owned());
        assert!(matches!(
            validate_topic_configs(&c),
            Err(MetadataError::InvalidConfig {
                reason: ConfigValueError::LessThan { .. },
                ..
            })
        ));
    }
}
