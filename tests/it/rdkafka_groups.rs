//! The classic consumer-group protocol through librdkafka (the `rdkafka` crate's
//! `BaseConsumer` with `subscribe`, and kcat as a separate process) against the real `strata`
//! binary.
//!
//! - `three_consumers_split_six_partitions`: 2/2/2, every message consumed exactly by the
//!   owner of its partition, DescribeGroups shows the Stable group with three members, and
//!   DeleteGroups refuses it (NON_EMPTY_GROUP) until its members have left.
//! - `a_killed_member_is_removed_after_its_session_timeout`: a kcat member is killed with
//!   SIGKILL (no LeaveGroup); after `session.timeout.ms` its partitions move to the others.
//! - `a_consumer_that_stops_polling_loses_its_partitions`: past `max.poll.interval.ms` the
//!   silent consumer is out and the other one owns everything.
//! - `a_restarted_static_member_gets_its_partitions_back_without_a_rebalance` (KIP-345).
//! - `cooperative_sticky_rebalances_incrementally` (KIP-429): a third member takes partitions
//!   from the others, who keep the rest.
//!
//!
//! Raw frames (`strata_tests::wire`), for what librdkafka never sends:
//! - `heartbeat_and_sync_errors`: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
//!   INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL, REBALANCE_IN_PROGRESS.
//! - `a_followers_assignments_are_ignored`: only the leader's SyncGroup counts; the follower
//!   waits for it and the group stays consistent.
//! - `a_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout`.
//!
//! Offsets are not committed (`enable.auto.commit=false`, `auto.offset.reset=earliest`):
//! these tests are about membership and assignment, and count distinct messages.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, ensure};
use rdkafka::error::RDKafkaErrorCode;
use strata_tests::{Broker, with_broker};

use crate::rdkafka_clients;
use crate::rdkafka_clients::group::{
    Member, delete_groups, poll_until, produce_round_robin,
    restarted_static_member_keeps_its_partitions, split,
};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const MESSAGES: usize = 600;

/// Small group timings so the tests run in seconds (Kafka's keys; the session minimum is
/// lowered so that kcat's short session is accepted).
const OVERRIDES: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "100"),
    ("group.min.session.timeout.ms", "1000"),
];

/// The topic, with `MESSAGES` messages spread evenly over the partitions; value = message
/// index.
fn create_topic_and_produce(b: &Broker) -> anyhow::Result<()> {
    rdkafka_clients::create_topic(b, TOPIC, PARTITIONS)?;
    produce_round_robin(b, TOPIC, PARTITIONS, 0..MESSAGES, |i| i.to_string())?;
    Ok(())
}

/// A subscribed classic-protocol member of `group`.
fn member(b: &Broker, group: &str, extra: &[(&str, &str)]) -> anyhow::Result<Member> {
    let timing = [
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
    ];
    let settings = [&timing[..], extra].concat();
    Member::join(&b.bootstrap(), group, group, TOPIC, PARTITIONS, &settings)
}

/// Distinct values read by all of `members`.
fn distinct_values(members: &[&mut Member]) -> usize {
    members
        .iter()
        .flat_map(|m| m.value_set())
        .collect::<BTreeSet<_>>()
        .len()
}

#[test]
fn three_consumers_split_six_partitions() {
    with_broker(OVERRIDES, |b| {
        create_topic_and_produce(b)?;
        let mut ms: Vec<Member> = (0..3)
            .map(|_| member(b, "split", &[]))
            .collect::<anyhow::Result<_>>()?;
        let mut refs: Vec<&mut Member> = ms.iter_mut().collect();
        poll_until("a 2/2/2 split and every message", &mut refs, |ms| {
            split(ms, &[2, 2, 2])
                && ms.iter().map(|m| m.value_set().len()).sum::<usize>() >= MESSAGES
        })?;
        let mut all = BTreeSet::new();
        for m in &ms {
            let mine = m.partitions();
            for r in &m.records {
                let p = r.partition;
                ensure!(
                    mine.contains(&p),
                    "consumed partition {p} it does not own ({mine:?})"
                );
                all.insert(r.text());
            }
        }
        ensure!(all.len() == MESSAGES, "{} distinct messages", all.len());
        let g = ms[0].describe("split")?;
        ensure!(g.state == "Stable", "{}", g.state);
        ensure!(g.protocol == "range", "{}", g.protocol);
        ensure!(g.members.len() == 3, "{} members", g.members.len());

        // DeleteGroups: refused while members remain, done once they have left.
        let r = delete_groups(b, &["split", "never-existed"])?;
        ensure!(
            r == vec![
                Err(("split".to_owned(), RDKafkaErrorCode::NonEmptyGroup)),
                Err((
                    "never-existed".to_owned(),
                    RDKafkaErrorCode::GroupIdNotFound
                )),
            ],
            "{r:?}"
        );
        let probe = member(b, "probe", &[])?;
        drop(ms); // each closes with LeaveGroup
        let g = probe.describe("split")?;
        ensure!(
            g.state == "Empty" && g.members.is_empty(),
            "{} with {} members",
            g.state,
            g.members.len()
        );
        let r = delete_groups(b, &["split"])?;
        ensure!(r == vec![Ok("split".to_owned())], "{r:?}");
        // librdkafka describes only the groups ListGroups returns.
        ensure!(
            probe.describe("split").is_err(),
            "a deleted group is still listed"
        );
        Ok(())
    });
}

/// A kcat group member in its own process, killed with SIGKILL on drop.
struct Kcat(Child);

impl Drop for Kcat {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_killed_member_is_removed_after_its_session_timeout() {
    with_broker(OVERRIDES, |b| {
        create_topic_and_produce(b)?;
        let session = Duration::from_millis(3000);
        let mut a = member(b, "kill", &[])?;
        let mut c = member(b, "kill", &[])?;
        let mut kcat = Kcat(
            Command::new("kcat")
                .args(["-b", &b.bootstrap(), "-G", "kill", "-o", "beginning", "-q"])
                .args([
                    "-X",
                    "session.timeout.ms=3000",
                    "-X",
                    "heartbeat.interval.ms=500",
                ])
                .args(["-X", "enable.auto.commit=false", TOPIC])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("spawn kcat")?,
        );
        poll_until("kcat holding two partitions", &mut [&mut a, &mut c], |ms| {
            ms.iter().all(|m| m.partitions().len() == 2)
        })?;
        ensure!(a.describe("kill")?.members.len() == 3, "kcat is a member");
        kcat.0.kill()?;
        kcat.0.wait()?;
        let took = poll_until(
            "the killed member's partitions to move",
            &mut [&mut a, &mut c],
            |ms| split(ms, &[3, 3]),
        )?;
        // No LeaveGroup was sent: only the session timeout can have removed it.
        ensure!(took >= session / 2, "reassigned after only {took:?}");
        ensure!(
            a.describe("kill")?.members.len() == 2,
            "the killed member is gone"
        );
        Ok(())
    });
}

#[test]
fn a_consumer_that_stops_polling_loses_its_partitions() {
    with_broker(OVERRIDES, |b| {
        create_topic_and_produce(b)?;
        let timing = [
            ("session.timeout.ms", "2000"),
            ("max.poll.interval.ms", "3000"),
        ];
        let mut a = member(b, "slow", &timing)?;
        let mut slow = member(b, "slow", &timing)?;
        poll_until("a 3/3 split", &mut [&mut a, &mut slow], |ms| {
            split(ms, &[3, 3])
        })?;
        // `slow` is never polled again; its heartbeat thread keeps its session alive, but it
        // exceeds max.poll.interval.ms.
        let took = poll_until(
            "the slow consumer's partitions to move",
            &mut [&mut a],
            |ms| ms[0].partitions().len() == 6,
        )?;
        ensure!(
            took >= Duration::from_millis(1500),
            "moved after only {took:?}"
        );
        poll_until("every message", &mut [&mut a], |ms| {
            ms[0].value_set().len() >= MESSAGES
        })?;
        drop(slow);
        Ok(())
    });
}

#[test]
fn a_restarted_static_member_gets_its_partitions_back_without_a_rebalance() {
    with_broker(OVERRIDES, |b| {
        create_topic_and_produce(b)?;
        restarted_static_member_keeps_its_partitions("static", |id| {
            let statik = [("group.instance.id", id), ("session.timeout.ms", "10000")];
            member(b, "static", &statik)
        })
    });
}

#[test]
fn cooperative_sticky_rebalances_incrementally() {
    with_broker(OVERRIDES, |b| {
        create_topic_and_produce(b)?;
        let coop = [("partition.assignment.strategy", "cooperative-sticky")];
        let mut a = member(b, "coop", &coop)?;
        let mut c = member(b, "coop", &coop)?;
        poll_until("a 3/3 split", &mut [&mut a, &mut c], |ms| {
            split(ms, &[3, 3])
        })?;
        let (before_a, before_c) = (a.partitions(), c.partitions());
        let mut d = member(b, "coop", &coop)?;
        poll_until(
            "a 2/2/2 split and every message",
            &mut [&mut a, &mut c, &mut d],
            |ms| {
                // The newcomer reads its two partitions from the start (nothing is committed).
                split(ms, &[2, 2, 2])
                    && ms[2].value_set().len() >= MESSAGES / 3
                    && distinct_values(ms) >= MESSAGES
            },
        )?;
        // Sticky: the first two only gave partitions up, they did not trade them.
        ensure!(
            a.partitions().is_subset(&before_a),
            "{:?} ⊄ {before_a:?}",
            a.partitions()
        );
        ensure!(
            c.partitions().is_subset(&before_c),
            "{:?} ⊄ {before_c:?}",
            c.partitions()
        );
        let g = a.describe("coop")?;
        ensure!(
            g.state == "Stable" && g.protocol == "cooperative-sticky" && g.members.len() == 3,
            "{} {} {}",
            g.state,
            g.protocol,
            g.members.len()
        );
        let by_member: BTreeMap<usize, usize> = [&a, &c, &d]
            .iter()
            .enumerate()
            .map(|(i, m)| (i, m.value_set().len()))
            .collect();
        ensure!(
            by_member.values().all(|n| *n > 0),
            "every member consumed: {by_member:?}"
        );
        Ok(())
    });
}

// ---- Raw frames ---------------------------------------------------------------------------------

mod raw {
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    use strata_tests::wire::{self, JoinGroupResult, recv, send};
    use strata_tests::{Broker, with_broker};

    use super::OVERRIDES;

    const UNKNOWN_MEMBER_ID: i16 = 25;
    const ILLEGAL_GENERATION: i16 = 22;
    const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    const INVALID_SESSION_TIMEOUT: i16 = 26;
    const REBALANCE_IN_PROGRESS: i16 = 27;
    const MEMBER_ID_REQUIRED: i16 = 79;

    /// JoinGroup v5 on `conn` (sends only; the answer may park).
    fn send_join(conn: &mut TcpStream, group: &str, member_id: &str, rebalance_ms: i32) {
        let req = wire::join_group_request(
            1,
            group,
            member_id,
            None,
            10_000,
            rebalance_ms,
            "range",
            b"meta",
        );
        send(conn, &req);
    }

    fn recv_join(conn: &mut TcpStream) -> JoinGroupResult {
        wire::join_group_result(&recv(conn).expect("JoinGroup response"))
    }

    /// A new member: MEMBER_ID_REQUIRED, then the (parked) join with the given id.
    fn new_member(b: &Broker, group: &str, rebalance_ms: i32) -> (TcpStream, String) {
        let mut conn = wire::connect(b.port());
        send_join(&mut conn, group, "", rebalance_ms);
        let r = recv_join(&mut conn);
        assert_eq!(r.error, MEMBER_ID_REQUIRED, "{r:?}");
        assert!(r.member_id.starts_with("test-"), "{r:?}");
        send_join(&mut conn, group, &r.member_id, rebalance_ms);
        (conn, r.member_id)
    }

    fn heartbeat(conn: &mut TcpStream, group: &str, generation: i32, member: &str) -> i16 {
        send(
            conn,
            &wire::heartbeat_request(2, group, generation, member, None),
        );
        wire::heartbeat_result(&recv(conn).expect("Heartbeat response"))
    }

    fn sync(
        conn: &mut TcpStream,
        group: &str,
        generation: i32,
        member: &str,
        a: &[(&str, &[u8])],
    ) -> (i16, Vec<u8>) {
        send(
            conn,
            &wire::sync_group_request(3, group, generation, member, a),
        );
        wire::sync_group_result(&recv(conn).expect("SyncGroup response"))
    }

    type Joined = (TcpStream, String, JoinGroupResult);

    /// Orders two joined members leader first (their JoinGroups raced on two connections).
    fn leader_first(
        a: Joined,
        b: Joined,
    ) -> (
        TcpStream,
        String,
        JoinGroupResult,
        TcpStream,
        String,
        JoinGroupResult,
    ) {
        let (a, b) = if a.2.leader == a.1 { (a, b) } else { (b, a) };
        assert_eq!(a.2.leader, a.1, "one of the two leads");
        (a.0, a.1, a.2, b.0, b.1, b.2)
    }

    /// Two members in a Stable generation: (leader conn, leader id, follower conn, follower
    /// id, generation).
    fn stable_pair(
        b: &Broker,
        group: &str,
        rebalance_ms: i32,
    ) -> (TcpStream, String, TcpStream, String, i32) {
        let (mut c1, m1) = new_member(b, group, rebalance_ms);
        let (mut c2, m2) = new_member(b, group, rebalance_ms);
        let r1 = recv_join(&mut c1);
        let r2 = recv_join(&mut c2);
        assert_eq!((r1.error, r2.error), (0, 0));
        assert_eq!(r1.generation_id, r2.generation_id);
        assert_eq!(r1.leader, r2.leader);
        let (mut c1, m1, r1, mut c2, m2, r2) = leader_first((c1, m1, r1), (c2, m2, r2));
        assert_eq!(r1.members.len(), 2);
        assert!(r2.members.is_empty());
        let g = r1.generation_id;
        assert_eq!(
            sync(&mut c1, group, g, &m1, &[(&m1, b"one"), (&m2, b"two")]),
            (0, b"one".to_vec())
        );
        assert_eq!(sync(&mut c2, group, g, &m2, &[]), (0, b"two".to_vec()));
        (c1, m1, c2, m2, g)
    }

    #[test]
    fn heartbeat_and_sync_errors() {
        with_broker(OVERRIDES, |b| {
            let mut other = wire::connect(b.port());
            // Nothing known yet.
            assert_eq!(heartbeat(&mut other, "hb", 1, "ghost"), UNKNOWN_MEMBER_ID);
            let (mut c1, m1, _c2, m2, g) = stable_pair(b, "hb", 30_000);
            assert_eq!(heartbeat(&mut other, "hb", g, "ghost"), UNKNOWN_MEMBER_ID);
            assert_eq!(heartbeat(&mut other, "hb", g + 1, &m2), ILLEGAL_GENERATION);
            assert_eq!(heartbeat(&mut other, "hb", g, &m2), 0);
            assert_eq!(sync(&mut other, "hb", g, "ghost", &[]).0, UNKNOWN_MEMBER_ID);
            assert_eq!(
                sync(&mut other, "hb", g - 1, &m2, &[]).0,
                ILLEGAL_GENERATION
            );
            // Session timeout outside group.min/max.session.timeout.ms.
            send(
                &mut other,
                &wire::join_group_request(4, "hb", "", None, 500, 1000, "range", b""),
            );
            assert_eq!(recv_join(&mut other).error, INVALID_SESSION_TIMEOUT);
            // A protocol no member supports.
            send(
                &mut other,
                &wire::join_group_request(5, "hb", "", None, 10_000, 1000, "sticky", b""),
            );
            assert_eq!(recv_join(&mut other).error, INCONSISTENT_GROUP_PROTOCOL);
            // The leader rejoins: a rebalance starts, and heartbeats say so (the JoinGroup
            // is on another connection, so allow it a moment to arrive).
            send_join(&mut c1, "hb", &m1, 30_000);
            let started = Instant::now();
            let mut code = heartbeat(&mut other, "hb", g, &m2);
            while code == 0 && started.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(20));
                code = heartbeat(&mut other, "hb", g, &m2);
            }
            assert_eq!(code, REBALANCE_IN_PROGRESS);
            Ok(())
        });
    }

    #[test]
    fn a_followers_assignments_are_ignored() {
        with_broker(OVERRIDES, |b| {
            let (mut c1, m1) = new_member(b, "sync", 30_000);
            let (mut c2, m2) = new_member(b, "sync", 30_000);
            let r1 = recv_join(&mut c1);
            let r2 = recv_join(&mut c2);
            let (mut c1, m1, r1, mut c2, m2, r2) = leader_first((c1, m1, r1), (c2, m2, r2));
            let g = r1.generation_id;
            assert_eq!(r2.generation_id, g);
            // The follower syncs first, with assignments of its own: it parks.
            send(
                &mut c2,
                &wire::sync_group_request(7, "sync", g, &m2, &[(&m1, b"evil"), (&m2, b"evil")]),
            );
            std::thread::sleep(Duration::from_millis(200));
            // The leader's assignment is what everyone gets.
            assert_eq!(
                sync(&mut c1, "sync", g, &m1, &[(&m1, b"one"), (&m2, b"two")]),
                (0, b"one".to_vec())
            );
            assert_eq!(
                wire::sync_group_result(&recv(&mut c2).expect("follower's sync")),
                (0, b"two".to_vec())
            );
            // The group is Stable and consistent: both heartbeat fine, a repeated sync returns
            // the stored assignment, and a follower's assignments still change nothing.
            assert_eq!(heartbeat(&mut c1, "sync", g, &m1), 0);
            assert_eq!(heartbeat(&mut c2, "sync", g, &m2), 0);
            assert_eq!(
                sync(&mut c2, "sync", g, &m2, &[(&m1, b"evil")]),
                (0, b"two".to_vec())
            );
            assert_eq!(sync(&mut c1, "sync", g, &m1, &[]), (0, b"one".to_vec()));
            Ok(())
        });
    }

    #[test]
    fn a_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout() {
        with_broker(OVERRIDES, |b| {
            let rebalance_ms = 2000;
            let (mut c1, m1, mut c2, m2, g) = stable_pair(b, "rt", rebalance_ms);
            let started = Instant::now();
            send_join(&mut c1, "rt", &m1, rebalance_ms);
            // The follower keeps its session alive but never rejoins.
            let mut last = REBALANCE_IN_PROGRESS;
            while started.elapsed() < Duration::from_secs(10) && last == REBALANCE_IN_PROGRESS {
                std::thread::sleep(Duration::from_millis(200));
                last = heartbeat(&mut c2, "rt", g, &m2);
            }
            assert_eq!(last, UNKNOWN_MEMBER_ID, "the follower was removed");
            let r = recv_join(&mut c1);
            let took = started.elapsed();
            assert_eq!(r.error, 0);
            assert_eq!(r.generation_id, g + 1);
            assert_eq!(
                r.members
                    .iter()
                    .map(|(m, _)| m.as_str())
                    .collect::<Vec<_>>(),
                [m1.as_str()]
            );
            assert!(
                took >= Duration::from_millis(1800),
                "removed after only {took:?}"
            );
            Ok(())
        });
    }
}
