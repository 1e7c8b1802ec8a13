//! One client connection.
//!
//! The read half decodes frames and processes requests in arrival order. Most requests are
//! answered inline; a request that may wait (a long-polling fetch) runs in a task of its own,
//! so the requests behind it keep being processed (ARCHITECTURE.md decision 7). Either way its
//! response slot is queued in order, and the write half sends the slots strictly in request
//! order, because clients pipeline and match responses by position.
//!
//! A Fetch response arrives as a plan (ARCHITECTURE.md decision 4): encoded bytes go out with
//! `write_all`, record regions with `sendfile` straight from the page cache. The non-blocking
//! socket may take part of a region; the loop resumes from the bytes already sent. Where
//! `sendfile` is unsupported (or `STRATA_ZERO_COPY=0` is set, for comparisons), regions are
//! read with `pread` and written instead.
//!
//! # Back-pressure
//!
//! What one broker holds for its clients is bounded in three ways:
//!
//! - **Request bytes, broker-wide** (`crate::broker::request_memory`, Kafka's `queued.max.request.bytes`,
//!   KIP-72). Once a frame's size prefix is read, the connection takes the frame's size from
//!   the budget *before* it reserves a buffer for the body or reads any of it. While the
//!   budget is exhausted the connection simply does not read: the kernel's socket buffers
//!   fill and TCP flow control stops the client. The bytes go back when the request has been
//!   handled (see `Lease`), and the next waiting connection reads on.
//! - **Request bytes, per connection.** A connection handles its frames one at a time, so
//!   its read side holds at most one frame body plus those of its parked requests (Fetch,
//!   JoinGroup, SyncGroup: small frames, at most `MAX_IN_FLIGHT` of them). Its read buffer
//!   is a fixed `READ_BUF` bytes: every frame is copied or read into an allocation of its
//!   own, so no request keeps a slice of a shared buffer alive. (The budget counts frames,
//!   not copies made of them: the produce handler copies a record set before appending it,
//!   so while produces are appended the peak is up to twice the budget.)
//! - **Responses, per connection**: at most `MAX_IN_FLIGHT` slots wait for the writer. A
//!   Fetch slot holds its encoded header bytes and file *regions*, not record bytes (the
//!   copying fallback reads at most 1 MiB of a region at a time). The other slots hold
//!   encoded responses, which are small except Metadata, DescribeConfigs and the group
//!   listings, whose size grows with the cluster (topics, configs, groups), not with what the
//!   client sends. So a client that stops reading pins at most 64 such responses, and the
//!   connection stops reading its requests (the channel is full) instead of buffering more.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use strata_protocol::codec::{self, Decoded};
use strata_protocol::fetch_plan::{Piece, ResponsePlan};
use strata_protocol::frame;
use strata_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use strata_protocol::versions::ListenerType;
use strata_storage::{FileRegion, sendfile};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::broker::request_memory::{Lease, LeasedFrame, Owner};
use crate::quorum::QuorumHandle;
use crate::security::ListenerSecurity;
use crate::security::ktls::{self, RecordReader};
use crate::security::sasl::{Authenticator, Gate, TokenOutcome};
use crate::server::handlers::{self, RequestContext};

/// Requests one connection may have in flight before the broker stops reading from it. This
/// bounds the responses one client can pin (see the module docs); librdkafka pipelines at
/// most `max.in.flight` (5 by default) per connection.
const MAX_IN_FLIGHT: usize = 64;

/// The per-connection read buffer. Size prefixes and small pipelined requests arrive here;
/// a frame's body is copied out of it, or read past it straight into the body's own buffer.
const READ_BUF: usize = 64 * 1024;

/// A response slot, in request order.
pub enum Slot {
    /// The response is ready.
    Ready(Bytes),
    /// The request takes no response (Produce with acks=0).
    NoResponse,
    /// The response is being computed by another task; `None` closes the connection.
    Pending(JoinHandle<Option<Bytes>>),
    /// A Fetch response being computed: encoded bytes around file regions.
    PendingPlan(JoinHandle<Option<ResponsePlan<FileRegion>>>),
    /// The request cannot be answered: close the connection once the earlier responses are out.
    Close,
}

/// Serves one client connection until the client closes it or sends a frame that cannot be
/// answered.
pub async fn serve(broker: Arc<Broker>, stream: TcpStream, peer: SocketAddr) {
    serve_on(
        broker,
        stream,
        peer,
        ListenerType::Broker,
        None,
        None,
        Arc::new(ListenerSecurity::plaintext()),
    )
    .await;
}

/// How long a client may take over its TLS handshake before the connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The connection's read side: the socket's, or the TLS session's.
type Reader = Box<dyn AsyncRead + Unpin + Send>;

/// The connection's write side. Plain sockets send file regions with `sendfile`, and so do
/// TLS sessions whose keys the kernel holds (kTLS, `crate::security::ktls`); a session
/// that stays in rustls encrypts in user space, so its regions are read and written
/// (ARCHITECTURE.md decision 4).
pub enum Writer {
    Plain(OwnedWriteHalf),
    Ktls(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<tokio_rustls::server::TlsStream<RecordReader>>),
}

impl Writer {
    async fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Writer::Plain(w) | Writer::Ktls(w) => w.write_all(b).await,
            Writer::Tls(w) => w.write_all(b).await,
        }
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        match self {
            Writer::Plain(w) | Writer::Ktls(w) => w.shutdown().await,
            Writer::Tls(w) => w.shutdown().await,
        }
    }
}

/// The TLS handshake of a connection on an SSL or SASL_SSL listener, and the principal of
/// the client certificate it presented. `None` drops the connection (logged): the
/// handshake failed (a plaintext client, garbage, an untrusted or expired certificate) or
/// timed out, or no `ssl.principal.mapping.rules` rule maps the certificate's name.
async fn tls_accept(
    security: &ListenerSecurity,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<(
    tokio_rustls::server::TlsStream<RecordReader>,
    Option<String>,
)> {
    let config = security.tls.as_ref()?.current();
    // A TLS client opens with a handshake record (content type 22). Anything else, most
    // often a plaintext Kafka client whose first bytes are a size prefix, is closed at once
    // instead of waiting for a record as long as that prefix claims.
    let mut first = [0u8; 1];
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == 22 => {}
        Ok(Ok(1)) => {
            tracing::info!(%peer, first_byte = first[0], "closing connection: not a TLS handshake (a plaintext client on a TLS listener?)");
            return None;
        }
        Ok(_) => return None,
        Err(_) => {
            tracing::info!(%peer, "closing connection: no TLS handshake in time");
            return None;
        }
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    // Read record by record, so that the session can be handed to the kernel afterwards.
    let stream = RecordReader::new(stream);
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::info!(%peer, error = %e, "closing connection: TLS handshake failed");
            return None;
        }
        Err(_) => {
            tracing::info!(%peer, "closing connection: TLS handshake timed out");
            return None;
        }
    };
    let cert = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.as_ref().to_vec());
    let principal = match cert {
        Some(der) => match security.certificate_principal(&der) {
            Some(p) => Some(p),
            None => {
                tracing::info!(%peer, "closing connection: no ssl.principal.mapping.rules rule maps the client certificate's name");
                return None;
            }
        },
        None => None,
    };
    Some((tls, principal))
}

/// Serves one connection accepted on a listener of type `listener`. A connection on a
/// controller listener (`controller.listener.names`) is decoded against the controller's
/// API table and answered by [`controller_slot`] (the quorum RPCs by `quorum`); one on a
/// client listener, against the clients' table
/// and by the handlers. TLS and SASL are as the listener's `security` says.
pub async fn serve_on(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    listener: ListenerType,
    listener_name: Option<Arc<str>>,
    quorum: Option<QuorumHandle>,
    security: Arc<ListenerSecurity>,
) {
    let _open = crate::metrics::connection_opened();
    let _serving = crate::server::drain::serving();
    let _ = stream.set_nodelay(true);
    let mut principal: Arc<str> = Arc::from(crate::security::principal::ANONYMOUS);
    let (mut rd, wr): (Reader, Writer) = if security.tls.is_some() {
        let Some((tls, cert_principal)) = tls_accept(&security, stream, peer).await else {
            return;
        };
        if let Some(p) = cert_principal {
            principal = Arc::from(p);
        }
        let cipher = tls.get_ref().1.negotiated_cipher_suite().map(|s| s.suite());
        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, ktls::offload(tls))
            .await
            .unwrap_or_else(|_| Err(io::Error::other("the client stopped inside a TLS record")))
        {
            Ok(ktls::Offload::Kernel(stream, early)) => {
                tracing::debug!(%peer, ?cipher, "kernel TLS session: fetches keep sendfile");
                let (r, w) = stream.into_split();
                (Box::new(ktls::KtlsReader::new(r, early)), Writer::Ktls(w))
            }
            Ok(ktls::Offload::UserSpace(tls)) => {
                let (r, w) = tokio::io::split(*tls);
                (Box::new(r), Writer::Tls(w))
            }
            Err(e) => {
                tracing::warn!(%peer, ?cipher, error = %e, "closing connection: its TLS session could not be handed to the kernel");
                return;
            }
        }
    } else {
        let (r, w) = stream.into_split();
        (Box::new(r), Writer::Plain(w))
    };
    let mut auth = security.sasl.clone().map(Authenticator::new);
    let (tx, rx) = mpsc::channel::<(Slot, Lease)>(MAX_IN_FLIGHT);
    let writer = tokio::spawn(write_responses(broker.clone(), wr, rx, peer));
    let mut buf = BytesMut::with_capacity(READ_BUF);
    let mute = Arc::new(crate::server::client_quotas::Mute::default());
    loop {
        // KIP-219: a connection a quota throttled reads nothing until its mute is over, so
        // it holds no more than it had read (TCP flow control stops the client). At
        // shutdown the connection stops reading (a frame half read is dropped with it) and
        // closes once the requests it holds are answered (`crate::server::drain`).
        let next = tokio::select! {
            biased;
            () = crate::server::drain::begun() => None,
            next = async {
                mute.wait().await;
                let owner = Owner::of(&principal, peer);
                read_frame(&broker, &mut rd, &mut buf, peer, owner).await
            } => next,
        };
        let Some((body, lease)) = next else { break };
        let mut close_after = false;
        let slot = if let Some(a) = auth.as_mut().filter(|a| a.expects_raw_token()) {
            // SaslHandshake v0: the token is the whole frame, and so is the answer.
            let (slot, close) = raw_token_slot(&broker, a, &body, peer);
            close_after = close;
            slot
        } else {
            match codec::decode_request_on(listener, body) {
                Ok(Decoded::Request(req)) => {
                    let gate = auth
                        .as_ref()
                        .map_or(Gate::Serve, |a| a.gate(req.api_key, crate::now_ms()));
                    match gate {
                        Gate::Close(why) => {
                            tracing::info!(%peer, api = ?req.api_key, reason = why, "closing connection");
                            break;
                        }
                        Gate::Sasl => {
                            let a = auth
                                .as_mut()
                                .expect("a gate other than Serve has an authenticator");
                            let (slot, close) = sasl_slot(&broker, a, *req, peer);
                            close_after = close;
                            if let Some(p) = a.principal() {
                                principal = Arc::from(p);
                            }
                            slot
                        }
                        // SASL requests on a listener without SASL are answered
                        // ILLEGAL_SASL_STATE by the dispatch, on either listener.
                        Gate::Serve
                            if listener == ListenerType::Controller
                                && !matches!(
                                    req.api_key,
                                    ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
                                ) =>
                        {
                            controller_slot(
                                &broker,
                                *req,
                                peer,
                                listener_name.clone(),
                                quorum.as_ref(),
                                &principal,
                            )
                        }
                        Gate::Serve => {
                            let mut ctx = RequestContext::new(
                                broker.clone(),
                                &req.header,
                                req.api_key,
                                Some(peer),
                                listener_name.clone(),
                            );
                            ctx.mute = Some(mute.clone());
                            ctx.principal = principal.clone();
                            crate::server::forward::adopt_forwarded_identity(&mut ctx);
                            handlers::dispatch(ctx, req.body).await
                        }
                    }
                }
                Ok(Decoded::ApiVersionsTooNew { correlation_id }) => Slot::Ready(
                    codec::encode_api_versions_fallback_for(listener, correlation_id),
                ),
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: cannot answer request");
                    break;
                }
            }
        };
        // Handled inline: the budget goes back now. A task keeps it until it ends (or until
        // the writer has its result), so a parked fetch counts while it holds its request.
        let lease = match slot {
            Slot::Pending(_) | Slot::PendingPlan(_) => lease,
            Slot::Ready(_) | Slot::NoResponse | Slot::Close => {
                lease.release();
                Lease::default()
            }
        };
        // Nothing after a Close is answered: stop reading, so the socket closes once the
        // responses before it are out.
        let closing = matches!(slot, Slot::Close);
        // Waits while MAX_IN_FLIGHT responses are queued: the per-connection bound.
        if tx.send((slot, lease)).await.is_err() || closing {
            break; // the writer has gone (the socket is closed), or is closing it
        }
        if close_after {
            // A SASL refusal: its answer goes out, then the connection closes.
            let _ = tx.send((Slot::Close, Lease::default())).await;
            break;
        }
    }
    drop(tx);
    // Responses already queued still go out, then the writer closes the socket.
    let _ = writer.await;
}

/// Answers SaslHandshake or SaslAuthenticate on a SASL listener; true closes the
/// connection once the answer is out (Kafka's behaviour after a refusal).
fn sasl_slot(
    broker: &Broker,
    auth: &mut Authenticator,
    req: codec::Request,
    peer: SocketAddr,
) -> (Slot, bool) {
    use strata_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
    use strata_protocol::{ResponseError, StrBytes};
    let version = req.header.request_api_version;
    let encode = |body: ResponseKind| {
        codec::encode_response(req.api_key, version, req.header.correlation_id, &body)
            .map_or(Slot::Close, Slot::Ready)
    };
    match req.body {
        RequestKind::SaslHandshake(h) => {
            let out = auth.handshake(version, &h.mechanism);
            if out.close {
                tracing::info!(%peer, mechanism = %h.mechanism.as_str(), error_code = out.error_code, "SASL handshake refused");
            }
            let body = SaslHandshakeResponse::default()
                .with_error_code(out.error_code)
                .with_mechanisms(
                    out.mechanisms
                        .into_iter()
                        .map(StrBytes::from_static_str)
                        .collect(),
                );
            (encode(ResponseKind::SaslHandshake(body)), out.close)
        }
        RequestKind::SaslAuthenticate(a) => {
            let (body, close) = match exchange_token(broker, auth, &a.auth_bytes) {
                TokenOutcome::Challenge(c) => (
                    SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(c)),
                    false,
                ),
                TokenOutcome::Authenticated {
                    reply,
                    session_lifetime_ms,
                } => {
                    tracing::debug!(%peer, principal = auth.principal().unwrap_or(""), "SASL authenticated");
                    (
                        SaslAuthenticateResponse::default()
                            .with_auth_bytes(Bytes::from(reply))
                            .with_session_lifetime_ms(session_lifetime_ms),
                        false,
                    )
                }
                TokenOutcome::Failed(message) => (
                    SaslAuthenticateResponse::default()
                        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                        .with_error_message(Some(StrBytes::from_string(message))),
                    true,
                ),
                TokenOutcome::OutOfPlace(message) => (
                    SaslAuthenticateResponse::default()
                        .with_error_code(ResponseError::IllegalSaslState.code())
                        .with_error_message(Some(StrBytes::from_string(message))),
                    false,
                ),
            };
            (encode(ResponseKind::SaslAuthenticate(body)), close)
        }
        _ => (Slot::Close, true),
    }
}

/// One token of a SASL exchange, SCRAM credentials looked up in the metadata image, with
/// the outcome counted (Kafka's successful- and failed-authentication totals) whichever way
/// the token came.
fn exchange_token(broker: &Broker, auth: &mut Authenticator, token: &[u8]) -> TokenOutcome {
    let image = broker.image();
    let outcome = auth.token(token, crate::now_ms(), |user, m| {
        image.scram.users.get(user)?.get(&m.type_id()).cloned()
    });
    match outcome {
        TokenOutcome::Authenticated { .. } => crate::metrics::authentication_succeeded(),
        TokenOutcome::Failed(_) => crate::metrics::authentication_failed(),
        TokenOutcome::Challenge(_) | TokenOutcome::OutOfPlace(_) => {}
    }
    outcome
}

/// A bare token after SaslHandshake v0: the answer is a bare size-prefixed frame. A
/// failure closes the connection without an answer, as Kafka does for v0 clients.
fn raw_token_slot(
    broker: &Broker,
    auth: &mut Authenticator,
    token: &[u8],
    peer: SocketAddr,
) -> (Slot, bool) {
    let reply = match exchange_token(broker, auth, token) {
        TokenOutcome::Challenge(c) => c,
        TokenOutcome::Authenticated { reply, .. } => reply,
        TokenOutcome::Failed(message) | TokenOutcome::OutOfPlace(message) => {
            tracing::info!(%peer, %message, "closing connection: SASL authentication failed");
            return (Slot::Close, true);
        }
    };
    let mut framed = BytesMut::with_capacity(4 + reply.len());
    framed.put_i32(i32::try_from(reply.len()).unwrap_or(i32::MAX));
    framed.extend_from_slice(&reply);
    (Slot::Ready(framed.freeze()), false)
}

/// Answers a request decoded on a controller listener. ApiVersions lists the controller's
/// APIs (`versions::CONTROLLER_APIS`), as Kafka's controller does on its listener. With the
/// quorum running, Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot go to its
/// driver, which answers with the core's response (or closes the connection when the core
/// gives none), DescribeQuorum is answered from the core, AddRaftVoter and RemoveRaftVoter
/// (KIP-853) change the voter set through the leader's core, and the metadata writes that
/// brokers forward are answered by their handlers ([`handlers::controller_write`]). The other controller RPCs,
/// and the quorum RPCs on a node without a quorum driver, decode but have no handler yet,
/// so their connection is closed, which is what a Kafka node does with a request it does
/// not serve on a listener (its `SocketServer` refuses the header and closes the
/// connection); client APIs never get this far (the decoder refuses them).
fn controller_slot(
    broker: &Arc<Broker>,
    req: codec::Request,
    peer: SocketAddr,
    listener_name: Option<Arc<str>>,
    quorum: Option<&QuorumHandle>,
    principal: &Arc<str>,
) -> Slot {
    let version = req.header.request_api_version;
    let correlation_id = req.header.correlation_id;
    let api_key = req.api_key;
    let mut ctx = RequestContext::new(
        broker.clone(),
        &req.header,
        api_key,
        Some(peer),
        listener_name,
    );
    ctx.principal = principal.clone();
    let encode = move |body: &ResponseKind| match codec::encode_response(
        api_key,
        version,
        correlation_id,
        body,
    ) {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::error!(%peer, error = %e, "response encoding failed");
            None
        }
    };
    // Kafka's `ControllerApis`: the nodes' own RPCs need CLUSTER_ACTION on the cluster
    // (a voter set change, ALTER; DescribeQuorum, DESCRIBE), and are answered
    // CLUSTER_AUTHORIZATION_FAILED without it.
    if let Some(refusal) = cluster_refusal(&ctx, api_key) {
        tracing::info!(%peer, principal = %principal, api = ?api_key, "refused: not authorized on the cluster");
        return encode(&refusal).map_or(Slot::Close, Slot::Ready);
    }
    match (api_key, quorum) {
        (ApiKey::ApiVersions, _) => {
            let body = ResponseKind::ApiVersions(codec::api_versions_body_for(
                ListenerType::Controller,
                0,
            ));
            encode(&body).map_or(Slot::Close, Slot::Ready)
        }
        (
            ApiKey::Vote
            | ApiKey::BeginQuorumEpoch
            | ApiKey::EndQuorumEpoch
            | ApiKey::Fetch
            | ApiKey::FetchSnapshot,
            Some(quorum),
        ) => {
            let quorum = quorum.clone();
            Slot::Pending(tokio::spawn(async move {
                let body = quorum.request(&req.body).await?;
                encode(&body)
            }))
        }
        (ApiKey::BrokerRegistration | ApiKey::BrokerHeartbeat, Some(_)) => {
            // The active controller's answer waits for its records to commit.
            let broker = broker.clone();
            Slot::Pending(tokio::spawn(async move {
                let body = match &req.body {
                    RequestKind::BrokerRegistration(r) => ResponseKind::BrokerRegistration(
                        handlers::broker_registration::handle(&broker, r).await,
                    ),
                    RequestKind::BrokerHeartbeat(r) => ResponseKind::BrokerHeartbeat(
                        handlers::broker_heartbeat::handle(&broker, r).await,
                    ),
                    _ => return None,
                };
                encode(&body)
            }))
        }
        (ApiKey::AllocateProducerIds, Some(_)) => {
            // The active controller answers once the ProducerIdsRecord has committed.
            let broker = broker.clone();
            Slot::Pending(tokio::spawn(async move {
                let RequestKind::AllocateProducerIds(r) = &req.body else {
                    return None;
                };
                encode(&ResponseKind::AllocateProducerIds(
                    handlers::allocate_producer_ids::handle(&broker, r).await,
                ))
            }))
        }
        (ApiKey::AlterPartition, Some(_)) => {
            // The active controller answers once the partition changes have committed.
            let broker = broker.clone();
            Slot::Pending(tokio::spawn(async move {
                let RequestKind::AlterPartition(r) = &req.body else {
                    return None;
                };
                encode(&ResponseKind::AlterPartition(
                    handlers::alter_partition::handle(&broker, version, r).await,
                ))
            }))
        }
        (
            ApiKey::CreateTopics
            | ApiKey::DeleteTopics
            | ApiKey::CreatePartitions
            | ApiKey::ElectLeaders
            | ApiKey::AlterConfigs
            | ApiKey::IncrementalAlterConfigs
            | ApiKey::AlterPartitionReassignments
            | ApiKey::ListPartitionReassignments
            | ApiKey::AlterClientQuotas
            | ApiKey::AlterUserScramCredentials
            | ApiKey::CreateAcls
            | ApiKey::DeleteAcls,
            Some(_),
        ) => {
            // A broker forwarding to a dedicated controller (or an admin client that
            // bootstraps at a controller, KIP-919).
            crate::server::forward::adopt_forwarded_identity(&mut ctx);
            handlers::controller_write(ctx, req.body)
        }
        (ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter, Some(quorum)) => {
            // KIP-853: the leader adds or removes a voter; the answer waits for the commit.
            let quorum = quorum.clone();
            let names = broker.config.controller_listener_names.clone();
            Slot::Pending(tokio::spawn(async move {
                let body = match &req.body {
                    RequestKind::AddRaftVoter(r) => quorum.add_voter(r, &names).await,
                    RequestKind::RemoveRaftVoter(r) => quorum.remove_voter(r).await,
                    _ => return None,
                };
                encode(&body)
            }))
        }
        (ApiKey::DescribeQuorum, Some(quorum)) => {
            let quorum = quorum.clone();
            Slot::Pending(tokio::spawn(async move {
                let body = quorum.describe(version).await;
                encode(&body)
            }))
        }
        (other, _) => {
            tracing::warn!(%peer, api = ?other, version, "closing controller connection: the controller quorum does not serve this API yet");
            Slot::Close
        }
    }
}

/// The answer to a node RPC on the controller listener whose principal may not perform it
/// on the cluster; `None` when it may (or the API is not one of them).
fn cluster_refusal(ctx: &RequestContext, api: ApiKey) -> Option<ResponseKind> {
    use strata_kraft::acl::AclOperation;
    use strata_protocol::messages as m;
    let operation = match api {
        ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter => AclOperation::Alter,
        ApiKey::DescribeQuorum => AclOperation::Describe,
        ApiKey::Vote
        | ApiKey::BeginQuorumEpoch
        | ApiKey::EndQuorumEpoch
        | ApiKey::Fetch
        | ApiKey::FetchSnapshot
        | ApiKey::BrokerRegistration
        | ApiKey::BrokerHeartbeat
        | ApiKey::AllocateProducerIds
        | ApiKey::AlterPartition
        | ApiKey::UpdateRaftVoter => AclOperation::ClusterAction,
        _ => return None,
    };
    if ctx.authorize_cluster(operation) {
        return None;
    }
    let code = strata_protocol::ResponseError::ClusterAuthorizationFailed.code();
    Some(match api {
        ApiKey::AddRaftVoter => {
            ResponseKind::AddRaftVoter(m::AddRaftVoterResponse::default().with_error_code(code))
        }
        ApiKey::RemoveRaftVoter => ResponseKind::RemoveRaftVoter(
            m::RemoveRaftVoterResponse::default().with_error_code(code),
        ),
        ApiKey::UpdateRaftVoter => ResponseKind::UpdateRaftVoter(
            m::UpdateRaftVoterResponse::default().with_error_code(code),
        ),
        ApiKey::DescribeQuorum => {
            ResponseKind::DescribeQuorum(m::DescribeQuorumResponse::default().with_error_code(code))
        }
        ApiKey::Vote => ResponseKind::Vote(m::VoteResponse::default().with_error_code(code)),
        ApiKey::BeginQuorumEpoch => ResponseKind::BeginQuorumEpoch(
            m::BeginQuorumEpochResponse::default().with_error_code(code),
        ),
        ApiKey::EndQuorumEpoch => {
            ResponseKind::EndQuorumEpoch(m::EndQuorumEpochResponse::default().with_error_code(code))
        }
        ApiKey::Fetch => ResponseKind::Fetch(m::FetchResponse::default().with_error_code(code)),
        ApiKey::FetchSnapshot => {
            ResponseKind::FetchSnapshot(m::FetchSnapshotResponse::default().with_error_code(code))
        }
        ApiKey::BrokerRegistration => ResponseKind::BrokerRegistration(
            m::BrokerRegistrationResponse::default().with_error_code(code),
        ),
        ApiKey::BrokerHeartbeat => ResponseKind::BrokerHeartbeat(
            m::BrokerHeartbeatResponse::default().with_error_code(code),
        ),
        ApiKey::AllocateProducerIds => ResponseKind::AllocateProducerIds(
            m::AllocateProducerIdsResponse::default().with_error_code(code),
        ),
        _ => {
            ResponseKind::AlterPartition(m::AlterPartitionResponse::default().with_error_code(code))
        }
    })
}

/// How far behind a pace of [`FRAME_MIN_RATE`] a frame's body may fall once its size is
/// known and its memory taken: by `FRAME_GRACE + n / FRAME_MIN_RATE` after the memory was
/// taken, more than the body's first `n` bytes must have arrived, at every `n`. So a client
/// that stalls mid-frame, or trickles it, holds its share of `queued.max.request.bytes` for
/// about this grace (then its connection is closed and the memory comes back), however
/// large a size it announced and whatever `connections.max.idle.ms` says; a whole body
/// takes at most the grace plus its size at the minimum rate.
const FRAME_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The slowest a frame's body may arrive on average, in bytes per second (see
/// [`FRAME_GRACE`]).
const FRAME_MIN_RATE: u64 = 1 << 20;

/// When more than `have` bytes of a body whose memory was taken at `start` must be in (see
/// [`FRAME_GRACE`]).
fn frame_due(start: tokio::time::Instant, have: usize) -> tokio::time::Instant {
    start + FRAME_GRACE + std::time::Duration::from_millis(have as u64 * 1000 / FRAME_MIN_RATE)
}

/// Reads the next frame: its body and its share of the request budget. `None` ends the
/// connection (the client closed it, a read failed, the size prefix is invalid, nothing
/// arrived for `connections.max.idle.ms`, or the body did not arrive by its deadline;
/// logged).
async fn read_frame(
    broker: &Broker,
    rd: &mut Reader,
    buf: &mut BytesMut,
    peer: SocketAddr,
    owner: Owner,
) -> Option<(Bytes, Lease)> {
    let max = broker.config.socket_request_max_bytes;
    let idle = std::time::Duration::from_millis(broker.config.connections_max_idle_ms);
    let prefix = async {
        while buf.len() < frame::SIZE_PREFIX_LEN {
            // `buf` is never shared (bodies are copied out), so this reuses its allocation.
            buf.reserve(READ_BUF - buf.len());
            if !read_some(rd, buf, peer, buf.len()).await {
                return false;
            }
        }
        true
    };
    match tokio::time::timeout(idle, prefix).await {
        Ok(true) => {}
        Ok(false) => return None,
        Err(_) => {
            tracing::info!(%peer, idle_ms = broker.config.connections_max_idle_ms, "closing idle connection (connections.max.idle.ms)");
            return None;
        }
    }
    // `check` validates the size prefix against the cap before anything is allocated for it.
    if let Err(e) = frame::check(buf, max) {
        tracing::warn!(%peer, error = %e, "closing connection: bad frame");
        return None;
    }
    let len = usize::try_from(buf.get_i32()).ok()?; // checked: 8..=max

    // Back-pressure: no memory is reserved for the body, and none of it read, until the
    // budget admits it. Meanwhile the socket is not read at all.
    let lease = broker.request_memory.acquire(len, peer, owner).await;

    let mut body = BytesMut::with_capacity(len);
    let buffered = buf.len().min(len);
    body.extend_from_slice(&buf[..buffered]);
    buf.advance(buffered);
    let start = tokio::time::Instant::now();
    while body.len() < len {
        // Straight into the body, never past it: what follows belongs to the next frame,
        // which must wait for its own share of the budget.
        let have = body.len();
        let pending = frame::SIZE_PREFIX_LEN + have;
        let mut rest = (&mut body).limit(len - have);
        let read = read_some(rd, &mut rest, peer, pending);
        match tokio::time::timeout_at(frame_due(start, have), read).await {
            Ok(true) => {}
            Ok(false) => return None, // dropping `lease` returns the bytes
            Err(_) => {
                tracing::warn!(%peer, len, received = have, elapsed = ?start.elapsed(), "closing connection: a frame's body did not arrive in time (5 s behind 1 MiB/s)");
                crate::metrics::frame_timed_out();
                return None;
            }
        }
    }
    let body = Bytes::from_owner(LeasedFrame {
        body,
        lease: lease.clone(),
    });
    Some((body, lease))
}

/// One read from the socket into `dst`. False when the connection is over: end of stream
/// (logged if it cut a frame short, `pending` bytes in) or a read error.
async fn read_some<B: BufMut>(
    rd: &mut Reader,
    dst: &mut B,
    peer: SocketAddr,
    pending: usize,
) -> bool {
    match rd.read_buf(dst).await {
        Ok(0) => {
            if pending > 0 {
                tracing::info!(%peer, pending, "client disconnected mid-frame");
            }
            false
        }
        Ok(_) => true,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "read failed");
            false
        }
    }
}

async fn write_responses(
    broker: Arc<Broker>,
    mut wr: Writer,
    mut rx: mpsc::Receiver<(Slot, Lease)>,
    peer: SocketAddr,
) {
    while let Some((slot, lease)) = rx.recv().await {
        let plan = match slot {
            Slot::Ready(b) => ResponsePlan::from_bytes(b),
            Slot::NoResponse => continue,
            Slot::Pending(handle) => {
                let done = handle.await;
                lease.release(); // handled, whatever the task kept of its request
                match done {
                    Ok(Some(b)) => ResponsePlan::from_bytes(b),
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(%peer, error = %e, "request task failed; closing connection");
                        break;
                    }
                }
            }
            Slot::PendingPlan(handle) => {
                let done = handle.await;
                lease.release();
                match done {
                    Ok(Some(plan)) => plan,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(%peer, error = %e, "request task failed; closing connection");
                        break;
                    }
                }
            }
            Slot::Close => break,
        };
        if let Err(e) = write_plan(&broker, &mut wr, plan).await {
            // A failure mid-response leaves the stream unframed: the connection must close.
            tracing::debug!(%peer, error = %e, "write failed");
            break;
        }
    }
    // The connection is closing with requests still parked: their tasks run on (they may be
    // group operations), and each one's share of the budget goes back when it ends.
    rx.close();
    while let Some((slot, lease)) = rx.recv().await {
        match slot {
            Slot::Pending(handle) => drop(tokio::spawn(async move {
                let _ = handle.await;
                lease.release();
            })),
            Slot::PendingPlan(handle) => drop(tokio::spawn(async move {
                let _ = handle.await;
                lease.release();
            })),
            Slot::Ready(_) | Slot::NoResponse | Slot::Close => {}
        }
    }
    let _ = wr.shutdown().await;
}

/// Whether regions go out with `sendfile` (`STRATA_ZERO_COPY=0` turns it off, so a benchmark
/// can compare the copying path on the same build).
fn zero_copy_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("STRATA_ZERO_COPY").map_or(true, |v| v != "0"))
}

/// Writes one response: bytes with `write_all`, regions with `sendfile`.
async fn write_plan(
    broker: &Broker,
    wr: &mut Writer,
    plan: ResponsePlan<FileRegion>,
) -> io::Result<()> {
    for piece in plan.pieces {
        match piece {
            Piece::Bytes(b) => wr.write_all(&b).await?,
            // The segment's tail cache held the bytes (direct I/O): no file to read.
            Piece::Region(FileRegion {
                cached: Some(b), ..
            }) => {
                wr.write_all(&b).await?;
                crate::metrics::record_tail_cache_fetch(b.len() as u64);
            }
            Piece::Region(r) => {
                let sent = match wr {
                    Writer::Plain(w) if zero_copy_enabled() => {
                        let sent = send_region(w, &r).await?;
                        broker.zero_copy_bytes.fetch_add(sent, Ordering::Relaxed);
                        sent
                    }
                    Writer::Ktls(w) if zero_copy_enabled() => {
                        let sent = send_region(w, &r).await?;
                        crate::metrics::record_ktls_fetch(sent);
                        sent
                    }
                    _ => 0,
                };
                if sent < u64::from(r.len) {
                    let copied = copy_region(wr, &r, sent).await?;
                    if matches!(wr, Writer::Tls(_)) {
                        crate::metrics::record_tls_fetch(copied);
                    } else {
                        broker.copied_bytes.fetch_add(copied, Ordering::Relaxed);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Sends a region with `sendfile` on the non-blocking socket, resuming after partial writes.
/// Returns the bytes sent, which are short of the region only when `sendfile` is unsupported
/// here (the caller copies the rest).
async fn send_region(wr: &mut OwnedWriteHalf, r: &FileRegion) -> io::Result<u64> {
    let stream: &TcpStream = wr.as_ref();
    let len = u64::from(r.len);
    let mut sent = 0u64;
    // Bounded: each pass either moves at least one byte, waits for writability, or returns.
    while sent < len {
        stream.writable().await?;
        match stream.try_io(Interest::WRITABLE, || {
            sendfile::send_region(stream, r, sent)
        }) {
            Ok(n) => sent += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if sendfile::is_unsupported(&e) => {
                tracing::debug!(error = %e, "sendfile unsupported; copying the region");
                return Ok(sent);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// The fallback: `pread` the region after its first `from` bytes and write it, in chunks so
/// that one large region does not pin its whole length in memory.
async fn copy_region(wr: &mut Writer, r: &FileRegion, from: u64) -> io::Result<u64> {
    const CHUNK: u32 = 1 << 20;
    let mut done = from;
    let len = u64::from(r.len);
    let mut buf = Vec::new();
    while done < len {
        let n = u32::try_from((len - done).min(u64::from(CHUNK))).unwrap_or(CHUNK);
        let part = FileRegion {
            file: r.file.clone(),
            position: r.position + done,
            len: n,
            cached: None,
        };
        buf.clear();
        part.read_into(&mut buf)?;
        wr.write_all(&buf).await?;
        done += u64::from(n);
    }
    Ok(len - from)
}
