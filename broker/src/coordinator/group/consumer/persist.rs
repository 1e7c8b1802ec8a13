//! KIP-848 consumer groups in `__consumer_offsets`, in Kafka's records (the schemas in Kafka's
//! `group-coordinator/src/main/resources/common/message/`), so that a group survives a restart
//! or a `kill -9`: its members keep their ids, epochs and partitions, and carry on
//! heartbeating without a rebalance.
//!
//! # Records
//!
//! Keys are non-flexible: an int16 record type, then int16-length strings. Values are an int16
//! version (0) and a flexible body (compact strings and arrays, tagged fields).
//!
//! ```text
//! 3 ConsumerGroupMetadata          (group)          Epoch i32, tag 0: MetadataHash i64
//! 5 ConsumerGroupMemberMetadata    (group, member)  InstanceId?, RackId?, ClientId, ClientHost,
//!                                                   SubscribedTopicNames [string],
//!                                                   SubscribedTopicRegex?, RebalanceTimeoutMs i32,
//!                                                   ServerAssignor?
//! 6 ConsumerGroupTargetAssignmentMetadata (group)   AssignmentEpoch i32
//! 7 ConsumerGroupTargetAssignmentMember (group, member)  TopicPartitions [TopicId uuid, Partitions [i32]]
//! 8 ConsumerGroupCurrentMemberAssignment (group, member) MemberEpoch i32, PreviousMemberEpoch i32,
//!                                                   State i8, AssignedPartitions [..],
//!                                                   PartitionsPendingRevocation [..]
//! ```
//!
//! Type 4 (ConsumerGroupPartitionMetadata) is deprecated since Kafka 4.1, which keeps a hash
//! of the subscribed topics' metadata in the group record instead. Ours is FNV-1a over the
//! [`TopicSnapshot`] (Kafka's is Murmur3 over more fields), so a Kafka broker reading our
//! directory, or we reading Kafka's, sees a different hash and bumps the group epoch once:
//! one extra rebalance, nothing lost. Records of type 4 found on disk are kept until the group
//! is deleted, and otherwise ignored.
//!
//! # What is written when
//!
//! [`Tracker`] remembers the encoded value of every live key. After each operation the
//! coordinator marks what it may have changed (one member, or the whole group); the next
//! [`Tracker::take`] re-encodes only that, and returns the keys whose bytes differ, plus
//! tombstones for keys that are gone. A steady heartbeat changes nothing durable, so it writes
//! nothing. Deadlines are not stored: on load every member gets a fresh session, as Kafka does.
//! A failed append puts its records back ([`Tracker::not_written`]), so the group's next
//! operation writes them again.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::assignor::Assignment;
use super::coordinator::{TopicMetadata, compile_regex, resolve_regex};
use super::group::{ConsumerGroup, ConsumerGroupMember, MemberState, TopicSnapshot};

const GROUP_METADATA: i16 = 3;
const MEMBER_METADATA: i16 = 5;
const TARGET_METADATA: i16 = 6;
const TARGET_MEMBER: i16 = 7;
const CURRENT_ASSIGNMENT: i16 = 8;

/// The key of a group-level record (types 3 and 6).
fn group_key(record_type: i16, group: &str) -> Bytes {
    let mut k = BytesMut::with_capacity(4 + group.len());
    k.put_i16(record_type);
    put_str(&mut k, group);
    k.freeze()
}

/// The key of a member record (types 5, 7 and 8).
fn member_key(record_type: i16, group: &str, member: &str) -> Bytes {
    let mut k = BytesMut::with_capacity(6 + group.len() + member.len());
    k.put_i16(record_type);
    put_str(&mut k, group);
    put_str(&mut k, member);
    k.freeze()
}

fn put_str(out: &mut BytesMut, s: &str) {
    // Group and member ids are far below i16::MAX bytes (the request decoder caps strings).
    let len = s.len().min(i16::MAX as usize);
    out.put_i16(i16::try_from(len).unwrap_or(i16::MAX));
    out.put_slice(&s.as_bytes()[..len]);
}

fn put_uvarint(out: &mut BytesMut, mut n: u64) {
    while n >= 0x80 {
        out.put_u8((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

fn put_compact_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => {
            put_uvarint(out, s.len() as u64 + 1);
            out.put_slice(s.as_bytes());
        }
    }
}

fn put_partitions(out: &mut BytesMut, a: &Assignment) {
    let topics: Vec<_> = a.iter().filter(|(_, ps)| !ps.is_empty()).collect();
    put_uvarint(out, topics.len() as u64 + 1);
    for (topic, partitions) in topics {
        out.put_slice(topic.as_bytes());
        put_uvarint(out, partitions.len() as u64 + 1);
        for p in partitions {
            out.put_i32(*p);
        }
        put_uvarint(out, 0); // tagged fields of TopicPartitions
    }
}

/// A value: version 0, then the body `f` writes, then an empty tagged-field section.
fn value(f: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_i16(0);
    f(&mut out);
    put_uvarint(&mut out, 0);
    out.freeze()
}

/// FNV-1a over the subscribed topics' names, ids and partition counts.
#[must_use]
pub fn metadata_hash(topics: &TopicSnapshot) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (name, t) in topics {
        eat(name.as_bytes());
        eat(&[0]);
        if let Some((id, partitions)) = t {
            eat(id.as_bytes());
            eat(&partitions.to_be_bytes());
        }
        eat(&[1]);
    }
    i64::from_be_bytes(h.to_be_bytes())
}

fn group_metadata_value(g: &ConsumerGroup) -> Bytes {
    let mut out = BytesMut::with_capacity(24);
    out.put_i16(0);
    out.put_i32(g.group_epoch);
    // One tagged field: tag 0, 8 bytes, MetadataHash.
    put_uvarint(&mut out, 1);
    put_uvarint(&mut out, 0);
    put_uvarint(&mut out, 8);
    out.put_i64(metadata_hash(&g.topics));
    out.freeze()
}

fn member_metadata_value(m: &ConsumerGroupMember) -> Bytes {
    value(|out| {
        put_compact_str(out, m.instance_id.as_deref());
        put_compact_str(out, m.rack_id.as_deref());
        put_compact_str(out, Some(&m.client_id));
        put_compact_str(out, Some(&m.client_host));
        put_uvarint(out, m.subscribed_topic_names.len() as u64 + 1);
        for t in &m.subscribed_topic_names {
            put_compact_str(out, Some(t));
        }
        put_compact_str(out, m.subscribed_topic_regex.as_deref());
        out.put_i32(m.rebalance_timeout_ms);
        put_compact_str(out, m.server_assignor.as_deref());
    })
}

fn state_byte(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn current_assignment_value(m: &ConsumerGroupMember) -> Bytes {
    value(|out| {
        out.put_i32(m.member_epoch);
        out.put_i32(m.previous_member_epoch);
        out.put_i8(state_byte(m.state));
        put_partitions(out, &m.assigned);
        put_partitions(out, &m.pending_revocation);
    })
}

/// What is durable of `g`, by encoded key: the group-level records, and the records of the
/// members in `only` (every member when `None`). A group that never had a member has none.
fn desired(g: &ConsumerGroup, only: Option<&BTreeSet<String>>) -> BTreeMap<Bytes, Bytes> {
    let mut out = BTreeMap::new();
    if g.group_epoch == 0 && g.members.is_empty() {
        return out;
    }
    out.insert(
        group_key(GROUP_METADATA, &g.group_id),
        group_metadata_value(g),
    );
    out.insert(
        group_key(TARGET_METADATA, &g.group_id),
        value(|o| o.put_i32(g.assignment_epoch)),
    );
    let members: Box<dyn Iterator<Item = &ConsumerGroupMember>> = match only {
        None => Box::new(g.members.values()),
        Some(ids) => Box::new(ids.iter().filter_map(|id| g.members.get(id))),
    };
    for m in members {
        let id = &m.member_id;
        out.insert(
            member_key(MEMBER_METADATA, &g.group_id, id),
            member_metadata_value(m),
        );
        out.insert(
            member_key(CURRENT_ASSIGNMENT, &g.group_id, id),
            current_assignment_value(m),
        );
        if let Some(t) = g.target.get(id) {
            out.insert(
                member_key(TARGET_MEMBER, &g.group_id, id),
                value(|o| put_partitions(o, t)),
            );
        }
    }
    out
}

/// What may have changed in one group since the last [`Tracker::take`].
#[derive(Debug)]
enum Dirty {
    Group,
    Members(BTreeSet<String>),
}

/// The durable image of every group, and what to write next.
#[derive(Debug, Default)]
pub struct Tracker {
    /// Encoded value of every live key, by group.
    stored: HashMap<String, BTreeMap<Bytes, Bytes>>,
    dirty: BTreeMap<String, Dirty>,
}

/// Records to append for one group: (encoded key, encoded value or `None` for a tombstone).
pub type GroupRecords = (String, Vec<(Bytes, Option<Bytes>)>);

impl Tracker {
    /// Marks the whole group as possibly changed (membership, epochs, targets; or removed).
    pub fn group_changed(&mut self, group: &str) {
        self.dirty.insert(group.to_owned(), Dirty::Group);
    }

    /// Marks one member's records as possibly changed.
    pub fn member_changed(&mut self, group: &str, member: &str) {
        match self
            .dirty
            .entry(group.to_owned())
            .or_insert_with(|| Dirty::Members(BTreeSet::new()))
        {
            Dirty::Group => {}
            Dirty::Members(m) => {
                m.insert(member.to_owned());
            }
        }
    }

    /// The records that bring the log in line with `groups`, per group; they are taken as
    /// written. When an append fails, [`Tracker::not_written`] puts them back.
    pub fn take(&mut self, groups: &BTreeMap<String, ConsumerGroup>) -> Vec<GroupRecords> {
        let mut out = Vec::new();
        for (group_id, dirty) in std::mem::take(&mut self.dirty) {
            let stored = self.stored.entry(group_id.clone()).or_default();
            let (want, scope): (BTreeMap<Bytes, Bytes>, BTreeSet<Bytes>) =
                match (groups.get(&group_id), dirty) {
                    (None, _) => (BTreeMap::new(), stored.keys().cloned().collect()),
                    (Some(g), Dirty::Group) => {
                        let want = desired(g, None);
                        let scope = stored.keys().chain(want.keys()).cloned().collect();
                        (want, scope)
                    }
                    (Some(g), Dirty::Members(ids)) => {
                        let want = desired(g, Some(&ids));
                        let mut scope: BTreeSet<Bytes> = want.keys().cloned().collect();
                        for id in &ids {
                            for t in [MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT] {
                                scope.insert(member_key(t, &group_id, id));
                            }
                        }
                        (want, scope)
                    }
                };
            let mut records = Vec::new();
            for key in scope {
                match (want.get(&key), stored.get(&key)) {
                    (Some(new), Some(old)) if new == old => {}
                    (Some(new), _) => {
                        stored.insert(key.clone(), new.clone());
                        records.push((key, Some(new.clone())));
                    }
                    (None, Some(_)) => {
                        stored.remove(&key);
                        records.push((key, None));
                    }
                    (None, None) => {}
                }
            }
            if stored.is_empty() {
                self.stored.remove(&group_id);
            }
            if !records.is_empty() {
                out.push((group_id, records));
            }
        }
        out
    }

    /// The append of `records` (as [`Tracker::take`] returned them) failed: the next `take`
    /// writes them again (whatever the group then holds for those keys).
    pub fn not_written(&mut self, group: &str, records: &[(Bytes, Option<Bytes>)]) {
        let stored = self.stored.entry(group.to_owned()).or_default();
        for (key, value) in records {
            match value {
                // An upsert that did not land: unknown on disk, so written again.
                Some(_) => {
                    stored.remove(key);
                }
                // A tombstone that did not land: the old value is still on disk.
                None => {
                    stored.insert(key.clone(), Bytes::new());
                }
            }
        }
        self.dirty.insert(group.to_owned(), Dirty::Group);
    }

    /// Takes over what another tracker knows (the groups of a partition just loaded).
    pub fn absorb(&mut self, other: Tracker) {
        self.stored.extend(other.stored);
        self.dirty.extend(other.dirty);
    }

    /// Forgets a group whose records were deleted behind the tracker's back (DeleteGroups
    /// tombstones every key of the group in the offset store).
    pub fn forget(&mut self, group: &str) {
        self.stored.remove(group);
        self.dirty.remove(group);
    }
}

/// Rebuilds the groups from their stored records (as [`crate::coordinator::offsets::OffsetStore`] replayed
/// them). Every member gets a fresh session from `now_ms`, and a member that was revoking
/// partitions a fresh rebalance timeout. A group whose subscribed topics changed while the
/// broker was down (the stored hash differs) moves to a new group epoch, so its members
/// rebalance. Records that cannot be read are skipped with a warning.
pub fn restore(
    records: Vec<(Bytes, Bytes)>,
    now_ms: i64,
    session_timeout_ms: i32,
    topics: &dyn TopicMetadata,
) -> (BTreeMap<String, ConsumerGroup>, Tracker) {
    let mut groups: BTreeMap<String, ConsumerGroup> = BTreeMap::new();
    let mut hashes: HashMap<String, i64> = HashMap::new();
    let mut tracker = Tracker::default();
    for (key, value) in records {
        let Some((record_type, group_id, member_id)) = parse_key(&key) else {
            tracing::warn!("skipping an unreadable consumer group record key");
            continue;
        };
        tracker
            .stored
            .entry(group_id.clone())
            .or_default()
            .insert(key.clone(), value.clone());
        let g = groups
            .entry(group_id.clone())
            .or_insert_with(|| ConsumerGroup::new(group_id.clone()));
        let ok = match (record_type, member_id) {
            (GROUP_METADATA, None) => decode_group(&value).map(|(epoch, hash)| {
                g.group_epoch = epoch;
                hashes.insert(group_id.clone(), hash);
            }),
            (TARGET_METADATA, None) => decode_target_metadata(&value).map(|e| {
                g.assignment_epoch = e;
            }),
            (MEMBER_METADATA, Some(id)) => {
                let m = g
                    .members
                    .entry(id.clone())
                    .or_insert_with(|| ConsumerGroupMember::new(id.clone()));
                decode_member_metadata(&value, m)
            }
            (CURRENT_ASSIGNMENT, Some(id)) => {
                let m = g
                    .members
                    .entry(id.clone())
                    .or_insert_with(|| ConsumerGroupMember::new(id.clone()));
                decode_current_assignment(&value, m)
            }
            (TARGET_MEMBER, Some(id)) => {
                let mut r = Reader(&value[..]);
                r.version().and_then(|()| r.partitions()).map(|t| {
                    g.target.insert(id, t);
                })
            }
            // Type 4 (deprecated partition metadata) and anything else: kept, not used.
            _ => Some(()),
        };
        if ok.is_none() {
            tracing::warn!(group = %group_id, record_type, "skipping an unreadable consumer group record");
        }
    }
    for g in groups.values_mut() {
        // Targets of members that are gone are dropped; members without a target get none.
        let members: BTreeSet<String> = g.members.keys().cloned().collect();
        g.target.retain(|id, _| members.contains(id));
        for m in g.members.values_mut() {
            m.session_deadline_ms = now_ms.saturating_add(i64::from(session_timeout_ms));
            m.revocation_deadline_ms = (m.state == MemberState::UnrevokedPartitions)
                .then(|| now_ms.saturating_add(i64::from(m.rebalance_timeout_ms.max(0))));
        }
        g.owners = g
            .members
            .values()
            .flat_map(|m| {
                m.assigned
                    .iter()
                    .chain(&m.pending_revocation)
                    .flat_map(move |(t, ps)| {
                        ps.iter().map(move |p| ((*t, *p), m.member_id.clone()))
                    })
            })
            .collect();
        for m in g.members.values_mut() {
            // What a regular expression matches is derived: resolved against today's topics.
            m.regex_topics = match m.subscribed_topic_regex.as_deref().map(compile_regex) {
                Some(Ok(re)) => resolve_regex(&re, topics),
                _ => BTreeSet::new(),
            };
        }
        g.topics = g.topic_snapshot(|n| topics.topic(n));
        if hashes.get(&g.group_id) != Some(&metadata_hash(&g.topics)) && !g.members.is_empty() {
            g.group_epoch += 1;
            tracker.group_changed(&g.group_id);
        }
        g.group_epoch = g.group_epoch.max(g.assignment_epoch);
    }
    (groups, tracker)
}

/// (record type, group id, member id) of a consumer group key.
fn parse_key(key: &[u8]) -> Option<(i16, String, Option<String>)> {
    let mut r = Reader(key);
    let t = r.i16()?;
    let group = r.string()?;
    let member = match t {
        MEMBER_METADATA | TARGET_MEMBER | CURRENT_ASSIGNMENT => Some(r.string()?),
        _ => None,
    };
    Some((t, group, member))
}

fn decode_group(v: &[u8]) -> Option<(i32, i64)> {
    let mut r = Reader(v);
    r.version()?;
    let epoch = r.i32()?;
    let mut hash = 0;
    for _ in 0..r.uvarint()? {
        let tag = r.uvarint()?;
        let size = usize::try_from(r.uvarint()?).ok()?;
        let data = r.take(size)?;
        if tag == 0 && size == 8 {
            hash = i64::from_be_bytes(data.try_into().ok()?);
        }
    }
    Some((epoch, hash))
}

fn decode_target_metadata(v: &[u8]) -> Option<i32> {
    let mut r = Reader(v);
    r.version()?;
    r.i32()
}

fn decode_member_metadata(v: &[u8], m: &mut ConsumerGroupMember) -> Option<()> {
    let mut r = Reader(v);
    r.version()?;
    m.instance_id = r.compact_str()?;
    m.rack_id = r.compact_str()?;
    m.client_id = r.compact_str()?.unwrap_or_default();
    m.client_host = r.compact_str()?.unwrap_or_default();
    let n = r.array_len()?;
    let mut topics = BTreeSet::new();
    for _ in 0..n {
        topics.insert(r.compact_str()?.unwrap_or_default());
    }
    m.subscribed_topic_names = topics;
    m.subscribed_topic_regex = r.compact_str()?.filter(|r| !r.is_empty());
    m.rebalance_timeout_ms = r.i32()?;
    m.server_assignor = r.compact_str()?;
    Some(())
}

fn decode_current_assignment(v: &[u8], m: &mut ConsumerGroupMember) -> Option<()> {
    let mut r = Reader(v);
    r.version()?;
    m.member_epoch = r.i32()?;
    m.previous_member_epoch = r.i32()?;
    m.state = match r.i8()? {
        1 => MemberState::UnrevokedPartitions,
        2 => MemberState::UnreleasedPartitions,
        _ => MemberState::Stable,
    };
    m.assigned = r.partitions()?;
    m.pending_revocation = r.partitions()?;
    Some(())
}

/// A bounds-checked reader: every length is checked against what is left before use.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn i8(&mut self) -> Option<i8> {
        self.take(1).map(|b| i8::from_be_bytes([b[0]]))
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn version(&mut self) -> Option<()> {
        (self.i16()? == 0).then_some(())
    }
    fn string(&mut self) -> Option<String> {
        let n = usize::try_from(self.i16()?).ok()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn uvarint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }
    /// A compact array's element count; each element takes at least one byte, so a count
    /// beyond what is left is refused before anything is allocated.
    fn array_len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.uvarint()?.checked_sub(1)?).ok()?;
        (n <= self.0.len()).then_some(n)
    }
    fn compact_str(&mut self) -> Option<Option<String>> {
        match self.uvarint()? {
            0 => Some(None),
            n => {
                let n = usize::try_from(n - 1).ok()?;
                Some(Some(String::from_utf8(self.take(n)?.to_vec()).ok()?))
            }
        }
    }
    fn skip_tags(&mut self) -> Option<()> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).ok()?;
            self.take(size)?;
        }
        Some(())
    }
    fn partitions(&mut self) -> Option<Assignment> {
        let mut out = Assignment::new();
        for _ in 0..self.array_len()? {
            let id = Uuid::from_bytes(self.take(16)?.try_into().ok()?);
            let mut ps = BTreeSet::new();
            for _ in 0..self.array_len()? {
                ps.insert(self.i32()?);
            }
            self.skip_tags()?;
            if !ps.is_empty() {
                out.entry(id).or_default().extend(ps);
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Topics;
    impl TopicMetadata for Topics {
        fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
            (name == "orders").then_some((Uuid::from_u128(7), 6))
        }
        fn topic_names(&self) -> Vec<&str> {
            vec!["orders"]
        }
    }

    fn group() -> ConsumerGroup {
        let topic = Uuid::from_u128(7);
        let mut g = ConsumerGroup::new("g".into());
        let mut a = ConsumerGroupMember::new("a".into());
        a.instance_id = Some("i-1".into());
        a.client_id = "client".into();
        a.client_host = "/127.0.0.1".into();
        a.subscribed_topic_names = ["orders".to_owned()].into();
        a.server_assignor = Some("range".into());
        a.rebalance_timeout_ms = 30_000;
        a.member_epoch = 3;
        a.previous_member_epoch = 2;
        a.state = MemberState::UnrevokedPartitions;
        a.assigned = [(topic, [0, 1].into())].into();
        a.pending_revocation = [(topic, [2].into())].into();
        let mut b = ConsumerGroupMember::new("b".into());
        b.subscribed_topic_names = ["orders".to_owned()].into();
        b.member_epoch = 3;
        b.assigned = [(topic, [3, 4, 5].into())].into();
        g.members.insert("a".into(), a);
        g.members.insert("b".into(), b);
        g.target.insert("a".into(), [(topic, [0, 1].into())].into());
        g.target
            .insert("b".into(), [(topic, [2, 3, 4, 5].into())].into());
        g.group_epoch = 3;
        g.assignment_epoch = 3;
        g.topics = [("orders".to_owned(), Some((topic, 6)))].into();
        g
    }

    fn log(records: &[GroupRecords]) -> Vec<(Bytes, Bytes)> {
        let mut live = BTreeMap::new();
        for (_, rs) in records {
            for (k, v) in rs {
                match v {
                    Some(v) => live.insert(k.clone(), v.clone()),
                    None => live.remove(k),
                };
            }
        }
        live.into_iter().collect()
    }

    #[test]
    fn a_group_comes_back_as_it_was_written() {
        let g = group();
        let mut t = Tracker::default();
        t.group_changed("g");
        let groups: BTreeMap<_, _> = [("g".to_owned(), g.clone())].into();
        let written = t.take(&groups);
        // 3 and 6, then 5, 7 and 8 for each member.
        assert_eq!(written[0].1.len(), 2 + 3 * 2);
        let (back, mut t2) = restore(log(&written), 1_000, 45_000, &Topics);
        let r = &back["g"];
        assert_eq!((r.group_epoch, r.assignment_epoch), (3, 3));
        assert_eq!(r.target, g.target);
        assert_eq!(r.owners.len(), 6);
        let (a, a0) = (&r.members["a"], &g.members["a"]);
        assert_eq!(
            (
                &a.instance_id,
                &a.client_id,
                &a.client_host,
                &a.subscribed_topic_names,
                &a.server_assignor,
                a.rebalance_timeout_ms,
                a.member_epoch,
                a.previous_member_epoch,
                a.state,
                &a.assigned,
                &a.pending_revocation
            ),
            (
                &a0.instance_id,
                &a0.client_id,
                &a0.client_host,
                &a0.subscribed_topic_names,
                &a0.server_assignor,
                a0.rebalance_timeout_ms,
                a0.member_epoch,
                a0.previous_member_epoch,
                a0.state,
                &a0.assigned,
                &a0.pending_revocation
            )
        );
        assert_eq!(a.session_deadline_ms, 46_000);
        assert_eq!(a.revocation_deadline_ms, Some(31_000));
        // Restored as written: nothing to write again.
        t2.group_changed("g");
        assert!(t2.take(&back).is_empty());
    }

    #[test]
    fn only_what_changed_is_written_and_removed_members_get_tombstones() {
        let mut g = group();
        let mut t = Tracker::default();
        t.group_changed("g");
        let mut groups: BTreeMap<_, _> = [("g".to_owned(), g.clone())].into();
        t.take(&groups);
        // A heartbeat that changed nothing durable.
        t.member_changed("g", "a");
        assert!(t.take(&groups).is_empty());
        // b reconciles: only its current assignment changes.
        g.members.get_mut("b").unwrap().member_epoch = 4;
        groups.insert("g".into(), g.clone());
        t.member_changed("g", "b");
        let w = t.take(&groups);
        assert_eq!(w[0].1.len(), 1);
        assert_eq!(w[0].1[0].0, member_key(CURRENT_ASSIGNMENT, "g", "b"));
        // a leaves: its three records go, the group epoch moves.
        g.remove_member("a");
        groups.insert("g".into(), g.clone());
        t.group_changed("g");
        let w = t.take(&groups);
        let tombstones = w[0].1.iter().filter(|(_, v)| v.is_none()).count();
        assert_eq!(tombstones, 3);
        // The group goes: every remaining key is tombstoned.
        groups.clear();
        t.group_changed("g");
        let w = t.take(&groups);
        assert!(w[0].1.iter().all(|(_, v)| v.is_none()));
        assert_eq!(w[0].1.len(), 2 + 3);
    }

    #[test]
    fn records_whose_append_failed_are_written_again() {
        let g = group();
        let groups: BTreeMap<_, _> = [("g".to_owned(), g)].into();
        let mut t = Tracker::default();
        t.group_changed("g");
        let first = t.take(&groups);
        t.not_written("g", &first[0].1);
        let again = t.take(&groups);
        assert_eq!(again, first);
        // A tombstone that failed is sent again too.
        t.group_changed("g");
        let gone = t.take(&BTreeMap::new());
        t.not_written("g", &gone[0].1);
        assert_eq!(t.take(&BTreeMap::new()), gone);
    }

    #[test]
    fn changed_topic_metadata_moves_the_group_epoch_on_restore() {
        struct Grown;
        impl TopicMetadata for Grown {
            fn topic(&self, _: &str) -> Option<(Uuid, i32)> {
                Some((Uuid::from_u128(7), 12))
            }
            fn topic_names(&self) -> Vec<&str> {
                vec!["orders"]
            }
        }
        let mut t = Tracker::default();
        t.group_changed("g");
        let written = t.take(&[("g".to_owned(), group())].into());
        let (back, mut t2) = restore(log(&written), 0, 45_000, &Grown);
        assert_eq!(back["g"].group_epoch, 4);
        assert!(!t2.take(&back).is_empty(), "the new epoch is written");
    }

    #[test]
    fn garbage_is_skipped() {
        let records = vec![
            (
                member_key(CURRENT_ASSIGNMENT, "g", "m"),
                Bytes::from_static(&[0, 0, 1]),
            ),
            (
                member_key(TARGET_MEMBER, "g", "m"),
                Bytes::from_static(&[0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            ),
            (Bytes::from_static(&[0, 3, 0x7f]), Bytes::new()),
        ];
        let (groups, _) = restore(records, 0, 45_000, &Topics);
        assert!(groups["g"].target.is_empty());
    }
}
