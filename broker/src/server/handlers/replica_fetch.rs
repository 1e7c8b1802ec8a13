//! Fetch from a follower replica (a request whose `replica_id`, or from v15 `ReplicaState`,
//! names a broker): the leader's side of replication.
//!
//! Each partition goes through the leader's replication state (`Partition::follower_fetch`):
//! the follower's `current_leader_epoch` is checked, its `last_fetched_epoch` is compared
//! with the leader's epoch cache (a follower that diverged is answered the diverging epoch
//! and no records, KIP-279), its fetch offset becomes its log end offset, which may add it to
//! the ISR and moves the high watermark (which completes acks=all produces). Records are read
//! up to the leader's log end, not the high watermark, with the same zero-copy regions as a
//! consumer's fetch. An empty answer parks until an append moves a partition's log end or
//! `max_wait_ms` passes: parking on the high watermark would wait for the very fetch it holds
//! back.

use std::sync::Arc;

use futures_util::future::select_all;
use strata_kraft::MetadataImage;
use strata_protocol::messages::FetchRequest;
use strata_protocol::messages::fetch_response::{EpochEndOffset, FetchResponse, PartitionData};
use strata_replication::fetch::FetchPartition;
use strata_storage::FileRegion;
use tokio::time::{Duration, Instant};

use super::RequestContext;
use super::fetch::{Fetched, TopicNames, fetched_partitions};
use crate::broker::leadership::LeadershipError;
use crate::fetch_session::{Context, TopicKey};
use crate::partition::Partition;
use crate::server::error::{
    TopicRefusal, leadership_error_code, log_error_code, topic_refusal_code,
};

/// One requested partition.
struct Wanted {
    topic: TopicKey,
    index: i32,
    request: FetchPartition,
    partition_max_bytes: i32,
    partition: Result<Arc<Partition>, i16>,
}

/// Answers a follower's fetch, of the partitions its session `context` names (KIP-227; a
/// follower's session is privileged in the cache).
pub async fn answer(
    ctx: &RequestContext,
    image: &MetadataImage,
    req: &FetchRequest,
    context: Context,
    replica_id: i32,
    replica_epoch: i64,
) -> Fetched {
    let me = ctx.broker.config.node_id;
    // Kafka's handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster, and is
    // answered TOPIC_AUTHORIZATION_FAILED for every partition without it.
    let authorized = ctx.authorize_cluster(strata_kraft::acl::AclOperation::ClusterAction);
    let mut names = TopicNames::new(image);
    let mut wanted = Vec::new();
    for ((topic, index), params) in fetched_partitions(&context) {
        let partition = match names.name(topic) {
            _ if !authorized => Err(topic_refusal_code(TopicRefusal::Unauthorized)),
            None => Err(topic_refusal_code(TopicRefusal::UnknownId)),
            Some(n) => match image.topics.get(&n) {
                None => Err(topic_refusal_code(TopicRefusal::Unknown)),
                Some(_) => ctx
                    .broker
                    .partition(&n, *index)
                    .ok_or(leadership_error_code(LeadershipError::NotLeaderOrFollower)),
            },
        };
        wanted.push(Wanted {
            topic: topic.clone(),
            index: *index,
            request: FetchPartition {
                replica_id,
                fetch_offset: params.fetch_offset,
                current_leader_epoch: params.current_leader_epoch,
                last_fetched_epoch: params.last_fetched_epoch,
                replica_epoch,
                log_start_offset: params.log_start_offset,
            },
            partition_max_bytes: params.partition_max_bytes,
            partition,
        });
    }
    let deadline =
        Instant::now() + Duration::from_millis(u64::try_from(req.max_wait_ms.max(0)).unwrap_or(0));
    let min_bytes = i64::from(req.min_bytes.max(0));
    let max_bytes = u32::try_from(req.max_bytes.max(0)).unwrap_or(0);
    loop {
        // Subscribe before reading, so an append between the read and the wait still wakes us.
        let mut watchers: Vec<_> = wanted
            .iter()
            .filter_map(|w| w.partition.as_ref().ok())
            .map(|p| p.subscribe_log_end())
            .collect();
        let (parts, bytes, errors) = read_all(&wanted, max_bytes, me);
        if bytes >= min_bytes || errors || Instant::now() >= deadline {
            let parts = wanted
                .iter()
                .zip(parts)
                .map(|(w, (pd, regions))| (w.topic.clone(), pd, regions))
                .collect();
            return Fetched::answered(context, FetchResponse::default(), parts);
        }
        let changed = watchers
            .iter_mut()
            .map(|w| Box::pin(w.changed()))
            .collect::<Vec<_>>();
        if changed.is_empty() {
            tokio::time::sleep_until(deadline).await;
        } else {
            tokio::select! {
                _ = select_all(changed) => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// Each partition's answer and regions, the bytes read, and whether any partition failed.
fn read_all(
    wanted: &[Wanted],
    max_bytes: u32,
    me: i32,
) -> (Vec<(PartitionData, Vec<FileRegion>)>, i64, bool) {
    let mut remaining = max_bytes;
    let mut total: i64 = 0;
    let mut any_error = false;
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let mut pd = PartitionData::default()
            .with_partition_index(w.index)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_preferred_read_replica((-1).into());
        let p = match &w.partition {
            Ok(p) => p,
            Err(code) => {
                any_error = true;
                out.push((pd.with_error_code(*code), Vec::new()));
                continue;
            }
        };
        let answer = match p.follower_fetch(&w.request, me) {
            Ok(a) => a,
            Err(e) => {
                any_error = true;
                out.push((
                    pd.with_error_code(crate::server::error::replication_error_code(&e)),
                    Vec::new(),
                ));
                continue;
            }
        };
        pd = pd
            .with_high_watermark(answer.high_watermark)
            .with_last_stable_offset(answer.high_watermark)
            .with_log_start_offset(answer.log_start_offset);
        if let Some(d) = answer.diverging_epoch {
            pd = pd.with_diverging_epoch(
                EpochEndOffset::default()
                    .with_epoch(d.epoch)
                    .with_end_offset(d.end_offset),
            );
            out.push((pd, Vec::new()));
            continue;
        }
        if answer.read_to <= w.request.fetch_offset {
            out.push((pd, Vec::new()));
            continue;
        }
        let limit = remaining.min(u32::try_from(w.partition_max_bytes.max(0)).unwrap_or(0));
        let min_one = total == 0;
        match p.read_up_to(w.request.fetch_offset, limit, answer.read_to, min_one) {
            Ok(r) => {
                let n = u32::try_from(r.bytes).unwrap_or(u32::MAX);
                remaining = remaining.saturating_sub(n);
                total += i64::from(n);
                out.push((pd, r.regions));
            }
            Err(e) => {
                any_error = true;
                out.push((pd.with_error_code(log_error_code(&e)), Vec::new()));
            }
        }
    }
    (out, total, any_error)
}
