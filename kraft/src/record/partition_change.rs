//! `PartitionChangeRecord` (type 5): a change to one partition's leader, ISR or
//! assignment, stating only what changed.

use uuid::Uuid;

use super::compact::{DecodeError, Reader, TaggedField, Writer};
use super::partition::LeaderRecoveryState;

/// `leader` value meaning the partition now has no leader.
pub const NO_LEADER: i32 = -1;
/// `leader` value meaning the leader did not change (the field's default).
pub const NO_LEADER_CHANGE: i32 = -2;

/// A partition changed. Kafka's `PartitionChangeRecord`, version 0, or version 1 when
/// `directories` is set (KIP-858, the field version 1 adds). Version 2's KIP-966 fields
/// (eligible leader replicas) are not read or written: Strata elects without ELR, as
/// KRaft 3.x does by default.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// partition_id  int32
/// topic_id      uuid (16 bytes)
/// tagged fields, each written only when set (in this tag order):
///     tag 0  isr                    compact array of int32
///     tag 1  leader                 int32: -1 no leader, -2 (default) no change
///     tag 2  replicas               compact array of int32
///     tag 3  removing_replicas      compact array of int32
///     tag 4  adding_replicas        compact array of int32
///     tag 5  leader_recovery_state  int8: -1 (default) no change, 0 recovered,
///                                   1 recovering
///     tag 8  directories            compact array of uuid (version 1+)
/// ```
///
/// Applying it bumps the partition epoch, and the leader epoch when `leader` is set
/// (Kafka's `PartitionRegistration.merge`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionChangeRecord {
    /// Index of the partition within its topic.
    pub partition_id: i32,
    /// The owning topic, by id (KIP-516).
    pub topic_id: Uuid,
    /// The new ISR, or `None` if it did not change.
    pub isr: Option<Vec<i32>>,
    /// The new leader, [`NO_LEADER`], or [`NO_LEADER_CHANGE`].
    pub leader: i32,
    /// The new replica list, or `None` if it did not change.
    pub replicas: Option<Vec<i32>>,
    /// KIP-455: the new replicas being removed, or `None` if unchanged.
    pub removing_replicas: Option<Vec<i32>>,
    /// KIP-455: the new replicas being added, or `None` if unchanged.
    pub adding_replicas: Option<Vec<i32>>,
    /// KIP-704: the new leader recovery state, or `None` if unchanged.
    pub leader_recovery_state: Option<LeaderRecoveryState>,
    /// KIP-858: the log directory of each replica, or `None` if unchanged. Carried for
    /// byte compatibility; Strata has one log directory per broker and does not image it.
    pub directories: Option<Vec<Uuid>>,
}

const TAG_ISR: u32 = 0;
const TAG_LEADER: u32 = 1;
const TAG_REPLICAS: u32 = 2;
const TAG_REMOVING: u32 = 3;
const TAG_ADDING: u32 = 4;
const TAG_LEADER_RECOVERY_STATE: u32 = 5;
const TAG_DIRECTORIES: u32 = 8;

impl PartitionChangeRecord {
    /// A record for this partition that changes nothing yet.
    #[must_use]
    pub fn new(topic_id: Uuid, partition_id: i32) -> Self {
        PartitionChangeRecord {
            partition_id,
            topic_id,
            isr: None,
            leader: NO_LEADER_CHANGE,
            replicas: None,
            removing_replicas: None,
            adding_replicas: None,
            leader_recovery_state: None,
            directories: None,
        }
    }

    /// The lowest version that carries every field set.
    pub(crate) fn version(&self) -> u32 {
        u32::from(self.directories.is_some())
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i32(self.partition_id);
        w.uuid(self.topic_id);
        let mut tags = Vec::with_capacity(7);
        if let Some(isr) = &self.isr {
            tags.push(TaggedField::new(TAG_ISR, |w| w.i32_array(isr)));
        }
        if self.leader != NO_LEADER_CHANGE {
            tags.push(TaggedField::new(TAG_LEADER, |w| w.i32(self.leader)));
        }
        if let Some(replicas) = &self.replicas {
            tags.push(TaggedField::new(TAG_REPLICAS, |w| w.i32_array(replicas)));
        }
        if let Some(removing) = &self.removing_replicas {
            tags.push(TaggedField::new(TAG_REMOVING, |w| w.i32_array(removing)));
        }
        if let Some(adding) = &self.adding_replicas {
            tags.push(TaggedField::new(TAG_ADDING, |w| w.i32_array(adding)));
        }
        if let Some(state) = self.leader_recovery_state {
            tags.push(TaggedField::new(TAG_LEADER_RECOVERY_STATE, |w| {
                w.i8(state.value());
            }));
        }
        if let Some(dirs) = &self.directories {
            tags.push(TaggedField::new(TAG_DIRECTORIES, |w| w.uuid_array(dirs)));
        }
        w.tagged_fields(&tags);
    }

    pub(crate) fn decode(r: &mut Reader<'_>, version: u32) -> Result<Self, DecodeError> {
        let mut rec =
            PartitionChangeRecord::new(Uuid::nil(), r.i32("PartitionChangeRecord.partition_id")?);
        rec.topic_id = r.uuid("PartitionChangeRecord.topic_id")?;
        r.tagged_fields(|tag, field| {
            match tag {
                // A null array in a tagged field is the same as the field left out.
                TAG_ISR => rec.isr = field.nullable_i32_array("PartitionChangeRecord.isr")?,
                TAG_LEADER => rec.leader = field.i32("PartitionChangeRecord.leader")?,
                TAG_REPLICAS => {
                    rec.replicas = field.nullable_i32_array("PartitionChangeRecord.replicas")?;
                }
                TAG_REMOVING => {
                    rec.removing_replicas =
                        field.nullable_i32_array("PartitionChangeRecord.removing_replicas")?;
                }
                TAG_ADDING => {
                    rec.adding_replicas =
                        field.nullable_i32_array("PartitionChangeRecord.adding_replicas")?;
                }
                TAG_LEADER_RECOVERY_STATE => {
                    const NAME: &str = "PartitionChangeRecord.leader_recovery_state";
                    rec.leader_recovery_state = match field.i8(NAME)? {
                        -1 => None,
                        v => Some(LeaderRecoveryState::from_value(v).ok_or(
                            DecodeError::InvalidValue {
                                field: NAME,
                                value: i64::from(v),
                            },
                        )?),
                    };
                }
                TAG_DIRECTORIES if version >= 1 => {
                    rec.directories =
                        field.nullable_uuid_array("PartitionChangeRecord.directories")?;
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(rec)
    }
}
