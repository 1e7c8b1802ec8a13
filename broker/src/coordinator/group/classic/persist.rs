//! Durable group metadata: Kafka's `GroupMetadataValue` record of `__consumer_offsets`, how a
//! group becomes one, and how one becomes a group again at start.
//!
//! Kafka's classic coordinator writes a group's metadata when a generation completes (the
//! leader's SyncGroup moves the group to Stable with every member's assignment), when the
//! group becomes Empty, when a static member is replaced without a rebalance (KIP-345), and a
//! tombstone when the group is deleted. On load, a group with members is Stable at its stored
//! generation and its members' sessions run from the load time: a member that does not
//! heartbeat is expired and triggers a rebalance, the others carry on as if nothing happened.
//!
//! The record key (`GroupMetadataKey`, type 2) is written by [`crate::coordinator::offsets::records`]; this
//! file owns the value bytes, which the offset store keeps opaque.
//!
//! # GroupMetadataValue
//!
//! Schema `GroupMetadataValue.json` (versions 0-4, flexible from 4). Strings are an int16
//! length and UTF-8 (-1 for null), bytes an int32 length, arrays an int32 count; version 4
//! uses compact forms (unsigned varint of length + 1, 0 for null) and ends each struct with
//! tagged fields.
//!
//! ```text
//! version              i16            we write 3, as Kafka does since 2.3
//! protocol_type        string
//! generation           i32
//! protocol             nullable string   null when the group is Empty
//! leader               nullable string   null when the group is Empty
//! current_state_ts     i64            v2+; the broker time of the write
//! members              [MemberMetadata]
//!   member_id          string
//!   group_instance_id  nullable string   v3+; KIP-345
//!   client_id          string
//!   client_host        string         "/127.0.0.1", as Kafka prints an InetAddress
//!   rebalance_timeout  i32            v1+; v0 members take their session timeout
//!   session_timeout    i32
//!   subscription       bytes          the member's metadata for the selected protocol
//!   assignment         bytes          its share of the leader's assignment
//! ```

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use super::member::{Member, Protocol};
use super::state::{ClassicGroup, GroupState};
use crate::coordinator::offsets::{OffsetStore, OffsetStoreError};

/// The value version we write (Kafka's `groupMetadataValueVersion` for 2.3 and later).
const WRITE_VERSION: i16 = 3;

/// The highest value version we read.
const MAX_VERSION: i16 = 4;

/// Where group metadata goes: the `__consumer_offsets` partition of the group. A trait so that
/// the coordinator's driver can be exercised without a data directory.
pub trait GroupLog: Send + Sync {
    /// Appends the group's metadata record (`None`: a tombstone).
    ///
    /// # Errors
    /// When the append fails; the record is then not durable.
    fn append(
        &self,
        group: &str,
        value: Option<Bytes>,
        now_ms: i64,
    ) -> Result<(), OffsetStoreError>;
}

impl GroupLog for OffsetStore {
    fn append(
        &self,
        group: &str,
        value: Option<Bytes>,
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        // The append only: the handlers answer once the partition has committed it
        // (`server::placement::committed`).
        self.store_group_metadata(group, value, now_ms)
            .map(|_pending| ())
    }
}

impl<T: GroupLog + ?Sized> GroupLog for Arc<T> {
    fn append(
        &self,
        group: &str,
        value: Option<Bytes>,
        now_ms: i64,
    ) -> Result<(), OffsetStoreError> {
        (**self).append(group, value, now_ms)
    }
}

/// Why a stored GroupMetadataValue could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GroupRecordError {
    #[error("{what} runs past the end of the record")]
    Truncated { what: &'static str },
    #[error("{what} is not valid UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("{what} has a negative length")]
    NegativeLength { what: &'static str },
    #[error("unknown group metadata value version {version}")]
    UnknownVersion { version: i16 },
}

/// One member as stored: Kafka's `GroupMetadataValue.MemberMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A group as stored: Kafka's `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp: i64,
    pub members: Vec<MemberMetadata>,
}

impl GroupMetadataValue {
    /// The encoded value, version 3, its version prefix included.
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(64);
        out.put_i16(WRITE_VERSION);
        put_str(&mut out, Some(&self.protocol_type));
        out.put_i32(self.generation);
        put_str(&mut out, self.protocol.as_deref());
        put_str(&mut out, self.leader.as_deref());
        out.put_i64(self.current_state_timestamp);
        out.put_i32(i32::try_from(self.members.len()).unwrap_or(i32::MAX));
        for m in &self.members {
            put_str(&mut out, Some(&m.member_id));
            put_str(&mut out, m.group_instance_id.as_deref());
            put_str(&mut out, Some(&m.client_id));
            put_str(&mut out, Some(&m.client_host));
            out.put_i32(m.rebalance_timeout_ms);
            out.put_i32(m.session_timeout_ms);
            put_bytes(&mut out, &m.subscription);
            put_bytes(&mut out, &m.assignment);
        }
        out.freeze()
    }

    /// Decodes any version Kafka has written (0 to 4).
    ///
    /// # Errors
    /// [`GroupRecordError`] when the bytes do not follow the schema.
    pub fn decode(bytes: &[u8]) -> Result<Self, GroupRecordError> {
        let mut r = Reader {
            buf: bytes,
            flexible: false,
        };
        let version = r.i16("version")?;
        if !(0..=MAX_VERSION).contains(&version) {
            return Err(GroupRecordError::UnknownVersion { version });
        }
        r.flexible = version >= 4;
        let protocol_type = r.string("protocol type")?.unwrap_or_default();
        let generation = r.i32("generation")?;
        let protocol = r.string("protocol")?;
        let leader = r.string("leader")?;
        let current_state_timestamp = if version >= 2 {
            r.i64("current state timestamp")?
        } else {
            -1
        };
        let n = r.len("members")?;
        let mut members = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let member_id = r.string("member id")?.unwrap_or_default();
            let group_instance_id = if version >= 3 {
                r.string("group instance id")?
            } else {
                None
            };
            let client_id = r.string("client id")?.unwrap_or_default();
            let client_host = r.string("client host")?.unwrap_or_default();
            let rebalance_timeout = if version >= 1 {
                Some(r.i32("rebalance timeout")?)
            } else {
                None
            };
            let session_timeout_ms = r.i32("session timeout")?;
            let subscription = r.bytes("subscription")?;
            let assignment = r.bytes("assignment")?;
            r.tagged_fields()?;
            members.push(MemberMetadata {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                // Kafka's loader: a member stored without one rebalances within its session.
                rebalance_timeout_ms: rebalance_timeout
                    .filter(|t| *t >= 0)
                    .unwrap_or(session_timeout_ms),
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        r.tagged_fields()?;
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}

impl ClassicGroup {
    /// The record Kafka's `newGroupMetadataRecord` writes for this group: every member with
    /// its metadata for the selected protocol and its assignment. An empty group keeps its
    /// generation and protocol type, with no protocol and no leader.
    #[must_use]
    pub fn to_record(&self, now_ms: i64) -> GroupMetadataValue {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        let empty = self.members.is_empty();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: if empty {
                None
            } else {
                self.protocol_name.clone()
            },
            leader: if empty { None } else { self.leader_id.clone() },
            current_state_timestamp: now_ms,
            members: self
                .members
                .values()
                .map(|m| MemberMetadata {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Kafka's `ClassicGroup.fromRecord` plus its load step: Stable at the stored generation
    /// when there are members (each member's session starts now, so a member that does not
    /// come back is expired and the others rebalance), otherwise Empty.
    #[must_use]
    pub fn from_record(group_id: String, v: GroupMetadataValue, now_ms: i64) -> Self {
        let mut g = ClassicGroup::new(group_id);
        g.generation_id = v.generation;
        g.protocol_type = Some(v.protocol_type.clone()).filter(|t| !t.is_empty());
        if v.members.is_empty() {
            return g;
        }
        let protocol = v.protocol.clone().unwrap_or_default();
        g.protocol_name = v.protocol;
        for m in v.members {
            if let Some(instance) = &m.group_instance_id {
                g.static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            let member = Member {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                protocol_type: v.protocol_type.clone(),
                protocols: vec![Protocol {
                    name: protocol.clone(),
                    metadata: m.subscription,
                }],
                assignment: m.assignment,
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                heartbeat_deadline_ms: now_ms + i64::from(m.session_timeout_ms),
            };
            g.members.insert(m.member_id, member);
        }
        g.leader_id = v
            .leader
            .filter(|l| g.members.contains_key(l))
            .or_else(|| g.members.keys().next().cloned());
        g.transition_to(GroupState::Stable);
        g
    }
}

fn put_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => out.put_i16(-1),
        Some(s) => {
            // Ids and hosts are far below i16::MAX; a longer one is cut rather than wrapped.
            let len = s.len().min(i16::MAX as usize);
            out.put_i16(i16::try_from(len).unwrap_or(i16::MAX));
            out.put_slice(&s.as_bytes()[..len]);
        }
    }
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
    out.put_slice(b);
}

/// Reads the classic or, for version 4, the compact encoding.
struct Reader<'a> {
    buf: &'a [u8],
    flexible: bool,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], GroupRecordError> {
        if self.buf.len() < n {
            return Err(GroupRecordError::Truncated { what });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn i16(&mut self, what: &'static str) -> Result<i16, GroupRecordError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self, what: &'static str) -> Result<i32, GroupRecordError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self, what: &'static str) -> Result<i64, GroupRecordError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(a))
    }
    fn uvarint(&mut self, what: &'static str) -> Result<u64, GroupRecordError> {
        let mut n: u64 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1, what)?[0];
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(GroupRecordError::Truncated { what })
    }
    fn string(&mut self, what: &'static str) -> Result<Option<String>, GroupRecordError> {
        let len = if self.flexible {
            let n = self.uvarint(what)?;
            if n == 0 {
                return Ok(None);
            }
            usize::try_from(n - 1).unwrap_or(usize::MAX)
        } else {
            // A negative length is a null string.
            match usize::try_from(self.i16(what)?) {
                Ok(n) => n,
                Err(_) => return Ok(None),
            }
        };
        let b = self.take(len, what)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| GroupRecordError::NotUtf8 { what })
    }
    fn bytes(&mut self, what: &'static str) -> Result<Bytes, GroupRecordError> {
        let len = if self.flexible {
            let n = self.uvarint(what)?;
            usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX)
        } else {
            let n = self.i32(what)?;
            if n < 0 {
                return Err(GroupRecordError::NegativeLength { what });
            }
            usize::try_from(n).unwrap_or(usize::MAX)
        };
        Ok(Bytes::copy_from_slice(self.take(len, what)?))
    }
    /// An array count, bounded by the bytes left (each element takes at least one byte).
    fn len(&mut self, what: &'static str) -> Result<usize, GroupRecordError> {
        let n = if self.flexible {
            let n = self.uvarint(what)?;
            usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX)
        } else {
            let n = self.i32(what)?;
            usize::try_from(n.max(0)).unwrap_or(0)
        };
        if n > self.buf.len() {
            return Err(GroupRecordError::Truncated { what });
        }
        Ok(n)
    }
    /// Skips a struct's tagged fields (version 4); nothing to do before.
    fn tagged_fields(&mut self) -> Result<(), GroupRecordError> {
        if !self.flexible {
            return Ok(());
        }
        let n = self.uvarint("tagged fields")?;
        for _ in 0..n {
            let _tag = self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")?;
            self.take(usize::try_from(size).unwrap_or(usize::MAX), "tagged field")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value() -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp: 0x0102,
            members: vec![MemberMetadata {
                member_id: "m-1".into(),
                group_instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(&[0xAA]),
                assignment: Bytes::from_static(&[0xBB, 0xCC]),
            }],
        }
    }

    #[test]
    fn v3_bytes_are_kafkas() {
        // Hand-computed from GroupMetadataValue.json, version 3 (not flexible).
        let mut want: Vec<u8> = vec![0, 3]; // version
        want.extend_from_slice(&[0, 8]);
        want.extend_from_slice(b"consumer"); // protocol_type
        want.extend_from_slice(&[0, 0, 0, 7]); // generation
        want.extend_from_slice(&[0, 5]);
        want.extend_from_slice(b"range"); // protocol
        want.extend_from_slice(&[0, 3]);
        want.extend_from_slice(b"m-1"); // leader
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 2]); // current_state_timestamp
        want.extend_from_slice(&[0, 0, 0, 1]); // one member
        want.extend_from_slice(&[0, 3]);
        want.extend_from_slice(b"m-1"); // member_id
        want.extend_from_slice(&[0, 1, b'i']); // group_instance_id
        want.extend_from_slice(&[0, 1, b'c']); // client_id
        want.extend_from_slice(&[0, 10]);
        want.extend_from_slice(b"/127.0.0.1"); // client_host
        want.extend_from_slice(&300_000i32.to_be_bytes()); // rebalance_timeout
        want.extend_from_slice(&45_000i32.to_be_bytes()); // session_timeout
        want.extend_from_slice(&[0, 0, 0, 1, 0xAA]); // subscription
        want.extend_from_slice(&[0, 0, 0, 2, 0xBB, 0xCC]); // assignment
        assert_eq!(&value().encode()[..], &want[..]);
        assert_eq!(GroupMetadataValue::decode(&want), Ok(value()));
    }

    #[test]
    fn an_empty_group_has_null_protocol_and_leader() {
        let v = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: None,
            leader: None,
            current_state_timestamp: -1,
            members: Vec::new(),
        };
        let mut want: Vec<u8> = vec![0, 3, 0, 8];
        want.extend_from_slice(b"consumer");
        want.extend_from_slice(&[0, 0, 0, 3, 0xFF, 0xFF, 0xFF, 0xFF]);
        want.extend_from_slice(&(-1i64).to_be_bytes());
        want.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(&v.encode()[..], &want[..]);
        assert_eq!(GroupMetadataValue::decode(&want), Ok(v));
    }

    #[test]
    fn older_and_flexible_versions_decode() {
        // v0: no timestamp, no instance id, no rebalance timeout.
        let mut v0: Vec<u8> = vec![0, 0, 0, 1, b'x', 0, 0, 0, 2, 0, 1, b'p', 0, 1, b'a'];
        v0.extend_from_slice(&[0, 0, 0, 1, 0, 1, b'a', 0, 1, b'c', 0, 1, b'h']);
        v0.extend_from_slice(&10_000i32.to_be_bytes());
        v0.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        let d = GroupMetadataValue::decode(&v0).unwrap();
        assert_eq!((d.generation, d.current_state_timestamp), (2, -1));
        assert_eq!(d.members[0].rebalance_timeout_ms, 10_000);
        assert_eq!(d.members[0].group_instance_id, None);

        // v4: compact strings, arrays and bytes, tagged fields per struct.
        let mut v4: Vec<u8> = vec![0, 4, 2, b'x', 0, 0, 0, 5, 0, 2, b'a'];
        v4.extend_from_slice(&9i64.to_be_bytes());
        v4.push(2); // one member
        v4.extend_from_slice(&[2, b'a', 0, 2, b'c', 2, b'h']);
        v4.extend_from_slice(&1i32.to_be_bytes());
        v4.extend_from_slice(&2i32.to_be_bytes());
        v4.extend_from_slice(&[2, 0xAA, 1]); // subscription [AA], empty assignment
        v4.extend_from_slice(&[1, 0, 1, 0xEE]); // one unknown tagged field
        v4.push(0);
        let d = GroupMetadataValue::decode(&v4).unwrap();
        assert_eq!(d.protocol, None);
        assert_eq!(d.leader.as_deref(), Some("a"));
        assert_eq!(d.members[0].subscription, Bytes::from_static(&[0xAA]));
        assert_eq!(
            GroupMetadataValue::decode(&[0, 9]),
            Err(GroupRecordError::UnknownVersion { version: 9 })
        );
        assert!(GroupMetadataValue::decode(&value().encode()[..20]).is_err());
    }

    #[test]
    fn a_group_round_trips_through_its_record() {
        let v = value();
        let g = ClassicGroup::from_record("g".into(), v.clone(), 1_000);
        assert_eq!(g.state, GroupState::Stable);
        assert_eq!(g.static_members.get("i").map(String::as_str), Some("m-1"));
        assert_eq!(g.members["m-1"].heartbeat_deadline_ms, 46_000);
        assert_eq!(g.to_record(0x0102), v);
        let empty = ClassicGroup::from_record(
            "g".into(),
            GroupMetadataValue {
                members: Vec::new(),
                protocol: None,
                leader: None,
                ..v
            },
            0,
        );
        assert_eq!((empty.state, empty.generation_id), (GroupState::Empty, 7));
    }
}
