//! `UnregisterBrokerRecord` (type 1): a broker's registration was removed.

use super::compact::{DecodeError, Reader, Writer};

/// A broker was unregistered (Kafka's UnregisterBroker API, KIP-500). Kafka's
/// `UnregisterBrokerRecord`, version 0.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// broker_id     int32
/// broker_epoch  int64  must equal the registration's epoch
/// tagged        uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnregisterBrokerRecord {
    /// The broker's `node.id`.
    pub broker_id: i32,
    /// The epoch of the registration being removed.
    pub broker_epoch: i64,
}

impl UnregisterBrokerRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i32(self.broker_id);
        w.i64(self.broker_epoch);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = UnregisterBrokerRecord {
            broker_id: r.i32("UnregisterBrokerRecord.broker_id")?,
            broker_epoch: r.i64("UnregisterBrokerRecord.broker_epoch")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}
