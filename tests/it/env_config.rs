//! Configuration from the environment, the Apache Kafka image's way (`config::env`), against
//! the real binary:
//!
//! - a node started with no arguments at all, configured by `KAFKA_*` / `STRATA_*` /
//!   `CLUSTER_ID` variables only (two client listeners and a controller listener, as in
//!   docker/docker-compose.yml), serves librdkafka; the variables Kafka's scripts read for
//!   other purposes are not taken for keys, and an unknown key is warned about and ignored as
//!   in a properties file;
//! - the environment wins over the properties file, and `--override` over the environment;
//! - a value in the environment that does not parse stops the node, naming the key.

use std::collections::BTreeSet;
use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{READY_TIMEOUT, free_port, read_tail, run_with_timeout, strata_bin};

const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A `strata` process started with the given arguments and environment only, killed on drop.
struct Node {
    child: Child,
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl Node {
    /// Starts `strata args...` with `env` added to a cleaned environment (no inherited
    /// `KAFKA_*` / `STRATA_*`), and waits until every port in `ports` accepts.
    fn start(
        dir: tempfile::TempDir,
        args: &[String],
        env: &[(&str, String)],
        ports: &[u16],
    ) -> Node {
        let log = dir.path().join("strata.log");
        let out = File::create(&log).unwrap();
        let mut cmd = Command::new(strata_bin());
        for (k, _) in std::env::vars() {
            if k.starts_with("KAFKA_") || k.starts_with("STRATA_") || k == "CLUSTER_ID" {
                cmd.env_remove(k);
            }
        }
        let child = cmd
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn strata (build it with `cargo build --release --bin strata`)");
        let mut node = Node { child, dir, log };
        for &port in ports {
            let deadline = Instant::now() + READY_TIMEOUT;
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                if let Ok(Some(status)) = node.child.try_wait() {
                    panic!("strata exited with {status}:\n{}", node.log());
                }
                assert!(
                    Instant::now() < deadline,
                    "nothing listens on {port}:\n{}",
                    node.log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        node
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log(&self) -> String {
        read_tail(&self.log, 16 * 1024)
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

/// The ids of the brokers that Metadata through `bootstrap` lists.
fn broker_ids(bootstrap: &str) -> Vec<i32> {
    broker_endpoints(bootstrap)
        .into_iter()
        .map(|(id, _, _)| id)
        .collect()
}

/// Each broker that Metadata through `bootstrap` lists, with its host and port.
fn broker_endpoints(bootstrap: &str) -> Vec<(i32, String, i32)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("client");
    let md = consumer
        .fetch_metadata(None, CLIENT_TIMEOUT)
        .expect("metadata");
    md.brokers()
        .iter()
        .map(|b| (b.id(), b.host().to_owned(), b.port()))
        .collect()
}

/// Produces `n` numbered messages to `topic` (keys spread them over the partitions), then
/// reads every partition from the beginning and returns the values read.
fn produce_and_consume(bootstrap: &str, topic: &str, n: usize) -> BTreeSet<String> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("message.timeout.ms", "20000")
        .create()
        .expect("producer");
    for i in 0..n {
        let (key, value) = (format!("k{i}"), format!("m{i:04}"));
        producer
            .send(BaseRecord::to(topic).key(&key).payload(&value))
            .map_err(|(e, _)| e)
            .expect("enqueue");
    }
    producer
        .flush(CLIENT_TIMEOUT)
        .expect("every message delivered");
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "env-config")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let md = consumer
        .fetch_metadata(Some(topic), CLIENT_TIMEOUT)
        .expect("metadata");
    let partitions = md.topics()[0].partitions().len() as i32;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut got = BTreeSet::new();
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while got.len() < n && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("consume");
            got.insert(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    got
}

fn meta_properties(data_dir: &Path) -> String {
    std::fs::read_to_string(data_dir.join("meta.properties")).unwrap_or_default()
}

#[test]
fn a_node_configured_only_by_the_environment_serves_librdkafka() {
    let dir = tempfile::tempdir().unwrap();
    let (internal, external, controller) = (
        free_port().unwrap(),
        free_port().unwrap(),
        free_port().unwrap(),
    );
    let data = dir.path().join("data");
    let env = [
        ("KAFKA_NODE_ID", "7".to_owned()),
        ("KAFKA_PROCESS_ROLES", "broker,controller".to_owned()),
        (
            "KAFKA_LISTENERS",
            format!(
                "INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external},\
                 CONTROLLER://127.0.0.1:{controller}"
            ),
        ),
        (
            "KAFKA_ADVERTISED_LISTENERS",
            // Different hosts, so that which listener's endpoint Metadata answers shows.
            format!("EXTERNAL://127.0.0.1:{external},INTERNAL://localhost:{internal}"),
        ),
        (
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
            "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT".to_owned(),
        ),
        ("KAFKA_INTER_BROKER_LISTENER_NAME", "INTERNAL".to_owned()),
        ("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER".to_owned()),
        (
            "KAFKA_CONTROLLER_QUORUM_VOTERS",
            format!("7@127.0.0.1:{controller}"),
        ),
        ("KAFKA_LOG_DIRS", data.display().to_string()),
        ("STRATA_NUM_PARTITIONS", "3".to_owned()),
        // The Kafka image's variable for the id its storage is formatted with.
        ("CLUSTER_ID", CLUSTER_ID.to_owned()),
        // Read by Kafka's scripts for the JVM, never a key.
        ("KAFKA_OPTS", "-Xmx1g".to_owned()),
        ("KAFKA_HEAP_OPTS", "-Xms1g".to_owned()),
        // A Kafka key Strata does not know: warned about and ignored, as in a file.
        (
            "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR",
            "2".to_owned(),
        ),
    ];
    let node = Node::start(dir, &[], &env, &[internal, external, controller]);

    let bootstrap = format!("127.0.0.1:{external}");
    assert_eq!(broker_ids(&bootstrap), vec![7]);
    let want: BTreeSet<String> = (0..30).map(|i| format!("m{i:04}")).collect();
    assert_eq!(produce_and_consume(&bootstrap, "env-only", 30), want);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let md = consumer
        .fetch_metadata(Some("env-only"), CLIENT_TIMEOUT)
        .unwrap();
    assert_eq!(
        md.topics()[0].partitions().len(),
        3,
        "STRATA_NUM_PARTITIONS"
    );
    // The second client listener serves too.
    assert_eq!(broker_ids(&format!("127.0.0.1:{internal}")), vec![7]);
    // Each listener answers with the broker's endpoint on that listener, as Kafka does, not
    // with the first advertised one.
    assert_eq!(
        broker_endpoints(&bootstrap),
        vec![(7, "127.0.0.1".to_owned(), i32::from(external))]
    );
    assert_eq!(
        broker_endpoints(&format!("127.0.0.1:{internal}")),
        vec![(7, "localhost".to_owned(), i32::from(internal))]
    );

    let meta = meta_properties(&node.data_dir());
    assert!(
        meta.contains(&format!("cluster.id={CLUSTER_ID}")) && meta.contains("node.id=7"),
        "KAFKA_LOG_DIRS, CLUSTER_ID, KAFKA_NODE_ID: {meta}"
    );
    let log = node.log();
    assert!(
        log.lines().any(|l| l.contains("unknown config key ignored")
            && l.contains("share.coordinator.state.topic.min.isr")),
        "{log}"
    );
    assert!(
        !log.contains("key=opts") && !log.contains("key=heap.opts"),
        "KAFKA_OPTS and KAFKA_HEAP_OPTS are not keys:\n{log}"
    );
}

#[test]
fn the_environment_wins_over_the_file_and_overrides_win_over_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (in_file, in_env) = (free_port().unwrap(), free_port().unwrap());
    let file = dir.path().join("server.properties");
    std::fs::write(
        &file,
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{in_file}\nnode.id=3\nlog.dirs={}\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let env = [
        ("KAFKA_LISTENERS", format!("PLAINTEXT://127.0.0.1:{in_env}")),
        ("KAFKA_NODE_ID", "4".to_owned()),
    ];
    let args = [
        file.display().to_string(),
        "--override".to_owned(),
        "node.id=5".to_owned(),
    ];
    let node = Node::start(dir, &args, &env, &[in_env]);
    assert!(
        TcpStream::connect(("127.0.0.1", in_file)).is_err(),
        "the file's listener is bound although the environment replaced it"
    );
    assert_eq!(broker_ids(&format!("127.0.0.1:{in_env}")), vec![5]);
    // log.dirs, set by the file alone, still applies.
    assert!(
        meta_properties(&node.data_dir()).contains("node.id=5"),
        "{}",
        node.log()
    );
}

#[test]
fn a_value_in_the_environment_that_does_not_parse_stops_the_node_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().unwrap();
    let mut cmd = Command::new(strata_bin());
    cmd.current_dir(dir.path())
        .env("KAFKA_LISTENERS", format!("PLAINTEXT://127.0.0.1:{port}"))
        .env("KAFKA_LOG_DIRS", dir.path().join("data"))
        .env("KAFKA_NUM_PARTITIONS", "zero");
    let out = run_with_timeout(&mut cmd, b"", Duration::from_secs(30)).expect("strata exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("configuration error") && stderr.contains("num.partitions"),
        "{stderr}"
    );
}
