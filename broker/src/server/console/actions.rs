//! The console's writes, each one Kafka API request as the signed-in user, so each is
//! authorized as a client's would be (CREATE on the cluster or topic, DELETE, ALTER,
//! ALTER_CONFIGS, READ on the group): metadata writes go to the active controller, record
//! deletion to the partition's leader, offsets to the group's coordinator. Kafka's error
//! comes back as the answer (403 for an authorization failure, 400 otherwise) with its
//! name and message.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use strata_protocol::StrBytes;
use strata_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use strata_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use strata_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use strata_protocol::messages::delete_topics_request::DeleteTopicState;
use strata_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use strata_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest,
    DeleteTopicsRequest, IncrementalAlterConfigsRequest, RequestKind, ResponseKind, TopicName,
};

use super::http::Failure;
use super::{Console, User};
use crate::admin::client::{Client, error_name, leaders};
use crate::admin::groups::{Target, commit, committed, describe_group, plan};
use crate::admin::logs::TopicPartition;

/// How long the controller may take to apply a write.
const TIMEOUT_MS: i32 = 30_000;
/// DescribeConfigs' and IncrementalAlterConfigs' resource type of a topic.
const TOPIC_RESOURCE: i8 = 2;
/// The longest topic name Kafka takes.
const MAX_TOPIC_NAME: usize = 249;

/// Kafka's error for the page: 403 for the authorization failures, 400 otherwise.
fn refused(what: &str, code: i16, message: Option<&StrBytes>) -> Failure {
    let text = match message.filter(|m| !m.is_empty()) {
        Some(m) => format!("{what}: {} ({m})", error_name(code)),
        None => format!("{what}: {}", error_name(code)),
    };
    if matches!(code, 29..=31 | 53) {
        Failure::forbidden(text)
    } else {
        Failure::bad(text)
    }
}

fn str_field<'a>(body: &'a Value, name: &str) -> Result<&'a str, Failure> {
    body.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Failure::bad(format!("the body needs \"{name}\", a string")))
}

fn int_field(body: &Value, name: &str) -> Result<Option<i64>, Failure> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .map(Some)
            .ok_or_else(|| Failure::bad(format!("\"{name}\" must be a whole number"))),
    }
}

fn narrow<T: TryFrom<i64>>(name: &str, v: i64) -> Result<T, Failure> {
    T::try_from(v).map_err(|_| Failure::bad(format!("\"{name}\" is out of range")))
}

/// A client whose metadata writes go to the active controller.
fn controller_client(c: &Console, u: &User) -> Result<(Client, i32), Failure> {
    let mut client = c.client(Some(u))?;
    let controller = c.controller()?;
    // Learn the brokers, so the controller is routable by id.
    client.metadata(Some(&[]))?;
    Ok((client, controller))
}

/// `POST /api/topics`: `{"name", "partitions", "replication_factor", "configs": {k: v}}`.
pub fn create_topic(c: &Console, u: &User, body: &Value) -> Result<Value, Failure> {
    let name = str_field(body, "name")?;
    if name.len() > MAX_TOPIC_NAME {
        return Err(Failure::bad(format!(
            "a topic name has at most {MAX_TOPIC_NAME} characters"
        )));
    }
    let partitions: i32 = narrow("partitions", int_field(body, "partitions")?.unwrap_or(-1))?;
    let rf: i16 = narrow(
        "replication_factor",
        int_field(body, "replication_factor")?.unwrap_or(-1),
    )?;
    let mut configs = Vec::new();
    if let Some(map) = body.get("configs").and_then(Value::as_object) {
        for (k, v) in map {
            let value = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => {
                    return Err(Failure::bad(format!(
                        "config {k}: a string, number or boolean"
                    )));
                }
            };
            configs.push(
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string(k.clone()))
                    .with_value(Some(StrBytes::from_string(value))),
            );
        }
    }
    let (mut client, controller) = controller_client(c, u)?;
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(TIMEOUT_MS)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                .with_num_partitions(partitions)
                .with_replication_factor(rf)
                .with_configs(configs),
        ]);
    let ResponseKind::CreateTopics(r) = client.send_to(
        controller,
        ApiKey::CreateTopics,
        RequestKind::CreateTopics(request),
    )?
    else {
        return Err(anyhow::anyhow!("CreateTopics was not answered with CreateTopics").into());
    };
    let t = r
        .topics
        .first()
        .ok_or_else(|| Failure::bad("CreateTopics answered no topic"))?;
    if t.error_code != 0 {
        return Err(refused(
            &format!("create topic {name}"),
            t.error_code,
            t.error_message.as_ref(),
        ));
    }
    Ok(json!({
        "created": name,
        "topic_id": t.topic_id.to_string(),
        "partitions": t.num_partitions,
        "replication_factor": t.replication_factor,
    }))
}

/// `DELETE /api/topics/{name}`.
pub fn delete_topic(c: &Console, u: &User, name: &str) -> Result<Value, Failure> {
    let (mut client, controller) = controller_client(c, u)?;
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(TIMEOUT_MS)
        .with_topics(vec![
            DeleteTopicState::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.to_owned())))),
        ]);
    let ResponseKind::DeleteTopics(r) = client.send_to(
        controller,
        ApiKey::DeleteTopics,
        RequestKind::DeleteTopics(request),
    )?
    else {
        return Err(anyhow::anyhow!("DeleteTopics was not answered with DeleteTopics").into());
    };
    let t = r
        .responses
        .first()
        .ok_or_else(|| Failure::bad("DeleteTopics answered no topic"))?;
    if t.error_code != 0 {
        return Err(refused(
            &format!("delete topic {name}"),
            t.error_code,
            t.error_message.as_ref(),
        ));
    }
    Ok(json!({ "deleted": name }))
}

/// `POST /api/topics/{name}/partitions`: `{"count"}`, the new total.
pub fn add_partitions(c: &Console, u: &User, name: &str, body: &Value) -> Result<Value, Failure> {
    let count: i32 = narrow(
        "count",
        int_field(body, "count")?.ok_or_else(|| {
            Failure::bad("the body needs \"count\", the new number of partitions")
        })?,
    )?;
    let (mut client, controller) = controller_client(c, u)?;
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(TIMEOUT_MS)
        .with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                .with_count(count)
                .with_assignments(None),
        ]);
    let ResponseKind::CreatePartitions(r) = client.send_to(
        controller,
        ApiKey::CreatePartitions,
        RequestKind::CreatePartitions(request),
    )?
    else {
        return Err(
            anyhow::anyhow!("CreatePartitions was not answered with CreatePartitions").into(),
        );
    };
    let t = r
        .results
        .first()
        .ok_or_else(|| Failure::bad("CreatePartitions answered no topic"))?;
    if t.error_code != 0 {
        return Err(refused(
            &format!("add partitions to {name}"),
            t.error_code,
            t.error_message.as_ref(),
        ));
    }
    Ok(json!({ "topic": name, "partitions": count }))
}

/// `POST /api/topics/{name}/configs`: `{"name", "value"}` sets it, `"value": null` removes
/// the topic's own value (back to the default).
pub fn alter_config(c: &Console, u: &User, topic: &str, body: &Value) -> Result<Value, Failure> {
    let key = str_field(body, "name")?;
    let value = match body.get("value") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(Value::Bool(b)) => Some(b.to_string()),
        Some(_) => {
            return Err(Failure::bad(
                "\"value\" must be a string, number, boolean or null",
            ));
        }
    };
    // IncrementalAlterConfigs' operations: 0 SET, 1 DELETE.
    let operation = if value.is_some() { 0 } else { 1 };
    let (mut client, controller) = controller_client(c, u)?;
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(topic.to_owned()))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.to_owned()))
                    .with_config_operation(operation)
                    .with_value(value.clone().map(StrBytes::from_string)),
            ]),
    ]);
    let ResponseKind::IncrementalAlterConfigs(r) = client.send_to(
        controller,
        ApiKey::IncrementalAlterConfigs,
        RequestKind::IncrementalAlterConfigs(request),
    )?
    else {
        return Err(anyhow::anyhow!(
            "IncrementalAlterConfigs was not answered with IncrementalAlterConfigs"
        )
        .into());
    };
    let res = r
        .responses
        .first()
        .ok_or_else(|| Failure::bad("IncrementalAlterConfigs answered nothing"))?;
    if res.error_code != 0 {
        return Err(refused(
            &format!("alter {key} of {topic}"),
            res.error_code,
            res.error_message.as_ref(),
        ));
    }
    Ok(json!({ "topic": topic, "name": key, "value": value }))
}

/// `POST /api/topics/{name}/delete-records`: `{"partition", "offset"}` (-1: up to the high
/// watermark), at the partition's leader.
pub fn delete_records(c: &Console, u: &User, topic: &str, body: &Value) -> Result<Value, Failure> {
    let partition: i32 = narrow(
        "partition",
        int_field(body, "partition")?
            .ok_or_else(|| Failure::bad("the body needs \"partition\""))?,
    )?;
    let offset = int_field(body, "offset")?
        .ok_or_else(|| Failure::bad("the body needs \"offset\" (-1 for the high watermark)"))?;
    let mut client = c.client(Some(u))?;
    let m = client.metadata(Some(&[topic.to_owned()]))?;
    if let Some(t) = m.topics.first()
        && t.error_code != 0
    {
        return Err(refused(&format!("topic {topic}"), t.error_code, None));
    }
    let leader = leaders(&m)
        .get(&(topic.to_owned(), partition))
        .copied()
        .ok_or_else(|| Failure::not_found(format!("topic {topic} has no partition {partition}")))?;
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(TIMEOUT_MS)
        .with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![
                    DeleteRecordsPartition::default()
                        .with_partition_index(partition)
                        .with_offset(offset),
                ]),
        ]);
    let ResponseKind::DeleteRecords(r) = client.send_to(
        leader,
        ApiKey::DeleteRecords,
        RequestKind::DeleteRecords(request),
    )?
    else {
        return Err(anyhow::anyhow!("DeleteRecords was not answered with DeleteRecords").into());
    };
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| Failure::bad("DeleteRecords answered no partition"))?;
    if p.error_code != 0 {
        return Err(refused(
            &format!("delete records of {topic}:{partition}"),
            p.error_code,
            None,
        ));
    }
    Ok(json!({ "topic": topic, "partition": partition, "low_watermark": p.low_watermark }))
}

/// `POST /api/groups/{id}/reset-offsets`: `{"to": "earliest" | "latest" | "timestamp" |
/// "offset", "value", "topic"}` for every partition the group has committed (or every
/// partition of `topic`). As Kafka's tool, only while the group has no members (Empty).
pub fn reset_offsets(c: &Console, u: &User, group: &str, body: &Value) -> Result<Value, Failure> {
    let target = match str_field(body, "to")? {
        "earliest" => Target::Earliest,
        "latest" => Target::Latest,
        "timestamp" => Target::Datetime(
            int_field(body, "value")?
                .ok_or_else(|| Failure::bad("\"value\": the time, ms since the epoch"))?,
        ),
        "offset" => Target::Offset(
            int_field(body, "value")?.ok_or_else(|| Failure::bad("\"value\": the offset"))?,
        ),
        other => {
            return Err(Failure::bad(format!(
                "\"to\": {other:?} is not earliest, latest, timestamp or offset"
            )));
        }
    };
    let topic = body
        .get("topic")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty());
    let mut client = c.client(Some(u))?;
    let coordinator = client.coordinator(group)?;
    let g = describe_group(&mut client, coordinator, group)?;
    let state = g.group_state.to_string();
    if !matches!(state.as_str(), "Empty" | "Dead") {
        return Err(Failure::bad(format!(
            "the offsets of group {group} can only be reset while it is inactive (Empty); it is {state} with {} members",
            g.members.len()
        )));
    }
    let current = committed(&mut client, coordinator, group)?;
    let topics: Vec<String> = match topic {
        Some(t) => vec![t.to_owned()],
        None => current
            .keys()
            .map(|(t, _)| t.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    };
    if topics.is_empty() {
        return Err(Failure::bad(format!(
            "group {group} has no committed offsets; name a topic"
        )));
    }
    let m = client.metadata(Some(&topics))?;
    if let Some(t) = m.topics.iter().find(|t| t.error_code != 0) {
        return Err(refused("topic", t.error_code, None));
    }
    let leaders = leaders(&m);
    let wanted: BTreeSet<TopicPartition> = match topic {
        Some(_) => leaders.keys().cloned().collect(),
        None => current
            .keys()
            .filter(|tp| leaders.contains_key(*tp))
            .cloned()
            .collect(),
    };
    let planned = plan(&mut client, &leaders, &wanted, &target)?;
    commit(&mut client, coordinator, group, &planned).map_err(|e| {
        let text = format!("{e:#}");
        if text.contains("AUTHORIZATION_FAILED") {
            Failure::forbidden(text)
        } else {
            Failure::bad(text)
        }
    })?;
    let rows: Vec<Value> = planned
        .iter()
        .map(|(tp, new)| {
            json!({
                "topic": tp.0,
                "partition": tp.1,
                "previous": current.get(tp),
                "offset": new,
            })
        })
        .collect();
    Ok(json!({ "group_id": group, "reset": rows }))
}
