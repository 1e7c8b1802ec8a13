//! Kafka's flexible-version ("compact") primitives, as used by every metadata record.
//!
//! | type                     | bytes                                                        |
//! |--------------------------|--------------------------------------------------------------|
//! | `int8/16/32/64`, `uint16`| big-endian, fixed width                                      |
//! | `bool`                   | one byte, `0` = false, anything else = true (Kafka's reader) |
//! | `uuid`                   | 16 bytes, most significant half first                        |
//! | unsigned varint          | LEB128, at most 5 bytes for a 32-bit value                   |
//! | compact string           | unsigned varint `len + 1`, then UTF-8; `0` = null            |
//! | compact array            | unsigned varint `count + 1`, then elements; `0` = null       |
//! | tagged fields            | unsigned varint count, then `(tag, size, bytes)` per field   |
//!
//! The reader never trusts a length beyond the bytes it holds, so garbage input yields a
//! [`DecodeError`] rather than a panic or a huge allocation (ARCHITECTURE.md decision 9).

use thiserror::Error;
use uuid::Uuid;

/// Why a metadata record's bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The buffer ended before a field did.
    #[error("record truncated: {field} needs {needed} bytes, {remaining} left")]
    Truncated {
        field: &'static str,
        needed: usize,
        remaining: usize,
    },
    /// An unsigned varint ran past 5 bytes (Kafka's limit for 32-bit varints).
    #[error("varint longer than 5 bytes in {field}")]
    VarintTooLong { field: &'static str },
    /// A compact string held bytes that are not UTF-8.
    #[error("{field} is not valid UTF-8")]
    InvalidUtf8 { field: &'static str },
    /// A non-nullable field was encoded as null.
    #[error("{field} is null but the schema does not allow null")]
    UnexpectedNull { field: &'static str },
    /// The metadata frame version (KIP-631 framing) is not 1.
    #[error("unsupported metadata frame version {0}")]
    UnsupportedFrameVersion(u32),
    /// The api key names a record type this node does not know.
    #[error("unknown metadata record type {0}")]
    UnknownRecordType(u32),
    /// The record version is newer (or older) than this node can read.
    #[error("unsupported version {version} of metadata record type {record_type}")]
    UnsupportedRecordVersion { record_type: u16, version: u32 },
    /// Bytes were left over after the record's last field.
    #[error("{0} trailing bytes after the record")]
    TrailingBytes(usize),
    /// A field holds a value its schema gives no meaning (an unknown enum value).
    #[error("{field} has the undefined value {value}")]
    InvalidValue { field: &'static str, value: i64 },
}

/// Appends compact-encoded fields to a byte vector.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    /// The encoded bytes so far.
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }
    pub(crate) fn i8(&mut self, v: i8) {
        self.buf.push(v as u8);
    }
    pub(crate) fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }
    /// Kafka's `float64`: the IEEE 754 bits, big-endian.
    pub(crate) fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_bits().to_be_bytes());
    }
    pub(crate) fn uuid(&mut self, v: Uuid) {
        self.buf.extend_from_slice(v.as_bytes());
    }
    /// A length prefix of `len + 1`; lengths past `u32::MAX - 1` cannot occur because
    /// every encoded record must fit in one batch.
    fn compact_len(&mut self, len: usize) {
        self.uvarint(u32::try_from(len).map_or(u32::MAX, |l| l.saturating_add(1)));
    }
    pub(crate) fn string(&mut self, s: &str) {
        self.compact_len(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }
    /// Compact bytes: a length of `len + 1`, then the bytes.
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.compact_len(b.len());
        self.buf.extend_from_slice(b);
    }
    pub(crate) fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.uvarint(0),
        }
    }
    pub(crate) fn i32_array(&mut self, values: &[i32]) {
        self.compact_len(values.len());
        for v in values {
            self.i32(*v);
        }
    }
    pub(crate) fn uuid_array(&mut self, values: &[Uuid]) {
        self.compact_len(values.len());
        for v in values {
            self.uuid(*v);
        }
    }
    pub(crate) fn array_len(&mut self, len: usize) {
        self.compact_len(len);
    }
    /// Every record (and every struct inside one) ends with a tagged-field section; we
    /// write no tagged fields, so it is a single zero.
    pub(crate) fn empty_tagged_fields(&mut self) {
        self.uvarint(0);
    }
    /// A tagged-field section (KIP-482): the count, then per field its tag, its size and
    /// its bytes. `fields` must be in ascending tag order, as Kafka writes them; a field
    /// at its default value is left out by the caller.
    pub(crate) fn tagged_fields(&mut self, fields: &[TaggedField]) {
        self.uvarint(u32::try_from(fields.len()).unwrap_or(u32::MAX));
        for field in fields {
            self.uvarint(field.tag);
            // The size is the plain byte count, not a compact `len + 1`.
            self.uvarint(u32::try_from(field.bytes.len()).unwrap_or(u32::MAX));
            self.buf.extend_from_slice(&field.bytes);
        }
    }
}

/// One tagged field, encoded, ready for [`Writer::tagged_fields`].
#[derive(Debug)]
pub(crate) struct TaggedField {
    /// The field's tag in its schema.
    tag: u32,
    /// The field's encoded value.
    bytes: Vec<u8>,
}

impl TaggedField {
    /// The field with this tag, its value written by `encode`.
    pub(crate) fn new(tag: u32, encode: impl FnOnce(&mut Writer)) -> Self {
        let mut w = Writer::default();
        encode(&mut w);
        TaggedField { tag, bytes: w.buf }
    }
}

/// Reads compact-encoded fields from a borrowed buffer.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    /// The bytes not yet consumed.
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated {
                field,
                needed: n,
                remaining: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    pub(crate) fn uvarint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.array::<1>(field)?[0];
            // The fifth byte may only carry the top 4 bits of a u32.
            if i == 4 && b > 0x0f {
                return Err(DecodeError::VarintTooLong { field });
            }
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintTooLong { field })
    }

    pub(crate) fn i8(&mut self, field: &'static str) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array(field)?))
    }
    pub(crate) fn i16(&mut self, field: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }
    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }
    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }
    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }
    pub(crate) fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        Ok(self.array::<1>(field)?[0] != 0)
    }
    pub(crate) fn f64(&mut self, field: &'static str) -> Result<f64, DecodeError> {
        Ok(f64::from_bits(u64::from_be_bytes(self.array(field)?)))
    }
    pub(crate) fn uuid(&mut self, field: &'static str) -> Result<Uuid, DecodeError> {
        Ok(Uuid::from_bytes(self.array(field)?))
    }

    /// A compact length: `None` for null, else the element count.
    fn compact_len(&mut self, field: &'static str) -> Result<Option<usize>, DecodeError> {
        let raw = self.uvarint(field)?;
        Ok(raw.checked_sub(1).map(|n| n as usize))
    }

    pub(crate) fn nullable_string(
        &mut self,
        field: &'static str,
    ) -> Result<Option<String>, DecodeError> {
        let Some(len) = self.compact_len(field)? else {
            return Ok(None);
        };
        let bytes = self.take(len, field)?;
        std::str::from_utf8(bytes)
            .map(|s| Some(s.to_owned()))
            .map_err(|_| DecodeError::InvalidUtf8 { field })
    }

    /// Compact (non-null) bytes.
    pub(crate) fn bytes(&mut self, field: &'static str) -> Result<Vec<u8>, DecodeError> {
        let len = self
            .compact_len(field)?
            .ok_or(DecodeError::UnexpectedNull { field })?;
        Ok(self.take(len, field)?.to_vec())
    }

    pub(crate) fn string(&mut self, field: &'static str) -> Result<String, DecodeError> {
        self.nullable_string(field)?
            .ok_or(DecodeError::UnexpectedNull { field })
    }

    /// The element count of a compact array whose elements take at least `min_elem_len`
    /// bytes each, checked against the bytes left so a forged count cannot make us
    /// allocate more than the input could hold.
    pub(crate) fn nullable_array_len(
        &mut self,
        field: &'static str,
        min_elem_len: usize,
    ) -> Result<Option<usize>, DecodeError> {
        let Some(count) = self.compact_len(field)? else {
            return Ok(None);
        };
        let needed = count.saturating_mul(min_elem_len);
        if needed > self.remaining() {
            return Err(DecodeError::Truncated {
                field,
                needed,
                remaining: self.remaining(),
            });
        }
        Ok(Some(count))
    }

    pub(crate) fn array_len(
        &mut self,
        field: &'static str,
        min_elem_len: usize,
    ) -> Result<usize, DecodeError> {
        self.nullable_array_len(field, min_elem_len)?
            .ok_or(DecodeError::UnexpectedNull { field })
    }

    pub(crate) fn nullable_i32_array(
        &mut self,
        field: &'static str,
    ) -> Result<Option<Vec<i32>>, DecodeError> {
        let Some(count) = self.nullable_array_len(field, 4)? else {
            return Ok(None);
        };
        (0..count)
            .map(|_| self.i32(field))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub(crate) fn i32_array(&mut self, field: &'static str) -> Result<Vec<i32>, DecodeError> {
        self.nullable_i32_array(field)?
            .ok_or(DecodeError::UnexpectedNull { field })
    }

    /// Skips a tagged-field section whose tags are all unknown at this version; skipping
    /// them keeps us readable by records from newer writers (KIP-482: unknown tagged
    /// fields must be ignored).
    pub(crate) fn skip_tagged_fields(&mut self) -> Result<(), DecodeError> {
        self.tagged_fields(|_, _| Ok(false))
    }

    /// Reads a tagged-field section. `known` is handed each field's tag and a reader over
    /// exactly its bytes; it decodes the field and returns `true`, or returns `false` for a
    /// tag it does not know, which is skipped. A known field must use all of its bytes.
    pub(crate) fn tagged_fields(
        &mut self,
        mut known: impl FnMut(u32, &mut Reader<'a>) -> Result<bool, DecodeError>,
    ) -> Result<(), DecodeError> {
        let count = self.uvarint("tagged field count")?;
        for _ in 0..count {
            let tag = self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")? as usize;
            let mut field = Reader::new(self.take(size, "tagged field")?);
            if known(tag, &mut field)? {
                field.finish()?;
            }
        }
        Ok(())
    }

    pub(crate) fn nullable_uuid_array(
        &mut self,
        field: &'static str,
    ) -> Result<Option<Vec<Uuid>>, DecodeError> {
        let Some(count) = self.nullable_array_len(field, 16)? else {
            return Ok(None);
        };
        (0..count)
            .map(|_| self.uuid(field))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Fails unless every byte was consumed.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn uvarint_round_trips(v: u32) {
            let mut w = Writer::default();
            w.uvarint(v);
            let mut r = Reader::new(&w.buf);
            prop_assert_eq!(r.uvarint("v").unwrap(), v);
            prop_assert!(r.finish().is_ok());
        }
    }

    #[test]
    fn uvarint_rejects_six_bytes() {
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(
            r.uvarint("v"),
            Err(DecodeError::VarintTooLong { field: "v" })
        );
    }

    #[test]
    fn forged_array_count_is_rejected_before_allocating() {
        let mut w = Writer::default();
        w.uvarint(u32::MAX);
        let mut r = Reader::new(&w.buf);
        assert!(matches!(
            r.i32_array("replicas"),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
