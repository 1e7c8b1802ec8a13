//! Consumer groups from outside: a group's description and committed offsets at its
//! coordinator, and an offset reset planned against each partition's log and committed
//! from outside the group (generation -1, no member), as Kafka's `kafka-consumer-groups.sh`
//! does. `strata admin groups` and the console share it.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail};
use strata_protocol::StrBytes;
use strata_protocol::consumer_protocol::assignment_partitions;
use strata_protocol::messages::describe_groups_response::DescribedGroup;
use strata_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strata_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use strata_protocol::messages::{
    ApiKey, DescribeGroupsRequest, GroupId, OffsetCommitRequest, OffsetFetchRequest, RequestKind,
    ResponseKind, TopicName,
};

use super::client::{Client, error_name};
use super::logs::{self, EARLIEST, LATEST, TopicPartition};

/// DescribeGroups for one group at its coordinator.
pub fn describe_group(
    client: &mut Client,
    coordinator: i32,
    group: &str,
) -> anyhow::Result<DescribedGroup> {
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_string(group.to_owned()))]);
    let ResponseKind::DescribeGroups(r) = client.send_to(
        coordinator,
        ApiKey::DescribeGroups,
        RequestKind::DescribeGroups(request),
    )?
    else {
        bail!("DescribeGroups was not answered with DescribeGroups");
    };
    let g = r
        .groups
        .into_iter()
        .next()
        .context("DescribeGroups answered no group")?;
    if g.error_code != 0 {
        bail!("group {group}: {}", error_name(g.error_code));
    }
    Ok(g)
}

/// The group's committed offsets (OffsetFetch v8, every topic) at its coordinator.
pub fn committed(
    client: &mut Client,
    coordinator: i32,
    group: &str,
) -> anyhow::Result<BTreeMap<TopicPartition, i64>> {
    let request = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_topics(None),
    ]);
    let ResponseKind::OffsetFetch(r) = client.send_to(
        coordinator,
        ApiKey::OffsetFetch,
        RequestKind::OffsetFetch(request),
    )?
    else {
        bail!("OffsetFetch was not answered with OffsetFetch");
    };
    let g = r.groups.first().context("OffsetFetch answered no group")?;
    if g.error_code != 0 {
        bail!(
            "OffsetFetch for group {group}: {}",
            error_name(g.error_code)
        );
    }
    let mut out = BTreeMap::new();
    for t in &g.topics {
        for p in &t.partitions {
            if p.error_code == 0 && p.committed_offset >= 0 {
                out.insert((t.name.to_string(), p.partition_index), p.committed_offset);
            }
        }
    }
    Ok(out)
}

/// What one member of a group is, for the describe table.
pub struct Member {
    pub id: String,
    pub client_id: String,
    pub host: String,
    pub partitions: Vec<TopicPartition>,
}

#[must_use]
pub fn members(g: &DescribedGroup) -> Vec<Member> {
    g.members
        .iter()
        .map(|m| Member {
            id: m.member_id.to_string(),
            client_id: m.client_id.to_string(),
            host: m.client_host.to_string(),
            partitions: if &*g.protocol_type == "consumer" {
                assignment_partitions(&m.member_assignment)
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// Where a reset moves each partition.
pub enum Target {
    Earliest,
    Latest,
    /// The first offset at or after this time (ms since the epoch).
    Datetime(i64),
    /// This offset, moved into the log's range as Kafka's tool does.
    Offset(i64),
}

/// The offset each partition moves to.
pub fn plan(
    client: &mut Client,
    leaders: &BTreeMap<TopicPartition, i32>,
    wanted: &BTreeSet<TopicPartition>,
    target: &Target,
) -> anyhow::Result<BTreeMap<TopicPartition, i64>> {
    let ask = |ts: i64| wanted.iter().map(|tp| (tp.clone(), ts)).collect();
    let start = logs::list_offsets(client, leaders, &ask(EARLIEST))?;
    let end = logs::list_offsets(client, leaders, &ask(LATEST))?;
    let by_time = match target {
        Target::Datetime(ms) => Some(logs::list_offsets(client, leaders, &ask(*ms))?),
        _ => None,
    };
    let mut out = BTreeMap::new();
    for tp in wanted {
        let get = |m: &BTreeMap<TopicPartition, Result<i64, i16>>| -> anyhow::Result<i64> {
            match m.get(tp) {
                Some(Ok(o)) => Ok(*o),
                Some(Err(code)) => bail!("partition {}:{}: {}", tp.0, tp.1, error_name(*code)),
                None => bail!("partition {}:{}: no answer", tp.0, tp.1),
            }
        };
        let (lo, hi) = (get(&start)?, get(&end)?);
        let new = match target {
            Target::Earliest => lo,
            Target::Latest => hi,
            // No record at or after the time: the end, as Kafka's tool does.
            Target::Datetime(_) => match by_time.as_ref().map(get).transpose()? {
                Some(o) if o >= 0 => o,
                _ => hi,
            },
            Target::Offset(o) => (*o).clamp(lo, hi),
        };
        out.insert(tp.clone(), new);
    }
    Ok(out)
}

/// OffsetCommit from outside the group (generation -1, no member id), as Kafka's tool does
/// for an empty group.
pub fn commit(
    client: &mut Client,
    coordinator: i32,
    group: &str,
    plan: &BTreeMap<TopicPartition, i64>,
) -> anyhow::Result<()> {
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((t, p), o) in plan {
        topics.entry(t).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*p)
                .with_committed_offset(*o)
                .with_committed_leader_epoch(-1),
        );
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let ResponseKind::OffsetCommit(r) = client.send_to(
        coordinator,
        ApiKey::OffsetCommit,
        RequestKind::OffsetCommit(request),
    )?
    else {
        bail!("OffsetCommit was not answered with OffsetCommit");
    };
    let failed: Vec<String> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code != 0)
                .map(move |p| {
                    format!(
                        "{}:{}: {}",
                        &*t.name.0,
                        p.partition_index,
                        error_name(p.error_code)
                    )
                })
        })
        .collect();
    if !failed.is_empty() {
        bail!("OffsetCommit failed for {}", failed.join("; "));
    }
    Ok(())
}

/// The log end offset of each of `partitions` (or the error its leader answered), from the
/// partitions' leaders: what a group's lag is measured against.
///
/// # Errors
///
/// When Metadata or a leader cannot be asked.
pub fn log_ends(
    client: &mut Client,
    partitions: &BTreeSet<TopicPartition>,
) -> anyhow::Result<BTreeMap<TopicPartition, Result<i64, i16>>> {
    let topics: Vec<String> = partitions
        .iter()
        .map(|(t, _)| t.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if topics.is_empty() {
        return Ok(BTreeMap::new());
    }
    let m = client.metadata(Some(&topics))?;
    let leaders = super::client::leaders(&m);
    logs::list_offsets(
        client,
        &leaders,
        &partitions.iter().map(|tp| (tp.clone(), LATEST)).collect(),
    )
}
