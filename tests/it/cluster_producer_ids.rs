//! Producer ids in a three-node cluster (KIP-730), against real `strata` processes on
//! 127.0.0.1, each a combined broker and controller with its own config file and data
//! directory:
//!
//! - every node answers InitProducerId, the two that are not the active controller with a
//!   block they got from it over AllocateProducerIds: each node's first id starts a block
//!   of 1000 of its own;
//! - an idempotent librdkafka producer bootstrapped at each node alone produces to a topic
//!   replicated on all three, and the partition's leader reports three distinct producer
//!   ids (DescribeProducers), none of them one handed out before;
//! - AllocateProducerIds on a controller listener answers NOT_CONTROLLER on the two nodes
//!   that are not the active controller, and STALE_BROKER_EPOCH on the one that is for an
//!   epoch that is not the broker's registration (or a broker that never registered);
//! - after the active controller is killed (-9) and restarted, the new controller goes on
//!   from the last committed block: the restarted node's first id starts the next block.
//!
//! Raw frames for InitProducerId, DescribeProducers and AllocateProducerIds, independent of
//! Strata's codec. Every wait is bounded.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rdkafka::admin::{AdminClient, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use strata_tests::wire::{self, header, recv, send};
use strata_tests::{free_port, read_tail, serial, strata_bin};

use crate::admin_client::{admin_opts, block};

/// The most any one wait of these tests takes.
const WAIT: Duration = Duration::from_secs(60);
/// A single client request's bound.
const REQUEST: Duration = Duration::from_secs(10);

/// Kafka's error codes the tests expect.
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_CONTROLLER: i16 = 41;
const STALE_BROKER_EPOCH: i16 = 77;

/// One node: its config, listeners and process.
struct Node {
    id: i32,
    config: PathBuf,
    plaintext: u16,
    controller: u16,
    stderr: PathBuf,
    /// `None` while killed.
    child: Option<Child>,
}

impl Node {
    /// Starts the process (again), its output appended to `stderr`.
    fn spawn(&mut self) {
        let out = File::options()
            .create(true)
            .append(true)
            .open(&self.stderr)
            .unwrap();
        let child = Command::new(strata_bin())
            .arg(&self.config)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn strata (build it with `cargo build --release --bin strata`)");
        self.child = Some(child);
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Three combined nodes; killed on drop, their logs printed when a test fails.
struct Cluster {
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16)> = (0..3)
            .map(|_| (free_port().unwrap(), free_port().unwrap()))
            .collect();
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, (_, c))| format!("{}@127.0.0.1:{c}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for (i, &(plaintext, controller)) in ports.iter().enumerate() {
            let id = i as i32 + 1;
            let config = dir.path().join(format!("node{id}.properties"));
            writeln!(
                File::create(&config).unwrap(),
                "process.roles=broker,controller\n\
                 node.id={id}\n\
                 cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n\
                 listeners=PLAINTEXT://127.0.0.1:{plaintext},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{plaintext}\n\
                 controller.listener.names=CONTROLLER\n\
                 controller.quorum.voters={voters}\n\
                 log.dirs={}",
                dir.path().join(format!("node{id}")).display()
            )
            .unwrap();
            let mut node = Node {
                id,
                config,
                plaintext,
                controller,
                stderr: dir.path().join(format!("node{id}.log")),
                child: None,
            };
            node.spawn();
            nodes.push(node);
        }
        Cluster { nodes, _dir: dir }
    }

    fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.plaintext))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill9();
        }
        if std::thread::panicking() {
            for n in &self.nodes {
                eprintln!("--- node {} ---\n{}", n.id, read_tail(&n.stderr, 8 * 1024));
            }
        }
    }
}

/// Polls `f` every 200 ms until it returns `Some`, at most [`WAIT`]; `what` names the wait
/// and the last value seen in the panic.
fn poll<T, L: std::fmt::Debug>(what: &str, mut f: impl FnMut() -> Result<T, L>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        let last = match f() {
            Ok(v) => return v,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "{what}: not within {WAIT:?}; last {last:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Creates `topic` (one partition on all three nodes) once the three brokers are
/// registered and unfenced, and waits until every node serves its metadata with a leader.
fn create_replicated_topic(c: &Cluster, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap())
        .create()
        .expect("admin client");
    poll("CreateTopics with replication factor 3", || {
        let t = NewTopic::new(topic, 1, TopicReplication::Fixed(3));
        // INVALID_REPLICATION_FACTOR until the three brokers are unfenced, NOT_CONTROLLER
        // while the quorum elects.
        match block(admin.create_topics(&[t], &admin_opts(REQUEST))) {
            Ok(mut r) => match r.remove(0) {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => Ok(()),
                Err((_, code)) => Err(format!("{code:?}")),
            },
            Err(e) => Err(e.to_string()),
        }
    });
    for n in &c.nodes {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", format!("127.0.0.1:{}", n.plaintext))
            .create()
            .expect("metadata client");
        poll(&format!("node {} serves {topic}", n.id), || {
            let md = consumer
                .fetch_metadata(Some(topic), REQUEST)
                .map_err(|e| e.to_string())?;
            match md.topics().first() {
                Some(t)
                    if t.error().is_none()
                        && t.partitions().len() == 1
                        && t.partitions()[0].leader() >= 1
                        && t.partitions()[0].replicas().len() == 3 =>
                {
                    Ok(())
                }
                other => Err(format!("{:?}", other.map(|t| t.error()))),
            }
        });
    }
}

/// The node that leads `topic` partition 0, as the cluster's metadata names it.
fn leader_of<'a>(c: &'a Cluster, topic: &str) -> &'a Node {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap())
        .create()
        .expect("metadata client");
    let md = consumer
        .fetch_metadata(Some(topic), REQUEST)
        .expect("metadata");
    let leader = md.topics()[0].partitions()[0].leader();
    c.nodes
        .iter()
        .find(|n| n.id == leader)
        .unwrap_or_else(|| panic!("leader {leader} is not a node"))
}

/// One request on a fresh connection to `port` (refused while the node starts); the node
/// must answer.
fn roundtrip(port: u16, frame: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).context("connect")?;
    s.set_read_timeout(Some(REQUEST))?;
    send(&mut s, frame);
    recv(&mut s).context("the node closed the connection instead of answering")
}

/// InitProducerId v0 (idempotent) on a node's client listener, retried while it answers
/// COORDINATOR_NOT_AVAILABLE (the broker not registered yet); the id and epoch.
fn init_producer_id(node: &Node) -> (i64, i16) {
    poll(&format!("InitProducerId on node {}", node.id), || {
        let r = roundtrip(node.plaintext, &wire::init_producer_id_request(5, None))
            .map_err(|e| e.to_string())?;
        match wire::init_producer_id_result(&r) {
            (0, id, epoch) => Ok((id, epoch)),
            (COORDINATOR_NOT_AVAILABLE, ..) => Err("COORDINATOR_NOT_AVAILABLE".to_owned()),
            (code, ..) => panic!("InitProducerId on node {}: error {code}", node.id),
        }
    })
}

/// A reader over a flexible-version response.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> anyhow::Result<[u8; N]> {
        ensure!(self.0.len() >= N, "response truncated");
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        Ok(head.try_into().expect("N bytes"))
    }
    fn uvarint(&mut self) -> anyhow::Result<u64> {
        let mut v = 0u64;
        for shift in (0..35).step_by(7) {
            let [b] = self.take::<1>()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        anyhow::bail!("varint too long")
    }
    fn skip_compact_bytes(&mut self) -> anyhow::Result<()> {
        let n = usize::try_from(self.uvarint()?.saturating_sub(1))?;
        ensure!(self.0.len() >= n, "response truncated");
        self.0 = &self.0[n..];
        Ok(())
    }
    fn tagged(&mut self) -> anyhow::Result<()> {
        ensure!(self.uvarint()? == 0, "unexpected tagged fields");
        Ok(())
    }
}

/// DescribeProducers v0 (flexible, KIP-664) for `topic` partition 0 on a node's client
/// listener: the error code and the active producer ids.
fn describe_producers(port: u16, topic: &str) -> anyhow::Result<(i16, Vec<i64>)> {
    let mut frame = header(61, 0, 11);
    frame.push(0); // request header v2: no tagged fields
    frame.push(2); // topics: one
    frame.push(u8::try_from(topic.len() + 1)?);
    frame.extend_from_slice(topic.as_bytes());
    frame.push(2); // partition indexes: one
    frame.extend_from_slice(&0i32.to_be_bytes());
    frame.push(0); // topic tagged fields
    frame.push(0); // request tagged fields
    let r = roundtrip(port, &frame)?;
    let mut c = Cursor(&r);
    ensure!(i32::from_be_bytes(c.take()?) == 11, "correlation id");
    c.tagged()?; // response header v1
    c.take::<4>()?; // throttle
    ensure!(c.uvarint()? == 2, "one topic expected");
    c.skip_compact_bytes()?; // name
    ensure!(c.uvarint()? == 2, "one partition expected");
    ensure!(i32::from_be_bytes(c.take()?) == 0, "partition index");
    let code = i16::from_be_bytes(c.take()?);
    c.skip_compact_bytes()?; // error message
    let mut ids = Vec::new();
    for _ in 0..c.uvarint()?.saturating_sub(1) {
        ids.push(i64::from_be_bytes(c.take()?));
        // epoch, last sequence, last timestamp, coordinator epoch, txn start offset
        c.take::<{ 4 + 4 + 8 + 4 + 8 }>()?;
        c.tagged()?;
    }
    Ok((code, ids))
}

/// AllocateProducerIds v0 (flexible; request header v2) on a node's controller listener:
/// (error code, producer id start, producer id length).
fn allocate_producer_ids(
    port: u16,
    broker_id: i32,
    broker_epoch: i64,
) -> anyhow::Result<(i16, i64, i32)> {
    let mut frame = header(67, 0, 21);
    frame.push(0); // header tags
    frame.extend_from_slice(&broker_id.to_be_bytes());
    frame.extend_from_slice(&broker_epoch.to_be_bytes());
    frame.push(0); // body tags
    let r = roundtrip(port, &frame)?;
    let mut c = Cursor(&r);
    ensure!(i32::from_be_bytes(c.take()?) == 21, "correlation id");
    c.tagged()?; // response header v1
    c.take::<4>()?; // throttle
    let code = i16::from_be_bytes(c.take()?);
    let start = i64::from_be_bytes(c.take()?);
    let len = i32::from_be_bytes(c.take()?);
    c.tagged()?;
    ensure!(c.0.is_empty(), "trailing bytes");
    Ok((code, start, len))
}

#[test]
fn every_node_hands_out_producer_ids_from_a_block_of_its_own() {
    let _serial = serial();
    let c = Cluster::start();
    let topic = "producer-ids";
    create_replicated_topic(&c, topic);

    // Each node's first InitProducerId takes the first id of a fresh block: the controller
    // allocates one per node, in process for itself and over AllocateProducerIds for the
    // other two.
    let mut raw = BTreeSet::new();
    for n in &c.nodes {
        let (id, epoch) = init_producer_id(n);
        assert_eq!(epoch, 0);
        assert_eq!(
            id % 1000,
            0,
            "node {} starts a block of its own: {id}",
            n.id
        );
        assert!(raw.insert(id), "node {} repeats id {id}: {raw:?}", n.id);
    }

    // An idempotent librdkafka producer bootstrapped at each node alone. librdkafka sends
    // InitProducerId to any broker it is connected to, not necessarily the bootstrap one,
    // so which node serves it is up to the client: the raw requests above are what pin
    // each node.
    for n in &c.nodes {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", format!("127.0.0.1:{}", n.plaintext))
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", "30000")
            .create()
            .expect("producer");
        let deliveries: Vec<_> = (0..20)
            .map(|i| {
                let key = format!("node{}-{i}", n.id);
                producer
                    .send_result(FutureRecord::to(topic).key(&key).payload(&key))
                    .unwrap_or_else(|(e, _)| panic!("enqueue: {e}"))
            })
            .collect();
        for (i, d) in deliveries.into_iter().enumerate() {
            match block(d) {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => panic!("node {} message {i}: {e}", n.id),
                Err(_) => panic!("node {} message {i}: delivery report lost", n.id),
            }
        }
        match producer.flush(REQUEST) {
            Ok(()) | Err(KafkaError::Flush(RDKafkaErrorCode::NoError)) => {}
            Err(e) => panic!("flush: {e}"),
        }
    }

    // The partition's leader lists one producer per node's client: three distinct ids, none
    // handed out before (the raw ids above produced nothing, so they are not listed).
    let leader = leader_of(&c, topic);
    let producers =
        poll(
            "the partition leader answers DescribeProducers",
            || match describe_producers(leader.plaintext, topic) {
                Ok((0, ids)) => Ok(ids),
                Ok((code, _)) => Err(format!("error {code}")),
                Err(e) => Err(e.to_string()),
            },
        );
    eprintln!("first ids per node {raw:?}; the producers' ids {producers:?}");
    let distinct: BTreeSet<i64> = producers.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        3,
        "three producers with distinct ids: {producers:?}"
    );
    assert!(
        distinct.is_disjoint(&raw),
        "no id handed out twice: {distinct:?} and {raw:?}"
    );
}

/// Probes AllocateProducerIds on every controller listener until exactly one node is the
/// active controller: it answers STALE_BROKER_EPOCH for an epoch that is not the broker's
/// registration and for a broker that never registered (Kafka's checkBrokerEpoch), the
/// others NOT_CONTROLLER. Any other answer fails the test. Returns that node's id.
fn active_controller(c: &Cluster) -> i32 {
    poll("one active controller", || {
        let mut answers: Vec<(i32, i16, i16)> = Vec::new();
        for n in c.nodes.iter().filter(|n| n.child.is_some()) {
            // No answer yet (a node still starting) is waited for, never a pass.
            let stale = allocate_producer_ids(n.controller, 1, -5).map_err(|e| e.to_string())?;
            let unknown = allocate_producer_ids(n.controller, 99, 0).map_err(|e| e.to_string())?;
            answers.push((n.id, stale.0, unknown.0));
        }
        for &(id, stale, unknown) in &answers {
            assert!(
                [stale, unknown]
                    .iter()
                    .all(|&e| e == NOT_CONTROLLER || e == STALE_BROKER_EPOCH),
                "node {id}: {answers:?}"
            );
        }
        let controllers: Vec<i32> = answers
            .iter()
            .filter(|a| a.1 == STALE_BROKER_EPOCH && a.2 == STALE_BROKER_EPOCH)
            .map(|a| a.0)
            .collect();
        let others = answers
            .iter()
            .filter(|a| a.1 == NOT_CONTROLLER && a.2 == NOT_CONTROLLER)
            .count();
        match controllers[..] {
            [id] if others + 1 == answers.len() => Ok(id),
            _ => Err(format!("{answers:?}")),
        }
    })
}

#[test]
fn allocate_producer_ids_answers_not_controller_off_the_active_controller() {
    let _serial = serial();
    let c = Cluster::start();
    // Once the cluster serves a topic the quorum has a leader and it stays put.
    create_replicated_topic(&c, "settled");
    let controller = active_controller(&c);
    // A refusal hands out nothing.
    for n in &c.nodes {
        let (code, start, len) =
            allocate_producer_ids(n.controller, 99, 0).expect("AllocateProducerIds is answered");
        let expected = if n.id == controller {
            STALE_BROKER_EPOCH
        } else {
            NOT_CONTROLLER
        };
        assert_eq!(code, expected, "node {}", n.id);
        assert_eq!((start, len), (0, 0), "node {}", n.id);
    }
}

#[test]
fn blocks_continue_after_the_controller_fails_over() {
    let _serial = serial();
    let mut c = Cluster::start();
    let mut first = BTreeSet::new();
    for n in &c.nodes {
        first.insert(init_producer_id(n).0);
    }
    assert_eq!(
        first.iter().copied().collect::<Vec<_>>(),
        [0, 1000, 2000],
        "three blocks"
    );

    // kill -9 the active controller and start it again: a new process has no block, and
    // the controller the survivors elect continues after the last committed block.
    let old = active_controller(&c);
    let node = c.nodes.iter_mut().find(|n| n.id == old).unwrap();
    node.kill9();
    node.spawn();
    let node = c.nodes.iter().find(|n| n.id == old).unwrap();
    let (id, epoch) = init_producer_id(node);
    assert_eq!(epoch, 0);
    // From the block after the last committed one; not necessarily its first id (a CI run
    // under load got 3001, most likely because an attempt the test gave up on while the
    // restarted node was slow took 3000).
    assert!(
        (3000..4000).contains(&id),
        "node {old} after its restart: {id} is not from the next block"
    );
    // The two that kept running still hand out from their own blocks.
    for n in c.nodes.iter().filter(|n| n.id != old) {
        let (id, _) = init_producer_id(n);
        assert!(
            first.iter().any(|&b| b < id && id < b + 1000),
            "node {}: {id} continues its block {first:?}",
            n.id
        );
    }
}
