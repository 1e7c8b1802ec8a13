//! The metadata quorum's refusals as the Raft APIs' Kafka error codes (KIP-595, KIP-630,
//! KIP-853): the codes the quorum's wire layer and its voter changes answer with. The one
//! mapping of domain errors to codes outside `server::error` (which re-exports it): the
//! quorum's codec sits below the server layer, and a layer imports only those beneath it.

use strata_kraft::raft::{FetchError, VoterChangeError};
use strata_protocol::ResponseError;

/// Why this node's metadata quorum does not serve a request of the Raft APIs or a voter
/// change (AddRaftVoter, RemoveRaftVoter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuorumRefusal {
    /// The request names another cluster.
    OtherCluster,
    /// The request is malformed: an AddRaftVoter without listeners, or a voter without a
    /// node id or a directory id.
    InvalidRequest,
    /// This node does not lead the quorum (DescribeQuorum, a voter change), or stopped
    /// leading before a voter change committed.
    NotLeader,
    /// The core did not serve a Fetch or FetchSnapshot.
    Fetch(FetchError),
    /// The leader no longer has the snapshot a FetchSnapshot names (KIP-630): the fetcher
    /// fetches again to learn the new one.
    SnapshotNotFound,
    /// A FetchSnapshot's position is past the end of the snapshot (KIP-630).
    PositionOutOfRange,
    /// The leader's core refused a voter change; one that cannot start yet (the voter is
    /// catching up, another change is in flight) is refused once the request's time is up.
    VoterChange(VoterChangeError),
    /// A voter change did not commit within the request's time.
    NotCommitted,
}

/// A quorum refusal as its Kafka error code. A voter change that cannot start before the
/// request's time is up is REQUEST_TIMED_OUT, as Kafka's leader answers it.
#[must_use]
pub fn quorum_refusal_code(r: QuorumRefusal) -> i16 {
    match r {
        QuorumRefusal::OtherCluster => ResponseError::InconsistentClusterId.code(),
        QuorumRefusal::InvalidRequest => ResponseError::InvalidRequest.code(),
        QuorumRefusal::NotLeader
        | QuorumRefusal::Fetch(FetchError::NotLeader)
        | QuorumRefusal::VoterChange(VoterChangeError::NotLeader) => {
            ResponseError::NotLeaderOrFollower.code()
        }
        QuorumRefusal::Fetch(FetchError::FencedLeaderEpoch) => {
            ResponseError::FencedLeaderEpoch.code()
        }
        QuorumRefusal::Fetch(FetchError::UnknownLeaderEpoch) => {
            ResponseError::UnknownLeaderEpoch.code()
        }
        QuorumRefusal::SnapshotNotFound => ResponseError::SnapshotNotFound.code(),
        QuorumRefusal::PositionOutOfRange => ResponseError::PositionOutOfRange.code(),
        QuorumRefusal::VoterChange(VoterChangeError::DuplicateVoter) => {
            ResponseError::DuplicateVoter.code()
        }
        QuorumRefusal::VoterChange(VoterChangeError::VoterNotFound) => {
            ResponseError::VoterNotFound.code()
        }
        QuorumRefusal::VoterChange(
            VoterChangeError::NotCaughtUp | VoterChangeError::ChangeInProgress,
        )
        | QuorumRefusal::NotCommitted => ResponseError::RequestTimedOut.code(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_refusals_get_kafkas_codes() {
        let cases = [
            (QuorumRefusal::OtherCluster, 104),
            (QuorumRefusal::InvalidRequest, 42),
            (QuorumRefusal::NotLeader, 6),
            (QuorumRefusal::Fetch(FetchError::NotLeader), 6),
            (QuorumRefusal::Fetch(FetchError::FencedLeaderEpoch), 74),
            (QuorumRefusal::Fetch(FetchError::UnknownLeaderEpoch), 75),
            (QuorumRefusal::SnapshotNotFound, 98),
            (QuorumRefusal::PositionOutOfRange, 99),
            (QuorumRefusal::VoterChange(VoterChangeError::NotLeader), 6),
            (
                QuorumRefusal::VoterChange(VoterChangeError::DuplicateVoter),
                126,
            ),
            (
                QuorumRefusal::VoterChange(VoterChangeError::VoterNotFound),
                127,
            ),
            (QuorumRefusal::VoterChange(VoterChangeError::NotCaughtUp), 7),
            (
                QuorumRefusal::VoterChange(VoterChangeError::ChangeInProgress),
                7,
            ),
            (QuorumRefusal::NotCommitted, 7),
        ];
        for (r, code) in cases {
            assert_eq!(quorum_refusal_code(r), code, "{r:?}");
        }
    }
}
