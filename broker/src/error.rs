//! The one place where domain errors become Kafka error codes.
//!
//! Each function matches exhaustively with no catch-all arm, so a new variant in a domain
//! crate fails the build here until someone decides its Kafka code.

use strata_kraft::MetadataError;
use strata_protocol::ResponseError;
use strata_storage::LogError;

use crate::broker::CreateTopicError;

/// A storage error as a partition-level Kafka error code.
#[must_use]
pub fn log_error_code(e: &LogError) -> i16 {
    match e {
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        LogError::CorruptMessage { .. } => ResponseError::CorruptMessage.code(),
        LogError::InvalidRecord { .. } => ResponseError::InvalidRecord.code(),
        LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge.code(),
        LogError::CorruptSegment { .. } | LogError::Io { .. } => {
            ResponseError::KafkaStorageError.code()
        }
    }
}

/// A metadata (controller) error as a topic-level Kafka error code.
#[must_use]
pub fn metadata_error_code(e: &MetadataError) -> i16 {
    match e {
        MetadataError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists.code(),
        MetadataError::InvalidTopicName { .. } => ResponseError::InvalidTopicException.code(),
        MetadataError::InvalidPartitions(_) => ResponseError::InvalidPartitions.code(),
        MetadataError::InvalidReplicationFactor { .. } => {
            ResponseError::InvalidReplicationFactor.code()
        }
        MetadataError::InvalidConfig { .. } => ResponseError::InvalidConfig.code(),
        MetadataError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition.code(),
        MetadataError::UnknownTopicId(_) => ResponseError::UnknownTopicId.code(),
        MetadataError::CorruptRecord { .. }
        | MetadataError::CorruptBatch { .. }
        | MetadataError::InconsistentRecord { .. }
        | MetadataError::NodeIdMismatch { .. }
        | MetadataError::InvalidMetaProperties { .. }
        | MetadataError::Io { .. }
        | MetadataError::Storage(_)
        | MetadataError::LogFailed => ResponseError::KafkaStorageError.code(),
    }
}

/// A topic-creation failure as a Kafka error code.
#[must_use]
pub fn create_topic_error_code(e: &CreateTopicError) -> i16 {
    match e {
        CreateTopicError::Metadata(m) => metadata_error_code(m),
        CreateTopicError::Startup(_) => ResponseError::KafkaStorageError.code(),
    }
}
