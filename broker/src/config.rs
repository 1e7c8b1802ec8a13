//! Broker configuration, read the way Kafka reads it.
//!
//! Sources, later ones winning: built-in defaults (Kafka's), a `server.properties` file,
//! `KAFKA_*` / `STRATA_*` environment variables (underscores become dots, as in the Apache
//! Kafka container image), and `--override key=value` arguments. Unknown keys are logged and
//! ignored; a value that does not parse stops the broker with an error naming the key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use thiserror::Error;

/// A configuration problem that stops the broker at startup.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: expected key=value")]
    Syntax { path: PathBuf, line: usize },
    #[error("invalid value {value:?} for {key}: {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: &'static str,
    },
    #[error("--override needs key=value, got {arg:?}")]
    BadOverride { arg: String },
    #[error(
        "unknown argument {arg:?} (usage: strata [server.properties] [--override key=value]...)"
    )]
    BadArgument { arg: String },
}

/// The keys Strata reads, with Kafka's defaults. A key listed here is "known"; DescribeConfigs
/// for the broker reports every one of them.
pub const BROKER_DEFAULTS: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("process.roles", "broker,controller"),
    ("listeners", "PLAINTEXT://localhost:9092"),
    ("advertised.listeners", ""),
    ("log.dirs", "./data"),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("auto.create.topics.enable", "true"),
    ("delete.topic.enable", "true"),
    ("message.max.bytes", "1048588"),
    ("socket.request.max.bytes", "104857600"),
    // Strata's default, not Kafka's -1 (unbounded): see `BrokerConfig::queued_max_request_bytes`.
    ("queued.max.request.bytes", "268435456"),
    ("log.segment.bytes", "1073741824"),
    ("log.roll.ms", ""),
    ("log.roll.hours", "168"),
    ("log.index.interval.bytes", "4096"),
    ("log.index.size.max.bytes", "10485760"),
    ("log.retention.ms", ""),
    ("log.retention.minutes", ""),
    ("log.retention.hours", "168"),
    ("log.retention.bytes", "-1"),
    ("log.retention.check.interval.ms", "300000"),
    ("log.flush.interval.messages", "9223372036854775807"),
    ("log.flush.interval.ms", ""),
    ("log.flush.scheduler.interval.ms", "9223372036854775807"),
    ("log.message.timestamp.type", "CreateTime"),
    ("log.cleanup.policy", "delete"),
    ("min.insync.replicas", "1"),
    ("compression.type", "producer"),
    ("group.initial.rebalance.delay.ms", "3000"),
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("group.consumer.heartbeat.interval.ms", "5000"),
    ("group.consumer.session.timeout.ms", "45000"),
    ("group.consumer.assignors", "uniform,range"),
    ("group.consumer.max.size", "2147483647"),
    ("offsets.topic.replication.factor", "1"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.retention.minutes", "10080"),
    ("offsets.retention.check.interval.ms", "600000"),
    ("offset.metadata.max.bytes", "4096"),
    ("controller.quorum.voters", ""),
    ("controller.listener.names", ""),
    ("inter.broker.listener.name", ""),
    ("listener.security.protocol.map", ""),
    ("broker.rack", ""),
];

/// Typed broker configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Every known key's effective value, for DescribeConfigs.
    pub values: BTreeMap<String, String>,
    /// Keys that were set explicitly (file, environment or override), for config sources.
    pub explicit: BTreeMap<String, String>,
    /// `node.id`.
    pub node_id: i32,
    /// Host and port to bind, from `listeners`.
    pub listen_host: String,
    pub listen_port: u16,
    /// Host and port clients are told to use, from `advertised.listeners` (else `listeners`).
    pub advertised_host: String,
    pub advertised_port: u16,
    /// The first entry of `log.dirs`.
    pub log_dir: PathBuf,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics: bool,
    pub message_max_bytes: i32,
    pub socket_request_max_bytes: usize,
    /// `queued.max.request.bytes` (KIP-72): the broker-wide budget for request bytes read
    /// from sockets and not yet handled; `None` (any value <= 0, Kafka's -1) is unbounded.
    /// Kafka's default is unbounded; Strata's is 256 MiB, so that connections x
    /// `socket.request.max.bytes` (100 MiB each) cannot exhaust the host while a producer
    /// outruns the disk. 256 MiB holds two maximal frames at once (Kafka itself requires a
    /// bounded value to be at least `socket.request.max.bytes`) and is far more than a disk
    /// needs queued to stay busy, so the limit only bites once the broker is already behind.
    /// Unlike Kafka, a value below `socket.request.max.bytes` is accepted: a frame larger
    /// than its share of the budget waits until that share is otherwise idle
    /// (`connection::RequestMemory`).
    pub queued_max_request_bytes: Option<u64>,
    pub log_segment_bytes: i64,
    pub log_roll_ms: i64,
    pub log_index_interval_bytes: i32,
    pub log_index_size_max_bytes: i32,
    pub log_retention_ms: i64,
    pub log_retention_bytes: i64,
    pub log_retention_check_interval_ms: u64,
    pub log_flush_interval_messages: i64,
    /// `None`: no time-based flush beyond fsync on roll and on shutdown (Kafka's default).
    pub log_flush_interval_ms: Option<i64>,
    /// true for LogAppendTime.
    pub log_append_time: bool,
    pub log_cleanup_policy: String,
    pub min_insync_replicas: i32,
    pub rack: Option<String>,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members to join.
    pub group_initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms` / `group.max.session.timeout.ms`: the session timeouts a
    /// JoinGroup may ask for (else INVALID_SESSION_TIMEOUT).
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: the interval KIP-848 members are told to use.
    pub group_consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`: a silent KIP-848 member is removed after this.
    pub group_consumer_session_timeout_ms: i32,
    /// `group.consumer.assignors`: the server-side assignors; the first is the default.
    pub group_consumer_assignors: Vec<crate::consumer_group::Assignor>,
    /// `group.consumer.max.size`: members per consumer group (GROUP_MAX_SIZE_REACHED beyond).
    pub group_consumer_max_size: usize,
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets` that groups hash to.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.retention.minutes`, in milliseconds: how long an unneeded offset is kept.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets are looked for.
    pub offsets_retention_check_interval_ms: u64,
    /// `offset.metadata.max.bytes`: the longest commit metadata string accepted.
    pub offset_metadata_max_bytes: usize,
}

impl BrokerConfig {
    /// Parses the command line (`strata [file] [--override k=v]...`) and the environment.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the key or argument that is wrong.
    pub fn from_args(args: &[String], env: &[(String, String)]) -> Result<Self, ConfigError> {
        let mut file_pairs: Vec<(String, String)> = Vec::new();
        let mut overrides: Vec<(String, String)> = Vec::new();
        let mut file_seen = false;
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            let kv = if arg == "--override" {
                Some(
                    iter.next()
                        .ok_or_else(|| ConfigError::BadOverride { arg: String::new() })?
                        .as_str(),
                )
            } else {
                arg.strip_prefix("--override=")
            };
            if let Some(kv) = kv {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| ConfigError::BadOverride { arg: kv.to_owned() })?;
                overrides.push((k.trim().to_owned(), v.trim().to_owned()));
            } else if !arg.starts_with('-') && !file_seen {
                file_seen = true;
                let path = PathBuf::from(arg);
                let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                file_pairs = parse_properties(&text, &path)?;
            } else {
                return Err(ConfigError::BadArgument { arg: arg.clone() });
            }
        }
        // Environment sits between the file and the overrides. Unrelated variables share the
        // prefixes (KAFKA_HOME, KAFKA_OPTS, STRATA_BIN in the tests), so the environment only
        // supplies keys Strata knows, without warnings.
        let env_pairs = env
            .iter()
            .filter_map(|(k, v)| env_key(k).map(|key| (key, v.clone())))
            .filter(|(key, _)| BROKER_DEFAULTS.iter().any(|(known, _)| known == key));
        let raw: Vec<(String, String)> = file_pairs
            .into_iter()
            .chain(env_pairs)
            .chain(overrides)
            .collect();
        Self::from_pairs(raw)
    }

    /// Builds the configuration from explicit key/value pairs (later pairs win).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the first key whose value does not parse.
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Result<Self, ConfigError> {
        let mut values: BTreeMap<String, String> = BROKER_DEFAULTS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut explicit = BTreeMap::new();
        for (k, v) in pairs {
            if !values.contains_key(&k) {
                tracing::warn!(key = %k, "unknown config key ignored");
                continue;
            }
            values.insert(k.clone(), v.clone());
            explicit.insert(k, v);
        }
        let get = |k: &str| values.get(k).map(String::as_str).unwrap_or("");
        let (listen_host, listen_port) = parse_listener("listeners", get("listeners"))?;
        let (advertised_host, advertised_port) = if get("advertised.listeners").is_empty() {
            let host = if listen_host.is_empty() || listen_host == "0.0.0.0" {
                "localhost".to_owned()
            } else {
                listen_host.clone()
            };
            (host, listen_port)
        } else {
            parse_listener("advertised.listeners", get("advertised.listeners"))?
        };
        let log_dir = get("log.dirs")
            .split(',')
            .next()
            .unwrap_or("./data")
            .trim()
            .to_owned();
        if log_dir.is_empty() {
            return Err(invalid("log.dirs", "", "must name a directory"));
        }
        let log_roll_ms = match get("log.roll.ms") {
            "" => num::<i64>("log.roll.hours", get("log.roll.hours"))?.saturating_mul(3_600_000),
            v => num("log.roll.ms", v)?,
        };
        let log_retention_ms = match (get("log.retention.ms"), get("log.retention.minutes")) {
            ("", "") => num::<i64>("log.retention.hours", get("log.retention.hours"))?
                .saturating_mul(3_600_000),
            ("", m) => num::<i64>("log.retention.minutes", m)?.saturating_mul(60_000),
            (ms, _) => num("log.retention.ms", ms)?,
        };
        let log_append_time = match get("log.message.timestamp.type") {
            "CreateTime" => false,
            "LogAppendTime" => true,
            v => {
                return Err(invalid(
                    "log.message.timestamp.type",
                    v,
                    "must be CreateTime or LogAppendTime",
                ));
            }
        };
        let cfg = BrokerConfig {
            node_id: num("node.id", get("node.id"))?,
            listen_host,
            listen_port,
            advertised_host,
            advertised_port,
            log_dir: PathBuf::from(log_dir),
            num_partitions: positive("num.partitions", get("num.partitions"))?,
            default_replication_factor: positive::<i16>(
                "default.replication.factor",
                get("default.replication.factor"),
            )?,
            auto_create_topics: boolean(
                "auto.create.topics.enable",
                get("auto.create.topics.enable"),
            )?,
            message_max_bytes: positive("message.max.bytes", get("message.max.bytes"))?,
            socket_request_max_bytes: positive::<i32>(
                "socket.request.max.bytes",
                get("socket.request.max.bytes"),
            )? as usize,
            queued_max_request_bytes: u64::try_from(num::<i64>(
                "queued.max.request.bytes",
                get("queued.max.request.bytes"),
            )?)
            .ok()
            .filter(|&n| n > 0),
            log_segment_bytes: at_least("log.segment.bytes", get("log.segment.bytes"), 14)?,
            log_roll_ms: at_least("log.roll.ms", &log_roll_ms.to_string(), 1)?,
            log_index_interval_bytes: at_least(
                "log.index.interval.bytes",
                get("log.index.interval.bytes"),
                0,
            )?,
            log_index_size_max_bytes: at_least(
                "log.index.size.max.bytes",
                get("log.index.size.max.bytes"),
                4,
            )?,
            log_retention_ms,
            log_retention_bytes: num("log.retention.bytes", get("log.retention.bytes"))?,
            log_retention_check_interval_ms: at_least::<i64>(
                "log.retention.check.interval.ms",
                get("log.retention.check.interval.ms"),
                1,
            )? as u64,
            log_flush_interval_messages: at_least(
                "log.flush.interval.messages",
                get("log.flush.interval.messages"),
                1,
            )?,
            log_flush_interval_ms: match get("log.flush.interval.ms") {
                "" => None,
                v => Some(at_least("log.flush.interval.ms", v, 0)?),
            },
            log_append_time,
            log_cleanup_policy: get("log.cleanup.policy").to_owned(),
            min_insync_replicas: positive("min.insync.replicas", get("min.insync.replicas"))?,
            rack: Some(get("broker.rack").to_owned()).filter(|r| !r.is_empty()),
            group_initial_rebalance_delay_ms: at_least(
                "group.initial.rebalance.delay.ms",
                get("group.initial.rebalance.delay.ms"),
                0,
            )?,
            group_min_session_timeout_ms: at_least(
                "group.min.session.timeout.ms",
                get("group.min.session.timeout.ms"),
                0,
            )?,
            group_max_session_timeout_ms: at_least(
                "group.max.session.timeout.ms",
                get("group.max.session.timeout.ms"),
                0,
            )?,
            group_consumer_heartbeat_interval_ms: positive(
                "group.consumer.heartbeat.interval.ms",
                get("group.consumer.heartbeat.interval.ms"),
            )?,
            group_consumer_session_timeout_ms: positive(
                "group.consumer.session.timeout.ms",
                get("group.consumer.session.timeout.ms"),
            )?,
            group_consumer_assignors: get("group.consumer.assignors")
                .split(',')
                .map(|a| {
                    crate::consumer_group::Assignor::parse(a).ok_or_else(|| {
                        invalid("group.consumer.assignors", a, "not uniform or range")
                    })
                })
                .collect::<Result<_, _>>()?,
            group_consumer_max_size: positive::<i32>(
                "group.consumer.max.size",
                get("group.consumer.max.size"),
            )? as usize,
            offsets_topic_num_partitions: positive(
                "offsets.topic.num.partitions",
                get("offsets.topic.num.partitions"),
            )?,
            offsets_retention_ms: positive::<i64>(
                "offsets.retention.minutes",
                get("offsets.retention.minutes"),
            )?
            .saturating_mul(60_000),
            offsets_retention_check_interval_ms: positive::<i64>(
                "offsets.retention.check.interval.ms",
                get("offsets.retention.check.interval.ms"),
            )? as u64,
            offset_metadata_max_bytes: at_least::<i64>(
                "offset.metadata.max.bytes",
                get("offset.metadata.max.bytes"),
                0,
            )?
            .min(i64::from(i16::MAX)) as usize,
            values,
            explicit,
        };
        Ok(cfg)
    }
}

/// `KAFKA_LOG_RETENTION_MS` → `log.retention.ms`; `STRATA_` works the same way. Kafka's image
/// spells a literal underscore as `__` (a double underscore), e.g. `KAFKA_LISTENER_SECURITY__...`.
fn env_key(name: &str) -> Option<String> {
    let rest = name
        .strip_prefix("KAFKA_")
        .or_else(|| name.strip_prefix("STRATA_"))?;
    if rest.is_empty() {
        return None;
    }
    Some(
        rest.to_ascii_lowercase()
            .replace("__", "\u{0}")
            .replace('_', ".")
            .replace('\u{0}', "_"),
    )
}

/// Parses Java-properties text: `key=value` or `key: value`, `#`/`!` comments, blank lines.
fn parse_properties(
    text: &str,
    path: &std::path::Path,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .or_else(|| line.split_once(':'))
            .ok_or(ConfigError::Syntax {
                path: path.to_owned(),
                line: i + 1,
            })?;
        out.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Ok(out)
}

/// `PLAINTEXT://host:port` (first listener only; one listener per node for now).
fn parse_listener(key: &str, value: &str) -> Result<(String, u16), ConfigError> {
    let first = value.split(',').next().unwrap_or("").trim();
    let addr = first.split_once("://").map_or(first, |(_, a)| a);
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| invalid(key, value, "expected NAME://host:port"))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| invalid(key, value, "port must be 0-65535"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    Ok((host, port))
}

fn invalid(key: &str, value: &str, reason: &'static str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_owned(),
        reason,
    }
}

fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError> {
    v.trim()
        .parse()
        .map_err(|_| invalid(key, v, "not a number"))
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(
    key: &str,
    v: &str,
) -> Result<T, ConfigError> {
    let n: T = num(key, v)?;
    if n <= T::default() {
        return Err(invalid(key, v, "must be positive"));
    }
    Ok(n)
}

fn at_least<T: std::str::FromStr + PartialOrd>(
    key: &str,
    v: &str,
    min: T,
) -> Result<T, ConfigError> {
    let n: T = num(key, v)?;
    if n < min {
        return Err(invalid(key, v, "below the minimum"));
    }
    Ok(n)
}

fn boolean(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, v, "must be true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn defaults_start_a_local_node() {
        let c = BrokerConfig::from_args(&[], &[]).unwrap();
        assert_eq!((c.listen_host.as_str(), c.listen_port), ("localhost", 9092));
        assert_eq!(c.log_dir, PathBuf::from("./data"));
        assert_eq!(c.log_retention_ms, 168 * 3_600_000);
        assert!(c.auto_create_topics);
        assert_eq!(c.queued_max_request_bytes, Some(256 << 20));
    }

    #[test]
    fn queued_max_request_bytes_minus_one_is_unbounded() {
        for v in ["-1", "0"] {
            let c = BrokerConfig::from_args(
                &args(&["--override", &format!("queued.max.request.bytes={v}")]),
                &[],
            )
            .unwrap();
            assert_eq!(c.queued_max_request_bytes, None, "{v}");
        }
        let env = vec![(
            "KAFKA_QUEUED_MAX_REQUEST_BYTES".to_owned(),
            "1048576".to_owned(),
        )];
        let c = BrokerConfig::from_args(&[], &env).unwrap();
        assert_eq!(c.queued_max_request_bytes, Some(1 << 20));
        let err =
            BrokerConfig::from_args(&args(&["--override", "queued.max.request.bytes=x"]), &[])
                .unwrap_err();
        assert!(
            err.to_string().contains("queued.max.request.bytes"),
            "{err}"
        );
    }

    #[test]
    fn file_env_and_overrides_layer_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "# comment\nnum.partitions=3\nlog.retention.minutes=5\nnode.id=4\n",
        )
        .unwrap();
        let env = vec![("KAFKA_NUM_PARTITIONS".to_owned(), "5".to_owned())];
        let c = BrokerConfig::from_args(
            &args(&[path.to_str().unwrap(), "--override", "node.id=7"]),
            &env,
        )
        .unwrap();
        assert_eq!(c.num_partitions, 5);
        assert_eq!(c.node_id, 7);
        assert_eq!(c.log_retention_ms, 300_000);
    }

    #[test]
    fn invalid_values_name_the_key() {
        let err = BrokerConfig::from_args(&args(&["--override", "num.partitions=zero"]), &[])
            .unwrap_err();
        assert!(err.to_string().contains("num.partitions"), "{err}");
        let err =
            BrokerConfig::from_args(&args(&["--override", "listeners=PLAINTEXT://h:99999"]), &[])
                .unwrap_err();
        assert!(err.to_string().contains("listeners"), "{err}");
    }

    #[test]
    fn env_names_map_to_kafka_keys() {
        assert_eq!(
            env_key("KAFKA_LOG_RETENTION_MS").as_deref(),
            Some("log.retention.ms")
        );
        assert_eq!(env_key("STRATA_NODE_ID").as_deref(), Some("node.id"));
        assert_eq!(env_key("HOME"), None);
    }
}
