//! Every consumer group of this node and the API entry points (Kafka's
//! `GroupMetadataManager.consumerGroupHeartbeat` and friends). Sans-IO: the caller passes the
//! time, a fresh member id and the topics' metadata, and gets answers back; nothing here
//! sleeps, reads a clock or touches a socket.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::assignor::{Assignment, Assignor};
use super::error::{ConsumerGroupError, ConsumerGroupInUse, DeleteConsumerGroupError};
use super::group::{ConsumerGroup, ConsumerGroupMember, MemberState, is_subset};
use super::persist::{self, GroupRecords, Tracker};

/// KIP-848's member epochs with a meaning of their own.
pub const JOIN_EPOCH: i32 = 0;
pub const LEAVE_EPOCH: i32 = -1;
pub const LEAVE_STATIC_EPOCH: i32 = -2;

/// `group.consumer.*` settings.
#[derive(Debug, Clone)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.heartbeat.interval.ms`, told to every member.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`: a silent member is removed after this.
    pub session_timeout_ms: i32,
    /// `group.consumer.assignors`; the first is the default.
    pub assignors: Vec<Assignor>,
    /// `group.consumer.max.size`.
    pub max_size: usize,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            heartbeat_interval_ms: 5_000,
            session_timeout_ms: 45_000,
            assignors: vec![Assignor::Uniform, Assignor::Range],
            max_size: usize::MAX,
        }
    }
}

/// Topic metadata as the coordinator needs it (the broker's `MetadataImage`).
pub trait TopicMetadata {
    /// (topic id, partition count) of a topic by name.
    fn topic(&self, name: &str) -> Option<(Uuid, i32)>;
    /// Every topic name, for regular expression subscriptions.
    fn topic_names(&self) -> Vec<&str>;
}

/// Compiles a subscription regular expression as Kafka applies it: to the whole topic name
/// (RE2/J's `matches`). The `regex` crate's syntax is RE2's, as RE2/J's is.
///
/// # Errors
/// [`ConsumerGroupError::InvalidRegularExpression`] when it does not compile.
pub fn compile_regex(re: &str) -> Result<regex::Regex, ConsumerGroupError> {
    regex::RegexBuilder::new(&format!("^(?:{re})$"))
        .size_limit(1 << 20)
        .build()
        .map_err(|e| ConsumerGroupError::InvalidRegularExpression {
            regex: re.to_owned(),
            reason: e.to_string(),
        })
}

/// The topics whose whole name `re` matches (internal topics are not in the image).
#[must_use]
pub fn resolve_regex(re: &regex::Regex, topics: &dyn TopicMetadata) -> BTreeSet<String> {
    topics
        .topic_names()
        .into_iter()
        .filter(|t| re.is_match(t))
        .map(str::to_owned)
        .collect()
}

/// A ConsumerGroupHeartbeat, decoded.
#[derive(Debug, Clone, Default)]
pub struct HeartbeatRequest {
    pub api_version: i16,
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    /// `None` when unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// `None` when unchanged.
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent on a full request or when the member's assignment changed.
    pub assignment: Option<Assignment>,
}

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedConsumerGroup {
    pub group_id: String,
    pub state: &'static str,
}

/// A group as ConsumerGroupDescribe reports it.
#[derive(Debug, Clone)]
pub struct DescribedConsumerGroup {
    pub group_id: String,
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    /// Each member with its target assignment.
    pub members: Vec<(ConsumerGroupMember, Assignment)>,
}

/// Every consumer group of this node.
#[derive(Debug, Default)]
pub struct ConsumerGroupCore {
    cfg: ConsumerGroupConfig,
    groups: BTreeMap<String, ConsumerGroup>,
    /// What of the groups is in `__consumer_offsets`, and what changed since.
    tracker: Tracker,
    /// Compiled subscription regular expressions, by source.
    regexes: HashMap<String, regex::Regex>,
}

/// At most this many compiled regular expressions are cached; beyond, the cache starts over.
const MAX_CACHED_REGEXES: usize = 1024;

impl ConsumerGroupCore {
    /// A coordinator with no groups.
    #[must_use]
    pub fn new(cfg: ConsumerGroupConfig) -> Self {
        ConsumerGroupCore {
            cfg,
            groups: BTreeMap::new(),
            tracker: Tracker::default(),
            regexes: HashMap::new(),
        }
    }

    /// A coordinator with the groups of stored records (see [`persist::restore`]).
    #[must_use]
    pub fn restore(
        cfg: ConsumerGroupConfig,
        records: Vec<(bytes::Bytes, bytes::Bytes)>,
        now_ms: i64,
        topics: &dyn TopicMetadata,
    ) -> Self {
        let (groups, tracker) = persist::restore(records, now_ms, cfg.session_timeout_ms, topics);
        ConsumerGroupCore {
            cfg,
            groups,
            tracker,
            regexes: HashMap::new(),
        }
    }

    /// Adds the groups of stored records (a `__consumer_offsets` partition this node now
    /// leads; see [`persist::restore`]).
    pub fn load(
        &mut self,
        records: Vec<(bytes::Bytes, bytes::Bytes)>,
        now_ms: i64,
        topics: &dyn TopicMetadata,
    ) {
        let (groups, tracker) =
            persist::restore(records, now_ms, self.cfg.session_timeout_ms, topics);
        for id in groups.keys() {
            tracing::info!(group = %id, "loaded consumer group");
        }
        self.groups.extend(groups);
        self.tracker.absorb(tracker);
    }

    /// Drops the groups `gone` selects (their partition is led elsewhere now), writing
    /// nothing for them.
    pub fn unload(&mut self, gone: impl Fn(&str) -> bool) {
        let ids: Vec<String> = self.groups.keys().filter(|g| gone(g)).cloned().collect();
        for id in ids {
            self.groups.remove(&id);
            self.tracker.forget(&id);
            tracing::info!(group = %id, "unloaded consumer group");
        }
    }

    /// The ids of the groups without members.
    #[must_use]
    pub fn empty_group_ids(&self) -> Vec<String> {
        self.groups
            .values()
            .filter(|g| g.members.is_empty())
            .map(|g| g.group_id.clone())
            .collect()
    }

    /// Kafka's `cleanupGroupMetadata` for consumer groups: every empty group for which
    /// `has_offsets` is false is deleted (its records become tombstones). Returns how many.
    pub fn delete_empty_groups(&mut self, has_offsets: impl Fn(&str) -> bool) -> usize {
        let empty: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.members.is_empty() && !has_offsets(&g.group_id))
            .map(|g| g.group_id.clone())
            .collect();
        for id in &empty {
            self.groups.remove(id);
            self.tracker.group_changed(id);
            tracing::info!(group = %id, "deleted empty consumer group without offsets");
        }
        empty.len()
    }

    /// The append of records from [`ConsumerGroupCore::take_records`] failed: take them again next.
    pub fn not_written(&mut self, group: &str, records: &[(bytes::Bytes, Option<bytes::Bytes>)]) {
        self.tracker.not_written(group, records);
    }

    /// The records that make what changed since the last call durable, per group.
    pub fn take_records(&mut self) -> Vec<GroupRecords> {
        self.tracker.take(&self.groups)
    }

    /// DeleteGroups of a consumer group: deletes it when it is empty (its records are then
    /// the caller's to delete, with the group's offsets).
    ///
    /// # Errors
    ///
    /// [`DeleteConsumerGroupError::NotConsumerGroup`] when no consumer group has this id,
    /// [`DeleteConsumerGroupError::NonEmpty`] when the group has members.
    pub fn delete(&mut self, group_id: &str) -> Result<(), DeleteConsumerGroupError> {
        let g = self
            .groups
            .get(group_id)
            .ok_or(DeleteConsumerGroupError::NotConsumerGroup)?;
        if !g.members.is_empty() {
            return Err(DeleteConsumerGroupError::NonEmpty);
        }
        self.groups.remove(group_id);
        self.tracker.forget(group_id);
        Ok(())
    }

    /// The group, if it exists.
    #[must_use]
    pub fn group(&self, group_id: &str) -> Option<&ConsumerGroup> {
        self.groups.get(group_id)
    }

    fn default_assignor(&self) -> Assignor {
        self.cfg
            .assignors
            .first()
            .copied()
            .unwrap_or(Assignor::Uniform)
    }

    /// Removes an empty group (a classic JoinGroup takes the id over, as Kafka converts an
    /// empty group), so that the id is free.
    ///
    /// # Errors
    ///
    /// [`ConsumerGroupInUse::HasMembers`] when the group has members: the id is not free.
    pub fn remove_if_empty(&mut self, group_id: &str) -> Result<(), ConsumerGroupInUse> {
        match self.groups.get(group_id) {
            Some(g) if !g.members.is_empty() => Err(ConsumerGroupInUse::HasMembers),
            Some(_) => {
                self.groups.remove(group_id);
                self.tracker.group_changed(group_id);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// ConsumerGroupHeartbeat: join (epoch 0), heartbeat, or leave (-1, static -2).
    ///
    /// # Errors
    /// [`ConsumerGroupError`] for an invalid request, an unknown member, a fenced epoch, an
    /// unknown assignor, a held instance id, or a full group.
    pub fn heartbeat(
        &mut self,
        now_ms: i64,
        req: HeartbeatRequest,
        fresh_member_id: &str,
        topics: &dyn TopicMetadata,
    ) -> Result<HeartbeatResponse, ConsumerGroupError> {
        let group_id = req.group_id.clone();
        let epochs = |g: &ConsumerGroup| (g.group_epoch, g.assignment_epoch, g.members.len());
        let before = self.groups.get(&group_id).map(epochs);
        // A member new to the group (a join, or a static member taking over its instance id)
        // changes more than its own records.
        let known = self
            .groups
            .get(&group_id)
            .is_some_and(|g| g.members.contains_key(&req.member_id));
        let r = self.heartbeat_inner(now_ms, req, fresh_member_id, topics);
        let after = self.groups.get(&group_id).map(epochs);
        match &r {
            Ok(resp) if before == after && known => {
                self.tracker.member_changed(&group_id, &resp.member_id);
            }
            Err(_) if before == after => {}
            _ => self.tracker.group_changed(&group_id),
        }
        r
    }

    fn heartbeat_inner(
        &mut self,
        now_ms: i64,
        req: HeartbeatRequest,
        fresh_member_id: &str,
        topics: &dyn TopicMetadata,
    ) -> Result<HeartbeatResponse, ConsumerGroupError> {
        validate(&req)?;
        if let Some(a) = &req.server_assignor
            && !Assignor::parse(a).is_some_and(|a| self.cfg.assignors.contains(&a))
        {
            return Err(ConsumerGroupError::UnsupportedAssignor { name: a.clone() });
        }
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == LEAVE_STATIC_EPOCH {
            return self.leave(&req);
        }
        // The member's regular expression: the one it sends now, else the one it has.
        let regex_source = match req.subscribed_topic_regex.as_deref() {
            Some(r) => Some(r),
            None => self
                .groups
                .get(&req.group_id)
                .and_then(|g| g.members.get(&req.member_id))
                .and_then(|m| m.subscribed_topic_regex.as_deref()),
        }
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
        let regex_topics = match regex_source {
            Some(r) => {
                if !self.regexes.contains_key(&r) {
                    let compiled = compile_regex(&r)?;
                    if self.regexes.len() >= MAX_CACHED_REGEXES {
                        self.regexes.clear();
                    }
                    self.regexes.insert(r.clone(), compiled);
                }
                Some(resolve_regex(&self.regexes[&r], topics))
            }
            None => None,
        };
        let cfg = self.cfg.clone();
        let default_assignor = self.default_assignor();
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(|| ConsumerGroup::new(req.group_id.clone()));
        let mut bump = false;
        let member_id = if req.member_epoch == JOIN_EPOCH {
            let id = if req.member_id.is_empty() {
                fresh_member_id.to_owned()
            } else {
                req.member_id.clone()
            };
            join(group, &cfg, &req, &id)?;
            if !group.members.contains_key(&id) {
                group
                    .members
                    .insert(id.clone(), ConsumerGroupMember::new(id.clone()));
                bump = true;
            } else if let Some(m) = group.members.get_mut(&id) {
                // A known member rejoining at epoch 0 owns nothing it has not reported.
                m.previous_member_epoch = m.member_epoch;
                m.member_epoch = JOIN_EPOCH;
                m.state = MemberState::Stable;
            }
            id
        } else {
            let m = group.members.get(&req.member_id).ok_or_else(|| {
                ConsumerGroupError::UnknownMemberId {
                    group_id: req.group_id.clone(),
                    member_id: req.member_id.clone(),
                }
            })?;
            check_epoch(m, req.member_epoch, req.owned.as_ref())?;
            req.member_id.clone()
        };
        let m = group.members.get_mut(&member_id).expect("member present");
        if let Some(names) = &req.subscribed_topic_names {
            let names = names.iter().cloned().collect();
            if m.subscribed_topic_names != names {
                m.subscribed_topic_names = names;
                bump = true;
            }
        }
        if let Some(re) = &req.subscribed_topic_regex {
            // An empty string clears the regular expression.
            let re = Some(re.clone()).filter(|r| !r.is_empty());
            if m.subscribed_topic_regex != re {
                m.subscribed_topic_regex = re;
                bump = true;
            }
        }
        let resolved = regex_topics.unwrap_or_default();
        if m.regex_topics != resolved {
            m.regex_topics = resolved;
            bump = true;
        }
        if req.server_assignor.is_some() && m.server_assignor != req.server_assignor {
            m.server_assignor.clone_from(&req.server_assignor);
            bump = true;
        }
        if req.rebalance_timeout_ms >= 0 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if req.instance_id.is_some() {
            m.instance_id.clone_from(&req.instance_id);
        }
        if req.rack_id.is_some() {
            m.rack_id.clone_from(&req.rack_id);
        }
        m.client_id.clone_from(&req.client_id);
        m.client_host.clone_from(&req.client_host);
        m.session_deadline_ms = now_ms.saturating_add(i64::from(cfg.session_timeout_ms));
        // A subscribed topic created, deleted or grown moves the group epoch too.
        let snapshot = group.topic_snapshot(|n| topics.topic(n));
        if snapshot != group.topics {
            group.topics = snapshot;
            bump = true;
        }
        if bump {
            group.group_epoch += 1;
        }
        if group.group_epoch > group.assignment_epoch {
            let assignor = group.preferred_assignor(default_assignor);
            group.compute_target(assignor);
        }
        let before = group.members[&member_id].assigned.clone();
        let changed = group.reconcile(&member_id, req.owned.as_ref(), now_ms)
            || (req.member_epoch == JOIN_EPOCH && !before.is_empty());
        let m = &group.members[&member_id];
        // KIP-848: the assignment goes out on a full request (a join, or a heartbeat with all
        // of its fields after an error) and whenever it changed.
        let full = req.member_epoch == JOIN_EPOCH
            || (req.rebalance_timeout_ms != -1
                && req.subscribed_topic_names.is_some()
                && req.owned.is_some());
        Ok(HeartbeatResponse {
            member_id,
            member_epoch: m.member_epoch,
            heartbeat_interval_ms: cfg.heartbeat_interval_ms,
            assignment: (full || changed).then(|| m.assigned.clone()),
        })
    }

    fn leave(&mut self, req: &HeartbeatRequest) -> Result<HeartbeatResponse, ConsumerGroupError> {
        let unknown = || ConsumerGroupError::UnknownMemberId {
            group_id: req.group_id.clone(),
            member_id: req.member_id.clone(),
        };
        let group = self.groups.get_mut(&req.group_id).ok_or_else(unknown)?;
        let member_id = match &req.instance_id {
            Some(i) => group
                .static_member(i)
                .map(str::to_owned)
                .ok_or_else(unknown)?,
            None => req.member_id.clone(),
        };
        if member_id != req.member_id {
            return Err(ConsumerGroupError::FencedInstanceId {
                instance_id: req.instance_id.clone().unwrap_or_default(),
            });
        }
        if !group.members.contains_key(&member_id) {
            return Err(unknown());
        }
        if req.member_epoch == LEAVE_STATIC_EPOCH {
            // KIP-345 in KIP-848: the static member keeps its partitions until its session
            // expires or it rejoins under a new member id.
            if let Some(m) = group.members.get_mut(&member_id) {
                m.member_epoch = LEAVE_STATIC_EPOCH;
            }
        } else {
            group.remove_member(&member_id);
        }
        Ok(HeartbeatResponse {
            member_id,
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Removes members whose session expired, or who did not revoke in time.
    pub fn tick(&mut self, now_ms: i64) {
        for g in self.groups.values_mut() {
            let expired: Vec<String> = g
                .members
                .values()
                .filter(|m| {
                    m.session_deadline_ms <= now_ms
                        || m.revocation_deadline_ms.is_some_and(|d| d <= now_ms)
                })
                .map(|m| m.member_id.clone())
                .collect();
            for id in expired {
                tracing::info!(group = %g.group_id, member = %id, "consumer group member expired");
                g.remove_member(&id);
                self.tracker.group_changed(&g.group_id);
            }
        }
    }

    /// The earliest session or revocation deadline.
    #[must_use]
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups
            .values()
            .flat_map(|g| g.members.values())
            .flat_map(|m| std::iter::once(m.session_deadline_ms).chain(m.revocation_deadline_ms))
            .min()
    }

    /// ListGroups, filtered by Kafka state names (case-insensitive; empty: all).
    #[must_use]
    pub fn list(&self, states: &[String]) -> Vec<ListedConsumerGroup> {
        self.groups
            .values()
            .map(|g| ListedConsumerGroup {
                group_id: g.group_id.clone(),
                state: g.state(),
            })
            .filter(|g| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(g.state)))
            .collect()
    }

    /// ConsumerGroupDescribe of one group.
    #[must_use]
    pub fn describe(&self, group_id: &str) -> Option<DescribedConsumerGroup> {
        let g = self.groups.get(group_id)?;
        Some(DescribedConsumerGroup {
            group_id: g.group_id.clone(),
            state: g.state(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor_name: g
                .assignor
                .unwrap_or_else(|| g.preferred_assignor(self.default_assignor()))
                .name()
                .to_owned(),
            members: g
                .members
                .values()
                .map(|m| {
                    (
                        m.clone(),
                        g.target.get(&m.member_id).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
        })
    }

    /// Kafka's `ConsumerGroup.validateOffsetCommit`; `None` when no consumer group has this
    /// id. A negative epoch commits to an empty group (admin client, manual assignment);
    /// otherwise the member must exist and commit with its current epoch over OffsetCommit
    /// v9+.
    #[must_use]
    pub fn validate_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> Option<Result<(), ConsumerGroupError>> {
        let g = self.groups.get(group_id)?;
        if member_epoch < 0 && g.members.is_empty() {
            return Some(Ok(()));
        }
        let Some(m) = g.members.get(member_id) else {
            return Some(Err(ConsumerGroupError::UnknownMemberId {
                group_id: group_id.to_owned(),
                member_id: member_id.to_owned(),
            }));
        };
        if api_version < 9 {
            return Some(Err(ConsumerGroupError::UnsupportedCommitVersion {
                version: api_version,
            }));
        }
        Some(stale(member_epoch, m.member_epoch))
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch`; `None` when no consumer group has this id.
    /// A fetch without member id and epoch (admin client, v8 and older) is always allowed.
    #[must_use]
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Option<Result<(), ConsumerGroupError>> {
        let g = self.groups.get(group_id)?;
        let Some(member_id) = member_id.filter(|_| member_epoch >= 0) else {
            return Some(Ok(()));
        };
        let Some(m) = g.members.get(member_id) else {
            return Some(Err(ConsumerGroupError::UnknownMemberId {
                group_id: group_id.to_owned(),
                member_id: member_id.to_owned(),
            }));
        };
        Some(stale(member_epoch, m.member_epoch))
    }
}

fn stale(received: i32, current: i32) -> Result<(), ConsumerGroupError> {
    if received == current {
        Ok(())
    } else {
        Err(ConsumerGroupError::StaleMemberEpoch { received, current })
    }
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`.
fn validate(req: &HeartbeatRequest) -> Result<(), ConsumerGroupError> {
    let invalid = |reason| Err(ConsumerGroupError::InvalidRequest { reason });
    // KIP-1082: from v1 the client generates its member id.
    if (req.api_version >= 1 || req.member_epoch > 0 || req.member_epoch == LEAVE_EPOCH)
        && req.member_id.is_empty()
    {
        return invalid("MemberId can't be empty.");
    }
    if req.group_id.trim().is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.rack_id.as_deref().is_some_and(|r| r.trim().is_empty()) {
        return invalid("RackId can't be empty.");
    }
    match req.member_epoch {
        JOIN_EPOCH => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req
                .owned
                .as_ref()
                .is_none_or(|o| o.values().any(|p| !p.is_empty()))
            {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            let names = req
                .subscribed_topic_names
                .as_ref()
                .is_some_and(|n| !n.is_empty());
            let regex = req
                .subscribed_topic_regex
                .as_ref()
                .is_some_and(|r| !r.is_empty());
            if !names && !regex {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        LEAVE_STATIC_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e < LEAVE_STATIC_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    Ok(())
}

/// Admits a joining member: the group's size limit, and a static member's instance id.
fn join(
    group: &mut ConsumerGroup,
    cfg: &ConsumerGroupConfig,
    req: &HeartbeatRequest,
    member_id: &str,
) -> Result<(), ConsumerGroupError> {
    if let Some(instance) = &req.instance_id
        && let Some(previous) = group.static_member(instance).map(str::to_owned)
        && previous != member_id
    {
        if group.members[&previous].member_epoch != LEAVE_STATIC_EPOCH {
            return Err(ConsumerGroupError::UnreleasedInstanceId {
                instance_id: instance.clone(),
                member_id: previous,
            });
        }
        group.replace_static_member(&previous, member_id);
        return Ok(());
    }
    if !group.members.contains_key(member_id) && group.members.len() >= cfg.max_size {
        return Err(ConsumerGroupError::GroupMaxSizeReached {
            group_id: group.group_id.clone(),
            max: cfg.max_size,
        });
    }
    Ok(())
}

/// Kafka's `throwIfMemberEpochIsInvalid`: a newer epoch than the member's is fenced; an older
/// one is accepted only if it is the previous epoch and the member owns a subset of its
/// current partitions (its last response was lost).
fn check_epoch(
    m: &ConsumerGroupMember,
    received: i32,
    owned: Option<&Assignment>,
) -> Result<(), ConsumerGroupError> {
    let fenced = || ConsumerGroupError::FencedMemberEpoch {
        member_id: m.member_id.clone(),
        received,
        current: m.member_epoch,
    };
    if received > m.member_epoch {
        return Err(fenced());
    }
    if received < m.member_epoch
        && (received != m.previous_member_epoch
            || !owned.is_some_and(|o| is_subset(o, &m.assigned)))
    {
        return Err(fenced());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
