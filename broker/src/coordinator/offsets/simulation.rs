//! A seeded simulation of the coordinator runtime's leader changes: one `__consumer_offsets`
//! partition on three nodes, each with a real log in a temporary directory, a real
//! [`Partition`] and its own [`OffsetStore`], replicated by the follower state machine the
//! replica fetcher runs (fetch, truncate on a diverging epoch, restart at the leader's log
//! start), and a controller stand-in that commits ISR changes and elects leaders from the
//! ISR with an epoch bump, as Kafka's does.
//!
//! Steps, chosen by the seed: offset commits and group-metadata writes at the loaded
//! leader; one follower fetch; a pass of the log cleaner over any live replica's log (each
//! replica cleans its own, below its own last stable offset); a leadership
//! move to another ISR member; a process crash (kill -9: the page cache stays) of any node,
//! which the controller takes out of the ISR unless it is the last member; a restart; a
//! wiped disk of a dead node outside the ISR (Kafka's fault model: only a replica the ISR
//! no longer counts on loses its data); the controller shrinking the ISR. Writes are large
//! and segments small, so the cleaner has segments to clean, and followers fetch and
//! truncate across cleaned ranges.
//!
//! The invariant, checked whenever a leader has loaded and after every step: every offset
//! and group-metadata write the runtime acknowledged (its high watermark passed it in the
//! epoch it was written in) is still there, or a later write of the same key is; no value
//! is one that was never written. At the end every fault is healed and the last leader's
//! state must hold each key's latest acknowledged write or a later one.
//!
//! `COORD_SIM_SEED=<n>` replays one seed; `COORD_SIM_SEEDS=<n>` sets how many run.

use std::collections::HashMap;
use std::path::PathBuf;

use strata_replication::error::ReplicationError;
use strata_replication::follower::{
    FollowerRequest, FollowerState, LocalLog, Truncation, TruncationMode,
};
use strata_replication::leader::{AlterPartitionOutcome, PartitionRegistration, ReplicationConfig};

use super::*;

const NODES: [i32; 3] = [1, 2, 3];
const GROUPS: [&str; 3] = ["g0", "g1", "g2"];
const TOPIC_PARTITIONS: i32 = 3;
const STEPS: usize = 300;
/// Commit metadata this long makes the log outgrow its live records quickly.
const PADDING: usize = 10_000;

/// splitmix64: small, seeded, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// What a write set: a group's offset of one partition, or its group metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Offset(usize, i32),
    Metadata(usize),
}

/// One node: its data directory, and while it runs its replica and offset store.
struct Node {
    id: i32,
    dir: PathBuf,
    up: Option<Running>,
}

struct Running {
    partition: Arc<Partition>,
    store: OffsetStore,
    /// Set while this node follows the leader.
    follower: Option<FollowerState>,
}

/// A write the runtime has appended and not yet answered.
struct Pending {
    node: i32,
    write: PendingWrite,
    keys: Vec<(Key, i64)>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    acked: usize,
    refused: usize,
    elections: usize,
    crashes: usize,
    wipes: usize,
    truncations: usize,
    compactions: usize,
}

struct Sim {
    rng: Rng,
    _tmp: tempfile::TempDir,
    nodes: Vec<Node>,
    /// The controller's view.
    leader: Option<i32>,
    isr: Vec<i32>,
    leader_epoch: i32,
    partition_epoch: i32,
    min_isr: usize,
    pending: Vec<Pending>,
    /// Per key, the latest acknowledged value.
    acked: HashMap<Key, i64>,
    next_value: i64,
    clock_ms: i64,
    runtime: tokio::runtime::Runtime,
    stats: Stats,
    /// A deliberately broken runtime, to show the invariant catches it: every write is
    /// acknowledged at the leader's append, without waiting for the ISR.
    ack_at_append: bool,
}

fn store_config() -> OffsetsConfig {
    OffsetsConfig {
        num_partitions: 1,
        retention_ms: i64::MAX / 4,
        retention_check_interval_ms: 1,
        metadata_max_bytes: 2 * PADDING,
    }
}

fn metadata_of(key: Key, value: i64) -> String {
    format!("{key:?}={value};{}", "p".repeat(PADDING))
}

/// The value a metadata string records, if it is one [`metadata_of`] wrote for `key`.
fn value_of(key: Key, metadata: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(metadata).ok()?;
    let rest = s.strip_prefix(&format!("{key:?}="))?;
    let (value, padding) = rest.split_once(';')?;
    (padding.len() == PADDING).then_some(())?;
    value.parse().ok()
}

fn local(log: &strata_storage::Log) -> LocalLog<'_> {
    LocalLog {
        log_start_offset: log.log_start_offset(),
        log_end_offset: log.log_end_offset(),
        epochs: log.leader_epochs(),
    }
}

fn truncate(log: &mut strata_storage::Log, t: Truncation) -> Result<(), String> {
    match t {
        Truncation::To(offset) => log.truncate_to(offset),
        Truncation::FullyAndStartAt(offset) => log.truncate_fully_and_start_at(offset),
    }
    .map_err(|e| format!("truncation {t:?}: {e}"))
}

impl Sim {
    fn new(seed: u64, ack_at_append: bool) -> Self {
        // Memory-backed where there is one: the runtime's fsyncs say nothing here.
        let shm = std::path::Path::new("/dev/shm");
        let tmp = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .unwrap();
        let nodes = NODES
            .iter()
            .map(|&id| Node {
                id,
                dir: tmp.path().join(format!("node-{id}")),
                up: None,
            })
            .collect();
        let mut rng = Rng(seed);
        let min_isr = if rng.chance(50) { 1 } else { 2 };
        let mut sim = Sim {
            rng,
            _tmp: tmp,
            nodes,
            leader: None,
            isr: NODES.to_vec(),
            leader_epoch: 0,
            partition_epoch: 0,
            min_isr,
            pending: Vec::new(),
            acked: HashMap::new(),
            next_value: 0,
            clock_ms: 0,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap(),
            stats: Stats::default(),
            ack_at_append,
        };
        for id in NODES {
            sim.start(id).unwrap();
        }
        sim.elect(NODES[0]).unwrap();
        sim
    }

    fn node(&mut self, id: i32) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).unwrap()
    }

    fn running(&self, id: i32) -> Option<&Running> {
        self.nodes.iter().find(|n| n.id == id)?.up.as_ref()
    }

    fn live(&self) -> Vec<i32> {
        self.nodes
            .iter()
            .filter(|n| n.up.is_some())
            .map(|n| n.id)
            .collect()
    }

    fn registration(&self) -> PartitionRegistration {
        PartitionRegistration {
            replicas: NODES.to_vec(),
            isr: self.isr.clone(),
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
        }
    }

    fn replication_config(&self) -> ReplicationConfig {
        ReplicationConfig {
            min_insync_replicas: self.min_isr,
            ..ReplicationConfig::default()
        }
    }

    /// Opens a node's log as its process starts, and follows the leader if there is one.
    fn start(&mut self, id: i32) -> Result<(), String> {
        let dir = self.node(id).dir.join(format!("{OFFSETS_TOPIC}-0"));
        let log = strata_storage::Log::open(&dir, log_config(), 0)
            .map_err(|e| format!("node {id} cannot open its log: {e}"))?;
        let partition = Partition::new(OFFSETS_TOPIC.to_owned(), uuid::Uuid::nil(), 0, log);
        self.node(id).up = Some(Running {
            partition,
            store: OffsetStore::new(store_config(), 0),
            follower: None,
        });
        if let Some(leader) = self.leader {
            self.follow(id, leader);
        }
        Ok(())
    }

    /// `id` follows `leader` in the current epoch: it resigns, unloads, and truncates what
    /// it cannot know is committed (Kafka's `makeFollower`).
    fn follow(&mut self, id: i32, leader: i32) {
        let epoch = self.leader_epoch;
        let Some(run) = self.node(id).up.as_mut() else {
            return;
        };
        run.partition.resign();
        run.store.resign(0, |_| {});
        let state = FollowerState::new(
            id,
            -1,
            leader,
            epoch,
            TruncationMode::OnFetch,
            run.partition.high_watermark(),
        );
        let mut log = run.partition.log();
        if let Some(t) = state.initial_truncation(local(&log)) {
            let _ = truncate(&mut log, t);
        }
        drop(log);
        run.follower = Some(state);
    }

    /// The controller elects `leader` (an ISR member that runs) with a new leader epoch;
    /// the leader loads its state, and the invariant is checked against it.
    fn elect(&mut self, leader: i32) -> Result<(), String> {
        assert!(self.isr.contains(&leader));
        self.leader_epoch += 1;
        self.partition_epoch += 1;
        self.leader = Some(leader);
        self.stats.elections += 1;
        let (epoch, registration, config) = (
            self.leader_epoch,
            self.registration(),
            self.replication_config(),
        );
        let run = self.node(leader).up.as_mut().expect("a live leader");
        run.follower = None;
        run.partition
            .become_leader(epoch)
            .map_err(|e| format!("become_leader: {e}"))?;
        run.partition.make_leader(leader, &registration, config);
        if !run.store.begin_load(0, run.partition.clone(), epoch) {
            return Err("the load did not begin".into());
        }
        let mut metadata = Vec::new();
        let loaded = run
            .store
            .load(0, epoch, |state| {
                metadata = state
                    .group_metadata()
                    .map(|(g, v)| (g.clone(), v.clone()))
                    .collect();
            })
            .map_err(|e| format!("load: {e}"))?;
        if !loaded {
            return Err("the load found nothing to do".into());
        }
        for (group, value) in metadata {
            let g = GROUPS
                .iter()
                .position(|x| *x == group)
                .ok_or_else(|| format!("metadata of an unknown group {group}"))?;
            let key = Key::Metadata(g);
            value_of(key, &value).ok_or_else(|| format!("{key:?}: a value never written"))?;
        }
        for id in self.live() {
            if id != leader {
                self.follow(id, leader);
            }
        }
        self.check(leader, true)
    }

    /// The invariant at the loaded leader. `loaded`: the group metadata was checked at the
    /// load, and is compared with what was acknowledged.
    fn check(&self, leader: i32, loaded: bool) -> Result<(), String> {
        let Some(run) = self.running(leader) else {
            return Ok(());
        };
        let metadata: HashMap<String, Bytes> = if loaded {
            run.store
                .partitions
                .lock(0)
                .shard
                .state
                .group_metadata()
                .map(|(g, v)| (g.clone(), v.clone()))
                .collect()
        } else {
            HashMap::new()
        };
        for (&key, &want) in &self.acked {
            let have = match key {
                Key::Offset(g, p) => match run.store.fetch(GROUPS[g], "t", p) {
                    Some(v) => {
                        let value = value_of(key, v.metadata.as_bytes())
                            .ok_or_else(|| format!("{key:?}: a value never written"))?;
                        if v.offset != value {
                            return Err(format!(
                                "{key:?}: offset {} with metadata {value}",
                                v.offset
                            ));
                        }
                        Some(value)
                    }
                    None => None,
                },
                Key::Metadata(g) if loaded => match metadata.get(GROUPS[g]) {
                    Some(v) => Some(
                        value_of(key, v)
                            .ok_or_else(|| format!("{key:?}: a value never written"))?,
                    ),
                    None => None,
                },
                Key::Metadata(_) => continue,
            };
            if have.is_none_or(|have| have < want) {
                return Err(format!(
                    "leader {leader} (epoch {}) lost {key:?}: acknowledged {want}, holds {have:?}",
                    self.leader_epoch
                ));
            }
        }
        Ok(())
    }

    /// Settles the writes whose fate is known: committed in their epoch (acknowledged), or
    /// failed (their leader resigned, or the ISR fell below `min.insync.replicas`).
    fn settle_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            let outcome = if p.write.is_nothing() || self.ack_at_append {
                Some(Ok(()))
            } else {
                let _runtime = self.runtime.enter();
                p.write.decided_now()
            };
            match outcome {
                Some(Ok(())) => {
                    self.stats.acked += 1;
                    for (key, value) in p.keys {
                        let v = self.acked.entry(key).or_insert(value);
                        *v = (*v).max(value);
                    }
                }
                Some(Err(())) => self.stats.refused += 1,
                None => self.pending.push(p),
            }
        }
    }

    fn write(&mut self) {
        let Some(leader) = self.leader else { return };
        let g = self.rng.below(GROUPS.len());
        let now = self.clock_ms;
        let metadata = self.rng.chance(20);
        let mut keys = Vec::new();
        let mut offsets = Vec::new();
        if metadata {
            self.next_value += 1;
            keys.push((Key::Metadata(g), self.next_value));
        } else {
            for p in 0..TOPIC_PARTITIONS {
                if p == 0 || self.rng.chance(50) {
                    self.next_value += 1;
                    let key = Key::Offset(g, p);
                    keys.push((key, self.next_value));
                    offsets.push((
                        "t".to_owned(),
                        p,
                        CommittedOffset {
                            offset: self.next_value,
                            leader_epoch: 0,
                            metadata: metadata_of(key, self.next_value),
                            commit_timestamp: now,
                            expire_timestamp: None,
                        },
                    ));
                }
            }
        }
        let Some(run) = self.running(leader) else {
            return;
        };
        let written = if metadata {
            let value = Bytes::from(metadata_of(keys[0].0, keys[0].1));
            run.store.store_group_metadata(GROUPS[g], Some(value), now)
        } else {
            run.store.commit(GROUPS[g], offsets, now)
        };
        match written {
            Ok(write) => self.pending.push(Pending {
                node: leader,
                write,
                keys,
            }),
            // Refused before the append (not enough replicas, or not serving): never
            // acknowledged.
            Err(_) => self.stats.refused += 1,
        }
    }

    /// One fetch of `id` from the leader, applied as the replica fetcher applies it; then
    /// an ISR expansion the leader proposes is committed by the controller.
    fn fetch(&mut self, id: i32) -> Result<(), String> {
        let Some(leader) = self.leader else {
            return Ok(());
        };
        let Some(leader_partition) = self.running(leader).map(|r| r.partition.clone()) else {
            return Ok(());
        };
        let live = self.live();
        let Some(run) = self
            .nodes
            .iter_mut()
            .find(|n| n.id == id)
            .and_then(|n| n.up.as_mut())
        else {
            return Ok(());
        };
        let Some(state) = run.follower.as_mut() else {
            return Ok(());
        };
        let partition = run.partition.clone();
        let mut log = partition.log();
        let FollowerRequest::Fetch(fp) = state.next_request(local(&log)) else {
            return Ok(());
        };
        let fetch_offset = fp.fetch_offset;
        let answer = match leader_partition.follower_fetch(&fp, leader) {
            Ok(answer) => answer,
            Err(e @ ReplicationError::OffsetOutOfRange { .. }) => {
                state.on_error(&e);
                let (start, hw) = (
                    leader_partition.log_start_offset(),
                    leader_partition.high_watermark(),
                );
                if let Some(t) = state.on_leader_offsets(start, hw, local(&log)) {
                    self.stats.truncations += 1;
                    truncate(&mut log, t)?;
                }
                return Ok(());
            }
            Err(e) => return Err(format!("node {id} fetching from {leader}: {e}")),
        };
        let mut records = Vec::new();
        if answer.diverging_epoch.is_none() && answer.read_to > fetch_offset {
            let read = leader_partition
                .read_up_to(fetch_offset, 64 * 1024, answer.read_to, true)
                .map_err(|e| format!("leader read: {e}"))?;
            for r in &read.regions {
                r.read_into(&mut records)
                    .map_err(|e| format!("leader read: {e}"))?;
            }
        }
        if let Some(t) = state.on_fetch_answer(&answer, local(&log)) {
            self.stats.truncations += 1;
            truncate(&mut log, t)?;
        }
        if !records.is_empty() {
            log.append_as_follower(&mut records, 0)
                .map_err(|e| format!("node {id} cannot append replicated records: {e}"))?;
        }
        state.after_append(answer.high_watermark, log.log_end_offset());
        let hw = state.high_watermark();
        drop(log);
        partition.set_high_watermark(hw);
        if let Some(proposal) = leader_partition.isr_proposal(crate::now_ms()) {
            let outcome = if proposal.leader_epoch == self.leader_epoch
                && proposal.partition_epoch == self.partition_epoch
                && proposal.isr_ids().iter().all(|m| live.contains(m))
            {
                self.partition_epoch += 1;
                self.isr = proposal.isr_ids();
                AlterPartitionOutcome::Committed {
                    leader_epoch: self.leader_epoch,
                    partition_epoch: self.partition_epoch,
                    isr: self.isr.clone(),
                }
            } else {
                AlterPartitionOutcome::NotAttempted
            };
            leader_partition.on_alter_partition(&outcome);
        }
        Ok(())
    }

    /// The controller changes the ISR itself (a fenced or lagging member leaves it); the
    /// leader learns of it from the image.
    fn set_isr(&mut self, isr: Vec<i32>) {
        self.isr = isr;
        self.partition_epoch += 1;
        if let Some(leader) = self.leader {
            let (registration, config) = (self.registration(), self.replication_config());
            if let Some(run) = self.node(leader).up.as_ref() {
                run.partition.make_leader(leader, &registration, config);
            }
        }
    }

    fn crash(&mut self, id: i32) -> Result<(), String> {
        self.stats.crashes += 1;
        self.node(id).up = None;
        // Its unanswered writes are never answered: the client sees the connection drop.
        let before = self.pending.len();
        self.pending.retain(|p| p.node != id);
        self.stats.refused += before - self.pending.len();
        if self.isr.len() > 1 && self.isr.contains(&id) {
            let isr = self.isr.iter().copied().filter(|&m| m != id).collect();
            self.set_isr(isr);
        }
        if self.leader == Some(id) {
            self.leader = None;
            let live = self.live();
            if let Some(&next) = self.isr.iter().find(|m| live.contains(m)) {
                self.elect(next)?;
            }
        }
        Ok(())
    }

    fn restart(&mut self, id: i32) -> Result<(), String> {
        self.start(id)?;
        if self.leader.is_none() && self.isr.contains(&id) {
            self.elect(id)?;
        }
        Ok(())
    }

    fn step(&mut self) -> Result<(), String> {
        self.clock_ms += 10;
        let roll = self.rng.below(100);
        let live = self.live();
        let dead: Vec<i32> = NODES
            .iter()
            .copied()
            .filter(|n| !live.contains(n))
            .collect();
        match roll {
            0..35 => self.write(),
            35..75 => {
                let id = live[self.rng.below(live.len())];
                if Some(id) != self.leader {
                    self.fetch(id)?;
                }
            }
            75..80 => {
                let id = live[self.rng.below(live.len())];
                if let Some(run) = self.running(id)
                    && super::tests::clean(&run.partition, self.clock_ms)
                {
                    self.stats.compactions += 1;
                }
            }
            80..85 => {
                let live = self.live();
                let others: Vec<i32> = self
                    .isr
                    .iter()
                    .copied()
                    .filter(|m| Some(*m) != self.leader && live.contains(m))
                    .collect();
                if !others.is_empty() {
                    let next = others[self.rng.below(others.len())];
                    self.elect(next)?;
                }
            }
            85..90 => {
                if live.len() > 1 {
                    let id = live[self.rng.below(live.len())];
                    self.crash(id)?;
                }
            }
            90..95 => {
                if !dead.is_empty() {
                    let id = dead[self.rng.below(dead.len())];
                    self.restart(id)?;
                }
            }
            95..97 => {
                let wipeable: Vec<i32> = dead
                    .iter()
                    .copied()
                    .filter(|d| !self.isr.contains(d))
                    .collect();
                if !wipeable.is_empty() {
                    let id = wipeable[self.rng.below(wipeable.len())];
                    let dir = self.node(id).dir.clone();
                    let _ = std::fs::remove_dir_all(&dir);
                    self.stats.wipes += 1;
                }
            }
            _ => {
                let followers: Vec<i32> = self
                    .isr
                    .iter()
                    .copied()
                    .filter(|m| Some(*m) != self.leader)
                    .collect();
                if self.leader.is_some() && !followers.is_empty() {
                    let out = followers[self.rng.below(followers.len())];
                    let isr = self.isr.iter().copied().filter(|&m| m != out).collect();
                    self.set_isr(isr);
                }
            }
        }
        self.settle_pending();
        match self.leader {
            Some(leader) => self.check(leader, false),
            None => Ok(()),
        }
    }

    /// Heals every fault: every node runs, the followers catch up and rejoin the ISR, every
    /// write is answered; then a last leader change checks everything acknowledged.
    fn settle(&mut self) -> Result<(), String> {
        for id in NODES {
            if self.running(id).is_none() {
                self.restart(id)?;
            }
        }
        let leader = self.leader.ok_or("no leader with every node running")?;
        for _ in 0..200 {
            for id in NODES {
                if id != leader {
                    self.fetch(id)?;
                }
            }
            self.settle_pending();
            if self.pending.is_empty() && self.isr.len() == NODES.len() {
                break;
            }
        }
        if !self.pending.is_empty() {
            let states: Vec<String> = self
                .pending
                .iter()
                .map(|p| format!("node {}: {}", p.node, p.write.debug_state()))
                .collect();
            return Err(format!(
                "{} writes never answered: {states:?}; ISR {:?}",
                self.pending.len(),
                self.isr
            ));
        }
        if self.isr.len() != NODES.len() {
            let ends: Vec<(i32, i64, i64)> = NODES
                .iter()
                .filter_map(|&id| {
                    let p = &self.running(id)?.partition;
                    Some((id, p.log_start_offset(), p.log().log_end_offset()))
                })
                .collect();
            return Err(format!(
                "the ISR did not heal: {:?} (leader {leader}; node, log start, log end: {ends:?}) {}",
                self.isr,
                self.running(leader).unwrap().partition.debug_marks()
            ));
        }
        let next = NODES
            .iter()
            .copied()
            .find(|&n| n != leader)
            .unwrap_or(leader);
        self.elect(next)
    }
}

fn run(seed: u64, ack_at_append: bool) -> Result<Stats, String> {
    // A seed replays the same run: no fsync happens on another thread's schedule.
    crate::partition::group_commit::fsync_inline_on_this_thread();
    let mut sim = Sim::new(seed, ack_at_append);
    for step in 0..STEPS {
        sim.step()
            .map_err(|e| format!("seed {seed}, step {step}: {e}"))?;
    }
    sim.settle().map_err(|e| format!("seed {seed}: {e}"))?;
    Ok(sim.stats)
}

fn seeds() -> std::ops::Range<u64> {
    if let Some(seed) = std::env::var("COORD_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return seed..seed + 1;
    }
    let count = std::env::var("COORD_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    0..count
}

#[test]
fn leader_changes_never_lose_or_move_back_an_acknowledged_write() {
    let mut total = Stats::default();
    for seed in seeds() {
        match run(seed, false) {
            Ok(s) => {
                total.acked += s.acked;
                total.refused += s.refused;
                total.elections += s.elections;
                total.crashes += s.crashes;
                total.wipes += s.wipes;
                total.truncations += s.truncations;
                total.compactions += s.compactions;
            }
            Err(e) => panic!("{e} (replay with COORD_SIM_SEED={seed})"),
        }
    }
    eprintln!("{total:?}");
    // The runs must exercise what they claim to.
    assert!(total.acked > 0 && total.elections > seeds().count());
    if seeds().count() >= 20 {
        assert!(total.crashes > 0 && total.wipes > 0 && total.truncations > 0);
        assert!(total.compactions > 0 && total.refused > 0);
    }
}

#[test]
fn acknowledging_a_write_at_the_append_is_caught() {
    let failure = (0..1_000)
        .find_map(|seed| run(seed, true).err())
        .expect("the fault went unnoticed");
    eprintln!("{failure}");
}
