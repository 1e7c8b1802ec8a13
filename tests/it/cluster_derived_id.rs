//! A three-node cluster started with no `cluster.id` anywhere: every node derives the same
//! id from `controller.quorum.voters`, formats its empty data directory with it on first
//! start (no separate format step), reports it in Metadata v2, runs as one cluster, keeps
//! it across a SIGKILL and restart, and a node later given another `cluster.id` refuses
//! to start on its formatted data directory.

use std::path::Path;
use std::time::{Duration, Instant};

use strata_tests::cluster::{Cluster, cluster_id, create_topic_raw};
use strata_tests::{serial, strata_bin};

const ELECTION: Duration = Duration::from_secs(30);
const MARGIN: Duration = Duration::from_secs(15);
const OTHER: &str = "J8aAPcfLQt2bqs1JT_rMgQ";

fn meta_properties_id(data_dir: &Path) -> String {
    let text = std::fs::read_to_string(data_dir.join("meta.properties")).expect("meta.properties");
    text.lines()
        .find_map(|l| l.strip_prefix("cluster.id="))
        .unwrap_or_else(|| panic!("no cluster.id in {text}"))
        .to_owned()
}

#[test]
fn a_cluster_without_cluster_id_agrees_on_a_derived_one() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let settings = [
        ("broker.session.timeout.ms", "3000"),
        ("broker.heartbeat.interval.ms", "500"),
    ];
    let mut c = Cluster::start_with_cluster_id(3, &settings, None);
    let controller = c.wait_ready(ELECTION);
    let ids: Vec<Option<String>> = c
        .nodes
        .iter()
        .map(|n| cluster_id(n.port).expect("Metadata v2"))
        .collect();
    let id = ids[0].clone().expect("a cluster id");
    assert_eq!(id.len(), 22, "a Kafka UUID string: {id}");
    assert!(
        ids.iter().all(|i| i.as_deref() == Some(id.as_str())),
        "{ids:?}"
    );
    for n in &c.nodes {
        assert_eq!(meta_properties_id(&n.data_dir), id, "node {}", n.id);
    }
    println!("measured: three nodes without cluster.id agree on {id}");

    // One cluster: a replicated topic created through a node that forwards to the controller.
    let other = c.ids().into_iter().find(|i| *i != controller).unwrap();
    assert_eq!(
        create_topic_raw(c.node(other).port, "derived", 3, 3).expect("CreateTopics"),
        0
    );
    c.wait_metadata(controller, "the topic with full ISRs", MARGIN, |m| {
        let p = m.partitions("derived");
        p.len() == 3 && p.values().all(|p| p.leader >= 0 && p.isr.len() == 3)
    })
    .unwrap_or_else(|e| panic!("{e:?}"));

    // Restarted, a node reads the id back from its data directory and rejoins.
    c.node(other).restart();
    c.wait_brokers(&c.ids(), &c.ids(), ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        cluster_id(c.node(other).port).unwrap().as_deref(),
        Some(id.as_str())
    );

    // A configured cluster.id is still checked against meta.properties.
    let node = c.node(other);
    node.kill9();
    let mut config = std::fs::read_to_string(&node.config).unwrap();
    config.push_str(&format!("cluster.id={OTHER}\n"));
    std::fs::write(&node.config, config).unwrap();
    node.spawn();
    let started = Instant::now();
    while node.is_running() && started.elapsed() < MARGIN {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!node.is_running(), "started with another cluster's data");
    let tail = node.read_tail(4096);
    assert!(
        tail.contains("Invalid cluster.id in: ")
            && tail.contains(&format!("Expected {OTHER}, but read {id}")),
        "{tail}"
    );
    assert_eq!(meta_properties_id(&node.data_dir), id, "untouched");
}
