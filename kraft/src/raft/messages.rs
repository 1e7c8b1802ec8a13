//! The KRaft RPCs the core sends and answers, as typed values. Their wire form (Kafka's
//! Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch APIs) belongs to the driver.
//!
//! Messages may be lost, duplicated, delayed and reordered. Every response carries the
//! epoch of its sender, and a Fetch response echoes the position it answers, so a stale or
//! repeated response is recognised and dropped.

use super::{Entry, NodeId, ReplicaKey, Snapshot, SnapshotId};

/// One RPC.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Vote (KIP-595), or a pre-vote (KIP-996) that asks without binding anyone.
    VoteRequest {
        /// For a vote: the epoch the candidate stands in. For a pre-vote: the sender's
        /// current epoch (it would stand in the next one).
        epoch: i32,
        /// Who asks.
        candidate: ReplicaKey,
        /// Which voter it asks (KIP-853 `VoterDirectoryId`): a node whose disk was replaced
        /// is not that voter and must not answer for it.
        voter: ReplicaKey,
        /// The epoch of the candidate's last entry.
        last_epoch: i32,
        /// The candidate's log end offset.
        end_offset: i64,
        /// KIP-996: a pre-vote changes no state on either side.
        pre_vote: bool,
    },
    /// The answer to a [`Message::VoteRequest`].
    VoteResponse {
        /// The responder's epoch.
        epoch: i32,
        /// Whether the vote (or pre-vote) was granted.
        granted: bool,
        /// The leader the responder knows in `epoch`, if any.
        leader: Option<NodeId>,
        /// Echoes the request's flag.
        pre_vote: bool,
    },
    /// A new leader announces itself (KIP-595); sent until the voter fetches or answers.
    BeginQuorumEpochRequest {
        /// The leader's epoch.
        epoch: i32,
        /// The leader.
        leader: ReplicaKey,
        /// Which voter is addressed (KIP-853).
        voter: ReplicaKey,
    },
    /// The answer to a [`Message::BeginQuorumEpochRequest`].
    BeginQuorumEpochResponse {
        /// The responder's epoch.
        epoch: i32,
    },
    /// A leader resigns gracefully and names its preferred successors, most caught-up
    /// first (KIP-595).
    EndQuorumEpochRequest {
        /// The epoch that ends.
        epoch: i32,
        /// The resigning leader.
        leader: NodeId,
        /// Voters ordered by how far they had fetched.
        preferred_successors: Vec<ReplicaKey>,
    },
    /// The answer to a [`Message::EndQuorumEpochRequest`].
    EndQuorumEpochResponse {
        /// The responder's epoch.
        epoch: i32,
    },
    /// A follower or observer pulls from the leader (KIP-595).
    FetchRequest {
        /// The epoch the fetcher believes current.
        epoch: i32,
        /// Who fetches (KIP-853 `ReplicaDirectoryId` included).
        replica: ReplicaKey,
        /// The fetcher's log end offset: it holds everything below, durably.
        fetch_offset: i64,
        /// The epoch of the fetcher's last entry.
        last_fetched_epoch: i32,
    },
    /// The answer to a [`Message::FetchRequest`].
    FetchResponse {
        /// The responder's epoch.
        epoch: i32,
        /// The leader the responder knows, if any.
        leader: Option<NodeId>,
        /// Set when the request was not served.
        error: Option<FetchError>,
        /// Echo of the request's `fetch_offset`.
        fetch_offset: i64,
        /// Echo of the request's `last_fetched_epoch`.
        last_fetched_epoch: i32,
        /// KIP-595 `DivergingEpoch`: the leader's log ends epoch `.0` at offset `.1`, and
        /// the fetcher's does not agree; it truncates and fetches again.
        diverging: Option<(i32, i64)>,
        /// KIP-630 `SnapshotId`: the fetch offset is below the leader's log start (or the
        /// logs diverge below it); fetch this snapshot instead.
        snapshot_id: Option<SnapshotId>,
        /// Entries from `fetch_offset` on.
        entries: Vec<Entry>,
        /// The leader's high watermark.
        high_watermark: i64,
    },
    /// KIP-630: a follower or observer asks for the leader's snapshot. (Kafka sends it in
    /// chunks by position; the core sends it whole.)
    FetchSnapshotRequest {
        /// The epoch the fetcher believes current.
        epoch: i32,
        /// Who fetches.
        replica: ReplicaKey,
        /// The snapshot named in a Fetch response.
        snapshot_id: SnapshotId,
    },
    /// The answer to a [`Message::FetchSnapshotRequest`].
    FetchSnapshotResponse {
        /// The responder's epoch.
        epoch: i32,
        /// The leader the responder knows, if any.
        leader: Option<NodeId>,
        /// Set when the request was not served.
        error: Option<FetchError>,
        /// The snapshot, or `None` if the leader no longer has that one
        /// (`SNAPSHOT_NOT_FOUND`): the fetcher fetches again to learn the new one.
        snapshot: Option<Snapshot>,
    },
}

/// Why a Fetch was not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError {
    /// The responder is not the leader (`NOT_LEADER_OR_FOLLOWER`).
    NotLeader,
    /// The request's epoch is older than the responder's (`FENCED_LEADER_EPOCH`).
    FencedLeaderEpoch,
    /// The request's epoch is newer than the responder's (`UNKNOWN_LEADER_EPOCH`).
    UnknownLeaderEpoch,
}
