//! Configuration from environment variables, the way the Apache Kafka container image reads
//! them (`docker/resources/common-scripts` in Kafka's repository), so that a Compose file
//! written for `apache/kafka` configures Strata unchanged.
//!
//! # The rule
//!
//! A variable named `KAFKA_<NAME>` or `STRATA_<NAME>` sets the property spelled by `<NAME>`
//! lower-cased, with each run of underscores read as one character:
//!
//! | in the name | in the property | example |
//! |---|---|---|
//! | `_` | `.` | `KAFKA_LOG_DIRS` → `log.dirs` |
//! | `__` | `_` | `KAFKA_ABC__DEF` → `abc_def` |
//! | `___` | `-` | `KAFKA_ABC___DEF` → `abc-def` |
//!
//! Kafka leaves four or more underscores in a row undefined; such a variable is ignored with
//! a warning. `CLUSTER_ID`, which the Kafka image formats its storage with, sets `cluster.id`
//! unless `KAFKA_CLUSTER_ID` or `STRATA_CLUSTER_ID` does.
//!
//! # Precedence
//!
//! Built-in defaults, then the properties file, then the environment, then `--override`
//! arguments: later sources win. Within the environment, `STRATA_*` wins over `KAFKA_*`, and
//! both over `CLUSTER_ID`. The Kafka image also lets environment variables override its file
//! input.
//!
//! As in the Kafka image, when the environment sets `advertised.listeners` but not
//! `listeners`, and the node is not a dedicated controller, `listeners` is derived from it
//! with every host replaced by `0.0.0.0` (listen on every interface).
//!
//! # What is not a property
//!
//! Variables that share the prefixes but configure something else ([`NOT_PROPERTIES`]: the
//! Kafka scripts' `KAFKA_OPTS`, `KAFKA_HEAP_OPTS`..., Strata's own `STRATA_IO_URING`,
//! `STRATA_ZERO_COPY` and the test harness's `STRATA_BIN`...) are skipped. Any other name
//! that maps to a key Strata does not know is an unknown key, logged and ignored exactly as
//! in a properties file.

/// The two prefixes, in increasing precedence.
const PREFIXES: [&str; 2] = ["KAFKA_", "STRATA_"];

/// The Kafka image's variable for the id its storage is formatted with.
const CLUSTER_ID_VAR: &str = "CLUSTER_ID";

/// Variables with a property prefix that are read for another purpose, never as properties.
pub const NOT_PROPERTIES: &[&str] = &[
    // The Apache Kafka image's exclusions (`kafka-propertiesSpec.json`)...
    "KAFKA_VERSION",
    "KAFKA_HEAP_OPT",
    "KAFKA_LOG4J_OPTS",
    "KAFKA_OPTS",
    "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_GC_LOG_OPTS",
    "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    // ...and what Kafka's own scripts (`kafka-run-class.sh`) read from the environment.
    "KAFKA_HEAP_OPTS",
    "KAFKA_HOME",
    "KAFKA_DEBUG",
    "KAFKA_JMX_PORT",
    "KAFKA_JMX_HOSTNAME",
    // Strata's switches, read where they apply (`storage::io`, `connection`).
    "STRATA_DIRECT_IO",
    "STRATA_IO_URING",
    "STRATA_PREALLOCATE",
    "STRATA_TAIL_CACHE_KB",
    "STRATA_WRITEBACK_KB",
    "STRATA_ZERO_COPY",
    // The test harnesses' variables, which reach the broker through the inherited
    // environment.
    "STRATA_BIN",
    "STRATA_TEST_KEEP",
    "STRATA_SIM_SEED",
    "STRATA_GROUP_PROTOCOLS_CHILD",
];

/// The property a variable sets, or `None` when the variable is not a property: another
/// prefix, a name in [`NOT_PROPERTIES`], an empty name, or four underscores in a row.
#[must_use]
pub fn property_name(var: &str) -> Option<String> {
    if NOT_PROPERTIES.contains(&var) {
        return None;
    }
    let rest = PREFIXES.iter().find_map(|p| var.strip_prefix(p))?;
    if rest.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(rest.len());
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '_' {
            out.push(c.to_ascii_lowercase());
            continue;
        }
        let mut run = 1;
        while chars.next_if_eq(&'_').is_some() {
            run += 1;
        }
        match run {
            1 => out.push('.'),
            2 => out.push('_'),
            3 => out.push('-'),
            _ => {
                tracing::warn!(
                    variable = var,
                    "four or more underscores in a row have no meaning in a configuration \
                     variable; ignored"
                );
                return None;
            }
        }
    }
    Some(out)
}

/// The properties the environment sets, in increasing precedence (a later pair wins, as
/// [`BrokerConfig::from_pairs`](super::BrokerConfig::from_pairs) applies them). The names,
/// never the values, are logged: a value may one day be a password.
#[must_use]
pub fn properties(env: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = env
        .iter()
        .filter(|(var, _)| var == CLUSTER_ID_VAR)
        .map(|(_, v)| ("cluster.id".to_owned(), v.clone()))
        .collect();
    for prefix in PREFIXES {
        // Sorted, so that two spellings of one key (`KAFKA_NODE_ID`, `KAFKA_node_id`)
        // resolve the same way on every start.
        let mut vars: Vec<&(String, String)> = env
            .iter()
            .filter(|(var, _)| var.starts_with(prefix))
            .collect();
        vars.sort();
        for (var, value) in vars {
            if let Some(key) = property_name(var) {
                tracing::info!(variable = %var, key = %key, "configuration from the environment");
                out.push((key, value.clone()));
            }
        }
    }
    if let Some(listeners) = derived_listeners(&out) {
        tracing::info!(
            listeners = %listeners,
            "listeners derived from advertised.listeners (every host replaced by 0.0.0.0)"
        );
        out.push(("listeners".to_owned(), listeners));
    }
    out
}

/// The Kafka image's default for `listeners`: `advertised.listeners` with each host replaced
/// by `0.0.0.0`, when the environment sets the latter only and the node is not a dedicated
/// controller (which advertises nothing).
fn derived_listeners(props: &[(String, String)]) -> Option<String> {
    let last = |key: &str| {
        props
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if last("listeners").is_some()
        || last("process.roles").is_some_and(|r| r.trim() == "controller")
    {
        return None;
    }
    let advertised = last("advertised.listeners")?;
    let entries: Vec<String> = advertised
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|entry| match entry.split_once("://") {
            Some((name, addr)) => match addr.rsplit_once(':') {
                Some((_, port)) => format!("{name}://0.0.0.0:{port}"),
                // Not an endpoint: left as it is, for the listener parser to refuse.
                None => entry.to_owned(),
            },
            None => entry.to_owned(),
        })
        .collect();
    Some(entries.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        vars.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn underscores_map_as_in_the_kafka_image() {
        let cases = [
            ("KAFKA_LOG_RETENTION_MS", "log.retention.ms"),
            ("KAFKA_NODE_ID", "node.id"),
            ("STRATA_NODE_ID", "node.id"),
            ("KAFKA_ABC_DEF", "abc.def"),
            ("KAFKA_ABC__DEF", "abc_def"),
            ("KAFKA_ABC___DEF", "abc-def"),
            ("KAFKA_A_B_C", "a.b.c"),
            (
                "KAFKA_LISTENER_NAME_INTERNAL_SASL__ENABLED___MECHANISMS",
                "listener.name.internal.sasl_enabled-mechanisms",
            ),
            ("KAFKA_CONTROLLER_QUORUM_VOTERS", "controller.quorum.voters"),
            ("KAFKA_node_id", "node.id"),
        ];
        for (var, key) in cases {
            assert_eq!(property_name(var).as_deref(), Some(key), "{var}");
        }
    }

    #[test]
    fn other_variables_are_not_properties() {
        for var in [
            "HOME",
            "PATH",
            "KAFKA_",
            "STRATA_",
            "KAFKA",
            "XKAFKA_NODE_ID",
            "KAFKA_A____B",
            "KAFKA_OPTS",
            "KAFKA_HEAP_OPTS",
            "KAFKA_LOG4J_OPTS",
            "KAFKA_HOME",
            "STRATA_DIRECT_IO",
            "STRATA_IO_URING",
            "STRATA_ZERO_COPY",
            "STRATA_BIN",
            "CLUSTER_ID",
        ] {
            assert_eq!(property_name(var), None, "{var}");
        }
    }

    #[test]
    fn strata_wins_over_kafka_and_both_over_cluster_id() {
        let props = properties(&env(&[
            ("STRATA_NUM_PARTITIONS", "7"),
            ("KAFKA_NUM_PARTITIONS", "3"),
            ("CLUSTER_ID", "from-the-image-variable"),
            ("KAFKA_CLUSTER_ID", "from-kafka"),
            ("KAFKA_OPTS", "-Xmx1g"),
            ("STRATA_IO_URING", "off"),
            ("HOME", "/root"),
        ]));
        assert_eq!(
            props,
            env(&[
                ("cluster.id", "from-the-image-variable"),
                ("cluster.id", "from-kafka"),
                ("num.partitions", "3"),
                ("num.partitions", "7"),
            ])
        );
    }

    #[test]
    fn unknown_names_pass_through_to_be_refused_like_a_file_key() {
        let props = properties(&env(&[("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "2")]));
        assert_eq!(props, env(&[("transaction.state.log.min.isr", "2")]));
    }

    #[test]
    fn listeners_are_derived_from_advertised_listeners_when_unset() {
        let props = properties(&env(&[(
            "KAFKA_ADVERTISED_LISTENERS",
            "PLAINTEXT://broker-1:9092, EXTERNAL://[::1]:19092",
        )]));
        assert_eq!(
            props.last(),
            Some(&(
                "listeners".to_owned(),
                "PLAINTEXT://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092".to_owned()
            ))
        );
        // Set explicitly: kept.
        let props = properties(&env(&[
            ("KAFKA_ADVERTISED_LISTENERS", "PLAINTEXT://broker-1:9092"),
            ("KAFKA_LISTENERS", "PLAINTEXT://127.0.0.1:9092"),
        ]));
        assert_eq!(props.iter().filter(|(k, _)| k == "listeners").count(), 1);
        // A dedicated controller advertises nothing: nothing derived.
        let props = properties(&env(&[
            ("KAFKA_ADVERTISED_LISTENERS", "PLAINTEXT://broker-1:9092"),
            ("KAFKA_PROCESS_ROLES", "controller"),
        ]));
        assert!(props.iter().all(|(k, _)| k != "listeners"), "{props:?}");
    }
}
