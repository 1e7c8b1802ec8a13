//! `strata admin cluster`: the brokers, the active controller, the metadata quorum
//! (DescribeQuorum, as Kafka's `kafka-metadata-quorum.sh describe --status --replication`)
//! and the under-replicated partitions (ISR smaller than the replica set, as
//! `kafka-topics.sh --describe --under-replicated-partitions`). On a controller listener,
//! `add-controller` and `remove-controller` change a dynamic quorum's voters (KIP-853's
//! AddRaftVoter and RemoveRaftVoter, as `kafka-metadata-quorum.sh add-controller` and
//! `remove-controller`); the request goes to the leader, which a follower's DescribeQuorum
//! names with its endpoint.

use anyhow::{Context, bail};
use strata_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use strata_protocol::messages::describe_quorum_response::{
    Node, PartitionData as PartitionData2, ReplicaState,
};
use strata_protocol::messages::{
    AddRaftVoterRequest, ApiKey, DescribeQuorumRequest, RemoveRaftVoterRequest, RequestKind,
    ResponseKind, TopicName, add_raft_voter_request,
};
use strata_protocol::{ResponseError, StrBytes};

use super::client::{Client, describe_error, error_name};
use super::table::Table;

pub const USAGE: &str = "\
strata admin cluster [describe]          everything below
strata admin cluster brokers
strata admin cluster controller
strata admin cluster quorum              (also with --bootstrap-controller HOST:PORT)
strata admin cluster under-replicated
strata admin --bootstrap-controller HOST:PORT cluster add-controller --controller-id N
    --controller-directory-id ID --controller-endpoint NAME://HOST:PORT
strata admin --bootstrap-controller HOST:PORT cluster remove-controller --controller-id N
    --controller-directory-id ID";

/// The metadata log's topic (KIP-595).
const METADATA_TOPIC: &str = "__cluster_metadata";

/// Runs `cluster <action>`.
///
/// # Errors
///
/// A bad command line, an unreachable broker, or any error a broker answered.
pub fn run(client: &mut Client, args: &[String]) -> anyhow::Result<()> {
    if let Some(change @ ("add-controller" | "remove-controller")) =
        args.first().map(String::as_str)
    {
        if !client.is_controller_listener() {
            bail!("{change} needs --bootstrap-controller (a controller listener)");
        }
        return change_voters(client, change == "add-controller", &args[1..]);
    }
    if let Some(extra) = args.get(1) {
        bail!("unexpected argument {extra}\nusage:\n{USAGE}");
    }
    if client.is_controller_listener() {
        return match args.first().map(String::as_str) {
            None | Some("quorum" | "describe") => quorum(client),
            Some(other) => bail!(
                "{other} needs --bootstrap-server: a controller listener serves only `cluster quorum`"
            ),
        };
    }
    match args.first().map(String::as_str) {
        None | Some("describe") => {
            brokers(client)?;
            println!();
            quorum(client)?;
            println!();
            under_replicated(client)
        }
        Some("brokers") => brokers(client),
        Some("controller") => {
            println!("Active controller: {}", active_controller(client)?);
            Ok(())
        }
        Some("quorum") => quorum(client),
        Some("under-replicated") => under_replicated(client),
        Some(_) => bail!("usage:\n{USAGE}"),
    }
}

/// The active controller: the quorum's leader from DescribeQuorum where the broker serves
/// it, else Metadata's `controller_id` (which a KRaft broker may set to itself, KIP-590).
fn active_controller(client: &mut Client) -> anyhow::Result<i32> {
    match describe_quorum(client) {
        Ok((p, _)) if p.error_code == 0 && p.leader_id.0 >= 0 => Ok(p.leader_id.0),
        _ => Ok(client.metadata(Some(&[]))?.controller_id.0),
    }
}

fn brokers(client: &mut Client) -> anyhow::Result<()> {
    let controller = active_controller(client)?;
    let m = client.metadata(Some(&[]))?;
    println!(
        "Cluster: {}\tActive controller: {controller}",
        m.cluster_id
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    );
    println!();
    let mut t = Table::new(&["ID", "HOST:PORT", "RACK", "CONTROLLER"]);
    for b in client.brokers().values() {
        t.row(vec![
            b.id.to_string(),
            format!("{}:{}", b.host, b.port),
            b.rack.clone().unwrap_or_else(|| "-".to_owned()),
            if b.id == controller { "yes" } else { "" }.to_owned(),
        ]);
    }
    t.print();
    Ok(())
}

/// DescribeQuorum for `__cluster_metadata` partition 0: its partition answer. On a
/// controller listener that does not lead, asks again at the leader's endpoint, as v2's
/// `Nodes` name it (KIP-853).
fn describe_quorum(client: &mut Client) -> anyhow::Result<(PartitionData2, Vec<Node>)> {
    let (p, nodes) = describe_quorum_once(client)?;
    if client.is_controller_listener()
        && p.error_code == ResponseError::NotLeaderOrFollower.code()
        && let Some(addr) = endpoint_of(&nodes, p.leader_id.0)
    {
        client.redirect(&addr);
        return describe_quorum_once(client);
    }
    Ok((p, nodes))
}

/// `host:port` of node `id` among DescribeQuorum's `Nodes`.
fn endpoint_of(nodes: &[Node], id: i32) -> Option<String> {
    let n = nodes.iter().find(|n| n.node_id.0 == id && id >= 0)?;
    let l = n.listeners.first()?;
    Some(format!("{}:{}", l.host, l.port))
}

fn describe_quorum_once(client: &mut Client) -> anyhow::Result<(PartitionData2, Vec<Node>)> {
    let request = DescribeQuorumRequest::default().with_topics(vec![
        TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)]),
    ]);
    let ResponseKind::DescribeQuorum(r) =
        client.send_any(ApiKey::DescribeQuorum, RequestKind::DescribeQuorum(request))?
    else {
        bail!("DescribeQuorum was not answered with DescribeQuorum");
    };
    if r.error_code != 0 {
        bail!(
            "DescribeQuorum: {}",
            describe_error(r.error_code, r.error_message.as_ref())
        );
    }
    let p = r
        .topics
        .into_iter()
        .next()
        .and_then(|t| t.partitions.into_iter().next())
        .context("DescribeQuorum answered no partition")?;
    Ok((p, r.nodes))
}

/// `add-controller` / `remove-controller`: AddRaftVoter or RemoveRaftVoter at the leader.
fn change_voters(client: &mut Client, add: bool, args: &[String]) -> anyhow::Result<()> {
    let mut id = None;
    let mut directory = None;
    let mut endpoint = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest
            .next()
            .with_context(|| format!("{flag} needs a value\nusage:\n{USAGE}"))?;
        match flag.as_str() {
            "--controller-id" => {
                id = Some(value.parse::<i32>().context("--controller-id: a node id")?);
            }
            "--controller-directory-id" => {
                directory = Some(
                    strata_kraft::parse_kafka_uuid(value)
                        .context("--controller-directory-id: a directory id as Kafka prints it")?,
                );
            }
            "--controller-endpoint" if add => endpoint = Some(value.clone()),
            other => bail!("unknown option {other}\nusage:\n{USAGE}"),
        }
    }
    let (Some(id), Some(directory)) = (id, directory) else {
        bail!("--controller-id and --controller-directory-id are required\nusage:\n{USAGE}");
    };
    // The leader takes the change: find it first.
    let (p, nodes) = describe_quorum_once(client)?;
    if p.error_code == ResponseError::NotLeaderOrFollower.code()
        && let Some(addr) = endpoint_of(&nodes, p.leader_id.0)
    {
        client.redirect(&addr);
    }
    // No cluster id, as Kafka's admin client sends none unless told: the controller then
    // takes the request for its own cluster.
    let cluster_id = None;
    let (api, body) = if add {
        let endpoint = endpoint.context("--controller-endpoint NAME://HOST:PORT is required")?;
        let (name, host_port) = endpoint
            .split_once("://")
            .context("--controller-endpoint: NAME://HOST:PORT")?;
        let (host, port) = host_port
            .rsplit_once(':')
            .context("--controller-endpoint: NAME://HOST:PORT")?;
        let listener = add_raft_voter_request::Listener::default()
            .with_name(StrBytes::from_string(name.to_ascii_uppercase()))
            .with_host(StrBytes::from_string(host.to_owned()))
            .with_port(port.parse().context("--controller-endpoint: a port")?);
        let request = AddRaftVoterRequest::default()
            .with_cluster_id(cluster_id)
            .with_timeout_ms(30_000)
            .with_voter_id(id)
            .with_voter_directory_id(directory)
            .with_listeners(vec![listener]);
        (ApiKey::AddRaftVoter, RequestKind::AddRaftVoter(request))
    } else {
        let request = RemoveRaftVoterRequest::default()
            .with_cluster_id(cluster_id)
            .with_voter_id(id)
            .with_voter_directory_id(directory);
        (
            ApiKey::RemoveRaftVoter,
            RequestKind::RemoveRaftVoter(request),
        )
    };
    let (code, message) = match client.send_any(api, body)? {
        ResponseKind::AddRaftVoter(r) => (r.error_code, r.error_message),
        ResponseKind::RemoveRaftVoter(r) => (r.error_code, r.error_message),
        _ => bail!("{api:?} was not answered with {api:?}"),
    };
    if code != 0 {
        bail!("{api:?}: {}", describe_error(code, message.as_ref()));
    }
    println!(
        "{} controller {id} (directory {})",
        if add { "Added" } else { "Removed" },
        strata_kraft::kafka_uuid_string(directory)
    );
    Ok(())
}

fn quorum(client: &mut Client) -> anyhow::Result<()> {
    let (p, nodes) = describe_quorum(client)?;
    if p.error_code != 0 {
        bail!(
            "DescribeQuorum: {} (leader {}, epoch {}; ask the leader's controller listener, or any broker with --bootstrap-server)",
            describe_error(p.error_code, p.error_message.as_ref()),
            p.leader_id.0,
            p.leader_epoch
        );
    }
    println!(
        "Quorum leader: {}\tEpoch: {}\tHigh watermark: {}",
        p.leader_id.0, p.leader_epoch, p.high_watermark
    );
    let leader_end = p
        .current_voters
        .iter()
        .find(|v| v.replica_id == p.leader_id)
        .map_or(p.high_watermark, |v| v.log_end_offset);
    println!();
    let mut t = Table::new(&[
        "NODE",
        "ROLE",
        "LOG-END-OFFSET",
        "LAG",
        "LAST-FETCH-MS-AGO",
        "LAST-CAUGHT-UP-MS-AGO",
        "DIRECTORY-ID",
        "ENDPOINT",
    ]);
    let mut row = |s: &ReplicaState, role: &str| {
        // The timestamps are the leader's wall clock (ms since the epoch), as Kafka's; shown
        // as how long ago, as `kafka-metadata-quorum.sh --human-readable` does.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let ms = |v: i64| {
            if v < 0 {
                "-".to_owned()
            } else {
                (now - v).max(0).to_string()
            }
        };
        t.row(vec![
            s.replica_id.0.to_string(),
            role.to_owned(),
            s.log_end_offset.to_string(),
            if s.log_end_offset < 0 {
                "-".to_owned()
            } else {
                (leader_end - s.log_end_offset).max(0).to_string()
            },
            ms(s.last_fetch_timestamp),
            ms(s.last_caught_up_timestamp),
            // A static voter has none (KIP-853's directory ids come with dynamic quorums).
            if s.replica_directory_id.is_nil() {
                "-".to_owned()
            } else {
                strata_kraft::kafka_uuid_string(s.replica_directory_id)
            },
            endpoint_of(&nodes, s.replica_id.0).unwrap_or_else(|| "-".to_owned()),
        ]);
    };
    for v in &p.current_voters {
        row(
            v,
            if v.replica_id == p.leader_id {
                "Leader"
            } else {
                "Follower"
            },
        );
    }
    for o in &p.observers {
        row(o, "Observer");
    }
    t.print();
    Ok(())
}

fn under_replicated(client: &mut Client) -> anyhow::Result<()> {
    let m = client.metadata(None)?;
    let mut t = Table::new(&["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "MISSING"]);
    let ids = |v: &[strata_protocol::messages::BrokerId]| {
        v.iter()
            .map(|b| b.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut topics: Vec<_> = m.topics.iter().collect();
    topics.sort_by_key(|t| t.name.as_ref().map(|n| n.to_string()));
    for topic in topics {
        if topic.error_code != 0 {
            bail!("Metadata: {}", error_name(topic.error_code));
        }
        let name = topic
            .name
            .as_ref()
            .map_or_else(String::new, |n| n.to_string());
        let mut parts: Vec<_> = topic.partitions.iter().collect();
        parts.sort_by_key(|p| p.partition_index);
        for p in parts {
            if p.isr_nodes.len() < p.replica_nodes.len() {
                let missing: Vec<_> = p
                    .replica_nodes
                    .iter()
                    .filter(|r| !p.isr_nodes.contains(r))
                    .copied()
                    .collect();
                t.row(vec![
                    name.clone(),
                    p.partition_index.to_string(),
                    p.leader_id.0.to_string(),
                    ids(&p.replica_nodes),
                    ids(&p.isr_nodes),
                    ids(&missing),
                ]);
            }
        }
    }
    if t.is_empty() {
        println!("Under-replicated partitions: none");
    } else {
        println!("Under-replicated partitions:");
        t.print();
    }
    Ok(())
}
