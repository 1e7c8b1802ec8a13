//! Dedicated roles: three `process.roles=controller` nodes (the quorum, CONTROLLER listeners
//! only) and three `process.roles=broker` nodes (observers of the quorum that serve
//! clients), real processes on 127.0.0.1 started from their own `server.properties`, with
//! no `cluster.id` (all six derive it from the voters), driven by librdkafka:
//!
//! - the brokers register and the controllers never do: Metadata lists exactly the three
//!   brokers, and names one of them as `controller_id` (a client cannot reach a dedicated
//!   controller, and librdkafka's admin client sends to `controller_id`);
//! - a controller listener refuses client APIs (Metadata closes the connection) and answers
//!   DescribeQuorum; only the brokers appear as observers there;
//! - CreateTopics through a broker is forwarded to the active controller's listener and
//!   places replication factor 3 on the brokers only; no controller holds a partition;
//! - an idempotent acks=all producer's messages are read back, through a consumer group;
//! - the active controller killed with SIGKILL: another controller leads, and CreateTopics
//!   works again; the time is printed;
//! - a broker that leads partitions killed with SIGKILL: its partitions get new leaders from
//!   their ISR and producing carries on; restarted, the broker and the controller rejoin;
//! - SIGTERM: a dedicated controller exits promptly (it has no leaderships to hand over),
//!   and a dedicated broker's leaderships move before it exits.
//!
//! Every wait is bounded, and the test prints what it measured as `measured:` lines.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use strata_tests::cluster::{self, Cluster, Quorum, describe_quorum, partition_dirs};
use strata_tests::{serial, strata_bin, wait_until};

use crate::cluster_clients::{
    MARGIN, all_led, await_reports, check_moved_within_isr, create_topic, read_back, wait_topic,
};

/// The controllers' ids.
const CONTROLLERS: [i32; 3] = [1, 2, 3];
/// The brokers' ids.
const BROKERS: [i32; 3] = [4, 5, 6];

/// Short broker sessions, so that a dead broker is fenced quickly.
const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
];
const SESSION_TIMEOUT: Duration = Duration::from_millis(3000);

/// The bound on an election, and on the cluster's start.
const ELECTION: Duration = Duration::from_secs(30);

/// Partitions of the test topic.
const PARTITIONS: i32 = 3;

/// An idempotent acks=all producer bootstrapped at `bootstrap`.
fn idempotent_producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .set("retry.backoff.ms", "100")
        .set("linger.ms", "5")
        .create()
        .expect("producer")
}

/// Sends `count` keyed messages `<tag>-<i>` (partitioned by key) and waits for every report:
/// `(partition, offset) -> value` of the acknowledged ones, and the errors.
fn produce_keyed(
    p: &FutureProducer,
    topic: &str,
    count: usize,
    tag: &str,
) -> (BTreeMap<(i32, i64), String>, Vec<String>) {
    let pending: Vec<_> = (0..count)
        .map(|i| {
            let value = format!("{tag}-{i}");
            let key = format!("key-{}", i % 16);
            let f = p
                .send_result(FutureRecord::to(topic).key(&key).payload(&value))
                .unwrap_or_else(|(e, _)| panic!("enqueue {value}: {e}"));
            (value, f)
        })
        .collect();
    await_reports(pending, Duration::from_secs(90))
}

/// The quorum as the live controllers in `ids` agree on it: one leader among them, in one
/// epoch, answering without error.
fn agreed_quorum(c: &mut Cluster, ids: &[i32], timeout: Duration) -> Quorum {
    let mut corr = 0;
    let mut last = Vec::new();
    let mut agreed = None;
    let r = wait_until("an agreed quorum leader", timeout, cluster::POLL, || {
        last = ids
            .iter()
            .map(|&id| {
                corr += 1;
                (id, describe_quorum(c.node(id).controller_port, corr))
            })
            .collect::<Vec<_>>();
        agreed = last.iter().find_map(|(id, q)| match q {
            Some(q) if q.error == 0 && q.leader == *id => Some(q.clone()),
            _ => None,
        });
        Ok(agreed.as_ref().is_some_and(|l| {
            last.iter().all(|(_, q)| {
                q.as_ref()
                    .is_some_and(|q| q.leader == l.leader && q.epoch == l.epoch)
            })
        }))
    });
    r.unwrap_or_else(|e| panic!("{e:?}; last answers {last:?}"));
    agreed.expect("agreed")
}

#[test]
fn dedicated_controllers_and_brokers_serve_clients_through_failures() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let t0 = Instant::now();
    let mut c = Cluster::start_dedicated(CONTROLLERS.len(), BROKERS.len(), SETTINGS);
    let quorum = agreed_quorum(&mut c, &CONTROLLERS, ELECTION);
    assert!(
        CONTROLLERS.contains(&quorum.leader),
        "a controller leads: {quorum:?}"
    );
    // Only the brokers register: Metadata on every broker lists exactly them.
    c.wait_brokers(&BROKERS, &BROKERS, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    println!(
        "measured: controller {} elected, brokers {BROKERS:?} live on every broker, {} ms after spawn",
        quorum.leader,
        t0.elapsed().as_millis()
    );
    for &b in &BROKERS {
        let m = c.metadata(b).expect("metadata");
        assert!(
            BROKERS.contains(&m.controller_id),
            "broker {b} names a reachable broker as controller_id: {}",
            m.controller_id
        );
    }
    // The voters list the three controllers (the brokers fetch as observers).
    let voters: Vec<i32> = quorum.voters.iter().map(|v| v.0).collect();
    assert_eq!(voters, CONTROLLERS, "{quorum:?}");
    // A controller listener serves no client API: Metadata there closes the connection.
    assert!(
        cluster::metadata(c.node(1).controller_port).is_err(),
        "Metadata answered on a controller listener"
    );

    // CreateTopics through a broker: forwarded to the controller's listener.
    let all_brokers = c.bootstrap(&BROKERS);
    let t = Instant::now();
    create_topic(&c.bootstrap(&[5]), "dedicated", PARTITIONS, 3).expect("CreateTopics RF 3");
    let m = wait_topic(&c, &BROKERS, "dedicated", PARTITIONS);
    println!(
        "measured: CreateTopics through broker 5 and the topic led on all three brokers in {} ms",
        t.elapsed().as_millis()
    );
    for (id, p) in m.partitions("dedicated") {
        let mut replicas = p.replicas.clone();
        replicas.sort_unstable();
        assert_eq!(replicas, BROKERS, "partition {id}: {p:?}");
        assert_eq!(p.isr.len(), 3, "partition {id}: {p:?}");
    }
    for &id in &BROKERS {
        let want: Vec<i32> = (0..PARTITIONS).collect();
        assert_eq!(partition_dirs(&c.node(id).data_dir, "dedicated"), want);
    }
    for &id in &CONTROLLERS {
        assert!(partition_dirs(&c.node(id).data_dir, "dedicated").is_empty());
    }

    // An idempotent acks=all producer, and a consumer group reading everything back.
    let producer = idempotent_producer(&all_brokers);
    let (mut acked, errors) = produce_keyed(&producer, "dedicated", 600, "first");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(acked.len(), 600);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &all_brokers)
        .set("group.id", "dedicated-group")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    consumer.subscribe(&["dedicated"]).expect("subscribe");
    let mut seen = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && seen.len() < acked.len() {
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(200)) {
            let value = String::from_utf8_lossy(msg.payload().unwrap_or_default()).into_owned();
            seen.insert((msg.partition(), msg.offset()), value);
        }
    }
    assert_eq!(seen, acked, "the group read every acknowledged message");
    consumer
        .commit_consumer_state(rdkafka::consumer::CommitMode::Sync)
        .expect("the group commits its offsets on a dedicated broker");
    drop(consumer);

    // The active controller killed: another one leads, and metadata writes work again.
    let old = quorum.leader;
    let t = Instant::now();
    c.node(old).kill9();
    let survivors: Vec<i32> = CONTROLLERS.iter().copied().filter(|&i| i != old).collect();
    let quorum = agreed_quorum(&mut c, &survivors, ELECTION);
    let elected = t.elapsed();
    assert_ne!(quorum.leader, old);
    let created = wait_until(
        "CreateTopics after the failover",
        ELECTION,
        cluster::POLL,
        || {
            // An attempt answered late may have created it already.
            Ok(matches!(
                create_topic(&c.bootstrap(&[4]), "after-failover", 1, 3),
                Ok(()) | Err(RDKafkaErrorCode::TopicAlreadyExists)
            ))
        },
    );
    created.unwrap_or_else(|e| panic!("{e:?}"));
    wait_topic(&c, &BROKERS, "after-failover", 1);
    println!(
        "measured: controller {old} killed: controller {} elected after {} ms, CreateTopics through broker 4 answered {} ms after the kill",
        quorum.leader,
        elected.as_millis(),
        t.elapsed().as_millis()
    );

    // A broker that leads partitions killed: new leaders from the ISR, producing goes on.
    // The controller's outage can have shrunk an ISR that is growing back; the check below
    // compares against the ISR the kill met, so wait for every replica to be in it again.
    let before = c
        .wait_metadata(4, "every replica in sync again", ELECTION + MARGIN, |m| {
            all_led(m, "dedicated", PARTITIONS)
                && m.partitions("dedicated").values().all(|p| p.isr.len() == 3)
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    let victim = before.partitions("dedicated")[&0].leader;
    let rest: Vec<i32> = BROKERS.iter().copied().filter(|&b| b != victim).collect();
    let t = Instant::now();
    c.node(victim).kill9();
    let after = c
        .wait_metadata(
            rest[0],
            "the killed broker's partitions led by others",
            SESSION_TIMEOUT + MARGIN,
            |m| {
                all_led(m, "dedicated", PARTITIONS)
                    && m.partitions("dedicated")
                        .values()
                        .all(|p| p.leader != victim && !p.isr.contains(&victim))
            },
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    println!(
        "measured: broker {victim} killed: its partitions led by others {} ms after the kill",
        t.elapsed().as_millis()
    );
    check_moved_within_isr(&before, &after, "dedicated", victim);
    let (more, errors) = produce_keyed(&producer, "dedicated", 300, "second");
    assert!(errors.is_empty(), "{errors:?}");
    acked.extend(more);
    assert_eq!(acked.len(), 900);

    // Both restarted: the broker registers again, the controller follows the new leader.
    c.node(victim).restart();
    c.node(old).restart();
    c.wait_brokers(&BROKERS, &BROKERS, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let mut last = None;
    let caught_up = wait_until(
        "the restarted controller caught up",
        ELECTION,
        cluster::POLL,
        || {
            let q = agreed_quorum(&mut c, &CONTROLLERS, ELECTION);
            let ok = q
                .voters
                .iter()
                .any(|&(v, leo)| v == old && leo >= q.high_watermark);
            last = Some(q);
            Ok(ok)
        },
    );
    caught_up.unwrap_or_else(|e| panic!("{e:?}; last {last:?}"));
    let missing = read_back(&c.bootstrap(&rest), "dedicated", PARTITIONS, &acked);
    assert!(
        missing.is_empty(),
        "acknowledged and not read back: {missing:?}"
    );
    drop(producer);

    // SIGTERM: a controller that is not the leader exits at once, a broker after its
    // leaderships moved.
    let quorum = agreed_quorum(&mut c, &CONTROLLERS, ELECTION);
    let follower = *CONTROLLERS.iter().find(|&&i| i != quorum.leader).unwrap();
    let (status, took) = c.node(follower).stop(Duration::from_secs(8)).expect("stop");
    assert!(status.success(), "controller {follower}: {status:?}");
    println!(
        "measured: controller {follower} exited {} ms after SIGTERM",
        took.as_millis()
    );
    let m = c.metadata(4).expect("metadata");
    let leader = m
        .partitions("dedicated")
        .values()
        .map(|p| p.leader)
        .find(|&l| l != 4)
        .unwrap_or(5);
    let (status, took) = c.node(leader).stop(Duration::from_secs(8)).expect("stop");
    assert!(status.success(), "broker {leader}: {status:?}");
    // Within less than a session: moved by the controlled shutdown, not by a fence.
    c.wait_metadata(
        4,
        "the stopped broker leads nothing",
        Duration::from_secs(2),
        |m| {
            all_led(m, "dedicated", PARTITIONS)
                && m.partitions("dedicated")
                    .values()
                    .all(|p| p.leader != leader)
        },
    )
    .unwrap_or_else(|e| panic!("broker {leader}'s leaderships moved before it exited: {e:?}"));
    println!(
        "measured: broker {leader} exited {} ms after SIGTERM, its leaderships moved",
        took.as_millis()
    );
}
