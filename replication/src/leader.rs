//! The leader's view of one partition: its followers' progress, the ISR as the controller
//! committed it, ISR changes it proposes (KIP-497), the high watermark and acks=all.
//! Follows Kafka's `Partition` and `Replica` on the leader side.

use std::collections::BTreeMap;

use strata_storage::leader_epoch::LeaderEpochCache;

use crate::ReplicationError;
use crate::fetch::{
    self, EpochEndOffset, FetchAnswer, FetchPartition, LogBounds, check_leader_epoch,
};
use crate::selector::{ReplicaView, rack_aware_select};

/// Kafka's default `replica.lag.time.max.ms`.
pub const DEFAULT_REPLICA_LAG_TIME_MAX_MS: i64 = 30_000;

/// The configs the leader applies, with Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `replica.lag.time.max.ms`: a follower not caught up for longer leaves the ISR.
    pub replica_lag_time_max_ms: i64,
    /// `min.insync.replicas`: the smallest ISR an acks=all produce accepts.
    pub min_insync_replicas: usize,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        Self {
            replica_lag_time_max_ms: DEFAULT_REPLICA_LAG_TIME_MAX_MS,
            min_insync_replicas: 1,
        }
    }
}

/// The partition's leadership as the metadata log holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRegistration {
    /// The assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// The ISR the controller committed.
    pub isr: Vec<i32>,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The partition epoch (bumped by every change).
    pub partition_epoch: i32,
}

/// A member of a proposed ISR (AlterPartition v3+ `NewIsrWithEpochs`, KIP-903).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsrMember {
    /// The broker.
    pub broker_id: i32,
    /// The broker epoch its last fetch carried, or -1 (the leader itself, or not known).
    pub broker_epoch: i64,
}

/// An AlterPartition entry the leader wants sent (KIP-497). It maps onto the controller's
/// `AlterPartitionData`, with the leader recovery state RECOVERED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionProposal {
    /// The leader epoch the leader holds.
    pub leader_epoch: i32,
    /// The partition epoch the change was computed from.
    pub partition_epoch: i32,
    /// The proposed ISR.
    pub new_isr: Vec<IsrMember>,
}

impl AlterPartitionProposal {
    /// The proposed ISR's broker ids.
    pub fn isr_ids(&self) -> Vec<i32> {
        self.new_isr.iter().map(|m| m.broker_id).collect()
    }
}

/// How the controller answered an [`AlterPartitionProposal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterPartitionOutcome {
    /// Committed: the partition's state in the response.
    Committed {
        /// The leader epoch.
        leader_epoch: i32,
        /// The new partition epoch.
        partition_epoch: i32,
        /// The ISR now committed.
        isr: Vec<i32>,
    },
    /// OPERATION_NOT_ATTEMPTED or INELIGIBLE_REPLICA: nothing changed, so the leader goes
    /// back to the committed ISR and may propose again.
    NotAttempted,
    /// FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, NEW_LEADER_ELECTED or
    /// UNKNOWN_TOPIC_OR_PARTITION: our state is stale; the proposal stays in flight until
    /// newer metadata arrives ([`LeaderState::on_partition_change`]).
    AwaitMetadata,
}

/// A pending ISR change. Until the controller commits it, the high watermark is computed
/// over the larger of the two ISRs (Kafka's "maximal ISR").
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingIsr {
    proposal: AlterPartitionProposal,
    /// Committed ISR plus the proposed one.
    maximal_isr: Vec<i32>,
}

/// What the leader knows of one follower (Kafka's `ReplicaState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FollowerProgress {
    /// The follower's log end offset, from its last fetch; -1 until it fetches.
    log_end_offset: i64,
    /// The last time it was known caught up with the leader (see [`LeaderState::on_fetch`]).
    last_caught_up_time_ms: i64,
    /// The leader's log end offset when the follower last fetched.
    last_fetch_leader_log_end_offset: i64,
    /// When the follower last fetched.
    last_fetch_time_ms: i64,
    /// The broker epoch its last fetch carried, -1 until then.
    broker_epoch: i64,
    /// Its log start offset, from its last fetch; -1 until then.
    log_start_offset: i64,
}

/// The leader's state for one partition. Sans-IO: the log is the caller's; it reports the
/// log end offset after appends and passes the epoch cache to fetch checks.
#[derive(Debug, Clone)]
pub struct LeaderState {
    /// This broker.
    local_id: i32,
    /// The configs.
    config: ReplicationConfig,
    /// Assigned replicas.
    replicas: Vec<i32>,
    /// The committed ISR: the only one `min.insync.replicas` counts.
    isr: Vec<i32>,
    /// The in-flight AlterPartition, at most one.
    pending: Option<PendingIsr>,
    /// The leader epoch.
    leader_epoch: i32,
    /// The partition epoch of the committed state.
    partition_epoch: i32,
    /// The log end offset when this leadership began: a follower joins the ISR only once it
    /// holds the whole previous epoch, so an election never loses it.
    leader_epoch_start_offset: i64,
    /// The leader's log end offset.
    log_end_offset: i64,
    /// Never moves back during the leadership.
    high_watermark: i64,
    /// The followers (every replica but this one).
    followers: BTreeMap<i32, FollowerProgress>,
    /// acks=all produces waiting for the high watermark: id and required offset (the last
    /// offset written plus one).
    waiting_acks: Vec<(u64, i64)>,
    /// A deliberately broken rule, to show the simulation catches it.
    #[cfg(test)]
    pub(crate) fault: Option<crate::fault::Fault>,
}

impl LeaderState {
    /// Takes the leadership (Kafka's `Partition.makeLeader`). The caller has already
    /// assigned `leader_epoch` at `log_end_offset` in the log's epoch cache. Followers in the
    /// ISR start as caught up now; the others as never caught up.
    pub fn become_leader(
        local_id: i32,
        registration: &PartitionRegistration,
        config: ReplicationConfig,
        log_end_offset: i64,
        high_watermark: i64,
        now_ms: i64,
    ) -> Self {
        let followers = registration
            .replicas
            .iter()
            .filter(|&&r| r != local_id)
            .map(|&r| {
                let in_sync = registration.isr.contains(&r);
                let progress = FollowerProgress {
                    log_end_offset: -1,
                    last_caught_up_time_ms: if in_sync { now_ms } else { 0 },
                    last_fetch_leader_log_end_offset: if in_sync { log_end_offset } else { -1 },
                    last_fetch_time_ms: if in_sync { now_ms } else { 0 },
                    broker_epoch: -1,
                    log_start_offset: -1,
                };
                (r, progress)
            })
            .collect();
        let mut state = Self {
            local_id,
            config,
            replicas: registration.replicas.clone(),
            isr: registration.isr.clone(),
            pending: None,
            leader_epoch: registration.leader_epoch,
            partition_epoch: registration.partition_epoch,
            leader_epoch_start_offset: log_end_offset,
            log_end_offset,
            high_watermark: high_watermark.min(log_end_offset),
            followers,
            waiting_acks: Vec::new(),
            #[cfg(test)]
            fault: None,
        };
        state.maybe_increment_high_watermark(now_ms);
        state
    }

    /// This broker's id.
    pub fn local_id(&self) -> i32 {
        self.local_id
    }

    /// The leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The committed partition epoch.
    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// The committed ISR.
    pub fn isr(&self) -> &[i32] {
        &self.isr
    }

    /// The ISR the high watermark waits for: the committed one, plus the proposed one while
    /// an AlterPartition is in flight.
    pub fn maximal_isr(&self) -> &[i32] {
        self.pending.as_ref().map_or(&self.isr, |p| &p.maximal_isr)
    }

    /// The in-flight AlterPartition, which the driver sends (and resends until answered).
    pub fn pending_proposal(&self) -> Option<&AlterPartitionProposal> {
        self.pending.as_ref().map(|p| &p.proposal)
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The leader's log end offset.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Where this leadership's epoch starts in the log.
    pub fn leader_epoch_start_offset(&self) -> i64 {
        self.leader_epoch_start_offset
    }

    /// A follower's log end offset as last fetched, -1 if unknown.
    pub fn follower_log_end_offset(&self, id: i32) -> Option<i64> {
        self.followers.get(&id).map(|f| f.log_end_offset)
    }

    /// Newer metadata for the same leadership (Kafka's `makeLeader` with an unchanged leader
    /// epoch): a newer partition epoch replaces the ISR and drops any in-flight proposal.
    /// Older or equal partition epochs are ignored. A new leader epoch needs a new
    /// [`LeaderState::become_leader`] instead; this returns false for it.
    pub fn on_partition_change(
        &mut self,
        registration: &PartitionRegistration,
        now_ms: i64,
    ) -> bool {
        if registration.leader_epoch != self.leader_epoch {
            return false;
        }
        if registration.partition_epoch > self.partition_epoch {
            // A member the controller took out of the ISR (fenced, shut down) no longer
            // counts as caught up, so the high watermark stops waiting for it at once
            // instead of for `replica.lag.time.max.ms` (KIP-841: a fenced broker is not
            // eligible). It counts again once a fetch of its shows it caught up.
            for (id, f) in &mut self.followers {
                if self.isr.contains(id) && !registration.isr.contains(id) {
                    f.last_caught_up_time_ms = 0;
                    f.last_fetch_leader_log_end_offset = -1;
                }
            }
            self.isr = registration.isr.clone();
            self.partition_epoch = registration.partition_epoch;
            self.pending = None;
            for &r in &registration.replicas {
                if r != self.local_id && !self.followers.contains_key(&r) {
                    self.followers.insert(
                        r,
                        FollowerProgress {
                            log_end_offset: -1,
                            last_caught_up_time_ms: 0,
                            last_fetch_leader_log_end_offset: -1,
                            last_fetch_time_ms: 0,
                            broker_epoch: -1,
                            log_start_offset: -1,
                        },
                    );
                }
            }
            self.followers
                .retain(|r, _| registration.replicas.contains(r));
            self.replicas = registration.replicas.clone();
            self.maybe_increment_high_watermark(now_ms);
        }
        true
    }

    /// New configs for the same leadership: a `min.insync.replicas` changed through
    /// AlterConfigs applies to the next acks=all produce, with no new leader epoch (Kafka
    /// reads the topic's config on every append). A lowered minimum can release a high
    /// watermark held back by KIP-966's rule, so it is recomputed.
    pub fn set_config(&mut self, config: ReplicationConfig, now_ms: i64) {
        self.config = config;
        self.maybe_increment_high_watermark(now_ms);
    }

    /// The leader's own append moved its log end offset; a leader alone in its ISR moves the
    /// high watermark with it. Reports can arrive out of order (a roll's fsync, begun at an
    /// earlier end, finishes after a later append published its end), so the log end only
    /// moves up: a leader's log never shrinks while it leads.
    pub fn on_local_append(&mut self, log_end_offset: i64, now_ms: i64) {
        self.log_end_offset = self.log_end_offset.max(log_end_offset);
        self.maybe_increment_high_watermark(now_ms);
    }

    /// `min.insync.replicas` capped at the replication factor (Kafka's `effectiveMinIsr`): a
    /// setting above the number of replicas could never be met.
    pub fn effective_min_isr(&self) -> usize {
        self.config
            .min_insync_replicas
            .min(self.replicas.len())
            .max(1)
    }

    /// Whether the committed ISR is below the effective `min.insync.replicas`; the high
    /// watermark then stands still (KIP-966, Kafka 4).
    pub fn is_under_min_isr(&self) -> bool {
        self.isr.len() < self.effective_min_isr()
    }

    /// Kafka's check before an append: acks=all (`acks == -1`) needs the committed ISR to be
    /// at least the effective `min.insync.replicas`.
    ///
    /// # Errors
    ///
    /// [`ReplicationError::NotEnoughReplicas`], and nothing may be appended.
    pub fn check_produce(&self, acks: i16) -> Result<(), ReplicationError> {
        if acks == -1 && self.is_under_min_isr() {
            return Err(ReplicationError::NotEnoughReplicas {
                isr: self.isr.len(),
                min_isr: self.effective_min_isr(),
            });
        }
        Ok(())
    }

    /// Registers an appended acks=all produce whose last offset is `required_offset - 1`.
    /// Its answer comes from [`LeaderState::take_completed_acks`].
    pub fn await_acks(&mut self, produce_id: u64, required_offset: i64) {
        self.waiting_acks.push((produce_id, required_offset));
    }

    /// The acks=all produces that are now answered (Kafka's
    /// `checkEnoughReplicasReachOffset`): those below the high watermark, acknowledged if
    /// the maximal ISR still meets the effective `min.insync.replicas`, else
    /// [`ReplicationError::NotEnoughReplicasAfterAppend`] (the ISR shrank after the high
    /// watermark passed them).
    pub fn take_completed_acks(&mut self) -> Vec<(u64, Result<(), ReplicationError>)> {
        let hw = self.high_watermark;
        let result = self.check_enough_replicas_after_append();
        let mut done = Vec::new();
        self.waiting_acks.retain(|&(id, required)| {
            if hw >= required {
                done.push((id, result.clone()));
                false
            } else {
                true
            }
        });
        done
    }

    /// Kafka's `checkEnoughReplicasReachOffset` for an acks=all produce the high watermark
    /// has passed: acknowledged only while the maximal ISR still meets the effective
    /// `min.insync.replicas`.
    ///
    /// # Errors
    ///
    /// [`ReplicationError::NotEnoughReplicasAfterAppend`] when the ISR shrank below it after
    /// the append (the records stay in the log; the producer retries).
    pub fn check_enough_replicas_after_append(&self) -> Result<(), ReplicationError> {
        let isr = self.maximal_isr().len();
        let min_isr = self.effective_min_isr();
        if isr >= min_isr {
            Ok(())
        } else {
            Err(ReplicationError::NotEnoughReplicasAfterAppend { isr, min_isr })
        }
    }

    /// The leadership ended: every waiting acks=all produce fails with
    /// NOT_LEADER_OR_FOLLOWER.
    pub fn resign(&mut self) -> Vec<(u64, Result<(), ReplicationError>)> {
        let node = self.local_id;
        self.waiting_acks
            .drain(..)
            .map(|(id, _)| (id, Err(ReplicationError::NotLeaderOrFollower { node })))
            .collect()
    }

    /// Serves one partition of a Fetch (Kafka's `Partition.fetchRecords` on the leader):
    /// the epoch check, the diverging epoch and range checks, then, for a follower not
    /// diverging, its progress, a possible ISR expansion and the high watermark. The answer
    /// carries the high watermark after that update.
    ///
    /// # Errors
    ///
    /// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a stale or future leader epoch; for a
    /// follower not assigned to the partition, UNKNOWN_LEADER_EPOCH if it sent a leader
    /// epoch, else NOT_LEADER_OR_FOLLOWER; OFFSET_OUT_OF_RANGE from [`fetch::answer_read`].
    pub fn on_fetch(
        &mut self,
        req: &FetchPartition,
        log_start_offset: i64,
        epochs: &LeaderEpochCache,
        now_ms: i64,
    ) -> Result<FetchAnswer, ReplicationError> {
        check_leader_epoch(req.current_leader_epoch, self.leader_epoch)?;
        if req.is_from_follower() && !self.followers.contains_key(&req.replica_id) {
            // Kafka's `followerReplicaOrThrow`: with a leader epoch the replica may simply
            // be newer than our metadata (a reassignment), so it retries.
            return Err(if req.current_leader_epoch == fetch::NO_EPOCH {
                ReplicationError::NotLeaderOrFollower {
                    node: self.local_id,
                }
            } else {
                ReplicationError::UnknownLeaderEpoch {
                    requested: req.current_leader_epoch,
                    current: self.leader_epoch,
                }
            });
        }
        let mut answer = fetch::answer_read(
            req,
            LogBounds {
                log_start_offset,
                log_end_offset: self.log_end_offset,
                high_watermark: self.high_watermark,
                epochs,
            },
        )?;
        if req.is_from_follower() && answer.diverging_epoch.is_none() {
            self.update_follower(req, now_ms);
            self.maybe_expand_isr(req.replica_id);
            self.maybe_increment_high_watermark(now_ms);
            answer.high_watermark = self.high_watermark;
        }
        Ok(answer)
    }

    /// OffsetForLeaderEpoch from a follower that cannot send its last fetched epoch (Fetch
    /// before v12): where `leader_epoch` ends in our log.
    ///
    /// # Errors
    ///
    /// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a stale or future
    /// `current_leader_epoch`.
    pub fn offset_for_leader_epoch(
        &self,
        current_leader_epoch: i32,
        leader_epoch: i32,
        epochs: &LeaderEpochCache,
    ) -> Result<EpochEndOffset, ReplicationError> {
        check_leader_epoch(current_leader_epoch, self.leader_epoch)?;
        Ok(fetch::end_offset_for_epoch(
            epochs,
            leader_epoch,
            self.log_end_offset,
        ))
    }

    /// Kafka's `Replica.updateFetchStateOrThrow`: a follower fetching at or past the leader's
    /// log end is caught up now; one that reached what the leader's end was at its previous
    /// fetch was caught up at that previous fetch.
    fn update_follower(&mut self, req: &FetchPartition, now_ms: i64) {
        let (id, fetch_offset) = (req.replica_id, req.fetch_offset);
        let leader_end = self.log_end_offset;
        let Some(f) = self.followers.get_mut(&id) else {
            return;
        };
        if fetch_offset >= leader_end {
            f.last_caught_up_time_ms = f.last_caught_up_time_ms.max(now_ms);
        } else if fetch_offset >= f.last_fetch_leader_log_end_offset {
            f.last_caught_up_time_ms = f.last_caught_up_time_ms.max(f.last_fetch_time_ms);
        }
        f.log_end_offset = fetch_offset;
        f.last_fetch_leader_log_end_offset = leader_end;
        f.last_fetch_time_ms = now_ms;
        f.broker_epoch = req.replica_epoch;
        f.log_start_offset = req.log_start_offset;
    }

    /// Kafka's `isCaughtUp`: at the leader's end, or caught up within the lag time.
    fn is_caught_up(&self, f: &FollowerProgress, now_ms: i64) -> bool {
        f.log_end_offset == self.log_end_offset
            || now_ms - f.last_caught_up_time_ms <= self.config.replica_lag_time_max_ms
    }

    /// Proposes adding `id` to the ISR once it holds the high watermark and the start of this
    /// leader epoch, if no proposal is in flight.
    fn maybe_expand_isr(&mut self, id: i32) {
        if self.pending.is_some() || self.isr.contains(&id) || !self.replicas.contains(&id) {
            return;
        }
        let Some(f) = self.followers.get(&id) else {
            return;
        };
        #[cfg(test)]
        let epoch_start = if self.fault == Some(crate::fault::Fault::ExpandBelowEpochStart) {
            0
        } else {
            self.leader_epoch_start_offset
        };
        #[cfg(not(test))]
        let epoch_start = self.leader_epoch_start_offset;
        if f.log_end_offset >= self.high_watermark && f.log_end_offset >= epoch_start {
            let mut new_isr = self.isr.clone();
            new_isr.push(id);
            self.propose(new_isr.clone(), new_isr);
        }
    }

    /// Proposes removing the followers in the ISR that have not caught up within
    /// `replica.lag.time.max.ms` (Kafka's `maybeShrinkIsr`), if no proposal is in flight.
    /// The high watermark keeps waiting for them until the controller commits.
    pub fn maybe_shrink_isr(&mut self, now_ms: i64) -> Option<&AlterPartitionProposal> {
        if self.pending.is_some() {
            return None;
        }
        let out_of_sync: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|&r| r != self.local_id)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_none_or(|f| !self.is_caught_up(f, now_ms))
            })
            .collect();
        if out_of_sync.is_empty() {
            return None;
        }
        let new_isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|r| !out_of_sync.contains(r))
            .collect();
        #[cfg(test)]
        if self.fault == Some(crate::fault::Fault::ShrinkBeforeCommit) {
            // Applied at once, as if the controller had already agreed.
            self.isr = new_isr.clone();
            self.propose(new_isr.clone(), new_isr);
            return self.pending_proposal();
        }
        self.propose(new_isr, self.isr.clone());
        self.pending_proposal()
    }

    fn propose(&mut self, new_isr: Vec<i32>, maximal_isr: Vec<i32>) {
        let new_isr = new_isr
            .into_iter()
            .map(|broker_id| IsrMember {
                broker_id,
                broker_epoch: self
                    .followers
                    .get(&broker_id)
                    .map_or(-1, |f| f.broker_epoch),
            })
            .collect();
        self.pending = Some(PendingIsr {
            proposal: AlterPartitionProposal {
                leader_epoch: self.leader_epoch,
                partition_epoch: self.partition_epoch,
                new_isr,
            },
            maximal_isr,
        });
    }

    /// The controller answered the in-flight AlterPartition (Kafka's
    /// `handleAlterPartitionUpdate`). A commit for another leader epoch or an older
    /// partition epoch is ignored. Returns whether the high watermark moved.
    pub fn on_alter_partition(&mut self, outcome: &AlterPartitionOutcome, now_ms: i64) -> bool {
        let before = self.high_watermark;
        match outcome {
            AlterPartitionOutcome::Committed {
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                if *leader_epoch != self.leader_epoch
                    || *partition_epoch < self.partition_epoch
                    || self.pending.is_none()
                {
                    return false;
                }
                self.isr = isr.clone();
                self.partition_epoch = *partition_epoch;
                self.pending = None;
                self.maybe_increment_high_watermark(now_ms);
            }
            AlterPartitionOutcome::NotAttempted => self.pending = None,
            AlterPartitionOutcome::AwaitMetadata => {}
        }
        self.high_watermark > before
    }

    /// Kafka's `maybeIncrementLeaderHW`: the smallest log end offset among the leader and
    /// the followers in the maximal ISR, or caught up and about to join it. Never moves back,
    /// and stands still while the committed ISR is under the effective min ISR.
    fn maybe_increment_high_watermark(&mut self, now_ms: i64) {
        if self.is_under_min_isr() {
            return;
        }
        let mut new_hw = self.log_end_offset;
        #[cfg(test)]
        let (leader_only, committed_only) = (
            self.fault == Some(crate::fault::Fault::HwFromLeaderOnly),
            self.fault == Some(crate::fault::Fault::HwOverCommittedIsr),
        );
        #[cfg(not(test))]
        let (leader_only, committed_only) = (false, false);
        if !leader_only {
            for (id, f) in &self.followers {
                let waits = if committed_only {
                    self.isr.contains(id)
                } else {
                    self.maximal_isr().contains(id) || self.is_caught_up(f, now_ms)
                };
                if waits && f.log_end_offset < new_hw {
                    new_hw = f.log_end_offset;
                }
            }
        }
        if new_hw > self.high_watermark {
            self.high_watermark = new_hw;
        }
    }

    /// KIP-392: the replica a consumer in `client_rack` should fetch `fetch_offset` from,
    /// with Kafka's `RackAwareReplicaSelector` over the leader and the ISR followers whose
    /// logs hold the offset (between their log start and end). `None` means the leader (the field is then left out of the response).
    pub fn preferred_read_replica(
        &self,
        client_rack: Option<&str>,
        fetch_offset: i64,
        rack_of: &dyn Fn(i32) -> Option<String>,
        now_ms: i64,
    ) -> Option<i32> {
        let leader = ReplicaView {
            node: self.local_id,
            rack: rack_of(self.local_id),
            log_end_offset: self.log_end_offset,
            time_since_last_caught_up_ms: 0,
        };
        let candidates: Vec<ReplicaView> = self
            .followers
            .iter()
            .filter(|(id, f)| {
                self.isr.contains(id)
                    && f.log_start_offset <= fetch_offset
                    && f.log_end_offset >= fetch_offset
            })
            .map(|(&id, f)| ReplicaView {
                node: id,
                rack: rack_of(id),
                log_end_offset: f.log_end_offset,
                time_since_last_caught_up_ms: now_ms - f.last_caught_up_time_ms,
            })
            .chain(std::iter::once(leader.clone()))
            .collect();
        let chosen = rack_aware_select(client_rack, &leader, &candidates);
        (chosen != self.local_id).then_some(chosen)
    }
}

#[cfg(test)]
mod tests;
