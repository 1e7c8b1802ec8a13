//! One outbound connection per node the core talks to (a voter, a leader, a bootstrap server): the core's requests to that voter go out on it in
//! order, each answered or given up within `controller.quorum.request.timeout.ms`.
//!
//! A FetchSnapshot is one request of the core but several on the wire: the snapshot is
//! fetched page by page (KIP-630) and handed to the core whole.
//!
//! A connection that cannot be made, or that fails mid-request, is dropped together with
//! every request queued for it, the next attempt waits a backoff that doubles from
//! `controller.quorum.retry.backoff.ms` up to one second, and then the core is told the
//! requests were lost ([`Command::Unreachable`]), as Kafka's network client reports a
//! disconnect as an error response. The core sends again, with what is current by then.
//!
//! One retry happens here: a request whose connection had been idle since an earlier
//! exchange, and fails on it, goes once more on a new connection. The other end may have
//! closed the idle connection (a restart, a network cut that has healed) without this
//! side noticing; Kafka's client notices such a close before it sends. Every quorum RPC
//! may be delivered twice: each is answered from the epoch and offsets it carries.

use std::sync::Arc;
use std::time::Duration;

use strata_kraft::raft::{Message, NodeId, ReplicaKey, SnapshotId};
use strata_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::sync::mpsc;

use super::{Command, PeerLinks, snapshot, wire};
use crate::peer_client::{self, PeerClient, PeerError};

/// Requests waiting for one peer; more means the peer is not keeping up.
const QUEUE: usize = 64;
/// The longest backoff between connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// The largest response frame accepted from a peer.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Starts the connection task for voter `to` at `addr`; returns its request queue.
/// It runs on the serving runtime (`links.runtime`), not on the driver's thread.
pub(super) fn spawn(to: NodeId, addr: String, links: &PeerLinks) -> mpsc::Sender<Message> {
    let (tx, rx) = mpsc::channel(QUEUE);
    links.runtime.spawn(run(Peer {
        to,
        addr,
        client_id: format!("raft-client-{}", links.my_id),
        cluster_id: Arc::clone(&links.cluster_id),
        driver: links.commands.clone(),
        request_timeout: links.request_timeout,
        retry_backoff: links.retry_backoff,
        security: links.security.clone(),
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
    /// How the connection is secured.
    security: Arc<crate::security::peer::PeerSecurity>,
    /// The core's requests for this voter.
    rx: mpsc::Receiver<Message>,
}

async fn run(mut peer: Peer) {
    let mut link =
        PeerClient::new(peer.client_id.clone(), MAX_RESPONSE_BYTES).secured(peer.security.clone());
    let mut backoff = peer.retry_backoff;
    while let Some(msg) = peer.rx.recv().await {
        let answer = match &msg {
            Message::FetchSnapshotRequest {
                epoch,
                replica,
                snapshot_id,
            } => fetch_snapshot(&peer, &mut link, *epoch, *replica, *snapshot_id).await,
            _ => exchange_one(&peer, &mut link, &msg).await,
        };
        let reply = match answer {
            Ok(reply) => reply,
            Err(why) => {
                if !fail(&mut peer, &mut link, &mut backoff, &why).await {
                    return; // the driver stopped
                }
                continue;
            }
        };
        backoff = peer.retry_backoff;
        if let Some(reply) = reply
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

/// Sends one request of the core and returns the core's view of the answer (`None` when
/// the answer carries nothing the core has a word for).
async fn exchange_one(
    peer: &Peer,
    link: &mut PeerClient,
    msg: &Message,
) -> Result<Option<Message>, PeerError> {
    let (Some((api, version)), Some(body)) = (
        wire::request_api(msg),
        wire::request_to_wire(msg, peer.to, &peer.cluster_id),
    ) else {
        return Ok(None);
    };
    let response = exchange(peer, link, api, version, &body).await?;
    let endpoints = wire::node_endpoints(&response);
    if !endpoints.is_empty() {
        // Before the answer: following the leader it names needs its address.
        let _ = peer.driver.send(Command::Learned { endpoints }).await;
    }
    Ok(wire::response_from_wire(response, msg))
}

/// KIP-630: fetches snapshot `snapshot_id` page by page from position 0, and answers the
/// core once with the whole snapshot (checked end to end), or with the leader's refusal.
/// Every accepted page adds at least one byte and the size is capped
/// ([`snapshot::MAX_SNAPSHOT_BYTES`]), so the loop ends.
async fn fetch_snapshot(
    peer: &Peer,
    link: &mut PeerClient,
    epoch: i32,
    replica: ReplicaKey,
    snapshot_id: SnapshotId,
) -> Result<Option<Message>, PeerError> {
    let mut assembly = snapshot::Assembly::default();
    loop {
        let body = wire::fetch_snapshot_request(
            epoch,
            replica,
            snapshot_id,
            assembly.position(),
            &peer.cluster_id,
        );
        let response = exchange(
            peer,
            link,
            ApiKey::FetchSnapshot,
            wire::FETCH_SNAPSHOT_VERSION,
            &body,
        )
        .await?;
        match wire::snapshot_page_from_wire(response) {
            None => return Ok(None),
            Some(wire::SnapshotPage::Refused(answer)) => return Ok(Some(answer)),
            Some(wire::SnapshotPage::Data {
                epoch,
                leader,
                size,
                position,
                bytes,
            }) => match assembly.accept(size, position, &bytes) {
                snapshot::Progress::Next(_) => {}
                snapshot::Progress::Done(data) => {
                    return Ok(wire::snapshot_response(epoch, leader, snapshot_id, data));
                }
                snapshot::Progress::Refused => return Ok(None),
            },
        }
    }
}

/// One request and its response on the link, connecting first if needed, all within the
/// request timeout.
async fn exchange(
    peer: &Peer,
    link: &mut PeerClient,
    api: ApiKey,
    version: i16,
    body: &RequestKind,
) -> Result<ResponseKind, PeerError> {
    let deadline = tokio::time::Instant::now() + peer.request_timeout;
    let mut reused = link.is_connected();
    loop {
        let attempt = async {
            if !link.is_connected() {
                link.connect(peer.addr.as_str()).await?;
            }
            link.request(api, version, body).await
        };
        match peer_client::until(deadline, attempt).await {
            Ok(body) => return Ok(body),
            Err(e) if reused && e.is_connection_failure() => {
                // See the module doc: the idle connection may have been closed under us.
                tracing::debug!(peer = peer.to.0, error = %e, "quorum connection was closed; reconnecting");
                link.disconnect();
                reused = false;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Drops the connection, waits out the backoff, drops what was queued meanwhile, and then
/// tells the core its requests were lost: in that order, so that what the core sends again
/// is not among what is dropped. Returns `false` once the driver has stopped.
async fn fail(
    peer: &mut Peer,
    link: &mut PeerClient,
    backoff: &mut Duration,
    why: &PeerError,
) -> bool {
    tracing::debug!(peer = peer.to.0, addr = %peer.addr, why = %why, "quorum connection failed");
    link.disconnect();
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    while peer.rx.try_recv().is_ok() {}
    peer.driver
        .send(Command::Unreachable { to: peer.to })
        .await
        .is_ok()
}
