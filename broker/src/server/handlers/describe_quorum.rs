//! DescribeQuorum (key 55, KIP-595) on a client listener. Kafka's brokers accept it from
//! clients (`kafka-metadata-quorum.sh --bootstrap-server`) and forward it to the active
//! controller, which alone knows every voter's and observer's progress; so does this one
//! ([`forward::forward_to_leader`]): to a combined leader's client listener, where this
//! handler answers from the leader's Raft state, or to a dedicated controller's listener.
//!
//! - The quorum's leader answers from its Raft state; a request forwarded here by another
//!   node is answered here too, never forwarded again.
//! - A node that cannot reach a leader within [`WAIT`] answers from its own state, which
//!   is NOT_LEADER_OR_FOLLOWER with the leader and epoch it knows, as a Kafka controller
//!   that does not lead answers.
//! - A lone node is the only voter of its own quorum, and answers as its leader (with no
//!   endpoints: it has no controller listener).
//! - Only `__cluster_metadata` partition 0 exists; the answer always describes it, as the
//!   controller listener's does.

use std::time::Duration;

use strata_protocol::messages::{ApiKey, DescribeQuorumRequest, RequestKind, ResponseKind};

use super::RequestContext;
use crate::server::forward;

/// How long a forwarded DescribeQuorum waits for a leader: it is a read for an operator,
/// who is better told NOT_LEADER_OR_FOLLOWER than kept waiting through an election.
const WAIT: Duration = Duration::from_secs(5);

/// Answers, or forwards to the active controller and relays its answer.
pub async fn handle(ctx: &RequestContext, req: DescribeQuorumRequest) -> ResponseKind {
    if forward::route(ctx) {
        let body = RequestKind::DescribeQuorum(req);
        match forward::forward_to_leader(
            &ctx.broker,
            ApiKey::DescribeQuorum,
            ctx.api_version,
            &body,
            WAIT,
        )
        .await
        {
            Ok(Some((_, answer))) => return answer,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "DescribeQuorum: forwarding to the controller failed")
            }
        }
    }
    match ctx.broker.quorum() {
        Some(quorum) => quorum.describe(ctx.api_version).await,
        // The quorum is not attached yet (the node is starting): it knows no leader.
        None => crate::quorum::wire::describe_quorum_response(None, None, -1, -1, &[]),
    }
}
