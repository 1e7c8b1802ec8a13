//! One consumer group (Kafka's `ConsumerGroup`): its members, the group epoch, the target
//! assignment and its epoch, the owner of every assigned partition, and the reconciliation of
//! a member towards its target (Kafka's `CurrentAssignmentBuilder`).
//!
//! KIP-848's epochs: the *group epoch* moves whenever membership, a subscription or the
//! metadata of a subscribed topic changes; the *assignment epoch* is the group epoch the
//! target assignment was computed for; each *member epoch* is the assignment epoch the member
//! has reconciled to. A partition moves to a new owner only once the previous owner has
//! reported it revoked, so no partition ever has two owners.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::assignor::{Assignment, AssignmentSpec, Assignor, MemberSpec};

/// A member's reconciliation state (Kafka's `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// At its target, or at the target minus partitions it waits for.
    Stable,
    /// Must revoke `pending_revocation` before it moves to the next epoch.
    UnrevokedPartitions,
    /// At the target epoch, waiting for other members to release some of its partitions.
    UnreleasedPartitions,
}

/// One member of a consumer group (Kafka's `ConsumerGroupMember`).
#[derive(Debug, Clone)]
pub struct ConsumerGroupMember {
    pub member_id: String,
    /// `group.instance.id` of a static member (KIP-345 carried over to KIP-848).
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The assignment epoch the member has reconciled to; -2 after a static member's leave.
    pub member_epoch: i32,
    /// The epoch before the last bump: a heartbeat with it is accepted once (a lost response).
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// How long the member may take to revoke partitions.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: BTreeSet<String>,
    /// A regular expression subscription (KIP-848): every topic whose whole name matches.
    pub subscribed_topic_regex: Option<String>,
    /// The topics `subscribed_topic_regex` matches in the current metadata image (derived:
    /// resolved again on each heartbeat and on load, never stored).
    pub regex_topics: BTreeSet<String>,
    /// The member's `server_assignor` preference.
    pub server_assignor: Option<String>,
    /// What the member is told it owns.
    pub assigned: Assignment,
    /// What it must give up before it moves on.
    pub pending_revocation: Assignment,
    /// The member is removed when no heartbeat arrives before this.
    pub session_deadline_ms: i64,
    /// The member is removed if it still has not revoked by this.
    pub revocation_deadline_ms: Option<i64>,
}

impl ConsumerGroupMember {
    /// Every topic the member subscribes to: by name, and by its regular expression.
    pub fn subscriptions(&self) -> impl Iterator<Item = &String> {
        self.subscribed_topic_names.iter().chain(&self.regex_topics)
    }

    /// A member that has just joined.
    #[must_use]
    pub fn new(member_id: String) -> Self {
        ConsumerGroupMember {
            member_id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            rebalance_timeout_ms: 300_000,
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            regex_topics: BTreeSet::new(),
            server_assignor: None,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            session_deadline_ms: 0,
            revocation_deadline_ms: None,
        }
    }
}

/// Where a subscribed topic stands in the metadata image: (topic id, partition count), or
/// `None` while it does not exist.
pub type TopicSnapshot = BTreeMap<String, Option<(Uuid, i32)>>;

/// One consumer group.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// The assignor the target was last computed with.
    pub assignor: Option<Assignor>,
    pub members: BTreeMap<String, ConsumerGroupMember>,
    /// The target assignment of every member, at `assignment_epoch`.
    pub target: BTreeMap<String, Assignment>,
    /// The member that owns (assigned or pending revocation) each partition.
    pub owners: HashMap<(Uuid, i32), String>,
    /// The subscribed topics as of the last group epoch bump: a change bumps the epoch.
    pub topics: TopicSnapshot,
}

fn overlaps(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .any(|(t, ps)| b.get(t).is_some_and(|q| !ps.is_disjoint(q)))
}

/// Whether `a` is contained in `b`.
#[must_use]
pub fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .all(|(t, ps)| ps.is_empty() || b.get(t).is_some_and(|q| ps.is_subset(q)))
}

impl ConsumerGroup {
    /// An empty group.
    #[must_use]
    pub fn new(group_id: String) -> Self {
        ConsumerGroup {
            group_id,
            ..ConsumerGroup::default()
        }
    }

    /// Kafka's consumer group states.
    #[must_use]
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The member id of the static member `instance_id`.
    #[must_use]
    pub fn static_member(&self, instance_id: &str) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.member_id.as_str())
    }

    /// Every subscribed topic name.
    #[must_use]
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(ConsumerGroupMember::subscriptions)
            .cloned()
            .collect()
    }

    /// The subscribed topics as `lookup` (topic id and partition count by name) sees them.
    #[must_use]
    pub fn topic_snapshot(&self, lookup: impl Fn(&str) -> Option<(Uuid, i32)>) -> TopicSnapshot {
        self.subscribed_topics()
            .into_iter()
            .map(|n| {
                let t = lookup(&n);
                (n, t)
            })
            .collect()
    }

    /// The assignor most members prefer, else `default` (Kafka's
    /// `ConsumerGroup.computePreferredServerAssignor`).
    #[must_use]
    pub fn preferred_assignor(&self, default: Assignor) -> Assignor {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .and_then(|(a, _)| Assignor::parse(a))
            .unwrap_or(default)
    }

    /// Removes a member and releases its partitions; the group epoch moves.
    pub fn remove_member(&mut self, member_id: &str) -> Option<ConsumerGroupMember> {
        let m = self.members.remove(member_id)?;
        self.set_owned(member_id, None, Some(&m));
        self.target.remove(member_id);
        self.group_epoch += 1;
        Some(m)
    }

    /// Moves a static member's record, target and partitions to a new member id (a static
    /// member rejoining after its leave with epoch -2). The new member starts at epoch 0.
    pub fn replace_static_member(&mut self, old_id: &str, new_id: &str) {
        let Some(mut m) = self.members.remove(old_id) else {
            return;
        };
        m.member_id = new_id.to_owned();
        m.member_epoch = 0;
        m.previous_member_epoch = 0;
        for owner in self.owners.values_mut() {
            if owner == old_id {
                new_id.clone_into(owner);
            }
        }
        if let Some(t) = self.target.remove(old_id) {
            self.target.insert(new_id.to_owned(), t);
        }
        self.members.insert(new_id.to_owned(), m);
    }

    /// Records `new`'s partitions as owned by `member_id` in place of `old`'s.
    fn set_owned(
        &mut self,
        member_id: &str,
        new: Option<&ConsumerGroupMember>,
        old: Option<&ConsumerGroupMember>,
    ) {
        let parts = |m: &ConsumerGroupMember| -> Vec<(Uuid, i32)> {
            m.assigned
                .iter()
                .chain(&m.pending_revocation)
                .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
                .collect()
        };
        if let Some(old) = old {
            for tp in parts(old) {
                if self.owners.get(&tp).is_some_and(|o| o == member_id) {
                    self.owners.remove(&tp);
                }
            }
        }
        if let Some(new) = new {
            for tp in parts(new) {
                self.owners.insert(tp, member_id.to_owned());
            }
        }
    }

    /// Recomputes the target assignment for the current group epoch.
    pub fn compute_target(&mut self, assignor: Assignor) {
        let ids: BTreeMap<&String, (Uuid, i32)> = self
            .topics
            .iter()
            .filter_map(|(n, t)| t.map(|t| (n, t)))
            .collect();
        let spec = AssignmentSpec {
            members: self
                .members
                .values()
                .map(|m| MemberSpec {
                    member_id: &m.member_id,
                    topics: m
                        .subscriptions()
                        .filter_map(|n| ids.get(n).map(|(id, _)| *id))
                        .collect(),
                    current: self.target.get(&m.member_id),
                })
                .collect(),
            partitions: ids.values().copied().collect(),
        };
        self.target = assignor.assign(&spec);
        self.assignor = Some(assignor);
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves `member_id` towards its target assignment (Kafka's
    /// `CurrentAssignmentBuilder.build`). `owned` is what the member reports owning, `None`
    /// when its heartbeat left it out. Returns whether its assigned partitions changed.
    pub fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now_ms: i64) -> bool {
        let Some(old) = self.members.get(member_id).cloned() else {
            return false;
        };
        if old.member_epoch < 0 {
            return false;
        }
        let target_epoch = self.assignment_epoch;
        let next = match old.state {
            MemberState::UnreleasedPartitions if old.member_epoch == target_epoch => {
                Some(self.next_assignment(&old, old.member_epoch, owned))
            }
            MemberState::Stable | MemberState::UnreleasedPartitions => (old.member_epoch
                != target_epoch)
                .then(|| self.next_assignment(&old, old.member_epoch, owned)),
            // It may move on once its heartbeat shows none of the revoked partitions; without
            // owned partitions in the heartbeat it keeps waiting.
            MemberState::UnrevokedPartitions => owned
                .filter(|o| !overlaps(o, &old.pending_revocation))
                .map(|o| self.next_assignment(&old, target_epoch, Some(o))),
        };
        let Some(mut new) = next else {
            return false;
        };
        new.revocation_deadline_ms = match (new.state, old.state) {
            (MemberState::UnrevokedPartitions, MemberState::UnrevokedPartitions) => {
                old.revocation_deadline_ms
            }
            (MemberState::UnrevokedPartitions, _) => {
                Some(now_ms.saturating_add(i64::from(new.rebalance_timeout_ms.max(0))))
            }
            _ => None,
        };
        let changed = new.assigned != old.assigned;
        self.set_owned(member_id, Some(&new), Some(&old));
        self.members.insert(member_id.to_owned(), new);
        changed
    }

    /// Kafka's `CurrentAssignmentBuilder.computeNextAssignment`.
    fn next_assignment(
        &self,
        m: &ConsumerGroupMember,
        member_epoch: i32,
        owned: Option<&Assignment>,
    ) -> ConsumerGroupMember {
        let empty = Assignment::new();
        let target = self.target.get(&m.member_id).unwrap_or(&empty);
        let mut has_unreleased = false;
        let mut assigned = Assignment::new();
        let mut revoke = Assignment::new();
        let mut pending_assign = Assignment::new();
        let topics: BTreeSet<Uuid> = target.keys().chain(m.assigned.keys()).copied().collect();
        let none = BTreeSet::new();
        for t in topics {
            let want = target.get(&t).unwrap_or(&none);
            let have = m.assigned.get(&t).unwrap_or(&none);
            let keep: BTreeSet<i32> = have.intersection(want).copied().collect();
            let gone: BTreeSet<i32> = have.difference(&keep).copied().collect();
            let mut add: BTreeSet<i32> = want.difference(&keep).copied().collect();
            let before = add.len();
            add.retain(|p| self.owners.get(&(t, *p)).is_none_or(|o| *o == m.member_id));
            has_unreleased |= add.len() != before;
            if !keep.is_empty() {
                assigned.insert(t, keep);
            }
            if !gone.is_empty() {
                revoke.insert(t, gone);
            }
            if !add.is_empty() {
                pending_assign.insert(t, add);
            }
        }
        let mut next = m.clone();
        // Without owned partitions in the heartbeat, the member is assumed to hold them all.
        let owns_revoked = owned.is_none_or(|o| overlaps(o, &revoke));
        if !revoke.is_empty() && owns_revoked {
            next.state = MemberState::UnrevokedPartitions;
            next.assigned = assigned;
            next.pending_revocation = revoke;
            set_epoch(&mut next, member_epoch);
            return next;
        }
        for (t, ps) in pending_assign {
            assigned.entry(t).or_default().extend(ps);
        }
        next.state = if has_unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        next.assigned = assigned;
        next.pending_revocation = Assignment::new();
        set_epoch(&mut next, self.assignment_epoch);
        next
    }
}

/// Moves a member to `epoch`, remembering the one it leaves.
fn set_epoch(m: &mut ConsumerGroupMember, epoch: i32) {
    if m.member_epoch != epoch {
        m.previous_member_epoch = m.member_epoch;
        m.member_epoch = epoch;
    }
}
