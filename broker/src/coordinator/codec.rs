//! The primitives of Kafka's coordinator record schemas, as its generated `Readable` and
//! `Writable` encode them: big-endian integers, classic strings and arrays (int16 / int32
//! length, -1 for null), and the flexible versions' compact forms (unsigned varint length
//! plus one, 0 for null) with tagged fields.
//!
//! Hand-written rather than taken from `kafka-protocol`, which has the request and response
//! messages but not the records of the internal topics.

use bytes::{BufMut, BytesMut};
use thiserror::Error;

/// Why a coordinator record's bytes do not follow their schema.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    #[error("{what} runs past the end of the record")]
    Truncated { what: &'static str },
    #[error("{what} is not valid UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("{what} has a negative or oversized length")]
    BadLength { what: &'static str },
}

/// A cursor over a record's bytes.
pub struct Reader<'a>(pub &'a [u8]);

impl Reader<'_> {
    /// The next `n` bytes.
    ///
    /// # Errors
    /// [`CodecError::Truncated`].
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], CodecError> {
        if self.0.len() < n {
            return Err(CodecError::Truncated { what });
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    /// # Errors
    /// [`CodecError::Truncated`].
    pub fn i8(&mut self, what: &'static str) -> Result<i8, CodecError> {
        Ok(i8::from_be_bytes([self.take(1, what)?[0]]))
    }

    /// # Errors
    /// [`CodecError::Truncated`].
    pub fn i16(&mut self, what: &'static str) -> Result<i16, CodecError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    /// # Errors
    /// [`CodecError::Truncated`].
    pub fn i32(&mut self, what: &'static str) -> Result<i32, CodecError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// # Errors
    /// [`CodecError::Truncated`].
    pub fn i64(&mut self, what: &'static str) -> Result<i64, CodecError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(a))
    }

    /// An unsigned varint of at most 5 bytes (a length or a tag).
    ///
    /// # Errors
    /// [`CodecError::Truncated`], [`CodecError::BadLength`] past 32 bits.
    pub fn uvarint(&mut self, what: &'static str) -> Result<u32, CodecError> {
        let mut n: u64 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1, what)?[0];
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return u32::try_from(n).map_err(|_| CodecError::BadLength { what });
            }
        }
        Err(CodecError::BadLength { what })
    }

    fn utf8(&mut self, n: usize, what: &'static str) -> Result<String, CodecError> {
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| CodecError::NotUtf8 { what })
    }

    /// A classic string: int16 length, then UTF-8. A null (-1) reads as empty, as Kafka's
    /// readers of non-nullable fields tolerate.
    ///
    /// # Errors
    /// [`CodecError`].
    pub fn string(&mut self, what: &'static str) -> Result<String, CodecError> {
        match usize::try_from(self.i16(what)?) {
            Ok(len) => self.utf8(len, what),
            Err(_) => Ok(String::new()),
        }
    }

    /// A compact string: uvarint length plus one, then UTF-8; null reads as empty.
    ///
    /// # Errors
    /// [`CodecError`].
    pub fn compact_string(&mut self, what: &'static str) -> Result<String, CodecError> {
        match self.uvarint(what)? {
            0 => Ok(String::new()),
            n => self.utf8((n - 1) as usize, what),
        }
    }

    /// A classic array's length: `None` for null (-1).
    ///
    /// # Errors
    /// [`CodecError`]; a length past the bytes left is [`CodecError::BadLength`].
    pub fn array_len(&mut self, what: &'static str) -> Result<Option<usize>, CodecError> {
        let n = self.i32(what)?;
        if n == -1 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| CodecError::BadLength { what })?;
        self.check_len(n, what).map(Some)
    }

    /// A compact array's length: `None` for null (0).
    ///
    /// # Errors
    /// As [`Reader::array_len`].
    pub fn compact_array_len(&mut self, what: &'static str) -> Result<Option<usize>, CodecError> {
        match self.uvarint(what)? {
            0 => Ok(None),
            n => self.check_len((n - 1) as usize, what).map(Some),
        }
    }

    /// Every element takes at least one byte: a longer count is a lie, refused before
    /// anything is allocated for it.
    fn check_len(&self, n: usize, what: &'static str) -> Result<usize, CodecError> {
        if n > self.0.len() {
            return Err(CodecError::BadLength { what });
        }
        Ok(n)
    }

    /// The tagged fields of a flexible structure: each one's tag and bytes are handed to
    /// `field`, which ignores the tags it does not know, as Kafka's readers do.
    ///
    /// # Errors
    /// [`CodecError`], or what `field` answers.
    pub fn tagged_fields(
        &mut self,
        what: &'static str,
        mut field: impl FnMut(u32, &[u8]) -> Result<(), CodecError>,
    ) -> Result<(), CodecError> {
        let count = self.uvarint(what)?;
        for _ in 0..count {
            let tag = self.uvarint(what)?;
            let len = self.uvarint(what)? as usize;
            field(tag, self.take(len, what)?)?;
        }
        Ok(())
    }
}

/// A classic string: int16 length and UTF-8. Callers bound their strings far below
/// `i16::MAX` bytes; a longer one is cut rather than written with a wrapped length.
pub fn put_str(out: &mut BytesMut, s: &str) {
    let len = s.len().min(i16::MAX as usize);
    out.put_i16(len as i16);
    out.put_slice(&s.as_bytes()[..len]);
}

/// An unsigned varint.
pub fn put_uvarint(out: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// A compact string: uvarint length plus one and UTF-8.
pub fn put_compact_str(out: &mut BytesMut, s: &str) {
    put_uvarint(out, u32::try_from(s.len() + 1).unwrap_or(u32::MAX));
    out.put_slice(s.as_bytes());
}

/// A compact array's length (`None` for null).
pub fn put_compact_len(out: &mut BytesMut, len: Option<usize>) {
    put_uvarint(
        out,
        len.map_or(0, |n| u32::try_from(n + 1).unwrap_or(u32::MAX)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_compact_forms_round_trip() {
        let mut out = BytesMut::new();
        for v in [0u32, 1, 127, 128, 300, u32::MAX] {
            put_uvarint(&mut out, v);
        }
        put_compact_str(&mut out, "héllo");
        put_compact_len(&mut out, None);
        put_compact_len(&mut out, Some(0));
        put_str(&mut out, "abc");
        let mut r = Reader(&out);
        for v in [0u32, 1, 127, 128, 300, u32::MAX] {
            assert_eq!(r.uvarint("v").unwrap(), v);
        }
        assert_eq!(r.compact_string("s").unwrap(), "héllo");
        assert_eq!(r.compact_array_len("a").unwrap(), None);
        assert_eq!(r.compact_array_len("a").unwrap(), Some(0));
        assert_eq!(r.string("s").unwrap(), "abc");
        assert!(r.0.is_empty());
    }

    #[test]
    fn lies_and_truncation_are_errors() {
        assert!(matches!(
            Reader(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).uvarint("v"),
            Err(CodecError::BadLength { .. })
        ));
        assert!(matches!(
            Reader(&[0, 0, 0, 9, 1]).array_len("a"),
            Err(CodecError::BadLength { .. })
        ));
        assert!(matches!(
            Reader(&[0, 5, b'a']).string("s"),
            Err(CodecError::Truncated { .. })
        ));
        assert!(matches!(
            Reader(&[0, 2, 0xc3, 0x28]).string("s"),
            Err(CodecError::NotUtf8 { .. })
        ));
    }
}
