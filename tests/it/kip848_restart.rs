//! KIP-848 consumer groups survive a `kill -9` of the broker (Kafka's consumer-group records,
//! types 3 to 8, in `__consumer_offsets`), driven by librdkafka with `group.protocol=consumer`.
//!
//! - `a_consumer_group_resumes_after_kill9_without_a_rebalance`: two members split a topic and
//!   commit; the broker is killed and restarted; both carry on as the same members with the
//!   same partitions (no assignment or revocation reaches the application) and see every
//!   later message, none of the committed ones again.
//! - `an_empty_consumer_group_is_remembered_and_deleted_for_good`: once the members have
//!   left, the group is listed Empty after another crash, a successor starts exactly at the
//!   committed offsets; after DeleteGroups the group and its offsets stay gone across a crash.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, ensure};
use rdkafka::consumer::{CommitMode, Consumer};
use strata_tests::{Broker, with_broker};

use crate::rdkafka_clients;
use crate::rdkafka_clients::group::{
    Member, delete_groups, keep_polling, kill9_and_restart as restart, list_group, poll_until,
    seen_all, tagged, tagged_values as values,
};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 4;

/// Fast heartbeats; a session long enough to outlast a restart.
const OVERRIDES: &[(&str, &str)] = &[
    ("group.consumer.heartbeat.interval.ms", "500"),
    ("group.consumer.session.timeout.ms", "15000"),
];

/// `n` messages `"<tag>-<i>"`, round robin over the partitions, all acknowledged.
fn produce(b: &Broker, tag: &str, n: usize) -> anyhow::Result<()> {
    rdkafka_clients::group::produce_tagged(b, TOPIC, PARTITIONS, tag, n)
}

/// A KIP-848 member of `group` that outlives broker crashes.
fn member(b: &Broker, group: &str) -> anyhow::Result<Member> {
    let consumer = [("group.protocol", "consumer")];
    let mut m = Member::join(&b.bootstrap(), group, group, TOPIC, PARTITIONS, &consumer)?;
    m.broker_may_die = true;
    Ok(m)
}

/// (assignments, revocations) the application has been told of: each is one step of a
/// rebalance.
fn rebalance_steps(m: &Member) -> (usize, usize) {
    (m.assigns(), m.revokes())
}

/// Whether each member has read, itself, every message `produce(tag, n)` wrote to the
/// partitions it owns now (so each has a position to commit on each of them).
fn caught_up(members: &[&mut Member], tag: &str, n: usize) -> bool {
    members.iter().all(|m| {
        let mine = m.partitions();
        let seen: BTreeSet<(i32, String)> =
            m.records.iter().map(|r| (r.partition, r.text())).collect();
        (0..n).all(|i| {
            let p = i32::try_from(i).unwrap_or(0) % PARTITIONS;
            !mine.contains(&p) || seen.contains(&(p, tagged(tag, i)))
        })
    })
}

/// The group's state, protocol type and member count as ListGroups + DescribeGroups report
/// it. A KIP-848 group's protocol type is "consumer"; a group known only by its offsets has "".
fn listed(b: &Broker, group: &str) -> anyhow::Result<Option<(String, String, usize)>> {
    Ok(list_group(b, group)?.map(|g| (g.state, g.protocol_type, g.members.len())))
}

#[test]
fn a_consumer_group_resumes_after_kill9_without_a_rebalance() {
    with_broker(OVERRIDES, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce(b, "a", 200)?;
        let mut x = member(b, "resume848")?;
        let mut y = member(b, "resume848")?;
        poll_until(
            "a 2/2 split, each member caught up",
            &mut [&mut x, &mut y],
            |ms| ms.iter().all(|m| m.partitions().len() == 2) && caught_up(ms, "a", 200),
        )?;
        let owned = (x.partitions(), y.partitions());
        ensure!(owned.0.is_disjoint(&owned.1), "{owned:?}");
        x.consumer.commit_consumer_state(CommitMode::Sync)?;
        y.consumer.commit_consumer_state(CommitMode::Sync)?;
        let steps = (rebalance_steps(&x), rebalance_steps(&y));
        let (state, _, members) = listed(b, "resume848")?.context("group not listed")?;
        ensure!(state == "Stable" && members == 2, "{state} with {members}");

        restart(b)?;
        // Restored from the log before any member could heartbeat.
        let (state, _, members) = listed(b, "resume848")?.context("group lost on restart")?;
        ensure!(
            members == 2,
            "{state} with {members} members after the restart"
        );
        x.records.clear();
        y.records.clear();
        produce(b, "b", 200)?;
        let second = values("b", 200);
        poll_until("every later message", &mut [&mut x, &mut y], |ms| {
            seen_all(ms, &second)
        })?;
        // A few more heartbeats, to catch a late fencing.
        keep_polling(&mut [&mut x, &mut y], Duration::from_secs(3))?;
        ensure!(
            (rebalance_steps(&x), rebalance_steps(&y)) == steps,
            "the members went through a rebalance: {steps:?} -> {:?}",
            (rebalance_steps(&x), rebalance_steps(&y))
        );
        ensure!(
            (x.partitions(), y.partitions()) == owned,
            "assignments moved: {owned:?} -> {:?}",
            (x.partitions(), y.partitions())
        );
        let replayed: Vec<String> = x
            .values()
            .into_iter()
            .chain(y.values())
            .filter(|v| v.starts_with("a-"))
            .collect();
        ensure!(
            replayed.is_empty(),
            "committed messages delivered again: {replayed:?}"
        );
        let (state, _, members) = listed(b, "resume848")?.context("group not listed")?;
        ensure!(state == "Stable" && members == 2, "{state} with {members}");
        Ok(())
    });
}

#[test]
fn an_empty_consumer_group_is_remembered_and_deleted_for_good() {
    with_broker(OVERRIDES, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce(b, "a", 100)?;
        let mut x = member(b, "empty848")?;
        let first = values("a", 100);
        poll_until("every message", &mut [&mut x], |ms| seen_all(ms, &first))?;
        x.consumer.commit_consumer_state(CommitMode::Sync)?;
        drop(x); // leaves the group (member epoch -1)

        restart(b)?;
        let (state, protocol_type, members) = listed(b, "empty848")?.context("empty group lost")?;
        ensure!(
            state == "Empty" && protocol_type == "consumer" && members == 0,
            "{state} {protocol_type:?} with {members}"
        );
        produce(b, "b", 40)?;
        let mut next = member(b, "empty848")?;
        let second = values("b", 40);
        poll_until("the successor's messages", &mut [&mut next], |ms| {
            seen_all(ms, &second)
        })?;
        ensure!(
            next.values().iter().all(|v| v.starts_with("b-")),
            "the successor did not start at the committed offsets: {} messages",
            next.records.len()
        );
        drop(next);

        let r = delete_groups(b, &["empty848"])?;
        ensure!(r == vec![Ok("empty848".to_owned())], "{r:?}");
        restart(b)?;
        ensure!(
            listed(b, "empty848")?.is_none(),
            "a deleted group came back after a restart"
        );
        // Its offsets went with it: a new member starts from the beginning.
        let mut fresh = member(b, "empty848")?;
        let all: BTreeSet<String> = first.union(&second).cloned().collect();
        poll_until("everything again", &mut [&mut fresh], |ms| {
            seen_all(ms, &all)
        })?;
        Ok(())
    });
}
