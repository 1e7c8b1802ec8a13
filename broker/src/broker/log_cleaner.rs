//! The log cleaner over this node's logs (Kafka's `LogCleaner` and `LogCleanerManager`):
//! every log whose `cleanup.policy` includes `compact`, leader or follower alike (each replica
//! cleans its own log, never past its own high watermark), `__consumer_offsets` and
//! `__transaction_state` among them.
//!
//! A round ([`Broker::clean_filthiest_log`]) takes the log with the highest dirty ratio above
//! its `min.cleanable.dirty.ratio`, or one whose oldest dirty batch is older than its
//! `max.compaction.lag.ms`, and runs one pass of [`strata_storage::cleaner`] over it: the plan
//! and each group's install under the partition's log lock, the reading and writing without
//! it. The pass's end goes to the log directory's `cleaner-offset-checkpoint`. The server
//! runs `log.cleaner.threads` loops of rounds on the blocking pool, each `log.cleaner.backoff.ms`
//! apart while nothing is due; a log being cleaned by one is skipped by the others, and each
//! has its own share of `log.cleaner.io.max.bytes.per.second`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use strata_storage::cleaner::{self, CleanerSettings, CompactionConfig, Throttler};

use super::Broker;

/// The tagged field of a DescribeLogDirs partition (v2 and later) that carries a compacted
/// log's dirty ratio at the cleaner's last round, as an 8-byte big-endian `f64`: Strata's
/// own, far above Kafka's tags (clients skip tagged fields they do not know), and what
/// `strata admin topics describe` shows.
pub const DIRTY_RATIO_TAG: i32 = 10_000;

/// The value of [`DIRTY_RATIO_TAG`] for `ratio`.
#[must_use]
pub fn encode_dirty_ratio(ratio: f64) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(&ratio.to_be_bytes())
}

/// The ratio a [`DIRTY_RATIO_TAG`] value carries; `None` for one of another length.
#[must_use]
pub fn decode_dirty_ratio(value: &[u8]) -> Option<f64> {
    <[u8; 8]>::try_from(value).ok().map(f64::from_be_bytes)
}

/// The cleaner's state on this node: the checkpoint, the throttle, and what the metrics show.
pub struct LogCleanerState {
    pub settings: CleanerSettings,
    /// `log.cleaner.enable`.
    pub enabled: bool,
    /// `log.cleaner.backoff.ms`.
    pub backoff_ms: u64,
    /// `log.cleaner.threads`: how many loops of rounds run.
    pub threads: usize,
    checkpoint: Mutex<Option<BTreeMap<(String, i32), i64>>>,
    /// The logs a pass is cleaning now.
    in_progress: Mutex<BTreeSet<(String, i32)>>,
    /// Kafka's `max-dirty-percent`: the highest dirty ratio seen by the last round, in percent.
    pub max_dirty_percent: AtomicU64,
    /// Passes run, and bytes read and written by them.
    pub passes: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    /// When the last round ran (`time-since-last-run-ms`) and how long the last pass took.
    pub last_run_ms: AtomicI64,
    pub last_clean_ms: AtomicI64,
    /// The last pass: how long it took, its bytes written per 100 read (Kafka's
    /// `cleaner-recopy-percent`) and its offset map's fill (`max-buffer-utilization-percent`).
    pub last_pass_ms: AtomicU64,
    pub last_recopy_percent: AtomicU64,
    pub last_buffer_percent: AtomicU64,
    /// Each compacted log's dirty ratio at the last round.
    pub dirty_ratios: Mutex<BTreeMap<(String, i32), f64>>,
}

impl LogCleanerState {
    #[must_use]
    pub fn new(settings: CleanerSettings, enabled: bool, backoff_ms: u64, threads: usize) -> Self {
        LogCleanerState {
            settings,
            enabled,
            backoff_ms,
            threads: threads.max(1),
            checkpoint: Mutex::new(None),
            in_progress: Mutex::new(BTreeSet::new()),
            max_dirty_percent: AtomicU64::new(0),
            passes: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            last_run_ms: AtomicI64::new(0),
            last_clean_ms: AtomicI64::new(0),
            last_pass_ms: AtomicU64::new(0),
            last_recopy_percent: AtomicU64::new(0),
            last_buffer_percent: AtomicU64::new(0),
            dirty_ratios: Mutex::new(BTreeMap::new()),
        }
    }

    /// A throttle for one loop of rounds: its share of `log.cleaner.io.max.bytes.per.second`.
    #[must_use]
    pub fn throttler(&self) -> Throttler {
        Throttler::new(self.settings.max_io_bytes_per_sec / self.threads as f64)
    }

    fn in_progress(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, i32)>> {
        self.in_progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The dirty ratio of each compacted log at the last round.
    #[must_use]
    pub fn dirty_ratio(&self, topic: &str, partition: i32) -> Option<f64> {
        self.dirty_ratios
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(topic.to_owned(), partition))
            .copied()
    }
}

impl Broker {
    /// Whether `topic`'s effective `cleanup.policy` includes `compact`, with its compaction
    /// settings (see [`compaction_of`]).
    #[must_use]
    pub fn compaction_config(&self, topic: &str) -> Option<CompactionConfig> {
        let image = self.image();
        let overrides = image.topics.get(topic).map(|t| t.configs.clone())?;
        let configs =
            crate::config::dynamic::with_dynamic_defaults(&image, self.config.node_id, &overrides);
        compaction_of(&self.config, &configs)
    }

    /// One round of the cleaner: cleans the filthiest compacted log that is due and that no
    /// other loop is cleaning, if any, within `throttle`. Returns whether a pass ran.
    pub fn clean_filthiest_log(&self, now_ms: i64, throttle: &mut Throttler) -> bool {
        let state = &self.log_cleaner;
        state.last_run_ms.store(now_ms, Ordering::Relaxed);
        let mut checkpoint = state
            .checkpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entries =
            checkpoint.get_or_insert_with(|| cleaner::read_checkpoint(&self.config.log_dir));
        let busy = state.in_progress().clone();
        let mut best = None;
        let mut max_ratio: f64 = 0.0;
        let mut ratios = BTreeMap::new();
        for p in self.all_partitions() {
            let Some(cc) = self.compaction_config(&p.topic) else {
                continue;
            };
            let Some(lso) = p.cleanable_last_stable_offset() else {
                continue;
            };
            let key = (p.topic.clone(), p.index);
            // A truncation below the checkpoint (a follower's) lowers it, as Kafka's
            // `maybeTruncateCheckpoint`: what was fetched again there is dirty.
            let truncated = p.log().take_truncation();
            if let Some(t) = truncated
                && entries.get(&key).is_some_and(|cp| *cp > t)
            {
                entries.insert(key.clone(), t);
            }
            let cp = entries.get(&key).copied();
            let span = match p.log().cleanable_span(cp, lso, &cc, now_ms) {
                Ok(span) => span,
                Err(e) => {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e,
                        "cannot size a log for cleaning");
                    continue;
                }
            };
            max_ratio = max_ratio.max(span.dirty_ratio());
            ratios.insert((p.topic.clone(), p.index), span.dirty_ratio());
            if !span.needs_cleaning(&cc) || busy.contains(&key) {
                continue;
            }
            let better = best.as_ref().is_none_or(
                |(_, _, s): &(_, _, strata_storage::cleaner::CleanableSpan)| {
                    span.dirty_ratio() > s.dirty_ratio()
                },
            );
            if better {
                best = Some((p, cc, span));
            }
        }
        state
            .max_dirty_percent
            .store((max_ratio * 100.0) as u64, Ordering::Relaxed);
        *state
            .dirty_ratios
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = ratios;
        let Some((p, cc, span)) = best else {
            return false;
        };
        // The pass runs without the checkpoint's lock, so that other loops pick other logs.
        let key = (p.topic.clone(), p.index);
        state.in_progress().insert(key.clone());
        drop(checkpoint);
        // The plan under the log's lock, released before the pass (whose installs take it).
        let plan = p.log().clean_plan(span, &cc);
        let outcome = plan.and_then(|plan| {
            cleaner::clean(&plan, &state.settings, now_ms, throttle, &mut |g| {
                p.log().install_cleaned(g, crate::now_ms())
            })
        });
        let mut checkpoint = state
            .checkpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.in_progress().remove(&key);
        let entries =
            checkpoint.get_or_insert_with(|| cleaner::read_checkpoint(&self.config.log_dir));
        match outcome {
            Ok(o) => {
                let s = o.stats;
                tracing::info!(topic = %p.topic, partition = p.index,
                    first_dirty = span.first_dirty, end_offset = o.end_offset,
                    dirty_ratio = span.dirty_ratio(), read = s.bytes_read, written = s.bytes_written,
                    groups = s.groups_installed, skipped = s.groups_skipped,
                    elapsed_ms = s.elapsed.as_millis(), "cleaned a log");
                state.passes.fetch_add(1, Ordering::Relaxed);
                state.bytes_read.fetch_add(s.bytes_read, Ordering::Relaxed);
                state
                    .bytes_written
                    .fetch_add(s.bytes_written, Ordering::Relaxed);
                state
                    .last_clean_ms
                    .store(crate::now_ms(), Ordering::Relaxed);
                state.last_pass_ms.store(
                    u64::try_from(s.elapsed.as_millis()).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
                state.last_recopy_percent.store(
                    s.bytes_written.saturating_mul(100) / s.bytes_read.max(1),
                    Ordering::Relaxed,
                );
                state
                    .last_buffer_percent
                    .store((s.map_utilization * 100.0) as u64, Ordering::Relaxed);
                entries.insert((p.topic.clone(), p.index), o.end_offset);
                let hosted: std::collections::HashSet<(String, i32)> = self
                    .all_partitions()
                    .iter()
                    .map(|p| (p.topic.clone(), p.index))
                    .collect();
                entries.retain(|k, _| hosted.contains(k));
                if let Err(e) = cleaner::write_checkpoint(&self.config.log_dir, entries) {
                    tracing::warn!(error = %e, "cannot write the cleaner checkpoint");
                }
                true
            }
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cleaning failed");
                false
            }
        }
    }
}

/// The compaction settings of a log whose topic configs (overrides over the dynamic broker
/// defaults, [`crate::config::dynamic::with_dynamic_defaults`]) are `configs`, else the
/// static `log.cleaner.*` defaults; `None` unless its `cleanup.policy` includes `compact`.
#[must_use]
pub fn compaction_of(
    c: &crate::config::BrokerConfig,
    configs: &BTreeMap<String, String>,
) -> Option<CompactionConfig> {
    let value = |topic_key: &str, broker_key: &str| -> Option<&String> {
        configs.get(topic_key).or_else(|| c.values.get(broker_key))
    };
    let policy = value("cleanup.policy", "log.cleanup.policy")?;
    if !policy.split(',').any(|p| p.trim() == "compact") {
        return None;
    }
    let int = |t: &str, b: &str, default: i64| {
        value(t, b)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(default)
    };
    let d = CompactionConfig::default();
    Some(CompactionConfig {
        min_cleanable_dirty_ratio: value(
            "min.cleanable.dirty.ratio",
            "log.cleaner.min.cleanable.ratio",
        )
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(d.min_cleanable_dirty_ratio),
        min_compaction_lag_ms: int(
            "min.compaction.lag.ms",
            "log.cleaner.min.compaction.lag.ms",
            d.min_compaction_lag_ms,
        ),
        max_compaction_lag_ms: int(
            "max.compaction.lag.ms",
            "log.cleaner.max.compaction.lag.ms",
            d.max_compaction_lag_ms,
        ),
        delete_retention_ms: int(
            "delete.retention.ms",
            "log.cleaner.delete.retention.ms",
            d.delete_retention_ms,
        ),
    })
}
