//! Size-prefixed framing.
//!
//! Every Kafka request and response is a 4-byte big-endian size followed by that many bytes.
//! Framing works in two steps, as in mini-redis: [`check`] asks whether a whole frame is in
//! the buffer (without allocating anything), and only then does the caller split it off and
//! decode it. The size is checked against the configured cap (`socket.request.max.bytes`)
//! before anything is allocated for it, so a hostile length never becomes an allocation.

use thiserror::Error;

/// Bytes in the size prefix.
pub const SIZE_PREFIX_LEN: usize = 4;

/// The smallest request that can carry a header: api key (2), api version (2) and
/// correlation id (4).
pub const MIN_REQUEST_LEN: usize = 8;

/// A framing failure. Each one ends the connection it happened on, and only that one.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    /// The size prefix is negative or too small to hold a request header.
    #[error("invalid request size {size}")]
    InvalidSize { size: i32 },
    /// The size prefix exceeds `socket.request.max.bytes`.
    #[error("request size {size} exceeds the limit of {max} bytes (socket.request.max.bytes)")]
    TooLarge { size: usize, max: usize },
}

/// Checks whether `buf` starts with a complete frame.
///
/// Returns `Ok(Some(len))` with the body length when the whole frame is present,
/// `Ok(None)` when more bytes are needed.
///
/// # Errors
///
/// [`FrameError`] when the size prefix is negative, too small for a request header, or larger
/// than `max_len`. The caller must close the connection.
pub fn check(buf: &[u8], max_len: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.get(..SIZE_PREFIX_LEN) else {
        return Ok(None);
    };
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let len = usize::try_from(size).map_err(|_| FrameError::InvalidSize { size })?;
    if len < MIN_REQUEST_LEN {
        return Err(FrameError::InvalidSize { size });
    }
    if len > max_len {
        return Err(FrameError::TooLarge {
            size: len,
            max: max_len,
        });
    }
    if buf.len() - SIZE_PREFIX_LEN < len {
        return Ok(None);
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn incomplete_prefix_needs_more() {
        assert_eq!(check(&[0, 0], 100), Ok(None));
    }

    #[test]
    fn incomplete_body_needs_more() {
        let f = framed(&[0; 20]);
        assert_eq!(check(&f[..10], 100), Ok(None));
        assert_eq!(check(&f, 100), Ok(Some(20)));
    }

    #[test]
    fn negative_and_tiny_sizes_are_rejected() {
        assert_eq!(
            check(&(-1i32).to_be_bytes(), 100),
            Err(FrameError::InvalidSize { size: -1 })
        );
        assert_eq!(
            check(&3i32.to_be_bytes(), 100),
            Err(FrameError::InvalidSize { size: 3 })
        );
    }

    #[test]
    fn oversized_length_is_rejected_before_the_body_arrives() {
        assert_eq!(
            check(&i32::MAX.to_be_bytes(), 1024),
            Err(FrameError::TooLarge {
                size: i32::MAX as usize,
                max: 1024
            })
        );
    }
}
