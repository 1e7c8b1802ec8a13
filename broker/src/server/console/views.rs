//! The data of each page, as the JSON endpoints answer it (docs/CONSOLE.md).
//!
//! Each view asks the cluster as the signed-in user. What the user may not describe is
//! left out (Metadata lists only the topics it may describe) or shown as Kafka's error
//! name in place of the data (a quorum the user may not describe, a group it may not read).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_configs_request::DescribeConfigsResource;
use strata_protocol::messages::describe_producers_request::TopicRequest;
use strata_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use strata_protocol::messages::list_transactions_request::ListTransactionsRequest;
use strata_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, DescribeAclsRequest, DescribeClientQuotasRequest,
    DescribeConfigsRequest, DescribeProducersRequest, DescribeQuorumRequest,
    DescribeUserScramCredentialsRequest, GroupId, ListGroupsRequest, MetadataResponse, RequestKind,
    ResponseKind, TopicName,
};

use super::http::{Failure, Query};
use super::{Console, User};
use crate::admin::client::{Client, describe_error, error_name, leaders};
use crate::admin::groups::{committed, describe_group, log_ends, members};
use crate::admin::hot::{self, Verdict};
use crate::admin::logs::{self, EARLIEST, LATEST, TopicPartition};

/// Topics a page lists by default, and at most.
const PAGE_SIZE: usize = 100;
const MAX_PAGE_SIZE: usize = 500;
/// Problem partitions the overview lists, at most (it counts them all).
const MAX_LISTED: usize = 100;
/// How often a group's lag is remembered, and how many points.
const LAG_EVERY: Duration = Duration::from_secs(2);
const LAG_POINTS: usize = 120;
/// DescribeConfigs' resource type of a topic.
const TOPIC_RESOURCE: i8 = 2;
/// Kafka's `transaction.max.timeout.ms` default: an open transaction idle longer is hanging.
const DEFAULT_MAX_TXN_TIMEOUT_MS: i64 = 900_000;
/// Kafka's `DescribeConfigs` source of a default value.
const DEFAULT_CONFIG: i8 = 5;

/// Each group's recent lag, remembered as its page is viewed: the trend and the rate of
/// consumption behind the estimated time to catch up.
#[derive(Default)]
pub struct LagHistory {
    groups: Mutex<HashMap<String, VecDeque<LagPoint>>>,
}

#[derive(Debug, Clone, Copy)]
struct LagPoint {
    at: Instant,
    at_ms: i64,
    lag: i64,
    committed: i64,
}

impl LagHistory {
    /// Remembers `point` (one every [`LAG_EVERY`] at most; within that, a newer one
    /// replaces the last, but never the first) and answers the trend.
    fn record(&self, group: &str, point: LagPoint) -> Vec<LagPoint> {
        let mut all = self
            .groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if all.len() > 10_000 {
            all.clear();
        }
        let points = all.entry(group.to_owned()).or_default();
        let recent = points
            .back()
            .is_some_and(|last| point.at.duration_since(last.at) < LAG_EVERY);
        if !recent {
            points.push_back(point);
            while points.len() > LAG_POINTS {
                points.pop_front();
            }
        } else if points.len() > 1
            && let Some(last) = points.back_mut()
        {
            // The first point stays as the anchor; a later one is kept current.
            *last = point;
        }
        points.iter().copied().collect()
    }
}

/// The user's Metadata: every topic it may describe (`None`), or those named.
fn metadata(client: &mut Client, topics: Option<&[String]>) -> anyhow::Result<MetadataResponse> {
    client.metadata(topics)
}

fn topic_name(t: &strata_protocol::messages::metadata_response::MetadataResponseTopic) -> String {
    t.name.as_ref().map_or_else(String::new, |n| n.to_string())
}

/// The overview: brokers, controller and quorum, problem partitions.
pub fn overview(c: &Console, u: &User) -> Result<Value, Failure> {
    let mut client = c.client(Some(u))?;
    let image = c.broker.image();
    let m = metadata(&mut client, None)?;
    // Liveness: each node answers a request within two seconds, on its inter-broker listener.
    let mut brokers = Vec::new();
    for (id, b) in &image.brokers {
        let mut probe = c.client_within(Some(u), super::PROBE_TIMEOUT)?;
        let started = Instant::now();
        let answered = probe
            .send_to(*id, ApiKey::Metadata, metadata_of_nothing())
            .map(|_| started.elapsed().as_secs_f64() * 1000.0);
        brokers.push(json!({
            "id": id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "fenced": b.fenced,
            "alive": answered.is_ok(),
            "round_trip_ms": answered.as_ref().ok(),
            "error": answered.as_ref().err().map(|e| format!("{e:#}")),
            "version": (*id == c.broker.config.node_id).then_some(env!("CARGO_PKG_VERSION")),
            "this_node": *id == c.broker.config.node_id,
        }));
    }
    // At the active controller itself: a request marked with the user is never forwarded.
    let quorum = match c.controller().and_then(|id| quorum(&mut client, id)) {
        Ok(q) => q,
        Err(e) => json!({ "error": format!("{e:#}") }),
    };
    let mut under = Vec::new();
    let mut offline = Vec::new();
    let (mut topics, mut partitions) = (0, 0);
    for t in &m.topics {
        if t.error_code != 0 {
            continue;
        }
        topics += 1;
        for p in &t.partitions {
            partitions += 1;
            let entry = || {
                json!({
                    "topic": topic_name(t),
                    "partition": p.partition_index,
                    "leader": p.leader_id.0,
                    "replicas": p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                    "isr": p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                })
            };
            if p.leader_id.0 < 0 {
                offline.push(entry());
            } else if p.isr_nodes.len() < p.replica_nodes.len() {
                under.push(entry());
            }
        }
    }
    Ok(json!({
        "cluster_id": image.cluster_id,
        "node_id": c.broker.config.node_id,
        "controller_id": m.controller_id.0,
        "brokers": brokers,
        "quorum": quorum,
        "topics": topics,
        "partitions": partitions,
        "under_replicated_count": under.len(),
        "offline_count": offline.len(),
        "under_replicated": under.into_iter().take(MAX_LISTED).collect::<Vec<_>>(),
        "offline": offline.into_iter().take(MAX_LISTED).collect::<Vec<_>>(),
        "read_only": c.read_only,
        "principal": u.principal,
    }))
}

/// Metadata for no topic: the cheapest request every node answers.
fn metadata_of_nothing() -> RequestKind {
    RequestKind::Metadata(
        strata_protocol::messages::MetadataRequest::default().with_topics(Some(Vec::new())),
    )
}

/// DescribeQuorum of `__cluster_metadata`: leader, epoch, high watermark, and each voter's
/// log end offset and lag behind the leader.
fn quorum(client: &mut Client, controller: i32) -> anyhow::Result<Value> {
    let request = DescribeQuorumRequest::default().with_topics(vec![
        TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)]),
    ]);
    let ResponseKind::DescribeQuorum(r) = client.send_to(
        controller,
        ApiKey::DescribeQuorum,
        RequestKind::DescribeQuorum(request),
    )?
    else {
        bail!("DescribeQuorum was not answered with DescribeQuorum");
    };
    if r.error_code != 0 {
        bail!("{}", describe_error(r.error_code, r.error_message.as_ref()));
    }
    let Some(p) = r.topics.first().and_then(|t| t.partitions.first()) else {
        bail!("DescribeQuorum answered no partition");
    };
    if p.error_code != 0 {
        bail!("{}", describe_error(p.error_code, p.error_message.as_ref()));
    }
    let leader_end = p
        .current_voters
        .iter()
        .find(|v| v.replica_id == p.leader_id)
        .map_or(p.high_watermark, |v| v.log_end_offset);
    let replica = |v: &strata_protocol::messages::describe_quorum_response::ReplicaState| {
        json!({
            "id": v.replica_id.0,
            "log_end_offset": v.log_end_offset,
            "lag": (leader_end - v.log_end_offset).max(0),
            "last_fetch_timestamp": v.last_fetch_timestamp,
            "last_caught_up_timestamp": v.last_caught_up_timestamp,
        })
    };
    Ok(json!({
        "leader": p.leader_id.0,
        "epoch": p.leader_epoch,
        "high_watermark": p.high_watermark,
        "voters": p.current_voters.iter().map(replica).collect::<Vec<_>>(),
        "observers": p.observers.iter().map(replica).collect::<Vec<_>>(),
    }))
}

/// A parameter parsed as `T`, or a 400 naming it.
pub fn number<T: std::str::FromStr>(q: &Query, name: &str) -> Result<Option<T>, Failure> {
    q.get(name)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.trim()
                .parse::<T>()
                .map_err(|_| Failure::bad(format!("parameter {name}: {v:?} is not a valid number")))
        })
        .transpose()
}

/// A parameter between 1 and `max`, `default` when absent, or a 400 naming the range.
pub fn within<T>(q: &Query, name: &str, default: T, max: T) -> Result<T, Failure>
where
    T: std::str::FromStr + PartialOrd + From<u8> + std::fmt::Display + Copy,
{
    let v = number::<T>(q, name)?.unwrap_or(default);
    if v < T::from(1) || v > max {
        return Err(Failure::bad(format!(
            "parameter {name}: between 1 and {max}"
        )));
    }
    Ok(v)
}

/// One page of topics: name, partitions, replication, problems, size and rates.
pub fn topics(c: &Console, u: &User, q: &Query) -> Result<Value, Failure> {
    let page = number::<usize>(q, "page")?.unwrap_or(1).max(1);
    let size = within(q, "size", PAGE_SIZE, MAX_PAGE_SIZE)?;
    let filter = q
        .get("filter")
        .map(|f| f.to_lowercase())
        .unwrap_or_default();
    let mut client = c.client(Some(u))?;
    let m = metadata(&mut client, None)?;
    let mut all: Vec<_> = m
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .filter(|t| filter.is_empty() || topic_name(t).to_lowercase().contains(&filter))
        .collect();
    all.sort_by_key(|t| topic_name(t));
    let total = all.len();
    let shown: Vec<_> = all.into_iter().skip((page - 1) * size).take(size).collect();
    let all_leaders = leaders(&m);
    let names: BTreeSet<String> = shown.iter().map(|t| topic_name(t)).collect();
    let page_leaders: BTreeMap<TopicPartition, i32> = all_leaders
        .into_iter()
        .filter(|(tp, _)| names.contains(&tp.0))
        .collect();
    let sizes = logs::log_sizes(&mut client, &page_leaders, page_leaders.keys().cloned())
        .unwrap_or_default();
    let snapshot = c.rates.snapshot();
    let rows: Vec<Value> = shown
        .iter()
        .map(|t| {
            let name = topic_name(t);
            let rf = t.partitions.first().map_or(0, |p| p.replica_nodes.len());
            let under = t
                .partitions
                .iter()
                .filter(|p| p.leader_id.0 >= 0 && p.isr_nodes.len() < p.replica_nodes.len())
                .count();
            let offline = t.partitions.iter().filter(|p| p.leader_id.0 < 0).count();
            let size: i64 = sizes
                .iter()
                .filter(|(tp, _)| tp.0 == name)
                .map(|(_, s)| *s)
                .sum();
            let (records_in, bytes_in, bytes_out) =
                snapshot.as_ref().map_or((None, None, None), |s| {
                    let mine = |tp: &&TopicPartition| tp.0 == name;
                    (
                        Some(
                            s.rates
                                .iter()
                                .filter(|(tp, _)| mine(tp))
                                .map(|(_, r)| r.records_per_sec)
                                .sum::<f64>(),
                        ),
                        Some(
                            s.rates
                                .iter()
                                .filter(|(tp, _)| mine(tp))
                                .map(|(_, r)| r.bytes_per_sec)
                                .sum::<f64>(),
                        ),
                        Some(
                            s.bytes_out
                                .iter()
                                .filter(|(tp, _)| mine(tp))
                                .map(|(_, b)| *b)
                                .sum::<f64>(),
                        ),
                    )
                });
            json!({
                "name": name,
                "internal": t.is_internal,
                "partitions": t.partitions.len(),
                "replication_factor": rf,
                "under_replicated": under,
                "offline": offline,
                "size_bytes": size,
                "records_in_per_sec": records_in,
                "bytes_in_per_sec": bytes_in,
                "bytes_out_per_sec_led_here": bytes_out,
            })
        })
        .collect();
    Ok(json!({
        "total": total,
        "page": page,
        "size": size,
        "pages": total.div_ceil(size).max(1),
        "filter": filter,
        "rates_window_secs": snapshot.as_ref().map(|s| s.window_secs),
        "topics": rows,
    }))
}

/// Refuses a topic's error as the page shows it: 404 for an unknown topic, 403 for one the
/// user may not describe.
fn topic_error(name: &str, code: i16) -> Failure {
    match code {
        3 => Failure::not_found(format!("topic {name}: UNKNOWN_TOPIC_OR_PARTITION")),
        29 => Failure::forbidden(format!("topic {name}: TOPIC_AUTHORIZATION_FAILED")),
        c => Failure::bad(format!("topic {name}: {}", error_name(c))),
    }
}

/// One topic: its partitions a page at a time (`page`, `size`: leader, replicas, ISR,
/// offsets, size, rates) and its configs.
pub fn topic(c: &Console, u: &User, name: &str, q: &Query) -> Result<Value, Failure> {
    let page = number::<usize>(q, "page")?.unwrap_or(1).max(1);
    let size = within(q, "size", PAGE_SIZE, MAX_PAGE_SIZE)?;
    let mut client = c.client(Some(u))?;
    let m = metadata(&mut client, Some(&[name.to_owned()]))?;
    let Some(t) = m.topics.first() else {
        return Err(Failure::not_found(format!(
            "topic {name}: not in the answer"
        )));
    };
    if t.error_code != 0 {
        return Err(topic_error(name, t.error_code));
    }
    let mut parts: Vec<_> = t.partitions.iter().collect();
    parts.sort_by_key(|p| p.partition_index);
    let total = parts.len();
    let parts: Vec<_> = parts
        .into_iter()
        .skip((page - 1) * size)
        .take(size)
        .collect();
    let shown: BTreeSet<i32> = parts.iter().map(|p| p.partition_index).collect();
    let leaders: BTreeMap<TopicPartition, i32> = leaders(&m)
        .into_iter()
        .filter(|(tp, _)| shown.contains(&tp.1))
        .collect();
    let ask = |ts: i64| leaders.keys().map(|tp| (tp.clone(), ts)).collect();
    let start = logs::list_offsets(&mut client, &leaders, &ask(EARLIEST))?;
    let end = logs::list_offsets(&mut client, &leaders, &ask(LATEST))?;
    let sizes = logs::log_sizes(&mut client, &leaders, leaders.keys().cloned()).unwrap_or_default();
    let snapshot = c.rates.snapshot();
    let offset = |r: Option<&Result<i64, i16>>| match r {
        Some(Ok(o)) => json!(o),
        Some(Err(code)) => json!(error_name(*code)),
        None => Value::Null,
    };
    let partitions: Vec<Value> = parts
        .iter()
        .map(|p| {
            let tp = (name.to_owned(), p.partition_index);
            let rate = snapshot.as_ref().and_then(|s| s.rates.get(&tp));
            json!({
                "partition": p.partition_index,
                "leader": p.leader_id.0,
                "leader_epoch": p.leader_epoch,
                "replicas": p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                "isr": p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                "offline_replicas": p.offline_replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                "log_start_offset": offset(start.get(&tp)),
                "log_end_offset": offset(end.get(&tp)),
                "size_bytes": sizes.get(&tp),
                "records_in_per_sec": rate.map(|r| r.records_per_sec),
                "bytes_in_per_sec": rate.map(|r| r.bytes_per_sec),
                "bytes_out_per_sec_led_here": snapshot.as_ref().and_then(|s| s.bytes_out.get(&tp)),
            })
        })
        .collect();
    let configs = match topic_configs(&mut client, name) {
        Ok(v) => v,
        Err(e) => json!({ "error": format!("{e:#}") }),
    };
    Ok(json!({
        "name": name,
        "topic_id": t.topic_id.to_string(),
        "internal": t.is_internal,
        "partition_count": total,
        "page": page,
        "size": size,
        "pages": total.div_ceil(size).max(1),
        "partitions": partitions,
        "configs": configs,
        "rates_window_secs": snapshot.as_ref().map(|s| s.window_secs),
    }))
}

/// Every config of a topic with its value and source; `default` false for a value that is
/// not Kafka's default (set on the topic, or on the brokers).
fn topic_configs(client: &mut Client, name: &str) -> anyhow::Result<Value> {
    let request = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configuration_keys(None),
    ]);
    let ResponseKind::DescribeConfigs(r) = client.send_any(
        ApiKey::DescribeConfigs,
        RequestKind::DescribeConfigs(request),
    )?
    else {
        bail!("DescribeConfigs was not answered with DescribeConfigs");
    };
    let Some(res) = r.results.first() else {
        bail!("DescribeConfigs answered no resource");
    };
    if res.error_code != 0 {
        bail!(
            "{}",
            describe_error(res.error_code, res.error_message.as_ref())
        );
    }
    let mut configs: Vec<Value> = res
        .configs
        .iter()
        .map(|e| {
            json!({
                "name": e.name.to_string(),
                "value": if e.is_sensitive { None } else { e.value.as_ref().map(ToString::to_string) },
                "source": config_source(e.config_source),
                "default": e.config_source == DEFAULT_CONFIG,
                "read_only": e.read_only,
                "sensitive": e.is_sensitive,
            })
        })
        .collect();
    configs.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(Value::Array(configs))
}

/// Kafka's name of a `DescribeConfigs` source.
fn config_source(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// Every group of every node (ListGroups to each), with its state and protocol type.
pub fn groups(c: &Console, u: &User) -> Result<Value, Failure> {
    let mut client = c.client(Some(u))?;
    metadata(&mut client, Some(&[]))?;
    let ids: Vec<i32> = client.brokers().keys().copied().collect();
    let mut groups = BTreeMap::new();
    let mut errors = Vec::new();
    for id in ids {
        match client.send_to(
            id,
            ApiKey::ListGroups,
            RequestKind::ListGroups(ListGroupsRequest::default()),
        ) {
            Ok(ResponseKind::ListGroups(r)) if r.error_code == 0 => {
                for g in r.groups {
                    groups.insert(
                        g.group_id.to_string(),
                        json!({
                            "group_id": g.group_id.to_string(),
                            "state": g.group_state.to_string(),
                            "protocol_type": g.protocol_type.to_string(),
                            "coordinator": id,
                        }),
                    );
                }
            }
            Ok(ResponseKind::ListGroups(r)) => {
                errors.push(format!("node {id}: {}", error_name(r.error_code)))
            }
            Ok(_) => errors.push(format!("node {id}: not a ListGroups answer")),
            Err(e) => errors.push(format!("node {id}: {e:#}")),
        }
    }
    Ok(json!({
        "groups": groups.into_values().collect::<Vec<_>>(),
        "errors": errors,
    }))
}

/// One group: state, members and their assignments (KIP-848 groups through
/// ConsumerGroupDescribe, classic ones through DescribeGroups), each partition's committed
/// offset and lag, the lag's trend, and an estimated time to catch up.
pub fn group(c: &Console, u: &User, id: &str) -> Result<Value, Failure> {
    let mut client = c.client(Some(u))?;
    let coordinator = client.coordinator(id)?;
    let (kind, state, assignor, members_json, owner) = match consumer_group(
        &mut client,
        coordinator,
        id,
    )? {
        Some(described) => described,
        None => {
            let g = describe_group(&mut client, coordinator, id)?;
            let ms = members(&g);
            let mut owner = BTreeMap::new();
            let list: Vec<Value> = ms
                .iter()
                .map(|m| {
                    for tp in &m.partitions {
                        owner.insert(tp.clone(), m.id.clone());
                    }
                    json!({
                        "member_id": m.id,
                        "client_id": m.client_id,
                        "host": m.host,
                        "assignment": m.partitions.iter().map(|(t, p)| json!({"topic": t, "partition": p})).collect::<Vec<_>>(),
                    })
                })
                .collect();
            (
                "classic",
                g.group_state.to_string(),
                g.protocol_data.to_string(),
                list,
                owner,
            )
        }
    };
    let offsets = committed(&mut client, coordinator, id)?;
    let partitions: BTreeSet<TopicPartition> =
        offsets.keys().chain(owner.keys()).cloned().collect();
    let ends = log_ends(&mut client, &partitions)?;
    let mut total_lag = 0;
    let mut total_committed = 0;
    let rows: Vec<Value> = partitions
        .iter()
        .map(|tp| {
            let current = offsets.get(tp).copied();
            let end = ends.get(tp).and_then(|r| r.as_ref().ok()).copied();
            let lag = match (current, end) {
                (Some(c), Some(e)) => Some((e - c).max(0)),
                (None, Some(e)) => Some(e),
                _ => None,
            };
            total_lag += lag.unwrap_or(0);
            total_committed += current.unwrap_or(0);
            json!({
                "topic": tp.0,
                "partition": tp.1,
                "committed_offset": current,
                "log_end_offset": end,
                "lag": lag,
                "member_id": owner.get(tp),
            })
        })
        .collect();
    let now = Instant::now();
    let trend = c.lag.record(
        id,
        LagPoint {
            at: now,
            at_ms: crate::now_ms(),
            lag: total_lag,
            committed: total_committed,
        },
    );
    // The consumption rate over the remembered window: committed offsets per second.
    let rate = match (trend.first(), trend.last()) {
        (Some(a), Some(b)) if b.at > a.at => {
            let secs = b.at.duration_since(a.at).as_secs_f64();
            Some(((b.committed - a.committed).max(0) as f64) / secs)
        }
        _ => None,
    };
    let eta = match rate {
        _ if total_lag == 0 => Some(0.0),
        Some(r) if r > 0.0 => Some(total_lag as f64 / r),
        _ => None,
    };
    Ok(json!({
        "group_id": id,
        "type": kind,
        "state": state,
        "assignor": assignor,
        "coordinator": coordinator,
        "members": members_json,
        "partitions": rows,
        "total_lag": total_lag,
        "lag_trend": trend.iter().map(|p| json!({"at_ms": p.at_ms, "lag": p.lag})).collect::<Vec<_>>(),
        "consumed_per_sec": rate,
        "catch_up_secs": eta,
    }))
}

/// A KIP-848 group as ConsumerGroupDescribe answers it; `None` for a group that is not
/// one (GROUP_ID_NOT_FOUND: a classic group, or none).
#[allow(clippy::type_complexity)]
fn consumer_group(
    client: &mut Client,
    coordinator: i32,
    id: &str,
) -> anyhow::Result<
    Option<(
        &'static str,
        String,
        String,
        Vec<Value>,
        BTreeMap<TopicPartition, String>,
    )>,
> {
    let request = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(StrBytes::from_string(id.to_owned()))]);
    let answer = client.send_to(
        coordinator,
        ApiKey::ConsumerGroupDescribe,
        RequestKind::ConsumerGroupDescribe(request),
    );
    let Ok(ResponseKind::ConsumerGroupDescribe(r)) = answer else {
        return Ok(None);
    };
    let Some(g) = r.groups.into_iter().next() else {
        return Ok(None);
    };
    if g.error_code == 69 {
        return Ok(None);
    }
    if g.error_code != 0 {
        bail!(
            "group {id}: {}",
            describe_error(g.error_code, g.error_message.as_ref())
        );
    }
    let mut owner = BTreeMap::new();
    let members = g
        .members
        .iter()
        .map(|m| {
            let assigned: Vec<Value> = m
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|t| {
                    let name = t.topic_name.0.to_string();
                    t.partitions.iter().map(move |p| (name.clone(), *p))
                })
                .map(|(t, p)| {
                    owner.insert((t.clone(), p), m.member_id.to_string());
                    json!({"topic": t, "partition": p})
                })
                .collect();
            json!({
                "member_id": m.member_id.to_string(),
                "instance_id": m.instance_id.as_ref().map(ToString::to_string),
                "client_id": m.client_id.to_string(),
                "host": m.client_host.to_string(),
                "member_epoch": m.member_epoch,
                "subscribed": m.subscribed_topic_names.iter().map(|t| t.0.to_string()).collect::<Vec<_>>(),
                "assignment": assigned,
            })
        })
        .collect();
    Ok(Some((
        "consumer",
        g.group_state.to_string(),
        g.assignor_name.to_string(),
        members,
        owner,
    )))
}

/// The hot partitions: the busiest partitions of the last window, with their share of
/// their topic's and their leader's produce load, and each topic's verdict.
pub fn hot(c: &Console, u: &User, q: &Query) -> Result<Value, Failure> {
    let top = number::<usize>(q, "top")?.unwrap_or(20).clamp(1, 1000);
    let factor = number::<f64>(q, "factor")?.unwrap_or(3.0);
    if factor.is_nan() || factor <= 1.0 {
        return Err(Failure::bad("parameter factor: more than 1"));
    }
    // Only what the user may describe.
    let mut client = c.client(Some(u))?;
    let visible: BTreeSet<String> = metadata(&mut client, None)?
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .map(topic_name)
        .collect();
    let Some(s) = c.rates.snapshot() else {
        return Ok(json!({
            "sampling": true,
            "message": format!("the first samples are being taken ({} s apart); reload in a moment", super::rates::SAMPLE_EVERY.as_secs()),
            "partitions": [],
            "topics": [],
        }));
    };
    let rates: Vec<&hot::Rate> = s
        .rates
        .values()
        .filter(|r| visible.contains(&r.tp.0))
        .collect();
    let mut per_broker: BTreeMap<i32, (f64, f64)> = BTreeMap::new();
    let mut per_topic: BTreeMap<String, Vec<hot::Rate>> = BTreeMap::new();
    for r in &rates {
        let leader = s.leaders.get(&r.tp).copied().unwrap_or(-1);
        let e = per_broker.entry(leader).or_default();
        e.0 += r.bytes_per_sec;
        e.1 += s.bytes_out.get(&r.tp).copied().unwrap_or(0.0);
        per_topic
            .entry(r.tp.0.clone())
            .or_default()
            .push((*r).clone());
    }
    let mut ranked = rates.clone();
    ranked.sort_by(|a, b| {
        let out = |r: &hot::Rate| s.bytes_out.get(&r.tp).copied().unwrap_or(0.0);
        (b.bytes_per_sec + out(b))
            .total_cmp(&(a.bytes_per_sec + out(a)))
            .then(b.records_per_sec.total_cmp(&a.records_per_sec))
            .then(a.tp.cmp(&b.tp))
    });
    let share = |part: f64, whole: f64| (whole > 0.0).then(|| 100.0 * part / whole);
    let partitions: Vec<Value> = ranked
        .iter()
        .take(top)
        .map(|r| {
            let leader = s.leaders.get(&r.tp).copied().unwrap_or(-1);
            let (broker_in, broker_out) = per_broker.get(&leader).copied().unwrap_or_default();
            let out = s.bytes_out.get(&r.tp).copied();
            let topic_in: f64 = per_topic
                .get(&r.tp.0)
                .map_or(0.0, |v| v.iter().map(|x| x.bytes_per_sec).sum());
            json!({
                "topic": r.tp.0,
                "partition": r.tp.1,
                "leader": leader,
                "records_in_per_sec": r.records_per_sec,
                "bytes_in_per_sec": r.bytes_per_sec,
                "bytes_out_per_sec_led_here": out,
                "share_of_topic_in_pct": share(r.bytes_per_sec, topic_in),
                "share_of_broker_in_pct": share(r.bytes_per_sec, broker_in),
                "share_of_broker_out_pct": out.and_then(|o| share(o, broker_out)),
            })
        })
        .collect();
    let topics: Vec<Value> = per_topic
        .iter()
        .map(|(t, rs)| {
            let (verdict, detail) = match hot::judge(rs, factor) {
                Verdict::Hot { partition, ratio } => (
                    "hot",
                    json!({"partition": partition, "ratio": ratio.is_finite().then_some(ratio)}),
                ),
                Verdict::Balanced { max_ratio } => ("balanced", json!({"max_ratio": max_ratio})),
                Verdict::TooQuiet { records } => ("too_quiet", json!({"records": records})),
            };
            json!({"topic": t, "verdict": verdict, "detail": detail})
        })
        .collect();
    Ok(json!({
        "sampling": false,
        "window_secs": s.window_secs,
        "age_secs": s.age_secs,
        "factor": factor,
        "partitions": partitions,
        "topics": topics,
    }))
}

/// Transactions: every coordinator's transactional ids (ListTransactions), and every
/// transaction open on a partition the user may describe (DescribeProducers at each
/// leader), marked hanging as Kafka's `kafka-transactions.sh find-hanging` first marks one:
/// its producer's last write is older than `max_timeout_ms` (the cluster's
/// `transaction.max.timeout.ms`, 15 minutes by default), so its coordinator, which aborts
/// any transaction past its timeout, should have ended it.
pub fn transactions(c: &Console, u: &User, q: &Query) -> Result<Value, Failure> {
    let max_timeout_ms = number::<i64>(q, "max_timeout_ms")?.unwrap_or(DEFAULT_MAX_TXN_TIMEOUT_MS);
    if max_timeout_ms < 0 {
        return Err(Failure::bad("parameter max_timeout_ms: not negative"));
    }
    let mut client = c.client(Some(u))?;
    metadata(&mut client, Some(&[]))?;
    let ids: Vec<i32> = client.brokers().keys().copied().collect();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for id in ids {
        match client.send_to(
            id,
            ApiKey::ListTransactions,
            RequestKind::ListTransactions(ListTransactionsRequest::default()),
        ) {
            Ok(ResponseKind::ListTransactions(r)) if r.error_code == 0 => {
                for t in r.transaction_states {
                    out.push(json!({
                        "transactional_id": t.transactional_id.to_string(),
                        "producer_id": t.producer_id.0,
                        "state": t.transaction_state.to_string(),
                        "coordinator": id,
                    }));
                }
            }
            Ok(ResponseKind::ListTransactions(r)) => {
                errors.push(format!("node {id}: {}", error_name(r.error_code)))
            }
            Ok(_) => errors.push(format!("node {id}: not a ListTransactions answer")),
            Err(e) => errors.push(format!("node {id}: {e:#}")),
        }
    }
    let open = open_transactions(&mut client, max_timeout_ms, &mut errors)?;
    Ok(json!({
        "transactions": out,
        "open_on_partitions": open,
        "max_timeout_ms": max_timeout_ms,
        "errors": errors,
    }))
}

/// Every transaction open on a partition (DescribeProducers, one request per leader).
fn open_transactions(
    client: &mut Client,
    max_timeout_ms: i64,
    errors: &mut Vec<String>,
) -> anyhow::Result<Vec<Value>> {
    let m = metadata(client, None)?;
    let mut by_leader: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
    for ((topic, partition), leader) in leaders(&m) {
        if leader >= 0 {
            by_leader
                .entry(leader)
                .or_default()
                .entry(topic)
                .or_default()
                .push(partition);
        }
    }
    let now = crate::now_ms();
    let mut open = Vec::new();
    for (leader, topics) in by_leader {
        let request = DescribeProducersRequest::default().with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    TopicRequest::default()
                        .with_name(TopicName(StrBytes::from_string(t)))
                        .with_partition_indexes(ps)
                })
                .collect(),
        );
        let answer = client.send_to(
            leader,
            ApiKey::DescribeProducers,
            RequestKind::DescribeProducers(request),
        );
        let r = match answer {
            Ok(ResponseKind::DescribeProducers(r)) => r,
            Ok(_) => {
                errors.push(format!("node {leader}: not a DescribeProducers answer"));
                continue;
            }
            Err(e) => {
                errors.push(format!("node {leader}: {e:#}"));
                continue;
            }
        };
        for t in r.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    continue;
                }
                for a in p
                    .active_producers
                    .iter()
                    .filter(|a| a.current_txn_start_offset >= 0)
                {
                    let idle_ms = now - a.last_timestamp;
                    open.push(json!({
                        "topic": t.name.0.to_string(),
                        "partition": p.partition_index,
                        "leader": leader,
                        "producer_id": a.producer_id.0,
                        "producer_epoch": a.producer_epoch,
                        "coordinator_epoch": a.coordinator_epoch,
                        "start_offset": a.current_txn_start_offset,
                        "last_timestamp": a.last_timestamp,
                        "hanging": a.last_timestamp >= 0 && idle_ms > max_timeout_ms,
                    }));
                }
            }
        }
    }
    Ok(open)
}

/// ACLs, client quotas and SCRAM users, each as the user may describe them.
pub fn security(c: &Console, u: &User) -> Result<Value, Failure> {
    let mut client = c.client(Some(u))?;
    let acls = match client.send_any(
        ApiKey::DescribeAcls,
        RequestKind::DescribeAcls(
            DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
        ),
    ) {
        Ok(ResponseKind::DescribeAcls(r)) if r.error_code == 0 => json!(
            r.resources
                .iter()
                .flat_map(|res| res.acls.iter().map(move |a| json!({
                    "resource_type": res.resource_type,
                    "resource_name": res.resource_name.to_string(),
                    "pattern_type": res.pattern_type,
                    "principal": a.principal.to_string(),
                    "host": a.host.to_string(),
                    "operation": a.operation,
                    "permission_type": a.permission_type,
                })))
                .collect::<Vec<_>>()
        ),
        Ok(ResponseKind::DescribeAcls(r)) => {
            json!({"error": describe_error(r.error_code, r.error_message.as_ref())})
        }
        Ok(_) => json!({"error": "not a DescribeAcls answer"}),
        Err(e) => json!({"error": format!("{e:#}")}),
    };
    let quotas = match client.send_any(
        ApiKey::DescribeClientQuotas,
        RequestKind::DescribeClientQuotas(DescribeClientQuotasRequest::default().with_strict(false)),
    ) {
        Ok(ResponseKind::DescribeClientQuotas(r)) if r.error_code == 0 => json!(r
            .entries
            .unwrap_or_default()
            .iter()
            .map(|e| json!({
                "entity": e.entity.iter().map(|x| json!({"type": x.entity_type.to_string(), "name": x.entity_name.as_ref().map(ToString::to_string)})).collect::<Vec<_>>(),
                "values": e.values.iter().map(|v| json!({"key": v.key.to_string(), "value": v.value})).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>()),
        Ok(ResponseKind::DescribeClientQuotas(r)) => json!({"error": describe_error(r.error_code, r.error_message.as_ref())}),
        Ok(_) => json!({"error": "not a DescribeClientQuotas answer"}),
        Err(e) => json!({"error": format!("{e:#}")}),
    };
    let users = match client.send_any(
        ApiKey::DescribeUserScramCredentials,
        RequestKind::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::default().with_users(None)),
    ) {
        Ok(ResponseKind::DescribeUserScramCredentials(r)) if r.error_code == 0 => json!(r
            .results
            .iter()
            .map(|res| json!({
                "user": res.user.to_string(),
                "error": (res.error_code != 0).then(|| error_name(res.error_code)),
                "mechanisms": res.credential_infos.iter().map(|i| json!({"mechanism": i.mechanism, "iterations": i.iterations})).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>()),
        Ok(ResponseKind::DescribeUserScramCredentials(r)) => json!({"error": describe_error(r.error_code, r.error_message.as_ref())}),
        Ok(_) => json!({"error": "not a DescribeUserScramCredentials answer"}),
        Err(e) => json!({"error": format!("{e:#}")}),
    };
    Ok(json!({ "acls": acls, "quotas": quotas, "scram_users": users }))
}
