//! The tokio side of the consumer-group coordinator: one mutex around the sans-IO
//! [`ConsumerGroupCore`], the appends of its records, and a task that sleeps until the next session
//! or revocation deadline.
//!
//! # Records
//!
//! After each operation the core's records ([`super::persist`]) are appended to
//! `__consumer_offsets` before the answer is returned, and the handler sends the answer once
//! they are committed, so a member is told only what a leader change keeps. Lock order is `writer`, then a `__consumer_offsets` partition, then `core`: the
//! core's lock is never held across an append (offset expiry asks the coordinators while
//! holding a partition's lock), and `writer` keeps a group's records in the order the core
//! produced them. A failed append is logged and its records go back to the core, so the next
//! operation writes them again; meanwhile the group goes on in memory.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use strata_kraft::MetadataImage;
use uuid::Uuid;

use super::coordinator::{
    ConsumerGroupConfig, ConsumerGroupCore, DescribedConsumerGroup, HeartbeatRequest,
    HeartbeatResponse, ListedConsumerGroup, TopicMetadata,
};
use super::error::{ConsumerGroupError, ConsumerGroupInUse, DeleteConsumerGroupError};
use super::persist::GroupRecords;
use crate::coordinator::deadline_timer::DeadlineTimer;
use crate::coordinator::offsets::OffsetStore;
use crate::{monotonic_ms, now_ms};

struct Shared {
    core: Mutex<ConsumerGroupCore>,
    /// Serialises take-and-append of the core's records.
    writer: Mutex<()>,
    /// Where the records go; `None` keeps the groups in memory only (unit tests).
    log: Option<Arc<OffsetStore>>,
    /// Sleeps until the next session or revocation deadline.
    timer: DeadlineTimer,
}

impl Shared {
    fn core(&self) -> MutexGuard<'_, ConsumerGroupCore> {
        self.core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `op` on the core, then appends the records it left, before returning its result.
    fn apply<R>(&self, op: impl FnOnce(&mut ConsumerGroupCore) -> R) -> R {
        self.apply_reporting(op).0
    }

    /// [`Shared::apply`], also returning the groups whose records could not be appended
    /// (they are written again with the next change).
    fn apply_reporting<R>(&self, op: impl FnOnce(&mut ConsumerGroupCore) -> R) -> (R, Vec<String>) {
        let _w = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (r, records) = {
            let mut core = self.core();
            let r = op(&mut core);
            (r, core.take_records())
        };
        let failed = self.append(records);
        if !failed.is_empty() {
            let mut core = self.core();
            for (group, records) in &failed {
                core.not_written(group, records);
            }
        }
        (r, failed.into_iter().map(|(g, _)| g).collect())
    }

    /// Appends each group's records; returns those whose append failed.
    fn append(&self, records: Vec<GroupRecords>) -> Vec<GroupRecords> {
        let Some(log) = &self.log else {
            return Vec::new();
        };
        let mut failed = Vec::new();
        for (group, records) in records {
            // The append only: the handler answers once the partition has committed it
            // (`server::placement::committed`).
            if let Err(e) = log.append_consumer_group_records(&group, records.clone(), now_ms()) {
                tracing::warn!(group = %group, error = %e, "cannot store consumer group records");
                failed.push((group, records));
            }
        }
        failed
    }
}

/// The node's KIP-848 consumer-group coordinator (`Broker::consumer_groups`).
#[derive(Clone)]
pub struct ConsumerGroupCoordinator {
    shared: Arc<Shared>,
}

struct Image<'a>(&'a MetadataImage);

impl TopicMetadata for Image<'_> {
    fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.topics.get(name).map(|t| {
            (
                t.topic_id,
                i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
            )
        })
    }

    fn topic_names(&self) -> Vec<&str> {
        // Never a subscription's match: the coordinators' topics are internal.
        self.0
            .topics
            .keys()
            .map(String::as_str)
            .filter(|t| !crate::coordinator::InternalTopic::is_internal(t))
            .collect()
    }
}

impl ConsumerGroupCoordinator {
    /// A coordinator with no groups, kept in memory only.
    #[must_use]
    pub fn new(cfg: ConsumerGroupConfig) -> Self {
        ConsumerGroupCoordinator {
            shared: Arc::new(Shared {
                core: Mutex::new(ConsumerGroupCore::new(cfg)),
                writer: Mutex::new(()),
                log: None,
                timer: DeadlineTimer::default(),
            }),
        }
    }

    /// A coordinator with the groups stored in `log` (replayed at its open), writing there.
    /// Must be called inside a tokio runtime when groups were restored (their members'
    /// sessions are timed from now).
    #[must_use]
    pub fn with_log(
        cfg: ConsumerGroupConfig,
        log: Arc<OffsetStore>,
        records: Vec<(Bytes, Bytes)>,
        image: &MetadataImage,
        now_ms: i64,
    ) -> Self {
        let restored = !records.is_empty();
        let core = ConsumerGroupCore::restore(cfg, records, now_ms, &Image(image));
        let this = ConsumerGroupCoordinator {
            shared: Arc::new(Shared {
                core: Mutex::new(core),
                writer: Mutex::new(()),
                log: Some(log),
                timer: DeadlineTimer::default(),
            }),
        };
        // Groups whose topics changed while the broker was down moved to a new epoch.
        this.shared.apply(|_| ());
        if restored {
            this.wake_timer();
        }
        this
    }

    fn lock(&self) -> MutexGuard<'_, ConsumerGroupCore> {
        self.shared.core()
    }

    fn wake_timer(&self) {
        let shared = self.shared.clone();
        self.shared.timer.wake(|| run_timer(shared));
    }

    /// Takes the groups of a `__consumer_offsets` partition this node now leads, as stored
    /// there. Takes only the core's lock, so the offset store may call it with a partition
    /// locked; [`ConsumerGroupCoordinator::after_load`] writes what the load changed.
    pub fn load_partition(&self, records: Vec<(Bytes, Bytes)>, image: &MetadataImage) {
        if records.is_empty() {
            return;
        }
        self.lock().load(records, monotonic_ms(), &Image(image));
    }

    /// After a load: the groups whose topics changed while no node served them move to a
    /// new epoch (their records are written), and restored sessions are timed.
    pub fn after_load(&self) {
        self.shared.apply(|_| ());
        self.wake_timer();
    }

    /// Drops the groups `gone` selects (their partition is led elsewhere now). Takes only
    /// the core's lock.
    pub fn unload_partition(&self, gone: impl Fn(&str) -> bool) {
        self.lock().unload(gone);
    }

    /// ConsumerGroupHeartbeat against the current metadata image.
    ///
    /// # Errors
    /// As [`ConsumerGroupCore::heartbeat`].
    pub fn heartbeat(
        &self,
        req: HeartbeatRequest,
        image: &MetadataImage,
    ) -> Result<HeartbeatResponse, ConsumerGroupError> {
        // Only v0 members are named by the broker; v1 clients name themselves (KIP-1082).
        let fresh = Uuid::new_v4().to_string();
        let group_id = req.group_id.clone();
        let (r, failed) = self
            .shared
            .apply_reporting(|core| core.heartbeat(monotonic_ms(), req, &fresh, &Image(image)));
        self.wake_timer();
        // The group's records are not in the log: the member is told, as Kafka's runtime
        // fails a heartbeat whose write failed (NOT_COORDINATOR: it looks the coordinator up
        // and heartbeats again).
        if failed.contains(&group_id) {
            return Err(ConsumerGroupError::NotCoordinator);
        }
        r
    }

    /// DeleteGroups of a consumer group: deletes it when it is empty (its records go with its
    /// offsets, which the caller deletes).
    ///
    /// # Errors
    ///
    /// [`DeleteConsumerGroupError::NotConsumerGroup`] when no consumer group has this id,
    /// [`DeleteConsumerGroupError::NonEmpty`] when the group has members.
    pub fn delete(&self, group_id: &str) -> Result<(), DeleteConsumerGroupError> {
        self.shared.apply(|core| core.delete(group_id))
    }

    /// Whether a consumer group with members has this id.
    #[must_use]
    pub fn is_active(&self, group_id: &str) -> bool {
        self.lock()
            .group(group_id)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// The topics the members of a consumer group subscribe to; `None` if there is no
    /// consumer group with this id.
    #[must_use]
    pub fn subscribed_topics(&self, group_id: &str) -> Option<std::collections::BTreeSet<String>> {
        self.lock()
            .group(group_id)
            .map(super::group::ConsumerGroup::subscribed_topics)
    }

    /// Deletes the empty consumer groups that have no committed offsets left (after offset
    /// expiry), with tombstones for their records.
    pub fn delete_empty_groups_without_offsets(&self, has_offsets: impl Fn(&str) -> bool) -> usize {
        // `has_offsets` takes a `__consumer_offsets` partition's lock, which comes before the
        // core's (a partition's load hands its groups to the core under it): ask it with the
        // core unlocked, then delete the groups still empty.
        // A group that emptied meanwhile waits for the next pass.
        let empty = self.lock().empty_group_ids();
        let without_offsets: std::collections::BTreeSet<String> =
            empty.into_iter().filter(|g| !has_offsets(g)).collect();
        self.shared
            .apply(|core| core.delete_empty_groups(|g| !without_offsets.contains(g)))
    }

    /// Frees the id of an empty consumer group for a classic group.
    ///
    /// # Errors
    ///
    /// [`ConsumerGroupInUse::HasMembers`] when the group has members.
    pub fn remove_if_empty(&self, group_id: &str) -> Result<(), ConsumerGroupInUse> {
        self.shared.apply(|core| core.remove_if_empty(group_id))
    }

    /// Kafka's state name of a consumer group, `None` if there is none with this id.
    #[must_use]
    pub fn group_state(&self, group_id: &str) -> Option<&'static str> {
        self.lock()
            .group(group_id)
            .map(super::group::ConsumerGroup::state)
    }

    /// ListGroups.
    #[must_use]
    pub fn list(&self, states: &[String]) -> Vec<ListedConsumerGroup> {
        self.lock().list(states)
    }

    /// ConsumerGroupDescribe.
    #[must_use]
    pub fn describe(&self, group_id: &str) -> Option<DescribedConsumerGroup> {
        self.lock().describe(group_id)
    }

    /// See [`ConsumerGroupCore::validate_offset_commit`].
    #[must_use]
    pub fn validate_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> Option<Result<(), ConsumerGroupError>> {
        self.lock()
            .validate_offset_commit(group_id, member_id, member_epoch, api_version)
    }

    /// See [`ConsumerGroupCore::validate_offset_fetch`].
    #[must_use]
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Option<Result<(), ConsumerGroupError>> {
        self.lock()
            .validate_offset_fetch(group_id, member_id, member_epoch)
    }
}

/// Sleeps until the earliest deadline (or a wake-up), then expires what is due.
async fn run_timer(shared: Arc<Shared>) {
    loop {
        shared.timer.wait(|| shared.core().next_deadline()).await;
        shared.apply(|core| core.tick(monotonic_ms()));
    }
}
