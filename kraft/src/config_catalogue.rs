//! The catalogue of every config key Strata knows: each topic config, each broker key it
//! reads from `server.properties`, and each of Kafka's dynamic broker configs, with its
//! Kafka type, default, validator, scope, broker synonym and a one-line doc.
//!
//! Everything else is derived from [`CONFIG_KEYS`]: the topic configs' defaults, types and
//! checks ([`crate::validate_topic_config`]), the broker's built-in defaults, what
//! DescribeConfigs reports (defaults, types, synonyms, read-only and sensitive flags), which
//! broker keys AlterConfigs may change and for whom, and which keys APPEND and SUBTRACT
//! apply to. Names and defaults are Kafka's (`TopicConfig`/`LogConfig`, `ServerLogConfigs`,
//! `KafkaConfig`, `DynamicBrokerConfig`) except where an entry's comment says otherwise.
//!
//! A name may appear twice: once as a topic config and once as a broker key
//! (`compression.type`, `min.insync.replicas`, ...); within each kind it is unique.

use crate::ConfigValueError;

/// Kafka's `ConfigDef.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// `BOOLEAN`: `true` or `false`, any case.
    Boolean,
    /// `STRING`.
    String,
    /// `INT`: a 32-bit integer.
    Int,
    /// `SHORT`: a 16-bit integer.
    Short,
    /// `LONG`: a 64-bit integer.
    Long,
    /// `DOUBLE`.
    Double,
    /// `LIST`: comma-separated values.
    List,
    /// `CLASS`: a Java class name.
    Class,
    /// `PASSWORD`: never described back in clear (Kafka's `isSensitive`).
    Password,
}

impl ValueType {
    /// Kafka's `DescribeConfigsResponse.ConfigType` id (DescribeConfigs v3+).
    #[must_use]
    pub const fn config_type(self) -> i8 {
        match self {
            Self::Boolean => 1,
            Self::String => 2,
            Self::Int => 3,
            Self::Short => 4,
            Self::Long => 5,
            Self::Double => 6,
            Self::List => 7,
            Self::Class => 8,
            Self::Password => 9,
        }
    }
}

/// Kafka's `ConfigDef` validator of a key, beyond what its type requires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Validator {
    /// None: any value of the type.
    Any,
    /// `Range.atLeast(min)` on an integer.
    AtLeast(i64),
    /// `Range.between(min, max)` on an integer, inclusive.
    Between(i64, i64),
    /// `Range.between(min, max)` on a double, inclusive.
    DoubleBetween(f64, f64),
    /// `ValidString.in(..)`: one of these, case-sensitive.
    OneOf(&'static [&'static str]),
    /// `ValidList.in(..)`: a non-empty list of these.
    ListOf(&'static [&'static str]),
    /// KIP-73 throttled replicas: `*` or `partition:broker,...`.
    ReplicaList,
}

/// Where a key applies and who may change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A topic config: set per topic (CreateTopics, AlterConfigs on a TOPIC resource).
    Topic,
    /// A broker key read at startup only: changing it is "Cannot update these configs
    /// dynamically".
    ReadOnly,
    /// A dynamic broker key set only for a broker id, never as the cluster-wide default
    /// (Kafka's `DynamicBrokerConfig.PerBrokerConfigs`).
    PerBroker,
    /// A dynamic broker key set for a broker id or as the cluster-wide default.
    ClusterWide,
    /// A dynamic broker key set only under a listener prefix
    /// (`listener.name.<listener>.<key>`), per broker: Kafka's
    /// `SslConfigs.RECONFIGURABLE_CONFIGS` (the keystores and truststores).
    ListenerOnly,
}

/// One config key.
#[derive(Debug, Clone, Copy)]
pub struct ConfigKey {
    /// Kafka's name.
    pub name: &'static str,
    /// Kafka's type.
    pub value_type: ValueType,
    /// The default, `None` where Kafka's is null (and, for a key Strata reads, where it
    /// starts empty: DescribeConfigs reports no default for those).
    pub default: Option<&'static str>,
    /// The value check.
    pub validator: Validator,
    /// Topic, or which kind of broker key.
    pub scope: Scope,
    /// A topic config's broker synonym: the broker key that supplies its default (Kafka's
    /// `ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS`), itself an entry.
    pub synonym: Option<&'static str>,
    /// A broker key Strata reads from `server.properties` (any other broker key in a file
    /// is logged and ignored): every read-only key, and the dynamic ones marked so.
    pub strata_reads: bool,
    /// A thread pool Kafka resizes live (`DynamicThreadPool.RECONFIGURABLE_CONFIGS`): a
    /// new size must stay within half and double the current one.
    pub thread_pool: bool,
    /// One line on what the key does.
    pub doc: &'static str,
}

impl ConfigKey {
    /// Whether this is a topic config (else a broker key).
    #[must_use]
    pub const fn is_topic(&self) -> bool {
        matches!(self.scope, Scope::Topic)
    }

    /// Whether this broker key may change with no restart (KIP-226).
    #[must_use]
    pub const fn is_dynamic(&self) -> bool {
        matches!(
            self.scope,
            Scope::PerBroker | Scope::ClusterWide | Scope::ListenerOnly
        )
    }

    /// Whether the value is a list (the keys APPEND and SUBTRACT apply to).
    #[must_use]
    pub const fn is_list(&self) -> bool {
        matches!(self.value_type, ValueType::List)
    }

    /// Whether the value is never described in clear (Kafka's `isSensitive`).
    #[must_use]
    pub const fn is_sensitive(&self) -> bool {
        matches!(self.value_type, ValueType::Password)
    }

    /// Kafka's `DescribeConfigsResponse.ConfigType` id.
    #[must_use]
    pub const fn config_type(&self) -> i8 {
        self.value_type.config_type()
    }

    /// Checks `raw` against the key's type and validator, as a topic config's value is
    /// checked (and a broker synonym's, by its topic config's rule).
    ///
    /// # Errors
    ///
    /// Why the value is refused.
    pub fn check(&self, raw: &str) -> Result<(), ConfigValueError> {
        // Kafka's ConfigDef.parseType trims before parsing numbers, booleans and lists.
        let v = raw.trim();
        let in_range = |n: i64| match self.validator {
            Validator::AtLeast(min) if n < min => Err(ConfigValueError::BelowMinimum { min }),
            Validator::Between(min, max) if n < min || n > max => {
                Err(ConfigValueError::OutOfRange {
                    min: min as f64,
                    max: max as f64,
                })
            }
            _ => Ok(()),
        };
        match (self.value_type, self.validator) {
            (ValueType::Int, _) => {
                let n: i32 = v.parse().map_err(|_| ConfigValueError::NotAnInteger)?;
                in_range(n.into())
            }
            (ValueType::Short, _) => {
                let n: i16 = v.parse().map_err(|_| ConfigValueError::NotAnInteger)?;
                in_range(n.into())
            }
            (ValueType::Long, _) => {
                let n: i64 = v.parse().map_err(|_| ConfigValueError::NotAnInteger)?;
                in_range(n)
            }
            (ValueType::Double, validator) => {
                let n: f64 = v.parse().map_err(|_| ConfigValueError::NotANumber)?;
                match validator {
                    // `!(..)` also rejects NaN.
                    Validator::DoubleBetween(min, max) if !(min..=max).contains(&n) => {
                        Err(ConfigValueError::OutOfRange { min, max })
                    }
                    _ => Ok(()),
                }
            }
            (ValueType::Boolean, _) => {
                if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
                    Ok(())
                } else {
                    Err(ConfigValueError::NotABoolean)
                }
            }
            (_, Validator::OneOf(allowed)) if !allowed.contains(&raw) => {
                Err(ConfigValueError::NotOneOf { allowed })
            }
            (_, Validator::ListOf(allowed))
                if v.is_empty() || v.split(',').map(str::trim).any(|i| !allowed.contains(&i)) =>
            {
                Err(ConfigValueError::NotOneOf { allowed })
            }
            (_, Validator::ReplicaList) => {
                let ok = v.is_empty()
                    || v == "*"
                    || v.split(',').all(|pair| {
                        pair.trim().split_once(':').is_some_and(|(p, b)| {
                            p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok()
                        })
                    });
                if ok {
                    Ok(())
                } else {
                    Err(ConfigValueError::NotAReplicaList)
                }
            }
            _ => Ok(()),
        }
    }

    const fn with_synonym(mut self, broker_key: &'static str) -> Self {
        self.synonym = Some(broker_key);
        self
    }

    const fn read(mut self) -> Self {
        self.strata_reads = true;
        self
    }

    const fn pool(mut self) -> Self {
        self.thread_pool = true;
        self
    }
}

/// A topic config.
const fn topic(
    name: &'static str,
    value_type: ValueType,
    default: &'static str,
    validator: Validator,
    doc: &'static str,
) -> ConfigKey {
    ConfigKey {
        name,
        value_type,
        default: Some(default),
        validator,
        scope: Scope::Topic,
        synonym: None,
        strata_reads: false,
        thread_pool: false,
        doc,
    }
}

/// A broker key (Strata reads every read-only one).
const fn broker(
    name: &'static str,
    value_type: ValueType,
    default: Option<&'static str>,
    validator: Validator,
    scope: Scope,
    doc: &'static str,
) -> ConfigKey {
    ConfigKey {
        name,
        value_type,
        default,
        validator,
        scope,
        synonym: None,
        strata_reads: matches!(scope, Scope::ReadOnly),
        thread_pool: false,
        doc,
    }
}

/// Kafka's `ZstdCompressionCodec` minimum level.
const ZSTD_MIN_LEVEL: i64 = -131_072;
/// `Long.MAX_VALUE`, Kafka's "never" default.
const LONG_MAX: &str = "9223372036854775807";
/// `Integer.MAX_VALUE`.
const INT_MAX: &str = "2147483647";

const CLEANUP_POLICIES: Validator = Validator::ListOf(&["compact", "delete"]);
const COMPRESSION_TYPES: Validator =
    Validator::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]);
const TIMESTAMP_TYPES: Validator = Validator::OneOf(&["CreateTime", "LogAppendTime"]);
const GZIP_LEVELS: Validator = Validator::Between(-1, 9);
const LZ4_LEVELS: Validator = Validator::Between(1, 17);
const ZSTD_LEVELS: Validator = Validator::Between(ZSTD_MIN_LEVEL, 22);
const RATIO: Validator = Validator::DoubleBetween(0.0, 1.0);

use Scope::{ClusterWide, ListenerOnly, PerBroker, ReadOnly};
use Validator::{Any, AtLeast, Between, DoubleBetween, OneOf};
use ValueType::{Boolean, Class, Double, Int, List, Long, Password, Short, String as Str};

/// Every config key: the topic configs in name order (as `kafka-configs --describe --all`
/// lists them), then the broker synonyms of topic configs (the log defaults Kafka
/// reconfigures live, `DynamicLogConfig`), then the other broker keys Strata reads, then
/// the rest of Kafka's dynamic broker configs.
#[rustfmt::skip]
pub static CONFIG_KEYS: &[ConfigKey] = &[
    // Topic configs (Kafka's TopicConfig / LogConfig).
    topic("cleanup.policy", List, "delete", CLEANUP_POLICIES,
        "Whether old segments are deleted, compacted, or both.")
    .with_synonym("log.cleanup.policy"),
    // KIP-390 compression levels (Kafka 3.8).
    topic("compression.gzip.level", Int, "-1", GZIP_LEVELS,
        "The gzip level used when compression.type is gzip.")
    .with_synonym("compression.gzip.level"),
    topic("compression.lz4.level", Int, "9", LZ4_LEVELS,
        "The lz4 level used when compression.type is lz4.")
    .with_synonym("compression.lz4.level"),
    topic("compression.type", Str, "producer", COMPRESSION_TYPES,
        "The codec batches are stored with; producer keeps the producer's.")
    .with_synonym("compression.type"),
    topic("compression.zstd.level", Int, "3", ZSTD_LEVELS,
        "The zstd level used when compression.type is zstd.")
    .with_synonym("compression.zstd.level"),
    topic("delete.retention.ms", Long, "86400000", AtLeast(0),
        "How long tombstones are kept in a compacted topic.")
    .with_synonym("log.cleaner.delete.retention.ms"),
    topic("file.delete.delay.ms", Long, "60000", AtLeast(0),
        "How long a deleted segment's files wait before they are removed.")
    .with_synonym("log.segment.delete.delay.ms"),
    topic("flush.messages", Long, LONG_MAX, AtLeast(1), "Records appended between forced fsyncs.")
    .with_synonym("log.flush.interval.messages"),
    topic("flush.ms", Long, LONG_MAX, AtLeast(0), "Milliseconds between forced fsyncs.")
    .with_synonym("log.flush.interval.ms"),
    topic("follower.replication.throttled.replicas", List, "", Validator::ReplicaList,
        "Replicas whose follower fetches are throttled: * or partition:broker pairs."),
    topic("index.interval.bytes", Int, "4096", AtLeast(0),
        "Bytes appended between offset index entries.")
    .with_synonym("log.index.interval.bytes"),
    topic("leader.replication.throttled.replicas", List, "", Validator::ReplicaList,
        "Replicas whose leader reads are throttled: * or partition:broker pairs."),
    // KIP-405 tiered storage: -2 means "use retention.ms/bytes".
    topic("local.retention.bytes", Long, "-2", AtLeast(-2),
        "Bytes kept on local disk when tiered storage is on.")
    .with_synonym("log.local.retention.bytes"),
    topic("local.retention.ms", Long, "-2", AtLeast(-2),
        "Milliseconds kept on local disk when tiered storage is on.")
    .with_synonym("log.local.retention.ms"),
    topic("max.compaction.lag.ms", Long, LONG_MAX, AtLeast(1),
        "The longest a record may stay uncompacted.")
    .with_synonym("log.cleaner.max.compaction.lag.ms"),
    // 1 MiB plus Kafka's 12-byte LOG_OVERHEAD (offset + size prefix of a batch).
    topic("max.message.bytes", Int, "1048588", AtLeast(0),
        "The largest record batch the topic accepts.")
    .with_synonym("message.max.bytes"),
    topic("message.downconversion.enable", Boolean, "true", Any,
        "Whether old fetch versions get down-converted batches.")
    .with_synonym("log.message.downconversion.enable"),
    // KIP-937 split of the deprecated difference.max.ms.
    topic("message.timestamp.after.max.ms", Long, LONG_MAX, AtLeast(0),
        "How far past the broker's clock a CreateTime timestamp may be.")
    .with_synonym("log.message.timestamp.after.max.ms"),
    topic("message.timestamp.before.max.ms", Long, LONG_MAX, AtLeast(0),
        "How far behind the broker's clock a CreateTime timestamp may be.")
    .with_synonym("log.message.timestamp.before.max.ms"),
    topic("message.timestamp.difference.max.ms", Long, LONG_MAX, AtLeast(0),
        "Deprecated: how far from the broker's clock a CreateTime timestamp may be.")
    .with_synonym("log.message.timestamp.difference.max.ms"),
    topic("message.timestamp.type", Str, "CreateTime", TIMESTAMP_TYPES,
        "Whether records keep the producer's timestamp or get the append time.")
    .with_synonym("log.message.timestamp.type"),
    topic("min.cleanable.dirty.ratio", Double, "0.5", RATIO,
        "The dirty share of a log that makes it eligible for compaction.")
    .with_synonym("log.cleaner.min.cleanable.ratio"),
    topic("min.compaction.lag.ms", Long, "0", AtLeast(0),
        "The shortest a record stays uncompacted.")
    .with_synonym("log.cleaner.min.compaction.lag.ms"),
    topic("min.insync.replicas", Int, "1", AtLeast(1),
        "In-sync replicas an acks=all produce needs.")
    .with_synonym("min.insync.replicas"),
    topic("preallocate", Boolean, "false", Any, "Whether a new segment's file is preallocated.")
    .with_synonym("log.preallocate"),
    topic("remote.storage.enable", Boolean, "false", Any, "Whether the topic uses tiered storage."),
    topic("retention.bytes", Long, "-1", Any,
        "The largest a partition grows before old segments go; -1 is unbounded.")
    .with_synonym("log.retention.bytes"),
    topic("retention.ms", Long, "604800000", AtLeast(-1),
        "How long a segment is kept; -1 is forever.")
    .with_synonym("log.retention.ms"),
    // 14 = Kafka's LegacyRecord.RECORD_OVERHEAD_V0: a segment must hold one record.
    topic("segment.bytes", Int, "1073741824", AtLeast(14), "The size at which a segment is rolled.")
    .with_synonym("log.segment.bytes"),
    topic("segment.index.bytes", Int, "10485760", AtLeast(4),
        "The size of a segment's offset and time indexes.")
    .with_synonym("log.index.size.max.bytes"),
    topic("segment.jitter.ms", Long, "0", AtLeast(0),
        "The largest random jitter subtracted from segment.ms.")
    .with_synonym("log.roll.jitter.ms"),
    topic("segment.ms", Long, "604800000", AtLeast(1), "The age at which a segment is rolled.")
    .with_synonym("log.roll.ms"),
    topic("unclean.leader.election.enable", Boolean, "false", Any,
        "Whether an out-of-sync replica may become leader.")
    .with_synonym("unclean.leader.election.enable"),
    // Broker synonyms of topic configs (DynamicLogConfig.ReconfigurableConfigs), checked
    // with their topic config's rule; cluster-wide dynamic. A null default here means the
    // topic config's own default (or, for the time keys, a coarser synonym) applies.
    broker("compression.gzip.level", Int, Some("-1"), GZIP_LEVELS, ClusterWide,
        "The default of the topic config compression.gzip.level."),
    broker("compression.lz4.level", Int, Some("9"), LZ4_LEVELS, ClusterWide,
        "The default of the topic config compression.lz4.level."),
    broker("compression.type", Str, Some("producer"), COMPRESSION_TYPES, ClusterWide,
        "The default of the topic config compression.type.")
    .read(),
    broker("compression.zstd.level", Int, Some("3"), ZSTD_LEVELS, ClusterWide,
        "The default of the topic config compression.zstd.level."),
    broker("log.cleaner.delete.retention.ms", Long, Some("86400000"), AtLeast(0), ClusterWide,
        "The default of the topic config delete.retention.ms.")
    .read(),
    broker("log.cleaner.max.compaction.lag.ms", Long, Some(LONG_MAX), AtLeast(1), ClusterWide,
        "The default of the topic config max.compaction.lag.ms.")
    .read(),
    broker("log.cleaner.min.cleanable.ratio", Double, Some("0.5"), RATIO, ClusterWide,
        "The default of the topic config min.cleanable.dirty.ratio.")
    .read(),
    broker("log.cleaner.min.compaction.lag.ms", Long, Some("0"), AtLeast(0), ClusterWide,
        "The default of the topic config min.compaction.lag.ms.")
    .read(),
    broker("log.cleanup.policy", List, Some("delete"), CLEANUP_POLICIES, ClusterWide,
        "The default of the topic config cleanup.policy.")
    .read(),
    broker("log.flush.interval.messages", Long, Some(LONG_MAX), AtLeast(1), ClusterWide,
        "The default of the topic config flush.messages.")
    .read(),
    broker("log.flush.interval.ms", Long, None, AtLeast(0), ClusterWide,
        "The default of the topic config flush.ms; unset, log.flush.scheduler.interval.ms.")
    .read(),
    broker("log.index.interval.bytes", Int, Some("4096"), AtLeast(0), ClusterWide,
        "The default of the topic config index.interval.bytes.")
    .read(),
    broker("log.index.size.max.bytes", Int, Some("10485760"), AtLeast(4), ClusterWide,
        "The default of the topic config segment.index.bytes.")
    .read(),
    broker("log.local.retention.bytes", Long, Some("-2"), AtLeast(-2), ClusterWide,
        "The default of the topic config local.retention.bytes."),
    broker("log.local.retention.ms", Long, Some("-2"), AtLeast(-2), ClusterWide,
        "The default of the topic config local.retention.ms."),
    broker("log.message.downconversion.enable", Boolean, Some("true"), Any, ClusterWide,
        "The default of the topic config message.downconversion.enable."),
    broker("log.message.timestamp.after.max.ms", Long, Some(LONG_MAX), AtLeast(0), ClusterWide,
        "The default of the topic config message.timestamp.after.max.ms."),
    broker("log.message.timestamp.before.max.ms", Long, Some(LONG_MAX), AtLeast(0), ClusterWide,
        "The default of the topic config message.timestamp.before.max.ms."),
    broker("log.message.timestamp.difference.max.ms", Long, Some(LONG_MAX), AtLeast(0), ClusterWide,
        "The default of the topic config message.timestamp.difference.max.ms."),
    broker("log.message.timestamp.type", Str, Some("CreateTime"), TIMESTAMP_TYPES, ClusterWide,
        "The default of the topic config message.timestamp.type.")
    .read(),
    broker("log.preallocate", Boolean, Some("false"), Any, ClusterWide,
        "The default of the topic config preallocate."),
    broker("log.retention.bytes", Long, Some("-1"), Any, ClusterWide,
        "The default of the topic config retention.bytes.")
    .read(),
    broker("log.retention.ms", Long, None, AtLeast(-1), ClusterWide,
        "The default of the topic config retention.ms; unset, log.retention.minutes.")
    .read(),
    broker("log.roll.jitter.ms", Long, Some("0"), AtLeast(0), ClusterWide,
        "The default of the topic config segment.jitter.ms."),
    broker("log.roll.ms", Long, None, AtLeast(1), ClusterWide,
        "The default of the topic config segment.ms; unset, log.roll.hours.")
    .read(),
    broker("log.segment.bytes", Int, Some("1073741824"), AtLeast(14), ClusterWide,
        "The default of the topic config segment.bytes.")
    .read(),
    broker("log.segment.delete.delay.ms", Long, Some("60000"), AtLeast(0), ClusterWide,
        "The default of the topic config file.delete.delay.ms."),
    broker("message.max.bytes", Int, Some("1048588"), AtLeast(0), ClusterWide,
        "The default of the topic config max.message.bytes.")
    .read(),
    broker("min.insync.replicas", Int, Some("1"), AtLeast(1), ClusterWide,
        "The default of the topic config min.insync.replicas.")
    .read(),
    broker("unclean.leader.election.enable", Boolean, Some("false"), Any, ClusterWide,
        "The default of the topic config unclean.leader.election.enable.")
    .read(),
    // The other broker keys Strata reads, read-only unless Kafka's are dynamic. An empty
    // starting value has no default here (DescribeConfigs reports none).
    broker("node.id", Int, Some("1"), Any, ReadOnly, "This node's id in the cluster."),
    broker("process.roles", List, Some("broker,controller"), Any, ReadOnly,
        "The roles this node plays: broker, controller or both."),
    // Strata's default; Kafka's is PLAINTEXT://:9092.
    broker("listeners", Str, Some("PLAINTEXT://localhost:9092"), Any, PerBroker,
        "The addresses this node listens on, name://host:port.")
    .read(),
    broker("advertised.listeners", Str, None, Any, ReadOnly,
        "The addresses clients are told to use; unset, the listeners."),
    broker("log.dirs", Str, Some("./data"), Any, ReadOnly,
        "The data directories (Strata uses the first)."),
    broker("num.partitions", Int, Some("1"), Any, ReadOnly,
        "Partitions of an auto-created topic or one created without a count."),
    broker("default.replication.factor", Int, Some("1"), Any, ReadOnly,
        "Replicas of an auto-created topic or one created without a factor."),
    broker("auto.create.topics.enable", Boolean, Some("true"), Any, ReadOnly,
        "Whether metadata requests for unknown topics create them."),
    broker("delete.topic.enable", Boolean, Some("true"), Any, ReadOnly,
        "Whether DeleteTopics is allowed."),
    broker("socket.request.max.bytes", Int, Some("104857600"), Any, ReadOnly,
        "The largest request a connection may send."),
    broker("connections.max.idle.ms", Long, Some("600000"), AtLeast(1), ReadOnly,
        "A connection that sends nothing for this long is closed."),
    // Strata's default, not Kafka's -1 (unbounded): see `BrokerConfig::queued_max_request_bytes`.
    broker("queued.max.request.bytes", Long, Some("268435456"), Any, ReadOnly,
        "Bytes of requests in flight before reading from connections pauses."),
    broker("log.roll.hours", Int, Some("168"), Any, ReadOnly,
        "The segment age at which it is rolled, in hours (log.roll.ms wins)."),
    broker("log.retention.minutes", Int, None, Any, ReadOnly,
        "Retention in minutes (log.retention.ms wins)."),
    broker("log.retention.hours", Int, Some("168"), Any, ReadOnly,
        "Retention in hours (log.retention.minutes and log.retention.ms win)."),
    broker("log.retention.check.interval.ms", Long, Some("300000"), Any, ReadOnly,
        "How often retention is enforced."),
    broker("log.initial.task.delay.ms", Long, Some("30000"), AtLeast(0), ReadOnly,
        "How long after start the first retention, flush and expiry pass waits (at most one \
         check interval)."),
    broker("log.flush.scheduler.interval.ms", Long, Some(LONG_MAX), Any, ReadOnly,
        "How often logs are checked for a time-based flush."),
    broker("group.initial.rebalance.delay.ms", Int, Some("3000"), Any, ReadOnly,
        "How long a new classic group waits for members before its first rebalance."),
    broker("group.min.session.timeout.ms", Int, Some("6000"), Any, ReadOnly,
        "The shortest session timeout a classic group member may ask for."),
    broker("group.max.session.timeout.ms", Int, Some("1800000"), Any, ReadOnly,
        "The longest session timeout a classic group member may ask for."),
    broker("group.consumer.heartbeat.interval.ms", Int, Some("5000"), Any, ReadOnly,
        "The heartbeat interval of KIP-848 consumer group members."),
    broker("group.consumer.session.timeout.ms", Int, Some("45000"), Any, ReadOnly,
        "The session timeout of KIP-848 consumer group members."),
    broker("group.consumer.assignors", List, Some("uniform,range"), Any, ReadOnly,
        "The server-side assignors of KIP-848 consumer groups, default first."),
    broker("group.consumer.max.size", Int, Some(INT_MAX), Any, ReadOnly,
        "The most members a KIP-848 consumer group may have."),
    broker("offsets.topic.replication.factor", Short, Some("3"), Any, ReadOnly,
        "Replicas of __consumer_offsets."),
    broker("offsets.topic.num.partitions", Int, Some("50"), Any, ReadOnly,
        "Partitions of __consumer_offsets."),
    broker("offsets.topic.segment.bytes", Int, Some("104857600"), AtLeast(1), ReadOnly,
        "The segment size of __consumer_offsets, set when the topic is created."),
    broker("offsets.retention.minutes", Int, Some("10080"), Any, ReadOnly,
        "How long an empty group's committed offsets are kept."),
    broker("offsets.retention.check.interval.ms", Long, Some("600000"), Any, ReadOnly,
        "How often expired offsets are removed."),
    broker("offset.metadata.max.bytes", Int, Some("4096"), Any, ReadOnly,
        "The largest metadata string an offset commit may carry."),
    // TransactionLogConfig and TransactionStateManagerConfig (KIP-98).
    broker("transaction.state.log.num.partitions", Int, Some("50"), AtLeast(1), ReadOnly,
        "Partitions of __transaction_state."),
    broker("transaction.state.log.replication.factor", Short, Some("3"), AtLeast(1), ReadOnly,
        "Replicas of __transaction_state."),
    broker("transaction.state.log.min.isr", Int, Some("2"), AtLeast(1), ReadOnly,
        "The min.insync.replicas of __transaction_state."),
    broker("transaction.state.log.segment.bytes", Int, Some("104857600"), AtLeast(1), ReadOnly,
        "The segment size of __transaction_state."),
    broker("transaction.max.timeout.ms", Int, Some("900000"), AtLeast(1), ReadOnly,
        "The longest transaction timeout a producer may ask for."),
    broker("transactional.id.expiration.ms", Int, Some("604800000"), AtLeast(1), ReadOnly,
        "How long an idle transactional id is kept."),
    broker("transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, Some("10000"),
        AtLeast(1), ReadOnly, "How often timed-out transactions are aborted."),
    broker("transaction.remove.expired.transaction.cleanup.interval.ms", Int, Some("3600000"),
        AtLeast(1), ReadOnly, "How often expired transactional ids are removed."),
    // Strata's own: Kafka finalizes this feature level with `kafka-storage format --feature`
    // or `kafka-features.sh` rather than a config key.
    broker("transaction.version", Short, Some("2"), Between(0, 2), ReadOnly,
        "The finalized level of the transaction.version feature that ApiVersions advertises."),
    // KRaft (KIP-500, KIP-595, KIP-631, KIP-853).
    broker("controller.quorum.voters", List, None, Any, ReadOnly,
        "The static voter set, id@host:port."),
    broker("controller.quorum.bootstrap.servers", List, None, Any, ReadOnly,
        "Controllers to find a dynamic quorum through, host:port."),
    broker("controller.listener.names", List, None, Any, ReadOnly,
        "The listeners the controllers use."),
    broker("inter.broker.listener.name", Str, None, Any, ReadOnly,
        "The listener brokers reach each other on."),
    // Strata's default; Kafka's lists SASL_SSL first.
    broker("listener.security.protocol.map", Str,
        Some("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"), Any,
        PerBroker, "Each listener name's security protocol, name:protocol.")
    .read(),
    broker("cluster.id", Str, None, Any, ReadOnly,
        "The cluster id to format a new log directory with."),
    broker("controller.quorum.election.timeout.ms", Int, Some("1000"), Any, ReadOnly,
        "How long a voter waits without a leader before it stands."),
    broker("controller.quorum.fetch.timeout.ms", Int, Some("2000"), Any, ReadOnly,
        "How long a follower waits without a successful fetch before it stands."),
    broker("controller.quorum.election.backoff.max.ms", Int, Some("1000"), Any, ReadOnly,
        "The longest a voter backs off before another election."),
    broker("controller.quorum.request.timeout.ms", Int, Some("2000"), Any, ReadOnly,
        "How long a quorum request waits for its answer."),
    // Described as STRING, as it always has been here; Kafka's type is BOOLEAN.
    broker("controller.quorum.auto.join.enable", Str, Some("false"), Any, ReadOnly,
        "Whether a new controller adds itself to the voters (KIP-853)."),
    broker("controller.quorum.retry.backoff.ms", Int, Some("20"), Any, ReadOnly,
        "The wait before a failed quorum request is retried."),
    broker("controller.quorum.append.linger.ms", Int, Some("25"), Any, ReadOnly,
        "How long the leader lingers to batch metadata records."),
    broker("broker.session.timeout.ms", Int, Some("9000"), Any, ReadOnly,
        "How long a broker lives without a heartbeat before it is fenced."),
    broker("replica.lag.time.max.ms", Long, Some("30000"), Any, ReadOnly,
        "How long a follower may lag before it leaves the ISR."),
    broker("broker.heartbeat.interval.ms", Int, Some("2000"), Any, ReadOnly,
        "The interval of a broker's heartbeats to the controller."),
    broker("metadata.log.max.snapshot.interval.ms", Long, Some("3600000"), Any, ReadOnly,
        "The longest between metadata snapshots while records arrive."),
    broker("metadata.log.max.record.bytes.between.snapshots", Long, Some("20971520"), Any, ReadOnly,
        "Metadata bytes appended before a new snapshot."),
    broker("metadata.log.segment.bytes", Int, Some("1073741824"), Any, ReadOnly,
        "The segment size of the metadata log."),
    broker("auto.leader.rebalance.enable", Boolean, Some("true"), Any, ReadOnly,
        "Whether leadership moves back to preferred replicas."),
    // On SIGTERM a broker has the controller move its leaderships away before it exits.
    // Described as STRING, as it always has been here; Kafka's type is BOOLEAN.
    broker("controlled.shutdown.enable", Str, Some("true"), Any, ReadOnly,
        "Whether a stopping broker hands its leaderships over first."),
    broker("leader.imbalance.check.interval.seconds", Long, Some("300"), Any, ReadOnly,
        "How often preferred-leader imbalance is checked."),
    broker("broker.rack", Str, None, Any, ReadOnly,
        "This broker's rack, for rack-aware placement and fetching."),
    // KIP-392: unset sends every consumer to the leader, as in Kafka.
    broker("replica.selector.class", Class, None, Any, ReadOnly,
        "Which replica a consumer fetches from (KIP-392)."),
    // KIP-227: 0 answers every fetch in full.
    broker("max.incremental.fetch.session.cache.slots", Int, Some("1000"), AtLeast(0), ReadOnly,
        "The most incremental fetch sessions this node keeps (KIP-227)."),
    // KIP-801: empty runs without an authorizer (the ACL APIs answer SECURITY_DISABLED).
    broker("authorizer.class.name", Str, None, Any, ReadOnly,
        "The authorizer; empty runs without one."),
    broker("super.users", Str, None, Any, ReadOnly,
        "Principals the authorizer allows everything, User:name;..."),
    // Described as STRING, as it always has been here; the authorizer reads a BOOLEAN.
    broker("allow.everyone.if.no.acl.found", Str, Some("false"), Any, ReadOnly,
        "Whether a resource with no ACLs is open to all."),
    // Strata's own: the Prometheus endpoint, `http://host:port/path`; empty serves none.
    broker("metrics.listener", Str, None, Any, ReadOnly,
        "Strata's Prometheus endpoint, http://host:port/path."),
    // Strata's own: the web console, `http://host:port`; empty serves none.
    broker("console.listener", Str, None, Any, ReadOnly,
        "Strata's web console, http://host:port."),
    broker("console.read.only", Boolean, Some("false"), Any, ReadOnly,
        "Whether the web console refuses every action."),
    // The rest of Kafka's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs).
    // Strata validates, stores and describes them; most have nothing to act on yet.
    // DynamicThreadPool.
    broker("background.threads", Int, Some("10"), AtLeast(1), ClusterWide,
        "Threads for background tasks.")
    .pool(),
    broker("num.io.threads", Int, Some("8"), AtLeast(1), ClusterWide,
        "Threads that process requests.")
    .pool(),
    broker("num.recovery.threads.per.data.dir", Int, Some("2"), AtLeast(1), ClusterWide,
        "Threads per data directory that recover logs at startup.")
    .pool(),
    broker("num.replica.fetchers", Int, Some("1"), AtLeast(1), ClusterWide,
        "Fetcher threads per source broker.")
    .pool(),
    // LogCleaner (message.max.bytes, also in its set, is a log default).
    broker("log.cleaner.backoff.ms", Long, Some("15000"), AtLeast(0), ClusterWide,
        "How long the cleaner sleeps when there is nothing to clean.")
    .read(),
    broker("log.cleaner.enable", Boolean, Some("true"), Any, ReadOnly,
        "Whether the log cleaner compacts the logs whose cleanup.policy includes compact."),
    broker("log.cleaner.dedupe.buffer.size", Long, Some("134217728"), Any, ClusterWide,
        "Memory for deduplication across all cleaner threads.")
    .read(),
    broker("log.cleaner.io.buffer.load.factor", Double, Some("0.9"), Any, ClusterWide,
        "How full the cleaner's dedupe buffer may get.")
    .read(),
    broker("log.cleaner.io.buffer.size", Int, Some("524288"), AtLeast(0), ClusterWide,
        "Memory for the cleaner's I/O buffers."),
    broker("log.cleaner.io.max.bytes.per.second", Double, Some("1.7976931348623157E308"), Any,
        ClusterWide, "The cleaner's I/O throttle.")
    .read(),
    broker("log.cleaner.threads", Int, Some("1"), AtLeast(0), ClusterWide,
        "Threads that compact logs.")
    .read(),
    // Metrics and config providers.
    broker("metric.reporters", List, Some("org.apache.kafka.common.metrics.JmxReporter"), Any,
        ClusterWide, "Classes that receive the broker's metrics."),
    broker("config.providers", List, Some(""), Any, ClusterWide,
        "Config providers that resolve indirect values."),
    // DynamicListenerConfig: SSL.
    broker("principal.builder.class", Class, None, Any, PerBroker,
        "Builds a connection's principal."),
    broker("ssl.cipher.suites", List, Some(""), Any, PerBroker, "The TLS cipher suites allowed.")
    .read(),
    broker("ssl.client.auth", Str, Some("none"), OneOf(&["required", "requested", "none"]),
        PerBroker, "Whether TLS clients must present a certificate.")
    .read(),
    broker("ssl.enabled.protocols", List, Some("TLSv1.2,TLSv1.3"), Any, PerBroker,
        "The TLS versions allowed.")
    .read(),
    broker("ssl.endpoint.identification.algorithm", Str, Some("https"), Any, PerBroker,
        "How a peer's host name is checked against its certificate.")
    .read(),
    broker("ssl.engine.factory.class", Class, None, Any, PerBroker, "A custom SSLEngine factory."),
    broker("ssl.key.password", Password, None, Any, ListenerOnly,
        "The password of the key in the keystore.")
    .read(),
    broker("ssl.keymanager.algorithm", Str, Some("SunX509"), Any, PerBroker,
        "The key manager factory's algorithm."),
    broker("ssl.keystore.certificate.chain", Password, None, Any, ListenerOnly,
        "The certificate chain, PEM.")
    .read(),
    broker("ssl.keystore.key", Password, None, Any, ListenerOnly, "The private key, PEM.")
    .read(),
    broker("ssl.keystore.location", Str, None, Any, ListenerOnly, "The keystore file.")
    .read(),
    broker("ssl.keystore.password", Password, None, Any, ListenerOnly, "The keystore's password.")
    .read(),
    broker("ssl.keystore.type", Str, Some("JKS"), Any, ListenerOnly, "The keystore's format.")
    .read(),
    broker("ssl.protocol", Str, Some("TLSv1.3"), Any, PerBroker,
        "The protocol the SSLContext is made for."),
    broker("ssl.provider", Str, None, Any, PerBroker, "The security provider for TLS."),
    broker("ssl.secure.random.implementation", Str, None, Any, PerBroker,
        "The SecureRandom implementation for TLS."),
    broker("ssl.trustmanager.algorithm", Str, Some("PKIX"), Any, PerBroker,
        "The trust manager factory's algorithm."),
    broker("ssl.truststore.certificates", Password, None, Any, ListenerOnly,
        "The trusted certificates, PEM.")
    .read(),
    broker("ssl.truststore.location", Str, None, Any, ListenerOnly, "The truststore file.")
    .read(),
    broker("ssl.truststore.password", Password, None, Any, ListenerOnly,
        "The truststore's password.")
    .read(),
    broker("ssl.truststore.type", Str, Some("JKS"), Any, ListenerOnly, "The truststore's format.")
    .read(),
    broker("ssl.principal.mapping.rules", Str, Some("DEFAULT"), Any, ReadOnly,
        "Rules mapping a client certificate's distinguished name to a short name."),
    broker("connections.max.reauth.ms", Long, Some("0"), AtLeast(0), ReadOnly,
        "The longest an authenticated SASL session lasts before it must re-authenticate."),
    broker("sasl.mechanism.controller.protocol", Str, Some("GSSAPI"), Any, ReadOnly,
        "The SASL mechanism used to reach the controllers."),
    // KIP-768: OAUTHBEARER tokens validated against a JWKS (SaslConfigs, read-only).
    broker("sasl.server.callback.handler.class", Class, None, Any, ReadOnly,
        "The SASL server callback handler (OAUTHBEARER's validator)."),
    broker("sasl.oauthbearer.jwks.endpoint.url", Str, None, Any, ReadOnly,
        "Where the JSON Web Key Set that signs OAUTHBEARER tokens is read (file:// or https://)."),
    broker("sasl.oauthbearer.jwks.endpoint.refresh.ms", Long, Some("3600000"), Any, ReadOnly,
        "How often an https:// key set is fetched again."),
    broker("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", Long, Some("100"), Any, ReadOnly,
        "The first wait before a failed key set fetch is retried."),
    broker("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", Long, Some("10000"), Any,
        ReadOnly, "The longest wait between retries of a failed key set fetch."),
    broker("sasl.oauthbearer.expected.audience", List, None, Any, ReadOnly,
        "Audiences an OAUTHBEARER token must name one of."),
    broker("sasl.oauthbearer.expected.issuer", Str, None, Any, ReadOnly,
        "The issuer an OAUTHBEARER token must name."),
    broker("sasl.oauthbearer.sub.claim.name", Str, Some("sub"), Any, ReadOnly,
        "The claim an OAUTHBEARER token's principal is read from."),
    broker("sasl.oauthbearer.clock.skew.seconds", Int, Some("30"), Any, ReadOnly,
        "The clock difference allowed when checking a token's times."),
    // DynamicListenerConfig: SASL.
    broker("sasl.enabled.mechanisms", List, Some("GSSAPI"), Any, PerBroker,
        "The SASL mechanisms the broker offers.")
    .read(),
    broker("sasl.jaas.config", Password, None, Any, PerBroker,
        "The JAAS login context, in JAAS file syntax.")
    .read(),
    broker("sasl.kerberos.kinit.cmd", Str, Some("/usr/bin/kinit"), Any, PerBroker,
        "The kinit command."),
    broker("sasl.kerberos.min.time.before.relogin", Long, Some("60000"), Any, PerBroker,
        "The least time between Kerberos refresh attempts."),
    broker("sasl.kerberos.principal.to.local.rules", List, Some("DEFAULT"), Any, PerBroker,
        "Rules mapping Kerberos principals to short names."),
    broker("sasl.kerberos.service.name", Str, None, Any, PerBroker,
        "The Kerberos principal name Kafka runs as."),
    broker("sasl.kerberos.ticket.renew.jitter", Double, Some("0.05"), Any, PerBroker,
        "Random jitter added to the Kerberos renewal time."),
    broker("sasl.kerberos.ticket.renew.window.factor", Double, Some("0.8"), Any, PerBroker,
        "The share of a ticket's life after which it is renewed."),
    broker("sasl.login.refresh.buffer.seconds", Short, Some("300"), Between(0, 3600), PerBroker,
        "Time kept before a credential's expiry when it is refreshed."),
    broker("sasl.login.refresh.min.period.seconds", Short, Some("60"), Between(0, 900), PerBroker,
        "The least time between credential refreshes."),
    broker("sasl.login.refresh.window.factor", Double, Some("0.8"), DoubleBetween(0.5, 1.0),
        PerBroker, "The share of a credential's life after which it is refreshed."),
    broker("sasl.login.refresh.window.jitter", Double, Some("0.05"), DoubleBetween(0.0, 0.25),
        PerBroker, "Random jitter added to the credential refresh time."),
    broker("sasl.mechanism.inter.broker.protocol", Str, Some("GSSAPI"), Any, PerBroker,
        "The SASL mechanism brokers use with each other.")
    .read(),
    // DynamicListenerConfig: connection limits and network threads (cluster-level,
    // Kafka's `ClusterLevelListenerConfigs`), and SocketServer's own.
    broker("max.connection.creation.rate", Int, Some(INT_MAX), AtLeast(0), ClusterWide,
        "New connections accepted per second.")
    .read(),
    broker("max.connections", Int, Some(INT_MAX), AtLeast(0), ClusterWide,
        "Connections the broker accepts at once.")
    .read(),
    broker("max.connections.per.ip", Int, Some(INT_MAX), AtLeast(0), ClusterWide,
        "Connections accepted at once from one address.")
    .read(),
    broker("max.connections.per.ip.overrides", Str, Some(""), Any, ClusterWide,
        "Per-address connection limits, host:count,...")
    .read(),
    broker("num.network.threads", Int, Some("3"), AtLeast(1), ClusterWide,
        "Threads that read requests and write responses."),
    // DynamicProducerStateManagerConfig.
    broker("producer.id.expiration.ms", Int, Some("86400000"), AtLeast(1), ClusterWide,
        "How long an idle producer id's state is kept."),
    broker("transaction.partition.verification.enable", Boolean, Some("true"), Any, ClusterWide,
        "Whether transactional appends are verified (KIP-890)."),
    // DynamicRemoteLogConfig and DynamicReplicationConfig (tiered storage).
    broker("remote.fetch.max.wait.ms", Int, Some("500"), AtLeast(1), ClusterWide,
        "The longest a fetch of remote data waits."),
    broker("remote.list.offsets.request.timeout.ms", Long, Some("30000"), AtLeast(1), ClusterWide,
        "The timeout of a ListOffsets answered from remote storage."),
    broker("remote.log.index.file.cache.total.size.bytes", Long, Some("1073741824"), AtLeast(1),
        ClusterWide, "The size of the remote index file cache."),
    broker("remote.log.manager.copier.thread.pool.size", Int, Some("10"), AtLeast(1), ClusterWide,
        "Threads that copy segments to remote storage."),
    broker("remote.log.manager.copy.max.bytes.per.second", Long, Some(LONG_MAX), AtLeast(1),
        ClusterWide, "The throttle on copying to remote storage."),
    broker("remote.log.manager.expiration.thread.pool.size", Int, Some("10"), AtLeast(1),
        ClusterWide, "Threads that expire remote segments."),
    broker("remote.log.manager.fetch.max.bytes.per.second", Long, Some(LONG_MAX), AtLeast(1),
        ClusterWide, "The throttle on reading from remote storage."),
    broker("remote.log.manager.follower.thread.pool.size", Int, Some("2"), AtLeast(1), ClusterWide,
        "Threads that follow remote log metadata."),
    broker("remote.log.reader.threads", Int, Some("10"), AtLeast(1), ClusterWide,
        "Threads that read remote segments."),
    broker("follower.fetch.last.tiered.offset.enable", Boolean, Some("false"), Any, ClusterWide,
        "Whether a new follower starts from the last tiered offset (KIP-1023)."),
];

/// The topic config named `name`.
#[must_use]
pub fn topic_key(name: &str) -> Option<&'static ConfigKey> {
    CONFIG_KEYS.iter().find(|k| k.is_topic() && k.name == name)
}

/// The broker key named `name`.
#[must_use]
pub fn broker_key(name: &str) -> Option<&'static ConfigKey> {
    CONFIG_KEYS.iter().find(|k| !k.is_topic() && k.name == name)
}

/// Every topic config, in name order.
pub fn topic_keys() -> impl Iterator<Item = &'static ConfigKey> {
    CONFIG_KEYS.iter().filter(|k| k.is_topic())
}

/// Every broker key.
pub fn broker_keys() -> impl Iterator<Item = &'static ConfigKey> {
    CONFIG_KEYS.iter().filter(|k| !k.is_topic())
}

/// The topic config whose broker synonym is `broker_key` (`retention.ms` for
/// `log.retention.ms`), if it is one.
#[must_use]
pub fn topic_of_synonym(broker_key: &str) -> Option<&'static ConfigKey> {
    topic_keys().find(|k| k.synonym == Some(broker_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_named_once_per_kind() {
        for (i, k) in CONFIG_KEYS.iter().enumerate() {
            assert!(
                CONFIG_KEYS[..i]
                    .iter()
                    .all(|o| o.name != k.name || o.is_topic() != k.is_topic()),
                "{} twice",
                k.name
            );
            assert!(!k.doc.is_empty() && !k.doc.contains('\n'), "{}", k.name);
        }
    }

    #[test]
    fn topic_keys_come_first_in_name_order() {
        let n = topic_keys().count();
        assert!(CONFIG_KEYS[..n].iter().all(ConfigKey::is_topic));
        assert!(CONFIG_KEYS[..n].windows(2).all(|w| w[0].name < w[1].name));
    }

    #[test]
    fn every_synonym_is_a_dynamic_broker_key_checked_like_its_topic_config() {
        for t in topic_keys() {
            assert!(t.default.is_some(), "{}", t.name);
            assert!(!t.strata_reads && !t.thread_pool, "{}", t.name);
            let Some(s) = t.synonym else { continue };
            let b = broker_key(s).unwrap_or_else(|| panic!("{s}, synonym of {}", t.name));
            assert_eq!(b.scope, Scope::ClusterWide, "{s}");
            assert_eq!(b.value_type, t.value_type, "{s}");
            assert_eq!(b.validator, t.validator, "{s}");
            assert_eq!(topic_of_synonym(s).map(|k| k.name), Some(t.name));
            // Unless Strata reads it (and it starts unset), it defaults to the topic's.
            if !b.strata_reads {
                assert_eq!(b.default, t.default, "{s}");
            }
        }
        assert!(broker_keys().all(|b| b.synonym.is_none()));
    }

    #[test]
    fn every_default_passes_its_own_check() {
        for k in CONFIG_KEYS {
            if let Some(d) = k.default {
                assert_eq!(k.check(d), Ok(()), "{}={d}", k.name);
            }
        }
    }

    #[test]
    fn flags_follow_the_kinds() {
        assert!(
            broker_keys()
                .filter(|k| k.thread_pool)
                .all(ConfigKey::is_dynamic)
        );
        assert_eq!(broker_keys().filter(|k| k.thread_pool).count(), 4);
        assert!(broker_key("ssl.keystore.password").unwrap().is_sensitive());
        assert!(topic_key("cleanup.policy").unwrap().is_list());
        assert!(!topic_key("retention.ms").unwrap().is_list());
        assert_eq!(
            topic_of_synonym("log.retention.ms").unwrap().name,
            "retention.ms"
        );
        assert!(topic_of_synonym("log.retention.hours").is_none());
        assert!(broker_key("retention.ms").is_none());
        assert!(topic_key("log.retention.ms").is_none());
    }
}
