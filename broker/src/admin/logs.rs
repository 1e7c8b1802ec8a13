//! Partition reads every subcommand shares: offsets from ListOffsets and sizes from
//! DescribeLogDirs, each sent to the partition's leader, one request per leader.

use std::collections::BTreeMap;

use anyhow::bail;
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use strata_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use strata_protocol::messages::{
    ApiKey, BrokerId, DescribeLogDirsRequest, ListOffsetsRequest, RequestKind, ResponseKind,
    TopicName,
};

use super::client::Client;

/// A partition, as `(topic, partition)`.
pub type TopicPartition = (String, i32);

/// ListOffsets' timestamp for the log start offset.
pub const EARLIEST: i64 = -2;
/// ListOffsets' timestamp for the log end offset.
pub const LATEST: i64 = -1;

/// Groups partitions by their leader; partitions with no leader (-1) are left out.
fn by_leader<'a>(
    leaders: &'a BTreeMap<TopicPartition, i32>,
    partitions: impl Iterator<Item = &'a TopicPartition>,
) -> BTreeMap<i32, BTreeMap<String, Vec<i32>>> {
    let mut out: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
    for tp in partitions {
        if let Some(&leader) = leaders.get(tp).filter(|l| **l >= 0) {
            out.entry(leader)
                .or_default()
                .entry(tp.0.clone())
                .or_default()
                .push(tp.1);
        }
    }
    out
}

/// The offset ListOffsets answers for each partition at its timestamp (`EARLIEST`,
/// `LATEST` or a time in ms), or the Kafka error code it answered. Partitions without a
/// leader are answered LEADER_NOT_AVAILABLE.
///
/// # Errors
///
/// When a leader cannot be reached.
pub fn list_offsets(
    client: &mut Client,
    leaders: &BTreeMap<TopicPartition, i32>,
    partitions: &BTreeMap<TopicPartition, i64>,
) -> anyhow::Result<BTreeMap<TopicPartition, Result<i64, i16>>> {
    let mut out: BTreeMap<TopicPartition, Result<i64, i16>> =
        partitions.keys().map(|tp| (tp.clone(), Err(5))).collect();
    for (leader, topics) in by_leader(leaders, partitions.keys()) {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(
                topics
                    .iter()
                    .map(|(topic, ps)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.clone())))
                            .with_partitions(
                                ps.iter()
                                    .map(|&p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(p)
                                            .with_current_leader_epoch(-1)
                                            .with_timestamp(partitions[&(topic.clone(), p)])
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let ResponseKind::ListOffsets(r) = client.send_to(
            leader,
            ApiKey::ListOffsets,
            RequestKind::ListOffsets(request),
        )?
        else {
            bail!("ListOffsets was not answered with ListOffsets");
        };
        for t in &r.topics {
            for p in &t.partitions {
                let tp = (t.name.to_string(), p.partition_index);
                if let Some(slot) = out.get_mut(&tp) {
                    *slot = if p.error_code == 0 {
                        Ok(p.offset)
                    } else {
                        Err(p.error_code)
                    };
                }
            }
        }
    }
    Ok(out)
}

/// Each partition's size in bytes on its leader, from DescribeLogDirs (all log
/// directories added up); a partition the leader did not report is left out.
///
/// # Errors
///
/// When a leader cannot be reached or answers the request with an error.
pub fn log_sizes(
    client: &mut Client,
    leaders: &BTreeMap<TopicPartition, i32>,
    partitions: impl Iterator<Item = TopicPartition>,
) -> anyhow::Result<BTreeMap<TopicPartition, i64>> {
    Ok(log_dirs(client, leaders, partitions)?.0)
}

/// Each partition's size in bytes on its leader, and, for a compacted one, its dirty ratio
/// at the leader's last cleaner round (a Strata tagged field of DescribeLogDirs,
/// [`crate::broker::log_cleaner::DIRTY_RATIO_TAG`]).
///
/// # Errors
///
/// As [`log_sizes`].
#[allow(clippy::type_complexity)]
pub fn log_dirs(
    client: &mut Client,
    leaders: &BTreeMap<TopicPartition, i32>,
    partitions: impl Iterator<Item = TopicPartition>,
) -> anyhow::Result<(BTreeMap<TopicPartition, i64>, BTreeMap<TopicPartition, f64>)> {
    let wanted: Vec<TopicPartition> = partitions.collect();
    let mut out = BTreeMap::new();
    let mut ratios = BTreeMap::new();
    for (leader, topics) in by_leader(leaders, wanted.iter()) {
        let request = DescribeLogDirsRequest::default().with_topics(Some(
            topics
                .iter()
                .map(|(topic, ps)| {
                    DescribableLogDirTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partitions(ps.clone())
                })
                .collect(),
        ));
        let ResponseKind::DescribeLogDirs(r) = client.send_to(
            leader,
            ApiKey::DescribeLogDirs,
            RequestKind::DescribeLogDirs(request),
        )?
        else {
            bail!("DescribeLogDirs was not answered with DescribeLogDirs");
        };
        if r.error_code != 0 {
            bail!(
                "DescribeLogDirs on broker {leader}: {}",
                super::client::error_name(r.error_code)
            );
        }
        for dir in r.results.iter().filter(|d| d.error_code == 0) {
            for t in &dir.topics {
                for p in t.partitions.iter().filter(|p| !p.is_future_key) {
                    let tp = (t.name.to_string(), p.partition_index);
                    if topics.get(&tp.0).is_some_and(|ps| ps.contains(&tp.1)) {
                        use crate::broker::log_cleaner::{DIRTY_RATIO_TAG, decode_dirty_ratio};
                        if let Some(r) = p
                            .unknown_tagged_fields
                            .get(&DIRTY_RATIO_TAG)
                            .and_then(|v| decode_dirty_ratio(v))
                        {
                            ratios.insert(tp.clone(), r);
                        }
                        *out.entry(tp).or_insert(0) += p.partition_size;
                    }
                }
            }
        }
    }
    Ok((out, ratios))
}
