//! The Prometheus text exposition format 0.0.4: every metric's `# HELP` and `# TYPE`, then
//! its samples. Names follow Kafka's JMX names as the Prometheus JMX exporter maps them
//! (`kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t` becomes
//! `kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`: domain, type and name
//! lower-cased and joined, `PerSec` meters as `_total` counters). docs/OPERATIONS.md's "Metrics" lists
//! them all.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use strata_protocol::messages::ApiKey;

use crate::broker::Broker;
use crate::metrics::registry::{
    APIS, CONNECTIONS, CONNECTIONS_REFUSED_PER_IP, FAILED_AUTHENTICATIONS, FETCH_CONSUMER,
    FETCH_FOLLOWER, FETCH_KTLS_BYTES, FETCH_PURGATORY, FETCH_TAIL_CACHE_BYTES, FETCH_TLS_BYTES,
    FOLLOWER_FETCH_BYTES, FRAME_TIMEOUTS, LATENCY_BOUNDS_US, PREFERRED_READ_REPLICA_ANSWERS,
    PRODUCE_PURGATORY, SUCCESSFUL_AUTHENTICATIONS, traffic,
};

/// A per-partition metric: name, type, help, and how to read it from a sample.
type PartitionMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&PartitionSample) -> String,
);

/// A traffic metric: Kafka's name part, Strata's, the help, and its counter in a sample.
type TrafficMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&PartitionSample) -> u64,
);

/// One partition's sample values, read under its log lock for a moment.
struct PartitionSample {
    topic: String,
    partition: i32,
    bytes_in: u64,
    messages_in: u64,
    bytes_out: u64,
    size: u64,
    segments: usize,
    log_start: i64,
    log_end: i64,
    /// High watermark minus last stable offset.
    lso_lag: i64,
    open_txns: usize,
}

/// Renders every metric. Takes each partition's log lock once, briefly.
#[must_use]
pub fn render(broker: &Broker) -> String {
    let sessions = broker.fetch_sessions.stats();
    let mut partitions: Vec<PartitionSample> = broker
        .all_partitions()
        .iter()
        .map(|p| {
            let t = traffic().find(&p.topic, p.index);
            let load = |f: fn(
                &crate::metrics::registry::PartitionTraffic,
            ) -> &std::sync::atomic::AtomicU64| {
                t.as_ref().map_or(0, |t| f(t).load(Ordering::Relaxed))
            };
            let hw = p.high_watermark();
            let mut log = p.log();
            let lso = log.last_stable_offset(hw);
            PartitionSample {
                topic: p.topic.clone(),
                partition: p.index,
                bytes_in: load(|t| &t.bytes_in),
                messages_in: load(|t| &t.messages_in),
                bytes_out: load(|t| &t.bytes_out),
                size: log.size_bytes(),
                segments: log.segment_count(),
                log_start: log.log_start_offset(),
                log_end: log.log_end_offset(),
                lso_lag: hw - lso,
                open_txns: log.producer_state().txns().open_count(),
            }
        })
        .collect();
    partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    // Counters of partitions that are gone (deleted topics) are dropped here.
    {
        let live: std::collections::HashSet<(&str, i32)> = partitions
            .iter()
            .map(|p| (p.topic.as_str(), p.partition))
            .collect();
        traffic().retain(|t, p| live.contains(&(t, p)));
    }

    let mut out = String::with_capacity(4096 + partitions.len() * 1024);
    render_traffic(&mut out, &partitions);
    let per_partition: [PartitionMetric; 6] = [
        (
            "kafka_log_log_size",
            "gauge",
            "Bytes in the partition's segment files (Kafka's Log Size).",
            |p| p.size.to_string(),
        ),
        (
            "kafka_log_log_numlogsegments",
            "gauge",
            "Segments of the partition's log, the active one included (Kafka's NumLogSegments).",
            |p| p.segments.to_string(),
        ),
        (
            "kafka_log_log_logstartoffset",
            "gauge",
            "The partition's log start offset (Kafka's LogStartOffset).",
            |p| p.log_start.to_string(),
        ),
        (
            "kafka_log_log_logendoffset",
            "gauge",
            "The partition's log end offset (Kafka's LogEndOffset).",
            |p| p.log_end.to_string(),
        ),
        (
            "kafka_cluster_partition_laststableoffsetlag",
            "gauge",
            "High watermark minus last stable offset: what read_committed consumers cannot read yet because a transaction is open or undecided (Kafka's LastStableOffsetLag).",
            |p| p.lso_lag.to_string(),
        ),
        (
            "strata_log_ongoing_transactions",
            "gauge",
            "Transactions open in the partition's log (a transactional batch written, no marker yet).",
            |p| p.open_txns.to_string(),
        ),
    ];
    for (name, kind, help, value) in per_partition {
        header(&mut out, name, kind, help);
        for p in &partitions {
            let _ = writeln!(
                out,
                "{name}{{topic=\"{}\",partition=\"{}\"}} {}",
                escape(&p.topic),
                p.partition,
                value(p)
            );
        }
    }

    render_requests(&mut out);
    crate::server::client_quotas::render_metrics(&mut out, escape);
    super::replication::render(&mut out, broker);
    super::lag::render(&mut out, broker);
    render_cleaner(&mut out, broker);

    let gauges: [(&str, &str, &str, i64); 19] = [
        (
            "kafka_server_socket_server_metrics_connection_count",
            "gauge",
            "Open connections on every listener, controller listeners included (Kafka's connection-count).",
            CONNECTIONS.load(Ordering::Relaxed),
        ),
        (
            "strata_fetch_zero_copy_bytes_total",
            "counter",
            "Fetch record bytes sent with sendfile, from the page cache to the socket.",
            i64::try_from(broker.zero_copy_bytes.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_copied_bytes_total",
            "counter",
            "Fetch record bytes read into memory and written (sendfile unsupported or STRATA_ZERO_COPY=0).",
            i64::try_from(broker.copied_bytes.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_connection_frame_timeouts_total",
            "counter",
            "Connections closed because a request's body fell more than 5 s behind 1 MiB/s.",
            i64::try_from(FRAME_TIMEOUTS.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_request_memory_pool_waits_total",
            "counter",
            "Frames that waited for queued.max.request.bytes before their body was read.",
            i64::try_from(
                broker
                    .request_memory
                    .throttled_reads
                    .load(Ordering::Relaxed),
            )
            .unwrap_or(i64::MAX),
        ),
        (
            "strata_request_memory_share_waits_total",
            "counter",
            "Frames that waited because their client (principal, or address if anonymous) held half of a queued.max.request.bytes pool.",
            i64::try_from(broker.request_memory.owner_waits.load(Ordering::Relaxed))
                .unwrap_or(i64::MAX),
        ),
        (
            "strata_connections_refused_per_ip_total",
            "counter",
            "New connections closed at once because their address held max.connections.per.ip.",
            i64::try_from(CONNECTIONS_REFUSED_PER_IP.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_tls_bytes_total",
            "counter",
            "Fetch record bytes read, encrypted in user space and written, on TLS connections.",
            i64::try_from(FETCH_TLS_BYTES.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_ktls_bytes_total",
            "counter",
            "Fetch record bytes sent with sendfile on TLS connections whose keys the kernel holds (kTLS).",
            i64::try_from(FETCH_KTLS_BYTES.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_tail_cache_bytes_total",
            "counter",
            "Fetch record bytes sent from a segment's in-memory tail cache (STRATA_DIRECT_IO) instead of the file.",
            i64::try_from(FETCH_TAIL_CACHE_BYTES.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_tail_cache_bytes",
            "gauge",
            "Bytes of recent appends the active segments hold in memory for fetches at the tail (STRATA_DIRECT_IO).",
            i64::try_from(strata_storage::direct::tail_cached_bytes()).unwrap_or(i64::MAX),
        ),
        (
            "kafka_server_socket_server_metrics_failed_authentication_total",
            "counter",
            "SASL authentications refused (Kafka's failed-authentication-total).",
            i64::try_from(FAILED_AUTHENTICATIONS.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "kafka_server_socket_server_metrics_successful_authentication_total",
            "counter",
            "SASL authentications that succeeded (Kafka's successful-authentication-total).",
            i64::try_from(SUCCESSFUL_AUTHENTICATIONS.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_follower_served_bytes_total",
            "counter",
            "Record bytes this node answered to consumer fetches as a follower replica (KIP-392).",
            i64::try_from(FOLLOWER_FETCH_BYTES.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_preferred_read_replica_total",
            "counter",
            "Partition answers in which this leader sent a consumer to a preferred read replica (KIP-392).",
            i64::try_from(PREFERRED_READ_REPLICA_ANSWERS.load(Ordering::Relaxed))
                .unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_sessions",
            "gauge",
            "Incremental fetch sessions cached (KIP-227; Kafka's NumIncrementalFetchSessions).",
            i64::try_from(sessions.sessions).unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_session_partitions",
            "gauge",
            "Partitions over all cached fetch sessions (Kafka's NumIncrementalFetchPartitionsCached).",
            i64::try_from(sessions.partitions).unwrap_or(i64::MAX),
        ),
        (
            "strata_fetch_session_evictions_total",
            "counter",
            "Fetch sessions evicted to make room for others.",
            i64::try_from(sessions.evictions).unwrap_or(i64::MAX),
        ),
        (
            "process_open_fds",
            "gauge",
            "Open file descriptors of the broker process (/proc/self/fd).",
            open_fds().unwrap_or(-1),
        ),
    ];
    for (name, kind, help, value) in gauges {
        header(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
    let purgatory = "kafka_server_delayedoperationpurgatory_purgatorysize";
    header(
        &mut out,
        purgatory,
        "gauge",
        "Requests waiting (Kafka's PurgatorySize): Fetch, parked until min_bytes arrive or max_wait_ms passes; Produce, appended and waiting for their flush.messages group commit.",
    );
    for (op, gauge) in [("Fetch", &FETCH_PURGATORY), ("Produce", &PRODUCE_PURGATORY)] {
        let _ = writeln!(
            out,
            "{purgatory}{{delayedOperation=\"{op}\"}} {}",
            gauge.load(Ordering::Relaxed)
        );
    }
    out
}

/// Traffic per topic under Kafka's names (`BrokerTopicMetrics` has a `topic` tag), and per
/// partition under Strata's: one sample of each partition's counters feeds both, so within
/// a scrape a topic's value is exactly the sum of its partitions'. The per-partition series
/// are as many as the partitions this node hosts, like Kafka's own per-partition `Log`
/// gauges beside them; a partition's counters go when it leaves the node.
fn render_traffic(out: &mut String, partitions: &[PartitionSample]) {
    let metrics: [TrafficMetric; 3] = [
        (
            "bytesin",
            "bytes_in",
            "Record bytes appended by produce requests (Kafka's BytesInPerSec)",
            |p| p.bytes_in,
        ),
        (
            "messagesin",
            "messages_in",
            "Records appended (Kafka's MessagesInPerSec)",
            |p| p.messages_in,
        ),
        (
            "bytesout",
            "bytes_out",
            "Record bytes answered to fetch requests (Kafka's BytesOutPerSec)",
            |p| p.bytes_out,
        ),
    ];
    for (kafka, strata, help, value) in metrics {
        let name = format!("kafka_server_brokertopicmetrics_{kafka}_total");
        header(out, &name, "counter", &format!("{help}, per topic."));
        // Samples are sorted by topic, so each topic's partitions are adjacent.
        for chunk in partitions.chunk_by(|a, b| a.topic == b.topic) {
            let total: u64 = chunk.iter().map(value).sum();
            let _ = writeln!(
                out,
                "{name}{{topic=\"{}\"}} {total}",
                escape(&chunk[0].topic)
            );
        }
        let name = format!("strata_partition_{strata}_total");
        header(out, &name, "counter", &format!("{help}, per partition."));
        for p in partitions {
            let _ = writeln!(
                out,
                "{name}{{topic=\"{}\",partition=\"{}\"}} {}",
                escape(&p.topic),
                p.partition,
                value(p)
            );
        }
    }
}

/// Requests and their latency per API, for the APIs that have been called; Fetch also as
/// Kafka's `FetchConsumer` and `FetchFollower`.
fn render_requests(out: &mut String) {
    let mut called: Vec<(String, &crate::metrics::registry::ApiStats)> = ApiKey::iter()
        .filter_map(|k| {
            let stats = APIS.get(usize::try_from(k as i16).ok()?)?;
            (stats.count.load(Ordering::Relaxed) > 0).then(|| (format!("{k:?}"), stats))
        })
        .collect();
    for (name, stats) in [
        ("FetchConsumer", &FETCH_CONSUMER),
        ("FetchFollower", &FETCH_FOLLOWER),
    ] {
        if stats.count.load(Ordering::Relaxed) > 0 {
            called.push((name.to_owned(), stats));
        }
    }
    let requests = "kafka_network_requestmetrics_requests_total";
    header(
        out,
        requests,
        "counter",
        "Requests handled, per API (Kafka's RequestsPerSec).",
    );
    for (api, stats) in &called {
        let _ = writeln!(
            out,
            "{requests}{{request=\"{api}\"}} {}",
            stats.count.load(Ordering::Relaxed)
        );
    }
    let time = "kafka_network_requestmetrics_totaltimems";
    header(
        out,
        time,
        "histogram",
        "Milliseconds from a request's decoding to its response being ready, per API (Kafka's TotalTimeMs, without the socket write).",
    );
    for (api, stats) in &called {
        // Buckets are read once each and summed, so the cumulative counts never decrease
        // within a scrape; `_count` is their total, consistent with them.
        let mut cumulative = 0u64;
        for (i, bucket) in stats.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = LATENCY_BOUNDS_US
                .get(i)
                .map_or_else(|| "+Inf".to_owned(), |us| format_ms(*us));
            let _ = writeln!(
                out,
                "{time}_bucket{{request=\"{api}\",le=\"{le}\"}} {cumulative}"
            );
        }
        let sum_ms = stats.sum_us.load(Ordering::Relaxed) as f64 / 1000.0;
        let _ = writeln!(out, "{time}_sum{{request=\"{api}\"}} {sum_ms}");
        let _ = writeln!(out, "{time}_count{{request=\"{api}\"}} {cumulative}");
    }
}

pub(super) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Microseconds as milliseconds without trailing zeros (`0.1`, `2.5`, `1000`).
fn format_ms(us: u64) -> String {
    if us.is_multiple_of(1000) {
        (us / 1000).to_string()
    } else {
        let s = format!("{}.{:03}", us / 1000, us % 1000);
        s.trim_end_matches('0').to_owned()
    }
}

/// A label value with `\`, `"` and newlines escaped, as the format requires.
pub(super) fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Entries of `/proc/self/fd` (the directory handle this opens is one of them, and is not
/// counted). `None` off Linux.
fn open_fds() -> Option<i64> {
    let n = std::fs::read_dir("/proc/self/fd").ok()?.count();
    i64::try_from(n.saturating_sub(1)).ok()
}

/// The log cleaner's gauges under Kafka's names (`LogCleaner`, `LogCleanerManager`), Strata's
/// counters of its passes, and each compacted log's dirty ratio at the last round.
fn render_cleaner(out: &mut String, broker: &Broker) {
    let c = &broker.log_cleaner;
    let now = crate::now_ms();
    let since = |t: i64| if t > 0 { now.saturating_sub(t) } else { -1 };
    let load = |a: &std::sync::atomic::AtomicU64| {
        i64::try_from(a.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
    };
    let gauges: [(&str, &str, &str, i64); 9] = [
        (
            "kafka_log_logcleanermanager_max_dirty_percent",
            "gauge",
            "The highest dirty ratio of a compacted log at the cleaner's last round, in percent (Kafka's max-dirty-percent).",
            load(&c.max_dirty_percent),
        ),
        (
            "kafka_log_logcleanermanager_time_since_last_run_ms",
            "gauge",
            "Milliseconds since the cleaner's last round, -1 before the first (Kafka's time-since-last-run-ms).",
            since(c.last_run_ms.load(Ordering::Relaxed)),
        ),
        (
            "kafka_log_logcleaner_max_clean_time_secs",
            "gauge",
            "Seconds the last cleaning pass took (Kafka's max-clean-time-secs).",
            load(&c.last_pass_ms) / 1000,
        ),
        (
            "kafka_log_logcleaner_cleaner_recopy_percent",
            "gauge",
            "Bytes the last pass wrote per 100 it read (Kafka's cleaner-recopy-percent).",
            load(&c.last_recopy_percent),
        ),
        (
            "kafka_log_logcleaner_max_buffer_utilization_percent",
            "gauge",
            "How full the last pass's offset map got, in percent (Kafka's max-buffer-utilization-percent).",
            load(&c.last_buffer_percent),
        ),
        (
            "strata_log_cleaner_passes_total",
            "counter",
            "Cleaning passes run.",
            load(&c.passes),
        ),
        (
            "strata_log_cleaner_read_bytes_total",
            "counter",
            "Bytes the cleaning passes read.",
            load(&c.bytes_read),
        ),
        (
            "strata_log_cleaner_written_bytes_total",
            "counter",
            "Bytes the cleaning passes wrote.",
            load(&c.bytes_written),
        ),
        (
            "strata_log_cleaner_time_since_last_clean_ms",
            "gauge",
            "Milliseconds since a pass last cleaned a log, -1 before the first.",
            since(c.last_clean_ms.load(Ordering::Relaxed)),
        ),
    ];
    for (name, kind, help, value) in gauges {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
    let name = "strata_log_cleaner_dirty_ratio";
    header(
        out,
        name,
        "gauge",
        "A compacted log's dirty ratio (bytes written since its last pass, over its bytes up to where cleaning stops) at the cleaner's last round.",
    );
    let ratios = c
        .dirty_ratios
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    for ((topic, partition), ratio) in ratios {
        let _ = writeln!(
            out,
            "{name}{{topic=\"{}\",partition=\"{partition}\"}} {ratio:.4}",
            escape(&topic)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_print_as_milliseconds() {
        assert_eq!(format_ms(100), "0.1");
        assert_eq!(format_ms(250), "0.25");
        assert_eq!(format_ms(2_500), "2.5");
        assert_eq!(format_ms(60_000_000), "60000");
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
