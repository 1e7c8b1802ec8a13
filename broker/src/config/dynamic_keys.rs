//! The catalogue of Kafka's dynamic broker configs (`DynamicBrokerConfig.AllDynamicConfigs`)
//! that are not log defaults: each key's Kafka type, validator, default and scope.
//!
//! Strata accepts and stores every one of these, as Kafka does, even where it has no use for
//! the value yet (no SASL, no TLS, one fixed thread pool, no tiered storage): an operator's
//! `kafka-configs.sh --alter --entity-type brokers` that works against Kafka works here, and
//! the value is described back. The log defaults (`log.retention.ms`, ...) are the other half
//! of Kafka's set and live in [`super::dynamic::DYNAMIC_LOG_CONFIGS`], checked by their topic
//! config's rule.

use strata_kraft::config_catalogue::{ConfigKey, Validator};

/// How a value is parsed and checked: Kafka's `ConfigDef` type and validator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueType {
    Boolean,
    String,
    /// A string from a fixed set (Kafka's `ValidString.in`).
    OneOf(&'static [&'static str]),
    /// A 32-bit integer in `[min, max]`.
    Int {
        min: i64,
        max: i64,
    },
    /// A 16-bit integer in `[min, max]`.
    Short {
        min: i64,
        max: i64,
    },
    /// A 64-bit integer of at least `min`.
    Long {
        min: i64,
    },
    /// A double in `[min, max]`.
    Double {
        min: f64,
        max: f64,
    },
    List,
    Class,
    /// Never described back in clear (Kafka's `Type.PASSWORD`, `isSensitive`).
    Password,
}

impl ValueType {
    /// Kafka's `DescribeConfigsResponse.ConfigType` id.
    #[must_use]
    pub fn config_type(self) -> i8 {
        match self {
            Self::Boolean => 1,
            Self::String | Self::OneOf(_) => 2,
            Self::Int { .. } => 3,
            Self::Short { .. } => 4,
            Self::Long { .. } => 5,
            Self::Double { .. } => 6,
            Self::List => 7,
            Self::Class => 8,
            Self::Password => 9,
        }
    }

    /// Checks `value` against the type, with Kafka's `ConfigException` wording for the
    /// reason.
    ///
    /// # Errors
    ///
    /// Why the value is refused.
    pub fn check(self, value: &str) -> Result<(), String> {
        let trimmed = value.trim();
        let int_in = |min: i64, max: i64, bits: &str| match trimmed.parse::<i64>() {
            Ok(v) if v < min => Err(format!("Value must be at least {min}")),
            Ok(v) if v > max => Err(format!("Value must be no more than {max}")),
            Ok(_) => Ok(()),
            Err(_) => Err(format!(
                "Expected value to be a {bits} integer, but it was a String"
            )),
        };
        match self {
            Self::Boolean => {
                if trimmed.eq_ignore_ascii_case("true") || trimmed.eq_ignore_ascii_case("false") {
                    Ok(())
                } else {
                    Err("Expected value to be either true or false".to_owned())
                }
            }
            Self::OneOf(allowed) => {
                if allowed.contains(&trimmed) {
                    Ok(())
                } else {
                    Err(format!("String must be one of: {}", allowed.join(", ")))
                }
            }
            Self::Int { min, max } => int_in(min, max, "32-bit"),
            Self::Short { min, max } => int_in(min, max, "16-bit"),
            Self::Long { min } => int_in(min, i64::MAX, "64-bit"),
            Self::Double { min, max } => match trimmed.parse::<f64>() {
                Ok(v) if v.is_nan() => Err("Expected value to be a double".to_owned()),
                Ok(v) if v < min => Err(format!("Value must be at least {min}")),
                Ok(v) if v > max => Err(format!("Value must be no more than {max}")),
                Ok(_) => Ok(()),
                Err(_) => Err("Expected value to be a double, but it was a String".to_owned()),
            },
            Self::Class => {
                // A Java class name: dot-separated identifiers ('$' for nested classes).
                let ok = !trimmed.is_empty()
                    && trimmed.split('.').all(|part| {
                        part.chars()
                            .next()
                            .is_some_and(|c| c.is_alphabetic() || c == '_')
                            && part
                                .chars()
                                .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
                    });
                if ok {
                    Ok(())
                } else {
                    Err(format!("Class {trimmed} cannot be found"))
                }
            }
            Self::String | Self::List | Self::Password => Ok(()),
        }
    }
}

/// Checks `value` against a dynamic broker key's type and validator, with Kafka's
/// `ConfigException` wording for the reason (the keys that are not log defaults; a log
/// default is checked by its topic config's rule, [`ConfigKey::check`]).
///
/// # Errors
///
/// Why the value is refused.
pub fn check(key: &ConfigKey, value: &str) -> Result<(), String> {
    use strata_kraft::config_catalogue::ValueType as T;
    let trimmed = value.trim();
    let int_in = |min: i64, max: i64, bits: &str| match trimmed.parse::<i64>() {
        Ok(v) if v < min => Err(format!("Value must be at least {min}")),
        Ok(v) if v > max => Err(format!("Value must be no more than {max}")),
        Ok(_) => Ok(()),
        Err(_) => Err(format!(
            "Expected value to be a {bits} integer, but it was a String"
        )),
    };
    let bounds = |lo: i64, hi: i64| match key.validator {
        Validator::AtLeast(min) => (min, hi),
        Validator::Between(min, max) => (min, max),
        _ => (lo, hi),
    };
    match (key.value_type, key.validator) {
        (T::Boolean, _) => {
            if trimmed.eq_ignore_ascii_case("true") || trimmed.eq_ignore_ascii_case("false") {
                Ok(())
            } else {
                Err("Expected value to be either true or false".to_owned())
            }
        }
        (_, Validator::OneOf(allowed)) => {
            if allowed.contains(&trimmed) {
                Ok(())
            } else {
                Err(format!("String must be one of: {}", allowed.join(", ")))
            }
        }
        (T::Int, _) => {
            let (min, max) = bounds(i32::MIN.into(), i32::MAX.into());
            int_in(min, max, "32-bit")
        }
        (T::Short, _) => {
            let (min, max) = bounds(i16::MIN.into(), i16::MAX.into());
            int_in(min, max, "16-bit")
        }
        (T::Long, _) => {
            let (min, max) = bounds(i64::MIN, i64::MAX);
            int_in(min, max, "64-bit")
        }
        (T::Double, validator) => {
            let (min, max) = match validator {
                Validator::DoubleBetween(min, max) => (min, max),
                _ => (f64::MIN, f64::MAX),
            };
            match trimmed.parse::<f64>() {
                Ok(v) if v.is_nan() => Err("Expected value to be a double".to_owned()),
                Ok(v) if v < min => Err(format!("Value must be at least {min}")),
                Ok(v) if v > max => Err(format!("Value must be no more than {max}")),
                Ok(_) => Ok(()),
                Err(_) => Err("Expected value to be a double, but it was a String".to_owned()),
            }
        }
        (T::Class, _) => {
            // A Java class name: dot-separated identifiers ('$' for nested classes).
            let ok = !trimmed.is_empty()
                && trimmed.split('.').all(|part| {
                    part.chars()
                        .next()
                        .is_some_and(|c| c.is_alphabetic() || c == '_')
                        && part
                            .chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
                });
            if ok {
                Ok(())
            } else {
                Err(format!("Class {trimmed} cannot be found"))
            }
        }
        _ => Ok(()),
    }
}

/// Who a key may be set for (Kafka's `DynamicBrokerConfig.PerBrokerConfigs` and
/// `DynamicSecurityConfigs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A broker id or the cluster-wide default.
    ClusterWide,
    /// Only a broker id: "Cannot update these configs at default cluster level, broker id
    /// must be specified".
    PerBroker,
    /// Only under a listener prefix (`listener.name.<listener>.<key>`), per broker: Kafka's
    /// `SslConfigs.RECONFIGURABLE_CONFIGS` (the keystores and truststores).
    ListenerOnly,
}

/// One dynamic broker config that is not a log default.
#[derive(Clone, Copy, Debug)]
pub struct DynamicKey {
    pub name: &'static str,
    pub value_type: ValueType,
    /// Kafka's default, `None` where it is null.
    pub default: Option<&'static str>,
    pub scope: Scope,
}

const fn key(
    name: &'static str,
    value_type: ValueType,
    default: Option<&'static str>,
    scope: Scope,
) -> DynamicKey {
    DynamicKey {
        name,
        value_type,
        default,
        scope,
    }
}

const INT_MAX: i64 = i32::MAX as i64;
const AT_LEAST_0: ValueType = ValueType::Int {
    min: 0,
    max: INT_MAX,
};
const AT_LEAST_1: ValueType = ValueType::Int {
    min: 1,
    max: INT_MAX,
};
const ANY_DOUBLE: ValueType = ValueType::Double {
    min: f64::MIN,
    max: f64::MAX,
};

use Scope::{ClusterWide, ListenerOnly, PerBroker};
use ValueType::{Boolean, Class, List, Long, OneOf, Password, Short, String as Str};

/// The thread pools Kafka resizes live (`DynamicThreadPool.RECONFIGURABLE_CONFIGS`); a new
/// size must stay within half and double the current one.
pub const THREAD_POOL_CONFIGS: &[&str] = &[
    "num.io.threads",
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "background.threads",
];

/// Kafka's dynamic broker configs other than the log defaults, by name.
pub const DYNAMIC_BROKER_KEYS: &[DynamicKey] = &[
    // DynamicThreadPool.
    key("background.threads", AT_LEAST_1, Some("10"), ClusterWide),
    key("num.io.threads", AT_LEAST_1, Some("8"), ClusterWide),
    key(
        "num.recovery.threads.per.data.dir",
        AT_LEAST_1,
        Some("2"),
        ClusterWide,
    ),
    key("num.replica.fetchers", AT_LEAST_1, Some("1"), ClusterWide),
    // LogCleaner (message.max.bytes, also in its set, is a log default).
    key(
        "log.cleaner.backoff.ms",
        Long { min: 0 },
        Some("15000"),
        ClusterWide,
    ),
    key(
        "log.cleaner.dedupe.buffer.size",
        Long { min: i64::MIN },
        Some("134217728"),
        ClusterWide,
    ),
    key(
        "log.cleaner.io.buffer.load.factor",
        ANY_DOUBLE,
        Some("0.9"),
        ClusterWide,
    ),
    key(
        "log.cleaner.io.buffer.size",
        AT_LEAST_0,
        Some("524288"),
        ClusterWide,
    ),
    key(
        "log.cleaner.io.max.bytes.per.second",
        ANY_DOUBLE,
        Some("1.7976931348623157E308"),
        ClusterWide,
    ),
    key("log.cleaner.threads", AT_LEAST_0, Some("1"), ClusterWide),
    // Metrics and config providers.
    key(
        "metric.reporters",
        List,
        Some("org.apache.kafka.common.metrics.JmxReporter"),
        ClusterWide,
    ),
    key("config.providers", List, Some(""), ClusterWide),
    // DynamicListenerConfig: listeners.
    key("listeners", Str, Some("PLAINTEXT://:9092"), PerBroker),
    key(
        "listener.security.protocol.map",
        Str,
        Some("SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"),
        PerBroker,
    ),
    // DynamicListenerConfig: SSL.
    key("principal.builder.class", Class, None, PerBroker),
    key("ssl.cipher.suites", List, Some(""), PerBroker),
    key(
        "ssl.client.auth",
        OneOf(&["required", "requested", "none"]),
        Some("none"),
        PerBroker,
    ),
    key(
        "ssl.enabled.protocols",
        List,
        Some("TLSv1.2,TLSv1.3"),
        PerBroker,
    ),
    key(
        "ssl.endpoint.identification.algorithm",
        Str,
        Some("https"),
        PerBroker,
    ),
    key("ssl.engine.factory.class", Class, None, PerBroker),
    key("ssl.key.password", Password, None, ListenerOnly),
    key("ssl.keymanager.algorithm", Str, Some("SunX509"), PerBroker),
    key(
        "ssl.keystore.certificate.chain",
        Password,
        None,
        ListenerOnly,
    ),
    key("ssl.keystore.key", Password, None, ListenerOnly),
    key("ssl.keystore.location", Str, None, ListenerOnly),
    key("ssl.keystore.password", Password, None, ListenerOnly),
    key("ssl.keystore.type", Str, Some("JKS"), ListenerOnly),
    key("ssl.protocol", Str, Some("TLSv1.3"), PerBroker),
    key("ssl.provider", Str, None, PerBroker),
    key("ssl.secure.random.implementation", Str, None, PerBroker),
    key("ssl.trustmanager.algorithm", Str, Some("PKIX"), PerBroker),
    key("ssl.truststore.certificates", Password, None, ListenerOnly),
    key("ssl.truststore.location", Str, None, ListenerOnly),
    key("ssl.truststore.password", Password, None, ListenerOnly),
    key("ssl.truststore.type", Str, Some("JKS"), ListenerOnly),
    // DynamicListenerConfig: SASL.
    key("sasl.enabled.mechanisms", List, Some("GSSAPI"), PerBroker),
    key("sasl.jaas.config", Password, None, PerBroker),
    key(
        "sasl.kerberos.kinit.cmd",
        Str,
        Some("/usr/bin/kinit"),
        PerBroker,
    ),
    key(
        "sasl.kerberos.min.time.before.relogin",
        Long { min: i64::MIN },
        Some("60000"),
        PerBroker,
    ),
    key(
        "sasl.kerberos.principal.to.local.rules",
        List,
        Some("DEFAULT"),
        PerBroker,
    ),
    key("sasl.kerberos.service.name", Str, None, PerBroker),
    key(
        "sasl.kerberos.ticket.renew.jitter",
        ANY_DOUBLE,
        Some("0.05"),
        PerBroker,
    ),
    key(
        "sasl.kerberos.ticket.renew.window.factor",
        ANY_DOUBLE,
        Some("0.8"),
        PerBroker,
    ),
    key(
        "sasl.login.refresh.buffer.seconds",
        Short { min: 0, max: 3600 },
        Some("300"),
        PerBroker,
    ),
    key(
        "sasl.login.refresh.min.period.seconds",
        Short { min: 0, max: 900 },
        Some("60"),
        PerBroker,
    ),
    key(
        "sasl.login.refresh.window.factor",
        ValueType::Double { min: 0.5, max: 1.0 },
        Some("0.8"),
        PerBroker,
    ),
    key(
        "sasl.login.refresh.window.jitter",
        ValueType::Double {
            min: 0.0,
            max: 0.25,
        },
        Some("0.05"),
        PerBroker,
    ),
    key(
        "sasl.mechanism.inter.broker.protocol",
        Str,
        Some("GSSAPI"),
        PerBroker,
    ),
    // DynamicListenerConfig: connection limits and network threads (cluster-level,
    // Kafka's `ClusterLevelListenerConfigs`), and SocketServer's own.
    key(
        "max.connection.creation.rate",
        AT_LEAST_0,
        Some("2147483647"),
        ClusterWide,
    ),
    key(
        "max.connections",
        AT_LEAST_0,
        Some("2147483647"),
        ClusterWide,
    ),
    key(
        "max.connections.per.ip",
        AT_LEAST_0,
        Some("2147483647"),
        ClusterWide,
    ),
    key(
        "max.connections.per.ip.overrides",
        Str,
        Some(""),
        ClusterWide,
    ),
    key("num.network.threads", AT_LEAST_1, Some("3"), ClusterWide),
    // DynamicProducerStateManagerConfig.
    key(
        "producer.id.expiration.ms",
        AT_LEAST_1,
        Some("86400000"),
        ClusterWide,
    ),
    key(
        "transaction.partition.verification.enable",
        Boolean,
        Some("true"),
        ClusterWide,
    ),
    // DynamicRemoteLogConfig and DynamicReplicationConfig (tiered storage).
    key(
        "remote.fetch.max.wait.ms",
        AT_LEAST_1,
        Some("500"),
        ClusterWide,
    ),
    key(
        "remote.list.offsets.request.timeout.ms",
        Long { min: 1 },
        Some("30000"),
        ClusterWide,
    ),
    key(
        "remote.log.index.file.cache.total.size.bytes",
        Long { min: 1 },
        Some("1073741824"),
        ClusterWide,
    ),
    key(
        "remote.log.manager.copier.thread.pool.size",
        AT_LEAST_1,
        Some("10"),
        ClusterWide,
    ),
    key(
        "remote.log.manager.copy.max.bytes.per.second",
        Long { min: 1 },
        Some("9223372036854775807"),
        ClusterWide,
    ),
    key(
        "remote.log.manager.expiration.thread.pool.size",
        AT_LEAST_1,
        Some("10"),
        ClusterWide,
    ),
    key(
        "remote.log.manager.fetch.max.bytes.per.second",
        Long { min: 1 },
        Some("9223372036854775807"),
        ClusterWide,
    ),
    key(
        "remote.log.manager.follower.thread.pool.size",
        AT_LEAST_1,
        Some("2"),
        ClusterWide,
    ),
    key(
        "remote.log.reader.threads",
        AT_LEAST_1,
        Some("10"),
        ClusterWide,
    ),
    key(
        "follower.fetch.last.tiered.offset.enable",
        Boolean,
        Some("false"),
        ClusterWide,
    ),
];

/// The catalogue entry of a dynamic broker key that is not a log default.
#[must_use]
pub fn find(name: &str) -> Option<&'static DynamicKey> {
    DYNAMIC_BROKER_KEYS.iter().find(|k| k.name == name)
}

/// Kafka's listener-prefixed form, `listener.name.<listener>.<key>`: the key it sets, for
/// a key that may be set per listener (a security config, or a cluster-level listener
/// config). The SASL mechanism configs take a mechanism too
/// (`listener.name.sasl_ssl.plain.sasl.jaas.config`, Kafka's `ListenerMechanismConfigs`).
#[must_use]
pub fn listener_base(name: &str) -> Option<&'static DynamicKey> {
    let rest = name.strip_prefix("listener.name.")?;
    let (_, base) = rest.split_once('.')?;
    let found = find(base).or_else(|| {
        // `<mechanism>.<key>`: the key is what follows the mechanism's name.
        base.split_once('.').and_then(|(_, k)| find(k))
    })?;
    let per_listener = matches!(found.scope, ListenerOnly | PerBroker)
        || matches!(
            found.name,
            "max.connections" | "max.connection.creation.rate"
        );
    per_listener.then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_check_values_as_kafka_does() {
        let long = find("sasl.kerberos.min.time.before.relogin").unwrap();
        assert!(long.value_type.check("58000").is_ok());
        assert!(long.value_type.check("soon").is_err());
        let window = find("sasl.login.refresh.window.factor").unwrap();
        assert!(window.value_type.check("0.9").is_ok());
        assert!(window.value_type.check("0.2").is_err());
        let auth = find("ssl.client.auth").unwrap();
        assert!(auth.value_type.check("required").is_ok());
        assert!(auth.value_type.check("always").is_err());
        assert!(
            find("background.threads")
                .unwrap()
                .value_type
                .check("0")
                .is_err()
        );
        assert!(Boolean.check("TRUE").is_ok());
        assert!(Boolean.check("yes").is_err());
        assert!(Class.check("org.example.Builder$Inner").is_ok());
        assert!(Class.check("not a class").is_err());
    }

    #[test]
    fn listener_prefixed_keys_resolve_to_their_base() {
        assert_eq!(
            listener_base("listener.name.external.ssl.keystore.location").map(|k| k.name),
            Some("ssl.keystore.location")
        );
        assert_eq!(
            listener_base("listener.name.sasl_ssl.plain.sasl.jaas.config").map(|k| k.name),
            Some("sasl.jaas.config")
        );
        assert_eq!(
            listener_base("listener.name.internal.max.connections").map(|k| k.name),
            Some("max.connections")
        );
        assert!(listener_base("listener.name.internal.background.threads").is_none());
        assert!(listener_base("ssl.keystore.location").is_none());
    }

    #[test]
    fn the_catalogue_says_what_the_tables_said() {
        use strata_kraft::config_catalogue::{self as cat, Scope as S};
        let samples = [
            "",
            " ",
            "0",
            "-1",
            "1",
            "2",
            "3",
            "58000",
            "soon",
            "0.2",
            "0.5",
            "0.9",
            "1.5",
            "-0.1",
            "NaN",
            "1e309",
            "300",
            "3600",
            "3601",
            "900",
            "901",
            "2147483647",
            "2147483648",
            "-2147483649",
            "32767",
            "32768",
            "9223372036854775807",
            "9223372036854775808",
            "true",
            "TRUE",
            "yes",
            "required",
            " none",
            "always",
            "org.example.Builder$Inner",
            "not a class",
            "a,b",
        ];
        for k in DYNAMIC_BROKER_KEYS {
            let c = cat::broker_key(k.name).unwrap_or_else(|| panic!("{}", k.name));
            let scope = match k.scope {
                ClusterWide => S::ClusterWide,
                PerBroker => S::PerBroker,
                ListenerOnly => S::ListenerOnly,
            };
            assert_eq!(c.scope, scope, "{}", k.name);
            if !c.strata_reads {
                assert_eq!(c.default, k.default, "{}", k.name);
            }
            assert_eq!(c.config_type(), k.value_type.config_type(), "{}", k.name);
            assert_eq!(c.is_sensitive(), k.value_type == Password, "{}", k.name);
            assert!(cat::topic_of_synonym(k.name).is_none());
            for v in samples {
                assert_eq!(check(c, v), k.value_type.check(v), "{}={v:?}", k.name);
            }
            assert_eq!(
                c.thread_pool,
                THREAD_POOL_CONFIGS.contains(&k.name),
                "{}",
                k.name
            );
        }
        let dynamic_others = cat::broker_keys()
            .filter(|k| k.is_dynamic() && cat::topic_of_synonym(k.name).is_none())
            .count();
        assert_eq!(dynamic_others, DYNAMIC_BROKER_KEYS.len());
        let mut log: Vec<(&str, &str)> = cat::topic_keys()
            .filter_map(|t| t.synonym.map(|b| (b, t.name)))
            .collect();
        log.sort_unstable();
        let mut old = super::super::dynamic::DYNAMIC_LOG_CONFIGS.to_vec();
        old.sort_unstable();
        assert_eq!(log, old);
        let read: Vec<&str> = cat::broker_keys()
            .filter(|k| k.strata_reads)
            .map(|k| k.name)
            .collect();
        assert_eq!(read.len(), crate::config::BROKER_DEFAULTS.len());
        for (name, default) in crate::config::BROKER_DEFAULTS {
            let c = cat::broker_key(name).unwrap_or_else(|| panic!("{name}"));
            assert!(c.strata_reads, "{name}");
            assert_eq!(c.default.unwrap_or(""), *default, "{name}");
            assert_eq!(c.default.is_none(), default.is_empty(), "{name}");
        }
    }

    #[test]
    fn every_key_is_named_once_and_its_default_is_valid() {
        for (i, k) in DYNAMIC_BROKER_KEYS.iter().enumerate() {
            assert!(
                DYNAMIC_BROKER_KEYS[..i].iter().all(|o| o.name != k.name),
                "{} twice",
                k.name
            );
            if let Some(d) = k.default
                && !matches!(k.value_type, Class | List | Str)
                && !(matches!(k.value_type, ValueType::Double { .. }) && d.contains('E'))
            {
                assert!(k.value_type.check(d).is_ok(), "{}={d}", k.name);
            }
        }
    }
}
