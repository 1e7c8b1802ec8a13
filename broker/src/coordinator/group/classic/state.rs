//! One classic group's data and the bookkeeping Kafka's `ClassicGroup` does: states and
//! their transitions, membership, the static-instance map, protocol selection.
//!
//! The rebalance protocol that drives these (join, sync, heartbeat, leave, timers) is in
//! [`super::rebalance`].

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use strata_protocol::consumer_protocol;

use super::error::GroupError;
use super::member::{Member, Protocol};
use super::{Completion, JoinResponse, JoinedMember, SyncResponse};

/// Kafka's `ClassicGroupState`.
///
/// ```text
/// Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
///   ▲                 ▲        │                                    │ leader's SyncGroup
///   └── no members ───┘        └────────── member change ◀── Stable ◀┘
/// ```
/// Dead is a deleted group; it never stays in the coordinator's map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members; committed offsets may remain.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// The generation is formed; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted.
    Dead,
}

impl GroupState {
    /// Kafka's name for the state, as ListGroups and DescribeGroups report it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Whether a rebalance may start from this state (PreparingRebalance's valid previous
    /// states in `ClassicGroupState`).
    #[must_use]
    pub fn can_rebalance(self) -> bool {
        matches!(
            self,
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable
        )
    }
}

/// What the group's join timer completes when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinTimer {
    /// The first rebalance of an empty group waits `group.initial.rebalance.delay.ms` for more
    /// members, extended while new members keep arriving, up to the rebalance timeout.
    InitialDelay { delay_ms: i64, remaining_ms: i64 },
    /// The rebalance timeout: members that have not rejoined by then are removed.
    RebalanceTimeout,
}

/// One classic group.
#[derive(Debug)]
pub struct ClassicGroup {
    /// The group id.
    pub group_id: String,
    /// Current state.
    pub state: GroupState,
    /// The state before the current one: an initial rebalance (previous Empty) completes only
    /// on its timer, never early.
    pub previous_state: GroupState,
    /// Incremented when each join phase completes; 0 for a new group.
    pub generation_id: i32,
    /// Set by the first member; every member must join with the same.
    pub protocol_type: Option<String>,
    /// The protocol selected for the current generation.
    pub protocol_name: Option<String>,
    /// The member that computes the assignment.
    pub leader_id: Option<String>,
    /// Members by id (ordered, so that the choice of a new leader is deterministic).
    pub members: BTreeMap<String, Member>,
    /// KIP-345: `group.instance.id` → member id.
    pub static_members: BTreeMap<String, String>,
    /// KIP-394: dynamic member ids handed out with MEMBER_ID_REQUIRED that have not joined
    /// yet, with the time they expire.
    pub pending_join: BTreeMap<String, i64>,
    /// Members of the new generation that have not sent SyncGroup yet.
    pub pending_sync: BTreeSet<String>,
    /// A new member arrived during the initial delay, which extends it.
    pub new_member_added: bool,
    /// The join-phase timer: (deadline, what it completes).
    pub join_timer: Option<(i64, JoinTimer)>,
    /// The sync-phase timer: (deadline, generation it was set for).
    pub sync_timer: Option<(i64, i32)>,
    /// The group reached a point Kafka records in `__consumer_offsets` (a completed
    /// generation, Empty, a replaced static member); the coordinator collects its record.
    pub needs_record: bool,
}

impl ClassicGroup {
    /// A new, empty group.
    #[must_use]
    pub fn new(group_id: String) -> Self {
        ClassicGroup {
            group_id,
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_join: BTreeMap::new(),
            pending_sync: BTreeSet::new(),
            new_member_added: false,
            join_timer: None,
            sync_timer: None,
            needs_record: false,
        }
    }

    pub(super) fn transition_to(&mut self, state: GroupState) {
        self.previous_state = self.state;
        self.state = state;
    }

    /// Whether `member_id` leads the group.
    #[must_use]
    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    /// Whether the group has no members.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The group's rebalance timeout: the largest of its members'.
    #[must_use]
    pub fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    fn awaiting_join_count(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    /// Every member is parked in JoinGroup and no handed-out member id is still to join.
    #[must_use]
    pub fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.awaiting_join_count() && self.pending_join.is_empty()
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> Vec<&str> {
        let Some(first) = self.members.values().next() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|p| p.name == *name))
            })
            .collect()
    }

    /// Kafka's `selectProtocol`: among the protocols all members support, the one most members
    /// prefer (each votes for its first candidate). Ties go to the protocol that comes first in
    /// the first member's preference order, which keeps the choice deterministic.
    #[must_use]
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(&str, usize)> = candidates.iter().map(|c| (*c, 0)).collect();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates)
                && let Some(slot) = votes.iter_mut().find(|(n, _)| *n == v)
            {
                slot.1 += 1;
            }
        }
        let best = votes.iter().map(|(_, c)| *c).max()?;
        votes
            .iter()
            .find(|(_, c)| *c == best)
            .map(|(n, _)| (*n).to_owned())
    }

    /// Kafka's `supportsProtocols`: an empty group takes any non-empty type and protocol list;
    /// otherwise the type must match and one protocol must be supported by every member.
    #[must_use]
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|p| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|q| q.name == p.name))
            })
    }

    /// Kafka's `validateMember`: a static member's instance id must map to this member id
    /// (else FENCED_INSTANCE_ID), and the member must exist (else UNKNOWN_MEMBER_ID).
    ///
    /// # Errors
    /// [`GroupError::FencedInstanceId`] or [`GroupError::UnknownMemberId`].
    pub fn validate_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(instance) = group_instance_id {
            match self.static_members.get(instance) {
                None => {
                    return Err(GroupError::UnknownMemberId {
                        member_id: member_id.to_owned(),
                    });
                }
                Some(existing) if existing != member_id => {
                    return Err(GroupError::FencedInstanceId {
                        group_instance_id: instance.to_owned(),
                        member_id: member_id.to_owned(),
                    });
                }
                Some(_) => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId {
                member_id: member_id.to_owned(),
            });
        }
        Ok(())
    }

    /// Adds a member: the first one sets the protocol type and leads.
    pub(super) fn add(&mut self, member: Member) {
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        self.pending_join.remove(&member.member_id);
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member. A parked JoinGroup or SyncGroup of it is answered UNKNOWN_MEMBER_ID
    /// so that no request stays parked for a member that no longer exists (a client still
    /// alive rejoins). A removed leader is replaced by the first remaining member.
    pub(super) fn remove(&mut self, member_id: &str, out: &mut Vec<Completion>) {
        if let Some(m) = self.members.remove(member_id) {
            let err = GroupError::UnknownMemberId {
                member_id: member_id.to_owned(),
            };
            if let Some(t) = m.awaiting_join {
                out.push(Completion::Join(
                    t,
                    JoinResponse::error(String::new(), err.clone()),
                ));
            }
            if let Some(t) = m.awaiting_sync {
                out.push(Completion::Sync(t, SyncResponse::error(err)));
            }
            if let Some(instance) = &m.group_instance_id {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.pending_join.remove(member_id);
        self.pending_sync.remove(member_id);
    }

    /// Kafka's `maybeElectNewJoinedLeader`: keep the leader if it rejoined, else pick a member
    /// that did. False when no member rejoined (or there is no leader).
    pub(super) fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        match self.members.values().find(|m| m.awaiting_join.is_some()) {
            Some(m) => {
                self.leader_id = Some(m.member_id.clone());
                true
            }
            None => false,
        }
    }

    /// The member list the leader receives: every member with its metadata for the selected
    /// protocol.
    #[must_use]
    pub fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        self.members
            .values()
            .map(|m| JoinedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    /// Kafka's `computeSubscribedTopics`: the union of the members' subscriptions when the
    /// group uses the consumer protocol and every member's metadata parses; `None` otherwise.
    #[must_use]
    pub fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in self.members.values() {
            topics.extend(consumer_protocol::subscription_topics(
                &m.metadata(protocol),
            )?);
        }
        Some(topics)
    }

    /// The earliest time at which something in this group expires.
    #[must_use]
    pub fn next_deadline(&self) -> Option<i64> {
        let members = self
            .members
            .values()
            .map(|m| m.heartbeat_deadline_ms)
            .filter(|d| *d != i64::MAX);
        let pending = self.pending_join.values().copied();
        let timers = self
            .join_timer
            .map(|(d, _)| d)
            .into_iter()
            .chain(self.sync_timer.map(|(d, _)| d));
        members.chain(pending).chain(timers).min()
    }

    /// An empty assignment, as Kafka gives members the leader left out.
    pub(super) fn empty_assignment() -> Bytes {
        Bytes::new()
    }
}
