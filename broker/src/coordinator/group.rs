//! The two group coordinators, as Kafka lays them out (`group/classic`, `group/consumer`).
//!
//! - [`classic`]: the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): a
//!   sans-IO core and its tokio driver.
//! - [`consumer`]: the KIP-848 consumer protocol (ConsumerGroupHeartbeat): a sans-IO core,
//!   the server-side assignors, and its tokio driver.

pub mod classic;
pub mod consumer;
