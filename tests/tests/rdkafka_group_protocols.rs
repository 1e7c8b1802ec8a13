//! The consumer-group scenarios of `rdkafka_groups.rs` (which runs them with librdkafka's
//! classic eager `range` assignor) with every other protocol librdkafka 2.12 speaks, against
//! the real `strata` binary. Each scenario is one function taking a [`Flavour`], and each
//! (scenario, flavour) pair is one `#[test]`:
//!
//! - `cooperative_sticky_*`: the classic protocol with
//!   `partition.assignment.strategy=cooperative-sticky` (KIP-429, incremental rebalances).
//! - `kip848_*`: `group.protocol=consumer` (KIP-848); the broker assigns, and the session and
//!   heartbeat timings are the broker's `group.consumer.*` settings, since librdkafka refuses
//!   `session.timeout.ms`, `heartbeat.interval.ms` and `partition.assignment.strategy` with
//!   this protocol.
//!
//! The scenarios:
//!
//! 1. `*_three_members_split_six_partitions`: 2/2/2, every message read only by a member
//!    that owned its partition at the time, and each final owner reads all of its partitions
//!    (nothing is committed, so a partition's new owner starts at the beginning).
//! 2. `*_killed_member_process_loses_its_partitions_after_the_session_timeout`: a member in a
//!    separate process (this test binary re-executed as [`child_member_process`]) commits
//!    part of what it reads and is killed with SIGKILL, so it sends no leave. Only the session
//!    timeout can remove it: its partitions move no sooner than half of it, its successors
//!    start exactly at its committed offsets (replaying only uncommitted messages) and no
//!    message is skipped.
//! 3. `*_consumer_that_stops_polling_loses_its_partitions`: past `max.poll.interval.ms`
//!    librdkafka leaves the group for the silent member and the other one takes everything.
//! 4. `*_new_group_starts_at_latest_or_earliest`: `auto.offset.reset=latest` sees only what is
//!    produced after its offsets were reset, `earliest` sees everything.
//! 5. `*_committed_offsets_survive_a_broker_kill9`: a live member keeps going across a crash
//!    without reading committed messages again; after a second crash with the group empty, a
//!    successor starts exactly at the committed offsets.
//! 6. `*_restarted_static_member_gets_its_partitions_back_without_a_rebalance` (KIP-345):
//!    librdkafka 2.12 sends `group.instance.id` with `group.protocol=consumer` too (and leaves
//!    with member epoch -2, KIP-848's static leave), so both flavours run it.
//!
//! Every partition gets the same number of messages per batch, at offsets known in advance,
//! and the checks are on (partition, offset).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use strata_tests::{Broker, read_tail, with_broker};

mod rdkafka_clients;

use rdkafka_clients::{Consumed, check_contiguous, print_client_log};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
/// Messages per partition in each batch: batch `k` occupies offsets `k*PER_PARTITION ..
/// (k+1)*PER_PARTITION` of every partition.
const PER_PARTITION: i64 = 50;
/// Upper bound of every wait.
const PHASE: Duration = Duration::from_secs(60);
/// The session timeout of the scenarios where a timeout is not what is under test.
const SESSION: Duration = Duration::from_secs(3);
/// Set (to a [`ChildSpec`]) only in the child process of the failover scenario.
const CHILD_ENV: &str = "STRATA_GROUP_PROTOCOLS_CHILD";
/// The test that is the child process.
const CHILD_TEST: &str = "child_member_process";

// ---- Flavours -----------------------------------------------------------------------------------

/// The group protocol under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    /// Classic protocol, client-side `cooperative-sticky` assignor (KIP-429).
    CooperativeSticky,
    /// `group.protocol=consumer` (KIP-848): the broker assigns.
    Kip848,
}

impl Flavour {
    fn name(self) -> &'static str {
        match self {
            Flavour::CooperativeSticky => "cooperative-sticky",
            Flavour::Kip848 => "kip848",
        }
    }

    fn parse(s: &str) -> anyhow::Result<Flavour> {
        [Flavour::CooperativeSticky, Flavour::Kip848]
            .into_iter()
            .find(|f| f.name() == s)
            .with_context(|| format!("unknown flavour {s:?}"))
    }

    /// The broker's settings for a group whose session times out after `session`. The
    /// classic session is the client's (`session.timeout.ms`, which the broker bounds by
    /// `group.min.session.timeout.ms`); KIP-848's is the broker's.
    fn broker_overrides(self, session: Duration) -> Vec<(String, String)> {
        let mut o = vec![("group.initial.rebalance.delay.ms", "100".to_owned())];
        match self {
            Flavour::CooperativeSticky => {
                o.push(("group.min.session.timeout.ms", "1000".to_owned()));
            }
            Flavour::Kip848 => {
                o.push(("group.consumer.heartbeat.interval.ms", "300".to_owned()));
                o.push((
                    "group.consumer.session.timeout.ms",
                    session.as_millis().to_string(),
                ));
            }
        }
        o.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    /// The client's settings for this flavour.
    fn client_settings(self, session: Duration) -> Vec<(&'static str, String)> {
        match self {
            Flavour::CooperativeSticky => vec![
                ("partition.assignment.strategy", "cooperative-sticky".into()),
                ("session.timeout.ms", session.as_millis().to_string()),
                ("heartbeat.interval.ms", "500".into()),
            ],
            Flavour::Kip848 => vec![("group.protocol", "consumer".into())],
        }
    }
}

/// Starts a broker set up for `flavour` with a `session` long group session and runs
/// `scenario` against it.
fn with_group_broker(
    flavour: Flavour,
    session: Duration,
    scenario: impl FnOnce(&mut Broker) -> anyhow::Result<()>,
) {
    let overrides = flavour.broker_overrides(session);
    let overrides: Vec<(&str, &str)> = overrides
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    with_broker(&overrides, scenario);
}

// ---- Producing ----------------------------------------------------------------------------------

/// Produces batch `batch`: `PER_PARTITION` messages to every partition, and checks that they
/// were acknowledged at the offsets the scenarios expect.
fn produce_batch(b: &Broker, batch: i64) -> anyhow::Result<()> {
    let (producer, deliveries) = rdkafka_clients::producer(b, &[])?;
    let n = usize::try_from(PER_PARTITION * i64::from(PARTITIONS))?;
    for i in 0..n {
        let partition = i32::try_from(i)? % PARTITIONS;
        let value = format!("batch{batch}-{i}");
        rdkafka_clients::send_to_partition(&producer, TOPIC, partition, i, value.as_bytes())?;
    }
    rdkafka_clients::await_reports(&producer, &deliveries, n, PHASE)?;
    let failed = deliveries.failed.lock().unwrap();
    ensure!(
        failed.is_empty(),
        "batch {batch}: failed deliveries {failed:?}"
    );
    for (&i, &(partition, offset)) in deliveries.acked.lock().unwrap().iter() {
        let i = i64::try_from(i)?;
        let want = (
            i32::try_from(i % i64::from(PARTITIONS))?,
            batch * PER_PARTITION + i / i64::from(PARTITIONS),
        );
        ensure!(
            (partition, offset) == want,
            "batch {batch}, message {i} acknowledged at {partition}@{offset}, expected {want:?}"
        );
    }
    Ok(())
}

/// Offset `offset` on every partition.
fn everywhere(offset: i64) -> BTreeMap<i32, i64> {
    (0..PARTITIONS).map(|p| (p, offset)).collect()
}

// ---- Members ------------------------------------------------------------------------------------

/// Prints librdkafka's log, counts rebalance callbacks and keeps the latest fetch state of
/// each partition from librdkafka's statistics.
#[derive(Default)]
struct GroupContext {
    /// Names the client in the printed log.
    name: String,
    /// Assign callbacks: each is one rebalance (or one incremental step of one).
    assigns: AtomicUsize,
    /// Revoke callbacks, likewise.
    revokes: AtomicUsize,
    /// partition -> (fetch state, next fetch offset), when `statistics.interval.ms` is set:
    /// tells when an `auto.offset.reset` has been resolved.
    fetch: Mutex<BTreeMap<i32, (String, i64)>>,
}

impl ClientContext for GroupContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        print_client_log(&self.name, level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        eprintln!("librdkafka {} error: {error}: {reason}", self.name);
    }

    fn stats(&self, statistics: Statistics) {
        if let Some(t) = statistics.topics.get(TOPIC) {
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

/// A subscribed consumer and everything it read.
struct Member {
    consumer: BaseConsumer<GroupContext>,
    /// Every message in the order read.
    records: Vec<Consumed>,
    /// (partition, offset) of messages read from a partition not in the assignment then.
    unowned: Vec<(i32, i64)>,
    /// Whether transport errors are expected (the broker is being killed).
    broker_may_die: bool,
}

fn member(
    bootstrap: &str,
    flavour: Flavour,
    session: Duration,
    group: &str,
    name: &str,
    extra: &[(&str, &str)],
) -> anyhow::Result<Member> {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("client.id", name)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("topic.metadata.refresh.interval.ms", "1000");
    for (k, v) in flavour.client_settings(session) {
        cfg.set(k, v);
    }
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    let context = GroupContext {
        name: name.to_owned(),
        ..GroupContext::default()
    };
    let consumer: BaseConsumer<GroupContext> = cfg
        .create_with_context(context)
        .with_context(|| format!("create consumer {name}"))?;
    consumer.subscribe(&[TOPIC])?;
    Ok(Member {
        consumer,
        records: Vec::new(),
        unowned: Vec::new(),
        broker_may_die: false,
    })
}

impl Member {
    /// Reads what librdkafka has ready (this also serves its callbacks).
    fn poll_once(&mut self) -> anyhow::Result<()> {
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
    fn summary(&self) -> String {
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

    fn name(&self) -> &str {
        &self.consumer.context().name
    }

    fn partitions(&self) -> BTreeSet<i32> {
        self.consumer
            .assignment()
            .map(|tpl| tpl.elements().iter().map(|e| e.partition()).collect())
            .unwrap_or_default()
    }

    /// Rebalance callbacks so far (assign and revoke).
    fn rebalances(&self) -> usize {
        let c = self.consumer.context();
        c.assigns.load(Ordering::SeqCst) + c.revokes.load(Ordering::SeqCst)
    }

    /// partition -> offsets read, from `self.records[from..]`.
    fn offsets_since(&self, from: usize) -> BTreeMap<i32, BTreeSet<i64>> {
        let mut out: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
        for r in &self.records[from..] {
            out.entry(r.partition).or_default().insert(r.offset);
        }
        out
    }

    /// Whether it has read every offset `from..end` of each partition it owns.
    fn has_read(&self, from: i64, end: i64) -> bool {
        let read = self.offsets_since(0);
        self.partitions().iter().all(|p| {
            read.get(p)
                .is_some_and(|o| (from..end).all(|i| o.contains(&i)))
        })
    }

    /// Commits the positions of the current assignment (synchronously); a commit that races
    /// a rebalance is retried after a poll.
    fn commit(&mut self) -> anyhow::Result<()> {
        let mut last = None;
        for _ in 0..20 {
            match self.consumer.commit_consumer_state(CommitMode::Sync) {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
            self.poll_once()?;
        }
        bail!("{}: commit kept failing: {last:?}", self.name())
    }

    /// The group's committed offset of every partition (OffsetFetch); -1 when none.
    fn committed(&self) -> anyhow::Result<BTreeMap<i32, i64>> {
        let mut tpl = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            tpl.add_partition(TOPIC, p);
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
    fn check_owned(&self) -> anyhow::Result<()> {
        ensure!(
            self.unowned.is_empty(),
            "{} read from partitions it did not own: {:?}",
            self.name(),
            self.unowned
        );
        Ok(())
    }
}

/// Polls every member (and only those) until `done` holds, at most `PHASE`; returns how long
/// it took.
fn poll_until(
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
fn keep_polling(members: &mut [&mut Member], period: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    while started.elapsed() < period {
        for m in members.iter_mut() {
            m.poll_once()?;
        }
    }
    Ok(())
}

/// Whether the members' assignments are disjoint, cover every partition, and have the sizes
/// given (in any order).
fn split(members: &[&mut Member], sizes: &[usize]) -> bool {
    let parts: Vec<BTreeSet<i32>> = members.iter().map(|m| m.partitions()).collect();
    let mut got: Vec<usize> = parts.iter().map(BTreeSet::len).collect();
    let mut want = sizes.to_vec();
    got.sort_unstable();
    want.sort_unstable();
    let union: BTreeSet<i32> = parts.iter().flatten().copied().collect();
    got == want
        && union.len() == usize::try_from(PARTITIONS).unwrap_or(0)
        && got.iter().sum::<usize>() == union.len()
}

/// The group as ListGroups + DescribeGroups report it: (state, protocol, member count).
fn describe(m: &Member, group: &str) -> anyhow::Result<(String, String, usize)> {
    let list = m
        .consumer
        .fetch_group_list(Some(group), Duration::from_secs(10))?;
    let g = list
        .groups()
        .iter()
        .find(|g| g.name() == group)
        .context("group not listed")?;
    Ok((
        g.state().to_owned(),
        g.protocol().to_owned(),
        g.members().len(),
    ))
}

/// Polls `members` until DescribeGroups shows `group` Stable with `count` members.
fn await_stable_with(members: &mut [&mut Member], group: &str, count: usize) -> anyhow::Result<()> {
    let mut last = None;
    poll_until(
        &format!("group {group} Stable with {count} members"),
        members,
        |ms| {
            let d = describe(ms[0], group);
            let done = matches!(&d, Ok((state, _, n)) if state == "Stable" && *n == count);
            last = Some(d);
            done
        },
    )
    .with_context(|| format!("last described as {last:?}"))?;
    Ok(())
}

/// Whether `read` holds every offset `from[p] .. end` of every partition.
fn covers(read: &BTreeMap<i32, BTreeSet<i64>>, from: &BTreeMap<i32, i64>, end: i64) -> bool {
    from.iter().all(|(p, &first)| {
        read.get(p)
            .is_some_and(|o| (first..end).all(|i| o.contains(&i)))
    })
}

/// The union of several partition -> offsets maps.
fn union(
    maps: impl IntoIterator<Item = BTreeMap<i32, BTreeSet<i64>>>,
) -> BTreeMap<i32, BTreeSet<i64>> {
    let mut out: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for m in maps {
        for (p, o) in m {
            out.entry(p).or_default().extend(o);
        }
    }
    out
}

// ---- Scenario 1: three members split six partitions ---------------------------------------------

fn three_members_split_six_partitions(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce_batch(b, 0)?;
        let mut ms: Vec<Member> = (0..3)
            .map(|i| {
                member(
                    &b.bootstrap(),
                    flavour,
                    SESSION,
                    "split",
                    &format!("m{i}"),
                    &[],
                )
            })
            .collect::<anyhow::Result<_>>()?;
        let mut refs: Vec<&mut Member> = ms.iter_mut().collect();
        poll_until(
            "a 2/2/2 split, each member having read its partitions",
            &mut refs,
            |ms| split(ms, &[2, 2, 2]) && ms.iter().all(|m| m.has_read(0, PER_PARTITION)),
        )?;
        // Stable: another while of polling changes nothing.
        let before: Vec<BTreeSet<i32>> = refs.iter().map(|m| m.partitions()).collect();
        keep_polling(&mut refs, Duration::from_secs(1))?;
        let after: Vec<BTreeSet<i32>> = refs.iter().map(|m| m.partitions()).collect();
        ensure!(
            before == after,
            "assignments moved: {before:?} -> {after:?}"
        );
        for m in &ms {
            m.check_owned()?;
        }
        let all = union(ms.iter().map(|m| m.offsets_since(0)));
        ensure!(
            covers(&all, &everywhere(0), PER_PARTITION),
            "some message was never read"
        );
        let (state, protocol, members) = describe(&ms[0], "split")?;
        ensure!(
            state == "Stable" && members == 3,
            "{state} with {members} members"
        );
        if flavour == Flavour::CooperativeSticky {
            ensure!(protocol == "cooperative-sticky", "protocol {protocol}");
        }
        Ok(())
    });
}

#[test]
fn cooperative_sticky_three_members_split_six_partitions() {
    three_members_split_six_partitions(Flavour::CooperativeSticky);
}

#[test]
fn kip848_three_members_split_six_partitions() {
    three_members_split_six_partitions(Flavour::Kip848);
}

// ---- Scenario 2: a killed member process --------------------------------------------------------

/// What the child process is to do; passed in [`CHILD_ENV`] as `key=value` lines.
struct ChildSpec {
    bootstrap: String,
    group: String,
    flavour: Flavour,
    session: Duration,
    /// The child commits what it reads below this offset, and nothing at or above it, so
    /// that its successors have uncommitted messages to read again.
    commit_below: i64,
    /// Where the child appends `consumed <partition> <offset>` and
    /// `committed <partition> <offset>` lines.
    progress: PathBuf,
}

impl ChildSpec {
    fn encode(&self) -> String {
        format!(
            "bootstrap={}\ngroup={}\nflavour={}\nsession_ms={}\ncommit_below={}\nprogress={}",
            self.bootstrap,
            self.group,
            self.flavour.name(),
            self.session.as_millis(),
            self.commit_below,
            self.progress.display()
        )
    }

    fn decode(s: &str) -> anyhow::Result<ChildSpec> {
        let fields: BTreeMap<&str, &str> = s.lines().filter_map(|l| l.split_once('=')).collect();
        let get = |k: &str| {
            fields
                .get(k)
                .copied()
                .with_context(|| format!("{k} missing in {s:?}"))
        };
        Ok(ChildSpec {
            bootstrap: get("bootstrap")?.to_owned(),
            group: get("group")?.to_owned(),
            flavour: Flavour::parse(get("flavour")?)?,
            session: Duration::from_millis(get("session_ms")?.parse()?),
            commit_below: get("commit_below")?.parse()?,
            progress: PathBuf::from(get("progress")?),
        })
    }
}

/// The group member that the failover scenario kills: a separate process, so that its death
/// is a real crash (no leave, no close). Returns at once unless [`CHILD_ENV`] is set.
#[test]
#[ignore = "the failover scenarios run it as their child process"]
fn child_member_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    if let Err(e) = ChildSpec::decode(&spec).and_then(|spec| run_child(&spec)) {
        eprintln!("child member failed: {e:?}");
        std::process::exit(1);
    }
}

/// Reads and commits (synchronously, below `commit_below`) until killed, recording progress;
/// gives up after a few phases so that an orphan does not outlive its test for long.
fn run_child(spec: &ChildSpec) -> anyhow::Result<()> {
    let mut progress = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&spec.progress)?;
    let mut m = member(
        &spec.bootstrap,
        spec.flavour,
        spec.session,
        &spec.group,
        "child",
        &[],
    )?;
    let mut pending: BTreeMap<i32, i64> = BTreeMap::new();
    let started = Instant::now();
    while started.elapsed() < 3 * PHASE {
        let from = m.records.len();
        m.poll_once()?;
        for r in &m.records[from..] {
            writeln!(progress, "consumed {} {}", r.partition, r.offset)?;
            if r.offset < spec.commit_below {
                pending.insert(r.partition, r.offset + 1);
            }
        }
        if pending.is_empty() {
            continue;
        }
        let mut tpl = TopicPartitionList::new();
        for (&p, &o) in &pending {
            tpl.add_partition_offset(TOPIC, p, Offset::Offset(o))?;
        }
        // A commit that races a rebalance fails; it is retried on the next round.
        match m.consumer.commit(&tpl, CommitMode::Sync) {
            Ok(()) => {
                for (p, o) in std::mem::take(&mut pending) {
                    writeln!(progress, "committed {p} {o}")?;
                }
            }
            Err(e) => writeln!(progress, "commit-error {e}")?,
        }
    }
    Ok(())
}

/// The child's progress file, read.
#[derive(Debug, Default)]
struct ChildProgress {
    consumed: BTreeMap<i32, BTreeSet<i64>>,
    /// The highest offset committed on each partition.
    committed: BTreeMap<i32, i64>,
}

impl ChildProgress {
    /// partition -> (distinct offsets read, last offset read, committed offset).
    fn summary(&self) -> BTreeMap<i32, (usize, i64, i64)> {
        self.consumed
            .iter()
            .map(|(&p, o)| {
                let last = o.last().copied().unwrap_or(-1);
                (
                    p,
                    (o.len(), last, self.committed.get(&p).copied().unwrap_or(-1)),
                )
            })
            .collect()
    }
}

fn child_progress(path: &Path) -> ChildProgress {
    let mut out = ChildProgress::default();
    for line in fs::read_to_string(path).unwrap_or_default().lines() {
        let mut w = line.split(' ');
        let (kind, p, o) = (w.next(), w.next(), w.next());
        let (Some(p), Some(o)) = (
            p.and_then(|p| p.parse::<i32>().ok()),
            o.and_then(|o| o.parse::<i64>().ok()),
        ) else {
            continue;
        };
        match kind {
            Some("consumed") => {
                out.consumed.entry(p).or_default().insert(o);
            }
            Some("committed") => {
                let c = out.committed.entry(p).or_default();
                *c = (*c).max(o);
            }
            _ => {}
        }
    }
    out
}

/// The child process; killed with SIGKILL on drop.
struct ChildMember {
    child: Child,
    /// Its stdout and stderr, shown in errors.
    log: PathBuf,
}

impl ChildMember {
    fn spawn(spec: &ChildSpec, log: PathBuf) -> anyhow::Result<ChildMember> {
        let out = File::create(&log)?;
        let child = Command::new(std::env::current_exe()?)
            .args(["--exact", CHILD_TEST, "--include-ignored", "--nocapture"])
            .env(CHILD_ENV, spec.encode())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("spawn the child member")?;
        Ok(ChildMember { child, log })
    }

    fn log_tail(&self) -> String {
        read_tail(&self.log, 4096)
    }

    /// Fails if the child has exited (it runs until killed).
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the child member exited: {status}\n{}", self.log_tail());
        }
        Ok(())
    }
}

impl Drop for ChildMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn killed_member_process_loses_its_partitions_after_the_session_timeout(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce_batch(b, 0)?;
        let dir = tempfile::tempdir()?;
        let spec = ChildSpec {
            bootstrap: b.bootstrap(),
            group: "failover".to_owned(),
            flavour,
            session: SESSION,
            commit_below: PER_PARTITION,
            progress: dir.path().join("child.progress"),
        };
        let new_member =
            |name: &str| member(&b.bootstrap(), flavour, SESSION, "failover", name, &[]);
        let mut a = new_member("a")?;
        let mut c = new_member("c")?;
        let mut child = ChildMember::spawn(&spec, dir.path().join("child.log"))?;

        // The child owns the two partitions the others do not, and has read and committed
        // the first batch of them.
        let mut child_parts = BTreeSet::new();
        poll_until(
            "the child to own two partitions and commit the first batch of them",
            &mut [&mut a, &mut c],
            |ms| {
                if ms[0].partitions().len() != 2 || ms[1].partitions().len() != 2 {
                    return false;
                }
                let ours: BTreeSet<i32> = ms.iter().flat_map(|m| m.partitions()).collect();
                child_parts = (0..PARTITIONS).filter(|p| !ours.contains(p)).collect();
                let progress = child_progress(&spec.progress);
                child_parts.len() == 2
                    && child_parts
                        .iter()
                        .all(|p| progress.committed.get(p) == Some(&PER_PARTITION))
            },
        )
        .with_context(|| {
            format!(
                "child progress {:?}, log:\n{}",
                child_progress(&spec.progress).summary(),
                child.log_tail()
            )
        })?;
        child.check_alive()?;
        let (_, _, members) = describe(&a, "failover")?;
        ensure!(members == 3, "{members} members, expected 3");

        // The child reads the second batch too, but does not commit it.
        produce_batch(b, 1)?;
        poll_until(
            "everyone to read the second batch",
            &mut [&mut a, &mut c],
            |ms| {
                let progress = child_progress(&spec.progress);
                ms.iter()
                    .all(|m| m.has_read(PER_PARTITION, 2 * PER_PARTITION))
                    && child_parts.iter().all(|p| {
                        progress
                            .consumed
                            .get(p)
                            .is_some_and(|o| o.contains(&(2 * PER_PARTITION - 1)))
                    })
            },
        )
        .with_context(|| {
            format!(
                "child progress {:?}, log:\n{}",
                child_progress(&spec.progress).summary(),
                child.log_tail()
            )
        })?;
        a.commit()?;
        c.commit()?;
        let committed = a.committed()?;
        let expected: BTreeMap<i32, i64> = (0..PARTITIONS)
            .map(|p| {
                let o = if child_parts.contains(&p) { 1 } else { 2 };
                (p, o * PER_PARTITION)
            })
            .collect();
        ensure!(
            committed == expected,
            "committed {committed:?}, expected {expected:?} (child owns {child_parts:?})"
        );
        child.check_alive()?;
        let child_read = child_progress(&spec.progress).consumed;

        // SIGKILL: no leave. Only the session timeout can remove the child.
        child.child.kill()?;
        let killed = Instant::now();
        child.child.wait()?;
        let (from_a, from_c) = (a.records.len(), c.records.len());
        poll_until(
            "the child's partitions to move",
            &mut [&mut a, &mut c],
            |ms| split(ms, &[3, 3]),
        )?;
        let took = killed.elapsed();
        eprintln!(
            "{}: the killed member's partitions moved after {took:?}",
            flavour.name()
        );
        ensure!(
            took >= SESSION / 2,
            "the killed member's partitions moved after only {took:?} (session {SESSION:?})"
        );
        produce_batch(b, 2)?;
        let end = 3 * PER_PARTITION;
        poll_until(
            "everything after the commits to be read",
            &mut [&mut a, &mut c],
            |ms| {
                covers(
                    &union([ms[0].offsets_since(from_a), ms[1].offsets_since(from_c)]),
                    &committed,
                    end,
                )
            },
        )?;
        for (m, from) in [(&a, from_a), (&c, from_c)] {
            m.check_owned()?;
            for r in &m.records[from..] {
                ensure!(
                    r.offset >= committed[&r.partition],
                    "{} read committed message {}@{} again (committed {committed:?})",
                    m.name(),
                    r.partition,
                    r.offset
                );
            }
            // Each successor starts exactly at the child's committed offset.
            for p in &child_parts {
                if let Some(first) = m.records[from..].iter().find(|r| r.partition == *p) {
                    ensure!(
                        first.offset == committed[p],
                        "{} started partition {p} at {}, committed {}",
                        m.name(),
                        first.offset,
                        committed[p]
                    );
                }
            }
        }
        // Nothing skipped, over the whole run.
        let all = union([a.offsets_since(0), c.offsets_since(0), child_read]);
        ensure!(
            covers(&all, &everywhere(0), end),
            "some message was never read"
        );
        await_stable_with(&mut [&mut a, &mut c], "failover", 2)?;
        Ok(())
    });
}

#[test]
fn cooperative_sticky_killed_member_process_loses_its_partitions_after_the_session_timeout() {
    killed_member_process_loses_its_partitions_after_the_session_timeout(
        Flavour::CooperativeSticky,
    );
}

#[test]
fn kip848_killed_member_process_loses_its_partitions_after_the_session_timeout() {
    killed_member_process_loses_its_partitions_after_the_session_timeout(Flavour::Kip848);
}

// ---- Scenario 3: a consumer that stops polling --------------------------------------------------

fn consumer_that_stops_polling_loses_its_partitions(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce_batch(b, 0)?;
        let max_poll = Duration::from_secs(4);
        let max_poll_ms = max_poll.as_millis().to_string();
        let timing = [("max.poll.interval.ms", max_poll_ms.as_str())];
        let mut a = member(&b.bootstrap(), flavour, SESSION, "slow", "a", &timing)?;
        let mut slow = member(&b.bootstrap(), flavour, SESSION, "slow", "slow", &timing)?;
        poll_until(
            "a 3/3 split, each member having read its partitions",
            &mut [&mut a, &mut slow],
            |ms| split(ms, &[3, 3]) && ms.iter().all(|m| m.has_read(0, PER_PARTITION)),
        )?;
        // `slow` is never polled again; its session stays alive (librdkafka heartbeats from
        // a thread of its own) but it exceeds max.poll.interval.ms.
        let last_poll = Instant::now();
        poll_until(
            "the slow consumer's partitions to move",
            &mut [&mut a],
            |ms| ms[0].partitions().len() == 6,
        )?;
        let took = last_poll.elapsed();
        eprintln!(
            "{}: the slow consumer's partitions moved after {took:?}",
            flavour.name()
        );
        ensure!(
            took >= max_poll / 2,
            "moved after only {took:?} (max.poll.interval.ms {max_poll:?})"
        );
        produce_batch(b, 1)?;
        poll_until("every message", &mut [&mut a], |ms| {
            ms[0].has_read(0, 2 * PER_PARTITION)
        })?;
        a.check_owned()?;
        await_stable_with(&mut [&mut a], "slow", 1)?;
        drop(slow);
        Ok(())
    });
}

#[test]
fn cooperative_sticky_consumer_that_stops_polling_loses_its_partitions() {
    consumer_that_stops_polling_loses_its_partitions(Flavour::CooperativeSticky);
}

#[test]
fn kip848_consumer_that_stops_polling_loses_its_partitions() {
    consumer_that_stops_polling_loses_its_partitions(Flavour::Kip848);
}

// ---- Scenario 4: auto.offset.reset --------------------------------------------------------------

fn new_group_starts_at_latest_or_earliest(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce_batch(b, 0)?;
        let mut latest = member(
            &b.bootstrap(),
            flavour,
            SESSION,
            "latest",
            "latest",
            &[
                ("auto.offset.reset", "latest"),
                ("statistics.interval.ms", "100"),
            ],
        )?;
        let mut earliest = member(
            &b.bootstrap(),
            flavour,
            SESSION,
            "earliest",
            "earliest",
            &[],
        )?;
        // "After it has its assignment" means after librdkafka resolved `latest` into an
        // offset (ListOffsets) and started fetching: its statistics say so.
        poll_until(
            "the `latest` member fetching all six partitions",
            &mut [&mut latest, &mut earliest],
            |ms| {
                let fetch = ms[0].consumer.context().fetch.lock().unwrap();
                ms[0].partitions().len() == 6
                    && (0..PARTITIONS)
                        .all(|p| fetch.get(&p).is_some_and(|(state, _)| state == "active"))
            },
        )?;
        let resolved: BTreeMap<i32, i64> = latest
            .consumer
            .context()
            .fetch
            .lock()
            .unwrap()
            .iter()
            .map(|(&p, (_, next))| (p, *next))
            .collect();
        ensure!(
            resolved == everywhere(PER_PARTITION),
            "`latest` resolved to {resolved:?}"
        );
        produce_batch(b, 1)?;
        poll_until(
            "both members to read the second batch",
            &mut [&mut latest, &mut earliest],
            |ms| {
                let end = 2 * PER_PARTITION;
                covers(&ms[0].offsets_since(0), &everywhere(PER_PARTITION), end)
                    && covers(&ms[1].offsets_since(0), &everywhere(0), end)
            },
        )?;
        // Anything extra would arrive now.
        keep_polling(&mut [&mut latest, &mut earliest], Duration::from_secs(1))?;
        let n = usize::try_from(PER_PARTITION * i64::from(PARTITIONS))?;
        ensure!(
            latest.records.len() == n,
            "`latest` read {} messages, expected the {n} of the second batch",
            latest.records.len()
        );
        check_contiguous(&latest.records, &everywhere(PER_PARTITION)).context("`latest`")?;
        ensure!(
            earliest.records.len() == 2 * n,
            "`earliest` read {} messages, expected {}",
            earliest.records.len(),
            2 * n
        );
        check_contiguous(&earliest.records, &everywhere(0)).context("`earliest`")?;
        Ok(())
    });
}

#[test]
fn cooperative_sticky_new_group_starts_at_latest_or_earliest() {
    new_group_starts_at_latest_or_earliest(Flavour::CooperativeSticky);
}

#[test]
fn kip848_new_group_starts_at_latest_or_earliest() {
    new_group_starts_at_latest_or_earliest(Flavour::Kip848);
}

// ---- Scenario 5: committed offsets survive a broker crash ---------------------------------------

fn committed_offsets_survive_a_broker_kill9(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce_batch(b, 0)?;
        let mut c = member(&b.bootstrap(), flavour, SESSION, "crash", "c", &[])?;
        c.broker_may_die = true;
        poll_until("the first batch", &mut [&mut c], |ms| {
            ms[0].partitions().len() == 6 && ms[0].has_read(0, PER_PARTITION)
        })?;
        c.commit()?;
        let committed = c.committed()?;
        ensure!(
            committed == everywhere(PER_PARTITION),
            "committed {committed:?}"
        );

        // The member outlives the crash; it must not read committed messages again.
        b.kill9()?;
        b.restart()?;
        let from = c.records.len();
        produce_batch(b, 1)?;
        poll_until("the second batch after a crash", &mut [&mut c], |ms| {
            covers(
                &ms[0].offsets_since(from),
                &everywhere(PER_PARTITION),
                2 * PER_PARTITION,
            )
        })?;
        keep_polling(&mut [&mut c], Duration::from_secs(1))?;
        for r in &c.records[from..] {
            ensure!(
                r.offset >= PER_PARTITION,
                "committed message {}@{} read again after the crash",
                r.partition,
                r.offset
            );
        }

        // The second batch is read but not committed; the member leaves, the broker crashes
        // again, and a successor starts exactly at the committed offsets.
        drop(c);
        b.kill9()?;
        b.restart()?;
        let mut next = member(&b.bootstrap(), flavour, SESSION, "crash", "next", &[])?;
        next.broker_may_die = true;
        let committed = next.committed()?;
        ensure!(
            committed == everywhere(PER_PARTITION),
            "committed {committed:?} after the second crash"
        );
        poll_until(
            "the successor to read the second batch",
            &mut [&mut next],
            |ms| {
                covers(
                    &ms[0].offsets_since(0),
                    &everywhere(PER_PARTITION),
                    2 * PER_PARTITION,
                )
            },
        )?;
        keep_polling(&mut [&mut next], Duration::from_secs(1))?;
        // Exactly the uncommitted second batch, once, from the committed offsets on.
        check_contiguous(&next.records, &everywhere(PER_PARTITION)).context("successor")?;
        let n = usize::try_from(PER_PARTITION * i64::from(PARTITIONS))?;
        ensure!(
            next.records.len() == n,
            "the successor read {} messages, expected {n}",
            next.records.len()
        );
        Ok(())
    });
}

#[test]
fn cooperative_sticky_committed_offsets_survive_a_broker_kill9() {
    committed_offsets_survive_a_broker_kill9(Flavour::CooperativeSticky);
}

#[test]
fn kip848_committed_offsets_survive_a_broker_kill9() {
    committed_offsets_survive_a_broker_kill9(Flavour::Kip848);
}

// ---- Scenario 6: static membership --------------------------------------------------------------

fn restarted_static_member_gets_its_partitions_back_without_a_rebalance(flavour: Flavour) {
    // Long enough that the restart happens well inside it.
    let session = Duration::from_secs(10);
    with_group_broker(flavour, session, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce_batch(b, 0)?;
        let statik = |id: &str| -> anyhow::Result<Member> {
            member(
                &b.bootstrap(),
                flavour,
                session,
                "static",
                id,
                &[("group.instance.id", id)],
            )
        };
        let mut a = statik("a")?;
        let mut other = statik("b")?;
        poll_until("a 3/3 split", &mut [&mut a, &mut other], |ms| {
            split(ms, &[3, 3])
        })?;
        // Let the group settle (no rebalance in flight), then restart `a`.
        keep_polling(&mut [&mut a, &mut other], Duration::from_secs(2))?;
        let before_a = a.partitions();
        let before_other = other.partitions();
        let other_rebalances = other.rebalances();
        // A static member's close sends no LeaveGroup (KIP-345); with KIP-848 it leaves with
        // member epoch -2, which keeps its assignment for its return.
        drop(a);
        let mut a2 = statik("a")?;
        poll_until(
            "the restarted member's assignment",
            &mut [&mut a2, &mut other],
            |ms| ms[0].partitions().len() == 3,
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
        let (state, _, members) = describe(&other, "static")?;
        ensure!(
            state == "Stable" && members == 2,
            "{state} with {members} members"
        );
        Ok(())
    });
}

#[test]
fn cooperative_sticky_restarted_static_member_gets_its_partitions_back_without_a_rebalance() {
    restarted_static_member_gets_its_partitions_back_without_a_rebalance(
        Flavour::CooperativeSticky,
    );
}

#[test]
fn kip848_restarted_static_member_gets_its_partitions_back_without_a_rebalance() {
    restarted_static_member_gets_its_partitions_back_without_a_rebalance(Flavour::Kip848);
}
