//! The one client this node runs against another Kafka-speaking node: the quorum peers
//! (Raft requests, KIP-853 membership), the controller client (registration, heartbeats,
//! AlterPartition, AllocateProducerIds), forwarding to the controller, and the replica
//! fetcher; [`blocking`] is the same exchange for the command-line clients (`strata admin`,
//! `strata healthcheck`).
//!
//! One exchange is: encode the request ([`codec::encode_request`]) under the next
//! correlation id, write the frame, read the size-prefixed answer, decode it, and check that
//! it carries the correlation id sent. A peer is trusted no more than a client: its size
//! prefix is checked against the caller's cap before anything is allocated.
//!
//! A connection that fails, or whose exchange is abandoned (a timeout around it), is never
//! used again: the stream is taken out for the exchange and put back only once the answer
//! is read and checked. What the caller does next (retry, reconnect, back off, report the
//! peer lost) is the caller's: [`PeerError`] says what happened.
//!
//! A secured route ([`PeerSecurity`], from `crate::security::peer`) is taken on connect:
//! the TLS handshake, verifying the peer's certificate, then SaslHandshake and
//! SaslAuthenticate with the route's login (PLAIN, or SCRAM with the server's signature
//! checked). A session the server gave a lifetime (KIP-368's `connections.max.reauth.ms`)
//! counts as disconnected once 90% of it has passed, so that the caller's next exchange
//! opens and authenticates a new connection before the server would cut this one off.
//!
//! This is a base layer: it knows the wire and nothing of the node.

pub mod blocking;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strata_protocol::codec;
use strata_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

use crate::security::peer::{Login, PeerSecurity};

/// Why an exchange with a peer failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// No answer within the call's time bound.
    #[error("timed out")]
    Timeout,
    /// The peer closed the connection (end of stream, reset, broken pipe).
    #[error("the peer closed the connection")]
    Closed,
    /// A request on a client that is not connected.
    #[error("not connected")]
    NotConnected,
    /// Any other I/O error (connecting included).
    #[error(transparent)]
    Io(std::io::Error),
    /// The answer's size prefix is negative, too small for a response header, or above the
    /// caller's cap; nothing was allocated for it.
    #[error("response size {size} is out of range (at most {max} bytes)")]
    BadFrame { size: i32, max: usize },
    /// The request could not be encoded (a bug on this side).
    #[error(transparent)]
    Encode(#[from] codec::EncodeError),
    /// The answer does not decode as a response to the request sent.
    #[error(transparent)]
    Decode(#[from] codec::DecodeError),
    /// The answer carries another correlation id than the request's.
    #[error("the response carries correlation id {got}, expected {expected}")]
    CorrelationMismatch { expected: i32, got: i32 },
    /// The TLS handshake or the SASL login failed.
    #[error("authentication failed: {0}")]
    Authentication(String),
}

impl From<std::io::Error> for PeerError {
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind;
        match e.kind() {
            ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe => PeerError::Closed,
            // A blocking socket's read or write timeout.
            ErrorKind::WouldBlock | ErrorKind::TimedOut => PeerError::Timeout,
            _ => PeerError::Io(e),
        }
    }
}

impl PeerError {
    /// Whether the connection itself failed (closed, an I/O error, a frame that cannot be
    /// read), as opposed to an answer that was read whole but is wrong, a timeout, or a
    /// request that could not be encoded.
    #[must_use]
    pub fn is_connection_failure(&self) -> bool {
        matches!(
            self,
            PeerError::Closed
                | PeerError::Io(_)
                | PeerError::BadFrame { .. }
                | PeerError::Authentication(_)
        )
    }
}

/// How an answer is decoded: which listener's APIs the request may name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Decoding {
    /// [`codec::decode_response`]: the controller listener's and the inter-node APIs.
    #[default]
    Peer,
    /// [`codec::decode_forwarded_response`]: the APIs forwarded to the controller.
    Forwarded,
    /// [`codec::decode_client_response`]: any API a client may send.
    Client,
}

impl Decoding {
    fn decode(
        self,
        api: ApiKey,
        version: i16,
        frame: Bytes,
    ) -> Result<codec::Response, codec::DecodeError> {
        match self {
            Decoding::Peer => codec::decode_response(api, version, frame),
            Decoding::Forwarded => codec::decode_forwarded_response(api, version, frame),
            Decoding::Client => codec::decode_client_response(api, version, frame),
        }
    }
}

/// The frame length a size prefix announces, if it is one a response can have: at least a
/// correlation id, at most `max`.
fn frame_len(size: i32, max: usize) -> Result<usize, PeerError> {
    usize::try_from(size)
        .ok()
        .filter(|&n| (4..=max).contains(&n))
        .ok_or(PeerError::BadFrame { size, max })
}

/// Decodes `frame` as the answer to correlation id `expected`.
fn check_answer(
    decoding: Decoding,
    api: ApiKey,
    version: i16,
    expected: i32,
    frame: Bytes,
) -> Result<ResponseKind, PeerError> {
    let response = decoding.decode(api, version, frame)?;
    if response.correlation_id != expected {
        return Err(PeerError::CorrelationMismatch {
            expected,
            got: response.correlation_id,
        });
    }
    Ok(response.body)
}

/// Runs `exchange` within `timeout`; [`PeerError::Timeout`] when it takes longer (the
/// exchange is abandoned, and its connection with it). The exchange's error may be the
/// caller's own, as long as a [`PeerError`] converts into it.
///
/// # Errors
///
/// The exchange's error, or [`PeerError::Timeout`].
pub async fn within<T, E: From<PeerError>>(
    timeout: Duration,
    exchange: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| Err(PeerError::Timeout.into()))
}

/// [`within`] with a deadline.
///
/// # Errors
///
/// The exchange's error, or [`PeerError::Timeout`].
pub async fn until<T, E: From<PeerError>>(
    deadline: tokio::time::Instant,
    exchange: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    tokio::time::timeout_at(deadline, exchange)
        .await
        .unwrap_or_else(|_| Err(PeerError::Timeout.into()))
}

/// A peer's address: what to connect to, and the host name its TLS certificate must carry.
pub trait PeerAddr: ToSocketAddrs {
    /// The host, without the port.
    fn host(&self) -> String;
}

impl PeerAddr for (&str, u16) {
    fn host(&self) -> String {
        self.0.to_owned()
    }
}

/// `host:port`, or `[v6]:port`.
impl PeerAddr for &str {
    fn host(&self) -> String {
        self.rsplit_once(':')
            .map_or(*self, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned()
    }
}

impl PeerAddr for std::net::SocketAddr {
    fn host(&self) -> String {
        self.ip().to_string()
    }
}

/// A connection to a peer, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Io for T {}

/// One connection to a peer (or none yet), its correlation ids, and the cap on its answers.
/// The correlation ids run on across reconnections.
pub struct PeerClient {
    /// Sent in every request header unless a call names another.
    client_id: String,
    /// The largest answer accepted.
    max_response_bytes: usize,
    /// How answers are decoded unless a call says otherwise.
    decoding: Decoding,
    /// `None` until connected, and after a failure.
    stream: Option<Box<dyn Io>>,
    /// The last correlation id sent.
    correlation_id: i32,
    /// How connections are secured.
    security: Arc<PeerSecurity>,
    /// When the SASL session should be renewed (90% of the lifetime the server gave).
    renew_at: Option<Instant>,
}

impl std::fmt::Debug for PeerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerClient")
            .field("client_id", &self.client_id)
            .field("connected", &self.stream.is_some())
            .field("correlation_id", &self.correlation_id)
            .field("security", &self.security)
            .finish_non_exhaustive()
    }
}

impl PeerClient {
    /// A client that sends `client_id` and accepts answers of at most `max_response_bytes`;
    /// not connected yet.
    #[must_use]
    pub fn new(client_id: impl Into<String>, max_response_bytes: usize) -> PeerClient {
        PeerClient {
            client_id: client_id.into(),
            max_response_bytes,
            decoding: Decoding::default(),
            stream: None,
            correlation_id: 0,
            security: PeerSecurity::plaintext(),
            renew_at: None,
        }
    }

    /// The same client, securing its connections as `security` says.
    #[must_use]
    pub fn secured(mut self, security: Arc<PeerSecurity>) -> PeerClient {
        self.security = security;
        self
    }

    /// The same client, decoding answers as `decoding` says.
    #[must_use]
    pub fn with_decoding(mut self, decoding: Decoding) -> PeerClient {
        self.decoding = decoding;
        self
    }

    /// Whether a connection is open (as far as this side knows), and its SASL session, if
    /// it has one, is not due for renewal.
    #[must_use]
    pub fn is_connected(&self) -> bool {
        self.stream.is_some() && self.renew_at.is_none_or(|t| Instant::now() < t)
    }

    /// Drops the connection, if any.
    pub fn disconnect(&mut self) {
        self.stream = None;
    }

    /// Connects to `addr` (with `TCP_NODELAY`), replacing any open connection, and secures
    /// it as the client's [`PeerSecurity`] says (TLS, then the SASL login). Unbounded: wrap
    /// it in [`within`] with the exchange.
    ///
    /// # Errors
    ///
    /// The connect's error; [`PeerError::Authentication`] when the TLS handshake or the
    /// login fails.
    pub async fn connect(&mut self, addr: impl PeerAddr) -> Result<(), PeerError> {
        self.stream = None;
        self.renew_at = None;
        let host = addr.host();
        let tcp = TcpStream::connect(addr).await?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Io> = match &self.security.tls {
            None => Box::new(tcp),
            Some(config) => {
                let name = rustls_pki_types::ServerName::try_from(host.clone()).map_err(|_| {
                    PeerError::Authentication(format!("{host:?} is not a TLS server name"))
                })?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| {
                        PeerError::Authentication(format!(
                            "TLS handshake with {host} (listener {}): {e}",
                            self.security.listener
                        ))
                    })?;
                Box::new(tls)
            }
        };
        self.stream = Some(stream);
        if let Some(login) = self.security.login.clone() {
            let result = self.log_in(&login).await;
            if result.is_err() {
                self.stream = None;
            }
            result?;
        }
        Ok(())
    }

    /// SaslHandshake v1 and the mechanism's SaslAuthenticate v2 exchange.
    async fn log_in(&mut self, login: &Login) -> Result<(), PeerError> {
        let client_id = self.client_id.clone();
        let answer = self
            .request_with(
                &client_id,
                Decoding::Client,
                ApiKey::SaslHandshake,
                SASL_HANDSHAKE_VERSION,
                &handshake_request(login),
            )
            .await?;
        handshake_accepted(answer, login)?;
        let mut exchange = login.exchange();
        let mut answer: Option<Bytes> = None;
        let mut lifetime_ms = 0;
        while let Some(token) = exchange
            .next(answer.as_deref())
            .map_err(PeerError::Authentication)?
        {
            let reply = self
                .request_with(
                    &client_id,
                    Decoding::Client,
                    ApiKey::SaslAuthenticate,
                    SASL_AUTHENTICATE_VERSION,
                    &authenticate_request(token),
                )
                .await?;
            let (reply, lifetime) = authenticated(reply)?;
            answer = Some(reply);
            lifetime_ms = lifetime;
        }
        if lifetime_ms > 0 {
            let renew = Duration::from_millis(lifetime_ms.unsigned_abs() / 10 * 9);
            self.renew_at = Some(Instant::now() + renew);
        }
        Ok(())
    }

    /// Sends one request on the open connection and returns the answer's body, decoded as
    /// the client's [`Decoding`] says, under the client's id. Unbounded: wrap it in
    /// [`within`]. On any error, or if abandoned, the connection is dropped.
    ///
    /// # Errors
    ///
    /// [`PeerError`].
    pub async fn request(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &RequestKind,
    ) -> Result<ResponseKind, PeerError> {
        let client_id = std::mem::take(&mut self.client_id);
        let result = self
            .request_with(&client_id, self.decoding, api, version, body)
            .await;
        self.client_id = client_id;
        result
    }

    /// [`PeerClient::request`] under `client_id`, decoded as `decoding` says.
    ///
    /// # Errors
    ///
    /// [`PeerError`].
    pub async fn request_with(
        &mut self,
        client_id: &str,
        decoding: Decoding,
        api: ApiKey,
        version: i16,
        body: &RequestKind,
    ) -> Result<ResponseKind, PeerError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let expected = self.correlation_id;
        let frame = codec::encode_request(api, version, expected, client_id, body)?;
        // Taken out while in use: put back only once the answer is read whole.
        let mut stream = self.stream.take().ok_or(PeerError::NotConnected)?;
        stream.write_all(&frame).await?;
        let answer = read_frame(&mut stream, self.max_response_bytes).await?;
        self.stream = Some(stream);
        let result = check_answer(decoding, api, version, expected, answer);
        if result.is_err() {
            self.stream = None;
        }
        result
    }
}

/// One response frame body (without its size prefix) of at most `max` bytes.
async fn read_frame(
    stream: &mut (impl AsyncRead + Unpin + ?Sized),
    max: usize,
) -> Result<Bytes, PeerError> {
    let len = frame_len(stream.read_i32().await?, max)?;
    let mut body = BytesMut::zeroed(len);
    stream.read_exact(&mut body).await?;
    Ok(body.freeze())
}

/// The SASL versions a login uses: SaslHandshake v1 (tokens in SaslAuthenticate), and
/// SaslAuthenticate v2 (KIP-368's session lifetime).
const SASL_HANDSHAKE_VERSION: i16 = 1;
const SASL_AUTHENTICATE_VERSION: i16 = 2;

/// SaslHandshake for `login`'s mechanism.
fn handshake_request(login: &Login) -> RequestKind {
    RequestKind::SaslHandshake(SaslHandshakeRequest::default().with_mechanism(
        strata_protocol::StrBytes::from_static_str(login.mechanism.name()),
    ))
}

/// Whether the SaslHandshake answer takes `login`'s mechanism.
fn handshake_accepted(answer: ResponseKind, login: &Login) -> Result<(), PeerError> {
    match answer {
        ResponseKind::SaslHandshake(r) if r.error_code == 0 => Ok(()),
        ResponseKind::SaslHandshake(r) => {
            let offered: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
            Err(PeerError::Authentication(format!(
                "SaslHandshake {} refused with error code {} (the server offers {offered:?})",
                login.mechanism.name(),
                r.error_code
            )))
        }
        _ => Err(PeerError::Authentication(
            "not a SaslHandshake answer".into(),
        )),
    }
}

/// SaslAuthenticate carrying `token`.
fn authenticate_request(token: Vec<u8>) -> RequestKind {
    RequestKind::SaslAuthenticate(
        SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
    )
}

/// The server's token and the session lifetime it gave, or its refusal.
fn authenticated(answer: ResponseKind) -> Result<(Bytes, i64), PeerError> {
    match answer {
        ResponseKind::SaslAuthenticate(r) if r.error_code == 0 => {
            Ok((r.auth_bytes, r.session_lifetime_ms))
        }
        ResponseKind::SaslAuthenticate(r) => Err(PeerError::Authentication(format!(
            "SaslAuthenticate refused with error code {}{}",
            r.error_code,
            r.error_message
                .map(|m| format!(": {}", m.as_str()))
                .unwrap_or_default()
        ))),
        _ => Err(PeerError::Authentication(
            "not a SaslAuthenticate answer".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
    use tokio::net::TcpListener;

    const CAP: usize = 1 << 20;

    /// A fake peer on 127.0.0.1 that reads one request frame and then does `answer` with
    /// the request's correlation id; returns its address.
    async fn fake_peer<F, Fut>(answer: F) -> std::net::SocketAddr
    where
        F: FnOnce(TcpStream, i32) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let len = usize::try_from(s.read_i32().await.unwrap()).unwrap();
            let mut req = vec![0u8; len];
            s.read_exact(&mut req).await.unwrap();
            // Header: api key (2), version (2), correlation id (4).
            let correlation_id = i32::from_be_bytes(req[4..8].try_into().unwrap());
            answer(s, correlation_id).await;
        });
        addr
    }

    fn api_versions_answer(correlation_id: i32) -> Bytes {
        codec::encode_response(
            ApiKey::ApiVersions,
            3,
            correlation_id,
            &ResponseKind::ApiVersions(ApiVersionsResponse::default()),
        )
        .unwrap()
    }

    async fn ask(addr: std::net::SocketAddr) -> (PeerClient, Result<ResponseKind, PeerError>) {
        let mut client = PeerClient::new("test", CAP);
        client.connect(addr).await.unwrap();
        let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
        let got = within(
            Duration::from_millis(500),
            client.request(ApiKey::ApiVersions, 3, &body),
        )
        .await;
        (client, got)
    }

    #[tokio::test]
    async fn an_answer_is_read_and_the_connection_kept() {
        let addr = fake_peer(|mut s, id| async move {
            s.write_all(&api_versions_answer(id)).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        })
        .await;
        let (client, got) = ask(addr).await;
        assert!(matches!(got, Ok(ResponseKind::ApiVersions(_))), "{got:?}");
        assert!(client.is_connected());
    }

    #[tokio::test]
    async fn a_peer_that_closes_mid_frame_is_closed() {
        let addr = fake_peer(|mut s, id| async move {
            let frame = api_versions_answer(id);
            s.write_all(&frame[..frame.len() - 2]).await.unwrap();
        })
        .await;
        let (client, got) = ask(addr).await;
        assert!(matches!(got, Err(PeerError::Closed)), "{got:?}");
        assert!(!client.is_connected());
    }

    #[tokio::test]
    async fn an_oversized_size_prefix_is_refused() {
        let addr = fake_peer(|mut s, _| async move {
            s.write_all(&i32::MAX.to_be_bytes()).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        })
        .await;
        let (client, got) = ask(addr).await;
        assert!(
            matches!(
                got,
                Err(PeerError::BadFrame {
                    size: i32::MAX,
                    max: CAP
                })
            ),
            "{got:?}"
        );
        assert!(!client.is_connected());
    }

    #[tokio::test]
    async fn a_negative_size_prefix_is_refused() {
        let addr = fake_peer(|mut s, _| async move {
            s.write_all(&(-1i32).to_be_bytes()).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        })
        .await;
        let (_, got) = ask(addr).await;
        assert!(
            matches!(got, Err(PeerError::BadFrame { size: -1, .. })),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn a_wrong_correlation_id_is_a_mismatch() {
        let addr = fake_peer(|mut s, id| async move {
            s.write_all(&api_versions_answer(id + 7)).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        })
        .await;
        let (client, got) = ask(addr).await;
        assert!(
            matches!(
                got,
                Err(PeerError::CorrelationMismatch {
                    expected: 1,
                    got: 8
                })
            ),
            "{got:?}"
        );
        assert!(!client.is_connected());
    }

    #[tokio::test]
    async fn a_peer_that_never_answers_times_out() {
        let addr = fake_peer(|s, _| async move {
            // Holds the connection open and says nothing.
            let _held = s;
            tokio::time::sleep(Duration::from_secs(5)).await;
        })
        .await;
        let started = std::time::Instant::now();
        let (client, got) = ask(addr).await;
        assert!(matches!(got, Err(PeerError::Timeout)), "{got:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
        // The abandoned exchange took its connection with it.
        assert!(!client.is_connected());
    }

    #[tokio::test]
    async fn an_answer_outside_the_decoding_is_refused() {
        let addr = fake_peer(|mut s, id| async move {
            s.write_all(&api_versions_answer(id)).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        })
        .await;
        let mut client = PeerClient::new("test", CAP);
        client.connect(addr).await.unwrap();
        let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
        // ApiVersions is not a forwarded API.
        let got = within(
            Duration::from_millis(500),
            client.request_with("test", Decoding::Forwarded, ApiKey::ApiVersions, 3, &body),
        )
        .await;
        assert!(matches!(got, Err(PeerError::Decode(_))), "{got:?}");
        assert!(!client.is_connected());
    }

    #[tokio::test]
    async fn a_request_without_a_connection_is_refused() {
        let mut client = PeerClient::new("test", CAP);
        let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
        let got = client.request(ApiKey::ApiVersions, 3, &body).await;
        assert!(matches!(got, Err(PeerError::NotConnected)), "{got:?}");
    }

    #[test]
    fn connection_failures_are_told_from_wrong_answers() {
        assert!(PeerError::Closed.is_connection_failure());
        assert!(PeerError::BadFrame { size: -1, max: 1 }.is_connection_failure());
        assert!(!PeerError::Timeout.is_connection_failure());
        assert!(
            !PeerError::CorrelationMismatch {
                expected: 1,
                got: 2
            }
            .is_connection_failure()
        );
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(matches!(PeerError::from(reset), PeerError::Closed));
    }
}
