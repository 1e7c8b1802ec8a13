//! `PartitionRecord` (type 3): the full state of one partition.

use uuid::Uuid;

use super::compact::{DecodeError, Reader, TaggedField, Writer};

/// A partition was created (or its whole state restated). Kafka's `PartitionRecord`,
/// version 0.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// partition_id       int32
/// topic_id           uuid (16 bytes)
/// replicas           compact array of int32
/// isr                compact array of int32
/// removing_replicas  compact nullable array of int32 (KIP-455; written empty)
/// adding_replicas    compact nullable array of int32 (KIP-455; written empty)
/// leader             int32 (-1 = no leader)
/// leader_epoch       int32
/// partition_epoch    int32
/// tagged fields:
///     tag 0  leader_recovery_state  int8, written only when RECOVERING (1)
/// ```
///
/// The reassignment lists exist only so our bytes match Kafka's schema; we decode a null
/// list as empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRecord {
    /// Index of the partition within its topic.
    pub partition_id: i32,
    /// The owning topic, by id (KIP-516).
    pub topic_id: Uuid,
    /// All assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas: who must have a write before the high watermark covers it.
    pub isr: Vec<i32>,
    /// KIP-455 replicas being moved off this partition.
    pub removing_replicas: Vec<i32>,
    /// KIP-455 replicas being moved onto this partition.
    pub adding_replicas: Vec<i32>,
    /// The broker that leads the partition, or -1.
    pub leader: i32,
    /// Bumped on every leader change; fences zombie leaders (KIP-101, KIP-320).
    pub leader_epoch: i32,
    /// Bumped on any change to the partition, so AlterPartition requests can be fenced
    /// (KIP-497).
    pub partition_epoch: i32,
    /// KIP-704: whether the leader came from an unclean election and has not yet told the
    /// controller (through AlterPartition) that its log is consistent again.
    pub leader_recovery_state: LeaderRecoveryState,
}

/// KIP-704's leader recovery state of a partition (Kafka's `LeaderRecoveryState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum LeaderRecoveryState {
    /// The leader was elected from the ISR, or has recovered from an unclean election.
    #[default]
    Recovered,
    /// The leader was elected uncleanly and is still recovering; the ISR holds only it,
    /// and it must not grow the ISR until it reports `Recovered`.
    Recovering,
}

impl LeaderRecoveryState {
    /// Kafka's wire value: 0 = RECOVERED, 1 = RECOVERING.
    #[must_use]
    pub fn value(self) -> i8 {
        match self {
            Self::Recovered => 0,
            Self::Recovering => 1,
        }
    }

    /// The state with this wire value, if it names one.
    #[must_use]
    pub fn from_value(value: i8) -> Option<Self> {
        match value {
            0 => Some(Self::Recovered),
            1 => Some(Self::Recovering),
            _ => None,
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>, field: &'static str) -> Result<Self, DecodeError> {
        let v = r.i8(field)?;
        Self::from_value(v).ok_or(DecodeError::InvalidValue {
            field,
            value: i64::from(v),
        })
    }
}

/// Tag of `LeaderRecoveryState` in `PartitionRecord`.
const TAG_LEADER_RECOVERY_STATE: u32 = 0;

impl PartitionRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i32(self.partition_id);
        w.uuid(self.topic_id);
        w.i32_array(&self.replicas);
        w.i32_array(&self.isr);
        w.i32_array(&self.removing_replicas);
        w.i32_array(&self.adding_replicas);
        w.i32(self.leader);
        w.i32(self.leader_epoch);
        w.i32(self.partition_epoch);
        // A tagged field at its default (RECOVERED) is left out, as Kafka writes it.
        if self.leader_recovery_state == LeaderRecoveryState::Recovered {
            w.empty_tagged_fields();
        } else {
            let state = self.leader_recovery_state.value();
            w.tagged_fields(&[TaggedField::new(TAG_LEADER_RECOVERY_STATE, |w| {
                w.i8(state);
            })]);
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut rec = PartitionRecord {
            partition_id: r.i32("PartitionRecord.partition_id")?,
            topic_id: r.uuid("PartitionRecord.topic_id")?,
            replicas: r.i32_array("PartitionRecord.replicas")?,
            isr: r.i32_array("PartitionRecord.isr")?,
            removing_replicas: r
                .nullable_i32_array("PartitionRecord.removing_replicas")?
                .unwrap_or_default(),
            adding_replicas: r
                .nullable_i32_array("PartitionRecord.adding_replicas")?
                .unwrap_or_default(),
            leader: r.i32("PartitionRecord.leader")?,
            leader_epoch: r.i32("PartitionRecord.leader_epoch")?,
            partition_epoch: r.i32("PartitionRecord.partition_epoch")?,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        r.tagged_fields(|tag, field| {
            if tag != TAG_LEADER_RECOVERY_STATE {
                return Ok(false);
            }
            rec.leader_recovery_state =
                LeaderRecoveryState::decode(field, "PartitionRecord.leader_recovery_state")?;
            Ok(true)
        })?;
        Ok(rec)
    }
}
