//! The storage error type. The broker maps each variant to a Kafka error code in one place.

use std::io;
use std::path::PathBuf;

use strata_protocol::record_batch::BatchError;
use thiserror::Error;

/// Everything a [`crate::Log`] operation can fail with.
#[derive(Debug, Error)]
pub enum LogError {
    /// OFFSET_OUT_OF_RANGE: the fetch offset lies outside `[log_start, log_end]`.
    #[error("offset {requested} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        requested: i64,
        log_start: i64,
        log_end: i64,
    },
    /// OFFSET_OUT_OF_RANGE from DeleteRecords: the log start offset cannot move past the
    /// high watermark (Kafka's `UnifiedLog.maybeIncrementLogStartOffset`).
    #[error(
        "cannot move the log start offset to {requested}: above the high watermark {high_watermark}"
    )]
    LogStartAboveHighWatermark { requested: i64, high_watermark: i64 },
    /// CORRUPT_MESSAGE: a produced batch failed its CRC or its lengths lie
    /// (Kafka's `CorruptRecordException`). Nothing of the request was written.
    #[error("corrupt record batch at byte {position} of the record set: {source}")]
    CorruptMessage {
        /// Where the bad batch starts in the produced record set.
        position: usize,
        source: BatchError,
    },
    /// INVALID_RECORD: a well-formed batch with illegal contents: magic other than 2, a record
    /// count that disagrees with the offset range, malformed records
    /// (Kafka's `InvalidRecordException`). Nothing of the request was written.
    #[error("invalid record batch at byte {position} of the record set: {source}")]
    InvalidRecord { position: usize, source: BatchError },
    /// MESSAGE_TOO_LARGE: a batch exceeds `max.message.bytes`.
    /// A follower's fetched batches do not continue its log (Kafka's
    /// `UnexpectedAppendOffsetException`).
    #[error("replicated batch starts at offset {found}, the log end is {expected}")]
    UnexpectedOffset { expected: i64, found: i64 },
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    /// A sealed segment holds bytes that are not a batch where one should start. Recovery only
    /// rescans the active segment, so this means damage after the segment was fsynced.
    #[error("corrupt segment {path} at byte {position}: {source}")]
    CorruptSegment {
        path: PathBuf,
        position: u64,
        source: BatchError,
    },
    /// A compressed batch in a segment does not decompress within the limit (a lookup that
    /// must see records inside it, such as ListOffsets by timestamp, cannot answer).
    #[error("cannot decompress the batch at byte {position} of {path}: {source}")]
    Decompress {
        path: PathBuf,
        position: u64,
        source: strata_protocol::compression::DecompressError,
    },
    /// OUT_OF_ORDER_SEQUENCE_NUMBER: an idempotent batch does not follow the producer's last
    /// sequence in this partition, or a new epoch does not start at 0 (Kafka's
    /// `ProducerAppendInfo.checkSequence`). Nothing of the request was written.
    #[error(
        "out of order sequence {sequence} from producer {producer_id} (epoch {epoch}); last sequence {last_sequence}"
    )]
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        sequence: i32,
        /// -1 when the batch opens a new epoch.
        last_sequence: i32,
    },
    /// INVALID_PRODUCER_EPOCH: a batch from an epoch older than the producer's current one,
    /// a zombie (Kafka's `checkProducerEpoch`; PRODUCER_FENCED is not used on produce since
    /// Kafka 2.7, KIP-588). Nothing of the request was written.
    #[error("producer {producer_id} epoch {epoch} is older than the current epoch {current_epoch}")]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    /// INVALID_RECORD: a batch with a producer id but a negative base sequence (Kafka's
    /// `LogValidator.validateBatch`). Nothing of the request was written.
    #[error("invalid sequence number {base_sequence} in a batch with producer id {producer_id}")]
    InvalidProducerSequence {
        producer_id: i64,
        base_sequence: i32,
    },
    /// INVALID_TXN_STATE: a non-transactional batch from a producer whose transaction in
    /// this partition is open (Kafka's `ProducerAppendInfo.updateCurrentTxnFirstOffset`).
    /// Nothing of the request was written.
    #[error(
        "expected a transactional write from producer {producer_id}, whose transaction is open since offset {first_offset}"
    )]
    InvalidTxnState { producer_id: i64, first_offset: i64 },
    /// INVALID_RECORD: a client wrote a control batch; only the transaction coordinator
    /// writes markers (Kafka's `LogValidator`). Nothing of the request was written.
    #[error("clients are not allowed to write control records")]
    ControlBatchFromClient,
    /// TRANSACTION_COORDINATOR_FENCED: a marker from a transaction coordinator older than
    /// the one whose marker the producer's state holds (Kafka's `checkCoordinatorEpoch`).
    #[error(
        "marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older than {current}"
    )]
    TransactionCoordinatorFenced {
        producer_id: i64,
        coordinator_epoch: i32,
        current: i32,
    },
    /// The operating system refused a file operation.
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl LogError {
    /// Classifies a produce validation failure the way Kafka's `LogValidator` does.
    pub(crate) fn from_batch(position: usize, source: BatchError) -> Self {
        use strata_protocol::record_batch::BatchErrorKind;
        match (source.kind(), source) {
            (BatchErrorKind::TooLarge, BatchError::TooLarge { size, max }) => {
                LogError::MessageTooLarge { size, max }
            }
            (BatchErrorKind::Corrupt, source) | (BatchErrorKind::TooLarge, source) => {
                LogError::CorruptMessage { position, source }
            }
            (BatchErrorKind::Invalid, source) => LogError::InvalidRecord { position, source },
        }
    }
}

/// Attaches the path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T, LogError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T, LogError> {
        self.map_err(|source| LogError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
