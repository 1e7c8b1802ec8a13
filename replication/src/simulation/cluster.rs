//! The simulated replicas and controller, their actions and the invariants checked after
//! each step.

use strata_storage::leader_epoch::LeaderEpochCache;

use crate::fetch::{CONSUMER_REPLICA_ID, FetchPartition, NO_EPOCH};
use crate::follower::{FollowerRequest, FollowerState, LocalLog, Truncation, TruncationMode};
use crate::leader::{
    AlterPartitionOutcome, AlterPartitionProposal, LeaderState, PartitionRegistration,
    ReplicationConfig,
};

use super::{Rng, Stats};
use crate::fault::Fault;

type Record = (i32, u64);

enum Role {
    None,
    Leader(Box<LeaderState>),
    Follower(FollowerState),
}

struct Node {
    id: i32,
    alive: bool,
    log: Vec<Record>,
    /// Records up to here survive a power loss.
    flushed: usize,
    epochs: LeaderEpochCache,
    /// The high watermark checkpoint, for restarts.
    hw: i64,
    role: Role,
    mode: TruncationMode,
    /// Fetches only this often (percent of its turns).
    speed: u64,
    /// The broker epoch: a new one with every restart (a new registration).
    broker_epoch: i64,
}

impl Node {
    fn leo(&self) -> i64 {
        self.log.len() as i64
    }

    fn high_watermark(&self) -> i64 {
        match &self.role {
            Role::Leader(l) => l.high_watermark(),
            Role::Follower(f) => f.high_watermark(),
            Role::None => self.hw,
        }
    }

    fn truncate(&mut self, t: Truncation) {
        match t {
            Truncation::To(offset) => {
                let offset = offset.max(0) as usize;
                self.log.truncate(offset);
                self.epochs.truncate_from_end(offset as i64);
            }
            Truncation::FullyAndStartAt(_) => {
                // Logs here always start at 0, so the leader never asks for this.
                self.log.clear();
                self.epochs.clear();
            }
        }
        self.flushed = self.flushed.min(self.log.len());
        self.hw = self.hw.min(self.leo());
    }

    fn append(&mut self, records: &[Record]) {
        for &(epoch, value) in records {
            self.epochs.assign(epoch, self.leo());
            self.log.push((epoch, value));
        }
    }
}

struct Controller {
    replicas: Vec<i32>,
    isr: Vec<i32>,
    leader: i32,
    leader_epoch: i32,
    partition_epoch: i32,
}

impl Controller {
    fn registration(&self) -> PartitionRegistration {
        PartitionRegistration {
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
        }
    }
}

pub(super) struct Sim {
    rng: Rng,
    now: i64,
    nodes: Vec<Node>,
    ctl: Controller,
    config: ReplicationConfig,
    fault: Option<Fault>,
    /// The AlterPartition on its way to the controller, from this leader.
    inflight: Option<(i32, AlterPartitionProposal)>,
    /// Cut links between a follower and the leader, by follower id.
    cut: Vec<i32>,
    /// The longest prefix ever below a leader's high watermark.
    committed: Vec<Record>,
    /// acks=all produces waiting: id, the leader, the first offset and the records.
    produces: Vec<(u64, i32, i64, Vec<Record>)>,
    /// Replicas cut off from the controller: fenced there, but still running on what they
    /// last learned (a deposed leader goes on leading: a zombie).
    isolated: Vec<i32>,
    /// Acknowledged records at their offsets.
    acked: Vec<(i64, Record)>,
    next_value: u64,
    next_produce: u64,
    /// Per replica: the epoch it last led in and the last high watermark it showed.
    last_hw: Vec<Option<(i32, i64)>>,
    pub(super) stats: Stats,
    /// `REPL_SIM_TRACE=1` prints every step.
    trace: bool,
}

impl Sim {
    pub(super) fn new(seed: u64, fault: Option<Fault>) -> Self {
        let mut rng = Rng(seed);
        let n = 3 + rng.below(3) as i32;
        let replicas: Vec<i32> = (0..n).collect();
        let config = ReplicationConfig {
            min_insync_replicas: 1 + rng.below(2) as usize,
            ..ReplicationConfig::default()
        };
        let nodes = replicas
            .iter()
            .map(|&id| Node {
                id,
                alive: true,
                log: Vec::new(),
                flushed: 0,
                epochs: LeaderEpochCache::new(),
                hw: 0,
                role: Role::None,
                mode: if rng.chance(50) {
                    TruncationMode::OnFetch
                } else {
                    TruncationMode::OffsetForLeaderEpoch
                },
                speed: if rng.chance(30) { 20 } else { 90 },
                broker_epoch: 0,
            })
            .collect();
        let ctl = Controller {
            replicas: replicas.clone(),
            isr: replicas,
            leader: -1,
            leader_epoch: 0,
            partition_epoch: 0,
        };
        let mut sim = Self {
            rng,
            now: 1_000_000,
            nodes,
            ctl,
            config,
            fault,
            inflight: None,
            cut: Vec::new(),
            committed: Vec::new(),
            produces: Vec::new(),
            isolated: Vec::new(),
            acked: Vec::new(),
            next_value: 0,
            next_produce: 0,
            last_hw: vec![None; n as usize],
            stats: Stats::default(),
            trace: std::env::var_os("REPL_SIM_TRACE").is_some(),
        };
        sim.elect(None);
        sim
    }

    fn node(&mut self, id: i32) -> &mut Node {
        &mut self.nodes[id as usize]
    }

    /// The controller elects the first live ISR member in replica order, preferring
    /// `prefer`, bumps the epochs and every live replica learns it.
    fn elect(&mut self, prefer: Option<i32>) {
        let eligible = |c: &Self, id: i32| c.ctl.isr.contains(&id) && c.reachable(id);
        let leader = prefer
            .filter(|&p| eligible(self, p))
            .or_else(|| {
                self.ctl
                    .replicas
                    .iter()
                    .copied()
                    .find(|&r| eligible(self, r))
            })
            .unwrap_or(-1);
        self.ctl.leader = leader;
        self.ctl.leader_epoch += 1;
        self.ctl.partition_epoch += 1;
        self.inflight = None;
        self.stats.elections += 1;
        self.broadcast();
    }

    /// Alive and heard by the controller.
    fn reachable(&self, id: i32) -> bool {
        self.nodes[id as usize].alive && !self.isolated.contains(&id)
    }

    /// Every replica the controller reaches learns its state.
    fn broadcast(&mut self) {
        for id in 0..self.nodes.len() as i32 {
            if self.reachable(id) {
                self.apply_metadata(id);
            }
        }
    }

    /// One replica learns the controller's state.
    fn apply_metadata(&mut self, id: i32) {
        let reg = self.ctl.registration();
        let leader = self.ctl.leader;
        let (now, config, fault) = (self.now, self.config, self.fault);
        let node = self.node(id);
        match &mut node.role {
            Role::Leader(l) if l.leader_epoch() == reg.leader_epoch && leader == id => {
                l.on_partition_change(&reg, now);
                return;
            }
            Role::Follower(f) if f.leader_epoch() == reg.leader_epoch => return,
            Role::Leader(l) => {
                // Its waiting produces fail.
                l.resign();
                self.produces.retain(|p| p.1 != id);
            }
            Role::Follower(_) | Role::None => {}
        }
        let node = self.node(id);
        let hw = node.high_watermark().min(node.leo());
        node.hw = hw;
        if leader == id {
            node.epochs.assign(reg.leader_epoch, node.leo());
            let mut l = LeaderState::become_leader(id, &reg, config, node.leo(), hw, now);
            l.fault = fault;
            node.role = Role::Leader(Box::new(l));
        } else if leader >= 0 {
            let mut f = FollowerState::new(
                id,
                node.broker_epoch,
                leader,
                reg.leader_epoch,
                node.mode,
                hw,
            );
            f.fault = fault;
            let log = LocalLog {
                log_start_offset: 0,
                log_end_offset: node.leo(),
                epochs: &node.epochs,
            };
            if let Some(t) = f.initial_truncation(log) {
                node.truncate(t);
            }
            node.role = Role::Follower(f);
        } else {
            node.role = Role::None;
        }
    }

    /// The controller takes `id` out of the ISR (a fence or a new registration), unless it
    /// is the last member, and re-elects if it led.
    fn remove_from_isr(&mut self, id: i32) {
        if self.ctl.isr.len() > 1 && self.ctl.isr.contains(&id) {
            self.ctl.isr.retain(|&r| r != id);
            if self.ctl.leader == id {
                self.elect(None);
            } else {
                self.ctl.partition_epoch += 1;
                self.broadcast();
            }
        } else if self.ctl.leader == id {
            self.elect(None);
        }
    }

    /// The controller's leader, if it is up.
    fn leader_node(&self) -> Option<usize> {
        let l = self.ctl.leader;
        (l >= 0 && self.nodes[l as usize].alive).then_some(l as usize)
    }

    /// Every running replica that believes it leads: the controller's leader and zombies.
    fn leading(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].alive && matches!(self.nodes[i].role, Role::Leader(_)))
            .collect()
    }

    fn pick(&mut self, from: &[usize]) -> Option<usize> {
        (!from.is_empty()).then(|| from[self.rng.below(from.len() as u64) as usize])
    }

    pub(super) fn step(&mut self) -> Result<(), String> {
        let action = self.rng.below(100);
        if self.trace {
            let state: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    let role = match &n.role {
                        Role::None => "-".to_string(),
                        Role::Leader(l) => format!("L{}", l.leader_epoch()),
                        Role::Follower(f) => format!("F{}", f.leader_epoch()),
                    };
                    format!(
                        "{}:{}{} leo={} hw={} flushed={} {:?}",
                        n.id,
                        if n.alive { "" } else { "dead " },
                        role,
                        n.leo(),
                        n.high_watermark(),
                        n.flushed,
                        n.epochs.entries()
                    )
                })
                .collect();
            eprintln!(
                "action {action} isr={:?} leader={} epoch={} committed={} | {}",
                self.ctl.isr,
                self.ctl.leader,
                self.ctl.leader_epoch,
                self.committed.len(),
                state.join(" | ")
            );
        }
        match action {
            0..=24 => self.produce(),
            25..=59 => self.fetch_round(),
            60..=69 => self.tick(),
            70..=77 => self.deliver_alter_partition(),
            78..=81 => self.consume()?,
            82..=84 => self.toggle_link(),
            85..=86 => self.crash(),
            87 => self.isolate(),
            88..=89 => self.lose_power(false),
            90 => self.lose_power(true),
            91..=94 => self.restart(),
            95..=96 => self.heal(),
            _ => self.move_leadership(),
        }
        for i in 0..self.nodes.len() {
            if self.rng.chance(30) && self.nodes[i].alive {
                self.nodes[i].flushed = self.nodes[i].log.len();
            }
        }
        self.collect_acks();
        self.check()
    }

    /// A producer, its metadata perhaps stale, sends to a replica that believes it leads.
    fn produce(&mut self) {
        let leading = self.leading();
        let Some(li) = self.pick(&leading) else {
            return;
        };
        let count = 1 + self.rng.below(4);
        let (now, id, value) = (self.now, self.next_produce, self.next_value);
        let node = &mut self.nodes[li];
        let Role::Leader(l) = &mut node.role else {
            return;
        };
        if l.check_produce(-1).is_err() {
            return;
        }
        let epoch = l.leader_epoch();
        let records: Vec<Record> = (0..count).map(|i| (epoch, value + i)).collect();
        let first = node.log.len() as i64;
        node.log.extend_from_slice(&records);
        node.epochs.assign(epoch, first);
        let leo = node.log.len() as i64;
        l.on_local_append(leo, now);
        l.await_acks(id, leo);
        self.next_value += count;
        self.next_produce += 1;
        self.produces.push((id, li as i32, first, records));
    }

    fn collect_acks(&mut self) {
        for li in self.leading() {
            let Role::Leader(l) = &mut self.nodes[li].role else {
                continue;
            };
            for (id, result) in l.take_completed_acks() {
                let Some(pos) = self.produces.iter().position(|p| p.0 == id) else {
                    continue;
                };
                let (_, _, first, records) = self.produces.swap_remove(pos);
                if result.is_ok() {
                    self.stats.acked += 1;
                    if li as i32 != self.ctl.leader {
                        self.stats.zombie_acked += 1;
                    }
                    for (i, r) in records.into_iter().enumerate() {
                        self.acked.push((first + i as i64, r));
                    }
                }
            }
        }
    }

    /// One follower, chosen at random, makes one request to its leader.
    fn fetch_round(&mut self) {
        let id = self.rng.below(self.nodes.len() as u64) as usize;
        let speed = self.nodes[id].speed;
        if self.rng.chance(speed) {
            let max = 1 + self.rng.below(6) as i64;
            self.fetch_from(id, max);
        }
    }

    /// Follower `id` makes one request to its leader, reading at most `max` records.
    fn fetch_from(&mut self, id: usize, max: i64) {
        if !self.nodes[id].alive || self.cut.contains(&(id as i32)) {
            return;
        }
        let Role::Follower(f) = &self.nodes[id].role else {
            return;
        };
        let leader = f.leader_id() as usize;
        if !self.nodes[leader].alive {
            return;
        }
        let request = {
            let n = &self.nodes[id];
            f.next_request(LocalLog {
                log_start_offset: 0,
                log_end_offset: n.leo(),
                epochs: &n.epochs,
            })
        };
        let now = self.now;
        let (left, right) = self.nodes.split_at_mut(id.max(leader));
        let (fnode, lnode) = if id < leader {
            (&mut left[id], &mut right[0])
        } else {
            (&mut right[0], &mut left[leader])
        };
        let Role::Follower(f) = &mut fnode.role else {
            return;
        };
        let Role::Leader(l) = &mut lnode.role else {
            return;
        };
        let mut appended = None;
        let truncation = match request {
            FollowerRequest::Idle => None,
            FollowerRequest::ListOffsets => f.on_leader_offsets(
                0,
                lnode.log.len() as i64,
                LocalLog {
                    log_start_offset: 0,
                    log_end_offset: fnode.log.len() as i64,
                    epochs: &fnode.epochs,
                },
            ),
            FollowerRequest::OffsetForLeaderEpoch {
                current_leader_epoch,
                leader_epoch,
            } => match l.offset_for_leader_epoch(current_leader_epoch, leader_epoch, &lnode.epochs)
            {
                Ok(answer) => f.on_offset_for_leader_epoch(
                    answer,
                    LocalLog {
                        log_start_offset: 0,
                        log_end_offset: fnode.log.len() as i64,
                        epochs: &fnode.epochs,
                    },
                ),
                Err(e) => {
                    f.on_error(&e);
                    None
                }
            },
            FollowerRequest::Fetch(req) => match l.on_fetch(&req, 0, &lnode.epochs, now) {
                Ok(answer) => {
                    let log = LocalLog {
                        log_start_offset: 0,
                        log_end_offset: fnode.log.len() as i64,
                        epochs: &fnode.epochs,
                    };
                    match f.on_fetch_answer(&answer, log) {
                        Some(t) => Some(t),
                        None if answer.diverging_epoch.is_some() => None,
                        None => {
                            let from = req.fetch_offset as usize;
                            let to = (answer.read_to.min(req.fetch_offset + max)) as usize;
                            let records = lnode.log[from..to.max(from)].to_vec();
                            appended = Some((records, answer.high_watermark));
                            None
                        }
                    }
                }
                Err(e) => {
                    f.on_error(&e);
                    None
                }
            },
        };
        if let Some((records, leader_hw)) = appended {
            fnode.append(&records);
            let leo = fnode.leo();
            if let Role::Follower(f) = &mut fnode.role {
                f.after_append(leader_hw, leo);
            }
        }
        if let Some(t) = truncation {
            self.stats.truncations += 1;
            fnode.truncate(t);
        }
        self.queue_alter_partition();
    }

    fn queue_alter_partition(&mut self) {
        if self.inflight.is_some() {
            return;
        }
        let Some(li) = self.leader_node() else {
            return;
        };
        if let Role::Leader(l) = &self.nodes[li].role
            && let Some(p) = l.pending_proposal()
        {
            self.inflight = Some((li as i32, p.clone()));
        }
    }

    fn tick(&mut self) {
        self.now += self.rng.below(8_000) as i64;
        for li in self.leading() {
            if let Role::Leader(l) = &mut self.nodes[li].role {
                l.maybe_shrink_isr(self.now);
            }
        }
        self.queue_alter_partition();
    }

    /// The controller's AlterPartition checks, in Kafka's spirit: a stale leader or partition
    /// epoch waits for metadata; a member not alive is ineligible; otherwise it commits.
    fn deliver_alter_partition(&mut self) {
        let Some((from, p)) = self.inflight.take() else {
            return;
        };
        if !self.reachable(from) {
            // Lost on the way; the leader's proposal stays in flight.
            return;
        }
        let outcome = if p.leader_epoch != self.ctl.leader_epoch
            || p.partition_epoch != self.ctl.partition_epoch
            || from != self.ctl.leader
        {
            AlterPartitionOutcome::AwaitMetadata
        } else if !p.new_isr.iter().all(|m| {
            let node = &self.nodes[m.broker_id as usize];
            self.reachable(m.broker_id)
                && (m.broker_epoch == -1 || m.broker_epoch == node.broker_epoch)
        }) {
            // INELIGIBLE_REPLICA (KIP-903): fenced, or registered again since it fetched.
            AlterPartitionOutcome::NotAttempted
        } else {
            if p.new_isr.len() < self.ctl.isr.len() {
                self.stats.shrinks += 1;
            } else {
                self.stats.expands += 1;
            }
            self.ctl.isr = p.isr_ids();
            self.ctl.partition_epoch += 1;
            AlterPartitionOutcome::Committed {
                leader_epoch: self.ctl.leader_epoch,
                partition_epoch: self.ctl.partition_epoch,
                isr: p.isr_ids(),
            }
        };
        let now = self.now;
        if self.nodes[from as usize].alive
            && let Role::Leader(l) = &mut self.nodes[from as usize].role
        {
            l.on_alter_partition(&outcome, now);
        }
        if let AlterPartitionOutcome::Committed { .. } = outcome {
            self.broadcast();
        }
        self.queue_alter_partition();
    }

    fn consume(&mut self) -> Result<(), String> {
        let leading = self.leading();
        let Some(li) = self.pick(&leading) else {
            return Ok(());
        };
        let node = &mut self.nodes[li];
        let Role::Leader(l) = &mut node.role else {
            return Ok(());
        };
        let offset = self.rng.below(node.log.len() as u64 + 1) as i64;
        let req = FetchPartition {
            replica_id: CONSUMER_REPLICA_ID,
            fetch_offset: offset,
            current_leader_epoch: NO_EPOCH,
            last_fetched_epoch: NO_EPOCH,
            replica_epoch: -1,
            log_start_offset: -1,
        };
        let answer = l
            .on_fetch(&req, 0, &node.epochs, self.now)
            .map_err(|e| format!("consumer fetch at {offset} failed: {e}"))?;
        if answer.read_to > l.high_watermark() {
            return Err(format!(
                "a consumer may read to {} above the high watermark {}",
                answer.read_to,
                l.high_watermark()
            ));
        }
        Ok(())
    }

    fn toggle_link(&mut self) {
        let id = self.rng.below(self.nodes.len() as u64) as i32;
        if let Some(pos) = self.cut.iter().position(|&c| c == id) {
            self.cut.swap_remove(pos);
        } else {
            self.cut.push(id);
        }
    }

    fn crash(&mut self) {
        let id = self.rng.below(self.nodes.len() as u64) as i32;
        if !self.nodes[id as usize].alive {
            return;
        }
        self.stop(id);
    }

    /// Cut off from the controller, which fences it; it runs on, perhaps as a zombie leader.
    fn isolate(&mut self) {
        let id = self.rng.below(self.nodes.len() as u64) as i32;
        if !self.reachable(id) {
            return;
        }
        self.isolated.push(id);
        self.remove_from_isr(id);
    }

    /// Heard again: its next heartbeat unfences it (same registration) and it learns the
    /// current state.
    fn heal(&mut self) {
        if self.isolated.is_empty() {
            return;
        }
        let i = self.rng.below(self.isolated.len() as u64) as usize;
        let id = self.isolated[i];
        self.heal_node(id);
    }

    fn heal_node(&mut self, id: i32) {
        self.isolated.retain(|&r| r != id);
        if !self.nodes[id as usize].alive {
            return;
        }
        if self.ctl.leader < 0 {
            self.elect(None);
        } else {
            self.apply_metadata(id);
        }
    }

    fn stop(&mut self, id: i32) {
        let node = self.node(id);
        node.hw = node.high_watermark().min(node.leo());
        node.alive = false;
        node.role = Role::None;
        self.produces.retain(|p| p.1 != id);
        // The controller fences it after its session times out.
        self.remove_from_isr(id);
    }

    /// A power loss (the unflushed tail is gone) or a wiped disk, only while another live
    /// replica is in the ISR.
    fn lose_power(&mut self, wipe: bool) {
        let id = self.rng.below(self.nodes.len() as u64) as i32;
        let others = self.ctl.isr.iter().any(|&r| r != id && self.reachable(r));
        if !self.nodes[id as usize].alive || !others {
            return;
        }
        self.stop(id);
        let node = self.node(id);
        let keep = if wipe { 0 } else { node.flushed };
        node.truncate(Truncation::To(keep as i64));
        if wipe {
            node.hw = 0;
        }
    }

    fn restart(&mut self) {
        let id = self.rng.below(self.nodes.len() as u64) as i32;
        self.restart_node(id);
    }

    fn restart_node(&mut self, id: i32) {
        if self.nodes[id as usize].alive {
            return;
        }
        let node = self.node(id);
        node.alive = true;
        node.broker_epoch += 1;
        self.isolated.retain(|&r| r != id);
        // A new registration: out of the ISR unless it is the last member.
        if self.ctl.isr.contains(&id) && self.ctl.isr.len() > 1 {
            self.remove_from_isr(id);
        }
        if self.ctl.leader < 0 {
            self.elect(None);
        } else {
            self.apply_metadata(id);
        }
    }

    fn move_leadership(&mut self) {
        let candidates: Vec<i32> = self
            .ctl
            .isr
            .iter()
            .copied()
            .filter(|&r| r != self.ctl.leader && self.reachable(r))
            .collect();
        if candidates.is_empty() {
            return;
        }
        let pick = candidates[self.rng.below(candidates.len() as u64) as usize];
        self.elect(Some(pick));
    }

    /// Every fault healed: every replica up and heard, every link whole, every follower
    /// fetching on each round. Within a bounded number of rounds the replicas must agree:
    /// the same log as the leader, all in the ISR, the high watermark at the log end.
    pub(super) fn settle(&mut self) -> Result<(), String> {
        let n = self.nodes.len() as i32;
        for id in 0..n {
            self.restart_node(id);
            self.heal_node(id);
        }
        self.cut.clear();
        for round in 0..200 {
            for id in 0..n as usize {
                self.fetch_from(id, 8);
            }
            self.now += 100;
            self.tick();
            self.deliver_alter_partition();
            self.collect_acks();
            self.check()
                .map_err(|e| format!("settling, round {round}: {e}"))?;
        }
        let li = self
            .leader_node()
            .ok_or_else(|| "no leader once every replica is back".to_string())?;
        let Role::Leader(l) = &self.nodes[li].role else {
            return Err(format!("elected leader {li} does not lead"));
        };
        let leo = self.nodes[li].leo();
        if l.high_watermark() != leo || l.isr().len() != self.nodes.len() {
            return Err(format!(
                "not settled: leader {li} high watermark {} of {leo}, ISR {:?}",
                l.high_watermark(),
                l.isr()
            ));
        }
        for node in &self.nodes {
            if node.log != self.nodes[li].log {
                return Err(format!(
                    "not settled: replica {} has {} records, the leader {leo}",
                    node.id,
                    node.log.len()
                ));
            }
        }
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        // Every replica that leads, zombies included: its high watermark never moves back
        // in an epoch, and below it the log is the committed prefix, which it may extend.
        for li in self.leading() {
            let node = &self.nodes[li];
            let Role::Leader(l) = &node.role else {
                continue;
            };
            let hw = l.high_watermark();
            if let Some((epoch, last)) = self.last_hw[li]
                && epoch == l.leader_epoch()
                && hw < last
            {
                return Err(format!(
                    "leader {li} high watermark moved back {last} -> {hw}"
                ));
            }
            self.last_hw[li] = Some((l.leader_epoch(), hw));
            let upto = (hw as usize).min(self.committed.len());
            if node.log[..upto] != self.committed[..upto] {
                return Err(format!(
                    "leader {li} in epoch {} diverges from the committed records below its high watermark {hw}",
                    l.leader_epoch()
                ));
            }
            if hw as usize > self.committed.len() {
                self.committed = node.log[..hw as usize].to_vec();
            }
        }
        // The controller's leader holds every committed and acknowledged record.
        if let Some(li) = self.leader_node() {
            let node = &self.nodes[li];
            let Role::Leader(l) = &node.role else {
                return Err(format!("elected leader {li} does not lead"));
            };
            if node.log.len() < self.committed.len()
                || node.log[..self.committed.len()] != self.committed[..]
            {
                return Err(format!(
                    "leader {li} in epoch {} lacks committed records (log {}, committed {})",
                    l.leader_epoch(),
                    node.log.len(),
                    self.committed.len()
                ));
            }
            for &(offset, record) in &self.acked {
                if node.log.get(offset as usize) != Some(&record) {
                    return Err(format!("leader {li} lost acknowledged offset {offset}"));
                }
            }
        }
        for n in self.nodes.iter().filter(|n| n.alive) {
            let upto = (n.high_watermark().max(0) as usize)
                .min(self.committed.len())
                .min(n.log.len());
            if n.log[..upto] != self.committed[..upto] {
                return Err(format!(
                    "replica {} diverges below its high watermark {}",
                    n.id,
                    n.high_watermark()
                ));
            }
            if n.high_watermark() > n.leo() {
                return Err(format!("replica {} high watermark past its log end", n.id));
            }
        }
        Ok(())
    }
}
