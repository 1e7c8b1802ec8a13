//! The same exchange as [`super::PeerClient`] on a blocking socket, for the command-line
//! clients (`strata admin`, `strata healthcheck`), which run no runtime: every step
//! (connecting, writing, each read) is bounded by the time left before the call's
//! deadline. [`Connection::secure`] adds TLS and the SASL login of a [`PeerSecurity`], as
//! the async client does.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_protocol::codec;
use strata_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use super::{
    Decoding, PeerError, SASL_AUTHENTICATE_VERSION, SASL_HANDSHAKE_VERSION, authenticate_request,
    authenticated, check_answer, frame_len, handshake_accepted, handshake_request,
};
use crate::security::peer::PeerSecurity;

/// The socket, in the clear or under TLS.
#[derive(Debug)]
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    /// The TCP socket beneath, for its timeouts.
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

/// One open connection, its correlation ids, and the cap on its answers.
#[derive(Debug)]
pub struct Connection {
    /// The socket.
    stream: Stream,
    /// Sent in every request header.
    client_id: String,
    /// The largest answer accepted.
    max_response_bytes: usize,
    /// How answers are decoded.
    decoding: Decoding,
    /// The last correlation id sent.
    correlation_id: i32,
}

impl Connection {
    /// Connects to the first address `addr` (`host:port`) resolves to that accepts, before
    /// `deadline`, with `TCP_NODELAY`.
    ///
    /// # Errors
    ///
    /// The resolution's error, the last connect's, or [`PeerError::Timeout`].
    pub fn connect(
        addr: &str,
        client_id: impl Into<String>,
        max_response_bytes: usize,
        deadline: Instant,
    ) -> Result<Connection, PeerError> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        let mut last_error = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, remaining(deadline)?) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    return Ok(Connection {
                        stream: Stream::Plain(stream),
                        client_id: client_id.into(),
                        max_response_bytes,
                        decoding: Decoding::default(),
                        correlation_id: 0,
                    });
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error
            .unwrap_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{addr} resolves to nothing"),
                )
            })
            .into())
    }

    /// The same connection secured as `security` says: the TLS handshake with `host` (the
    /// name the server's certificate must carry, unless host names are not verified), then
    /// the SASL login. Before `deadline`.
    ///
    /// # Errors
    ///
    /// [`PeerError::Authentication`] when the handshake or the login fails; I/O errors.
    pub fn secure(
        mut self,
        security: &PeerSecurity,
        host: &str,
        deadline: Instant,
    ) -> Result<Connection, PeerError> {
        if let Some(config) = &security.tls {
            let Stream::Plain(tcp) = self.stream else {
                return Err(PeerError::Authentication("already secured".into()));
            };
            let name = rustls_pki_types::ServerName::try_from(host.to_owned()).map_err(|_| {
                PeerError::Authentication(format!("{host:?} is not a TLS server name"))
            })?;
            let conn = rustls::ClientConnection::new(Arc::clone(config), name)
                .map_err(|e| PeerError::Authentication(format!("TLS: {e}")))?;
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            while tls.conn.is_handshaking() {
                tls.sock.set_read_timeout(Some(remaining(deadline)?))?;
                tls.sock.set_write_timeout(Some(remaining(deadline)?))?;
                tls.conn.complete_io(&mut tls.sock).map_err(|e| {
                    PeerError::Authentication(format!("TLS handshake with {host}: {e}"))
                })?;
            }
            self.stream = Stream::Tls(Box::new(tls));
        }
        if let Some(login) = &security.login {
            let decoding = std::mem::replace(&mut self.decoding, Decoding::Client);
            let answer = self.request(
                ApiKey::SaslHandshake,
                SASL_HANDSHAKE_VERSION,
                &handshake_request(login),
                deadline,
            )?;
            handshake_accepted(answer, login)?;
            let mut exchange = login.exchange();
            let mut answer: Option<Bytes> = None;
            while let Some(token) = exchange
                .next(answer.as_deref())
                .map_err(PeerError::Authentication)?
            {
                let reply = self.request(
                    ApiKey::SaslAuthenticate,
                    SASL_AUTHENTICATE_VERSION,
                    &authenticate_request(token),
                    deadline,
                )?;
                answer = Some(authenticated(reply)?.0);
            }
            self.decoding = decoding;
        }
        Ok(self)
    }

    /// The same connection, decoding answers as `decoding` says.
    #[must_use]
    pub fn with_decoding(mut self, decoding: Decoding) -> Connection {
        self.decoding = decoding;
        self
    }

    /// Sends one request and returns the answer's body, before `deadline`. After an error
    /// the connection may be mid-frame: drop it.
    ///
    /// # Errors
    ///
    /// [`PeerError`].
    pub fn request(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &RequestKind,
        deadline: Instant,
    ) -> Result<ResponseKind, PeerError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let expected = self.correlation_id;
        let frame = codec::encode_request(api, version, expected, &self.client_id, body)?;
        self.stream
            .tcp()
            .set_write_timeout(Some(remaining(deadline)?))?;
        self.stream.write_all(&frame)?;
        // Under TLS, what `write_all` left in rustls's buffer goes out now.
        self.stream.flush()?;
        let mut prefix = [0u8; 4];
        read_exact_by(&mut self.stream, &mut prefix, deadline)?;
        let len = frame_len(i32::from_be_bytes(prefix), self.max_response_bytes)?;
        let mut buf = vec![0u8; len];
        read_exact_by(&mut self.stream, &mut buf, deadline)?;
        check_answer(self.decoding, api, version, expected, Bytes::from(buf))
    }
}

/// Time left before `deadline`, or [`PeerError::Timeout`].
fn remaining(deadline: Instant) -> Result<Duration, PeerError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(PeerError::Timeout);
    }
    Ok(left)
}

/// `read_exact` that gives up at `deadline`.
fn read_exact_by(
    stream: &mut Stream,
    mut buf: &mut [u8],
    deadline: Instant,
) -> Result<(), PeerError> {
    while !buf.is_empty() {
        stream.tcp().set_read_timeout(Some(remaining(deadline)?))?;
        match stream.read(buf) {
            Ok(0) => return Err(PeerError::Closed),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use strata_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

    /// A fake peer that reads one request and answers with `answer(correlation id)`.
    fn fake_peer(answer: impl FnOnce(i32) -> Vec<u8> + Send + 'static) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut len = [0u8; 4];
            s.read_exact(&mut len).unwrap();
            let mut req = vec![0u8; usize::try_from(i32::from_be_bytes(len)).unwrap()];
            s.read_exact(&mut req).unwrap();
            let id = i32::from_be_bytes(req[4..8].try_into().unwrap());
            s.write_all(&answer(id)).unwrap();
            std::thread::sleep(Duration::from_secs(1));
        });
        addr
    }

    fn ask(addr: &str) -> Result<ResponseKind, PeerError> {
        let deadline = Instant::now() + Duration::from_millis(500);
        let mut conn = Connection::connect(addr, "test", 1 << 16, deadline)?;
        let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
        conn.request(ApiKey::ApiVersions, 3, &body, deadline)
    }

    fn answer(id: i32) -> Vec<u8> {
        codec::encode_response(
            ApiKey::ApiVersions,
            3,
            id,
            &ResponseKind::ApiVersions(ApiVersionsResponse::default()),
        )
        .unwrap()
        .to_vec()
    }

    #[test]
    fn an_answer_is_read() {
        let got = ask(&fake_peer(answer));
        assert!(matches!(got, Ok(ResponseKind::ApiVersions(_))), "{got:?}");
    }

    #[test]
    fn the_blocking_errors_are_the_async_ones() {
        let got = ask(&fake_peer(|id| answer(id + 1)));
        assert!(
            matches!(
                got,
                Err(PeerError::CorrelationMismatch {
                    expected: 1,
                    got: 2
                })
            ),
            "{got:?}"
        );
        let got = ask(&fake_peer(|_| (1i32 << 20).to_be_bytes().to_vec()));
        assert!(matches!(got, Err(PeerError::BadFrame { .. })), "{got:?}");
        let got = ask(&fake_peer(|id| {
            let a = answer(id);
            a[..a.len() - 1].to_vec()
        }));
        // The fake peer holds the connection open a second: the short frame times out.
        assert!(matches!(got, Err(PeerError::Timeout)), "{got:?}");
    }
}
