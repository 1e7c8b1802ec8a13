//! The replication error type. The broker maps each variant to a Kafka error code in one
//! place; the comment on each variant names the code.

use thiserror::Error;

/// A per-partition refusal of a fetch, a produce or an OffsetForLeaderEpoch.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplicationError {
    /// FENCED_LEADER_EPOCH: the request carries a leader epoch older than ours; the sender
    /// must refresh its metadata.
    #[error("leader epoch {requested} is older than the current {current}")]
    FencedLeaderEpoch { requested: i32, current: i32 },
    /// UNKNOWN_LEADER_EPOCH: the request carries a leader epoch newer than ours; we have not
    /// seen the metadata yet, so the sender retries.
    #[error("leader epoch {requested} is newer than the current {current}")]
    UnknownLeaderEpoch { requested: i32, current: i32 },
    /// NOT_LEADER_OR_FOLLOWER: a request that only a leader may serve, or one from a replica
    /// not assigned to the partition.
    #[error("broker {node} cannot serve this request for the partition")]
    NotLeaderOrFollower { node: i32 },
    /// OFFSET_OUT_OF_RANGE: the fetch offset lies outside the log, or the fetcher's last
    /// fetched epoch is unknown to the leader's epoch cache.
    #[error("offset {requested} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        requested: i64,
        log_start: i64,
        log_end: i64,
    },
    /// NOT_ENOUGH_REPLICAS: an acks=all produce refused before the append because the ISR is
    /// smaller than `min.insync.replicas`.
    #[error("ISR of {isr} is below min.insync.replicas {min_isr}")]
    NotEnoughReplicas { isr: usize, min_isr: usize },
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND: an acks=all produce whose records reached the high
    /// watermark while the ISR was below `min.insync.replicas`.
    #[error("ISR of {isr} fell below min.insync.replicas {min_isr} after the append")]
    NotEnoughReplicasAfterAppend { isr: usize, min_isr: usize },
}
