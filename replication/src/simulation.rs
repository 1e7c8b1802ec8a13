//! A deterministic simulation of one partition: 3 to 5 replicas with in-memory logs, a
//! controller stand-in that commits AlterPartition and elects leaders from the ISR with an
//! epoch bump, acks=all producers, consumers, slow followers, cut links between a follower
//! and its leader, process crashes, power losses (the unflushed tail is lost) and wiped
//! disks, replicas cut off from the controller, and leadership moves.
//!
//! The fault model is Kafka's: a replica that loses data (power loss, wiped disk) comes back
//! as a new registration, which the controller takes out of the ISR; such a loss only hits a
//! replica while another live one is in the ISR. A process crash keeps the page cache.
//!
//! A replica can also be cut off from the controller: it is fenced there (out of the ISR,
//! re-election if it led) but runs on with what it knew, so a deposed leader keeps taking
//! produces and fetches as a zombie until it is heard again.
//!
//! Checked after every step:
//! - every record below any leader's high watermark, zombies' included (the committed
//!   prefix), and so every acknowledged acks=all record, is in the log of the controller's
//!   leader at its offset;
//! - no replica's log differs from the committed prefix below its own high watermark;
//! - a leader's high watermark never moves back during its leadership;
//! - consumers never read above the high watermark.
//!
//! At the end of a seed every fault is healed, and the replicas must then converge: the same
//! log as the leader, all of them in the ISR, the high watermark at the log end.
//!
//! `REPL_SIM_SEED=<n>` replays one seed; `REPL_SIM_SEEDS=<n>` sets how many run.

mod cluster;

use cluster::Sim;

use crate::fault::Fault;

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

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A record: the epoch it was written in and a unique value.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    acked: usize,
    /// Acknowledged by a leader the controller had already replaced.
    zombie_acked: usize,
    elections: usize,
    truncations: usize,
    shrinks: usize,
    expands: usize,
}

const STEPS: usize = 400;

fn run(seed: u64, fault: Option<Fault>) -> Result<Stats, String> {
    let mut sim = Sim::new(seed, fault);
    for step in 0..STEPS {
        sim.step()
            .map_err(|e| format!("seed {seed}, step {step}: {e}"))?;
    }
    sim.settle().map_err(|e| format!("seed {seed}: {e}"))?;
    Ok(sim.stats)
}

fn seeds() -> std::ops::Range<u64> {
    if let Some(seed) = std::env::var("REPL_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return seed..seed + 1;
    }
    let count = std::env::var("REPL_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    0..count
}

#[test]
fn replication_holds_its_invariants_under_faults() {
    let mut total = Stats::default();
    for seed in seeds() {
        match run(seed, None) {
            Ok(s) => {
                total.acked += s.acked;
                total.zombie_acked += s.zombie_acked;
                total.elections += s.elections;
                total.truncations += s.truncations;
                total.shrinks += s.shrinks;
                total.expands += s.expands;
            }
            Err(e) => panic!("{e} (replay with REPL_SIM_SEED={seed})"),
        }
    }
    eprintln!("{total:?}");
    // The runs must exercise what they claim to.
    assert!(total.acked > 0 && total.elections > 0);
    if seeds().count() > 100 {
        assert!(total.truncations > 0 && total.shrinks > 0 && total.expands > 0);
        assert!(total.zombie_acked > 0);
    }
}

fn caught(fault: Fault) -> Option<String> {
    (0..5_000).find_map(|seed| run(seed, Some(fault)).err())
}

#[test]
fn a_high_watermark_ignoring_the_isr_is_caught() {
    let failure = caught(Fault::HwFromLeaderOnly).expect("the fault went unnoticed");
    eprintln!("{failure}");
}

#[test]
fn a_follower_that_skips_truncation_is_caught() {
    let failure = caught(Fault::SkipTruncation).expect("the fault went unnoticed");
    eprintln!("{failure}");
}

#[test]
fn an_isr_shrunk_before_the_controller_commits_is_caught() {
    let failure = caught(Fault::ShrinkBeforeCommit).expect("the fault went unnoticed");
    eprintln!("{failure}");
}

#[test]
fn a_high_watermark_ignoring_a_joining_member_is_caught() {
    let failure = caught(Fault::HwOverCommittedIsr).expect("the fault went unnoticed");
    eprintln!("{failure}");
}

#[test]
fn a_member_joining_below_the_epoch_start_is_caught() {
    let failure = caught(Fault::ExpandBelowEpochStart).expect("the fault went unnoticed");
    eprintln!("{failure}");
}
