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
//! This is a base layer: it knows the wire and nothing of the node.

pub mod blocking;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strata_protocol::codec;
use strata_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

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
            PeerError::Closed | PeerError::Io(_) | PeerError::BadFrame { .. }
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

/// One connection to a peer (or none yet), its correlation ids, and the cap on its answers.
/// The correlation ids run on across reconnections.
#[derive(Debug)]
pub struct PeerClient {
    /// Sent in every request header unless a call names another.
    client_id: String,
    /// The largest answer accepted.
    max_response_bytes: usize,
    /// How answers are decoded unless a call says otherwise.
    decoding: Decoding,
    /// `None` until connected, and after a failure.
    stream: Option<TcpStream>,
    /// The last correlation id sent.
    correlation_id: i32,
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
        }
    }

    /// The same client, decoding answers as `decoding` says.
    #[must_use]
    pub fn with_decoding(mut self, decoding: Decoding) -> PeerClient {
        self.decoding = decoding;
        self
    }

    /// Whether a connection is open (as far as this side knows).
    #[must_use]
    pub fn is_connected(&self) -> bool {
        self.stream.is_some()
    }

    /// Drops the connection, if any.
    pub fn disconnect(&mut self) {
        self.stream = None;
    }

    /// Connects to `addr` (with `TCP_NODELAY`), replacing any open connection. Unbounded:
    /// wrap it in [`within`] with the exchange.
    ///
    /// # Errors
    ///
    /// The connect's error.
    pub async fn connect(&mut self, addr: impl ToSocketAddrs) -> Result<(), PeerError> {
        self.stream = None;
        let stream = TcpStream::connect(addr).await?;
        let _ = stream.set_nodelay(true);
        self.stream = Some(stream);
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
async fn read_frame(stream: &mut TcpStream, max: usize) -> Result<Bytes, PeerError> {
    let len = frame_len(stream.read_i32().await?, max)?;
    let mut body = BytesMut::zeroed(len);
    stream.read_exact(&mut body).await?;
    Ok(body.freeze())
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
