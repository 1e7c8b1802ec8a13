//! The partition logs a broker hosts: opened at start (on [`RECOVERY_THREADS`] threads, a
//! partition that cannot be opened kept offline), and directories the metadata image does
//! not place on this node removed.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use strata_kraft::MetadataImage;
use strata_storage::Log;

use strata_kraft::METADATA_LOG_DIR;

use super::Broker;
use crate::coordinator::offsets::OFFSETS_TOPIC;
use crate::partition::Partition;

/// How many partitions are opened at once at start: Kafka's default for
/// `num.recovery.threads.per.data.dir` (2 since Kafka 4.0, KIP-1030), for our one log
/// directory. Opening is CRC checks and reads of the active segments' tails, so two threads
/// keep the disk and a core busy without taking every core of a small machine.
const RECOVERY_THREADS: usize = 2;

impl Broker {
    /// Opens every partition this node leads, at start, [`RECOVERY_THREADS`] at a time. A
    /// partition whose log cannot be opened is logged and kept offline
    /// ([`Broker::hosted_partition`]) instead of stopping the broker: the other partitions
    /// are served, and nothing in its directory is removed or rewritten here, so an operator
    /// can repair it and restart.
    pub(super) fn open_partitions_at_start(&self, image: &MetadataImage, clean: bool, now_ms: i64) {
        let mut jobs = Vec::new();
        for topic in image.topics.values() {
            let cfg = self.log_config_in(image, &topic.configs);
            for p in &topic.partitions {
                if p.leader == self.config.node_id {
                    jobs.push((topic, p.partition, cfg.clone()));
                }
            }
        }
        // After a crash each log recovers from its recovery point; the checkpoint is read once
        // here, not once per partition.
        let recovery_points = if clean {
            HashMap::new()
        } else {
            strata_storage::checkpoint::recovery_points(&self.config.log_dir)
        };
        // Workers take the next partition from a shared counter, so one partition with a long
        // recovery does not hold back a fixed share of the others.
        let next = AtomicUsize::new(0);
        let open_some = || {
            let mut results = Vec::new();
            while let Some((topic, index, cfg)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                let dir = self.partition_dir(&topic.name, *index);
                let recovery_point = recovery_points
                    .get(&(topic.name.clone(), *index))
                    .copied()
                    .unwrap_or(0);
                let log =
                    Log::open_with_recovery_point(&dir, cfg.clone(), now_ms, clean, recovery_point)
                        .and_then(|mut log| {
                            // Taken once: a topic created again under the name later
                            // does not inherit it.
                            match self.take_checkpointed_log_start(&topic.name, *index) {
                                Some(start) => log.restore_log_start_offset(start).map(|_| log),
                                None => Ok(log),
                            }
                        });
                results.push((*topic, *index, dir, log));
            }
            results
        };
        let threads = RECOVERY_THREADS.min(jobs.len());
        let results = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads).map(|_| scope.spawn(open_some)).collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect::<Vec<_>>()
        });
        let mut opened = HashMap::new();
        let mut offline = HashSet::new();
        for (topic, index, dir, log) in results {
            match log {
                Ok(log) => {
                    let part = Partition::new(topic.name.clone(), topic.topic_id, index, log);
                    opened.insert((topic.name.clone(), index), part);
                }
                Err(e) => {
                    tracing::error!(
                        topic = %topic.name,
                        partition = index,
                        dir = %dir.display(),
                        error = %e,
                        "cannot open the log of {}-{}; the partition is offline until it is repaired and the broker restarted",
                        topic.name,
                        index,
                    );
                    offline.insert((topic.name.clone(), index));
                }
            }
        }
        if !offline.is_empty() {
            tracing::error!(
                offline = offline.len(),
                online = opened.len(),
                "started with offline partitions"
            );
        }
        *self
            .partitions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = opened;
        *self
            .offline
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = offline;
    }

    /// Removes partition directories that the metadata image does not know: a topic no longer
    /// there (a crash between the metadata record of a deletion and the removal of the data),
    /// or a partition index past the topic's count (a crash between creating the logs of a
    /// new topic or new partitions and committing their records). Partitions never shrink,
    /// so such an index was never committed. A partition whose replicas no longer include
    /// this node (moved away while it was down) goes too, unless it is offline here (left
    /// as found, for an operator).
    pub(super) fn remove_orphan_dirs(&self, image: &MetadataImage) {
        let Ok(entries) = std::fs::read_dir(&self.config.log_dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Before `__consumer_offsets` is in the image, its directories are a store's
            // from before the topic was replicated (an upgraded node): the topic's creation
            // adopts them, with their offsets.
            let offsets_dir = name.starts_with(&format!("{OFFSETS_TOPIC}-"))
                && !image.topics.contains_key(OFFSETS_TOPIC);
            if name == METADATA_LOG_DIR || offsets_dir || !entry.path().is_dir() {
                continue;
            }
            let Some((topic, idx)) = name.rsplit_once('-') else {
                continue;
            };
            let Ok(idx) = idx.parse::<usize>() else {
                continue;
            };
            let Ok(idx) = i32::try_from(idx) else {
                continue;
            };
            let placed_here = image.topics.get(topic).is_some_and(|t| {
                t.partitions.iter().any(|p| {
                    p.partition == idx
                        && (p.replicas.is_empty() || p.replicas.contains(&self.config.node_id))
                })
            });
            let offline = self.is_offline(topic, idx);
            if placed_here || offline {
                continue;
            }
            tracing::warn!(
                dir = %name,
                "removing a partition directory the metadata does not know (a deleted topic, or a creation that was not committed)"
            );
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
