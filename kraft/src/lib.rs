//! # strata-kraft
//!
//! The metadata quorum. Every change to cluster state (a broker registered, a topic
//! created or deleted, a config set) is a record in the metadata log
//! `__cluster_metadata-0`, and brokers serve from a [`MetadataImage`] built only by
//! applying those records. Every node, a lone one included, writes them through the Raft
//! quorum: the broker's quorum driver (`strata_broker::quorum`) runs [`raft::RaftNode`] and
//! proposes each controller operation's records as one entry.
//!
//! # Layout
//!
//! | file | what it holds |
//! |---|---|
//! | `record/mod.rs` | [`MetadataRecord`]: Kafka's metadata framing, record versions and the dispatch `match` |
//! | `record/{register_broker,topic,partition,config,remove_topic,producer_ids,client_quota}.rs` | one record type each: byte layout, encode, decode |
//! | `record/user_scram_credential.rs` | `UserScramCredentialRecord` and `RemoveUserScramCredentialRecord` (types 11, 12) |
//! | `record/{partition_change,fence_broker,unfence_broker,unregister_broker,broker_registration_change}.rs` | the leader/ISR change and broker-lifecycle records (types 5, 7, 8, 1, 17), tagged fields included |
//! | `record/compact.rs` | Kafka's flexible ("compact") field encoding, reader never panics |
//! | `image.rs` | [`MetadataImage`] and the pure [`MetadataImage::apply`] |
//! | `image_records.rs` | [`MetadataImage::records`]: the image as the records that rebuild it (a snapshot's body, KIP-630) |
//! | `controller.rs` | sans-IO validation: request + image → records or [`MetadataError`] |
//! | `cluster_control/` | the active controller's cluster state machine, sans-IO: broker registration, heartbeats and fencing ([`cluster_control::BrokerHeartbeats`]), controlled shutdown, leader election, AlterPartition, rack-aware placement |
//! | `client_quotas.rs` | client quotas (KIP-546) in the image: AlterClientQuotas' checks and records, DescribeClientQuotas' filter |
//! | `scram.rs` | SCRAM credentials (KIP-554) in the image: AlterUserScramCredentials' checks, key derivation and records, DescribeUserScramCredentials' answer |
//! | `config_catalogue.rs` | [`config_catalogue::CONFIG_KEYS`]: every topic and broker config key with its type, default, validator, scope, synonym and doc |
//! | `topic_config.rs` | Kafka's topic config names, defaults and value checks |
//! | `meta_properties.rs` | `meta.properties` (cluster id, node id) and Kafka's UUID strings |
//! | `quorum_state.rs` | the `quorum-state` file (epoch, vote, leader) in Kafka's JSON format, replaced atomically |
//! | `raft/` | [`raft::RaftNode`]: the sans-IO KIP-595 Raft core (driven by the broker's `quorum` module) and, in tests, its deterministic simulator |
//! | `error.rs` | [`MetadataError`], [`ClusterControlError`] and the per-partition election and AlterPartition errors |
//!
//! # Invariants
//!
//! - The image changes only through `apply`, on the controller path and on replay alike,
//!   so what a restart rebuilds is exactly what was served before it.
//! - One controller operation is one Raft entry, committed before the image is published
//!   or the caller answered: an operation is durable and visible whole, or not at all.
//! - Published images are immutable (`Arc<MetadataImage>`); readers never block the writer.
//! - Decoding never panics and never allocates more than its input could hold.
//! - `cluster_control` keeps every partition leader a live (unfenced, not shutting down)
//!   member of its ISR, never empties an ISR, and only moves leader and partition epochs
//!   forward; a seeded randomized run checks this after every step.

pub mod acl;
pub mod acl_control;
pub mod client_quotas;
pub mod cluster_control;
pub mod config_catalogue;
mod controller;
pub mod entry;
mod error;
mod image;
mod image_records;
mod meta_properties;
pub mod quorum_state;
pub mod raft;
pub mod record;
pub mod scram;
mod topic_config;

pub use controller::{
    BrokerRegistration, ControllerConfig, CreateTopic, MAX_PARTITIONS_PER_TOPIC,
    MAX_TOPIC_NAME_LEN, create_partitions_records, create_topic_records, delete_topic_records,
    is_assignable_topic_id, producer_ids_records, register_broker_records,
    set_broker_config_records, set_topic_config_records, validate_topic_name,
};
pub use error::{
    AlterPartitionError, ApplyError, ClusterControlError, ConfigValueError, ElectionError,
    InvalidAlterPartition, InvalidReassignment, InvalidTopicNameReason, MetaPropertiesError,
    MetadataError, ReassignmentError,
};
pub use image::{BrokerImage, MetadataImage, PartitionImage, TopicImage};
pub use meta_properties::{
    META_PROPERTIES_FILE, MetaProperties, cluster_id_from_bootstrap_servers,
    cluster_id_from_voters, generate_cluster_id, kafka_uuid_string, parse_kafka_uuid,
};
pub use record::MetadataRecord;
/// Directory of the metadata log partition inside the log dir, as in Kafka.
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";
pub use topic_config::{
    topic_config_default, topic_config_defaults, topic_config_type, validate_topic_config,
    validate_topic_configs,
};
pub use uuid::Uuid;
