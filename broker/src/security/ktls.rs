//! Kernel TLS (kTLS): after rustls's handshake, the session's keys go to the kernel, so a
//! TLS connection is a plain socket again and fetches keep `sendfile` (ARCHITECTURE.md
//! decision 4), which Kafka loses under TLS.
//!
//! # Where it applies
//!
//! The kernel must offer the `tls` upper-layer protocol (`CONFIG_TLS`, the `tls` module) and
//! take the negotiated version and cipher (AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305,
//! under TLS 1.2 and 1.3). [`support`] finds out once, at the first TLS listener's bind, by
//! handing dummy keys of each cipher to a loopback connection; `STRATA_KTLS=0` turns kTLS
//! off, so a benchmark can compare both paths on one machine. A session whose cipher the
//! kernel does not take, and every session on a kernel without the module, stays in user
//! space (rustls), where fetched records are read and encrypted.
//!
//! # How a session is handed over
//!
//! 1. The handshake reads the socket through [`RecordReader`], which follows the record
//!    boundaries in what it passes on. rustls may read on past the client's Finished (the
//!    client's first requests often follow it at once) and decrypt what it read.
//! 2. The reader is then corked: it reads on to the end of the record it is in, and no
//!    further. Reading the session until then yields the plaintext rustls decrypted, which
//!    the connection reads before anything from the kernel; the rest stays in the socket
//!    for the kernel, starting at a record boundary.
//! 3. rustls's pending output (its Finished, session tickets) is flushed, and its traffic
//!    secrets and record sequence numbers are taken out (`dangerous_extract_secrets`, which
//!    `enable_secret_extraction` allows on the listener's configuration).
//! 4. `TCP_ULP` "tls", then `TLS_TX` and `TLS_RX` with those keys. From then on `read`,
//!    `write` and `sendfile` on the socket carry plaintext; the kernel makes the records.
//!
//! # Records that are not data
//!
//! The kernel returns `EIO` from `read` when the next record is not application data;
//! [`KtlsReader`] then receives it with `recvmsg` and its record type. An alert (the
//! client's `close_notify`, or a fatal one) ends the connection as an end of stream does. A
//! post-handshake handshake message (a TLS 1.3 KeyUpdate) cannot be followed: the kernels
//! this runs on take one key per direction. The connection is closed, logged. Clients do not
//! send KeyUpdate unprompted (OpenSSL, and so librdkafka, does not); the broker never asks.
//! When the broker closes a kTLS connection, it does so without a `close_notify` of its own.
//!
//! # Why this is written here
//!
//! The `ktls` crate wraps the socket in a stream of its own, which hides the descriptor
//! `sendfile` needs behind a split, and it panics on records a client controls (a
//! ChangeCipherSpec after the handshake, an unexpected control message). What is needed is
//! three socket options and one `recvmsg`, which `nix` offers safely; the rest is rustls's.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, ready};

use nix::libc;
use nix::sys::socket::sockopt::{TcpTlsRx, TcpTlsTx, TcpUlp, TlsCryptoInfo};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, TlsGetRecordType, recvmsg, setsockopt};
use rustls::{ConnectionTrafficSecrets, ProtocolVersion};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;

/// A TLS record's header: type, version, length.
const RECORD_HEADER: usize = 5;

/// What the running kernel takes, found once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Support {
    /// Bit `i` of [`Cipher`] `c`'s entry: version `i` (0: TLS 1.2, 1: TLS 1.3) is taken.
    ciphers: [u8; 3],
    /// Why kTLS is not used at all, when it is not.
    pub unavailable: Option<&'static str>,
}

/// The AEADs the kernel and rustls's ring provider share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cipher {
    Aes128Gcm = 0,
    Aes256Gcm = 1,
    Chacha20Poly1305 = 2,
}

impl Support {
    /// Whether any session may be handed to the kernel.
    #[must_use]
    pub fn any(&self) -> bool {
        self.ciphers.iter().any(|&c| c != 0)
    }

    fn takes(&self, cipher: Cipher, tls13: bool) -> bool {
        self.ciphers[cipher as usize] & (1 << u8::from(tls13)) != 0
    }

    /// The cipher and version pairs taken, for the log.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut taken = Vec::new();
        for (cipher, name) in [
            (Cipher::Aes128Gcm, "AES-128-GCM"),
            (Cipher::Aes256Gcm, "AES-256-GCM"),
            (Cipher::Chacha20Poly1305, "CHACHA20-POLY1305"),
        ] {
            for (tls13, version) in [(false, "TLSv1.2"), (true, "TLSv1.3")] {
                if self.takes(cipher, tls13) {
                    taken.push(format!("{name}/{version}"));
                }
            }
        }
        taken.join(",")
    }
}

/// What this kernel takes: probed at the first call, then remembered.
pub fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        if std::env::var("STRATA_KTLS").is_ok_and(|v| v == "0") {
            return Support {
                unavailable: Some("STRATA_KTLS=0"),
                ..Support::default()
            };
        }
        probe()
    })
}

/// Hands dummy keys of each cipher and version to the two ends of a loopback connection (a
/// socket takes `TLS_TX` once, so each pair is a new connection).
fn probe() -> Support {
    let mut support = Support::default();
    for cipher in [
        Cipher::Aes128Gcm,
        Cipher::Aes256Gcm,
        Cipher::Chacha20Poly1305,
    ] {
        for tls13 in [false, true] {
            match probe_one(cipher, tls13) {
                Ok(()) => support.ciphers[cipher as usize] |= 1 << u8::from(tls13),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    support.unavailable = Some("the kernel has no tls module (CONFIG_TLS)");
                    return support;
                }
                Err(e) => {
                    tracing::debug!(?cipher, tls13, error = %e, "kernel TLS does not take this cipher");
                }
            }
        }
    }
    if !support.any() {
        support.unavailable = Some("the kernel's tls module takes none of the ciphers");
    }
    support
}

fn probe_one(cipher: Cipher, tls13: bool) -> io::Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let client = std::net::TcpStream::connect(listener.local_addr()?)?;
    let (_server, _) = listener.accept()?;
    setsockopt(&client, TcpUlp::default(), b"tls")?;
    let key_len = if cipher == Cipher::Aes128Gcm { 16 } else { 32 };
    let info = crypto_info(cipher, tls13, &[0; 32][..key_len], &[0; 12], 0)?;
    setsockopt(&client, TcpTlsTx, &info)?;
    setsockopt(&client, TcpTlsRx, &info)?;
    Ok(())
}

/// The kernel's `tls12_crypto_info_*` for one direction. For the GCM ciphers, the first 4
/// bytes of rustls's 12-byte IV are the kernel's salt and the other 8 its IV; ChaCha20's IV
/// is all 12.
fn crypto_info(
    cipher: Cipher,
    tls13: bool,
    key: &[u8],
    iv: &[u8],
    seq: u64,
) -> io::Result<TlsCryptoInfo> {
    let version = if tls13 {
        libc::TLS_1_3_VERSION
    } else {
        libc::TLS_1_2_VERSION
    };
    let rec_seq = seq.to_be_bytes();
    macro_rules! gcm {
        ($variant:ident, $info:ident, $cipher:ident) => {
            TlsCryptoInfo::$variant(libc::$info {
                info: libc::tls_crypto_info {
                    version,
                    cipher_type: libc::$cipher,
                },
                iv: exactly(iv.get(4..))?,
                key: exactly(Some(key))?,
                salt: exactly(iv.get(..4))?,
                rec_seq,
            })
        };
    }
    Ok(match cipher {
        Cipher::Aes128Gcm => gcm!(
            Aes128Gcm,
            tls12_crypto_info_aes_gcm_128,
            TLS_CIPHER_AES_GCM_128
        ),
        Cipher::Aes256Gcm => gcm!(
            Aes256Gcm,
            tls12_crypto_info_aes_gcm_256,
            TLS_CIPHER_AES_GCM_256
        ),
        Cipher::Chacha20Poly1305 => {
            TlsCryptoInfo::Chacha20Poly1305(libc::tls12_crypto_info_chacha20_poly1305 {
                info: libc::tls_crypto_info {
                    version,
                    cipher_type: libc::TLS_CIPHER_CHACHA20_POLY1305,
                },
                iv: exactly(Some(iv))?,
                key: exactly(Some(key))?,
                salt: [],
                rec_seq,
            })
        }
    })
}

/// `bytes` as an array of exactly `N`.
fn exactly<const N: usize>(bytes: Option<&[u8]>) -> io::Result<[u8; N]> {
    bytes
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "key or IV of the wrong length"))
}

fn cipher_of(secrets: &ConnectionTrafficSecrets) -> Option<(Cipher, &[u8], &[u8])> {
    match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
            Some((Cipher::Aes128Gcm, key.as_ref(), iv.as_ref()))
        }
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
            Some((Cipher::Aes256Gcm, key.as_ref(), iv.as_ref()))
        }
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            Some((Cipher::Chacha20Poly1305, key.as_ref(), iv.as_ref()))
        }
        _ => None,
    }
}

/// The handshake's view of the socket: reads pass through, and the record boundaries in
/// them are followed, so that once [`RecordReader::cork`]ed it can stop at the end of a
/// record (see the module docs). Writes go straight through.
pub struct RecordReader {
    inner: TcpStream,
    /// Stop at the next record boundary: reads then end the stream.
    corked: bool,
    /// Bytes of the current record's header read so far (up to 5).
    header: [u8; RECORD_HEADER],
    header_read: usize,
    /// Bytes of the current record's body still to read.
    body_left: usize,
}

impl RecordReader {
    #[must_use]
    pub fn new(inner: TcpStream) -> Self {
        RecordReader {
            inner,
            corked: false,
            header: [0; RECORD_HEADER],
            header_read: 0,
            body_left: 0,
        }
    }

    /// From now on, read to the end of the current record and then report the end of the
    /// stream.
    pub fn cork(&mut self) {
        self.corked = true;
    }

    fn at_boundary(&self) -> bool {
        self.header_read == 0 && self.body_left == 0
    }

    /// Follows the record boundaries through bytes read.
    fn track(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let n = self.body_left.min(bytes.len());
                self.body_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (RECORD_HEADER - self.header_read).min(bytes.len());
            self.header[self.header_read..self.header_read + n].copy_from_slice(&bytes[..n]);
            self.header_read += n;
            bytes = &bytes[n..];
            if self.header_read == RECORD_HEADER {
                self.body_left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.header_read = 0;
            }
        }
    }

    #[must_use]
    pub fn into_inner(self) -> TcpStream {
        self.inner
    }
}

impl AsyncRead for RecordReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.corked {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            this.track(&buf.filled()[before..]);
            return Poll::Ready(Ok(()));
        }
        if this.at_boundary() {
            return Poll::Ready(Ok(()));
        }
        let want = if this.body_left > 0 {
            this.body_left
        } else {
            RECORD_HEADER - this.header_read
        };
        // Only the rest of one record is read corked; a bounce buffer keeps this free of
        // `unsafe`.
        let mut bounce = [0u8; 4096];
        let n = want.min(buf.remaining()).min(bounce.len());
        let mut part = ReadBuf::new(&mut bounce[..n]);
        ready!(Pin::new(&mut this.inner).poll_read(cx, &mut part))?;
        let got = part.filled().to_owned();
        if got.is_empty() {
            return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
        }
        this.track(&got);
        buf.put_slice(&got);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for RecordReader {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The outcome of [`offload`].
pub enum Offload {
    /// The kernel has the session: the socket carries plaintext, after the plaintext
    /// rustls had already decrypted.
    Kernel(TcpStream, Vec<u8>),
    /// The session stays in rustls (no kTLS here, or not for its cipher).
    UserSpace(Box<tokio_rustls::server::TlsStream<RecordReader>>),
}

/// Hands a finished handshake's session to the kernel where it takes it (see the module
/// docs).
///
/// # Errors
///
/// The session could not be handed over once it was begun (the client closed or failed
/// inside a record, pending output did not flush, a socket option was refused); the
/// connection cannot go on and must be closed. A client that stops inside a record holds
/// this up: the caller bounds it in time.
pub async fn offload(
    mut tls: tokio_rustls::server::TlsStream<RecordReader>,
) -> io::Result<Offload> {
    let support = support();
    let conn = tls.get_ref().1;
    let tls13 = conn.protocol_version() == Some(ProtocolVersion::TLSv1_3);
    let cipher = match conn.negotiated_cipher_suite().map(|s| s.suite()) {
        Some(
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
            | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ) => Cipher::Aes128Gcm,
        Some(
            rustls::CipherSuite::TLS13_AES_256_GCM_SHA384
            | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ) => Cipher::Aes256Gcm,
        Some(
            rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
            | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ) => Cipher::Chacha20Poly1305,
        _ => return Ok(Offload::UserSpace(Box::new(tls))),
    };
    if !support.takes(cipher, tls13) {
        return Ok(Offload::UserSpace(Box::new(tls)));
    }
    tls.get_mut().0.cork();
    let mut plaintext = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match tokio::io::AsyncReadExt::read(&mut tls, &mut chunk).await {
            Ok(0) => break,
            Ok(n) => plaintext.extend_from_slice(&chunk[..n]),
            // The corked end of the stream, which rustls reports as an end without
            // close_notify; the session itself goes on in the kernel.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && tls.get_ref().0.at_boundary() => {
                break;
            }
            Err(e) => return Err(e),
        }
    }
    tokio::io::AsyncWriteExt::flush(&mut tls).await?;
    let (io, conn) = tls.into_inner();
    let secrets = conn
        .dangerous_extract_secrets()
        .map_err(|e| io::Error::other(format!("taking the TLS keys out of rustls: {e}")))?;
    let stream = io.into_inner();
    let (tx_seq, tx) = &secrets.tx;
    let (rx_seq, rx) = &secrets.rx;
    let negotiated = |s| cipher_of(s).filter(|(c, ..)| *c == cipher);
    let (Some((_, tx_key, tx_iv)), Some((_, rx_key, rx_iv))) = (negotiated(tx), negotiated(rx))
    else {
        return Err(io::Error::other(
            "rustls gave keys of another cipher than the one it negotiated",
        ));
    };
    let tx = crypto_info(cipher, tls13, tx_key, tx_iv, *tx_seq)?;
    let rx = crypto_info(cipher, tls13, rx_key, rx_iv, *rx_seq)?;
    setsockopt(&stream, TcpUlp::default(), b"tls")?;
    setsockopt(&stream, TcpTlsTx, &tx)?;
    setsockopt(&stream, TcpTlsRx, &rx)?;
    Ok(Offload::Kernel(stream, plaintext))
}

/// The read side of a kTLS connection: plaintext from the kernel, and the end of the stream
/// when the client sends an alert (see the module docs).
pub struct KtlsReader {
    inner: OwnedReadHalf,
    /// Plaintext rustls decrypted before the handover, read first.
    early: bytes::Bytes,
    closed: bool,
}

impl KtlsReader {
    #[must_use]
    pub fn new(inner: OwnedReadHalf, early: Vec<u8>) -> Self {
        KtlsReader {
            inner,
            early: early.into(),
            closed: false,
        }
    }

    /// Receives the record the kernel would not return from `read`. `Ok` when it is an
    /// alert, which ends the stream; any other record is an error that closes the
    /// connection.
    fn control_record(&self) -> io::Result<()> {
        let stream: &TcpStream = self.inner.as_ref();
        let fd = stream.as_fd().as_raw_fd();
        let mut body = [0u8; 512];
        let mut iov = [io::IoSliceMut::new(&mut body)];
        let mut cmsg = nix::cmsg_space!(u8);
        let msg = recvmsg::<()>(fd, &mut iov, Some(&mut cmsg), MsgFlags::MSG_DONTWAIT)?;
        let record = msg.cmsgs()?.find_map(|c| match c {
            ControlMessageOwned::TlsGetRecordType(t) => Some(t),
            _ => None,
        });
        match record {
            Some(TlsGetRecordType::Alert) => Ok(()),
            Some(TlsGetRecordType::Handshake) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the client sent a TLS handshake message after the handshake (a key update), which kernel TLS does not follow here",
            )),
            other => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected TLS record after the handshake: {other:?}"),
            )),
        }
    }
}

impl AsyncRead for KtlsReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.early.is_empty() {
            let n = this.early.len().min(buf.remaining());
            buf.put_slice(&this.early.split_to(n));
            return Poll::Ready(Ok(()));
        }
        if this.closed {
            return Poll::Ready(Ok(()));
        }
        match ready!(Pin::new(&mut this.inner).poll_read(cx, buf)) {
            Err(e) if e.raw_os_error() == Some(libc::EIO) => {
                this.control_record()?;
                // An alert ends the stream as a close does: nothing more is read.
                this.closed = true;
                Poll::Ready(Ok(()))
            }
            other => Poll::Ready(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcm_keys_split_into_salt_and_iv_and_wrong_lengths_are_refused() {
        let iv: Vec<u8> = (0..12).collect();
        let key = [7u8; 32];
        let TlsCryptoInfo::Aes128Gcm(info) =
            crypto_info(Cipher::Aes128Gcm, true, &key[..16], &iv, 0x0102).unwrap()
        else {
            panic!("wrong variant");
        };
        assert_eq!(info.salt, [0, 1, 2, 3]);
        assert_eq!(info.iv, [4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(info.rec_seq, [0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(info.info.version, libc::TLS_1_3_VERSION);
        let TlsCryptoInfo::Chacha20Poly1305(info) =
            crypto_info(Cipher::Chacha20Poly1305, false, &key, &iv, 9).unwrap()
        else {
            panic!("wrong variant");
        };
        assert_eq!(info.iv.to_vec(), iv);
        assert_eq!(info.info.version, libc::TLS_1_2_VERSION);
        assert!(crypto_info(Cipher::Aes256Gcm, true, &key[..16], &iv, 0).is_err());
        assert!(crypto_info(Cipher::Aes128Gcm, true, &key, &iv[..8], 0).is_err());
    }

    #[tokio::test]
    async fn a_corked_record_reader_stops_at_the_next_record_boundary() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        // Two whole records and the first byte of a third's body.
        let first = [22, 3, 3, 0, 3, b'a', b'b', b'c', 23, 3, 3, 0, 4, b'd'];
        client.write_all(&first).await.unwrap();
        let mut reader = RecordReader::new(server);
        let mut got = [0u8; 10];
        // Uncorked, reads pass through whole.
        reader.read_exact(&mut got).await.unwrap();
        assert_eq!(got[..], first[..10]);
        reader.cork();
        // Corked inside the second record: the rest of it is read, once it comes, then the
        // stream ends.
        let rest = [b'e', b'f', b'g', 23, 3, 3, 0, 9];
        client.write_all(&rest).await.unwrap();
        let mut tail = Vec::new();
        reader.read_to_end(&mut tail).await.unwrap();
        assert_eq!(tail, [3, 0, 4, b'd', b'e', b'f', b'g']);
        assert!(reader.at_boundary());
        // The next record is still in the socket.
        let mut next = [0u8; 5];
        reader.into_inner().read_exact(&mut next).await.unwrap();
        assert_eq!(next, [23, 3, 3, 0, 9]);
    }
}
