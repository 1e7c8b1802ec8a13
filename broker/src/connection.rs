//! One client connection.
//!
//! The read half decodes frames and processes requests in arrival order. Most requests are
//! answered inline; a request that may wait (a long-polling fetch) runs in a task of its own,
//! so the requests behind it keep being processed (ARCHITECTURE.md decision 7). Either way its
//! response slot is queued in order, and the write half sends the slots strictly in request
//! order, because clients pipeline and match responses by position.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use strata_protocol::codec::{self, Decoded};
use strata_protocol::frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::handlers::{self, RequestContext};

/// Requests one connection may have in flight before the broker stops reading from it. This
/// bounds the memory one client can pin (back-pressure); librdkafka pipelines at most
/// `max.in.flight` (5 by default) per connection.
const MAX_IN_FLIGHT: usize = 64;

/// A response slot, in request order.
pub enum Slot {
    /// The response is ready.
    Ready(Bytes),
    /// The request takes no response (Produce with acks=0).
    NoResponse,
    /// The response is being computed by another task; `None` closes the connection.
    Pending(JoinHandle<Option<Bytes>>),
    /// The request cannot be answered: close the connection once the earlier responses are out.
    Close,
}

/// Serves one connection until the client closes it or sends a frame that cannot be answered.
pub async fn serve(broker: Arc<Broker>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Slot>(MAX_IN_FLIGHT);
    let writer = tokio::spawn(write_responses(wr, rx, peer));
    let max = broker.config.socket_request_max_bytes;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    'conn: loop {
        // Decode every complete frame in the buffer.
        loop {
            let len = match frame::check(&buf, max) {
                Ok(Some(len)) => len,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: bad frame");
                    break 'conn;
                }
            };
            buf.advance(frame::SIZE_PREFIX_LEN);
            let body = buf.split_to(len).freeze();
            let slot = match codec::decode_request(body) {
                Ok(Decoded::Request(req)) => {
                    let ctx = RequestContext::new(broker.clone(), &req.header, req.api_key);
                    handlers::dispatch(ctx, req.body).await
                }
                Ok(Decoded::ApiVersionsTooNew { correlation_id }) => {
                    Slot::Ready(codec::encode_api_versions_fallback(correlation_id))
                }
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: cannot answer request");
                    break 'conn;
                }
            };
            if tx.send(slot).await.is_err() {
                break 'conn; // the writer has gone: the socket is closed
            }
        }
        // Make room for the rest of the frame in progress (its length is already checked
        // against the cap), so a large produce is read without repeated reallocation.
        if buf.len() >= frame::SIZE_PREFIX_LEN {
            let want = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]).max(0) as usize
                + frame::SIZE_PREFIX_LEN;
            buf.reserve(want.saturating_sub(buf.len()).min(max));
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => {
                if !buf.is_empty() {
                    tracing::info!(%peer, pending = buf.len(), "client disconnected mid-frame");
                }
                break;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, error = %e, "read failed");
                break;
            }
        }
    }
    drop(tx);
    // Responses already queued still go out, then the writer closes the socket.
    let _ = writer.await;
}

async fn write_responses(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Slot>, peer: SocketAddr) {
    while let Some(slot) = rx.recv().await {
        let bytes = match slot {
            Slot::Ready(b) => b,
            Slot::NoResponse => continue,
            Slot::Pending(handle) => match handle.await {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(%peer, error = %e, "request task failed; closing connection");
                    break;
                }
            },
            Slot::Close => break,
        };
        if let Err(e) = wr.write_all(&bytes).await {
            tracing::debug!(%peer, error = %e, "write failed");
            break;
        }
    }
    let _ = wr.shutdown().await;
}
