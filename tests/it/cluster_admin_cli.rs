//! `strata admin` against a real three-node cluster (combined broker and controller
//! nodes): `cluster` lists the three brokers and the controller every node agrees on,
//! the quorum (DescribeQuorum on a controller listener, and through any broker's client
//! listener, which forwards it to the active controller) with its three voters, and the
//! under-replicated partitions once a node is killed; `topics describe` reads each
//! partition's offsets from its own leader, and `groups describe` asks the group's
//! coordinator, wherever the bootstrap node is.

use std::collections::BTreeSet;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::cluster::Cluster;
use strata_tests::{serial, wait_until};

use crate::admin_cli_run::{admin, admin_ok, admin_raw, table};

const TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn cluster_topics_and_groups_on_three_nodes() {
    let _serial = serial();
    let mut c = Cluster::start(3, &[("replica.lag.time.max.ms", "3000")]);
    let controller = c.wait_ready(TIMEOUT);
    let ids = c.ids();
    let all = c.bootstrap(&ids);
    // A node that is not the controller, to show that nothing depends on asking the leader.
    let other = *ids.iter().find(|&&i| i != controller).unwrap();
    let bs = format!("127.0.0.1:{}", c.port(other));

    let out = admin_ok(&bs, &["cluster", "brokers"]);
    assert!(
        out.contains(&format!("Active controller: {controller}")),
        "{out}"
    );
    let rows = table(&out, "ID");
    let listed: Vec<String> = rows.iter().map(|r| r["HOST:PORT"].clone()).collect();
    let want: Vec<String> = ids
        .iter()
        .map(|&i| format!("127.0.0.1:{}", c.port(i)))
        .collect();
    assert_eq!(listed, want, "{out}");
    let out = admin_ok(&bs, &["cluster", "controller"]);
    assert_eq!(out.trim(), format!("Active controller: {controller}"));

    // The quorum, asked of the leader's controller listener, of a follower's (which
    // answers NOT_LEADER_OR_FOLLOWER with the leader and, in DescribeQuorum v2, the voters'
    // endpoints, so the tool asks the leader there, KIP-853), and of a follower's client
    // listener, which forwards it to the leader.
    let controller_port = c
        .nodes
        .iter()
        .find(|n| n.id == controller)
        .unwrap()
        .controller_port;
    let follower_port = c
        .nodes
        .iter()
        .find(|n| n.id == other)
        .unwrap()
        .controller_port;
    for out in [
        admin_raw(&[
            "--bootstrap-controller",
            &format!("127.0.0.1:{controller_port}"),
            "cluster",
            "quorum",
        ]),
        admin_raw(&[
            "--bootstrap-controller",
            &format!("127.0.0.1:{follower_port}"),
            "cluster",
            "quorum",
        ]),
        admin(&bs, &["cluster", "quorum"]),
    ] {
        assert!(out.ok, "{out:?}");
        let text = &out.stdout;
        assert!(
            text.contains(&format!("Quorum leader: {controller}")),
            "{text}"
        );
        let voters = table(text, "NODE");
        let nodes: BTreeSet<String> = voters.iter().map(|r| r["NODE"].clone()).collect();
        assert_eq!(
            nodes,
            ids.iter().map(ToString::to_string).collect(),
            "{text}"
        );
        let leaders: Vec<&str> = voters
            .iter()
            .filter(|r| r["ROLE"] == "Leader")
            .map(|r| r["NODE"].as_str())
            .collect();
        assert_eq!(leaders, [controller.to_string().as_str()], "{text}");
        for r in &voters {
            // DescribeQuorum v2's Nodes: each voter's controller listener.
            let node = c
                .nodes
                .iter()
                .find(|n| n.id.to_string() == r["NODE"])
                .unwrap();
            assert_eq!(
                r["ENDPOINT"],
                format!("127.0.0.1:{}", node.controller_port),
                "{text}"
            );
            assert!(r["LAG"].parse::<i64>().is_ok(), "{text}");
        }
    }

    // A topic over all three nodes, its partitions' offsets read from their leaders.
    admin_ok(
        &bs,
        &[
            "topics",
            "create",
            "--topic",
            "spread",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
    );
    let m = c
        .wait_metadata(other, "spread led", TIMEOUT, |m| {
            let p = m.partitions("spread");
            p.len() == 3 && p.values().all(|p| p.leader >= 0 && p.isr.len() == 3)
        })
        .unwrap();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &all)
        .set("acks", "all")
        .create()
        .unwrap();
    for part in 0..3 {
        for i in 0..(10 * (part + 1)) {
            let v = format!("v{i}");
            producer
                .send(
                    BaseRecord::<(), str>::to("spread")
                        .payload(&v)
                        .partition(part),
                )
                .unwrap();
        }
    }
    producer.flush(TIMEOUT).unwrap();
    let out = admin_ok(&bs, &["topics", "describe", "--topic", "spread"]);
    let rows = table(&out, "TOPIC");
    assert_eq!(rows.len(), 3, "{out}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["LOG-END"], (10 * (i + 1)).to_string(), "{out}");
        let leader = m.partitions("spread")[&i32::try_from(i).unwrap()].leader;
        assert_eq!(r["LEADER"], leader.to_string(), "{out}");
        assert_eq!(r["REPLICAS"].split(',').count(), 3, "{out}");
    }
    let distinct: BTreeSet<&str> = rows.iter().map(|r| r["LEADER"].as_str()).collect();
    assert!(
        distinct.len() > 1,
        "the partitions' leaders are spread: {out}"
    );

    // A group's lag, from its coordinator and the partitions' leaders.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &all)
        .set("group.id", "spread-readers")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for part in 0..3 {
        tpl.add_partition_offset("spread", part, Offset::Offset(5))
            .unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
    for node in &ids {
        let out = admin_ok(
            &format!("127.0.0.1:{}", c.port(*node)),
            &["groups", "describe", "--group", "spread-readers"],
        );
        let lags: Vec<String> = table(&out, "GROUP")
            .iter()
            .map(|r| r["LAG"].clone())
            .collect();
        assert_eq!(lags, ["5", "15", "25"], "from node {node}: {out}");
    }

    let out = admin_ok(&bs, &["cluster", "under-replicated"]);
    assert!(out.contains("Under-replicated partitions: none"), "{out}");
    // Kill a node that is neither the controller nor the bootstrap node: every partition
    // loses it from its ISR.
    let victim = *ids
        .iter()
        .find(|&&i| i != controller && i != other)
        .unwrap();
    c.node(victim).kill9();
    let mut last = String::new();
    wait_until(
        "spread under-replicated",
        TIMEOUT,
        Duration::from_millis(500),
        || {
            last = admin_ok(&bs, &["cluster", "under-replicated"]);
            Ok(table(&last, "TOPIC").len() == 3)
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}\n{last}"));
    for r in table(&last, "TOPIC") {
        assert_eq!(r["TOPIC"], "spread", "{last}");
        assert_eq!(r["MISSING"], victim.to_string(), "{last}");
        assert_eq!(r["REPLICAS"].split(',').count(), 3, "{last}");
        assert_eq!(r["ISR"].split(',').count(), 2, "{last}");
    }
    let out = admin_ok(&bs, &["cluster", "brokers"]);
    assert_eq!(
        table(&out, "ID").len(),
        2,
        "the killed node is gone from the live brokers: {out}"
    );
}
