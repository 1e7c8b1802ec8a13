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
use strata_protocol::messages::fetch_response::{
    EpochEndOffset, FetchResponse, FetchableTopicResponse, PartitionData,
};
use strata_replication::fetch::FetchPartition;
use strata_storage::FileRegion;
use tokio::time::{Duration, Instant};

use super::RequestContext;
use super::fetch::Fetched;
use crate::broker::leadership::LeadershipError;
use crate::partition::Partition;
use crate::server::error::{
    TopicRefusal, leadership_error_code, log_error_code, topic_refusal_code,
};

/// One requested partition.
struct Wanted {
    topic_slot: usize,
    index: i32,
    request: FetchPartition,
    partition_max_bytes: i32,
    partition: Result<Arc<Partition>, i16>,
}

/// Answers a follower's fetch.
pub async fn answer(
    ctx: &RequestContext,
    image: &MetadataImage,
    req: FetchRequest,
    replica_id: i32,
    replica_epoch: i64,
) -> Fetched {
    let version = ctx.api_version;
    let me = ctx.broker.config.node_id;
    // Kafka's handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster, and is
    // answered TOPIC_AUTHORIZATION_FAILED for every partition without it.
    let authorized = ctx.authorize_cluster(strata_kraft::acl::AclOperation::ClusterAction);
    let mut topics: Vec<FetchableTopicResponse> = Vec::with_capacity(req.topics.len());
    let mut wanted = Vec::new();
    for t in &req.topics {
        let name = if version >= 13 {
            image.topic_by_id(t.topic_id).map(|ti| ti.name.clone())
        } else {
            Some(t.topic.0.to_string())
        };
        let mut resp = FetchableTopicResponse::default();
        resp = if version >= 13 {
            resp.with_topic_id(t.topic_id)
        } else {
            resp.with_topic(t.topic.clone())
        };
        let slot = topics.len();
        topics.push(resp);
        for p in &t.partitions {
            let partition = match &name {
                _ if !authorized => Err(topic_refusal_code(TopicRefusal::Unauthorized)),
                None => Err(topic_refusal_code(TopicRefusal::UnknownId)),
                Some(n) => match image.topics.get(n) {
                    None => Err(topic_refusal_code(TopicRefusal::Unknown)),
                    Some(_) => ctx
                        .broker
                        .partition(n, p.partition)
                        .ok_or(leadership_error_code(LeadershipError::NotLeaderOrFollower)),
                },
            };
            wanted.push(Wanted {
                topic_slot: slot,
                index: p.partition,
                request: FetchPartition {
                    replica_id,
                    fetch_offset: p.fetch_offset,
                    current_leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: if version >= 12 {
                        p.last_fetched_epoch
                    } else {
                        -1
                    },
                    replica_epoch,
                    log_start_offset: p.log_start_offset,
                },
                partition_max_bytes: p.partition_max_bytes,
                partition,
            });
        }
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
            let mut topics = topics;
            let mut records = Vec::with_capacity(parts.len());
            for (w, (pd, regions)) in wanted.iter().zip(parts) {
                topics[w.topic_slot].partitions.push(pd);
                records.push(regions);
            }
            return Fetched {
                response: FetchResponse::default()
                    .with_session_id(0)
                    .with_responses(topics),
                records,
            };
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
