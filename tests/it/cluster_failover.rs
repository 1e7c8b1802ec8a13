//! A three-node cluster of real `strata` processes (each broker and controller, started from
//! its own `server.properties`) under failures, driven by librdkafka and raw requests:
//!
//! - placement: one controller for all, CreateTopics through a non-controller node places
//!   three distinct replicas per partition with leaders on every broker, replication factor
//!   4 is INVALID_REPLICATION_FACTOR, and every node holds the partitions' directories;
//! - broker death (SIGKILL): its partitions get new leaders from their ISR within the
//!   session timeout, it leaves Metadata's brokers and the ISRs, and a producer bootstrapped
//!   on a survivor keeps delivering to every partition, read back by a consumer;
//! - controller death (SIGKILL): a new controller is elected, CreateTopics succeeds, and the
//!   dead node's leaderships move after the session timeout; restarted, it follows the new
//!   controller and is a live broker again;
//! - restart: a killed node registers again, is unfenced, and new topics place replicas on it;
//!   restarted before its session ended, it registers again once the old registration is
//!   taken out of service, and leads none of its old partitions;
//! - controlled shutdown (SIGTERM): the broker's leaderships move before it exits 0, and the
//!   active controller's too, which also hands the quorum over before it goes;
//! - all three killed and restarted: the topic is back with its replicas, and the brokers
//!   stay live past a session timeout;
//! - CreateTopics sent to any node is created (forwarded to the controller by the others);
//! - a manual assignment that names a fenced broker leaves it out of the ISR and the
//!   leadership until it returns and catches up.
//!
//! The tests run one at a time (each starts three processes, and the measured times mean
//! more without three clusters sharing the machine); each prints what it measured as
//! `measured: ...` lines. Every wait is bounded.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::types::RDKafkaErrorCode;
use strata_tests::cluster::{Cluster, create_topic_raw, partition_dirs};
use strata_tests::{serial, strata_bin};

use crate::cluster_clients::{
    MARGIN, all_led, check_moved_within_isr, create_topic, create_topic_assigned, produce,
    producer, read_back, wait_topic,
};

/// `broker.session.timeout.ms` of the test clusters (Kafka's default is 9000).
const SESSION_TIMEOUT: Duration = Duration::from_millis(3000);

/// Settings every test cluster runs with: short broker sessions so that failures are
/// detected quickly.
const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("leader.imbalance.check.interval.seconds", "5"),
];

/// The bound on a cluster's first election and on a failover's election.
const ELECTION: Duration = Duration::from_secs(30);

/// Less than the 10 s a broker waits at most for its controlled shutdown: an exit later than
/// this means the controller never answered `should_shut_down`.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(8);

/// Partitions of the topics the tests create.
const PARTITIONS: i32 = 6;

/// Starts three nodes and waits for their one controller, which every node names.
fn start_cluster() -> (Cluster, i32) {
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let c = Cluster::start(3, SETTINGS);
    let t0 = Instant::now();
    let controller = c.wait_ready(ELECTION);
    println!(
        "measured: controller {controller} named by all three nodes, all three brokers live, {} ms after spawn",
        t0.elapsed().as_millis()
    );
    (c, controller)
}

#[test]
fn placement_spreads_replicas_and_leaders_over_the_three_brokers() {
    let _serial = serial();
    let (c, controller) = start_cluster();
    let all = c.ids();
    let other = *all.iter().find(|&&i| i != controller).unwrap();

    // Through a node that is not the controller: librdkafka finds the controller.
    let t0 = Instant::now();
    create_topic(&c.bootstrap(&[other]), "placed", PARTITIONS, 3).expect("CreateTopics RF 3");
    let m = wait_topic(&c, &all, "placed", PARTITIONS);
    println!(
        "measured: CreateTopics through node {other} and the topic led on all three nodes in {} ms",
        t0.elapsed().as_millis()
    );
    let mut leaders = BTreeSet::new();
    for (id, p) in m.partitions("placed") {
        let distinct: BTreeSet<i32> = p.replicas.iter().copied().collect();
        assert_eq!(p.replicas.len(), 3, "partition {id}: {p:?}");
        assert_eq!(
            distinct,
            all.iter().copied().collect(),
            "partition {id}: {p:?}"
        );
        assert!(p.replicas.contains(&p.leader), "partition {id}: {p:?}");
        let isr: BTreeSet<i32> = p.isr.iter().copied().collect();
        assert_eq!(
            isr, distinct,
            "a new partition's ISR is its replicas: {p:?}"
        );
        leaders.insert(p.leader);
    }
    assert_eq!(
        leaders,
        all.iter().copied().collect(),
        "leaders over all three brokers: {m:#?}"
    );

    // Four replicas on three brokers.
    assert_eq!(
        create_topic(&c.bootstrap(&[other]), "too-many", 1, 4),
        Err(RDKafkaErrorCode::InvalidReplicationFactor)
    );
    let m = c.metadata(controller).unwrap();
    assert!(
        m.partitions("too-many").is_empty(),
        "nothing created: {m:#?}"
    );

    // Every node replicates every partition, so each holds all six directories.
    let want: Vec<i32> = (0..PARTITIONS).collect();
    for n in &c.nodes {
        assert_eq!(
            partition_dirs(&n.data_dir, "placed"),
            want,
            "partition directories in {}",
            n.data_dir.display()
        );
    }
}

#[test]
fn a_killed_broker_s_partitions_get_new_leaders_from_their_isr_and_producers_carry_on() {
    let _serial = serial();
    let (mut c, controller) = start_cluster();
    let all = c.ids();
    let topic = "orders";
    create_topic(&c.bootstrap(&all), topic, PARTITIONS, 3).expect("CreateTopics");
    let before = wait_topic(&c, &all, topic, PARTITIONS);
    let victim = *all
        .iter()
        .find(|&&i| i != controller && !before.led_by(topic, i).is_empty())
        .expect("a non-controller broker leading partitions");
    let survivor = *all
        .iter()
        .find(|&&i| i != controller && i != victim)
        .unwrap();
    let led = before.led_by(topic, victim);

    // The producer knows only the survivor; everything is delivered before the kill.
    let p = producer(&c.bootstrap(&[survivor]));
    let (_, errors) = produce(&p, topic, PARTITIONS, 5, "before");
    assert!(errors.is_empty(), "before the kill: {errors:?}");

    c.node(victim).kill9();
    let t0 = Instant::now();
    // Messages sent while the leaders are moving (from another thread, so that the wait
    // below measures the failover alone): delivered once they have moved.
    let (during, errors, during_ms, after, moved_ms) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let (acked, errors) = produce(&p, topic, PARTITIONS, 20, "during");
            (acked, errors, t0.elapsed().as_millis())
        });
        let after = c.wait_metadata(
            controller,
            "the killed broker's partitions moved",
            SESSION_TIMEOUT + MARGIN,
            |m| {
                m.led_by(topic, victim).is_empty()
                    && all_led(m, topic, PARTITIONS)
                    && !m.brokers().contains(&victim)
            },
        );
        let moved_ms = t0.elapsed().as_millis();
        let (during, errors, during_ms) = sender.join().expect("the producing thread");
        (during, errors, during_ms, after, moved_ms)
    });
    let after = after.unwrap_or_else(|e| panic!("{e:?}"));
    assert!(errors.is_empty(), "sent during the failover: {errors:?}");
    println!(
        "measured: partitions {led:?} of killed broker {victim} had new leaders within {moved_ms} ms \
         of the kill (session timeout {} ms); the 20 messages per partition sent meanwhile \
         were all acknowledged {during_ms} ms after the kill",
        SESSION_TIMEOUT.as_millis()
    );
    check_moved_within_isr(&before, &after, topic, victim);
    // Every surviving node sees the same.
    c.wait_brokers(&[controller, survivor], &[controller, survivor], MARGIN)
        .unwrap_or_else(|e| panic!("{e:?}"));

    let (later, errors) = produce(&p, topic, PARTITIONS, 20, "after");
    assert!(errors.is_empty(), "after the failover: {errors:?}");
    let mut want = during;
    want.extend(later);
    let partitions: BTreeSet<i32> = want.keys().map(|k| k.0).collect();
    assert_eq!(partitions.len(), usize::try_from(PARTITIONS).unwrap());
    let missing = read_back(&c.bootstrap(&[survivor]), topic, PARTITIONS, &want);
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged messages not read back: {missing:?}",
        missing.len(),
        want.len()
    );
}

#[test]
fn a_killed_controller_is_replaced_and_its_leaderships_move() {
    let _serial = serial();
    let (mut c, controller) = start_cluster();
    let all = c.ids();
    create_topic(&c.bootstrap(&all), "before", PARTITIONS, 3).expect("CreateTopics");
    let before = wait_topic(&c, &all, "before", PARTITIONS);
    assert!(
        !before.led_by("before", controller).is_empty(),
        "the controller leads some partitions: {before:#?}"
    );
    let survivors: Vec<i32> = all.iter().copied().filter(|&i| i != controller).collect();

    c.node(controller).kill9();
    let t0 = Instant::now();
    let next = c
        .wait_controller(&survivors, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let elected_ms = t0.elapsed().as_millis();
    assert_ne!(next, controller);

    create_topic(&c.bootstrap(&survivors), "after", 3, 2)
        .expect("CreateTopics through the new controller");
    let created_ms = t0.elapsed().as_millis();
    // A new controller starts every broker's session afresh (as Kafka's does), so until the
    // dead node's session expires it still counts as live and may get replicas here.
    wait_topic(&c, &survivors, "after", 3);

    let after = c
        .wait_metadata(
            next,
            "the killed controller's partitions moved",
            SESSION_TIMEOUT + MARGIN,
            |m| {
                m.led_by("before", controller).is_empty()
                    && all_led(m, "before", PARTITIONS)
                    && !m.brokers().contains(&controller)
            },
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    let moved_ms = t0.elapsed().as_millis();
    check_moved_within_isr(&before, &after, "before", controller);

    println!(
        "measured: controller {controller} killed; node {next} elected controller after \
         {elected_ms} ms, CreateTopics through it done after {created_ms} ms, partitions \
         {:?} of the dead controller re-led after {moved_ms} ms (session timeout {} ms)",
        before.led_by("before", controller),
        SESSION_TIMEOUT.as_millis()
    );

    // Restarted, the old controller follows the quorum and registers with the new one.
    c.node(controller).restart();
    let t1 = Instant::now();
    c.wait_brokers(&all, &all, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        c.wait_controller(&all, ELECTION)
            .unwrap_or_else(|e| panic!("{e:?}")),
        next,
        "leadership stays with the new controller"
    );
    println!(
        "measured: the old controller {controller}, restarted, was listed by every node after {} ms",
        t1.elapsed().as_millis()
    );
}

#[test]
fn a_broker_restarted_within_its_session_registers_again_without_its_leaderships() {
    let _serial = serial();
    let (mut c, controller) = start_cluster();
    let all = c.ids();
    let topic = "bounce";
    create_topic(&c.bootstrap(&all), topic, PARTITIONS, 3).expect("CreateTopics");
    let before = wait_topic(&c, &all, topic, PARTITIONS);
    let victim = *all
        .iter()
        .find(|&&i| i != controller && !before.led_by(topic, i).is_empty())
        .expect("a non-controller broker leading partitions");
    let led = before.led_by(topic, victim);

    // Back before the controller noticed: the new incarnation's registration is refused
    // while the old one's session lives, then accepted, taking the old one out of the ISRs.
    c.node(victim).restart();
    let t0 = Instant::now();
    let m = c
        .wait_metadata(
            controller,
            "the restarted broker listed, leading none of its old partitions",
            SESSION_TIMEOUT + MARGIN,
            |m| {
                m.brokers() == all
                    && all_led(m, topic, PARTITIONS)
                    && led.iter().all(|p| m.partitions(topic)[p].leader != victim)
            },
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    println!(
        "measured: broker {victim} restarted at once; listed again, its partitions {led:?} \
         re-led by others, after {} ms (session timeout {} ms)",
        t0.elapsed().as_millis(),
        SESSION_TIMEOUT.as_millis()
    );
    check_moved_within_isr(&before, &m, topic, victim);
    c.wait_brokers(&all, &all, MARGIN)
        .unwrap_or_else(|e| panic!("{e:?}"));
}

#[test]
fn a_restarted_broker_registers_again_and_takes_new_replicas() {
    let _serial = serial();
    let (mut c, controller) = start_cluster();
    let all = c.ids();
    let victim = *all.iter().find(|&&i| i != controller).unwrap();

    c.node(victim).kill9();
    let t0 = Instant::now();
    let survivors: Vec<i32> = all.iter().copied().filter(|&i| i != victim).collect();
    c.wait_brokers(&survivors, &survivors, SESSION_TIMEOUT + MARGIN)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let fenced_ms = t0.elapsed().as_millis();
    // Three replicas need three live brokers.
    assert_eq!(
        create_topic(&c.bootstrap(&survivors), "while-down", 1, 3),
        Err(RDKafkaErrorCode::InvalidReplicationFactor)
    );

    c.node(victim).restart();
    let t1 = Instant::now();
    c.wait_brokers(&all, &all, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let back_ms = t1.elapsed().as_millis();
    println!(
        "measured: killed broker {victim} left Metadata's brokers after {fenced_ms} ms; \
         restarted, it was listed again (registered and unfenced) by every node after {back_ms} ms"
    );

    create_topic(&c.bootstrap(&[victim]), "after-restart", 3, 3)
        .expect("CreateTopics with the restarted broker live");
    let m = wait_topic(&c, &all, "after-restart", 3);
    for (id, p) in m.partitions("after-restart") {
        assert!(p.replicas.contains(&victim), "partition {id}: {p:?}");
    }
    assert!(
        m.partitions("after-restart")
            .values()
            .any(|p| p.leader == victim),
        "the restarted broker leads a new partition: {m:#?}"
    );
    assert_eq!(
        partition_dirs(&c.node(victim).data_dir, "after-restart"),
        vec![0, 1, 2]
    );
}

#[test]
fn controlled_shutdown_moves_leaderships_before_the_broker_exits() {
    let _serial = serial();
    let (mut c, controller) = start_cluster();
    let all = c.ids();
    let topic = "moving";
    create_topic(&c.bootstrap(&all), topic, PARTITIONS, 3).expect("CreateTopics");
    let before = wait_topic(&c, &all, topic, PARTITIONS);
    let victim = *all
        .iter()
        .find(|&&i| i != controller && !before.led_by(topic, i).is_empty())
        .expect("a non-controller broker leading partitions");
    let led = before.led_by(topic, victim);

    let (status, took) = c
        .node(victim)
        .stop(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e:?}"));
    // Straight after the exit, before any session could have expired.
    let m = c.metadata(controller).expect("the controller's Metadata");
    assert!(status.success(), "exit status {status}");
    println!(
        "measured: broker {victim} leading {led:?} exited 0 {} ms after SIGTERM",
        took.as_millis()
    );
    assert!(
        took < SHUTDOWN_BOUND,
        "it took {took:?}: controlled shutdown gave up waiting for the controller"
    );
    assert!(
        c.node(victim).read_tail(64 * 1024).contains("moved=true"),
        "the controller answered should_shut_down before the exit"
    );
    assert!(
        m.led_by(topic, victim).is_empty() && all_led(&m, topic, PARTITIONS),
        "no partition led by {victim} once it exited: {m:#?}"
    );
    check_moved_within_isr(&before, &m, topic, victim);
    assert!(
        !m.brokers().contains(&victim),
        "a broker that shut down is fenced: {m:#?}"
    );
}

#[test]
fn the_controller_s_controlled_shutdown_hands_over_quorum_and_leaderships() {
    let _serial = serial();
    let (mut c, controller) = start_cluster();
    let all = c.ids();
    let topic = "handover";
    create_topic(&c.bootstrap(&all), topic, PARTITIONS, 3).expect("CreateTopics");
    let before = wait_topic(&c, &all, topic, PARTITIONS);
    let led = before.led_by(topic, controller);
    assert!(
        !led.is_empty(),
        "the controller leads partitions: {before:#?}"
    );
    let survivors: Vec<i32> = all.iter().copied().filter(|&i| i != controller).collect();

    let (status, took) = c
        .node(controller)
        .stop(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert!(status.success(), "exit status {status}");
    let t0 = Instant::now();
    let next = c
        .wait_controller(&survivors, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let elected_ms = t0.elapsed().as_millis();
    // The leaderships moved while the old controller was still the controller, so the new
    // one's image has them moved at once, without waiting out a session.
    let m = c.metadata(next).expect("the new controller's Metadata");
    println!(
        "measured: controller {controller} leading {led:?} exited 0 {} ms after SIGTERM; \
         node {next} named controller by both survivors {elected_ms} ms after the exit",
        took.as_millis()
    );
    assert!(
        took < SHUTDOWN_BOUND,
        "it took {took:?}: controlled shutdown gave up waiting for the controller"
    );
    assert!(
        c.node(controller)
            .read_tail(64 * 1024)
            .contains("moved=true"),
        "the controller answered should_shut_down before the exit"
    );
    assert!(
        m.led_by(topic, controller).is_empty() && all_led(&m, topic, PARTITIONS),
        "no partition led by {controller} once it exited: {m:#?}"
    );
    check_moved_within_isr(&before, &m, topic, controller);
    create_topic(&c.bootstrap(&survivors), "after-handover", 2, 2)
        .expect("CreateTopics through the new controller");
    wait_topic(&c, &survivors, "after-handover", 2);
}

#[test]
fn the_whole_cluster_killed_and_restarted_keeps_its_topics() {
    let _serial = serial();
    let (mut c, _) = start_cluster();
    let all = c.ids();
    create_topic(&c.bootstrap(&all), "kept", PARTITIONS, 3).expect("CreateTopics");
    let before = wait_topic(&c, &all, "kept", PARTITIONS);

    for &id in &all {
        c.node(id).kill9();
    }
    for &id in &all {
        c.node(id).spawn();
    }
    let t0 = Instant::now();
    c.wait_controller(&all, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    c.wait_brokers(&all, &all, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let m = wait_topic(&c, &all, "kept", PARTITIONS);
    println!(
        "measured: all three nodes killed and restarted; controller, three brokers and the \
         topic back after {} ms",
        t0.elapsed().as_millis()
    );
    for (id, p) in m.partitions("kept") {
        assert_eq!(
            p.replicas,
            before.partitions("kept")[&id].replicas,
            "partition {id} keeps its replicas"
        );
    }
    // The replayed image lists the brokers as they were; past a session timeout they are
    // listed only if they registered and heartbeat with the new controller.
    std::thread::sleep(SESSION_TIMEOUT + Duration::from_secs(1));
    c.wait_brokers(&all, &all, MARGIN)
        .unwrap_or_else(|e| panic!("{e:?}"));
    wait_topic(&c, &all, "kept", PARTITIONS);
}

#[test]
fn a_manual_assignment_naming_a_fenced_broker_leaves_it_out_of_the_isr_until_it_returns() {
    let _serial = serial();
    let (mut c, controller) = start_cluster();
    let all = c.ids();
    let gone = *all.iter().find(|&&i| i != controller).unwrap();
    let live: Vec<i32> = all.iter().copied().filter(|&i| i != gone).collect();
    let (a, b) = (live[0], live[1]);
    c.node(gone).kill9();
    c.wait_brokers(&live, &live, SESSION_TIMEOUT + MARGIN)
        .unwrap_or_else(|e| panic!("{e:?}"));

    // Kafka's createTopic: the ISR is the active replicas in their order, and the first of
    // them leads; a fenced broker named first does not lead.
    create_topic_assigned(
        &c.bootstrap(&live),
        "manual",
        &[&[gone, a, b], &[b, gone, a]],
    )
    .expect("CreateTopics with a manual assignment");
    let m = wait_topic(&c, &live, "manual", 2);
    let p = m.partitions("manual");
    assert_eq!(
        (p[&0].leader, p[&0].replicas.clone(), p[&0].isr.clone()),
        (a, vec![gone, a, b], vec![a, b]),
        "{m:#?}"
    );
    assert_eq!(
        (p[&1].leader, p[&1].replicas.clone(), p[&1].isr.clone()),
        (b, vec![b, gone, a], vec![b, a]),
        "{m:#?}"
    );
    let prod = producer(&c.bootstrap(&live));
    let (acked, errors) = produce(&prod, "manual", 2, 5, "fenced");
    assert!(
        errors.is_empty(),
        "acks=all with a fenced replica: {errors:?}"
    );
    assert_eq!(
        create_topic_assigned(&c.bootstrap(&live), "all-fenced", &[&[gone]]),
        Err(RDKafkaErrorCode::InvalidReplicaAssignment)
    );

    // Back, it catches up and the leaders take it into the ISR.
    c.node(gone).spawn();
    let t0 = Instant::now();
    c.wait_metadata(
        controller,
        "the returned replica in both ISRs",
        ELECTION,
        |m| m.partitions("manual").values().all(|p| p.isr.len() == 3),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    println!(
        "measured: the restarted broker {gone} joined both ISRs {} ms after its restart",
        t0.elapsed().as_millis()
    );
    let missing = read_back(&c.bootstrap(&live), "manual", 2, &acked);
    assert!(missing.is_empty(), "not read back: {missing:?}");
}

#[test]
fn create_topics_on_any_node_is_created_by_the_controller() {
    let _serial = serial();
    let (c, controller) = start_cluster();
    // A node that is not the controller forwards the request to it (KIP-590).
    for n in &c.nodes {
        let topic = format!("raw-{}", n.id);
        let code = create_topic_raw(n.port, &topic, 1, 1)
            .with_context(|| format!("CreateTopics to node {}", n.id))
            .unwrap();
        assert_eq!(
            code, 0,
            "CreateTopics on node {} (controller {controller})",
            n.id
        );
    }
    let m = c
        .wait_metadata(controller, "the three created topics", MARGIN, |m| {
            c.nodes
                .iter()
                .all(|n| all_led(m, &format!("raw-{}", n.id), 1))
        })
        .unwrap();
    let created: BTreeSet<&String> = m.topics.keys().filter(|t| t.starts_with("raw-")).collect();
    let want: BTreeSet<String> = c.nodes.iter().map(|n| format!("raw-{}", n.id)).collect();
    assert_eq!(
        created,
        want.iter().collect(),
        "one topic per node, no other"
    );
}
