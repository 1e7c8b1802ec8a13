//! Consumer-group lag, computed at scrape time for the groups this node coordinates.
//!
//! Kafka's brokers export no lag; operators run an exporter that asks the cluster for
//! committed offsets and log ends. The coordinator has both at hand, so Strata reports
//! lag itself, under the names of the widely used `kafka_exporter`
//! (`kafka_consumergroup_current_offset` and `kafka_consumergroup_lag`, labels
//! `consumergroup`, `topic`, `partition`, and `kafka_consumergroup_lag_sum` per group and
//! topic), plus each group's total and largest lag over its partitions.
//!
//! - **Lag** is the partition's log end as a consumer sees it (its high watermark, what
//!   ListOffsets `latest` answers and `kafka-consumer-groups.sh` shows as LOG-END-OFFSET)
//!   minus the committed offset, never below 0 (a committed offset past the end, after an
//!   unclean truncation, is not negative lag).
//! - **Which partitions.** Those with a committed offset in a group whose coordinator is
//!   this node, and a replica on this node (leader or follower; a follower's high
//!   watermark trails its leader's by a fetch). A partition without a replica here has no
//!   lag series on this node.
//! - **Cardinality** is the number of committed (group, partition) pairs this node
//!   coordinates: offsets of deleted topics are deleted with them, and those of groups
//!   that are gone expire after `offsets.retention.minutes`.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::exposition::{escape, header};
use crate::broker::Broker;
use crate::server::placement::{self, Placement};

/// One committed partition of a group.
struct Committed {
    topic: String,
    partition: i32,
    offset: i64,
    lag: i64,
}

/// A per-partition metric: name, help, and its value for one committed partition.
type PerPartition = (&'static str, &'static str, fn(&Committed) -> i64);
/// A per-group metric: name, help, and its value over the group's committed partitions.
type PerGroup = (&'static str, &'static str, fn(&[Committed]) -> i64);

/// Renders the lag of every group this node coordinates.
pub(super) fn render(out: &mut String, broker: &Broker) {
    let mut groups: Vec<(String, Vec<Committed>)> = Vec::new();
    for group in broker.offsets.group_ids() {
        if placement::coordinator(broker, &group) != Placement::Local {
            continue;
        }
        let committed: Vec<Committed> = broker
            .offsets
            .fetch_all(&group)
            .into_iter()
            .filter(|(_, _, c)| c.offset >= 0)
            .filter_map(|(topic, partition, c)| {
                let hw = broker.partition(&topic, partition)?.high_watermark();
                Some(Committed {
                    lag: (hw - c.offset).max(0),
                    offset: c.offset,
                    topic,
                    partition,
                })
            })
            .collect();
        if !committed.is_empty() {
            groups.push((group, committed));
        }
    }

    let per_partition: [PerPartition; 2] = [
        (
            "kafka_consumergroup_current_offset",
            "The group's committed offset of the partition (kafka_exporter's name; groups this node coordinates).",
            |c| c.offset,
        ),
        (
            "kafka_consumergroup_lag",
            "The partition's high watermark minus the group's committed offset, at least 0 (kafka_exporter's name).",
            |c| c.lag,
        ),
    ];
    for (name, help, value) in per_partition {
        header(out, name, "gauge", help);
        for (group, committed) in &groups {
            for c in committed {
                let _ = writeln!(
                    out,
                    "{name}{{consumergroup=\"{}\",topic=\"{}\",partition=\"{}\"}} {}",
                    escape(group),
                    escape(&c.topic),
                    c.partition,
                    value(c)
                );
            }
        }
    }
    let name = "kafka_consumergroup_lag_sum";
    header(
        out,
        name,
        "gauge",
        "The group's lag summed over the topic's partitions (kafka_exporter's name).",
    );
    for (group, committed) in &groups {
        let mut by_topic: BTreeMap<&str, i64> = BTreeMap::new();
        for c in committed {
            *by_topic.entry(&c.topic).or_default() += c.lag;
        }
        for (topic, lag) in by_topic {
            let _ = writeln!(
                out,
                "{name}{{consumergroup=\"{}\",topic=\"{}\"}} {lag}",
                escape(group),
                escape(topic)
            );
        }
    }
    let per_group: [PerGroup; 2] = [
        (
            "strata_consumergroup_lag_sum",
            "The group's lag summed over every partition it committed.",
            |c| c.iter().map(|c| c.lag).sum(),
        ),
        (
            "strata_consumergroup_lag_max",
            "The group's largest lag over the partitions it committed.",
            |c| c.iter().map(|c| c.lag).max().unwrap_or(0),
        ),
    ];
    for (name, help, value) in per_group {
        header(out, name, "gauge", help);
        for (group, committed) in &groups {
            let _ = writeln!(
                out,
                "{name}{{consumergroup=\"{}\"}} {}",
                escape(group),
                value(committed)
            );
        }
    }
}
