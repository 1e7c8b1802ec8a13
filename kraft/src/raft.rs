//! A sans-IO Raft core in the style of KRaft: KIP-595 elections and pull-based replication,
//! KIP-996 pre-vote, KIP-853 voter identities and voter changes, KIP-630 snapshots.
//!
//! [`RaftNode`] is a pure state machine: the driver feeds it `(now, Input)` and carries out
//! the [`Action`]s it returns. It never reads a clock, a socket or a disk, and its only
//! randomness (election timeouts) comes from a seed the driver passes in.
//!
//! # The driver's contract
//!
//! The actions of one `step` are carried out **in order**, and each storage action
//! ([`Action::PersistQuorumState`], [`Action::AppendToLog`], [`Action::TruncateLog`], and the
//! snapshot actions) must be durable before any later action of the same list is carried out. This is how Raft §5's
//! "respond to RPCs only after updating stable storage" is kept: the core always emits the
//! persist before the messages that depend on it (a vote grant after the persisted vote, a
//! BeginQuorumEpoch after the persisted leadership, a Fetch whose offset counts toward the
//! high watermark after the appended entries). A crash may stop the list at any point; what
//! was carried out is what a restart finds.
//!
//! # Layout
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | identities ([`NodeId`], [`ReplicaKey`]), [`RaftConfig`], [`Input`], [`Action`] |
//! | `messages.rs` | the KRaft RPCs: Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot |
//! | `log.rs` | [`RaftLog`]: the core's in-memory view of the log, its epoch cache, [`Snapshot`] |
//! | `state.rs` | [`QuorumState`] (persisted) and the per-role state types |
//! | `node.rs` | [`RaftNode`]: roles, transitions, timers, dispatch of inputs |
//! | `election.rs` | Vote and pre-vote, on both sides; EndQuorumEpoch |
//! | `follower.rs` | the follower's side of Fetch: truncation, append, high watermark |
//! | `leader.rs` | the leader's side: fetch validation, high watermark, DescribeQuorum |
//! | `sim/mod.rs` | (tests only) the deterministic simulator: network, faults, clocks, seeds |
//! | `sim/check.rs` | (tests only) actions carried out on simulated disks; the invariants |
//! | `tests.rs` | (tests only) unit tests of single rules |

mod election;
mod follower;
mod leader;
mod log;
mod messages;
mod node;
#[cfg(test)]
mod sim;
mod state;
#[cfg(test)]
mod tests;

use bytes::Bytes;
use uuid::Uuid;

pub use leader::{QuorumDescription, ReplicaDescription};
pub use log::{Entry, Payload, RaftLog, Snapshot, SnapshotId, VoterSet};
pub use messages::{FetchError, Message};
pub use node::RaftNode;
pub use state::{QuorumState, RoleKind};

/// A controller's `node.id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub i32);

/// A voter's identity (KIP-853): the node id *and* the id of the metadata log directory,
/// written when the directory was formatted. A node that comes back with an empty disk has
/// a new directory id, so it is not the voter it was: it neither votes nor counts toward
/// the high watermark, because it no longer holds what it promised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplicaKey {
    /// Where messages go.
    pub id: NodeId,
    /// Which disk the replica is speaking for.
    pub directory_id: Uuid,
}

/// Where a voter's controller listener is (KIP-853 `VotersRecord.Endpoints`). The core
/// only carries it along with the voter set, so every node learns how to reach each
/// voter from the log itself; the driver connects with it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// The listener's name (`controller.listener.names`).
    pub name: String,
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
}

/// Settings of the quorum, with Kafka's names and defaults.
#[derive(Debug, Clone)]
pub struct RaftConfig {
    /// The bootstrap voter set (`controller.quorum.voters`, with the directory ids the
    /// voters were formatted with), in force until the log holds a `Voters` entry
    /// (KIP-853). A node whose [`ReplicaKey`] is not in the voter set is an observer.
    pub voters: Vec<ReplicaKey>,
    /// `controller.quorum.bootstrap.servers` (KIP-853), as the ids the driver gives them
    /// (negative, since their node ids are unknown): an observer that knows no leader and
    /// no other voter sends its Fetch to these in turn, and follows the leader the answer
    /// names.
    pub bootstrap: Vec<NodeId>,
    /// `controller.quorum.election.timeout.ms`: an election timer is drawn from
    /// `[t, 2t)`.
    pub election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms`: a follower that has not heard from its leader
    /// for this long starts an election (with pre-vote).
    pub fetch_timeout_ms: u64,
    /// `controller.quorum.election.backoff.max.ms`: the most a lost election waits before
    /// the next one.
    pub election_backoff_max_ms: u64,
    /// `controller.quorum.request.timeout.ms`: an unanswered Fetch, Vote or
    /// BeginQuorumEpoch is sent again after this long.
    pub request_timeout_ms: u64,
    /// `controller.quorum.retry.backoff.ms`: a follower whose Fetch was lost
    /// ([`Input::Unreachable`]) fetches again after this long. Without it the retry would
    /// wait out the request timeout, which at Kafka's defaults equals the fetch timeout:
    /// one lost Fetch would start an election.
    pub retry_backoff_ms: u64,
    /// How long a follower waits before fetching again after a fetch that brought nothing
    /// (Kafka's leader parks such a fetch for up to 500 ms instead; see the module doc).
    pub fetch_max_wait_ms: u64,
    /// The most entries one Fetch response carries.
    pub fetch_max_entries: usize,
    /// A deliberately broken rule, so tests can show the simulator catches it.
    #[cfg(test)]
    pub(crate) fault: Fault,
}

impl RaftConfig {
    /// Kafka's defaults for the given voter set.
    pub fn new(voters: Vec<ReplicaKey>) -> Self {
        RaftConfig {
            voters,
            bootstrap: Vec::new(),
            election_timeout_ms: 1000,
            fetch_timeout_ms: 2000,
            election_backoff_max_ms: 1000,
            request_timeout_ms: 2000,
            retry_backoff_ms: 20,
            fetch_max_wait_ms: 500,
            fetch_max_entries: 1000,
            #[cfg(test)]
            fault: Fault::None,
        }
    }
}

/// Rules the simulator's self-test breaks on purpose.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    None,
    /// Grant votes without comparing logs (breaks Raft §5.4.1).
    VoteIgnoresLog,
    /// Advance the high watermark over a majority even when the entry there is from an
    /// earlier epoch (breaks Raft §5.4.2, Figure 8).
    CommitPreviousEpochByCount,
}

/// What the driver feeds the core.
#[derive(Debug, Clone)]
pub enum Input {
    /// Time passed; fire whatever timers are due. The driver calls it at
    /// [`RaftNode::next_deadline`] at the latest.
    Tick,
    /// An RPC from another node.
    Message {
        /// The sender's node id (from the connection).
        from: NodeId,
        /// The RPC.
        msg: Message,
    },
    /// Records to append, if this node is the leader.
    Propose(Vec<Bytes>),
    /// Resign leadership gracefully (a controlled shutdown): EndQuorumEpoch.
    Resign,
    /// The application wrote a snapshot of its state as of `end_offset` (at most the high
    /// watermark, KIP-630); the log below it may go.
    Snapshot {
        /// The offset the snapshot's state reaches (exclusive).
        end_offset: i64,
        /// The snapshot's bytes, served to followers that fall behind the log start.
        data: Bytes,
    },
    /// KIP-853 AddRaftVoter, on the leader: make a caught-up observer a voter, reached at
    /// the endpoint given (recorded in the `Voters` entry).
    AddVoter(ReplicaKey, Option<Endpoint>),
    /// KIP-853 RemoveRaftVoter, on the leader.
    RemoveVoter(ReplicaKey),
    /// The requests sent to this node were lost without an answer: the connection could
    /// not be made, or failed mid-request (Kafka's network client reports that as an
    /// error response at once, rather than letting the request time out).
    Unreachable(NodeId),
}

/// Why an AddVoter or RemoveVoter was refused (KIP-853's error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoterChangeError {
    /// This node does not lead (`NOT_LEADER_OR_FOLLOWER`).
    NotLeader,
    /// A change is not committed yet, or the leader has not committed in its epoch
    /// (`REQUEST_TIMED_OUT` in Kafka): one change at a time (Raft dissertation §4.1).
    ChangeInProgress,
    /// The node id is already a voter (`DUPLICATE_VOTER`).
    DuplicateVoter,
    /// The new voter has not fetched up to the high watermark recently.
    NotCaughtUp,
    /// No such voter, or it is the last one (`VOTER_NOT_FOUND`).
    VoterNotFound,
}

/// What the core asks the driver to do, in order (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Make the quorum state durable (Kafka's `quorum-state` file) before going on.
    PersistQuorumState(QuorumState),
    /// Append entries at `base_offset` (the current log end) and make them durable before
    /// going on.
    AppendToLog {
        /// The offset of the first entry; always the log end offset.
        base_offset: i64,
        /// The entries, in order.
        entries: Vec<Entry>,
    },
    /// Remove every entry at `end_offset` and after, durably, before going on.
    TruncateLog {
        /// The new log end offset.
        end_offset: i64,
    },
    /// Store the snapshot durably (it replaces older ones) before going on.
    PersistSnapshot(Snapshot),
    /// Entries below `offset` are in the persisted snapshot; delete them. A crash before
    /// this is harmless: at start the driver hands the core only entries from the latest
    /// snapshot's end.
    DeleteLogBefore {
        /// The new log start offset.
        offset: i64,
    },
    /// A snapshot fetched from the leader: store it and replace the whole log with an
    /// empty one starting at its end offset, as one durable step (at start, a log whose
    /// end or last epoch disagrees with the latest snapshot is discarded).
    InstallSnapshot(Snapshot),
    /// Send an RPC. Messages may be lost; the core retries what it needs.
    Send {
        /// The recipient.
        to: NodeId,
        /// The RPC.
        msg: Message,
    },
    /// Entries below `high_watermark` are committed: apply them to the state machine.
    CommitTo {
        /// The new high watermark; it never moves back while the process lives.
        high_watermark: i64,
    },
    /// This node's role changed.
    RoleChanged {
        /// The new role.
        role: RoleKind,
        /// The epoch it holds in the new role.
        epoch: i32,
        /// The leader, if known.
        leader: Option<NodeId>,
    },
    /// A proposal was appended as `[base_offset, last_offset]` in `epoch`; it is committed
    /// once the high watermark passes `last_offset`, unless the epoch ends first.
    Proposed {
        /// The leader's epoch.
        epoch: i32,
        /// Offset of the first proposed record.
        base_offset: i64,
        /// Offset of the last proposed record.
        last_offset: i64,
    },
    /// An AddVoter or RemoveVoter was refused. An accepted one is answered with
    /// [`Action::Proposed`] for its `Voters` entry.
    VoterChangeRejected(VoterChangeError),
    /// A proposal was refused because this node is not the leader.
    NotLeader {
        /// The leader this node knows of, if any.
        leader: Option<NodeId>,
    },
}
