//! The sans-IO group coordinator: every classic group of this node, the entry points of the
//! group APIs, and the questions the offset APIs ask (Kafka's `GroupMetadataManager` for
//! classic groups).
//!
//! Inputs are `(now_ms, request)`; JoinGroup and SyncGroup may park, so they take a
//! [`Ticket`] and their answers, now or later, come out as [`Completion`]s. Group metadata
//! records (see [`super::persist`]) come out of [`ClassicGroupCore::take_records`], and groups come
//! back in at start through [`ClassicGroupCore::load`]. The driver ([`super::driver`]) owns the
//! clock, the member-id randomness, the channels and the log.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use uuid::Uuid;

use super::error::GroupError;
use super::member::Protocol;
use super::persist::GroupMetadataValue;
use super::rebalance::Cx;
use super::state::{ClassicGroup, GroupState};

/// Identifies one parked JoinGroup or SyncGroup; the driver maps it to the waiting request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// An answer to a parked request.
#[derive(Debug)]
pub enum Completion {
    /// The JoinGroup parked on this ticket is answered.
    Join(Ticket, JoinResponse),
    /// The SyncGroup parked on this ticket is answered.
    Sync(Ticket, SyncResponse),
}

/// The coordinator's configuration (broker keys `group.*`).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members.
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// How long a new member's JoinGroup may stay parked (Kafka's fixed 5 minutes).
    pub new_member_join_timeout_ms: i64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            new_member_join_timeout_ms: 300_000,
        }
    }
}

/// A JoinGroup, decoded.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    /// Empty for a member joining for the first time.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// JoinGroup v4+ (KIP-394): a new dynamic member first gets MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
    /// JoinGroup v9+: a static leader that rejoins without a rebalance may skip assigning.
    pub supports_skip_assignment: bool,
}

/// A member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    /// The members with their metadata, for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinResponse {
    /// A refusal (generation -1, no leader or protocol, as Kafka's defaults).
    #[must_use]
    pub fn error(member_id: String, error: GroupError) -> Self {
        JoinResponse {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id,
            members: Vec::new(),
        }
    }
}

/// A SyncGroup, decoded.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+: checked against the group's when present.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment: (member id, assignment bytes).
    pub assignments: Vec<(String, Bytes)>,
}

/// A SyncGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    /// A refusal.
    #[must_use]
    pub fn error(error: GroupError) -> Self {
        SyncResponse {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
}

/// A member as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Its metadata for the selected protocol; empty unless the group is Stable.
    pub metadata: Bytes,
    /// Its assignment; empty unless the group is Stable.
    pub assignment: Bytes,
}

/// A group as DescribeGroups reports it; `None` from [`ClassicGroupCore::describe`] is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub state: &'static str,
    pub protocol_type: String,
    /// The selected protocol when Stable, else empty.
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

impl DescribedGroup {
    /// A "simple" group, which exists only through its committed offsets: Empty, with no
    /// protocol type and no members (Kafka's empty classic group).
    #[must_use]
    pub fn simple() -> Self {
        DescribedGroup {
            state: GroupState::Empty.name(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        }
    }
}

/// Every classic group of this node.
#[derive(Debug, Default)]
pub struct ClassicGroupCore {
    cfg: GroupConfig,
    groups: BTreeMap<String, ClassicGroup>,
    /// Group metadata records not yet handed to the driver: the encoded GroupMetadataValue,
    /// `None` for a tombstone. A record is a whole-group snapshot, so only the latest per group
    /// matters.
    records: BTreeMap<String, Option<Bytes>>,
}

impl ClassicGroupCore {
    /// A coordinator with no groups.
    #[must_use]
    pub fn new(cfg: GroupConfig) -> Self {
        ClassicGroupCore {
            cfg,
            groups: BTreeMap::new(),
            records: BTreeMap::new(),
        }
    }

    /// Restores groups from their stored GroupMetadataValues (Kafka's load of a
    /// `__consumer_offsets` partition): see [`ClassicGroup::from_record`]. A value that does
    /// not decode is skipped loudly, as one bad record must not cost the other groups.
    pub fn load(&mut self, now_ms: i64, stored: Vec<(String, Bytes)>) {
        for (group_id, bytes) in stored {
            match GroupMetadataValue::decode(&bytes) {
                Ok(v) => {
                    let g = ClassicGroup::from_record(group_id.clone(), v, now_ms);
                    tracing::info!(group = %group_id, state = g.state.name(),
                        generation = g.generation_id, members = g.members.len(), "loaded group");
                    self.groups.insert(group_id, g);
                }
                Err(e) => tracing::error!(group = %group_id, error = %e,
                    "skipping undecodable group metadata"),
            }
        }
    }

    /// Drops the groups `gone` selects (this node stopped leading their
    /// `__consumer_offsets` partition), with their unwritten records. Every request parked
    /// on them is answered NOT_COORDINATOR.
    pub fn unload(&mut self, gone: impl Fn(&str) -> bool) -> Vec<Completion> {
        let ids: Vec<String> = self.groups.keys().filter(|g| gone(g)).cloned().collect();
        let mut out = Vec::new();
        for id in ids {
            let Some(g) = self.groups.remove(&id) else {
                continue;
            };
            for m in g.members.values() {
                if let Some(t) = m.awaiting_join {
                    out.push(Completion::Join(
                        t,
                        JoinResponse::error(m.member_id.clone(), GroupError::NotCoordinator),
                    ));
                }
                if let Some(t) = m.awaiting_sync {
                    out.push(Completion::Sync(
                        t,
                        SyncResponse::error(GroupError::NotCoordinator),
                    ));
                }
            }
            self.records.remove(&id);
            tracing::info!(group = %id, "unloaded group");
        }
        out
    }

    /// The group metadata records produced since the last call, in group order: (group id,
    /// encoded value or `None` for a tombstone).
    pub fn take_records(&mut self) -> Vec<(String, Option<Bytes>)> {
        std::mem::take(&mut self.records).into_iter().collect()
    }

    /// Collects the record of `group_id` if an operation on it asked for one.
    fn collect_record(&mut self, now_ms: i64, group_id: &str) {
        if let Some(g) = self.groups.get_mut(group_id)
            && g.needs_record
        {
            g.needs_record = false;
            let value = g.to_record(now_ms).encode();
            self.records.insert(group_id.to_owned(), Some(value));
        }
    }

    /// The group, if it exists.
    #[must_use]
    pub fn group(&self, group_id: &str) -> Option<&ClassicGroup> {
        self.groups.get(group_id)
    }

    /// JoinGroup. `member_uuid` makes the new member id (`<client.id>-<uuid>`, or
    /// `<group.instance.id>-<uuid>` for a static member) if one is needed.
    pub fn join(
        &mut self,
        now_ms: i64,
        ticket: Ticket,
        req: JoinRequest,
        member_uuid: Uuid,
    ) -> Vec<Completion> {
        let mut out = Vec::new();
        let refuse = |out: &mut Vec<Completion>, e: GroupError, member_id: String| {
            out.push(Completion::Join(ticket, JoinResponse::error(member_id, e)));
        };
        if req.group_id.is_empty() {
            refuse(&mut out, GroupError::InvalidGroupId, req.member_id);
            return out;
        }
        if req.session_timeout_ms < self.cfg.min_session_timeout_ms
            || req.session_timeout_ms > self.cfg.max_session_timeout_ms
        {
            let e = GroupError::InvalidSessionTimeout {
                timeout_ms: req.session_timeout_ms,
                min_ms: self.cfg.min_session_timeout_ms,
                max_ms: self.cfg.max_session_timeout_ms,
            };
            refuse(&mut out, e, req.member_id);
            return out;
        }
        let unknown = req.member_id.is_empty();
        if !unknown && !self.groups.contains_key(&req.group_id) {
            let e = GroupError::UnknownMemberId {
                member_id: req.member_id.clone(),
            };
            refuse(&mut out, e, req.member_id);
            return out;
        }
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(|| ClassicGroup::new(req.group_id.clone()));
        let mut cx = Cx {
            now_ms,
            cfg: &self.cfg,
            out: &mut out,
        };
        let group_id = req.group_id.clone();
        if unknown {
            let prefix = req.group_instance_id.as_deref().unwrap_or(&req.client_id);
            let new_member_id = format!("{prefix}-{member_uuid}");
            group.join_new_member(&mut cx, ticket, req, new_member_id);
        } else {
            group.join_existing_member(&mut cx, ticket, req);
        }
        self.collect_record(now_ms, &group_id);
        out
    }

    /// SyncGroup.
    pub fn sync(&mut self, now_ms: i64, ticket: Ticket, req: SyncRequest) -> Vec<Completion> {
        let mut out = Vec::new();
        match self.groups.get_mut(&req.group_id) {
            Some(group) if !group.is_empty() => {
                let mut cx = Cx {
                    now_ms,
                    cfg: &self.cfg,
                    out: &mut out,
                };
                let group_id = req.group_id.clone();
                group.sync(&mut cx, ticket, req);
                self.collect_record(now_ms, &group_id);
            }
            _ => out.push(Completion::Sync(
                ticket,
                SyncResponse::error(GroupError::UnknownMemberId {
                    member_id: req.member_id,
                }),
            )),
        }
        out
    }

    /// Heartbeat.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, or REBALANCE_IN_PROGRESS
    /// (which tells the member to rejoin).
    pub fn heartbeat(
        &mut self,
        now_ms: i64,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        let group = self
            .groups
            .get_mut(group_id)
            .ok_or_else(|| GroupError::UnknownMemberId {
                member_id: member_id.to_owned(),
            })?;
        group.heartbeat(now_ms, member_id, group_instance_id, generation_id)
    }

    /// LeaveGroup for a batch of (member id, group instance id); one result per member.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID for the whole request when the group does not exist.
    #[allow(clippy::type_complexity)]
    pub fn leave(
        &mut self,
        now_ms: i64,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<(Vec<Result<(), GroupError>>, Vec<Completion>), GroupError> {
        let group = self
            .groups
            .get_mut(group_id)
            .ok_or_else(|| GroupError::UnknownMemberId {
                member_id: members.first().map(|m| m.0.clone()).unwrap_or_default(),
            })?;
        let mut out = Vec::new();
        let mut cx = Cx {
            now_ms,
            cfg: &self.cfg,
            out: &mut out,
        };
        let results: Vec<Result<(), GroupError>> = members
            .iter()
            .map(|(m, i)| group.leave_one(&mut cx, m, i.as_deref()))
            .collect();
        if results.iter().any(Result::is_ok) {
            tracing::info!(group = %group_id, "members left");
            group.after_leave(&mut cx);
        }
        self.collect_record(now_ms, group_id);
        Ok((results, out))
    }

    /// Fires every timer due at `now_ms`.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Completion> {
        let mut out = Vec::new();
        let mut fired = Vec::new();
        for group in self.groups.values_mut() {
            if group.next_deadline().is_some_and(|d| d <= now_ms) {
                let mut cx = Cx {
                    now_ms,
                    cfg: &self.cfg,
                    out: &mut out,
                };
                group.expire(&mut cx);
                fired.push(group.group_id.clone());
            }
        }
        for group_id in fired {
            self.collect_record(now_ms, &group_id);
        }
        out
    }

    /// The earliest pending deadline of any group (the driver sleeps until then).
    #[must_use]
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups
            .values()
            .filter_map(ClassicGroup::next_deadline)
            .min()
    }

    /// Kafka's `ClassicGroup.validateOffsetCommit` (see the driver's method of the same name
    /// for the contract). A valid commit from a member in Stable or PreparingRebalance also
    /// counts as its heartbeat.
    ///
    /// # Errors
    /// The refusal.
    pub fn validate_offset_commit(
        &mut self,
        now_ms: i64,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        let Some(group) = self.groups.get_mut(group_id) else {
            if generation_id < 0 {
                return Ok(()); // a simple group: it exists by virtue of its offsets
            }
            return Err(GroupError::IllegalGeneration {
                requested: generation_id,
                current: -1,
            });
        };
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
            group.validate_member(member_id, group_instance_id)?;
            if generation_id != group.generation_id {
                return Err(GroupError::IllegalGeneration {
                    requested: generation_id,
                    current: group.generation_id,
                });
            }
        } else if group.state != GroupState::Empty {
            return Err(GroupError::UnknownMemberId {
                member_id: member_id.to_owned(),
            });
        }
        match group.state {
            GroupState::CompletingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::Stable | GroupState::PreparingRebalance => {
                group.reschedule_heartbeat(now_ms, member_id);
                Ok(())
            }
            GroupState::Empty | GroupState::Dead => Ok(()),
        }
    }

    /// Every group, filtered by state names (case-insensitive) when `states` is not empty.
    #[must_use]
    pub fn list(&self, states: &[String]) -> Vec<ListedGroup> {
        let wanted: BTreeSet<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
        self.groups
            .values()
            .filter(|g| wanted.is_empty() || wanted.contains(&g.state.name().to_lowercase()))
            .map(|g| ListedGroup {
                group_id: g.group_id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state.name(),
            })
            .collect()
    }

    /// Ids of the groups in state Empty.
    #[must_use]
    pub fn empty_group_ids(&self) -> Vec<String> {
        self.groups
            .values()
            .filter(|g| g.state == GroupState::Empty)
            .map(|g| g.group_id.clone())
            .collect()
    }

    /// The "simple" groups among `ids` (groups that exist only through committed offsets):
    /// those the coordinator does not know, listed as Kafka lists them, Empty with protocol
    /// type "", when the state filter admits Empty.
    #[must_use]
    pub fn list_simple(&self, states: &[String], ids: Vec<String>) -> Vec<ListedGroup> {
        let empty_wanted = states.is_empty()
            || states
                .iter()
                .any(|s| s.trim().eq_ignore_ascii_case("empty"));
        if !empty_wanted {
            return Vec::new();
        }
        ids.into_iter()
            .filter(|id| !self.groups.contains_key(id))
            .map(|group_id| ListedGroup {
                group_id,
                protocol_type: String::new(),
                state: GroupState::Empty.name(),
            })
            .collect()
    }

    /// DescribeGroups for one group; `None` if it does not exist.
    #[must_use]
    pub fn describe(&self, group_id: &str) -> Option<DescribedGroup> {
        let g = self.groups.get(group_id)?;
        let stable = g.state == GroupState::Stable;
        let protocol = if stable {
            g.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = g
            .members
            .values()
            .map(|m| DescribedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        Some(DescribedGroup {
            state: g.state.name(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol,
            members,
        })
    }

    /// DeleteGroups for one group (`validateDeleteGroup`): only an Empty group may go.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND for a group the coordinator does not know, NON_EMPTY_GROUP for one
    /// with members.
    pub fn delete(&mut self, group_id: &str) -> Result<(), GroupError> {
        match self.groups.get(group_id) {
            None => Err(GroupError::GroupIdNotFound {
                group_id: group_id.to_owned(),
            }),
            Some(g) if g.state != GroupState::Empty => Err(GroupError::NonEmptyGroup {
                group_id: group_id.to_owned(),
            }),
            Some(_) => {
                self.groups.remove(group_id);
                // Kafka writes the tombstone with the group's removal.
                self.records.insert(group_id.to_owned(), None);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests;
