//! The tokio side of the consumer-group coordinator: one mutex around the sans-IO
//! [`Coordinator`] and a task that sleeps until the next session or revocation deadline.

use std::sync::{Arc, Mutex, MutexGuard};

use strata_kraft::MetadataImage;
use uuid::Uuid;

use super::coordinator::{
    ConsumerGroupConfig, Coordinator, DescribedConsumerGroup, HeartbeatRequest, HeartbeatResponse,
    ListedConsumerGroup, TopicMetadata,
};
use super::error::ConsumerGroupError;
use crate::deadline_timer::DeadlineTimer;
use crate::now_ms;

struct Shared {
    core: Mutex<Coordinator>,
    /// Sleeps until the next session or revocation deadline.
    timer: DeadlineTimer,
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
}

impl ConsumerGroupCoordinator {
    /// A coordinator with no groups.
    #[must_use]
    pub fn new(cfg: ConsumerGroupConfig) -> Self {
        ConsumerGroupCoordinator {
            shared: Arc::new(Shared {
                core: Mutex::new(Coordinator::new(cfg)),
                timer: DeadlineTimer::default(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Coordinator> {
        self.shared
            .core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wake_timer(&self) {
        let shared = self.shared.clone();
        self.shared.timer.wake(|| run_timer(shared));
    }

    /// ConsumerGroupHeartbeat against the current metadata image.
    ///
    /// # Errors
    /// As [`Coordinator::heartbeat`].
    pub fn heartbeat(
        &self,
        req: HeartbeatRequest,
        image: &MetadataImage,
    ) -> Result<HeartbeatResponse, ConsumerGroupError> {
        // Only v0 members are named by the broker; v1 clients name themselves (KIP-1082).
        let fresh = Uuid::new_v4().to_string();
        let r = self.lock().heartbeat(now_ms(), req, &fresh, &Image(image));
        self.wake_timer();
        r
    }

    /// Whether a consumer group with members has this id.
    #[must_use]
    pub fn is_active(&self, group_id: &str) -> bool {
        self.lock()
            .group(group_id)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// Frees the id of an empty consumer group for a classic group; false if it has members.
    pub fn remove_if_empty(&self, group_id: &str) -> bool {
        self.lock().remove_if_empty(group_id)
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

    /// See [`Coordinator::validate_offset_commit`]; the error is a Kafka code.
    #[must_use]
    pub fn validate_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> Option<Result<(), i16>> {
        self.lock()
            .validate_offset_commit(group_id, member_id, member_epoch, api_version)
            .map(|r| r.map_err(|e| crate::error::consumer_group_error_code(&e)))
    }

    /// See [`Coordinator::validate_offset_fetch`]; the error is a Kafka code.
    #[must_use]
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Option<Result<(), i16>> {
        self.lock()
            .validate_offset_fetch(group_id, member_id, member_epoch)
            .map(|r| r.map_err(|e| crate::error::consumer_group_error_code(&e)))
    }
}

/// Sleeps until the earliest deadline (or a wake-up), then expires what is due.
async fn run_timer(shared: Arc<Shared>) {
    let core = || {
        shared
            .core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    loop {
        shared.timer.wait(|| core().next_deadline()).await;
        core().tick(now_ms());
    }
}
