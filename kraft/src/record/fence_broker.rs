//! `FenceBrokerRecord` (type 7) and `UnfenceBrokerRecord` (type 8): a broker lost or
//! regained the right to lead and to be in ISRs.

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

/// A broker was unfenced: it heartbeated and has caught up with the metadata log.
/// Kafka's `UnfenceBrokerRecord`, version 0, with the same layout as
/// [`FenceBrokerRecord`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfenceBrokerRecord {
    /// The broker's `node.id`.
    pub broker_id: i32,
    /// The epoch of the registration being unfenced.
    pub broker_epoch: i64,
}

fn encode(w: &mut Writer, broker_id: i32, broker_epoch: i64) {
    w.i32(broker_id);
    w.i64(broker_epoch);
    w.empty_tagged_fields();
}

fn decode(r: &mut Reader<'_>, name: [&'static str; 2]) -> Result<(i32, i64), DecodeError> {
    let id = r.i32(name[0])?;
    let epoch = r.i64(name[1])?;
    r.skip_tagged_fields()?;
    Ok((id, epoch))
}

impl FenceBrokerRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        encode(w, self.broker_id, self.broker_epoch);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let (broker_id, broker_epoch) =
            decode(r, ["FenceBrokerRecord.id", "FenceBrokerRecord.epoch"])?;
        Ok(FenceBrokerRecord {
            broker_id,
            broker_epoch,
        })
    }
}

impl UnfenceBrokerRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        encode(w, self.broker_id, self.broker_epoch);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let (broker_id, broker_epoch) =
            decode(r, ["UnfenceBrokerRecord.id", "UnfenceBrokerRecord.epoch"])?;
        Ok(UnfenceBrokerRecord {
            broker_id,
            broker_epoch,
        })
    }
}
