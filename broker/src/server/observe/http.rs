//! The metrics listener: a minimal HTTP/1.1 server on tokio that answers `GET <path>` with
//! the Prometheus text exposition format 0.0.4 and closes the connection.
//!
//! Hand-written rather than a framework (hyper, axum) because it serves exactly one
//! resource to one kind of client (a scraper): a request head of at most
//! [`MAX_REQUEST_BYTES`], read within [`REQUEST_TIMEOUT`], is all it reads, bodies are
//! never read, and every answer closes the connection. Anything else is refused: another
//! path 404, another method 405, an oversized head 431, a head that does not parse 400.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::broker::Broker;
use crate::config::MetricsListener;

/// The largest request head read (request line and headers).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long a client may take to send its request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes served at once; a connection beyond this is closed unanswered.
const MAX_CONNECTIONS: usize = 16;

/// Binds the listener.
///
/// # Errors
///
/// The bind failure, naming the address.
pub async fn bind(listener: &MetricsListener) -> std::io::Result<TcpListener> {
    let addr = listener.address();
    TcpListener::bind(&addr).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot listen on metrics.listener ({addr}): {e}"),
        )
    })
}

/// Accepts scrapes until the process stops.
pub async fn serve(socket: TcpListener, path: String, broker: Arc<Broker>) {
    let path: Arc<str> = path.into();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match socket.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "too many metrics connections; closing one");
            continue;
        };
        let (path, broker) = (path.clone(), broker.clone());
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &path, broker).await {
                tracing::debug!(%peer, error = %e, "metrics request failed");
            }
            drop(permit);
        });
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    /// `GET` (`head_only`: `HEAD`) of the metrics path.
    Metrics {
        head_only: bool,
    },
    NotFound,
    MethodNotAllowed,
    Malformed,
}

/// Reads the request line from a complete head.
fn route(head: &[u8], path: &str) -> Request {
    let Some(line) = head.split(|&b| b == b'\n').next() else {
        return Request::Malformed;
    };
    let Ok(line) = std::str::from_utf8(line) else {
        return Request::Malformed;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Request::Malformed;
    };
    if !version.starts_with("HTTP/1.") {
        return Request::Malformed;
    }
    // A query string is ignored, as Prometheus may add one.
    let target = target.split('?').next().unwrap_or(target);
    if target != path {
        return Request::NotFound;
    }
    match method {
        "GET" => Request::Metrics { head_only: false },
        "HEAD" => Request::Metrics { head_only: true },
        _ => Request::MethodNotAllowed,
    }
}

/// Reads the head (bounded in size and time), answers once and closes.
async fn answer(mut stream: TcpStream, path: &str, broker: Arc<Broker>) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let complete = tokio::time::timeout(REQUEST_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        loop {
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok::<bool, std::io::Error>(true);
            }
            if head.len() >= MAX_REQUEST_BYTES {
                return Ok(false);
            }
            let want = buf.len().min(MAX_REQUEST_BYTES - head.len());
            let n = stream.read(&mut buf[..want]).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            head.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let request = if complete {
        route(&head, path)
    } else {
        return respond(
            &mut stream,
            "431 Request Header Fields Too Large",
            "",
            b"",
            false,
        )
        .await;
    };
    match request {
        Request::Metrics { head_only } => {
            let body = tokio::task::spawn_blocking(move || super::exposition::render(&broker))
                .await
                .map_err(std::io::Error::other)?;
            respond(
                &mut stream,
                "200 OK",
                "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
                body.as_bytes(),
                head_only,
            )
            .await
        }
        Request::NotFound => respond(&mut stream, "404 Not Found", "", b"not found\n", false).await,
        Request::MethodNotAllowed => {
            respond(
                &mut stream,
                "405 Method Not Allowed",
                "Allow: GET, HEAD\r\n",
                b"",
                false,
            )
            .await
        }
        Request::Malformed => respond(&mut stream, "400 Bad Request", "", b"", false).await,
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    headers: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if !head_only {
        stream.write_all(body).await?;
    }
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_listener_url() {
        assert_eq!(MetricsListener::parse("").unwrap(), None);
        assert_eq!(
            MetricsListener::parse("http://127.0.0.1:9644/metrics").unwrap(),
            Some(MetricsListener {
                host: "127.0.0.1".into(),
                port: 9644,
                path: "/metrics".into()
            })
        );
        let l = MetricsListener::parse("http://[::1]:9644")
            .unwrap()
            .unwrap();
        assert_eq!((l.host.as_str(), l.path.as_str()), ("::1", "/metrics"));
        assert_eq!(l.address(), "[::1]:9644");
        for bad in [
            "https://h:1/metrics",
            "127.0.0.1:9644",
            "http://h/metrics",
            "http://h:0/metrics",
            "http://h:70000/metrics",
            "http://:9644/metrics",
            "http://h:1/m?x",
        ] {
            assert!(MetricsListener::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn routes_only_the_metrics_path() {
        let r = |s: &str| route(s.as_bytes(), "/metrics");
        assert_eq!(
            r("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Request::Metrics { head_only: false }
        );
        assert_eq!(
            r("GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Request::Metrics { head_only: false }
        );
        assert_eq!(
            r("HEAD /metrics HTTP/1.1\r\n\r\n"),
            Request::Metrics { head_only: true }
        );
        assert_eq!(r("GET / HTTP/1.1\r\n\r\n"), Request::NotFound);
        assert_eq!(
            r("POST /metrics HTTP/1.1\r\n\r\n"),
            Request::MethodNotAllowed
        );
        assert_eq!(r("GET /metrics\r\n\r\n"), Request::Malformed);
        assert_eq!(r("GET /metrics SPDY/3\r\n\r\n"), Request::Malformed);
        assert_eq!(r("\u{0}\u{1}\r\n\r\n"), Request::Malformed);
    }
}
