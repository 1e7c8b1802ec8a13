//! One outbound connection per voter: the core's requests to that voter go out on it in
//! order, each answered or given up within `controller.quorum.request.timeout.ms`.
//!
//! A connection that cannot be made, or that fails mid-request, is dropped together with
//! every request queued for it, and the next attempt waits a backoff that doubles from
//! `controller.quorum.retry.backoff.ms` up to one second. Nothing is retried here: the core
//! sends again on its own timers, with what is current by then.

use std::sync::Arc;
use std::time::Duration;

use strata_kraft::raft::{Message, NodeId};
use strata_protocol::codec;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{Command, wire};

/// Requests waiting for one peer; more means the peer is not keeping up.
const QUEUE: usize = 64;
/// The longest backoff between connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// The largest response frame accepted from a peer.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Starts the connection task for voter `to` at `addr`; returns its request queue.
pub(super) fn spawn(
    to: NodeId,
    addr: String,
    my_id: i32,
    cluster_id: Arc<str>,
    driver: mpsc::Sender<Command>,
    request_timeout: Duration,
    retry_backoff: Duration,
) -> mpsc::Sender<Message> {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(run(Peer {
        to,
        addr,
        client_id: format!("raft-client-{my_id}"),
        cluster_id,
        driver,
        request_timeout,
        retry_backoff,
        rx,
    }));
    tx
}

struct Peer {
    /// The voter.
    to: NodeId,
    /// Its controller listener.
    addr: String,
    /// Sent in every request header.
    client_id: String,
    /// Sent in every request body.
    cluster_id: Arc<str>,
    /// Where answers go.
    driver: mpsc::Sender<Command>,
    /// How long one request may take, connecting included.
    request_timeout: Duration,
    /// The first backoff after a failure.
    retry_backoff: Duration,
    /// The core's requests for this voter.
    rx: mpsc::Receiver<Message>,
}

async fn run(mut peer: Peer) {
    let mut conn: Option<TcpStream> = None;
    let mut correlation_id: i32 = 0;
    let mut backoff = peer.retry_backoff;
    while let Some(msg) = peer.rx.recv().await {
        let Some((api, version)) = wire::request_api(&msg) else {
            continue;
        };
        let Some(body) = wire::request_to_wire(&msg, peer.to, &peer.cluster_id) else {
            continue;
        };
        correlation_id = correlation_id.wrapping_add(1);
        let frame =
            match codec::encode_request(api, version, correlation_id, &peer.client_id, &body) {
                Ok(f) => f,
                Err(e) => {
                    tracing::error!(error = %e, "cannot encode a quorum request");
                    continue;
                }
            };
        let exchange = async {
            if conn.is_none() {
                let stream = TcpStream::connect(&peer.addr).await?;
                let _ = stream.set_nodelay(true);
                conn = Some(stream);
            }
            let stream = conn.as_mut().expect("connected above");
            stream.write_all(&frame).await?;
            crate::frame_io::read_frame(stream, MAX_RESPONSE_BYTES).await
        };
        let answer = match tokio::time::timeout(peer.request_timeout, exchange).await {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => {
                fail(&mut peer, &mut conn, &mut backoff, &e.to_string()).await;
                continue;
            }
            Err(_) => {
                fail(&mut peer, &mut conn, &mut backoff, "request timed out").await;
                continue;
            }
        };
        let response = match codec::decode_response(api, version, answer) {
            Ok(r) if r.correlation_id == correlation_id => r,
            Ok(_) => {
                fail(&mut peer, &mut conn, &mut backoff, "response out of order").await;
                continue;
            }
            Err(e) => {
                fail(&mut peer, &mut conn, &mut backoff, &e.to_string()).await;
                continue;
            }
        };
        backoff = peer.retry_backoff;
        if let Some(reply) = wire::response_from_wire(response.body, &msg)
            && peer
                .driver
                .send(Command::Response {
                    from: peer.to,
                    msg: reply,
                })
                .await
                .is_err()
        {
            return; // the driver stopped
        }
    }
}

/// Drops the connection and what is queued, then waits out the backoff.
async fn fail(peer: &mut Peer, conn: &mut Option<TcpStream>, backoff: &mut Duration, why: &str) {
    tracing::debug!(peer = peer.to.0, addr = %peer.addr, why, "quorum connection failed");
    *conn = None;
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    while peer.rx.try_recv().is_ok() {}
}
