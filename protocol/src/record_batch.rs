//! A zero-copy view of a Kafka RecordBatch v2 (magic 2, KIP-98) over borrowed bytes.
//!
//! # Byte format
//!
//! All integers are big-endian. Offsets are from the start of the batch.
//!
//! ```text
//! @0  baseOffset           i64   rewritten by the broker on append (not covered by the CRC)
//! @8  batchLength          i32   bytes after this field, so a batch occupies 12 + batchLength bytes
//! @12 partitionLeaderEpoch i32   rewritten by the broker on append (not covered by the CRC)
//! @16 magic                i8    must be 2
//! @17 crc                  u32   CRC32C (Castagnoli) of bytes @21 .. end of batch
//! @21 attributes           i16   bits 0-2 compression, bit 3 timestamp type (1 = LogAppendTime),
//!                                bit 4 transactional, bit 5 control, bit 6 delete horizon (KIP-534)
//! @23 lastOffsetDelta      i32
//! @27 baseTimestamp        i64   ("firstTimestamp")
//! @35 maxTimestamp         i64
//! @43 producerId           i64
//! @51 producerEpoch        i16
//! @53 baseSequence         i32
//! @57 recordCount          i32
//! @61 records              [Record] (compressed as a whole when compression != 0)
//! ```
//!
//! Each record (uncompressed) is:
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! keyLength varint | key | valueLength varint | value |
//! headerCount varint | [headerKeyLength varint | headerKey | headerValueLength varint | headerValue]
//! ```
//!
//! Varints are zig-zag encoded base-128 as in protobuf; a length of -1 means null.
//!
//! Nothing here trusts a length field past the bytes it was given, and no input makes it panic.

pub use crate::compression::Compression;
use std::io::Read;

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

/// The fixed header of a v2 batch; records start here.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before the `batchLength` field's coverage starts (baseOffset + batchLength).
pub const LOG_OVERHEAD: usize = 12;
/// The smallest legal `batchLength`: the header minus [`LOG_OVERHEAD`].
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
/// The only message format we accept (KIP-98 RecordBatch).
pub const MAGIC_V2: i8 = 2;
/// Producer id of a non-idempotent producer.
pub const NO_PRODUCER_ID: i64 = -1;
/// Sequence of a non-idempotent producer.
pub const NO_SEQUENCE: i32 = -1;
/// A missing timestamp.
pub const NO_TIMESTAMP: i64 = -1;

const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;
/// KIP-534: the batch's base timestamp is its delete horizon (set by the log cleaner).
const DELETE_HORIZON_BIT: i16 = 1 << 6;

/// Attribute bit 3: what the batch's timestamps mean (KIP-32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// The producer's clock.
    #[default]
    CreateTime,
    /// The broker's clock at append; the batch's `maxTimestamp` holds it.
    LogAppendTime,
}

/// Which Kafka error a [`BatchError`] corresponds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchErrorKind {
    /// Kafka's `CorruptRecordException` (CORRUPT_MESSAGE): the bytes are damaged.
    Corrupt,
    /// Kafka's `InvalidRecordException` (INVALID_RECORD): well-formed bytes with illegal contents.
    Invalid,
    /// Kafka's `RecordTooLargeException` (MESSAGE_TOO_LARGE).
    TooLarge,
}

/// A defect inside one record of an uncompressed batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RecordDefect {
    #[error("malformed varint")]
    Varint,
    #[error("record length {0} is negative or exceeds the batch")]
    Length(i64),
    #[error("record declares {declared} bytes but its fields take {consumed}")]
    SizeMismatch { declared: usize, consumed: usize },
    #[error("offset delta {found}, expected {expected}")]
    OffsetDelta { expected: i32, found: i32 },
    #[error("key length {0} is invalid")]
    KeyLength(i64),
    #[error("value length {0} is invalid")]
    ValueLength(i64),
    #[error("header count {0} is invalid")]
    HeaderCount(i64),
    #[error("header key length {0} is invalid")]
    HeaderKeyLength(i64),
    #[error("header value length {0} is invalid")]
    HeaderValueLength(i64),
}

/// Why a batch was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("record batch truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("record batch length {batch_length} is below the minimum {MIN_BATCH_LENGTH}")]
    BadLength { batch_length: i32 },
    #[error("record batch of {size} bytes exceeds the maximum {max}")]
    TooLarge { size: usize, max: usize },
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("unknown compression codec id {0}")]
    UnknownCompression(u8),
    #[error(
        "record count {record_count} is inconsistent with last offset delta {last_offset_delta}"
    )]
    RecordCount {
        record_count: i32,
        last_offset_delta: i32,
    },
    #[error("record {index} of the batch is invalid: {defect}")]
    Record { index: i32, defect: RecordDefect },
    #[error("{remaining} bytes remain after the declared records")]
    TrailingRecordBytes { remaining: usize },
    #[error("records of a {0:?}-compressed batch cannot be iterated without decompression")]
    Compressed(Compression),
    /// The records section does not decompress, or ends before the declared records do.
    #[error("the {codec:?}-compressed records do not decompress: {reason}")]
    Decompress {
        codec: Compression,
        reason: &'static str,
    },
}

impl BatchError {
    /// Maps the error to the Kafka exception the Java broker throws for the same input
    /// (`LogValidator` / `ByteBufferLogInputStream` / `DefaultRecordBatch`).
    pub fn kind(&self) -> BatchErrorKind {
        match self {
            // ByteBufferLogInputStream: a size below the overhead or past the buffer is corrupt.
            BatchError::Truncated { .. }
            | BatchError::BadLength { .. }
            | BatchError::CrcMismatch { .. }
            | BatchError::Decompress { .. } => BatchErrorKind::Corrupt,
            BatchError::TooLarge { .. } => BatchErrorKind::TooLarge,
            BatchError::UnsupportedMagic(_)
            | BatchError::UnknownCompression(_)
            | BatchError::RecordCount { .. }
            | BatchError::Record { .. }
            | BatchError::TrailingRecordBytes { .. }
            | BatchError::Compressed(_) => BatchErrorKind::Invalid,
        }
    }
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// The length a batch at the start of `buf` claims, from its first 12 bytes, with the same checks
/// as [`RecordBatchView::parse`] except the magic byte. Used by storage to walk batch headers
/// without reading whole batches.
///
/// # Errors
/// [`BatchError::Truncated`] if fewer than 12 bytes are given; [`BatchError::BadLength`] if the
/// length is below [`MIN_BATCH_LENGTH`].
pub fn peek_total_len(buf: &[u8]) -> Result<usize, BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Err(BatchError::Truncated {
            need: LOG_OVERHEAD,
            have: buf.len(),
        });
    }
    let batch_length = be_i32(buf, BATCH_LENGTH_AT);
    if batch_length < MIN_BATCH_LENGTH {
        return Err(BatchError::BadLength { batch_length });
    }
    Ok(LOG_OVERHEAD + batch_length as usize)
}

/// A borrowed RecordBatch v2. Construction guarantees `bytes.len() == 12 + batchLength >= 61`
/// and magic 2, so the accessors index without checks.
#[derive(Clone, Copy)]
pub struct RecordBatchView<'a> {
    /// Exactly the batch's bytes: `total_len()` long.
    bytes: &'a [u8],
}

impl std::fmt::Debug for RecordBatchView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatchView")
            .field("base_offset", &self.base_offset())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("record_count", &self.record_count())
            .field("total_len", &self.total_len())
            .finish_non_exhaustive()
    }
}

impl<'a> RecordBatchView<'a> {
    /// Parses the header of the batch at the start of `buf`; checks batch length against `buf`
    /// and the magic byte. Does not check the CRC. Bytes after the batch are ignored.
    ///
    /// # Errors
    /// `Truncated` when `buf` is shorter than the header or the declared length, `BadLength`
    /// when `batchLength` < 49, `UnsupportedMagic` for magic other than 2.
    pub fn parse(buf: &'a [u8]) -> Result<Self, BatchError> {
        let total = peek_total_len(buf)?;
        if buf.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated {
                need: BATCH_HEADER_LEN,
                have: buf.len(),
            });
        }
        let magic = buf[MAGIC_AT] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        if buf.len() < total {
            return Err(BatchError::Truncated {
                need: total,
                have: buf.len(),
            });
        }
        Ok(Self {
            bytes: &buf[..total],
        })
    }

    /// Checks the stored CRC32C against the bytes from `attributes` to the end of the batch.
    ///
    /// # Errors
    /// [`BatchError::CrcMismatch`].
    pub fn verify_crc(&self) -> Result<(), BatchError> {
        let stored = self.crc();
        let computed = crc32c::crc32c(&self.bytes[ATTRIBUTES_AT..]);
        if stored == computed {
            Ok(())
        } else {
            Err(BatchError::CrcMismatch { stored, computed })
        }
    }

    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, BASE_OFFSET_AT)
    }
    pub fn batch_length(&self) -> i32 {
        be_i32(self.bytes, BATCH_LENGTH_AT)
    }
    /// `12 + batch_length`: the bytes the batch occupies in a log segment.
    pub fn total_len(&self) -> usize {
        self.bytes.len()
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, LEADER_EPOCH_AT)
    }
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC_AT] as i8
    }
    pub fn crc(&self) -> u32 {
        be_u32(self.bytes, CRC_AT)
    }
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES_AT)
    }
    pub fn compression(&self) -> Compression {
        match (self.attributes() & COMPRESSION_MASK) as u8 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => Compression::Unknown(other),
        }
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, LAST_OFFSET_DELTA_AT)
    }
    /// KIP-534: the time after which the log cleaner may remove this batch's tombstones (or
    /// the batch, for a transaction marker), if a cleaner has set it.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes() & DELETE_HORIZON_BIT != 0).then(|| self.first_timestamp())
    }
    /// `base_offset + last_offset_delta`, saturating so hostile input cannot overflow.
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .saturating_add(i64::from(self.last_offset_delta()))
    }
    pub fn first_timestamp(&self) -> i64 {
        be_i64(self.bytes, BASE_TIMESTAMP_AT)
    }
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP_AT)
    }
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, PRODUCER_ID_AT)
    }
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, PRODUCER_EPOCH_AT)
    }
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, BASE_SEQUENCE_AT)
    }
    pub fn record_count(&self) -> i32 {
        be_i32(self.bytes, RECORD_COUNT_AT)
    }
    /// The end-of-transaction marker a control batch holds (Kafka's `EndTransactionMarker`,
    /// read from the batch's first record): `None` when this is not a control batch, or its
    /// record is not a well-formed COMMIT or ABORT marker (Kafka's readers skip control
    /// records of other types). Control batches are never compressed.
    #[must_use]
    pub fn end_txn_marker(&self) -> Option<EndTxnMarker> {
        if !self.is_control() {
            return None;
        }
        let record = self.records().ok()?.next()?.ok()?;
        let key = record.key?;
        let value = record.value?;
        if key.len() < 4 || value.len() < 6 {
            return None;
        }
        let commit = match be_i16(key, 2) {
            CONTROL_TYPE_ABORT => false,
            CONTROL_TYPE_COMMIT => true,
            _ => return None,
        };
        Some(EndTxnMarker {
            commit,
            coordinator_epoch: be_i32(value, 2),
        })
    }

    /// The whole batch, header included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Iterates the records of an uncompressed batch, at most `record_count` of them. The
    /// iterator yields an error (and then stops) on the first malformed record; it does not
    /// check that the records fill the batch exactly (see [`validate_batch`]).
    ///
    /// # Errors
    /// [`BatchError::Compressed`] for compressed batches: decompression is not done here.
    pub fn records(&self) -> Result<Records<'a>, BatchError> {
        match self.compression() {
            Compression::None => Ok(Records {
                buf: &self.bytes[BATCH_HEADER_LEN..],
                index: 0,
                count: self.record_count().max(0),
                base_offset: self.base_offset(),
                base_timestamp: self.first_timestamp(),
                log_append_time: (self.timestamp_type() == TimestampType::LogAppendTime)
                    .then(|| self.max_timestamp()),
                failed: false,
            }),
            other => Err(BatchError::Compressed(other)),
        }
    }

    /// Iterates the records of a compressed batch, given its records section already
    /// decompressed (see [`crate::compression::decompress`]). For an uncompressed batch this is
    /// the same as [`RecordBatchView::records`].
    #[must_use]
    pub fn records_in<'b>(&self, decompressed: &'b [u8]) -> Records<'b> {
        Records {
            buf: decompressed,
            index: 0,
            count: self.record_count().max(0),
            base_offset: self.base_offset(),
            base_timestamp: self.first_timestamp(),
            log_append_time: (self.timestamp_type() == TimestampType::LogAppendTime)
                .then(|| self.max_timestamp()),
            failed: false,
        }
    }
}

/// One record of an uncompressed batch, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The record's offset relative to the batch's base offset.
    pub offset_delta: i32,
    /// `base_offset + offset_delta`.
    pub offset: i64,
    /// The record's timestamp; for LogAppendTime batches the batch's max timestamp (KIP-32).
    pub timestamp: i64,
    /// `None` for a null key (length -1).
    pub key: Option<&'a [u8]>,
    /// `None` for a null value: a tombstone under compaction.
    pub value: Option<&'a [u8]>,
    /// The encoded headers (`headerCount` already consumed); see [`RecordView::headers`].
    headers: &'a [u8],
    header_count: i32,
}

impl<'a> RecordView<'a> {
    /// The record headers as (key, value) pairs. Keys are bytes as sent; Kafka requires UTF-8
    /// but does not validate it on the broker either.
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        let mut cur = Cursor { buf: self.headers };
        let mut left = self.header_count;
        std::iter::from_fn(move || {
            if left <= 0 {
                return None;
            }
            left -= 1;
            // Already validated by `Records::next`, so these cannot fail.
            let key = cur.bytes_field().ok()??;
            let value = cur.bytes_field().ok()?;
            Some((key, value))
        })
    }
}

/// Iterator over the records of an uncompressed batch; see [`RecordBatchView::records`].
#[derive(Debug, Clone)]
pub struct Records<'a> {
    /// Unconsumed record bytes.
    buf: &'a [u8],
    index: i32,
    count: i32,
    base_offset: i64,
    base_timestamp: i64,
    /// Some(max_timestamp) for LogAppendTime batches, whose records all take that timestamp.
    log_append_time: Option<i64>,
    /// Stop after the first error so callers cannot loop on it.
    failed: bool,
}

impl<'a> Records<'a> {
    /// Bytes after the records consumed so far.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn parse_one(&mut self) -> Result<RecordView<'a>, RecordDefect> {
        let mut outer = Cursor { buf: self.buf };
        let length = outer.varint()?;
        if length < 0 || length as usize > outer.buf.len() {
            return Err(RecordDefect::Length(i64::from(length)));
        }
        let length = length as usize;
        let body = &outer.buf[..length];
        let rest = &outer.buf[length..];
        let mut c = Cursor { buf: body };
        let _attributes = c.u8()?;
        let timestamp_delta = c.varlong()?;
        let offset_delta = c.varint()?;
        let key_len = c.varint()?;
        let key = c
            .nullable(key_len)
            .ok_or(RecordDefect::KeyLength(i64::from(key_len)))?;
        let value_len = c.varint()?;
        let value = c
            .nullable(value_len)
            .ok_or(RecordDefect::ValueLength(i64::from(value_len)))?;
        let header_count = c.varint()?;
        if header_count < 0 {
            return Err(RecordDefect::HeaderCount(i64::from(header_count)));
        }
        let headers = c.buf;
        for _ in 0..header_count {
            let key_len = c.varint()?;
            if key_len < 0 {
                // DefaultRecord.readHeaders: "Invalid negative header key size".
                return Err(RecordDefect::HeaderKeyLength(i64::from(key_len)));
            }
            c.nullable(key_len)
                .ok_or(RecordDefect::HeaderKeyLength(i64::from(key_len)))?;
            let value_len = c.varint()?;
            c.nullable(value_len)
                .ok_or(RecordDefect::HeaderValueLength(i64::from(value_len)))?;
        }
        if !c.buf.is_empty() {
            // DefaultRecord.readFrom: "Invalid record size: expected to read N bytes".
            return Err(RecordDefect::SizeMismatch {
                declared: length,
                consumed: length - c.buf.len(),
            });
        }
        self.buf = rest;
        let timestamp = match self.log_append_time {
            Some(t) => t,
            None => self.base_timestamp.wrapping_add(timestamp_delta),
        };
        Ok(RecordView {
            offset_delta,
            offset: self.base_offset.saturating_add(i64::from(offset_delta)),
            timestamp,
            key,
            value,
            headers: &headers[..headers.len() - c.buf.len()],
            header_count,
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RecordView<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.index >= self.count {
            return None;
        }
        let index = self.index;
        self.index += 1;
        match self.parse_one() {
            Ok(r) => Some(Ok(r)),
            Err(defect) => {
                self.failed = true;
                Some(Err(BatchError::Record { index, defect }))
            }
        }
    }
}

/// A bounds-checked reader over record bytes.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn u8(&mut self) -> Result<u8, RecordDefect> {
        let (&b, rest) = self.buf.split_first().ok_or(RecordDefect::Varint)?;
        self.buf = rest;
        Ok(b)
    }

    fn raw_varint(&mut self, max_bytes: usize) -> Result<u64, RecordDefect> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.u8()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordDefect::Varint)
    }

    /// Zig-zag varint of at most 5 bytes (Kafka's `ByteUtils.readVarint`).
    fn varint(&mut self) -> Result<i32, RecordDefect> {
        let raw = self.raw_varint(5)?;
        let raw = u32::try_from(raw).map_err(|_| RecordDefect::Varint)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// Zig-zag varlong of at most 10 bytes (Kafka's `ByteUtils.readVarlong`).
    fn varlong(&mut self) -> Result<i64, RecordDefect> {
        let raw = self.raw_varint(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// A field of `len` bytes where -1 means null; `None` when the length is illegal.
    fn nullable(&mut self, len: i32) -> Option<Option<&'a [u8]>> {
        if len == -1 {
            return Some(None);
        }
        let len = usize::try_from(len).ok()?;
        if len > self.buf.len() {
            return None;
        }
        let (field, rest) = self.buf.split_at(len);
        self.buf = rest;
        Some(Some(field))
    }

    fn bytes_field(&mut self) -> Result<Option<&'a [u8]>, RecordDefect> {
        let len = self.varint()?;
        self.nullable(len)
            .ok_or(RecordDefect::Length(i64::from(len)))
    }
}

/// What produce validation learned about one batch, so that the log need not parse it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSummary {
    /// Where the batch starts in the validated buffer.
    pub position: usize,
    /// `12 + batchLength`.
    pub len: usize,
    /// Records in the batch; validation guarantees `last_offset_delta + 1`.
    pub record_count: i32,
    /// Offsets the batch takes beyond its first; the log assigns `record_count` offsets.
    pub last_offset_delta: i32,
    /// The header's `maxTimestamp`, which the log indexes.
    pub max_timestamp: i64,
    /// The offset delta of the first record carrying the largest record timestamp (KIP-734's
    /// MAX_TIMESTAMP lookup). 0 for compressed batches, whose records a follower does not walk.
    pub offset_delta_of_max_timestamp: i32,
    /// The codec.
    pub compression: Compression,
}

/// Fully validates one batch: header, CRC, the count / offset-range consistency Kafka's
/// `LogValidator.validateBatch` requires, and for uncompressed batches every record's framing
/// and offset delta (`assignOffsetsNonCompressed` requires deltas 0..count-1).
///
/// A compressed batch is decompressed as a stream and its records walked the same way
/// ([`walk_compressed`]), as Kafka's `LogValidator` decompresses on produce: a batch of
/// random bytes with a valid CRC, or one that claims more records than it holds, would
/// otherwise stop every consumer at its offset.
///
/// # Errors
/// Any [`BatchError`]; [`BatchError::kind`] says which Kafka error it is.
pub fn validate_batch(buf: &[u8], position: usize) -> Result<BatchSummary, BatchError> {
    validate(buf, position, Rules::Produce)
}

/// Which batches [`validate`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// A producer's: one record per offset, deltas `0..count`.
    Produce,
    /// A replica's copy of its leader's log, which the cleaner may have thinned: at most
    /// one record per offset, deltas increasing within `0..=last_offset_delta`.
    Replicated,
}

fn validate(buf: &[u8], position: usize, rules: Rules) -> Result<BatchSummary, BatchError> {
    let view = RecordBatchView::parse(buf)?;
    view.verify_crc()?;
    let compression = view.compression();
    if let Compression::Unknown(id) = compression {
        return Err(BatchError::UnknownCompression(id));
    }
    let record_count = view.record_count();
    let last_offset_delta = view.last_offset_delta();
    let offsets = i64::from(last_offset_delta) + 1;
    // LogValidator.validateBatch: "Invalid reported count" and "Inconsistent batch offset range".
    let count_ok = match rules {
        Rules::Produce => record_count > 0 && i64::from(record_count) == offsets,
        Rules::Replicated => record_count >= 0 && i64::from(record_count) <= offsets,
    };
    if !count_ok || last_offset_delta < 0 {
        return Err(BatchError::RecordCount {
            record_count,
            last_offset_delta,
        });
    }
    let mut offset_delta_of_max_timestamp = 0;
    if compression == Compression::None {
        let mut records = view.records()?;
        let mut best = i64::MIN;
        let mut previous = -1;
        // Records yields at most record_count (an i32) items, so the index fits i32.
        for (index, record) in (0i32..).zip(records.by_ref()) {
            let record = record?;
            let in_order = match rules {
                Rules::Produce => record.offset_delta == index,
                Rules::Replicated => {
                    record.offset_delta > previous && record.offset_delta <= last_offset_delta
                }
            };
            if !in_order {
                return Err(BatchError::Record {
                    index,
                    defect: RecordDefect::OffsetDelta {
                        expected: previous + 1,
                        found: record.offset_delta,
                    },
                });
            }
            previous = record.offset_delta;
            if record.timestamp > best {
                best = record.timestamp;
                offset_delta_of_max_timestamp = record.offset_delta;
            }
        }
        if records.remaining() != 0 {
            // DefaultRecordBatch: "Incorrect declared batch size, records still remaining".
            return Err(BatchError::TrailingRecordBytes {
                remaining: records.remaining(),
            });
        }
        if view.timestamp_type() == TimestampType::LogAppendTime {
            offset_delta_of_max_timestamp = 0;
        }
    } else if rules == Rules::Produce {
        // The walk's record with the largest timestamp is not used: a follower appends the
        // same batch without walking it, and both must index it alike (0, as before).
        walk_compressed(&view)?;
    }
    Ok(BatchSummary {
        position,
        len: view.total_len(),
        record_count,
        last_offset_delta,
        max_timestamp: view.max_timestamp(),
        offset_delta_of_max_timestamp,
        compression,
    })
}

/// The most bytes a compressed batch's records may decompress to on produce. Kafka sets no
/// bound; this one is far above any real batch (the batch itself is at most
/// `max.message.bytes`), and stops a small batch built to decompress for minutes.
const MAX_DECOMPRESSED: u64 = 1 << 30;

/// Walks the records of a compressed batch as they decompress, the checks of the
/// uncompressed walk in [`validate`] (framing, offset deltas `0..count`, nothing after the
/// last record), without keeping any of it: keys, values and headers are read past, so the
/// memory held is the decoder's window, whatever the batch claims.
///
/// Hand-written over `Read` because the records of a compressed batch are only ever needed
/// here as a check; the decompressed bytes are never kept (the batch is stored as sent).
fn walk_compressed(view: &RecordBatchView<'_>) -> Result<(), BatchError> {
    let codec = view.compression();
    let section = &view.bytes()[BATCH_HEADER_LEN..];
    let decompress_error = |reason| BatchError::Decompress { codec, reason };
    let snappy_limit = usize::try_from(MAX_DECOMPRESSED).unwrap_or(usize::MAX);
    let inner = crate::compression::reader(codec, section, snappy_limit)
        .map_err(|_| decompress_error("corrupt header or too large"))?;
    let mut r = StreamCursor {
        inner: std::io::BufReader::with_capacity(16 * 1024, inner.take(MAX_DECOMPRESSED + 1)),
        read: 0,
        failed: None,
    };
    for index in 0..view.record_count() {
        let defect = |defect| BatchError::Record { index, defect };
        let length = r.varint().map_err(|e| r.error(e, codec, index))?;
        if length < 0 {
            return Err(defect(RecordDefect::Length(i64::from(length))));
        }
        let start = r.read;
        let end = start + u64::try_from(length).unwrap_or(0);
        let step = (|| -> Result<i32, RecordDefect> {
            r.u8()?; // attributes
            r.varlong()?; // timestamp delta
            let offset_delta = r.varint()?;
            let key_len = r.varint()?;
            if key_len < -1 {
                return Err(RecordDefect::KeyLength(i64::from(key_len)));
            }
            r.skip(key_len, end)?;
            let value_len = r.varint()?;
            if value_len < -1 {
                return Err(RecordDefect::ValueLength(i64::from(value_len)));
            }
            r.skip(value_len, end)?;
            let header_count = r.varint()?;
            if header_count < 0 {
                return Err(RecordDefect::HeaderCount(i64::from(header_count)));
            }
            for _ in 0..header_count {
                let k = r.varint()?;
                if k < 0 {
                    return Err(RecordDefect::HeaderKeyLength(i64::from(k)));
                }
                r.skip(k, end)?;
                let v = r.varint()?;
                if v < -1 {
                    return Err(RecordDefect::HeaderValueLength(i64::from(v)));
                }
                r.skip(v, end)?;
                // A record cannot hold more headers than bytes: stop a huge count early.
                if r.read > end {
                    break;
                }
            }
            Ok(offset_delta)
        })();
        let offset_delta = step.map_err(|e| r.error(e, codec, index))?;
        let consumed = r.read - start;
        if consumed != u64::try_from(length).unwrap_or(u64::MAX) {
            return Err(defect(RecordDefect::SizeMismatch {
                declared: usize::try_from(length).unwrap_or(0),
                consumed: usize::try_from(consumed).unwrap_or(usize::MAX),
            }));
        }
        if offset_delta != index {
            return Err(defect(RecordDefect::OffsetDelta {
                expected: index,
                found: offset_delta,
            }));
        }
    }
    // Nothing may follow the last record.
    match r.u8() {
        Ok(_) => Err(BatchError::TrailingRecordBytes { remaining: 1 }),
        Err(_) if r.failed == Some(StreamFailure::End) => Ok(()),
        Err(_) => Err(decompress_error("corrupt stream after the last record")),
    }
}

/// Why a [`StreamCursor`] read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamFailure {
    /// The stream ended.
    End,
    /// The decoder failed (corrupt data), or the stream passed [`MAX_DECOMPRESSED`].
    Corrupt,
}

/// A byte reader over a decompressing stream, counting what it has read.
struct StreamCursor<R> {
    inner: R,
    read: u64,
    failed: Option<StreamFailure>,
}

impl<R: std::io::BufRead> StreamCursor<R> {
    fn u8(&mut self) -> Result<u8, RecordDefect> {
        let mut b = [0u8; 1];
        match self.inner.read_exact(&mut b) {
            Ok(()) => {
                self.read += 1;
                if self.read > MAX_DECOMPRESSED {
                    self.failed = Some(StreamFailure::Corrupt);
                    return Err(RecordDefect::Varint);
                }
                Ok(b[0])
            }
            Err(e) => {
                self.failed = Some(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    StreamFailure::End
                } else {
                    StreamFailure::Corrupt
                });
                Err(RecordDefect::Varint)
            }
        }
    }

    /// A zig-zag varlong, at most 10 bytes (Kafka's `ByteUtils.readVarlong`).
    fn varlong(&mut self) -> Result<i64, RecordDefect> {
        let mut raw: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(RecordDefect::Varint)
    }

    /// A zig-zag varint, at most 5 bytes.
    fn varint(&mut self) -> Result<i32, RecordDefect> {
        let mut raw: u32 = 0;
        for i in 0..5 {
            let b = self.u8()?;
            raw |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32));
            }
        }
        Err(RecordDefect::Varint)
    }

    /// Reads past `len` bytes (-1, a null field, is none).
    fn skip(&mut self, len: i32, record_end: u64) -> Result<(), RecordDefect> {
        let Ok(want) = u64::try_from(len) else {
            return Ok(());
        };
        // A field longer than what is left of its record is refused before it is read.
        if self.read.saturating_add(want) > record_end {
            return Err(RecordDefect::Length(i64::from(len)));
        }
        let got = std::io::copy(&mut (&mut self.inner).take(want), &mut std::io::sink()).map_err(
            |_| {
                self.failed = Some(StreamFailure::Corrupt);
                RecordDefect::Length(i64::from(len))
            },
        )?;
        self.read += got;
        if got < want {
            self.failed = Some(StreamFailure::End);
            return Err(RecordDefect::Length(i64::from(len)));
        }
        if self.read > MAX_DECOMPRESSED {
            self.failed = Some(StreamFailure::Corrupt);
            return Err(RecordDefect::Length(i64::from(len)));
        }
        Ok(())
    }

    /// The batch error for a record defect: a stream that ended or failed is the
    /// decompression's, anything else the record's.
    fn error(&self, defect: RecordDefect, codec: Compression, index: i32) -> BatchError {
        match self.failed {
            Some(StreamFailure::End) => BatchError::Decompress {
                codec,
                reason: "the records end before the declared count",
            },
            Some(StreamFailure::Corrupt) => BatchError::Decompress {
                codec,
                reason: "corrupt data, or more than 1 GiB decompressed",
            },
            None => BatchError::Record { index, defect },
        }
    }
}

/// A batch rewritten by the log cleaner from `original`, holding only `records` (a subset of
/// its records, in order), as Kafka's `MemoryRecords.filterTo` rebuilds one: the same base
/// offset and last offset delta (so the producer's last sequence survives), producer id,
/// epoch and base sequence, partition leader epoch, timestamp type, transactional and control
/// bits, and codec (recompressed); each record at its own offset, so offsets keep their gaps.
/// With `delete_horizon_ms` the base timestamp is the horizon and the KIP-534 bit is set;
/// record timestamps stay right, as their deltas are taken from whatever the base is.
///
/// # Errors
/// [`crate::compression::DecompressError`] when the codec cannot compress (an unknown one).
///
/// # Panics
/// If a record is larger than `i32::MAX` bytes (it came out of a batch, so it is not).
pub fn rebuild_batch(
    original: &RecordBatchView<'_>,
    records: &[RecordView<'_>],
    delete_horizon_ms: Option<i64>,
) -> Result<Vec<u8>, crate::compression::DecompressError> {
    let log_append_time = original.timestamp_type() == TimestampType::LogAppendTime;
    let base_timestamp = delete_horizon_ms
        .or_else(|| records.first().map(|r| r.timestamp))
        .unwrap_or(NO_TIMESTAMP);
    let max_timestamp = if log_append_time {
        original.max_timestamp()
    } else {
        records
            .iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(NO_TIMESTAMP)
    };
    let base_offset = original.base_offset();
    let mut body = BytesMut::new();
    let mut rec = BytesMut::new();
    for r in records {
        rec.clear();
        rec.put_i8(0);
        put_varlong(&mut rec, r.timestamp.wrapping_sub(base_timestamp));
        put_varint(
            &mut rec,
            i32::try_from(r.offset - base_offset).expect("a record's delta fits i32"),
        );
        put_nullable(&mut rec, r.key);
        put_nullable(&mut rec, r.value);
        put_varint(&mut rec, r.header_count);
        for (k, v) in r.headers() {
            put_nullable(&mut rec, Some(k));
            put_nullable(&mut rec, v);
        }
        put_varint(
            &mut body,
            i32::try_from(rec.len()).expect("record fits i32"),
        );
        body.put_slice(&rec);
    }
    let codec = original.compression();
    let section = crate::compression::compress(codec, &body)?;
    let mut attributes = original.attributes()
        & (COMPRESSION_MASK | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT);
    if delete_horizon_ms.is_some() {
        attributes |= DELETE_HORIZON_BIT;
    }
    let count = i32::try_from(records.len()).expect("record count fits i32");
    Ok(rewritten(
        original,
        attributes,
        (base_timestamp, max_timestamp),
        count,
        &section,
    ))
}

/// A batch that keeps `original`'s base offset, leader epoch, last offset delta and producer
/// fields, with the given attributes, timestamps, record count and records section: what
/// [`rebuild_batch`] and [`empty_header_of`] write.
fn rewritten(
    original: &RecordBatchView<'_>,
    attributes: i16,
    (base_timestamp, max_timestamp): (i64, i64),
    count: i32,
    section: &[u8],
) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + section.len());
    out.put_i64(original.base_offset());
    out.put_i32(
        i32::try_from(BATCH_HEADER_LEN - LOG_OVERHEAD + section.len()).expect("batch fits i32"),
    );
    out.put_i32(original.partition_leader_epoch());
    out.put_i8(MAGIC_V2);
    out.put_u32(0);
    out.put_i16(attributes);
    out.put_i32(original.last_offset_delta());
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(original.producer_id());
    out.put_i16(original.producer_epoch());
    out.put_i32(original.base_sequence());
    out.put_i32(count);
    out.put_slice(section);
    write_crc(&mut out);
    out.to_vec()
}

/// The 61-byte header the log cleaner keeps of a batch it empties when the batch still
/// carries a producer's last sequence or ends the cleaned range (Kafka's
/// `DefaultRecordBatch.writeEmptyHeader`): no records, no compression, no delete horizon; the
/// base offset, last offset delta, producer fields, leader epoch, timestamp type,
/// transactional and control bits and max timestamp of `original`.
#[must_use]
pub fn empty_header_of(original: &RecordBatchView<'_>) -> Vec<u8> {
    let attributes = original.attributes() & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT);
    rewritten(
        original,
        attributes,
        (NO_TIMESTAMP, original.max_timestamp()),
        0,
        &[],
    )
}

/// What a replica checks of a batch it copies from its leader (Kafka's follower append skips
/// the producer-side rules): the header, the CRC, a known codec, and, for an uncompressed
/// batch, records that parse with offset deltas increasing within `0..=last_offset_delta`.
/// Unlike [`validate_batch`], a batch the log cleaner rewrote passes: it may hold fewer
/// records than its offset range (gaps), or none at all (an emptied header). Returns the
/// same summary, with `record_count` as stored.
///
/// # Errors
/// Any [`BatchError`].
pub fn validate_replicated_batch(buf: &[u8], position: usize) -> Result<BatchSummary, BatchError> {
    validate(buf, position, Rules::Replicated)
}

/// Validates every batch of a produce request's record set, in order. The set must consist of
/// whole batches: trailing bytes that do not form a batch are rejected as corrupt (Kafka's
/// `ByteBufferLogInputStream` would silently trim them; rejecting is safer and tells the client).
///
/// # Errors
/// The first batch's error; [`BatchError::TooLarge`] when a batch exceeds `max_batch_bytes`
/// (Kafka's `max.message.bytes` limits the batch, not the record).
pub fn validate_for_append(
    buf: &[u8],
    max_batch_bytes: usize,
) -> Result<Vec<BatchSummary>, BatchError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let total = peek_total_len(rest)?;
        if total > max_batch_bytes {
            return Err(BatchError::TooLarge {
                size: total,
                max: max_batch_bytes,
            });
        }
        let summary = validate_batch(rest, pos)?;
        pos += summary.len;
        out.push(summary);
    }
    Ok(out)
}

/// Rewrites the base offset in place. The CRC does not cover it, so it stays valid.
///
/// # Panics
/// If `batch` is shorter than 8 bytes (callers pass validated batches).
pub fn set_base_offset(batch: &mut [u8], offset: i64) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&offset.to_be_bytes());
}

/// Rewrites the partition leader epoch in place (KIP-101); not covered by the CRC.
///
/// # Panics
/// If `batch` is shorter than 16 bytes.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// LogAppendTime (KIP-32): sets the timestamp-type bit and `maxTimestamp`, then recomputes the
/// CRC, as Kafka's `DefaultRecordBatch.setMaxTimestamp` does. Record timestamp deltas are left
/// alone: readers use `maxTimestamp` for every record of a LogAppendTime batch.
///
/// # Panics
/// If `batch` is shorter than the header.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = be_i16(batch, ATTRIBUTES_AT) | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now_ms.to_be_bytes());
    write_crc(batch);
}

/// Sets the idempotent-producer fields (KIP-98) of a batch, producer id, producer epoch and
/// base sequence, and recomputes the CRC they are covered by. Producers fill these in
/// themselves; tests use this to turn an [`encode_batch`] batch into an idempotent one.
///
/// # Panics
/// If `batch` is shorter than the header.
pub fn set_producer(batch: &mut [u8], producer_id: i64, producer_epoch: i16, base_sequence: i32) {
    batch[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&producer_epoch.to_be_bytes());
    batch[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&base_sequence.to_be_bytes());
    write_crc(batch);
}

/// Sets the transactional bit of a batch (KIP-98) and recomputes the CRC. Producers set it
/// themselves; tests use this to turn an [`encode_batch`] batch into a transactional one.
///
/// # Panics
/// If `batch` is shorter than the header.
pub fn set_transactional(batch: &mut [u8]) {
    let attributes = be_i16(batch, ATTRIBUTES_AT) | TRANSACTIONAL_BIT;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    write_crc(batch);
}

/// Recomputes and stores the CRC32C of a batch (bytes @21 to the end of `batch`).
///
/// # Panics
/// If `batch` is shorter than the header.
pub fn write_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// `plain`, a whole uncompressed batch, with its records section compressed by `codec`, as a
/// producer sends it: the codec's id in the attributes, and the length and CRC rewritten.
/// For tests and the bench; the broker itself never recompresses.
///
/// # Errors
/// When `codec` cannot compress (an unknown codec).
///
/// # Panics
/// If `plain` is shorter than the header.
pub fn with_codec(
    plain: &[u8],
    codec: crate::compression::Compression,
) -> Result<Vec<u8>, crate::compression::DecompressError> {
    let section = crate::compression::compress(codec, &plain[BATCH_HEADER_LEN..])?;
    let mut out = Vec::with_capacity(BATCH_HEADER_LEN + section.len());
    out.extend_from_slice(&plain[..BATCH_HEADER_LEN]);
    out.extend_from_slice(&section);
    let len = i32::try_from(out.len() - LOG_OVERHEAD).expect("a batch under 2 GiB");
    out[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&len.to_be_bytes());
    let attributes = (be_i16(&out, ATTRIBUTES_AT) & !COMPRESSION_MASK) | i16::from(codec.id());
    out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    write_crc(&mut out);
    Ok(out)
}

/// Iterates the batches in a record set (the `records` field of a Produce partition or a
/// stretch of a segment). Stops after the first error.
pub fn batches(buf: &[u8]) -> impl Iterator<Item = Result<RecordBatchView<'_>, BatchError>> {
    let mut rest = buf;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || rest.is_empty() {
            return None;
        }
        match RecordBatchView::parse(rest) {
            Ok(view) => {
                rest = &rest[view.total_len()..];
                Some(Ok(view))
            }
            Err(e) => {
                failed = true;
                Some(Err(e))
            }
        }
    })
}

/// A record to encode with [`encode_batch`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub timestamp: i64,
    pub headers: Vec<(String, Option<Bytes>)>,
}

fn put_varint(out: &mut BytesMut, v: i32) {
    put_raw_varint(out, u64::from(((v << 1) ^ (v >> 31)) as u32));
}
fn put_varlong(out: &mut BytesMut, v: i64) {
    put_raw_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}
fn put_raw_varint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}
fn put_nullable(out: &mut BytesMut, field: Option<&[u8]>) {
    match field {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.put_slice(b);
        }
    }
}

/// Encodes uncompressed records into one CreateTime batch with no producer id, as Kafka's
/// `MemoryRecordsBuilder` would: baseTimestamp is the first record's timestamp, offset deltas
/// are 0..n-1, and the partition leader epoch is -1 until the log stamps it. An empty slice
/// yields a header-only batch with record count 0, which [`validate_for_append`] rejects.
///
/// # Panics
/// If a key, value or header exceeds `i32::MAX` bytes.
pub fn encode_batch(base_offset: i64, records: &[SimpleRecord]) -> Bytes {
    let base_timestamp = records.first().map_or(NO_TIMESTAMP, |r| r.timestamp);
    let max_timestamp = records
        .iter()
        .map(|r| r.timestamp)
        .max()
        .unwrap_or(NO_TIMESTAMP);
    let mut body = BytesMut::new();
    let mut rec = BytesMut::new();
    for (delta, r) in records.iter().enumerate() {
        rec.clear();
        rec.put_i8(0); // record attributes: unused in v2
        put_varlong(&mut rec, r.timestamp.wrapping_sub(base_timestamp));
        put_varint(
            &mut rec,
            i32::try_from(delta).expect("record count fits i32"),
        );
        put_nullable(&mut rec, r.key.as_deref());
        put_nullable(&mut rec, r.value.as_deref());
        put_varint(
            &mut rec,
            i32::try_from(r.headers.len()).expect("header count fits i32"),
        );
        for (k, v) in &r.headers {
            put_nullable(&mut rec, Some(k.as_bytes()));
            put_nullable(&mut rec, v.as_deref());
        }
        put_varint(
            &mut body,
            i32::try_from(rec.len()).expect("record fits i32"),
        );
        body.put_slice(&rec);
    }
    let count = i32::try_from(records.len()).expect("record count fits i32");
    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + body.len());
    out.put_i64(base_offset);
    out.put_i32(
        i32::try_from(BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()).expect("batch fits i32"),
    );
    out.put_i32(-1); // partition leader epoch: stamped on append
    out.put_i8(MAGIC_V2);
    out.put_u32(0); // CRC, filled below
    out.put_i16(0); // attributes: uncompressed, CreateTime
    out.put_i32((count - 1).max(0));
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(NO_PRODUCER_ID);
    out.put_i16(-1);
    out.put_i32(NO_SEQUENCE);
    out.put_i32(count);
    out.put_slice(&body);
    write_crc(&mut out);
    out.freeze()
}

/// Control record type of an ABORT marker (Kafka's `ControlRecordType.ABORT`).
const CONTROL_TYPE_ABORT: i16 = 0;
/// Control record type of a COMMIT marker.
const CONTROL_TYPE_COMMIT: i16 = 1;

/// What an end-of-transaction control record says (Kafka's `EndTransactionMarker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// COMMIT, else ABORT.
    pub commit: bool,
    /// The epoch of the transaction coordinator that wrote it; a partition refuses a marker
    /// from an older coordinator (TRANSACTION_COORDINATOR_FENCED).
    pub coordinator_epoch: i32,
}

/// Encodes the control batch of a transaction marker as Kafka's
/// `MemoryRecords.withEndTransactionMarker` does: attributes transactional and control
/// (0x30), the producer's id and epoch, no sequence, and one record whose key is the control
/// type (version 0, then 0 for ABORT or 1 for COMMIT) and whose value is version 0 and the
/// coordinator epoch. The batch is 78 bytes.
#[must_use]
pub fn encode_end_txn_marker(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
    timestamp: i64,
) -> Bytes {
    let mut key = [0u8; 4];
    let kind = if marker.commit {
        CONTROL_TYPE_COMMIT
    } else {
        CONTROL_TYPE_ABORT
    };
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let batch = encode_batch(
        0,
        &[SimpleRecord {
            key: Some(Bytes::copy_from_slice(&key)),
            value: Some(Bytes::copy_from_slice(&value)),
            timestamp,
            headers: Vec::new(),
        }],
    );
    let mut out = batch.to_vec();
    let attributes = TRANSACTIONAL_BIT | CONTROL_BIT;
    out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    out[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&producer_id.to_be_bytes());
    out[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&producer_epoch.to_be_bytes());
    write_crc(&mut out);
    Bytes::from(out)
}

#[cfg(test)]
mod tests;
