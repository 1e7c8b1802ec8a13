//! A dynamic controller quorum (KIP-853) of three real `strata` processes on 127.0.0.1:
//! every node is configured with `controller.quorum.bootstrap.servers` (no
//! `controller.quorum.voters`, no `cluster.id`) and `controller.quorum.auto.join.enable`.
//!
//! - Node 1, the first bootstrap server, founds the quorum as its only voter; nodes 2 and 3
//!   find the leader through the bootstrap servers, catch up and add themselves
//!   (AddRaftVoter), so the leader lists three voters with their directory ids and
//!   endpoints. A topic with replication factor 3 is placed on all three brokers, and a
//!   librdkafka producer writes to it with acks=all.
//! - The leader killed with SIGKILL, the others elect a new one (the time is printed), and
//!   metadata changes and acks=all writes go on.
//! - Node 1 comes back with an empty disk: another bootstrap server reports the quorum's
//!   epoch, so it does not found a second quorum; it joins as an observer, removes its old
//!   directory from the voters and adds its new one. Every record is read back.
//! - The operator removes a stopped voter with `strata admin cluster remove-controller`;
//!   two voters go on committing metadata. A duplicate or unknown voter is refused with
//!   Kafka's error names.
//! - A dedicated broker that names only the bootstrap servers follows the quorum as an
//!   observer and registers as a broker.
//!
//! Every wait is bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::cluster::{self, Cluster};
use strata_tests::{serial, wait_until};

use crate::admin_cli_run::{admin, admin_ok, admin_raw, table};

const TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);
const TOPIC: &str = "dynamic";

/// The quorum as `strata admin --bootstrap-controller` shows it from `controller_port`
/// (a follower's answer is followed to the leader): leader, epoch, and each row by node
/// and role.
struct Quorum {
    leader: i32,
    epoch: i32,
    rows: Vec<BTreeMap<String, String>>,
}

impl Quorum {
    /// The voters (leader and followers), by node id, each with its directory id.
    fn voters(&self) -> BTreeMap<i32, String> {
        self.rows
            .iter()
            .filter(|r| r["ROLE"] != "Observer")
            .map(|r| (r["NODE"].parse().unwrap(), r["DIRECTORY-ID"].clone()))
            .collect()
    }

    fn caught_up(&self) -> bool {
        self.rows
            .iter()
            .filter(|r| r["ROLE"] != "Observer")
            .all(|r| r["LAG"] == "0")
    }
}

fn quorum(controller_port: u16) -> Option<Quorum> {
    let addr = format!("127.0.0.1:{controller_port}");
    let r = admin_raw(&[
        "--timeout-ms",
        "3000",
        "--bootstrap-controller",
        &addr,
        "cluster",
        "quorum",
    ]);
    if !r.ok {
        return None;
    }
    let first = r.stdout.lines().next()?;
    let field = |name: &str| -> Option<i32> {
        first
            .split('\t')
            .find_map(|f| f.strip_prefix(name))?
            .trim()
            .parse()
            .ok()
    };
    Some(Quorum {
        leader: field("Quorum leader:")?,
        epoch: field("Epoch:")?,
        rows: table(&r.stdout, "NODE"),
    })
}

/// Waits until the quorum seen from `controller_port` has exactly the voters `want`, all
/// caught up, and `cond` holds.
fn wait_voters(controller_port: u16, want: &[i32], cond: impl Fn(&Quorum) -> bool) -> Quorum {
    let want: BTreeSet<i32> = want.iter().copied().collect();
    let mut last = None;
    wait_until("the voter set", TIMEOUT, POLL, || {
        last = quorum(controller_port);
        Ok(last.as_ref().is_some_and(|q| {
            q.voters().keys().copied().collect::<BTreeSet<_>>() == want && q.caught_up() && cond(q)
        }))
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e:?}; want voters {want:?}, last {:?}",
            last.as_ref().map(|q| (q.leader, q.epoch, &q.rows))
        )
    });
    last.expect("seen")
}

/// Produces `n` records numbered from `first` with acks=all; all must be acknowledged.
fn produce(bootstrap: &str, first: usize, n: usize) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    for i in first..first + n {
        let payload = format!("record-{i}");
        let key = i.to_string();
        p.send(BaseRecord::to(TOPIC).key(&key).payload(&payload))
            .expect("queue a record");
    }
    p.flush(Duration::from_secs(40)).expect("records delivered");
}

/// Reads every partition of [`TOPIC`] from the beginning until `n` records arrived (or the
/// timeout); returns their payloads.
fn consume(bootstrap: &str, partitions: i32, n: usize) -> BTreeSet<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "dynamic-quorum")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "200")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .expect("offset");
    }
    c.assign(&tpl).expect("assign");
    let deadline = Instant::now() + TIMEOUT;
    let mut got = BTreeSet::new();
    while got.len() < n && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
            got.insert(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    got
}

#[test]
fn a_dynamic_quorum_forms_fails_over_and_replaces_a_lost_disk() {
    let _serial = serial();
    let mut c = Cluster::start_dynamic(3, &[("replica.lag.time.max.ms", "3000")]);
    let controller_port =
        |c: &Cluster, id: i32| c.nodes[usize::try_from(id - 1).unwrap()].controller_port;

    // Node 1 founds the quorum; nodes 2 and 3 join it by themselves.
    let formed = wait_voters(controller_port(&c, 2), &[1, 2, 3], |_| true);
    assert!(
        formed.voters().values().all(|d| d != "-"),
        "every dynamic voter has a directory id: {:?}",
        formed.rows
    );
    for n in &c.nodes {
        let founded = n
            .read_tail(1 << 20)
            .matches("founded the dynamic metadata quorum")
            .count();
        assert_eq!(founded, usize::from(n.id == 1), "node {}", n.id);
    }
    for r in &formed.rows {
        // DescribeQuorum's fetch times are the leader's wall clock, as Kafka's: recent.
        let ago: i64 = r["LAST-FETCH-MS-AGO"].parse().unwrap();
        assert!((0..600_000).contains(&ago), "{r:?}");
        let id: i32 = r["NODE"].parse().unwrap();
        assert_eq!(
            r["ENDPOINT"],
            format!("127.0.0.1:{}", controller_port(&c, id)),
            "the voter set records each voter's controller listener"
        );
    }
    c.wait_ready(TIMEOUT);
    let ids: BTreeSet<Option<String>> = c
        .nodes
        .iter()
        .map(|n| cluster::cluster_id(n.port).expect("cluster id"))
        .collect();
    assert_eq!(
        ids.len(),
        1,
        "one cluster id, derived alike by every node: {ids:?}"
    );

    // Replication factor 3 over the three brokers, and acks=all writes.
    let all = c.bootstrap(&[1, 2, 3]);
    admin_ok(
        &c.bootstrap(&[2]),
        &[
            "topics",
            "create",
            "--topic",
            TOPIC,
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
    );
    let placed = c
        .wait_metadata(1, "the topic on node 1", TIMEOUT, |m| {
            m.partitions(TOPIC).len() == 3
        })
        .expect("the topic everywhere");
    for (p, info) in placed.partitions(TOPIC) {
        let replicas: BTreeSet<i32> = info.replicas.iter().copied().collect();
        assert_eq!(replicas, BTreeSet::from([1, 2, 3]), "partition {p}");
    }
    produce(&all, 0, 100);

    // kill -9 the quorum's leader: the others elect another and metadata goes on.
    let old = formed.leader;
    let survivors: Vec<i32> = [1, 2, 3].into_iter().filter(|&i| i != old).collect();
    let killed_at = Instant::now();
    c.node(old).kill9();
    let mut elected = None;
    wait_until(
        "a new quorum leader",
        TIMEOUT,
        Duration::from_millis(50),
        || {
            elected = quorum(controller_port(&c, survivors[0]))
                .filter(|q| q.leader != old && q.epoch > formed.epoch);
            Ok(elected.is_some())
        },
    )
    .expect("a new leader among the survivors");
    eprintln!(
        "dynamic quorum: node {} leads epoch {} {:?} after node {old} was killed",
        elected.as_ref().unwrap().leader,
        elected.as_ref().unwrap().epoch,
        killed_at.elapsed()
    );
    let rest = c.bootstrap(&survivors);
    admin_ok(
        &c.bootstrap(&survivors[..1]),
        &[
            "topics",
            "create",
            "--topic",
            "after-failover",
            "--partitions",
            "1",
        ],
    );
    produce(&rest, 100, 100);

    // The killed node comes back with an empty disk: it joins, and its new directory
    // replaces its old one among the voters.
    let old_directory = formed.voters()[&old].clone();
    let data_dir = c.node(old).data_dir.clone();
    std::fs::remove_dir_all(&data_dir).expect("wipe the node's disk");
    c.node(old).spawn();
    let rejoined = wait_voters(controller_port(&c, survivors[0]), &[1, 2, 3], |q| {
        q.voters()[&old] != old_directory
    });
    let log = c.node(old).read_tail(1 << 20);
    assert!(
        log.contains("a metadata quorum already exists"),
        "the wiped node found the quorum instead of founding one"
    );
    assert_eq!(
        log.matches("founded the dynamic metadata quorum").count(),
        usize::from(old == 1),
        "founded at most once, on its first start"
    );
    let got = consume(&c.bootstrap(&[old]), 3, 200);
    assert_eq!(got.len(), 200, "every acknowledged record is read back");

    // The operator removes a stopped voter; two voters go on committing.
    let leaving = *survivors.iter().find(|&&i| i != rejoined.leader).unwrap();
    let staying: Vec<i32> = [1, 2, 3].into_iter().filter(|&i| i != leaving).collect();
    let leaving_directory = rejoined.voters()[&leaving].clone();
    c.node(leaving)
        .stop(Duration::from_secs(30))
        .expect("a clean stop");
    let at = format!("127.0.0.1:{}", controller_port(&c, staying[0]));
    let controller = |args: &[&str]| {
        let mut all = vec!["--bootstrap-controller", at.as_str(), "cluster"];
        all.extend_from_slice(args);
        admin_raw(&all)
    };
    let removed = controller(&[
        "remove-controller",
        "--controller-id",
        &leaving.to_string(),
        "--controller-directory-id",
        &leaving_directory,
    ]);
    assert!(removed.ok, "{removed:?}");
    wait_voters(controller_port(&c, staying[0]), &staying, |_| true);
    let created = admin(
        &c.bootstrap(&staying[..1]),
        &[
            "topics",
            "create",
            "--topic",
            "two-voters",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
        ],
    );
    assert!(created.ok, "{created:?}");

    // Bad changes get Kafka's errors.
    let staying_directory = rejoined.voters()[&staying[1]].clone();
    let duplicate = controller(&[
        "add-controller",
        "--controller-id",
        &staying[1].to_string(),
        "--controller-directory-id",
        &staying_directory,
        "--controller-endpoint",
        "CONTROLLER://127.0.0.1:1",
    ]);
    assert!(
        !duplicate.ok && duplicate.stderr.contains("DUPLICATE_VOTER"),
        "{duplicate:?}"
    );
    let unknown = controller(&[
        "remove-controller",
        "--controller-id",
        "9",
        "--controller-directory-id",
        "AAAAAAAAAAAAAAAAAAAAAQ",
    ]);
    assert!(
        !unknown.ok && unknown.stderr.contains("VOTER_NOT_FOUND"),
        "{unknown:?}"
    );

    // A dedicated broker of the dynamic quorum: an observer, and a live broker.
    c.add_dynamic_broker(4);
    let mut brokers = staying.clone();
    brokers.push(4);
    c.wait_brokers(&[staying[0], 4], &brokers, TIMEOUT)
        .expect("the dedicated broker registers");
    let seen = quorum(controller_port(&c, staying[0])).expect("the quorum");
    assert!(
        seen.rows
            .iter()
            .any(|r| r["NODE"] == "4" && r["ROLE"] == "Observer"),
        "{:?}",
        seen.rows
    );
}
