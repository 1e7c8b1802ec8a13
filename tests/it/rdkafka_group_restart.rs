//! Classic group metadata survives a `kill -9` of the broker (Kafka's GroupMetadata records in
//! `__consumer_offsets`), driven by librdkafka (the `rdkafka` crate) and by raw frames.
//!
//! - `a_group_resumes_after_kill9_without_a_rebalance_or_a_skip`: a subscribed consumer
//!   commits, the broker is killed and restarted, the consumer carries on as the same member
//!   (no rebalance) and sees every later message; once it has left, the group is listed Empty
//!   after another crash and its successor starts exactly at the committed offsets.
//! - `a_restored_group_keeps_its_generation_and_static_members`: DescribeGroups after a restart
//!   shows the member with its client host; its heartbeat at the old generation is accepted; a
//!   restarted static member (same `group.instance.id`) gets its assignment back at the same
//!   generation, and that replacement survives another crash.
//! - `list_groups_shows_a_simple_group`: a group that only committed offsets (`assign`, no
//!   `subscribe`) is listed and described Empty with protocol type "", also after a restart.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use strata_tests::{Broker, wire, with_broker};

use crate::rdkafka_clients;
use crate::rdkafka_clients::group::{
    Member, keep_polling, kill9_and_restart as restart, poll_until, seen_all,
    tagged_values as values,
};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 3;

const OVERRIDES: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "100"),
    ("group.min.session.timeout.ms", "1000"),
];

fn create_topic(b: &Broker) -> anyhow::Result<()> {
    rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)
}

/// `n` messages `"<tag>-<i>"`, round robin over the partitions, all acknowledged.
fn produce(b: &Broker, tag: &str, n: usize) -> anyhow::Result<()> {
    rdkafka_clients::group::produce_tagged(b, TOPIC, PARTITIONS, tag, n)
}

/// A classic-protocol member of `group` that outlives broker crashes.
fn subscriber(b: &Broker, group: &str) -> anyhow::Result<Member> {
    let timing = [
        ("session.timeout.ms", "10000"),
        ("heartbeat.interval.ms", "500"),
    ];
    let mut m = Member::join(&b.bootstrap(), group, group, TOPIC, PARTITIONS, &timing)?;
    m.broker_may_die = true;
    Ok(m)
}

/// Polls until every value of `want` has been read (then 1.5 s more to catch extras);
/// returns everything read in this call.
fn consume_until(m: &mut Member, want: &BTreeSet<String>) -> anyhow::Result<Vec<String>> {
    m.records.clear();
    poll_until("every wanted message", &mut [&mut *m], |ms| {
        seen_all(ms, want)
    })?;
    keep_polling(&mut [&mut *m], Duration::from_millis(1500))?;
    Ok(m.values())
}

/// A group as librdkafka's ListGroups + DescribeGroups reports it:
/// (state, protocol type, [(member id, client host)]).
type Listed = (String, String, Vec<(String, String)>);

fn list_group(b: &Broker, group: &str) -> anyhow::Result<Option<Listed>> {
    let listing = rdkafka_clients::group::list_group(b, group)?;
    Ok(listing.map(|g| (g.state, g.protocol_type, g.members)))
}

#[test]
fn a_group_resumes_after_kill9_without_a_rebalance_or_a_skip() {
    with_broker(OVERRIDES, |b| {
        create_topic(b)?;
        produce(b, "a", 150)?;
        let mut c = subscriber(b, "resume")?;
        let seen = consume_until(&mut c, &values("a", 150))?;
        ensure!(seen.len() == 150, "{} messages, expected 150", seen.len());
        c.consumer.commit_consumer_state(CommitMode::Sync)?;
        let assigns = c.assigns();
        let (state, protocol_type, members) =
            list_group(b, "resume")?.context("group not listed")?;
        ensure!(
            state == "Stable" && protocol_type == "consumer",
            "{state} {protocol_type}"
        );
        ensure!(members.len() == 1, "{members:?}");
        let (member_id, host) = members[0].clone();
        ensure!(host == "/127.0.0.1", "client host {host:?}");

        restart(b)?;
        // Restored from the log before the member could rejoin: same member, same host.
        let (state, _, after) = list_group(b, "resume")?.context("group lost on restart")?;
        ensure!(state == "Stable", "{state}");
        ensure!(after == vec![(member_id.clone(), host)], "{after:?}");

        produce(b, "b", 150)?;
        let seen = consume_until(&mut c, &values("b", 150))?;
        let b_seen: BTreeSet<&String> = seen.iter().filter(|v| v.starts_with("b-")).collect();
        ensure!(
            b_seen.len() == 150,
            "{} of 150 later messages",
            b_seen.len()
        );
        ensure!(
            !seen.iter().any(|v| v.starts_with("a-")),
            "committed messages delivered again"
        );
        ensure!(
            c.assigns() == assigns,
            "the consumer went through a rebalance"
        );
        let (_, _, still) = list_group(b, "resume")?.context("group not listed")?;
        ensure!(still.len() == 1 && still[0].0 == member_id, "{still:?}");
        c.consumer.commit_consumer_state(CommitMode::Sync)?;
        drop(c); // LeaveGroup: the group becomes Empty, and that is recorded too

        restart(b)?;
        let (state, protocol_type, members) =
            list_group(b, "resume")?.context("empty group lost on restart")?;
        ensure!(
            state == "Empty" && protocol_type == "consumer" && members.is_empty(),
            "{state} {protocol_type} {members:?}"
        );
        // A successor starts exactly at the committed offsets.
        produce(b, "c", 30)?;
        let mut next = subscriber(b, "resume")?;
        let seen = consume_until(&mut next, &values("c", 30))?;
        ensure!(
            seen.len() == 30 && seen.iter().all(|v| v.starts_with("c-")),
            "successor saw {} messages: {:?}",
            seen.len(),
            seen.iter()
                .filter(|v| !v.starts_with("c-"))
                .collect::<Vec<_>>()
        );
        Ok(())
    });
}

/// JoinGroup v5, SyncGroup v3 and Heartbeat v3 as raw frames, one connection per request
/// (the broker restarts in between).
fn join(b: &Broker, member_id: &str) -> wire::JoinGroupResult {
    let mut s = wire::connect(b.port());
    wire::send(
        &mut s,
        &wire::join_group_request(
            1,
            "static-w",
            member_id,
            Some("w1"),
            30_000,
            30_000,
            "range",
            b"sub",
        ),
    );
    wire::join_group_result(&wire::recv(&mut s).expect("JoinGroup response"))
}

fn sync(
    b: &Broker,
    generation: i32,
    member_id: &str,
    assignment: &[(&str, &[u8])],
) -> (i16, Vec<u8>) {
    let mut s = wire::connect(b.port());
    wire::send(
        &mut s,
        &wire::sync_group_request(2, "static-w", generation, member_id, assignment),
    );
    wire::sync_group_result(&wire::recv(&mut s).expect("SyncGroup response"))
}

fn heartbeat(b: &Broker, generation: i32, member_id: &str) -> i16 {
    let mut s = wire::connect(b.port());
    wire::send(
        &mut s,
        &wire::heartbeat_request(3, "static-w", generation, member_id, Some("w1")),
    );
    wire::heartbeat_result(&wire::recv(&mut s).expect("Heartbeat response"))
}

#[test]
fn a_restored_group_keeps_its_generation_and_static_members() {
    const FENCED_INSTANCE_ID: i16 = 82;
    with_broker(OVERRIDES, |b| {
        let first = join(b, "");
        ensure!(first.error == 0, "{first:?}");
        ensure!(first.leader == first.member_id, "{first:?}");
        let generation = first.generation_id;
        let member = first.member_id.clone();
        let assignment: &[u8] = b"partitions-of-w1";
        let r = sync(b, generation, &member, &[(&member, assignment)]);
        ensure!(r == (0, assignment.to_vec()), "{r:?}");

        restart(b)?;
        let (state, protocol_type, members) =
            list_group(b, "static-w")?.context("group lost on restart")?;
        ensure!(
            state == "Stable" && protocol_type == "consumer",
            "{state} {protocol_type}"
        );
        ensure!(
            members == vec![(member.clone(), "/127.0.0.1".to_owned())],
            "{members:?}"
        );
        ensure!(
            heartbeat(b, generation, &member) == 0,
            "old generation refused"
        );

        // The static member restarts: a new member id, the same generation, its assignment
        // back, without a rebalance.
        let again = join(b, "");
        ensure!(again.error == 0, "{again:?}");
        ensure!(
            again.generation_id == generation,
            "{again:?} vs generation {generation}"
        );
        ensure!(
            again.member_id != member && again.member_id.starts_with("w1-"),
            "{again:?}"
        );
        let r = sync(b, generation, &again.member_id, &[]);
        ensure!(r == (0, assignment.to_vec()), "{r:?}");
        ensure!(
            heartbeat(b, generation, &member) == FENCED_INSTANCE_ID,
            "old id not fenced"
        );

        // The replacement was recorded: it survives another crash.
        restart(b)?;
        ensure!(
            heartbeat(b, generation, &again.member_id) == 0,
            "replacement lost"
        );
        ensure!(
            heartbeat(b, generation, &member) == FENCED_INSTANCE_ID,
            "old id back"
        );
        let (state, _, members) = list_group(b, "static-w")?.context("group not listed")?;
        ensure!(
            state == "Stable" && members.len() == 1,
            "{state} {members:?}"
        );
        Ok(())
    });
}

#[test]
fn list_groups_shows_a_simple_group() {
    with_broker(OVERRIDES, |b| {
        create_topic(b)?;
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .set("group.id", "simple-g")
            .set("enable.auto.commit", "false")
            .create()?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(TOPIC, 0, Offset::Offset(0))?;
        c.assign(&tpl)?;
        let mut commit = TopicPartitionList::new();
        commit.add_partition_offset(TOPIC, 0, Offset::Offset(0))?;
        c.commit(&commit, CommitMode::Sync)?;
        drop(c);
        for round in 0..2 {
            let listed = list_group(b, "simple-g")?;
            ensure!(
                listed == Some(("Empty".to_owned(), String::new(), Vec::new())),
                "round {round}: {listed:?}"
            );
            restart(b)?;
        }
        Ok(())
    });
}
