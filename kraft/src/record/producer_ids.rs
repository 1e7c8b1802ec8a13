//! `ProducerIdsRecord` (type 15): a block of producer ids was handed to a broker.

use super::compact::{DecodeError, Reader, Writer};

/// Ids per block, as Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`: a broker asks the
/// controller for ids once per 1000 InitProducerId requests, not on each.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// The controller allocated the block of producer ids below `next_producer_id` to
/// `broker_id`. Kafka's `ProducerIdsRecord`, version 0. Replaying these records is how the
/// next block survives restarts, so no producer id is ever handed out twice (KIP-730).
///
/// Value layout after the metadata frame header:
///
/// ```text
/// broker_id         int32  the broker the block went to
/// broker_epoch      int64  that broker's epoch when it asked (KIP-631)
/// next_producer_id  int64  the first id of the next block; strictly increasing
/// tagged            uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerIdsRecord {
    /// The broker that received the block.
    pub broker_id: i32,
    /// Its broker epoch, so a request from an older incarnation could be told apart.
    pub broker_epoch: i64,
    /// One past the last id of the allocated block.
    pub next_producer_id: i64,
}

impl ProducerIdsRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i32(self.broker_id);
        w.i64(self.broker_epoch);
        w.i64(self.next_producer_id);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = ProducerIdsRecord {
            broker_id: r.i32("ProducerIdsRecord.broker_id")?,
            broker_epoch: r.i64("ProducerIdsRecord.broker_epoch")?,
            next_producer_id: r.i64("ProducerIdsRecord.next_producer_id")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}

/// A contiguous range of producer ids owned by one broker (Kafka's `ProducerIdsBlock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdsBlock {
    /// The broker the block belongs to.
    pub assigned_broker_id: i32,
    /// The first id of the block.
    pub first_producer_id: i64,
    /// How many ids the block holds.
    pub size: i64,
}

impl ProducerIdsBlock {
    /// The first id after the block.
    #[must_use]
    pub fn next_block_first_id(&self) -> i64 {
        self.first_producer_id + self.size
    }
}
