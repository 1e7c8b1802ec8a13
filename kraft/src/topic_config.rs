//! Kafka's per-topic configs: their names, default values and value checks
//! (Kafka's `TopicConfig` / `LogConfig` definitions).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::{ConfigValueError, MetadataError};

/// How a config's value is checked, mirroring Kafka's `ConfigDef` type and validator.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// `INT` with `atLeast(min)`.
    Int { min: i32 },
    /// `INT` between `min` and `max`, inclusive.
    IntRange { min: i32, max: i32 },
    /// `LONG` with `atLeast(min)`.
    Long { min: i64 },
    /// `DOUBLE` between `min` and `max`, inclusive.
    Double { min: f64, max: f64 },
    /// `BOOLEAN`.
    Bool,
    /// `STRING` with `ValidString.in(..)` (case-sensitive, as in Kafka).
    OneOf(&'static [&'static str]),
    /// `LIST` with `ValidList.in(..)`: a non-empty comma-separated list.
    ListOf(&'static [&'static str]),
    /// KIP-73 throttled replicas: `*` or `partition:broker,...`.
    ReplicaList,
}

/// Kafka's `ZstdCompressionCodec` minimum level.
const ZSTD_MIN_LEVEL: i32 = -131_072;

/// Every topic config Kafka defines (3.x), with its default and check. Order is
/// alphabetical, as `kafka-configs --describe --all` lists them.
const TOPIC_CONFIGS: &[(&str, &str, Check)] = &[
    (
        "cleanup.policy",
        "delete",
        Check::ListOf(&["compact", "delete"]),
    ),
    // KIP-390 compression levels (Kafka 3.8).
    (
        "compression.gzip.level",
        "-1",
        Check::IntRange { min: -1, max: 9 },
    ),
    (
        "compression.lz4.level",
        "9",
        Check::IntRange { min: 1, max: 17 },
    ),
    (
        "compression.type",
        "producer",
        Check::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
    ),
    (
        "compression.zstd.level",
        "3",
        Check::IntRange {
            min: ZSTD_MIN_LEVEL,
            max: 22,
        },
    ),
    ("delete.retention.ms", "86400000", Check::Long { min: 0 }),
    ("file.delete.delay.ms", "60000", Check::Long { min: 0 }),
    (
        "flush.messages",
        "9223372036854775807",
        Check::Long { min: 1 },
    ),
    ("flush.ms", "9223372036854775807", Check::Long { min: 0 }),
    (
        "follower.replication.throttled.replicas",
        "",
        Check::ReplicaList,
    ),
    ("index.interval.bytes", "4096", Check::Int { min: 0 }),
    (
        "leader.replication.throttled.replicas",
        "",
        Check::ReplicaList,
    ),
    // KIP-405 tiered storage: -2 means "use retention.ms/bytes".
    ("local.retention.bytes", "-2", Check::Long { min: -2 }),
    ("local.retention.ms", "-2", Check::Long { min: -2 }),
    (
        "max.compaction.lag.ms",
        "9223372036854775807",
        Check::Long { min: 1 },
    ),
    // 1 MiB plus Kafka's 12-byte LOG_OVERHEAD (offset + size prefix of a batch).
    ("max.message.bytes", "1048588", Check::Int { min: 0 }),
    ("message.downconversion.enable", "true", Check::Bool),
    // KIP-937 split of the deprecated difference.max.ms.
    (
        "message.timestamp.after.max.ms",
        "9223372036854775807",
        Check::Long { min: 0 },
    ),
    (
        "message.timestamp.before.max.ms",
        "9223372036854775807",
        Check::Long { min: 0 },
    ),
    (
        "message.timestamp.difference.max.ms",
        "9223372036854775807",
        Check::Long { min: 0 },
    ),
    (
        "message.timestamp.type",
        "CreateTime",
        Check::OneOf(&["CreateTime", "LogAppendTime"]),
    ),
    (
        "min.cleanable.dirty.ratio",
        "0.5",
        Check::Double { min: 0.0, max: 1.0 },
    ),
    ("min.compaction.lag.ms", "0", Check::Long { min: 0 }),
    ("min.insync.replicas", "1", Check::Int { min: 1 }),
    ("preallocate", "false", Check::Bool),
    ("remote.storage.enable", "false", Check::Bool),
    ("retention.bytes", "-1", Check::Long { min: i64::MIN }),
    ("retention.ms", "604800000", Check::Long { min: -1 }),
    // 14 = Kafka's LegacyRecord.RECORD_OVERHEAD_V0: a segment must hold one record.
    ("segment.bytes", "1073741824", Check::Int { min: 14 }),
    ("segment.index.bytes", "10485760", Check::Int { min: 4 }),
    ("segment.jitter.ms", "0", Check::Long { min: 0 }),
    ("segment.ms", "604800000", Check::Long { min: 1 }),
    ("unclean.leader.election.enable", "false", Check::Bool),
];

/// Kafka's topic configs and their default values, in name order, for DescribeConfigs
/// (`config_source = DEFAULT_CONFIG`). Broker-level overrides such as
/// `log.retention.hours` are the broker's to layer on top.
pub fn topic_config_defaults() -> &'static [(&'static str, &'static str)] {
    static DEFAULTS: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    DEFAULTS.get_or_init(|| TOPIC_CONFIGS.iter().map(|(k, d, _)| (*k, *d)).collect())
}

/// Kafka's default for one topic config, or `None` if the key is not a topic config.
pub fn topic_config_default(key: &str) -> Option<&'static str> {
    TOPIC_CONFIGS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, d, _)| *d)
}

/// Kafka's `DescribeConfigsResponse.ConfigType` id of a topic config (DescribeConfigs v3+):
/// 1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 6 DOUBLE, 7 LIST; `None` if the key is not a topic
/// config.
pub fn topic_config_type(key: &str) -> Option<i8> {
    TOPIC_CONFIGS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, _, c)| match c {
            Check::Bool => 1,
            Check::OneOf(_) => 2,
            Check::Int { .. } | Check::IntRange { .. } => 3,
            Check::Long { .. } => 5,
            Check::Double { .. } => 6,
            Check::ListOf(_) | Check::ReplicaList => 7,
        })
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
    let check = TOPIC_CONFIGS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, _, c)| *c)
        .ok_or_else(|| invalid(key, value, ConfigValueError::UnknownKey))?;
    let Some(raw) = value else { return Ok(()) };
    check_value(check, raw).map_err(|reason| invalid(key, value, reason))
}

fn check_value(check: Check, raw: &str) -> Result<(), ConfigValueError> {
    // Kafka's ConfigDef.parseType trims before parsing numbers, booleans and lists.
    let v = raw.trim();
    match check {
        Check::Int { min } => {
            let n: i32 = v.parse().map_err(|_| ConfigValueError::NotAnInteger)?;
            if n < min {
                return Err(ConfigValueError::BelowMinimum { min: min.into() });
            }
        }
        Check::IntRange { min, max } => {
            let n: i32 = v.parse().map_err(|_| ConfigValueError::NotAnInteger)?;
            if n < min || n > max {
                return Err(ConfigValueError::OutOfRange {
                    min: min.into(),
                    max: max.into(),
                });
            }
        }
        Check::Long { min } => {
            let n: i64 = v.parse().map_err(|_| ConfigValueError::NotAnInteger)?;
            if n < min {
                return Err(ConfigValueError::BelowMinimum { min });
            }
        }
        Check::Double { min, max } => {
            let n: f64 = v.parse().map_err(|_| ConfigValueError::NotANumber)?;
            // `!(..)` also rejects NaN.
            if !(min..=max).contains(&n) {
                return Err(ConfigValueError::OutOfRange { min, max });
            }
        }
        Check::Bool => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(ConfigValueError::NotABoolean);
            }
        }
        Check::OneOf(allowed) => {
            if !allowed.contains(&raw) {
                return Err(ConfigValueError::NotOneOf { allowed });
            }
        }
        Check::ListOf(allowed) => {
            if v.is_empty() || v.split(',').map(str::trim).any(|i| !allowed.contains(&i)) {
                return Err(ConfigValueError::NotOneOf { allowed });
            }
        }
        Check::ReplicaList => {
            let ok = v.is_empty()
                || v == "*"
                || v.split(',').all(|pair| {
                    pair.trim().split_once(':').is_some_and(|(p, b)| {
                        p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok()
                    })
                });
            if !ok {
                return Err(ConfigValueError::NotAReplicaList);
            }
        }
    }
    Ok(())
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
    fn the_catalogue_says_what_the_table_said() {
        let samples = [
            "",
            " ",
            "0",
            "-1",
            "-2",
            "-3",
            "1",
            "3",
            "4",
            "9",
            "13",
            "14",
            "17",
            "18",
            "22",
            "23",
            "-131072",
            "-131073",
            "4096",
            "4294967296",
            "9223372036854775807",
            "-9223372036854775808",
            "abc",
            "0.5",
            "1.5",
            "-0.1",
            "NaN",
            "true",
            "FALSE",
            "yes",
            "delete",
            "compact,delete",
            "delete, compact",
            "archive",
            "producer",
            "zstd",
            " zstd",
            "CreateTime",
            "LogAppendTime",
            "logappendtime",
            "*",
            "0:1, 1:1",
            "0-1",
        ];
        let catalogue: Vec<_> = crate::config_catalogue::topic_keys().collect();
        assert_eq!(catalogue.len(), TOPIC_CONFIGS.len());
        for ((name, default, check), k) in TOPIC_CONFIGS.iter().zip(&catalogue) {
            assert_eq!((k.name, k.default), (*name, Some(*default)));
            assert_eq!(Some(k.config_type()), topic_config_type(name), "{name}");
            for v in samples {
                assert_eq!(k.check(v), check_value(*check, v), "{name}={v:?}");
            }
        }
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
