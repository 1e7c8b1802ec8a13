//! [`RaftNode`]: the roles, their timers and their transitions.
//!
//! Election rules (KIP-595, KIP-996, Raft §5.2 and §5.4.1):
//!
//! - A voter whose election timer (`[T, 2T)` with `T` = election timeout) or fetch timeout
//!   expires turns *prospective* and asks for pre-votes, carrying its current epoch. A
//!   pre-vote changes nothing on the voter that answers it, and is refused by a follower
//!   that heard from its leader within the fetch timeout. So a node cut off from the quorum
//!   keeps its epoch, and does not depose a healthy leader when it comes back.
//! - With a majority of pre-votes it becomes a *candidate* in the next epoch: it persists
//!   the epoch and its vote for itself, then asks for votes.
//! - Any message carrying a larger epoch moves a node to that epoch (as a follower if the
//!   message names a leader, else unattached), persisted before anything else.
//! - A node grants at most one vote per epoch (persisted before the answer leaves), only
//!   if it is itself the addressed voter (same directory id, KIP-853; the candidate asks
//!   the voters of its own voter set and counts only those), only if it knows no leader
//!   in that epoch, and only if the candidate's log is at least as up to date: larger last
//!   epoch, or the same and an end offset at least as large.
//! - A lost election backs off up to `election.backoff.max.ms` and starts again with a
//!   pre-vote round.

use bytes::Bytes;

use super::follower::FetchResult;
use super::leader::VoterChange;
use super::log::{Entry, Payload, RaftLog, Snapshot, SnapshotId, VoterSet};
use super::messages::Message;
use super::state::{
    Election, Follower, LeaderState, QuorumState, ReplicaProgress, Resigned, Role, RoleKind,
    Unattached,
};
use super::{Action, Input, NodeId, RaftConfig, ReplicaKey};

/// One member of the metadata quorum (voter or observer), as a pure state machine.
#[derive(Debug, Clone)]
pub struct RaftNode {
    /// Voters and timeouts.
    pub(super) config: RaftConfig,
    /// This node's id and metadata log directory id.
    pub(super) key: ReplicaKey,
    /// The durable part of the state; every change goes out as a persist action first.
    pub(super) quorum: QuorumState,
    /// The current role and its timers.
    pub(super) role: Role,
    /// The core's copy of the log; the driver holds the durable one.
    pub(super) log: RaftLog,
    /// Entries below it are committed. Not persisted (as in Kafka): it restarts at 0 and
    /// is learned again from the leader.
    pub(super) high_watermark: i64,
    /// State of the election timer randomness (splitmix64), seeded by the driver.
    rng: u64,
}

impl RaftNode {
    /// A node starting at `now` (a monotonic clock in ms) from what its disk holds: the
    /// last persisted quorum state, and the log (its latest snapshot and the entries after
    /// it). A node that restarts after leading comes back resigned: its followers' progress
    /// is gone, so it stands again.
    pub fn new(
        config: RaftConfig,
        key: ReplicaKey,
        quorum: QuorumState,
        log: RaftLog,
        now: u64,
        seed: u64,
    ) -> Self {
        let mut node = RaftNode {
            config,
            key,
            quorum,
            role: Role::Resigned(Resigned {
                election_deadline: now,
            }),
            // A snapshot holds only committed entries.
            high_watermark: log.start_offset(),
            log,
            rng: seed,
        };
        // Kafka's `KafkaRaftClient.initialize`: the only voter becomes a candidate at once
        // (there is nobody to wait for), so a single node leads as soon as it starts.
        let timeout = if node.voters() == [key] {
            0
        } else {
            node.random_election_timeout()
        };
        node.role = match quorum.leader {
            Some(leader) if leader == key.id && node.is_voter() => Role::Resigned(Resigned {
                election_deadline: now + timeout,
            }),
            Some(leader) if leader != key.id => Role::Follower(Follower {
                leader,
                fetch_deadline: now + node.config.fetch_timeout_ms,
                in_flight_since: None,
                next_fetch_at: now,
                last_heard_ms: None,
                leader_resigned: false,
                awaiting_snapshot: None,
            }),
            _ => Role::Unattached(Unattached {
                election_deadline: now + timeout,
                next_discovery_at: now,
                next_discovery_voter: 0,
            }),
        };
        node
    }

    /// Feeds one input; returns what the driver must do, in order (see the module doc).
    pub fn step(&mut self, now: u64, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Tick => self.tick(now, &mut out),
            Input::Message { from, msg } => self.handle(now, from, msg, &mut out),
            Input::Propose(records) => self.propose(now, records, &mut out),
            Input::Resign => {
                if matches!(self.role, Role::Leader(_)) {
                    self.resign(now, &mut out);
                }
            }
            Input::Snapshot { end_offset, data } => self.take_snapshot(end_offset, data, &mut out),
            Input::AddVoter(key, endpoint) => {
                self.change_voters(now, VoterChange::Add(key, endpoint), &mut out);
            }
            Input::RemoveVoter(key) => self.change_voters(now, VoterChange::Remove(key), &mut out),
            Input::Unreachable(to) => self.on_unreachable(now, to),
        }
        out
    }

    /// The latest time by which the driver must call [`Input::Tick`].
    pub fn next_deadline(&self) -> u64 {
        let retry = self.config.request_timeout_ms;
        match &self.role {
            Role::Unattached(u) if self.is_voter() => u.election_deadline,
            Role::Unattached(u) => u.next_discovery_at,
            Role::Prospective(e) | Role::Candidate(e) => {
                e.backoff_until.unwrap_or(e.deadline).min(e.next_retry_at)
            }
            Role::Follower(f) => {
                let fetch = f.in_flight_since.map_or(f.next_fetch_at, |t| t + retry);
                f.fetch_deadline.min(fetch)
            }
            Role::Leader(l) => {
                if l.acknowledged.len() < l.voters.len() {
                    l.check_quorum_deadline.min(l.next_begin_epoch_at)
                } else {
                    l.check_quorum_deadline
                }
            }
            Role::Resigned(r) => r.election_deadline,
        }
    }

    /// This node's identity.
    pub fn key(&self) -> ReplicaKey {
        self.key
    }

    /// The current epoch.
    pub fn epoch(&self) -> i32 {
        self.quorum.epoch
    }

    /// The current role.
    pub fn role(&self) -> RoleKind {
        self.role.kind()
    }

    /// The leader of the current epoch, if known.
    pub fn leader(&self) -> Option<NodeId> {
        self.quorum.leader
    }

    /// The quorum state as last persisted.
    pub fn quorum_state(&self) -> QuorumState {
        self.quorum
    }

    /// Entries below it are committed.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The core's view of the log.
    pub fn log(&self) -> &RaftLog {
        &self.log
    }

    /// The voter set in force: the latest `Voters` entry in the log, committed or not
    /// (KIP-853), else the bootstrap set.
    pub fn voters(&self) -> &[ReplicaKey] {
        self.log.voters().unwrap_or(&self.config.voters)
    }

    /// The voter set in force with the endpoints its `Voters` entry records; `None` while
    /// the bootstrap set from the configuration is in force.
    pub fn voter_set(&self) -> Option<&VoterSet> {
        self.log.voter_set()
    }

    /// Whether this node, with its current directory, is in the voter set.
    pub fn is_voter(&self) -> bool {
        self.voters().contains(&self.key)
    }

    pub(super) fn majority(&self) -> usize {
        self.voters().len() / 2 + 1
    }

    pub(super) fn is_voter_id(&self, id: NodeId) -> bool {
        self.voters().iter().any(|v| v.id == id)
    }

    pub(super) fn next_random(&mut self) -> u64 {
        // splitmix64: small, seedable, and enough to spread election timers.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(super) fn random_election_timeout(&mut self) -> u64 {
        let t = self.config.election_timeout_ms.max(1);
        t + self.next_random() % t
    }

    pub(super) fn random_backoff(&mut self) -> u64 {
        self.next_random() % (self.config.election_backoff_max_ms + 1)
    }

    pub(super) fn persist(&mut self, quorum: QuorumState, out: &mut Vec<Action>) {
        self.quorum = quorum;
        out.push(Action::PersistQuorumState(quorum));
    }

    pub(super) fn notify(&self, out: &mut Vec<Action>) {
        out.push(Action::RoleChanged {
            role: self.role.kind(),
            epoch: self.quorum.epoch,
            leader: self.quorum.leader,
        });
    }

    // ---- transitions -------------------------------------------------------------------

    /// Moves to `epoch` with no leader known; a voter's election timer fires at `deadline`.
    pub(super) fn become_unattached(
        &mut self,
        now: u64,
        epoch: i32,
        deadline: u64,
        out: &mut Vec<Action>,
    ) {
        if epoch != self.quorum.epoch {
            self.persist(
                QuorumState {
                    epoch,
                    voted_for: None,
                    leader: None,
                },
                out,
            );
        } else if !self.is_voter() && self.quorum.leader.is_some_and(|l| l != self.key.id) {
            // An observer that lost its leader forgets it. A voter never unlearns the
            // leader of its epoch: it could then vote in that epoch and elect a second one.
            let quorum = QuorumState {
                leader: None,
                ..self.quorum
            };
            self.persist(quorum, out);
        }
        let voters = self.voters().len().max(1) as u64;
        let start = (self.next_random() % voters) as usize;
        self.role = Role::Unattached(Unattached {
            election_deadline: deadline,
            next_discovery_at: now,
            next_discovery_voter: start,
        });
        self.notify(out);
    }

    /// Follows `leader` in `epoch` (>= the current one) and fetches at once.
    pub(super) fn become_follower(
        &mut self,
        now: u64,
        epoch: i32,
        leader: NodeId,
        out: &mut Vec<Action>,
    ) {
        if leader == self.key.id {
            // A claim that we lead, from an earlier life of this node: not ours to act on.
            if epoch > self.quorum.epoch {
                let deadline = now + self.random_election_timeout();
                self.become_unattached(now, epoch, deadline, out);
            }
            return;
        }
        if epoch == self.quorum.epoch && self.quorum.leader.is_some_and(|l| l != leader) {
            // One leader per epoch: a second claim on an epoch whose leader this node knows
            // (itself included) comes from a node that did not win it, or is garbled.
            // Kafka's `hasConsistentLeader` refuses it too.
            return;
        }
        let voted_for = if epoch == self.quorum.epoch {
            self.quorum.voted_for
        } else {
            None
        };
        let quorum = QuorumState {
            epoch,
            voted_for,
            leader: Some(leader),
        };
        if quorum != self.quorum {
            self.persist(quorum, out);
        }
        self.role = Role::Follower(Follower {
            leader,
            fetch_deadline: now + self.config.fetch_timeout_ms,
            in_flight_since: None,
            next_fetch_at: now,
            last_heard_ms: None,
            leader_resigned: false,
            awaiting_snapshot: None,
        });
        self.notify(out);
        self.send_fetch(now, out);
    }

    /// KIP-996: ask for pre-votes without touching the epoch.
    pub(super) fn become_prospective(&mut self, now: u64, out: &mut Vec<Action>) {
        if !self.is_voter() {
            let deadline = now + self.random_election_timeout();
            self.become_unattached(now, self.quorum.epoch, deadline, out);
            return;
        }
        let deadline = now + self.random_election_timeout();
        self.role = Role::Prospective(Election {
            granted: [self.key.id].into(),
            rejected: Default::default(),
            deadline,
            next_retry_at: now + self.config.request_timeout_ms,
            backoff_until: None,
            previous_leader: self.quorum.leader.filter(|&l| l != self.key.id),
        });
        self.notify(out);
        if self.majority() <= 1 {
            self.become_candidate(now, out);
        } else {
            self.send_vote_requests(true, out);
        }
    }

    /// Raft §5.2: a new epoch, a vote for itself (persisted first), then vote requests.
    pub(super) fn become_candidate(&mut self, now: u64, out: &mut Vec<Action>) {
        let quorum = QuorumState {
            epoch: self.quorum.epoch + 1,
            voted_for: Some(self.key),
            leader: None,
        };
        self.persist(quorum, out);
        let deadline = now + self.random_election_timeout();
        self.role = Role::Candidate(Election {
            granted: [self.key.id].into(),
            rejected: Default::default(),
            deadline,
            next_retry_at: now + self.config.request_timeout_ms,
            backoff_until: None,
            previous_leader: None,
        });
        self.notify(out);
        if self.majority() <= 1 {
            self.become_leader(now, out);
        } else {
            self.send_vote_requests(false, out);
        }
    }

    /// KIP-595: persist the leadership, write the LeaderChange entry that opens the epoch,
    /// and announce the epoch with BeginQuorumEpoch.
    pub(super) fn become_leader(&mut self, now: u64, out: &mut Vec<Action>) {
        let quorum = QuorumState {
            leader: Some(self.key.id),
            ..self.quorum
        };
        self.persist(quorum, out);
        let epoch_start_offset = self.log.end_offset();
        let entry = Entry {
            epoch: quorum.epoch,
            payload: Payload::LeaderChange {
                leader: self.key.id,
            },
        };
        self.log.append(entry.clone());
        out.push(Action::AppendToLog {
            base_offset: epoch_start_offset,
            entries: vec![entry],
        });
        let voters = self
            .voters()
            .iter()
            .map(|&v| (v.id, (v, ReplicaProgress::default())))
            .collect();
        self.role = Role::Leader(Box::new(LeaderState {
            epoch_start_offset,
            voters,
            observers: Default::default(),
            acknowledged: [self.key.id].into(),
            next_begin_epoch_at: now + self.config.request_timeout_ms,
            fetched_since_check: [self.key.id].into(),
            check_quorum_deadline: now + self.config.fetch_timeout_ms * 3 / 2,
        }));
        self.notify(out);
        self.send_begin_quorum_epoch(None, out);
        self.maybe_advance_high_watermark(now, out);
    }

    /// KIP-595 graceful resignation: EndQuorumEpoch to the other voters, most caught-up
    /// first as preferred successors.
    pub(super) fn resign(&mut self, now: u64, out: &mut Vec<Action>) {
        let mut successors: Vec<(i64, ReplicaKey)> = match &self.role {
            Role::Leader(l) => l
                .voters
                .values()
                .filter(|(k, _)| k.id != self.key.id)
                .map(|(k, p)| (p.end_offset.unwrap_or(-1), *k))
                .collect(),
            _ => return,
        };
        successors.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let preferred_successors: Vec<ReplicaKey> = successors.iter().map(|s| s.1).collect();
        for k in &preferred_successors {
            out.push(Action::Send {
                to: k.id,
                msg: Message::EndQuorumEpochRequest {
                    epoch: self.quorum.epoch,
                    leader: self.key.id,
                    preferred_successors: preferred_successors.clone(),
                },
            });
        }
        let deadline = now + self.random_election_timeout();
        self.role = Role::Resigned(Resigned {
            election_deadline: deadline,
        });
        self.notify(out);
    }

    /// A prospective round failed: back to the leader it followed, if any, else wait a
    /// random backoff.
    pub(super) fn prospective_failed(
        &mut self,
        now: u64,
        previous: Option<NodeId>,
        out: &mut Vec<Action>,
    ) {
        match previous {
            Some(leader) if self.quorum.leader == Some(leader) => {
                self.become_follower(now, self.quorum.epoch, leader, out);
            }
            _ => {
                let deadline = now + self.random_backoff();
                self.become_unattached(now, self.quorum.epoch, deadline, out);
            }
        }
    }

    /// Moves to a larger epoch seen in a message. Returns whether it did.
    pub(super) fn observe_epoch(
        &mut self,
        now: u64,
        epoch: i32,
        leader: Option<NodeId>,
        out: &mut Vec<Action>,
    ) -> bool {
        if epoch <= self.quorum.epoch {
            return false;
        }
        match leader {
            Some(l) if l != self.key.id => self.become_follower(now, epoch, l, out),
            _ => {
                let deadline = now + self.random_election_timeout();
                self.become_unattached(now, epoch, deadline, out);
            }
        }
        true
    }

    // ---- timers ------------------------------------------------------------------------

    pub(super) fn tick(&mut self, now: u64, out: &mut Vec<Action>) {
        let retry = self.config.request_timeout_ms;
        let discovery_fetch = self.fetch_request();
        let majority = self.majority();
        let is_voter = self.is_voter();
        let voter_ids: Vec<NodeId> = self.voters().iter().map(|v| v.id).collect();
        match &mut self.role {
            Role::Unattached(u) => {
                if is_voter {
                    if now >= u.election_deadline {
                        self.become_prospective(now, out);
                    }
                } else if now >= u.next_discovery_at {
                    // An observer with no leader asks the voters in turn, or, knowing none
                    // but itself, the bootstrap servers (KIP-853; Kafka sends its Fetch to
                    // a random bootstrap server).
                    u.next_discovery_at = now + retry;
                    let mut others: Vec<NodeId> = voter_ids
                        .into_iter()
                        .filter(|&id| id != self.key.id)
                        .collect();
                    if others.is_empty() {
                        others.clone_from(&self.config.bootstrap);
                    }
                    if !others.is_empty() {
                        let to = others[u.next_discovery_voter % others.len()];
                        u.next_discovery_voter += 1;
                        out.push(Action::Send {
                            to,
                            msg: discovery_fetch,
                        });
                    }
                }
            }
            Role::Prospective(e) => {
                if now >= e.deadline {
                    let previous = e.previous_leader;
                    self.prospective_failed(now, previous, out);
                } else if now >= e.next_retry_at {
                    e.next_retry_at = now + retry;
                    self.send_vote_requests(true, out);
                }
            }
            Role::Candidate(e) => {
                if e.backoff_until.is_some_and(|b| now >= b) || now >= e.deadline {
                    self.become_prospective(now, out);
                } else if e.backoff_until.is_none() && now >= e.next_retry_at {
                    e.next_retry_at = now + retry;
                    self.send_vote_requests(false, out);
                }
            }
            Role::Follower(f) => {
                if now >= f.fetch_deadline {
                    if is_voter {
                        self.become_prospective(now, out);
                    } else {
                        let deadline = now + self.random_election_timeout();
                        self.become_unattached(now, self.quorum.epoch, deadline, out);
                    }
                } else if f
                    .in_flight_since
                    .map_or(now >= f.next_fetch_at, |t| now >= t + retry)
                {
                    self.send_fetch(now, out);
                }
            }
            Role::Leader(l) => {
                if now >= l.check_quorum_deadline {
                    if l.fetched_since_check.len() >= majority {
                        // A quorum of one needs no fetches. Each window starts afresh, the
                        // leader counting itself only while it is a voter.
                        l.check_quorum_deadline = now + self.config.fetch_timeout_ms * 3 / 2;
                        l.fetched_since_check
                            .retain(|&id| is_voter && id == self.key.id);
                    } else {
                        self.resign(now, out);
                    }
                } else if now >= l.next_begin_epoch_at {
                    l.next_begin_epoch_at = now + retry;
                    let pending: Vec<NodeId> = l
                        .voters
                        .keys()
                        .filter(|id| !l.acknowledged.contains(id))
                        .copied()
                        .collect();
                    self.send_begin_quorum_epoch(Some(&pending), out);
                }
            }
            Role::Resigned(r) => {
                if now >= r.election_deadline {
                    self.become_prospective(now, out);
                }
            }
        }
    }

    // ---- outgoing requests -------------------------------------------------------------

    /// BeginQuorumEpoch to `only` (or every other voter).
    pub(super) fn send_begin_quorum_epoch(&self, only: Option<&[NodeId]>, out: &mut Vec<Action>) {
        for &voter in self.voters() {
            if voter.id == self.key.id || only.is_some_and(|o| !o.contains(&voter.id)) {
                continue;
            }
            out.push(Action::Send {
                to: voter.id,
                msg: Message::BeginQuorumEpochRequest {
                    epoch: self.quorum.epoch,
                    leader: self.key,
                    voter,
                },
            });
        }
    }

    // ---- inputs ------------------------------------------------------------------------

    pub(super) fn propose(&mut self, now: u64, records: Vec<Bytes>, out: &mut Vec<Action>) {
        if !matches!(self.role, Role::Leader(_)) {
            out.push(Action::NotLeader {
                leader: self.quorum.leader.filter(|&l| l != self.key.id),
            });
            return;
        }
        if records.is_empty() {
            return;
        }
        let epoch = self.quorum.epoch;
        let base_offset = self.log.end_offset();
        let entries: Vec<Entry> = records
            .into_iter()
            .map(|r| Entry {
                epoch,
                payload: Payload::Data(r),
            })
            .collect();
        for e in &entries {
            self.log.append(e.clone());
        }
        let last_offset = self.log.end_offset() - 1;
        out.push(Action::AppendToLog {
            base_offset,
            entries,
        });
        out.push(Action::Proposed {
            epoch,
            base_offset,
            last_offset,
        });
        self.maybe_advance_high_watermark(now, out);
    }

    /// KIP-630: the application snapshotted its state up to `end_offset`; keep the
    /// snapshot and drop the entries it covers.
    pub(super) fn take_snapshot(&mut self, end_offset: i64, data: Bytes, out: &mut Vec<Action>) {
        if end_offset <= self.log.start_offset() || end_offset > self.high_watermark {
            return;
        }
        let Some(epoch) = self.log.epoch_at(end_offset - 1) else {
            return;
        };
        let snapshot = Snapshot {
            id: SnapshotId { end_offset, epoch },
            data,
            voters: self.log.voters_at(end_offset),
        };
        out.push(Action::PersistSnapshot(snapshot.clone()));
        out.push(Action::DeleteLogBefore { offset: end_offset });
        self.log.compact(snapshot);
    }

    pub(super) fn handle(&mut self, now: u64, from: NodeId, msg: Message, out: &mut Vec<Action>) {
        match msg {
            Message::VoteRequest {
                epoch,
                candidate,
                voter,
                last_epoch,
                end_offset,
                pre_vote,
            } => {
                let granted = self.on_vote_request(
                    now,
                    epoch,
                    candidate,
                    voter,
                    (last_epoch, end_offset),
                    pre_vote,
                    out,
                );
                out.push(Action::Send {
                    to: from,
                    msg: Message::VoteResponse {
                        epoch: self.quorum.epoch,
                        granted,
                        leader: self.quorum.leader,
                        pre_vote,
                    },
                });
            }
            Message::VoteResponse {
                epoch,
                granted,
                leader,
                pre_vote,
            } => self.on_vote_response(now, from, epoch, granted, leader, pre_vote, out),
            Message::BeginQuorumEpochRequest { epoch, leader, .. } => {
                // KIP-853 also checks the addressed voter's directory id; a node whose
                // disk was replaced follows the leader all the same, as an observer.
                if epoch >= self.quorum.epoch && leader.id != self.key.id {
                    let following =
                        matches!(&self.role, Role::Follower(f) if f.leader == leader.id);
                    let leading = matches!(self.role, Role::Leader(_));
                    if epoch > self.quorum.epoch || (!following && !leading) {
                        self.become_follower(now, epoch, leader.id, out);
                    }
                    if let Role::Follower(f) = &mut self.role
                        && f.leader == leader.id
                        && epoch == self.quorum.epoch
                    {
                        f.last_heard_ms = Some(now);
                    }
                }
                out.push(Action::Send {
                    to: from,
                    msg: Message::BeginQuorumEpochResponse {
                        epoch: self.quorum.epoch,
                    },
                });
            }
            Message::BeginQuorumEpochResponse { epoch } => {
                if !self.observe_epoch(now, epoch, None, out)
                    && epoch == self.quorum.epoch
                    && let Role::Leader(l) = &mut self.role
                    && l.voters.contains_key(&from)
                {
                    l.acknowledged.insert(from);
                }
            }
            Message::EndQuorumEpochRequest {
                epoch,
                leader,
                preferred_successors,
            } => {
                self.on_end_quorum_epoch(now, epoch, leader, &preferred_successors, out);
                out.push(Action::Send {
                    to: from,
                    msg: Message::EndQuorumEpochResponse {
                        epoch: self.quorum.epoch,
                    },
                });
            }
            Message::EndQuorumEpochResponse { epoch } => {
                self.observe_epoch(now, epoch, None, out);
            }
            Message::FetchRequest {
                epoch,
                replica,
                fetch_offset,
                last_fetched_epoch,
            } => {
                let response = self.on_fetch_request(
                    now,
                    epoch,
                    replica,
                    fetch_offset,
                    last_fetched_epoch,
                    out,
                );
                out.push(Action::Send {
                    to: from,
                    msg: response,
                });
            }
            Message::FetchResponse {
                epoch,
                leader,
                error,
                fetch_offset,
                last_fetched_epoch,
                diverging,
                snapshot_id,
                entries,
                high_watermark,
            } => {
                let response = FetchResult {
                    epoch,
                    leader,
                    error,
                    position: (fetch_offset, last_fetched_epoch),
                    diverging,
                    snapshot_id,
                    entries,
                    high_watermark,
                };
                self.on_fetch_response(now, from, response, out);
            }
            Message::FetchSnapshotRequest {
                epoch,
                replica,
                snapshot_id,
            } => {
                let response = self.on_fetch_snapshot_request(now, epoch, replica, snapshot_id);
                out.push(Action::Send {
                    to: from,
                    msg: response,
                });
            }
            Message::FetchSnapshotResponse {
                epoch,
                leader,
                error,
                snapshot,
            } => self.on_fetch_snapshot_response(now, from, epoch, leader, error, snapshot, out),
        }
    }
}
