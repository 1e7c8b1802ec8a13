//! Which node coordinates a group, or a transactional id.
//!
//! A group lives in one `__consumer_offsets` partition ([`super::records::partition_for`]),
//! and, as in Kafka, its coordinator is that partition's leader. The controller places the
//! topic like any other (Kafka creates it on the first FindCoordinator, and so does a
//! cluster: [`ensure_topic`]; a lone node creates it once its broker is unfenced), so that
//! every node names the same coordinator for a group and a client that reconnects
//! elsewhere finds its committed offsets again.
//!
//! The partitions are replicated like any topic's, `offsets.topic.replication.factor`
//! replicas each (see `coordinator::offsets`): when the leader's node goes, the controller
//! elects another replica from the ISR, that node loads the partition's groups, and
//! FindCoordinator names it. Until the load is done its groups get
//! COORDINATOR_LOAD_IN_PROGRESS; a node the image names but that has not started the load
//! answers NOT_COORDINATOR, as any other node does.
//!
//! A transactional id is placed the same way, over `__transaction_state`
//! ([`txn_coordinator`], [`check_txn`]); that topic is created on the first FindCoordinator
//! for a transactional id, as Kafka creates it.

use std::sync::atomic::{AtomicBool, Ordering};

use strata_kraft::MetadataImage;

use crate::broker::Broker;
use crate::coordinator::InternalTopic;
use crate::coordinator::offsets::{OFFSETS_TOPIC, OffsetStoreError};
use crate::coordinator::runtime::CoordinatorError;
use crate::coordinator::txn::records::TRANSACTION_STATE_TOPIC;

/// Where a group's coordinator is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// This node.
    Local,
    /// Another live broker, by node id.
    Remote(i32),
    /// None right now: the topic is not created yet, or the partition's leader is offline.
    NotAvailable,
}

/// The coordinator of `group` as this node's image places it.
#[must_use]
pub fn coordinator(broker: &Broker, group: &str) -> Placement {
    let partition = broker.offsets.partition_for(group);
    leader_of(
        &broker.image(),
        OFFSETS_TOPIC,
        partition,
        broker.config.node_id,
    )
}

/// The coordinator of transactional id `id` as this node's image places it: the leader of
/// its `__transaction_state` partition.
#[must_use]
pub fn txn_coordinator(broker: &Broker, id: &str) -> Placement {
    let partition = broker.txns.partition_for(id);
    leader_of(
        &broker.image(),
        TRANSACTION_STATE_TOPIC,
        partition,
        broker.config.node_id,
    )
}

/// The leader of `topic`'s partition `partition` in `image`, seen from node `me`.
pub fn leader_of(image: &MetadataImage, topic: &str, partition: i32, me: i32) -> Placement {
    let leader = image
        .topics
        .get(topic)
        .and_then(|t| t.partitions.iter().find(|p| p.partition == partition))
        .map_or(-1, |p| p.leader);
    let live = image.brokers.get(&leader).is_some_and(|b| !b.fenced);
    match leader {
        l if l == me => Placement::Local,
        l if l >= 0 && live => Placement::Remote(l),
        _ => Placement::NotAvailable,
    }
}

/// Why this node does not coordinate a group, or a transactional id (its Kafka code is
/// [`crate::server::error::coordinator_unavailable_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorUnavailable {
    /// Another node does (NOT_COORDINATOR: the client looks the coordinator up again).
    Elsewhere,
    /// None does right now (COORDINATOR_NOT_AVAILABLE).
    NotAvailable,
    /// This node does, and is loading the group's partition (COORDINATOR_LOAD_IN_PROGRESS).
    Loading,
}

/// Kafka's check at the top of every group request: this node must coordinate `group`.
///
/// # Errors
///
/// [`CoordinatorUnavailable::Elsewhere`] when another node does,
/// [`CoordinatorUnavailable::NotAvailable`] when none does right now.
pub fn check(broker: &Broker, group: &str) -> Result<(), CoordinatorUnavailable> {
    match coordinator(broker, group) {
        Placement::Local => match broker.offsets.check(group) {
            Ok(()) => Ok(()),
            Err(OffsetStoreError::LoadInProgress { .. }) => Err(CoordinatorUnavailable::Loading),
            Err(_) => Err(CoordinatorUnavailable::Elsewhere),
        },
        Placement::Remote(_) => Err(CoordinatorUnavailable::Elsewhere),
        Placement::NotAvailable => Err(CoordinatorUnavailable::NotAvailable),
    }
}

/// The check at the top of every transaction request: this node must coordinate `id`.
///
/// # Errors
///
/// As [`check`].
pub fn check_txn(broker: &Broker, id: &str) -> Result<(), CoordinatorUnavailable> {
    match txn_coordinator(broker, id) {
        Placement::Local => match broker.txns.check(id) {
            Ok(()) => Ok(()),
            Err(CoordinatorError::LoadInProgress { .. }) => Err(CoordinatorUnavailable::Loading),
            Err(_) => Err(CoordinatorUnavailable::Elsewhere),
        },
        Placement::Remote(_) => Err(CoordinatorUnavailable::Elsewhere),
        Placement::NotAvailable => Err(CoordinatorUnavailable::NotAvailable),
    }
}

/// Waits until everything the partition of `group` holds when called is committed
/// ([`crate::coordinator::offsets::OffsetStore::written_through`]), at most Kafka's
/// `offsets.commit.timeout.ms` default: group answers built from the coordinator's live
/// state are sent only then, as Kafka's runtime completes an operation once its partition's
/// last written offset is committed.
///
/// # Errors
///
/// The Kafka error code to answer instead, as for a failed OffsetCommit: NOT_COORDINATOR
/// when this node stopped leading the partition, COORDINATOR_NOT_AVAILABLE on time out.
pub async fn committed(broker: &Broker, group: &str) -> Result<(), i16> {
    let written = broker
        .offsets
        .written_through(group)
        .map_err(|e| crate::server::error::coordinator_error_code(&e))?;
    written
        .committed(crate::coordinator::offsets::COMMIT_TIMEOUT)
        .await
        .map_err(|e| {
            tracing::debug!(group, error = %e, "a group answer's state was not committed");
            crate::server::error::coordinator_error_code(&e)
        })
}

/// Whether a creation of each internal topic ([`InternalTopic::ALL`]'s order) is on its way
/// from this node.
static CREATING: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// On a node whose image has no such internal topic, has the active controller create it
/// (`offsets.topic.num.partitions` partitions of `offsets.topic.replication.factor`
/// replicas for `__consumer_offsets`, the `transaction.state.log.*` settings for
/// `__transaction_state`, placed over the registered brokers, compacted; with fewer brokers
/// than the factor the controller refuses, and the coordinator stays
/// COORDINATOR_NOT_AVAILABLE until there are enough, as in Kafka), in the background: the
/// caller answers COORDINATOR_NOT_AVAILABLE and the client asks again, as Kafka's first
/// FindCoordinator does. At most one creation per topic is on its way from a node at a time.
pub fn ensure_topic(broker: &std::sync::Arc<Broker>, topic: InternalTopic) {
    if broker.image().topics.contains_key(topic.name()) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let creating = &CREATING[topic as usize];
    if creating.swap(true, Ordering::AcqRel) {
        return;
    }
    let broker = broker.clone();
    runtime.spawn(async move {
        if let Err(e) = crate::server::forward::create_internal_topic(&broker, topic).await {
            tracing::warn!(error = %e, topic = topic.name(), "the controller did not create an internal topic");
        }
        creating.store(false, Ordering::Release);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_kraft::{BrokerImage, PartitionImage, TopicImage};

    fn image(leader: i32, fenced: bool) -> MetadataImage {
        let mut image = MetadataImage::new("c", 1);
        for id in [1, 2] {
            image.brokers.insert(
                id,
                BrokerImage {
                    node_id: id,
                    host: "h".to_owned(),
                    port: 9092,
                    rack: None,
                    broker_epoch: 1,
                    incarnation_id: uuid::Uuid::nil(),
                    endpoints: Vec::new(),
                    fenced: fenced && id == leader,
                    in_controlled_shutdown: false,
                },
            );
        }
        let partition = PartitionImage {
            partition: 0,
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![leader],
            isr: vec![leader],
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader_recovery_state: Default::default(),
        };
        image.topics.insert(
            OFFSETS_TOPIC.to_owned(),
            TopicImage {
                name: OFFSETS_TOPIC.to_owned(),
                topic_id: uuid::Uuid::nil(),
                partitions: vec![partition],
                configs: Default::default(),
            },
        );
        image
    }

    fn leader_of_offsets(image: &MetadataImage, partition: i32, me: i32) -> Placement {
        leader_of(image, OFFSETS_TOPIC, partition, me)
    }

    #[test]
    fn the_partition_leader_coordinates() {
        assert_eq!(leader_of_offsets(&image(1, false), 0, 1), Placement::Local);
        assert_eq!(
            leader_of_offsets(&image(2, false), 0, 1),
            Placement::Remote(2)
        );
        // A fenced leader, a leaderless or missing partition, no topic: nobody.
        assert_eq!(
            leader_of_offsets(&image(2, true), 0, 1),
            Placement::NotAvailable
        );
        assert_eq!(
            leader_of_offsets(&image(-1, false), 0, 1),
            Placement::NotAvailable
        );
        assert_eq!(
            leader_of_offsets(&image(2, false), 7, 1),
            Placement::NotAvailable
        );
        assert_eq!(
            leader_of_offsets(&MetadataImage::new("c", 1), 0, 1),
            Placement::NotAvailable
        );
    }
}

/// The coordinator runtime's roles as the group handlers answer them, on a node started as
/// a lone node is.
#[cfg(test)]
mod runtime_tests {
    use strata_protocol::StrBytes;
    use strata_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
    use strata_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use strata_protocol::messages::{
        ApiKey, GroupId, HeartbeatRequest, OffsetCommitRequest, TopicName,
    };

    use crate::coordinator::offsets::OFFSETS_TOPIC;
    use crate::server::handlers::{consumer_group_heartbeat, fixture, heartbeat, offset_commit};

    const LOAD_IN_PROGRESS: i16 = 14;
    const NOT_COORDINATOR: i16 = 16;
    const UNKNOWN_MEMBER_ID: i16 = 25;

    /// (classic Heartbeat, ConsumerGroupHeartbeat, OffsetCommit) codes for group `g`.
    async fn codes(broker: &std::sync::Arc<crate::broker::Broker>) -> (i16, i16, i16) {
        let hb = heartbeat::handle(
            &fixture::ctx(broker, ApiKey::Heartbeat, 4),
            HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_member_id(StrBytes::from_static_str("m"))
                .with_generation_id(1),
        )
        .error_code;
        let cg = consumer_group_heartbeat::handle(
            &fixture::ctx(broker, ApiKey::ConsumerGroupHeartbeat, 0),
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_member_id(StrBytes::from_static_str("m"))
                .with_member_epoch(3),
        )
        .error_code;
        let commit = offset_commit::handle(
            &fixture::ctx(broker, ApiKey::OffsetCommit, 8),
            OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partitions(vec![
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1),
                        ]),
                ]),
        )
        .wait()
        .await
        .topics[0]
            .partitions[0]
            .error_code;
        (hb, cg, commit)
    }

    #[tokio::test]
    async fn loading_and_resigned_partitions_answer_kafka_s_codes() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let index = broker.offsets.partition_for("g");
        let partition = broker.partition(OFFSETS_TOPIC, index).unwrap();
        let epoch = partition.replicated_leader_epoch().unwrap();
        // Served: the member is unknown, a simple group's commit is taken.
        let (hb, _, commit) = codes(&broker).await;
        assert_eq!((hb, commit), (UNKNOWN_MEMBER_ID, 0));
        assert_eq!(broker.offsets.fetch("g", "t", 0).map(|o| o.offset), Some(1));
        // The load of a newer leadership begun and not finished.
        assert!(
            broker
                .offsets
                .begin_load(index, partition.clone(), epoch + 1)
        );
        assert_eq!(
            codes(&broker).await,
            (LOAD_IN_PROGRESS, LOAD_IN_PROGRESS, LOAD_IN_PROGRESS)
        );
        // This node no longer coordinates the partition, though its image still says so.
        assert!(broker.offsets.resign(index, |_| {}));
        assert_eq!(
            codes(&broker).await,
            (NOT_COORDINATOR, NOT_COORDINATOR, NOT_COORDINATOR)
        );
        // Loaded again: the committed offset is read back from the partition's log.
        assert!(broker.offsets.begin_load(index, partition.clone(), epoch));
        assert!(broker.offsets.load(index, epoch, |_| {}).unwrap());
        assert_eq!(broker.offsets.fetch("g", "t", 0).map(|o| o.offset), Some(1));
    }

    /// A group answer waits until the partition has committed what it held: not while a
    /// member of the ISR lags, at once when it catches up, and NOT_COORDINATOR when this
    /// node stops leading the partition meanwhile.
    #[tokio::test]
    async fn answers_wait_for_the_partition_s_commit() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let me = broker.config.node_id;
        let index = broker.offsets.partition_for("g");
        let partition = broker.partition(OFFSETS_TOPIC, index).unwrap();
        let epoch = partition.replicated_leader_epoch().unwrap();
        // Nothing in flight: at once.
        super::committed(&broker, "g").await.unwrap();
        // A second replica joins the ISR, and a write is appended that it has not fetched.
        partition.make_leader(
            me,
            &strata_replication::leader::PartitionRegistration {
                replicas: vec![me, 2],
                isr: vec![me, 2],
                leader_epoch: epoch,
                partition_epoch: 1_000,
            },
            strata_replication::leader::ReplicationConfig::default(),
        );
        let offset = |o: i64| crate::coordinator::offsets::CommittedOffset {
            offset: o,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
            expire_timestamp: None,
        };
        let _pending = broker
            .offsets
            .commit("g", vec![("t".into(), 0, offset(5))], 0)
            .unwrap();
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(400),
            super::committed(&broker, "g"),
        )
        .await;
        assert!(waiting.is_err(), "answered before the ISR had the write");
        // The follower fetches past the write: the wait ends.
        let fetch = |at: i64| strata_replication::fetch::FetchPartition {
            replica_id: 2,
            fetch_offset: at,
            current_leader_epoch: epoch,
            last_fetched_epoch: -1,
            replica_epoch: -1,
            log_start_offset: 0,
        };
        let end = partition.log().log_end_offset();
        let wait = tokio::spawn({
            let broker = broker.clone();
            async move { super::committed(&broker, "g").await }
        });
        partition.follower_fetch(&fetch(end), me).unwrap();
        assert_eq!(wait.await.unwrap(), Ok(()));
        // Another write; this node resigns before the ISR has it.
        let _pending = broker
            .offsets
            .commit("g", vec![("t".into(), 0, offset(6))], 0)
            .unwrap();
        let wait = tokio::spawn({
            let broker = broker.clone();
            async move { super::committed(&broker, "g").await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        partition.resign();
        assert_eq!(wait.await.unwrap(), Err(NOT_COORDINATOR));
        // Not coordinating at all: at once.
        assert!(broker.offsets.resign(index, |_| {}));
        assert_eq!(super::committed(&broker, "g").await, Err(NOT_COORDINATOR));
    }
}
