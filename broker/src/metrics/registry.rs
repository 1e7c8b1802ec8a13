//! The counters behind the metrics endpoint. Every hook on the request path is a handful of
//! relaxed atomic adds; the only lock is a read lock on one of [`SHARDS`] shards of the
//! per-partition map, taken once per partition per request (never per record), and a write
//! lock only the first time a partition is seen.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// API keys are below this (Kafka's go up to the low 90s); a larger key is not counted.
pub const MAX_API_KEY: usize = 128;

/// Upper bounds of the latency histogram's buckets, in microseconds (Prometheus `le`, shown
/// in milliseconds): from 0.1 ms to 30 s, roughly 1-2.5-5 steps, so `histogram_quantile`
/// gives p50, p99 and p99.9 within a bucket's width.
pub const LATENCY_BOUNDS_US: [u64; 18] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// One API's requests: a count and a latency histogram.
pub struct ApiStats {
    /// Requests answered (or dropped: acks=0 produces count too).
    pub count: AtomicU64,
    /// Total latency in microseconds, for the histogram's `_sum`.
    pub sum_us: AtomicU64,
    /// Per bucket (not cumulative; the exposition sums them), plus one for `+Inf`.
    pub buckets: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
}

impl ApiStats {
    const fn new() -> Self {
        ApiStats {
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            buckets: [const { AtomicU64::new(0) }; LATENCY_BOUNDS_US.len() + 1],
        }
    }

    fn record(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BOUNDS_US.partition_point(|&b| b < us);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// Per API key, indexed by the key.
pub static APIS: [ApiStats; MAX_API_KEY] = [const { ApiStats::new() }; MAX_API_KEY];

/// Fetches from consumers, kept apart from those of follower replicas as Kafka's
/// `request="FetchConsumer"` and `request="FetchFollower"` are (each is in `Fetch` too):
/// a follower's fetch parks for up to `replica.fetch.wait.max.ms` by design, which would
/// otherwise hide consumers' latency.
pub static FETCH_CONSUMER: ApiStats = ApiStats::new();
/// Fetches from follower replicas (see [`FETCH_CONSUMER`]).
pub static FETCH_FOLLOWER: ApiStats = ApiStats::new();

/// Who sent a Fetch, for [`FETCH_CONSUMER`] and [`FETCH_FOLLOWER`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchFrom {
    /// A consumer (`replica_id` -1).
    Consumer,
    /// A follower replica (`replica_id` >= 0, or from v15 its `ReplicaState`).
    Follower,
}

/// Records one request of `api_key` that took `elapsed`; a Fetch also under who sent it.
pub fn record_api(api_key: i16, fetch: Option<FetchFrom>, elapsed: Duration) {
    if let Some(stats) = usize::try_from(api_key).ok().and_then(|k| APIS.get(k)) {
        stats.record(elapsed);
    }
    match fetch {
        Some(FetchFrom::Consumer) => FETCH_CONSUMER.record(elapsed),
        Some(FetchFrom::Follower) => FETCH_FOLLOWER.record(elapsed),
        None => {}
    }
}

/// One partition's traffic (Kafka's `BrokerTopicMetrics`, kept per partition; per topic
/// and per broker are sums over these).
#[derive(Default)]
pub struct PartitionTraffic {
    /// Record bytes appended by produces (Kafka's `BytesInPerSec`).
    pub bytes_in: AtomicU64,
    /// Records appended (Kafka's `MessagesInPerSec`); a retried idempotent batch counts 0.
    pub messages_in: AtomicU64,
    /// Record bytes answered to fetches (Kafka's `BytesOutPerSec`).
    pub bytes_out: AtomicU64,
}

/// How many shards the partition map has: a power of two, enough that concurrent
/// connections rarely touch the same lock.
const SHARDS: usize = 16;

/// Topic, then partition: a lookup by `&str` allocates nothing.
type Shard = RwLock<HashMap<String, HashMap<i32, Arc<PartitionTraffic>>>>;

/// `(topic, partition)` to its counters, in [`SHARDS`] shards by topic.
pub struct TrafficMap {
    shards: [Shard; SHARDS],
    hasher: std::collections::hash_map::RandomState,
}

impl TrafficMap {
    fn new() -> Self {
        TrafficMap {
            shards: std::array::from_fn(|_| RwLock::new(HashMap::new())),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    fn shard(&self, topic: &str) -> &Shard {
        // The modulo keeps the index in range whatever the hash.
        let h = self.hasher.hash_one(topic);
        &self.shards[usize::try_from(h % SHARDS as u64).unwrap_or(0)]
    }

    /// The counters of one partition, created on first use.
    pub fn get(&self, topic: &str, partition: i32) -> Arc<PartitionTraffic> {
        if let Some(t) = self.find(topic, partition) {
            return t;
        }
        self.shard(topic)
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(topic.to_owned())
            .or_default()
            .entry(partition)
            .or_default()
            .clone()
    }

    /// The counters of one partition, if it has any.
    pub fn find(&self, topic: &str, partition: i32) -> Option<Arc<PartitionTraffic>> {
        self.shard(topic)
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(topic)?
            .get(&partition)
            .cloned()
    }

    /// Drops the counters of partitions `keep` says no to (deleted topics), so the map does
    /// not grow with topic churn.
    pub fn retain(&self, keep: impl Fn(&str, i32) -> bool) {
        for shard in &self.shards {
            let mut map = shard
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            map.retain(|t, parts| {
                parts.retain(|p, _| keep(t, *p));
                !parts.is_empty()
            });
        }
    }
}

/// Every partition's traffic counters.
pub fn traffic() -> &'static TrafficMap {
    static MAP: std::sync::OnceLock<TrafficMap> = std::sync::OnceLock::new();
    MAP.get_or_init(TrafficMap::new)
}

/// Open client connections (Kafka's `connection-count`).
pub static CONNECTIONS: AtomicI64 = AtomicI64::new(0);
/// Failed SASL authentications (Kafka's `failed-authentication-total`).
pub static FAILED_AUTHENTICATIONS: AtomicU64 = AtomicU64::new(0);
/// Successful SASL authentications (Kafka's `successful-authentication-total`).
pub static SUCCESSFUL_AUTHENTICATIONS: AtomicU64 = AtomicU64::new(0);
/// Connections closed because a frame's body did not arrive by its deadline.
pub static FRAME_TIMEOUTS: AtomicU64 = AtomicU64::new(0);
/// New connections closed at once because their address held `max.connections.per.ip`.
pub static CONNECTIONS_REFUSED_PER_IP: AtomicU64 = AtomicU64::new(0);
/// Fetch record bytes sent through user-space TLS (read, encrypted and written).
pub static FETCH_TLS_BYTES: AtomicU64 = AtomicU64::new(0);
/// Fetch record bytes sent with `sendfile` on kernel TLS connections.
pub static FETCH_KTLS_BYTES: AtomicU64 = AtomicU64::new(0);
/// Fetch record bytes sent from a segment's tail cache (direct I/O), not from the file.
pub static FETCH_TAIL_CACHE_BYTES: AtomicU64 = AtomicU64::new(0);
/// Fetches parked waiting for `min_bytes` (Kafka's Fetch purgatory size).
pub static FETCH_PURGATORY: AtomicI64 = AtomicI64::new(0);
/// KIP-392: record bytes this node answered to consumer fetches as a follower replica.
/// Kafka has no metric of its own for it (its BytesOutPerSec counts both roles).
pub static FOLLOWER_FETCH_BYTES: AtomicU64 = AtomicU64::new(0);
/// KIP-392: partition answers in which this leader sent a consumer to a preferred read
/// replica instead of serving it.
pub static PREFERRED_READ_REPLICA_ANSWERS: AtomicU64 = AtomicU64::new(0);
/// Produces appended and waiting for their group-commit fsync (Kafka's Produce purgatory
/// holds acks=all produces waiting for followers; on one node the wait is the fsync).
pub static PRODUCE_PURGATORY: AtomicI64 = AtomicI64::new(0);

/// ISR shrinks this node proposed as a leader and the controller committed (Kafka's
/// `IsrShrinksPerSec`).
pub static ISR_SHRINKS: AtomicU64 = AtomicU64::new(0);
/// ISR expansions this node proposed as a leader and the controller committed (Kafka's
/// `IsrExpandsPerSec`).
pub static ISR_EXPANDS: AtomicU64 = AtomicU64::new(0);

/// Adds one to a gauge for as long as it lives.
pub struct GaugeGuard(&'static AtomicI64);

impl GaugeGuard {
    /// Counts one in `gauge` until dropped.
    pub fn enter(gauge: &'static AtomicI64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_land_in_the_first_bucket_that_holds_them() {
        let s = ApiStats::new();
        s.record(Duration::from_micros(100)); // le 0.1 ms
        s.record(Duration::from_micros(101)); // le 0.25 ms
        s.record(Duration::from_secs(3600)); // +Inf
        let b: Vec<u64> = s
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        assert_eq!((b[0], b[1], b[LATENCY_BOUNDS_US.len()]), (1, 1, 1));
        assert_eq!(s.count.load(Ordering::Relaxed), 3);
        assert_eq!(s.sum_us.load(Ordering::Relaxed), 100 + 101 + 3_600_000_000);
    }

    #[test]
    fn traffic_is_kept_per_partition_and_pruned() {
        let m = TrafficMap::new();
        m.get("a", 0).bytes_in.fetch_add(5, Ordering::Relaxed);
        m.get("a", 0).bytes_in.fetch_add(5, Ordering::Relaxed);
        m.get("a", 1).bytes_in.fetch_add(1, Ordering::Relaxed);
        assert_eq!(m.find("a", 0).unwrap().bytes_in.load(Ordering::Relaxed), 10);
        m.retain(|t, p| (t, p) != ("a", 0));
        assert!(m.find("a", 0).is_none());
        assert!(m.find("a", 1).is_some());
        let g = GaugeGuard::enter(&CONNECTIONS);
        assert!(CONNECTIONS.load(Ordering::Relaxed) >= 1);
        drop(g);
    }
}
