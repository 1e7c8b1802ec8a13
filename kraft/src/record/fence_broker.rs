//! `FenceBrokerRecord` (type 7): a broker lost the right to lead and to be in ISRs.

use super::compact::{DecodeError, Reader, Writer};

/// A broker was fenced: its session expired or it is shutting down (KIP-631). Kafka's
/// `FenceBrokerRecord`, version 0 (Kafka's field names are `Id` and `Epoch`).
///
/// Value layout after the metadata frame header:
///
/// ```text
/// broker_id     int32
/// broker_epoch  int64  must equal the registration's epoch, or the record is stale
/// tagged        uvarint 0
/// ```
///
/// The record changes only the broker's state; the ISR and leader changes that go with a
/// fence are `PartitionChangeRecord`s written before it in the same batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceBrokerRecord {
    /// The broker's `node.id`.
    pub broker_id: i32,
    /// The epoch of the registration being fenced, so a record about an earlier
    /// incarnation cannot fence a newer one.
    pub broker_epoch: i64,
}

impl FenceBrokerRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i32(self.broker_id);
        w.i64(self.broker_epoch);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = FenceBrokerRecord {
            broker_id: r.i32("FenceBrokerRecord.id")?,
            broker_epoch: r.i64("FenceBrokerRecord.epoch")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}
