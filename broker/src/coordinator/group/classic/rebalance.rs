//! The classic rebalance protocol on one group: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
//! and the timers that drive them, as Kafka's `GroupMetadataManager` runs them for classic
//! groups (its `classicGroupJoin*`, `classicGroupSync*`, `completeClassicGroupJoin`,
//! `prepareRebalance`, `expireClassicGroupMemberHeartbeat`, `expirePendingSync`).
//!
//! Everything here is sans-IO: time comes in as `now_ms`, a parked request is a [`Ticket`],
//! and answers to parked requests leave as [`Completion`]s for the driver to deliver.

use bytes::Bytes;

use super::error::GroupError;
use super::member::{Member, Protocol};
use super::state::{ClassicGroup, GroupState, JoinTimer};
use super::{
    Completion, GroupConfig, JoinRequest, JoinResponse, SyncRequest, SyncResponse, Ticket,
};

/// What an operation needs besides the group: the time, the configuration, and where to put
/// the answers to parked requests.
pub(super) struct Cx<'a> {
    pub now_ms: i64,
    pub cfg: &'a GroupConfig,
    pub out: &'a mut Vec<Completion>,
}

impl ClassicGroup {
    // ---- JoinGroup ----------------------------------------------------------------------------

    /// A JoinGroup with an empty member id (`classicGroupJoinNewMember`).
    pub(super) fn join_new_member(
        &mut self,
        cx: &mut Cx<'_>,
        ticket: Ticket,
        req: JoinRequest,
        new_member_id: String,
    ) {
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            cx.out.push(Completion::Join(
                ticket,
                JoinResponse::error(String::new(), GroupError::InconsistentGroupProtocol),
            ));
            return;
        }
        if let Some(instance) = req.group_instance_id.clone() {
            match self.static_members.get(&instance).cloned() {
                // KIP-345: a known instance with a new member id replaces the old member.
                Some(old) => self.replace_static_member(cx, ticket, req, &old, new_member_id),
                None => self.add_member_and_rebalance(cx, ticket, req, new_member_id),
            }
        } else if req.require_known_member_id {
            // KIP-394: hand out the id and wait for the member to come back with it, so that
            // a client that never receives the response does not leave a ghost member.
            self.pending_join.insert(
                new_member_id.clone(),
                cx.now_ms + i64::from(req.session_timeout_ms),
            );
            cx.out.push(Completion::Join(
                ticket,
                JoinResponse::error(
                    new_member_id.clone(),
                    GroupError::MemberIdRequired {
                        member_id: new_member_id,
                    },
                ),
            ));
        } else {
            self.add_member_and_rebalance(cx, ticket, req, new_member_id);
        }
    }

    /// A JoinGroup with a member id (`classicGroupJoinExistingMember`).
    pub(super) fn join_existing_member(
        &mut self,
        cx: &mut Cx<'_>,
        ticket: Ticket,
        req: JoinRequest,
    ) {
        let member_id = req.member_id.clone();
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            cx.out.push(Completion::Join(
                ticket,
                JoinResponse::error(member_id, GroupError::InconsistentGroupProtocol),
            ));
            return;
        }
        if self.pending_join.contains_key(&member_id) {
            // Pending ids are handed to dynamic members only.
            if req.group_instance_id.is_some() {
                cx.out.push(Completion::Join(
                    ticket,
                    JoinResponse::error(
                        member_id.clone(),
                        GroupError::UnknownMemberId { member_id },
                    ),
                ));
                return;
            }
            self.add_member_and_rebalance(cx, ticket, req, member_id);
            return;
        }
        if let Err(e) = self.validate_member(&member_id, req.group_instance_id.as_deref()) {
            cx.out
                .push(Completion::Join(ticket, JoinResponse::error(member_id, e)));
            return;
        }
        let Some(member) = self.members.get(&member_id) else {
            return; // validated above
        };
        let unchanged = member.matches(&req.protocols);
        match self.state {
            GroupState::PreparingRebalance => self.update_member_and_rebalance(cx, ticket, req),
            GroupState::CompletingRebalance if unchanged => {
                // It missed the JoinGroup response: answer again for the current generation.
                let members = if self.is_leader(&member_id) {
                    self.joined_members()
                } else {
                    Vec::new()
                };
                let resp = self.join_response(&member_id, members, false);
                cx.out.push(Completion::Join(ticket, resp));
            }
            GroupState::CompletingRebalance => self.update_member_and_rebalance(cx, ticket, req),
            // The leader rejoining forces a rebalance: that is how a consumer reacts to
            // metadata changes that do not change its subscription.
            GroupState::Stable if self.is_leader(&member_id) || !unchanged => {
                self.update_member_and_rebalance(cx, ticket, req);
            }
            GroupState::Stable => {
                let resp = self.join_response(&member_id, Vec::new(), false);
                cx.out.push(Completion::Join(ticket, resp));
            }
            GroupState::Empty | GroupState::Dead => {
                cx.out.push(Completion::Join(
                    ticket,
                    JoinResponse::error(
                        member_id.clone(),
                        GroupError::UnknownMemberId { member_id },
                    ),
                ));
            }
        }
    }

    /// A successful JoinGroup answer for the current generation.
    fn join_response(
        &self,
        member_id: &str,
        members: Vec<super::JoinedMember>,
        skip_assignment: bool,
    ) -> JoinResponse {
        JoinResponse {
            error: None,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader_id.clone().unwrap_or_default(),
            skip_assignment,
            member_id: member_id.to_owned(),
            members,
        }
    }

    /// `addMemberThenRebalanceOrCompleteJoin`.
    fn add_member_and_rebalance(
        &mut self,
        cx: &mut Cx<'_>,
        ticket: Ticket,
        req: JoinRequest,
        member_id: String,
    ) {
        if self.state == GroupState::PreparingRebalance && self.previous_state == GroupState::Empty
        {
            self.new_member_added = true;
        }
        self.add(Member {
            member_id,
            group_instance_id: req.group_instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type: req.protocol_type,
            protocols: req.protocols,
            assignment: Bytes::new(),
            awaiting_join: Some(ticket),
            awaiting_sync: None,
            is_new: true,
            // A parked JoinGroup cannot heartbeat and a muted socket cannot be seen to close,
            // so a new member's join is bounded separately (Kafka's new member join timeout).
            heartbeat_deadline_ms: cx.now_ms + cx.cfg.new_member_join_timeout_ms,
        });
        self.maybe_prepare_rebalance_or_complete_join(cx);
    }

    /// `updateMemberThenRebalanceOrCompleteJoin`.
    fn update_member_and_rebalance(&mut self, cx: &mut Cx<'_>, ticket: Ticket, req: JoinRequest) {
        self.update_member(
            cx,
            &req.member_id,
            req.protocols,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            ticket,
        );
        self.maybe_prepare_rebalance_or_complete_join(cx);
    }

    /// Kafka's `updateMember` with a join future: new protocols and timeouts, and the member
    /// is now parked on `ticket`. A JoinGroup of it still parked (the client gave up on it) is
    /// answered REBALANCE_IN_PROGRESS rather than left hanging.
    fn update_member(
        &mut self,
        cx: &mut Cx<'_>,
        member_id: &str,
        protocols: Vec<Protocol>,
        rebalance_timeout_ms: i32,
        session_timeout_ms: i32,
        ticket: Ticket,
    ) {
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        m.protocols = protocols;
        m.rebalance_timeout_ms = rebalance_timeout_ms;
        m.session_timeout_ms = session_timeout_ms;
        if let Some(old) = m.awaiting_join.replace(ticket) {
            cx.out.push(Completion::Join(
                old,
                JoinResponse::error(member_id.to_owned(), GroupError::RebalanceInProgress),
            ));
        }
    }

    /// `updateStaticMemberThenRebalanceOrCompleteJoin`: a known `group.instance.id` joins with
    /// an unknown member id. The old member id is fenced; if the group is Stable and the
    /// selected protocol would not change, the new member takes over the old one's assignment
    /// without a rebalance (KIP-345).
    fn replace_static_member(
        &mut self,
        cx: &mut Cx<'_>,
        ticket: Ticket,
        req: JoinRequest,
        old_member_id: &str,
        new_member_id: String,
    ) {
        let old_leader = self.leader_id.clone().unwrap_or_default();
        let Some(old) = self.members.remove(old_member_id) else {
            return;
        };
        // Fence the old member id at once if it is parked somewhere.
        let fenced = GroupError::FencedInstanceId {
            group_instance_id: req.group_instance_id.clone().unwrap_or_default(),
            member_id: old_member_id.to_owned(),
        };
        if let Some(t) = old.awaiting_join {
            cx.out.push(Completion::Join(
                t,
                JoinResponse::error(old_member_id.to_owned(), fenced.clone()),
            ));
        }
        if let Some(t) = old.awaiting_sync {
            cx.out
                .push(Completion::Sync(t, SyncResponse::error(fenced)));
        }
        self.pending_sync.remove(old_member_id);
        let new = Member {
            member_id: new_member_id.clone(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            heartbeat_deadline_ms: cx.now_ms + i64::from(old.session_timeout_ms),
            ..old
        };
        self.members.insert(new_member_id.clone(), new);
        if self.is_leader(old_member_id) {
            self.leader_id = Some(new_member_id.clone());
        }
        if let Some(instance) = &req.group_instance_id {
            self.static_members
                .insert(instance.clone(), new_member_id.clone());
        }
        self.update_member(
            cx,
            &new_member_id,
            req.protocols,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            ticket,
        );

        match self.state {
            GroupState::Stable => {
                if self.protocol_name == self.select_protocol() {
                    // No rebalance. Before JoinGroup v9 the response names the *old* leader
                    // id, so that a replaced leader acts as a follower and fetches its
                    // assignment with SyncGroup; v9 tells the leader to skip assigning.
                    let resp = if req.supports_skip_assignment {
                        let is_leader = self.is_leader(&new_member_id);
                        let members = if is_leader {
                            self.joined_members()
                        } else {
                            Vec::new()
                        };
                        self.join_response(&new_member_id, members, is_leader)
                    } else {
                        JoinResponse {
                            leader: old_leader,
                            ..self.join_response(&new_member_id, Vec::new(), false)
                        }
                    };
                    if let Some(m) = self.members.get_mut(&new_member_id) {
                        m.awaiting_join = None;
                    }
                    // KIP-345: the new member id must survive a restart, or the member
                    // would be fenced by its own old id.
                    self.needs_record = true;
                    cx.out.push(Completion::Join(ticket, resp));
                } else {
                    self.maybe_prepare_rebalance_or_complete_join(cx);
                }
            }
            // The leader may already be assigning for the old member id: start over.
            GroupState::CompletingRebalance => self.prepare_rebalance(cx),
            GroupState::PreparingRebalance => self.maybe_complete_join_phase(cx),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// `maybePrepareRebalanceOrCompleteJoin`.
    pub(super) fn maybe_prepare_rebalance_or_complete_join(&mut self, cx: &mut Cx<'_>) {
        if self.state.can_rebalance() {
            self.prepare_rebalance(cx);
        } else {
            self.maybe_complete_join_phase(cx);
        }
    }

    /// `maybeCompleteJoinPhase`: complete early when everyone has rejoined, except during the
    /// initial rebalance, which always waits out its delay.
    pub(super) fn maybe_complete_join_phase(&mut self, cx: &mut Cx<'_>) {
        if self.state == GroupState::PreparingRebalance
            && self.previous_state != GroupState::Empty
            && self.has_all_members_joined()
        {
            self.complete_join(cx);
        }
    }

    /// `prepareRebalance`.
    pub(super) fn prepare_rebalance(&mut self, cx: &mut Cx<'_>) {
        if self.state == GroupState::CompletingRebalance {
            // Members parked in SyncGroup must rejoin.
            let parked: Vec<(String, Option<Ticket>)> = self
                .members
                .values_mut()
                .map(|m| {
                    m.assignment = ClassicGroup::empty_assignment();
                    (m.member_id.clone(), m.awaiting_sync.take())
                })
                .collect();
            for (member_id, ticket) in parked {
                if let Some(t) = ticket {
                    cx.out.push(Completion::Sync(
                        t,
                        SyncResponse::error(GroupError::RebalanceInProgress),
                    ));
                    self.reschedule_heartbeat(cx.now_ms, &member_id);
                }
            }
        }
        self.pending_sync.clear();
        self.sync_timer = None;
        let initial = self.state == GroupState::Empty;
        if initial {
            let delay_ms = cx.cfg.initial_rebalance_delay_ms;
            let remaining_ms = (self.rebalance_timeout_ms() - delay_ms).max(0);
            self.join_timer = Some((
                cx.now_ms + delay_ms,
                JoinTimer::InitialDelay {
                    delay_ms,
                    remaining_ms,
                },
            ));
        }
        self.transition_to(GroupState::PreparingRebalance);
        tracing::info!(group = %self.group_id, generation = self.generation_id, "preparing to rebalance");
        if !initial {
            if self.has_all_members_joined() {
                self.complete_join(cx);
            } else {
                self.join_timer = Some((
                    cx.now_ms + self.rebalance_timeout_ms(),
                    JoinTimer::RebalanceTimeout,
                ));
            }
        }
    }

    /// `completeClassicGroupJoin`: drop dynamic members that did not rejoin, form the next
    /// generation, answer every parked JoinGroup (the leader gets the member list) and wait
    /// for SyncGroup.
    pub(super) fn complete_join(&mut self, cx: &mut Cx<'_>) {
        self.join_timer = None;
        let missing: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        if !missing.is_empty() {
            tracing::info!(group = %self.group_id, members = ?missing, "removing members that did not rejoin");
        }
        for id in &missing {
            self.remove(id, cx.out);
        }
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members remain and none rejoined: wait another rebalance timeout
            // (their sessions expire meanwhile if they are gone).
            self.join_timer = Some((
                cx.now_ms + self.rebalance_timeout_ms(),
                JoinTimer::RebalanceTimeout,
            ));
            return;
        }
        self.generation_id += 1;
        self.pending_sync.clear();
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition_to(GroupState::Empty);
            self.needs_record = true;
            tracing::info!(group = %self.group_id, generation = self.generation_id, "group is empty");
            return;
        }
        self.protocol_name = self.select_protocol();
        self.transition_to(GroupState::CompletingRebalance);
        tracing::info!(group = %self.group_id, generation = self.generation_id,
            members = self.members.len(), protocol = ?self.protocol_name, "join phase complete");
        let leader_members = self.joined_members();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let members = if self.is_leader(&id) {
                leader_members.clone()
            } else {
                Vec::new()
            };
            let resp = self.join_response(&id, members, false);
            if let Some(m) = self.members.get_mut(&id) {
                if let Some(t) = m.awaiting_join.take() {
                    cx.out.push(Completion::Join(t, resp));
                }
                m.is_new = false;
                m.heartbeat_deadline_ms = cx.now_ms + i64::from(m.session_timeout_ms);
            }
            self.pending_sync.insert(id);
        }
        self.sync_timer = Some((cx.now_ms + self.rebalance_timeout_ms(), self.generation_id));
    }

    // ---- SyncGroup ----------------------------------------------------------------------------

    /// `classicGroupSyncToClassicGroup`. Only the leader's assignments are used; a follower's
    /// are ignored, as in Kafka.
    pub(super) fn sync(&mut self, cx: &mut Cx<'_>, ticket: Ticket, req: SyncRequest) {
        if let Err(e) = self.validate_sync(&req) {
            cx.out
                .push(Completion::Sync(ticket, SyncResponse::error(e)));
            return;
        }
        match self.state {
            GroupState::PreparingRebalance => cx.out.push(Completion::Sync(
                ticket,
                SyncResponse::error(GroupError::RebalanceInProgress),
            )),
            GroupState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(&req.member_id)
                    && let Some(old) = m.awaiting_sync.replace(ticket)
                {
                    cx.out.push(Completion::Sync(
                        old,
                        SyncResponse::error(GroupError::RebalanceInProgress),
                    ));
                }
                self.remove_pending_sync(&req.member_id);
                if self.is_leader(&req.member_id) {
                    tracing::info!(group = %self.group_id, generation = self.generation_id,
                        leader = %req.member_id, "assignment received from the leader");
                    let ids: Vec<String> = self.members.keys().cloned().collect();
                    for id in ids {
                        let assignment = req
                            .assignments
                            .iter()
                            .find(|(m, _)| *m == id)
                            .map_or_else(ClassicGroup::empty_assignment, |(_, a)| a.clone());
                        if let Some(m) = self.members.get_mut(&id) {
                            m.assignment = assignment;
                        }
                    }
                    self.propagate_assignment(cx);
                    self.transition_to(GroupState::Stable);
                    // Kafka appends the generation's metadata before answering the leader.
                    self.needs_record = true;
                }
            }
            GroupState::Stable => {
                self.remove_pending_sync(&req.member_id);
                let assignment = self
                    .members
                    .get(&req.member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                cx.out.push(Completion::Sync(
                    ticket,
                    SyncResponse {
                        error: None,
                        protocol_type: self.protocol_type.clone(),
                        protocol_name: self.protocol_name.clone(),
                        assignment,
                    },
                ));
            }
            GroupState::Empty | GroupState::Dead => cx.out.push(Completion::Sync(
                ticket,
                SyncResponse::error(GroupError::UnknownMemberId {
                    member_id: req.member_id,
                }),
            )),
        }
    }

    /// `validateSyncGroup`: member, generation, and (SyncGroup v5+) protocol type and name.
    fn validate_sync(&self, req: &SyncRequest) -> Result<(), GroupError> {
        self.validate_member(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration {
                requested: req.generation_id,
                current: self.generation_id,
            });
        }
        let inconsistent = |asked: &Option<String>, ours: &Option<String>| matches!((asked, ours), (Some(a), Some(o)) if a != o);
        if inconsistent(&req.protocol_type, &self.protocol_type)
            || inconsistent(&req.protocol_name, &self.protocol_name)
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        Ok(())
    }

    fn remove_pending_sync(&mut self, member_id: &str) {
        self.pending_sync.remove(member_id);
        if self.pending_sync.is_empty() {
            self.sync_timer = None;
        }
    }

    /// `propagateAssignment` with no error: answer every parked SyncGroup with its assignment.
    fn propagate_assignment(&mut self, cx: &mut Cx<'_>) {
        let protocol_type = self.protocol_type.clone();
        let protocol_name = self.protocol_name.clone();
        for m in self.members.values_mut() {
            if let Some(t) = m.awaiting_sync.take() {
                cx.out.push(Completion::Sync(
                    t,
                    SyncResponse {
                        error: None,
                        protocol_type: protocol_type.clone(),
                        protocol_name: protocol_name.clone(),
                        assignment: m.assignment.clone(),
                    },
                ));
                // Sessions restart once the assignment is out.
                m.heartbeat_deadline_ms = cx.now_ms + i64::from(m.session_timeout_ms);
            }
        }
    }

    // ---- Heartbeat and LeaveGroup -------------------------------------------------------------

    /// `classicGroupHeartbeatToClassicGroup`.
    pub(super) fn heartbeat(
        &mut self,
        now_ms: i64,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        self.validate_member(member_id, group_instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration {
                requested: generation_id,
                current: self.generation_id,
            });
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId {
                member_id: member_id.to_owned(),
            }),
            GroupState::PreparingRebalance => {
                self.reschedule_heartbeat(now_ms, member_id);
                Err(GroupError::RebalanceInProgress)
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.reschedule_heartbeat(now_ms, member_id);
                Ok(())
            }
        }
    }

    pub(super) fn reschedule_heartbeat(&mut self, now_ms: i64, member_id: &str) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
        }
    }

    /// One member of a LeaveGroup (`classicGroupLeaveToClassicGroup`); the caller rebalances
    /// once after the whole batch with [`ClassicGroup::after_leave`]. An empty member id with
    /// an instance id is the admin client removing a static member.
    pub(super) fn leave_one(
        &mut self,
        cx: &mut Cx<'_>,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if member_id.is_empty() {
            let found = group_instance_id.and_then(|i| self.static_members.get(i).cloned());
            return match found {
                Some(id) => {
                    self.remove(&id, cx.out);
                    Ok(())
                }
                None => Err(GroupError::UnknownMemberId {
                    member_id: String::new(),
                }),
            };
        }
        if self.pending_join.remove(member_id).is_some() {
            return Ok(());
        }
        self.validate_member(member_id, group_instance_id)?;
        self.remove(member_id, cx.out);
        Ok(())
    }

    /// The rebalance that follows a LeaveGroup batch in which someone left.
    pub(super) fn after_leave(&mut self, cx: &mut Cx<'_>) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(cx);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join_phase(cx),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    // ---- Timers -------------------------------------------------------------------------------

    /// Fires every timer of this group that is due at `cx.now_ms`.
    pub(super) fn expire(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now_ms;
        // KIP-394 member ids handed out but never used.
        let stale: Vec<String> = self
            .pending_join
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            self.pending_join.remove(&id);
            if self.state == GroupState::PreparingRebalance && self.has_all_members_joined() {
                self.complete_join(cx);
            }
        }
        // Sessions (`expireClassicGroupMemberHeartbeat`).
        let due: Vec<String> = self
            .members
            .values()
            .filter(|m| m.heartbeat_deadline_ms <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in due {
            let Some(m) = self.members.get_mut(&id) else {
                continue;
            };
            if m.has_satisfied_heartbeat() {
                m.heartbeat_deadline_ms = i64::MAX;
                continue;
            }
            tracing::info!(group = %self.group_id, member = %id, "session expired; removing the member");
            self.remove(&id, cx.out);
            match self.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(cx);
                }
                GroupState::PreparingRebalance if self.has_all_members_joined() => {
                    self.complete_join(cx);
                }
                _ => {}
            }
        }
        // The join phase.
        if let Some((deadline, timer)) = self.join_timer
            && deadline <= now
        {
            match timer {
                JoinTimer::InitialDelay {
                    delay_ms,
                    remaining_ms,
                } if self.new_member_added && remaining_ms != 0 => {
                    self.new_member_added = false;
                    let next_delay = cx.cfg.initial_rebalance_delay_ms.min(remaining_ms);
                    self.join_timer = Some((
                        now + next_delay,
                        JoinTimer::InitialDelay {
                            delay_ms: next_delay,
                            remaining_ms: (remaining_ms - delay_ms).max(0),
                        },
                    ));
                }
                JoinTimer::InitialDelay { .. } | JoinTimer::RebalanceTimeout => {
                    self.complete_join(cx);
                }
            }
        }
        // The sync phase (`expirePendingSync`): members that never sent SyncGroup go.
        if let Some((deadline, generation)) = self.sync_timer
            && deadline <= now
        {
            self.sync_timer = None;
            if generation == self.generation_id
                && matches!(
                    self.state,
                    GroupState::CompletingRebalance | GroupState::Stable
                )
                && !self.pending_sync.is_empty()
            {
                let missing: Vec<String> = self.pending_sync.iter().cloned().collect();
                tracing::info!(group = %self.group_id, members = ?missing, "removing members that did not sync");
                for id in &missing {
                    self.remove(id, cx.out);
                }
                self.prepare_rebalance(cx);
            }
        }
    }
}
