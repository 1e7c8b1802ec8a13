//! Controller-bound requests sent to a node that is not the active controller are forwarded
//! to it (KIP-590), on a three-node combined cluster of real `strata` processes:
//!
//! - the rdkafka admin client, told to send to the non-controller (`AdminOptions::broker_id`),
//!   creates a topic, adds partitions, alters its configs and deletes it;
//! - IncrementalAlterConfigs (which the rdkafka crate does not expose) sent in a raw frame
//!   to the non-controller is applied, and so are CreateTopics v0 and DeleteTopics v0 (the
//!   versions Kafka 4.0 removed), answered in their own layout;
//! - an rdkafka producer bootstrapped only on the non-controller produces to a topic that
//!   does not exist yet (auto-created through the controller), and a consumer bootstrapped
//!   there reads it back; an invalid name is refused at once;
//! - after the controller is killed with SIGKILL, a node that forwarded to it forwards to
//!   the newly elected controller.
//!
//! Without forwarding each of these answers NOT_CONTROLLER. The active controller is found
//! through Metadata's controller id. The tests run one at a time (nine processes at once on
//! a small shared machine can miss heartbeats and fence brokers). Every wait is bounded.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::{
    AdminClient, AlterConfig, NewPartitions, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use strata_protocol::StrBytes;
use strata_protocol::codec;
use strata_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use strata_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, RequestKind, ResponseKind,
};
use strata_tests::{free_port, read_tail, serial, strata_bin};

use crate::admin_client::{admin_opts, block};

/// The most any one wait of this test takes.
const WAIT: Duration = Duration::from_secs(60);
/// rdkafka admin operation and request timeout.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(20);

/// One node: its client port and process.
struct Node {
    id: i32,
    port: u16,
    stderr: PathBuf,
    child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three combined nodes; prints every node's log when a test fails.
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
        for (i, (plain, ctrl)) in ports.iter().enumerate() {
            let id = i as i32 + 1;
            let config = dir.path().join(format!("node{id}.properties"));
            let data = dir.path().join(format!("node{id}"));
            fs::write(
                &config,
                format!(
                    "process.roles=broker,controller\n\
                     node.id={id}\n\
                     cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n\
                     listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{ctrl}\n\
                     advertised.listeners=PLAINTEXT://127.0.0.1:{plain}\n\
                     controller.listener.names=CONTROLLER\n\
                     controller.quorum.voters={voters}\n\
                     auto.create.topics.enable=true\n\
                     num.partitions=1\n\
                     log.dirs={}\n",
                    data.display()
                ),
            )
            .unwrap();
            let stderr = dir.path().join(format!("node{id}.log"));
            let out = File::create(&stderr).unwrap();
            let child = Command::new(strata_bin())
                .arg(&config)
                .env("NO_COLOR", "1")
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .expect("spawn strata (build it with `cargo build --release --bin strata`)");
            nodes.push(Node {
                id,
                port: *plain,
                stderr,
                child,
            });
        }
        Cluster { nodes, _dir: dir }
    }

    /// Waits until every node lists the three brokers and names the same controller;
    /// returns (controller, a node that is not the controller).
    fn controller_and_follower(&self) -> (&Node, &Node) {
        let deadline = Instant::now() + WAIT;
        loop {
            let seen: Vec<Option<(usize, i32)>> = self
                .nodes
                .iter()
                .map(|n| {
                    raw_metadata(n.port, None)
                        .ok()
                        .map(|m| (m.brokers, m.controller))
                })
                .collect();
            if let Some(Some((3, controller))) = seen.first().copied()
                && controller > 0
                && seen.iter().all(|s| *s == Some((3, controller)))
            {
                let leader = self.nodes.iter().find(|n| n.id == controller).unwrap();
                let follower = self.nodes.iter().find(|n| n.id != controller).unwrap();
                return (leader, follower);
            }
            assert!(
                Instant::now() < deadline,
                "no agreed controller with three brokers: {seen:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until every node in `alive` names the same controller, one of them; returns it.
    fn agreed_controller(&self, alive: &[i32]) -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            let seen: Vec<Option<i32>> = self
                .nodes
                .iter()
                .filter(|n| alive.contains(&n.id))
                .map(|n| raw_metadata(n.port, None).ok().map(|m| m.controller))
                .collect();
            if let Some(Some(controller)) = seen.first().copied()
                && alive.contains(&controller)
                && seen.iter().all(|s| *s == Some(controller))
            {
                return controller;
            }
            assert!(
                Instant::now() < deadline,
                "{alive:?} never agreed on a controller among them: {seen:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn node(&self, id: i32) -> &Node {
        self.nodes.iter().find(|n| n.id == id).unwrap()
    }

    fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("--- node {} ---\n{}", n.id, read_tail(&n.stderr, 8 * 1024)))
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
    }
}

/// What a raw Metadata v4 answer says: the broker count, the controller id, and the error
/// code of the one topic asked for (when one was).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RawMetadata {
    brokers: usize,
    controller: i32,
    topic_error: Option<i16>,
}

/// Metadata v4 in raw frames, independent of Strata's codec: no topics, or `topic` with
/// auto-creation allowed.
fn raw_metadata(port: u16, topic: Option<&str>) -> std::io::Result<RawMetadata> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    // Header v1: api key 3, version 4, correlation id 1, client id "t".
    let mut req = vec![0, 3, 0, 4, 0, 0, 0, 1, 0, 1, b't'];
    match topic {
        None => req.extend_from_slice(&0i32.to_be_bytes()),
        Some(t) => {
            req.extend_from_slice(&1i32.to_be_bytes());
            req.extend_from_slice(&(t.len() as i16).to_be_bytes());
            req.extend_from_slice(t.as_bytes());
        }
    }
    req.push(1); // allow_auto_topic_creation
    let mut frame = (req.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&req);
    s.write_all(&frame)?;
    let body = read_frame(&mut s)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "short metadata");
    let mut at = 4; // correlation id
    let mut take = |n: usize| -> std::io::Result<&[u8]> {
        let got = body.get(at..at + n).ok_or_else(bad)?;
        at += n;
        Ok(got)
    };
    let i32_of = |b: &[u8]| i32::from_be_bytes(b.try_into().unwrap());
    let i16_of = |b: &[u8]| i16::from_be_bytes(b.try_into().unwrap());
    take(4)?; // throttle_time_ms
    let brokers = i32_of(take(4)?);
    for _ in 0..brokers.clamp(0, 100) {
        take(4)?; // node id
        let host = i16_of(take(2)?).max(0) as usize;
        take(host)?;
        take(4)?; // port
        let rack = i16_of(take(2)?).max(0) as usize;
        take(rack)?;
    }
    let cluster_id = i16_of(take(2)?).max(0) as usize;
    take(cluster_id)?;
    let controller = i32_of(take(4)?);
    let topics = i32_of(take(4)?);
    let topic_error = if topics > 0 {
        Some(i16_of(take(2)?))
    } else {
        None
    };
    Ok(RawMetadata {
        brokers: brokers.max(0) as usize,
        controller,
        topic_error,
    })
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if !(0..=1 << 20).contains(&len) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "bad size",
        ));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn admin_at(node: &Node) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", format!("127.0.0.1:{}", node.port))
        .create()
        .expect("admin client")
}

/// Polls `check` against fresh metadata from `node` until it holds (bounded).
fn eventually(cluster: &Cluster, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "{what} never held\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The partition count of `topic` in metadata fetched from `node`; 0 when absent.
fn partitions_seen(consumer: &BaseConsumer, topic: &str) -> usize {
    consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .ok()
        .and_then(|m| {
            m.topics()
                .iter()
                .find(|t| t.name() == topic && t.error().is_none())
                .map(|t| t.partitions().len())
        })
        .unwrap_or(0)
}

/// A metadata reader that never auto-creates.
fn reader_at(node: &Node) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", format!("127.0.0.1:{}", node.port))
        .set("group.id", "cluster-forwarding")
        .set("allow.auto.create.topics", "false")
        .create()
        .expect("consumer")
}

#[test]
fn admin_requests_sent_to_a_follower_reach_the_controller() {
    let _serial = serial();
    let cluster = Cluster::start();
    let (controller, follower) = cluster.controller_and_follower();
    let admin = admin_at(follower);
    let reader = reader_at(follower);
    // Every request goes to the follower, not to the controller Metadata names.
    let opts = admin_opts(ADMIN_TIMEOUT).broker_id(follower.id);
    let topic = "forwarded-admin";

    let created = block(admin.create_topics(
        &[NewTopic::new(topic, 2, TopicReplication::Fixed(1))],
        &opts,
    ))
    .expect("create_topics");
    assert_eq!(
        created,
        vec![Ok(topic.to_owned())],
        "controller {}",
        controller.id
    );
    eventually(&cluster, "two partitions", || {
        partitions_seen(&reader, topic) == 2
    });

    let grown = block(admin.create_partitions(&[NewPartitions::new(topic, 3)], &opts))
        .expect("create_partitions");
    assert_eq!(grown, vec![Ok(topic.to_owned())]);
    eventually(&cluster, "three partitions", || {
        partitions_seen(&reader, topic) == 3
    });

    let altered = block(admin.alter_configs(
        &[AlterConfig::new(ResourceSpecifier::Topic(topic)).set("retention.ms", "3600000")],
        &opts,
    ))
    .expect("alter_configs");
    assert!(altered.iter().all(Result::is_ok), "{altered:?}");
    eventually(&cluster, "retention.ms set", || {
        topic_config(&admin, &opts, topic, "retention.ms").as_deref() == Some("3600000")
    });

    incremental_alter_config(follower, topic, "segment.ms", "7200000");
    eventually(&cluster, "segment.ms set", || {
        topic_config(&admin, &opts, topic, "segment.ms").as_deref() == Some("7200000")
    });

    let deleted = block(admin.delete_topics(&[topic], &opts)).expect("delete_topics");
    assert_eq!(deleted, vec![Ok(topic.to_owned())]);
    eventually(&cluster, "topic deleted", || {
        partitions_seen(&reader, topic) == 0
    });

    // The versions Kafka 4.0 removed, as old clients send them: forwarded at the codec's
    // version and answered in the old layout (CreateTopics v0 and DeleteTopics v0: topics
    // [name, error_code], no throttle time).
    let old = "forwarded-old-versions";
    let mut create = Vec::new();
    create.extend_from_slice(&1i32.to_be_bytes());
    put_classic_str(&mut create, old);
    create.extend_from_slice(&2i32.to_be_bytes()); // partitions
    create.extend_from_slice(&1i16.to_be_bytes()); // replication factor
    create.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // no assignments, no configs
    create.extend_from_slice(&10_000i32.to_be_bytes());
    assert_eq!(old_version_call(follower, 19, &create), (old.to_owned(), 0));
    eventually(&cluster, "the old-version topic created", || {
        partitions_seen(&reader, old) == 2
    });
    let mut delete = 1i32.to_be_bytes().to_vec();
    put_classic_str(&mut delete, old);
    delete.extend_from_slice(&10_000i32.to_be_bytes());
    assert_eq!(old_version_call(follower, 20, &delete), (old.to_owned(), 0));
    eventually(&cluster, "the old-version topic deleted", || {
        partitions_seen(&reader, old) == 0
    });

    let log = read_tail(&follower.stderr, 64 * 1024);
    assert!(
        !log.contains("forwarding to the controller failed"),
        "{log}"
    );
}

fn put_classic_str(v: &mut Vec<u8>, s: &str) {
    v.extend_from_slice(&(s.len() as i16).to_be_bytes());
    v.extend_from_slice(s.as_bytes());
}

/// Sends `body` as v0 of `api` (CreateTopics or DeleteTopics) to `node` in a hand-built
/// frame, and reads the one (name, error code) of its v0 answer: correlation id, then an
/// array of exactly one topic, and nothing after it.
fn old_version_call(node: &Node, api: i16, body: &[u8]) -> (String, i16) {
    let mut frame = Vec::new();
    frame.extend_from_slice(&api.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&43i32.to_be_bytes());
    put_classic_str(&mut frame, "old-client");
    frame.extend_from_slice(body);
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    s.set_read_timeout(Some(ADMIN_TIMEOUT + Duration::from_secs(5)))
        .unwrap();
    s.write_all(&(frame.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&frame).unwrap();
    let answer = read_frame(&mut s).expect("an answer");
    assert_eq!(
        &answer[..8],
        &[0, 0, 0, 43, 0, 0, 0, 1],
        "correlation id, one topic"
    );
    let len = i16::from_be_bytes([answer[8], answer[9]]) as usize;
    assert_eq!(
        answer.len(),
        10 + len + 2,
        "v0 layout: name and error code only"
    );
    let name = String::from_utf8(answer[10..10 + len].to_vec()).unwrap();
    (
        name,
        i16::from_be_bytes([answer[10 + len], answer[11 + len]]),
    )
}

/// The value of one config of `topic`, as DescribeConfigs on the follower reports it.
fn topic_config(
    admin: &AdminClient<DefaultClientContext>,
    opts: &rdkafka::admin::AdminOptions,
    topic: &str,
    key: &str,
) -> Option<String> {
    let described = block(admin.describe_configs(&[ResourceSpecifier::Topic(topic)], opts)).ok()?;
    let resource = described.into_iter().next()?.ok()?;
    resource.get(key).and_then(|e| e.value.clone())
}

/// IncrementalAlterConfigs v1 SET `key`=`value` on `topic`, sent in a raw frame to `node`;
/// asserts the answer carries no error.
fn incremental_alter_config(node: &Node, topic: &str, key: &str, value: &str) {
    let body = RequestKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.to_owned()))
                .with_configs(vec![
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string(key.to_owned()))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_string(value.to_owned()))),
                ]),
        ]),
    );
    let frame = codec::encode_request(ApiKey::IncrementalAlterConfigs, 1, 42, "test", &body)
        .expect("encode");
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    s.set_read_timeout(Some(ADMIN_TIMEOUT + Duration::from_secs(5)))
        .unwrap();
    s.write_all(&frame).unwrap();
    let answer = read_frame(&mut s).expect("an answer");
    let response = codec::decode_forwarded_response(
        ApiKey::IncrementalAlterConfigs,
        1,
        bytes::Bytes::from(answer),
    )
    .expect("decode");
    assert_eq!(response.correlation_id, 42);
    let ResponseKind::IncrementalAlterConfigs(r) = response.body else {
        panic!("another API answered");
    };
    assert_eq!(r.responses.len(), 1);
    assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0]);
}

/// Kafka's LEADER_NOT_AVAILABLE.
const LEADER_NOT_AVAILABLE: i16 = 5;
/// Kafka's INVALID_TOPIC_EXCEPTION.
const INVALID_TOPIC_EXCEPTION: i16 = 17;

#[test]
fn a_producer_bootstrapped_on_a_follower_auto_creates_its_topic() {
    let _serial = serial();
    let cluster = Cluster::start();
    let (_, follower) = cluster.controller_and_follower();

    // Metadata with auto-creation sent to the follower itself: LEADER_NOT_AVAILABLE while
    // the controller creates it (not NOT_CONTROLLER), then the topic with no error.
    let raw = "forwarded-metadata-auto-create";
    let first = raw_metadata(follower.port, Some(raw)).expect("metadata");
    assert_eq!(first.topic_error, Some(LEADER_NOT_AVAILABLE), "{first:?}");
    eventually(
        &cluster,
        "the auto-created topic reaches the follower",
        || raw_metadata(follower.port, Some(raw)).is_ok_and(|m| m.topic_error == Some(0)),
    );
    let log = read_tail(&follower.stderr, 64 * 1024);
    assert!(
        log.contains("auto-created topic through the controller"),
        "{log}"
    );

    // A name the controller would refuse is refused at once, not answered "retry".
    let bad = raw_metadata(follower.port, Some("bad/name")).expect("metadata");
    assert_eq!(bad.topic_error, Some(INVALID_TOPIC_EXCEPTION), "{bad:?}");

    // A producer that knows only the follower; its Metadata requests go to the follower or,
    // once it has learnt them, to any node.
    let bootstrap = format!("127.0.0.1:{}", follower.port);
    let topic = "forwarded-auto-create";
    let count = 20usize;

    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "false")
        .set("acks", "all")
        .set("message.timeout.ms", "45000")
        .create()
        .expect("producer");
    for i in 0..count {
        let value = format!("value-{i}");
        let key = format!("key-{i}");
        producer
            .send(BaseRecord::to(topic).key(&key).payload(&value))
            .map_err(|(e, _)| e)
            .expect("enqueue");
    }
    producer.flush(WAIT).expect("every record delivered");
    assert_eq!(producer.in_flight_count(), 0);

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "cluster-forwarding-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut values = Vec::new();
    let deadline = Instant::now() + WAIT;
    while values.len() < count && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    let expected: Vec<String> = (0..count).map(|i| format!("value-{i}")).collect();
    assert_eq!(values, expected, "\n{}", cluster.logs());
}

/// CreateTopics for `topic` through `node` (rdkafka admin, sent to that node); whether it
/// was created.
fn create_through(node: &Node, topic: &str) -> Result<(), String> {
    let admin = admin_at(node);
    let opts = admin_opts(ADMIN_TIMEOUT).broker_id(node.id);
    let created = block(admin.create_topics(
        &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
        &opts,
    ))
    .map_err(|e| e.to_string())?;
    match created.as_slice() {
        [Ok(t)] if t == topic => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

#[test]
fn forwarding_follows_a_new_controller() {
    let _serial = serial();
    let mut cluster = Cluster::start();
    let (controller, _) = cluster.controller_and_follower();
    let old = controller.id;
    // Both other nodes forward once, so that each keeps a connection to the controller.
    let others: Vec<i32> = cluster
        .nodes
        .iter()
        .map(|n| n.id)
        .filter(|id| *id != old)
        .collect();
    for (i, id) in others.iter().enumerate() {
        let topic = format!("before-{i}");
        if let Err(e) = create_through(cluster.node(*id), &topic) {
            panic!("through node {id}: {e}\n{}", cluster.logs());
        }
    }

    // SIGKILL the controller; the survivors elect another.
    let killed = cluster.nodes.iter_mut().find(|n| n.id == old).unwrap();
    let _ = killed.child.kill();
    let _ = killed.child.wait();
    let new = cluster.agreed_controller(&others);
    assert_ne!(new, old);
    let survivor = *others.iter().find(|id| **id != new).unwrap();

    // The survivor that is not the controller drops its connection to the dead one and
    // forwards to the new controller.
    if let Err(e) = create_through(cluster.node(survivor), "after") {
        panic!(
            "through node {survivor} (controller {new}): {e}\n{}",
            cluster.logs()
        );
    }
    let reader = reader_at(cluster.node(survivor));
    eventually(&cluster, "the topic created after the failover", || {
        partitions_seen(&reader, "after") == 1
    });
}
