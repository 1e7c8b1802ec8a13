//! KIP-848 consumer groups (`group.protocol=consumer`) through librdkafka 2.12 (the `rdkafka`
//! crate) against the real `strata` binary.
//!
//! - `consumers_converge_incrementally_and_successors_resume_from_commits`: two consumers
//!   split a 6-partition topic, a third joins (2/2/2), one closes (its partitions move to the
//!   others). At every step the assignments cover all partitions without overlap, every
//!   produced message is consumed, and after the handover the successors start exactly at
//!   the committed offsets (no message of the first batch comes back).
//!
//! Raw frames (`strata_tests::wire` is not needed: librdkafka is the client) are left to the
//! unit tests of `broker/src/consumer_group/`.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use strata_tests::{Broker, with_broker};

mod rdkafka_clients;

const TOPIC: &str = "kip848";
const GROUP: &str = "kip848-group";
const PARTITIONS: i32 = 6;
const BATCH: usize = 300;
/// Upper bound of every wait in this test.
const PHASE: Duration = Duration::from_secs(60);

/// KIP-848's broker-side timings, small so that the test runs in seconds.
const OVERRIDES: &[(&str, &str)] = &[
    ("group.consumer.heartbeat.interval.ms", "300"),
    ("group.consumer.session.timeout.ms", "10000"),
];

fn create_topic(b: &Broker) -> anyhow::Result<()> {
    rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)
}

/// `BATCH` messages numbered from `first`, spread evenly over the partitions.
fn produce(b: &Broker, first: usize) -> anyhow::Result<()> {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    for i in first..first + BATCH {
        let v = i.to_string();
        let partition = i32::try_from(i % 6).unwrap_or(0);
        p.send(
            BaseRecord::<(), _>::to(TOPIC)
                .payload(&v)
                .partition(partition),
        )
        .map_err(|(e, _)| e)?;
    }
    p.flush(Duration::from_secs(30))?;
    Ok(())
}

/// The end offset of every partition after `batches` batches.
fn per_partition(batches: usize) -> i64 {
    i64::try_from(batches * BATCH / 6).unwrap_or(0)
}

struct Member {
    consumer: BaseConsumer,
    /// Message numbers seen.
    seen: HashSet<usize>,
    /// Message numbers seen by this member that it or another member had seen before.
    dups: BTreeSet<usize>,
    /// Every message number any member has seen.
    everyone: Rc<RefCell<HashSet<usize>>>,
}

fn member(
    b: &Broker,
    name: &str,
    everyone: &Rc<RefCell<HashSet<usize>>>,
) -> anyhow::Result<Member> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", GROUP)
        .set("group.protocol", "consumer")
        .set("client.id", name)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()?;
    consumer.subscribe(&[TOPIC])?;
    Ok(Member {
        consumer,
        seen: HashSet::new(),
        dups: BTreeSet::new(),
        everyone: everyone.clone(),
    })
}

impl Member {
    fn poll_once(&mut self) -> anyhow::Result<()> {
        while let Some(m) = self.consumer.poll(Duration::from_millis(20)) {
            let m = m?;
            let v = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            let n: usize = v.parse()?;
            self.seen.insert(n);
            if !self.everyone.borrow_mut().insert(n) {
                self.dups.insert(n);
            }
        }
        Ok(())
    }

    fn partitions(&self) -> BTreeSet<i32> {
        self.consumer
            .assignment()
            .map(|tpl| tpl.elements().iter().map(|e| e.partition()).collect())
            .unwrap_or_default()
    }

    /// Commits the positions of the current assignment; a commit that races a rebalance
    /// (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) is retried after a poll.
    fn commit(&mut self) -> anyhow::Result<()> {
        let mut last = None;
        for _ in 0..20 {
            match self.consumer.commit_consumer_state(CommitMode::Sync) {
                Ok(()) => return Ok(()),
                // Nothing consumed yet on the current assignment.
                Err(rdkafka::error::KafkaError::ConsumerCommit(
                    rdkafka::types::RDKafkaErrorCode::NoOffset,
                )) => return Ok(()),
                Err(e) => last = Some(e),
            }
            self.poll_once()?;
        }
        bail!("commit kept failing: {last:?}")
    }
}

/// Polls the members until `done` holds, at most `PHASE`.
fn poll_until(
    what: &str,
    members: &mut [&mut Member],
    mut done: impl FnMut(&[&mut Member]) -> bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        for m in members.iter_mut() {
            m.poll_once()?;
        }
        if done(members) {
            return Ok(());
        }
        if started.elapsed() > PHASE {
            let state: Vec<_> = members.iter().map(|m| m.partitions()).collect();
            bail!("timed out after {PHASE:?} waiting for {what}; assignments {state:?}");
        }
    }
}

/// Whether the assignments are disjoint, cover every partition and have the given sizes.
fn split(members: &[&mut Member], sizes: &[usize]) -> bool {
    let parts: Vec<BTreeSet<i32>> = members.iter().map(|m| m.partitions()).collect();
    let mut got: Vec<usize> = parts.iter().map(BTreeSet::len).collect();
    let mut want = sizes.to_vec();
    got.sort_unstable();
    want.sort_unstable();
    let union: BTreeSet<i32> = parts.iter().flatten().copied().collect();
    let total: usize = got.iter().sum();
    got == want && union.len() == 6 && total == 6
}

/// Whether every member's position on each of its partitions is `end`: it has read all of
/// them, so its commit covers them.
fn caught_up(members: &[&mut Member], end: i64) -> bool {
    members.iter().all(|m| {
        m.consumer.position().is_ok_and(|tpl| {
            tpl.elements()
                .iter()
                .all(|e| e.offset() == rdkafka::Offset::Offset(end))
        })
    })
}

fn seen_all(members: &[&mut Member], range: std::ops::Range<usize>) -> bool {
    let seen: HashSet<usize> = members
        .iter()
        .flat_map(|m| m.seen.iter().copied())
        .collect();
    range.into_iter().all(|i| seen.contains(&i))
}

/// Message numbers below `committed` read a second time (by any member): a successor that
/// did not start at the committed offset reads them again.
fn replays(members: &[&Member], committed: usize) -> BTreeSet<usize> {
    members
        .iter()
        .flat_map(|m| m.dups.iter().copied())
        .filter(|&i| i < committed)
        .collect()
}

#[test]
fn consumers_converge_incrementally_and_successors_resume_from_commits() {
    with_broker(OVERRIDES, |b| {
        create_topic(b)?;
        produce(b, 0)?;
        let everyone = Rc::new(RefCell::new(HashSet::new()));
        let mut c1 = member(b, "c1", &everyone)?;
        let mut c2 = member(b, "c2", &everyone)?;
        poll_until(
            "two members split 3/3 and consume the first batch",
            &mut [&mut c1, &mut c2],
            |m| split(m, &[3, 3]) && seen_all(m, 0..BATCH) && caught_up(m, per_partition(1)),
        )?;
        // Before the first commit c2 may re-read what c1 read before it revoked: only reads
        // after a commit count as replays.
        c1.commit()?;
        c2.commit()?;
        c1.dups.clear();
        c2.dups.clear();

        // A third member joins: two partitions move to it, each only after its owner revoked
        // it, and it starts at the committed offsets.
        let mut c3 = member(b, "c3", &everyone)?;
        produce(b, BATCH)?;
        poll_until(
            "a third member: 2/2/2 and the second batch consumed",
            &mut [&mut c1, &mut c2, &mut c3],
            |m| {
                split(m, &[2, 2, 2])
                    && seen_all(m, BATCH..2 * BATCH)
                    && caught_up(m, per_partition(2))
            },
        )?;
        let replayed = replays(&[&c1, &c2, &c3], BATCH);
        ensure!(
            replayed.is_empty(),
            "the first batch came back: {replayed:?}"
        );
        for c in [&mut c1, &mut c2, &mut c3] {
            c.commit()?;
            c.dups.clear();
        }

        // c1 leaves (close sends the leave heartbeat, epoch -1); its successors start at its
        // committed offsets.
        drop(c1);
        produce(b, 2 * BATCH)?;
        poll_until(
            "c2 and c3 take over c1's partitions and consume the third batch",
            &mut [&mut c2, &mut c3],
            |m| split(m, &[3, 3]) && seen_all(m, 2 * BATCH..3 * BATCH),
        )?;
        let replayed = replays(&[&c2, &c3], 2 * BATCH);
        ensure!(
            replayed.is_empty(),
            "committed messages came back: {replayed:?}"
        );
        Ok(())
    });
}
