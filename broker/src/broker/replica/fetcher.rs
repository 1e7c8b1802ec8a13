//! Follower replicas: one fetcher task per leader broker copies the partitions this node
//! follows from that leader (Kafka's `ReplicaFetcherThread`, one per source broker with
//! `num.replica.fetchers=1`).
//!
//! Each round sends one Fetch (v12, topics by name) for every partition followed from that
//! leader, on the leader's client listener as the image registers it, with this node's id
//! as `replica_id`, the partition's current leader epoch, its log end offset as the fetch
//! offset and its newest epoch as `last_fetched_epoch` (KIP-595's truncation on fetch). The
//! per-partition logic is the replication crate's `FollowerState`: a diverging epoch in the
//! answer truncates the log (KIP-101/KIP-279) before the next fetch; records are appended
//! with the leader's offsets and epochs (`Log::append_as_follower`); the follower's high
//! watermark is the leader's, capped at its own log end. The leader parks an empty fetch for
//! `replica.fetch.wait.max.ms` (500), so an idle follower asks twice a second.
//!
//! A failed exchange drops the connection and waits `replica.fetch.backoff.ms` (1000 in
//! Kafka; 200 here, so a failover heals quickly); a partition error (FENCED_LEADER_EPOCH,
//! NOT_LEADER_OR_FOLLOWER, ...) waits for the next metadata, as Kafka's fetcher does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strata_protocol::messages::fetch_request::{FetchPartition as WirePartition, FetchTopic};
use strata_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, RequestKind, ResponseKind, TopicName,
};
use strata_protocol::{ResponseError, StrBytes};
use strata_replication::ReplicationError;
use strata_replication::fetch::{EpochEndOffset, FetchAnswer};
use strata_replication::follower::{
    FollowerRequest, FollowerState, LocalLog, Truncation, TruncationMode,
};

use crate::broker::Broker;
use crate::partition::Partition;
use crate::peer_client::{self, PeerClient, PeerError};

/// Fetch version sent: v12 has the diverging epoch and still names topics.
const FETCH_VERSION: i16 = 12;
/// `replica.fetch.wait.max.ms`.
const FETCH_WAIT_MAX_MS: i32 = 500;
/// `replica.fetch.max.bytes`.
const FETCH_MAX_BYTES_PER_PARTITION: i32 = 1024 * 1024;
/// `replica.fetch.response.max.bytes`.
const FETCH_RESPONSE_MAX_BYTES: i32 = 10 * 1024 * 1024;
/// The bound on one exchange, beyond the leader's wait.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The pause after a failure.
const BACKOFF: Duration = Duration::from_millis(200);
/// The largest response accepted.
const MAX_RESPONSE_BYTES: usize = FETCH_RESPONSE_MAX_BYTES as usize + (1 << 20);

/// The fetch offset asked for each partition of one request.
type Asked = HashMap<(String, i32), i64>;

/// One partition followed from a leader.
struct Followed {
    partition: Arc<Partition>,
    /// The leader epoch the image gives.
    leader_epoch: i32,
    /// The fetch state; `None` while waiting for the next metadata after a partition error.
    state: Option<FollowerState>,
}

/// The partitions followed from one leader, shared with its task.
#[derive(Default)]
struct Source {
    partitions: Mutex<HashMap<(String, i32), Followed>>,
    stopped: AtomicBool,
}

/// Every fetcher of this node.
#[derive(Default)]
pub struct Fetchers {
    sources: Mutex<HashMap<i32, Arc<Source>>>,
}

impl Fetchers {
    /// Follows `partition` from `leader` at `leader_epoch` (the image's), starting a fetcher
    /// for that leader if none runs. A new epoch or leader restarts the partition's state,
    /// so it truncates against the new leader first.
    pub fn follow(
        &self,
        broker: &Arc<Broker>,
        partition: Arc<Partition>,
        leader: i32,
        leader_epoch: i32,
    ) {
        let key = (partition.topic.clone(), partition.index);
        let mut sources = self
            .sources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Already followed from this leader at this epoch: nothing to do.
        if let Some(src) = sources.get(&leader) {
            let parts = src
                .partitions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if parts
                .get(&key)
                .is_some_and(|f| f.leader_epoch == leader_epoch)
            {
                return;
            }
        }
        for (id, src) in sources.iter() {
            if *id != leader {
                src.partitions
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&key);
            }
        }
        let src = sources.entry(leader).or_insert_with(|| {
            let src = Arc::new(Source::default());
            tokio::spawn(run(broker.clone(), leader, src.clone()));
            src
        });
        let hw = partition.high_watermark();
        let state = FollowerState::new(
            broker.config.node_id,
            -1,
            leader,
            leader_epoch,
            TruncationMode::OnFetch,
            hw,
        );
        {
            let mut log = partition.log();
            let local = LocalLog {
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
                epochs: log.leader_epochs(),
            };
            if let Some(t) = state.initial_truncation(local) {
                truncate(&mut log, &partition, t);
            }
        }
        tracing::info!(topic = %partition.topic, partition = partition.index, leader, leader_epoch, "following");
        src.partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                key,
                Followed {
                    partition,
                    leader_epoch,
                    state: Some(state),
                },
            );
    }

    /// Stops following a partition (this node leads it now, or no longer replicates it).
    pub fn unfollow(&self, topic: &str, index: i32) {
        let key = (topic.to_owned(), index);
        let mut sources = self
            .sources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for src in sources.values() {
            src.partitions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&key);
        }
        sources.retain(|_, src| {
            let empty = src
                .partitions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_empty();
            if empty {
                src.stopped.store(true, Ordering::Relaxed);
            }
            !empty
        });
    }

    /// Whether this node follows the partition now.
    #[must_use]
    pub fn follows(&self, topic: &str, index: i32) -> bool {
        let key = (topic.to_owned(), index);
        self.sources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .any(|s| {
                s.partitions
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .contains_key(&key)
            })
    }
}

fn truncate(log: &mut strata_storage::Log, partition: &Partition, t: Truncation) {
    let result = match t {
        Truncation::To(offset) => log.truncate_to(offset),
        Truncation::FullyAndStartAt(offset) => log.truncate_fully_and_start_at(offset),
    };
    match result {
        Ok(()) => {
            tracing::info!(topic = %partition.topic, partition = partition.index, ?t, log_end_offset = log.log_end_offset(), "truncated follower log")
        }
        Err(e) => {
            tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "cannot truncate follower log")
        }
    }
}

async fn run(broker: Arc<Broker>, leader: i32, src: Arc<Source>) {
    let mut client = PeerClient::new(
        format!("strata-replica-fetcher-{}", broker.config.node_id),
        MAX_RESPONSE_BYTES,
    )
    .secured(broker.peers.inter_broker.clone());
    while !src.stopped.load(Ordering::Relaxed) {
        let Some((request, asked)) = build_request(&broker, &src) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let exchange = exchange(&broker, leader, &mut client, &request);
        let response = match peer_client::within(EXCHANGE_TIMEOUT, exchange).await {
            Ok(r) => r,
            Err(FetchError::Peer(PeerError::Timeout)) => {
                tracing::debug!(leader, "replica fetch timed out");
                client.disconnect();
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
            Err(why) => {
                tracing::debug!(leader, why = %why, "replica fetch failed");
                client.disconnect();
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        let s = src.clone();
        let handled =
            tokio::task::spawn_blocking(move || handle_response(&s, response, &asked)).await;
        if let Ok(true) = handled {
            // Every partition failed: wait for metadata rather than spin.
            tokio::time::sleep(BACKOFF).await;
        }
    }
}

/// The Fetch for every partition whose state asks to fetch, and the offsets asked.
fn build_request(broker: &Broker, src: &Source) -> Option<(RequestKind, Asked)> {
    let parts = src
        .partitions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut topics: HashMap<String, Vec<WirePartition>> = HashMap::new();
    let mut asked = HashMap::new();
    for (key, f) in parts.iter() {
        let Some(state) = &f.state else { continue };
        let log = f.partition.log();
        let local = LocalLog {
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            epochs: log.leader_epochs(),
        };
        let FollowerRequest::Fetch(fp) = state.next_request(local) else {
            continue;
        };
        asked.insert(key.clone(), fp.fetch_offset);
        topics.entry(key.0.clone()).or_default().push(
            WirePartition::default()
                .with_partition(key.1)
                .with_current_leader_epoch(fp.current_leader_epoch)
                .with_fetch_offset(fp.fetch_offset)
                .with_last_fetched_epoch(fp.last_fetched_epoch)
                .with_log_start_offset(fp.log_start_offset)
                .with_partition_max_bytes(FETCH_MAX_BYTES_PER_PARTITION),
        );
    }
    if asked.is_empty() {
        return None;
    }
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(broker.config.node_id))
        .with_max_wait_ms(FETCH_WAIT_MAX_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_RESPONSE_MAX_BYTES)
        .with_session_epoch(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(name)))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    Some((RequestKind::Fetch(request), asked))
}

/// Why one replica fetch got no answer.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// The leader has no inter-broker endpoint in this node's image.
    #[error("leader not registered")]
    LeaderNotRegistered,
    /// Connecting, the exchange, or its time bound.
    #[error(transparent)]
    Peer(#[from] PeerError),
    /// The answer is not a Fetch response.
    #[error("unexpected response")]
    Unexpected,
}

async fn exchange(
    broker: &Broker,
    leader: i32,
    client: &mut PeerClient,
    request: &RequestKind,
) -> Result<strata_protocol::messages::FetchResponse, FetchError> {
    if !client.is_connected() {
        let image = broker.image();
        let (host, port) = crate::broker::inter_broker_endpoint(broker, &image, leader)
            .ok_or(FetchError::LeaderNotRegistered)?;
        client.connect((host.as_str(), port)).await?;
    }
    match client
        .request(ApiKey::Fetch, FETCH_VERSION, request)
        .await?
    {
        ResponseKind::Fetch(r) => Ok(r),
        _ => Err(FetchError::Unexpected),
    }
}

/// Applies one Fetch answer. Returns whether every partition failed.
fn handle_response(
    src: &Source,
    response: strata_protocol::messages::FetchResponse,
    asked: &Asked,
) -> bool {
    let now_ms = crate::now_ms();
    let mut parts = src
        .partitions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut all_failed = response.error_code != 0;
    for topic in response.responses {
        let name = topic.topic.0.to_string();
        for p in topic.partitions {
            let key = (name.clone(), p.partition_index);
            let Some(&fetch_offset) = asked.get(&key) else {
                continue;
            };
            let Some(f) = parts.get_mut(&key) else {
                continue;
            };
            let Some(state) = f.state.as_mut() else {
                continue;
            };
            if p.error_code != 0 {
                tracing::debug!(topic = %name, partition = p.partition_index, code = p.error_code, "replica fetch partition error");
                let error = ResponseError::try_from_code(p.error_code);
                if error == Some(ResponseError::OffsetOutOfRange) {
                    // Kafka's `fetchOffsetAndTruncate`, with the leader's log start and high
                    // watermark from this answer standing in for its offsets.
                    let mut log = f.partition.log();
                    let local = LocalLog {
                        log_start_offset: log.log_start_offset(),
                        log_end_offset: log.log_end_offset(),
                        epochs: log.leader_epochs(),
                    };
                    state.on_error(&ReplicationError::OffsetOutOfRange {
                        requested: fetch_offset,
                        log_start: p.log_start_offset,
                        log_end: p.high_watermark,
                    });
                    if let Some(t) =
                        state.on_leader_offsets(p.log_start_offset, p.high_watermark, local)
                    {
                        truncate(&mut log, &f.partition, t);
                    }
                } else if error == Some(ResponseError::FencedLeaderEpoch) {
                    // This node's metadata is newer than the leader's, or older; either way
                    // the state waits for the next image.
                    state.on_error(&ReplicationError::FencedLeaderEpoch {
                        requested: f.leader_epoch,
                        current: -1,
                    });
                }
                continue;
            }
            all_failed = false;
            let diverging = (p.diverging_epoch.epoch >= 0).then_some(EpochEndOffset {
                epoch: p.diverging_epoch.epoch,
                end_offset: p.diverging_epoch.end_offset,
            });
            let mut log = f.partition.log();
            if log.log_end_offset() != fetch_offset {
                // The log moved under this answer (a truncation on a new epoch).
                continue;
            }
            let answer = FetchAnswer {
                high_watermark: p.high_watermark,
                log_start_offset: p.log_start_offset,
                log_end_offset: -1,
                read_to: -1,
                diverging_epoch: diverging,
            };
            let local = LocalLog {
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
                epochs: log.leader_epochs(),
            };
            if let Some(t) = state.on_fetch_answer(&answer, local) {
                truncate(&mut log, &f.partition, t);
            }
            if diverging.is_none()
                && let Some(records) = p.records.filter(|r| !r.is_empty())
            {
                let mut buf = records.to_vec();
                if let Err(e) = log.append_as_follower(&mut buf, now_ms) {
                    tracing::warn!(topic = %name, partition = p.partition_index, error = %e, "cannot append replicated records");
                }
            }
            let end = log.log_end_offset();
            state.after_append(p.high_watermark, end);
            let hw = state.high_watermark();
            drop(log);
            f.partition.set_high_watermark(hw);
        }
    }
    all_failed
}
