//! The follower's side of one partition (Kafka's `AbstractFetcherThread` for one
//! partition): what to fetch next, where to truncate when its log diverges from the
//! leader's (KIP-101, KIP-279, KIP-595), and what to do on errors.

use strata_storage::leader_epoch::{LeaderEpochCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

use crate::ReplicationError;
use crate::fetch::{
    self, EpochEndOffset, FetchAnswer, FetchPartition, LogBounds, NO_EPOCH, check_leader_epoch,
};

/// How the follower learns where its log diverges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncationMode {
    /// Fetch v12+: every fetch carries the last fetched epoch and the leader answers with a
    /// diverging epoch (KIP-595's truncation on fetch).
    OnFetch,
    /// Older leaders: an OffsetForLeaderEpoch round before fetching (KIP-101 / KIP-279).
    OffsetForLeaderEpoch,
}

/// Where the follower is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Must ask OffsetForLeaderEpoch before fetching.
    Truncating,
    /// Fetching.
    Fetching,
    /// The leader is out of range for us: ask its log start and end (ListOffsets).
    OutOfRange,
    /// Our leader epoch is stale; wait for new metadata.
    Fenced,
}

/// The follower's local log, as the state needs it.
#[derive(Debug, Clone, Copy)]
pub struct LocalLog<'a> {
    /// The first offset still in the log.
    pub log_start_offset: i64,
    /// The follower's log end offset.
    pub log_end_offset: i64,
    /// The follower's epoch cache.
    pub epochs: &'a LeaderEpochCache,
}

/// What the follower asks its leader next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerRequest {
    /// A Fetch for this partition.
    Fetch(FetchPartition),
    /// OffsetForLeaderEpoch for `leader_epoch`.
    OffsetForLeaderEpoch {
        /// Our leader epoch, for the leader's fencing check.
        current_leader_epoch: i32,
        /// The epoch whose end we want.
        leader_epoch: i32,
    },
    /// ListOffsets for the leader's log start and end.
    ListOffsets,
    /// Nothing until new metadata.
    Idle,
}

/// What the follower's log must do.
///
/// `To(offset)` truncates the log to `offset` (a no-op when the log ends there) and always
/// truncates the epoch cache from `offset`, so an epoch entry past the last record goes too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// Truncate to this offset (the epoch cache with it), keeping the records before it.
    To(i64),
    /// Drop the whole log and start it at this offset.
    FullyAndStartAt(i64),
}

/// The follower's state for one partition. Sans-IO: the caller sends the requests, applies
/// the records and truncations to the log, and passes the log back in.
#[derive(Debug, Clone)]
pub struct FollowerState {
    /// This broker.
    local_id: i32,
    /// The leader it fetches from.
    leader_id: i32,
    /// The leader epoch from metadata.
    leader_epoch: i32,
    /// This broker's epoch (its registration's), sent in every fetch (KIP-903).
    broker_epoch: i64,
    /// How divergence is found.
    mode: TruncationMode,
    /// Where it is.
    phase: Phase,
    /// The follower's high watermark: the leader's, capped at the local log end.
    high_watermark: i64,
    /// Skips truncation, to show the simulation catches a follower that keeps a divergent
    /// tail.
    #[cfg(test)]
    pub(crate) fault: Option<crate::fault::Fault>,
}

impl FollowerState {
    /// Starts following `leader_id` in `leader_epoch`, with the local high watermark;
    /// `broker_epoch` is this broker's registration epoch.
    pub fn new(
        local_id: i32,
        broker_epoch: i64,
        leader_id: i32,
        leader_epoch: i32,
        mode: TruncationMode,
        high_watermark: i64,
    ) -> Self {
        Self {
            local_id,
            broker_epoch,
            leader_id,
            leader_epoch,
            mode,
            phase: match mode {
                TruncationMode::OnFetch => Phase::Fetching,
                TruncationMode::OffsetForLeaderEpoch => Phase::Truncating,
            },
            high_watermark,
            #[cfg(test)]
            fault: None,
        }
    }

    /// The leader followed.
    pub fn leader_id(&self) -> i32 {
        self.leader_id
    }

    /// The leader epoch followed.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The follower's high watermark.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Before fetching: a log without any epoch cannot prove what it holds, so it is cut back
    /// to the high watermark (Kafka's behaviour for logs from before KIP-101). `None` when
    /// nothing needs doing.
    pub fn initial_truncation(&self, log: LocalLog<'_>) -> Option<Truncation> {
        (log.epochs.latest_epoch().is_none() && log.log_end_offset > self.high_watermark).then_some(
            Truncation::To(self.high_watermark.max(log.log_start_offset)),
        )
    }

    /// The next request for this partition.
    pub fn next_request(&self, log: LocalLog<'_>) -> FollowerRequest {
        match self.phase {
            Phase::Fenced => FollowerRequest::Idle,
            Phase::OutOfRange => FollowerRequest::ListOffsets,
            Phase::Truncating => match log.epochs.latest_epoch() {
                Some(epoch) => FollowerRequest::OffsetForLeaderEpoch {
                    current_leader_epoch: self.leader_epoch,
                    leader_epoch: epoch,
                },
                None => FollowerRequest::Fetch(self.fetch(log, NO_EPOCH)),
            },
            Phase::Fetching => {
                let last = match self.mode {
                    TruncationMode::OnFetch => log.epochs.latest_epoch().unwrap_or(NO_EPOCH),
                    TruncationMode::OffsetForLeaderEpoch => NO_EPOCH,
                };
                FollowerRequest::Fetch(self.fetch(log, last))
            }
        }
    }

    fn fetch(&self, log: LocalLog<'_>, last_fetched_epoch: i32) -> FetchPartition {
        FetchPartition {
            replica_id: self.local_id,
            fetch_offset: log.log_end_offset,
            current_leader_epoch: self.leader_epoch,
            last_fetched_epoch,
            replica_epoch: self.broker_epoch,
            log_start_offset: log.log_start_offset,
        }
    }

    /// A Fetch answer without error. With a diverging epoch, the truncation to apply (no
    /// records came); otherwise the caller appends the records, and the high watermark is
    /// then updated with [`FollowerState::after_append`].
    pub fn on_fetch_answer(
        &mut self,
        answer: &FetchAnswer,
        log: LocalLog<'_>,
    ) -> Option<Truncation> {
        let diverging = answer.diverging_epoch?;
        let (offset, _complete) = self.truncation_offset(diverging, log);
        // With truncation on fetch, the next fetch's last fetched epoch settles any remaining
        // divergence, so no OffsetForLeaderEpoch round is needed.
        self.truncate_to(offset, log)
    }

    /// Records from the leader were appended; the high watermark follows the leader's,
    /// capped at our log end (Kafka's `updateHighWatermark`).
    pub fn after_append(&mut self, leader_high_watermark: i64, log_end_offset: i64) {
        self.high_watermark = leader_high_watermark.min(log_end_offset);
    }

    /// The OffsetForLeaderEpoch answer: where to truncate before fetching again.
    pub fn on_offset_for_leader_epoch(
        &mut self,
        answer: EpochEndOffset,
        log: LocalLog<'_>,
    ) -> Option<Truncation> {
        let (offset, complete) = self.truncation_offset(answer, log);
        if complete {
            self.phase = Phase::Fetching;
        }
        self.truncate_to(offset, log)
    }

    fn truncate_to(&mut self, offset: i64, log: LocalLog<'_>) -> Option<Truncation> {
        #[cfg(test)]
        if self.fault == Some(crate::fault::Fault::SkipTruncation) {
            return None;
        }
        // Even at or past our log end the truncation is returned: the epoch cache may end
        // with an entry of ours no record carries (we led that epoch without writing in it),
        // and truncating the cache from the log end drops it, as Kafka's `truncateTo` does.
        let offset = offset.min(log.log_end_offset);
        self.high_watermark = self.high_watermark.min(offset);
        Some(Truncation::To(offset))
    }

    /// Kafka's `getOffsetTruncationState`: the offset to truncate to for the leader's
    /// `(epoch, end offset)`, and whether that settles the divergence.
    ///
    /// - The leader knows no epoch: our own log end (nothing to learn).
    /// - We hold the leader's epoch: the smaller of its end on either side (KIP-279).
    /// - We do not: the end of our largest epoch below it, and ask again.
    /// - We track no epochs that old: the leader's end offset.
    fn truncation_offset(&self, leader: EpochEndOffset, log: LocalLog<'_>) -> (i64, bool) {
        let leo = log.log_end_offset;
        if leader.end_offset == UNDEFINED_EPOCH_OFFSET {
            return (leo, true);
        }
        if leader.epoch == UNDEFINED_EPOCH {
            return (leader.end_offset.min(leo), true);
        }
        let ours = fetch::end_offset_for_epoch(log.epochs, leader.epoch, leo);
        if ours.end_offset == UNDEFINED_EPOCH_OFFSET {
            (leader.end_offset.min(leo), true)
        } else if ours.epoch != leader.epoch {
            (ours.end_offset.min(leo), false)
        } else {
            (ours.end_offset.min(leader.end_offset).min(leo), true)
        }
    }

    /// A per-partition error in a Fetch or OffsetForLeaderEpoch answer (Kafka's
    /// `AbstractFetcherThread` handling): a stale epoch waits for metadata, an offset out of
    /// range asks the leader's offsets; the others are retried as they are.
    pub fn on_error(&mut self, error: &ReplicationError) {
        match error {
            ReplicationError::FencedLeaderEpoch { .. } => self.phase = Phase::Fenced,
            ReplicationError::OffsetOutOfRange { .. } => self.phase = Phase::OutOfRange,
            ReplicationError::UnknownLeaderEpoch { .. }
            | ReplicationError::NotLeaderOrFollower { .. }
            | ReplicationError::NotEnoughReplicas { .. }
            | ReplicationError::NotEnoughReplicasAfterAppend { .. } => {}
        }
    }

    /// The leader's log start and end after OFFSET_OUT_OF_RANGE (Kafka's
    /// `fetchOffsetAndTruncate`): a log ahead of the leader's end is cut back to it (only
    /// an unclean election makes that possible); one behind the leader's start restarts
    /// at it.
    pub fn on_leader_offsets(
        &mut self,
        leader_log_start_offset: i64,
        leader_log_end_offset: i64,
        log: LocalLog<'_>,
    ) -> Option<Truncation> {
        self.phase = match self.mode {
            TruncationMode::OnFetch => Phase::Fetching,
            TruncationMode::OffsetForLeaderEpoch => Phase::Truncating,
        };
        if leader_log_end_offset < log.log_end_offset {
            self.high_watermark = self.high_watermark.min(leader_log_end_offset);
            return Some(Truncation::To(leader_log_end_offset));
        }
        if leader_log_start_offset > log.log_end_offset {
            self.high_watermark = leader_log_start_offset;
            return Some(Truncation::FullyAndStartAt(leader_log_start_offset));
        }
        None
    }

    /// KIP-392: a consumer fetching from this follower. Its leader epoch must match ours and
    /// it reads up to our high watermark.
    ///
    /// # Errors
    ///
    /// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER for a replica's
    /// fetch, OFFSET_OUT_OF_RANGE.
    pub fn on_consumer_fetch(
        &self,
        req: &FetchPartition,
        log: LocalLog<'_>,
    ) -> Result<FetchAnswer, ReplicationError> {
        check_leader_epoch(req.current_leader_epoch, self.leader_epoch)?;
        if req.is_from_follower() {
            return Err(ReplicationError::NotLeaderOrFollower {
                node: self.local_id,
            });
        }
        fetch::answer_read(
            req,
            LogBounds {
                log_start_offset: log.log_start_offset,
                log_end_offset: log.log_end_offset,
                high_watermark: self.high_watermark,
                epochs: log.epochs,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use strata_storage::leader_epoch::EpochEntry;

    use super::*;

    fn cache(list: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(list.iter().map(|&(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        }))
    }

    fn log(epochs: &LeaderEpochCache, leo: i64) -> LocalLog<'_> {
        LocalLog {
            log_start_offset: 0,
            log_end_offset: leo,
            epochs,
        }
    }

    fn diverging(epoch: i32, end_offset: i64) -> FetchAnswer {
        FetchAnswer {
            high_watermark: 0,
            log_start_offset: 0,
            log_end_offset: 0,
            read_to: 0,
            diverging_epoch: Some(EpochEndOffset { epoch, end_offset }),
        }
    }

    #[test]
    fn fetch_carries_the_last_epoch_on_fetch_mode() {
        let c = cache(&[(1, 0), (3, 10)]);
        let f = FollowerState::new(2, 7, 1, 4, TruncationMode::OnFetch, 5);
        assert_eq!(
            f.next_request(log(&c, 15)),
            FollowerRequest::Fetch(FetchPartition {
                replica_id: 2,
                fetch_offset: 15,
                current_leader_epoch: 4,
                last_fetched_epoch: 3,
                replica_epoch: 7,
                log_start_offset: 0
            })
        );
    }

    #[test]
    fn truncates_to_the_smaller_end_of_the_shared_epoch() {
        // KIP-279: we hold epoch 3 up to 15, the leader up to 12.
        let c = cache(&[(1, 0), (3, 10)]);
        let mut f = FollowerState::new(2, 7, 1, 4, TruncationMode::OnFetch, 11);
        assert_eq!(
            f.on_fetch_answer(&diverging(3, 12), log(&c, 15)),
            Some(Truncation::To(12))
        );
        assert_eq!(f.high_watermark(), 11);
        // Our epoch 3 ends before the leader's: nothing to cut.
        let c = cache(&[(1, 0), (3, 10), (4, 13)]);
        assert_eq!(
            f.on_fetch_answer(&diverging(3, 14), log(&c, 15)),
            Some(Truncation::To(13))
        );
    }

    #[test]
    fn an_epoch_we_never_had_truncates_to_our_earlier_epoch() {
        // The leader answers epoch 2 ending at 8; we went 1 -> 3 and never had 2.
        let c = cache(&[(1, 0), (3, 5)]);
        let mut f = FollowerState::new(2, 7, 1, 4, TruncationMode::OffsetForLeaderEpoch, 0);
        assert_eq!(
            f.on_offset_for_leader_epoch(
                EpochEndOffset {
                    epoch: 2,
                    end_offset: 8
                },
                log(&c, 9)
            ),
            Some(Truncation::To(5))
        );
        // Not settled: ask again with our new last epoch.
        let c = cache(&[(1, 0)]);
        assert_eq!(
            f.next_request(log(&c, 5)),
            FollowerRequest::OffsetForLeaderEpoch {
                current_leader_epoch: 4,
                leader_epoch: 1
            }
        );
        assert_eq!(
            f.on_offset_for_leader_epoch(
                EpochEndOffset {
                    epoch: 1,
                    end_offset: 8
                },
                log(&c, 5)
            ),
            Some(Truncation::To(5)),
            "at our log end: only the epoch cache's tail can go"
        );
        assert!(matches!(
            f.next_request(log(&c, 5)),
            FollowerRequest::Fetch(FetchPartition {
                last_fetched_epoch: NO_EPOCH,
                ..
            })
        ));
    }

    #[test]
    fn epochs_older_than_ours_truncate_to_the_leaders_offset() {
        let c = cache(&[(5, 20)]);
        let mut f = FollowerState::new(2, 7, 1, 6, TruncationMode::OffsetForLeaderEpoch, 0);
        assert_eq!(
            f.on_offset_for_leader_epoch(
                EpochEndOffset {
                    epoch: 2,
                    end_offset: 18
                },
                log(&c, 25)
            ),
            Some(Truncation::To(18))
        );
        // An undefined answer leaves the log as it is.
        let mut f = FollowerState::new(2, 7, 1, 6, TruncationMode::OffsetForLeaderEpoch, 0);
        assert_eq!(
            f.on_offset_for_leader_epoch(
                EpochEndOffset {
                    epoch: -1,
                    end_offset: -1
                },
                log(&c, 25)
            ),
            Some(Truncation::To(25))
        );
    }

    #[test]
    fn an_epoch_led_without_writing_is_dropped_from_the_cache() {
        // We led epoch 3 from 6 but wrote nothing in it; the leader's epoch 2 runs to 27.
        let c = cache(&[(2, 0), (3, 6)]);
        let mut f = FollowerState::new(2, 7, 1, 4, TruncationMode::OnFetch, 0);
        let t = f.on_fetch_answer(&diverging(2, 27), log(&c, 6));
        assert_eq!(t, Some(Truncation::To(6)));
        let mut c = c;
        c.truncate_from_end(6);
        assert_eq!(c.latest_epoch(), Some(2));
    }

    #[test]
    fn out_of_range_asks_the_leaders_offsets() {
        let c = cache(&[(1, 0)]);
        let mut f = FollowerState::new(2, 7, 1, 1, TruncationMode::OnFetch, 3);
        f.on_error(&ReplicationError::OffsetOutOfRange {
            requested: 9,
            log_start: 0,
            log_end: 5,
        });
        assert_eq!(f.next_request(log(&c, 9)), FollowerRequest::ListOffsets);
        assert_eq!(
            f.on_leader_offsets(0, 5, log(&c, 9)),
            Some(Truncation::To(5))
        );
        assert_eq!(
            f.on_leader_offsets(50, 60, log(&c, 9)),
            Some(Truncation::FullyAndStartAt(50))
        );
        assert!(matches!(
            f.next_request(log(&c, 50)),
            FollowerRequest::Fetch(_)
        ));
    }

    #[test]
    fn a_fenced_follower_waits_for_metadata() {
        let c = cache(&[(1, 0)]);
        let mut f = FollowerState::new(2, 7, 1, 1, TruncationMode::OnFetch, 0);
        f.on_error(&ReplicationError::FencedLeaderEpoch {
            requested: 1,
            current: 2,
        });
        assert_eq!(f.next_request(log(&c, 0)), FollowerRequest::Idle);
    }

    #[test]
    fn a_log_without_epochs_is_cut_to_the_high_watermark() {
        let empty = LeaderEpochCache::new();
        let f = FollowerState::new(2, 7, 1, 1, TruncationMode::OnFetch, 4);
        assert_eq!(
            f.initial_truncation(log(&empty, 9)),
            Some(Truncation::To(4))
        );
        let c = cache(&[(0, 0)]);
        assert_eq!(f.initial_truncation(log(&c, 9)), None);
    }

    #[test]
    fn consumers_of_a_follower_see_its_high_watermark() {
        let c = cache(&[(1, 0)]);
        let f = FollowerState::new(2, 7, 1, 1, TruncationMode::OnFetch, 4);
        let req = FetchPartition {
            replica_id: -1,
            fetch_offset: 2,
            current_leader_epoch: 1,
            last_fetched_epoch: -1,
            replica_epoch: -1,
            log_start_offset: -1,
        };
        assert_eq!(f.on_consumer_fetch(&req, log(&c, 9)).unwrap().read_to, 4);
        let stale = FetchPartition {
            current_leader_epoch: 0,
            ..req
        };
        assert!(matches!(
            f.on_consumer_fetch(&stale, log(&c, 9)),
            Err(ReplicationError::FencedLeaderEpoch { .. })
        ));
    }
}
