//! The broker side of a clustered node: it registers with the active controller and
//! heartbeats to it (KIP-631), and the node's controller side ticks. A dedicated broker
//! runs only the first, a dedicated controller only the second.
//!
//! - **Registration.** BrokerRegistration (v2: listeners, rack, incarnation id, the cluster
//!   id) to the quorum's leader, on its controller listener (`controller.quorum.voters`
//!   gives the address); on this node when it leads, in process. The answer's broker epoch
//!   goes into every heartbeat.
//! - **Heartbeats.** BrokerHeartbeat every `broker.heartbeat.interval.ms` with the offset
//!   this node has applied (the last applied entry, as Kafka reports it). A new
//!   registration starts fenced; the controller unfences it once that offset reaches the
//!   registration. STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED (a controller that fenced
//!   or forgot it) registers again; NOT_CONTROLLER or a failed connection asks the leader
//!   known then, after `controller.quorum.retry.backoff.ms`-like pauses.
//! - **Controlled shutdown.** On SIGTERM the node heartbeats with `want_shut_down` until the
//!   controller answers `should_shut_down` (its leaderships moved away) or the bound passes.
//! - **Producer id blocks.** The broker epoch of the current registration is kept on the
//!   broker ([`Broker::set_broker_epoch`]); InitProducerId on a node that is not the
//!   controller gets its next block of producer ids from the controller with
//!   AllocateProducerIds (KIP-730, [`request_producer_ids`]), which the controller answers
//!   in the server's `handlers::allocate_producer_ids`. The controller listener's answers to
//!   BrokerRegistration, BrokerHeartbeat and AlterPartition are handler files there too.
//! - **Controller tick.** Every half second, on the node that leads the quorum, the active
//!   controller fences brokers whose session expired; every
//!   `leader.imbalance.check.interval.seconds` it runs the preferred-leader pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strata_kraft::ClusterControlError;
use strata_kraft::cluster_control::{BrokerHeartbeatRequest, BrokerRegistrationRequest};
use strata_kraft::raft::RoleKind;
use strata_kraft::record::{BrokerEndpoint, ProducerIdsBlock};
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::broker_registration_request::Listener;
use strata_protocol::messages::{
    AllocateProducerIdsRequest, ApiKey, BrokerHeartbeatRequest as WireHeartbeat,
    BrokerRegistrationRequest as WireRegistration, RequestKind, ResponseKind,
};

use crate::broker::{Broker, ControllerError};
use crate::peer_client::{self, PeerClient, PeerError};

/// BrokerRegistration version sent (v2 adds log dirs, which are empty here).
const REGISTRATION_VERSION: i16 = 2;
/// BrokerHeartbeat version sent.
const HEARTBEAT_VERSION: i16 = 1;
/// AllocateProducerIds version sent (its only one).
const ALLOCATE_PRODUCER_IDS_VERSION: i16 = 0;
/// The bound on one request to the controller, connecting included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The pause after a failed attempt.
const RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// The largest response accepted from a controller.
const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// How often the controller's tick runs.
const TICK: Duration = Duration::from_millis(500);

/// The state the broker side shares with the shutdown path.
#[derive(Debug, Default)]
pub struct Lifecycle {
    /// Set on SIGTERM: heartbeats ask to shut down.
    want_shut_down: AtomicBool,
    /// Set once the controller answered `should_shut_down`.
    may_shut_down: AtomicBool,
}

impl Lifecycle {
    /// Starts controlled shutdown and waits, at most `max`, until the controller has moved
    /// this broker's leaderships away. Returns whether it did.
    pub async fn controlled_shutdown(&self, max: Duration) -> bool {
        self.want_shut_down.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + max;
        while Instant::now() < deadline {
            if self.may_shut_down.load(Ordering::Relaxed) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

/// Starts what this node's roles run: for the broker role, its registration and
/// heartbeats and its leaders' ISR proposals; for the controller role, the controller's
/// tick (which acts only while this node leads the quorum). A dedicated controller never
/// registers as a broker, so no partition is ever placed on it.
pub fn start(broker: Arc<Broker>) -> Arc<Lifecycle> {
    let lifecycle = Arc::new(Lifecycle::default());
    let roles = broker.config.process_roles;
    if roles.broker {
        tokio::spawn(run(broker.clone(), lifecycle.clone()));
        tokio::spawn(crate::broker::replica::isr::run(broker.clone()));
    }
    if roles.controller {
        tokio::spawn(tick(broker));
    }
    lifecycle
}

async fn tick(broker: Arc<Broker>) {
    let rebalance_every = Duration::from_secs(
        u64::try_from(broker.config.leader_imbalance_check_interval_seconds).unwrap_or(300),
    );
    let mut last_rebalance = Instant::now();
    loop {
        tokio::time::sleep(TICK).await;
        let rebalance = last_rebalance.elapsed() >= rebalance_every;
        if rebalance {
            last_rebalance = Instant::now();
        }
        broker.controller_tick(rebalance).await;
    }
}

/// Why one exchange with the controller failed.
pub(crate) enum Failure {
    /// Not the controller, unreachable, or a transient error: try again.
    Retry(String),
    /// The registration is gone (fenced and forgotten, or stale): register again.
    Reregister(String),
}

async fn run(broker: Arc<Broker>, lifecycle: Arc<Lifecycle>) {
    let incarnation_id = broker.incarnation_id;
    let interval = Duration::from_millis(
        u64::try_from(broker.config.broker_heartbeat_interval_ms).unwrap_or(2000),
    );
    let mut client = ControllerClient::default();
    loop {
        let epoch = loop {
            match register(&broker, &mut client, incarnation_id).await {
                Ok(epoch) => break epoch,
                Err(Failure::Retry(why) | Failure::Reregister(why)) => {
                    tracing::debug!(why, "broker registration failed; retrying");
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
            }
        };
        tracing::info!(broker_epoch = epoch, "registered with the controller");
        broker.set_broker_epoch(epoch);
        let mut fenced = true;
        loop {
            match heartbeat(&broker, &mut client, &lifecycle, epoch).await {
                Ok(reply) => {
                    if fenced != reply.is_fenced {
                        tracing::info!(fenced = reply.is_fenced, "broker fencing changed");
                        fenced = reply.is_fenced;
                    }
                    if reply.should_shut_down {
                        lifecycle.may_shut_down.store(true, Ordering::Relaxed);
                    }
                    let wait =
                        if reply.is_fenced || lifecycle.want_shut_down.load(Ordering::Relaxed) {
                            // Catching up, or shutting down: ask again soon.
                            Duration::from_millis(100)
                        } else {
                            interval
                        };
                    tokio::time::sleep(wait).await;
                }
                Err(Failure::Retry(why)) => {
                    tracing::debug!(why, "heartbeat failed; retrying");
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
                Err(Failure::Reregister(why)) => {
                    tracing::warn!(
                        why,
                        "the controller does not know this registration; registering again"
                    );
                    broker.set_broker_epoch(-1);
                    break;
                }
            }
        }
    }
}

/// Every advertised client listener, the one clients are told about first, as the
/// registration carries them (Kafka's BrokerRegistration lists every listener).
fn endpoints(broker: &Broker) -> Vec<BrokerEndpoint> {
    broker
        .config
        .advertised_endpoints
        .iter()
        .map(|(name, host, port)| BrokerEndpoint {
            name: name.clone(),
            host: host.clone(),
            port: *port,
            security_protocol: 0,
        })
        .collect()
}

async fn register(
    broker: &Arc<Broker>,
    client: &mut ControllerClient,
    incarnation_id: uuid::Uuid,
) -> Result<i64, Failure> {
    let req = BrokerRegistrationRequest {
        broker_id: broker.config.node_id,
        incarnation_id,
        listeners: endpoints(broker),
        rack: broker.config.rack.clone(),
        features: Vec::new(),
    };
    let leader = current_leader(broker)?;
    if leader == broker.config.node_id {
        return broker
            .controller_register(&req)
            .await
            .map_err(|e| Failure::Retry(e.to_string()));
    }
    let body = RequestKind::BrokerRegistration(
        WireRegistration::default()
            .with_broker_id(req.broker_id.into())
            .with_cluster_id(StrBytes::from_string(broker.image().cluster_id.clone()))
            .with_incarnation_id(incarnation_id)
            .with_rack(req.rack.clone().map(StrBytes::from_string))
            .with_listeners(
                req.listeners
                    .iter()
                    .map(|l| {
                        Listener::default()
                            .with_name(StrBytes::from_string(l.name.clone()))
                            .with_host(StrBytes::from_string(l.host.clone()))
                            .with_port(l.port)
                            .with_security_protocol(l.security_protocol)
                    })
                    .collect(),
            ),
    );
    let answer = client
        .exchange(
            broker,
            leader,
            ApiKey::BrokerRegistration,
            REGISTRATION_VERSION,
            &body,
        )
        .await?;
    let ResponseKind::BrokerRegistration(r) = answer else {
        return Err(Failure::Retry("unexpected response".into()));
    };
    match r.error_code {
        0 => Ok(r.broker_epoch),
        code => Err(Failure::Retry(format!("BrokerRegistration error {code}"))),
    }
}

async fn heartbeat(
    broker: &Arc<Broker>,
    client: &mut ControllerClient,
    lifecycle: &Lifecycle,
    broker_epoch: i64,
) -> Result<strata_kraft::cluster_control::BrokerHeartbeatReply, Failure> {
    let applied = broker.quorum().map_or(0, |q| q.status().applied_offset);
    let req = BrokerHeartbeatRequest {
        broker_id: broker.config.node_id,
        broker_epoch,
        // The last entry applied (Kafka's `lastAppliedOffset`), not the next one.
        current_metadata_offset: applied - 1,
        want_fence: false,
        want_shut_down: lifecycle.want_shut_down.load(Ordering::Relaxed),
    };
    let leader = current_leader(broker)?;
    if leader == broker.config.node_id {
        return broker
            .controller_heartbeat(&req)
            .await
            .map_err(|e| match e {
                ControllerError::Cluster(
                    ClusterControlError::StaleBrokerEpoch { .. }
                    | ClusterControlError::BrokerNotRegistered(_),
                ) => Failure::Reregister(e.to_string()),
                other => Failure::Retry(other.to_string()),
            });
    }
    let body = RequestKind::BrokerHeartbeat(
        WireHeartbeat::default()
            .with_broker_id(req.broker_id.into())
            .with_broker_epoch(req.broker_epoch)
            .with_current_metadata_offset(req.current_metadata_offset)
            .with_want_fence(req.want_fence)
            .with_want_shut_down(req.want_shut_down),
    );
    let answer = client
        .exchange(
            broker,
            leader,
            ApiKey::BrokerHeartbeat,
            HEARTBEAT_VERSION,
            &body,
        )
        .await?;
    let ResponseKind::BrokerHeartbeat(r) = answer else {
        return Err(Failure::Retry("unexpected response".into()));
    };
    if matches!(
        ResponseError::try_from_code(r.error_code),
        Some(ResponseError::StaleBrokerEpoch | ResponseError::BrokerIdNotRegistered)
    ) {
        return Err(Failure::Reregister(format!(
            "BrokerHeartbeat error {}",
            r.error_code
        )));
    }
    if r.error_code != 0 {
        return Err(Failure::Retry(format!(
            "BrokerHeartbeat error {}",
            r.error_code
        )));
    }
    Ok(strata_kraft::cluster_control::BrokerHeartbeatReply {
        is_caught_up: r.is_caught_up,
        is_fenced: r.is_fenced,
        in_controlled_shutdown: false,
        should_shut_down: r.should_shut_down,
    })
}

/// The quorum's leader as this node knows it.
pub(crate) fn current_leader(broker: &Broker) -> Result<i32, Failure> {
    let status = broker
        .quorum()
        .ok_or_else(|| Failure::Retry("the quorum has not started".into()))?
        .status();
    match status.leader {
        Some(l) if status.role == RoleKind::Leader || l.0 != broker.config.node_id => Ok(l.0),
        _ => Err(Failure::Retry("no controller known".into())),
    }
}

/// One connection to the active controller's listener.
#[derive(Default)]
pub(crate) struct ControllerClient {
    /// The node the connection goes to.
    node: Option<i32>,
    /// Made on the first exchange (its client id names this node); its correlation ids
    /// run on across reconnections.
    client: Option<PeerClient>,
}

/// Why one exchange with the controller failed.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    /// The quorum knows no address for the node.
    #[error("node {0} is not a voter")]
    NotAVoter(i32),
    /// Connecting, the exchange, or its time bound.
    #[error(transparent)]
    Peer(#[from] PeerError),
}

impl ControllerClient {
    pub(crate) async fn exchange(
        &mut self,
        broker: &Broker,
        node: i32,
        api: ApiKey,
        version: i16,
        body: &RequestKind,
    ) -> Result<ResponseKind, Failure> {
        let ControllerClient {
            node: connected_to,
            client,
        } = self;
        let client = client.get_or_insert_with(|| {
            PeerClient::new(
                format!("strata-broker-{}", broker.config.node_id),
                MAX_RESPONSE_BYTES,
            )
            .secured(broker.peers.controller.clone())
        });
        if *connected_to != Some(node) {
            client.disconnect();
        }
        let attempt = async {
            if !client.is_connected() {
                let (host, port) = broker
                    .quorum()
                    .and_then(|q| q.address_of(node))
                    .ok_or(ExchangeError::NotAVoter(node))?;
                client.connect((host.as_str(), port)).await?;
                *connected_to = Some(node);
            }
            Ok::<_, ExchangeError>(client.request(api, version, body).await?)
        };
        peer_client::within(REQUEST_TIMEOUT, attempt)
            .await
            .map_err(|e: ExchangeError| {
                client.disconnect();
                Failure::Retry(e.to_string())
            })
    }
}

/// Why AllocateProducerIds gave this broker no block.
#[derive(Debug, thiserror::Error)]
pub enum AllocateProducerIdsError {
    /// No answer in time, or the exchange failed (connection, framing, decoding).
    #[error("no answer from controller {node}: {why}")]
    Unreachable { node: i32, why: String },
    /// The controller answered an error (NOT_CONTROLLER, STALE_BROKER_EPOCH, ...).
    #[error("controller {node} answered error code {code}")]
    Refused { node: i32, code: i16 },
    /// The answer is no usable block (Kafka's `RPCProducerIdManager` checks the same).
    #[error("controller {node} answered an invalid block: start {start}, length {len}")]
    InvalidBlock { node: i32, start: i64, len: i32 },
}

impl AllocateProducerIdsError {
    /// Whether the controller never answered (a timeout or a lost connection), rather
    /// than refusing.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self, AllocateProducerIdsError::Unreachable { .. })
    }
}

/// Asks controller `node` for this broker's next block of producer ids (AllocateProducerIds,
/// KIP-730), with the epoch of the broker's registration, over a fresh [`ControllerClient`]
/// connection, bounded by the request timeout. A block holds 1000 ids, so the connection
/// costs nothing measurable per InitProducerId.
///
/// # Errors
///
/// [`AllocateProducerIdsError`]: unreachable, refused, or an unusable answer.
pub async fn request_producer_ids(
    broker: &Broker,
    node: i32,
    broker_epoch: i64,
) -> Result<ProducerIdsBlock, AllocateProducerIdsError> {
    let unreachable = |why: String| AllocateProducerIdsError::Unreachable { node, why };
    let body = RequestKind::AllocateProducerIds(
        AllocateProducerIdsRequest::default()
            .with_broker_id(broker.config.node_id.into())
            .with_broker_epoch(broker_epoch),
    );
    let mut client = ControllerClient::default();
    let answer = match client
        .exchange(
            broker,
            node,
            ApiKey::AllocateProducerIds,
            ALLOCATE_PRODUCER_IDS_VERSION,
            &body,
        )
        .await
    {
        Ok(answer) => answer,
        Err(Failure::Retry(why) | Failure::Reregister(why)) => return Err(unreachable(why)),
    };
    let ResponseKind::AllocateProducerIds(r) = answer else {
        return Err(unreachable("unexpected response".into()));
    };
    if r.error_code != 0 {
        return Err(AllocateProducerIdsError::Refused {
            node,
            code: r.error_code,
        });
    }
    let start = r.producer_id_start.0;
    let len = r.producer_id_len;
    if start < 0 || len <= 0 || start > i64::MAX - i64::from(len) {
        return Err(AllocateProducerIdsError::InvalidBlock { node, start, len });
    }
    Ok(ProducerIdsBlock {
        assigned_broker_id: broker.config.node_id,
        first_producer_id: start,
        size: i64::from(len),
    })
}
