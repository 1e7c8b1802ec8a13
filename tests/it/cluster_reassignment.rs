//! Partition reassignment (KIP-455) on real `strata` processes:
//!
//! - three nodes, a topic with replication factor 2: while an idempotent acks=all producer
//!   keeps writing numbered messages and a consumer reads them, AlterPartitionReassignments
//!   (sent to a node that is not the controller, which forwards it) moves the partition
//!   from its two replicas to the other one and the third node, its leader included. At the
//!   end every acknowledged message has been read exactly once, in order; Metadata on every
//!   node shows the target as replicas with the ISR and the leader within it;
//!   ListPartitionReassignments shows nothing pending; and the replica moved away has
//!   deleted its partition directory;
//! - a move to a node that is down cannot complete: ListPartitionReassignments shows it
//!   pending, with the replicas being added and removed, until a cancellation (null
//!   replicas) puts the original replicas back; a second cancellation is
//!   NO_REASSIGNMENT_IN_PROGRESS, and bad targets get Kafka's codes;
//! - a single node answers both APIs: the only valid target is the node itself.
//!
//! The requests are built and read with Strata's codec (rdkafka's admin client has no
//! reassignment API). The tests run one at a time; each prints what it measured as
//! `measured: ...` lines. Every wait and loop is bounded in time and count.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use strata_protocol::StrBytes;
use strata_protocol::codec;
use strata_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use strata_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use strata_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, ListPartitionReassignmentsRequest,
    RequestKind, ResponseKind, TopicName,
};
use strata_tests::cluster::{Cluster, POLL, create_topic_raw, partition_dirs, round_trip};
use strata_tests::{serial, strata_bin, wait_until};

use crate::admin_client;
use crate::cluster_clients;

/// The bound on the first election and on the brokers' registration.
const ELECTION: Duration = Duration::from_secs(30);
/// The bound on a metadata change once its cause has happened.
const MARGIN: Duration = Duration::from_secs(15);
/// The bound on a whole move: the new replica catches up and joins the ISR.
const MOVE: Duration = Duration::from_secs(60);

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;

/// One partition's AlterPartitionReassignments outcome: `(code, message)`.
type Outcome = (i16, Option<String>);

/// AlterPartitionReassignments v1 of one partition to the node at `port`: the top-level
/// code and the partition's outcome.
fn alter_reassignment(
    port: u16,
    topic: &str,
    partition: i32,
    replicas: Option<&[i32]>,
) -> anyhow::Result<(i16, Outcome)> {
    let body = RequestKind::AlterPartitionReassignments(
        AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(20_000)
            .with_topics(vec![
                ReassignableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_partitions(vec![
                        ReassignablePartition::default()
                            .with_partition_index(partition)
                            .with_replicas(
                                replicas.map(|r| r.iter().copied().map(BrokerId).collect()),
                            ),
                    ]),
            ]),
    );
    let frame = codec::encode_request(
        ApiKey::AlterPartitionReassignments,
        1,
        11,
        "reassign-test",
        &body,
    )?;
    // `round_trip` adds the size prefix again.
    let answer = round_trip(port, &frame[4..])?;
    let r = codec::decode_response(ApiKey::AlterPartitionReassignments, 1, Bytes::from(answer))?;
    anyhow::ensure!(r.correlation_id == 11, "correlation id");
    let ResponseKind::AlterPartitionReassignments(r) = r.body else {
        anyhow::bail!("not an AlterPartitionReassignments answer: {:?}", r.body);
    };
    let p = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| anyhow::anyhow!("no partition in the answer: {r:?}"))?;
    Ok((
        r.error_code,
        (
            p.error_code,
            p.error_message.as_ref().map(|m| m.to_string()),
        ),
    ))
}

/// A pending move as ListPartitionReassignments shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    topic: String,
    partition: i32,
    replicas: Vec<i32>,
    adding: Vec<i32>,
    removing: Vec<i32>,
}

/// ListPartitionReassignments v0 to the node at `port`, for `topic` (or every topic): the
/// top-level code and the pending moves.
fn list_reassignments(
    port: u16,
    topic: Option<(&str, &[i32])>,
) -> anyhow::Result<(i16, Vec<Pending>)> {
    let body = RequestKind::ListPartitionReassignments(
        ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(20_000)
            .with_topics(topic.map(|(t, ps)| {
                vec![
                    ListPartitionReassignmentsTopics::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                        .with_partition_indexes(ps.to_vec()),
                ]
            })),
    );
    let frame = codec::encode_request(
        ApiKey::ListPartitionReassignments,
        0,
        12,
        "reassign-test",
        &body,
    )?;
    let answer = round_trip(port, &frame[4..])?;
    let r = codec::decode_response(ApiKey::ListPartitionReassignments, 0, Bytes::from(answer))?;
    anyhow::ensure!(r.correlation_id == 12, "correlation id");
    let ResponseKind::ListPartitionReassignments(r) = r.body else {
        anyhow::bail!("not a ListPartitionReassignments answer: {:?}", r.body);
    };
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<i32>>();
    let pending = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Pending {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                replicas: ids(&p.replicas),
                adding: ids(&p.adding_replicas),
                removing: ids(&p.removing_replicas),
            })
        })
        .collect();
    Ok((r.error_code, pending))
}

/// Starts three nodes and waits for their controller and for all three brokers.
fn start_cluster(settings: &[(&str, &str)]) -> (Cluster, i32) {
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let c = Cluster::start(3, settings);
    let controller = c.wait_ready(ELECTION);
    (c, controller)
}

/// What the producer thread got acknowledged, and what failed.
#[derive(Default)]
struct Produced {
    /// offset -> message number.
    acked: BTreeMap<i64, u64>,
    errors: Vec<String>,
}

/// An idempotent acks=all producer writing `m-<n>` to partition 0 of `topic`, 20 at a time,
/// until `stop` is set (at most 200000 messages, at most 3 minutes).
fn spawn_producer(
    bootstrap: String,
    topic: String,
    stop: Arc<AtomicBool>,
    produced: Arc<Mutex<Produced>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let p: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", "60000")
            .set("topic.metadata.refresh.interval.ms", "1000")
            .set("retry.backoff.ms", "100")
            .set("linger.ms", "2")
            .create()
            .expect("producer");
        let started = Instant::now();
        let mut n = 0u64;
        admin_client::block(async {
            while !stop.load(Ordering::Relaxed)
                && n < 200_000
                && started.elapsed() < Duration::from_secs(180)
            {
                let mut batch = Vec::new();
                for _ in 0..20 {
                    let value = format!("m-{n}");
                    let record = FutureRecord::<(), _>::to(&topic)
                        .partition(0)
                        .payload(&value);
                    match p.send_result(record) {
                        Ok(f) => batch.push((n, f)),
                        Err((e, _)) => panic!("enqueue {value}: {e}"),
                    }
                    n += 1;
                }
                for (i, f) in batch {
                    let got = tokio::time::timeout(Duration::from_secs(90), f).await;
                    let mut out = produced.lock().unwrap();
                    match got {
                        Ok(Ok(Ok(d))) => {
                            out.acked.insert(d.offset, i);
                        }
                        Ok(Ok(Err((e, _)))) => out.errors.push(format!("m-{i}: {e}")),
                        Ok(Err(_)) => out.errors.push(format!("m-{i}: report dropped")),
                        Err(_) => out.errors.push(format!("m-{i}: no report within 90 s")),
                    }
                }
            }
        });
    })
}

/// A consumer reading partition 0 of `topic` from the start until `stop` is set and it has
/// read past `until` (set once the producer is done), or 4 minutes pass: offset -> value.
fn spawn_consumer(
    bootstrap: String,
    topic: String,
    stop: Arc<AtomicBool>,
    until: Arc<Mutex<Option<i64>>>,
) -> std::thread::JoinHandle<BTreeMap<i64, String>> {
    std::thread::spawn(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "reassignment-reader")
            .set("enable.auto.commit", "false")
            .set("topic.metadata.refresh.interval.ms", "1000")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).expect("assign");
        let mut read = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(240);
        while Instant::now() < deadline {
            if stop.load(Ordering::Relaxed) {
                let end = *until.lock().unwrap();
                if end.is_some_and(|end| read.keys().next_back().is_some_and(|&o| o >= end)) {
                    break;
                }
            }
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    let value =
                        String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                    read.insert(m.offset(), value);
                }
                Some(Err(e)) => eprintln!("consumer: {e}"),
                None => {}
            }
        }
        read
    })
}

#[test]
fn a_partition_moves_with_its_leader_while_clients_produce_and_consume() {
    let _serial = serial();
    let (c, controller) = start_cluster(&[("broker.heartbeat.interval.ms", "500")]);
    let topic = "moving";
    assert_eq!(
        create_topic_raw(c.port(controller), topic, 1, 2).expect("CreateTopics"),
        NONE
    );
    let before = c
        .wait_metadata(controller, "the topic led with 2 in sync", MARGIN, |m| {
            m.partitions(topic)
                .get(&0)
                .is_some_and(|p| p.leader >= 0 && p.isr.len() == 2)
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    let old = before.partitions(topic)[&0].clone();
    let old_leader = old.leader;
    let kept = *old.replicas.iter().find(|&&r| r != old_leader).unwrap();
    let added = *c
        .ids()
        .iter()
        .find(|id| !old.replicas.contains(id))
        .unwrap();
    // The kept replica first: it becomes the preferred leader, and the old leader leaves.
    let target = vec![kept, added];
    println!(
        "measured: moving {topic}-0 from {:?} (leader {old_leader}) to {target:?}",
        old.replicas
    );

    let stop = Arc::new(AtomicBool::new(false));
    let produced = Arc::new(Mutex::new(Produced::default()));
    let until = Arc::new(Mutex::new(None));
    let bootstrap = c.bootstrap(&c.ids());
    let producer = spawn_producer(
        bootstrap.clone(),
        topic.into(),
        stop.clone(),
        produced.clone(),
    );
    let consumer = spawn_consumer(bootstrap.clone(), topic.into(), stop.clone(), until.clone());
    // Enough of a log that the new replica has something to catch up on.
    wait_until(
        "1000 messages acknowledged before the move",
        MARGIN * 4,
        POLL,
        || Ok(produced.lock().unwrap().acked.len() >= 1000),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));

    // To a node that is not the controller: it forwards the request.
    let via = *c.ids().iter().find(|&&id| id != controller).unwrap();
    let started = Instant::now();
    let (top, (code, message)) = alter_reassignment(c.port(via), topic, 0, Some(&target))
        .expect("AlterPartitionReassignments");
    assert_eq!((top, code), (NONE, NONE), "{message:?}");
    let acked_at_start = produced.lock().unwrap().acked.len();

    // Until every node shows the target and nothing is pending.
    let mut seen_pending = None;
    let mut polls = 0u32;
    wait_until("the move completed on every node", MOVE, POLL, || {
        polls += 1;
        let (code, pending) = list_reassignments(c.port(via), None)?;
        anyhow::ensure!(code == NONE, "ListPartitionReassignments: {code}");
        if let Some(p) = pending.first() {
            seen_pending.get_or_insert_with(|| p.clone());
            return Ok(false);
        }
        for id in c.ids() {
            let p = c.metadata(id)?.partitions(topic).get(&0).cloned();
            if p.is_none_or(|p| p.replicas != target || p.isr.len() != 2) {
                return Ok(false);
            }
        }
        Ok(true)
    })
    .unwrap_or_else(|e| panic!("{e:?}"));
    let took = started.elapsed();
    println!(
        "measured: the move took {took:?} ({polls} polls, {} messages acknowledged meanwhile)",
        produced.lock().unwrap().acked.len() - acked_at_start
    );
    if let Some(p) = &seen_pending {
        println!("measured: pending as listed: {p:?}");
        assert_eq!(p.adding, vec![added]);
        assert_eq!(p.removing, vec![old_leader]);
        assert_eq!(p.replicas, vec![kept, added, old_leader]);
    }

    // Keep the clients going on the new replicas for a while.
    let acked_after_move = produced.lock().unwrap().acked.len();
    wait_until(
        "200 more messages acknowledged after the move",
        MARGIN * 2,
        POLL,
        || Ok(produced.lock().unwrap().acked.len() >= acked_after_move + 200),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer thread");
    let produced = std::mem::take(&mut *produced.lock().unwrap());
    *until.lock().unwrap() = produced.acked.keys().next_back().copied();
    let read = consumer.join().expect("consumer thread");

    // Every acknowledged message read, exactly once and in order.
    assert!(
        produced.errors.is_empty(),
        "failed sends: {:?}",
        produced.errors
    );
    let missing: Vec<_> = produced
        .acked
        .iter()
        .filter(|(o, n)| read.get(o) != Some(&format!("m-{n}")))
        .take(10)
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not read as sent: {missing:?}"
    );
    let numbers: Vec<u64> = read
        .values()
        .map(|v| {
            v.strip_prefix("m-")
                .and_then(|n| n.parse().ok())
                .expect("a numbered message")
        })
        .collect();
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "read out of order or twice"
    );
    println!(
        "measured: {} messages acknowledged, {} read, in order, none twice",
        produced.acked.len(),
        read.len()
    );
    // A fresh reader through every node finds them all again (on the new replicas only).
    let want: BTreeMap<(i32, i64), String> = produced
        .acked
        .iter()
        .map(|(o, n)| ((0, *o), format!("m-{n}")))
        .collect();
    let wrong = cluster_clients::read_back(&bootstrap, topic, 1, &want);
    assert!(
        wrong.is_empty(),
        "read back: {:?}",
        &wrong[..wrong.len().min(10)]
    );

    // The final state everywhere.
    for id in c.ids() {
        let p = c.metadata(id).expect("Metadata").partitions(topic)[&0].clone();
        assert_eq!(p.replicas, target, "node {id}");
        assert!(p.isr.iter().all(|r| target.contains(r)), "node {id}: {p:?}");
        assert!(
            target.contains(&p.leader) && p.leader != old_leader,
            "node {id}: {p:?}"
        );
    }
    let (code, pending) =
        list_reassignments(c.port(controller), Some((topic, &[0]))).expect("List");
    assert_eq!((code, pending), (NONE, vec![]));
    // The replica moved away has deleted its data; the new one holds it.
    let gone_dir = c
        .nodes
        .iter()
        .find(|n| n.id == old_leader)
        .unwrap()
        .data_dir
        .clone();
    let t = Instant::now();
    wait_until(
        "the removed replica's directory is gone",
        MARGIN,
        POLL,
        || Ok(partition_dirs(&gone_dir, topic).is_empty()),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    println!(
        "measured: the removed replica's directory was gone {:?} after the check began",
        t.elapsed()
    );
    let added_dir = c
        .nodes
        .iter()
        .find(|n| n.id == added)
        .unwrap()
        .data_dir
        .clone();
    assert_eq!(partition_dirs(&added_dir, topic), vec![0]);
}

#[test]
fn a_move_to_a_node_that_is_down_stays_pending_until_cancelled() {
    let _serial = serial();
    let (mut c, controller) = start_cluster(&[
        ("broker.heartbeat.interval.ms", "500"),
        ("broker.session.timeout.ms", "3000"),
    ]);
    // A node that is not the controller goes down and is fenced; the topic is then
    // placed on the other two.
    let down = *c.ids().iter().find(|&&id| id != controller).unwrap();
    c.node(down).kill9();
    let live: Vec<i32> = c.ids().into_iter().filter(|&id| id != down).collect();
    c.wait_brokers(&live, &live, MARGIN)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let topic = "stuck";
    let port = c.port(controller);
    assert_eq!(
        create_topic_raw(port, topic, 1, 2).expect("CreateTopics"),
        NONE
    );
    let m = c
        .wait_metadata(controller, "the topic led with 2 in sync", MARGIN, |m| {
            m.partitions(topic)
                .get(&0)
                .is_some_and(|p| p.leader >= 0 && p.isr.len() == 2)
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    let original = m.partitions(topic)[&0].replicas.clone();
    // Replace the second replica with the node that is down: registered, so valid, but
    // it cannot catch up.
    let target = vec![original[0], down];
    let other = *live.iter().find(|&&id| id != controller).unwrap();
    let (top, (code, message)) = alter_reassignment(c.port(other), topic, 0, Some(&target))
        .expect("AlterPartitionReassignments");
    assert_eq!((top, code), (NONE, NONE), "{message:?}");

    // Pending, as long as we look (3 s), through either live node.
    let t = Instant::now();
    let mut looks = 0;
    while t.elapsed() < Duration::from_secs(3) && looks < 100 {
        looks += 1;
        for &id in &live {
            let (code, pending) = list_reassignments(c.port(id), None).expect("List");
            assert_eq!(code, NONE);
            assert_eq!(
                pending,
                vec![Pending {
                    topic: topic.into(),
                    partition: 0,
                    replicas: vec![original[0], down, original[1]],
                    adding: vec![down],
                    removing: vec![original[1]],
                }],
                "look {looks} via node {id}"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let p = c.metadata(controller).expect("Metadata").partitions(topic)[&0].clone();
    assert_eq!(p.replicas, vec![original[0], down, original[1]]);
    assert!(!p.isr.contains(&down), "{p:?}");
    println!(
        "measured: still pending after {:?} ({looks} looks)",
        t.elapsed()
    );

    // Cancel: back to the original replicas.
    let started = Instant::now();
    let (top, (code, message)) = alter_reassignment(c.port(other), topic, 0, None).expect("cancel");
    assert_eq!((top, code), (NONE, NONE), "{message:?}");
    for &id in &live {
        c.wait_metadata(id, "the original replicas back", MARGIN, |m| {
            m.partitions(topic)
                .get(&0)
                .is_some_and(|p| p.replicas == original)
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    }
    println!(
        "measured: the cancellation reached both live nodes in {:?}",
        started.elapsed()
    );
    let (code, pending) = list_reassignments(port, None).expect("List");
    assert_eq!((code, pending), (NONE, vec![]));
    let (_, (code, _)) = alter_reassignment(port, topic, 0, None).expect("cancel again");
    assert_eq!(code, NO_REASSIGNMENT_IN_PROGRESS);
    let (_, (code, message)) =
        alter_reassignment(port, topic, 0, Some(&[original[0], 99])).expect("bad target");
    assert_eq!(code, INVALID_REPLICA_ASSIGNMENT);
    assert_eq!(
        message.as_deref(),
        Some(
            "The manual partition assignment includes broker 99, but no such broker is registered."
        )
    );
    let (_, (code, _)) =
        alter_reassignment(port, "no-such-topic", 0, Some(&[original[0]])).expect("unknown topic");
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION);
    let (_, (code, _)) =
        alter_reassignment(port, topic, 0, Some(&[original[0], original[0]])).expect("duplicate");
    assert_eq!(code, INVALID_REPLICA_ASSIGNMENT);
}

#[test]
fn a_single_node_can_only_reassign_to_itself() {
    let _serial = serial();
    let b = strata_tests::Broker::start(&[]).expect("start strata");
    let port = b.port();
    assert_eq!(
        create_topic_raw(port, "solo", 1, 1).expect("CreateTopics"),
        NONE
    );
    // The node's id is 1 (the default): the same target is no change at all.
    let (top, (code, message)) =
        alter_reassignment(port, "solo", 0, Some(&[1])).expect("same target");
    assert_eq!((top, code), (NONE, NONE), "{message:?}");
    let (_, (code, message)) =
        alter_reassignment(port, "solo", 0, Some(&[1, 2])).expect("another broker");
    assert_eq!(code, INVALID_REPLICA_ASSIGNMENT);
    assert_eq!(
        message.as_deref(),
        Some(
            "The manual partition assignment includes broker 2, but no such broker is registered."
        )
    );
    let (_, (code, _)) = alter_reassignment(port, "solo", 0, None).expect("cancel");
    assert_eq!(code, NO_REASSIGNMENT_IN_PROGRESS);
    let (_, (code, _)) =
        alter_reassignment(port, "solo", 7, Some(&[1])).expect("unknown partition");
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION);
    let (code, pending) = list_reassignments(port, None).expect("List");
    assert_eq!((code, pending), (NONE, vec![]));
    let (code, pending) = list_reassignments(port, Some(("solo", &[0, 5]))).expect("List named");
    assert_eq!((code, pending), (NONE, vec![]));
}

#[test]
fn dedicated_brokers_forward_reassignments_to_the_controller_listener() {
    let _serial = serial();
    // One dedicated controller (node 1) and three dedicated brokers (2, 3, 4).
    let c = Cluster::start_dedicated(1, 3, &[("broker.heartbeat.interval.ms", "500")]);
    let brokers = [2, 3, 4];
    c.wait_brokers(&brokers, &brokers, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let topic = "dedicated";
    assert_eq!(
        create_topic_raw(c.port(2), topic, 1, 2).expect("CreateTopics"),
        NONE
    );
    let m = c
        .wait_metadata(2, "the topic led with 2 in sync", MARGIN, |m| {
            m.partitions(topic)
                .get(&0)
                .is_some_and(|p| p.leader >= 0 && p.isr.len() == 2)
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    let old = m.partitions(topic)[&0].clone();
    let added = *brokers.iter().find(|b| !old.replicas.contains(b)).unwrap();
    // Replace the leader with the third broker.
    let kept = *old.replicas.iter().find(|&&r| r != old.leader).unwrap();
    let target = vec![added, kept];
    let started = Instant::now();
    let (top, (code, message)) = alter_reassignment(c.port(2), topic, 0, Some(&target))
        .expect("AlterPartitionReassignments");
    assert_eq!((top, code), (NONE, NONE), "{message:?}");
    for b in brokers {
        c.wait_metadata(b, "the target in sync", MOVE, |m| {
            m.partitions(topic).get(&0).is_some_and(|p| {
                p.replicas == target && p.isr.len() == 2 && target.contains(&p.leader)
            })
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    }
    println!(
        "measured: dedicated brokers: {topic}-0 moved from {:?} to {target:?} in {:?}",
        old.replicas,
        started.elapsed()
    );
    let (code, pending) = list_reassignments(c.port(3), None).expect("List via a broker");
    assert_eq!((code, pending), (NONE, vec![]));
    // An admin client talking to the controller listener directly (KIP-919).
    let controller_port = c.nodes.iter().find(|n| n.id == 1).unwrap().controller_port;
    let (code, pending) =
        list_reassignments(controller_port, Some((topic, &[0]))).expect("List at the controller");
    assert_eq!((code, pending), (NONE, vec![]));
    let (_, (code, _)) = alter_reassignment(controller_port, topic, 0, Some(&[1, kept]))
        .expect("a controller as a replica");
    // The controller never registered as a broker, so it cannot hold a replica.
    assert_eq!(code, INVALID_REPLICA_ASSIGNMENT);
    let gone = c
        .nodes
        .iter()
        .find(|n| n.id == old.leader)
        .unwrap()
        .data_dir
        .clone();
    wait_until(
        "the removed replica's directory is gone",
        MARGIN,
        POLL,
        || Ok(partition_dirs(&gone, topic).is_empty()),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
}
