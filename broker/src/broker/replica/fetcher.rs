//! Follower replicas: one fetcher task per leader broker copies the partitions this node
//! follows from that leader (Kafka's `ReplicaFetcherThread`, one per source broker with
//! `num.replica.fetchers=1`).
//!
//! Each round sends one Fetch (v12, topics by name) for the partitions followed from that
//! leader, in an incremental fetch session (KIP-227, [`Session`]: after the first, full fetch,
//! only partitions whose request changed are sent and only those with news are answered),
//! on the leader's client listener as the image registers it, with this node's id
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

use strata_protocol::messages::fetch_request::{
    FetchPartition as WirePartition, FetchTopic, ForgottenTopic,
};
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
/// What each partition of an answered request asked: (fetch offset, leader epoch).
type Asked = HashMap<(String, i32), (i64, i32)>;

/// What each partition of a request asks, by (topic, partition).
type Asks = HashMap<(String, i32), WirePartition>;

/// This follower's side of its fetch session with one leader (KIP-227, Kafka's
/// `FetchSessionHandler`): the session the leader gave, the epoch to send next, and what the
/// leader's session holds of each partition. The first fetch (epoch 0) is full and asks for a
/// session; each later one sends only the partitions whose request changed (a fetch offset
/// moved, a new leader epoch) and forgets those no longer fetched, and the leader answers
/// only the partitions with news. A refused or failed exchange, or an answer this node
/// could not apply whole, makes the next fetch full again (epoch 0 closes the old session
/// and opens a new one), so that the leader tells everything afresh.
#[derive(Default)]
struct Session {
    /// The leader's session id; 0 for none.
    id: i32,
    /// The epoch of the next request; 0 asks for a full fetch.
    epoch: i32,
    /// What the leader's session was told of each partition.
    sent: Asks,
}

/// One request and what it leaves the session holding if it is answered.
struct Built {
    request: RequestKind,
    full: bool,
    asks: Asks,
}

/// What a leader's answer means for the session.
enum Outcome {
    /// Answered: apply its partitions.
    Apply,
    /// The session was refused (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
    /// FETCH_SESSION_TOPIC_ID_ERROR): fetch in full at once.
    Refused,
    /// Another top-level error: fetch in full after the backoff.
    Failed,
}

impl Session {
    /// Kafka's `FetchSessionHandler.build`: the request for `asks`, every partition to fetch.
    fn build(&self, broker: &Broker, asks: Asks) -> Built {
        // A new leader epoch on a partition the session holds starts the session over: its
        // new state hears everything from the leader, not only what changed.
        let epoch_moved = asks.iter().any(|(k, p)| {
            self.sent
                .get(k)
                .is_some_and(|s| s.current_leader_epoch != p.current_leader_epoch)
        });
        let full = self.id == 0 || self.epoch == 0 || epoch_moved;
        let mut topics: HashMap<String, Vec<WirePartition>> = HashMap::new();
        let mut forgotten: HashMap<String, Vec<i32>> = HashMap::new();
        for (key, p) in &asks {
            if full || self.sent.get(key) != Some(p) {
                topics.entry(key.0.clone()).or_default().push(p.clone());
            }
        }
        if !full {
            for key in self.sent.keys().filter(|k| !asks.contains_key(*k)) {
                forgotten.entry(key.0.clone()).or_default().push(key.1);
            }
        }
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(broker.config.node_id))
            .with_max_wait_ms(FETCH_WAIT_MAX_MS)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_RESPONSE_MAX_BYTES)
            .with_session_id(self.id)
            .with_session_epoch(if full { 0 } else { self.epoch })
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        FetchTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
            .with_forgotten_topics_data(
                forgotten
                    .into_iter()
                    .map(|(name, partitions)| {
                        ForgottenTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        Built {
            request: RequestKind::Fetch(request),
            full,
            asks,
        }
    }

    /// Kafka's `FetchSessionHandler.handleResponse`: what the answer means (a top-level
    /// error's answer holds no partitions, and the next fetch is full).
    fn answered(&mut self, full: bool, asks: Asks, error_code: i16, session_id: i32) -> Outcome {
        if error_code != 0 {
            tracing::debug!(
                session = self.id,
                error_code,
                "replica fetch session refused"
            );
            self.epoch = 0;
            return match ResponseError::try_from_code(error_code) {
                Some(ResponseError::FetchSessionIdNotFound) => {
                    self.id = 0;
                    Outcome::Refused
                }
                Some(
                    ResponseError::InvalidFetchSessionEpoch
                    | ResponseError::FetchSessionTopicIdError,
                ) => Outcome::Refused,
                _ => Outcome::Failed,
            };
        }
        if full {
            self.id = session_id;
            self.epoch = if session_id == 0 { 0 } else { 1 };
        } else {
            self.epoch = next_session_epoch(self.epoch);
        }
        self.sent = asks;
        Outcome::Apply
    }

    /// After a failed exchange or an answer not applied whole: the next fetch is full.
    fn restart(&mut self) {
        self.epoch = 0;
    }
}

/// Kafka's `FetchMetadata.nextEpoch` for a session this node holds (never below 1).
fn next_session_epoch(epoch: i32) -> i32 {
    crate::fetch_session::next_epoch(epoch).max(1)
}

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
    let mut session = Session::default();
    while !src.stopped.load(Ordering::Relaxed) {
        let Some(asks) = next_asks(&src) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let built = session.build(&broker, asks);
        let exchange = exchange(&broker, leader, &mut client, &built.request);
        let response = match peer_client::within(EXCHANGE_TIMEOUT, exchange).await {
            Ok(r) => r,
            Err(FetchError::Peer(PeerError::Timeout)) => {
                tracing::debug!(leader, "replica fetch timed out");
                client.disconnect();
                session.restart();
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
            Err(why) => {
                tracing::debug!(leader, why = %why, "replica fetch failed");
                client.disconnect();
                session.restart();
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        match session.answered(
            built.full,
            built.asks,
            response.error_code,
            response.session_id,
        ) {
            Outcome::Apply => {}
            Outcome::Refused => continue,
            Outcome::Failed => {
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        }
        // The fetch offsets the leader read from: every partition the session now holds.
        let asked: Asked = session
            .sent
            .iter()
            .map(|(k, p)| (k.clone(), (p.fetch_offset, p.current_leader_epoch)))
            .collect();
        let s = src.clone();
        let handled =
            tokio::task::spawn_blocking(move || handle_response(&s, response, &asked)).await;
        match handled {
            Ok(Handled {
                all_failed,
                applied_whole,
            }) => {
                if !applied_whole {
                    session.restart();
                }
                if all_failed {
                    // Every partition failed: wait for metadata rather than spin.
                    tokio::time::sleep(BACKOFF).await;
                }
            }
            Err(_) => session.restart(),
        }
    }
    // Kafka's fetcher leaves its session to be evicted; closing it (epoch -1, nothing to
    // fetch, no wait) frees the leader's slot at once. Best effort, and only on a live
    // connection: a leader that is gone took its sessions with it.
    if session.id != 0 && client.is_connected() {
        let close = FetchRequest::default()
            .with_replica_id(BrokerId(broker.config.node_id))
            .with_max_wait_ms(0)
            .with_session_id(session.id)
            .with_session_epoch(crate::fetch_session::FINAL_EPOCH);
        let request = RequestKind::Fetch(close);
        let closing = exchange(&broker, leader, &mut client, &request);
        let _ = peer_client::within(Duration::from_secs(2), closing).await;
    }
}

/// What each partition whose state asks to fetch asks, or `None` if none does.
fn next_asks(src: &Source) -> Option<Asks> {
    let parts = src
        .partitions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut asks = HashMap::new();
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
        asks.insert(
            key.clone(),
            WirePartition::default()
                .with_partition(key.1)
                .with_current_leader_epoch(fp.current_leader_epoch)
                .with_fetch_offset(fp.fetch_offset)
                .with_last_fetched_epoch(fp.last_fetched_epoch)
                .with_log_start_offset(fp.log_start_offset)
                .with_partition_max_bytes(FETCH_MAX_BYTES_PER_PARTITION),
        );
    }
    (!asks.is_empty()).then_some(asks)
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

/// What applying one Fetch answer came to.
struct Handled {
    /// The answer held partitions, and each had an error.
    all_failed: bool,
    /// Every partition's answer was applied: none was dropped because the log moved under
    /// it or its records could not be appended. Otherwise the leader's session believes this
    /// node knows what it does not, and the next fetch must be full.
    applied_whole: bool,
}

/// Applies one Fetch answer; a partition the answer leaves out (an incremental session's
/// answer holds only those with news) is as it was.
fn handle_response(
    src: &Source,
    response: strata_protocol::messages::FetchResponse,
    asked: &Asked,
) -> Handled {
    let now_ms = crate::now_ms();
    let mut parts = src
        .partitions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut answered = false;
    let mut any_ok = false;
    let mut applied_whole = true;
    for topic in response.responses {
        let name = topic.topic.0.to_string();
        for p in topic.partitions {
            let key = (name.clone(), p.partition_index);
            let Some(&(fetch_offset, asked_epoch)) = asked.get(&key) else {
                continue;
            };
            let Some(f) = parts.get_mut(&key) else {
                continue;
            };
            if asked_epoch != f.leader_epoch {
                // Asked for an earlier follow of the partition: a new image moved its
                // leader epoch while the fetch was out, and `follow` gave it a fresh state.
                // The answer is not that state's: a FENCED_LEADER_EPOCH meant for the old
                // epoch would leave the new state waiting for an image that has already
                // come, and never fetching again. The session refetches it in full.
                applied_whole = false;
                continue;
            }
            let Some(state) = f.state.as_mut() else {
                continue;
            };
            answered = true;
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
            any_ok = true;
            let diverging = (p.diverging_epoch.epoch >= 0).then_some(EpochEndOffset {
                epoch: p.diverging_epoch.epoch,
                end_offset: p.diverging_epoch.end_offset,
            });
            let mut log = f.partition.log();
            if log.log_end_offset() != fetch_offset {
                // The log moved under this answer (a truncation on a new epoch).
                applied_whole = false;
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
                    applied_whole = false;
                }
            }
            let end = log.log_end_offset();
            state.after_append(p.high_watermark, end);
            let hw = state.high_watermark();
            drop(log);
            f.partition.set_high_watermark(hw);
        }
    }
    Handled {
        all_failed: answered && !any_ok,
        applied_whole,
    }
}

#[cfg(test)]
mod tests {
    use strata_protocol::messages::FetchResponse;
    use strata_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};

    use super::*;

    /// A source following `t-0` at leader epoch `epoch`, as `Fetchers::follow` leaves it.
    fn followed_at(dir: &std::path::Path, epoch: i32) -> Source {
        let log =
            strata_storage::Log::open(&dir.join("t-0"), strata_storage::LogConfig::default(), 0)
                .unwrap();
        let partition = Partition::new("t".to_owned(), uuid::Uuid::nil(), 0, log);
        let state = FollowerState::new(1, -1, 2, epoch, TruncationMode::OnFetch, 0);
        let src = Source::default();
        src.partitions.lock().unwrap().insert(
            ("t".to_owned(), 0),
            Followed {
                partition,
                leader_epoch: epoch,
                state: Some(state),
            },
        );
        src
    }

    fn fenced() -> FetchResponse {
        FetchResponse::default().with_responses(vec![
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    PartitionData::default()
                        .with_partition_index(0)
                        .with_error_code(ResponseError::FencedLeaderEpoch.code()),
                ]),
        ])
    }

    fn asked(epoch: i32) -> Asked {
        HashMap::from([(("t".to_owned(), 0), (0, epoch))])
    }

    #[test]
    fn an_answer_to_an_earlier_epoch_leaves_the_new_follow_fetching() {
        let dir = tempfile::tempdir().unwrap();
        // Asked at epoch 10; meanwhile the image moved the partition to epoch 11 and the
        // follow started over. The leader's FENCED_LEADER_EPOCH was for epoch 10.
        let src = followed_at(dir.path(), 11);
        let handled = handle_response(&src, fenced(), &asked(10));
        assert!(
            !handled.applied_whole,
            "the session must fetch in full again"
        );
        assert!(
            next_asks(&src).is_some_and(|a| a[&("t".to_owned(), 0)].current_leader_epoch == 11),
            "the follow of epoch 11 must go on fetching"
        );
        // The same answer to a fetch of the current epoch does fence it, until an image
        // with a newer epoch comes.
        let handled = handle_response(&src, fenced(), &asked(11));
        assert!(handled.all_failed);
        assert!(next_asks(&src).is_none());
    }
}
