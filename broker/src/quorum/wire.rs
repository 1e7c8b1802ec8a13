//! The core's messages to and from Kafka's wire messages, with KafkaRaftClient's field
//! mapping: one topic `__cluster_metadata` (by name, and by Kafka's fixed topic id in
//! Fetch), partition 0, the cluster id on every request, epochs in `leader_epoch` /
//! `replica_epoch`, the fetcher in Fetch's `replica_state` (v15+), the diverging epoch,
//! current leader and snapshot id as Fetch's tagged fields, and records as record batches.
//!
//! Static voters (`controller.quorum.voters`) have no directory ids (Kafka's
//! `ReplicaKey.NO_DIRECTORY_ID`, the nil UUID), which is what every key here carries.
//!
//! What the wire does not carry the driver takes from the request it sent: a Fetch response
//! does not echo the fetch offset and last fetched epoch, nor a Vote response the pre-vote
//! flag.
//!
//! FetchSnapshot (KIP-630) pages a snapshot by byte position. The core answers with the
//! whole snapshot (its bytes are shared, not copied); [`page_snapshot_response`] cuts the
//! page the request asked for, and the fetching side ([`super::peer`]) asks page after page
//! and hands the core one response with the whole snapshot.

use bytes::Bytes;
use strata_kraft::Uuid;
use strata_kraft::raft::{
    Endpoint, Entry, FetchError, Message, NodeId, QuorumDescription, ReplicaKey, SnapshotId,
};
use strata_protocol::messages::{
    ApiKey, BeginQuorumEpochRequest, BeginQuorumEpochResponse, BrokerId, DescribeQuorumResponse,
    EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest, FetchResponse,
    FetchSnapshotResponse, RequestKind, ResponseKind, TopicName, VoteRequest, VoteResponse,
    begin_quorum_epoch_request, begin_quorum_epoch_response, describe_quorum_response,
    end_quorum_epoch_request, end_quorum_epoch_response, fetch_request, fetch_response,
    fetch_snapshot_request, fetch_snapshot_response, vote_request, vote_response,
};
use strata_protocol::record_batch::{set_base_offset, set_partition_leader_epoch};
use strata_protocol::{ResponseError, StrBytes};

use super::disk::{decode_entries, encode_entry};
use crate::quorum::wire::refusal::{QuorumRefusal, quorum_refusal_code};

mod fetch_snapshot;
pub mod refusal;
pub use fetch_snapshot::{
    SnapshotPage, fetch_snapshot_request, page_snapshot_response, snapshot_page,
    snapshot_page_from_wire, snapshot_response,
};

/// The metadata topic's name.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Kafka's `Topic.CLUSTER_METADATA_TOPIC_ID` (`new Uuid(0L, 1L)`), used by Fetch v13+.
pub const METADATA_TOPIC_ID: Uuid = Uuid::from_u128(1);

/// The versions this node sends; all within `CONTROLLER_APIS`.
pub const VOTE_VERSION: i16 = 2;
/// See [`VOTE_VERSION`].
pub const BEGIN_QUORUM_EPOCH_VERSION: i16 = 1;
/// See [`VOTE_VERSION`].
pub const END_QUORUM_EPOCH_VERSION: i16 = 1;
/// Fetch v16: `replica_state` and the topic id.
pub const FETCH_VERSION: i16 = 17;
/// FetchSnapshot v1: KIP-853's `replica_directory_id`.
pub const FETCH_SNAPSHOT_VERSION: i16 = 1;
/// The most bytes of a snapshot one FetchSnapshot asks for (Kafka's follower asks for its
/// 8 MiB `MAX_FETCH_SIZE_BYTES`; a smaller page keeps each answer well inside
/// `controller.quorum.request.timeout.ms`).
pub const SNAPSHOT_PAGE_BYTES: i32 = 1024 * 1024;

/// No error. The Raft APIs' error codes (KIP-595, KIP-630) come from [`quorum_refusal_code`].
const NONE: i16 = 0;

pub(in crate::quorum) fn metadata_topic() -> TopicName {
    TopicName(StrBytes::from_static_str(METADATA_TOPIC))
}

fn key(id: i32) -> ReplicaKey {
    ReplicaKey {
        id: NodeId(id),
        directory_id: Uuid::nil(),
    }
}

fn leader_id(leader: Option<NodeId>) -> BrokerId {
    BrokerId(leader.map_or(-1, |l| l.0))
}

fn leader_from(id: BrokerId) -> Option<NodeId> {
    (id.0 >= 0).then_some(NodeId(id.0))
}

/// The API of a request message; `None` for responses.
pub fn request_api(msg: &Message) -> Option<(ApiKey, i16)> {
    match msg {
        Message::VoteRequest { .. } => Some((ApiKey::Vote, VOTE_VERSION)),
        Message::BeginQuorumEpochRequest { .. } => {
            Some((ApiKey::BeginQuorumEpoch, BEGIN_QUORUM_EPOCH_VERSION))
        }
        Message::EndQuorumEpochRequest { .. } => {
            Some((ApiKey::EndQuorumEpoch, END_QUORUM_EPOCH_VERSION))
        }
        Message::FetchRequest { .. } => Some((ApiKey::Fetch, FETCH_VERSION)),
        Message::FetchSnapshotRequest { .. } => {
            Some((ApiKey::FetchSnapshot, FETCH_SNAPSHOT_VERSION))
        }
        _ => None,
    }
}

/// The API a response message answers, in [`request_api`]'s terms; `None` for requests.
pub fn response_api(msg: &Message) -> Option<(ApiKey, i16)> {
    match msg {
        Message::VoteResponse { .. } => Some((ApiKey::Vote, VOTE_VERSION)),
        Message::BeginQuorumEpochResponse { .. } => {
            Some((ApiKey::BeginQuorumEpoch, BEGIN_QUORUM_EPOCH_VERSION))
        }
        Message::EndQuorumEpochResponse { .. } => {
            Some((ApiKey::EndQuorumEpoch, END_QUORUM_EPOCH_VERSION))
        }
        Message::FetchResponse { .. } => Some((ApiKey::Fetch, FETCH_VERSION)),
        Message::FetchSnapshotResponse { .. } => {
            Some((ApiKey::FetchSnapshot, FETCH_SNAPSHOT_VERSION))
        }
        _ => None,
    }
}

/// A request of the core as a wire body addressed to `to`.
pub fn request_to_wire(msg: &Message, to: NodeId, cluster_id: &str) -> Option<RequestKind> {
    let cluster = Some(StrBytes::from_string(cluster_id.to_owned()));
    match msg {
        Message::VoteRequest {
            epoch,
            candidate,
            voter,
            last_epoch,
            end_offset,
            pre_vote,
        } => {
            let mut p = vote_request::PartitionData::default();
            p.partition_index = 0;
            p.replica_epoch = *epoch;
            p.replica_id = BrokerId(candidate.id.0);
            p.replica_directory_id = candidate.directory_id;
            p.voter_directory_id = voter.directory_id;
            p.last_offset_epoch = *last_epoch;
            p.last_offset = *end_offset;
            p.pre_vote = *pre_vote;
            let mut t = vote_request::TopicData::default();
            t.topic_name = metadata_topic();
            t.partitions = vec![p];
            let mut r = VoteRequest::default();
            r.cluster_id = cluster;
            r.voter_id = BrokerId(to.0);
            r.topics = vec![t];
            Some(RequestKind::Vote(r))
        }
        Message::BeginQuorumEpochRequest {
            epoch,
            leader,
            voter,
        } => {
            let mut p = begin_quorum_epoch_request::PartitionData::default();
            p.partition_index = 0;
            p.voter_directory_id = voter.directory_id;
            p.leader_id = BrokerId(leader.id.0);
            p.leader_epoch = *epoch;
            let mut t = begin_quorum_epoch_request::TopicData::default();
            t.topic_name = metadata_topic();
            t.partitions = vec![p];
            let mut r = BeginQuorumEpochRequest::default();
            r.cluster_id = cluster;
            r.voter_id = BrokerId(to.0);
            r.topics = vec![t];
            Some(RequestKind::BeginQuorumEpoch(r))
        }
        Message::EndQuorumEpochRequest {
            epoch,
            leader,
            preferred_successors,
        } => {
            let mut p = end_quorum_epoch_request::PartitionData::default();
            p.partition_index = 0;
            p.leader_id = BrokerId(leader.0);
            p.leader_epoch = *epoch;
            // v1 (KIP-853) names candidates with their directory ids.
            p.preferred_candidates = preferred_successors
                .iter()
                .map(|k| {
                    let mut c = end_quorum_epoch_request::ReplicaInfo::default();
                    c.candidate_id = BrokerId(k.id.0);
                    c.candidate_directory_id = k.directory_id;
                    c
                })
                .collect();
            let mut t = end_quorum_epoch_request::TopicData::default();
            t.topic_name = metadata_topic();
            t.partitions = vec![p];
            let mut r = EndQuorumEpochRequest::default();
            r.cluster_id = cluster;
            r.topics = vec![t];
            Some(RequestKind::EndQuorumEpoch(r))
        }
        Message::FetchRequest {
            epoch,
            replica,
            fetch_offset,
            last_fetched_epoch,
        } => {
            let mut p = fetch_request::FetchPartition::default();
            p.partition = 0;
            p.current_leader_epoch = *epoch;
            p.fetch_offset = *fetch_offset;
            p.last_fetched_epoch = *last_fetched_epoch;
            p.log_start_offset = 0;
            p.partition_max_bytes = 8 * 1024 * 1024;
            // v17 (KIP-853): the leader counts a voter's fetch only from its own directory.
            p.replica_directory_id = replica.directory_id;
            let mut t = fetch_request::FetchTopic::default();
            t.topic = metadata_topic();
            t.topic_id = METADATA_TOPIC_ID;
            t.partitions = vec![p];
            let mut state = fetch_request::ReplicaState::default();
            state.replica_id = BrokerId(replica.id.0);
            state.replica_epoch = -1;
            let mut r = FetchRequest::default();
            r.cluster_id = cluster;
            r.replica_id = BrokerId(-1);
            r.replica_state = state;
            r.max_wait_ms = 0;
            r.min_bytes = 0;
            r.max_bytes = 8 * 1024 * 1024;
            r.topics = vec![t];
            Some(RequestKind::Fetch(r))
        }
        Message::FetchSnapshotRequest {
            epoch,
            replica,
            snapshot_id,
        } => Some(fetch_snapshot_request(
            *epoch,
            *replica,
            *snapshot_id,
            0,
            cluster_id,
        )),
        _ => None,
    }
}

/// Why an inbound request was not handed to the core.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// It names another cluster (Kafka answers INCONSISTENT_CLUSTER_ID).
    OtherCluster,
    /// It is not about `__cluster_metadata-0`, or not a quorum RPC.
    NotQuorum,
}

fn check_cluster(got: Option<&StrBytes>, ours: &str) -> Result<(), Refused> {
    match got {
        Some(c) if c.as_str() != ours => Err(Refused::OtherCluster),
        _ => Ok(()),
    }
}

/// An inbound request as the core's message, with the sender's node id.
///
/// # Errors
///
/// [`Refused`] for another cluster's request or one about another partition.
pub fn request_from_wire(
    body: &RequestKind,
    cluster_id: &str,
) -> Result<(NodeId, Message), Refused> {
    match body {
        RequestKind::Vote(r) => {
            check_cluster(r.cluster_id.as_ref(), cluster_id)?;
            let p = single(&r.topics, |t| &t.topic_name, |t| &t.partitions)?;
            Ok((
                NodeId(p.replica_id.0),
                Message::VoteRequest {
                    epoch: p.replica_epoch,
                    candidate: ReplicaKey {
                        id: NodeId(p.replica_id.0),
                        directory_id: p.replica_directory_id,
                    },
                    voter: ReplicaKey {
                        id: NodeId(r.voter_id.0),
                        directory_id: p.voter_directory_id,
                    },
                    last_epoch: p.last_offset_epoch,
                    end_offset: p.last_offset,
                    pre_vote: p.pre_vote,
                },
            ))
        }
        RequestKind::BeginQuorumEpoch(r) => {
            check_cluster(r.cluster_id.as_ref(), cluster_id)?;
            let p = single(&r.topics, |t| &t.topic_name, |t| &t.partitions)?;
            Ok((
                NodeId(p.leader_id.0),
                Message::BeginQuorumEpochRequest {
                    epoch: p.leader_epoch,
                    leader: key(p.leader_id.0),
                    voter: ReplicaKey {
                        id: NodeId(r.voter_id.0),
                        directory_id: p.voter_directory_id,
                    },
                },
            ))
        }
        RequestKind::EndQuorumEpoch(r) => {
            check_cluster(r.cluster_id.as_ref(), cluster_id)?;
            let p = single(&r.topics, |t| &t.topic_name, |t| &t.partitions)?;
            let successors = if p.preferred_candidates.is_empty() {
                p.preferred_successors.iter().map(|&id| key(id)).collect()
            } else {
                p.preferred_candidates
                    .iter()
                    .map(|c| ReplicaKey {
                        id: NodeId(c.candidate_id.0),
                        directory_id: c.candidate_directory_id,
                    })
                    .collect()
            };
            Ok((
                NodeId(p.leader_id.0),
                Message::EndQuorumEpochRequest {
                    epoch: p.leader_epoch,
                    leader: NodeId(p.leader_id.0),
                    preferred_successors: successors,
                },
            ))
        }
        RequestKind::Fetch(r) => {
            check_cluster(r.cluster_id.as_ref(), cluster_id)?;
            let [t] = r.topics.as_slice() else {
                return Err(Refused::NotQuorum);
            };
            if t.topic.0.as_str() != METADATA_TOPIC && t.topic_id != METADATA_TOPIC_ID {
                return Err(Refused::NotQuorum);
            }
            let [p] = t.partitions.as_slice() else {
                return Err(Refused::NotQuorum);
            };
            if p.partition != 0 {
                return Err(Refused::NotQuorum);
            }
            // v15+ names the fetcher in ReplicaState, earlier versions in ReplicaId.
            let id = if r.replica_state.replica_id.0 >= 0 {
                r.replica_state.replica_id.0
            } else {
                r.replica_id.0
            };
            Ok((
                NodeId(id),
                Message::FetchRequest {
                    epoch: p.current_leader_epoch,
                    replica: ReplicaKey {
                        id: NodeId(id),
                        directory_id: p.replica_directory_id,
                    },
                    fetch_offset: p.fetch_offset,
                    last_fetched_epoch: p.last_fetched_epoch,
                },
            ))
        }
        RequestKind::FetchSnapshot(r) => {
            check_cluster(r.cluster_id.as_ref(), cluster_id)?;
            let p = single(&r.topics, |t| &t.name, |t| &t.partitions)?;
            Ok((
                NodeId(r.replica_id.0),
                Message::FetchSnapshotRequest {
                    epoch: p.current_leader_epoch,
                    replica: ReplicaKey {
                        id: NodeId(r.replica_id.0),
                        directory_id: p.replica_directory_id,
                    },
                    snapshot_id: SnapshotId {
                        end_offset: p.snapshot_id.end_offset,
                        epoch: p.snapshot_id.epoch,
                    },
                },
            ))
        }
        _ => Err(Refused::NotQuorum),
    }
}

/// The only partition of a request, which must be `__cluster_metadata-0`.
fn single<T, P: PartitionIndex>(
    topics: &[T],
    name: impl Fn(&T) -> &TopicName,
    partitions: impl Fn(&T) -> &Vec<P>,
) -> Result<&P, Refused> {
    let [t] = topics else {
        return Err(Refused::NotQuorum);
    };
    if name(t).0.as_str() != METADATA_TOPIC {
        return Err(Refused::NotQuorum);
    }
    match partitions(t).as_slice() {
        [p] if p.index() == 0 => Ok(p),
        _ => Err(Refused::NotQuorum),
    }
}

trait PartitionIndex {
    fn index(&self) -> i32;
}
impl PartitionIndex for vote_request::PartitionData {
    fn index(&self) -> i32 {
        self.partition_index
    }
}
impl PartitionIndex for begin_quorum_epoch_request::PartitionData {
    fn index(&self) -> i32 {
        self.partition_index
    }
}
impl PartitionIndex for end_quorum_epoch_request::PartitionData {
    fn index(&self) -> i32 {
        self.partition_index
    }
}
impl PartitionIndex for fetch_snapshot_request::PartitionSnapshot {
    fn index(&self) -> i32 {
        self.partition
    }
}

/// A Fetch or FetchSnapshot partition's code: none when the core served it.
fn fetch_error_code(e: Option<FetchError>) -> i16 {
    e.map_or(NONE, |e| quorum_refusal_code(QuorumRefusal::Fetch(e)))
}

fn fetch_error(code: i16) -> Result<Option<FetchError>, ()> {
    match ResponseError::try_from_code(code) {
        None => Ok(None),
        Some(ResponseError::NotLeaderOrFollower) => Ok(Some(FetchError::NotLeader)),
        Some(ResponseError::FencedLeaderEpoch) => Ok(Some(FetchError::FencedLeaderEpoch)),
        Some(ResponseError::UnknownLeaderEpoch) => Ok(Some(FetchError::UnknownLeaderEpoch)),
        Some(_) => Err(()),
    }
}

/// Record batches for `entries` starting at `base_offset`, in Kafka's batch format.
pub fn entries_to_records(base_offset: i64, entries: &[Entry], now_ms: i64) -> Bytes {
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let mut b = encode_entry(e, now_ms);
        set_base_offset(&mut b, base_offset + i as i64);
        set_partition_leader_epoch(&mut b, e.epoch);
        out.extend_from_slice(&b);
    }
    Bytes::from(out)
}

/// The core's answer to an inbound request as a wire body; `None` if `msg` is not a
/// response.
pub fn response_to_wire(msg: &Message, now_ms: i64) -> Option<ResponseKind> {
    match msg {
        Message::VoteResponse {
            epoch,
            granted,
            leader,
            ..
        } => {
            let mut p = vote_response::PartitionData::default();
            p.partition_index = 0;
            p.error_code = NONE;
            p.leader_id = leader_id(*leader);
            p.leader_epoch = *epoch;
            p.vote_granted = *granted;
            let mut t = vote_response::TopicData::default();
            t.topic_name = metadata_topic();
            t.partitions = vec![p];
            let mut r = VoteResponse::default();
            r.topics = vec![t];
            Some(ResponseKind::Vote(r))
        }
        Message::BeginQuorumEpochResponse { epoch } => {
            let mut p = begin_quorum_epoch_response::PartitionData::default();
            p.partition_index = 0;
            p.leader_id = BrokerId(-1);
            p.leader_epoch = *epoch;
            let mut t = begin_quorum_epoch_response::TopicData::default();
            t.topic_name = metadata_topic();
            t.partitions = vec![p];
            let mut r = BeginQuorumEpochResponse::default();
            r.topics = vec![t];
            Some(ResponseKind::BeginQuorumEpoch(r))
        }
        Message::EndQuorumEpochResponse { epoch } => {
            let mut p = end_quorum_epoch_response::PartitionData::default();
            p.partition_index = 0;
            p.leader_id = BrokerId(-1);
            p.leader_epoch = *epoch;
            let mut t = end_quorum_epoch_response::TopicData::default();
            t.topic_name = metadata_topic();
            t.partitions = vec![p];
            let mut r = EndQuorumEpochResponse::default();
            r.topics = vec![t];
            Some(ResponseKind::EndQuorumEpoch(r))
        }
        Message::FetchResponse {
            epoch,
            leader,
            error,
            fetch_offset,
            diverging,
            snapshot_id,
            entries,
            high_watermark,
            ..
        } => {
            let mut p = fetch_response::PartitionData::default();
            p.partition_index = 0;
            p.error_code = fetch_error_code(*error);
            p.high_watermark = *high_watermark;
            p.last_stable_offset = *high_watermark;
            p.log_start_offset = 0;
            if let Some((e, end)) = diverging {
                p.diverging_epoch.epoch = *e;
                p.diverging_epoch.end_offset = *end;
            }
            p.current_leader.leader_id = leader_id(*leader);
            p.current_leader.leader_epoch = *epoch;
            if let Some(s) = snapshot_id {
                p.snapshot_id.end_offset = s.end_offset;
                p.snapshot_id.epoch = s.epoch;
            }
            p.records = Some(entries_to_records(*fetch_offset, entries, now_ms));
            let mut t = fetch_response::FetchableTopicResponse::default();
            t.topic = metadata_topic();
            t.topic_id = METADATA_TOPIC_ID;
            t.partitions = vec![p];
            let mut r = FetchResponse::default();
            r.responses = vec![t];
            Some(ResponseKind::Fetch(r))
        }
        Message::FetchSnapshotResponse {
            epoch,
            leader,
            error,
            snapshot,
        } => {
            let mut p = fetch_snapshot_response::PartitionSnapshot::default();
            p.index = 0;
            p.error_code = match (error, snapshot) {
                (Some(_), _) => fetch_error_code(*error),
                (None, None) => quorum_refusal_code(QuorumRefusal::SnapshotNotFound),
                (None, Some(_)) => NONE,
            };
            p.current_leader.leader_id = leader_id(*leader);
            p.current_leader.leader_epoch = *epoch;
            p.snapshot_id.end_offset = -1;
            p.snapshot_id.epoch = -1;
            p.size = -1;
            p.position = -1;
            if let Some(s) = snapshot {
                p.snapshot_id.end_offset = s.id.end_offset;
                p.snapshot_id.epoch = s.id.epoch;
                p.size = s.data.len() as i64;
                p.position = 0;
                p.unaligned_records = s.data.clone();
            }
            let mut t = fetch_snapshot_response::TopicSnapshot::default();
            t.name = metadata_topic();
            t.partitions = vec![p];
            let mut r = FetchSnapshotResponse::default();
            r.topics = vec![t];
            Some(ResponseKind::FetchSnapshot(r))
        }
        _ => None,
    }
}

/// A peer's answer to `request` as the core's message; `None` when it carries an error
/// the core has no word for (the core retries on its timer).
pub fn response_from_wire(body: ResponseKind, request: &Message) -> Option<Message> {
    match (body, request) {
        (ResponseKind::Vote(r), Message::VoteRequest { pre_vote, .. }) => {
            let p = r.topics.into_iter().next()?.partitions.into_iter().next()?;
            if r.error_code != NONE || p.error_code != NONE {
                return None;
            }
            Some(Message::VoteResponse {
                epoch: p.leader_epoch,
                granted: p.vote_granted,
                leader: leader_from(p.leader_id),
                pre_vote: *pre_vote,
            })
        }
        (ResponseKind::BeginQuorumEpoch(r), Message::BeginQuorumEpochRequest { .. }) => {
            let p = r.topics.into_iter().next()?.partitions.into_iter().next()?;
            (r.error_code == NONE && p.error_code == NONE).then_some(
                Message::BeginQuorumEpochResponse {
                    epoch: p.leader_epoch,
                },
            )
        }
        (ResponseKind::EndQuorumEpoch(r), Message::EndQuorumEpochRequest { .. }) => {
            let p = r.topics.into_iter().next()?.partitions.into_iter().next()?;
            (r.error_code == NONE && p.error_code == NONE).then_some(
                Message::EndQuorumEpochResponse {
                    epoch: p.leader_epoch,
                },
            )
        }
        (
            ResponseKind::Fetch(r),
            Message::FetchRequest {
                fetch_offset,
                last_fetched_epoch,
                ..
            },
        ) => {
            if r.error_code != NONE {
                return None;
            }
            let p = r
                .responses
                .into_iter()
                .next()?
                .partitions
                .into_iter()
                .next()?;
            let error = fetch_error(p.error_code).ok()?;
            let entries = match &p.records {
                Some(records) => decode_entries(records)?,
                None => Vec::new(),
            };
            let diverging = (p.diverging_epoch.epoch >= 0 || p.diverging_epoch.end_offset >= 0)
                .then_some((p.diverging_epoch.epoch, p.diverging_epoch.end_offset));
            let snapshot_id = (p.snapshot_id.end_offset >= 0 || p.snapshot_id.epoch >= 0)
                .then_some(strata_kraft::raft::SnapshotId {
                    end_offset: p.snapshot_id.end_offset,
                    epoch: p.snapshot_id.epoch,
                });
            Some(Message::FetchResponse {
                epoch: p.current_leader.leader_epoch,
                leader: leader_from(p.current_leader.leader_id),
                error,
                fetch_offset: *fetch_offset,
                last_fetched_epoch: *last_fetched_epoch,
                diverging,
                snapshot_id,
                entries,
                high_watermark: p.high_watermark,
            })
        }
        _ => None,
    }
}

/// Adds the leader's endpoint to a Fetch answer (`NodeEndpoints`, KIP-951, as KIP-853
/// uses it): an observer that found the leader through a bootstrap server learns from it
/// where to fetch.
pub fn add_leader_endpoint(
    response: &mut ResponseKind,
    endpoint_of: impl Fn(NodeId) -> Option<(String, u16)>,
) {
    let ResponseKind::Fetch(r) = response else {
        return;
    };
    let leader = r
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.current_leader.leader_id.0)
        .find(|&id| id >= 0);
    if let Some(id) = leader
        && let Some((host, port)) = endpoint_of(NodeId(id))
    {
        let mut e = fetch_response::NodeEndpoint::default();
        e.node_id = BrokerId(id);
        e.host = StrBytes::from_string(host);
        e.port = i32::from(port);
        r.node_endpoints = vec![e];
    }
}

/// The endpoints a Fetch answer names (see [`add_leader_endpoint`]).
pub fn node_endpoints(response: &ResponseKind) -> Vec<(NodeId, String, u16)> {
    let ResponseKind::Fetch(r) = response else {
        return Vec::new();
    };
    r.node_endpoints
        .iter()
        .filter_map(|e| {
            let port = u16::try_from(e.port).ok()?;
            (e.node_id.0 >= 0).then(|| (NodeId(e.node_id.0), e.host.to_string(), port))
        })
        .collect()
}

/// DescribeQuorum's answer: the leader's view, or on any other node
/// NOT_LEADER_OR_FOLLOWER with the leader and epoch it knows.
///
/// `nodes` are the voters' endpoints, listed in v2's `Nodes` (KIP-853), so a client that
/// asked any controller learns where the leader and the other voters are.
pub fn describe_quorum_response(
    description: Option<&QuorumDescription>,
    leader: Option<NodeId>,
    epoch: i32,
    high_watermark: i64,
    nodes: &[(NodeId, Endpoint)],
) -> ResponseKind {
    let mut p = describe_quorum_response::PartitionData::default();
    p.partition_index = 0;
    match description {
        Some(d) => {
            let replica = |r: &strata_kraft::raft::ReplicaDescription| {
                let mut s = describe_quorum_response::ReplicaState::default();
                s.replica_id = BrokerId(r.replica.id.0);
                s.replica_directory_id = r.replica.directory_id;
                s.log_end_offset = r.log_end_offset.unwrap_or(-1);
                s.last_fetch_timestamp = r.last_fetch_ms.map_or(-1, |t| t as i64);
                s.last_caught_up_timestamp = r.last_caught_up_ms.map_or(-1, |t| t as i64);
                s
            };
            p.error_code = NONE;
            p.leader_id = BrokerId(d.leader.0);
            p.leader_epoch = d.epoch;
            p.high_watermark = d.high_watermark;
            p.current_voters = d.voters.iter().map(replica).collect();
            p.observers = d.observers.iter().map(replica).collect();
        }
        None => {
            p.error_code = quorum_refusal_code(QuorumRefusal::NotLeader);
            p.leader_id = leader_id(leader);
            p.leader_epoch = epoch;
            p.high_watermark = high_watermark;
        }
    }
    let mut t = describe_quorum_response::TopicData::default();
    t.topic_name = metadata_topic();
    t.partitions = vec![p];
    let mut r = DescribeQuorumResponse::default();
    r.topics = vec![t];
    r.nodes = nodes
        .iter()
        .map(|(id, e)| {
            let mut l = describe_quorum_response::Listener::default();
            l.name = StrBytes::from_string(e.name.clone());
            l.host = StrBytes::from_string(e.host.clone());
            l.port = e.port;
            let mut n = describe_quorum_response::Node::default();
            n.node_id = BrokerId(id.0);
            n.listeners = vec![l];
            n
        })
        .collect();
    ResponseKind::DescribeQuorum(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_kraft::raft::Payload;
    use strata_protocol::codec;

    pub(super) fn through_the_codec(api: ApiKey, version: i16, body: &RequestKind) -> RequestKind {
        let frame = codec::encode_request(api, version, 7, "strata-raft", body).unwrap();
        let decoded = codec::decode_request_on(
            strata_protocol::versions::ListenerType::Controller,
            frame.slice(4..),
        )
        .unwrap();
        match decoded {
            codec::Decoded::Request(r) => r.body,
            _ => panic!("not a request"),
        }
    }

    #[test]
    fn requests_round_trip_through_the_wire() {
        let cases = vec![
            Message::VoteRequest {
                epoch: 4,
                candidate: key(2),
                voter: key(3),
                last_epoch: 3,
                end_offset: 17,
                pre_vote: true,
            },
            Message::BeginQuorumEpochRequest {
                epoch: 5,
                leader: key(1),
                voter: key(3),
            },
            Message::EndQuorumEpochRequest {
                epoch: 5,
                leader: NodeId(1),
                preferred_successors: vec![key(3), key(2)],
            },
            Message::FetchRequest {
                epoch: 5,
                replica: key(2),
                fetch_offset: 10,
                last_fetched_epoch: 4,
            },
            Message::FetchSnapshotRequest {
                epoch: 5,
                replica: ReplicaKey {
                    id: NodeId(2),
                    directory_id: Uuid::from_u128(8),
                },
                snapshot_id: SnapshotId {
                    end_offset: 40,
                    epoch: 3,
                },
            },
        ];
        for msg in cases {
            let (api, version) = request_api(&msg).unwrap();
            let body = request_to_wire(&msg, NodeId(3), "abc").unwrap();
            let back = through_the_codec(api, version, &body);
            let (from, got) = request_from_wire(&back, "abc").unwrap();
            assert_eq!(got, msg);
            assert_ne!(from.0, -1);
            assert_eq!(
                request_from_wire(&back, "other").unwrap_err(),
                Refused::OtherCluster
            );
        }
    }

    #[test]
    fn a_fetch_response_round_trips_with_entries_and_tags() {
        let request = Message::FetchRequest {
            epoch: 5,
            replica: key(2),
            fetch_offset: 3,
            last_fetched_epoch: 4,
        };
        let msg = Message::FetchResponse {
            epoch: 5,
            leader: Some(NodeId(1)),
            error: None,
            fetch_offset: 3,
            last_fetched_epoch: 4,
            diverging: Some((4, 2)),
            snapshot_id: None,
            entries: vec![
                Entry {
                    epoch: 5,
                    payload: Payload::LeaderChange { leader: NodeId(1) },
                },
                Entry {
                    epoch: 5,
                    payload: Payload::Data(Bytes::from_static(b"r")),
                },
            ],
            high_watermark: 4,
        };
        let body = response_to_wire(&msg, 1).unwrap();
        let frame = codec::encode_response(ApiKey::Fetch, FETCH_VERSION, 9, &body).unwrap();
        let resp = codec::decode_response(ApiKey::Fetch, FETCH_VERSION, frame.slice(4..)).unwrap();
        assert_eq!(resp.correlation_id, 9);
        assert_eq!(response_from_wire(resp.body, &request).unwrap(), msg);
    }

    #[test]
    fn fetch_errors_read_back_as_they_were_written() {
        for e in [
            None,
            Some(FetchError::NotLeader),
            Some(FetchError::FencedLeaderEpoch),
            Some(FetchError::UnknownLeaderEpoch),
        ] {
            assert_eq!(fetch_error(fetch_error_code(e)), Ok(e), "{e:?}");
        }
    }

    #[test]
    fn vote_answers_keep_the_pre_vote_flag_of_the_request() {
        let request = Message::VoteRequest {
            epoch: 4,
            candidate: key(2),
            voter: key(3),
            last_epoch: 3,
            end_offset: 17,
            pre_vote: true,
        };
        let msg = Message::VoteResponse {
            epoch: 4,
            granted: true,
            leader: None,
            pre_vote: true,
        };
        let body = response_to_wire(&msg, 0).unwrap();
        let frame = codec::encode_response(ApiKey::Vote, VOTE_VERSION, 1, &body).unwrap();
        let resp = codec::decode_response(ApiKey::Vote, VOTE_VERSION, frame.slice(4..)).unwrap();
        assert_eq!(response_from_wire(resp.body, &request).unwrap(), msg);
    }
}
