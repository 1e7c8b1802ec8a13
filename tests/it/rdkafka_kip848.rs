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

use std::collections::BTreeSet;
use std::ops::Range;

use anyhow::ensure;
use rdkafka::Offset;
use rdkafka::consumer::Consumer;
use strata_tests::{Broker, with_broker};

use crate::rdkafka_clients;
use crate::rdkafka_clients::group::{Member, poll_until, produce_round_robin, seen_all, split};

const TOPIC: &str = "kip848";
const GROUP: &str = "kip848-group";
const PARTITIONS: i32 = 6;
const BATCH: usize = 300;

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
    produce_round_robin(b, TOPIC, PARTITIONS, first..first + BATCH, |i| {
        i.to_string()
    })?;
    Ok(())
}

/// The values of the messages numbered `range`.
fn numbered(range: Range<usize>) -> BTreeSet<String> {
    range.map(|i| i.to_string()).collect()
}

/// The end offset of every partition after `batches` batches.
fn per_partition(batches: usize) -> i64 {
    i64::try_from(batches * BATCH / 6).unwrap_or(0)
}

fn member(b: &Broker, name: &str) -> anyhow::Result<Member> {
    let consumer = [("group.protocol", "consumer")];
    Member::join(&b.bootstrap(), GROUP, name, TOPIC, PARTITIONS, &consumer)
}

/// Whether every member's position on each of its partitions is `end`: it has read all of
/// them, so its commit covers them.
fn caught_up(members: &[&mut Member], end: i64) -> bool {
    members.iter().all(|m| {
        m.consumer.position().is_ok_and(|tpl| {
            tpl.elements()
                .iter()
                .all(|e| e.offset() == Offset::Offset(end))
        })
    })
}

/// Message numbers below `committed` that the members read since their records were last
/// cleared, which was after everything below `committed` had been read: each is a second
/// read, by a successor that did not start at the committed offset.
fn replays(members: &[&Member], committed: usize) -> anyhow::Result<BTreeSet<usize>> {
    let mut out = BTreeSet::new();
    for v in members.iter().flat_map(|m| m.values()) {
        let n: usize = v.parse()?;
        if n < committed {
            out.insert(n);
        }
    }
    Ok(out)
}

#[test]
fn consumers_converge_incrementally_and_successors_resume_from_commits() {
    with_broker(OVERRIDES, |b| {
        create_topic(b)?;
        produce(b, 0)?;
        let mut c1 = member(b, "c1")?;
        let mut c2 = member(b, "c2")?;
        poll_until(
            "two members split 3/3 and consume the first batch",
            &mut [&mut c1, &mut c2],
            |m| {
                split(m, &[3, 3])
                    && seen_all(m, &numbered(0..BATCH))
                    && caught_up(m, per_partition(1))
            },
        )?;
        // Before the first commit c2 may re-read what c1 read before it revoked: only reads
        // after a commit count as replays.
        c1.commit()?;
        c2.commit()?;
        c1.records.clear();
        c2.records.clear();

        // A third member joins: two partitions move to it, each only after its owner revoked
        // it, and it starts at the committed offsets.
        let mut c3 = member(b, "c3")?;
        produce(b, BATCH)?;
        poll_until(
            "a third member: 2/2/2 and the second batch consumed",
            &mut [&mut c1, &mut c2, &mut c3],
            |m| {
                split(m, &[2, 2, 2])
                    && seen_all(m, &numbered(BATCH..2 * BATCH))
                    && caught_up(m, per_partition(2))
            },
        )?;
        let replayed = replays(&[&c1, &c2, &c3], BATCH)?;
        ensure!(
            replayed.is_empty(),
            "the first batch came back: {replayed:?}"
        );
        for c in [&mut c1, &mut c2, &mut c3] {
            c.commit()?;
            c.records.clear();
        }

        // c1 leaves (close sends the leave heartbeat, epoch -1); its successors start at its
        // committed offsets.
        drop(c1);
        produce(b, 2 * BATCH)?;
        poll_until(
            "c2 and c3 take over c1's partitions and consume the third batch",
            &mut [&mut c2, &mut c3],
            |m| split(m, &[3, 3]) && seen_all(m, &numbered(2 * BATCH..3 * BATCH)),
        )?;
        let replayed = replays(&[&c2, &c3], 2 * BATCH)?;
        ensure!(
            replayed.is_empty(),
            "committed messages came back: {replayed:?}"
        );
        Ok(())
    });
}
