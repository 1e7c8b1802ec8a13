//! A node with two listeners, `PLAINTEXT` for clients and `CONTROLLER` for the quorum
//! (`controller.listener.names`), against the real binary:
//!
//! - librdkafka produces and consumes on the PLAINTEXT listener, and Metadata advertises
//!   only that listener;
//! - ApiVersions on the CONTROLLER listener lists the controller's APIs (the KRaft RPCs),
//!   and the client listener's ApiVersions lists none of them;
//! - a client API, or a controller RPC without a handler yet, on the CONTROLLER listener
//!   closes that connection, as Kafka closes a connection for an API its listener does not
//!   expose, and the listener keeps serving;
//! - a valid Kafka configuration that the node cannot run yet (a dynamic quorum, with
//!   `controller.quorum.bootstrap.servers` and no voters) stops it at startup with a
//!   configuration error.
//!
//! Raw frames throughout for the CONTROLLER listener, independent of Strata's codec.

use std::fs::File;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::wire::{self, header, recv, send};
use strata_tests::{READY_TIMEOUT, free_port, read_tail, strata_bin};

/// The controller listener's table, as `versions::CONTROLLER_APIS` defines it: Fetch,
/// ApiVersions, Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum, AlterPartition,
/// FetchSnapshot, BrokerRegistration, BrokerHeartbeat, AllocateProducerIds, AddRaftVoter,
/// RemoveRaftVoter, UpdateRaftVoter, and the requests brokers forward (CreateTopics,
/// DeleteTopics, CreateAcls, DeleteAcls, AlterConfigs, CreatePartitions, ElectLeaders,
/// IncrementalAlterConfigs, AlterPartitionReassignments, ListPartitionReassignments,
/// AlterClientQuotas, AlterUserScramCredentials).
const CONTROLLER_KEYS: &[i16] = &[
    1, 17, 18, 19, 20, 30, 31, 33, 36, 37, 43, 44, 45, 46, 49, 51, 52, 53, 54, 55, 56, 59, 62, 63,
    67, 80, 81, 82,
];

/// A `strata` process with two listeners, killed on drop.
struct Node {
    child: Child,
    plaintext: u16,
    controller: u16,
    _dir: tempfile::TempDir,
    stderr: std::path::PathBuf,
}

impl Node {
    fn start() -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let (plaintext, controller) = (free_port().unwrap(), free_port().unwrap());
        let stderr = dir.path().join("stderr.log");
        let out = File::create(&stderr).unwrap();
        let child = Command::new(strata_bin())
            .args(overrides(&[
                (
                    "listeners",
                    &format!(
                        "PLAINTEXT://127.0.0.1:{plaintext},CONTROLLER://127.0.0.1:{controller}"
                    ),
                ),
                ("controller.listener.names", "CONTROLLER"),
                (
                    "controller.quorum.voters",
                    &format!("1@127.0.0.1:{controller}"),
                ),
                ("log.dirs", &dir.path().join("data").display().to_string()),
            ]))
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn strata (build it with `cargo build --release -p strata-broker`)");
        let mut node = Node {
            child,
            plaintext,
            controller,
            _dir: dir,
            stderr,
        };
        for port in [plaintext, controller] {
            let deadline = Instant::now() + READY_TIMEOUT;
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                if let Ok(Some(status)) = node.child.try_wait() {
                    panic!("strata exited with {status}:\n{}", node.log());
                }
                assert!(
                    Instant::now() < deadline,
                    "no listener on {port}:\n{}",
                    node.log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        node
    }

    fn log(&self) -> String {
        read_tail(&self.stderr, 8 * 1024)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- strata log ---\n{}", self.log());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn overrides(pairs: &[(&str, &str)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(k, v)| ["--override".to_owned(), format!("{k}={v}")])
        .collect()
}

/// The API keys of an ApiVersions v0 response body (after the correlation id).
fn api_keys(resp: &[u8]) -> (i16, Vec<(i16, i16, i16)>) {
    let error = i16::from_be_bytes([resp[4], resp[5]]);
    let n = i32::from_be_bytes([resp[6], resp[7], resp[8], resp[9]]);
    let keys = (0..n as usize)
        .map(|i| {
            let at = 10 + i * 6;
            let get = |o: usize| i16::from_be_bytes([resp[at + o], resp[at + o + 1]]);
            (get(0), get(2), get(4))
        })
        .collect();
    (error, keys)
}

fn api_versions_v0(port: u16, corr: i32) -> (i16, Vec<(i16, i16, i16)>) {
    let mut s = wire::connect(port);
    send(&mut s, &header(18, 0, corr));
    let r = recv(&mut s).expect("ApiVersions response");
    assert_eq!(wire::correlation_id(&r), corr);
    api_keys(&r)
}

#[test]
fn the_controller_listener_serves_the_controller_api_table() {
    let node = Node::start();

    let (error, controller) = api_versions_v0(node.controller, 7);
    assert_eq!(error, 0);
    let keys: Vec<i16> = controller.iter().map(|k| k.0).collect();
    assert_eq!(keys, CONTROLLER_KEYS);
    assert!(
        controller.contains(&(52, 0, 2)),
        "Vote v0-2: {controller:?}"
    );
    assert!(controller.contains(&(56, 2, 3)), "AlterPartition v2-3");

    let (error, client) = api_versions_v0(node.plaintext, 8);
    assert_eq!(error, 0);
    let client_keys: Vec<i16> = client.iter().map(|k| k.0).collect();
    assert!(
        client_keys.contains(&0) && client_keys.contains(&3),
        "{client_keys:?}"
    );
    // DescribeQuorum (55) is on both: Kafka's brokers take it from clients and forward it.
    assert!(client_keys.contains(&55), "DescribeQuorum for clients");
    for k in [52, 53, 54, 56, 59, 62, 63, 67, 80, 81, 82] {
        assert!(!client_keys.contains(&k), "client listener advertises {k}");
    }

    // ApiVersions v3 (flexible request, header v2) answers too.
    let mut s = wire::connect(node.controller);
    let mut req = Vec::new();
    req.extend_from_slice(&18i16.to_be_bytes());
    req.extend_from_slice(&3i16.to_be_bytes());
    req.extend_from_slice(&9i32.to_be_bytes());
    wire::put_str(&mut req, "test");
    req.push(0); // header tags
    req.extend_from_slice(&[5, b'r', b'a', b'f', b't', 2, b'1', 0]); // software name, version, tags
    send(&mut s, &req);
    let r = recv(&mut s).expect("ApiVersions v3");
    assert_eq!(wire::correlation_id(&r), 9);
    assert_eq!(&r[4..6], &0i16.to_be_bytes());
    assert_eq!(
        usize::from(r[6]),
        CONTROLLER_KEYS.len() + 1,
        "compact array length"
    );
    assert_eq!(&r[7..9], &1i16.to_be_bytes(), "first key: Fetch");

    // A newer ApiVersions than served: KIP-511's fallback, with the controller's table.
    let mut s = wire::connect(node.controller);
    send(&mut s, &header(18, 99, 10));
    let r = recv(&mut s).expect("fallback");
    let (error, keys) = api_keys(&r);
    assert_eq!(error, 35, "UNSUPPORTED_VERSION");
    assert_eq!(keys.len(), CONTROLLER_KEYS.len());
}

#[test]
fn unexposed_apis_close_only_their_controller_connection() {
    let node = Node::start();

    // Metadata v1 (a client API) on the controller listener.
    let mut s = wire::connect(node.controller);
    let mut req = header(3, 1, 11);
    req.extend_from_slice(&(-1i32).to_be_bytes());
    send(&mut s, &req);
    wire::assert_closed(&mut s, "Metadata on the controller listener");

    // Produce v3 on the controller listener.
    let mut s = wire::connect(node.controller);
    send(&mut s, &wire::produce_request(12, "t", &[]));
    wire::assert_closed(&mut s, "Produce on the controller listener");

    // BrokerHeartbeat v0 (a controller RPC: the node's controller answers it, here for a
    // registration it does not know), after the ApiVersions pipelined before it.
    let mut s = wire::connect(node.controller);
    send(&mut s, &header(18, 0, 13));
    let mut hb = Vec::new();
    hb.extend_from_slice(&63i16.to_be_bytes());
    hb.extend_from_slice(&0i16.to_be_bytes());
    hb.extend_from_slice(&14i32.to_be_bytes());
    wire::put_str(&mut hb, "test");
    hb.push(0); // header tags
    hb.extend_from_slice(&1i32.to_be_bytes()); // broker_id
    hb.extend_from_slice(&1i64.to_be_bytes()); // broker_epoch
    hb.extend_from_slice(&0i64.to_be_bytes()); // current_metadata_offset
    hb.extend_from_slice(&[0, 0, 0]); // want_fence, want_shut_down, tags
    send(&mut s, &hb);
    let r = recv(&mut s).expect("the ApiVersions before it is answered");
    assert_eq!(wire::correlation_id(&r), 13);
    let r = recv(&mut s).expect("the BrokerHeartbeat is answered");
    assert_eq!(wire::correlation_id(&r), 14);

    // A controller RPC on the client listener closes that connection too.
    let mut s = wire::connect(node.plaintext);
    send(&mut s, &hb);
    wire::assert_closed(&mut s, "BrokerHeartbeat on the client listener");

    // Both listeners still serve.
    assert_eq!(api_versions_v0(node.controller, 15).0, 0);
    assert_eq!(api_versions_v0(node.plaintext, 16).0, 0);
}

#[test]
fn librdkafka_works_on_the_plaintext_listener() {
    let node = Node::start();
    let bootstrap = format!("127.0.0.1:{}", node.plaintext);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("message.timeout.ms", "20000")
        .create()
        .expect("producer");
    // Metadata names the PLAINTEXT listener only: the controller listener is never
    // advertised to clients.
    let md = producer
        .client()
        .fetch_metadata(None, Duration::from_secs(20))
        .expect("metadata");
    let brokers: Vec<(i32, String, i32)> = md
        .brokers()
        .iter()
        .map(|b| (b.id(), b.host().to_owned(), b.port()))
        .collect();
    assert_eq!(
        brokers,
        vec![(1, "127.0.0.1".to_owned(), i32::from(node.plaintext))]
    );
    for i in 0..10 {
        let payload = format!("value-{i}");
        producer
            .send(
                BaseRecord::to("two-listeners")
                    .key("k")
                    .payload(&payload)
                    .partition(0),
            )
            .map_err(|(e, _)| e)
            .expect("enqueue");
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every message delivered");

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "two-listeners")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("two-listeners", 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < 10 && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("message");
            got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    let expected: Vec<String> = (0..10).map(|i| format!("value-{i}")).collect();
    assert_eq!(got, expected);
}

#[test]
fn an_invalid_topology_stops_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let run = |pairs: &[(&str, &str)]| {
        let mut args = overrides(pairs);
        args.extend(overrides(&[(
            "log.dirs",
            &dir.path().join("data").display().to_string(),
        )]));
        // Bounded: a node that starts instead of refusing must fail the test, not hang it.
        let out = strata_tests::run_with_timeout(
            Command::new(strata_bin()).args(args),
            b"",
            Duration::from_secs(20),
        )
        .expect("strata exits at once");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Kafka's check, with Kafka's message; nothing is formatted.
    let (code, stderr) = run(&[("process.roles", "broker,zookeeper")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("Unknown process role 'zookeeper'"),
        "{stderr}"
    );
    assert!(
        !Path::new(&dir.path().join("data")).exists()
            || dir.path().join("data").read_dir().unwrap().next().is_none(),
        "nothing formatted"
    );
}
