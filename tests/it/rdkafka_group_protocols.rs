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
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rdkafka::consumer::Consumer;
use strata_tests::{Broker, with_broker};

use crate::rdkafka_clients;
use crate::rdkafka_clients::check_contiguous;
use crate::rdkafka_clients::child_member::{self, ChildMember, ChildSpec};
use crate::rdkafka_clients::group::{
    Member, keep_polling, kill9_and_restart, poll_until, produce_round_robin,
    restarted_static_member_keeps_its_partitions, split,
};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
/// Messages per partition in each batch: batch `k` occupies offsets `k*PER_PARTITION ..
/// (k+1)*PER_PARTITION` of every partition.
const PER_PARTITION: i64 = 50;
/// The session timeout of the scenarios where a timeout is not what is under test.
const SESSION: Duration = Duration::from_secs(3);
/// Set (to a [`ChildSpec`]) only in the child process of the failover scenario.
const CHILD_ENV: &str = "STRATA_GROUP_PROTOCOLS_CHILD";
/// The test that is the child process, by its libtest name (its path below the crate root).
const CHILD_TEST: &str = "rdkafka_group_protocols::child_member_process";

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

/// How a scenario's members join: the broker, the flavour and the session.
struct GroupSetup {
    bootstrap: String,
    flavour: Flavour,
    session: Duration,
}

impl GroupSetup {
    /// A member of `group` named `name`, with `extra` client settings on top of the
    /// flavour's.
    fn member(&self, group: &str, name: &str, extra: &[(&str, &str)]) -> anyhow::Result<Member> {
        let flavoured = self.flavour.client_settings(self.session);
        let mut settings: Vec<(&str, &str)> =
            flavoured.iter().map(|(k, v)| (*k, v.as_str())).collect();
        settings.extend_from_slice(extra);
        Member::join(&self.bootstrap, group, name, TOPIC, PARTITIONS, &settings)
    }
}

/// Starts a broker set up for `flavour` with a `session` long group session, creates the
/// topic with the first batch in it, and runs `scenario` against it.
fn with_group_broker(
    flavour: Flavour,
    session: Duration,
    scenario: impl FnOnce(&mut Broker, &GroupSetup) -> anyhow::Result<()>,
) {
    let overrides = flavour.broker_overrides(session);
    let overrides: Vec<(&str, &str)> = overrides
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    with_broker(&overrides, |b| {
        rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
        produce_batch(b, 0)?;
        let setup = GroupSetup {
            bootstrap: b.bootstrap(),
            flavour,
            session,
        };
        scenario(b, &setup)
    });
}

/// Each scenario is one `#[test]` per flavour: `scenario: cooperative_sticky_name, kip848_name;`
/// (the table is at the end of the file).
macro_rules! per_flavour {
    ($($scenario:ident: $cooperative_sticky:ident, $kip848:ident;)+) => {$(
        #[test]
        fn $cooperative_sticky() {
            $scenario(Flavour::CooperativeSticky);
        }

        #[test]
        fn $kip848() {
            $scenario(Flavour::Kip848);
        }
    )+};
}

// ---- Producing ----------------------------------------------------------------------------------

/// Produces batch `batch`: `PER_PARTITION` messages to every partition, and checks that they
/// were acknowledged at the offsets the scenarios expect.
fn produce_batch(b: &Broker, batch: i64) -> anyhow::Result<()> {
    let n = usize::try_from(PER_PARTITION * i64::from(PARTITIONS))?;
    let acked = produce_round_robin(b, TOPIC, PARTITIONS, 0..n, |i| format!("batch{batch}-{i}"))
        .with_context(|| format!("batch {batch}"))?;
    for (&i, &(partition, offset)) in &acked {
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

// ---- Checks -------------------------------------------------------------------------------------

/// Polls `members` until DescribeGroups shows `group` Stable with `count` members.
fn await_stable_with(members: &mut [&mut Member], group: &str, count: usize) -> anyhow::Result<()> {
    let mut last = None;
    poll_until(
        &format!("group {group} Stable with {count} members"),
        members,
        |ms| {
            let d = ms[0].describe(group);
            let done = matches!(&d, Ok(g) if g.state == "Stable" && g.members.len() == count);
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
    with_group_broker(flavour, SESSION, |_, setup| {
        let mut ms: Vec<Member> = (0..3)
            .map(|i| setup.member("split", &format!("m{i}"), &[]))
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
        let g = ms[0].describe("split")?;
        ensure!(
            g.state == "Stable" && g.members.len() == 3,
            "{} with {} members",
            g.state,
            g.members.len()
        );
        if flavour == Flavour::CooperativeSticky {
            ensure!(
                g.protocol == "cooperative-sticky",
                "protocol {}",
                g.protocol
            );
        }
        Ok(())
    });
}

// ---- Scenario 2: a killed member process --------------------------------------------------------

/// The group member that the failover scenario kills: a separate process, so that its death
/// is a real crash (no leave, no close). Returns at once unless [`CHILD_ENV`] is set.
#[test]
#[ignore = "the failover scenarios run it as their child process"]
fn child_member_process() {
    child_member::run_from_env(CHILD_ENV);
}

fn killed_member_process_loses_its_partitions_after_the_session_timeout(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b, setup| {
        let dir = tempfile::tempdir()?;
        let spec = ChildSpec {
            bootstrap: b.bootstrap(),
            group: "failover".to_owned(),
            topic: TOPIC.to_owned(),
            partitions: PARTITIONS,
            settings: flavour
                .client_settings(SESSION)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            commit_below: PER_PARTITION,
            progress: dir.path().join("child.progress"),
        };
        let mut a = setup.member("failover", "a", &[])?;
        let mut c = setup.member("failover", "c", &[])?;
        let mut child =
            ChildMember::spawn(&spec, CHILD_ENV, CHILD_TEST, dir.path().join("child.log"))?;

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
                let progress = child.progress();
                child_parts.len() == 2
                    && child_parts
                        .iter()
                        .all(|p| progress.committed.get(p) == Some(&PER_PARTITION))
            },
        )
        .with_context(|| child.report())?;
        child.check_alive()?;
        let members = a.describe("failover")?.members.len();
        ensure!(members == 3, "{members} members, expected 3");

        // The child reads the second batch too, but does not commit it.
        produce_batch(b, 1)?;
        poll_until(
            "everyone to read the second batch",
            &mut [&mut a, &mut c],
            |ms| {
                let progress = child.progress();
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
        .with_context(|| child.report())?;
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
        let child_read = child.progress().consumed;

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

// ---- Scenario 3: a consumer that stops polling --------------------------------------------------

fn consumer_that_stops_polling_loses_its_partitions(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b, setup| {
        let max_poll = Duration::from_secs(4);
        let max_poll_ms = max_poll.as_millis().to_string();
        let timing = [("max.poll.interval.ms", max_poll_ms.as_str())];
        let mut a = setup.member("slow", "a", &timing)?;
        let mut slow = setup.member("slow", "slow", &timing)?;
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

// ---- Scenario 4: auto.offset.reset --------------------------------------------------------------

fn new_group_starts_at_latest_or_earliest(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b, setup| {
        let mut latest = setup.member(
            "latest",
            "latest",
            &[
                ("auto.offset.reset", "latest"),
                ("statistics.interval.ms", "100"),
            ],
        )?;
        let mut earliest = setup.member("earliest", "earliest", &[])?;
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

// ---- Scenario 5: committed offsets survive a broker crash ---------------------------------------

fn committed_offsets_survive_a_broker_kill9(flavour: Flavour) {
    with_group_broker(flavour, SESSION, |b, setup| {
        let mut c = setup.member("crash", "c", &[])?;
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
        kill9_and_restart(b)?;
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
        kill9_and_restart(b)?;
        let mut next = setup.member("crash", "next", &[])?;
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

// ---- Scenario 6: static membership --------------------------------------------------------------

fn restarted_static_member_gets_its_partitions_back_without_a_rebalance(flavour: Flavour) {
    // Long enough that the restart happens well inside it.
    let session = Duration::from_secs(10);
    with_group_broker(flavour, session, |_, setup| {
        // librdkafka 2.12 sends `group.instance.id` with `group.protocol=consumer` too.
        restarted_static_member_keeps_its_partitions("static", |id| {
            setup.member("static", id, &[("group.instance.id", id)])
        })
    });
}

// ---- The tests ----------------------------------------------------------------------------------

per_flavour! {
    three_members_split_six_partitions:
        cooperative_sticky_three_members_split_six_partitions,
        kip848_three_members_split_six_partitions;
    killed_member_process_loses_its_partitions_after_the_session_timeout:
        cooperative_sticky_killed_member_process_loses_its_partitions_after_the_session_timeout,
        kip848_killed_member_process_loses_its_partitions_after_the_session_timeout;
    consumer_that_stops_polling_loses_its_partitions:
        cooperative_sticky_consumer_that_stops_polling_loses_its_partitions,
        kip848_consumer_that_stops_polling_loses_its_partitions;
    new_group_starts_at_latest_or_earliest:
        cooperative_sticky_new_group_starts_at_latest_or_earliest,
        kip848_new_group_starts_at_latest_or_earliest;
    committed_offsets_survive_a_broker_kill9:
        cooperative_sticky_committed_offsets_survive_a_broker_kill9,
        kip848_committed_offsets_survive_a_broker_kill9;
    restarted_static_member_gets_its_partitions_back_without_a_rebalance:
        cooperative_sticky_restarted_static_member_gets_its_partitions_back_without_a_rebalance,
        kip848_restarted_static_member_gets_its_partitions_back_without_a_rebalance;
}
