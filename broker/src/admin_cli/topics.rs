//! `strata admin topics`: create, list, describe, alter-config, add-partitions, delete
//! (Kafka's `kafka-topics.sh` and `kafka-configs.sh --entity-type topics`).
//!
//! The metadata writes go to the bootstrap broker, which forwards them to the active
//! controller (KIP-590); describe reads offsets and sizes from each partition's leader.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use strata_protocol::StrBytes;
use strata_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use strata_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use strata_protocol::messages::delete_topics_request::DeleteTopicState;
use strata_protocol::messages::describe_configs_request::DescribeConfigsResource;
use strata_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use strata_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, MetadataResponse, RequestKind,
    ResponseKind, TopicName,
};

use super::args::{Args, key_value};
use super::client::{Client, describe_error, error_name, leaders};
use super::logs::{self, EARLIEST, LATEST};
use super::table::Table;

pub const USAGE: &str = "\
strata admin topics create --topic T [--partitions N] [--replication-factor N] [--config k=v]...
strata admin topics list
strata admin topics describe [--topic T]...
strata admin topics alter-config --topic T [--set k=v]... [--delete k]...
strata admin topics add-partitions --topic T --partitions N
strata admin topics delete --topic T...";

/// The `timeout_ms` sent with the metadata writes: Kafka's tools' default.
const WRITE_TIMEOUT_MS: i32 = 30_000;

/// Kafka's `ConfigResource.Type.TOPIC`.
const TOPIC_RESOURCE: i8 = 2;

/// IncrementalAlterConfigs operations (KIP-339).
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// DescribeConfigs' `DYNAMIC_TOPIC_CONFIG` source: a config set on the topic itself.
const SOURCE_TOPIC: i8 = 1;

/// Runs `topics <action> ...`.
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
            "--set",
            "--delete",
        ],
        &[],
    )?;
    let action = a.positional.first().map(String::as_str);
    let topics = a.values("--topic");
    match action {
        Some("create") => {
            let partitions = a.number::<i32>("--partitions")?.unwrap_or(-1);
            let replication = a.number::<i16>("--replication-factor")?.unwrap_or(-1);
            let configs = a
                .values("--config")
                .iter()
                .map(|c| key_value(c))
                .collect::<anyhow::Result<Vec<_>>>()?;
            for topic in one_or_more(topics)? {
                create(client, topic, partitions, replication, &configs)?;
            }
            Ok(())
        }
        Some("list") => list(client),
        Some("describe") => describe(client, topics),
        Some("alter-config") => {
            let sets = a
                .values("--set")
                .iter()
                .map(|c| key_value(c))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let deletes = a.values("--delete");
            if sets.is_empty() && deletes.is_empty() {
                bail!("alter-config needs --set k=v or --delete k");
            }
            for topic in one_or_more(topics)? {
                alter_config(client, topic, &sets, deletes)?;
            }
            Ok(())
        }
        Some("add-partitions") => {
            let count = a
                .number::<i32>("--partitions")?
                .context("--partitions (the new total) is required")?;
            for topic in one_or_more(topics)? {
                add_partitions(client, topic, count)?;
            }
            Ok(())
        }
        Some("delete") => delete(client, one_or_more(topics)?),
        _ => bail!("usage:\n{USAGE}"),
    }
}

fn one_or_more(topics: &[String]) -> anyhow::Result<&[String]> {
    if topics.is_empty() {
        bail!("--topic is required");
    }
    Ok(topics)
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_owned()))
}

/// CreateTopics for one topic; -1 partitions or replication factor takes the broker's
/// default (KIP-464).
pub fn create(
    client: &mut Client,
    topic: &str,
    partitions: i32,
    replication: i16,
    configs: &[(String, String)],
) -> anyhow::Result<()> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(WRITE_TIMEOUT_MS)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(topic_name(topic))
                .with_num_partitions(partitions)
                .with_replication_factor(replication)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string(k.clone()))
                                .with_value(Some(StrBytes::from_string(v.clone())))
                        })
                        .collect(),
                ),
        ]);
    let ResponseKind::CreateTopics(r) =
        client.send_any(ApiKey::CreateTopics, RequestKind::CreateTopics(request))?
    else {
        bail!("CreateTopics was not answered with CreateTopics");
    };
    let t = r.topics.first().context("CreateTopics answered no topic")?;
    if t.error_code != 0 {
        bail!(
            "cannot create topic {topic}: {}",
            describe_error(t.error_code, t.error_message.as_ref())
        );
    }
    println!(
        "Created topic {topic} ({} partitions, replication factor {}).",
        t.num_partitions, t.replication_factor
    );
    Ok(())
}

fn list(client: &mut Client) -> anyhow::Result<()> {
    let m = client.metadata(None)?;
    let mut names: Vec<String> = m
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    names.sort();
    for n in names {
        println!("{n}");
    }
    Ok(())
}

/// Metadata for `topics` (every topic when empty), failing on a topic the broker does not
/// know.
pub fn topic_metadata(client: &mut Client, topics: &[String]) -> anyhow::Result<MetadataResponse> {
    let m = client.metadata((!topics.is_empty()).then_some(topics))?;
    for t in &m.topics {
        if t.error_code != 0 {
            bail!(
                "topic {}: {}",
                t.name.as_ref().map_or_else(String::new, |n| n.to_string()),
                error_name(t.error_code)
            );
        }
    }
    Ok(m)
}

fn ids(v: &[strata_protocol::messages::BrokerId]) -> String {
    v.iter()
        .map(|b| b.0.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn describe(client: &mut Client, topics: &[String]) -> anyhow::Result<()> {
    let m = topic_metadata(client, topics)?;
    let leaders = leaders(&m);
    let earliest = logs::list_offsets(
        client,
        &leaders,
        &leaders.keys().map(|tp| (tp.clone(), EARLIEST)).collect(),
    )?;
    let latest = logs::list_offsets(
        client,
        &leaders,
        &leaders.keys().map(|tp| (tp.clone(), LATEST)).collect(),
    )?;
    let (sizes, dirty) = logs::log_dirs(client, &leaders, leaders.keys().cloned())?;
    let mut sorted: Vec<_> = m.topics.iter().filter(|t| t.name.is_some()).collect();
    sorted.sort_by_key(|t| t.name.as_ref().map(|n| n.to_string()));
    let names: Vec<String> = sorted
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    let configs = topic_configs(client, &names)?;
    let mut table = Table::new(&[
        "TOPIC",
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "ISR",
        "LOG-START",
        "LOG-END",
        "SIZE",
        "DIRTY-RATIO",
    ]);
    let cell = |r: Option<&Result<i64, i16>>| match r {
        Some(Ok(o)) => o.to_string(),
        Some(Err(code)) => error_name(*code),
        None => "-".to_owned(),
    };
    for t in &sorted {
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
            let tp = (name.clone(), p.partition_index);
            table.row(vec![
                name.clone(),
                p.partition_index.to_string(),
                if p.leader_id.0 >= 0 {
                    p.leader_id.0.to_string()
                } else {
                    "none".to_owned()
                },
                ids(&p.replica_nodes),
                ids(&p.isr_nodes),
                cell(earliest.get(&tp)),
                cell(latest.get(&tp)),
                sizes
                    .get(&tp)
                    .map_or_else(|| "-".to_owned(), ToString::to_string),
                dirty
                    .get(&tp)
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
            ]);
        }
    }
    println!();
    table.print();
    Ok(())
}

/// The configs set on each topic itself (source `DYNAMIC_TOPIC_CONFIG`), sorted by name.
///
/// # Errors
///
/// When DescribeConfigs fails for a topic.
pub fn topic_configs(
    client: &mut Client,
    topics: &[String],
) -> anyhow::Result<BTreeMap<String, BTreeMap<String, String>>> {
    if topics.is_empty() {
        return Ok(BTreeMap::new());
    }
    let request = DescribeConfigsRequest::default().with_resources(
        topics
            .iter()
            .map(|t| {
                DescribeConfigsResource::default()
                    .with_resource_type(TOPIC_RESOURCE)
                    .with_resource_name(StrBytes::from_string(t.clone()))
                    .with_configuration_keys(None)
            })
            .collect(),
    );
    let ResponseKind::DescribeConfigs(r) = client.send_any(
        ApiKey::DescribeConfigs,
        RequestKind::DescribeConfigs(request),
    )?
    else {
        bail!("DescribeConfigs was not answered with DescribeConfigs");
    };
    let mut out = BTreeMap::new();
    for res in r.results {
        if res.error_code != 0 {
            bail!(
                "DescribeConfigs for topic {}: {}",
                res.resource_name,
                describe_error(res.error_code, res.error_message.as_ref())
            );
        }
        let set: BTreeMap<String, String> = res
            .configs
            .iter()
            .filter(|c| c.config_source == SOURCE_TOPIC)
            .map(|c| {
                let value = if c.is_sensitive {
                    "(sensitive)".to_owned()
                } else {
                    c.value
                        .as_ref()
                        .map_or_else(String::new, ToString::to_string)
                };
                (c.name.to_string(), value)
            })
            .collect();
        out.insert(res.resource_name.to_string(), set);
    }
    Ok(out)
}

fn alter_config(
    client: &mut Client,
    topic: &str,
    sets: &[(String, String)],
    deletes: &[String],
) -> anyhow::Result<()> {
    let configs = sets
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(OP_SET)
                .with_value(Some(StrBytes::from_string(v.clone())))
        })
        .chain(deletes.iter().map(|k| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(OP_DELETE)
                .with_value(None)
        }))
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(topic.to_owned()))
            .with_configs(configs),
    ]);
    let ResponseKind::IncrementalAlterConfigs(r) = client.send_any(
        ApiKey::IncrementalAlterConfigs,
        RequestKind::IncrementalAlterConfigs(request),
    )?
    else {
        bail!("IncrementalAlterConfigs was not answered with IncrementalAlterConfigs");
    };
    let res = r
        .responses
        .first()
        .context("IncrementalAlterConfigs answered no resource")?;
    if res.error_code != 0 {
        bail!(
            "cannot alter the configs of topic {topic}: {}",
            describe_error(res.error_code, res.error_message.as_ref())
        );
    }
    println!("Completed updating config for topic {topic}.");
    Ok(())
}

/// CreatePartitions: `count` is the new total, as in Kafka's `--partitions`.
pub fn add_partitions(client: &mut Client, topic: &str, count: i32) -> anyhow::Result<()> {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(WRITE_TIMEOUT_MS)
        .with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(topic_name(topic))
                .with_count(count)
                .with_assignments(None),
        ]);
    let ResponseKind::CreatePartitions(r) = client.send_any(
        ApiKey::CreatePartitions,
        RequestKind::CreatePartitions(request),
    )?
    else {
        bail!("CreatePartitions was not answered with CreatePartitions");
    };
    let res = r
        .results
        .first()
        .context("CreatePartitions answered no topic")?;
    if res.error_code != 0 {
        bail!(
            "cannot add partitions to topic {topic}: {}",
            describe_error(res.error_code, res.error_message.as_ref())
        );
    }
    println!("Topic {topic} now has {count} partitions.");
    Ok(())
}

/// DeleteTopics by name.
pub fn delete(client: &mut Client, topics: &[String]) -> anyhow::Result<()> {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(WRITE_TIMEOUT_MS)
        .with_topics(
            topics
                .iter()
                .map(|t| DeleteTopicState::default().with_name(Some(topic_name(t))))
                .collect(),
        );
    let ResponseKind::DeleteTopics(r) =
        client.send_any(ApiKey::DeleteTopics, RequestKind::DeleteTopics(request))?
    else {
        bail!("DeleteTopics was not answered with DeleteTopics");
    };
    let mut failed = Vec::new();
    for res in &r.responses {
        let name = res
            .name
            .as_ref()
            .map_or_else(String::new, |n| n.to_string());
        if res.error_code == 0 {
            println!("Deleted topic {name}.");
        } else {
            failed.push(format!(
                "{name}: {}",
                describe_error(res.error_code, res.error_message.as_ref())
            ));
        }
    }
    if !failed.is_empty() {
        bail!("cannot delete topics: {}", failed.join("; "));
    }
    Ok(())
}
