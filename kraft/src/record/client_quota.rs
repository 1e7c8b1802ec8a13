//! `ClientQuotaRecord` (type 14): one quota of one client-quota entity set or removed
//! (KIP-546's AlterClientQuotas, written by the controller as Kafka's
//! `ClientQuotaControlManager` does).

use super::compact::{DecodeError, Reader, Writer};

/// One component of a quota entity: its type (`user`, `client-id`, `ip`) and its name,
/// `None` for the type's default entity (`--entity-default`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntityPart {
    /// `user`, `client-id` or `ip`.
    pub entity_type: String,
    /// The user principal's name or the client id; `None` names the default.
    pub entity_name: Option<String>,
}

/// A client quota changed. Kafka's `ClientQuotaRecord`, version 0.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// entity         compact array of
///   entity_type  compact string
///   entity_name  compact nullable string (null = the default entity)
///   tagged       uvarint 0
/// key            compact string (producer_byte_rate, ...)
/// value          float64 (IEEE 754, big-endian; 0 when remove is set)
/// remove         bool
/// tagged         uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ClientQuotaRecord {
    /// The entity, each type at most once; the controller writes it sorted by type.
    pub entity: Vec<QuotaEntityPart>,
    /// The quota key, in Kafka's spelling.
    pub key: String,
    /// The quota's value; ignored when `remove` is set.
    pub value: f64,
    /// True removes the key from the entity (AlterClientQuotas' `remove`).
    pub remove: bool,
}

/// Quota values are compared by their bits: a record is the same record when its encoding
/// is (NaN is never written, since the controller refuses it).
impl Eq for ClientQuotaRecord {}

impl ClientQuotaRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.array_len(self.entity.len());
        for part in &self.entity {
            w.string(&part.entity_type);
            w.nullable_string(part.entity_name.as_deref());
            w.empty_tagged_fields();
        }
        w.string(&self.key);
        w.f64(self.value);
        w.bool(self.remove);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        // An entity part takes at least three bytes: two lengths and its tagged section.
        let count = r.array_len("ClientQuotaRecord.entity", 3)?;
        let mut entity = Vec::with_capacity(count);
        for _ in 0..count {
            entity.push(QuotaEntityPart {
                entity_type: r.string("ClientQuotaRecord.entity.entity_type")?,
                entity_name: r.nullable_string("ClientQuotaRecord.entity.entity_name")?,
            });
            r.skip_tagged_fields()?;
        }
        let rec = ClientQuotaRecord {
            entity,
            key: r.string("ClientQuotaRecord.key")?,
            value: r.f64("ClientQuotaRecord.value")?,
            remove: r.bool("ClientQuotaRecord.remove")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}
