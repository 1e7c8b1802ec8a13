//! Whether this node may serve a partition's data path (Produce, consumer Fetch, ListOffsets,
//! OffsetForLeaderEpoch), as the metadata image says.
//!
//! The checks run in Kafka's order (`ReplicaManager.getPartitionOrException`, then
//! `Partition.getLocalLog`): a partition the image does not know is UNKNOWN_TOPIC_OR_PARTITION;
//! one whose log could not be opened here is KAFKA_STORAGE_ERROR; one without a log here
//! (another node's, or one this node leads but has not opened yet) is NOT_LEADER_OR_FOLLOWER.
//! For a hosted partition the request's `current_leader_epoch` is checked first (KIP-320:
//! older than the image's is FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH, -1 checks
//! nothing), and only then whether this node is the leader.
//!
//! A consumer's Fetch v11+ (which carries client metadata, KIP-392) is the exception to the
//! last check: a follower replica serves it too ([`check_read`]), as Kafka's `FetchParams`
//! lets it (`fetchOnlyFromLeader` only for follower fetches and consumers without client
//! metadata). ListOffsets and OffsetForLeaderEpoch stay with the leader, as in Kafka.

use std::sync::Arc;

use strata_kraft::{MetadataImage, PartitionImage};

use super::Partition;
use crate::broker::Broker;

/// Kafka's `RecordBatch.NO_PARTITION_LEADER_EPOCH`: a `current_leader_epoch` that asks for no
/// check.
pub const NO_LEADER_EPOCH: i32 = -1;

/// Why this node does not serve a partition's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadershipError {
    /// The image has no such topic or partition.
    UnknownTopicOrPartition,
    /// The partition's log could not be opened at start (Kafka: an offline log directory).
    Offline,
    /// Another node leads it, or this node has no log of it (yet).
    NotLeaderOrFollower,
    /// The request's `current_leader_epoch` is older than the image's.
    FencedLeaderEpoch,
    /// The request's `current_leader_epoch` is newer than the image's: this node's metadata
    /// is behind the client's.
    UnknownLeaderEpoch,
    /// The log could not record the leader's epoch (its checkpoint could not be written).
    Storage,
}

/// Where this node stands with a partition's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalLog {
    /// Open and served.
    Online,
    /// It could not be opened at start.
    Offline,
    /// There is none here.
    Absent,
}

/// Kafka's order of checks for one partition; `Ok` carries the image's leader epoch.
///
/// # Errors
///
/// The first [`LeadershipError`] in the order the module docs give.
pub fn check(
    partition: Option<&PartitionImage>,
    node_id: i32,
    local: LocalLog,
    current_leader_epoch: i32,
) -> Result<i32, LeadershipError> {
    let Some(p) = partition else {
        return Err(LeadershipError::UnknownTopicOrPartition);
    };
    match local {
        LocalLog::Offline => return Err(LeadershipError::Offline),
        LocalLog::Absent => return Err(LeadershipError::NotLeaderOrFollower),
        LocalLog::Online => {}
    }
    // Kafka's `checkCurrentLeaderEpoch`, before the leadership check.
    if current_leader_epoch != NO_LEADER_EPOCH {
        if p.leader_epoch > current_leader_epoch {
            return Err(LeadershipError::FencedLeaderEpoch);
        }
        if p.leader_epoch < current_leader_epoch {
            return Err(LeadershipError::UnknownLeaderEpoch);
        }
    }
    if p.leader != node_id {
        return Err(LeadershipError::NotLeaderOrFollower);
    }
    Ok(p.leader_epoch)
}

/// Who serves a consumer's read of a partition on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadRole {
    /// The leader, in the image's leader epoch.
    Leader(i32),
    /// A follower replica (KIP-392), reading up to its own high watermark.
    Follower,
}

/// [`check`] for a consumer's read that a follower may serve (`from_follower`: a Fetch
/// v11+): the same checks in the same order, except that a node that holds the log, passes
/// the epoch check and is among the image's replicas without leading serves it as a
/// follower (Kafka's `Partition.localLogWithEpochOrThrow` with `requireLeader = false`).
///
/// # Errors
///
/// As [`check`]; NOT_LEADER_OR_FOLLOWER also for a node with a log that the image no
/// longer counts among the replicas.
pub fn check_read(
    partition: Option<&PartitionImage>,
    node_id: i32,
    local: LocalLog,
    current_leader_epoch: i32,
    from_follower: bool,
) -> Result<ReadRole, LeadershipError> {
    match check(partition, node_id, local, current_leader_epoch) {
        Ok(epoch) => Ok(ReadRole::Leader(epoch)),
        // `check` reaches the leadership test only for a log that is online here, after
        // the epoch check.
        Err(LeadershipError::NotLeaderOrFollower)
            if from_follower
                && local == LocalLog::Online
                && partition.is_some_and(|p| p.replicas.contains(&node_id)) =>
        {
            Ok(ReadRole::Follower)
        }
        Err(e) => Err(e),
    }
}

/// A partition a consumer's read is served from here, and in which role.
pub struct Readable {
    /// The partition.
    pub partition: Arc<Partition>,
    /// Leader or follower.
    pub role: ReadRole,
}

/// The partition `topic`-`index` for a consumer's read: as [`leader_partition`], or, with
/// `from_follower` (a Fetch v11+), as a follower replica too ([`check_read`]).
///
/// # Errors
///
/// See [`check_read`]; [`LeadershipError::Storage`] as [`leader_partition`].
pub fn readable_partition(
    broker: &Broker,
    image: &MetadataImage,
    topic: &str,
    index: i32,
    current_leader_epoch: i32,
    from_follower: bool,
) -> Result<Readable, LeadershipError> {
    let (partition_image, hosted, local) = locate(broker, image, topic, index);
    let role = check_read(
        partition_image,
        broker.config.node_id,
        local,
        current_leader_epoch,
        from_follower,
    )?;
    match (role, hosted) {
        (ReadRole::Follower, Some(partition)) => Ok(Readable { partition, role }),
        _ => leader_partition(broker, image, topic, index, current_leader_epoch).map(|led| {
            Readable {
                role: ReadRole::Leader(led.leader_epoch),
                partition: led.partition,
            }
        }),
    }
}

/// The image's record of a partition, its log here if it is open, and where the log stands.
fn locate<'a>(
    broker: &Broker,
    image: &'a MetadataImage,
    topic: &str,
    index: i32,
) -> (Option<&'a PartitionImage>, Option<Arc<Partition>>, LocalLog) {
    let partition_image = partition_image(image, topic, index);
    let hosted = partition_image.and_then(|_| broker.partition(topic, index));
    let local = match (&hosted, partition_image) {
        (Some(_), _) => LocalLog::Online,
        (None, Some(_)) if broker.is_offline(topic, index) => LocalLog::Offline,
        (None, _) => LocalLog::Absent,
    };
    (partition_image, hosted, local)
}

/// A partition this node leads, with the leader epoch the image gives it.
pub struct Led {
    /// The partition.
    pub partition: Arc<Partition>,
    /// The image's leader epoch: what appends are stamped with.
    pub leader_epoch: i32,
}

/// The partition `topic`-`index` if this node leads it in `image` and `current_leader_epoch`
/// matches. On success the log has the leader epoch in its cache (Kafka assigns it when
/// the broker becomes leader, so that OffsetForLeaderEpoch for the current epoch answers the
/// log end even before anything is written in it).
///
/// # Errors
///
/// See [`check`]; [`LeadershipError::Storage`] when the epoch cache cannot be written.
pub fn leader_partition(
    broker: &Broker,
    image: &MetadataImage,
    topic: &str,
    index: i32,
    current_leader_epoch: i32,
) -> Result<Led, LeadershipError> {
    let (partition_image, hosted, local) = locate(broker, image, topic, index);
    let leader_epoch = check(
        partition_image,
        broker.config.node_id,
        local,
        current_leader_epoch,
    )?;
    let partition = hosted.ok_or(LeadershipError::NotLeaderOrFollower)?;
    if let Err(e) = partition.become_leader(leader_epoch) {
        tracing::warn!(topic, partition = index, leader_epoch, error = %e,
            "cannot record the leader epoch in the partition's epoch cache");
        return Err(LeadershipError::Storage);
    }
    Ok(Led {
        partition,
        leader_epoch,
    })
}

/// The image's record of one partition.
#[must_use]
pub fn partition_image<'a>(
    image: &'a MetadataImage,
    topic: &str,
    index: i32,
) -> Option<&'a PartitionImage> {
    let i = usize::try_from(index).ok()?;
    image
        .topics
        .get(topic)
        .and_then(|t| t.partitions.get(i))
        .filter(|p| p.partition == index)
}

/// KIP-951: the leader a client should move to, as Kafka's `KafkaApis.getCurrentLeader`
/// answers it: the image's leader and leader epoch (-1, -1 for a partition it does not know),
/// and the leader's endpoint if it is registered and not fenced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentLeader {
    /// The leader's node id, or -1.
    pub leader_id: i32,
    /// The image's leader epoch, or -1.
    pub leader_epoch: i32,
    /// The leader's advertised endpoint, if it is alive.
    pub endpoint: Option<LeaderEndpoint>,
}

/// A leader's advertised endpoint (KIP-951's `NodeEndpoints` entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEndpoint {
    /// The node id.
    pub node_id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
}

/// The current leader of `topic`-`index` for a KIP-951 answer.
#[must_use]
pub fn current_leader(image: &MetadataImage, topic: &str, index: i32) -> CurrentLeader {
    let Some(p) = partition_image(image, topic, index) else {
        return CurrentLeader {
            leader_id: -1,
            leader_epoch: -1,
            endpoint: None,
        };
    };
    let endpoint = image
        .brokers
        .get(&p.leader)
        .filter(|b| !b.fenced)
        .map(|b| LeaderEndpoint {
            node_id: b.node_id,
            host: b.host.clone(),
            port: i32::from(b.port),
            rack: b.rack.clone(),
        });
    CurrentLeader {
        leader_id: p.leader,
        leader_epoch: p.leader_epoch,
        endpoint,
    }
}

/// Whether an error sends the client to the current leader (KIP-951): Produce fills
/// `current_leader` for NOT_LEADER_OR_FOLLOWER, Fetch also for FENCED_LEADER_EPOCH.
#[must_use]
pub fn redirects(e: LeadershipError, fenced_too: bool) -> bool {
    match e {
        LeadershipError::NotLeaderOrFollower => true,
        LeadershipError::FencedLeaderEpoch => fenced_too,
        LeadershipError::UnknownTopicOrPartition
        | LeadershipError::Offline
        | LeadershipError::UnknownLeaderEpoch
        | LeadershipError::Storage => false,
    }
}

#[cfg(test)]
mod tests {
    use strata_kraft::record::LeaderRecoveryState;

    use super::*;

    fn image_partition(leader: i32, leader_epoch: i32) -> PartitionImage {
        PartitionImage {
            partition: 0,
            leader,
            leader_epoch,
            partition_epoch: 0,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader_recovery_state: LeaderRecoveryState::Recovered,
        }
    }

    #[test]
    fn checks_run_in_kafkas_order() {
        use LeadershipError::*;
        use LocalLog::*;
        let led = image_partition(1, 5);
        let followed = image_partition(2, 5);
        // Unknown first, whatever else holds.
        assert_eq!(check(None, 1, Online, 3), Err(UnknownTopicOrPartition));
        // No log here: offline or absent, before any epoch check.
        assert_eq!(
            check(Some(&led), 1, LocalLog::Offline, 3),
            Err(LeadershipError::Offline)
        );
        assert_eq!(check(Some(&led), 1, Absent, 3), Err(NotLeaderOrFollower));
        assert_eq!(check(Some(&led), 1, Absent, -1), Err(NotLeaderOrFollower));
        // The epoch check comes before the leadership check (Partition.getLocalLog).
        assert_eq!(check(Some(&followed), 1, Online, 4), Err(FencedLeaderEpoch));
        assert_eq!(
            check(Some(&followed), 1, Online, 6),
            Err(UnknownLeaderEpoch)
        );
        assert_eq!(
            check(Some(&followed), 1, Online, 5),
            Err(NotLeaderOrFollower)
        );
        assert_eq!(
            check(Some(&followed), 1, Online, -1),
            Err(NotLeaderOrFollower)
        );
        // The leader serves the current epoch, or no epoch.
        assert_eq!(check(Some(&led), 1, Online, 4), Err(FencedLeaderEpoch));
        assert_eq!(check(Some(&led), 1, Online, 6), Err(UnknownLeaderEpoch));
        assert_eq!(check(Some(&led), 1, Online, 5), Ok(5));
        assert_eq!(check(Some(&led), 1, Online, -1), Ok(5));
        // Any other value is an epoch, as in Kafka (only -1 means "none").
        assert_eq!(check(Some(&led), 1, Online, -2), Err(FencedLeaderEpoch));
    }

    /// KIP-392: a consumer's Fetch v11+ is served by a follower replica after the same
    /// checks; without client metadata (older Fetch), or on a node that is not a replica,
    /// it is NOT_LEADER_OR_FOLLOWER as before.
    #[test]
    fn a_follower_serves_consumer_reads_that_allow_it() {
        use LeadershipError::*;
        use LocalLog::*;
        let followed = image_partition(2, 5);
        let led = image_partition(1, 5);
        let read = |p: &PartitionImage, node, local, epoch, from_follower| {
            check_read(Some(p), node, local, epoch, from_follower)
        };
        assert_eq!(read(&followed, 1, Online, 5, true), Ok(ReadRole::Follower));
        assert_eq!(read(&followed, 1, Online, -1, true), Ok(ReadRole::Follower));
        assert_eq!(
            read(&followed, 1, Online, 5, false),
            Err(NotLeaderOrFollower)
        );
        // The epoch is checked on a follower as on the leader.
        assert_eq!(read(&followed, 1, Online, 4, true), Err(FencedLeaderEpoch));
        assert_eq!(read(&followed, 1, Online, 6, true), Err(UnknownLeaderEpoch));
        // No log here, or a log the image no longer counts as a replica.
        assert_eq!(
            read(&followed, 1, Absent, 5, true),
            Err(NotLeaderOrFollower)
        );
        assert_eq!(
            read(&followed, 1, LocalLog::Offline, 5, true),
            Err(LeadershipError::Offline)
        );
        assert_eq!(
            read(&followed, 3, Online, 5, true),
            Err(NotLeaderOrFollower)
        );
        // The leader is the leader either way.
        assert_eq!(read(&led, 1, Online, 5, true), Ok(ReadRole::Leader(5)));
        assert_eq!(
            check_read(None, 1, Online, 5, true),
            Err(UnknownTopicOrPartition)
        );
    }
}
