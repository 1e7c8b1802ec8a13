//! `UnfenceBrokerRecord` (type 8): a broker may lead and be in ISRs again.

use super::compact::{DecodeError, Reader, Writer};

/// A broker was unfenced: it heartbeated and has caught up with the metadata log up to
/// its own registration (KIP-631). Kafka's `UnfenceBrokerRecord`, version 0 (Kafka's
/// field names are `Id` and `Epoch`).
///
/// Value layout after the metadata frame header:
///
/// ```text
/// broker_id     int32
/// broker_epoch  int64  must equal the registration's epoch
/// tagged        uvarint 0
/// ```
///
/// The leader elections it makes possible are `PartitionChangeRecord`s written after it
/// in the same batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfenceBrokerRecord {
    /// The broker's `node.id`.
    pub broker_id: i32,
    /// The epoch of the registration being unfenced.
    pub broker_epoch: i64,
}

impl UnfenceBrokerRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i32(self.broker_id);
        w.i64(self.broker_epoch);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = UnfenceBrokerRecord {
            broker_id: r.i32("UnfenceBrokerRecord.id")?,
            broker_epoch: r.i64("UnfenceBrokerRecord.epoch")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}
