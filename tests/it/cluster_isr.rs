//! AlterPartition (KIP-497) on a three-node cluster of real `strata` processes:
//!
//! - the controller listener answers AlterPartition v3: NOT_CONTROLLER at the top level on a
//!   node that is not the active controller, STALE_BROKER_EPOCH on the controller for an
//!   epoch that is not the broker's registration;
//! - a follower killed with SIGKILL leaves the ISR once its session expires (the controller
//!   fences it), and, restarted, joins it again once it has caught up (the leader's
//!   AlterPartition expansion; the leader is the active controller, so it goes in process);
//! - a follower stopped with SIGSTOP for longer than `replica.lag.time.max.ms` (but well
//!   within its session) leaves the ISR through the leader's AlterPartition shrink, and
//!   joins it again after SIGCONT (the leader is another node, so both go over the
//!   controller listener).
//!
//! The tests run one at a time; each prints what it measured as `measured: ...` lines.
//! Every wait is bounded.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use strata_protocol::codec;
use strata_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use strata_protocol::messages::{AlterPartitionRequest, ApiKey, RequestKind, ResponseKind};
use strata_tests::cluster::{Cluster, Node, create_topic_raw, round_trip};
use strata_tests::{serial, strata_bin};

/// The bound on the first election and on the brokers' registration.
const ELECTION: Duration = Duration::from_secs(30);
/// The bound on a metadata change once its cause has happened.
const MARGIN: Duration = Duration::from_secs(15);
/// The bound on a restarted or resumed follower catching up and rejoining the ISR.
const REJOIN: Duration = Duration::from_secs(40);

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

/// Creates `topic` (three partitions, RF 3, so each broker leads one) and waits until all
/// are led with a full ISR; returns a partition whose leader is the controller (its
/// AlterPartition goes in process) or not (over the controller listener), as asked, that
/// leader, and a follower of it that is not the controller.
fn create_replicated(
    c: &Cluster,
    controller: i32,
    topic: &str,
    led_by_controller: bool,
) -> (i32, i32, i32) {
    let port = c.port(controller);
    assert_eq!(
        create_topic_raw(port, topic, 3, 3).expect("CreateTopics"),
        0
    );
    let m = c
        .wait_metadata(controller, "the topic led with 3 in sync", MARGIN, |m| {
            let p = m.partitions(topic);
            p.len() == 3 && p.values().all(|p| p.leader >= 0 && p.isr.len() == 3)
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    let (&partition, info) = m
        .partitions(topic)
        .iter()
        .find(|(_, p)| (p.leader == controller) == led_by_controller)
        .map(|(i, p)| (i, p.clone()))
        .unwrap_or_else(|| panic!("no partition with the wanted leader: {m:?}"));
    let follower = c
        .ids()
        .into_iter()
        .find(|&id| id != info.leader && id != controller)
        .expect("three nodes");
    (partition, info.leader, follower)
}

/// Produces `n` records to `partition` of `topic` through `bootstrap`, acks=1 (the ISR may
/// be short meanwhile), and waits for their delivery.
fn produce(bootstrap: &str, topic: &str, partition: i32, n: usize) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "1")
        .set("message.timeout.ms", "15000")
        .create()
        .expect("producer");
    for i in 0..n {
        let payload = format!("record-{i}");
        p.send(
            BaseRecord::<(), _>::to(topic)
                .partition(partition)
                .payload(&payload),
        )
        .expect("queue a record");
    }
    p.flush(Duration::from_secs(20)).expect("records delivered");
}

/// Waits until node `id` reports the ISR (sorted) of `partition` of `topic` as `want`;
/// returns the time taken.
fn wait_isr(
    c: &Cluster,
    id: i32,
    (topic, partition): (&str, i32),
    want: &[i32],
    bound: Duration,
) -> Duration {
    let t0 = Instant::now();
    c.wait_metadata(id, &format!("ISR {want:?}"), bound, |m| {
        m.partitions(topic).get(&partition).is_some_and(|p| {
            let mut isr = p.isr.clone();
            isr.sort_unstable();
            isr == want
        })
    })
    .unwrap_or_else(|e| panic!("{e:?}"));
    t0.elapsed()
}

/// The pid of `node`'s process, found by its config path on its command line.
fn pid_of(node: &Node) -> u32 {
    let config = node.config.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline
            .split(|&b| b == 0)
            .any(|arg| arg == config.as_bytes())
        {
            return pid;
        }
    }
    panic!("no process runs node {}'s config", node.id);
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// Resumes a stopped process when dropped, so a failing test does not leave it stopped
/// (the cluster then kills it).
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// AlterPartition v3 to `port` (a controller listener) from `broker_id` at `broker_epoch`
/// for partition 0 of the nil topic id: the top-level error code.
fn alter_partition_error(port: u16, broker_id: i32, broker_epoch: i64) -> i16 {
    let body = RequestKind::AlterPartition(
        AlterPartitionRequest::default()
            .with_broker_id(broker_id.into())
            .with_broker_epoch(broker_epoch)
            .with_topics(vec![
                TopicData::default()
                    .with_topic_id(Default::default())
                    .with_partitions(vec![
                        PartitionData::default()
                            .with_partition_index(0)
                            .with_leader_epoch(0)
                            .with_new_isr_with_epochs(vec![
                                BrokerState::default()
                                    .with_broker_id(broker_id.into())
                                    .with_broker_epoch(broker_epoch),
                            ])
                            .with_partition_epoch(0),
                    ]),
            ]),
    );
    let frame = codec::encode_request(ApiKey::AlterPartition, 3, 7, "isr-test", &body)
        .expect("encode AlterPartition");
    // `round_trip` adds the size prefix again.
    let answer = round_trip(port, &frame[4..]).expect("an AlterPartition answer");
    let r = codec::decode_response(ApiKey::AlterPartition, 3, Bytes::from(answer))
        .expect("decode AlterPartition");
    assert_eq!(r.correlation_id, 7);
    let ResponseKind::AlterPartition(r) = r.body else {
        panic!("not an AlterPartition answer: {:?}", r.body);
    };
    r.error_code
}

#[test]
fn alter_partition_is_answered_only_by_the_active_controller() {
    let _serial = serial();
    let (c, controller) = start_cluster(&[("broker.heartbeat.interval.ms", "500")]);
    let other = c.nodes.iter().find(|n| n.id != controller).unwrap();
    // NOT_CONTROLLER (41) off the active controller.
    assert_eq!(
        alter_partition_error(other.controller_port, other.id, 0),
        41
    );
    // STALE_BROKER_EPOCH (77) on it, for an epoch no registration has.
    let active = c.nodes.iter().find(|n| n.id == controller).unwrap();
    assert_eq!(
        from_the_active_controller(|| alter_partition_error(
            active.controller_port,
            other.id,
            i64::MAX
        )),
        77
    );
    // STALE_BROKER_EPOCH too for a broker id with no registration, as Kafka answers it.
    assert_eq!(
        from_the_active_controller(|| alter_partition_error(active.controller_port, 99, 0)),
        77
    );
}

/// The active controller's answer to `ask`. It answers NOT_CONTROLLER (41) too when its
/// log has entries it has not applied within 3 s (`QuorumHandle::wait_ready_to_lead`);
/// that happened once in CI, with no leadership change, right after the cluster formed.
/// Asked again for at most [`MARGIN`]; a retry is reported as a `measured:` line.
fn from_the_active_controller(mut ask: impl FnMut() -> i16) -> i16 {
    let t0 = Instant::now();
    let mut tries = 1;
    loop {
        let code = ask();
        if code != 41 || t0.elapsed() >= MARGIN {
            if tries > 1 {
                println!(
                    "measured: the active controller answered NOT_CONTROLLER {} time(s) \
                     before {code}, over {} ms",
                    tries - 1,
                    t0.elapsed().as_millis()
                );
            }
            return code;
        }
        tries += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_killed_follower_leaves_the_isr_and_rejoins_after_its_restart() {
    let _serial = serial();
    let (mut c, controller) = start_cluster(&[
        ("broker.session.timeout.ms", "3000"),
        ("broker.heartbeat.interval.ms", "500"),
        ("leader.imbalance.check.interval.seconds", "3600"),
    ]);
    let topic = "isr-kill";
    // The leader is the controller: its AlterPartition goes in process.
    const LED_BY: bool = true;
    let (partition, leader, follower) = create_replicated(&c, controller, topic, LED_BY);
    let rest: Vec<i32> = {
        let mut v: Vec<i32> = c.ids().into_iter().filter(|&i| i != follower).collect();
        v.sort_unstable();
        v
    };

    c.node(follower).kill9();
    let bootstrap = c.bootstrap(&[leader]);
    produce(&bootstrap, topic, partition, 100);
    let shrink = wait_isr(&c, leader, (topic, partition), &rest, MARGIN);
    println!(
        "measured: node {follower} out of the ISR {} ms after its SIGKILL and 100 records",
        shrink.as_millis()
    );

    c.node(follower).restart();
    produce(&bootstrap, topic, partition, 100);
    let expand = wait_isr(&c, leader, (topic, partition), &[1, 2, 3], REJOIN);
    println!(
        "measured: node {follower} back in the ISR {} ms after its restart",
        expand.as_millis()
    );
}

#[test]
fn a_stopped_follower_is_shrunk_out_by_its_leader_and_rejoins() {
    let _serial = serial();
    // The session outlives the stop, so only the leader's AlterPartition can shrink the ISR.
    let (mut c, controller) = start_cluster(&[
        ("broker.session.timeout.ms", "60000"),
        ("broker.heartbeat.interval.ms", "500"),
        ("replica.lag.time.max.ms", "3000"),
        ("leader.imbalance.check.interval.seconds", "3600"),
    ]);
    let topic = "isr-stop";
    // The leader is not the controller: its AlterPartition goes over the controller listener.
    const LED_BY: bool = false;
    let (partition, leader, follower) = create_replicated(&c, controller, topic, LED_BY);
    let rest: Vec<i32> = {
        let mut v: Vec<i32> = c.ids().into_iter().filter(|&i| i != follower).collect();
        v.sort_unstable();
        v
    };
    let pid = pid_of(c.node(follower));

    signal(pid, "-STOP");
    let resume = Resume(pid);
    let bootstrap = c.bootstrap(&[leader]);
    produce(&bootstrap, topic, partition, 100);
    // Well inside the 60 s session: the controller has not fenced the stopped node.
    let shrink = wait_isr(&c, leader, (topic, partition), &rest, MARGIN);
    let m = c.metadata(leader).expect("Metadata");
    assert!(
        m.brokers().contains(&follower),
        "node {follower} was fenced, not shrunk out: {m:?}"
    );
    println!(
        "measured: stopped node {follower} out of the ISR {} ms after its SIGSTOP",
        shrink.as_millis()
    );

    drop(resume);
    produce(&bootstrap, topic, partition, 10);
    let expand = wait_isr(&c, leader, (topic, partition), &[1, 2, 3], REJOIN);
    println!(
        "measured: node {follower} back in the ISR {} ms after its SIGCONT",
        expand.as_millis()
    );
}
