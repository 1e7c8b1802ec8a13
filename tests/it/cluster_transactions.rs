//! The transaction coordinator on a three-node cluster of real `strata` processes:
//!
//! - every node names the same coordinator for a transactional id (FindCoordinator, raw),
//!   the leader of the id's `__transaction_state` partition, which the first lookup has
//!   the controller create with three replicas; the other nodes answer InitProducerId for
//!   the id with NOT_COORDINATOR;
//! - the coordinator killed with SIGKILL: another replica takes the id over, and the next
//!   InitProducerId keeps the producer id and bumps the last acknowledged epoch, so no
//!   instance fenced through the killed node comes back; the killed node rejoins, and a
//!   producer that holds the current epoch bumps it (KIP-360) wherever the id now lives.
//!
//! Raw frames, independent of Strata's codec. Every wait is bounded; what is measured is
//! printed as `measured:` lines.

use std::path::Path;
use std::time::{Duration, Instant};

use strata_tests::cluster::{self, Cluster, round_trip};
use strata_tests::{serial, strata_bin, wait_until, wire};

const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    // Fewer partitions than Kafka's 50 keep the image small; the placement is the same.
    ("transaction.state.log.num.partitions", "6"),
];

/// The bound on the cluster's start and on the coordinator's return.
const WAIT: Duration = Duration::from_secs(30);

const ID: &str = "replicated-tx";
const TRANSACTION: i8 = 1;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;

/// Waits until every node in `ids` names one coordinator (one of `ids`) for `ID`.
fn agreed_coordinator(c: &Cluster, ids: &[i32]) -> i32 {
    cluster::agreed_coordinator(c, ids, ID, TRANSACTION, WAIT)
}

/// InitProducerId v4 for `ID` at `port`, holding `held`: (error code, producer id, epoch).
fn init(port: u16, held: (i64, i16)) -> anyhow::Result<(i16, i64, i16)> {
    let req = wire::init_producer_id_v4_request(3, Some(ID), 60_000, held.0, held.1);
    Ok(wire::init_producer_id_v4_result(&round_trip(port, &req)?))
}

/// [`init`] until the coordinator at `port` has loaded the id's partition.
fn init_loaded(port: u16, held: (i64, i16)) -> (i16, i64, i16) {
    let mut answer = None;
    wait_until("the coordinator serves the id", WAIT, cluster::POLL, || {
        let r = init(port, held)?;
        let loading = [
            COORDINATOR_LOAD_IN_PROGRESS,
            COORDINATOR_NOT_AVAILABLE,
            NOT_COORDINATOR,
        ];
        answer = Some(r);
        Ok(!loading.contains(&r.0))
    })
    .unwrap_or_else(|e| panic!("{e:?}; last answer {answer:?}"));
    answer.expect("answered")
}

#[test]
fn a_transactional_id_survives_its_coordinator() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let mut c = Cluster::start(3, SETTINGS);
    let all = c.ids();
    c.wait_ready(WAIT);

    let t = Instant::now();
    let coordinator = agreed_coordinator(&c, &all);
    println!(
        "measured: node {coordinator} coordinates {ID} on all three nodes, {} ms after the first FindCoordinator",
        t.elapsed().as_millis()
    );
    let (code, pid, epoch) = init_loaded(c.port(coordinator), (-1, -1));
    assert_eq!((code, epoch), (0, 0), "first InitProducerId");
    assert_eq!(
        init(c.port(coordinator), (-1, -1)).unwrap(),
        (0, pid, 1),
        "a second instance"
    );
    let others: Vec<i32> = all.iter().copied().filter(|&i| i != coordinator).collect();
    for &id in &others {
        let (code, ..) = init(c.port(id), (-1, -1)).unwrap();
        assert_eq!(code, NOT_COORDINATOR, "InitProducerId on node {id}");
    }
    let m = c.metadata(1).expect("metadata");
    assert!(
        !m.topics.contains_key("__transaction_state"),
        "the internal topic is not listed to clients"
    );

    // The coordinator killed: another replica leads the partition, loads the id, and
    // goes on from the last acknowledged epoch.
    c.node(coordinator).kill9();
    let t = Instant::now();
    let successor = agreed_coordinator(&c, &others);
    assert_ne!(successor, coordinator);
    let answer = init_loaded(c.port(successor), (-1, -1));
    println!(
        "measured: node {coordinator} killed: node {successor} serves {ID} {} ms later",
        t.elapsed().as_millis()
    );
    assert_eq!(answer, (0, pid, 2), "InitProducerId after the failover");

    // The killed node back: wherever the id lives, its current holder bumps its epoch.
    c.node(coordinator).restart();
    let now = agreed_coordinator(&c, &all);
    assert_eq!(
        init_loaded(c.port(now), (pid, 2)),
        (0, pid, 3),
        "a KIP-360 bump at node {now}"
    );
}
