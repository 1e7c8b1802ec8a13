//! Partition replication state for Strata: the leader's ISR and high watermark, the
//! follower's fetch position and truncation by leader epoch. Sans-IO (ARCHITECTURE.md
//! decision 8): every input, the clock included, comes from the caller, and every output is
//! a value; the log and its epoch cache belong to the caller.
//!
//! # Layout
//!
//! - [`leader`]: [`LeaderState`], one partition led here: followers' progress and
//!   `lastCaughtUpTimeMs`, ISR expansion and shrinking proposed through AlterPartition
//!   (KIP-497), the high watermark over the maximal ISR, acks=all completion and
//!   `min.insync.replicas`, OffsetForLeaderEpoch answers, KIP-392's preferred read replica.
//! - [`follower`]: [`FollowerState`], one partition followed here: the next request, the
//!   truncation on a diverging epoch (KIP-279 / KIP-595) or an OffsetForLeaderEpoch answer,
//!   error handling, consumer fetches from a follower.
//! - [`fetch`]: the checks every fetch goes through: leader epoch (KIP-320), diverging
//!   epoch, offset range, the high watermark bound for consumers.
//! - [`selector`]: Kafka's `RackAwareReplicaSelector`.
//! - [`error`]: [`ReplicationError`], one variant per Kafka error code returned.
//! - `simulation` (tests only): a seeded simulation of a leader, followers and a controller
//!   stand-in with crashes, power and disk loss, cut links, zombie leaders cut off from the
//!   controller and leader changes; `REPL_SIM_SEED=<n>` replays one seed.
//!
//! # Invariants
//!
//! - A leader's high watermark never moves back, and never passes the log end offset of a
//!   member of the maximal ISR (the committed ISR plus any proposed one).
//! - The ISR changes only when the controller commits it; at most one AlterPartition is in
//!   flight.
//! - A follower joins the ISR only when it holds the high watermark and the start of the
//!   current leader epoch, so every acknowledged record is on every ISR member.
//! - Consumers read only below the high watermark of the replica they fetch from.
//!
//! # Where the I/O lives
//!
//! The broker drives this crate: its follower fetchers (`broker/src/replica/fetcher.rs`)
//! send the Fetch and OffsetForLeaderEpoch requests a [`FollowerState`] asks for, the produce
//! and fetch handlers consult the partition's [`LeaderState`], the metadata image's changes
//! call [`LeaderState::become_leader`] and [`LeaderState::on_partition_change`], and
//! `broker/src/replica/isr.rs` sends the AlterPartition proposals and retries them.
//!
//! Left out: the last stable offset for `read_committed` (transactions are not served), and
//! KIP-966's eligible leader replicas.

pub mod error;
#[cfg(test)]
mod fault;
pub mod fetch;
pub mod follower;
pub mod leader;
pub mod selector;
#[cfg(test)]
mod simulation;

pub use error::ReplicationError;
pub use fetch::{EpochEndOffset, FetchAnswer, FetchPartition};
pub use follower::{FollowerRequest, FollowerState, LocalLog, Truncation, TruncationMode};
pub use leader::{
    AlterPartitionOutcome, AlterPartitionProposal, IsrMember, LeaderState, PartitionRegistration,
    ReplicationConfig,
};
