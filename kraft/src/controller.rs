//! The controller's decisions, sans-IO: given the current image and a request, either the
//! records that carry out the request or the error Kafka would return. Nothing here
//! writes; the broker's active controller proposes an operation's records as one Raft
//! entry, so each operation is atomic.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::cluster_control::placement::{PlacementBroker, place_replicas};
use crate::record::{
    BrokerEndpoint, ConfigRecord, LeaderRecoveryState, MetadataRecord, PRODUCER_ID_BLOCK_SIZE,
    PartitionRecord, ProducerIdsBlock, ProducerIdsRecord, RESOURCE_TYPE_TOPIC,
    RegisterBrokerRecord, RemoveTopicRecord, SECURITY_PROTOCOL_PLAINTEXT, TopicRecord,
};
use crate::topic_config::{validate_topic_config, validate_topic_configs};
use crate::{InvalidTopicNameReason, MetadataError, MetadataImage};

/// Kafka's `QuorumController.MAX_RECORDS_PER_USER_OP` is 10000; one partition is one
/// record, so this also bounds the batch a CreateTopics request can make us write.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;

/// Kafka's `Topic.MAX_NAME_LENGTH`.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Kafka reserves this id for `__cluster_metadata` (`Uuid.METADATA_TOPIC_ID`).
const METADATA_TOPIC_ID: Uuid = Uuid::from_u128(1);

/// A CreateTopics request for one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateTopic {
    /// The topic name.
    pub name: String,
    /// Partition count, or -1 for the broker's `num.partitions` (KIP-464).
    pub num_partitions: i32,
    /// Replication factor, or -1 for the broker's `default.replication.factor` (KIP-464).
    pub replication_factor: i16,
    /// Topic config overrides, Kafka's names.
    pub configs: BTreeMap<String, String>,
    /// Validate fully, write nothing (CreateTopics `validate_only`).
    pub validate_only: bool,
    /// A manual replica assignment, one replica list per partition from 0 (CreateTopics'
    /// `assignments`; `num_partitions` and `replication_factor` are then -1): placed as
    /// given instead of by the controller.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// Broker-level defaults the controller fills in for `-1` (KIP-464).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
}

impl Default for ControllerConfig {
    /// Kafka's defaults: one partition, one replica.
    fn default() -> Self {
        ControllerConfig {
            num_partitions: 1,
            default_replication_factor: 1,
        }
    }
}

/// Checks a topic name the way Kafka's `Topic.validate` does.
///
/// # Errors
///
/// [`MetadataError::InvalidTopicName`] with the reason.
pub fn validate_topic_name(name: &str) -> Result<(), MetadataError> {
    let reason = if name.is_empty() {
        Some(InvalidTopicNameReason::Empty)
    } else if name == "." || name == ".." {
        Some(InvalidTopicNameReason::DotOrDotDot)
    } else if name.chars().count() > MAX_TOPIC_NAME_LEN {
        Some(InvalidTopicNameReason::TooLong {
            len: name.chars().count(),
        })
    } else {
        name.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
            .map(InvalidTopicNameReason::IllegalCharacter)
    };
    match reason {
        Some(reason) => Err(MetadataError::InvalidTopicName {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Whether `id` may name a new topic: not nil, not Kafka's reserved metadata topic id,
/// not in use, and not one whose base64 form starts with `-` (Kafka's
/// `Uuid.randomUuid` skips those so command-line tools don't read them as flags).
pub fn is_assignable_topic_id(image: &MetadataImage, id: Uuid) -> bool {
    // The first base64 character is the top 6 bits of the first byte; '-' is index 62.
    !id.is_nil()
        && id != METADATA_TOPIC_ID
        && id.as_bytes()[0] >> 2 != 62
        && !image.topic_names_by_id.contains_key(&id)
}

/// Validates a CreateTopics entry and returns the records that create it: the
/// `TopicRecord`, one `ConfigRecord` per override, then one `PartitionRecord` per
/// partition, in Kafka's order. The caller supplies `topic_id` (see
/// [`is_assignable_topic_id`]) so this stays deterministic.
///
/// Replicas go to the live (unfenced, not shutting down) brokers, spread over racks with
/// leaders balanced (see `cluster_control/placement.rs`); with one broker every partition
/// is `replicas = isr = [node]`, leader epoch 0.
///
/// # Errors
///
/// In Kafka's order of checks: `InvalidTopicName`, `TopicAlreadyExists`,
/// `InvalidPartitions`, `InvalidReplicationFactor`, `InvalidConfig`.
pub fn create_topic_records(
    image: &MetadataImage,
    req: &CreateTopic,
    config: &ControllerConfig,
    topic_id: Uuid,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    validate_topic_name(&req.name)?;
    // Names that differ only in '.' vs '_' collide in metric names; Kafka only warns
    // about them, so we accept them too.
    if image.topics.contains_key(&req.name) {
        return Err(MetadataError::TopicAlreadyExists(req.name.clone()));
    }
    let placement = match &req.assignments {
        Some(assignments) => {
            validate_manual_assignment(image, assignments, None)?;
            if !(1..=MAX_PARTITIONS_PER_TOPIC as usize).contains(&assignments.len()) {
                return Err(MetadataError::InvalidPartitions(
                    i32::try_from(assignments.len()).unwrap_or(i32::MAX),
                ));
            }
            None
        }
        None => {
            let num_partitions = if req.num_partitions == -1 {
                config.num_partitions
            } else {
                req.num_partitions
            };
            if !(1..=MAX_PARTITIONS_PER_TOPIC).contains(&num_partitions) {
                return Err(MetadataError::InvalidPartitions(num_partitions));
            }
            let replication_factor = if req.replication_factor == -1 {
                config.default_replication_factor
            } else {
                req.replication_factor
            };
            let brokers = placement_brokers(image);
            let rf = usize::try_from(replication_factor).unwrap_or(0);
            if rf == 0 || rf > brokers.len() {
                return Err(MetadataError::InvalidReplicationFactor {
                    requested: replication_factor,
                    available_brokers: brokers.len(),
                });
            }
            Some((brokers, num_partitions, rf))
        }
    };
    validate_topic_configs(&req.configs)?;

    let mut records = Vec::with_capacity(1 + req.configs.len());
    records.push(MetadataRecord::Topic(TopicRecord {
        name: req.name.clone(),
        topic_id,
    }));
    records.extend(req.configs.iter().map(|(k, v)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: RESOURCE_TYPE_TOPIC,
            resource_name: req.name.clone(),
            name: k.clone(),
            value: Some(v.clone()),
        })
    }));
    let replica_lists = match (placement, &req.assignments) {
        (Some((brokers, num_partitions, rf)), _) => {
            place_replicas(&brokers, 0, num_partitions as usize, rf, topic_id.as_u128())
        }
        (None, Some(assignments)) => assignments.clone(),
        (None, None) => Vec::new(),
    };
    for (partition_id, replicas) in (0..).zip(replica_lists) {
        let isr = initial_isr(image, &replicas, partition_id)?;
        records.push(new_partition(topic_id, partition_id, replicas, isr));
    }
    Ok(records)
}

/// A new partition's ISR (Kafka's `ReplicationControlManager.createTopic` and
/// `createPartitions`): its replicas that are active, in their order. Placement picks only
/// active brokers, but a manual assignment may name a fenced broker or one in controlled
/// shutdown; such a replica starts out of the ISR, so acks=all does not wait on it and it
/// is not chosen as leader, and joins through AlterPartition once it has caught up.
///
/// # Errors
///
/// [`MetadataError::InvalidReplicaAssignment`], with Kafka's message, when no replica is
/// active.
fn initial_isr(
    image: &MetadataImage,
    replicas: &[i32],
    partition_id: i32,
) -> Result<Vec<i32>, MetadataError> {
    let isr: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|&b| image.is_active(b))
        .collect();
    if isr.is_empty() {
        return Err(MetadataError::InvalidReplicaAssignment(format!(
            "All brokers specified in the manual partition assignment for partition \
             {partition_id} are fenced or in controlled shutdown."
        )));
    }
    Ok(isr)
}

/// Kafka's `ReplicationControlManager.validateManualPartitionAssignment`, for every partition
/// of a manual assignment: a replica list is not empty, names no broker twice and only
/// registered brokers, and has as many replicas as the others (`rf`, when the topic already
/// has partitions).
///
/// # Errors
///
/// [`MetadataError::InvalidReplicaAssignment`] with Kafka's message.
fn validate_manual_assignment(
    image: &MetadataImage,
    assignments: &[Vec<i32>],
    mut rf: Option<usize>,
) -> Result<(), MetadataError> {
    let invalid = |m: String| Err(MetadataError::InvalidReplicaAssignment(m));
    for replicas in assignments {
        if replicas.is_empty() {
            return invalid(
                "The manual partition assignment includes an empty replica list.".into(),
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for b in replicas {
            if !seen.insert(*b) {
                return invalid(format!(
                    "The manual partition assignment includes the broker {b} more than once."
                ));
            }
            if !image.brokers.contains_key(b) {
                return invalid(format!(
                    "The manual partition assignment includes broker {b}, but no such broker is \
                     registered."
                ));
            }
        }
        match rf {
            Some(rf) if replicas.len() != rf => {
                return invalid(format!(
                    "The manual partition assignment includes a partition with {} replica(s), \
                     but this is not consistent with previous partitions, which have {rf} \
                     replica(s).",
                    replicas.len()
                ));
            }
            _ => rf = Some(replicas.len()),
        }
    }
    Ok(())
}

/// The brokers new replicas may go to: registered, unfenced and not shutting down
/// (Kafka's usable brokers), with their racks.
fn placement_brokers(image: &MetadataImage) -> Vec<PlacementBroker> {
    image
        .brokers
        .values()
        .filter(|b| b.is_active())
        .map(|b| PlacementBroker {
            id: b.node_id,
            rack: b.rack.clone(),
        })
        .collect()
}

/// The record of a new partition: led by the first member of its ISR (`isr`, not empty, as
/// [`initial_isr`] gives it).
fn new_partition(
    topic_id: Uuid,
    partition_id: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        partition_id,
        topic_id,
        leader: isr[0],
        isr,
        replicas,
        removing_replicas: Vec::new(),
        adding_replicas: Vec::new(),
        leader_epoch: 0,
        partition_epoch: 0,
        leader_recovery_state: LeaderRecoveryState::Recovered,
    })
}

/// The records that grow `topic` to `count` partitions (CreatePartitions, Kafka's
/// `ReplicationControlManager.createPartitions`): one PartitionRecord per new partition, with
/// the replicas of `assignments` (one list per new partition) or, without them, placed over
/// the live brokers as CreateTopics places them, with the replication factor of partition 0.
///
/// # Errors
///
/// [`MetadataError::UnknownTopic`], [`MetadataError::PartitionCountNotIncreased`],
/// [`MetadataError::InvalidPartitions`] beyond the cap, or
/// [`MetadataError::InvalidReplicaAssignment`].
pub fn create_partitions_records(
    image: &MetadataImage,
    topic: &str,
    count: i32,
    assignments: Option<&[Vec<i32>]>,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    let t = image
        .topics
        .get(topic)
        .ok_or_else(|| MetadataError::UnknownTopic(topic.to_owned()))?;
    let current = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
    if count < current {
        return Err(MetadataError::PartitionCountNotIncreased(format!(
            "The topic {topic} currently has {current} partition(s); {count} would not be an \
             increase."
        )));
    }
    if count == current {
        return Err(MetadataError::PartitionCountNotIncreased(format!(
            "Topic already has {current} partition(s)."
        )));
    }
    if count > MAX_PARTITIONS_PER_TOPIC {
        return Err(MetadataError::InvalidPartitions(count));
    }
    let added = usize::try_from(count - current).unwrap_or(0);
    let rf = t.partitions.first().map_or(1, |p| p.replicas.len());
    let brokers = placement_brokers(image);
    let invalid = |m: String| Err(MetadataError::InvalidReplicaAssignment(m));
    let placement: Vec<Vec<i32>> = match assignments {
        Some(a) => {
            if a.len() != added {
                return invalid(format!(
                    "Attempted to add {added} additional partition(s), but only {} \
                     assignment(s) were specified.",
                    a.len()
                ));
            }
            validate_manual_assignment(image, a, Some(rf))?;
            a.to_vec()
        }
        None => {
            if rf == 0 || rf > brokers.len() {
                return Err(MetadataError::InvalidReplicationFactor {
                    requested: i16::try_from(rf).unwrap_or(i16::MAX),
                    available_brokers: brokers.len(),
                });
            }
            place_replicas(&brokers, current, added, rf, t.topic_id.as_u128())
        }
    };
    placement
        .into_iter()
        .zip(current..count)
        .map(|(replicas, partition_id)| {
            let isr = initial_isr(image, &replicas, partition_id)?;
            Ok(new_partition(t.topic_id, partition_id, replicas, isr))
        })
        .collect()
}

/// The record that deletes the topic with this id, and the topic's name.
///
/// # Errors
///
/// [`MetadataError::UnknownTopicId`] if no live topic has the id.
pub fn delete_topic_records(
    image: &MetadataImage,
    topic_id: Uuid,
) -> Result<(String, Vec<MetadataRecord>), MetadataError> {
    let name = image
        .topic_names_by_id
        .get(&topic_id)
        .ok_or(MetadataError::UnknownTopicId(topic_id))?;
    Ok((
        name.clone(),
        vec![MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id })],
    ))
}

/// The record that sets (`Some`) or removes (`None`) one topic config override; empty
/// when the override already has that value, so a repeated AlterConfigs does not grow
/// the log.
///
/// # Errors
///
/// [`MetadataError::UnknownTopic`] or [`MetadataError::InvalidConfig`].
pub fn set_topic_config_records(
    image: &MetadataImage,
    topic: &str,
    key: &str,
    value: Option<&str>,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    let current = image
        .topics
        .get(topic)
        .ok_or_else(|| MetadataError::UnknownTopic(topic.to_owned()))?;
    validate_topic_config(key, value)?;
    if current.configs.get(key).map(String::as_str) == value {
        return Ok(Vec::new());
    }
    let mut next = current.configs.clone();
    match value {
        Some(v) => next.insert(key.to_owned(), v.to_owned()),
        None => next.remove(key),
    };
    validate_topic_configs(&next)?;
    Ok(vec![MetadataRecord::Config(ConfigRecord {
        resource_type: RESOURCE_TYPE_TOPIC,
        resource_name: topic.to_owned(),
        name: key.to_owned(),
        value: value.map(str::to_owned),
    })])
}

/// The record that sets (`Some`) or removes (`None`) one dynamic broker config of a broker
/// resource (`resource` is a broker id, or `""` for the cluster-wide default); empty when
/// the config already has that value. Which keys may change and what values they take is
/// the broker's to check before it asks (Kafka's `ConfigAdminManager` does so on the broker
/// too): the controller only records.
#[must_use]
pub fn set_broker_config_records(
    image: &MetadataImage,
    resource: &str,
    key: &str,
    value: Option<&str>,
) -> Vec<MetadataRecord> {
    let current = image
        .broker_configs
        .get(resource)
        .and_then(|c| c.get(key))
        .map(String::as_str);
    if current == value {
        return Vec::new();
    }
    vec![MetadataRecord::Config(ConfigRecord {
        resource_type: crate::record::RESOURCE_TYPE_BROKER,
        resource_name: resource.to_owned(),
        name: key.to_owned(),
        value: value.map(str::to_owned),
    })]
}

/// A broker's registration as the controller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    /// `node.id`.
    pub node_id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// This process's incarnation (KIP-631).
    pub incarnation_id: Uuid,
    /// The offset the record will take in the metadata log (Kafka's broker epoch).
    pub broker_epoch: i64,
}

/// The `RegisterBrokerRecord` for a registration, or nothing when the image already
/// holds the same endpoint and rack, so restarts don't grow the log.
pub fn register_broker_records(
    image: &MetadataImage,
    reg: &BrokerRegistration,
) -> Vec<MetadataRecord> {
    let unchanged = image
        .brokers
        .get(&reg.node_id)
        .is_some_and(|b| b.host == reg.host && b.port == reg.port && b.rack == reg.rack);
    if unchanged {
        return Vec::new();
    }
    vec![MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id: reg.node_id,
        incarnation_id: reg.incarnation_id,
        broker_epoch: reg.broker_epoch,
        endpoints: vec![BrokerEndpoint {
            name: "PLAINTEXT".to_owned(),
            host: reg.host.clone(),
            port: reg.port,
            security_protocol: SECURITY_PROTOCOL_PLAINTEXT,
        }],
        features: Vec::new(),
        rack: reg.rack.clone(),
        // A single node has no one to wait for; it is unfenced as it registers.
        fenced: false,
        in_controlled_shutdown: false,
    })]
}

/// Kafka's `ProducerIdControlManager.generateNextProducerId`: the next block of
/// [`crate::record::PRODUCER_ID_BLOCK_SIZE`] producer ids for `broker_id`, and the
/// `ProducerIdsRecord` that makes the allocation durable.
///
/// # Errors
///
/// [`MetadataError::BrokerNotRegistered`] for an unknown broker;
/// [`MetadataError::ProducerIdsExhausted`] when the block would pass `i64::MAX`.
pub fn producer_ids_records(
    image: &MetadataImage,
    broker_id: i32,
) -> Result<(ProducerIdsBlock, Vec<MetadataRecord>), MetadataError> {
    let broker = image
        .brokers
        .get(&broker_id)
        .ok_or(MetadataError::BrokerNotRegistered(broker_id))?;
    let first = image.next_producer_id;
    if first > i64::MAX - PRODUCER_ID_BLOCK_SIZE {
        return Err(MetadataError::ProducerIdsExhausted {
            next_producer_id: first,
        });
    }
    let block = ProducerIdsBlock {
        assigned_broker_id: broker_id,
        first_producer_id: first,
        size: PRODUCER_ID_BLOCK_SIZE,
    };
    let record = MetadataRecord::ProducerIds(ProducerIdsRecord {
        broker_id,
        broker_epoch: broker.broker_epoch,
        next_producer_id: block.next_block_first_id(),
    });
    Ok((block, vec![record]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConfigValueError, MetadataImage};

    fn image_with_broker() -> MetadataImage {
        let mut img = MetadataImage::new("c", 1);
        for r in register_broker_records(&img, &reg("localhost", 9092)) {
            img.apply(&r).unwrap();
        }
        img
    }
    fn reg(host: &str, port: u16) -> BrokerRegistration {
        BrokerRegistration {
            node_id: 1,
            host: host.into(),
            port,
            rack: None,
            incarnation_id: Uuid::from_u128(5),
            broker_epoch: 0,
        }
    }
    fn req(name: &str, partitions: i32, rf: i16) -> CreateTopic {
        CreateTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            ..Default::default()
        }
    }
    fn create(img: &MetadataImage, r: &CreateTopic) -> Result<Vec<MetadataRecord>, MetadataError> {
        create_topic_records(
            img,
            r,
            &ControllerConfig {
                num_partitions: 3,
                default_replication_factor: 1,
            },
            Uuid::from_u128(42),
        )
    }
    /// CreateTopics of "manual" with these replica lists as its manual assignment.
    fn manual(lists: Vec<Vec<i32>>) -> CreateTopic {
        CreateTopic {
            name: "manual".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: Some(lists),
            ..Default::default()
        }
    }
    fn apply_all(img: &mut MetadataImage, records: &[MetadataRecord]) {
        for r in records {
            img.apply(r).unwrap();
        }
    }

    #[test]
    fn a_manual_assignment_is_placed_as_given_and_checked() {
        let img = image_with_broker();
        let records = create(&img, &manual(vec![vec![1], vec![1]])).unwrap();
        let placed: Vec<(i32, Vec<i32>)> = records
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition(p) => Some((p.partition_id, p.replicas.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(placed, vec![(0, vec![1]), (1, vec![1])]);
        let message = |lists| match create(&img, &manual(lists)) {
            Err(MetadataError::InvalidReplicaAssignment(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(message(vec![vec![1, 2]]).contains("broker 2, but no such broker"));
        assert!(message(vec![vec![1, 1]]).contains("more than once"));
        assert!(message(vec![vec![]]).contains("empty replica list"));
    }

    #[test]
    fn a_manual_assignment_leaves_inactive_brokers_out_of_the_isr() {
        let mut img = image_with_broker();
        for id in [2, 3] {
            let r = BrokerRegistration {
                node_id: id,
                incarnation_id: Uuid::from_u128(5 + id as u128),
                ..reg("localhost", 9092 + id as u16)
            };
            for rec in register_broker_records(&img, &r) {
                img.apply(&rec).unwrap();
            }
        }
        img.brokers.get_mut(&2).unwrap().fenced = true;
        img.brokers.get_mut(&3).unwrap().in_controlled_shutdown = true;
        let records = create(&img, &manual(vec![vec![2, 1, 3], vec![1, 2, 3]])).unwrap();
        let placed: Vec<(Vec<i32>, i32, Vec<i32>)> = records
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition(p) => Some((p.replicas.clone(), p.leader, p.isr.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            placed,
            vec![(vec![2, 1, 3], 1, vec![1]), (vec![1, 2, 3], 1, vec![1])]
        );
        match create(&img, &manual(vec![vec![1, 2], vec![3, 2]])) {
            Err(MetadataError::InvalidReplicaAssignment(m)) => assert_eq!(
                m,
                "All brokers specified in the manual partition assignment for partition 1 are \
                 fenced or in controlled shutdown."
            ),
            other => panic!("{other:?}"),
        }
        // CreatePartitions' manual assignments follow the same rule.
        apply_all(&mut img, &records);
        let added = create_partitions_records(&img, "manual", 3, Some(&[vec![3, 2, 1]])).unwrap();
        match &added[..] {
            [MetadataRecord::Partition(p)] => {
                assert_eq!((p.partition_id, p.leader, p.isr.clone()), (2, 1, vec![1]));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        for ok in ["a", "A-b_c.d", "__consumer_offsets", &"x".repeat(249)] {
            assert!(validate_topic_name(ok).is_ok(), "{ok}");
        }
        let reason = |n: &str| match validate_topic_name(n) {
            Err(MetadataError::InvalidTopicName { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(reason(""), InvalidTopicNameReason::Empty);
        assert_eq!(reason("."), InvalidTopicNameReason::DotOrDotDot);
        assert_eq!(reason(".."), InvalidTopicNameReason::DotOrDotDot);
        assert_eq!(
            reason(&"x".repeat(250)),
            InvalidTopicNameReason::TooLong { len: 250 }
        );
        assert_eq!(reason("a b"), InvalidTopicNameReason::IllegalCharacter(' '));
        assert_eq!(reason("a/b"), InvalidTopicNameReason::IllegalCharacter('/'));
        assert_eq!(reason("é"), InvalidTopicNameReason::IllegalCharacter('é'));
    }

    #[test]
    fn create_topic_assigns_every_partition_to_the_single_broker() {
        let mut img = image_with_broker();
        let mut r = req("t", 2, 1);
        r.configs.insert("retention.ms".into(), "1000".into());
        let records = create(&img, &r).unwrap();
        assert_eq!(records.len(), 4);
        assert!(matches!(&records[0], MetadataRecord::Topic(t) if t.name == "t"));
        assert!(matches!(&records[1], MetadataRecord::Config(c) if c.name == "retention.ms"));
        apply_all(&mut img, &records);
        let t = &img.topics["t"];
        assert_eq!(t.topic_id, Uuid::from_u128(42));
        assert_eq!(t.configs["retention.ms"], "1000");
        for (i, p) in t.partitions.iter().enumerate() {
            assert_eq!((p.partition, p.leader, p.leader_epoch), (i as i32, 1, 0));
            assert_eq!(
                (p.replicas.as_slice(), p.isr.as_slice()),
                (&[1][..], &[1][..])
            );
        }
    }

    #[test]
    fn minus_one_uses_broker_defaults() {
        let mut img = image_with_broker();
        let records = create(&img, &req("t", -1, -1)).unwrap();
        apply_all(&mut img, &records);
        assert_eq!(img.topics["t"].partitions.len(), 3);
    }

    #[test]
    fn create_topic_errors_match_kafka() {
        let mut img = image_with_broker();
        let records = create(&img, &req("t", 1, 1)).unwrap();
        apply_all(&mut img, &records);
        assert!(
            matches!(create(&img, &req("t", 1, 1)), Err(MetadataError::TopicAlreadyExists(n)) if n == "t")
        );
        // A '.'/'_' collision is only a warning in Kafka.
        assert!(create(&img, &req("a.b", 1, 1)).is_ok());
        assert!(matches!(
            create(&img, &req("bad name", 1, 1)),
            Err(MetadataError::InvalidTopicName { .. })
        ));
        for p in [0, -2, MAX_PARTITIONS_PER_TOPIC + 1] {
            assert!(
                matches!(create(&img, &req("n", p, 1)), Err(MetadataError::InvalidPartitions(x)) if x == p)
            );
        }
        for rf in [0, -2, 2, 3] {
            assert!(matches!(
                create(&img, &req("n", 1, rf)),
                Err(MetadataError::InvalidReplicationFactor { requested, available_brokers: 1 }) if requested == rf
            ));
        }
        let mut r = req("n", 1, 1);
        r.configs.insert("segment.bytes".into(), "1".into());
        assert!(matches!(
            create(&img, &r),
            Err(MetadataError::InvalidConfig { key, reason: ConfigValueError::BelowMinimum { min: 14 }, .. }) if key == "segment.bytes"
        ));
        r.configs.clear();
        r.configs.insert("no.such.config".into(), "1".into());
        assert!(matches!(
            create(&img, &r),
            Err(MetadataError::InvalidConfig {
                reason: ConfigValueError::UnknownKey,
                ..
            })
        ));
    }

    #[test]
    fn no_brokers_means_no_replication_factor_fits() {
        let img = MetadataImage::new("c", 1);
        assert!(matches!(
            create(&img, &req("t", 1, 1)),
            Err(MetadataError::InvalidReplicationFactor {
                requested: 1,
                available_brokers: 0
            })
        ));
    }

    #[test]
    fn delete_and_config_changes() {
        let mut img = image_with_broker();
        let records = create(&img, &req("t", 1, 1)).unwrap();
        apply_all(&mut img, &records);
        let id = Uuid::from_u128(42);

        let records =
            set_topic_config_records(&img, "t", "cleanup.policy", Some("compact")).unwrap();
        apply_all(&mut img, &records);
        assert_eq!(img.topics["t"].configs["cleanup.policy"], "compact");
        assert!(
            set_topic_config_records(&img, "t", "cleanup.policy", Some("compact"))
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            set_topic_config_records(&img, "u", "cleanup.policy", None),
            Err(MetadataError::UnknownTopic(n)) if n == "u"
        ));
        assert!(matches!(
            set_topic_config_records(&img, "t", "cleanup.policy", Some("x")),
            Err(MetadataError::InvalidConfig { .. })
        ));
        let records = set_topic_config_records(&img, "t", "cleanup.policy", None).unwrap();
        apply_all(&mut img, &records);
        assert!(img.topics["t"].configs.is_empty());

        let (name, records) = delete_topic_records(&img, id).unwrap();
        assert_eq!(name, "t");
        apply_all(&mut img, &records);
        assert!(img.topics.is_empty());
        assert!(
            matches!(delete_topic_records(&img, id), Err(MetadataError::UnknownTopicId(x)) if x == id)
        );
    }

    #[test]
    fn registration_is_written_only_when_the_endpoint_changes() {
        let img = image_with_broker();
        assert!(register_broker_records(&img, &reg("localhost", 9092)).is_empty());
        assert_eq!(
            register_broker_records(&img, &reg("localhost", 9093)).len(),
            1
        );
        assert_eq!(
            register_broker_records(&img, &reg("otherhost", 9092)).len(),
            1
        );
        let mut racked = reg("localhost", 9092);
        racked.rack = Some("r1".into());
        assert_eq!(register_broker_records(&img, &racked).len(), 1);
    }

    #[test]
    fn producer_id_blocks_follow_each_other() {
        let mut img = image_with_broker();
        assert!(matches!(
            producer_ids_records(&img, 7),
            Err(MetadataError::BrokerNotRegistered(7))
        ));
        let (block, records) = producer_ids_records(&img, 1).unwrap();
        assert_eq!((block.first_producer_id, block.size), (0, 1000));
        apply_all(&mut img, &records);
        assert_eq!(img.next_producer_id, 1000);
        let (block, records) = producer_ids_records(&img, 1).unwrap();
        assert_eq!(block.first_producer_id, 1000);
        apply_all(&mut img, &records);
        // Replaying an old block would hand out ids twice.
        let (_, stale) =
            producer_ids_records(&MetadataImage::clone(&image_with_broker()), 1).unwrap();
        assert!(img.apply(&stale[0]).is_err());
        img.next_producer_id = i64::MAX - 10;
        assert!(matches!(
            producer_ids_records(&img, 1),
            Err(MetadataError::ProducerIdsExhausted { .. })
        ));
    }

    #[test]
    fn reserved_topic_ids_are_not_assignable() {
        let img = MetadataImage::new("c", 1);
        assert!(!is_assignable_topic_id(&img, Uuid::nil()));
        assert!(!is_assignable_topic_id(&img, Uuid::from_u128(1)));
        // 0xf8 >> 2 == 62, which base64url renders as '-'.
        assert!(!is_assignable_topic_id(&img, Uuid::from_bytes([0xf8; 16])));
        assert!(is_assignable_topic_id(&img, Uuid::from_u128(42)));
    }
}
