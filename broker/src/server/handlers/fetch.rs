//! Fetch (key 1): read whole batches from each partition's log up to the high watermark, and
//! long-poll until `min_bytes` are available or `max_wait_ms` passes.
//!
//! Every answer carries the partition's last stable offset; a read_committed fetch reads up
//! to it only and lists the aborted transactions whose records the answer may hold, from
//! the segments' `.txnindex` (Kafka's `collectAbortedTransactions`).
//!
//! Fetch sessions (KIP-227, [`crate::fetch_session`]), for consumers and followers alike: a
//! full fetch at epoch 0 is answered whole and gets a session id; an incremental fetch names
//! only what changed, reads every partition of its session, and is answered only the
//! partitions with news ([`settle`], once the quota has said whether the answer is
//! throttled).
//!
//! The partition's leader in the metadata image serves a consumer's fetch, and the
//! fetch's `current_leader_epoch` (v9+, KIP-320) must match the image's leader epoch; a
//! v16 answer of NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the current leader and
//! its endpoint (KIP-951).
//!
//! KIP-392 (fetch from the closest replica), as Kafka's `ReplicaManager.readFromLog`: a
//! Fetch v11+ carries client metadata, and then a follower replica serves it too, up to its
//! own high watermark (the leader's, as its last replica fetch learnt it); errors there
//! carry no offsets (-1), as Kafka's do, so that librdkafka takes an out-of-range answer
//! from a follower as a reason to go back to the leader rather than to reset. On the
//! leader, with `replica.selector.class` rack-aware and a non-empty `rack_id`, a partition
//! whose best replica for the client's rack is a follower
//! ([`crate::partition::read_replica`]) is answered at once with that follower in
//! `preferred_read_replica`, the leader's offsets and no records.
//!
//! Records are never copied here (ARCHITECTURE.md decision 4): each partition's answer is the
//! file regions `Log::read` returns, and [`encode`] turns the response into a plan of encoded
//! bytes around those regions, which the connection writer sends with `sendfile`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::select_all;
use strata_kraft::MetadataImage;
use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::fetch_plan::{self, ResponsePlan};
use strata_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use strata_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId, TopicName};
use strata_storage::{FileRegion, ReadResult};
use tokio::time::Instant;

use super::RequestContext;
use crate::broker::leadership::{self, LeaderEndpoint, ReadRole};
use crate::config::ReplicaSelector;
use crate::fetch_session::{
    self, Answered, Context, NO_SESSION, PartitionKey, PartitionParams, SessionError,
    SessionRequest, TopicKey,
};
use crate::partition::Partition;
use crate::partition::read_replica::live_rack;
use crate::server::error::{
    TopicRefusal, leadership_error_code, log_error_code, topic_refusal_code,
};

/// KIP-98: read_committed reads stop at the last stable offset and list the aborted
/// transactions in the range.
const READ_COMMITTED: i8 = 1;

/// One requested partition, resolved.
struct Wanted {
    topic: TopicKey,
    index: i32,
    fetch_offset: i64,
    partition_max_bytes: i32,
    partition: Result<Arc<Partition>, i16>,
    /// KIP-392: served by this node as a follower replica, not as the leader.
    follower: bool,
    /// KIP-951 (v16): where the client should fetch instead, with the error.
    current_leader: Option<LeaderIdAndEpoch>,
}

/// KIP-392: what a leader needs to send a consumer to a follower of its rack.
struct RackAware<'a> {
    /// The consumer's `client.rack` (Fetch v11+ `rack_id`), not empty.
    client_rack: &'a str,
    /// Replicas' racks and liveness.
    image: &'a MetadataImage,
    /// This node and its `broker.rack`.
    local: (i32, Option<&'a str>),
}

/// A fetch's answer before it is settled: each partition's answer (records as file regions)
/// in fetch order, and what its fetch session still has to do with it.
pub struct Fetched {
    /// The top-level fields (error, session id, node endpoints); [`settle`] fills in the
    /// partitions.
    response: FetchResponse,
    /// Each partition's topic, answer and records, in fetch order.
    parts: Vec<(TopicKey, PartitionData, Vec<FileRegion>)>,
    /// What the session does once the answer is known to be sent or throttled.
    session: PendingSession,
}

/// A fetch session's part in one answer (KIP-227).
enum PendingSession {
    /// Sessionless, or refused: the answer is as built.
    None,
    /// A full fetch that asked for a session: one is made from the answer unless throttled.
    Create {
        privileged: bool,
        uses_topic_ids: bool,
        asked: Vec<(PartitionKey, PartitionParams)>,
    },
    /// An incremental fetch: only the partitions with news are answered.
    Incremental { id: i32, next_epoch: i32 },
}

impl Fetched {
    /// An answer of only a top-level error, with session id 0.
    fn refused(code: i16) -> Self {
        Self {
            response: FetchResponse::default()
                .with_error_code(code)
                .with_session_id(NO_SESSION),
            parts: Vec::new(),
            session: PendingSession::None,
        }
    }

    /// Partition answers, read in `context`'s order, completed under its session.
    pub(super) fn answered(
        context: Context,
        response: FetchResponse,
        parts: Vec<(TopicKey, PartitionData, Vec<FileRegion>)>,
    ) -> Self {
        let session = match context {
            Context::Sessionless(_) => PendingSession::None,
            Context::Full {
                partitions,
                privileged,
                uses_topic_ids,
            } => PendingSession::Create {
                privileged,
                uses_topic_ids,
                asked: partitions,
            },
            Context::Incremental { id, next_epoch, .. } => {
                PendingSession::Incremental { id, next_epoch }
            }
        };
        Self {
            response,
            parts,
            session,
        }
    }

    /// Record bytes in the answer.
    fn record_bytes(&self) -> u64 {
        self.parts
            .iter()
            .flat_map(|(_, _, regions)| regions)
            .map(|r| u64::from(r.len))
            .sum()
    }
}

/// The session fields and partitions of a fetch (KIP-227): topics by id from v13, by name
/// before; sessions from v7 (earlier versions are sessionless).
pub(super) fn session_request(
    version: i16,
    req: &FetchRequest,
    privileged: bool,
) -> SessionRequest {
    let uses_topic_ids = version >= 13;
    let topic_key = |id: uuid::Uuid, name: &TopicName| {
        if uses_topic_ids {
            TopicKey::Id(id)
        } else {
            TopicKey::Name(name.0.to_string())
        }
    };
    let partitions = req
        .topics
        .iter()
        .flat_map(|t| {
            let topic = topic_key(t.topic_id, &t.topic);
            t.partitions.iter().map(move |p| {
                (
                    (topic.clone(), p.partition),
                    PartitionParams {
                        fetch_offset: p.fetch_offset,
                        partition_max_bytes: p.partition_max_bytes,
                        current_leader_epoch: if version >= 9 {
                            p.current_leader_epoch
                        } else {
                            -1
                        },
                        last_fetched_epoch: if version >= 12 {
                            p.last_fetched_epoch
                        } else {
                            -1
                        },
                        log_start_offset: if version >= 5 { p.log_start_offset } else { -1 },
                    },
                )
            })
        })
        .collect();
    let sessions = version >= 7;
    let forgotten = if sessions {
        req.forgotten_topics_data
            .iter()
            .flat_map(|f| {
                let topic = topic_key(f.topic_id, &f.topic);
                f.partitions.iter().map(move |&p| (topic.clone(), p))
            })
            .collect()
    } else {
        Vec::new()
    };
    SessionRequest {
        id: if sessions { req.session_id } else { NO_SESSION },
        epoch: if sessions {
            req.session_epoch
        } else {
            fetch_session::FINAL_EPOCH
        },
        uses_topic_ids,
        privileged,
        partitions,
        forgotten,
    }
}

/// The partitions a session context fetches, in order.
pub(super) fn fetched_partitions(context: &Context) -> &[(PartitionKey, PartitionParams)] {
    match context {
        Context::Sessionless(p) | Context::Full { partitions: p, .. } => p,
        Context::Incremental { partitions, .. } => partitions,
    }
}

/// Each topic's name, looked up once per fetch.
pub(super) struct TopicNames<'a> {
    image: &'a MetadataImage,
    seen: HashMap<TopicKey, Option<String>>,
}

impl<'a> TopicNames<'a> {
    pub(super) fn new(image: &'a MetadataImage) -> Self {
        Self {
            image,
            seen: HashMap::new(),
        }
    }

    /// The name of `topic`, or `None` for an id the image does not know.
    pub(super) fn name(&mut self, topic: &TopicKey) -> Option<String> {
        if let Some(known) = self.seen.get(topic) {
            return known.clone();
        }
        let name = match topic {
            TopicKey::Id(id) => self.image.topic_by_id(*id).map(|t| t.name.clone()),
            TopicKey::Name(n) => Some(n.clone()),
        };
        self.seen.insert(topic.clone(), name.clone());
        name
    }
}

/// Answers a fetch, parking until enough bytes arrive.
pub async fn handle(ctx: &RequestContext, req: FetchRequest) -> Fetched {
    answer(ctx, &ctx.broker.image(), req).await
}

/// [`handle`] against a given metadata image: who leads each partition, at which epoch.
async fn answer(ctx: &RequestContext, image: &MetadataImage, req: FetchRequest) -> Fetched {
    let version = ctx.api_version;
    // A follower replica's fetch (the leader's side of replication) on a replicated leader.
    let (replica_id, replica_epoch) = if version >= 15 {
        (
            req.replica_state.replica_id.0,
            req.replica_state.replica_epoch,
        )
    } else {
        (req.replica_id.0, -1)
    };
    let session = session_request(version, &req, replica_id >= 0);
    let context = match ctx.broker.fetch_sessions.begin(session, crate::now_ms()) {
        Ok(c) => c,
        Err(e) => return Fetched::refused(fetch_session_error_code(e)),
    };
    if replica_id >= 0 {
        return super::replica_fetch::answer(ctx, image, &req, context, replica_id, replica_epoch)
            .await;
    }
    // KIP-392: Kafka gives a fetch client metadata from v11 on (`rack_id` may be empty);
    // only then may a follower serve it or the leader name a preferred read replica.
    let client_metadata = version >= 11;
    let rack_aware = (client_metadata
        && ctx.broker.config.replica_selector == ReplicaSelector::RackAware
        && !req.rack_id.is_empty())
    .then(|| RackAware {
        client_rack: req.rack_id.as_str(),
        image,
        local: (ctx.broker.config.node_id, ctx.broker.config.rack.as_deref()),
    });
    let mut wanted = Vec::new();
    // KIP-951: the endpoints of the leaders named in `current_leader`, by node id.
    let mut node_endpoints: BTreeMap<i32, LeaderEndpoint> = BTreeMap::new();
    let mut names = TopicNames::new(image);
    // Kafka's handleFetchRequest: READ on the topic, once the topic is known.
    let mut authorized: HashMap<String, bool> = HashMap::new();
    for ((topic, index), params) in fetched_partitions(&context) {
        let name = names.name(topic);
        let allowed = name.as_deref().is_none_or(|n| {
            *authorized
                .entry(n.to_owned())
                .or_insert_with(|| ctx.authorize(AclOperation::Read, ResourceType::Topic, n))
        });
        let mut current_leader = None;
        let mut follower = false;
        let partition = match &name {
            None => Err(topic_refusal_code(TopicRefusal::UnknownId)),
            Some(_) if !allowed => Err(topic_refusal_code(TopicRefusal::Unauthorized)),
            Some(n) => leadership::readable_partition(
                &ctx.broker,
                image,
                n,
                *index,
                params.current_leader_epoch,
                client_metadata,
            )
            .map(|readable| {
                follower = readable.role == ReadRole::Follower;
                readable.partition
            })
            .map_err(|e| {
                if version >= 16 && leadership::redirects(e, true) {
                    let leader = leadership::current_leader(image, n, *index);
                    current_leader = Some(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(leader.leader_id))
                            .with_leader_epoch(leader.leader_epoch),
                    );
                    if let Some(endpoint) = leader.endpoint {
                        node_endpoints.insert(endpoint.node_id, endpoint);
                    }
                }
                leadership_error_code(e)
            }),
        };
        wanted.push(Wanted {
            topic: topic.clone(),
            index: *index,
            fetch_offset: params.fetch_offset,
            partition_max_bytes: params.partition_max_bytes,
            partition,
            follower,
            current_leader,
        });
    }
    let deadline =
        Instant::now() + Duration::from_millis(u64::try_from(req.max_wait_ms.max(0)).unwrap_or(0));
    let min_bytes = i64::from(req.min_bytes.max(0));
    let max_bytes = u32::try_from(req.max_bytes.max(0)).unwrap_or(0);
    let node_endpoints: Vec<NodeEndpoint> = node_endpoints
        .into_values()
        .map(|e| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(e.node_id))
                .with_host(StrBytes::from_string(e.host))
                .with_port(e.port)
                .with_rack(e.rack.map(StrBytes::from_string))
        })
        .collect();
    loop {
        // Subscribe before reading, so an append between the read and the wait still wakes us.
        let mut watchers: Vec<_> = wanted
            .iter()
            .filter_map(|w| w.partition.as_ref().ok())
            .map(|p| p.subscribe())
            .collect();
        let (parts, bytes, at_once) =
            read_all(&wanted, max_bytes, req.isolation_level, rack_aware.as_ref());
        if bytes >= min_bytes || at_once || Instant::now() >= deadline {
            let parts = wanted
                .iter()
                .zip(parts)
                .map(|(w, (pd, regions))| {
                    if let Ok(p) = &w.partition {
                        crate::metrics::record_fetch(&p.topic, p.index, &regions);
                    }
                    note_kip392(w, &pd, &regions);
                    (w.topic.clone(), pd, regions)
                })
                .collect();
            return Fetched::answered(
                context,
                FetchResponse::default().with_node_endpoints(node_endpoints),
                parts,
            );
        }
        let _parked = crate::metrics::fetch_parked();
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

/// The top-level code of a refused session request.
fn fetch_session_error_code(e: SessionError) -> i16 {
    match e {
        SessionError::IdNotFound => ResponseError::FetchSessionIdNotFound,
        SessionError::InvalidEpoch => ResponseError::InvalidFetchSessionEpoch,
        SessionError::TopicIdMismatch => ResponseError::FetchSessionTopicIdError,
    }
    .code()
}

/// A consumer fetch's quota (KIP-13): its record bytes are recorded against the client's
/// `consumer_byte_rate`, and a fetch that takes the rate over it answers its throttle time
/// and no partitions, its bytes taken back out of the rate (Kafka's
/// `getThrottledResponse` and `unrecordQuotaSensor`); the connection is muted meanwhile.
/// Returns whether it was throttled.
pub fn apply_quota(ctx: &RequestContext, fetched: &mut Fetched) -> bool {
    use crate::server::client_quotas::{QuotaType, unrecord};
    let bytes = fetched.record_bytes();
    let throttle = ctx.throttle(QuotaType::Fetch, bytes);
    fetched.response.throttle_time_ms = throttle;
    if throttle > 0 {
        unrecord(
            &ctx.broker.image(),
            QuotaType::Fetch,
            ctx.quota_user(),
            ctx.client_id.as_deref().unwrap_or(""),
            bytes,
            crate::now_ms(),
        );
        fetched.parts.clear();
        return true;
    }
    false
}

/// Completes an answer under its fetch session (KIP-227) and returns the response with
/// its partitions, and each partition's records in response order. A full fetch that asked
/// for a session gets one unless `throttled` (Kafka answers a throttled full fetch with
/// session id 0); an incremental fetch answers only the partitions with news, and a
/// throttled one none, committing nothing to the session.
pub fn settle(
    ctx: &RequestContext,
    fetched: Fetched,
    throttled: bool,
) -> (FetchResponse, Vec<Vec<FileRegion>>) {
    let Fetched {
        mut response,
        parts,
        session,
    } = fetched;
    let summary = |pd: &PartitionData, regions: &[FileRegion]| Answered {
        records: !regions.is_empty(),
        high_watermark: pd.high_watermark,
        log_start_offset: pd.log_start_offset,
        must_send: pd.error_code != 0
            || pd.preferred_read_replica.0 >= 0
            || pd.diverging_epoch.epoch >= 0,
    };
    let parts = match session {
        PendingSession::None => parts,
        PendingSession::Create {
            privileged,
            uses_topic_ids,
            asked,
        } => {
            if !throttled {
                let cached: Vec<_> = asked
                    .into_iter()
                    .zip(&parts)
                    .map(|((key, params), (_, pd, regions))| (key, params, summary(pd, regions)))
                    .collect();
                response.session_id = ctx.broker.fetch_sessions.create(
                    privileged,
                    uses_topic_ids,
                    cached,
                    crate::now_ms(),
                );
            }
            parts
        }
        PendingSession::Incremental { id, next_epoch } => {
            let sessions = &ctx.broker.fetch_sessions;
            let included = if throttled {
                // No partitions, and nothing committed: the next fetch sees the same news.
                sessions.check(id, next_epoch).map(|()| Vec::new())
            } else {
                let answered: Vec<Answered> =
                    parts.iter().map(|(_, pd, r)| summary(pd, r)).collect();
                sessions.finish(id, next_epoch, &answered)
            };
            match included {
                Ok(include) => {
                    response.session_id = id;
                    parts
                        .into_iter()
                        .zip(include)
                        .filter_map(|(part, keep)| keep.then_some(part))
                        .collect()
                }
                Err(e) => {
                    let refused = Fetched::refused(fetch_session_error_code(e));
                    return (
                        refused
                            .response
                            .with_throttle_time_ms(response.throttle_time_ms),
                        Vec::new(),
                    );
                }
            }
        }
    };
    // Partitions of one topic that follow one another share its entry, as in Kafka's
    // `FetchResponse.of`; a session's order may visit a topic more than once.
    let mut records = Vec::with_capacity(parts.len());
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut last: Option<TopicKey> = None;
    for (topic, pd, regions) in parts {
        if last.as_ref() != Some(&topic) {
            topics.push(match &topic {
                TopicKey::Id(id) => FetchableTopicResponse::default().with_topic_id(*id),
                TopicKey::Name(n) => FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_string(n.clone()))),
            });
            last = Some(topic);
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(pd);
        }
        records.push(regions);
    }
    (response.with_responses(topics), records)
}

/// Encodes a fetch's settled answer as a response plan. An encoding failure is a broker
/// bug: it is logged and the connection closes, since the client would otherwise wait
/// forever.
pub fn encode(
    ctx: &RequestContext,
    response: FetchResponse,
    records: Vec<Vec<FileRegion>>,
) -> Option<ResponsePlan<FileRegion>> {
    match fetch_plan::encode_fetch_plan(ctx.api_version, ctx.correlation_id, response, records) {
        Ok(plan) => Some(plan),
        Err(e) => {
            tracing::error!(error = %e, "fetch response encoding failed");
            None
        }
    }
}

/// KIP-392's evidence, per partition of a response: the bytes a follower served (metric and
/// debug log), and a leader's redirection to a preferred read replica.
fn note_kip392(w: &Wanted, pd: &PartitionData, regions: &[FileRegion]) {
    let Ok(p) = &w.partition else { return };
    if w.follower {
        crate::metrics::record_follower_fetch(regions);
        if !regions.is_empty() {
            let bytes: u64 = regions.iter().map(|r| u64::from(r.len)).sum();
            tracing::debug!(topic = %p.topic, partition = p.index, fetch_offset = w.fetch_offset,
                bytes, high_watermark = pd.high_watermark,
                "consumer fetch served by a follower replica (KIP-392)");
        }
    } else if pd.preferred_read_replica.0 >= 0 {
        crate::metrics::record_preferred_read_replica();
        tracing::debug!(topic = %p.topic, partition = p.index, fetch_offset = w.fetch_offset,
            preferred_read_replica = pd.preferred_read_replica.0,
            "consumer sent to a preferred read replica (KIP-392)");
    }
}

/// One partition's answer: its fields, and its records as regions.
type PartitionAnswer = (PartitionData, Vec<FileRegion>);

/// Reads every partition once. Returns the partition answers in request order, the bytes
/// read, and whether the fetch must be answered at once: a partition has an error, or a
/// preferred read replica (KIP-392), as in Kafka's `ReplicaManager.fetchMessages`.
fn read_all(
    wanted: &[Wanted],
    max_bytes: u32,
    isolation_level: i8,
    rack_aware: Option<&RackAware<'_>>,
) -> (Vec<PartitionAnswer>, i64, bool) {
    let mut remaining = max_bytes;
    let mut total: i64 = 0;
    let mut at_once = false;
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
                at_once = true;
                if let Some(leader) = &w.current_leader {
                    pd = pd.with_current_leader(leader.clone());
                }
                out.push((pd.with_error_code(*code), Vec::new()));
                continue;
            }
        };
        let log_start = p.log_start_offset();
        // A follower reads up to its own high watermark; until a leader's answer has set
        // it, to its log start, i.e. nothing (see `Partition::follower_high_watermark`).
        let hw = if w.follower {
            p.follower_high_watermark().unwrap_or(log_start)
        } else {
            p.high_watermark()
        };
        // Kafka answers the last stable offset at every isolation level; read_committed
        // reads stop there.
        let lso = p.last_stable_offset_at(hw);
        pd = pd
            .with_high_watermark(hw)
            .with_last_stable_offset(lso)
            .with_log_start_offset(log_start);
        let committed = isolation_level == READ_COMMITTED;
        let max_offset = if committed { lso } else { hw };
        // Kafka sends a null list under read_uncommitted.
        pd = pd.with_aborted_transactions((committed).then(Vec::new));
        // KIP-392: the leader names a better replica for the client's rack and reads
        // nothing; the client moves there and fetches again.
        if !w.follower
            && let Some(ra) = rack_aware
            && let Some(id) = p.preferred_read_replica(ra.client_rack, w.fetch_offset, &|node| {
                live_rack(ra.image, ra.local, node)
            })
        {
            at_once = true;
            out.push((pd.with_preferred_read_replica(BrokerId(id)), Vec::new()));
            continue;
        }
        let limit = remaining.min(u32::try_from(w.partition_max_bytes.max(0)).unwrap_or(0));
        // Kafka's rule: the first batch of the response is returned whole even when it exceeds
        // the limits, so that a consumer can always make progress.
        let min_one = total == 0;
        match p.read_up_to(w.fetch_offset, limit, max_offset, min_one) {
            Ok(r) => {
                let n = u32::try_from(r.bytes).unwrap_or(u32::MAX);
                remaining = remaining.saturating_sub(n);
                total += i64::from(n);
                if committed {
                    pd = pd.with_aborted_transactions(Some(aborted_in(p, w.fetch_offset, lso, &r)));
                }
                out.push((pd, r.regions));
            }
            Err(e) => {
                at_once = true;
                if w.follower {
                    // Kafka's error answers carry no offsets. librdkafka, fetching from a
                    // follower, goes back to the leader on OFFSET_OUT_OF_RANGE when its
                    // position is past the answer's high watermark, which -1 always is:
                    // the leader, not a lagging follower, decides whether to reset.
                    pd = pd
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1);
                }
                // Kafka answers an error with empty records, never null: librdkafka rejects a
                // null record set as a parse failure and never applies auto.offset.reset. The
                // plan writes an empty record set for a partition without regions.
                out.push((pd.with_error_code(log_error_code(&e)), Vec::new()));
            }
        }
    }
    (out, total, at_once)
}

/// The aborted transactions a read_committed answer lists (Kafka's
/// `FetchResponse.AbortedTransaction`): those whose records the read may hold, so that the
/// consumer drops them. Bounded by the last stable offset rather than the read's last
/// offset; a transaction starting after the read's records is listed needlessly, and the
/// consumer ignores it.
fn aborted_in(
    p: &Partition,
    fetch_offset: i64,
    lso: i64,
    read: &ReadResult,
) -> Vec<AbortedTransaction> {
    if read.regions.is_empty() {
        return Vec::new();
    }
    p.aborted_transactions(fetch_offset, lso)
        .into_iter()
        .map(|a| {
            AbortedTransaction::default()
                .with_producer_id(ProducerId(a.producer_id))
                .with_first_offset(a.first_offset)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use strata_protocol::messages::ApiKey;
    use strata_protocol::messages::fetch_request::{FetchPartition, FetchTopic};

    use super::*;
    use crate::server::handlers::fixture::{self, OTHER};

    /// A settled answer, not throttled.
    struct Settled {
        response: FetchResponse,
        records: Vec<Vec<FileRegion>>,
    }

    /// The fetch's answer as the client receives it.
    async fn answer(ctx: &RequestContext, image: &MetadataImage, req: FetchRequest) -> Settled {
        let fetched = super::answer(ctx, image, req).await;
        let (response, records) = settle(ctx, fetched, false);
        Settled { response, records }
    }

    fn request(image: &MetadataImage, version: i16, current_leader_epoch: i32) -> FetchRequest {
        let topic = &image.topics["t"];
        let t = FetchTopic::default().with_partitions(vec![
            FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current_leader_epoch)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20),
        ]);
        let t = if version >= 13 {
            t.with_topic_id(topic.topic_id)
        } else {
            t.with_topic(strata_protocol::messages::TopicName(StrBytes::from_string(
                topic.name.clone(),
            )))
        };
        FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![t])
    }

    /// `image` with this node's log left over from a replica the image no longer lists (a
    /// follower serves consumers, KIP-392; such a node does not).
    fn not_a_replica(mut image: MetadataImage) -> MetadataImage {
        let p = &mut image.topics.get_mut("t").unwrap().partitions[0];
        p.replicas = vec![OTHER];
        p.isr = vec![OTHER];
        image
    }

    /// The one partition's answer, and the bytes of records in it.
    async fn fetch_partition(
        ctx: &RequestContext,
        image: &MetadataImage,
        req: FetchRequest,
    ) -> (PartitionData, u64) {
        let f = answer(ctx, image, req).await;
        let bytes = f.records[0].iter().map(|r| u64::from(r.len)).sum();
        (f.response.responses[0].partitions[0].clone(), bytes)
    }

    /// Appends batches of 3 and 2 records to `t`-0 (offsets 0-2 and 3-4).
    fn five_records(broker: &crate::broker::Broker) -> Arc<Partition> {
        let p = broker.partition("t", 0).unwrap();
        for n in [3, 2] {
            p.append(&mut fixture::records(n).to_vec(), 0, crate::now_ms())
                .unwrap();
        }
        p
    }

    /// Read committed stops at the last stable offset, which an open transaction holds at
    /// its first offset, and lists the aborted transactions; read uncommitted reads to the
    /// high watermark and answers the last stable offset too.
    #[tokio::test]
    async fn read_committed_stops_at_the_last_stable_offset_and_lists_aborts() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let image = fixture::lead_at(&broker, "t", 5);
        let p = broker.partition("t", 0).unwrap();
        p.append_as_leader(&mut fixture::records(2).to_vec(), 5, 0)
            .unwrap(); // 0..=1
        let mut txn = fixture::records(3).to_vec();
        strata_protocol::record_batch::set_producer(&mut txn, 11, 0, 0);
        strata_protocol::record_batch::set_transactional(&mut txn);
        let first_batch = u64::try_from(fixture::records(2).len()).unwrap();
        p.append_as_leader(&mut txn, 5, 0).unwrap(); // 2..=4
        p.append_as_leader(&mut fixture::records(1).to_vec(), 5, 0)
            .unwrap(); // 5
        let v12 = fixture::ctx(&broker, ApiKey::Fetch, 12);
        let committed = || {
            let mut rc = request(&image, 12, 5);
            rc.isolation_level = READ_COMMITTED;
            rc
        };
        let (pd, bytes) = fetch_partition(&v12, &image, committed()).await;
        assert_eq!((pd.high_watermark, pd.last_stable_offset), (6, 2));
        assert_eq!(
            bytes, first_batch,
            "only the batch below the open transaction"
        );
        assert_eq!(pd.aborted_transactions, Some(vec![]));
        let (pd, bytes) = fetch_partition(&v12, &image, request(&image, 12, 5)).await;
        assert_eq!((pd.last_stable_offset, pd.aborted_transactions), (2, None));
        let everything = bytes;
        assert!(everything > first_batch);
        let abort = strata_storage::TxnMarker {
            producer_id: 11,
            producer_epoch: 0,
            coordinator_epoch: 0,
            commit: false,
        };
        p.append_marker_as_leader(&abort, 5, 0).unwrap(); // 6
        let (pd, bytes) = fetch_partition(&v12, &image, committed()).await;
        assert_eq!((pd.high_watermark, pd.last_stable_offset), (7, 7));
        assert_eq!(bytes, everything + 78, "the marker batch too");
        let aborted = pd.aborted_transactions.unwrap();
        assert_eq!(aborted.len(), 1);
        assert_eq!(
            (aborted[0].producer_id, aborted[0].first_offset),
            (ProducerId(11), 2)
        );
    }

    /// KIP-392: a follower replica serves a consumer's Fetch v11+ up to its own high
    /// watermark, and nothing before the leader has given it one; an older Fetch is
    /// NOT_LEADER_OR_FOLLOWER; epochs are checked as on the leader; an offset past its log
    /// is OFFSET_OUT_OF_RANGE without offsets (librdkafka then goes back to the leader).
    #[tokio::test]
    async fn a_follower_serves_consumers_up_to_its_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let p = five_records(&broker);
        let followed = fixture::led_by(&broker, "t", OTHER, 5);
        let v12 = fixture::ctx(&broker, ApiKey::Fetch, 12);
        let (pd, bytes) = fetch_partition(&v12, &followed, request(&followed, 12, 5)).await;
        assert_eq!((pd.error_code, pd.high_watermark, bytes), (0, 0, 0));
        // The replica fetcher applies the leader's high watermark, 3.
        p.set_high_watermark(3);
        let (pd, bytes) = fetch_partition(&v12, &followed, request(&followed, 12, 5)).await;
        assert_eq!((pd.error_code, pd.high_watermark), (0, 3));
        assert_eq!(pd.last_stable_offset, 3);
        assert_eq!(pd.preferred_read_replica, BrokerId(-1));
        let first_batch = bytes;
        assert!(first_batch > 0, "the batch below the high watermark");
        p.set_high_watermark(5);
        let (_, bytes) = fetch_partition(&v12, &followed, request(&followed, 12, -1)).await;
        assert!(
            bytes > first_batch,
            "both batches once the high watermark passes them"
        );
        // Read committed: never past the last stable offset, the high watermark here.
        p.set_high_watermark(3);
        let mut rc = request(&followed, 12, 5);
        rc.isolation_level = READ_COMMITTED;
        let (pd, bytes) = fetch_partition(&v12, &followed, rc).await;
        assert_eq!((pd.last_stable_offset, bytes), (3, first_batch));
        // Epochs.
        let (pd, _) = fetch_partition(&v12, &followed, request(&followed, 12, 4)).await;
        assert_eq!(pd.error_code, ResponseError::FencedLeaderEpoch.code());
        let (pd, _) = fetch_partition(&v12, &followed, request(&followed, 12, 6)).await;
        assert_eq!(pd.error_code, ResponseError::UnknownLeaderEpoch.code());
        // Past the follower's log.
        let mut beyond = request(&followed, 12, 5);
        beyond.topics[0].partitions[0].fetch_offset = 6;
        let (pd, _) = fetch_partition(&v12, &followed, beyond).await;
        assert_eq!(
            (pd.error_code, pd.high_watermark, pd.log_start_offset),
            (ResponseError::OffsetOutOfRange.code(), -1, -1)
        );
        // No client metadata before v11: the leader only.
        let v10 = fixture::ctx(&broker, ApiKey::Fetch, 10);
        let (pd, bytes) = fetch_partition(&v10, &followed, request(&followed, 10, 5)).await;
        assert_eq!(
            (pd.error_code, bytes),
            (ResponseError::NotLeaderOrFollower.code(), 0)
        );
    }

    /// KIP-392 on the leader: with the rack-aware selector, a consumer of another rack is
    /// sent to the in-sync, live follower of its rack that holds its offset, with no
    /// records; the leader's rack, no rack, no selector, a fenced follower or an older
    /// Fetch are served by the leader.
    #[tokio::test]
    async fn the_leader_names_a_follower_of_the_clients_rack() {
        use strata_replication::leader::{PartitionRegistration, ReplicationConfig};

        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic_and(
            dir.path(),
            "t",
            &[
                ("broker.rack", "r1"),
                ("replica.selector.class", "RackAwareReplicaSelector"),
            ],
        )
        .await;
        let node = broker.config.node_id;
        let p = five_records(&broker);
        let mut here = fixture::led_by(&broker, "t", node, 5);
        p.become_leader(5).unwrap();
        let registration = PartitionRegistration {
            replicas: vec![node, OTHER],
            isr: vec![node, OTHER],
            leader_epoch: 5,
            partition_epoch: 5,
        };
        p.make_leader(node, &registration, ReplicationConfig::default());
        // Follower OTHER (rack r2) has fetched everything.
        let follower_fetch = strata_replication::FetchPartition {
            replica_id: OTHER,
            fetch_offset: 5,
            current_leader_epoch: 5,
            last_fetched_epoch: -1,
            replica_epoch: -1,
            log_start_offset: 0,
        };
        p.follower_fetch(&follower_fetch, node).unwrap();
        assert_eq!(p.high_watermark(), 5);
        let requested = here.clone();
        let with_rack = |version: i16, rack: &str| {
            let mut r = request(&requested, version, 5);
            r.rack_id = StrBytes::from_string(rack.to_owned());
            r
        };
        let v12 = fixture::ctx(&broker, ApiKey::Fetch, 12);
        let (pd, bytes) = fetch_partition(&v12, &here, with_rack(12, "r2")).await;
        assert_eq!(
            (pd.error_code, pd.preferred_read_replica, bytes),
            (0, BrokerId(OTHER), 0)
        );
        assert_eq!((pd.high_watermark, pd.log_start_offset), (5, 0));
        for rack in ["r1", "", "r3"] {
            let (pd, bytes) = fetch_partition(&v12, &here, with_rack(12, rack)).await;
            assert_eq!(pd.preferred_read_replica, BrokerId(-1), "{rack:?}");
            assert!(bytes > 0, "{rack:?}: served by the leader");
        }
        let v10 = fixture::ctx(&broker, ApiKey::Fetch, 10);
        let (pd, bytes) = fetch_partition(&v10, &here, with_rack(10, "r2")).await;
        assert_eq!(pd.preferred_read_replica, BrokerId(-1));
        assert!(bytes > 0);
        // A fenced follower is offered to no one.
        here.brokers.get_mut(&OTHER).unwrap().fenced = true;
        let (pd, _) = fetch_partition(&v12, &here, with_rack(12, "r2")).await;
        assert_eq!(pd.preferred_read_replica, BrokerId(-1));

        // Without `replica.selector.class`, the leader serves every consumer.
        let dir = tempfile::tempdir().unwrap();
        let broker =
            fixture::broker_with_topic_and(dir.path(), "t", &[("broker.rack", "r1")]).await;
        let p = five_records(&broker);
        let here = fixture::led_by(&broker, "t", node, 5);
        p.become_leader(5).unwrap();
        p.make_leader(node, &registration, ReplicationConfig::default());
        p.follower_fetch(&follower_fetch, node).unwrap();
        let v12 = fixture::ctx(&broker, ApiKey::Fetch, 12);
        let mut r = request(&here, 12, 5);
        r.rack_id = StrBytes::from_string("r2".to_owned());
        let (pd, bytes) = fetch_partition(&v12, &here, r).await;
        assert_eq!(pd.preferred_read_replica, BrokerId(-1));
        assert!(bytes > 0);
    }

    /// (error code, current leader id and epoch, endpoints named) of the one partition.
    async fn fetch(
        ctx: &RequestContext,
        image: &MetadataImage,
        current_leader_epoch: i32,
    ) -> (i16, (i32, i32), Vec<i32>) {
        let f = answer(
            ctx,
            image,
            request(image, ctx.api_version, current_leader_epoch),
        )
        .await;
        let p = &f.response.responses[0].partitions[0];
        (
            p.error_code,
            (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
            f.response
                .node_endpoints
                .iter()
                .map(|e| e.node_id.0)
                .collect(),
        )
    }

    /// KIP-320's epoch check comes before the leadership check (Kafka's
    /// `Partition.getLocalLog`); a v16 answer to NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    /// names the current leader and its endpoint (KIP-951), older versions do not.
    #[tokio::test]
    async fn the_epoch_is_checked_before_leadership_and_v16_names_the_leader() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let node = broker.config.node_id;
        let elsewhere = not_a_replica(fixture::led_by(&broker, "t", OTHER, 5));
        let here = fixture::led_by(&broker, "t", node, 5);
        let none = (-1, -1);
        let v16 = fixture::ctx(&broker, ApiKey::Fetch, 16);
        let v12 = fixture::ctx(&broker, ApiKey::Fetch, 12);
        assert_eq!(
            fetch(&v16, &elsewhere, -1).await,
            (6, (OTHER, 5), vec![OTHER])
        );
        assert_eq!(
            fetch(&v16, &elsewhere, 5).await,
            (6, (OTHER, 5), vec![OTHER])
        );
        assert_eq!(
            fetch(&v16, &elsewhere, 4).await,
            (74, (OTHER, 5), vec![OTHER])
        );
        assert_eq!(fetch(&v16, &elsewhere, 6).await, (75, none, vec![]));
        assert_eq!(fetch(&v12, &elsewhere, 5).await, (6, none, vec![]));
        assert_eq!(fetch(&v12, &elsewhere, 4).await, (74, none, vec![]));
        // The leader: its own epoch, or none, is served; an older one is fenced.
        assert_eq!(fetch(&v16, &here, 5).await, (0, none, vec![]));
        assert_eq!(fetch(&v16, &here, -1).await, (0, none, vec![]));
        assert_eq!(fetch(&v16, &here, 4).await, (74, (node, 5), vec![node]));
        assert_eq!(fetch(&v16, &here, 6).await, (75, none, vec![]));
        let v9 = fixture::ctx(&broker, ApiKey::Fetch, 9);
        assert_eq!(fetch(&v9, &here, 4).await, (74, none, vec![]));
    }

    /// The redirect survives the zero-copy encoder: what goes on the wire decodes to the
    /// current leader and its endpoint.
    #[tokio::test]
    async fn the_v16_redirect_is_on_the_wire() {
        use bytes::Buf;
        use strata_protocol::fetch_plan::Piece;
        use strata_protocol::messages::ResponseKind;

        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let elsewhere = not_a_replica(fixture::led_by(&broker, "t", OTHER, 5));
        let ctx = fixture::ctx(&broker, ApiKey::Fetch, 16);
        let fetched = answer(&ctx, &elsewhere, request(&elsewhere, 16, 5)).await;
        let plan = encode(&ctx, fetched.response, fetched.records).expect("encodes");
        let mut wire = Vec::new();
        for piece in plan.pieces {
            match piece {
                Piece::Bytes(b) => wire.extend_from_slice(&b),
                Piece::Region(_) => panic!("an error answer has no records"),
            }
        }
        // Size, correlation id, the response header's empty tagged fields, then the body.
        let mut body = bytes::Bytes::from(wire);
        assert_eq!(usize::try_from(body.get_i32()).unwrap(), body.len());
        assert_eq!(body.get_i32(), ctx.correlation_id);
        assert_eq!(body.get_u8(), 0);
        let ResponseKind::Fetch(r) = ResponseKind::decode(ApiKey::Fetch, &mut body, 16).unwrap()
        else {
            panic!("not a fetch response");
        };
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, ResponseError::NotLeaderOrFollower.code());
        assert_eq!(
            (p.current_leader.leader_id, p.current_leader.leader_epoch),
            (BrokerId(OTHER), 5)
        );
        let e = &r.node_endpoints[0];
        assert_eq!(
            (e.node_id, e.host.as_str(), e.port, e.rack.as_deref()),
            (BrokerId(OTHER), "127.0.0.1", 9093, Some("r2"))
        );
    }
}
