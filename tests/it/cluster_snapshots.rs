//! Metadata snapshots (KIP-630) on a three-node cluster of real `strata` processes, with
//! thresholds small enough that a few dozen topics take several snapshots:
//!
//! - every node takes several snapshots, keeps the latest two `.checkpoint` files in
//!   `__cluster_metadata-0` and deletes the metadata-log segments they cover (the first
//!   segment, base offset 0, is gone);
//! - a node killed with SIGKILL whose whole `__cluster_metadata-0` (log, snapshots and
//!   quorum state) is deleted comes back, finds the leader's log starting past its empty
//!   one, fetches the snapshot with FetchSnapshot, and lists every topic; it then follows
//!   new topics too;
//! - a node killed and restarted with its directory intact starts from its latest snapshot
//!   (its start-up line names the snapshot's end offset) and lists every topic.
//!
//! Every wait is bounded; the test prints what it measured as `measured: ...` lines.

use std::path::Path;
use std::time::{Duration, Instant};

use strata_tests::cluster::{self, Cluster, create_topic_raw};
use strata_tests::{serial, strata_bin, wait_until};

/// Snapshot after 4 KiB of metadata entries (Kafka's default is 20 MiB), and roll the
/// metadata log every 8 KiB (Kafka's default is 1 GiB), so that snapshots leave whole
/// segments behind them to delete.
const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("metadata.log.max.record.bytes.between.snapshots", "4096"),
    ("metadata.log.segment.bytes", "8192"),
];

/// Topics created before the first restart.
const TOPICS: usize = 120;

/// The bound on the first election, on a restarted node catching up, and on a file
/// appearing.
const BOUND: Duration = Duration::from_secs(30);

/// The metadata log's directory.
const METADATA_DIR: &str = "__cluster_metadata-0";

fn topic(i: usize) -> String {
    format!("snap-{i:03}")
}

/// The snapshot files and the metadata-log segment base offsets in `dir`.
fn metadata_files(dir: &Path) -> (Vec<String>, Vec<i64>) {
    let mut checkpoints = Vec::new();
    let mut segments = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".checkpoint") {
            checkpoints.push(name);
        } else if let Some(base) = name.strip_suffix(".log") {
            segments.push(base.parse().unwrap_or(-1));
        }
    }
    checkpoints.sort();
    segments.sort_unstable();
    (checkpoints, segments)
}

/// Whether node `id`'s Metadata lists every topic in `topics`.
fn lists_all(c: &Cluster, id: i32, topics: &[String]) -> bool {
    c.metadata(id)
        .is_ok_and(|m| topics.iter().all(|t| m.topics.contains_key(t)))
}

#[test]
fn snapshots_replace_the_metadata_log_and_bring_back_a_wiped_node() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let mut c = Cluster::start(3, SETTINGS);
    let controller = c
        .wait_controller(&c.ids(), BOUND)
        .unwrap_or_else(|e| panic!("{e:?}"));
    c.wait_brokers(&c.ids(), &c.ids(), BOUND)
        .unwrap_or_else(|e| panic!("{e:?}"));

    // Enough metadata for several snapshots on every node.
    let t0 = Instant::now();
    let port = c.node(controller).port;
    let mut topics = Vec::new();
    for i in 0..TOPICS {
        let name = topic(i);
        let code = create_topic_raw(port, &name, 2, 3).expect("CreateTopics answered");
        assert_eq!(code, 0, "CreateTopics {name}");
        topics.push(name);
    }
    for id in c.ids() {
        wait_until("every topic listed", BOUND, cluster::POLL, || {
            Ok(lists_all(&c, id, &topics))
        })
        .unwrap_or_else(|e| panic!("node {id}: {e:?}"));
    }
    println!(
        "measured: {TOPICS} topics created and listed by all three nodes in {} ms",
        t0.elapsed().as_millis()
    );

    // Every node snapshotted and dropped the segments its snapshots cover.
    for id in c.ids() {
        let dir = c.node(id).data_dir.join(METADATA_DIR);
        let mut last = (Vec::new(), Vec::new());
        wait_until(
            "a snapshot and deleted segments",
            BOUND,
            cluster::POLL,
            || {
                last = metadata_files(&dir);
                Ok(!last.0.is_empty() && last.1.first().is_some_and(|&base| base > 0))
            },
        )
        .unwrap_or_else(|e| panic!("node {id}: {e:?}; files {last:?}"));
        let (checkpoints, segments) = last;
        let output = std::fs::read_to_string(&c.node(id).stderr).unwrap();
        let taken = output.matches("metadata snapshot taken").count();
        // A follower that fell behind the leader's log start installs the leader's instead
        // (rare: the leader keeps one snapshot interval of log below its latest snapshot).
        let installed = output
            .matches("metadata snapshot installed from the leader")
            .count();
        assert!(
            taken + installed >= 3,
            "node {id} took {taken} snapshots and installed {installed}"
        );
        assert!(
            checkpoints.len() <= 2,
            "node {id} keeps at most two of its {taken} snapshots: {checkpoints:?}"
        );
        let size = std::fs::metadata(dir.join(checkpoints.last().unwrap()))
            .unwrap()
            .len();
        println!(
            "measured: node {id}: {taken} snapshots taken, {installed} installed, kept {checkpoints:?} (latest {size} bytes for {TOPICS} topics), metadata segments from base offset {}",
            segments[0]
        );
    }

    // A follower loses its whole metadata directory (meta.properties stays).
    let wiped = *c.ids().iter().find(|&&id| id != controller).unwrap();
    c.node(wiped).kill9();
    let dir = c.node(wiped).data_dir.join(METADATA_DIR);
    std::fs::remove_dir_all(&dir).expect("delete __cluster_metadata-0");
    assert!(c.node(wiped).data_dir.join("meta.properties").is_file());
    let log_len = std::fs::metadata(&c.node(wiped).stderr).unwrap().len();
    let t1 = Instant::now();
    c.node(wiped).spawn();
    wait_until(
        "the wiped node lists every topic",
        BOUND,
        cluster::POLL,
        || Ok(lists_all(&c, wiped, &topics)),
    )
    .unwrap_or_else(|e| panic!("node {wiped}: {e:?}"));
    println!(
        "measured: node {wiped}, wiped, lists all {TOPICS} topics {} ms after its restart",
        t1.elapsed().as_millis()
    );
    let output = std::fs::read_to_string(&c.node(wiped).stderr).unwrap();
    let this_run = &output[usize::try_from(log_len).unwrap()..];
    assert!(
        this_run.contains("metadata snapshot installed from the leader"),
        "node {wiped} caught up without FetchSnapshot:\n{this_run}"
    );
    let (checkpoints, _) = metadata_files(&dir);
    assert!(
        !checkpoints.is_empty(),
        "node {wiped} stored the fetched snapshot"
    );

    // It follows what comes after the snapshot too.
    let extra = topic(TOPICS);
    assert_eq!(create_topic_raw(port, &extra, 1, 3).unwrap(), 0);
    topics.push(extra);
    wait_until(
        "the wiped node lists the new topic",
        BOUND,
        cluster::POLL,
        || Ok(lists_all(&c, wiped, &topics)),
    )
    .unwrap_or_else(|e| panic!("node {wiped}: {e:?}"));

    // Another node restarts with its directory intact: it starts from its snapshot.
    let kept = *c
        .ids()
        .iter()
        .find(|&&id| id != controller && id != wiped)
        .unwrap();
    c.node(kept).kill9();
    let log_len = std::fs::metadata(&c.node(kept).stderr).unwrap().len();
    let t2 = Instant::now();
    c.node(kept).spawn();
    wait_until(
        "the restarted node lists every topic",
        BOUND,
        cluster::POLL,
        || Ok(lists_all(&c, kept, &topics)),
    )
    .unwrap_or_else(|e| panic!("node {kept}: {e:?}"));
    println!(
        "measured: node {kept}, restarted intact, lists all {} topics {} ms after its restart",
        topics.len(),
        t2.elapsed().as_millis()
    );
    let output = std::fs::read_to_string(&c.node(kept).stderr).unwrap();
    let this_run = &output[usize::try_from(log_len).unwrap()..];
    let start_line = this_run
        .lines()
        .find(|l| l.contains("metadata quorum starting"))
        .unwrap_or_else(|| panic!("no start-up line:\n{this_run}"));
    let snapshot_end: i64 = start_line
        .split("snapshot_end_offset=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no snapshot_end_offset in {start_line:?}"));
    assert!(
        snapshot_end > 0,
        "node {kept} started without its snapshot: {start_line}"
    );
    // Whether it then also needed the leader's snapshot depends on how far the leader
    // moved meanwhile (the restart re-registers the broker, which writes records).
    println!(
        "measured: node {kept} started from its snapshot ending at {snapshot_end}; fetched the leader's since: {}",
        this_run.contains("metadata snapshot installed from the leader")
    );
}
