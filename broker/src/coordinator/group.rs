//! The two group coordinators, as Kafka lays them out (`group/classic`, `group/consumer`).
//!
//! - [`classic`]: the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): a
//!   sans-IO core and its tokio driver.
//! - [`consumer`]: the KIP-848 consumer protocol (ConsumerGroupHeartbeat): a sans-IO core,
//!   the server-side assignors, and its tokio driver.

pub mod classic;
pub mod consumer;

/// Why OffsetDelete refuses a group, or one topic of it (Kafka's
/// `OffsetMetadataManager.deleteOffsets` and `ClassicGroup.validateOffsetDelete`); mapped
/// to Kafka codes in the server's `error::offset_delete_refusal_code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OffsetDeleteRefusal {
    /// No coordinator knows the group and it has no committed offsets.
    #[error("the group does not exist")]
    GroupNotFound,
    /// The group has members and its subscriptions are not known (it does not use the
    /// consumer protocol): nobody can tell which topics it still reads.
    #[error("the group has members")]
    NonEmpty,
    /// The group subscribes to the topic.
    #[error("the group subscribes to the topic")]
    SubscribedTopic,
}
