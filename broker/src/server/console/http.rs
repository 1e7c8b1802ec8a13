//! The console's listener: HTTP/1.1 on hyper, with keep-alive, so a page and its script
//! share a connection.
//!
//! Limits: [`MAX_CONNECTIONS`] at once (one more is closed unanswered), a request head read
//! within [`HEADER_TIMEOUT`] and at most [`MAX_HEAD_BYTES`], a body of at most
//! [`MAX_BODY_BYTES`]. Every answer that depends on the cluster is computed on the blocking
//! pool, so the console never holds a worker thread of the broker's request handling.
//!
//! Writes (POST and DELETE under `/api/`) need a JSON body and the header
//! `X-Strata-Console: 1`: a page of another origin cannot send that header without the
//! browser asking first (CORS), which the console never allows, so another site cannot
//! make a signed-in browser act (cross-site request forgery).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::auth::Denied;
use super::{Console, User, actions, messages, pages, views};

/// Connections served at once.
const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send a request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head (hyper's read buffer).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The largest request body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// A connection is closed after this long, whatever it does.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);

/// A query string's parameters, by name (the last value of a repeated name wins).
pub type Query = BTreeMap<String, String>;

/// An answer that is not a success: its status and what the page or script shows.
#[derive(Debug)]
pub struct Failure {
    pub status: StatusCode,
    pub message: String,
}

impl Failure {
    /// A request the console cannot serve as asked (400).
    pub fn bad(message: impl Into<String>) -> Failure {
        Failure {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// Something that does not exist (404).
    pub fn not_found(message: impl Into<String>) -> Failure {
        Failure {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    /// Not allowed (403).
    pub fn forbidden(message: impl Into<String>) -> Failure {
        Failure {
            status: StatusCode::FORBIDDEN,
            message: message.into(),
        }
    }
}

impl From<anyhow::Error> for Failure {
    /// The cluster's refusal or a node that did not answer: 502, with the error's chain
    /// (Kafka's error names included).
    fn from(e: anyhow::Error) -> Failure {
        Failure {
            status: StatusCode::BAD_GATEWAY,
            message: format!("{e:#}"),
        }
    }
}

/// What a route answers.
enum Answer {
    Json(Value),
    Html(String),
    Asset(&'static str, &'static str),
}

/// Accepts connections until the process stops.
pub async fn serve(socket: TcpListener, console: Arc<Console>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match socket.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "console accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "too many console connections; closing one");
            continue;
        };
        let console = console.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let console = console.clone();
                async move { Ok::<_, Infallible>(answer(&console, peer, req).await) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
                tracing::debug!(%peer, error = %e, "console connection failed");
            }
            drop(permit);
        });
    }
}

/// One request's answer, whatever happens.
async fn answer(
    console: &Arc<Console>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let json_wanted = req.uri().path().starts_with("/api/");
    match route(console, peer, req).await {
        Ok(Answer::Json(v)) => respond(StatusCode::OK, "application/json", v.to_string()),
        Ok(Answer::Html(h)) => respond(StatusCode::OK, "text/html; charset=utf-8", h),
        Ok(Answer::Asset(kind, body)) => respond(StatusCode::OK, kind, body.to_owned()),
        Err(f) if f.status == StatusCode::UNAUTHORIZED => {
            let mut r = respond(
                f.status,
                "application/json",
                json!({ "error": f.message }).to_string(),
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"strata\", charset=\"UTF-8\""),
            );
            r
        }
        Err(f) if json_wanted => respond(
            f.status,
            "application/json",
            json!({ "error": f.message }).to_string(),
        ),
        Err(f) => respond(
            f.status,
            "text/html; charset=utf-8",
            pages::failure(f.status.as_u16(), &f.message),
        ),
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:",
        ),
    );
    r
}

/// The path's segments, percent-decoded; `None` when one is not UTF-8.
fn segments(path: &str) -> Option<Vec<String>> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let bytes: Vec<u8> = percent_decode(s.as_bytes());
            String::from_utf8(bytes).ok()
        })
        .collect()
}

fn percent_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if s[i] == b'%'
            && i + 2 < s.len()
            && let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2]))
        {
            out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

async fn route(
    console: &Arc<Console>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Answer, Failure> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    if method == Method::GET {
        match path.as_str() {
            "/static/console.js" => {
                return Ok(Answer::Asset(
                    "text/javascript; charset=utf-8",
                    pages::SCRIPT,
                ));
            }
            "/static/console.css" => {
                return Ok(Answer::Asset("text/css; charset=utf-8", pages::STYLE));
            }
            _ => {}
        }
    }
    let query: Query = form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .into_owned()
        .collect();
    let user = authenticate(console, peer, &req)?;
    console.rates.touch();
    let parts = segments(&path).ok_or_else(|| Failure::bad("the path is not UTF-8"))?;
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let writes = method == Method::POST || method == Method::DELETE;
    if writes {
        if console.read_only {
            return Err(Failure::forbidden(
                "the console is read-only (console.read.only=true)",
            ));
        }
        if req.headers().get("x-strata-console").is_none() {
            return Err(Failure::forbidden(
                "a write needs the header X-Strata-Console (sent by the console's own pages)",
            ));
        }
    }
    let body = if writes {
        Some(read_json(req).await?)
    } else {
        None
    };
    let c = console.clone();
    match (method, parts.as_slice()) {
        (Method::GET, ["api", "overview"]) => {
            blocking(c, user, views::overview).await.map(Answer::Json)
        }
        (Method::GET, ["api", "topics"]) => {
            blocking(c, user, move |c, u| views::topics(c, u, &query))
                .await
                .map(Answer::Json)
        }
        (Method::GET, ["api", "topics", name]) => {
            let name = (*name).to_owned();
            blocking(c, user, move |c, u| views::topic(c, u, &name, &query))
                .await
                .map(Answer::Json)
        }
        (Method::GET, ["api", "groups"]) => {
            blocking(c, user, views::groups).await.map(Answer::Json)
        }
        (Method::GET, ["api", "groups", id]) => {
            let id = (*id).to_owned();
            blocking(c, user, move |c, u| views::group(c, u, &id))
                .await
                .map(Answer::Json)
        }
        (Method::GET, ["api", "hot"]) => blocking(c, user, move |c, u| views::hot(c, u, &query))
            .await
            .map(Answer::Json),
        (Method::GET, ["api", "messages"]) => {
            blocking(c, user, move |c, u| messages::browse(c, u, &query))
                .await
                .map(Answer::Json)
        }
        (Method::GET, ["api", "search"]) => {
            blocking(c, user, move |c, u| messages::search(c, u, &query))
                .await
                .map(Answer::Json)
        }
        (Method::GET, ["api", "transactions"]) => {
            blocking(c, user, move |c, u| views::transactions(c, u, &query))
                .await
                .map(Answer::Json)
        }
        (Method::GET, ["api", "security"]) => {
            blocking(c, user, views::security).await.map(Answer::Json)
        }
        (Method::POST, ["api", "topics"]) => {
            let body = body.unwrap_or_default();
            blocking(c, user, move |c, u| actions::create_topic(c, u, &body))
                .await
                .map(Answer::Json)
        }
        (Method::DELETE, ["api", "topics", name]) => {
            let name = (*name).to_owned();
            blocking(c, user, move |c, u| actions::delete_topic(c, u, &name))
                .await
                .map(Answer::Json)
        }
        (Method::POST, ["api", "topics", name, action]) => {
            let (name, action, body) = (
                (*name).to_owned(),
                (*action).to_owned(),
                body.unwrap_or_default(),
            );
            blocking(c, user, move |c, u| match action.as_str() {
                "partitions" => actions::add_partitions(c, u, &name, &body),
                "configs" => actions::alter_config(c, u, &name, &body),
                "delete-records" => actions::delete_records(c, u, &name, &body),
                _ => Err(Failure::not_found(format!("no action {action}"))),
            })
            .await
            .map(Answer::Json)
        }
        (Method::POST, ["api", "groups", id, "reset-offsets"]) => {
            let (id, body) = ((*id).to_owned(), body.unwrap_or_default());
            blocking(c, user, move |c, u| {
                actions::reset_offsets(c, u, &id, &body)
            })
            .await
            .map(Answer::Json)
        }
        (Method::GET, page) => {
            let page: Vec<String> = page.iter().map(|s| (*s).to_owned()).collect();
            blocking(c, user, move |c, u| pages::page(c, u, &page, &query))
                .await
                .map(Answer::Html)
        }
        (m, _) if m == Method::POST || m == Method::DELETE => {
            Err(Failure::not_found(format!("no action at {path}")))
        }
        _ => Err(Failure {
            status: StatusCode::METHOD_NOT_ALLOWED,
            message: "the console answers GET, and POST or DELETE for actions".to_owned(),
        }),
    }
}

/// The request's user: its credentials checked, or anonymous when security is off.
fn authenticate(
    console: &Console,
    peer: SocketAddr,
    req: &Request<Incoming>,
) -> Result<User, Failure> {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    let image = console.broker.image();
    match console.auth.principal(header, &image.scram) {
        Ok(principal) => Ok(User {
            principal,
            host: peer.ip(),
        }),
        Err(denied) => Err(Failure {
            status: StatusCode::UNAUTHORIZED,
            message: match denied {
                Denied::Missing => "sign in with a user of the cluster (SCRAM or PLAIN)",
                Denied::Wrong => "unknown user or wrong password",
            }
            .to_owned(),
        }),
    }
}

/// The request's JSON body, at most [`MAX_BODY_BYTES`]; an empty body is `{}`.
async fn read_json(req: Request<Incoming>) -> Result<Value, Failure> {
    let collected = Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|_| Failure {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("the body is larger than {MAX_BODY_BYTES} bytes or was cut off"),
        })?
        .to_bytes();
    if collected.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(&collected)
        .map_err(|e| Failure::bad(format!("the body is not JSON: {e}")))
}

/// Runs `f` on the blocking pool (it speaks to the cluster with blocking sockets).
async fn blocking<T: Send + 'static>(
    console: Arc<Console>,
    user: User,
    f: impl FnOnce(&Console, &User) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(move || f(&console, &user))
        .await
        .map_err(|e| Failure {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: format!("the console's task failed: {e}"),
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_into_segments() {
        assert_eq!(
            segments("/topics/a%2Fb/x").unwrap(),
            vec!["topics", "a/b", "x"]
        );
        assert_eq!(segments("/").unwrap(), Vec::<String>::new());
        assert_eq!(segments("/%zz%4").unwrap(), vec!["%zz%4"]);
        assert!(segments("/%ff").is_none());
    }
}
