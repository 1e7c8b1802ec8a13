//! Votes and pre-votes (KIP-595, KIP-996), and EndQuorumEpoch.

#[cfg(test)]
use super::Fault;
use super::messages::Message;
use super::node::RaftNode;
use super::state::{QuorumState, Role};
use super::{Action, NodeId, ReplicaKey};

impl RaftNode {
    pub(super) fn send_vote_requests(&self, pre_vote: bool, out: &mut Vec<Action>) {
        let (Role::Prospective(e) | Role::Candidate(e)) = &self.role else {
            return;
        };
        for &voter in self.voters() {
            if voter.id == self.key.id
                || e.granted.contains(&voter.id)
                || e.rejected.contains(&voter.id)
            {
                continue;
            }
            out.push(Action::Send {
                to: voter.id,
                msg: Message::VoteRequest {
                    epoch: self.quorum.epoch,
                    candidate: self.key,
                    voter,
                    last_epoch: self.log.last_epoch(),
                    end_offset: self.log.end_offset(),
                    pre_vote,
                },
            });
        }
    }

    /// Decides a vote or pre-vote; any state change is persisted before the answer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_vote_request(
        &mut self,
        now: u64,
        epoch: i32,
        candidate: ReplicaKey,
        voter: ReplicaKey,
        candidate_log: (i32, i64),
        pre_vote: bool,
        out: &mut Vec<Action>,
    ) -> bool {
        if epoch < self.quorum.epoch {
            return false;
        }
        // Raft §5.1: a larger epoch is adopted, whatever the message. For a pre-vote it is
        // the sender's current epoch, reached through an election a majority allowed.
        if epoch > self.quorum.epoch {
            let deadline = now + self.random_election_timeout();
            self.become_unattached(now, epoch, deadline, out);
        }
        // KIP-853: only the addressed voter answers, so a node whose disk was replaced
        // (a new directory id) never votes for the voter it was. Beyond that, the voter set
        // is the candidate's to consult, not ours (Raft dissertation §4.1): a voter whose
        // log does not yet hold the change that made it one must still vote, or a quorum
        // can deadlock mid-change.
        let identity_ok = voter == self.key && candidate != self.key;
        // Raft §5.4.1: only a candidate whose log is at least as up to date.
        let log_ok = candidate_log >= (self.log.last_epoch(), self.log.end_offset());
        #[cfg(test)]
        let log_ok = log_ok || self.config.fault == Fault::VoteIgnoresLog;
        if !identity_ok || !log_ok {
            return false;
        }
        if pre_vote {
            // KIP-996: a follower that hears from its leader refuses.
            return !self.has_live_leader(now);
        }
        if self.quorum.leader.is_some() || self.quorum.voted_for.is_some_and(|v| v != candidate) {
            return false;
        }
        if self.quorum.voted_for.is_none() {
            let quorum = QuorumState {
                voted_for: Some(candidate),
                ..self.quorum
            };
            self.persist(quorum, out);
        }
        // Granting a vote restarts the election timer.
        let deadline = now + self.random_election_timeout();
        match &mut self.role {
            Role::Unattached(u) => u.election_deadline = deadline,
            _ => self.become_unattached(now, self.quorum.epoch, deadline, out),
        }
        true
    }

    pub(super) fn has_live_leader(&self, now: u64) -> bool {
        match &self.role {
            Role::Leader(_) => true,
            Role::Follower(f) => {
                !f.leader_resigned
                    && f.last_heard_ms
                        .is_some_and(|t| now < t + self.config.fetch_timeout_ms)
            }
            _ => false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_vote_response(
        &mut self,
        now: u64,
        from: NodeId,
        epoch: i32,
        granted: bool,
        leader: Option<NodeId>,
        pre_vote: bool,
        out: &mut Vec<Action>,
    ) {
        if self.observe_epoch(now, epoch, leader, out)
            || epoch < self.quorum.epoch
            || from == self.key.id
            || !self.is_voter_id(from)
        {
            return;
        }
        let majority = self.majority();
        let voters = self.voters().len();
        match &mut self.role {
            Role::Prospective(e) if pre_vote => {
                if granted {
                    e.granted.insert(from);
                } else {
                    e.rejected.insert(from);
                }
                if e.granted.len() >= majority {
                    self.become_candidate(now, out);
                } else if let Some(l) = leader.filter(|&l| l != self.key.id)
                    && self.quorum.leader.is_none()
                {
                    // Someone knows a leader of our epoch that we never heard of: follow
                    // it instead. (One we already followed is the one that went quiet.)
                    self.become_follower(now, epoch, l, out);
                } else if e.rejected.len() > voters - majority {
                    let previous = e.previous_leader;
                    self.prospective_failed(now, previous, out);
                }
            }
            Role::Candidate(e) if !pre_vote && e.backoff_until.is_none() => {
                if granted {
                    e.granted.insert(from);
                } else {
                    e.rejected.insert(from);
                }
                if e.granted.len() >= majority {
                    self.become_leader(now, out);
                } else if e.rejected.len() > voters - majority {
                    let backoff = self.random_backoff();
                    if let Role::Candidate(e) = &mut self.role {
                        e.backoff_until = Some(now + backoff);
                    }
                }
            }
            _ => {}
        }
    }

    pub(super) fn on_end_quorum_epoch(
        &mut self,
        now: u64,
        epoch: i32,
        leader: NodeId,
        preferred: &[ReplicaKey],
        out: &mut Vec<Action>,
    ) {
        if epoch < self.quorum.epoch || leader == self.key.id {
            return;
        }
        // KIP-595: the preferred successors stand first, in order; the rest wait a full
        // election timeout.
        let wait = match preferred.iter().position(|k| *k == self.key) {
            Some(0) => 0,
            Some(p) => (100u64 << (p - 1).min(16)).min(self.config.election_backoff_max_ms),
            None => self.random_election_timeout(),
        };
        let deadline = now + wait;
        if epoch > self.quorum.epoch {
            self.become_unattached(now, epoch, deadline, out);
            return;
        }
        match &mut self.role {
            Role::Follower(f) if f.leader == leader => {
                f.leader_resigned = true;
                f.fetch_deadline = f.fetch_deadline.min(deadline);
            }
            Role::Unattached(u) => u.election_deadline = u.election_deadline.min(deadline),
            _ => {}
        }
    }
}
