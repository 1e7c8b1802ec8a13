//! The leader's side of replication: answering Fetch, the high watermark, DescribeQuorum.
//!
//! KIP-595 replication is pull-based. A fetcher sends its log end offset and the epoch of
//! its last entry. The leader checks them against its own log: if the fetcher's last epoch
//! ends earlier in the leader's log than the fetcher claims (or is not there at all), the
//! answer is a *diverging epoch* — the largest epoch `<=` the fetcher's and where it ends —
//! and the fetcher truncates. Otherwise the fetch offset is proof that the fetcher holds
//! the leader's log below it, durably, and counts toward the high watermark if the fetcher
//! is a voter with the right directory id.

#[cfg(test)]
use super::Fault;
use super::log::{Entry, Payload, VoterSet};
use super::messages::{FetchError, Message};
use super::node::RaftNode;
use super::state::Role;
use super::{Action, NodeId, ReplicaKey, SnapshotId, VoterChangeError};

/// How long an observer stays listed after its last fetch: Kafka's
/// `LeaderState.OBSERVER_SESSION_TIMEOUT_MS`. A broker that stopped, a node restarted with
/// a new disk (its old directory), or a removed voter that stopped fetching would otherwise
/// stay in DescribeQuorum, and in the leader's memory, until the next election.
pub const OBSERVER_SESSION_TIMEOUT_MS: u64 = 5 * 60 * 1000;

/// Whether an observer last seen at `last_fetch_ms` is still listed at `now`.
fn observer_active(last_fetch_ms: Option<u64>, now: u64) -> bool {
    last_fetch_ms.is_some_and(|t| now.saturating_sub(t) < OBSERVER_SESSION_TIMEOUT_MS)
}

/// The leader's answer to DescribeQuorum (KIP-595, KIP-853 directory ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumDescription {
    /// This node.
    pub leader: NodeId,
    /// Its epoch.
    pub epoch: i32,
    /// Its high watermark.
    pub high_watermark: i64,
    /// Every voter, the leader included.
    pub voters: Vec<ReplicaDescription>,
    /// Replicas that fetched without being voters.
    pub observers: Vec<ReplicaDescription>,
}

/// One replica in a [`QuorumDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaDescription {
    /// Node id and directory id.
    pub replica: ReplicaKey,
    /// The offset it has fetched up to, if it fetched in this epoch (`LogEndOffset`).
    pub log_end_offset: Option<i64>,
    /// When it last fetched (`LastFetchTimestamp`, the leader's clock).
    pub last_fetch_ms: Option<u64>,
    /// When it last fetched up to the leader's log end (`LastCaughtUpTimestamp`).
    pub last_caught_up_ms: Option<u64>,
}

impl RaftNode {
    /// DescribeQuorum, answered by the leader; `None` on any other node.
    pub fn describe_quorum(&self, now: u64) -> Option<QuorumDescription> {
        let Role::Leader(l) = &self.role else {
            return None;
        };
        let voters = l
            .voters
            .values()
            .map(|(key, p)| {
                if key.id == self.key.id {
                    ReplicaDescription {
                        replica: *key,
                        log_end_offset: Some(self.log.end_offset()),
                        last_fetch_ms: Some(now),
                        last_caught_up_ms: Some(now),
                    }
                } else {
                    ReplicaDescription {
                        replica: *key,
                        log_end_offset: p.end_offset,
                        last_fetch_ms: p.last_fetch_ms,
                        last_caught_up_ms: p.last_caught_up_ms,
                    }
                }
            })
            .collect();
        let observers = l
            .observers
            .iter()
            .filter(|(_, p)| observer_active(p.last_fetch_ms, now))
            .map(|(key, p)| ReplicaDescription {
                replica: *key,
                log_end_offset: p.end_offset,
                last_fetch_ms: p.last_fetch_ms,
                last_caught_up_ms: p.last_caught_up_ms,
            })
            .collect();
        Some(QuorumDescription {
            leader: self.key.id,
            epoch: self.quorum.epoch,
            high_watermark: self.high_watermark,
            voters,
            observers,
        })
    }

    /// Answers a Fetch (any role: non-leaders answer with an error naming the leader they
    /// know).
    pub(super) fn on_fetch_request(
        &mut self,
        now: u64,
        epoch: i32,
        replica: ReplicaKey,
        fetch_offset: i64,
        last_fetched_epoch: i32,
        out: &mut Vec<Action>,
    ) -> Message {
        let leading = matches!(self.role, Role::Leader(_));
        let error = if !leading {
            Some(if epoch < self.quorum.epoch {
                FetchError::FencedLeaderEpoch
            } else {
                FetchError::NotLeader
            })
        } else if epoch < self.quorum.epoch {
            Some(FetchError::FencedLeaderEpoch)
        } else if epoch > self.quorum.epoch {
            Some(FetchError::UnknownLeaderEpoch)
        } else {
            None
        };
        let mut response = Message::FetchResponse {
            snapshot_id: None,
            epoch: self.quorum.epoch,
            // A resigned leader still has itself recorded; it must not send fetchers back.
            leader: self.quorum.leader.filter(|&l| leading || l != self.key.id),
            error,
            fetch_offset,
            last_fetched_epoch,
            diverging: None,
            entries: Vec::new(),
            high_watermark: self.high_watermark,
        };
        if error.is_some() {
            return response;
        }
        let Message::FetchResponse {
            diverging,
            snapshot_id,
            entries,
            high_watermark,
            ..
        } = &mut response
        else {
            unreachable!("built above");
        };
        let start = self.log.start_offset();
        let snapshot = self.log.snapshot().map(|s| s.id);
        if fetch_offset < start {
            // KIP-630: what the fetcher needs next is only in the snapshot.
            *snapshot_id = snapshot;
            return response;
        }
        if fetch_offset < 0 {
            *diverging = Some((0, 0));
            return response;
        }
        if fetch_offset > 0 || last_fetched_epoch > 0 {
            let (epoch_found, end) = self.log.end_offset_for_epoch(last_fetched_epoch);
            if epoch_found != last_fetched_epoch || end < fetch_offset {
                if end < start {
                    // The logs part below our log start: only the snapshot can mend it.
                    *snapshot_id = snapshot;
                } else {
                    *diverging = Some((epoch_found, end));
                }
                return response;
            }
        }
        let log_end = self.log.end_offset();
        let majority = self.majority();
        let is_voter = self.is_voter();
        let check_quorum = self.config.fetch_timeout_ms * 3 / 2;
        let Role::Leader(l) = &mut self.role else {
            unreachable!("checked above");
        };
        let progress = match l.voters.get_mut(&replica.id) {
            Some((key, p)) if *key == replica => {
                l.acknowledged.insert(replica.id);
                l.fetched_since_check.insert(replica.id);
                if l.fetched_since_check.len() >= majority {
                    l.check_quorum_deadline = now + check_quorum;
                    l.fetched_since_check
                        .retain(|&id| is_voter && id == self.key.id);
                }
                p
            }
            // Not a voter, or a voter's node id with another disk: an observer.
            _ => {
                if !l.observers.contains_key(&replica) {
                    // The map grows only here (and by a voter's removal), so inactive
                    // observers are forgotten here, not on every fetch: their number stays
                    // bounded by the replicas fetching within one session timeout.
                    l.observers
                        .retain(|_, p| observer_active(p.last_fetch_ms, now));
                }
                l.observers.entry(replica).or_default()
            }
        };
        // Requests may arrive out of order; what a replica has proven it holds stays proven.
        progress.end_offset = Some(
            progress
                .end_offset
                .map_or(fetch_offset, |o| o.max(fetch_offset)),
        );
        progress.last_fetch_ms = Some(now);
        if fetch_offset == log_end {
            progress.last_caught_up_ms = Some(now);
        }
        self.maybe_advance_high_watermark(now, out);
        *entries = self.log.read(fetch_offset, self.config.fetch_max_entries);
        *high_watermark = self.high_watermark;
        response
    }

    /// KIP-630 FetchSnapshot: the leader sends its snapshot if it is still the one named.
    pub(super) fn on_fetch_snapshot_request(
        &self,
        _now: u64,
        epoch: i32,
        _replica: ReplicaKey,
        snapshot_id: SnapshotId,
    ) -> Message {
        let leading = matches!(self.role, Role::Leader(_));
        let error = if epoch < self.quorum.epoch {
            Some(FetchError::FencedLeaderEpoch)
        } else if !leading {
            Some(FetchError::NotLeader)
        } else if epoch > self.quorum.epoch {
            Some(FetchError::UnknownLeaderEpoch)
        } else {
            None
        };
        let snapshot = match error {
            None => self.log.snapshot().filter(|s| s.id == snapshot_id).cloned(),
            Some(_) => None,
        };
        Message::FetchSnapshotResponse {
            epoch: self.quorum.epoch,
            leader: self.quorum.leader.filter(|&l| leading || l != self.key.id),
            error,
            snapshot,
        }
    }

    /// KIP-595: the high watermark is the largest offset a majority of voters have fetched
    /// up to (the leader counts its log end), and moves only once it passes the epoch's
    /// LeaderChange entry, so an entry of an earlier epoch is committed only together with
    /// one of this epoch (Raft §5.4.2).
    pub(super) fn maybe_advance_high_watermark(&mut self, now: u64, out: &mut Vec<Action>) {
        let Role::Leader(l) = &self.role else {
            return;
        };
        let mut offsets: Vec<i64> = l
            .voters
            .iter()
            .map(|(id, (_, p))| {
                if *id == self.key.id {
                    self.log.end_offset()
                } else {
                    p.end_offset.unwrap_or(0)
                }
            })
            .collect();
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        let Some(&replicated) = offsets.get(self.majority() - 1) else {
            return;
        };
        let own_epoch = replicated > l.epoch_start_offset;
        #[cfg(test)]
        let own_epoch = own_epoch || self.config.fault == Fault::CommitPreviousEpochByCount;
        if own_epoch && replicated > self.high_watermark {
            self.high_watermark = replicated;
            out.push(Action::CommitTo {
                high_watermark: replicated,
            });
        }
        // KIP-853: a leader that removed itself leads until the change commits, then
        // resigns.
        if !self.is_voter()
            && self
                .log
                .last_voters_offset()
                .is_some_and(|o| o < self.high_watermark)
        {
            self.resign(now, out);
        }
    }

    /// KIP-853 AddRaftVoter / RemoveRaftVoter: one change at a time, each a `Voters`
    /// entry that takes effect as soon as it is appended (Raft dissertation §4.1).
    pub(super) fn change_voters(&mut self, now: u64, change: VoterChange, out: &mut Vec<Action>) {
        let Role::Leader(l) = &self.role else {
            out.push(Action::VoterChangeRejected(VoterChangeError::NotLeader));
            return;
        };
        // The leader must have committed in its epoch (else an older, uncommitted change
        // could still be in force elsewhere), and the last change must be committed.
        if self.high_watermark <= l.epoch_start_offset
            || self
                .log
                .last_voters_offset()
                .is_some_and(|o| o >= self.high_watermark)
        {
            out.push(Action::VoterChangeRejected(
                VoterChangeError::ChangeInProgress,
            ));
            return;
        }
        let mut set = self.log.voter_set().cloned().unwrap_or_else(|| VoterSet {
            keys: self.config.voters.clone(),
            endpoints: Default::default(),
        });
        let voters = &mut set.keys;
        match change {
            VoterChange::Add(key, endpoint) => {
                if voters.iter().any(|v| v.id == key.id) {
                    out.push(Action::VoterChangeRejected(
                        VoterChangeError::DuplicateVoter,
                    ));
                    return;
                }
                let fetch_timeout = self.config.fetch_timeout_ms;
                let caught_up = l.observers.get(&key).is_some_and(|p| {
                    p.end_offset.is_some_and(|o| o >= self.high_watermark)
                        && p.last_fetch_ms.is_some_and(|t| now < t + fetch_timeout)
                });
                if !caught_up {
                    out.push(Action::VoterChangeRejected(VoterChangeError::NotCaughtUp));
                    return;
                }
                voters.push(key);
                if let Some(endpoint) = endpoint {
                    set.endpoints.insert(key.id, endpoint);
                }
            }
            VoterChange::Remove(key) => {
                if !voters.contains(&key) || voters.len() == 1 {
                    out.push(Action::VoterChangeRejected(VoterChangeError::VoterNotFound));
                    return;
                }
                voters.retain(|v| *v != key);
                set.endpoints.remove(&key.id);
            }
        }
        let epoch = self.quorum.epoch;
        let base_offset = self.log.end_offset();
        let entry = Entry {
            epoch,
            payload: Payload::Voters(set),
        };
        self.log.append(entry.clone());
        out.push(Action::AppendToLog {
            base_offset,
            entries: vec![entry],
        });
        out.push(Action::Proposed {
            epoch,
            base_offset,
            last_offset: base_offset,
        });
        self.sync_leader_voters();
        self.maybe_advance_high_watermark(now, out);
    }

    /// Rebuilds the leader's voter progress after a change: a new voter brings its
    /// progress as an observer, a removed one keeps its progress as an observer.
    fn sync_leader_voters(&mut self) {
        let voters = self.voters().to_vec();
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let mut old = std::mem::take(&mut l.voters);
        for key in voters {
            let progress = match old.remove(&key.id) {
                Some((k, p)) if k == key => p,
                _ => l.observers.remove(&key).unwrap_or_default(),
            };
            l.voters.insert(key.id, (key, progress));
        }
        for (_, (key, progress)) in old {
            l.observers.insert(key, progress);
        }
    }
}

/// A requested change of the voter set.
#[derive(Debug, Clone)]
pub(super) enum VoterChange {
    Add(ReplicaKey, Option<super::Endpoint>),
    Remove(ReplicaKey),
}
