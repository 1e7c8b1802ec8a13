//! Subscribed consumer-group members for the group tests: a [`Member`] records everything it
//! reads and counts its rebalance callbacks, [`poll_until`] drives several members in one
//! thread until a condition holds, and [`list_group`] / [`Member::describe`] show the group as
//! ListGroups + DescribeGroups report it.
//!
//! Members never auto-commit and start at `earliest`: the tests count what is read, and
//! commit explicitly where commits are under test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rdkafka::admin::{AdminClient, AdminOptions, GroupResult};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::groups::GroupList;
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::TopicPartitionList;
use strata_tests::Broker;

use super::{Consumed, await_reports, print_client_log, producer, send_to_partition};

/// Upper bound of every wait of a group scenario.
pub const PHASE: Duration = Duration::from_secs(60);

// ---- Producing ----------------------------------------------------------------------------------

/// Sends `value(i)` for every `i` of `messages` to partition `i % partitions` of `topic` and
/// waits until each is acknowledged; returns message index -> (partition, offset).
pub fn produce_round_robin(
    b: &Broker,
    topic: &str,
    partitions: i32,
    messages: std::ops::Range<usize>,
    value: impl Fn(usize) -> String,
) -> anyhow::Result<HashMap<usize, (i32, i64)>> {
    let (producer, deliveries) = producer(b, &[])?;
    let n = messages.len();
    for i in messages {
        let partition = i32::try_from(i % usize::try_from(partitions)?)?;
        send_to_partition(&producer, topic, partition, i, value(i).as_bytes())?;
    }
    await_reports(&producer, &deliveries, n, PHASE)?;
    let failed = deliveries.failed.lock().unwrap();
    ensure!(failed.is_empty(), "failed deliveries {failed:?}");
    Ok(std::mem::take(&mut *deliveries.acked.lock().unwrap()))
}

/// Message `i` of the batch tagged `tag`.
pub fn tagged(tag: &str, i: usize) -> String {
    format!("{tag}-{i}")
}

/// `n` messages [`tagged`] `tag`, round robin over the partitions, all acknowledged.
pub fn produce_tagged(
    b: &Broker,
    topic: &str,
    partitions: i32,
    tag: &str,
    n: usize,
) -> anyhow::Result<()> {
    produce_round_robin(b, topic, partitions, 0..n, |i| tagged(tag, i))?;
    Ok(())
}

/// The values [`produce_tagged`] writes.
pub fn tagged_values(tag: &str, n: usize) -> BTreeSet<String> {
    (0..n).map(|i| tagged(tag, i)).collect()
}

// ---- The broker and the group -------------------------------------------------------------------

/// Crashes the broker (SIGKILL) and starts it again on the same port and data.
pub fn kill9_and_restart(b: &mut Broker) -> anyhow::Result<()> {
    b.kill9()?;
    b.restart()
}

/// A group as librdkafka's ListGroups + DescribeGroups report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub state: String,
    /// "consumer" for a subscribed group (classic or KIP-848); "" for one known only by its
    /// committed offsets.
    pub protocol_type: String,
    /// The classic protocol's chosen assignor, e.g. "range".
    pub protocol: String,
    /// (member id, client host) of each member.
    pub members: Vec<(String, String)>,
}

impl GroupListing {
    fn find(list: &GroupList, group: &str) -> Option<GroupListing> {
        list.groups()
            .iter()
            .find(|g| g.name() == group)
            .map(|g| GroupListing {
                state: g.state().to_owned(),
                protocol_type: g.protocol_type().to_owned(),
                protocol: g.protocol().to_owned(),
                members: g
                    .members()
                    .iter()
                    .map(|m| (m.id().to_owned(), m.client_host().to_owned()))
                    .collect(),
            })
    }
}

/// `group` as a fresh client lists it (all groups, then this one), `None` when not listed.
pub fn list_group(b: &Broker, group: &str) -> anyhow::Result<Option<GroupListing>> {
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    let list = probe.fetch_group_list(None, Duration::from_secs(10))?;
    Ok(GroupListing::find(&list, group))
}

/// DeleteGroups through the admin client: one result per group, in order.
pub fn delete_groups(b: &Broker, groups: &[&str]) -> anyhow::Result<Vec<GroupResult>> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(runtime.block_on(admin.delete_groups(groups, &opts))?)
}

// ---- Members ------------------------------------------------------------------------------------

/// Prints librdkafka's log, counts rebalance callbacks and keeps the latest fetch state of
/// each partition of the subscribed topic from librdkafka's statistics.
#[derive(Default)]
pub struct GroupContext {
    /// Names the client in the printed log.
    pub name: String,
    /// The subscribed topic, whose partitions `fetch` follows.
    pub topic: String,
    /// Assign callbacks: each is one rebalance (or one incremental step of one).
    pub assigns: AtomicUsize,
    /// Revoke callbacks, likewise.
    pub revokes: AtomicUsize,
    /// partition -> (fetch state, next fetch offset), when `statistics.interval.ms` is set:
    /// tells when an `auto.offset.reset` has been resolved.
    pub fetch: Mutex<BTreeMap<i32, (String, i64)>>,
}

impl ClientContext for GroupContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        print_client_log(&self.name, level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        eprintln!("librdkafka {} error: {error}: {reason}", self.name);
    }

    fn stats(&self, statistics: Statistics) {
        if let Some(t) = statistics.topics.get(&self.topic) {
            let mut fetch = self.fetch.lock().unwrap();
            for (&p, s) in &t.partitions {
                if p >= 0 {
                    fetch.insert(p, (s.fetch_state.clone(), s.next_offset));
                }
            }
        }
    }
}

impl ConsumerContext for GroupContext {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(_) => self.assigns.fetch_add(1, Ordering::SeqCst),
            Rebalance::Revoke(_) => self.revokes.fetch_add(1, Ordering::SeqCst),
            Rebalance::Error(e) => {
                eprintln!("{}: rebalance error {e}", self.name);
                0
            }
        };
    }
}

/// A consumer subscribed to one topic and everything it read.
pub struct Member {
    pub consumer: BaseConsumer<GroupContext>,
    /// The subscribed topic's partition count: what a full split covers.
    pub topic_partitions: i32,
    /// Every message in the order read.
    pub records: Vec<Consumed>,
    /// (partition, offset) of messages read from a partition not in the assignment then.
    pub unowned: Vec<(i32, i64)>,
    /// Whether transport errors are expected (the broker is being killed); librdkafka
    /// reports them and reconnects.
    pub broker_may_die: bool,
}

impl Member {
    /// A consumer named `name` (its `client.id`) in `group`, subscribed to `topic` (of
    /// `partitions` partitions), with `settings` on top of the defaults.
    pub fn join(
        bootstrap: &str,
        group: &str,
        name: &str,
        topic: &str,
        partitions: i32,
        settings: &[(&str, &str)],
    ) -> anyhow::Result<Member> {
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("client.id", name)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("topic.metadata.refresh.interval.ms", "1000");
        for (k, v) in settings {
            cfg.set(*k, *v);
        }
        let context = GroupContext {
            name: name.to_owned(),
            topic: topic.to_owned(),
            ..GroupContext::default()
        };
        let consumer: BaseConsumer<GroupContext> = cfg
            .create_with_context(context)
            .with_context(|| format!("create consumer {name}"))?;
        consumer.subscribe(&[topic])?;
        Ok(Member {
            consumer,
            topic_partitions: partitions,
            records: Vec::new(),
            unowned: Vec::new(),
            broker_may_die: false,
        })
    }

    /// Reads what librdkafka has ready (this also serves its callbacks).
    pub fn poll_once(&mut self) -> anyhow::Result<()> {
        while let Some(m) = self.consumer.poll(Duration::from_millis(10)) {
            let m = match m {
                Ok(m) => m,
                Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure,
                )) if self.broker_may_die => continue,
                Err(e) => bail!("{}: {e}", self.name()),
            };
            let record = Consumed::of(&m);
            // A callback may have changed the assignment, but only inside poll: this is the
            // assignment the message was delivered under.
            if !self.partitions().contains(&record.partition) {
                self.unowned.push((record.partition, record.offset));
            }
            self.records.push(record);
        }
        Ok(())
    }

    /// Its assignment and, per partition, how many distinct offsets it read and the range.
    pub fn summary(&self) -> String {
        let read: Vec<String> = self
            .offsets_since(0)
            .iter()
            .map(|(p, o)| {
                let (first, last) = (o.first().unwrap_or(&-1), o.last().unwrap_or(&-1));
                format!("{p}: {} in {first}..={last}", o.len())
            })
            .collect();
        format!(
            "{} owns {:?}, read {{{}}}",
            self.name(),
            self.partitions(),
            read.join(", ")
        )
    }

    pub fn name(&self) -> &str {
        &self.consumer.context().name
    }

    fn topic(&self) -> &str {
        &self.consumer.context().topic
    }

    pub fn partitions(&self) -> BTreeSet<i32> {
        self.consumer
            .assignment()
            .map(|tpl| tpl.elements().iter().map(|e| e.partition()).collect())
            .unwrap_or_default()
    }

    /// Assign callbacks so far.
    pub fn assigns(&self) -> usize {
        self.consumer.context().assigns.load(Ordering::SeqCst)
    }

    /// Revoke callbacks so far.
    pub fn revokes(&self) -> usize {
        self.consumer.context().revokes.load(Ordering::SeqCst)
    }

    /// Rebalance callbacks so far (assign and revoke).
    pub fn rebalances(&self) -> usize {
        self.assigns() + self.revokes()
    }

    /// The values read, in order (a null value reads as "").
    pub fn values(&self) -> Vec<String> {
        self.records.iter().map(Consumed::text).collect()
    }

    /// The distinct values read.
    pub fn value_set(&self) -> BTreeSet<String> {
        self.records.iter().map(Consumed::text).collect()
    }

    /// partition -> offsets read, from `self.records[from..]`.
    pub fn offsets_since(&self, from: usize) -> BTreeMap<i32, BTreeSet<i64>> {
        let mut out: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
        for r in &self.records[from..] {
            out.entry(r.partition).or_default().insert(r.offset);
        }
        out
    }

    /// Whether it has read every offset `from..end` of each partition it owns.
    pub fn has_read(&self, from: i64, end: i64) -> bool {
        let read = self.offsets_since(0);
        self.partitions().iter().all(|p| {
            read.get(p)
                .is_some_and(|o| (from..end).all(|i| o.contains(&i)))
        })
    }

    /// Commits the positions of the current assignment (synchronously); a commit that races
    /// a rebalance (REBALANCE_IN_PROGRESS, STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) is retried
    /// after a poll.
    pub fn commit(&mut self) -> anyhow::Result<()> {
        let mut last = None;
        for _ in 0..20 {
            match self.consumer.commit_consumer_state(CommitMode::Sync) {
                Ok(()) => return Ok(()),
                // Nothing read yet on the current assignment: nothing to commit.
                Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => return Ok(()),
                Err(e) => last = Some(e),
            }
            self.poll_once()?;
        }
        bail!("{}: commit kept failing: {last:?}", self.name())
    }

    /// The group's committed offset of every partition (OffsetFetch); -1 when none.
    pub fn committed(&self) -> anyhow::Result<BTreeMap<i32, i64>> {
        let mut tpl = TopicPartitionList::new();
        for p in 0..self.topic_partitions {
            tpl.add_partition(self.topic(), p);
        }
        let tpl = self
            .consumer
            .committed_offsets(tpl, Duration::from_secs(10))?;
        Ok(tpl
            .elements()
            .iter()
            .map(|e| (e.partition(), e.offset().to_raw().unwrap_or(-1)))
            .collect())
    }

    /// Fails if a message was read from a partition it did not own at the time.
    pub fn check_owned(&self) -> anyhow::Result<()> {
        ensure!(
            self.unowned.is_empty(),
            "{} read from partitions it did not own: {:?}",
            self.name(),
            self.unowned
        );
        Ok(())
    }

    /// `group` as this member's client describes it; an error when it is not listed.
    pub fn describe(&self, group: &str) -> anyhow::Result<GroupListing> {
        let list = self
            .consumer
            .fetch_group_list(Some(group), Duration::from_secs(10))?;
        GroupListing::find(&list, group).context("group not listed")
    }
}

/// Polls every member (and only those) until `done` holds, at most [`PHASE`]; returns how
/// long it took.
pub fn poll_until(
    what: &str,
    members: &mut [&mut Member],
    mut done: impl FnMut(&[&mut Member]) -> bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        for m in members.iter_mut() {
            m.poll_once()?;
        }
        if done(members) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > PHASE {
            let state: Vec<String> = members.iter().map(|m| m.summary()).collect();
            bail!(
                "timed out after {PHASE:?} waiting for {what}; members:\n{}",
                state.join("\n")
            );
        }
    }
}

/// Polls the members for `period` (to see rebalances or extra messages that would follow).
pub fn keep_polling(members: &mut [&mut Member], period: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    while started.elapsed() < period {
        for m in members.iter_mut() {
            m.poll_once()?;
        }
    }
    Ok(())
}

/// Whether the members' assignments are disjoint, cover every partition of the topic, and
/// have the sizes given (in any order).
pub fn split(members: &[&mut Member], sizes: &[usize]) -> bool {
    let Some(first) = members.first() else {
        return false;
    };
    let parts: Vec<BTreeSet<i32>> = members.iter().map(|m| m.partitions()).collect();
    let mut got: Vec<usize> = parts.iter().map(BTreeSet::len).collect();
    let mut want = sizes.to_vec();
    got.sort_unstable();
    want.sort_unstable();
    let union: BTreeSet<i32> = parts.iter().flatten().copied().collect();
    got == want
        && union.len() == usize::try_from(first.topic_partitions).unwrap_or(0)
        && got.iter().sum::<usize>() == union.len()
}

/// Whether the members together have read every value of `want`.
pub fn seen_all(members: &[&mut Member], want: &BTreeSet<String>) -> bool {
    let seen: BTreeSet<String> = members.iter().flat_map(|m| m.value_set()).collect();
    want.is_subset(&seen)
}

// ---- Scenarios shared by the group test modules -------------------------------------------------

/// KIP-345: a static member (`group.instance.id`) that restarts within its session gets its
/// partitions back, and the other member sees no rebalance at all. `statik(id)` makes a member
/// of `group` with instance id `id`; the session must outlast the restart by far.
///
/// A static member's close sends no LeaveGroup (KIP-345); with KIP-848 it leaves with member
/// epoch -2, which keeps its assignment for its return.
pub fn restarted_static_member_keeps_its_partitions(
    group: &str,
    statik: impl Fn(&str) -> anyhow::Result<Member>,
) -> anyhow::Result<()> {
    let mut a = statik("a")?;
    let mut other = statik("b")?;
    let half = usize::try_from(a.topic_partitions)? / 2;
    let halves = [half, usize::try_from(a.topic_partitions)? - half];
    poll_until(
        &format!("a {}/{} split", halves[0], halves[1]),
        &mut [&mut a, &mut other],
        |ms| split(ms, &halves),
    )?;
    // Let the group settle (no rebalance in flight), then restart `a`.
    keep_polling(&mut [&mut a, &mut other], Duration::from_secs(2))?;
    let before_a = a.partitions();
    let before_other = other.partitions();
    let other_rebalances = other.rebalances();
    drop(a);
    let mut a2 = statik("a")?;
    poll_until(
        "the restarted member's assignment",
        &mut [&mut a2, &mut other],
        |ms| ms[0].partitions().len() == before_a.len(),
    )?;
    ensure!(
        a2.partitions() == before_a,
        "came back with {:?}, had {before_a:?}",
        a2.partitions()
    );
    // Keep polling a while: the other member must see no rebalance at all.
    keep_polling(&mut [&mut a2, &mut other], Duration::from_secs(3))?;
    ensure!(
        other.partitions() == before_other,
        "the other member's assignment changed: {:?} -> {:?}",
        before_other,
        other.partitions()
    );
    ensure!(
        other.rebalances() == other_rebalances,
        "the other member went through {} more rebalance callback(s)",
        other.rebalances() - other_rebalances
    );
    let g = other.describe(group)?;
    ensure!(
        g.state == "Stable" && g.members.len() == 2,
        "{} with {} members",
        g.state,
        g.members.len()
    );
    Ok(())
}
