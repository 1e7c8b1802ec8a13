//! [`BrokerHeartbeats`]: when each broker last heartbeated and how far it has read the
//! metadata log, and the broker state a heartbeat leads to (Kafka's
//! `BrokerHeartbeatManager`). In memory only, like Kafka's: after a failover the new
//! active controller starts every session at its own clock.

use std::collections::BTreeMap;

use crate::MetadataImage;

/// One broker's session as the controller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BrokerSession {
    /// When the broker last registered or heartbeated; the session expires
    /// `broker.session.timeout.ms` after it.
    last_contact_ms: i64,
    /// The metadata offset the broker last reported it has applied, -1 before any.
    metadata_offset: i64,
    /// The last offset written when the broker entered controlled shutdown: it may stop
    /// once every live broker has read past it, so none still sees it as a leader.
    controlled_shutdown_offset: Option<i64>,
}

/// The controller's record of broker sessions. Fencing itself lives in the image; this
/// holds only what is not replicated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerHeartbeats {
    /// `broker.session.timeout.ms`.
    session_timeout_ms: i64,
    /// Sessions by broker id.
    sessions: BTreeMap<i32, BrokerSession>,
}

/// Where a broker stands, before or after a heartbeat (Kafka's `BrokerControlState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerState {
    /// May not lead or be in an ISR.
    Fenced,
    /// Live.
    Unfenced,
    /// Moving its leaderships away before it stops.
    ControlledShutdown,
    /// May stop now: it leads nothing, and it is fenced.
    ShutdownNow,
}

impl BrokerState {
    /// The state the image holds for a broker: fenced first, as Kafka reads it.
    pub(crate) fn of(broker: &crate::BrokerImage) -> Self {
        if broker.fenced {
            Self::Fenced
        } else if broker.in_controlled_shutdown {
            Self::ControlledShutdown
        } else {
            Self::Unfenced
        }
    }
}

/// What a heartbeat asks for, as far as the state transition is concerned.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeartbeatIntent {
    /// The broker asks to stay (or become) fenced.
    pub(crate) want_fence: bool,
    /// The broker wants to stop.
    pub(crate) want_shut_down: bool,
    /// It has applied the metadata log up to its own registration record.
    pub(crate) caught_up: bool,
    /// It still leads some partition.
    pub(crate) has_leaderships: bool,
    /// Its registration is marked in controlled shutdown.
    pub(crate) in_controlled_shutdown: bool,
}

impl BrokerHeartbeats {
    /// No sessions yet; sessions last `session_timeout_ms` (`broker.session.timeout.ms`).
    #[must_use]
    pub fn new(session_timeout_ms: i64) -> Self {
        BrokerHeartbeats {
            session_timeout_ms,
            sessions: BTreeMap::new(),
        }
    }

    /// Starts a session at `now_ms` for every registered broker that has none: what a
    /// controller does on becoming active, so brokers get a full session to find it
    /// before being fenced.
    ///
    /// `this_process` is the broker id and incarnation of the broker running in the
    /// controller's own process (a combined node). A registration of that id with another
    /// incarnation is that process's previous life, dead for certain, so it gets no
    /// session: it is fenced at once, and the restarted broker's registration is not refused
    /// as a duplicate for a whole session timeout (as a lone node restarted after a crash
    /// would otherwise be).
    pub fn activate(
        &mut self,
        image: &MetadataImage,
        now_ms: i64,
        this_process: Option<(i32, uuid::Uuid)>,
    ) {
        for (&id, registration) in &image.brokers {
            if this_process.is_some_and(|(me, incarnation)| {
                id == me && registration.incarnation_id != incarnation
            }) {
                continue;
            }
            self.sessions.entry(id).or_insert(BrokerSession {
                last_contact_ms: now_ms,
                metadata_offset: -1,
                controlled_shutdown_offset: None,
            });
        }
    }

    /// A (re)registration: a fresh session with nothing read yet.
    pub(crate) fn register(&mut self, broker_id: i32, now_ms: i64) {
        self.sessions.insert(
            broker_id,
            BrokerSession {
                last_contact_ms: now_ms,
                metadata_offset: -1,
                controlled_shutdown_offset: None,
            },
        );
    }

    /// A heartbeat arrived.
    pub(crate) fn touch(&mut self, broker_id: i32, now_ms: i64, metadata_offset: i64) {
        let session = self.sessions.entry(broker_id).or_insert(BrokerSession {
            last_contact_ms: now_ms,
            metadata_offset,
            controlled_shutdown_offset: None,
        });
        session.last_contact_ms = session.last_contact_ms.max(now_ms);
        session.metadata_offset = metadata_offset;
    }

    /// Forgets a broker (it unregistered).
    pub(crate) fn remove(&mut self, broker_id: i32) {
        self.sessions.remove(&broker_id);
    }

    /// Moves where a broker's controlled shutdown began to `offset`, for a log that gives
    /// all of one operation's records one offset (the Raft driver writes an operation as
    /// one entry), where the heartbeat's own per-record count would overshoot.
    pub fn move_controlled_shutdown_offset(&mut self, broker_id: i32, offset: i64) {
        if let Some(s) = self.sessions.get_mut(&broker_id) {
            s.controlled_shutdown_offset = Some(offset);
        }
    }

    /// Records where controlled shutdown began, unless it already had.
    pub(crate) fn set_controlled_shutdown_offset(&mut self, broker_id: i32, offset: i64) {
        if let Some(s) = self.sessions.get_mut(&broker_id) {
            s.controlled_shutdown_offset.get_or_insert(offset);
        }
    }

    /// Whether the broker heartbeated within the session timeout. A broker without a
    /// session has none.
    #[must_use]
    pub fn has_valid_session(&self, broker_id: i32, now_ms: i64) -> bool {
        self.sessions
            .get(&broker_id)
            .is_some_and(|s| now_ms.saturating_sub(s.last_contact_ms) <= self.session_timeout_ms)
    }

    /// The unfenced broker whose session expired longest ago, if any. A registered,
    /// unfenced broker without a session counts as expired: nothing vouches for it.
    #[must_use]
    pub fn next_expired(&self, image: &MetadataImage, now_ms: i64) -> Option<i32> {
        image
            .brokers
            .values()
            .filter(|b| !b.fenced && !self.has_valid_session(b.node_id, now_ms))
            .min_by_key(|b| {
                (
                    self.sessions
                        .get(&b.node_id)
                        .map_or(i64::MIN, |s| s.last_contact_ms),
                    b.node_id,
                )
            })
            .map(|b| b.node_id)
    }

    /// The lowest metadata offset any unfenced broker has reported (Kafka's
    /// `lowestActiveOffset`); -1 if one has reported none.
    fn lowest_active_offset(&self, image: &MetadataImage) -> i64 {
        image
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| {
                self.sessions
                    .get(&b.node_id)
                    .map_or(-1, |s| s.metadata_offset)
            })
            .min()
            .unwrap_or(i64::MAX)
    }

    /// Kafka's `calculateNextBrokerState`: the state a heartbeat moves the broker to.
    pub(crate) fn next_state(
        &self,
        image: &MetadataImage,
        broker_id: i32,
        current: BrokerState,
        intent: HeartbeatIntent,
    ) -> BrokerState {
        match current {
            BrokerState::Fenced | BrokerState::ShutdownNow => {
                if intent.want_shut_down {
                    BrokerState::ShutdownNow
                } else if !intent.want_fence && intent.caught_up && !intent.in_controlled_shutdown {
                    // KIP-631: a broker is unfenced once it has replayed the log up to its
                    // own registration, so it serves no metadata older than that. Unlike
                    // Kafka, one fenced at the end of its controlled shutdown stays fenced
                    // until it registers again: unfenced, it would be live yet "shutting
                    // down", electable in the unfencing batch but unfit to lead.
                    BrokerState::Unfenced
                } else {
                    BrokerState::Fenced
                }
            }
            BrokerState::Unfenced => {
                if intent.want_fence {
                    if intent.want_shut_down {
                        BrokerState::ShutdownNow
                    } else {
                        BrokerState::Fenced
                    }
                } else if intent.want_shut_down {
                    if intent.has_leaderships {
                        BrokerState::ControlledShutdown
                    } else {
                        BrokerState::ShutdownNow
                    }
                } else {
                    BrokerState::Unfenced
                }
            }
            BrokerState::ControlledShutdown => {
                if intent.has_leaderships {
                    return BrokerState::ControlledShutdown;
                }
                let started = self
                    .sessions
                    .get(&broker_id)
                    .and_then(|s| s.controlled_shutdown_offset);
                match started {
                    // Every live broker has seen the leadership moves: safe to stop.
                    Some(offset) if offset <= self.lowest_active_offset(image) => {
                        BrokerState::ShutdownNow
                    }
                    // Not yet, or this controller never saw the shutdown begin (a
                    // failover): wait for the next heartbeat to record it.
                    _ => BrokerState::ControlledShutdown,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::Cluster;
    use super::*;

    #[test]
    fn a_new_active_controller_gives_every_broker_a_full_session() {
        let c = Cluster::with_live_brokers(2);
        // A controller that took over has no sessions: nothing vouches for the brokers.
        let mut fresh = BrokerHeartbeats::new(1_000);
        assert_eq!(fresh.next_expired(&c.image, 0), Some(1));
        fresh.activate(&c.image, 5_000, None);
        assert!(fresh.has_valid_session(2, 6_000));
        assert_eq!(fresh.next_expired(&c.image, 6_000), None);
        assert_eq!(fresh.next_expired(&c.image, 6_001), Some(1));
    }

    #[test]
    fn the_previous_life_of_the_controller_s_own_broker_gets_no_session() {
        let c = Cluster::with_live_brokers(2);
        let old = c.image.brokers[&1].incarnation_id;
        let restarted = uuid::Uuid::from_u128(0xfeed);
        assert_ne!(old, restarted);
        let mut fresh = BrokerHeartbeats::new(1_000);
        fresh.activate(&c.image, 5_000, Some((1, restarted)));
        assert!(!fresh.has_valid_session(1, 5_000));
        assert!(fresh.has_valid_session(2, 5_000));
        assert_eq!(fresh.next_expired(&c.image, 5_000), Some(1));
        // The same incarnation (leadership came back to a live process) keeps its session.
        let mut again = BrokerHeartbeats::new(1_000);
        again.activate(&c.image, 5_000, Some((1, old)));
        assert!(again.has_valid_session(1, 5_000));
    }

    #[test]
    fn the_stalest_session_expires_first() {
        let c = Cluster::with_live_brokers(3);
        let mut hb = BrokerHeartbeats::new(100);
        hb.touch(1, 50, 0);
        hb.touch(2, 10, 0);
        hb.touch(3, 30, 0);
        assert_eq!(hb.next_expired(&c.image, 140), Some(2));
        assert_eq!(hb.next_expired(&c.image, 110), None);
        hb.remove(2);
        assert!(!hb.has_valid_session(2, 0));
    }
}
