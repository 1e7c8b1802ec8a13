//! A three-voter controller quorum of real `strata` processes on 127.0.0.1, each started
//! from its own `server.properties` file (`process.roles=broker,controller`, a CONTROLLER
//! listener, `controller.quorum.voters` naming all three, its own `log.dirs`):
//!
//! - all three report the same leader and epoch through DescribeQuorum on their
//!   controller listeners, and the leader lists the three voters;
//! - the leader killed with SIGKILL, the two survivors elect a new leader in a higher epoch;
//! - the killed node restarted, it follows the new leader and its log end offset reaches
//!   the high watermark.
//!
//! A second test sends a running quorum forged claims: a BeginQuorumEpoch from a follower
//! for the epoch another node leads, one for an older epoch, and Votes in the led epoch from
//! a voter and from a node outside the voter set, each with a log far ahead; every node must
//! keep naming the same leader in the same epoch, and a Vote must not be granted.
//!
//! DescribeQuorum v0 in raw frames, independent of Strata's codec (the forged requests are
//! built with kafka-protocol's types). Every wait is bounded.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_protocol::StrBytes;
use strata_protocol::codec;
use strata_protocol::messages::{
    ApiKey, BeginQuorumEpochRequest, BrokerId, RequestKind, ResponseKind, TopicName, VoteRequest,
    begin_quorum_epoch_request, vote_request,
};
use strata_tests::cluster::{Quorum, describe_quorum, round_trip};
use strata_tests::{free_port, read_tail, serial, strata_bin};

/// The cluster id every node's file sets.
const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";

/// The most any one wait of this test takes.
const WAIT: Duration = Duration::from_secs(30);

/// One node of the cluster: its config file, ports and process.
struct Node {
    id: i32,
    config: PathBuf,
    controller: u16,
    stderr: PathBuf,
    child: Option<Child>,
}

impl Node {
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
            .expect("spawn strata (build it with `cargo build --release -p strata-broker`)");
        self.child = Some(child);
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits (bounded) for the exit; whether it exited cleanly.
    fn stop(&mut self) -> bool {
        let Some(mut c) = self.child.take() else {
            return false;
        };
        let sent = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        let deadline = Instant::now() + WAIT;
        while sent && Instant::now() < deadline {
            if let Ok(Some(status)) = c.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        false
    }

    fn log(&self) -> String {
        read_tail(&self.stderr, 6 * 1024)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The cluster; prints every node's log when a test fails.
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
            let mut f = File::create(&config).unwrap();
            writeln!(
                f,
                "process.roles=broker,controller\n\
                 node.id={id}\n\
                 cluster.id={CLUSTER_ID}\n\
                 listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{ctrl}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{plain}\n\
                 controller.listener.names=CONTROLLER\n\
                 controller.quorum.voters={voters}\n\
                 log.dirs={}",
                data.display()
            )
            .unwrap();
            nodes.push(Node {
                id,
                config,
                controller: *ctrl,
                stderr: dir.path().join(format!("node{id}.log")),
                child: None,
            });
        }
        for n in &mut nodes {
            n.spawn();
        }
        Cluster { nodes, _dir: dir }
    }

    fn node(&mut self, id: i32) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for n in &self.nodes {
                eprintln!("--- node {} ---\n{}", n.id, n.log());
            }
        }
    }
}

/// Polls until every node in `ids` names the same leader (one of `ids`) in the same epoch,
/// the leader answering without error and the others with NOT_LEADER_OR_FOLLOWER (6);
/// returns the leader's answer.
fn agreed_leader(c: &mut Cluster, ids: &[i32], what: &str) -> Quorum {
    let deadline = Instant::now() + WAIT;
    let mut corr = 0;
    let mut last = Vec::new();
    loop {
        last.clear();
        for &id in ids {
            corr += 1;
            last.push((id, describe_quorum(c.node(id).controller, corr)));
        }
        let leader = last.iter().find_map(|(id, q)| match q {
            Some(q) if q.error == 0 && q.leader == *id => Some(q.clone()),
            _ => None,
        });
        if let Some(l) = leader {
            let all = last.iter().all(|(id, q)| {
                q.as_ref().is_some_and(|q| {
                    q.leader == l.leader
                        && q.epoch == l.epoch
                        && (q.error == 0) == (*id == l.leader)
                        && (q.error == 0 || q.error == 6)
                })
            });
            if all {
                return l;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no agreed leader within {WAIT:?}; last answers {last:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls the leader named by the nodes in `ids` until `cond` holds for its answer.
fn wait_leader(c: &mut Cluster, ids: &[i32], what: &str, cond: impl Fn(&Quorum) -> bool) -> Quorum {
    let deadline = Instant::now() + WAIT;
    loop {
        let q = agreed_leader(c, ids, what);
        if cond(&q) {
            return q;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not reached within {WAIT:?}; last leader answer {q:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn caught_up(q: &Quorum, id: i32) -> bool {
    q.voters
        .iter()
        .any(|&(v, leo)| v == id && leo >= q.high_watermark)
}

#[test]
fn three_voters_elect_fail_over_and_catch_up() {
    let _serial = serial();
    assert!(Path::new(&strata_bin()).is_file(), "build strata first");
    let mut c = Cluster::start();
    let all = [1, 2, 3];

    // One leader, reported by all three in one epoch; the leader's LeaderChange commits and
    // every voter fetches up to the high watermark.
    let first = wait_leader(&mut c, &all, "first election", |q| {
        q.high_watermark > 0 && all.iter().all(|&id| caught_up(q, id))
    });
    let mut ids: Vec<i32> = first.voters.iter().map(|v| v.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, all, "the leader lists the three voters: {first:?}");
    assert!(first.epoch >= 1);

    // kill -9 the leader: the two survivors elect one of themselves in a higher epoch.
    let old = first.leader;
    c.node(old).kill9();
    let survivors: Vec<i32> = all.iter().copied().filter(|&i| i != old).collect();
    let second = wait_leader(
        &mut c,
        &survivors,
        "election after the leader's kill",
        |q| q.high_watermark >= first.high_watermark,
    );
    assert_ne!(second.leader, old);
    assert!(
        second.epoch > first.epoch,
        "new epoch {} after {}",
        second.epoch,
        first.epoch
    );

    // The old leader comes back as a follower and catches up to the high watermark.
    c.node(old).spawn();
    let third = wait_leader(&mut c, &all, "the restarted node rejoins", |q| {
        caught_up(q, old) && q.high_watermark >= second.high_watermark
    });
    assert_ne!(
        third.leader, old,
        "leadership moves only if the leader fails"
    );
    assert!(third.epoch >= second.epoch);

    // A clean stop of the leader: it resigns (EndQuorumEpoch) before it exits, and the
    // other two elect a leader in a later epoch.
    let leader = third.leader;
    assert!(c.node(leader).stop(), "the leader exits cleanly on SIGTERM");
    assert!(
        c.node(leader).log().contains("role=Resigned"),
        "the leader resigned before exiting"
    );
    let rest: Vec<i32> = all.iter().copied().filter(|&i| i != leader).collect();
    let fourth = wait_leader(&mut c, &rest, "election after a clean stop", |q| {
        q.high_watermark > third.high_watermark
    });
    assert!(fourth.epoch > third.epoch, "{fourth:?} after {third:?}");

    // Its Raft state is on its own disk, in Kafka's layout.
    let dir = c
        .node(old)
        .config
        .parent()
        .unwrap()
        .join(format!("node{old}"));
    let metadata = dir.join("__cluster_metadata-0");
    assert!(metadata.join("quorum-state").is_file());
    assert!(
        fs::read_dir(&metadata)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".log")),
        "a metadata log segment in {}",
        metadata.display()
    );
}

#[test]
fn a_lone_voter_cannot_lead_until_a_majority_is_back() {
    let _serial = serial();
    assert!(Path::new(&strata_bin()).is_file(), "build strata first");
    let mut c = Cluster::start();
    let all = [1, 2, 3];
    let first = wait_leader(&mut c, &all, "first election", |q| q.high_watermark > 0);

    // Kill the leader and one follower: the last voter is a minority.
    let lone = *all.iter().find(|&&i| i != first.leader).unwrap();
    let dead: Vec<i32> = all.iter().copied().filter(|&i| i != lone).collect();
    for &id in &dead {
        c.node(id).kill9();
    }
    // Several election timeouts (1-2 s each): it must never lead alone.
    let until = Instant::now() + Duration::from_secs(6);
    let mut corr = 1000;
    while Instant::now() < until {
        corr += 1;
        if let Some(q) = describe_quorum(c.node(lone).controller, corr) {
            assert_ne!(q.error, 0, "node {lone} leads without a majority: {q:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    // One voter back: the two form a majority and elect a leader in a later epoch.
    c.node(dead[0]).spawn();
    let pair = [lone.min(dead[0]), lone.max(dead[0])];
    let second = wait_leader(&mut c, &pair, "election once a majority is back", |q| {
        q.high_watermark > first.high_watermark
    });
    assert!(second.epoch > first.epoch, "{second:?} after {first:?}");
}

/// Sends `body` as `api` v`version` to the controller listener at `port`; the answer.
fn forge(port: u16, api: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
    let frame = codec::encode_request(api, version, 5, "forger", &body).expect("encode");
    // `round_trip` adds the size prefix again.
    let answer = round_trip(port, &frame[4..]).expect("an answer");
    codec::decode_response(api, version, Bytes::from(answer))
        .expect("decode")
        .body
}

fn metadata_topic() -> TopicName {
    TopicName(StrBytes::from_static_str("__cluster_metadata"))
}

/// BeginQuorumEpoch v1 to `voter`: `leader` claims to lead `epoch`.
fn begin_epoch(voter: i32, leader: i32, epoch: i32) -> RequestKind {
    let mut p = begin_quorum_epoch_request::PartitionData::default();
    p.partition_index = 0;
    p.leader_id = BrokerId(leader);
    p.leader_epoch = epoch;
    let mut t = begin_quorum_epoch_request::TopicData::default();
    t.topic_name = metadata_topic();
    t.partitions = vec![p];
    let mut r = BeginQuorumEpochRequest::default();
    r.cluster_id = Some(StrBytes::from_static_str(CLUSTER_ID));
    r.voter_id = BrokerId(voter);
    r.topics = vec![t];
    RequestKind::BeginQuorumEpoch(r)
}

/// Vote v2 to `voter` from `candidate` in `epoch`, with a log far ahead of anyone's.
fn vote(voter: i32, candidate: i32, epoch: i32) -> RequestKind {
    let mut p = vote_request::PartitionData::default();
    p.partition_index = 0;
    p.replica_epoch = epoch;
    p.replica_id = BrokerId(candidate);
    p.last_offset_epoch = epoch;
    p.last_offset = 1_000_000;
    let mut t = vote_request::TopicData::default();
    t.topic_name = metadata_topic();
    t.partitions = vec![p];
    let mut r = VoteRequest::default();
    r.cluster_id = Some(StrBytes::from_static_str(CLUSTER_ID));
    r.voter_id = BrokerId(voter);
    r.topics = vec![t];
    RequestKind::Vote(r)
}

#[test]
fn forged_leader_claims_and_votes_move_no_voter() {
    let _serial = serial();
    assert!(Path::new(&strata_bin()).is_file(), "build strata first");
    let mut c = Cluster::start();
    let all = [1, 2, 3];
    let first = wait_leader(&mut c, &all, "first election", |q| {
        q.high_watermark > 0 && all.iter().all(|&id| caught_up(q, id))
    });
    let (leader, epoch) = (first.leader, first.epoch);
    let others: Vec<i32> = all.iter().copied().filter(|&i| i != leader).collect();
    let (target, claimant) = (others[0], others[1]);
    let port = c.node(target).controller;

    // The claimant says it leads the current epoch, then an older one.
    for e in [epoch, epoch - 1] {
        let answer = forge(
            port,
            ApiKey::BeginQuorumEpoch,
            1,
            begin_epoch(target, claimant, e),
        );
        assert!(
            matches!(answer, ResponseKind::BeginQuorumEpoch(_)),
            "{answer:?}"
        );
    }
    // Votes in the led epoch: from the claimant and from node 9, which is no voter.
    for candidate in [claimant, 9] {
        let answer = forge(port, ApiKey::Vote, 2, vote(target, candidate, epoch));
        let ResponseKind::Vote(r) = answer else {
            panic!("not a Vote answer: {answer:?}");
        };
        let granted = r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| p.vote_granted);
        assert!(!granted, "a vote from {candidate} granted: {r:?}");
    }

    // Every node keeps the leader and epoch it had, for longer than the fetch timeout
    // (2 s) a follower misled into following the claimant would take to notice.
    let until = Instant::now() + Duration::from_secs(3);
    let mut corr = 100;
    while Instant::now() < until {
        for &id in &all {
            corr += 1;
            let q = describe_quorum(c.node(id).controller, corr);
            assert!(
                q.as_ref()
                    .is_some_and(|q| q.leader == leader && q.epoch == epoch),
                "node {id} after the forged claims: {q:?} (leader {leader}, epoch {epoch})"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // And every voter still fetches from the leader up to its high watermark.
    let after = wait_leader(&mut c, &all, "fetching after the forged claims", |q| {
        all.iter().all(|&id| caught_up(q, id))
    });
    assert_eq!((after.leader, after.epoch), (leader, epoch));
}
