//! Leader elections asked for by an admin (ElectLeaders, KIP-460) or by the controller's
//! own rebalancing (`auto.leader.rebalance.enable`).

use super::partition_change::{Election, PartitionChangeBuilder};
use super::{ClusterControlConfig, all_partitions};
use crate::record::{MetadataRecord, NO_LEADER};
use crate::{ElectionError, MetadataImage, PartitionImage, TopicImage};

/// ElectLeaders' election type (KIP-460), with Kafka's wire values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// 0: move leadership to the preferred (first) replica if it is live and in sync.
    Preferred,
    /// 1: give a leaderless partition a leader, from outside the ISR if need be; this
    /// can lose committed data.
    Unclean,
}

/// One partition's ElectLeaders outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectLeadersResult {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// `None` when a leader was elected.
    pub error: Option<ElectionError>,
}

/// ElectLeaders (Kafka's `ReplicationControlManager.electLeaders`): the records that
/// elect, and one result per partition. `partitions: None` means every partition, and
/// then, as in Kafka, partitions that need no election are left out of the results.
pub fn elect_leaders(
    image: &MetadataImage,
    election_type: ElectionType,
    partitions: Option<&[(String, i32)]>,
) -> (Vec<MetadataRecord>, Vec<ElectLeadersResult>) {
    let mut records = Vec::new();
    let mut results = Vec::new();
    let mut elect = |topic: &str, partition: i32, found: Option<(&TopicImage, &PartitionImage)>| {
        let error = match found {
            None => Some(ElectionError::UnknownTopicOrPartition),
            Some((t, p)) => match elect_one(image, t, p, election_type) {
                Ok(record) => {
                    records.push(record);
                    None
                }
                Err(e) => Some(e),
            },
        };
        ElectLeadersResult {
            topic: topic.to_owned(),
            partition,
            error,
        }
    };
    match partitions {
        Some(list) => {
            for (topic, partition) in list {
                let found = image.topics.get(topic).and_then(|t| {
                    usize::try_from(*partition)
                        .ok()
                        .and_then(|i| t.partitions.get(i))
                        .map(|p| (t, p))
                });
                results.push(elect(topic, *partition, found));
            }
        }
        None => {
            for (t, p) in all_partitions(image) {
                let result = elect(&t.name, p.partition, Some((t, p)));
                if result.error != Some(ElectionError::ElectionNotNeeded) {
                    results.push(result);
                }
            }
        }
    }
    (records, results)
}

/// Kafka's `electLeader` for one partition.
fn elect_one(
    image: &MetadataImage,
    topic: &TopicImage,
    partition: &PartitionImage,
    election_type: ElectionType,
) -> Result<MetadataRecord, ElectionError> {
    let not_needed = match election_type {
        ElectionType::Preferred => partition.leader == partition.preferred_leader(),
        ElectionType::Unclean => partition.leader != NO_LEADER,
    };
    if not_needed {
        return Err(ElectionError::ElectionNotNeeded);
    }
    let acceptable = |b: i32| image.is_active(b);
    let election = match election_type {
        ElectionType::Preferred => Election::Preferred,
        ElectionType::Unclean => Election::Unclean,
    };
    PartitionChangeBuilder::new(partition, topic.topic_id, &acceptable)
        .election(election)
        .build()
        .map(MetadataRecord::PartitionChange)
        .ok_or(match election_type {
            ElectionType::Preferred => ElectionError::PreferredLeaderNotAvailable,
            ElectionType::Unclean => ElectionError::EligibleLeadersNotAvailable,
        })
}

/// Partitions whose preferred replica is live, in the ISR and not the leader: the ones
/// automatic rebalancing would move (Kafka's `imbalancedPartitions` check), as
/// `(topic, partition)` in name order.
pub fn imbalanced_partitions(image: &MetadataImage) -> Vec<(String, i32)> {
    all_partitions(image)
        .filter(|(_, p)| {
            let preferred = p.preferred_leader();
            p.leader != preferred && p.isr.contains(&preferred) && image.is_active(preferred)
        })
        .map(|(t, p)| (t.name.clone(), p.partition))
        .collect()
}

/// `auto.leader.rebalance.enable`'s periodic pass (Kafka's
/// `maybeBalancePartitionLeaders`): preferred elections for up to `max_elections`
/// imbalanced partitions; nothing when rebalancing is disabled.
pub fn rebalance_leaders_records(
    image: &MetadataImage,
    config: &ClusterControlConfig,
    max_elections: usize,
) -> Vec<MetadataRecord> {
    if !config.auto_leader_rebalance_enable {
        return Vec::new();
    }
    let candidates: Vec<(String, i32)> = imbalanced_partitions(image)
        .into_iter()
        .take(max_elections)
        .collect();
    elect_leaders(image, ElectionType::Preferred, Some(&candidates)).0
}
