//! Replication, controller and quorum metrics, all read at scrape time: the partition counts
//! from the metadata image this node serves, the quorum's state from its driver's latest
//! status, and the ISR change counters the leaders keep ([`super::record_isr_change`]).
//!
//! - `kafka.server:type=ReplicaManager` (every node, for what it hosts and leads): a
//!   partition is under-replicated when this node leads it and its ISR is smaller than its
//!   replication factor (the replicas a reassignment is still adding do not count, as in
//!   Kafka's `OngoingReassignmentState.replicationFactor`).
//! - `kafka.controller:type=KafkaController`: `ActiveControllerCount` is 1 on the quorum's
//!   leader only; the cluster-wide counts (offline partitions, topics, partitions, brokers)
//!   are reported by the active controller alone and 0 elsewhere, so that `sum` or `max`
//!   over the cluster's nodes is the cluster's value whichever node leads.
//! - `kafka.server:type=raft-metrics` and `type=broker-metadata-metrics`: the quorum as this
//!   node sees it, and the metadata offset it has applied. A lone node is the only voter of
//!   a quorum of its own, and reports it like any other.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use strata_kraft::raft::RoleKind;

use super::exposition::header;
use crate::broker::Broker;
use crate::metrics::registry::{ISR_EXPANDS, ISR_SHRINKS};

/// Counts over the image's partitions, as this node sees them.
#[derive(Default)]
struct PartitionCounts {
    /// Partitions with a replica on this node (Kafka's `PartitionCount`).
    hosted: u64,
    /// Partitions this node leads (Kafka's `LeaderCount`).
    led: u64,
    /// Led, with an ISR smaller than the replication factor.
    under_replicated: u64,
    /// Every partition in the image (`GlobalPartitionCount`).
    global: u64,
    /// Partitions without a leader (`OfflinePartitionsCount`).
    offline: u64,
    /// Partitions led by another replica than their preferred one
    /// (`PreferredReplicaImbalanceCount`).
    imbalanced: u64,
}

/// Renders the ReplicaManager, controller and quorum metrics.
pub(super) fn render(out: &mut String, broker: &Broker) {
    let image = broker.image();
    let me = broker.config.node_id;
    let mut c = PartitionCounts::default();
    for topic in image.topics.values() {
        for p in &topic.partitions {
            c.global += 1;
            if p.leader < 0 {
                c.offline += 1;
            } else if p.leader != p.preferred_leader() {
                c.imbalanced += 1;
            }
            if p.replicas.contains(&me) {
                c.hosted += 1;
            }
            if p.leader == me {
                c.led += 1;
                let factor = p.replicas.len().saturating_sub(p.adding_replicas.len());
                if p.isr.len() < factor {
                    c.under_replicated += 1;
                }
            }
        }
    }
    let under_min_isr = broker
        .all_partitions()
        .iter()
        .filter(|p| p.is_under_min_isr())
        .count();
    let status = broker.quorum().map(crate::quorum::QuorumHandle::status);
    let active = status.is_some_and(|s| s.role == RoleKind::Leader);
    let global = |v: u64| if active { v } else { 0 };
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let fenced = image.brokers.values().filter(|b| b.fenced).count() as u64;
    let registered = image.brokers.len() as u64;

    let metrics: [(&str, &str, &str, i64); 14] = [
        (
            "kafka_server_replicamanager_partitioncount",
            "gauge",
            "Partitions with a replica on this node (Kafka's PartitionCount).",
            to_i64(c.hosted),
        ),
        (
            "kafka_server_replicamanager_leadercount",
            "gauge",
            "Partitions this node leads (Kafka's LeaderCount).",
            to_i64(c.led),
        ),
        (
            "kafka_server_replicamanager_underreplicatedpartitions",
            "gauge",
            "Partitions this node leads whose ISR is smaller than their replication factor (Kafka's UnderReplicatedPartitions).",
            to_i64(c.under_replicated),
        ),
        (
            "kafka_server_replicamanager_underminisrpartitioncount",
            "gauge",
            "Partitions this node leads whose ISR is below min.insync.replicas (Kafka's UnderMinIsrPartitionCount).",
            to_i64(under_min_isr as u64),
        ),
        (
            "kafka_server_replicamanager_offlinereplicacount",
            "gauge",
            "Replicas on this node whose log could not be opened (Kafka's OfflineReplicaCount).",
            to_i64(broker.offline_partitions().len() as u64),
        ),
        (
            "kafka_server_replicamanager_isrshrinks_total",
            "counter",
            "ISR shrinks this node proposed as a leader and the controller committed (Kafka's IsrShrinksPerSec).",
            to_i64(ISR_SHRINKS.load(Ordering::Relaxed)),
        ),
        (
            "kafka_server_replicamanager_isrexpands_total",
            "counter",
            "ISR expansions this node proposed as a leader and the controller committed (Kafka's IsrExpandsPerSec).",
            to_i64(ISR_EXPANDS.load(Ordering::Relaxed)),
        ),
        (
            "kafka_controller_kafkacontroller_activecontrollercount",
            "gauge",
            "1 on the active controller (the metadata quorum's leader), 0 elsewhere (Kafka's ActiveControllerCount).",
            i64::from(active),
        ),
        (
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "gauge",
            "Partitions without a leader; reported by the active controller, 0 elsewhere (Kafka's OfflinePartitionsCount).",
            to_i64(global(c.offline)),
        ),
        (
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
            "gauge",
            "Partitions led by another replica than their preferred one; active controller only (Kafka's PreferredReplicaImbalanceCount).",
            to_i64(global(c.imbalanced)),
        ),
        (
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "gauge",
            "Partitions in the cluster; active controller only (Kafka's GlobalPartitionCount).",
            to_i64(global(c.global)),
        ),
        (
            "kafka_controller_kafkacontroller_globaltopiccount",
            "gauge",
            "Topics in the cluster; active controller only (Kafka's GlobalTopicCount).",
            to_i64(global(image.topics.len() as u64)),
        ),
        (
            "kafka_controller_kafkacontroller_activebrokercount",
            "gauge",
            "Registered brokers that are not fenced; active controller only (Kafka's ActiveBrokerCount).",
            to_i64(global(registered - fenced)),
        ),
        (
            "kafka_controller_kafkacontroller_fencedbrokercount",
            "gauge",
            "Registered brokers that are fenced; active controller only (Kafka's FencedBrokerCount).",
            to_i64(global(fenced)),
        ),
    ];
    for (name, kind, help, value) in metrics {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
    render_quorum(out, status);
}

/// The quorum as this node's driver last reported it.
fn render_quorum(out: &mut String, status: Option<crate::quorum::QuorumStatus>) {
    // (epoch, leader, high watermark, log end, applied end, state)
    let (epoch, leader, hw, leo, applied, state) = match status {
        Some(s) => (
            Some(s.epoch),
            s.leader.map_or(-1, |l| l.0),
            s.high_watermark,
            s.log_end_offset,
            s.applied_offset,
            role_name(s.role),
        ),
        // The quorum is not attached yet (the node is starting).
        None => (None, -1, 0, 0, 0, "unattached"),
    };
    let mut gauges: Vec<(&str, &str, i64)> = vec![
        (
            "kafka_server_raft_metrics_current_leader",
            "The metadata quorum's leader as this node knows it, -1 for none (Kafka's raft-metrics current-leader).",
            i64::from(leader),
        ),
        (
            "kafka_server_raft_metrics_high_watermark",
            "The metadata log's high watermark on this node (Kafka's raft-metrics high-watermark).",
            hw,
        ),
        (
            "kafka_server_raft_metrics_log_end_offset",
            "The metadata log's end offset on this node (Kafka's raft-metrics log-end-offset).",
            leo,
        ),
        (
            "kafka_server_broker_metadata_metrics_last_applied_record_offset",
            "The offset of the last metadata log entry this node applied to its image, -1 for none (Kafka's broker-metadata-metrics last-applied-record-offset).",
            applied - 1,
        ),
    ];
    if let Some(epoch) = epoch {
        gauges.insert(
            0,
            (
                "kafka_server_raft_metrics_current_epoch",
                "The metadata quorum's epoch on this node (Kafka's raft-metrics current-epoch).",
                i64::from(epoch),
            ),
        );
    }
    for (name, help, value) in gauges {
        header(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {value}");
    }
    let name = "kafka_server_raft_metrics_current_state";
    header(
        out,
        name,
        "gauge",
        "1 for this node's role in the metadata quorum (Kafka's raft-metrics current-state, a string there).",
    );
    let _ = writeln!(out, "{name}{{state=\"{state}\"}} 1");
}

/// Kafka's names for the roles in `current-state`.
fn role_name(role: RoleKind) -> &'static str {
    match role {
        RoleKind::Unattached => "unattached",
        RoleKind::Prospective => "prospective",
        RoleKind::Candidate => "candidate",
        RoleKind::Leader => "leader",
        RoleKind::Follower => "follower",
        RoleKind::Resigned => "resigned",
    }
}
