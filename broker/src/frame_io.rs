//! Reading a peer's response frame: the one size-prefixed read shared by every client this
//! node runs against another node (quorum peers, the controller client, forwarding, the
//! replica fetcher). A peer is trusted no more than a client: its size prefix is checked
//! against the caller's cap before anything is allocated.

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// One response frame body (without its size prefix) of at most `max` bytes.
///
/// # Errors
///
/// The read's I/O error, or `InvalidData` for a negative size or one above `max`.
pub(crate) async fn read_frame(stream: &mut TcpStream, max: usize) -> std::io::Result<Bytes> {
    let len = stream.read_i32().await?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= max)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad frame size"))?;
    let mut body = BytesMut::zeroed(len);
    stream.read_exact(&mut body).await?;
    Ok(body.freeze())
}
