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
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use strata_tests::{Broker, wire, with_broker};

mod rdkafka_clients;

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 3;
/// Upper bound of every wait.
const PHASE: Duration = Duration::from_secs(60);

const OVERRIDES: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "100"),
    ("group.min.session.timeout.ms", "1000"),
];

fn create_topic(b: &Broker) -> anyhow::Result<()> {
    rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)
}

/// `n` messages `"<tag>-<i>"`, round robin over the partitions, all acknowledged.
fn produce(b: &Broker, tag: &str, n: usize) -> anyhow::Result<()> {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("acks", "all")
        .create()?;
    for i in 0..n {
        let v = format!("{tag}-{i}");
        let partition = i32::try_from(i % 3).unwrap_or(0);
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

fn values(tag: &str, n: usize) -> BTreeSet<String> {
    (0..n).map(|i| format!("{tag}-{i}")).collect()
}

/// Counts completed assignments: each is one rebalance.
#[derive(Default)]
struct Counting {
    assigns: std::sync::atomic::AtomicUsize,
}

impl ClientContext for Counting {}
impl ConsumerContext for Counting {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(_) = rebalance {
            self.assigns
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

fn subscriber(b: &Broker, group: &str) -> anyhow::Result<BaseConsumer<Counting>> {
    let c: BaseConsumer<Counting> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "500")
        .create_with_context(Counting::default())?;
    c.subscribe(&[TOPIC])?;
    Ok(c)
}

/// Polls until every value of `want` has been seen (then 1.5 s more to catch extras);
/// returns everything seen.
fn consume_until<C: ConsumerContext>(
    c: &BaseConsumer<C>,
    want: &BTreeSet<String>,
) -> anyhow::Result<Vec<String>> {
    let mut seen = Vec::new();
    let started = Instant::now();
    let mut settle: Option<Instant> = None;
    loop {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            match m {
                Ok(m) => seen.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into()),
                Err(KafkaError::PartitionEOF(_)) => {}
                // The broker was just killed: librdkafka reports it and reconnects.
                Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure,
                )) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let all = want.iter().all(|w| seen.contains(w));
        match settle {
            None if all => settle = Some(Instant::now()),
            Some(t) if t.elapsed() > Duration::from_millis(1500) => return Ok(seen),
            _ => {}
        }
        if started.elapsed() > PHASE {
            let missing: Vec<_> = want.iter().filter(|w| !seen.contains(w)).collect();
            bail!("timed out after {PHASE:?}; missing {missing:?}");
        }
    }
}

/// A group as librdkafka's ListGroups + DescribeGroups reports it:
/// (state, protocol type, [(member id, client host)]).
type Listed = (String, String, Vec<(String, String)>);

fn list_group(b: &Broker, group: &str) -> anyhow::Result<Option<Listed>> {
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    let list = probe.fetch_group_list(None, Duration::from_secs(10))?;
    Ok(list.groups().iter().find(|g| g.name() == group).map(|g| {
        (
            g.state().to_owned(),
            g.protocol_type().to_owned(),
            g.members()
                .iter()
                .map(|m| (m.id().to_owned(), m.client_host().to_owned()))
                .collect(),
        )
    }))
}

fn restart(b: &mut Broker) -> anyhow::Result<()> {
    b.kill9()?;
    b.restart()
}

#[test]
fn a_group_resumes_after_kill9_without_a_rebalance_or_a_skip() {
    with_broker(OVERRIDES, |b| {
        create_topic(b)?;
        produce(b, "a", 150)?;
        let c = subscriber(b, "resume")?;
        let seen = consume_until(&c, &values("a", 150))?;
        ensure!(seen.len() == 150, "{} messages, expected 150", seen.len());
        c.commit_consumer_state(CommitMode::Sync)?;
        let assigns = c
            .context()
            .assigns
            .load(std::sync::atomic::Ordering::SeqCst);
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
        let seen = consume_until(&c, &values("b", 150))?;
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
            c.context()
                .assigns
                .load(std::sync::atomic::Ordering::SeqCst)
                == assigns,
            "the consumer went through a rebalance"
        );
        let (_, _, still) = list_group(b, "resume")?.context("group not listed")?;
        ensure!(still.len() == 1 && still[0].0 == member_id, "{still:?}");
        c.commit_consumer_state(CommitMode::Sync)?;
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
        let next = subscriber(b, "resume")?;
        let seen = consume_until(&next, &values("c", 30))?;
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
