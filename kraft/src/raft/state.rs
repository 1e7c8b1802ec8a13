//! The persisted quorum state and the state each role keeps in memory.
//!
//! Only [`QuorumState`] survives a restart (Kafka's `quorum-state` file). Everything in the
//! role types is rebuilt: timers restart, vote tallies and follower progress start empty.

use std::collections::{BTreeMap, BTreeSet};

use super::{NodeId, ReplicaKey};

/// What a node must remember across restarts (Raft §5: current term and voted-for; KIP-595
/// adds the leader).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QuorumState {
    /// The latest epoch this node has seen. Never decreases.
    pub epoch: i32,
    /// The candidate this node voted for in `epoch` (itself, as a candidate).
    pub voted_for: Option<ReplicaKey>,
    /// The leader of `epoch`, once known.
    pub leader: Option<NodeId>,
}

/// The roles of KafkaRaftClient (plus KIP-996's prospective), for notifications and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleKind {
    /// Knows the epoch but no leader; waits for one (or, as a voter, for its election
    /// timer).
    Unattached,
    /// Asking for pre-votes (KIP-996) without changing the epoch.
    Prospective,
    /// Standing for election in its own epoch.
    Candidate,
    /// Leading its epoch.
    Leader,
    /// Fetching from the leader of its epoch (voters and observers alike).
    Follower,
    /// A former leader of its epoch that gave up leadership (graceful resignation, a
    /// failed quorum check, or a restart after leading).
    Resigned,
}

/// In-memory state of the current role.
#[derive(Debug, Clone)]
pub(super) enum Role {
    Unattached(Unattached),
    Prospective(Election),
    Candidate(Election),
    Leader(Box<LeaderState>),
    Follower(Follower),
    Resigned(Resigned),
}

impl Role {
    pub(super) fn kind(&self) -> RoleKind {
        match self {
            Role::Unattached(_) => RoleKind::Unattached,
            Role::Prospective(_) => RoleKind::Prospective,
            Role::Candidate(_) => RoleKind::Candidate,
            Role::Leader(_) => RoleKind::Leader,
            Role::Follower(_) => RoleKind::Follower,
            Role::Resigned(_) => RoleKind::Resigned,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Unattached {
    /// A voter starts an election (pre-vote first) at this time; an observer instead asks
    /// the voters in turn who leads.
    pub(super) election_deadline: u64,
    /// Observers: when to send the next discovery Fetch, and to which voter.
    pub(super) next_discovery_at: u64,
    pub(super) next_discovery_voter: usize,
}

/// A pre-vote round (prospective) or a vote round (candidate).
#[derive(Debug, Clone)]
pub(super) struct Election {
    /// Voters that granted, this node included.
    pub(super) granted: BTreeSet<NodeId>,
    /// Voters that refused.
    pub(super) rejected: BTreeSet<NodeId>,
    /// The round fails at this time.
    pub(super) deadline: u64,
    /// Requests go again to voters that have not answered at this time.
    pub(super) next_retry_at: u64,
    /// A candidate that lost waits until this time before the next pre-vote round.
    pub(super) backoff_until: Option<u64>,
    /// Prospective only: the leader followed before, to go back to if the round fails.
    pub(super) previous_leader: Option<NodeId>,
}

#[derive(Debug, Clone)]
pub(super) struct Follower {
    /// The leader of the epoch.
    pub(super) leader: NodeId,
    /// The fetch timeout: with no valid response from the leader by then, a voter turns
    /// prospective and an observer looks for the leader again.
    pub(super) fetch_deadline: u64,
    /// When the outstanding Fetch was sent, if one is.
    pub(super) in_flight_since: Option<u64>,
    /// When to send the next Fetch if none is outstanding.
    pub(super) next_fetch_at: u64,
    /// When the leader last answered a Fetch or announced itself; a pre-vote is refused
    /// only within a fetch timeout of it (KIP-996), not merely because a leader is named.
    pub(super) last_heard_ms: Option<u64>,
    /// The leader sent EndQuorumEpoch: it is gone, pre-votes may be granted.
    pub(super) leader_resigned: bool,
    /// The snapshot asked for with FetchSnapshot; a snapshot is installed only while it
    /// is awaited, so a late or repeated answer cannot roll the log back.
    pub(super) awaiting_snapshot: Option<super::SnapshotId>,
}

#[derive(Debug, Clone)]
pub(super) struct Resigned {
    /// When to stand for the next epoch.
    pub(super) election_deadline: u64,
}

/// What the leader knows of one replica.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ReplicaProgress {
    /// The largest validated fetch offset: the replica holds the leader's log below it.
    pub(super) end_offset: Option<i64>,
    /// When it last fetched.
    pub(super) last_fetch_ms: Option<u64>,
    /// When it last fetched up to the log end (DescribeQuorum's `LastCaughtUpTimestamp`).
    pub(super) last_caught_up_ms: Option<u64>,
}

#[derive(Debug, Clone)]
pub(super) struct LeaderState {
    /// The offset of this epoch's LeaderChange entry: the high watermark moves only past
    /// it (Raft §5.4.2).
    pub(super) epoch_start_offset: i64,
    /// Voters by node id, with the directory id they must fetch with.
    pub(super) voters: BTreeMap<NodeId, (ReplicaKey, ReplicaProgress)>,
    /// Replicas that fetch without being voters (including old voters with a new disk).
    pub(super) observers: BTreeMap<ReplicaKey, ReplicaProgress>,
    /// Voters that have acknowledged this epoch (by fetching or answering
    /// BeginQuorumEpoch); the rest are sent BeginQuorumEpoch again.
    pub(super) acknowledged: BTreeSet<NodeId>,
    /// When BeginQuorumEpoch next goes to the voters that have not acknowledged.
    pub(super) next_begin_epoch_at: u64,
    /// Voters heard from since the quorum check last passed.
    pub(super) fetched_since_check: BTreeSet<NodeId>,
    /// Kafka's check-quorum: a leader not fetched from by a majority within 1.5 fetch
    /// timeouts resigns, so a leader cut off from the quorum does not hold on to clients.
    pub(super) check_quorum_deadline: u64,
}
