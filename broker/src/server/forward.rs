//! Forwarding controller-bound requests to the active controller (in the spirit of KIP-590).
//!
//! In cluster mode only the quorum leader writes metadata. A node that is not the leader
//! sends CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterConfigs,
//! IncrementalAlterConfigs, AlterPartitionReassignments, ListPartitionReassignments
//! (KIP-455: the pending moves are the controller's to tell) and AlterClientQuotas whole (same API, same version, same body) to the leader's
//! registered inter-broker endpoint or, when the leader is a dedicated controller with no
//! broker registration, to its controller listener (its `controller.quorum.voters`
//! address), and relays the answer under its own client's correlation id. Metadata's
//! auto-creation sends a CreateTopics the same way and does not wait for it.
//!
//! Kafka wraps a forwarded request in an Envelope on the controller listener; here the
//! request goes as it came, to a combined leader's broker listener as any client's would,
//! or to a dedicated controller's listener, which serves these nine APIs. What stands in
//! for the envelope is the client id, `strata-forwarded|<client address>|<principal>`
//! ([`FORWARDED_CLIENT_ID`]): a node never forwards a request that carries it, so two nodes
//! that each take the other for the leader (for the moment it takes an election to reach
//! both) cannot bounce a request between them; and the leader authorizes it as the client
//! it names, provided the connection it came on may act as a node (CLUSTER_ACTION, as
//! Kafka's Envelope requires; [`adopt_forwarded_identity`]).
//!
//! One connection per process, to the current controller, is kept and reused; a new
//! controller, or any failure on the connection, drops it. Forwarded requests share it one
//! at a time, each bounded by its own deadline (connect, write and read together). While no
//! leader is known, or the one known does not answer, a request waits and goes to the next
//! leader known ([`forward_to_leader`]); when none answers within the request's deadline
//! the handler runs locally, which answers NOT_CONTROLLER, and the client retries.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strata_kraft::raft::RoleKind;
use strata_protocol::codec;
use strata_protocol::messages::create_topics_request::CreatableTopic;
use strata_protocol::messages::{
    ApiKey, CreateTopicsRequest, RequestKind, ResponseKind, TopicName,
};
use strata_protocol::{ResponseError, StrBytes};

use crate::broker::Broker;
use crate::peer_client::{Decoding, PeerClient, PeerError};
use crate::server::handlers::RequestContext;

/// The client id of a forwarded request; a node receiving it answers locally.
pub const FORWARDED_CLIENT_ID: &str = "strata-forwarded";

/// The client id of a node's own CreateTopics for `__consumer_offsets` (which clients may
/// not create); answered locally as well.
pub const INTERNAL_CLIENT_ID: &str = "strata-internal";

/// The largest answer read back: the forwarded APIs answer per topic or resource, and a
/// request (capped by `socket.request.max.bytes`) cannot name more than fit in this.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// A forwarded request waits at most this long, whatever its own timeout asks.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// ... and at least this long, so that a request with a very short timeout is still
/// delivered.
const MIN_WAIT: Duration = Duration::from_secs(1);
/// For the APIs without a timeout field (the two AlterConfigs) and for a timeout of zero or
/// less, which in Kafka sets no deadline (`ControllerApis`' `requestTimeoutMsToDeadlineNs`;
/// librdkafka sends 0 for "do not wait for the topic to propagate", not "fail at once"):
/// Kafka's `request.timeout.ms` default.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// The pause before a forwarded request goes again after its controller did not answer.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// CreateTopics version of an auto-creation: the newest the client listener serves.
const AUTO_CREATE_VERSION: i16 = 7;

/// Where the active controller takes client requests.
#[derive(Debug, Clone)]
pub struct Controller {
    /// Its `node.id`.
    pub node_id: i32,
    /// Its registered inter-broker host, or its controller listener's.
    pub host: String,
    /// The port that goes with `host`.
    pub port: u16,
    /// How that listener is reached: the inter-broker route or the controller route.
    pub security: Arc<crate::security::peer::PeerSecurity>,
}

impl PartialEq for Controller {
    fn eq(&self, other: &Self) -> bool {
        (self.node_id, &self.host, self.port) == (other.node_id, &other.host, other.port)
            && Arc::ptr_eq(&self.security, &other.security)
    }
}

/// Why a forwarded request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// No node other than this one was known to lead the quorum.
    #[error("no controller known after {waited:?}")]
    NoController { waited: Duration },
    /// Connecting, the exchange, or its answer failed.
    #[error("controller {node_id} at {host}:{port}: {source}")]
    Peer {
        node_id: i32,
        host: String,
        port: u16,
        #[source]
        source: PeerError,
    },
    /// No answer within the request's deadline.
    #[error("controller {node_id} did not answer within {waited:?}")]
    TimedOut { node_id: i32, waited: Duration },
}

/// The pooled connection: to which controller, and the client on it (whose correlation ids
/// start again with each new connection).
struct Connection {
    /// The controller it reaches; another controller needs another connection.
    to: Controller,
    /// The connected client.
    client: PeerClient,
}

/// The process's one connection to the controller. A process is one node; the pool lives
/// here rather than in `Broker` so that forwarding stays out of the broker's core state.
static CONNECTION: tokio::sync::Mutex<Option<Connection>> = tokio::sync::Mutex::const_new(None);

/// Topics whose auto-creation is on its way to the controller: a client that asks again
/// before the first request is answered does not send a second (Kafka's
/// `AutoTopicCreationManager` keeps the same set).
static AUTO_CREATING: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Whether a controller-bound request on this node is forwarded: on a clustered node that
/// does not lead the quorum, for a request that was not forwarded here already. A single
/// node and the leader itself handle it here.
#[must_use]
pub fn route(ctx: &RequestContext) -> bool {
    let from_a_node = ctx
        .client_id
        .as_deref()
        .is_some_and(|id| id == INTERNAL_CLIENT_ID || is_forwarded(id));
    !from_a_node && !leads(&ctx.broker)
}

/// Whether `client_id` marks a request a node forwarded.
fn is_forwarded(client_id: &str) -> bool {
    client_id == FORWARDED_CLIENT_ID
        || client_id
            .strip_prefix(FORWARDED_CLIENT_ID)
            .is_some_and(|rest| rest.starts_with('|'))
}

/// The client id a request forwarded for the client of `ctx` carries, in place of Kafka's
/// Envelope: the forwarded mark, the client's address and its principal,
/// `strata-forwarded|<address>|<principal>` (the principal last, since it may hold any
/// character).
fn forwarded_client_id(ctx: &RequestContext) -> String {
    let host = ctx.peer.map(|p| p.ip().to_string()).unwrap_or_default();
    format!("{FORWARDED_CLIENT_ID}|{host}|{}", ctx.principal)
}

/// On the node a request was forwarded to: the request is authorized as the client it was
/// forwarded for (its principal and address), as Kafka's controller does with an
/// Envelope's, but only when the connection it came on may act as a node (CLUSTER_ACTION on
/// the cluster, Kafka's check on Envelope). Anyone else's forwarded mark leaves the request
/// as the connection's own.
pub fn adopt_forwarded_identity(ctx: &mut RequestContext) {
    let Some((host, principal)) = ctx
        .client_id
        .as_deref()
        .and_then(|id| id.strip_prefix(FORWARDED_CLIENT_ID)?.strip_prefix('|'))
        .and_then(|rest| rest.split_once('|'))
    else {
        return;
    };
    if !ctx.authorize_cluster(strata_kraft::acl::AclOperation::ClusterAction) {
        tracing::info!(principal = %ctx.principal, "a forwarded mark from a connection that may not act as a node: served as its own");
        return;
    }
    let (host, principal): (Option<std::net::IpAddr>, Arc<str>) =
        (host.parse().ok(), Arc::from(principal));
    ctx.peer = host.map(|ip| std::net::SocketAddr::new(ip, 0));
    ctx.principal = principal;
}

/// Whether this node answers controller-bound requests itself: it leads the quorum.
fn leads(broker: &Broker) -> bool {
    broker
        .quorum()
        .is_some_and(|q| q.status().role == RoleKind::Leader)
}

/// Where the quorum leader, as this node knows it, takes forwarded requests: `None` while
/// no other leader is known.
fn controller_of(broker: &Broker) -> Option<Controller> {
    let leader = broker.quorum()?.status().leader?.0;
    if leader == broker.config.node_id {
        return None;
    }
    let image = broker.image();
    // A combined leader takes it on its inter-broker listener, as any client request; a
    // dedicated controller registers no broker endpoint and takes it on its controller
    // listener (its address in the quorum), as Kafka's controllers do.
    let ((host, port), security) =
        match crate::broker::inter_broker_endpoint(broker, &image, leader) {
            Some(a) => (a, broker.peers.inter_broker.clone()),
            // The quorum knows every voter's address: from `controller.quorum.voters`, or from
            // the voter set in the metadata log (KIP-853).
            None => (
                broker.quorum()?.address_of(leader)?,
                broker.peers.controller.clone(),
            ),
        };
    Some(Controller {
        node_id: leader,
        host,
        port,
        security,
    })
}

/// Sends `body` to the quorum's leader and returns its answer and its node id, or `None`
/// once this node leads itself (the caller then handles the request). While no leader is
/// known, or the one known does not answer (it died, an election is under way), the
/// request waits and goes to the leader known next, until `wait` has passed: Kafka's
/// broker-to-controller channel likewise holds a request until a controller answers, so a
/// client is not told NOT_CONTROLLER for an election it cannot see.
///
/// # Errors
///
/// The last attempt's [`ForwardError`] when no leader answered within `wait`.
pub async fn forward_to_leader(
    broker: &Broker,
    api_key: ApiKey,
    version: i16,
    body: &RequestKind,
    wait: Duration,
) -> Result<Option<(i32, ResponseKind)>, ForwardError> {
    forward_to_leader_as(broker, FORWARDED_CLIENT_ID, api_key, version, body, wait).await
}

/// [`forward_to_leader`] with `client_id` in the request's header.
async fn forward_to_leader_as(
    broker: &Broker,
    client_id: &str,
    api_key: ApiKey,
    version: i16,
    body: &RequestKind,
    wait: Duration,
) -> Result<Option<(i32, ResponseKind)>, ForwardError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if leads(broker) {
            return Ok(None);
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let failed = match controller_of(broker) {
            Some(to) => match forward_as(&to, client_id, api_key, version, body, left).await {
                Ok(answer) => return Ok(Some((to.node_id, answer))),
                Err(e) => e,
            },
            None => ForwardError::NoController {
                waited: wait - left,
            },
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(failed);
        }
        tracing::debug!(error = %failed, api = ?api_key, "no answer from the controller yet; retrying");
        tokio::time::sleep(RETRY_BACKOFF.min(left)).await;
    }
}

/// How long a forwarded request may take: its own `timeout_ms` where it has a positive one,
/// bounded to `MIN_WAIT` to `MAX_WAIT`; `DEFAULT_WAIT` otherwise.
#[must_use]
pub fn deadline(body: &RequestKind) -> Duration {
    let timeout_ms = match body {
        RequestKind::CreateTopics(r) => Some(r.timeout_ms),
        RequestKind::DeleteTopics(r) => Some(r.timeout_ms),
        RequestKind::CreatePartitions(r) => Some(r.timeout_ms),
        RequestKind::ElectLeaders(r) => Some(r.timeout_ms),
        RequestKind::AlterPartitionReassignments(r) => Some(r.timeout_ms),
        RequestKind::ListPartitionReassignments(r) => Some(r.timeout_ms),
        _ => None,
    };
    match timeout_ms
        .and_then(|ms| u64::try_from(ms).ok())
        .filter(|&ms| ms > 0)
    {
        Some(ms) => Duration::from_millis(ms).clamp(MIN_WAIT, MAX_WAIT),
        None => DEFAULT_WAIT,
    }
}

/// Sends `body` (one of [`codec::FORWARDED_APIS`]) at `version` to the controller and
/// returns its answer, within `wait`.
///
/// # Errors
///
/// [`ForwardError`] when there is no answer in time; the pooled connection is dropped.
pub async fn forward(
    to: &Controller,
    api_key: ApiKey,
    version: i16,
    body: &RequestKind,
    wait: Duration,
) -> Result<ResponseKind, ForwardError> {
    forward_as(to, FORWARDED_CLIENT_ID, api_key, version, body, wait).await
}

/// [`forward`] with `client_id` in the request's header.
async fn forward_as(
    to: &Controller,
    client_id: &str,
    api_key: ApiKey,
    version: i16,
    body: &RequestKind,
    wait: Duration,
) -> Result<ResponseKind, ForwardError> {
    // The wait for the shared connection counts against the deadline too. The connection is
    // taken out while in use: one abandoned at the deadline (its answer may still arrive) is
    // dropped with the attempt, and one that failed is not put back.
    let attempt = async {
        let mut pooled = CONNECTION.lock().await;
        let mut conn = pooled.take();
        let result = exchange(&mut conn, to, client_id, api_key, version, body).await;
        if result.is_ok() {
            *pooled = conn;
        }
        result
    };
    tokio::time::timeout(wait, attempt)
        .await
        .unwrap_or(Err(ForwardError::TimedOut {
            node_id: to.node_id,
            waited: wait,
        }))
}

async fn exchange(
    pooled: &mut Option<Connection>,
    to: &Controller,
    client_id: &str,
    api_key: ApiKey,
    version: i16,
    body: &RequestKind,
) -> Result<ResponseKind, ForwardError> {
    let failed = |source: PeerError| ForwardError::Peer {
        node_id: to.node_id,
        host: to.host.clone(),
        port: to.port,
        source,
    };
    let conn = match pooled {
        Some(conn) if conn.to == *to && conn.client.is_connected() => conn,
        _ => {
            let mut client = PeerClient::new(FORWARDED_CLIENT_ID, MAX_RESPONSE_BYTES)
                .with_decoding(Decoding::Forwarded)
                .secured(to.security.clone());
            client
                .connect((to.host.as_str(), to.port))
                .await
                .map_err(failed)?;
            pooled.insert(Connection {
                to: to.clone(),
                client,
            })
        }
    };
    // DescribeQuorum is a controller-listener API a client listener also forwards
    // (handlers/describe_quorum.rs); its answer reads as the controller listener's.
    let decoding = if api_key == ApiKey::DescribeQuorum {
        Decoding::Peer
    } else {
        Decoding::Forwarded
    };
    conn.client
        .request_with(client_id, decoding, api_key, version, body)
        .await
        .map_err(failed)
}

/// Forwards `req` to the quorum's leader on behalf of the client of `ctx`
/// ([`forward_to_leader`]), and falls back to `local` when this node leads by then, or
/// (answering NOT_CONTROLLER, as a node that does not lead does) when no leader answered
/// in time. The answer is the controller's body; the caller encodes it under the client's
/// correlation id.
pub async fn relay<R, F, A>(ctx: &RequestContext, req: R, local: F) -> ResponseKind
where
    R: Clone,
    RequestKind: From<R>,
    F: FnOnce(RequestContext, R) -> A,
    A: Future<Output = ResponseKind>,
{
    let body = RequestKind::from(req.clone());
    let wait = deadline(&body);
    // An old version (`codec::legacy`) goes to the controller as the codec's oldest, which
    // means the same; the answer is encoded at the client's version as usual.
    let version = codec::legacy::codec_version(ctx.api_key, ctx.api_version);
    let client_id = forwarded_client_id(ctx);
    match forward_to_leader_as(&ctx.broker, &client_id, ctx.api_key, version, &body, wait).await {
        Ok(Some((_, answer))) => answer,
        Ok(None) => local(ctx.clone(), req).await,
        Err(e) => {
            tracing::warn!(error = %e, api = ?ctx.api_key, "forwarding to the controller failed");
            local(ctx.clone(), req).await
        }
    }
}

/// Metadata's auto-creation on a node that is not the controller: sends a CreateTopics for
/// `topic` with the broker defaults (-1 partitions, -1 replication factor) to the
/// controller in the background and returns at once. The caller answers
/// LEADER_NOT_AVAILABLE for the topic, as Kafka does right after auto-creation; the client
/// asks again and finds it once the controller's entry reaches this node's image.
///
/// Returns `false` when this node creates it itself (it leads the quorum; the caller
/// creates it through the controller task) or there is no runtime to send from.
#[must_use]
pub fn auto_create(ctx: &RequestContext, topic: &str) -> bool {
    if !route(ctx) {
        return false;
    }
    let broker = ctx.broker.clone();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    {
        let mut creating = AUTO_CREATING.lock().unwrap_or_else(|e| e.into_inner());
        if !creating
            .get_or_insert_with(HashSet::new)
            .insert(topic.to_owned())
        {
            return true;
        }
    }
    let topic = topic.to_owned();
    runtime.spawn(async move {
        let body = RequestKind::CreateTopics(
            CreateTopicsRequest::default()
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.clone())))
                        .with_num_partitions(-1)
                        .with_replication_factor(-1),
                ])
                .with_timeout_ms(i32::try_from(DEFAULT_WAIT.as_millis()).unwrap_or(i32::MAX)),
        );
        let outcome = forward_to_leader(
            &broker,
            ApiKey::CreateTopics,
            AUTO_CREATE_VERSION,
            &body,
            DEFAULT_WAIT,
        )
        .await;
        match outcome {
            Ok(Some((controller, ResponseKind::CreateTopics(r)))) => {
                for t in r.topics {
                    let code = t.error_code;
                    if code == 0 || code == ResponseError::TopicAlreadyExists.code() {
                        tracing::info!(topic = %t.name.0, controller, "auto-created topic through the controller");
                    } else {
                        tracing::warn!(topic = %t.name.0, code, "the controller refused an auto-creation");
                    }
                }
            }
            // This node leads now: the client's next Metadata creates it here.
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, topic, "auto-creation through the controller failed"),
        }
        let mut creating = AUTO_CREATING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = creating.as_mut() {
            set.remove(&topic);
        }
    });
    true
}

/// Has the quorum's leader create an internal topic (see
/// [`crate::server::placement::ensure_topic`]): in process when this node leads, else as
/// a CreateTopics under [`INTERNAL_CLIENT_ID`], which the leader's handler takes for the
/// internal topic.
///
/// # Errors
///
/// Why it was not created: no leader answered in time, or the leader refused (an error
/// code other than TOPIC_ALREADY_EXISTS).
pub async fn create_internal_topic(
    broker: &std::sync::Arc<Broker>,
    topic: crate::coordinator::InternalTopic,
) -> Result<(), String> {
    let body = RequestKind::CreateTopics(
        CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str(topic.name())))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            ])
            .with_timeout_ms(i32::try_from(DEFAULT_WAIT.as_millis()).unwrap_or(i32::MAX)),
    );
    let answer = forward_to_leader_as(
        broker,
        INTERNAL_CLIENT_ID,
        ApiKey::CreateTopics,
        AUTO_CREATE_VERSION,
        &body,
        DEFAULT_WAIT,
    )
    .await
    .map_err(|e| e.to_string())?;
    let code = match answer {
        Some((_, ResponseKind::CreateTopics(r))) => r.topics.first().map_or(0, |t| t.error_code),
        Some(_) => return Err("unexpected answer".to_owned()),
        None => {
            // This node leads: create it here.
            return broker
                .create_internal_topic(topic)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string());
        }
    };
    if code == 0 || code == ResponseError::TopicAlreadyExists.code() {
        Ok(())
    } else {
        Err(format!("CreateTopics error {code}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::messages::{AlterConfigsRequest, DeleteTopicsRequest};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn the_deadline_is_the_request_timeout_within_bounds() {
        let create =
            |ms| RequestKind::CreateTopics(CreateTopicsRequest::default().with_timeout_ms(ms));
        assert_eq!(deadline(&create(5_000)), Duration::from_secs(5));
        assert_eq!(deadline(&create(10)), MIN_WAIT);
        assert_eq!(deadline(&create(0)), DEFAULT_WAIT);
        assert_eq!(deadline(&create(-1)), DEFAULT_WAIT);
        assert_eq!(deadline(&create(i32::MAX)), MAX_WAIT);
        assert_eq!(
            deadline(&RequestKind::DeleteTopics(
                DeleteTopicsRequest::default().with_timeout_ms(2_500)
            )),
            Duration::from_millis(2_500)
        );
        assert_eq!(
            deadline(&RequestKind::AlterConfigs(AlterConfigsRequest::default())),
            DEFAULT_WAIT
        );
    }

    #[tokio::test]
    async fn an_unreachable_controller_fails_within_the_deadline() {
        // A listener that accepts and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent = tokio::spawn(async move {
            let (_s, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let to = Controller {
            node_id: 2,
            host: "127.0.0.1".to_owned(),
            port,
            security: crate::security::peer::PeerSecurity::plaintext(),
        };
        let started = std::time::Instant::now();
        let body = RequestKind::CreateTopics(CreateTopicsRequest::default());
        let got = forward(
            &to,
            ApiKey::CreateTopics,
            7,
            &body,
            Duration::from_millis(300),
        )
        .await;
        assert!(
            matches!(got, Err(ForwardError::TimedOut { node_id: 2, .. })),
            "{got:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(CONNECTION.lock().await.is_none());
        silent.abort();
    }

    #[tokio::test]
    async fn an_oversized_answer_is_refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let liar = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf).await;
            s.write_all(&i32::MAX.to_be_bytes()).await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let to = Controller {
            node_id: 3,
            host: "127.0.0.1".to_owned(),
            port,
            security: crate::security::peer::PeerSecurity::plaintext(),
        };
        let body = RequestKind::CreateTopics(CreateTopicsRequest::default());
        let got = forward(&to, ApiKey::CreateTopics, 7, &body, Duration::from_secs(5)).await;
        assert!(
            matches!(
                got,
                Err(ForwardError::Peer {
                    node_id: 3,
                    source: PeerError::BadFrame { .. },
                    ..
                })
            ),
            "{got:?}"
        );
        liar.abort();
    }
}
