//! `strata admin kafka-topics`: Kafka's `kafka-topics.sh` argument forms, for scripts and
//! test suites written against Kafka's tool (librdkafka's tests run it through
//! `KAFKA_PATH`; `compat-tests/kafka-stub/bin/kafka-topics.sh` is a wrapper around this).
//!
//! `--list`, `--describe` (Kafka's tab-separated lines), `--create`, `--delete`, and
//! `--alter` (`--partitions` grows the topic, `--config k=v` sets topic configs) with
//! `--topic`, `--partitions`, `--replication-factor`, `--config`, `--if-exists` and
//! `--if-not-exists`. `--bootstrap-server` is read by the caller.

use anyhow::bail;

use super::args::{Args, key_value};
use super::client::Client;
use super::topics;

pub const USAGE: &str = "strata admin kafka-topics --bootstrap-server HOST:PORT \
(--list | --describe | --create | --delete | --alter) [--topic T] [--partitions N] \
[--replication-factor N] [--config k=v]... [--if-exists] [--if-not-exists]";

/// Runs `kafka-topics ...`.
///
/// # Errors
///
/// A bad command line, an unreachable broker, or any error a broker answered.
pub fn run(client: &mut Client, args: &[String]) -> anyhow::Result<()> {
    let a = Args::parse(
        args,
        &[
            "--topic",
            "--partitions",
            "--replication-factor",
            "--config",
        ],
        &[
            "--list",
            "--describe",
            "--create",
            "--delete",
            "--alter",
            "--if-exists",
            "--if-not-exists",
        ],
    )?;
    if !a.positional.is_empty() {
        bail!("unexpected argument {}\nusage: {USAGE}", a.positional[0]);
    }
    let ops: Vec<&str> = ["--list", "--describe", "--create", "--delete", "--alter"]
        .into_iter()
        .filter(|o| a.switch(o))
        .collect();
    let [op] = ops.as_slice() else {
        bail!(
            "exactly one of --list, --describe, --create, --delete, --alter is required\nusage: {USAGE}"
        );
    };
    let topic = a.value("--topic");
    let configs = a
        .values("--config")
        .iter()
        .map(|c| key_value(c))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let need_topic = || match topic {
        Some(t) => Ok(t.to_owned()),
        None => bail!("--topic is required with {op}"),
    };
    let exists = |client: &mut Client, t: &str| -> anyhow::Result<bool> {
        let m = client.metadata(Some(&[t.to_owned()]))?;
        Ok(m.topics.iter().any(|x| x.error_code == 0))
    };
    match *op {
        "--list" => {
            let m = client.metadata(None)?;
            let mut names: Vec<String> = m
                .topics
                .iter()
                .filter(|t| t.error_code == 0)
                .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
                .filter(|n| topic.is_none_or(|t| t == n))
                .collect();
            names.sort();
            for n in names {
                println!("{n}");
            }
            Ok(())
        }
        "--describe" => describe(client, topic),
        "--create" => {
            let t = need_topic()?;
            if a.switch("--if-not-exists") && exists(client, &t)? {
                return Ok(());
            }
            topics::create(
                client,
                &t,
                a.number::<i32>("--partitions")?.unwrap_or(-1),
                a.number::<i16>("--replication-factor")?.unwrap_or(-1),
                &configs,
            )
        }
        "--delete" => {
            let t = need_topic()?;
            if a.switch("--if-exists") && !exists(client, &t)? {
                return Ok(());
            }
            topics::delete(client, &[t])
        }
        _ => {
            let t = need_topic()?;
            if a.switch("--if-exists") && !exists(client, &t)? {
                return Ok(());
            }
            let partitions = a.number::<i32>("--partitions")?;
            if partitions.is_none() && configs.is_empty() {
                bail!("--alter needs --partitions N or --config k=v");
            }
            if let Some(n) = partitions {
                topics::add_partitions(client, &t, n)?;
            }
            if !configs.is_empty() {
                let args: Vec<String> = ["alter-config", "--topic", &t]
                    .into_iter()
                    .map(str::to_owned)
                    .chain(
                        configs
                            .iter()
                            .flat_map(|(k, v)| ["--set".to_owned(), format!("{k}={v}")]),
                    )
                    .collect();
                topics::run(client, &args)?;
            }
            Ok(())
        }
    }
}

/// Kafka's `--describe` lines: a topic line, then one indented line per partition.
fn describe(client: &mut Client, topic: Option<&str>) -> anyhow::Result<()> {
    let wanted: Vec<String> = topic.map(str::to_owned).into_iter().collect();
    let m = topics::topic_metadata(client, &wanted)?;
    let mut sorted: Vec<_> = m
        .topics
        .iter()
        .filter(|t| !t.is_internal || topic.is_some())
        .collect();
    sorted.sort_by_key(|t| t.name.as_ref().map(|n| n.to_string()));
    let names: Vec<String> = sorted
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    let configs = topics::topic_configs(client, &names)?;
    let ids = |v: &[strata_protocol::messages::BrokerId]| {
        v.iter()
            .map(|b| b.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    for t in sorted {
        let name = t.name.as_ref().map_or_else(String::new, |n| n.to_string());
        let mut parts: Vec<_> = t.partitions.iter().collect();
        parts.sort_by_key(|p| p.partition_index);
        let rf = parts.first().map_or(0, |p| p.replica_nodes.len());
        let set: Vec<String> = configs
            .get(&name)
            .map(|c| c.iter().map(|(k, v)| format!("{k}={v}")).collect())
            .unwrap_or_default();
        println!(
            "Topic: {name}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {rf}\tConfigs: {}",
            t.topic_id,
            parts.len(),
            set.join(",")
        );
        for p in parts {
            println!(
                "\tTopic: {name}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}",
                p.partition_index,
                if p.leader_id.0 >= 0 {
                    p.leader_id.0.to_string()
                } else {
                    "none".to_owned()
                },
                ids(&p.replica_nodes),
                ids(&p.isr_nodes)
            );
        }
    }
    Ok(())
}
