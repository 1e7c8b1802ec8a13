//! Per-log configuration with Kafka's topic-level names and defaults (`LogConfig.java`).

use strata_protocol::record_batch::TimestampType;

/// Settings of one partition log. Field names follow Kafka's topic configs; `Default` gives
/// Kafka's defaults. Changing them with [`crate::Log::set_config`] takes effect on the next
/// append, roll, flush or retention pass; nothing already written is rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when an append would take the active segment past this size.
    /// Positions in `.index` are 4 bytes, so values above `i32::MAX` are treated as `i32::MAX`.
    pub segment_bytes: u32,
    /// `segment.ms`: roll a non-empty active segment this long after its first append.
    pub segment_ms: i64,
    /// `index.interval.bytes`: bytes appended between two `.index` entries (sparse index).
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: roll when `.index` (8 bytes/entry) or `.timeindex`
    /// (12 bytes/entry) would grow past this size.
    pub segment_index_bytes: u32,
    /// `retention.ms`: delete segments whose newest timestamp is older than this; -1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest segments while the log is larger; -1 = unlimited.
    pub retention_bytes: i64,
    /// `flush.messages`: fsync after this many records; `i64::MAX` leaves it to the OS.
    pub flush_interval_messages: i64,
    /// `flush.ms`: fsync when unflushed data is this old; `i64::MAX` leaves it to the OS.
    pub flush_interval_ms: i64,
    /// `max.message.bytes`: the largest batch (not record) accepted, header included.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`: with LogAppendTime the broker stamps its clock (KIP-32).
    pub timestamp_type: TimestampType,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            index_interval_bytes: 4096,
            segment_index_bytes: 10_485_760,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            flush_interval_messages: i64::MAX,
            flush_interval_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
        }
    }
}

impl LogConfig {
    /// `segment_bytes` capped so every position fits the 4-byte `.index` field.
    pub(crate) fn effective_segment_bytes(&self) -> u64 {
        u64::from(self.segment_bytes.min(i32::MAX as u32))
    }
}
