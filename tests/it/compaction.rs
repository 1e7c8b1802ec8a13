//! Log compaction (Kafka's log cleaner) on the real binary, with librdkafka (the `rdkafka`
//! crate) as the producer and the readers.
//!
//! - `a_compacted_topic_keeps_each_keys_latest_value`: 3,000 updates over 30 keys (with a
//!   tombstone for one key, and compressed batches) to a topic whose `cleanup.policy` is
//!   then changed to `compact` (`strata admin topics alter-config`); the cleaner picks the
//!   change up and shrinks the log to about the live data, and a reader from the
//!   start, as Kafka Connect and schema registries read their topics at start (to the end,
//!   then tail), gets the same answer per key before and after cleaning, every record at
//!   its original offset, the tombstone still there (`delete.retention.ms`); records
//!   appended after the clean are tailed as before. The cleaner's metrics, and the dirty
//!   ratio in `strata admin topics describe`, show the pass.
//! - `kill9_while_cleaning_loses_no_latest_value`: kill -9 during the cleaner's passes, 20
//!   times; after each restart the log opens and a restore reads every key's latest
//!   acknowledged value, at increasing offsets.
//! - `a_million_updates_over_a_thousand_keys_keep_the_disk_bounded`: 1,000,000 updates of
//!   1 KB over 1,000 keys into 1 MiB segments: the partition's size on disk ends within four
//!   segments of its live data (about 1 MB), and a restore reads each key's last update.
//! - `two_cleaner_threads_clean_two_logs_at_once`: with `log.cleaner.threads=2`, passes over
//!   two logs overlap in time (from the broker's "cleaned a log" lines).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rdkafka::consumer::Consumer;
use rdkafka::topic_partition_list::Offset;
use strata_tests::{wait_until, with_broker};

use crate::rdkafka_clients::*;

/// The `.log` bytes of a partition directory.
fn log_bytes(dir: &std::path::Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name().to_string_lossy().ends_with(".log") {
            total += e.metadata()?.len();
        }
    }
    Ok(total)
}

/// `words` hex words that vary with `i` and do not compress away, so that a log of values
/// carrying them spans many segments.
pub fn noise(i: usize, words: u64) -> String {
    (0..words)
        .map(|j| {
            format!(
                "{:08x}",
                (i as u64 * 2_654_435_761 + j * 40_503) % 4_294_967_291
            )
        })
        .collect()
}

/// Reads partition 0 from the start to `end` (exclusive) as a state-restoring application
/// does: each key's last value (`None`: deleted), and the offsets read, in order.
#[allow(clippy::type_complexity)]
fn restore(
    broker: &strata_tests::Broker,
    topic: &str,
    end: i64,
) -> anyhow::Result<(BTreeMap<Vec<u8>, Option<Vec<u8>>>, Vec<i64>)> {
    let c = consumer(broker, &[])?;
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
    c.assign(&tpl)?;
    let mut state = BTreeMap::new();
    let mut offsets = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while offsets.last().is_none_or(|o| *o + 1 < end) {
        ensure!(
            Instant::now() < deadline,
            "read only to {:?} of {end}",
            offsets.last()
        );
        let Some(m) = poll_n(&c, 1, Duration::from_secs(30))?.pop() else {
            continue;
        };
        offsets.push(m.offset);
        state.insert(m.key.context("a keyless record")?, m.value);
    }
    Ok((state, offsets))
}

#[test]
fn a_compacted_topic_keeps_each_keys_latest_value() {
    const KEYS: usize = 30;
    const UPDATES: usize = 3_000;
    let metrics_port = strata_tests::free_port().expect("a free port");
    let metrics = format!("http://127.0.0.1:{metrics_port}/metrics");
    with_broker(
        &[
            ("metrics.listener", &metrics),
            ("log.segment.bytes", "16384"),
            ("log.cleaner.min.cleanable.ratio", "0.1"),
            ("log.cleaner.backoff.ms", "200"),
        ],
        |broker| {
            // Written while the topic's policy is `delete`, made `compact` afterwards: the
            // cleaner picks the change up at run time.
            let topic = "compacted";
            create_topic(broker, topic, 1)?;
            let (producer, deliveries) = producer(
                broker,
                &[
                    ("batch.size", "4096"),
                    ("linger.ms", "2"),
                    ("compression.type", "lz4"),
                ],
            )?;
            for i in 0..UPDATES {
                let key = format!("key-{}", i % KEYS);
                let value = format!("{key}-update-{i}-{}", noise(i, 12));
                send(&producer, topic, i, &key, value.as_bytes(), &[], now_ms())?;
            }
            await_reports(&producer, &deliveries, UPDATES, PHASE_TIMEOUT)?;
            // A tombstone, sent through the same client.
            let record =
                rdkafka::producer::BaseRecord::<str, [u8], usize>::with_opaque_to(topic, UPDATES)
                    .key("key-7");
            producer
                .send(record)
                .map_err(|(e, _)| anyhow::anyhow!("send: {e}"))?;
            await_reports(&producer, &deliveries, UPDATES + 1, PHASE_TIMEOUT)?;
            let end = i64::try_from(UPDATES + 1)?;

            let dir = broker.data_dir().join(format!("{topic}-0"));
            let before_bytes = log_bytes(&dir)?;
            // Before the cleaner gets to it, or while it does: the answer a restore gets.
            let (before, _) = restore(broker, topic, end)?;
            ensure!(before.len() == KEYS, "{} keys", before.len());
            ensure!(before[b"key-7".as_slice()].is_none(), "the tombstone");

            crate::admin_cli_run::admin_ok(
                &broker.bootstrap(),
                &[
                    "topics",
                    "alter-config",
                    "--topic",
                    topic,
                    "--set",
                    "cleanup.policy=compact",
                ],
            );
            let mut last = 0;
            wait_until(
                "the cleaner shrinks the log to about its live data",
                Duration::from_secs(60),
                Duration::from_millis(250),
                || {
                    last = log_bytes(&dir)?;
                    Ok(last * 4 < before_bytes)
                },
            )
            .with_context(|| format!("{last} of {before_bytes} bytes left"))?;
            println!("measured: compaction left {last} of {before_bytes} log bytes");
            // The cleaner's metrics: a pass, and the log's dirty ratio after it. A pass is
            // counted once it has ended, which may be after its cleaned segments are in place.
            use crate::metrics_scrape::{get, scrape};
            let mut samples = scrape(metrics_port)?;
            wait_until(
                "the cleaner's pass counted",
                Duration::from_secs(20),
                Duration::from_millis(100),
                || {
                    samples = scrape(metrics_port)?;
                    Ok(get(&samples, "strata_log_cleaner_passes_total")? >= 1.0)
                },
            )?;
            ensure!(get(&samples, "strata_log_cleaner_written_bytes_total")? > 0.0);
            let series =
                format!("strata_log_cleaner_dirty_ratio{{topic=\"{topic}\",partition=\"0\"}}");
            let ratio = get(&samples, &series)?;
            ensure!((0.0..=1.0).contains(&ratio), "dirty ratio {ratio}");
            ensure!(get(&samples, "kafka_log_logcleanermanager_max_dirty_percent").is_ok());
            // `strata admin topics describe` shows the ratio (a DescribeLogDirs tagged field).
            let out = crate::admin_cli_run::admin_ok(
                &broker.bootstrap(),
                &["topics", "describe", "--topic", topic],
            );
            let rows = crate::admin_cli_run::table(&out, "TOPIC");
            let shown: f64 = rows
                .first()
                .and_then(|r| r.get("DIRTY-RATIO"))
                .context("no DIRTY-RATIO column")?
                .parse()
                .with_context(|| format!("a ratio: {out}"))?;
            ensure!(
                (0.0..=1.0).contains(&shown),
                "dirty ratio shown {shown}: {out}"
            );
            let (after, offsets) = restore(broker, topic, end)?;
            ensure!(after == before, "a restore after cleaning differs");
            ensure!(
                offsets.windows(2).all(|w| w[0] < w[1]),
                "offsets only increase"
            );
            ensure!(
                offsets.len() < UPDATES / 4,
                "{} records read after cleaning",
                offsets.len()
            );
            // Every record read is the one written at that offset.
            let acked = deliveries.acked.lock().unwrap().clone();
            let by_offset: BTreeMap<i64, usize> =
                acked.iter().map(|(&i, &(_, o))| (o, i)).collect();
            for o in &offsets {
                ensure!(by_offset.contains_key(o), "offset {o} was never written");
            }
            // The application tails on: new writes arrive as before.
            let c = consumer(broker, &[])?;
            let (_, high) = watermarks(&c, topic, 0)?;
            ensure!(high == end, "the log end stays {end}: {high}");
            send(
                &producer,
                topic,
                UPDATES + 1,
                "key-1",
                b"after",
                &[],
                now_ms(),
            )?;
            await_reports(&producer, &deliveries, UPDATES + 2, PHASE_TIMEOUT)?;
            let got = consume(
                &c,
                topic,
                1,
                Offset::Offset(end),
                1,
                Duration::from_secs(10),
            )?;
            ensure!(
                got[0].offset == end && got[0].value.as_deref() == Some(b"after".as_slice()),
                "{:?}",
                got[0]
            );
            Ok(())
        },
    );
}

/// kill -9 while the cleaner works, 20 times: after each restart the log opens, every key's
/// latest acknowledged value is what a restore reads, and offsets only increase.
#[test]
fn kill9_while_cleaning_loses_no_latest_value() {
    const KEYS: usize = 40;
    const ROUNDS: usize = 20;
    const PER_ROUND: usize = 400;
    let _serial = strata_tests::serial();
    with_broker(
        &[
            ("log.cleanup.policy", "compact"),
            ("log.segment.bytes", "8192"),
            ("log.cleaner.min.cleanable.ratio", "0.01"),
            ("log.cleaner.backoff.ms", "50"),
            // Slow passes, so that the kills land inside them.
            ("log.cleaner.io.max.bytes.per.second", "100000"),
        ],
        |broker| {
            let topic = "compacted-kill9";
            create_topic(broker, topic, 1)?;
            let mut latest: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            let mut end = 0i64;
            let mut seen_clean = 0;
            for round in 0..ROUNDS {
                let (producer, deliveries) =
                    producer(broker, &[("batch.size", "2048"), ("linger.ms", "1")])?;
                for i in 0..PER_ROUND {
                    let key = format!("key-{}", (i * 7 + round) % KEYS);
                    let value = format!("{key}-r{round}-{i}-{}", "y".repeat(60));
                    send(&producer, topic, i, &key, value.as_bytes(), &[], now_ms())?;
                    latest.insert(key.into_bytes(), Some(value.into_bytes()));
                }
                await_reports(&producer, &deliveries, PER_ROUND, PHASE_TIMEOUT)?;
                ensure!(
                    deliveries.acked_count() == PER_ROUND,
                    "round {round}: not all acked"
                );
                drop(producer);
                end += i64::try_from(PER_ROUND)?;
                // Somewhere in the cleaner's next passes.
                std::thread::sleep(Duration::from_millis(
                    350 + u64::try_from(round * 97 % 1000)?,
                ));
                let dir = broker.data_dir().join(format!("{topic}-0"));
                if std::fs::read_dir(&dir)?
                    .any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().contains(".cleaned")))
                {
                    seen_clean += 1;
                }
                broker.kill9()?;
                broker.restart()?;
                let (state, offsets) = restore(broker, topic, end)?;
                ensure!(
                    state == latest,
                    "round {round}: a key's latest value differs"
                );
                ensure!(
                    offsets.windows(2).all(|w| w[0] < w[1]),
                    "round {round}: offsets go back"
                );
            }
            println!("measured: {ROUNDS} kill -9s, {seen_clean} with a clean's file on disk");
            let log = std::fs::read_to_string(broker.stderr_path())?;
            let passes = log.matches("cleaned a log").count();
            let resumed = log.matches("an unfinished clean").count()
                + log.matches("an interrupted clean").count();
            let longest = log
                .lines()
                .filter(|l| l.contains("cleaned a log"))
                .filter_map(|l| {
                    let ms = l.split("elapsed_ms=").nth(1)?.split_whitespace().next()?;
                    ms.parse::<u64>().ok()
                })
                .max()
                .unwrap_or(0);
            println!(
                "measured: {passes} passes in all (the longest {longest} ms); {resumed} files \
                 of interrupted passes found at restarts"
            );
            ensure!(passes > 0, "the cleaner never ran");
            Ok(())
        },
    );
}

/// Bytes of every file in a partition directory (the indexes too); a file the cleaner or
/// retention removes while it is listed counts nothing.
fn dir_bytes(dir: &std::path::Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        match e.and_then(|e| e.metadata()) {
            Ok(m) => total += m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(total)
}

/// 1,000,000 updates of 1 KB over 1,000 keys into 1 MiB segments: the partition's size on
/// disk settles within a few segments of its live data, and a restore reads each key's
/// last update.
#[test]
fn a_million_updates_over_a_thousand_keys_keep_the_disk_bounded() {
    const KEYS: usize = 1_000;
    const UPDATES: usize = 1_000_000;
    const VALUE: usize = 1_024;
    const SEGMENT: u64 = 1 << 20;
    let _serial = strata_tests::serial();
    with_broker(
        &[
            ("log.cleanup.policy", "compact"),
            ("log.segment.bytes", "1048576"),
            ("log.cleaner.backoff.ms", "50"),
        ],
        |broker| {
            use rdkafka::error::{KafkaError, RDKafkaErrorCode};
            use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
            let topic = "bounded";
            create_topic(broker, topic, 1)?;
            let p: BaseProducer = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", broker.bootstrap())
                .set("enable.idempotence", "true")
                .set("linger.ms", "5")
                .set("batch.size", "1000000")
                .set("queue.buffering.max.kbytes", "262144")
                .create()?;
            let dir = broker.data_dir().join(format!("{topic}-0"));
            let started = Instant::now();
            let mut peak = 0;
            let mut value = vec![b'v'; VALUE];
            for i in 0..UPDATES {
                let key = format!("key-{:04}", i % KEYS);
                value[..8].copy_from_slice(&(i as u64).to_be_bytes());
                loop {
                    let record = BaseRecord::<str, [u8]>::to(topic)
                        .partition(0)
                        .key(key.as_str())
                        .payload(&value);
                    match p.send(record) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                            p.poll(Duration::from_millis(5));
                        }
                        Err((e, _)) => anyhow::bail!("send {i}: {e}"),
                    }
                }
                if i % 20_000 == 0 {
                    p.poll(Duration::ZERO);
                    peak = peak.max(dir_bytes(&dir)?);
                    ensure!(
                        started.elapsed() < Duration::from_secs(300),
                        "too slow: {i} updates sent"
                    );
                }
            }
            p.flush(Duration::from_secs(120))?;
            let produced = started.elapsed();
            let c = consumer(broker, &[])?;
            let (_, end) = watermarks(&c, topic, 0)?;
            ensure!(
                end == i64::try_from(UPDATES)?,
                "log end {end}: not every update was acknowledged once"
            );
            // Live data: each key's record (key, value, record and batch framing).
            let live = (KEYS * (VALUE + 8 + 20)) as u64;
            let bound = live + 4 * SEGMENT;
            let mut size = 0;
            wait_until(
                "the partition settles near its live data",
                Duration::from_secs(120),
                Duration::from_millis(250),
                || {
                    size = dir_bytes(&dir)?;
                    peak = peak.max(size);
                    Ok(size <= bound)
                },
            )
            .with_context(|| format!("{size} bytes on disk, bound {bound}"))?;
            println!(
                "measured: {UPDATES} updates ({} MB appended) in {:.1} s; on disk at the end \
                 {size} bytes (live data about {live}, segments {SEGMENT}), peak seen {peak}",
                UPDATES * (VALUE + 8) / 1_000_000,
                produced.as_secs_f64()
            );
            // A restore reads each key's last update.
            let (state, offsets) = restore(broker, topic, end)?;
            ensure!(state.len() == KEYS, "{} keys restored", state.len());
            for (k, v) in &state {
                let k: usize = std::str::from_utf8(&k[4..])?.parse()?;
                let v = v.as_ref().context("a value")?;
                let i = u64::from_be_bytes(v[..8].try_into()?);
                ensure!(
                    i == (UPDATES - KEYS + k) as u64,
                    "key {k}: update {i} restored"
                );
            }
            ensure!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets go back");
            Ok(())
        },
    );
}

/// Seconds since midnight of a log line's RFC 3339 timestamp (`2026-12-05T08:27:50.181132Z`).
fn seconds_of_day(line: &str) -> Option<f64> {
    let time = line.split('T').nth(1)?.split('Z').next()?;
    let mut parts = time.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// `log.cleaner.threads=2`: two logs due at once are cleaned at once, each pass throttled
/// to its thread's share of `log.cleaner.io.max.bytes.per.second`.
#[test]
fn two_cleaner_threads_clean_two_logs_at_once() {
    const PER_TOPIC: usize = 2_000;
    let _serial = strata_tests::serial();
    with_broker(
        &[
            ("log.cleanup.policy", "compact"),
            ("log.segment.bytes", "16384"),
            ("log.cleaner.min.cleanable.ratio", "0.01"),
            ("log.cleaner.backoff.ms", "50"),
            ("log.cleaner.threads", "2"),
            // Slow passes (about a second each), so that they would not overlap by chance.
            ("log.cleaner.io.max.bytes.per.second", "600000"),
        ],
        |broker| {
            let topics = ["twin-a", "twin-b"];
            for t in topics {
                create_topic(broker, t, 1)?;
            }
            let (producer, deliveries) =
                producer(broker, &[("batch.size", "4096"), ("linger.ms", "2")])?;
            for i in 0..PER_TOPIC {
                for (n, t) in topics.iter().enumerate() {
                    let key = format!("key-{}", i % 20);
                    let value = format!("{key}-{i}-{}", noise(i, 16));
                    send(
                        &producer,
                        t,
                        i * 2 + n,
                        &key,
                        value.as_bytes(),
                        &[],
                        now_ms(),
                    )?;
                }
            }
            await_reports(&producer, &deliveries, PER_TOPIC * 2, PHASE_TIMEOUT)?;
            let log = || std::fs::read_to_string(broker.stderr_path()).unwrap_or_default();
            wait_until(
                "both logs are cleaned",
                Duration::from_secs(60),
                Duration::from_millis(250),
                || {
                    let l = log();
                    Ok(topics.iter().all(|t| {
                        l.lines().any(|x| {
                            x.contains("cleaned a log") && x.contains(&format!("topic={t} "))
                        })
                    }))
                },
            )?;
            // Each pass as (topic, start, end) in seconds of the day.
            let passes: Vec<(String, f64, f64)> = log()
                .lines()
                .filter(|l| l.contains("cleaned a log"))
                .filter_map(|l| {
                    let end = seconds_of_day(l)?;
                    let ms: f64 = l
                        .split("elapsed_ms=")
                        .nth(1)?
                        .split_whitespace()
                        .next()?
                        .parse()
                        .ok()?;
                    let topic = l
                        .split("topic=")
                        .nth(1)?
                        .split_whitespace()
                        .next()?
                        .to_owned();
                    Some((topic, end - ms / 1000.0, end))
                })
                .collect();
            let overlapping = passes
                .iter()
                .any(|a| passes.iter().any(|b| a.0 != b.0 && a.1 < b.2 && b.1 < a.2));
            println!("measured: passes (topic, start s, end s): {passes:?}");
            ensure!(overlapping, "no two passes overlapped: {passes:?}");
            Ok(())
        },
    );
}
