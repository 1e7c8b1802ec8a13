//! ElectLeaders (KIP-460) as a controller write: the elections are computed from the
//! committed image with [`cluster_control::elect_leaders`] (Kafka's
//! `ReplicationControlManager.electLeaders`) and their `PartitionChangeRecord`s, each
//! bumping the leader epoch, commit as one metadata entry before the answer. This runs on
//! the active controller (other nodes forward the request).

use strata_kraft::MetadataError;
use strata_kraft::cluster_control::{self, ElectLeadersResult, ElectionType};

use super::Broker;

/// What one ElectLeaders did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elections {
    /// Every topic of the image the elections were computed from, in name order, when the
    /// request named no partitions: Kafka answers each topic, with the partitions that
    /// needed an election (possibly none). Empty when the request named partitions.
    pub all_topics: Vec<String>,
    /// One outcome per partition named (or, for every partition, per partition that
    /// needed an election).
    pub results: Vec<ElectLeadersResult>,
}

impl Broker {
    /// Elects leaders for `partitions` (`None`: every partition) and commits the changes
    /// before returning.
    ///
    /// # Errors
    ///
    /// [`MetadataError::NotController`] on a node that is not the active controller,
    /// [`MetadataError::Timeout`] when the entry does not commit in time, storage errors.
    pub async fn elect_leaders(
        &self,
        election_type: ElectionType,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Elections, MetadataError> {
        let named = partitions.is_some();
        let all_topics = move |image: &strata_kraft::MetadataImage| {
            if named {
                Vec::new()
            } else {
                image.topics.keys().cloned().collect()
            }
        };
        let partitions = partitions.map(<[(String, i32)]>::to_vec);
        self.controller_write(move |image, _, _| {
            let (records, results) =
                cluster_control::elect_leaders(image, election_type, partitions.as_deref());
            if !records.is_empty() {
                tracing::info!(
                    elections = records.len(),
                    ?election_type,
                    "electing leaders (ElectLeaders)"
                );
            }
            Ok::<_, MetadataError>((
                Elections {
                    all_topics: all_topics(image),
                    results,
                },
                records,
            ))
        })
        .await
    }
}
