//! Broker lifecycle: registration, heartbeats (unfencing, controlled shutdown), fencing
//! on session expiry, unregistration. Each returns the records to append, in Kafka's
//! order: partition changes that take a broker out of service come before the record
//! that fences it, and the record that unfences a broker before the elections it
//! enables.

use uuid::Uuid;

use super::heartbeats::{BrokerState, HeartbeatIntent};
use super::partition_change::leader_and_isr_updates;
use super::{BrokerHeartbeats, ClusterControlConfig, all_partitions};
use crate::record::{
    BrokerEndpoint, BrokerFeature, BrokerRegistrationChangeRecord, FenceBrokerRecord,
    FencingChange, MetadataRecord, NO_LEADER, RegisterBrokerRecord, UnfenceBrokerRecord,
    UnregisterBrokerRecord,
};
use crate::{BrokerImage, ClusterControlError, MetadataImage};

/// A BrokerRegistration request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistrationRequest {
    /// `node.id`.
    pub broker_id: i32,
    /// Random per process start (KIP-631), so a restart is told from a retry.
    pub incarnation_id: Uuid,
    /// Every listener, the first being the one clients are told about today.
    pub listeners: Vec<BrokerEndpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// Supported feature ranges (KIP-584).
    pub features: Vec<BrokerFeature>,
}

/// A BrokerHeartbeat request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerHeartbeatRequest {
    /// `node.id`.
    pub broker_id: i32,
    /// The epoch its registration was given.
    pub broker_epoch: i64,
    /// The highest metadata offset the broker has applied.
    pub current_metadata_offset: i64,
    /// The broker asks to be (or stay) fenced, e.g. while it is still loading logs.
    pub want_fence: bool,
    /// The broker wants to stop: start (or continue) controlled shutdown.
    pub want_shut_down: bool,
}

/// The answer to a heartbeat (Kafka's `BrokerHeartbeatReply`), as of after the returned
/// records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerHeartbeatReply {
    /// The broker has applied the log up to its own registration.
    pub is_caught_up: bool,
    /// The broker is fenced.
    pub is_fenced: bool,
    /// The broker is in controlled shutdown, waiting for its leaderships to move.
    pub in_controlled_shutdown: bool,
    /// The broker may stop now.
    pub should_shut_down: bool,
}

/// Registers a broker (Kafka's `ClusterControlManager.registerBroker`). Returns the
/// broker epoch and the records. `next_offset` is the metadata offset the first returned
/// record will take; the registration's epoch is the offset of its own record (KIP-631).
///
/// A registration always starts fenced; the broker is unfenced by the first heartbeat
/// that shows it has caught up. A re-registration replaces the old one whole, so the
/// broker is first taken out of every ISR and leadership (like a fence), since it may
/// have lost data it had acknowledged.
///
/// # Errors
///
/// [`ClusterControlError::DuplicateBrokerRegistration`] when another incarnation of the
/// id is registered, unfenced, and its session is still live;
/// [`ClusterControlError::InvalidRegistration`] without listeners.
pub fn register_broker(
    image: &MetadataImage,
    heartbeats: &mut BrokerHeartbeats,
    config: &ClusterControlConfig,
    req: &BrokerRegistrationRequest,
    next_offset: i64,
    now_ms: i64,
) -> Result<(i64, Vec<MetadataRecord>), ClusterControlError> {
    if req.listeners.is_empty() {
        return Err(ClusterControlError::InvalidRegistration {
            broker_id: req.broker_id,
            reason: "no listeners",
        });
    }
    let mut records = Vec::new();
    if let Some(existing) = image.brokers.get(&req.broker_id) {
        // A fenced broker has no session to protect (Kafka's `hasValidSession`).
        if existing.incarnation_id != req.incarnation_id
            && !existing.fenced
            && heartbeats.has_valid_session(req.broker_id, now_ms)
        {
            return Err(ClusterControlError::DuplicateBrokerRegistration(
                req.broker_id,
            ));
        }
        records = leader_and_isr_updates(
            image,
            config,
            Some(req.broker_id),
            None,
            partitions_with_in_isr(image, req.broker_id),
        );
    }
    let offset_gap = i64::try_from(records.len()).unwrap_or(i64::MAX);
    let broker_epoch = next_offset.saturating_add(offset_gap);
    records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id: req.broker_id,
        incarnation_id: req.incarnation_id,
        broker_epoch,
        endpoints: req.listeners.clone(),
        features: req.features.clone(),
        rack: req.rack.clone(),
        fenced: true,
        in_controlled_shutdown: false,
    }));
    heartbeats.register(req.broker_id, now_ms);
    Ok((broker_epoch, records))
}

/// Handles a heartbeat (Kafka's `ReplicationControlManager.processBrokerHeartbeat`):
/// renews the session and moves the broker to its next state, with the records that
/// go with it. `next_offset` is the offset the first returned record will take.
///
/// - fenced and caught up (and not asking to stay fenced): unfenced, and leaderless
///   partitions whose ISR holds it get it as leader;
/// - live and wanting to shut down: controlled shutdown, which takes it out of every
///   ISR and moves its leaderships away (a partition whose only ISR member it is goes
///   leaderless);
/// - in controlled shutdown, leading nothing, and every live broker has read past the
///   shutdown's records: shut down now, which fences it.
///
/// # Errors
///
/// [`ClusterControlError::BrokerNotRegistered`] or
/// [`ClusterControlError::StaleBrokerEpoch`].
pub fn broker_heartbeat(
    image: &MetadataImage,
    heartbeats: &mut BrokerHeartbeats,
    config: &ClusterControlConfig,
    req: &BrokerHeartbeatRequest,
    next_offset: i64,
    now_ms: i64,
) -> Result<(BrokerHeartbeatReply, Vec<MetadataRecord>), ClusterControlError> {
    let broker = registered(image, req.broker_id, req.broker_epoch)?;
    heartbeats.touch(req.broker_id, now_ms, req.current_metadata_offset);
    let current = BrokerState::of(broker);
    // KIP-631: the registration's epoch is the offset of its record.
    let caught_up = req.current_metadata_offset >= broker.broker_epoch;
    let intent = HeartbeatIntent {
        want_fence: req.want_fence,
        want_shut_down: req.want_shut_down,
        caught_up,
        has_leaderships: leads_any(image, req.broker_id),
        in_controlled_shutdown: broker.in_controlled_shutdown,
    };
    let next = heartbeats.next_state(image, req.broker_id, current, intent);
    let mut records = Vec::new();
    if next != current {
        match next {
            BrokerState::Unfenced => {
                records.push(MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                    broker_id: req.broker_id,
                    broker_epoch: broker.broker_epoch,
                }));
                let leaderless = all_partitions(image).filter(|(_, p)| p.leader == NO_LEADER);
                records.extend(leader_and_isr_updates(
                    image,
                    config,
                    None,
                    Some(req.broker_id),
                    leaderless,
                ));
            }
            BrokerState::ControlledShutdown => {
                records.push(MetadataRecord::BrokerRegistrationChange(
                    BrokerRegistrationChangeRecord {
                        broker_id: req.broker_id,
                        broker_epoch: broker.broker_epoch,
                        fenced: FencingChange::None,
                        in_controlled_shutdown: true,
                    },
                ));
                records.extend(leader_and_isr_updates(
                    image,
                    config,
                    Some(req.broker_id),
                    None,
                    partitions_with_in_isr(image, req.broker_id),
                ));
            }
            BrokerState::Fenced | BrokerState::ShutdownNow if !broker.fenced => {
                records = fence_records(image, config, broker);
            }
            BrokerState::Fenced | BrokerState::ShutdownNow => {}
        }
    }
    if next == BrokerState::ControlledShutdown {
        // The last offset this heartbeat writes (or the last one written).
        let written = i64::try_from(records.len()).unwrap_or(i64::MAX);
        heartbeats
            .set_controlled_shutdown_offset(req.broker_id, next_offset.saturating_add(written) - 1);
    }
    let reply = BrokerHeartbeatReply {
        is_caught_up: caught_up,
        is_fenced: matches!(next, BrokerState::Fenced | BrokerState::ShutdownNow),
        in_controlled_shutdown: next == BrokerState::ControlledShutdown,
        should_shut_down: next == BrokerState::ShutdownNow,
    };
    Ok((reply, records))
}

/// Fences the live broker whose session expired longest ago (Kafka's
/// `maybeFenceOneStaleBroker`): the broker and its records, or `None` if every live
/// broker heartbeated within `broker.session.timeout.ms`. Call again after applying the
/// records until it returns `None`.
pub fn fence_stale_broker(
    image: &MetadataImage,
    heartbeats: &BrokerHeartbeats,
    config: &ClusterControlConfig,
    now_ms: i64,
) -> Option<(i32, Vec<MetadataRecord>)> {
    let id = heartbeats.next_expired(image, now_ms)?;
    let broker = image.brokers.get(&id)?;
    Some((id, fence_records(image, config, broker)))
}

/// Unregisters a broker (Kafka's UnregisterBroker API): takes it out of every ISR and
/// leadership, then removes the registration.
///
/// # Errors
///
/// [`ClusterControlError::BrokerNotRegistered`].
pub fn unregister_broker(
    image: &MetadataImage,
    heartbeats: &mut BrokerHeartbeats,
    config: &ClusterControlConfig,
    broker_id: i32,
) -> Result<Vec<MetadataRecord>, ClusterControlError> {
    let broker = image
        .brokers
        .get(&broker_id)
        .ok_or(ClusterControlError::BrokerNotRegistered(broker_id))?;
    let mut records = leader_and_isr_updates(
        image,
        config,
        Some(broker_id),
        None,
        partitions_with_in_isr(image, broker_id),
    );
    records.push(MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
        broker_id,
        broker_epoch: broker.broker_epoch,
    }));
    heartbeats.remove(broker_id);
    Ok(records)
}

/// Kafka's `handleBrokerFenced`: out of every ISR (but as a last member) and every
/// leadership, then the `FenceBrokerRecord`.
fn fence_records(
    image: &MetadataImage,
    config: &ClusterControlConfig,
    broker: &BrokerImage,
) -> Vec<MetadataRecord> {
    let mut records = leader_and_isr_updates(
        image,
        config,
        Some(broker.node_id),
        None,
        partitions_with_in_isr(image, broker.node_id),
    );
    records.push(MetadataRecord::FenceBroker(FenceBrokerRecord {
        broker_id: broker.node_id,
        broker_epoch: broker.broker_epoch,
    }));
    records
}

fn registered(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<&BrokerImage, ClusterControlError> {
    let broker = image
        .brokers
        .get(&broker_id)
        .ok_or(ClusterControlError::BrokerNotRegistered(broker_id))?;
    if broker.broker_epoch != broker_epoch {
        return Err(ClusterControlError::StaleBrokerEpoch {
            broker_id,
            requested: broker_epoch,
            current: broker.broker_epoch,
        });
    }
    Ok(broker)
}

/// Partitions whose ISR holds the broker (Kafka's `partitionsWithBrokerInIsr`), plus any
/// it leads; the two are the same set while the leader-in-ISR invariant holds.
fn partitions_with_in_isr(
    image: &MetadataImage,
    broker_id: i32,
) -> impl Iterator<Item = (&crate::TopicImage, &crate::PartitionImage)> {
    all_partitions(image).filter(move |(_, p)| p.isr.contains(&broker_id) || p.leader == broker_id)
}

fn leads_any(image: &MetadataImage, broker_id: i32) -> bool {
    all_partitions(image).any(|(_, p)| p.leader == broker_id)
}
