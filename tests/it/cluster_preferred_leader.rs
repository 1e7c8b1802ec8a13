//! Preferred-leader restoration and ElectLeaders (KIP-460) on a three-node cluster of real
//! `strata` processes:
//!
//! - with `auto.leader.rebalance.enable` (checked every second), a broker killed with
//!   SIGKILL loses its leaderships, and, restarted, catches up on what was written
//!   meanwhile, rejoins every ISR and gets its preferred leaderships back on its own;
//! - with it off, the restarted broker rejoins every ISR but leads nothing until an
//!   ElectLeaders PREFERRED (sent to a node that is not the controller, so forwarded)
//!   moves its preferred partitions back; a second one answers ELECTION_NOT_NEEDED, and
//!   an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION;
//! - on five nodes (two may be down and the metadata quorum still has a majority), a broker
//!   that is down is PREFERRED_LEADER_NOT_AVAILABLE for its preferred partitions; a
//!   partition whose only replica is down is leaderless and ELIGIBLE_LEADERS_NOT_AVAILABLE
//!   to an UNCLEAN election; a leaderless partition with a live replica outside its ISR is
//!   not given a leader automatically (`unclean.leader.election.enable` is off), only by an
//!   UNCLEAN ElectLeaders, which elects that replica.
//!
//! The tests run one at a time; each prints what it measured as `measured: ...` lines.
//! Every wait is bounded.

use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use strata_tests::cluster::{Cluster, PREFERRED, UNCLEAN, create_topic_raw, elect_leaders_raw};
use strata_tests::{serial, strata_bin};

/// The bound on the first election and on the brokers' registration.
const ELECTION: Duration = Duration::from_secs(30);
/// The bound on a metadata change once its cause has happened (a 3 s session included).
const MARGIN: Duration = Duration::from_secs(15);
/// The bound on a restarted broker catching up and rejoining every ISR.
const REJOIN: Duration = Duration::from_secs(40);
/// The bound on its preferred leaderships coming back once it is in every ISR, with the
/// imbalance checked every second.
const RESTORE: Duration = Duration::from_secs(15);

const TOPIC: &str = "preferred";
const PARTITIONS: i32 = 6;

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
const ELECTION_NOT_NEEDED: i16 = 84;

fn settings(auto_rebalance: bool) -> Vec<(&'static str, &'static str)> {
    vec![
        ("broker.session.timeout.ms", "3000"),
        ("broker.heartbeat.interval.ms", "500"),
        ("replica.lag.time.max.ms", "5000"),
        ("leader.imbalance.check.interval.seconds", "1"),
        (
            "auto.leader.rebalance.enable",
            if auto_rebalance { "true" } else { "false" },
        ),
    ]
}

/// Starts three nodes, waits for their controller and brokers, creates [`TOPIC`] (six
/// partitions, RF 3) through the controller and waits until every partition is led by its
/// preferred replica with all three in sync. Returns the cluster and the controller.
fn start(auto_rebalance: bool) -> (Cluster, i32) {
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let c = Cluster::start(3, &settings(auto_rebalance));
    let controller = c.wait_ready(ELECTION);
    let port = c.port(controller);
    assert_eq!(
        create_topic_raw(port, TOPIC, PARTITIONS, 3).expect("CreateTopics"),
        NONE
    );
    c.wait_metadata(controller, "preferred leaders, full ISRs", MARGIN, |m| {
        let p = m.partitions(TOPIC);
        p.len() == PARTITIONS as usize
            && p.values()
                .all(|p| p.leader == p.replicas[0] && p.isr.len() == 3)
    })
    .unwrap_or_else(|e| panic!("{e:?}"));
    (c, controller)
}

/// A broker other than the controller, and the partitions it prefers (it is their first
/// replica), which it leads now.
fn victim(c: &Cluster, controller: i32) -> (i32, Vec<i32>) {
    let m = c.metadata(controller).expect("metadata");
    let id = c.ids().into_iter().find(|id| *id != controller).unwrap();
    let preferred: Vec<i32> = m
        .partitions(TOPIC)
        .into_iter()
        .filter(|(_, p)| p.replicas[0] == id)
        .map(|(i, _)| i)
        .collect();
    assert!(
        !preferred.is_empty(),
        "node {id} prefers no partition: {m:#?}"
    );
    assert_eq!(m.led_by(TOPIC, id), preferred);
    (id, preferred)
}

/// Produces `n` records to every partition of [`TOPIC`] through `bootstrap`, acks=all, and
/// waits for their delivery.
fn produce(bootstrap: &str, n: usize) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("message.timeout.ms", "20000")
        .create()
        .expect("producer");
    for partition in 0..PARTITIONS {
        for i in 0..n {
            let payload = format!("p{partition}-{i}");
            p.send(
                BaseRecord::<(), _>::to(TOPIC)
                    .partition(partition)
                    .payload(&payload),
            )
            .expect("queue a record");
        }
    }
    p.flush(Duration::from_secs(25)).expect("records delivered");
}

/// Kills `victim` with SIGKILL, waits until the controller has moved its leaderships to
/// members of the previous ISR and taken it out of every ISR, then writes to every
/// partition (so the restarted broker has something to catch up on) and restarts it.
/// Returns when it is back in every ISR, and how long that took after the restart.
fn kill_and_restart(c: &mut Cluster, controller: i32, victim: i32) -> Duration {
    let killed = Instant::now();
    c.node(victim).kill9();
    c.wait_metadata(
        controller,
        "the victim out of leaders and ISRs",
        MARGIN,
        |m| {
            let p = m.partitions(TOPIC);
            p.values()
                .all(|p| p.leader != victim && p.leader >= 0 && !p.isr.contains(&victim))
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    println!(
        "measured: node {victim}'s leaderships moved {:.1} s after its SIGKILL",
        killed.elapsed().as_secs_f64()
    );
    let survivors: Vec<i32> = c.ids().into_iter().filter(|id| *id != victim).collect();
    produce(&c.bootstrap(&survivors), 20);
    let restarted = Instant::now();
    c.node(victim).restart();
    c.wait_metadata(controller, "the victim in every ISR", REJOIN, |m| {
        let p = m.partitions(TOPIC);
        p.len() == PARTITIONS as usize && p.values().all(|p| p.isr.contains(&victim))
    })
    .unwrap_or_else(|e| panic!("{e:?}"));
    let rejoined = restarted.elapsed();
    println!(
        "measured: node {victim} back in all {PARTITIONS} ISRs {:.1} s after its restart",
        rejoined.as_secs_f64()
    );
    rejoined
}

/// Waits until every node reports `victim` leading exactly `preferred`.
fn wait_leading(c: &Cluster, victim: i32, preferred: &[i32], bound: Duration) {
    for id in c.ids() {
        c.wait_metadata(id, "the preferred leaderships back", bound, |m| {
            m.led_by(TOPIC, victim) == preferred
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    }
}

#[test]
fn auto_rebalance_gives_a_restarted_broker_its_preferred_leaderships_back() {
    let _serial = serial();
    let (mut c, controller) = start(true);
    let (victim, preferred) = victim(&c, controller);
    kill_and_restart(&mut c, controller, victim);
    let rejoined = Instant::now();
    wait_leading(&c, victim, &preferred, RESTORE);
    println!(
        "measured: node {victim}'s {} preferred leaderships back {:.1} s after it rejoined \
         every ISR (auto.leader.rebalance.enable, checked every 1 s)",
        preferred.len(),
        rejoined.elapsed().as_secs_f64()
    );
    let m = c.metadata(controller).expect("metadata");
    assert!(
        m.partitions(TOPIC)
            .values()
            .all(|p| p.leader == p.replicas[0] && p.isr.len() == 3),
        "{m:#?}"
    );
}

#[test]
fn elect_leaders_preferred_restores_leaderships_when_auto_rebalance_is_off() {
    let _serial = serial();
    let (mut c, controller) = start(false);
    let (victim, preferred) = victim(&c, controller);
    kill_and_restart(&mut c, controller, victim);
    // Three imbalance checks later, nothing has moved on its own.
    std::thread::sleep(Duration::from_secs(3));
    let m = c.metadata(controller).expect("metadata");
    assert!(m.led_by(TOPIC, victim).is_empty(), "{m:#?}");

    // Sent to the node that is neither the controller nor the victim: it forwards.
    let other = c
        .ids()
        .into_iter()
        .find(|id| *id != controller && *id != victim)
        .unwrap();
    let port = c.node(other).port;
    let all: Vec<i32> = (0..PARTITIONS).collect();
    let sent = Instant::now();
    let first = elect_leaders_raw(port, PREFERRED, Some(&[(TOPIC, &all)])).expect("ElectLeaders");
    let answered = sent.elapsed();
    assert_eq!(first.error, NONE, "{first:?}");
    for (p, code) in &first.partitions() {
        let want = if preferred.contains(&p.1) {
            NONE
        } else {
            ELECTION_NOT_NEEDED
        };
        assert_eq!(*code, want, "partition {p:?}: {first:?}");
    }
    assert_eq!(first.partitions().len(), PARTITIONS as usize);
    // The answer comes once the elections are committed; every node applies them shortly.
    wait_leading(&c, victim, &preferred, MARGIN);
    println!(
        "measured: ElectLeaders PREFERRED (forwarded) answered in {:.0} ms; every node shows \
         node {victim}'s {} preferred leaderships {:.0} ms after it was sent",
        answered.as_secs_f64() * 1000.0,
        preferred.len(),
        sent.elapsed().as_secs_f64() * 1000.0
    );

    let second = elect_leaders_raw(port, PREFERRED, Some(&[(TOPIC, &all)])).expect("ElectLeaders");
    assert_eq!(second.error, NONE);
    assert_eq!(second.partitions().len(), PARTITIONS as usize);
    assert!(
        second
            .partitions()
            .values()
            .all(|code| *code == ELECTION_NOT_NEEDED),
        "{second:?}"
    );
    // Every partition: each topic is listed, without the partitions needing nothing.
    let every = elect_leaders_raw(port, PREFERRED, None).expect("ElectLeaders");
    assert_eq!(every.error, NONE);
    assert!(
        every.topics.iter().any(|(t, _)| t == TOPIC)
            && every.topics.iter().all(|(_, ps)| ps.is_empty()),
        "{every:?}"
    );
    let unknown = elect_leaders_raw(port, PREFERRED, Some(&[("nope", &[0]), (TOPIC, &[99])]))
        .expect("ElectLeaders");
    assert_eq!(
        unknown.topics,
        vec![
            ("nope".to_owned(), vec![(0, UNKNOWN_TOPIC_OR_PARTITION)]),
            (TOPIC.to_owned(), vec![(99, UNKNOWN_TOPIC_OR_PARTITION)]),
        ]
    );
}

/// Five nodes, so that the metadata quorum keeps a majority with two of them down.
#[test]
fn unavailable_leaders_and_unclean_elections() {
    let _serial = serial();
    let mut c = Cluster::start(5, &settings(false));
    let ids = c.ids();
    let controller = c
        .wait_controller(&ids, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    c.wait_brokers(&ids, &ids, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let port = c.node(controller).port;
    // "solo": one replica per partition; "pair": two, each broker the first of one.
    for (topic, rf) in [("solo", 1), ("pair", 2)] {
        assert_eq!(
            create_topic_raw(port, topic, 5, rf).expect("CreateTopics"),
            NONE
        );
    }
    let m = c
        .wait_metadata(controller, "solo and pair led, full ISRs", MARGIN, |m| {
            let solo = m.partitions("solo");
            let pair = m.partitions("pair");
            solo.len() == 5
                && pair.len() == 5
                && solo
                    .values()
                    .chain(pair.values())
                    .all(|p| p.leader == p.replicas[0] && p.isr.len() == p.replicas.len())
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    // A pair partition led by x with y in sync, neither of them the controller.
    let (pair_xy, x, y) = m
        .partitions("pair")
        .into_iter()
        .find(|(_, p)| !p.replicas.contains(&controller))
        .map(|(i, p)| (i, p.replicas[0], p.replicas[1]))
        .expect("a pair partition away from the controller");
    let solo_x = *m
        .partitions("solo")
        .iter()
        .find(|(_, p)| p.replicas == [x])
        .expect("a solo partition on x")
        .0;
    let preferred_by_y: Vec<i32> = m
        .partitions("pair")
        .into_iter()
        .filter(|(_, p)| p.replicas[0] == y)
        .map(|(i, _)| i)
        .collect();
    let led = *m
        .partitions("solo")
        .iter()
        .find(|(_, p)| p.replicas == [controller])
        .unwrap()
        .0;

    // y dies: the pair partition's ISR shrinks to x, and y's preferred partitions cannot
    // go back to it.
    c.node(y).kill9();
    c.wait_metadata(
        controller,
        "y out of the pair partition's ISR",
        MARGIN,
        |m| m.partitions("pair")[&pair_xy].isr == [x],
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let down = elect_leaders_raw(port, PREFERRED, Some(&[("pair", &preferred_by_y)]))
        .expect("ElectLeaders");
    assert_eq!(down.error, NONE);
    assert!(
        !down.partitions().is_empty()
            && down
                .partitions()
                .values()
                .all(|code| *code == PREFERRED_LEADER_NOT_AVAILABLE),
        "{down:?}"
    );

    // x dies too: its ISR keeps its last member, so the pair partition and x's solo
    // partition have no leader.
    c.node(x).kill9();
    c.wait_metadata(
        controller,
        "the pair and solo partitions leaderless",
        MARGIN,
        |m| {
            m.partitions("pair")[&pair_xy].leader == -1
                && m.partitions("solo")[&solo_x].leader == -1
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let none_live =
        elect_leaders_raw(port, UNCLEAN, Some(&[("solo", &[solo_x])])).expect("ElectLeaders");
    assert_eq!(
        none_live.topics,
        vec![(
            "solo".to_owned(),
            vec![(solo_x, ELIGIBLE_LEADERS_NOT_AVAILABLE)]
        )]
    );
    // A partition with a leader needs no unclean election.
    let has_leader =
        elect_leaders_raw(port, UNCLEAN, Some(&[("solo", &[led])])).expect("ElectLeaders");
    assert_eq!(
        has_leader.topics,
        vec![("solo".to_owned(), vec![(led, ELECTION_NOT_NEEDED)])]
    );

    // y comes back: live, but not in the ISR, so the controller does not elect it on its
    // own (unclean.leader.election.enable is off)...
    c.node(y).restart();
    let live: Vec<i32> = ids.iter().copied().filter(|i| *i != x).collect();
    c.wait_brokers(&[controller], &live, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    std::thread::sleep(Duration::from_secs(3));
    let m = c.metadata(controller).expect("metadata");
    assert_eq!(m.partitions("pair")[&pair_xy].leader, -1, "{m:#?}");
    // ...only an UNCLEAN ElectLeaders does.
    let unclean =
        elect_leaders_raw(port, UNCLEAN, Some(&[("pair", &[pair_xy])])).expect("ElectLeaders");
    assert_eq!(
        unclean.topics,
        vec![("pair".to_owned(), vec![(pair_xy, NONE)])],
        "{unclean:?}"
    );
    c.wait_metadata(controller, "the out-of-sync replica leading", MARGIN, |m| {
        let p = &m.partitions("pair")[&pair_xy];
        p.leader == y && p.isr == [y]
    })
    .unwrap_or_else(|e| panic!("{e:?}"));
}
