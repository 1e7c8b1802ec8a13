//! `sendfile(2)` for [`FileRegion`]s: segment bytes go from the page cache to a socket with no
//! copy through user space (ARCHITECTURE.md decision 4).
//!
//! The syscall goes through `rustix`, whose wrapper is safe (it takes borrowed fds and an
//! explicit offset), so this module needs no `unsafe` of its own. The file offset is passed
//! explicitly, so the shared `Arc<File>`'s cursor is never moved and concurrent fetches of the
//! same segment do not interfere.

use std::io;
use std::os::fd::AsFd;

use crate::region::FileRegion;

/// The most one call moves; Linux caps a single transfer at 0x7ffff000 bytes anyway.
const MAX_CHUNK: usize = 0x7fff_f000;

/// Sends the part of `region` after its first `sent` bytes to `out`, once. Returns the bytes
/// moved, which may be fewer than asked (a partial write on a non-blocking socket).
///
/// # Errors
///
/// `WouldBlock` when a non-blocking `out` is full; `UnexpectedEof` when the file ends before
/// the region does (a truncation cut it); any other error of the syscall, for which
/// [`is_unsupported`] tells whether a read-and-write fallback applies.
pub fn send_region(out: impl AsFd, region: &FileRegion, sent: u64) -> io::Result<usize> {
    let remaining = u64::from(region.len).saturating_sub(sent);
    if remaining == 0 {
        return Ok(0);
    }
    let mut offset = region.position + sent;
    let count = usize::try_from(remaining)
        .unwrap_or(MAX_CHUNK)
        .min(MAX_CHUNK);
    let n = rustix::fs::sendfile(out, region.file.as_fd(), Some(&mut offset), count)
        .map_err(io::Error::from)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "segment ended inside a fetched region",
        ));
    }
    Ok(n)
}

/// Whether `e` says this pair of descriptors cannot use `sendfile` at all (an old kernel, a
/// file system or socket type without support), so the caller should read and write instead.
#[must_use]
pub fn is_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == rustix::io::Errno::INVAL.raw_os_error()
            || code == rustix::io::Errno::NOSYS.raw_os_error()
            || code == rustix::io::Errno::OPNOTSUPP.raw_os_error()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;

    #[test]
    fn sends_a_region_from_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let file = Arc::new(std::fs::File::open(&path).unwrap());
        let region = FileRegion {
            file,
            position: 1000,
            len: 90_000,
            cached: None,
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            got
        });
        let out = TcpStream::connect(addr).unwrap();
        let mut sent = 0u64;
        // Bounded: every call moves at least one byte or fails.
        while sent < u64::from(region.len) {
            sent += send_region(&out, &region, sent).unwrap() as u64;
        }
        drop(out);
        assert_eq!(reader.join().unwrap(), &data[1000..91_000]);
    }

    #[test]
    fn a_truncated_file_is_an_error_not_a_loop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        std::fs::write(&path, [7u8; 10]).unwrap();
        let region = FileRegion {
            file: Arc::new(std::fs::File::open(&path).unwrap()),
            position: 0,
            len: 20,
            cached: None,
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let out = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert_eq!(send_region(&out, &region, 0).unwrap(), 10);
        let err = send_region(&out, &region, 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
