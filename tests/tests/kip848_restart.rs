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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use strata_tests::{Broker, with_broker};

mod rdkafka_clients;

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 4;
/// Upper bound of every wait.
const PHASE: Duration = Duration::from_secs(60);

/// Fast heartbeats; a session long enough to outlast a restart.
const OVERRIDES: &[(&str, &str)] = &[
    ("group.consumer.heartbeat.interval.ms", "500"),
    ("group.consumer.session.timeout.ms", "15000"),
];

/// `n` messages `"<tag>-<i>"`, round robin over the partitions, all acknowledged.
fn produce(b: &Broker, tag: &str, n: usize) -> anyhow::Result<()> {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("acks", "all")
        .create()?;
    for i in 0..n {
        let v = format!("{tag}-{i}");
        let partition = i32::try_from(i).unwrap_or(0) % PARTITIONS;
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

/// Counts what librdkafka hands the application: each is one step of a rebalance.
#[derive(Default)]
struct Counting {
    assigns: AtomicUsize,
    revokes: AtomicUsize,
}

impl ClientContext for Counting {}
impl ConsumerContext for Counting {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(_) => self.assigns.fetch_add(1, Ordering::SeqCst),
            Rebalance::Revoke(_) => self.revokes.fetch_add(1, Ordering::SeqCst),
            Rebalance::Error(_) => 0,
        };
    }
}

struct Member {
    consumer: BaseConsumer<Counting>,
    /// (partition, value) of every message seen.
    seen: Vec<(i32, String)>,
}

impl Member {
    fn new(b: &Broker, group: &str) -> anyhow::Result<Self> {
        let consumer: BaseConsumer<Counting> = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .set("group.id", group)
            .set("group.protocol", "consumer")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("topic.metadata.refresh.interval.ms", "1000")
            .create_with_context(Counting::default())?;
        consumer.subscribe(&[TOPIC])?;
        Ok(Member {
            consumer,
            seen: Vec::new(),
        })
    }

    fn poll_once(&mut self) -> anyhow::Result<()> {
        while let Some(m) = self.consumer.poll(Duration::from_millis(20)) {
            match m {
                Ok(m) => self.seen.push((
                    m.partition(),
                    String::from_utf8_lossy(m.payload().unwrap_or_default()).into(),
                )),
                Err(KafkaError::PartitionEOF(_)) => {}
                // The broker was just killed: librdkafka reports it and reconnects.
                Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure,
                )) => {}
                Err(e) => return Err(e.into()),
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

    /// (assignments, revocations) the application has been told of.
    fn steps(&self) -> (usize, usize) {
        let c = self.consumer.context();
        (
            c.assigns.load(Ordering::SeqCst),
            c.revokes.load(Ordering::SeqCst),
        )
    }
}

/// Polls every member until `done` holds, at most `PHASE`.
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

/// Whether the members together have seen every value of `want`.
fn seen_all(members: &[&mut Member], want: &BTreeSet<String>) -> bool {
    let seen: BTreeSet<&String> = members
        .iter()
        .flat_map(|m| m.seen.iter().map(|(_, v)| v))
        .collect();
    want.iter().all(|w| seen.contains(w))
}

/// Whether each member has read, itself, every message `produce(tag, n)` wrote to the
/// partitions it owns now (so each has a position to commit on each of them).
fn caught_up(members: &[&mut Member], tag: &str, n: usize) -> bool {
    members.iter().all(|m| {
        let mine = m.partitions();
        let seen: BTreeSet<&(i32, String)> = m.seen.iter().collect();
        (0..n).all(|i| {
            let p = i32::try_from(i).unwrap_or(0) % PARTITIONS;
            !mine.contains(&p) || seen.contains(&(p, format!("{tag}-{i}")))
        })
    })
}

/// The group's state, protocol type and member count as ListGroups + DescribeGroups report
/// it. A KIP-848 group's protocol type is "consumer"; a group known only by its offsets has "".
fn list_group(b: &Broker, group: &str) -> anyhow::Result<Option<(String, String, usize)>> {
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    let list = probe.fetch_group_list(None, Duration::from_secs(10))?;
    Ok(list.groups().iter().find(|g| g.name() == group).map(|g| {
        (
            g.state().to_owned(),
            g.protocol_type().to_owned(),
            g.members().len(),
        )
    }))
}

fn restart(b: &mut Broker) -> anyhow::Result<()> {
    b.kill9()?;
    b.restart()
}

#[test]
fn a_consumer_group_resumes_after_kill9_without_a_rebalance() {
    with_broker(OVERRIDES, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce(b, "a", 200)?;
        let mut x = Member::new(b, "resume848")?;
        let mut y = Member::new(b, "resume848")?;
        poll_until(
            "a 2/2 split, each member caught up",
            &mut [&mut x, &mut y],
            |ms| ms.iter().all(|m| m.partitions().len() == 2) && caught_up(ms, "a", 200),
        )?;
        let owned = (x.partitions(), y.partitions());
        ensure!(owned.0.is_disjoint(&owned.1), "{owned:?}");
        x.consumer.commit_consumer_state(CommitMode::Sync)?;
        y.consumer.commit_consumer_state(CommitMode::Sync)?;
        let steps = (x.steps(), y.steps());
        let (state, _, members) = list_group(b, "resume848")?.context("group not listed")?;
        ensure!(state == "Stable" && members == 2, "{state} with {members}");

        restart(b)?;
        // Restored from the log before any member could heartbeat.
        let (state, _, members) = list_group(b, "resume848")?.context("group lost on restart")?;
        ensure!(
            members == 2,
            "{state} with {members} members after the restart"
        );
        x.seen.clear();
        y.seen.clear();
        produce(b, "b", 200)?;
        let second = values("b", 200);
        poll_until("every later message", &mut [&mut x, &mut y], |ms| {
            seen_all(ms, &second)
        })?;
        // A few more heartbeats, to catch a late fencing.
        let settle = Instant::now();
        while settle.elapsed() < Duration::from_secs(3) {
            x.poll_once()?;
            y.poll_once()?;
        }
        ensure!(
            (x.steps(), y.steps()) == steps,
            "the members went through a rebalance: {steps:?} -> {:?}",
            (x.steps(), y.steps())
        );
        ensure!(
            (x.partitions(), y.partitions()) == owned,
            "assignments moved: {owned:?} -> {:?}",
            (x.partitions(), y.partitions())
        );
        let replayed: Vec<&String> = x
            .seen
            .iter()
            .chain(&y.seen)
            .map(|(_, v)| v)
            .filter(|v| v.starts_with("a-"))
            .collect();
        ensure!(
            replayed.is_empty(),
            "committed messages delivered again: {replayed:?}"
        );
        let (state, _, members) = list_group(b, "resume848")?.context("group not listed")?;
        ensure!(state == "Stable" && members == 2, "{state} with {members}");
        Ok(())
    });
}

#[test]
fn an_empty_consumer_group_is_remembered_and_deleted_for_good() {
    with_broker(OVERRIDES, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce(b, "a", 100)?;
        let mut x = Member::new(b, "empty848")?;
        let first = values("a", 100);
        poll_until("every message", &mut [&mut x], |ms| seen_all(ms, &first))?;
        x.consumer.commit_consumer_state(CommitMode::Sync)?;
        drop(x); // leaves the group (member epoch -1)

        restart(b)?;
        let (state, protocol_type, members) =
            list_group(b, "empty848")?.context("empty group lost")?;
        ensure!(
            state == "Empty" && protocol_type == "consumer" && members == 0,
            "{state} {protocol_type:?} with {members}"
        );
        produce(b, "b", 40)?;
        let mut next = Member::new(b, "empty848")?;
        let second = values("b", 40);
        poll_until("the successor's messages", &mut [&mut next], |ms| {
            seen_all(ms, &second)
        })?;
        ensure!(
            next.seen.iter().all(|(_, v)| v.starts_with("b-")),
            "the successor did not start at the committed offsets: {} messages",
            next.seen.len()
        );
        drop(next);

        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .create()?;
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let r = rt.block_on(admin.delete_groups(&["empty848"], &opts))?;
        ensure!(r == vec![Ok("empty848".to_owned())], "{r:?}");
        drop(admin);
        restart(b)?;
        ensure!(
            list_group(b, "empty848")?.is_none(),
            "a deleted group came back after a restart"
        );
        // Its offsets went with it: a new member starts from the beginning.
        let mut fresh = Member::new(b, "empty848")?;
        let all: BTreeSet<String> = first.union(&second).cloned().collect();
        poll_until("everything again", &mut [&mut fresh], |ms| {
            seen_all(ms, &all)
        })?;
        Ok(())
    });
}
