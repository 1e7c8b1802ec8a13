//! librdkafka (the `rdkafka` crate, librdkafka 2.12) against the real `strata` binary.
//!
//! - `produce_consume_<codec>`: 100,000 keyed messages with headers and explicit timestamps
//!   into 6 partitions, consumed back by manual assignment and checked record by record
//!   against the producer's delivery reports.
//! - `kill9_during_acks_all_produce`: no acknowledged write is lost across `kill -9`, and the
//!   offsets stay contiguous with no duplicates.
//! - `retention_by_bytes_moves_log_start_offset`: size-based retention deletes old segments and
//!   consumers reset to the new log start offset (earliest) or the end (latest).
//! - `on_disk_layout_is_kafkas`: segment files are named and laid out as Kafka's, and a clean
//!   SIGTERM shutdown exits 0 and keeps the data.
//!
//! Consumers use `assign` only: group coordination is out of scope for these tests, so no
//! offsets are committed. librdkafka requires a `group.id` for `assign`, so one is set.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, Headers, Message, OwnedHeaders, Timestamp};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{Broker, wait_until, with_broker};

/// Upper bound for each phase (produce, consume) of a scenario.
const PHASE_TIMEOUT: Duration = Duration::from_secs(120);
/// Upper bound for metadata and watermark requests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages per codec in `produce_consume_*`.
const CODEC_MESSAGES: usize = 100_000;
/// Distinct keys; each key is reused `CODEC_MESSAGES / KEYS` times so key-to-partition
/// stickiness and per-key order are meaningful.
const KEYS: usize = 1_000;

// ---------------------------------------------------------------------------------------------
// Message model: everything about message i is derived from i, so the consumer side can
// recompute what it should have received.

fn key_of(i: usize) -> String {
    format!("k{}", i % KEYS)
}

fn value_of(tag: &str, i: usize) -> Vec<u8> {
    // Variable length and repetitive, so every codec actually compresses something.
    let mut v = format!("{tag}|seq={i:08}|").into_bytes();
    for _ in 0..(1 + i % 7) {
        v.extend_from_slice(b"strata-payload-");
    }
    v
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// A message as the consumer saw it.
#[derive(Debug)]
struct Consumed {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp: Timestamp,
}

impl Consumed {
    /// The producer's sequence number, from the `seq` header.
    fn seq(&self) -> anyhow::Result<usize> {
        let (_, v) = self
            .headers
            .iter()
            .find(|(k, _)| k == "seq")
            .with_context(|| format!("no `seq` header in {self:?}"))?;
        let v = v.as_ref().context("`seq` header has a null value")?;
        std::str::from_utf8(v)?
            .parse()
            .with_context(|| format!("bad `seq` header in {self:?}"))
    }
}

// ---------------------------------------------------------------------------------------------
// Clients.

/// Where each message ended up, filled from librdkafka's delivery reports.
#[derive(Default)]
struct Deliveries {
    /// message index -> (partition, offset) for every acknowledged message.
    acked: Mutex<HashMap<usize, (i32, i64)>>,
    /// message index -> error for every message whose delivery failed.
    failed: Mutex<Vec<(usize, KafkaError)>>,
    /// Count of reports of either kind, to know when all are in.
    reports: AtomicU64,
    /// Messages acknowledged twice (a client or broker bug); checked in `await_reports`.
    duplicate_reports: AtomicU64,
}

impl Deliveries {
    fn acked_count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }
}

struct RecordingContext(Arc<Deliveries>);

impl ClientContext for RecordingContext {}

impl ProducerContext for RecordingContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, i: usize) {
        match result {
            Ok(m) => {
                let prev = self
                    .0
                    .acked
                    .lock()
                    .unwrap()
                    .insert(i, (m.partition(), m.offset()));
                if prev.is_some() {
                    // No panic here: this runs inside a librdkafka callback.
                    self.0.duplicate_reports.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err((e, _)) => self.0.failed.lock().unwrap().push((i, e.clone())),
        }
        self.0.reports.fetch_add(1, Ordering::Relaxed);
    }
}

type RecordingProducer = ThreadedProducer<RecordingContext>;

fn producer(
    broker: &Broker,
    settings: &[(&str, &str)],
) -> anyhow::Result<(RecordingProducer, Arc<Deliveries>)> {
    let deliveries = Arc::new(Deliveries::default());
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker.bootstrap())
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("enable.idempotence", "false");
    for (k, v) in settings {
        config.set(*k, *v);
    }
    let producer = config
        .create_with_context(RecordingContext(deliveries.clone()))
        .context("create producer")?;
    Ok((producer, deliveries))
}

/// Sends one message, waiting (bounded) while librdkafka's local queue is full.
fn send(
    producer: &RecordingProducer,
    topic: &str,
    i: usize,
    key: &str,
    value: &[u8],
    headers: OwnedHeaders,
    timestamp: i64,
) -> anyhow::Result<()> {
    let mut record = BaseRecord::with_opaque_to(topic, i)
        .key(key)
        .payload(value)
        .headers(headers)
        .timestamp(timestamp);
    let deadline = Instant::now() + PHASE_TIMEOUT;
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                ensure!(
                    Instant::now() < deadline,
                    "producer queue stayed full for {PHASE_TIMEOUT:?} (message {i})"
                );
                record = r;
                thread::sleep(Duration::from_millis(1));
            }
            Err((e, _)) => bail!("send of message {i} failed: {e}"),
        }
    }
}

/// Waits (bounded) until every sent message has a delivery report.
fn await_reports(
    producer: &RecordingProducer,
    deliveries: &Deliveries,
    sent: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    // flush() returns when the queue is empty; poll on until the reports are counted too.
    let _ = producer.flush(timeout);
    while (deliveries.reports.load(Ordering::Relaxed) as usize) < sent {
        ensure!(
            Instant::now() < deadline,
            "only {} of {sent} delivery reports within {timeout:?}",
            deliveries.reports.load(Ordering::Relaxed)
        );
        thread::sleep(Duration::from_millis(10));
    }
    let dup = deliveries.duplicate_reports.load(Ordering::Relaxed);
    ensure!(dup == 0, "{dup} messages were acknowledged twice");
    Ok(())
}

fn consumer(broker: &Broker, settings: &[(&str, &str)]) -> anyhow::Result<BaseConsumer> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker.bootstrap())
        // Required by librdkafka for assign(); nothing is committed.
        .set("group.id", "strata-tests-assign-only")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest");
    for (k, v) in settings {
        config.set(*k, *v);
    }
    config.create().context("create consumer")
}

fn create_topic(broker: &Broker, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()
        .context("create admin client")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    let results = runtime
        .block_on(async {
            tokio::time::timeout(
                REQUEST_TIMEOUT * 2,
                admin.create_topics([&new_topic], &opts),
            )
            .await
        })
        .context("CreateTopics timed out")?
        .context("CreateTopics failed")?;
    for r in results {
        if let Err((name, code)) = r {
            bail!("CreateTopics {name}: {code:?}");
        }
    }
    // The topic must be visible in Metadata with all partitions led before producing to it.
    let probe = consumer(broker, &[])?;
    wait_until(
        &format!("topic {topic} visible with {partitions} partitions"),
        REQUEST_TIMEOUT,
        Duration::from_millis(100),
        || {
            let md = probe.fetch_metadata(Some(topic), REQUEST_TIMEOUT)?;
            let t = md.topics().first().context("no topic in metadata")?;
            Ok(t.error().is_none()
                && t.partitions().len() == partitions as usize
                && t.partitions()
                    .iter()
                    .all(|p| p.error().is_none() && p.leader() >= 0))
        },
    )
}

/// Assigns `partitions` of `topic` at `start` and polls until `expected` messages arrived or
/// `timeout` passed. Any consumer error fails the read.
fn consume(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
    start: Offset,
    expected: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<Consumed>> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, start)?;
    }
    consumer.assign(&tpl).context("assign")?;
    poll_n(consumer, expected, timeout)
}

fn poll_n(
    consumer: &BaseConsumer,
    expected: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<Consumed>> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::with_capacity(expected);
    while out.len() < expected {
        ensure!(
            Instant::now() < deadline,
            "consumed only {} of {expected} messages within {timeout:?}",
            out.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => bail!("consumer error after {} messages: {e}", out.len()),
            Some(Ok(m)) => out.push(Consumed {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                headers: m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default(),
                timestamp: m.timestamp(),
            }),
        }
    }
    Ok(out)
}

fn watermarks(consumer: &BaseConsumer, topic: &str, partition: i32) -> anyhow::Result<(i64, i64)> {
    consumer
        .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
        .with_context(|| format!("ListOffsets {topic}-{partition}"))
}

/// Checks that, in the order received, each partition's offsets run `first, first+1, ...`
/// with no gap and no duplicate.
fn check_contiguous(records: &[Consumed], first: &BTreeMap<i32, i64>) -> anyhow::Result<()> {
    let mut next: BTreeMap<i32, i64> = first.clone();
    for r in records {
        let n = next
            .get_mut(&r.partition)
            .with_context(|| format!("message from unexpected partition {}", r.partition))?;
        ensure!(
            r.offset == *n,
            "partition {}: expected offset {} next, got {} (gap, duplicate or reorder)",
            r.partition,
            n,
            r.offset
        );
        *n += 1;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// a. Every codec: 100k keyed messages with headers and timestamps, 6 partitions.

fn produce_consume(codec: &str) {
    with_broker(&[], |broker| {
        let topic = format!("codec-{codec}");
        let partitions = 6;
        create_topic(broker, &topic, partitions)?;

        let started = Instant::now();
        let (producer, deliveries) = producer(broker, &[("compression.type", codec)])?;
        let base_ts = now_ms() - 3_600_000;
        for i in 0..CODEC_MESSAGES {
            let headers = OwnedHeaders::new()
                .insert(Header {
                    key: "seq",
                    value: Some(&i.to_string()),
                })
                .insert(Header {
                    key: "codec",
                    value: Some(codec),
                });
            send(
                &producer,
                &topic,
                i,
                &key_of(i),
                &value_of(codec, i),
                headers,
                base_ts + i as i64,
            )?;
        }
        await_reports(&producer, &deliveries, CODEC_MESSAGES, PHASE_TIMEOUT)?;
        let produce_time = started.elapsed();
        {
            let failed = deliveries.failed.lock().unwrap();
            ensure!(
                failed.is_empty(),
                "{} deliveries failed, first: {:?}",
                failed.len(),
                failed.first()
            );
        }
        let acked = deliveries.acked.lock().unwrap().clone();
        ensure!(acked.len() == CODEC_MESSAGES, "acked {}", acked.len());

        // High watermarks equal the number of messages acked into each partition.
        let consumer = consumer(broker, &[])?;
        let mut per_partition: BTreeMap<i32, i64> = (0..partitions).map(|p| (p, 0)).collect();
        for (p, _) in acked.values() {
            *per_partition
                .get_mut(p)
                .with_context(|| format!("acked into unknown partition {p}"))? += 1;
        }
        for (&p, &n) in &per_partition {
            ensure!(
                n > 0,
                "partition {p} received no messages (keys not spread)"
            );
            let (low, high) = watermarks(&consumer, &topic, p)?;
            ensure!(
                (low, high) == (0, n),
                "partition {p}: watermarks ({low}, {high}), expected (0, {n})"
            );
        }

        let started = Instant::now();
        let records = consume(
            &consumer,
            &topic,
            partitions,
            Offset::Beginning,
            CODEC_MESSAGES,
            PHASE_TIMEOUT,
        )?;
        let consume_time = started.elapsed();
        check_contiguous(&records, &(0..partitions).map(|p| (p, 0)).collect())?;

        let mut seen = vec![false; CODEC_MESSAGES];
        let mut key_partition: HashMap<Vec<u8>, i32> = HashMap::new();
        let mut last_seq_of_key: HashMap<Vec<u8>, usize> = HashMap::new();
        for r in &records {
            let i = r.seq()?;
            ensure!(i < CODEC_MESSAGES, "seq {i} out of range");
            ensure!(!seen[i], "message {i} consumed twice");
            seen[i] = true;
            ensure!(
                acked.get(&i) == Some(&(r.partition, r.offset)),
                "message {i} read at {}-{} but acked at {:?}",
                r.partition,
                r.offset,
                acked.get(&i)
            );
            let key = key_of(i).into_bytes();
            ensure!(
                r.key.as_deref() == Some(&key[..]),
                "message {i}: key {:?}",
                r.key
            );
            ensure!(
                r.value.as_deref() == Some(&value_of(codec, i)[..]),
                "message {i}: wrong payload {:?}",
                r.value.as_ref().map(|v| String::from_utf8_lossy(v))
            );
            let want_headers = vec![
                ("seq".to_string(), Some(i.to_string().into_bytes())),
                ("codec".to_string(), Some(codec.as_bytes().to_vec())),
            ];
            ensure!(
                r.headers == want_headers,
                "message {i}: headers {:?}",
                r.headers
            );
            ensure!(
                r.timestamp == Timestamp::CreateTime(base_ts + i as i64),
                "message {i}: timestamp {:?}, expected CreateTime({})",
                r.timestamp,
                base_ts + i as i64
            );
            let p = *key_partition.entry(key.clone()).or_insert(r.partition);
            ensure!(
                p == r.partition,
                "key {} seen in partitions {p} and {}",
                key_of(i),
                r.partition
            );
            if let Some(prev) = last_seq_of_key.insert(key, i) {
                ensure!(
                    prev < i,
                    "key {}: seq {i} read after {prev} in partition {p}",
                    key_of(i)
                );
            }
        }
        ensure!(seen.iter().all(|&s| s), "some messages never consumed");
        eprintln!(
            "{codec}: produced {CODEC_MESSAGES} in {produce_time:?}, consumed in {consume_time:?}"
        );
        Ok(())
    });
}

#[test]
fn produce_consume_none() {
    produce_consume("none");
}

#[test]
fn produce_consume_gzip() {
    produce_consume("gzip");
}

#[test]
fn produce_consume_snappy() {
    produce_consume("snappy");
}

#[test]
fn produce_consume_lz4() {
    produce_consume("lz4");
}

#[test]
fn produce_consume_zstd() {
    produce_consume("zstd");
}

// ---------------------------------------------------------------------------------------------
// b. kill -9 in the middle of an acks=all produce stream.

#[test]
fn kill9_during_acks_all_produce() {
    with_broker(&[], |broker| {
        let topic = "kill9";
        let partitions = 3;
        create_topic(broker, topic, partitions)?;
        let (producer, deliveries) = producer(
            broker,
            &[
                // No retries: a message is written at most once, so offsets must stay
                // contiguous with no duplicate values.
                ("message.send.max.retries", "0"),
                ("message.timeout.ms", "20000"),
                ("reconnect.backoff.ms", "50"),
                ("reconnect.backoff.max.ms", "500"),
            ],
        )?;
        const ACKED_BEFORE_KILL: usize = 20_000;
        const SENT_WHILE_DOWN: usize = 2_000;
        const SENT_AFTER_RESTART: usize = 10_000;
        let value = |i: usize| value_of("kill9", i);
        let headers = |i: usize| {
            OwnedHeaders::new().insert(Header {
                key: "seq",
                value: Some(&i.to_string()),
            })
        };

        // Phase 1: stream until enough is acknowledged, then kill -9 while more is in flight.
        let deadline = Instant::now() + PHASE_TIMEOUT;
        let mut i = 0;
        while deliveries.acked_count() < ACKED_BEFORE_KILL {
            ensure!(
                Instant::now() < deadline,
                "only {} acked within {PHASE_TIMEOUT:?}",
                deliveries.acked_count()
            );
            send(
                &producer,
                topic,
                i,
                &key_of(i),
                &value(i),
                headers(i),
                now_ms(),
            )?;
            i += 1;
            if i % 64 == 0 {
                thread::sleep(Duration::from_millis(1));
            }
        }
        // Make sure requests are in flight at the moment of the kill.
        for _ in 0..500 {
            send(
                &producer,
                topic,
                i,
                &key_of(i),
                &value(i),
                headers(i),
                now_ms(),
            )?;
            i += 1;
        }
        broker.kill9()?;
        let acked_at_kill = deliveries.acked_count();
        for _ in 0..SENT_WHILE_DOWN {
            send(
                &producer,
                topic,
                i,
                &key_of(i),
                &value(i),
                headers(i),
                now_ms(),
            )?;
            i += 1;
        }
        thread::sleep(Duration::from_millis(300));
        broker.restart()?;

        // Phase 2: the same producer keeps going after the restart.
        for _ in 0..SENT_AFTER_RESTART {
            send(
                &producer,
                topic,
                i,
                &key_of(i),
                &value(i),
                headers(i),
                now_ms(),
            )?;
            i += 1;
        }
        let sent = i;
        await_reports(&producer, &deliveries, sent, PHASE_TIMEOUT)?;
        let acked = deliveries.acked.lock().unwrap().clone();
        let failed = deliveries.failed.lock().unwrap().len();
        eprintln!(
            "kill9: sent {sent}, acked {} ({acked_at_kill} before the kill), failed {failed}",
            acked.len()
        );
        let acked_after_restart = acked.keys().filter(|&&m| m >= sent - SENT_AFTER_RESTART);
        ensure!(
            acked_after_restart.count() > 0,
            "no message sent after the restart was acknowledged; failures: {:?}",
            deliveries
                .failed
                .lock()
                .unwrap()
                .iter()
                .rev()
                .take(3)
                .collect::<Vec<_>>()
        );

        // Read everything back up to the high watermark of each partition.
        let consumer = consumer(broker, &[])?;
        let mut total = 0usize;
        for p in 0..partitions {
            let (low, high) = watermarks(&consumer, topic, p)?;
            ensure!(low == 0, "partition {p}: log start offset {low}");
            total += high as usize;
        }
        let records = consume(
            &consumer,
            topic,
            partitions,
            Offset::Beginning,
            total,
            PHASE_TIMEOUT,
        )?;
        check_contiguous(&records, &(0..partitions).map(|p| (p, 0)).collect())?;
        let mut found: HashMap<usize, (i32, i64)> = HashMap::new();
        for r in &records {
            let m = r.seq()?;
            ensure!(m < sent, "unknown message {m}");
            ensure!(
                r.value.as_deref() == Some(&value(m)[..]),
                "message {m}: wrong payload"
            );
            if let Some(prev) = found.insert(m, (r.partition, r.offset)) {
                bail!(
                    "message {m} stored twice: at {prev:?} and {}-{}",
                    r.partition,
                    r.offset
                );
            }
        }
        let mut lost = Vec::new();
        for (m, at) in &acked {
            match found.get(m) {
                Some(f) if f == at => {}
                other => lost.push((*m, *at, other.copied())),
            }
        }
        lost.sort();
        ensure!(
            lost.is_empty(),
            "{} acknowledged messages lost or moved (message, acked at, found at), first: {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// c. Size-based retention.

fn log_files(dir: &std::path::Path) -> anyhow::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".log") {
            out.push((name, e.metadata()?.len()));
        }
    }
    out.sort();
    Ok(out)
}

#[test]
fn retention_by_bytes_moves_log_start_offset() {
    const SEGMENT_BYTES: u64 = 16 * 1024;
    const RETENTION_BYTES: u64 = 64 * 1024;
    with_broker(
        &[
            ("log.segment.bytes", "16384"),
            ("log.retention.bytes", "65536"),
            ("log.retention.check.interval.ms", "500"),
        ],
        |broker| {
            let topic = "retention";
            create_topic(broker, topic, 1)?;
            // Small batches so many segments roll; ~640 KB in all, about 40 segments' worth.
            let (producer, deliveries) =
                producer(broker, &[("batch.size", "2048"), ("linger.ms", "1")])?;
            let total = 3_000;
            let value = |i: usize| format!("retention-{i:08}-{}", "x".repeat(180)).into_bytes();
            for i in 0..total {
                let headers = OwnedHeaders::new().insert(Header {
                    key: "seq",
                    value: Some(&i.to_string()),
                });
                send(&producer, topic, i, "k", &value(i), headers, now_ms())?;
            }
            await_reports(&producer, &deliveries, total, PHASE_TIMEOUT)?;
            ensure!(deliveries.acked_count() == total, "not all acked");
            let acked = deliveries.acked.lock().unwrap().clone();
            let by_offset: HashMap<i64, usize> = acked.iter().map(|(&i, &(_, o))| (o, i)).collect();

            let dir = broker.data_dir().join(format!("{topic}-0"));
            let consumer = consumer(broker, &[])?;
            let mut last_state = String::new();
            wait_until(
                "retention deletes old segments and advances the log start offset",
                Duration::from_secs(30),
                Duration::from_millis(200),
                || {
                    let files = log_files(&dir)?;
                    let size: u64 = files.iter().map(|(_, s)| s).sum();
                    let (low, high) = watermarks(&consumer, topic, 0)?;
                    last_state = format!(
                        "log start {low}, end {high}, {} .log files ({size} bytes): {files:?}",
                        files.len()
                    );
                    Ok(low > 0
                        && high == total as i64
                        && size <= RETENTION_BYTES + SEGMENT_BYTES
                        && files.len() as u64 <= RETENTION_BYTES / SEGMENT_BYTES + 2)
                },
            )
            .with_context(|| format!("last seen: {last_state}"))?;
            let (log_start, high) = watermarks(&consumer, topic, 0)?;
            ensure!(
                log_files(&dir)?.first().map(|(n, _)| n.clone())
                    == Some(format!("{log_start:020}.log")),
                "oldest segment is not named after the log start offset {log_start}: {:?}",
                log_files(&dir)?
            );

            // earliest: assigned at offset 0 (now out of range) resets to the log start offset.
            let earliest = self::consumer(broker, &[("auto.offset.reset", "earliest")])?;
            let got = consume(
                &earliest,
                topic,
                1,
                Offset::Offset(0),
                (high - log_start) as usize,
                PHASE_TIMEOUT,
            )?;
            ensure!(
                got[0].offset == log_start,
                "earliest reset: first offset {}, log start {log_start}",
                got[0].offset
            );
            check_contiguous(&got, &[(0, log_start)].into())?;
            for r in &got {
                let i = r.seq()?;
                ensure!(
                    by_offset.get(&r.offset) == Some(&i)
                        && r.value.as_deref() == Some(&value(i)[..]),
                    "offset {}: got message {i}, acked there: {:?}",
                    r.offset,
                    by_offset.get(&r.offset)
                );
            }

            // latest: assigned at offset 0 resets to the end and then sees only new messages.
            // The reset happens asynchronously (and librdkafka's position() only moves on
            // consumed messages), so keep producing one message at a time until the consumer
            // sees one: it must be a new one, and from then on nothing is skipped.
            let latest = self::consumer(broker, &[("auto.offset.reset", "latest")])?;
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(topic, 0, Offset::Offset(0))?;
            latest.assign(&tpl)?;
            let mut next = total;
            let deadline = Instant::now() + Duration::from_secs(60);
            let first = loop {
                ensure!(
                    Instant::now() < deadline,
                    "latest consumer received nothing while {} new messages were produced",
                    next - total
                );
                let headers = OwnedHeaders::new().insert(Header {
                    key: "seq",
                    value: Some(&next.to_string()),
                });
                send(&producer, topic, next, "k", &value(next), headers, now_ms())?;
                next += 1;
                await_reports(&producer, &deliveries, next, PHASE_TIMEOUT)?;
                let got = poll_n(&latest, 1, Duration::from_millis(300));
                if let Ok(mut got) = got {
                    break got.remove(0);
                }
            };
            ensure!(
                first.offset >= high && first.seq()? >= total,
                "latest consumer received an old message: offset {} (log end was {high})",
                first.offset
            );
            let fresh = 10;
            for i in next..next + fresh {
                let headers = OwnedHeaders::new().insert(Header {
                    key: "seq",
                    value: Some(&i.to_string()),
                });
                send(&producer, topic, i, "k", &value(i), headers, now_ms())?;
            }
            await_reports(&producer, &deliveries, next + fresh, PHASE_TIMEOUT)?;
            let expected = (next + fresh - 1 - first.seq()?) as usize;
            let got = poll_n(&latest, expected, PHASE_TIMEOUT)?;
            check_contiguous(&got, &[(0, first.offset + 1)].into())?;
            for (n, r) in got.iter().enumerate() {
                ensure!(
                    r.seq()? == first.seq()? + 1 + n,
                    "latest consumer got {:?} at offset {}",
                    r.seq(),
                    r.offset
                );
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// d. Kafka's on-disk layout, and a clean shutdown keeps the data.

#[test]
fn on_disk_layout_is_kafkas() {
    with_broker(&[], |broker| {
        let topic = "layout";
        create_topic(broker, topic, 1)?;
        let (producer, deliveries) = producer(broker, &[])?;
        let n = 100;
        for i in 0..n {
            let headers = OwnedHeaders::new().insert(Header {
                key: "seq",
                value: Some(&i.to_string()),
            });
            send(
                &producer,
                topic,
                i,
                &key_of(i),
                &value_of("layout", i),
                headers,
                now_ms(),
            )?;
        }
        await_reports(&producer, &deliveries, n, PHASE_TIMEOUT)?;
        ensure!(deliveries.acked_count() == n, "not all acked");
        drop(producer);

        let dir = broker.data_dir().join(format!("{topic}-0"));
        for ext in ["log", "index", "timeindex"] {
            let p = dir.join(format!("00000000000000000000.{ext}"));
            ensure!(p.is_file(), "missing {}", p.display());
        }
        // The .log holds record batches byte for byte: the first batch starts at offset 0
        // (8-byte base offset), then batch length (4), partition leader epoch (4), magic 2.
        let log = std::fs::read(dir.join("00000000000000000000.log"))?;
        ensure!(log.len() > 61, "segment too short: {} bytes", log.len());
        ensure!(
            i64::from_be_bytes(log[0..8].try_into()?) == 0,
            "first batch base offset"
        );
        let batch_len = i32::from_be_bytes(log[8..12].try_into()?);
        ensure!(
            batch_len > 49 && (batch_len as usize) + 12 <= log.len(),
            "first batch length {batch_len} in a {}-byte segment",
            log.len()
        );
        ensure!(log[16] == 2, "magic byte {} (want 2)", log[16]);

        // SIGTERM is a clean shutdown: exit 0, and everything is there after a restart.
        let status = broker.stop()?;
        ensure!(
            status.success(),
            "strata exited with {status} after SIGTERM"
        );
        broker.restart()?;
        let consumer = consumer(broker, &[])?;
        ensure!(
            watermarks(&consumer, topic, 0)? == (0, n as i64),
            "watermarks after restart"
        );
        let got = consume(&consumer, topic, 1, Offset::Beginning, n, PHASE_TIMEOUT)?;
        check_contiguous(&got, &[(0, 0)].into())?;
        for (i, r) in got.iter().enumerate() {
            ensure!(r.seq()? == i, "offset {i} holds {:?}", r.seq());
        }
        Ok(())
    });
}
