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

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use bytes::{Buf, Bytes, BytesMut};
use strata_protocol::codec::{self, Decoded};
use strata_protocol::fetch_plan::{Piece, ResponsePlan};
use strata_protocol::frame;
use strata_storage::{FileRegion, sendfile};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
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
    /// A Fetch response being computed: encoded bytes around file regions.
    PendingPlan(JoinHandle<Option<ResponsePlan<FileRegion>>>),
    /// The request cannot be answered: close the connection once the earlier responses are out.
    Close,
}

/// Serves one connection until the client closes it or sends a frame that cannot be answered.
pub async fn serve(broker: Arc<Broker>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Slot>(MAX_IN_FLIGHT);
    let writer = tokio::spawn(write_responses(broker.clone(), wr, rx, peer));
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
                    let ctx =
                        RequestContext::new(broker.clone(), &req.header, req.api_key, Some(peer));
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

async fn write_responses(
    broker: Arc<Broker>,
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Slot>,
    peer: SocketAddr,
) {
    while let Some(slot) = rx.recv().await {
        let plan = match slot {
            Slot::Ready(b) => ResponsePlan::from_bytes(b),
            Slot::NoResponse => continue,
            Slot::Pending(handle) => match handle.await {
                Ok(Some(b)) => ResponsePlan::from_bytes(b),
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(%peer, error = %e, "request task failed; closing connection");
                    break;
                }
            },
            Slot::PendingPlan(handle) => match handle.await {
                Ok(Some(plan)) => plan,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(%peer, error = %e, "request task failed; closing connection");
                    break;
                }
            },
            Slot::Close => break,
        };
        if let Err(e) = write_plan(&broker, &mut wr, plan).await {
            // A failure mid-response leaves the stream unframed: the connection must close.
            tracing::debug!(%peer, error = %e, "write failed");
            break;
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
    wr: &mut OwnedWriteHalf,
    plan: ResponsePlan<FileRegion>,
) -> io::Result<()> {
    for piece in plan.pieces {
        match piece {
            Piece::Bytes(b) => wr.write_all(&b).await?,
            Piece::Region(r) => {
                let sent = if zero_copy_enabled() {
                    send_region(wr, &r).await?
                } else {
                    0
                };
                broker.zero_copy_bytes.fetch_add(sent, Ordering::Relaxed);
                if sent < u64::from(r.len) {
                    let copied = copy_region(wr, &r, sent).await?;
                    broker.copied_bytes.fetch_add(copied, Ordering::Relaxed);
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
async fn copy_region(wr: &mut OwnedWriteHalf, r: &FileRegion, from: u64) -> io::Result<u64> {
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
        };
        buf.clear();
        part.read_into(&mut buf)?;
        wr.write_all(&buf).await?;
        done += u64::from(n);
    }
    Ok(len - from)
}
