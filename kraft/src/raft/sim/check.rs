//! The simulator's side of the driver contract: carrying out a node's actions on its disk
//! and the network, and the invariants checked on every action and after every event.

use std::fmt::Write as _;

use uuid::Uuid;

use super::{Check, Sim, short};
use crate::raft::{
    Action, Entry, Message, NodeId, Payload, QuorumState, ReplicaKey, RoleKind, Snapshot,
};

/// A node's disk: what survives a crash.
#[derive(Debug, Clone)]
pub(super) struct Disk {
    pub(super) directory_id: Uuid,
    pub(super) quorum: QuorumState,
    /// The latest snapshot, and the hash chain at its last entry (which is also the
    /// simulated state machine's state, its `data`).
    pub(super) snapshot: Option<(Snapshot, u64)>,
    /// The log start offset: the snapshot's end, or 0.
    pub(super) start: usize,
    /// `log[k]` is the entry at offset `start + k`.
    pub(super) log: Vec<Entry>,
    /// `chain[k]` hashes every entry up to offset `start + k` (epochs and payloads).
    pub(super) chain: Vec<u64>,
}

impl Disk {
    pub(super) fn empty(directory_id: Uuid) -> Self {
        Disk {
            directory_id,
            quorum: QuorumState::default(),
            snapshot: None,
            start: 0,
            log: Vec::new(),
            chain: Vec::new(),
        }
    }

    /// The latest voter set this disk holds, if it changed the bootstrap set.
    pub(super) fn voters(&self) -> Option<Vec<ReplicaKey>> {
        self.log
            .iter()
            .rev()
            .find_map(|e| match &e.payload {
                Payload::Voters(v) => Some(v.keys.clone()),
                _ => None,
            })
            .or_else(|| {
                self.snapshot
                    .as_ref()
                    .and_then(|s| s.0.voters.as_ref().map(|v| v.keys.clone()))
            })
    }

    pub(super) fn end(&self) -> usize {
        self.start + self.log.len()
    }

    /// The hash chain at offset `o`, if the log or the snapshot's boundary knows it.
    pub(super) fn chain_at(&self, o: usize) -> Option<u64> {
        if o >= self.start {
            self.chain.get(o - self.start).copied()
        } else if o + 1 == self.start {
            self.snapshot.as_ref().map(|s| s.1)
        } else {
            None
        }
    }

    /// Whether the first `len` entries here are the committed ones. A snapshot was checked
    /// to be committed when it was written, so a prefix inside it is.
    pub(super) fn holds_prefix(&self, len: usize, committed: &[(i32, u64)]) -> bool {
        len == 0
            || (len <= self.end()
                && (len <= self.start || self.chain_at(len - 1) == Some(committed[len - 1].1)))
    }
}

fn chain_hash(prev: u64, entry: &Entry) -> u64 {
    // FNV-1a over the previous link, the epoch and the payload.
    let mut h = prev ^ 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    entry.epoch.to_le_bytes().into_iter().for_each(&mut eat);
    match &entry.payload {
        Payload::LeaderChange { leader } => {
            eat(1);
            leader.0.to_le_bytes().into_iter().for_each(&mut eat);
        }
        Payload::Voters(voters) => {
            eat(3);
            for v in &voters.keys {
                v.id.0.to_le_bytes().into_iter().for_each(&mut eat);
                v.directory_id.as_bytes().iter().copied().for_each(&mut eat);
            }
        }
        Payload::Data(d) => {
            eat(2);
            d.iter().copied().for_each(&mut eat);
        }
    }
    h
}

impl Sim {
    pub(super) fn apply(&mut self, i: usize, action: Action) -> Check {
        let me = self.nodes[i].key();
        match action {
            Action::PersistQuorumState(q) => {
                let old = self.nodes[i].disk.quorum;
                if q.epoch < old.epoch {
                    return Err(format!(
                        "n{} epoch went back {} -> {}",
                        me.id.0, old.epoch, q.epoch
                    ));
                }
                if q.epoch == old.epoch && old.voted_for.is_some() && q.voted_for != old.voted_for {
                    return Err(format!(
                        "n{} changed its vote in epoch {}",
                        me.id.0, q.epoch
                    ));
                }
                if let Some(c) = q.voted_for {
                    match self.votes.get(&(me, q.epoch)) {
                        Some(&prev) if prev != c => {
                            return Err(format!(
                                "n{} voted for n{} and n{} in epoch {}",
                                me.id.0, prev.id.0, c.id.0, q.epoch
                            ));
                        }
                        _ => {
                            self.votes.insert((me, q.epoch), c);
                        }
                    }
                }
                self.note(|| format!("n{} persist {q:?}", me.id.0));
                self.nodes[i].disk.quorum = q;
            }
            Action::AppendToLog {
                base_offset,
                entries,
            } => {
                let disk = &self.nodes[i].disk;
                if base_offset != disk.end() as i64 {
                    return Err(format!(
                        "n{} appends at {base_offset}, log ends at {}",
                        me.id.0,
                        disk.end()
                    ));
                }
                let leading = self.nodes[i]
                    .raft
                    .as_ref()
                    .is_some_and(|r| r.role() == RoleKind::Leader);
                if leading
                    && matches!(
                        entries[..],
                        [Entry {
                            payload: Payload::Voters(_),
                            ..
                        }]
                    )
                {
                    self.stats.voter_changes += 1;
                }
                let disk = &mut self.nodes[i].disk;
                for e in entries {
                    let offset = disk.end();
                    let prev = offset
                        .checked_sub(1)
                        .and_then(|o| disk.chain_at(o))
                        .unwrap_or(0);
                    let h = chain_hash(prev, &e);
                    match self.log_matching.get(&(offset, e.epoch)) {
                        Some(&other) if other != h => {
                            return Err(format!(
                                "log matching: n{} offset {offset} epoch {} differs from another log",
                                me.id.0, e.epoch
                            ));
                        }
                        _ => {
                            self.log_matching.insert((offset, e.epoch), h);
                        }
                    }
                    disk.chain.push(h);
                    disk.log.push(e);
                }
                let end = disk.end();
                self.note(|| format!("n{} append -> end {end}", me.id.0));
            }
            Action::TruncateLog { end_offset } => {
                self.stats.truncations += 1;
                let disk = &mut self.nodes[i].disk;
                let end = usize::try_from(end_offset).map_err(|_| "negative truncate")?;
                if end < disk.start {
                    return Err(format!("n{} truncates into its snapshot", me.id.0));
                }
                // Does the cut remove a committed entry?
                let last_shared = disk.end().min(self.committed.len());
                if last_shared > end && disk.holds_prefix(last_shared, &self.committed) {
                    return Err(format!(
                        "n{} truncates to {end} below committed offset {}",
                        me.id.0,
                        last_shared - 1
                    ));
                }
                disk.log.truncate(end - disk.start);
                disk.chain.truncate(end - disk.start);
                self.note(|| format!("n{} truncate to {end}", me.id.0));
            }
            Action::PersistSnapshot(snapshot) => {
                self.stats.snapshots += 1;
                let chain = self.check_snapshot(i, &snapshot)?;
                let disk = &self.nodes[i].disk;
                if disk.chain_at(snapshot.id.end_offset as usize - 1) != Some(chain) {
                    return Err(format!("n{} snapshot is not of its own log", me.id.0));
                }
                self.note(|| format!("n{} snapshot at {}", me.id.0, snapshot.id.end_offset));
                self.nodes[i].disk.snapshot = Some((snapshot, chain));
            }
            Action::DeleteLogBefore { offset } => {
                let disk = &mut self.nodes[i].disk;
                let snapshot_end = disk.snapshot.as_ref().map(|s| s.0.id.end_offset);
                if snapshot_end != Some(offset) || (offset as usize) < disk.start {
                    return Err(format!(
                        "n{} deletes its log below {offset} without a snapshot there",
                        me.id.0
                    ));
                }
                let k = offset as usize - disk.start;
                disk.log.drain(..k);
                disk.chain.drain(..k);
                disk.start = offset as usize;
            }
            Action::InstallSnapshot(snapshot) => {
                self.stats.snapshots_fetched += 1;
                let chain = self.check_snapshot(i, &snapshot)?;
                self.note(|| {
                    format!(
                        "n{} installs snapshot at {}",
                        me.id.0, snapshot.id.end_offset
                    )
                });
                let disk = &mut self.nodes[i].disk;
                disk.start = snapshot.id.end_offset as usize;
                disk.snapshot = Some((snapshot, chain));
                disk.log.clear();
                disk.chain.clear();
            }
            Action::Send { to, msg } => {
                self.check_persisted_before_send(i, to, &msg)?;
                self.send(me.id, to, msg);
            }
            Action::CommitTo { high_watermark } => {
                let n = &mut self.nodes[i];
                if high_watermark <= n.last_high_watermark {
                    return Err(format!(
                        "n{} high watermark moved back {} -> {high_watermark}",
                        me.id.0, n.last_high_watermark
                    ));
                }
                n.last_high_watermark = high_watermark;
                let voters: Vec<i32> = self.nodes[i]
                    .raft
                    .as_ref()
                    .map(|r| r.voters().iter().map(|v| v.id.0).collect())
                    .unwrap_or_default();
                self.note(|| format!("n{} commit to {high_watermark} voters {voters:?}", me.id.0));
                self.check_committed(i, high_watermark)?;
            }
            Action::RoleChanged {
                role,
                epoch,
                leader,
            } => {
                self.note(|| format!("n{} -> {role:?} epoch {epoch} leader {leader:?}", me.id.0));
                if role == RoleKind::Leader {
                    self.stats.elections += 1;
                    if let Some(&other) = self.leaders.get(&epoch)
                        && other != me.id
                    {
                        return Err(format!(
                            "two leaders in epoch {epoch}: n{} and n{}",
                            other.0, me.id.0
                        ));
                    }
                    self.leaders.insert(epoch, me.id);
                }
            }
            Action::Proposed {
                epoch, last_offset, ..
            } => {
                if self.healed {
                    self.post_heal_proposals.push((me.id, epoch, last_offset));
                }
            }
            Action::NotLeader { .. } => {}
            Action::VoterChangeRejected(_) => {}
        }
        Ok(())
    }

    /// Raft §5: what a message promises must already be on disk.
    pub(super) fn check_persisted_before_send(&self, i: usize, to: NodeId, msg: &Message) -> Check {
        let n = &self.nodes[i];
        let q = n.disk.quorum;
        let ok = match msg {
            Message::VoteRequest {
                epoch,
                pre_vote: false,
                ..
            } => q.epoch == *epoch && q.voted_for == Some(n.key()),
            Message::VoteResponse {
                epoch,
                granted: true,
                pre_vote: false,
                ..
            } => q.epoch == *epoch && q.voted_for.map(|k| k.id) == Some(to),
            Message::BeginQuorumEpochRequest { epoch, .. } => {
                q.epoch == *epoch && q.leader == Some(n.id)
            }
            Message::FetchRequest { fetch_offset, .. } => *fetch_offset == n.disk.end() as i64,
            _ => true,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "n{} sent {} before persisting (disk: {q:?}, log end {})",
                n.id.0,
                short(msg),
                n.disk.end()
            ))
        }
    }

    /// A snapshot holds committed state only; returns the state (the chain value).
    pub(super) fn check_snapshot(&self, i: usize, snapshot: &Snapshot) -> Result<u64, String> {
        let bytes: [u8; 8] = snapshot.data[..]
            .try_into()
            .map_err(|_| "snapshot data is not a state")?;
        let chain = u64::from_le_bytes(bytes);
        let end = usize::try_from(snapshot.id.end_offset).map_err(|_| "negative snapshot")?;
        if end == 0 || end > self.committed.len() || self.committed[end - 1].1 != chain {
            return Err(format!(
                "n{} holds a snapshot at {end} that is not of the committed prefix",
                self.nodes[i].id.0
            ));
        }
        Ok(chain)
    }

    /// A high watermark must land on the committed prefix (and may extend it).
    pub(super) fn check_committed(&mut self, i: usize, high_watermark: i64) -> Check {
        let disk = &self.nodes[i].disk;
        let id = self.nodes[i].id.0;
        let hw = usize::try_from(high_watermark).map_err(|_| "negative high watermark")?;
        if hw > disk.end() {
            return Err(format!(
                "n{id} high watermark {hw} past its log end {}",
                disk.end()
            ));
        }
        let shared = hw.min(self.committed.len());
        if !disk.holds_prefix(shared, &self.committed) {
            return Err(format!(
                "committed prefix changed: n{id} disagrees below offset {shared}"
            ));
        }
        let epoch = disk.quorum.epoch;
        for o in self.committed.len()..hw {
            let chain = disk
                .chain_at(o)
                .ok_or_else(|| format!("n{id} commits {o}, inside its snapshot"))?;
            self.committed.push((epoch, chain));
        }
        Ok(())
    }

    pub(super) fn check_all(&self) -> Check {
        for n in &self.nodes {
            let Some(raft) = &n.raft else { continue };
            if raft.log().end_offset() != n.disk.end() as i64
                || raft.log().start_offset() != n.disk.start as i64
            {
                return Err(format!("n{} core log and disk disagree", n.id.0));
            }
            if raft.high_watermark() > raft.log().end_offset() {
                return Err(format!("n{} high watermark past log end", n.id.0));
            }
            if raft.role() == RoleKind::Leader {
                // Leader completeness (Raft §5.4): an entry committed in an epoch before
                // this leader's is in its log (and with it, everything before it).
                let epoch = raft.epoch();
                if let Some(o) = self.committed.iter().rposition(|&(e, _)| e < epoch)
                    && !n.disk.holds_prefix(o + 1, &self.committed)
                {
                    return Err(format!(
                        "leader n{} of epoch {epoch} lacks the entry at {o}, committed in epoch {}",
                        n.id.0, self.committed[o].0
                    ));
                }
                if self.leaders.get(&epoch) != Some(&n.id) {
                    return Err(format!("n{} leads epoch {epoch} unannounced", n.id.0));
                }
            }
        }
        Ok(())
    }

    /// After the heal: one leader that everybody follows, and a proposal made after the
    /// heal committed.
    pub(super) fn live_and_committed(&self) -> bool {
        let Some(leader) = self
            .nodes
            .iter()
            .find_map(|n| n.raft.as_ref().filter(|r| r.role() == RoleKind::Leader))
        else {
            return false;
        };
        let epoch = leader.epoch();
        let everyone_follows = self.nodes.iter().all(|n| {
            n.raft.as_ref().is_some_and(|r| {
                r.key() == leader.key()
                    || (r.role() == RoleKind::Follower
                        && r.epoch() == epoch
                        && r.leader() == Some(leader.key().id))
            })
        });
        everyone_follows
            && self.post_heal_proposals.iter().any(|&(id, e, last)| {
                id == leader.key().id && e == epoch && last < leader.high_watermark()
            })
    }

    pub(super) fn liveness_report(&self) -> String {
        let mut s =
            String::from("liveness: no stable leader with a committed proposal after the heal;");
        for n in &self.nodes {
            match &n.raft {
                Some(r) => {
                    let _ = write!(
                        s,
                        " n{}: {:?} epoch {} leader {:?} voter {} end {} hw {};",
                        n.id.0,
                        r.role(),
                        r.epoch(),
                        r.leader().map(|l| l.0),
                        r.is_voter(),
                        r.log().end_offset(),
                        r.high_watermark()
                    );
                }
                None => {
                    let _ = write!(s, " n{}: down;", n.id.0);
                }
            }
        }
        s
    }
}
