//! DescribeLogDirs (key 35, KIP-113): the broker's log directory and the partitions in it,
//! as Kafka's `ReplicaManager.describeLogDirs` reports them.
//!
//! - Strata has one log directory (the first entry of `log.dirs`), reported by its absolute
//!   path, even with no partitions in it.
//! - Each hosted partition: its size (the bytes of its `.log` segments), offset lag 0 and
//!   `is_future_key` false (there are no future replicas: no intra-broker moves).
//! - A request naming topics (non-null) lists only the partitions it names; topics or
//!   partitions this broker does not host are simply absent, as in Kafka. Partitions whose
//!   log could not be opened at start are absent too.
//! - v4 (KIP-827): the file system's total and usable bytes (`statvfs`). If they cannot be
//!   read, the directory is reported with KAFKA_STORAGE_ERROR, as Kafka reports a directory
//!   it cannot read.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use strata_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};

use super::RequestContext;

/// Describes the log directory and the (requested) partitions in it.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    // KafkaApis: DESCRIBE on the cluster; without it no directory is listed, and from v3
    // (the version with a top-level error code) the answer says why.
    if !ctx.authorize_cluster(strata_kraft::acl::AclOperation::Describe) {
        return DescribeLogDirsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let wanted: Option<HashSet<(String, i32)>> = req.topics.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.0.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect()
    });
    let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for p in ctx.broker.all_partitions() {
        if wanted
            .as_ref()
            .is_some_and(|w| !w.contains(&(p.topic.clone(), p.index)))
        {
            continue;
        }
        let size = p.log().size_bytes();
        let mut partition = DescribeLogDirsPartition::default()
            .with_partition_index(p.index)
            .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
            .with_offset_lag(0)
            .with_is_future_key(false);
        // Tagged fields exist from v2 (the flexible versions).
        if ctx.api_version >= 2
            && let Some(ratio) = ctx.broker.log_cleaner.dirty_ratio(&p.topic, p.index)
        {
            use crate::broker::log_cleaner::{DIRTY_RATIO_TAG, encode_dirty_ratio};
            partition
                .unknown_tagged_fields
                .insert(DIRTY_RATIO_TAG, encode_dirty_ratio(ratio));
        }
        topics.entry(p.topic.clone()).or_default().push(partition);
    }
    let topics = topics
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        })
        .collect();
    let dir = ctx.broker.log_dir();
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(absolute(dir)))
        .with_topics(topics);
    if ctx.api_version >= 4 {
        match space(dir) {
            Ok((total, usable)) => {
                result = result.with_total_bytes(total).with_usable_bytes(usable);
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot read the log directory's file system");
                result = result
                    .with_error_code(ResponseError::KafkaStorageError.code())
                    .with_topics(Vec::new());
            }
        }
    }
    DescribeLogDirsResponse::default().with_results(vec![result])
}

/// The directory as Kafka prints it (`File.getAbsolutePath`): absolute, not canonicalised.
fn absolute(dir: &Path) -> String {
    std::path::absolute(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string()
}

/// The file system's total and usable bytes, as Java's `FileStore.getTotalSpace` and
/// `getUsableSpace` compute them: blocks and blocks available to unprivileged users, times
/// the fragment size.
fn space(dir: &Path) -> std::io::Result<(i64, i64)> {
    let st = rustix::fs::statvfs(dir)?;
    let bytes = |blocks: u64| i64::try_from(blocks.saturating_mul(st.f_frsize)).unwrap_or(i64::MAX);
    Ok((bytes(st.f_blocks), bytes(st.f_bavail)))
}
