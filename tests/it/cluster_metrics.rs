//! The metrics endpoint of a three-node cluster of real `strata` processes, each with its
//! own `metrics.listener`, driven by an rdkafka producer:
//!
//! - exactly one node reports `ActiveControllerCount` 1, the one Metadata names as the
//!   controller; every node reports the same Raft epoch and that node as the quorum's
//!   leader, and has applied metadata; only the active controller reports the cluster's
//!   partition count, and no partition is offline;
//! - a follower killed with SIGKILL (its session outlasts `replica.lag.time.max.ms`, so the
//!   leader's AlterPartition shrinks the ISR before the controller fences it) raises its
//!   leader's `UnderReplicatedPartitions` and `IsrShrinks`; restarted, it registers again
//!   once its old session has expired (a new incarnation is refused while it is valid),
//!   catches up, the leader's `IsrExpands` grows and the count falls back to 0;
//! - the leader's `FetchFollower` requests are counted apart from consumers' fetches.
//!
//! Every wait is bounded; what was measured is printed as `measured: ...` lines.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::ensure;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use strata_tests::cluster::{Cluster, create_topic_raw};
use strata_tests::{free_port, serial, strata_bin, wait_until};

use crate::metrics_scrape::{get, scrape};

/// The bound on the first election and on the brokers' registration.
const ELECTION: Duration = Duration::from_secs(30);
/// The bound on a metadata or metric change once its cause has happened.
const MARGIN: Duration = Duration::from_secs(20);
/// The bound on a restarted follower catching up and rejoining the ISR.
const REJOIN: Duration = Duration::from_secs(40);
const TOPIC: &str = "watched";
const POLL: Duration = Duration::from_millis(200);

/// The session outlasts the replica lag bound fivefold, so a killed follower leaves the ISR
/// by its leader's AlterPartition shrink, not by its fencing; and it is short enough for the
/// restarted follower, refused until it expires, to rejoin within [`REJOIN`].
const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "15000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("replica.lag.time.max.ms", "3000"),
    ("leader.imbalance.check.interval.seconds", "3600"),
];

const URP: &str = "kafka_server_replicamanager_underreplicatedpartitions";
const SHRINKS: &str = "kafka_server_replicamanager_isrshrinks_total";
const EXPANDS: &str = "kafka_server_replicamanager_isrexpands_total";
const ACTIVE: &str = "kafka_controller_kafkacontroller_activecontrollercount";

/// Node `id`'s sample of `series`.
fn sample(ports: &BTreeMap<i32, u16>, id: i32, series: &str) -> anyhow::Result<f64> {
    get(&scrape(ports[&id])?, series)
}

/// Waits until node `id`'s `series` satisfies `cond`; returns the value.
fn wait_sample(
    ports: &BTreeMap<i32, u16>,
    id: i32,
    series: &str,
    bound: Duration,
    cond: impl Fn(f64) -> bool,
) -> f64 {
    let mut last = f64::NAN;
    wait_until(&format!("node {id}'s {series}"), bound, POLL, || {
        last = sample(ports, id, series)?;
        Ok(cond(last))
    })
    .unwrap_or_else(|e| panic!("{e:?} (last {last})"));
    last
}

/// Produces `n` records to partition 0 through `bootstrap`, acks=1 (the ISR may be short
/// meanwhile), and waits for their delivery.
fn produce(bootstrap: &str, n: usize) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "1")
        .set("message.timeout.ms", "15000")
        .create()
        .expect("producer");
    for i in 0..n {
        let payload = format!("record-{i}");
        p.send(
            BaseRecord::<(), _>::to(TOPIC)
                .partition(0)
                .payload(&payload),
        )
        .expect("queue a record");
    }
    p.flush(Duration::from_secs(20)).expect("records delivered");
}

#[test]
fn one_active_controller_and_a_killed_follower_under_replicates_its_leader() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let ports: BTreeMap<i32, u16> = (1..=3).map(|id| (id, free_port().unwrap())).collect();
    let mut c = Cluster::start_with_node_settings(3, SETTINGS, |id| {
        vec![(
            "metrics.listener".to_owned(),
            format!("http://127.0.0.1:{}/metrics", ports[&id]),
        )]
    });
    let controller = c.wait_ready(ELECTION);

    // The quorum: one active controller, the one Metadata names, in one epoch.
    let mut epochs = Vec::new();
    wait_until(
        "one active controller on the endpoints",
        MARGIN,
        POLL,
        || {
            let active: Vec<i32> = c
                .ids()
                .into_iter()
                .filter(|&id| sample(&ports, id, ACTIVE).is_ok_and(|v| v == 1.0))
                .collect();
            Ok(active == [controller])
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    for id in c.ids() {
        let m = scrape(ports[&id]).expect("scrape");
        let active = get(&m, ACTIVE).expect("active");
        assert_eq!(active, f64::from(id == controller), "node {id}: {ACTIVE}");
        let leader = get(&m, "kafka_server_raft_metrics_current_leader").expect("leader");
        assert_eq!(leader, f64::from(controller), "node {id}: raft leader");
        epochs.push(get(&m, "kafka_server_raft_metrics_current_epoch").expect("epoch"));
        let applied = get(
            &m,
            "kafka_server_broker_metadata_metrics_last_applied_record_offset",
        )
        .expect("applied");
        let hw = get(&m, "kafka_server_raft_metrics_high_watermark").expect("hw");
        assert!(
            applied >= 0.0 && applied < hw + 1.0,
            "node {id}: applied {applied}, high watermark {hw}"
        );
    }
    assert!(
        epochs.iter().all(|e| *e == epochs[0] && *e > 0.0),
        "epochs {epochs:?}"
    );
    println!(
        "measured: node {controller} the only active controller, epoch {}",
        epochs[0]
    );

    assert_eq!(
        create_topic_raw(c.port(controller), TOPIC, 1, 3).expect("CreateTopics"),
        0
    );
    let m = c
        .wait_metadata(
            controller,
            "the partition led with 3 in sync",
            MARGIN,
            |m| {
                m.partitions(TOPIC)
                    .get(&0)
                    .is_some_and(|p| p.leader >= 0 && p.isr.len() == 3)
            },
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    let leader = m.partitions(TOPIC)[&0].leader;
    // The follower to kill is not the controller, so the quorum keeps its leader.
    let follower = c
        .ids()
        .into_iter()
        .find(|&id| id != leader && id != controller)
        .expect("three nodes");
    produce(&c.bootstrap(&[leader]), 50);
    let partitions = sample(
        &ports,
        controller,
        "kafka_controller_kafkacontroller_globalpartitioncount",
    )
    .expect("global partitions");
    assert!(
        partitions >= 1.0,
        "the controller counts {partitions} partitions"
    );
    for id in c.ids() {
        if id != controller {
            let p = sample(
                &ports,
                id,
                "kafka_controller_kafkacontroller_globalpartitioncount",
            )
            .expect("global partitions");
            assert_eq!(p, 0.0, "node {id} is no active controller");
        }
        let hosted = sample(&ports, id, "kafka_server_replicamanager_partitioncount")
            .expect("partition count");
        assert!(hosted >= 1.0, "node {id} hosts {hosted} partitions");
    }
    wait_sample(&ports, leader, URP, MARGIN, |v| v == 0.0);
    let led = sample(&ports, leader, "kafka_server_replicamanager_leadercount").expect("led");
    assert!(led >= 1.0, "the leader leads {led}");
    // A follower's fetch is counted when it is answered, after its long poll.
    wait_sample(
        &ports,
        leader,
        "kafka_network_requestmetrics_requests_total{request=\"FetchFollower\"}",
        MARGIN,
        |v| v > 0.0,
    );
    let shrinks_before = sample(&ports, leader, SHRINKS).expect("shrinks");
    let expands_before = sample(&ports, leader, EXPANDS).expect("expands");

    // A follower dies; records it does not fetch leave it behind.
    c.node(follower).kill9();
    let killed = Instant::now();
    produce(&c.bootstrap(&[leader]), 50);
    let urp = wait_sample(&ports, leader, URP, MARGIN, |v| v >= 1.0);
    let shrinks = wait_sample(&ports, leader, SHRINKS, MARGIN, |v| v > shrinks_before);
    println!(
        "measured: node {follower} killed; leader {leader} under-replicated {urp}, ISR shrinks {shrinks_before} -> {shrinks}, {} ms after the kill",
        killed.elapsed().as_millis()
    );
    let offline = sample(
        &ports,
        controller,
        "kafka_controller_kafkacontroller_offlinepartitionscount",
    )
    .expect("offline");
    assert_eq!(offline, 0.0, "the partition still has its leader");

    // It comes back, catches up and rejoins.
    c.node(follower).spawn();
    let restarted = Instant::now();
    produce(&c.bootstrap(&[leader]), 10);
    wait_sample(&ports, leader, URP, REJOIN, |v| v == 0.0);
    let expands = wait_sample(&ports, leader, EXPANDS, MARGIN, |v| v > expands_before);
    println!(
        "measured: node {follower} back in sync {} ms after its restart; ISR expands {expands_before} -> {expands}",
        restarted.elapsed().as_millis()
    );
    ensure_consistent(&ports, &c.ids()).unwrap_or_else(|e| panic!("{e:?}"));
}

/// Each node's per-topic traffic equals the sum of its partitions'.
fn ensure_consistent(ports: &BTreeMap<i32, u16>, ids: &[i32]) -> anyhow::Result<()> {
    for &id in ids {
        let m = scrape(ports[&id])?;
        let topic = get(
            &m,
            &format!("kafka_server_brokertopicmetrics_messagesin_total{{topic=\"{TOPIC}\"}}"),
        )?;
        let partition = get(
            &m,
            &format!("strata_partition_messages_in_total{{topic=\"{TOPIC}\",partition=\"0\"}}"),
        )?;
        ensure!(
            topic == partition,
            "node {id}: topic {topic}, partition {partition}"
        );
    }
    Ok(())
}
