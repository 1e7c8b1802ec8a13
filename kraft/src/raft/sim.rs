//! Deterministic simulation of a quorum of [`RaftNode`]s (tests only).
//!
//! One seed fixes everything: the network's loss, duplication, delay and reordering, the
//! partitions (symmetric and one-way), crashes (between steps and between the actions of a
//! step, with and without losing the disk), graceful resignations, each node's clock rate
//! and offset, the proposals, when each node snapshots its state (the simulated state
//! machine's state is the hash chain of the committed prefix), and an operator's voter
//! changes. The driver honours the core's contract exactly: actions run in order, storage
//! actions are durable at once, and a crash drops the rest of the list. A restart hands
//! the core what its disk holds; a disk loss gives the node an empty disk with a new
//! directory id, which no voter set knows until the operator replaces the old voter with
//! it (RemoveVoter, then AddVoter once it caught up). A disk is lost only while every disk
//! holds the full voter set, so at most one lost voter awaits replacement at a time.
//!
//! After every action and every event the invariants are checked:
//!
//! - at most one leader per epoch;
//! - every voter grants at most one candidate per epoch, across restarts;
//! - epochs on disk never decrease; a vote, a vote request, a BeginQuorumEpoch and a Fetch
//!   leave only after the state they depend on is on disk;
//! - log matching: entries with the same offset and epoch have the same history (a hash
//!   chain over the log);
//! - the committed prefix (the longest high watermark any node reached) never changes: a
//!   node's high watermark always lands on it, and no node truncates an entry of it;
//! - leader completeness: a leader of epoch `e` holds every entry committed in an epoch
//!   before `e`;
//! - a node's high watermark never moves back while it runs, nor past its log end;
//! - a snapshot, taken or fetched, holds exactly the state of a committed prefix, and the
//!   log is deleted only below a persisted snapshot.
//!
//! After the faults stop (the network heals, crashed nodes restart), liveness is checked: a
//! leader emerges that every node follows, and a proposal made after the heal commits.
//!
//! `RAFT_SIM_SEEDS=<n>` sets how many seeds each test runs; `RAFT_SIM_SEED=<s>` replays one
//! seed with a trace of its last events.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use uuid::Uuid;

use super::{Fault, Input, Message, NodeId, RaftConfig, RaftLog, RaftNode, ReplicaKey, RoleKind};

mod check;

use check::Disk;

/// How long faults are injected, in simulated ms.
const FAULT_PHASE_MS: u64 = 30_000;
/// How long after the heal a leader must be followed by all and a proposal commit.
const LIVENESS_MS: u64 = 25_000;
/// A run that needs more events than this is stuck in a loop.
const MAX_EVENTS: u64 = 2_000_000;
/// Lines of trace kept for a failure report (`RAFT_SIM_TRACE_LINES` to change).
fn trace_lines() -> usize {
    std::env::var("RAFT_SIM_TRACE_LINES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(80)
}

/// What a failed run reports.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) seed: u64,
    pub(crate) at_ms: u64,
    pub(crate) what: String,
    pub(crate) trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "raft simulation seed {} failed at {} ms: {}",
            self.seed, self.at_ms, self.what
        )?;
        writeln!(
            f,
            "replay: RAFT_SIM_SEED={} cargo test --release -p strata-kraft raft::sim",
            self.seed
        )?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Counters of one run, to show the faults really happened.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Stats {
    pub(crate) events: u64,
    pub(crate) crashes: u64,
    pub(crate) mid_step_crashes: u64,
    pub(crate) disk_losses: u64,
    pub(crate) partitions: u64,
    pub(crate) elections: u64,
    pub(crate) truncations: u64,
    pub(crate) snapshots: u64,
    pub(crate) snapshots_fetched: u64,
    pub(crate) voter_changes: u64,
    pub(crate) committed: u64,
    pub(crate) sim_ms: u64,
}

struct SimNode {
    id: NodeId,
    disk: Disk,
    raft: Option<RaftNode>,
    /// Local clock = offset + global * rate / 1000.
    clock_offset: u64,
    clock_rate_permille: u64,
    /// Only the latest scheduled tick is live.
    tick_generation: u64,
    /// The last high watermark this process reported.
    last_high_watermark: i64,
}

impl SimNode {
    fn local(&self, global: u64) -> u64 {
        self.clock_offset + global * self.clock_rate_permille / 1000
    }

    fn global(&self, local: u64, now: u64) -> u64 {
        if local <= self.local(now) {
            return now;
        }
        let d = local - self.clock_offset;
        d.saturating_mul(1000).div_ceil(self.clock_rate_permille)
    }

    fn key(&self) -> ReplicaKey {
        ReplicaKey {
            id: self.id,
            directory_id: self.disk.directory_id,
        }
    }
}

#[derive(Debug, Clone)]
enum Event {
    Deliver {
        from: NodeId,
        to: usize,
        msg: Message,
    },
    Tick {
        node: usize,
        generation: u64,
    },
    Restart {
        node: usize,
    },
    Propose,
    Snapshot,
    Reconfigure,
    Fault,
    Unblock {
        links: Vec<(usize, usize)>,
    },
    Heal,
}

#[derive(Debug)]
struct Scheduled {
    at: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

struct Sim {
    rng: ChaCha8Rng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    nodes: Vec<SimNode>,
    config: RaftConfig,
    /// `blocked[from][to]`: how many active cuts drop messages on that link.
    blocked: Vec<Vec<u32>>,
    loss_pct: u32,
    dup_pct: u32,
    long_delay_pct: u32,
    mid_step_crash_permille: u32,
    /// Mean time between injected faults: calm seeds and stormy ones.
    fault_interval_ms: u64,
    healed: bool,
    next_payload: u64,
    // ---- invariant state ----
    leaders: HashMap<i32, NodeId>,
    votes: HashMap<(ReplicaKey, i32), ReplicaKey>,
    /// Hash chain value at `(offset, epoch)` for every entry ever written.
    log_matching: HashMap<(usize, i32), u64>,
    /// `(epoch it was committed in, chain)` of every committed entry: the epoch of the
    /// node whose high watermark first covered it (a leader).
    committed: Vec<(i32, u64)>,
    /// Proposals made after the heal: (leader, epoch, last offset).
    post_heal_proposals: Vec<(NodeId, i32, i64)>,
    stats: Stats,
    trace: Option<VecDeque<String>>,
}

type Check = Result<(), String>;

impl Sim {
    fn new(seed: u64, nodes: usize, fault: Fault, trace: bool) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let sim_nodes: Vec<SimNode> = (0..nodes)
            .map(|i| SimNode {
                id: NodeId(i as i32 + 1),
                disk: Disk::empty(Uuid::from_u128(rng.random())),
                raft: None,
                clock_offset: rng.random_range(0..1_000_000),
                clock_rate_permille: rng.random_range(900..=1100),
                tick_generation: 0,
                last_high_watermark: 0,
            })
            .collect();
        let voters: Vec<ReplicaKey> = sim_nodes.iter().map(SimNode::key).collect();
        let mut config = RaftConfig::new(voters);
        config.request_timeout_ms = 200;
        config.fetch_max_wait_ms = 100;
        config.fetch_max_entries = rng.random_range(1..=8);
        config.fault = fault;
        let loss_pct = rng.random_range(0..=15);
        let dup_pct = rng.random_range(0..=10);
        let long_delay_pct = rng.random_range(0..=10);
        let mid_step_crash_permille = rng.random_range(0..=4);
        let fault_interval_ms = rng.random_range(100..=3000);
        let mut sim = Sim {
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            blocked: vec![vec![0; nodes]; nodes],
            nodes: sim_nodes,
            config,
            loss_pct,
            dup_pct,
            long_delay_pct,
            mid_step_crash_permille,
            fault_interval_ms,
            healed: false,
            next_payload: 0,
            leaders: HashMap::new(),
            votes: HashMap::new(),
            log_matching: HashMap::new(),
            committed: Vec::new(),
            post_heal_proposals: Vec::new(),
            stats: Stats::default(),
            trace: trace.then(VecDeque::new),
        };
        for i in 0..nodes {
            sim.start(i);
        }
        sim.schedule(0, Event::Propose);
        sim.schedule(500, Event::Snapshot);
        sim.schedule(700, Event::Reconfigure);
        sim.schedule(100, Event::Fault);
        sim.schedule(FAULT_PHASE_MS, Event::Heal);
        sim
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            if t.len() == trace_lines() {
                t.pop_front();
            }
            t.push_back(format!("{:>6} {}", self.now, line()));
        }
    }

    fn schedule(&mut self, delay: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at: self.now + delay,
            seq: self.seq,
            event,
        }));
    }

    fn schedule_tick(&mut self, i: usize) {
        let Some(raft) = &self.nodes[i].raft else {
            return;
        };
        let at = self.nodes[i]
            .global(raft.next_deadline(), self.now)
            .max(self.now + 1);
        self.nodes[i].tick_generation += 1;
        let generation = self.nodes[i].tick_generation;
        let delay = at - self.now;
        self.schedule(
            delay,
            Event::Tick {
                node: i,
                generation,
            },
        );
    }

    fn start(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        // A crash between PersistSnapshot and DeleteLogBefore leaves the log below the
        // snapshot: a driver finishes the deletion at start.
        if let Some((s, _)) = &n.disk.snapshot {
            let end = s.id.end_offset as usize;
            if end > n.disk.start {
                let k = (end - n.disk.start).min(n.disk.log.len());
                n.disk.log.drain(..k);
                n.disk.chain.drain(..k);
                n.disk.start = end;
            }
        }
        let local = n.local(self.now);
        let raft = RaftNode::new(
            self.config.clone(),
            n.key(),
            n.disk.quorum,
            RaftLog::new(
                n.disk.snapshot.as_ref().map(|s| s.0.clone()),
                n.disk.log.clone(),
            ),
            local,
            self.rng.random(),
        );
        n.raft = Some(raft);
        n.last_high_watermark = n.disk.start as i64;
        let key = n.key();
        self.note(|| {
            format!(
                "n{} start {:?}",
                key.id.0,
                key.directory_id.as_u128() as u16
            )
        });
        self.schedule_tick(i);
    }

    fn crash(&mut self, i: usize, lose_disk: bool) {
        let n = &mut self.nodes[i];
        if n.raft.take().is_none() {
            return;
        }
        self.stats.crashes += 1;
        if lose_disk {
            n.disk = Disk::empty(Uuid::from_u128(self.rng.random()));
            self.stats.disk_losses += 1;
        }
        let id = n.id.0;
        self.note(|| format!("n{id} crash lose_disk={lose_disk}"));
        let delay = self.rng.random_range(50..3000);
        self.schedule(delay, Event::Restart { node: i });
    }

    fn live(&self, i: usize) -> bool {
        self.nodes[i].raft.is_some()
    }

    /// Runs until liveness is shown after the heal, or an invariant breaks.
    fn drive(&mut self) -> Result<(), (u64, String)> {
        let end = FAULT_PHASE_MS + LIVENESS_MS;
        while let Some(Reverse(s)) = self.queue.pop() {
            self.now = s.at;
            self.stats.events += 1;
            if self.stats.events > MAX_EVENTS {
                return Err((self.now, "too many events: a timer loop?".into()));
            }
            if self.now > end {
                return Err((self.now, self.liveness_report()));
            }
            if let Err(e) = self.event(s.event).and_then(|()| self.check_all()) {
                return Err((self.now, e));
            }
            if self.healed && self.live_and_committed() {
                self.stats.sim_ms = self.now;
                self.stats.committed = self.committed.len() as u64;
                return Ok(());
            }
        }
        Err((self.now, "event queue ran dry".into()))
    }

    fn event(&mut self, event: Event) -> Check {
        match event {
            Event::Deliver { from, to, msg } => {
                let from_idx = (from.0 - 1) as usize;
                if self.blocked[from_idx][to] > 0 || !self.live(to) {
                    // A cut link or a dead node refuses or resets the connection, and the
                    // sender's driver says so (a message lost at random is not reported:
                    // the sender's timers cover that).
                    if self.live(from_idx) {
                        let to = self.nodes[to].id;
                        return self.step(from_idx, Input::Unreachable(to));
                    }
                    return Ok(());
                }
                self.note(|| format!("n{} <- n{}: {}", to + 1, from.0, short(&msg)));
                self.step(to, Input::Message { from, msg })
            }
            Event::Tick { node, generation } => {
                if !self.live(node) || self.nodes[node].tick_generation != generation {
                    return Ok(());
                }
                self.step(node, Input::Tick)
            }
            Event::Restart { node } => {
                if !self.live(node) {
                    self.start(node);
                }
                Ok(())
            }
            Event::Propose => {
                let delay = self.rng.random_range(20..300);
                self.schedule(delay, Event::Propose);
                let live: Vec<usize> = (0..self.nodes.len()).filter(|&i| self.live(i)).collect();
                if live.is_empty() {
                    return Ok(());
                }
                // Mostly to a node that believes it leads, sometimes to anyone.
                let leaders: Vec<usize> = live
                    .iter()
                    .copied()
                    .filter(|&i| self.role(i) == Some(RoleKind::Leader))
                    .collect();
                let target = if !leaders.is_empty() && self.rng.random_ratio(9, 10) {
                    leaders[self.rng.random_range(0..leaders.len())]
                } else {
                    live[self.rng.random_range(0..live.len())]
                };
                let count = self.rng.random_range(1..=3);
                let records = (0..count)
                    .map(|_| {
                        self.next_payload += 1;
                        Bytes::copy_from_slice(&self.next_payload.to_le_bytes())
                    })
                    .collect();
                self.step(target, Input::Propose(records))
            }
            Event::Reconfigure => {
                let delay = self.rng.random_range(200..1500);
                self.schedule(delay, Event::Reconfigure);
                self.reconfigure()
            }
            Event::Snapshot => {
                // The application snapshots its state now and then, up to the high
                // watermark, so laggards must fetch snapshots (KIP-630).
                let delay = self.rng.random_range(300..2000);
                self.schedule(delay, Event::Snapshot);
                let i = self.rng.random_range(0..self.nodes.len());
                let Some(raft) = &self.nodes[i].raft else {
                    return Ok(());
                };
                let (start, hw) = (raft.log().start_offset(), raft.high_watermark());
                if hw - start < 5 {
                    return Ok(());
                }
                let end = self.rng.random_range(start + 1..=hw);
                let chain = self.nodes[i]
                    .disk
                    .chain_at(end as usize - 1)
                    .ok_or("no chain below the high watermark")?;
                let data = Bytes::copy_from_slice(&chain.to_le_bytes());
                self.step(
                    i,
                    Input::Snapshot {
                        end_offset: end,
                        data,
                    },
                )
            }
            Event::Fault => {
                if !self.healed {
                    let delay = self
                        .rng
                        .random_range(self.fault_interval_ms / 2..self.fault_interval_ms * 3 / 2);
                    self.schedule(delay, Event::Fault);
                    self.inject_fault()?;
                }
                Ok(())
            }
            Event::Unblock { links } => {
                for (a, b) in links {
                    self.blocked[a][b] = self.blocked[a][b].saturating_sub(1);
                }
                Ok(())
            }
            Event::Heal => {
                self.note(|| "heal".into());
                self.healed = true;
                for row in &mut self.blocked {
                    row.iter_mut().for_each(|c| *c = 0);
                }
                self.loss_pct = 0;
                self.dup_pct = 0;
                self.long_delay_pct = 0;
                for i in 0..self.nodes.len() {
                    if !self.live(i) {
                        self.start(i);
                    }
                }
                Ok(())
            }
        }
    }

    /// Every disk's voter set is every node's current identity: no disk loss is waiting
    /// to be replaced, and no voter is missing.
    fn fully_replaced(&self) -> bool {
        let mut current: Vec<ReplicaKey> = self.nodes.iter().map(SimNode::key).collect();
        current.sort();
        self.nodes.iter().all(|n| {
            let mut voters = n
                .disk
                .voters()
                .unwrap_or_else(|| self.config.voters.clone());
            voters.sort();
            voters == current
        })
    }

    /// The operator's side of KIP-853: replace voters whose disk was lost (remove the old
    /// directory, add the new one once it caught up), add back removed nodes, and now and
    /// then remove a healthy voter, the leader included.
    fn reconfigure(&mut self) -> Check {
        let Some(leader) = (0..self.nodes.len())
            .filter(|&i| self.role(i) == Some(RoleKind::Leader))
            .max_by_key(|&i| self.nodes[i].raft.as_ref().map(RaftNode::epoch))
        else {
            return Ok(());
        };
        let voters = self.nodes[leader]
            .raft
            .as_ref()
            .map(|r| r.voters().to_vec())
            .unwrap_or_default();
        let stale = voters
            .iter()
            .find(|v| self.nodes[(v.id.0 - 1) as usize].key() != **v);
        let missing = self
            .nodes
            .iter()
            .find(|n| !voters.iter().any(|v| v.id == n.id))
            .map(SimNode::key);
        let input = if let Some(&v) = stale {
            Input::RemoveVoter(v)
        } else if let Some(k) = missing {
            Input::AddVoter(k, None)
        } else if self.rng.random_ratio(1, 20) {
            Input::RemoveVoter(voters[self.rng.random_range(0..voters.len())])
        } else {
            return Ok(());
        };
        self.note(|| format!("reconfigure {input:?}"));
        self.step(leader, input)
    }

    fn role(&self, i: usize) -> Option<RoleKind> {
        self.nodes[i].raft.as_ref().map(RaftNode::role)
    }

    fn inject_fault(&mut self) -> Check {
        let n = self.nodes.len();
        match self.rng.random_range(0..100) {
            0..25 => {
                let i = self.rng.random_range(0..n);
                // One disk at a time: the next may go once every disk knows the voter set
                // that replaced it (KIP-853), so a majority of voters always holds what
                // was committed.
                let lose_disk = n >= 3 && self.fully_replaced() && self.rng.random_ratio(1, 4);
                self.crash(i, lose_disk);
            }
            25..50 => {
                // A symmetric partition: one node alone, or a random split.
                let mut side: Vec<bool> = (0..n).map(|_| self.rng.random_bool(0.5)).collect();
                if self.rng.random_bool(0.5) {
                    let alone = self.rng.random_range(0..n);
                    side = (0..n).map(|i| i == alone).collect();
                }
                let mut links = Vec::new();
                for a in 0..n {
                    for b in 0..n {
                        if side[a] != side[b] {
                            links.push((a, b));
                        }
                    }
                }
                self.cut(links, "partition");
            }
            50..65 => {
                // One-way: `a` can no longer reach some others (or they it).
                let a = self.rng.random_range(0..n);
                let outgoing = self.rng.random_bool(0.5);
                let links: Vec<(usize, usize)> = (0..n)
                    .filter(|&b| b != a && self.rng.random_bool(0.6))
                    .map(|b| if outgoing { (a, b) } else { (b, a) })
                    .collect();
                self.cut(links, "one-way cut");
            }
            65..80 => {
                // Leaders die young: the interleavings of Raft §5.4.2 (Figure 8) need
                // leaders that crash with entries half replicated.
                let leaders: Vec<usize> = (0..n)
                    .filter(|&i| self.role(i) == Some(RoleKind::Leader))
                    .collect();
                if let Some(&i) = leaders.first() {
                    self.crash(i, false);
                }
            }
            80..88 => {
                let leaders: Vec<usize> = (0..n)
                    .filter(|&i| self.role(i) == Some(RoleKind::Leader))
                    .collect();
                if let Some(&i) = leaders.first() {
                    self.note(|| format!("n{} resigns", i + 1));
                    self.step(i, Input::Resign)?;
                    // A graceful shutdown usually follows.
                    if self.rng.random_bool(0.5) && self.live(i) {
                        self.crash(i, false);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn cut(&mut self, links: Vec<(usize, usize)>, what: &str) {
        if links.is_empty() {
            return;
        }
        self.stats.partitions += 1;
        for &(a, b) in &links {
            self.blocked[a][b] += 1;
        }
        self.note(|| format!("{what} {links:?}"));
        let duration = self.rng.random_range(200..6000);
        self.schedule(duration, Event::Unblock { links });
    }

    fn send(&mut self, from: NodeId, to: NodeId, msg: Message) {
        let Some(to) = self.nodes.iter().position(|n| n.id == to) else {
            return;
        };
        if self.rng.random_range(0..100) < self.loss_pct {
            return;
        }
        let copies = if self.rng.random_range(0..100) < self.dup_pct {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if self.rng.random_range(0..100) < self.long_delay_pct {
                self.rng.random_range(20..1500)
            } else {
                self.rng.random_range(1..20)
            };
            self.schedule(
                delay,
                Event::Deliver {
                    from,
                    to,
                    msg: msg.clone(),
                },
            );
        }
    }

    /// Steps node `i` and carries out its actions in order, checking each.
    fn step(&mut self, i: usize, input: Input) -> Check {
        let local = self.nodes[i].local(self.now);
        let Some(raft) = &mut self.nodes[i].raft else {
            return Ok(());
        };
        let actions = raft.step(local, input);
        // Sometimes the process dies in the middle of carrying them out.
        let crash_at = if !self.healed
            && !actions.is_empty()
            && self.rng.random_range(0..1000) < self.mid_step_crash_permille
        {
            Some(self.rng.random_range(0..actions.len()))
        } else {
            None
        };
        for (k, action) in actions.into_iter().enumerate() {
            if crash_at == Some(k) {
                self.stats.mid_step_crashes += 1;
                self.crash(i, false);
                return Ok(());
            }
            self.apply(i, action)?;
        }
        self.schedule_tick(i);
        Ok(())
    }
}

fn short(msg: &Message) -> String {
    match msg {
        Message::VoteRequest {
            epoch,
            candidate,
            last_epoch,
            end_offset,
            pre_vote,
            ..
        } => format!(
            "{}Vote? e{epoch} by n{} log ({last_epoch},{end_offset})",
            if *pre_vote { "Pre" } else { "" },
            candidate.id.0
        ),
        Message::VoteResponse {
            epoch,
            granted,
            pre_vote,
            ..
        } => format!(
            "{}Vote e{epoch} granted={granted}",
            if *pre_vote { "Pre" } else { "" }
        ),
        Message::BeginQuorumEpochRequest { epoch, .. } => format!("BeginQuorumEpoch e{epoch}"),
        Message::BeginQuorumEpochResponse { epoch } => format!("BeginQuorumEpoch ok e{epoch}"),
        Message::EndQuorumEpochRequest { epoch, .. } => format!("EndQuorumEpoch e{epoch}"),
        Message::EndQuorumEpochResponse { epoch } => format!("EndQuorumEpoch ok e{epoch}"),
        Message::FetchRequest {
            epoch,
            fetch_offset,
            last_fetched_epoch,
            ..
        } => format!("Fetch e{epoch} at ({last_fetched_epoch},{fetch_offset})"),
        Message::FetchResponse {
            epoch,
            error,
            diverging,
            snapshot_id,
            entries,
            high_watermark,
            ..
        } => format!(
            "FetchResp e{epoch} err={error:?} div={diverging:?} snap={:?} n={} hw={high_watermark}",
            snapshot_id.map(|s| s.end_offset),
            entries.len()
        ),
        Message::FetchSnapshotRequest {
            epoch, snapshot_id, ..
        } => format!("FetchSnapshot e{epoch} at {}", snapshot_id.end_offset),
        Message::FetchSnapshotResponse {
            epoch,
            error,
            snapshot,
            ..
        } => format!(
            "FetchSnapshotResp e{epoch} err={error:?} at {:?}",
            snapshot.as_ref().map(|s| s.id.end_offset)
        ),
    }
}

/// The cluster size a seed runs with: even seeds 3 voters, odd seeds 5.
pub(crate) fn nodes_for(seed: u64) -> usize {
    match seed >> 40 {
        0 if seed.is_multiple_of(2) => 3,
        0 => 5,
        1 => 1,
        _ => 4,
    }
}

/// The first seed of a family: 0 and 1 (3 and 5 voters, interleaved), then 1 and 4 voters.
const SINGLE_VOTER_SEEDS: u64 = 1 << 40;
const FOUR_VOTER_SEEDS: u64 = 2 << 40;

/// Runs one seed; on failure runs it again with tracing to report the last events.
pub(crate) fn run_seed(seed: u64, fault: Fault) -> Result<Stats, Failure> {
    let nodes = nodes_for(seed);
    let mut sim = Sim::new(seed, nodes, fault, false);
    match sim.drive() {
        Ok(()) => Ok(sim.stats),
        Err(_) => {
            let mut sim = Sim::new(seed, nodes, fault, true);
            let (at_ms, what) = match sim.drive() {
                Ok(()) => (
                    0,
                    "failure did not reproduce: the simulation is not deterministic".into(),
                ),
                Err(e) => e,
            };
            Err(Failure {
                seed,
                at_ms,
                what,
                trace: sim.trace.take().map(Vec::from).unwrap_or_default(),
            })
        }
    }
}

/// Seeds per test: `RAFT_SIM_SEEDS`, else `default`.
fn seed_count(default: u64) -> u64 {
    std::env::var("RAFT_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `count` seeds `first, first + step, ...` (or only `RAFT_SIM_SEED`, if it is of
/// the same cluster size), panicking on the first failure.
fn run_many(first: u64, step: u64, count: u64) -> Stats {
    let seeds: Vec<u64> = match std::env::var("RAFT_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) if nodes_for(seed) == nodes_for(first) => vec![seed],
        Some(_) => vec![],
        None => (0..count).map(|k| first + step * k).collect(),
    };
    let mut total = Stats::default();
    for seed in seeds {
        match run_seed(seed, Fault::None) {
            Ok(s) => {
                total.events += s.events;
                total.crashes += s.crashes;
                total.mid_step_crashes += s.mid_step_crashes;
                total.disk_losses += s.disk_losses;
                total.partitions += s.partitions;
                total.elections += s.elections;
                total.truncations += s.truncations;
                total.snapshots += s.snapshots;
                total.snapshots_fetched += s.snapshots_fetched;
                total.voter_changes += s.voter_changes;
                total.committed += s.committed;
                total.sim_ms += s.sim_ms;
            }
            Err(f) => panic!("{f}"),
        }
    }
    total
}

/// Finds the first seed in `0..budget` where `fault` is caught.
fn first_catch(fault: Fault, budget: u64) -> Option<Failure> {
    (0..budget).find_map(|seed| run_seed(seed, fault).err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_voters_keep_every_invariant() {
        let count = seed_count(4000);
        let stats = run_many(0, 2, count);
        eprintln!("3 voters, {count} seeds: {stats:?}");
    }

    #[test]
    fn one_and_four_voters_keep_every_invariant() {
        let count = seed_count(3000) / 6;
        let one = run_many(SINGLE_VOTER_SEEDS, 1, count);
        let four = run_many(FOUR_VOTER_SEEDS, 1, count);
        eprintln!("1 voter, {count} seeds: {one:?}\n4 voters, {count} seeds: {four:?}");
    }

    #[test]
    fn five_voters_keep_every_invariant() {
        let count = seed_count(3000);
        let stats = run_many(1, 2, count);
        eprintln!("5 voters, {count} seeds: {stats:?}");
    }

    #[test]
    fn granting_votes_regardless_of_log_is_caught() {
        let failure = first_catch(Fault::VoteIgnoresLog, 300)
            .expect("the simulator must catch votes that ignore the log");
        eprintln!("caught: {failure}");
    }

    #[test]
    fn committing_an_earlier_epoch_by_count_is_caught() {
        let failure = first_catch(Fault::CommitPreviousEpochByCount, 20000)
            .expect("the simulator must catch commits of an earlier epoch by count");
        eprintln!("caught: {failure}");
    }
}
