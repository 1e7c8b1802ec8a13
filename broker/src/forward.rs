//! Forwarding controller-bound requests to the active controller (in the spirit of KIP-590).
//!
//! In cluster mode only the quorum leader writes metadata. A node that is not the leader
//! sends CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterConfigs and
//! IncrementalAlterConfigs whole (same API, same version, same body) to the leader's
//! registered client endpoint, and relays the answer under its own client's correlation id.
//! Metadata's auto-creation sends a CreateTopics the same way and does not wait for it.
//!
//! Kafka wraps a forwarded request in an Envelope on the controller listener; here the
//! request goes to the controller's client listener as any client's would. What stands in
//! for the envelope's "already forwarded" mark is the client id ([`FORWARDED_CLIENT_ID`]): a
//! node never forwards a request that carries it, so two nodes that each take the other
//! for the leader (for the moment it takes an election to reach both) cannot bounce a
//! request between them.
//!
//! One connection per process, to the current controller, is kept and reused; a new
//! controller, or any failure on the connection, drops it. Forwarded requests share it one
//! at a time, each bounded by its own deadline (connect, write and read together). When the
//! controller is unknown or does not answer in time the handler runs locally, which answers
//! NOT_CONTROLLER as a node that is not the leader always has, and the client retries.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use strata_kraft::raft::RoleKind;
use strata_protocol::codec;
use strata_protocol::messages::create_topics_request::CreatableTopic;
use strata_protocol::messages::{
    ApiKey, CreateTopicsRequest, RequestKind, ResponseKind, TopicName,
};
use strata_protocol::{ResponseError, StrBytes};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::broker::Broker;
use crate::handlers::RequestContext;

/// The client id of a forwarded request; a node receiving it answers locally.
pub const FORWARDED_CLIENT_ID: &str = "strata-forwarded";

/// The largest answer read back: the forwarded APIs answer per topic or resource, and a
/// request (capped by `socket.request.max.bytes`) cannot name more than fit in this.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// A forwarded request waits at most this long, whatever its own timeout asks.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// ... and at least this long, so that a request with a zero timeout is still delivered.
const MIN_WAIT: Duration = Duration::from_secs(1);
/// For the APIs without a timeout field (the two AlterConfigs): Kafka's
/// `request.timeout.ms` default.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// CreateTopics version of an auto-creation: the newest the client listener serves.
const AUTO_CREATE_VERSION: i16 = 7;

/// Where the active controller takes client requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    /// Its `node.id`.
    pub node_id: i32,
    /// Its registered client endpoint.
    pub host: String,
    /// Its registered client port.
    pub port: u16,
}

/// Why a forwarded request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// Connecting, writing or reading failed.
    #[error("controller {node_id} at {host}:{port}: {source}")]
    Io {
        node_id: i32,
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    /// No answer within the request's deadline.
    #[error("controller {node_id} did not answer within {waited:?}")]
    TimedOut { node_id: i32, waited: Duration },
    /// The request could not be encoded (a bug) or the answer not decoded.
    #[error("controller {node_id}: {reason}")]
    Codec { node_id: i32, reason: String },
    /// The answer carried another correlation id.
    #[error("controller {node_id} answered correlation id {got}, expected {expected}")]
    OutOfOrder {
        node_id: i32,
        got: i32,
        expected: i32,
    },
}

/// The pooled connection: to which controller, and the last correlation id used on it.
struct Connection {
    /// The controller it reaches; another controller needs another connection.
    to: Controller,
    /// The socket.
    stream: TcpStream,
    /// Incremented for each request.
    correlation_id: i32,
}

/// The process's one connection to the controller. A process is one node; the pool lives
/// here rather than in `Broker` so that forwarding stays out of the broker's core state.
static CONNECTION: tokio::sync::Mutex<Option<Connection>> = tokio::sync::Mutex::const_new(None);

/// Topics whose auto-creation is on its way to the controller: a client that asks again
/// before the first request is answered does not send a second (Kafka's
/// `AutoTopicCreationManager` keeps the same set).
static AUTO_CREATING: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// The controller a controller-bound request on this node goes to: `Some` on a clustered
/// node that is not the quorum leader and knows a leader registered with a client endpoint.
/// `None` means "handle it here": a single node, the leader itself, an unknown leader
/// (the local handler answers NOT_CONTROLLER), or a request that was already forwarded once.
#[must_use]
pub fn route(ctx: &RequestContext) -> Option<Controller> {
    if ctx.client_id.as_deref() == Some(FORWARDED_CLIENT_ID) {
        return None;
    }
    controller_of(&ctx.broker)
}

fn controller_of(broker: &Broker) -> Option<Controller> {
    if !broker.is_clustered() {
        return None;
    }
    let status = broker.quorum()?.status();
    if status.role == RoleKind::Leader {
        return None;
    }
    let leader = status.leader?.0;
    if leader == broker.config.node_id {
        return None;
    }
    let image = broker.image();
    let (host, port) = crate::broker::inter_broker_endpoint(broker, &image, leader)?;
    Some(Controller {
        node_id: leader,
        host,
        port,
    })
}

/// How long a forwarded request may take: its own `timeout_ms` where it has one, bounded to
/// `MIN_WAIT` to `MAX_WAIT`.
#[must_use]
pub fn deadline(body: &RequestKind) -> Duration {
    let timeout_ms = match body {
        RequestKind::CreateTopics(r) => Some(r.timeout_ms),
        RequestKind::DeleteTopics(r) => Some(r.timeout_ms),
        RequestKind::CreatePartitions(r) => Some(r.timeout_ms),
        RequestKind::ElectLeaders(r) => Some(r.timeout_ms),
        _ => None,
    };
    timeout_ms
        .map_or(DEFAULT_WAIT, |ms| {
            Duration::from_millis(u64::try_from(ms).unwrap_or(0))
        })
        .clamp(MIN_WAIT, MAX_WAIT)
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
    // The wait for the shared connection counts against the deadline too. The connection is
    // taken out while in use: one abandoned at the deadline (its answer may still arrive) is
    // dropped with the attempt, and one that failed is not put back.
    let attempt = async {
        let mut pooled = CONNECTION.lock().await;
        let mut conn = pooled.take();
        let result = exchange(&mut conn, to, api_key, version, body).await;
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
    api_key: ApiKey,
    version: i16,
    body: &RequestKind,
) -> Result<ResponseKind, ForwardError> {
    let io = |source: std::io::Error| ForwardError::Io {
        node_id: to.node_id,
        host: to.host.clone(),
        port: to.port,
        source,
    };
    let codec_error = |reason: String| ForwardError::Codec {
        node_id: to.node_id,
        reason,
    };
    if pooled.as_ref().is_none_or(|c| c.to != *to) {
        let stream = TcpStream::connect((to.host.as_str(), to.port))
            .await
            .map_err(io)?;
        let _ = stream.set_nodelay(true);
        *pooled = Some(Connection {
            to: to.clone(),
            stream,
            correlation_id: 0,
        });
    }
    let Some(conn) = pooled.as_mut() else {
        return Err(codec_error("no connection".to_owned()));
    };
    conn.correlation_id = conn.correlation_id.wrapping_add(1);
    let expected = conn.correlation_id;
    let frame = codec::encode_request(api_key, version, expected, FORWARDED_CLIENT_ID, body)
        .map_err(|e| codec_error(e.to_string()))?;
    conn.stream.write_all(&frame).await.map_err(io)?;
    let answer = crate::frame_io::read_frame(&mut conn.stream, MAX_RESPONSE_BYTES)
        .await
        .map_err(io)?;
    let response = codec::decode_forwarded_response(api_key, version, answer)
        .map_err(|e| codec_error(e.to_string()))?;
    if response.correlation_id != expected {
        return Err(ForwardError::OutOfOrder {
            node_id: to.node_id,
            got: response.correlation_id,
            expected,
        });
    }
    Ok(response.body)
}

/// Forwards `req` to `to` on behalf of the client of `ctx`, and falls back to `local` (which
/// answers NOT_CONTROLLER on a node that is not the leader) when the controller does not
/// answer. The answer is the controller's body; the caller encodes it under the client's
/// correlation id.
pub async fn relay<R>(
    ctx: &RequestContext,
    to: Controller,
    req: R,
    local: fn(&RequestContext, R) -> ResponseKind,
) -> ResponseKind
where
    R: Clone,
    RequestKind: From<R>,
{
    let body = RequestKind::from(req.clone());
    let wait = deadline(&body);
    match forward(&to, ctx.api_key, ctx.api_version, &body, wait).await {
        Ok(answer) => answer,
        Err(e) => {
            tracing::warn!(error = %e, api = ?ctx.api_key, "forwarding to the controller failed");
            local(ctx, req)
        }
    }
}

/// Metadata's auto-creation on a node that is not the controller: sends a CreateTopics for
/// `topic` with the broker defaults (-1 partitions, -1 replication factor) to the
/// controller in the background and returns at once. The caller answers
/// LEADER_NOT_AVAILABLE for the topic, as Kafka does right after auto-creation; the client
/// asks again and finds it once the controller's entry reaches this node's image.
///
/// Returns `false` when there is no controller to send to (the caller falls back to the
/// local path) or no runtime to send from.
#[must_use]
pub fn auto_create(ctx: &RequestContext, topic: &str) -> bool {
    let Some(to) = route(ctx) else {
        return false;
    };
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
        let outcome = forward(
            &to,
            ApiKey::CreateTopics,
            AUTO_CREATE_VERSION,
            &body,
            DEFAULT_WAIT,
        )
        .await;
        match outcome {
            Ok(ResponseKind::CreateTopics(r)) => {
                for t in r.topics {
                    let code = t.error_code;
                    if code == 0 || code == ResponseError::TopicAlreadyExists.code() {
                        tracing::info!(topic = %t.name.0, controller = to.node_id, "auto-created topic through the controller");
                    } else {
                        tracing::warn!(topic = %t.name.0, code, "the controller refused an auto-creation");
                    }
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::messages::{AlterConfigsRequest, DeleteTopicsRequest};
    use tokio::io::AsyncReadExt;

    #[test]
    fn the_deadline_is_the_request_timeout_within_bounds() {
        let create =
            |ms| RequestKind::CreateTopics(CreateTopicsRequest::default().with_timeout_ms(ms));
        assert_eq!(deadline(&create(5_000)), Duration::from_secs(5));
        assert_eq!(deadline(&create(0)), MIN_WAIT);
        assert_eq!(deadline(&create(-1)), MIN_WAIT);
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
        };
        let body = RequestKind::CreateTopics(CreateTopicsRequest::default());
        let got = forward(&to, ApiKey::CreateTopics, 7, &body, Duration::from_secs(5)).await;
        assert!(
            matches!(got, Err(ForwardError::Io { node_id: 3, .. })),
            "{got:?}"
        );
        liar.abort();
    }
}
