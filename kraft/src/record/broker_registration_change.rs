//! `BrokerRegistrationChangeRecord` (type 17): a registered broker's fencing or
//! controlled-shutdown state changed.

use super::compact::{DecodeError, Reader, TaggedField, Writer};

/// How a [`BrokerRegistrationChangeRecord`] changes the fenced flag (Kafka's
/// `BrokerRegistrationFencingChange`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum FencingChange {
    /// Left as it is (wire value 0, the field's default).
    #[default]
    None,
    /// The broker is now fenced (wire value 1).
    Fence,
    /// The broker is now unfenced (wire value -1).
    Unfence,
}

impl FencingChange {
    /// Kafka's wire value.
    #[must_use]
    pub fn value(self) -> i8 {
        match self {
            Self::None => 0,
            Self::Fence => 1,
            Self::Unfence => -1,
        }
    }
}

/// A broker's registration changed without a new registration. Kafka's
/// `BrokerRegistrationChangeRecord`, version 0, or version 1 when
/// `in_controlled_shutdown` is set (the field version 1 adds).
///
/// Value layout after the metadata frame header:
///
/// ```text
/// broker_id     int32
/// broker_epoch  int64  must equal the registration's epoch
/// tagged fields (each written only when not at its default):
///     tag 0  fenced                  int8: -1 unfenced, 0 no change, 1 fenced
///     tag 1  in_controlled_shutdown  int8: 0 no change, 1 in controlled shutdown
///                                    (version 1+)
/// ```
///
/// Tag 2 (version 2's `LogDirs`, KIP-858) is not read: we decode versions 0 and 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistrationChangeRecord {
    /// The broker's `node.id`.
    pub broker_id: i32,
    /// The epoch of the registration being changed.
    pub broker_epoch: i64,
    /// The change to the fenced flag.
    pub fenced: FencingChange,
    /// The broker entered controlled shutdown; there is no way back but re-registering.
    pub in_controlled_shutdown: bool,
}

const TAG_FENCED: u32 = 0;
const TAG_IN_CONTROLLED_SHUTDOWN: u32 = 1;

impl BrokerRegistrationChangeRecord {
    /// The lowest version that carries every field set.
    pub(crate) fn version(&self) -> u32 {
        u32::from(self.in_controlled_shutdown)
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i32(self.broker_id);
        w.i64(self.broker_epoch);
        let mut tags = Vec::with_capacity(2);
        if self.fenced != FencingChange::None {
            tags.push(TaggedField::new(TAG_FENCED, |w| w.i8(self.fenced.value())));
        }
        if self.in_controlled_shutdown {
            tags.push(TaggedField::new(TAG_IN_CONTROLLED_SHUTDOWN, |w| w.i8(1)));
        }
        w.tagged_fields(&tags);
    }

    pub(crate) fn decode(r: &mut Reader<'_>, version: u32) -> Result<Self, DecodeError> {
        let mut rec = BrokerRegistrationChangeRecord {
            broker_id: r.i32("BrokerRegistrationChangeRecord.broker_id")?,
            broker_epoch: r.i64("BrokerRegistrationChangeRecord.broker_epoch")?,
            fenced: FencingChange::None,
            in_controlled_shutdown: false,
        };
        r.tagged_fields(|tag, field| {
            match tag {
                TAG_FENCED => {
                    const NAME: &str = "BrokerRegistrationChangeRecord.fenced";
                    rec.fenced = match field.i8(NAME)? {
                        0 => FencingChange::None,
                        1 => FencingChange::Fence,
                        -1 => FencingChange::Unfence,
                        v => {
                            return Err(DecodeError::InvalidValue {
                                field: NAME,
                                value: i64::from(v),
                            });
                        }
                    };
                }
                TAG_IN_CONTROLLED_SHUTDOWN if version >= 1 => {
                    const NAME: &str = "BrokerRegistrationChangeRecord.in_controlled_shutdown";
                    rec.in_controlled_shutdown = match field.i8(NAME)? {
                        0 => false,
                        1 => true,
                        v => {
                            return Err(DecodeError::InvalidValue {
                                field: NAME,
                                value: i64::from(v),
                            });
                        }
                    };
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(rec)
    }
}
