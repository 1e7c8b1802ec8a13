//! A data directory written by the single-node layout of earlier Strata releases (its own
//! metadata log of plain batches in `__cluster_metadata-0`, no `quorum-state`) opens with
//! the Raft quorum every node runs now, and keeps its topics, configs, records, committed
//! offsets and groups.
//!
//! The directory is `tests/fixtures/legacy-single-node.tar.gz`, made by the release before
//! the change with `make_legacy_fixture` below (ignored; run it with `STRATA_BIN` naming
//! that binary and `--ignored`). What it holds:
//!
//! - topic `legacy` (3 partitions, `retention.ms=86400000`), 30 records `legacy-<i>` with
//!   key `k<i>`, round robin over the partitions;
//! - topic `gone`, created and deleted;
//! - group `legacy-classic` with committed offsets 4, 5, 6 on partitions 0, 1, 2.
//!
//! - `an_old_single_node_directory_opens_and_keeps_its_data`: the topic, its config and id,
//!   every record, the committed offsets and the group are there after the upgrade; the old
//!   metadata log is kept beside the new one; a new topic, more records and a kill -9
//!   afterwards lose nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, ensure};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use strata_tests::{Broker, workspace_root};

use crate::rdkafka_clients::{self, consume, consumer, create_topic, producer, send};

const TOPIC: &str = "legacy";
const PARTITIONS: i32 = 3;
const RECORDS: usize = 30;
const GROUP: &str = "legacy-classic";
const COMMITTED: [i64; 3] = [4, 5, 6];

fn fixture() -> PathBuf {
    workspace_root().join("tests/fixtures/legacy-single-node.tar.gz")
}

fn produce(b: &Broker, tag: &str, n: usize) -> anyhow::Result<()> {
    let (p, deliveries) = producer(b, &[])?;
    for i in 0..n {
        let value = format!("{tag}-{i}");
        send(
            &p,
            TOPIC,
            i,
            &format!("k{i}"),
            value.as_bytes(),
            &[],
            rdkafka_clients::now_ms(),
        )?;
    }
    rdkafka_clients::await_reports(&p, &deliveries, n, Duration::from_secs(30))?;
    let failed = deliveries.failed.lock().unwrap().len();
    ensure!(failed == 0, "{failed} deliveries failed");
    Ok(())
}

fn commit(b: &Broker, group: &str, offsets: &[i64]) -> anyhow::Result<()> {
    let c = consumer(b, &[("group.id", group)])?;
    let mut tpl = TopicPartitionList::new();
    for (p, &o) in offsets.iter().enumerate() {
        tpl.add_partition_offset(TOPIC, i32::try_from(p)?, Offset::Offset(o))?;
    }
    c.commit(&tpl, CommitMode::Sync).context("commit")?;
    Ok(())
}

fn committed(b: &Broker, group: &str) -> anyhow::Result<Vec<i64>> {
    let c = consumer(b, &[("group.id", group)])?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(TOPIC, p);
    }
    let got = c
        .committed_offsets(tpl, Duration::from_secs(10))
        .context("OffsetFetch")?;
    Ok((0..PARTITIONS)
        .map(|p| match got.find_partition(TOPIC, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => o,
            _ => -1,
        })
        .collect())
}

fn topic_config(b: &Broker, key: &str) -> anyhow::Result<Option<String>> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let results =
        runtime.block_on(admin.describe_configs([&ResourceSpecifier::Topic(TOPIC)], &opts))?;
    let resource = results
        .into_iter()
        .next()
        .context("no DescribeConfigs result")?
        .map_err(|e| anyhow::anyhow!("DescribeConfigs: {e:?}"))?;
    Ok(resource.get(key).and_then(|e| e.value.clone()))
}

/// Every record of `TOPIC`, as `value` by partition, read from the start.
fn read_all(b: &Broker, n: usize) -> anyhow::Result<BTreeMap<i32, Vec<String>>> {
    let c = consumer(b, &[])?;
    let records = consume(
        &c,
        TOPIC,
        PARTITIONS,
        Offset::Beginning,
        n,
        Duration::from_secs(30),
    )?;
    let mut by_partition: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in records {
        by_partition.entry(r.partition).or_default().push(r.text());
    }
    Ok(by_partition)
}

fn tar(args: &[&str], cwd: &Path) -> anyhow::Result<()> {
    let status = Command::new("tar").args(args).current_dir(cwd).status()?;
    ensure!(status.success(), "tar {args:?}: {status}");
    Ok(())
}

/// Makes the fixture with the binary in `STRATA_BIN` (the release before the change).
#[test]
#[ignore = "run by hand with the old release's binary to make the fixture"]
fn make_legacy_fixture() {
    let mut b = Broker::start(&[("node.id", "1")]).unwrap();
    create_topic(&b, TOPIC, PARTITIONS).unwrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let alter = rdkafka::admin::AlterConfig::new(ResourceSpecifier::Topic(TOPIC))
        .set("retention.ms", "86400000");
    for r in runtime
        .block_on(admin.alter_configs([&alter], &opts))
        .unwrap()
    {
        r.unwrap();
    }
    create_topic(&b, "gone", 1).unwrap();
    for r in runtime
        .block_on(admin.delete_topics(&["gone"], &opts))
        .unwrap()
    {
        r.unwrap();
    }
    produce(&b, TOPIC, RECORDS).unwrap();
    commit(&b, GROUP, &COMMITTED).unwrap();
    assert_eq!(committed(&b, GROUP).unwrap(), COMMITTED);
    b.stop().unwrap();
    let out = fixture();
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let dir = b.data_dir().to_path_buf();
    tar(
        &[
            "czf",
            out.to_str().unwrap(),
            "--sort=name",
            "--owner=0",
            "--group=0",
            ".",
        ],
        &dir,
    )
    .unwrap();
    println!("wrote {}", out.display());
}

#[test]
fn an_old_single_node_directory_opens_and_keeps_its_data() {
    // The fixture's records and commits age from the day it was made, and its topic keeps
    // records for a day: no retention or offset expiry pass may run during the test, or the
    // test would start failing a day after the fixture was made.
    let no_housekeeping = "3600000";
    let overrides = [
        ("node.id", "1"),
        ("log.initial.task.delay.ms", no_housekeeping),
        ("log.retention.check.interval.ms", no_housekeeping),
        ("offsets.retention.check.interval.ms", no_housekeeping),
    ];
    strata_tests::with_broker(&overrides, |b| {
        b.stop()?;
        let dir = b.data_dir().to_path_buf();
        std::fs::remove_dir_all(&dir)?;
        std::fs::create_dir_all(&dir)?;
        tar(&["xzf", fixture().to_str().context("path")?], &dir)?;
        let cluster_id = std::fs::read_to_string(dir.join("meta.properties"))?
            .lines()
            .find_map(|l| l.strip_prefix("cluster.id=").map(str::to_owned))
            .context("no cluster.id in the fixture")?;
        b.restart()?;

        // The metadata: the topic, its config, the deleted one gone, the same cluster.
        let served = strata_tests::cluster::cluster_id(b.port())?;
        ensure!(
            served.as_deref() == Some(cluster_id.as_str()),
            "cluster id {served:?}, the directory's is {cluster_id}"
        );
        let md = strata_tests::cluster::metadata(b.port())?;
        let topics: Vec<&str> = md.topics.keys().map(String::as_str).collect();
        ensure!(
            topics.contains(&TOPIC),
            "topics after the upgrade: {topics:?}"
        );
        ensure!(
            !topics.contains(&"gone"),
            "a deleted topic came back: {topics:?}"
        );
        ensure!(
            md.topics[TOPIC].1.len() == PARTITIONS as usize,
            "{TOPIC} has {} partitions",
            md.topics[TOPIC].1.len()
        );
        ensure!(
            topic_config(b, "retention.ms")?.as_deref() == Some("86400000"),
            "the topic's config override was lost"
        );
        // The records, the committed offsets and the group.
        let before = read_all(b, RECORDS)?;
        let total: usize = before.values().map(Vec::len).sum();
        ensure!(total == RECORDS, "{total} records after the upgrade");
        ensure!(
            committed(b, GROUP)? == COMMITTED,
            "committed offsets after the upgrade: {:?}",
            committed(b, GROUP)?
        );
        let listed = crate::rdkafka_clients::group::list_group(b, GROUP)?;
        ensure!(
            listed.is_some(),
            "group {GROUP} is not listed after the upgrade"
        );
        // The old log is kept beside the new one, for an operator.
        ensure!(
            dir.join("__cluster_metadata-0.legacy").is_dir(),
            "the old metadata log was not kept"
        );
        ensure!(
            dir.join("__cluster_metadata-0/quorum-state").is_file(),
            "no quorum-state after the upgrade"
        );

        // Writes after the upgrade, then a crash: nothing is lost.
        produce(b, "after", RECORDS)?;
        create_topic(b, "fresh", 2)?;
        commit(b, GROUP, &[10, 11, 12])?;
        b.kill9()?;
        b.restart()?;
        let after = read_all(b, 2 * RECORDS)?;
        let total: usize = after.values().map(Vec::len).sum();
        ensure!(total == 2 * RECORDS, "{total} records after a crash");
        for (p, old) in &before {
            ensure!(
                after[p].starts_with(old),
                "partition {p} changed its old records"
            );
        }
        ensure!(
            committed(b, GROUP)? == [10, 11, 12],
            "offsets after a crash"
        );
        let md = strata_tests::cluster::metadata(b.port())?;
        ensure!(
            md.topics.contains_key("fresh"),
            "a topic created after the upgrade is gone"
        );
        // A clean restart too.
        b.stop()?;
        b.restart()?;
        ensure!(
            committed(b, GROUP)? == [10, 11, 12],
            "offsets after a clean restart"
        );
        Ok(())
    });
}
