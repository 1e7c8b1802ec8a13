//! `RemoveTopicRecord` (type 9): a topic and everything under it is gone.

use uuid::Uuid;

use super::compact::{DecodeError, Reader, Writer};

/// A topic was deleted. Kafka's `RemoveTopicRecord`, version 0. Applying it drops the
/// topic's partitions and config overrides too, so one record deletes atomically.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// topic_id  uuid (16 bytes)
/// tagged    uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveTopicRecord {
    /// By id, not name (KIP-516): a name may already be reused by the time a follower
    /// applies this.
    pub topic_id: Uuid,
}

impl RemoveTopicRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.uuid(self.topic_id);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = RemoveTopicRecord {
            topic_id: r.uuid("RemoveTopicRecord.topic_id")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}
