//! The crate's error type. The broker maps each variant to a Kafka error code in one
//! exhaustive match, so variants stay distinct even where Kafka's messages look alike.

use std::fmt;
use std::io;
use std::path::PathBuf;

use strata_protocol::record_batch::BatchError;
use strata_storage::LogError;
use thiserror::Error;
use uuid::Uuid;

use crate::record::DecodeError;

/// Everything that can go wrong reading, validating or writing cluster metadata.
#[derive(Debug, Error)]
pub enum MetadataError {
    /// TOPIC_ALREADY_EXISTS.
    #[error("topic '{0}' already exists")]
    TopicAlreadyExists(String),
    /// INVALID_TOPIC_EXCEPTION.
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopicName {
        name: String,
        reason: InvalidTopicNameReason,
    },
    /// INVALID_PARTITIONS: the count is 0, below -1, or above the per-operation cap.
    #[error(
        "invalid partition count {0}: must be between 1 and {max}, or -1 for the broker default",
        max = crate::controller::MAX_PARTITIONS_PER_TOPIC
    )]
    InvalidPartitions(i32),
    /// INVALID_REPLICATION_FACTOR: more replicas than live brokers to hold them.
    #[error(
        "invalid replication factor {requested}: must be at least 1 (or -1 for the default) \
         and at most the {available_brokers} live (registered and unfenced) broker(s)"
    )]
    InvalidReplicationFactor {
        requested: i16,
        available_brokers: usize,
    },
    /// INVALID_CONFIG.
    #[error("invalid value {value:?} for config '{key}': {reason}")]
    InvalidConfig {
        key: String,
        value: Option<String>,
        reason: ConfigValueError,
    },
    /// INVALID_PARTITIONS: CreatePartitions asked for no more partitions than the topic has.
    #[error("{0}")]
    PartitionCountNotIncreased(String),
    /// INVALID_REPLICA_ASSIGNMENT: a manual assignment of new partitions is not usable.
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    /// UNKNOWN_TOPIC_OR_PARTITION: no live topic has this name.
    #[error("unknown topic '{0}'")]
    UnknownTopic(String),
    /// UNKNOWN_TOPIC_ID: no live topic has this id (KIP-516).
    #[error("unknown topic id {0}")]
    UnknownTopicId(Uuid),
    /// BROKER_ID_NOT_REGISTERED: a broker asked for producer ids before registering.
    #[error("broker {0} is not registered")]
    BrokerNotRegistered(i32),
    /// UNKNOWN_SERVER_ERROR, as Kafka's `ProducerIdControlManager` answers: the next block
    /// would pass `i64::MAX`.
    #[error("producer ids are exhausted: the next block would start at {next_producer_id}")]
    ProducerIdsExhausted { next_producer_id: i64 },
    /// A record in the metadata log (or handed to `decode`) is not a valid record.
    /// `offset` is its log offset when it came from the log.
    #[error("corrupt metadata record{}: {source}", fmt_offset(*.offset))]
    CorruptRecord {
        offset: Option<i64>,
        source: DecodeError,
    },
    /// A batch in the metadata log is damaged or not one we write (e.g. compressed).
    /// Storage recovery truncates a torn tail, so this means damage it could not see.
    #[error("corrupt metadata log batch at offset {offset}: {source}")]
    CorruptBatch { offset: i64, source: BatchError },
    /// A record decoded fine but contradicts the image it was applied to: a bug or a
    /// log written by someone else. Replay stops rather than serve a wrong image.
    #[error("metadata record{} cannot be applied: {source}", fmt_offset(*.offset))]
    InconsistentRecord {
        offset: Option<i64>,
        source: ApplyError,
    },
    /// `meta.properties` names a different `node.id` than the one configured: this log
    /// dir belongs to another node, and using it would impersonate that node.
    #[error(
        "{path} belongs to node.id={stored}, but this node is configured as node.id={configured}"
    )]
    NodeIdMismatch {
        path: PathBuf,
        configured: i32,
        stored: i32,
    },
    /// `meta.properties` exists but cannot be used.
    #[error("{path}: {reason}")]
    InvalidMetaProperties {
        path: PathBuf,
        reason: MetaPropertiesError,
    },
    /// Reading or writing a file outside the log (meta.properties).
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// The metadata log failed.
    #[error(transparent)]
    Storage(#[from] LogError),
    /// An earlier write failed after reaching the log, so what is durable is unknown
    /// (an fsync error may have dropped dirty pages). Like Kafka's controller on a fault,
    /// we refuse further writes; a restart replays whatever is on disk.
    #[error("the metadata log failed an earlier write; restart the node to recover")]
    LogFailed,
    /// This node is not the active controller (the metadata quorum's leader), or stopped
    /// being it before the write committed: Kafka's NOT_CONTROLLER, on which clients look
    /// the controller up again and retry.
    #[error("this node is not the active controller")]
    NotController,
    /// The write was proposed but did not commit in time (a quorum without a majority):
    /// Kafka's REQUEST_TIMED_OUT. It may still commit later.
    #[error("the metadata write did not commit in time")]
    Timeout,
    /// A metadata entry of the quorum could not be decoded.
    #[error("corrupt metadata entry: {0}")]
    CorruptEntry(&'static str),
}

fn fmt_offset(offset: Option<i64>) -> String {
    offset
        .map(|o| format!(" at offset {o}"))
        .unwrap_or_default()
}

/// Why a topic name is illegal (Kafka's `Topic.validate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidTopicNameReason {
    /// The name is empty.
    Empty,
    /// `.` and `..` would be path components of the partition directory.
    DotOrDotDot,
    /// Longer than 249 characters: the partition directory name `<topic>-<partition>`
    /// must fit a 255-byte file name.
    TooLong { len: usize },
    /// Only ASCII alphanumerics, `.`, `_` and `-` are legal.
    IllegalCharacter(char),
}

impl fmt::Display for InvalidTopicNameReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the name is empty"),
            Self::DotOrDotDot => write!(f, "'.' and '..' are not allowed"),
            Self::TooLong { len } => write!(f, "{len} characters, more than the maximum of 249"),
            Self::IllegalCharacter(c) => write!(
                f,
                "illegal character {c:?}; only [a-zA-Z0-9._-] are allowed"
            ),
        }
    }
}

/// Why a config key or value was rejected.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigValueError {
    /// The key is not one of Kafka's topic configs.
    UnknownKey,
    /// Expected an integer of the config's width.
    NotAnInteger,
    /// Expected a decimal number.
    NotANumber,
    /// Expected `true` or `false`.
    NotABoolean,
    /// Below the config's minimum.
    BelowMinimum { min: i64 },
    /// Outside the config's range.
    OutOfRange { min: f64, max: f64 },
    /// Not one of the allowed values (for lists, an element was not).
    NotOneOf { allowed: &'static [&'static str] },
    /// Must be greater than or equal to another config's effective value.
    LessThan {
        other: &'static str,
        other_value: i64,
    },
    /// Not `*` or a list of `partition:broker` pairs (throttled replicas).
    NotAReplicaList,
}

impl fmt::Display for ConfigValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownKey => write!(f, "unknown topic config"),
            Self::NotAnInteger => write!(f, "not an integer in range"),
            Self::NotANumber => write!(f, "not a number"),
            Self::NotABoolean => write!(f, "expected true or false"),
            Self::BelowMinimum { min } => write!(f, "value must be at least {min}"),
            Self::OutOfRange { min, max } => write!(f, "value must be between {min} and {max}"),
            Self::NotOneOf { allowed } => write!(f, "must be one of {}", allowed.join(", ")),
            Self::LessThan { other, other_value } => {
                write!(f, "must not be less than {other} ({other_value})")
            }
            Self::NotAReplicaList => write!(f, "expected '*' or a list of partition:broker pairs"),
        }
    }
}

/// Why `meta.properties` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MetaPropertiesError {
    /// A required key is absent.
    #[error("missing required key '{0}'")]
    MissingKey(&'static str),
    /// A key's value does not parse.
    #[error("invalid value '{value}' for '{key}'")]
    InvalidValue { key: &'static str, value: String },
    /// The file is gone but the metadata log is not: formatting afresh would give the
    /// existing metadata a new cluster id. Kafka refuses to start here too.
    #[error("missing, but {METADATA_LOG} exists; restore meta.properties or remove the log dir", METADATA_LOG = crate::METADATA_LOG_DIR)]
    MissingWithExistingLog,
    /// Version 0 is the ZooKeeper-era format; we only run in KRaft mode (version 1).
    #[error("unsupported meta.properties version {0}; only version 1 (KRaft) is supported")]
    UnsupportedVersion(String),
}

/// A record that decodes but does not fit the image it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApplyError {
    /// A TopicRecord for a name that is already live.
    #[error("topic '{0}' already exists")]
    DuplicateTopicName(String),
    /// A TopicRecord reusing a live topic id.
    #[error("topic id {0} already exists")]
    DuplicateTopicId(Uuid),
    /// A record naming a topic id that is not live.
    #[error("unknown topic id {0}")]
    UnknownTopicId(Uuid),
    /// A topic ConfigRecord naming a topic that is not live.
    #[error("config record for unknown topic '{0}'")]
    UnknownTopicName(String),
    /// A PartitionRecord whose id would leave a gap (or is negative): partitions are
    /// numbered densely from 0.
    #[error(
        "partition {partition} of topic {topic_id} is out of sequence; the topic has {existing} partitions"
    )]
    PartitionOutOfSequence {
        topic_id: Uuid,
        partition: i32,
        existing: usize,
    },
    /// A RegisterBrokerRecord without endpoints.
    #[error("broker {0} registered without endpoints")]
    NoEndpoints(i32),
    /// A ProducerIdsRecord that does not move the next producer id forward.
    #[error("next producer id {next_producer_id} is not above the current {current}")]
    ProducerIdsNotIncreasing { next_producer_id: i64, current: i64 },
    /// A broker-state record (fence, unfence, registration change, unregister) for a
    /// broker that is not registered.
    #[error("record for unregistered broker {0}")]
    UnknownBroker(i32),
    /// A broker-state record for another registration of the broker than the current one.
    #[error(
        "record for broker {broker_id} at epoch {record_epoch}, but its registration has epoch \
         {registered_epoch}"
    )]
    BrokerEpochMismatch {
        broker_id: i32,
        record_epoch: i64,
        registered_epoch: i64,
    },
    /// A PartitionChangeRecord for a partition the topic does not have.
    #[error("change to unknown partition {partition} of topic {topic_id}")]
    UnknownPartition { topic_id: Uuid, partition: i32 },
}

/// Why the controller refused a broker's registration, heartbeat or unregistration. Each
/// variant is one Kafka error code, named in its doc.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClusterControlError {
    /// BROKER_ID_NOT_REGISTERED: the broker has no registration.
    #[error("broker {0} is not registered")]
    BrokerNotRegistered(i32),
    /// STALE_BROKER_EPOCH: the request comes from another registration of the broker
    /// (KIP-631), such as a process that has since been replaced.
    #[error("broker {broker_id} sent epoch {requested}, but its registration has epoch {current}")]
    StaleBrokerEpoch {
        broker_id: i32,
        requested: i64,
        current: i64,
    },
    /// DUPLICATE_BROKER_REGISTRATION: another incarnation of this broker id still has a
    /// live session, so two processes would claim one id.
    #[error("another incarnation of broker {0} is registered and its session is live")]
    DuplicateBrokerRegistration(i32),
    /// INVALID_REGISTRATION: the registration cannot be imaged.
    #[error("broker {broker_id}'s registration is invalid: {reason}")]
    InvalidRegistration {
        broker_id: i32,
        reason: &'static str,
    },
}

/// A per-partition ElectLeaders error (Kafka's codes), returned as data in the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ElectionError {
    /// UNKNOWN_TOPIC_OR_PARTITION.
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// ELECTION_NOT_NEEDED: the preferred replica already leads (PREFERRED), or the
    /// partition has a leader (UNCLEAN).
    #[error("leader election not needed")]
    ElectionNotNeeded,
    /// PREFERRED_LEADER_NOT_AVAILABLE: the preferred replica is not live or not in sync.
    #[error("the preferred leader is not available")]
    PreferredLeaderNotAvailable,
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE: no live replica can lead, even uncleanly.
    #[error("no eligible leader is available")]
    EligibleLeadersNotAvailable,
}

/// A per-partition AlterPartition error (Kafka's codes), returned as data in the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AlterPartitionError {
    /// UNKNOWN_TOPIC_ID: no live topic has the request's topic id (AlterPartition v2+).
    #[error("unknown topic id")]
    UnknownTopicId,
    /// UNKNOWN_TOPIC_OR_PARTITION: the topic has no such partition.
    #[error("unknown partition")]
    UnknownTopicOrPartition,
    /// NOT_CONTROLLER: the request carries a newer leader or partition epoch than this
    /// controller knows, so this controller is likely stale; the leader should look for
    /// the new one (Kafka's `validateAlterPartitionData`).
    #[error("the request is newer than this controller's state")]
    NotController,
    /// FENCED_LEADER_EPOCH: the request's leader epoch is older than the partition's.
    #[error("the leader epoch is stale")]
    FencedLeaderEpoch,
    /// INVALID_UPDATE_VERSION: the request's partition epoch is older than the
    /// partition's (KIP-497), so it was computed from outdated state.
    #[error("the partition epoch is stale")]
    InvalidUpdateVersion,
    /// INVALID_REQUEST: the request is malformed for this partition.
    #[error("invalid request: {0}")]
    InvalidRequest(InvalidAlterPartition),
    /// INELIGIBLE_REPLICA: a proposed ISR member is not registered, fenced, in controlled
    /// shutdown, or registered under another broker epoch (KIP-903).
    #[error("the new ISR holds the ineligible replica {0}")]
    IneligibleReplica(i32),
    /// NEW_LEADER_ELECTED: the change was written but moved leadership away from the
    /// requester, which must refresh its metadata.
    #[error("a new leader was elected")]
    NewLeaderElected,
}

/// Why an AlterPartition entry is INVALID_REQUEST.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum InvalidAlterPartition {
    /// The requester does not lead the partition.
    #[error("the requesting broker is not the leader")]
    NotLeader,
    /// The new ISR names a broker twice or one that is not a replica.
    #[error("the new ISR is not a set of the partition's replicas")]
    IsrNotInReplicas,
    /// The new ISR leaves out the leader.
    #[error("the new ISR does not include the leader")]
    IsrWithoutLeader,
    /// KIP-704: a recovering leader may not grow the ISR past itself.
    #[error("a recovering leader may not have other ISR members")]
    RecoveringWithOtherMembers,
    /// KIP-704: a recovered partition cannot go back to recovering.
    #[error("the leader recovery state cannot go from RECOVERED to RECOVERING")]
    RecoveredToRecovering,
}

/// A per-partition AlterPartitionReassignments error (KIP-455, Kafka's codes and
/// messages from `ReplicationControlManager.alterPartitionReassignment`), returned as
/// data in the response.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReassignmentError {
    /// UNKNOWN_TOPIC_OR_PARTITION: no live topic has this name.
    #[error("Unable to find a topic named {0}.")]
    UnknownTopic(String),
    /// UNKNOWN_TOPIC_OR_PARTITION: the topic has no such partition.
    #[error("Unable to find partition {topic}:{partition}.")]
    UnknownPartition { topic: String, partition: i32 },
    /// INVALID_REPLICA_ASSIGNMENT: the target replica list is not usable.
    #[error("{0}")]
    InvalidReplicaAssignment(InvalidReassignment),
    /// INVALID_REPLICATION_FACTOR: KIP-860's `allow_replication_factor_change` is false
    /// and the target has another length than the replica set the partition is headed for.
    #[error("The replication factor is changed from {from} to {to}")]
    ReplicationFactorChanged { from: usize, to: usize },
    /// NO_REASSIGNMENT_IN_PROGRESS: a cancellation for a partition that is not being
    /// reassigned.
    #[error("No partition reassignment is in progress for the topic and partition.")]
    NoReassignmentInProgress,
}

/// Why a reassignment target is INVALID_REPLICA_ASSIGNMENT, with Kafka's messages.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidReassignment {
    /// The target names no replica.
    #[error("The manual partition assignment includes an empty replica list.")]
    Empty,
    /// The target names a broker that is not registered.
    #[error(
        "The manual partition assignment includes broker {0}, but no such broker is registered."
    )]
    UnregisteredBroker(i32),
    /// The target names a broker twice.
    #[error("The manual partition assignment includes the broker {0} more than once.")]
    DuplicateBroker(i32),
    /// A cancellation would leave no ISR member but one taken from outside the ISR, and the
    /// topic does not allow unclean leader election.
    #[error(
        "Unable to revert partition assignment for {topic}:{partition} because it would \
         require an unclean leader election."
    )]
    UncleanRevert { topic: String, partition: i32 },
}
