//! Broker configuration, read the way Kafka reads it.
//!
//! Sources, later ones winning: built-in defaults (Kafka's), a `server.properties` file,
//! `KAFKA_*` / `STRATA_*` environment variables (the Apache Kafka container image's rule, see
//! [`env`]), and `--override key=value` arguments. Unknown keys are logged and
//! ignored; a value that does not parse stops the broker with an error naming the key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use strata_kraft::config_catalogue;
use thiserror::Error;

mod choices;
pub mod cluster;
pub mod dynamic;
pub mod dynamic_keys;
pub mod env;
mod metrics_listener;

pub use choices::{Assignor, ReplicaSelector};
pub use cluster::{Endpoint, ProcessRoles, QuorumVoter, SecurityProtocol};
pub use metrics_listener::MetricsListener;

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
    /// A value that breaks one of Kafka's rules (a cross-check of several keys, or a list
    /// entry that does not parse), in Kafka's words.
    #[error("invalid {key}: {message}")]
    Rejected { key: &'static str, message: String },
    #[error("--override needs key=value, got {arg:?}")]
    BadOverride { arg: String },
    #[error(
        "unknown argument {arg:?} (usage: strata [server.properties] [--override key=value]...)"
    )]
    BadArgument { arg: String },
}

/// Typed broker configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Every known key's effective value, for DescribeConfigs.
    pub values: BTreeMap<String, String>,
    /// Keys that were set explicitly (file, environment or override), for config sources.
    pub explicit: BTreeMap<String, String>,
    /// `node.id`.
    pub node_id: i32,
    /// The first client listener's host and port (for a controller-only node, the first
    /// controller listener's). Every listener is in [`BrokerConfig::listeners`].
    pub listen_host: String,
    pub listen_port: u16,
    /// Host and port clients are told to use: the first of `advertised.listeners` (else
    /// `listeners`) that is not a controller listener.
    pub advertised_host: String,
    pub advertised_port: u16,
    /// Every advertised client listener as `(name, host, port)`, the first being the one
    /// above: what the broker registers with the controller, so that other brokers reach it
    /// on `inter.broker.listener.name`.
    pub advertised_endpoints: Vec<(String, String, u16)>,
    /// `process.roles`.
    pub process_roles: ProcessRoles,
    /// `listeners`: every listener to bind, client and controller alike.
    pub listeners: Vec<Endpoint>,
    /// `controller.listener.names`: connections on these listeners are served the
    /// controller's APIs only.
    pub controller_listener_names: Vec<String>,
    /// `inter.broker.listener.name` (PLAINTEXT unless set).
    pub inter_broker_listener_name: String,
    /// The effective `listener.security.protocol.map` (see `cluster::ClusterKeys`).
    pub listener_protocols: Vec<(String, SecurityProtocol)>,
    /// `controller.quorum.voters`: the static quorum (empty for a standalone node).
    pub quorum_voters: Vec<QuorumVoter>,
    /// `controller.quorum.bootstrap.servers`: a dynamic quorum's contact points (KIP-853).
    pub quorum_bootstrap_servers: Vec<(String, u16)>,
    /// `controller.quorum.auto.join.enable` (KIP-853): a controller that is not a voter of
    /// a dynamic quorum asks the leader to add it (AddRaftVoter) once it has caught up.
    pub quorum_auto_join: bool,
    /// A node with the controller role and no quorum configured at all: the single voter of
    /// its own quorum, without a controller listener (the zero-configuration node).
    pub standalone_quorum: bool,
    /// `cluster.id`: the cluster id an empty data directory is formatted with (Kafka's
    /// 22-character base64 UUID). `None`: the only voter of a quorum of its own generates
    /// one, several voters derive one from `controller.quorum.voters`, and `server::start`
    /// puts the id in use here before the node opens.
    pub cluster_id: Option<String>,
    /// The Raft timers (Kafka's `QuorumConfig`).
    pub quorum: QuorumTimeouts,
    /// `broker.session.timeout.ms`: a broker not heard from for this long is fenced.
    pub broker_session_timeout_ms: i64,
    /// `broker.heartbeat.interval.ms`: how often a broker heartbeats to the controller.
    pub broker_heartbeat_interval_ms: i64,
    /// `replica.lag.time.max.ms`: a follower that has not caught up with its leader for
    /// this long leaves the ISR.
    pub replica_lag_time_max_ms: i64,
    /// `metadata.log.max.snapshot.interval.ms`: the longest time between metadata snapshots
    /// while records arrive (0 disables the time trigger).
    pub metadata_log_max_snapshot_interval_ms: i64,
    /// `metadata.log.max.record.bytes.between.snapshots`: snapshot after this many bytes of
    /// metadata records.
    pub metadata_log_max_record_bytes_between_snapshots: i64,
    /// `metadata.log.segment.bytes`: the segment size of `__cluster_metadata-0`. A snapshot
    /// lets the log drop only whole segments below it, so this bounds what stays behind.
    pub metadata_log_segment_bytes: i64,
    /// `unclean.leader.election.enable`: the controller's default for topics without it.
    pub unclean_leader_election_enable: bool,
    /// `auto.leader.rebalance.enable`: move leadership back to preferred replicas.
    pub auto_leader_rebalance_enable: bool,
    /// `controlled.shutdown.enable`: on SIGTERM, hand leaderships away before exiting.
    pub controlled_shutdown_enable: bool,
    /// `leader.imbalance.check.interval.seconds`: how often that rebalancing pass runs.
    pub leader_imbalance_check_interval_seconds: i64,
    /// The first entry of `log.dirs`.
    pub log_dir: PathBuf,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics: bool,
    pub message_max_bytes: i32,
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms`: a connection that sends nothing for this long is closed.
    pub connections_max_idle_ms: u64,
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
    /// `log.initial.task.delay.ms`: how long after start the first housekeeping pass waits
    /// (Kafka's LogManager delay, 30 s by default), at most one housekeeping period.
    pub log_initial_task_delay_ms: u64,
    pub log_flush_interval_messages: i64,
    /// `None`: no time-based flush beyond fsync on roll and on shutdown (Kafka's default).
    pub log_flush_interval_ms: Option<i64>,
    /// true for LogAppendTime.
    pub log_append_time: bool,
    pub log_cleanup_policy: String,
    pub min_insync_replicas: i32,
    /// `broker.rack`: registered with the controller; KIP-392 matches it against a
    /// consumer's `client.rack`.
    pub rack: Option<String>,
    /// `replica.selector.class` (KIP-392): whether a leader sends consumers to a follower
    /// in their rack.
    pub replica_selector: ReplicaSelector,
    /// `max.incremental.fetch.session.cache.slots` (KIP-227): how many fetch sessions the
    /// node keeps; 0 serves every fetch in full.
    pub fetch_session_cache_slots: usize,
    /// `authorizer.class.name` set to Kafka's `StandardAuthorizer` (KIP-801), with its
    /// `super.users` and `allow.everyone.if.no.acl.found`; `None` authorizes everything.
    pub authorizer: Option<strata_kraft::acl::AuthorizerConfig>,
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
    pub group_consumer_assignors: Vec<Assignor>,
    /// `group.consumer.max.size`: members per consumer group (GROUP_MAX_SIZE_REACHED beyond).
    pub group_consumer_max_size: usize,
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets` that groups hash to.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.segment.bytes`: `segment.bytes` of `__consumer_offsets` at its creation.
    pub offsets_topic_segment_bytes: i32,
    /// `offsets.topic.replication.factor` as set; see
    /// [`BrokerConfig::offsets_replication_factor`] for the value used.
    pub offsets_topic_replication_factor: i16,
    /// `offsets.retention.minutes`, in milliseconds: how long an unneeded offset is kept.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets are looked for.
    pub offsets_retention_check_interval_ms: u64,
    /// `offset.metadata.max.bytes`: the longest commit metadata string accepted.
    pub offset_metadata_max_bytes: usize,
    /// `transaction.state.log.num.partitions`: partitions of `__transaction_state` that
    /// transactional ids hash to.
    pub transaction_state_log_num_partitions: i32,
    /// `transaction.state.log.replication.factor` as set; see
    /// [`BrokerConfig::transaction_state_replication_factor`] for the value used.
    pub transaction_state_log_replication_factor: i16,
    /// `transaction.state.log.min.isr` as set; see
    /// [`BrokerConfig::transaction_state_min_isr`] for the value used.
    pub transaction_state_log_min_isr: i32,
    /// `transaction.state.log.segment.bytes`.
    pub transaction_state_log_segment_bytes: i32,
    /// `transaction.max.timeout.ms`: the longest transaction timeout a producer may ask for.
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: how long an idle transactional id is kept.
    pub transactional_id_expiration_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub transaction_abort_timed_out_interval_ms: i32,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub transaction_remove_expired_interval_ms: i32,
    /// `transaction.version` (Strata's own key): the finalized level of Kafka's feature of
    /// that name, which ApiVersions advertises (0 to 2, Kafka 4's default 2). Kafka sets it
    /// with `kafka-storage format --feature` or `kafka-features.sh`; every node of a cluster
    /// should have the same.
    pub transaction_version: i16,
    /// `metrics.listener`: where the Prometheus endpoint listens; `None` (the default)
    /// serves none.
    pub metrics_listener: Option<MetricsListener>,
    /// `console.listener`: where the web console listens (`http://host:port`, served at
    /// `/`); `None` (the default) serves none.
    pub console_listener: Option<MetricsListener>,
    /// `console.read.only`: the console shows the cluster and refuses every action.
    pub console_read_only: bool,
    /// Listener-scoped keys, `listener.name.<listener>.<key>` (Kafka's per-listener
    /// overrides of the `ssl.*` and `sasl.*` keys, and the `<mechanism>.sasl.jaas.config`
    /// of each SASL mechanism), keyed by the full name with the listener name lower-cased.
    /// See [`BrokerConfig::listener_value`].
    pub listener_overrides: BTreeMap<String, String>,
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
        // Environment sits between the file and the overrides, as in the Kafka image.
        let env_pairs = env::properties(env);
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
        // The keys Strata reads (a key in the catalogue marked so is "known"), starting
        // from their defaults; one without a default starts empty.
        let mut values: BTreeMap<String, String> = config_catalogue::broker_keys()
            .filter(|k| k.strata_reads)
            .map(|k| (k.name.to_owned(), k.default.unwrap_or("").to_owned()))
            .collect();
        let mut explicit = BTreeMap::new();
        let mut listener_overrides = BTreeMap::new();
        for (k, v) in pairs {
            if let Some(rest) = k.strip_prefix("listener.name.") {
                // Kafka lower-cases the listener name in the prefix.
                let key = match rest.split_once('.') {
                    Some((listener, key)) => listener_key(listener, key),
                    None => k.clone(),
                };
                listener_overrides.insert(key, v);
                continue;
            }
            if !values.contains_key(&k) {
                tracing::warn!(key = %k, "unknown config key ignored");
                continue;
            }
            values.insert(k.clone(), v.clone());
            explicit.insert(k, v);
        }
        let get = |k: &str| values.get(k).map(String::as_str).unwrap_or("");
        let node_id: i32 = num("node.id", get("node.id"))?;
        let keys = cluster::resolve(&cluster::RawClusterKeys {
            process_roles: get("process.roles"),
            node_id,
            listeners: get("listeners"),
            advertised_listeners: get("advertised.listeners"),
            controller_listener_names: get("controller.listener.names"),
            security_protocol_map: get("listener.security.protocol.map"),
            security_protocol_map_explicit: explicit.contains_key("listener.security.protocol.map"),
            inter_broker_listener_name: get("inter.broker.listener.name"),
            quorum_voters: get("controller.quorum.voters"),
            quorum_bootstrap_servers: get("controller.quorum.bootstrap.servers"),
        })?;
        let is_controller = |e: &&Endpoint| keys.controller_listener_names.contains(&e.name);
        let bound = keys
            .listeners
            .iter()
            .find(|e| !is_controller(e))
            .or_else(|| keys.listeners.first())
            .ok_or_else(|| invalid("listeners", get("listeners"), "must name a listener"))?;
        let (listen_host, listen_port) = (bound.host.clone(), bound.port);
        let (advertised_host, advertised_port) = match keys.advertised_broker_listeners.first() {
            // Kafka refuses to advertise an unspecified address; a listener bound to every
            // interface is advertised as localhost when `advertised.listeners` is unset.
            Some(a) if a.host.is_empty() || a.host == "0.0.0.0" => ("localhost".to_owned(), a.port),
            Some(a) => (a.host.clone(), a.port),
            None => (listen_host.clone(), listen_port),
        };
        let advertised_endpoints: Vec<(String, String, u16)> =
            if keys.advertised_broker_listeners.is_empty() {
                vec![(
                    keys.inter_broker_listener_name.clone(),
                    advertised_host.clone(),
                    advertised_port,
                )]
            } else {
                keys.advertised_broker_listeners
                    .iter()
                    .map(|a| {
                        let host = if a.host.is_empty() || a.host == "0.0.0.0" {
                            "localhost".to_owned()
                        } else {
                            a.host.clone()
                        };
                        (a.name.clone(), host, a.port)
                    })
                    .collect()
            };
        let cluster_id = match get("cluster.id").trim() {
            "" => None,
            id if is_kafka_uuid(id) => Some(id.to_owned()),
            id => {
                return Err(invalid(
                    "cluster.id",
                    id,
                    "must be a 22-character URL-safe base64 UUID, as kafka-storage random-uuid prints",
                ));
            }
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
        let mut cfg = BrokerConfig {
            node_id,
            listen_host,
            listen_port,
            advertised_host,
            advertised_port,
            advertised_endpoints,
            process_roles: keys.process_roles,
            listeners: keys.listeners,
            controller_listener_names: keys.controller_listener_names,
            inter_broker_listener_name: keys.inter_broker_listener_name,
            listener_protocols: keys.listener_protocols,
            quorum_voters: keys.quorum_voters,
            quorum_bootstrap_servers: keys.quorum_bootstrap_servers,
            standalone_quorum: keys.standalone,
            cluster_id,
            quorum: QuorumTimeouts {
                election_timeout_ms: positive(
                    "controller.quorum.election.timeout.ms",
                    get("controller.quorum.election.timeout.ms"),
                )?,
                fetch_timeout_ms: positive(
                    "controller.quorum.fetch.timeout.ms",
                    get("controller.quorum.fetch.timeout.ms"),
                )?,
                election_backoff_max_ms: positive(
                    "controller.quorum.election.backoff.max.ms",
                    get("controller.quorum.election.backoff.max.ms"),
                )?,
                request_timeout_ms: positive(
                    "controller.quorum.request.timeout.ms",
                    get("controller.quorum.request.timeout.ms"),
                )?,
                retry_backoff_ms: at_least(
                    "controller.quorum.retry.backoff.ms",
                    get("controller.quorum.retry.backoff.ms"),
                    0,
                )?,
                append_linger_ms: at_least(
                    "controller.quorum.append.linger.ms",
                    get("controller.quorum.append.linger.ms"),
                    0,
                )?,
            },
            broker_session_timeout_ms: positive(
                "broker.session.timeout.ms",
                get("broker.session.timeout.ms"),
            )?,
            broker_heartbeat_interval_ms: positive(
                "broker.heartbeat.interval.ms",
                get("broker.heartbeat.interval.ms"),
            )?,
            replica_lag_time_max_ms: positive(
                "replica.lag.time.max.ms",
                get("replica.lag.time.max.ms"),
            )?,
            metadata_log_max_snapshot_interval_ms: at_least(
                "metadata.log.max.snapshot.interval.ms",
                get("metadata.log.max.snapshot.interval.ms"),
                0,
            )?,
            metadata_log_max_record_bytes_between_snapshots: at_least(
                "metadata.log.max.record.bytes.between.snapshots",
                get("metadata.log.max.record.bytes.between.snapshots"),
                1,
            )?,
            metadata_log_segment_bytes: at_least(
                "metadata.log.segment.bytes",
                get("metadata.log.segment.bytes"),
                14,
            )?,
            unclean_leader_election_enable: boolean(
                "unclean.leader.election.enable",
                get("unclean.leader.election.enable"),
            )?,
            quorum_auto_join: boolean(
                "controller.quorum.auto.join.enable",
                get("controller.quorum.auto.join.enable"),
            )?,
            auto_leader_rebalance_enable: boolean(
                "auto.leader.rebalance.enable",
                get("auto.leader.rebalance.enable"),
            )?,
            controlled_shutdown_enable: boolean(
                "controlled.shutdown.enable",
                get("controlled.shutdown.enable"),
            )?,
            leader_imbalance_check_interval_seconds: at_least(
                "leader.imbalance.check.interval.seconds",
                get("leader.imbalance.check.interval.seconds"),
                1,
            )?,
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
            connections_max_idle_ms: positive::<i64>(
                "connections.max.idle.ms",
                get("connections.max.idle.ms"),
            )? as u64,
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
            log_initial_task_delay_ms: at_least::<i64>(
                "log.initial.task.delay.ms",
                get("log.initial.task.delay.ms"),
                0,
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
            authorizer: authorizer(
                get("authorizer.class.name"),
                get("super.users"),
                get("allow.everyone.if.no.acl.found"),
            )?,
            replica_selector: ReplicaSelector::parse(get(
                "replica.selector.class",
            ))
            .ok_or_else(|| {
                invalid(
                    "replica.selector.class",
                    get("replica.selector.class"),
                    "not org.apache.kafka.common.replica.LeaderSelector or RackAwareReplicaSelector",
                )
            })?,
            fetch_session_cache_slots: usize::try_from(at_least(
                "max.incremental.fetch.session.cache.slots",
                get("max.incremental.fetch.session.cache.slots"),
                0,
            )?)
            .unwrap_or(usize::MAX),
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
                    Assignor::parse(a).ok_or_else(|| {
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
            offsets_topic_segment_bytes: positive(
                "offsets.topic.segment.bytes",
                get("offsets.topic.segment.bytes"),
            )?,
            offsets_topic_replication_factor: positive::<i16>(
                "offsets.topic.replication.factor",
                get("offsets.topic.replication.factor"),
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
            transaction_state_log_num_partitions: positive(
                "transaction.state.log.num.partitions",
                get("transaction.state.log.num.partitions"),
            )?,
            transaction_state_log_replication_factor: positive::<i16>(
                "transaction.state.log.replication.factor",
                get("transaction.state.log.replication.factor"),
            )?,
            transaction_state_log_min_isr: positive(
                "transaction.state.log.min.isr",
                get("transaction.state.log.min.isr"),
            )?,
            transaction_state_log_segment_bytes: positive(
                "transaction.state.log.segment.bytes",
                get("transaction.state.log.segment.bytes"),
            )?,
            transaction_max_timeout_ms: positive(
                "transaction.max.timeout.ms",
                get("transaction.max.timeout.ms"),
            )?,
            transactional_id_expiration_ms: positive(
                "transactional.id.expiration.ms",
                get("transactional.id.expiration.ms"),
            )?,
            transaction_abort_timed_out_interval_ms: positive(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            )?,
            transaction_remove_expired_interval_ms: positive(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                get("transaction.remove.expired.transaction.cleanup.interval.ms"),
            )?,
            transaction_version: match get("transaction.version") {
                v @ ("0" | "1" | "2") => v.parse().unwrap_or(2),
                v => return Err(invalid("transaction.version", v, "not 0, 1 or 2")),
            },
            metrics_listener: MetricsListener::parse(get("metrics.listener"))
                .map_err(|reason| invalid("metrics.listener", get("metrics.listener"), reason))?,
            console_listener: MetricsListener::parse_root(get("console.listener"))
                .map_err(|reason| invalid("console.listener", get("console.listener"), reason))?,
            console_read_only: boolean("console.read.only", get("console.read.only"))?,
            listener_overrides,
            values,
            explicit,
        };
        // DescribeConfigs shows the factor this node creates the topic with, which on the
        // only voter of its own quorum is 1 unless set (see `offsets_replication_factor`).
        cfg.values.insert(
            "offsets.topic.replication.factor".to_owned(),
            cfg.offsets_replication_factor().to_string(),
        );
        cfg.values.insert(
            "transaction.state.log.replication.factor".to_owned(),
            cfg.transaction_state_replication_factor().to_string(),
        );
        cfg.values.insert(
            "transaction.state.log.min.isr".to_owned(),
            cfg.transaction_state_min_isr().to_string(),
        );
        if cfg.broker_heartbeat_interval_ms >= cfg.broker_session_timeout_ms {
            // Strata's check (Kafka has none): a broker that heartbeats no more often than its
            // session lasts would be fenced between heartbeats.
            return Err(ConfigError::Rejected {
                key: "broker.heartbeat.interval.ms",
                message: "broker.heartbeat.interval.ms must be less than broker.session.timeout.ms"
                    .to_owned(),
            });
        }
        Ok(cfg)
    }

    /// The value of `key` on listener `listener`: its `listener.name.<listener>.<key>`
    /// override, else the broker-wide key (its default included), as Kafka's
    /// `ListenerName.configPrefix` lookups go. `None` where neither has a value.
    #[must_use]
    pub fn listener_value(&self, listener: &str, key: &str) -> Option<&str> {
        self.listener_overrides
            .get(&listener_key(listener, key))
            .or_else(|| self.values.get(key))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Whether `key` was set for `listener`, with its `listener.name.<l>.` prefix or without.
    #[must_use]
    pub fn listener_value_is_explicit(&self, listener: &str, key: &str) -> bool {
        self.listener_overrides
            .contains_key(&listener_key(listener, key))
            || self.explicit.contains_key(key)
    }

    /// Whether this node is the only voter of its quorum: the zero-configuration node, or
    /// a combined node whose `controller.quorum.voters` names only itself.
    #[must_use]
    pub fn is_sole_voter(&self) -> bool {
        self.process_roles.controller
            && !self.is_dynamic_quorum()
            && (self.standalone_quorum
                || (self.quorum_voters.len() == 1 && self.quorum_voters[0].id == self.node_id))
    }

    /// The replication factor `__consumer_offsets` is created with: `offsets.topic.replication.factor`
    /// (Kafka's default, 3) when set, or on any node but the only voter of its own quorum;
    /// that node (the zero-configuration single node) uses 1 unless told otherwise, as
    /// Kafka's single-node quickstart configures it, since no other broker can join it.
    #[must_use]
    pub fn offsets_replication_factor(&self) -> i16 {
        if self.is_sole_voter()
            && !self
                .explicit
                .contains_key("offsets.topic.replication.factor")
        {
            1
        } else {
            self.offsets_topic_replication_factor
        }
    }

    /// The replication factor `__transaction_state` is created with:
    /// `transaction.state.log.replication.factor` (Kafka's default, 3), with the same rule
    /// for the only voter of its own quorum as [`BrokerConfig::offsets_replication_factor`].
    #[must_use]
    pub fn transaction_state_replication_factor(&self) -> i16 {
        if self.is_sole_voter()
            && !self
                .explicit
                .contains_key("transaction.state.log.replication.factor")
        {
            1
        } else {
            self.transaction_state_log_replication_factor
        }
    }

    /// The `min.insync.replicas` of `__transaction_state`: `transaction.state.log.min.isr`
    /// (Kafka's default, 2), or 1 on the only voter of its own quorum unless set, as Kafka's
    /// single-node quickstart configures it (a factor of 1 could not meet 2).
    #[must_use]
    pub fn transaction_state_min_isr(&self) -> i32 {
        if self.is_sole_voter() && !self.explicit.contains_key("transaction.state.log.min.isr") {
            1
        } else {
            self.transaction_state_log_min_isr
        }
    }

    /// Whether the voters come from the metadata log rather than the configuration: only
    /// `controller.quorum.bootstrap.servers` is set (KIP-853; Kafka uses the static
    /// `controller.quorum.voters` when both are).
    #[must_use]
    pub fn is_dynamic_quorum(&self) -> bool {
        self.quorum_voters.is_empty() && !self.quorum_bootstrap_servers.is_empty()
    }

    /// Whether connections on `listener` (a name from `listeners`) are served the
    /// controller's APIs rather than the clients'.
    #[must_use]
    pub fn is_controller_listener(&self, listener: &str) -> bool {
        self.controller_listener_names.iter().any(|n| n == listener)
    }
}

/// The Raft timers, Kafka's `controller.quorum.*` keys (KIP-595).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuorumTimeouts {
    /// `controller.quorum.election.timeout.ms` (1000): a follower that hears no leader
    /// for this long, plus a random part of it, becomes a candidate.
    pub election_timeout_ms: i32,
    /// `controller.quorum.fetch.timeout.ms` (2000): a voter that has not fetched from the
    /// leader for this long starts an election; the leader resigns when a majority has not
    /// fetched for 1.5x this.
    pub fetch_timeout_ms: i32,
    /// `controller.quorum.election.backoff.max.ms` (1000): the longest wait before a new
    /// election after a lost one (exponential backoff).
    pub election_backoff_max_ms: i32,
    /// `controller.quorum.request.timeout.ms` (2000): how long a Raft request waits for its
    /// response.
    pub request_timeout_ms: i32,
    /// `controller.quorum.retry.backoff.ms` (20): the wait before retrying a failed request.
    pub retry_backoff_ms: i32,
    /// `controller.quorum.append.linger.ms` (25): how long the leader lingers to batch
    /// appends before flushing.
    pub append_linger_ms: i32,
}

/// Whether `s` is Kafka's UUID string: 22 characters of URL-safe base64 whose last one
/// carries no bits past the 128 (`Uuid.fromString` rejects anything else).
fn is_kafka_uuid(s: &str) -> bool {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let b = s.as_bytes();
    b.len() == 22
        && b.iter().all(|c| ALPHABET.contains(c))
        && ALPHABET
            .iter()
            .position(|c| *c == b[21])
            .is_some_and(|sextet| sextet & 0x0f == 0)
}

/// Parses Java-properties text: `key=value` or `key: value`, `#`/`!` comments, blank lines,
/// and Java's line continuations (a line ending in an odd number of backslashes goes on
/// with the next line, whose leading white space is dropped), which Kafka's documented
/// `sasl.jaas.config` examples use.
///
/// # Errors
///
/// [`ConfigError::Syntax`] for a line that is neither.
pub fn parse_properties(
    text: &str,
    path: &std::path::Path,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, first)) = lines.next() {
        let first = first.trim();
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut line = first.to_owned();
        while line.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1 {
            line.pop();
            match lines.next() {
                Some((_, next)) => line.push_str(next.trim_start()),
                None => break,
            }
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

/// Kafka's name of `key` on one listener: `listener.name.<listener, lower case>.<key>`.
#[must_use]
pub fn listener_key(listener: &str, key: &str) -> String {
    format!("listener.name.{}.{key}", listener.to_ascii_lowercase())
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

/// Kafka's KRaft authorizer; the short name is accepted as `replica.selector.class`'s are.
const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// `authorizer.class.name` and the keys of the authorizer it names. `super.users` is
/// Kafka's `;`-separated list of principals (`User:admin;User:ops`).
fn authorizer(
    class: &str,
    super_users: &str,
    allow_if_no_acl: &str,
) -> Result<Option<strata_kraft::acl::AuthorizerConfig>, ConfigError> {
    let allow_everyone_if_no_acl_found =
        boolean("allow.everyone.if.no.acl.found", allow_if_no_acl)?;
    match class.trim() {
        "" => Ok(None),
        c if c == STANDARD_AUTHORIZER || c == "StandardAuthorizer" => {
            Ok(Some(strata_kraft::acl::AuthorizerConfig {
                super_users: super_users
                    .split(';')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned)
                    .collect(),
                allow_everyone_if_no_acl_found,
            }))
        }
        other => Err(invalid(
            "authorizer.class.name",
            other,
            "not org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )),
    }
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
    fn properties_lines_continue_after_a_backslash() {
        let text = "a=1 \\\n   2 \\\n 3\n# c \\\nb=x\\\\\nc=y\n";
        let got = parse_properties(text, std::path::Path::new("t")).unwrap();
        assert_eq!(
            got,
            [
                ("a".to_owned(), "1 2 3".to_owned()),
                ("b".to_owned(), "x\\\\".to_owned()),
                ("c".to_owned(), "y".to_owned())
            ]
        );
    }

    #[test]
    fn the_keys_read_and_their_defaults_come_from_the_catalogue() {
        let c = BrokerConfig::from_args(&[], &[]).unwrap();
        assert_eq!(c.values.len(), 128);
        assert_eq!(
            c.values["listener.security.protocol.map"],
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
        );
        assert_eq!(c.values["listeners"], "PLAINTEXT://localhost:9092");
        assert_eq!(c.values["log.retention.ms"], "");
        assert_eq!(c.values["log.retention.hours"], "168");
        assert_eq!(c.values["message.max.bytes"], "1048588");
        assert_eq!(c.values["transaction.version"], "2");
        assert_eq!(c.values["offsets.topic.num.partitions"], "50");
        // The factor in effect: 1 on the only voter of its own quorum unless set.
        assert_eq!(c.values["offsets.topic.replication.factor"], "1");
        let set = BrokerConfig::from_args(
            &args(&["--override", "offsets.topic.replication.factor=3"]),
            &[],
        )
        .unwrap();
        assert_eq!(set.values["offsets.topic.replication.factor"], "3");
        // `__transaction_state`'s factor and min ISR likewise, each kept where set.
        assert_eq!(c.values["transaction.state.log.replication.factor"], "1");
        assert_eq!(c.values["transaction.state.log.min.isr"], "1");
        assert_eq!(c.transaction_max_timeout_ms, 900_000);
        let set = BrokerConfig::from_args(
            &args(&["--override", "transaction.state.log.min.isr=2"]),
            &[],
        )
        .unwrap();
        assert_eq!(set.transaction_state_min_isr(), 2);
        assert_eq!(set.transaction_state_replication_factor(), 1);
        // A dynamic key Strata does not read is not known here; the log cleaner's are read.
        assert!(!c.values.contains_key("background.threads"));
        assert_eq!(c.values["log.cleaner.delete.retention.ms"], "86400000");
        assert_eq!(c.values["log.cleaner.backoff.ms"], "15000");
        assert_eq!(c.values["log.initial.task.delay.ms"], "30000");
        assert_eq!(c.log_initial_task_delay_ms, 30_000);
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
    fn replica_selector_class_takes_kafkas_selectors_only() {
        let with = |v: &str| {
            BrokerConfig::from_args(
                &args(&["--override", &format!("replica.selector.class={v}")]),
                &[],
            )
        };
        let c = BrokerConfig::from_args(&[], &[]).unwrap();
        assert_eq!(c.replica_selector, ReplicaSelector::Leader);
        assert_eq!(
            with("org.apache.kafka.common.replica.RackAwareReplicaSelector")
                .unwrap()
                .replica_selector,
            ReplicaSelector::RackAware
        );
        assert_eq!(
            with("RackAwareReplicaSelector").unwrap().replica_selector,
            ReplicaSelector::RackAware
        );
        assert_eq!(
            with("org.apache.kafka.common.replica.LeaderSelector")
                .unwrap()
                .replica_selector,
            ReplicaSelector::Leader
        );
        let err = with("com.example.NearestSelector").unwrap_err();
        assert!(err.to_string().contains("replica.selector.class"), "{err}");
    }

    #[test]
    fn the_standard_authorizer_reads_its_keys() {
        let c = BrokerConfig::from_args(&[], &[]).unwrap();
        assert!(c.authorizer.is_none());
        let c = BrokerConfig::from_args(
            &args(&[
                "--override",
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "--override",
                "super.users=User:admin; User:ops",
                "--override",
                "allow.everyone.if.no.acl.found=true",
            ]),
            &[],
        )
        .unwrap();
        let a = c.authorizer.unwrap();
        assert!(a.super_users.contains("User:admin") && a.super_users.contains("User:ops"));
        assert!(a.allow_everyone_if_no_acl_found);
        let err = BrokerConfig::from_args(
            &args(&[
                "--override",
                "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            ]),
            &[],
        )
        .unwrap_err();
        assert!(err.to_string().contains("authorizer.class.name"), "{err}");
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
}
