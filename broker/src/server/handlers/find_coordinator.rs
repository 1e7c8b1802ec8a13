//! FindCoordinator (key 10): the node that coordinates a group or a transactional id: the
//! leader of its `__consumer_offsets` or `__transaction_state` partition
//! ([`crate::server::placement`]), the same answer on every node (on a lone node, this node).

use strata_protocol::messages::find_coordinator_response::Coordinator;
use strata_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use strata_protocol::{ResponseError, StrBytes};

use super::RequestContext;
use crate::coordinator::InternalTopic;
use crate::server::error::{GroupRefusal, coordinator_unavailable_code, group_refusal_code};
use crate::server::placement::{self, CoordinatorUnavailable, Placement as Placed};

/// Kafka's `CoordinatorType.GROUP`.
const GROUP_KEY: i8 = 0;
/// Kafka's `CoordinatorType.TRANSACTION`.
const TRANSACTION_KEY: i8 = 1;

/// Answers each key (v4+ batches keys, KIP-699).
#[must_use]
pub fn handle(ctx: &RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse {
    if ctx.api_version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let (code, node_id, host, port) = locate(ctx, req.key_type, &key);
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(node_id))
                    .with_host(host)
                    .with_port(port)
                    .with_error_code(code)
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        let (code, node_id, host, port) = locate(ctx, req.key_type, &req.key);
        FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_node_id(BrokerId(node_id))
            .with_host(host)
            .with_port(port)
    }
}

/// The error code, node id, host and port answered for `key`: an address on the listener
/// the client used, as Kafka answers.
fn locate(ctx: &RequestContext, key_type: i8, key: &str) -> (i16, i32, StrBytes, i32) {
    let own = || {
        let (host, port) = ctx.own_endpoint();
        (
            0,
            ctx.broker.config.node_id,
            StrBytes::from_string(host),
            i32::from(port),
        )
    };
    // Kafka's handleFindCoordinatorRequest: DESCRIBE on the group or the transactional id.
    let (placed, topic) = match key_type {
        GROUP_KEY => {
            if !ctx.authorize_group(strata_kraft::acl::AclOperation::Describe, key) {
                return refused(group_refusal_code(GroupRefusal::Unauthorized));
            }
            (
                placement::coordinator(&ctx.broker, key),
                InternalTopic::ConsumerOffsets,
            )
        }
        TRANSACTION_KEY => {
            if !ctx.authorize_transactional_id(strata_kraft::acl::AclOperation::Describe, key) {
                return refused(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            (
                placement::txn_coordinator(&ctx.broker, key),
                InternalTopic::TransactionState,
            )
        }
        // Share groups (2) are not served; Kafka 4.1 answers INVALID_REQUEST for a key type
        // it does not know.
        _ => return refused(ResponseError::InvalidRequest.code()),
    };
    match placed {
        Placed::Local => own(),
        Placed::Remote(node) => match ctx.broker.image().brokers.get(&node) {
            Some(b) => {
                let (host, port) = ctx.endpoint_of(b);
                (0, node, StrBytes::from_string(host), i32::from(port))
            }
            None => not_available(),
        },
        Placed::NotAvailable => {
            // Kafka's first FindCoordinator creates the topic; the client asks again.
            placement::ensure_topic(&ctx.broker, topic);
            not_available()
        }
    }
}

fn refused(code: i16) -> (i16, i32, StrBytes, i32) {
    (code, -1, StrBytes::default(), -1)
}

fn not_available() -> (i16, i32, StrBytes, i32) {
    (
        coordinator_unavailable_code(CoordinatorUnavailable::NotAvailable),
        -1,
        StrBytes::from_static_str(""),
        -1,
    )
}
