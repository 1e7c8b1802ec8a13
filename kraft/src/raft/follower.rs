//! The follower's side of replication (KIP-595): fetching, truncating on a diverging
//! epoch, appending, and learning the high watermark. Observers follow the same path.

use super::log::{Entry, Snapshot, SnapshotId};
use super::messages::{FetchError, Message};
use super::node::RaftNode;
use super::state::Role;
use super::{Action, NodeId};

impl RaftNode {
    pub(super) fn fetch_request(&self) -> Message {
        Message::FetchRequest {
            epoch: self.quorum.epoch,
            replica: self.key,
            fetch_offset: self.log.end_offset(),
            last_fetched_epoch: self.log.last_epoch(),
        }
    }

    pub(super) fn send_fetch(&mut self, now: u64, out: &mut Vec<Action>) {
        let msg = self.fetch_request();
        if let Role::Follower(f) = &mut self.role {
            f.in_flight_since = Some(now);
            f.awaiting_snapshot = None;
            out.push(Action::Send { to: f.leader, msg });
        }
    }

    /// A request to `to` was lost ([`super::Input::Unreachable`]). A follower whose Fetch
    /// to its leader was among them fetches again after the retry backoff. Other roles
    /// resend on their own timers: a candidate's votes and a leader's BeginQuorumEpoch
    /// after the request timeout, within their election and check-quorum windows.
    pub(super) fn on_unreachable(&mut self, now: u64, to: NodeId) {
        let backoff = self.config.retry_backoff_ms;
        if let Role::Follower(f) = &mut self.role
            && f.leader == to
            && f.in_flight_since.is_some()
        {
            f.in_flight_since = None;
            f.next_fetch_at = now + backoff;
        }
    }

    pub(super) fn on_fetch_response(
        &mut self,
        now: u64,
        from: NodeId,
        r: FetchResult,
        out: &mut Vec<Action>,
    ) {
        if self.config.bootstrap.contains(&from) {
            // KIP-853: an answer through a bootstrap server names the leader by its node
            // id; follow it there (its entries come from the leader itself).
            let unattached = matches!(self.role, Role::Unattached(_));
            if let Some(l) = r.leader.filter(|&l| l != self.key.id)
                && (r.epoch > self.quorum.epoch || (r.epoch == self.quorum.epoch && unattached))
            {
                self.become_follower(now, r.epoch, l, out);
            }
            return;
        }
        if r.error.is_some() {
            if self.observe_epoch(now, r.epoch, r.leader, out) || r.epoch < self.quorum.epoch {
                return;
            }
            let leader = r.leader.filter(|&l| l != self.key.id);
            match &mut self.role {
                Role::Follower(f) if f.leader == from => {
                    // The leader we follow no longer serves; try again later, and let the
                    // fetch timeout decide.
                    f.in_flight_since = None;
                    f.next_fetch_at = now + self.config.fetch_max_wait_ms;
                }
                Role::Unattached(_) | Role::Prospective(_) | Role::Candidate(_) => {
                    if let Some(l) = leader {
                        self.become_follower(now, r.epoch, l, out);
                    }
                }
                _ => {}
            }
            return;
        }
        if r.epoch > self.quorum.epoch {
            if r.leader == Some(from) {
                self.become_follower(now, r.epoch, from, out);
            }
            return;
        }
        if r.epoch < self.quorum.epoch || r.leader != Some(from) {
            return;
        }
        match &self.role {
            Role::Follower(f) if f.leader == from => {}
            Role::Leader(_) | Role::Resigned(_) | Role::Follower(_) => return,
            _ => {
                self.become_follower(now, r.epoch, from, out);
                return;
            }
        }
        // A stale or repeated response answers a position we have left.
        if r.position != (self.log.end_offset(), self.log.last_epoch()) {
            return;
        }
        let fetch_timeout = self.config.fetch_timeout_ms;
        let max_wait = self.config.fetch_max_wait_ms;
        if let Some((epoch, end_offset)) = r.diverging {
            // KIP-595: truncate to where our log and the leader's agree for that epoch,
            // then fetch again from there.
            let (_, our_end) = self.log.end_offset_for_epoch(epoch);
            // Never into our snapshot: it holds committed entries only.
            let truncate_to = end_offset.min(our_end).max(self.log.start_offset());
            if truncate_to < self.log.end_offset() {
                self.log.truncate(truncate_to);
                out.push(Action::TruncateLog {
                    end_offset: truncate_to,
                });
            }
            if let Role::Follower(f) = &mut self.role {
                f.fetch_deadline = now + fetch_timeout;
                f.last_heard_ms = Some(now);
                f.in_flight_since = None;
            }
            self.send_fetch(now, out);
            return;
        }
        if let Some(snapshot_id) = r.snapshot_id {
            // KIP-630: we are behind the leader's log start; fetch its snapshot. An
            // unanswered request falls back to a Fetch after the request timeout.
            let msg = Message::FetchSnapshotRequest {
                epoch: self.quorum.epoch,
                replica: self.key,
                snapshot_id,
            };
            if let Role::Follower(f) = &mut self.role {
                f.fetch_deadline = now + fetch_timeout;
                f.last_heard_ms = Some(now);
                f.in_flight_since = Some(now);
                f.awaiting_snapshot = Some(snapshot_id);
                out.push(Action::Send { to: from, msg });
            }
            return;
        }
        let mut last = self.log.last_epoch();
        if r.entries.iter().any(|e| {
            let ok = e.epoch >= last && e.epoch <= r.epoch;
            last = e.epoch;
            !ok
        }) {
            // Not a log this leader could have sent; drop it rather than corrupt ours.
            return;
        }
        let got_entries = !r.entries.is_empty();
        if got_entries {
            let base_offset = self.log.end_offset();
            for e in &r.entries {
                self.log.append(e.clone());
            }
            out.push(Action::AppendToLog {
                base_offset,
                entries: r.entries,
            });
        }
        let high_watermark = r.high_watermark.min(self.log.end_offset());
        if high_watermark > self.high_watermark {
            self.high_watermark = high_watermark;
            out.push(Action::CommitTo { high_watermark });
        }
        if let Role::Follower(f) = &mut self.role {
            f.fetch_deadline = now + fetch_timeout;
            f.last_heard_ms = Some(now);
            f.in_flight_since = None;
            f.next_fetch_at = if got_entries { now } else { now + max_wait };
        }
        if got_entries {
            self.send_fetch(now, out);
        }
    }
}

impl RaftNode {
    /// KIP-630: installs a snapshot fetched from the leader in place of the whole log.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_fetch_snapshot_response(
        &mut self,
        now: u64,
        from: NodeId,
        epoch: i32,
        leader: Option<NodeId>,
        error: Option<FetchError>,
        snapshot: Option<Snapshot>,
        out: &mut Vec<Action>,
    ) {
        if self.observe_epoch(now, epoch, leader, out)
            || epoch < self.quorum.epoch
            || error.is_some()
        {
            return;
        }
        let awaited = match &self.role {
            Role::Follower(f) if f.leader == from => f.awaiting_snapshot,
            _ => return,
        };
        if awaited.is_none() {
            // Late or repeated: we have fetched since.
            return;
        }
        // Our log parts from the leader's below its log start, or ends before it: the
        // snapshot replaces all of it.
        if let Some(s) = snapshot.filter(|s| Some(s.id) == awaited) {
            self.log.install(s.clone());
            out.push(Action::InstallSnapshot(s));
            if self.log.start_offset() > self.high_watermark {
                self.high_watermark = self.log.start_offset();
                out.push(Action::CommitTo {
                    high_watermark: self.high_watermark,
                });
            }
        }
        if let Role::Follower(f) = &mut self.role {
            f.fetch_deadline = now + self.config.fetch_timeout_ms;
            f.last_heard_ms = Some(now);
            f.in_flight_since = None;
        }
        self.send_fetch(now, out);
    }
}

/// A Fetch response's fields, unpacked.
pub(super) struct FetchResult {
    pub(super) epoch: i32,
    pub(super) leader: Option<NodeId>,
    pub(super) error: Option<FetchError>,
    /// The `(fetch_offset, last_fetched_epoch)` it answers.
    pub(super) position: (i64, i32),
    pub(super) diverging: Option<(i32, i64)>,
    pub(super) snapshot_id: Option<SnapshotId>,
    pub(super) entries: Vec<Entry>,
    pub(super) high_watermark: i64,
}
