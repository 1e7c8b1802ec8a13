//! `TopicRecord` (type 2): a topic now exists under this name and id.

use uuid::Uuid;

use super::compact::{DecodeError, Reader, Writer};

/// A topic was created. Kafka's `TopicRecord`, version 0.
///
/// Value layout after the metadata frame header (see [`super::MetadataRecord`]):
///
/// ```text
/// name      compact string
/// topic_id  uuid (16 bytes)
/// tagged    uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRecord {
    /// The topic name clients use; unique among live topics.
    pub name: String,
    /// KIP-516: the id that survives nothing but this topic, so a re-created topic of
    /// the same name is never confused with the old one.
    pub topic_id: Uuid,
}

impl TopicRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.string(&self.name);
        w.uuid(self.topic_id);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = TopicRecord {
            name: r.string("TopicRecord.name")?,
            topic_id: r.uuid("TopicRecord.topic_id")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}
