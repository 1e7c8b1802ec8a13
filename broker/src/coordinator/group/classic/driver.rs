//! The tokio driver of the group coordinator: one mutex around the sans-IO [`ClassicGroupCore`],
//! the channels of parked JoinGroup and SyncGroup requests, and a timer task that sleeps until
//! the next group deadline (session, join, sync) and feeds the time in. Nothing polls.
//!
//! # Group metadata records
//!
//! After each operation the core's records go to the [`GroupLog`] before any answer of that
//! operation is delivered, and the handlers send an answer once its group's partition has
//! committed them, so a member learns of a generation only once a leader change keeps it
//! (Kafka answers the leader's SyncGroup once its record is committed). Lock order is `writer`, then a
//! `__consumer_offsets` partition, then `inner`: the core's lock is never held across an
//! append (offset expiry asks the coordinator while holding a partition's lock). Records are
//! whole-group snapshots, drained and appended under `writer`, so a group's records reach the
//! log in the order the core produced them.

use std::collections::{BTreeSet, HashMap};

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::coordinator::{
    ClassicGroupCore, Completion, DescribedGroup, GroupConfig, JoinRequest, JoinResponse,
    ListedGroup, SyncRequest, SyncResponse, Ticket,
};
use super::error::GroupError;
use super::persist::GroupLog;
use super::state::GroupState;
use crate::coordinator::deadline_timer::DeadlineTimer;
use crate::{monotonic_ms, now_ms};

/// The coordinator's state behind the lock.
struct Inner {
    core: ClassicGroupCore,
    /// The next ticket to hand out.
    next_ticket: u64,
    /// Parked JoinGroups.
    joins: HashMap<Ticket, oneshot::Sender<JoinResponse>>,
    /// Parked SyncGroups.
    syncs: HashMap<Ticket, oneshot::Sender<SyncResponse>>,
}

impl Inner {
    fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        Ticket(self.next_ticket)
    }

    /// Hands each answer to its parked request. A request whose connection has gone simply
    /// drops its answer.
    fn deliver(&mut self, completions: Vec<Completion>) {
        for c in completions {
            match c {
                Completion::Join(t, r) => {
                    if let Some(tx) = self.joins.remove(&t) {
                        let _ = tx.send(r);
                    }
                }
                Completion::Sync(t, r) => {
                    if let Some(tx) = self.syncs.remove(&t) {
                        let _ = tx.send(r);
                    }
                }
            }
        }
    }
}

struct Shared {
    inner: Mutex<Inner>,
    /// Where group metadata records go; `None` keeps groups in memory only.
    log: Option<Arc<dyn GroupLog>>,
    /// Serialises draining the core's records and appending them (see the module docs).
    writer: Mutex<()>,
    /// Sleeps until the next session, join or sync deadline.
    timer: DeadlineTimer,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends the core's pending group metadata records, then delivers `out`: answers reach
    /// members only after what they answer is in the log. When an append fails (this node
    /// no longer leads the group's partition, or its log failed), the operation's answers
    /// become NOT_COORDINATOR, as Kafka's runtime fails the operation whose write failed
    /// (`normalizeException` maps both to it): the members look the coordinator up and
    /// rejoin there.
    fn persist_then_deliver(&self, out: Vec<Completion>) {
        let mut failed = false;
        {
            let _w = self
                .writer
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let records = self.lock().core.take_records();
            if let Some(log) = &self.log {
                for (group, value) in records {
                    let tombstone = value.is_none();
                    if let Err(e) = log.append(&group, value, now_ms()) {
                        tracing::warn!(group = %group, tombstone, error = %e,
                            "cannot store group metadata");
                        failed = true;
                    }
                }
            }
        }
        let out: Vec<Completion> = if failed {
            out.into_iter()
                .map(|c| match c {
                    Completion::Join(t, r) => Completion::Join(
                        t,
                        JoinResponse::error(r.member_id, GroupError::NotCoordinator),
                    ),
                    Completion::Sync(t, _) => {
                        Completion::Sync(t, SyncResponse::error(GroupError::NotCoordinator))
                    }
                })
                .collect()
        } else {
            out
        };
        if !out.is_empty() {
            self.lock().deliver(out);
        }
    }
}

/// The node's group coordinator, as the handlers (and the offset APIs) use it.
#[derive(Clone)]
pub struct GroupCoordinator {
    shared: Arc<Shared>,
}

impl GroupCoordinator {
    /// A coordinator with no groups that keeps them in memory only.
    #[must_use]
    pub fn new(cfg: GroupConfig) -> Self {
        Self::build(ClassicGroupCore::new(cfg), None)
    }

    /// A coordinator whose group metadata goes to `log`, with the groups `stored` there
    /// (encoded GroupMetadataValues, as [`crate::coordinator::offsets::OffsetStore::group_metadata`]
    /// returns them) loaded at `now_ms`.
    #[must_use]
    pub fn with_log(
        cfg: GroupConfig,
        log: Arc<dyn GroupLog>,
        stored: Vec<(String, bytes::Bytes)>,
        now_ms: i64,
    ) -> Self {
        let mut core = ClassicGroupCore::new(cfg);
        let loaded = !stored.is_empty();
        core.load(now_ms, stored);
        let coordinator = Self::build(core, Some(log));
        if loaded {
            // Restored members' sessions run from now: a member that never comes back must
            // expire even if no group request arrives to start the timer.
            coordinator.wake_timer();
        }
        coordinator
    }

    fn build(core: ClassicGroupCore, log: Option<Arc<dyn GroupLog>>) -> Self {
        GroupCoordinator {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    core,
                    next_ticket: 0,
                    joins: HashMap::new(),
                    syncs: HashMap::new(),
                }),
                log,
                writer: Mutex::new(()),
                timer: DeadlineTimer::default(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.shared.lock()
    }

    /// Starts the timer task once, then nudges it: the request just handled may have set an
    /// earlier deadline.
    fn wake_timer(&self) {
        let shared = self.shared.clone();
        self.shared.timer.wake(|| run_timer(shared));
    }

    /// Fires the timers already due before a request looks at the groups, so that a session
    /// that has ended is over by the time the request is answered, whatever the timer task's
    /// wake-up latency (on a loaded machine it fires milliseconds late, and a DeleteGroups
    /// arriving in between found an expired static member still there: NON_EMPTY_GROUP).
    /// Kafka's coordinator likewise expires a member at its deadline, not when it next looks.
    fn fire_due_timers(&self) {
        let now = monotonic_ms();
        let due = self.lock().core.next_deadline().is_some_and(|d| d <= now);
        if due {
            let out = self.lock().core.tick(now);
            self.shared.persist_then_deliver(out);
        }
    }

    /// Takes the groups of a `__consumer_offsets` partition this node now leads, as
    /// stored there (encoded GroupMetadataValues). Takes only the core's lock, so the offset
    /// store may call it with a partition locked.
    pub fn load_partition(&self, stored: Vec<(String, bytes::Bytes)>) {
        if stored.is_empty() {
            return;
        }
        self.lock().core.load(monotonic_ms(), stored);
    }

    /// Starts the timer after a load: restored members' sessions run from their load.
    pub fn after_load(&self) {
        self.wake_timer();
    }

    /// Drops the groups `gone` selects (their partition is led elsewhere now); their parked
    /// requests are answered NOT_COORDINATOR. Takes only the core's lock.
    pub fn unload_partition(&self, gone: impl Fn(&str) -> bool) {
        let mut inner = self.lock();
        let out = inner.core.unload(gone);
        inner.deliver(out);
    }

    /// JoinGroup; waits while the request is parked.
    pub async fn join(&self, req: JoinRequest) -> JoinResponse {
        let member_id = req.member_id.clone();
        let (rx, out) = {
            let mut inner = self.lock();
            let ticket = inner.ticket();
            let (tx, rx) = oneshot::channel();
            inner.joins.insert(ticket, tx);
            let out = inner.core.join(monotonic_ms(), ticket, req, Uuid::new_v4());
            (rx, out)
        };
        self.shared.persist_then_deliver(out);
        self.wake_timer();
        // The core answers every ticket it accepts; a dropped sender would be a bug, and the
        // client is then told to rejoin.
        rx.await.unwrap_or_else(|_| {
            JoinResponse::error(member_id.clone(), GroupError::UnknownMemberId { member_id })
        })
    }

    /// SyncGroup; followers wait here for the leader's assignment.
    pub async fn sync(&self, req: SyncRequest) -> SyncResponse {
        let (rx, out) = {
            let mut inner = self.lock();
            let ticket = inner.ticket();
            let (tx, rx) = oneshot::channel();
            inner.syncs.insert(ticket, tx);
            let out = inner.core.sync(monotonic_ms(), ticket, req);
            (rx, out)
        };
        self.shared.persist_then_deliver(out);
        self.wake_timer();
        rx.await
            .unwrap_or_else(|_| SyncResponse::error(GroupError::RebalanceInProgress))
    }

    /// Heartbeat.
    ///
    /// # Errors
    /// As [`ClassicGroupCore::heartbeat`].
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        let r = self.lock().core.heartbeat(
            monotonic_ms(),
            group_id,
            member_id,
            group_instance_id,
            generation_id,
        );
        self.wake_timer();
        r
    }

    /// LeaveGroup for a batch of (member id, group instance id).
    ///
    /// # Errors
    /// As [`ClassicGroupCore::leave`].
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let (results, out) = self.lock().core.leave(monotonic_ms(), group_id, members)?;
        self.shared.persist_then_deliver(out);
        let r = results;
        self.wake_timer();
        Ok(r)
    }

    /// ListGroups.
    #[must_use]
    pub fn list(&self, states: &[String]) -> Vec<ListedGroup> {
        self.fire_due_timers();
        self.lock().core.list(states)
    }

    /// DescribeGroups for one group.
    #[must_use]
    pub fn describe(&self, group_id: &str) -> Option<DescribedGroup> {
        self.fire_due_timers();
        self.lock().core.describe(group_id)
    }

    /// DeleteGroups for one group (the handler then deletes its offsets).
    ///
    /// # Errors
    /// As [`ClassicGroupCore::delete`].
    pub fn delete(&self, group_id: &str) -> Result<(), GroupError> {
        self.fire_due_timers();
        let r = self.lock().core.delete(group_id);
        self.shared.persist_then_deliver(Vec::new());
        r
    }

    /// The groups among `ids` that exist only through committed offsets, as ListGroups lists
    /// them (see [`ClassicGroupCore::list_simple`]).
    #[must_use]
    pub fn list_simple(&self, states: &[String], ids: Vec<String>) -> Vec<ListedGroup> {
        self.lock().core.list_simple(states, ids)
    }

    /// Kafka's `cleanupGroupMetadata` after an offset expiry pass: an Empty group none of
    /// whose offsets remain (`has_offsets` says) is deleted, with a tombstone. `has_offsets`
    /// is asked without the coordinator's lock held (see the module docs). Returns how many
    /// groups were deleted.
    pub fn delete_empty_groups_without_offsets(&self, has_offsets: impl Fn(&str) -> bool) -> usize {
        let empty: Vec<String> = self.lock().core.empty_group_ids();
        let mut deleted = 0;
        for group_id in empty.into_iter().filter(|g| !has_offsets(g)) {
            if self.lock().core.delete(&group_id).is_ok() {
                tracing::info!(group = %group_id, "deleted empty group without offsets");
                deleted += 1;
            }
        }
        if deleted > 0 {
            self.shared.persist_then_deliver(Vec::new());
        }
        deleted
    }

    // ---- What the offset APIs ask (OffsetCommit, OffsetFetch, OffsetDelete, expiry) ----------

    /// Kafka's `ClassicGroup.validateOffsetCommit` for OffsetCommit. Generation -1 with an
    /// empty member id is a "simple" commit (admin client, manual assignment): allowed when the
    /// group does not exist or is Empty. Otherwise the member must exist (UNKNOWN_MEMBER_ID),
    /// a static instance must map to it (FENCED_INSTANCE_ID), the generation must be the
    /// group's (ILLEGAL_GENERATION; also for a group that does not exist, which OffsetCommit
    /// v9+ reports as GROUP_ID_NOT_FOUND instead), and the group must not be CompletingRebalance
    /// (REBALANCE_IN_PROGRESS). A valid commit in Stable or PreparingRebalance counts as the
    /// member's heartbeat, timed like every session on the monotonic clock
    /// ([`monotonic_ms`]): a deadline from the wall clock would, once a node's clock had
    /// stepped back, lie in the timer's past and expire the member at once.
    ///
    /// # Errors
    /// The Kafka error code for every partition of the commit.
    pub fn validate_offset_commit(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        self.lock().core.validate_offset_commit(
            monotonic_ms(),
            group_id,
            generation_id,
            member_id,
            group_instance_id,
        )
    }

    /// Kafka's state name of the group ("Empty", "PreparingRebalance", "CompletingRebalance",
    /// "Stable"), `None` if the coordinator does not know it.
    #[must_use]
    pub fn group_state(&self, group_id: &str) -> Option<&'static str> {
        self.fire_due_timers();
        self.lock().core.group(group_id).map(|g| g.state.name())
    }

    /// The union of the members' subscribed topics when the group uses the consumer protocol
    /// and every subscription parses (Kafka's `computeSubscribedTopics`); `None` otherwise or
    /// for an unknown group. An empty consumer group subscribes to nothing.
    #[must_use]
    pub fn subscribed_topics(&self, group_id: &str) -> Option<BTreeSet<String>> {
        self.lock().core.group(group_id)?.subscribed_topics()
    }

    /// Whether the group has no members, or is not known.
    #[must_use]
    pub fn is_empty_or_unknown(&self, group_id: &str) -> bool {
        self.fire_due_timers();
        self.lock()
            .core
            .group(group_id)
            .is_none_or(|g| g.state == GroupState::Empty || g.is_empty())
    }
}

/// Sleeps until the earliest group deadline (or until woken because one may have moved),
/// then fires the due timers and delivers their answers.
async fn run_timer(shared: Arc<Shared>) {
    loop {
        shared
            .timer
            .wait(|| shared.lock().core.next_deadline())
            .await;
        let out = shared.lock().core.tick(monotonic_ms());
        shared.persist_then_deliver(out);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;
    use crate::coordinator::group::classic::{Protocol, SyncRequest};

    /// A request that arrives after a member's session ended sees the member gone, even when
    /// the timer task has not run yet (librdkafka's 0081 deletes a static member's group one
    /// session after closing it).
    #[tokio::test(flavor = "current_thread")]
    async fn a_request_after_the_session_ended_sees_the_member_gone() {
        let coordinator = GroupCoordinator::new(GroupConfig {
            initial_rebalance_delay_ms: 0,
            min_session_timeout_ms: 1,
            ..GroupConfig::default()
        });
        let joined = coordinator
            .join(JoinRequest {
                group_id: "g".to_owned(),
                member_id: String::new(),
                group_instance_id: Some("instance".to_owned()),
                client_id: "c".to_owned(),
                client_host: "/127.0.0.1".to_owned(),
                session_timeout_ms: 50,
                rebalance_timeout_ms: 1000,
                protocol_type: "consumer".to_owned(),
                protocols: vec![Protocol {
                    name: "range".to_owned(),
                    metadata: Bytes::new(),
                }],
                require_known_member_id: false,
                supports_skip_assignment: false,
            })
            .await;
        assert_eq!(joined.error, None);
        let synced = coordinator
            .sync(SyncRequest {
                group_id: "g".to_owned(),
                generation_id: joined.generation_id,
                member_id: joined.member_id.clone(),
                group_instance_id: Some("instance".to_owned()),
                protocol_type: None,
                protocol_name: None,
                assignments: vec![(joined.member_id.clone(), Bytes::new())],
            })
            .await;
        assert_eq!(synced.error, None);
        assert_eq!(coordinator.group_state("g"), Some("Stable"));
        // A blocking sleep: the current-thread runtime cannot run the timer task meanwhile.
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(coordinator.group_state("g"), Some("Empty"));
        assert_eq!(coordinator.delete("g"), Ok(()));
    }
}
