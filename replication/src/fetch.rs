//! The checks every replica makes on a Fetch or an OffsetForLeaderEpoch before reading:
//! the requester's leader epoch (KIP-320), its last fetched epoch against the epoch cache
//! (KIP-595's diverging epoch, Fetch v12+), and the offset range a reader may see.

use strata_storage::leader_epoch::{LeaderEpochCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

use crate::ReplicationError;

/// `replica_id` of a fetch from a consumer (Kafka's `CONSUMER_REPLICA_ID`).
pub const CONSUMER_REPLICA_ID: i32 = -1;
/// `current_leader_epoch` / `last_fetched_epoch` when the requester sends none.
pub const NO_EPOCH: i32 = -1;

/// One partition of a Fetch request, as the replication state needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPartition {
    /// The fetching follower's node id, or [`CONSUMER_REPLICA_ID`] for a consumer.
    pub replica_id: i32,
    /// The first offset wanted; for a follower, its log end offset.
    pub fetch_offset: i64,
    /// The leader epoch the requester believes current (Fetch v9+), or [`NO_EPOCH`].
    pub current_leader_epoch: i32,
    /// The epoch of the last record the follower holds (Fetch v12+), or [`NO_EPOCH`].
    pub last_fetched_epoch: i32,
    /// The follower's broker epoch (Fetch v15+ `ReplicaEpoch`, KIP-903), or -1: the leader
    /// names it in ISR proposals so that the controller refuses a member that has since
    /// registered again, perhaps with an empty disk.
    pub replica_epoch: i64,
    /// The follower's own log start offset (Fetch v5+), or -1 from a consumer: KIP-392 sends
    /// consumers only to a replica that still holds their offset.
    pub log_start_offset: i64,
}

impl FetchPartition {
    /// Whether a follower sent it (only followers move the ISR and the high watermark).
    pub fn is_from_follower(&self) -> bool {
        self.replica_id >= 0
    }
}

/// An `(epoch, end offset)` pair: an OffsetForLeaderEpoch answer or a diverging epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The largest epoch at or below the requested one that the replica knows.
    pub epoch: i32,
    /// Where that epoch ends in the replica's log.
    pub end_offset: i64,
}

/// What the replica answers for one partition of a Fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchAnswer {
    /// The high watermark to put in the response.
    pub high_watermark: i64,
    /// The log start offset to put in the response.
    pub log_start_offset: i64,
    /// The log end offset, which a follower uses for its lag.
    pub log_end_offset: i64,
    /// Read records from `fetch_offset` up to, not including, this offset: the log end
    /// for a follower, the high watermark for a consumer. `read_to <= fetch_offset` means
    /// nothing to read.
    pub read_to: i64,
    /// Fetch v12+: the follower's log diverges from ours; no records are read and the
    /// follower truncates (KIP-595 / KIP-279).
    pub diverging_epoch: Option<EpochEndOffset>,
}

/// KIP-320: a request's `current_leader_epoch` must match the replica's.
///
/// # Errors
///
/// [`ReplicationError::FencedLeaderEpoch`] when the request's is older,
/// [`ReplicationError::UnknownLeaderEpoch`] when it is newer.
pub fn check_leader_epoch(requested: i32, current: i32) -> Result<(), ReplicationError> {
    if requested == NO_EPOCH || requested == current {
        Ok(())
    } else if requested < current {
        Err(ReplicationError::FencedLeaderEpoch { requested, current })
    } else {
        Err(ReplicationError::UnknownLeaderEpoch { requested, current })
    }
}

/// The local log's offsets a read is checked against.
#[derive(Debug, Clone, Copy)]
pub struct LogBounds<'a> {
    /// The first offset still in the log.
    pub log_start_offset: i64,
    /// The offset the next record will take.
    pub log_end_offset: i64,
    /// The replica's high watermark.
    pub high_watermark: i64,
    /// The log's epoch cache.
    pub epochs: &'a LeaderEpochCache,
}

/// Kafka's `Partition.readRecords` checks, after the epoch check: with a last fetched epoch,
/// that the epoch cache knows it and the offset is not below the log start, then the
/// diverging epoch; then the offset range. Followers may read up to the log end, consumers up to the high
/// watermark (an offset between the two reads nothing; KIP-392 consumers of a follower see
/// its own high watermark).
///
/// # Errors
///
/// [`ReplicationError::OffsetOutOfRange`] when the fetch offset lies outside
/// `[log_start, log_end]`, or the last fetched epoch is newer than every epoch the log knows.
pub fn answer_read(
    req: &FetchPartition,
    log: LogBounds<'_>,
) -> Result<FetchAnswer, ReplicationError> {
    let out_of_range = ReplicationError::OffsetOutOfRange {
        requested: req.fetch_offset,
        log_start: log.log_start_offset,
        log_end: log.log_end_offset,
    };
    let mut answer = FetchAnswer {
        high_watermark: log.high_watermark,
        log_start_offset: log.log_start_offset,
        log_end_offset: log.log_end_offset,
        read_to: req.fetch_offset,
        diverging_epoch: None,
    };
    if req.last_fetched_epoch >= 0 {
        let (epoch, end_offset) = log
            .epochs
            .end_offset_for(req.last_fetched_epoch, log.log_end_offset);
        if epoch == UNDEFINED_EPOCH || end_offset == UNDEFINED_EPOCH_OFFSET {
            return Err(out_of_range);
        }
        // Below the log start is out of range whether or not the epochs diverge.
        if req.fetch_offset < log.log_start_offset {
            return Err(out_of_range);
        }
        // The follower's last epoch ends earlier here, or we never had it: it must truncate.
        if epoch < req.last_fetched_epoch || end_offset < req.fetch_offset {
            answer.diverging_epoch = Some(EpochEndOffset { epoch, end_offset });
            return Ok(answer);
        }
    }
    if req.fetch_offset < log.log_start_offset || req.fetch_offset > log.log_end_offset {
        return Err(out_of_range);
    }
    answer.read_to = if req.is_from_follower() {
        log.log_end_offset
    } else {
        log.high_watermark
    };
    Ok(answer)
}

/// The OffsetForLeaderEpoch answer from a replica's epoch cache (Kafka's
/// `UnifiedLog.endOffsetForEpoch`): `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` when the
/// cache has no answer.
pub fn end_offset_for_epoch(
    epochs: &LeaderEpochCache,
    leader_epoch: i32,
    log_end_offset: i64,
) -> EpochEndOffset {
    let (epoch, end_offset) = epochs.end_offset_for(leader_epoch, log_end_offset);
    if end_offset == UNDEFINED_EPOCH_OFFSET {
        EpochEndOffset {
            epoch: UNDEFINED_EPOCH,
            end_offset: UNDEFINED_EPOCH_OFFSET,
        }
    } else {
        EpochEndOffset { epoch, end_offset }
    }
}

#[cfg(test)]
mod tests {
    use strata_storage::leader_epoch::EpochEntry;

    use super::*;

    fn cache() -> LeaderEpochCache {
        LeaderEpochCache::from_entries([(1, 0), (3, 10), (5, 20)].map(|(epoch, start_offset)| {
            EpochEntry {
                epoch,
                start_offset,
            }
        }))
    }

    fn follower(fetch_offset: i64, last_fetched_epoch: i32) -> FetchPartition {
        FetchPartition {
            replica_id: 2,
            fetch_offset,
            current_leader_epoch: 5,
            last_fetched_epoch,
            replica_epoch: -1,
            log_start_offset: 0,
        }
    }

    fn bounds(epochs: &LeaderEpochCache) -> LogBounds<'_> {
        LogBounds {
            log_start_offset: 0,
            log_end_offset: 30,
            high_watermark: 25,
            epochs,
        }
    }

    #[test]
    fn leader_epoch_older_is_fenced_newer_is_unknown() {
        assert_eq!(check_leader_epoch(NO_EPOCH, 5), Ok(()));
        assert_eq!(check_leader_epoch(5, 5), Ok(()));
        assert_eq!(
            check_leader_epoch(4, 5),
            Err(ReplicationError::FencedLeaderEpoch {
                requested: 4,
                current: 5
            })
        );
        assert_eq!(
            check_leader_epoch(6, 5),
            Err(ReplicationError::UnknownLeaderEpoch {
                requested: 6,
                current: 5
            })
        );
    }

    #[test]
    fn a_follower_in_step_reads_to_the_log_end() {
        let c = cache();
        let a = answer_read(&follower(28, 5), bounds(&c)).unwrap();
        assert_eq!(
            (a.read_to, a.diverging_epoch, a.high_watermark),
            (30, None, 25)
        );
        // Within an older epoch, still in step.
        let a = answer_read(&follower(15, 3), bounds(&c)).unwrap();
        assert_eq!(a.diverging_epoch, None);
    }

    #[test]
    fn a_follower_past_the_end_of_its_epoch_diverges() {
        let c = cache();
        // Epoch 3 ends at 20 here, the follower has it up to 24.
        let a = answer_read(&follower(24, 3), bounds(&c)).unwrap();
        assert_eq!(
            a.diverging_epoch,
            Some(EpochEndOffset {
                epoch: 3,
                end_offset: 20
            })
        );
        // Epoch 4 never existed here: answer with the floor epoch 3 ending at 20.
        let a = answer_read(&follower(22, 4), bounds(&c)).unwrap();
        assert_eq!(
            a.diverging_epoch,
            Some(EpochEndOffset {
                epoch: 3,
                end_offset: 20
            })
        );
        // An epoch newer than every one we know is out of range.
        assert!(matches!(
            answer_read(&follower(22, 9), bounds(&c)),
            Err(ReplicationError::OffsetOutOfRange { .. })
        ));
    }

    #[test]
    fn offsets_outside_the_log_are_out_of_range() {
        let c = cache();
        assert!(answer_read(&follower(31, NO_EPOCH), bounds(&c)).is_err());
        let mut b = bounds(&c);
        b.log_start_offset = 5;
        assert!(answer_read(&follower(4, NO_EPOCH), b).is_err());
        assert!(answer_read(&follower(5, NO_EPOCH), b).is_ok());
    }

    #[test]
    fn below_the_log_start_is_out_of_range_even_when_diverging() {
        let c = cache();
        let mut b = bounds(&c);
        b.log_start_offset = 25;
        // Epoch 3 ends at 20 here: diverging, but 24 is below the log start first.
        assert!(matches!(
            answer_read(&follower(24, 3), b),
            Err(ReplicationError::OffsetOutOfRange { .. })
        ));
    }

    #[test]
    fn consumers_never_read_above_the_high_watermark() {
        let c = cache();
        let mut req = follower(10, NO_EPOCH);
        req.replica_id = CONSUMER_REPLICA_ID;
        assert_eq!(answer_read(&req, bounds(&c)).unwrap().read_to, 25);
        // Between the high watermark and the log end: nothing, but no error.
        req.fetch_offset = 27;
        let a = answer_read(&req, bounds(&c)).unwrap();
        assert!(a.read_to <= req.fetch_offset);
        req.fetch_offset = 31;
        assert!(answer_read(&req, bounds(&c)).is_err());
    }

    #[test]
    fn end_offset_for_epoch_is_undefined_when_unknown() {
        let c = cache();
        assert_eq!(
            end_offset_for_epoch(&c, 4, 30),
            EpochEndOffset {
                epoch: 3,
                end_offset: 20
            }
        );
        assert_eq!(
            end_offset_for_epoch(&c, 9, 30),
            EpochEndOffset {
                epoch: -1,
                end_offset: -1
            }
        );
    }
}
