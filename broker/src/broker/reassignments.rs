//! Partition reassignment (KIP-455) as a controller operation: AlterPartitionReassignments
//! computes its `PartitionChangeRecord`s from the committed image with
//! [`cluster_control::alter_partition_reassignments`] and commits them as one metadata
//! entry before the answer; ListPartitionReassignments reads the pending moves from the
//! image the active controller has applied. Both run on the active controller (other nodes
//! forward them); on a lone node the only registered broker is this one, so the only valid
//! target is this node alone.
//!
//! The move itself is carried by the records: each replica's node opens a log and follows
//! as the image names it ([`Broker::apply_image`]), the leader adds caught-up replicas to the
//! ISR through AlterPartition, and the AlterPartition that brings the last target replica
//! into the ISR completes the move in the same entry (`PartitionChangeBuilder`); the
//! replicas moved away then stop following and delete their data.

use strata_kraft::MetadataError;
use strata_kraft::cluster_control::{
    self, OngoingReassignment, ReassignmentResult, ReassignmentTarget,
};

use super::Broker;

impl Broker {
    /// Sets (or, with `replicas: None`, cancels) the target replicas of each partition
    /// named, and commits the changes before returning one result per target.
    ///
    /// # Errors
    ///
    /// [`MetadataError::NotController`] on a node that is not the active controller,
    /// [`MetadataError::Timeout`] when the entry does not commit in time, storage errors.
    pub async fn alter_partition_reassignments(
        &self,
        allow_replication_factor_change: bool,
        targets: &[ReassignmentTarget],
    ) -> Result<Vec<ReassignmentResult>, MetadataError> {
        let targets = targets.to_vec();
        self.controller_write(move |image, _, st| {
            let (records, results) = cluster_control::alter_partition_reassignments(
                image,
                st.cluster_config(),
                allow_replication_factor_change,
                &targets,
            );
            if !records.is_empty() {
                tracing::info!(
                    partitions = records.len(),
                    "altering partition reassignments (KIP-455)"
                );
            }
            Ok::<_, MetadataError>((results, records))
        })
        .await
    }

    /// The pending reassignments of the partitions named (`None`: all of them), by topic.
    ///
    /// # Errors
    ///
    /// [`MetadataError::NotController`] on a node of a cluster that is not the active
    /// controller: only its image is sure to hold every move committed so far.
    pub async fn list_partition_reassignments(
        &self,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<(String, Vec<OngoingReassignment>)>, MetadataError> {
        // An operation with no records: it runs once this leader has applied its whole
        // log, so a move committed by a previous controller is listed too.
        let topics = topics.map(<[(String, Vec<i32>)]>::to_vec);
        self.controller_write(move |image, _, _| {
            Ok::<_, MetadataError>((
                cluster_control::list_partition_reassignments(image, topics.as_deref()),
                Vec::new(),
            ))
        })
        .await
    }
}
