//! `ConfigRecord` (type 4): one config override set or removed on one resource.

use super::compact::{DecodeError, Reader, Writer};

/// Kafka's `ConfigResource.Type` id for a topic.
pub const RESOURCE_TYPE_TOPIC: i8 = 2;
/// Kafka's `ConfigResource.Type` id for a broker (empty name = cluster-wide default).
pub const RESOURCE_TYPE_BROKER: i8 = 4;

/// A config override changed. Kafka's `ConfigRecord`, version 0.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// resource_type  int8 (2 = topic, 4 = broker)
/// resource_name  compact string
/// name           compact string
/// value          compact nullable string (null = remove the override)
/// tagged         uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRecord {
    /// Which kind of resource `resource_name` names (Kafka's `ConfigResource.Type`).
    pub resource_type: i8,
    /// The topic name, or the broker id as a string.
    pub resource_name: String,
    /// The config key, in Kafka's spelling (`retention.ms`).
    pub name: String,
    /// `None` deletes the override so the default applies again (IncrementalAlterConfigs
    /// DELETE).
    pub value: Option<String>,
}

impl ConfigRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i8(self.resource_type);
        w.string(&self.resource_name);
        w.string(&self.name);
        w.nullable_string(self.value.as_deref());
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = ConfigRecord {
            resource_type: r.i8("ConfigRecord.resource_type")?,
            resource_name: r.string("ConfigRecord.resource_name")?,
            name: r.string("ConfigRecord.name")?,
            value: r.nullable_string("ConfigRecord.value")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}
