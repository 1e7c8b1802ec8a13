//! Kafka's dynamic broker configs (`DynamicBrokerConfig.AllDynamicConfigs`) that are not log
//! defaults, as the catalogue ([`strata_kraft::config_catalogue`]) lists them: finding one by
//! name or under a listener prefix, and checking a value with Kafka's wording.
//!
//! Strata accepts and stores every one of these, as Kafka does, even where it has no use for
//! the value yet (no SASL, no TLS, one fixed thread pool, no tiered storage): an operator's
//! `kafka-configs.sh --alter --entity-type brokers` that works against Kafka works here, and
//! the value is described back. The log defaults (`log.retention.ms`, ...) are the other half
//! of Kafka's set: the catalogue's broker synonyms of topic configs, checked by their topic
//! config's rule.

use strata_kraft::config_catalogue::{self, ConfigKey, Scope, Validator};

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

/// The catalogue entry of a dynamic broker key that is not a log default.
#[must_use]
pub fn find(name: &str) -> Option<&'static ConfigKey> {
    config_catalogue::broker_key(name)
        .filter(|k| k.is_dynamic() && config_catalogue::topic_of_synonym(name).is_none())
}

/// Kafka's listener-prefixed form, `listener.name.<listener>.<key>`: the key it sets, for
/// a key that may be set per listener (a security config, or a cluster-level listener
/// config). The SASL mechanism configs take a mechanism too
/// (`listener.name.sasl_ssl.plain.sasl.jaas.config`, Kafka's `ListenerMechanismConfigs`).
#[must_use]
pub fn listener_base(name: &str) -> Option<&'static ConfigKey> {
    let rest = name.strip_prefix("listener.name.")?;
    let (_, base) = rest.split_once('.')?;
    let found = find(base).or_else(|| {
        // `<mechanism>.<key>`: the key is what follows the mechanism's name.
        base.split_once('.').and_then(|(_, k)| find(k))
    })?;
    let per_listener = matches!(found.scope, Scope::ListenerOnly | Scope::PerBroker)
        || matches!(
            found.name,
            "max.connections" | "max.connection.creation.rate"
        );
    per_listener.then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_key(name: &str, value: &str) -> Result<(), String> {
        check(find(name).unwrap(), value)
    }

    #[test]
    fn types_check_values_as_kafka_does() {
        let relogin = "sasl.kerberos.min.time.before.relogin";
        assert!(check_key(relogin, "58000").is_ok());
        assert_eq!(
            check_key(relogin, "soon"),
            Err("Expected value to be a 64-bit integer, but it was a String".to_owned())
        );
        let window = "sasl.login.refresh.window.factor";
        assert!(check_key(window, "0.9").is_ok());
        assert_eq!(
            check_key(window, "0.2"),
            Err("Value must be at least 0.5".to_owned())
        );
        assert!(check_key("ssl.client.auth", "required").is_ok());
        assert_eq!(
            check_key("ssl.client.auth", "always"),
            Err("String must be one of: required, requested, none".to_owned())
        );
        assert_eq!(
            check_key("background.threads", "0"),
            Err("Value must be at least 1".to_owned())
        );
        assert_eq!(
            check_key("max.connections", "2147483648"),
            Err("Value must be no more than 2147483647".to_owned())
        );
        assert_eq!(
            check_key("sasl.login.refresh.buffer.seconds", "3601"),
            Err("Value must be no more than 3600".to_owned())
        );
        let verify = "transaction.partition.verification.enable";
        assert!(check_key(verify, "TRUE").is_ok());
        assert!(check_key(verify, "yes").is_err());
        let builder = "principal.builder.class";
        assert!(check_key(builder, "org.example.Builder$Inner").is_ok());
        assert!(check_key(builder, "not a class").is_err());
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
    fn the_dynamic_keys_are_kafkas_and_their_defaults_are_valid() {
        let keys: Vec<&ConfigKey> = config_catalogue::broker_keys()
            .filter(|k| find(k.name).is_some())
            .collect();
        assert_eq!(keys.len(), 65);
        for k in &keys {
            if let Some(d) = k.default {
                assert!(check(k, d).is_ok(), "{}={d}", k.name);
            }
        }
        // Log defaults and read-only keys are not among them.
        assert!(find("log.retention.ms").is_none());
        assert!(find("compression.type").is_none());
        assert!(find("node.id").is_none());
        assert_eq!(find("listeners").map(|k| k.scope), Some(Scope::PerBroker));
        assert_eq!(
            find("ssl.keystore.location").map(|k| k.scope),
            Some(Scope::ListenerOnly)
        );
        let pools: Vec<&str> = keys
            .iter()
            .filter(|k| k.thread_pool)
            .map(|k| k.name)
            .collect();
        assert_eq!(
            pools,
            [
                "background.threads",
                "num.io.threads",
                "num.recovery.threads.per.data.dir",
                "num.replica.fetchers"
            ]
        );
    }
}
