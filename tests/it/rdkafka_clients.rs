//! librdkafka clients for the whole-system tests: producers that record every delivery report,
//! consumers that use `assign` only, and the checks the test modules share.
//!
//! Everything about message `i` is derived from `i` ([`key_of`], [`value_of`], a `seq` header),
//! so a consumer can recompute what it should have received. Consumers use `assign` only and
//! commit nothing: librdkafka requires a `group.id` for `assign`, so one is set.
//! librdkafka's warnings and errors are printed to the test output (shown on failure).
//!
//! The consumer-group tests build on this: [`group`] has subscribed members and the group
//! checks, [`child_member`] a member in a process of its own, for crash tests.

pub mod child_member;
pub mod group;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, Headers, Message, OwnedHeaders, Timestamp};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{Broker, wait_until};

/// Upper bound for each phase (produce, consume) of a scenario.
pub const PHASE_TIMEOUT: Duration = Duration::from_secs(120);
/// Upper bound for metadata and watermark requests.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Distinct keys; each key is reused `CODEC_MESSAGES / KEYS` times so key-to-partition
/// stickiness and per-key order are meaningful.
pub const KEYS: usize = 1_000;

// ---------------------------------------------------------------------------------------------
// Message model: everything about message i is derived from i, so the consumer side can
// recompute what it should have received.

pub fn key_of(i: usize) -> String {
    format!("k{}", i % KEYS)
}

pub fn value_of(tag: &str, i: usize) -> Vec<u8> {
    // Variable length and repetitive, so every codec actually compresses something.
    let mut v = format!("{tag}|seq={i:08}|").into_bytes();
    for _ in 0..(1 + i % 7) {
        v.extend_from_slice(b"strata-payload-");
    }
    v
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// A message as the consumer saw it.
#[derive(Debug)]
pub struct Consumed {
    /// Where it was read: with `offset`, checked against the delivery report.
    pub partition: i32,
    /// Its offset in `partition`.
    pub offset: i64,
    /// The key bytes, `None` for a null key.
    pub key: Option<Vec<u8>>,
    /// The value bytes, `None` for a null value.
    pub value: Option<Vec<u8>>,
    /// Headers in wire order, values `None` when null.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// CreateTime as the producer set it, or LogAppendTime.
    pub timestamp: Timestamp,
}

impl Consumed {
    /// A copy of what librdkafka delivered.
    pub fn of<M: Message>(m: &M) -> Consumed {
        Consumed {
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
        }
    }

    /// The value as text (lossy UTF-8; a null value reads as "").
    pub fn text(&self) -> String {
        String::from_utf8_lossy(self.value.as_deref().unwrap_or_default()).into_owned()
    }

    /// The producer's sequence number, from the `seq` header.
    pub fn seq(&self) -> anyhow::Result<usize> {
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
pub struct Deliveries {
    /// message index -> (partition, offset) for every acknowledged message.
    pub acked: Mutex<HashMap<usize, (i32, i64)>>,
    /// message index -> error for every message whose delivery failed.
    pub failed: Mutex<Vec<(usize, KafkaError)>>,
    /// Count of reports of either kind, to know when all are in.
    pub reports: AtomicU64,
    /// Messages acknowledged twice (a client or broker bug); checked in `await_reports`.
    pub duplicate_reports: AtomicU64,
}

impl Deliveries {
    pub fn acked_count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }
}

/// Prints librdkafka's warnings and errors to the test's output (shown when a test fails), since
/// no `log` backend is installed: a protocol parse failure shows up there and nowhere else.
pub fn print_client_log(client: &str, level: RDKafkaLogLevel, fac: &str, message: &str) {
    if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
        eprintln!("librdkafka {client} {level:?} {fac}: {message}");
    }
}

pub struct RecordingContext(pub Arc<Deliveries>);

impl ClientContext for RecordingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        print_client_log("producer", level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        eprintln!("librdkafka producer error: {error}: {reason}");
    }
}

/// Consumer context that only prints librdkafka's log (see [`print_client_log`]).
pub struct PrintingContext;

impl ClientContext for PrintingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        print_client_log("consumer", level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        eprintln!("librdkafka consumer error: {error}: {reason}");
    }
}

impl ConsumerContext for PrintingContext {}

pub type TestConsumer = BaseConsumer<PrintingContext>;

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

pub type RecordingProducer = ThreadedProducer<RecordingContext>;

pub fn producer(
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

/// Sends message `i` with a `seq` header (its index) followed by `extra_headers`, waiting
/// (bounded) while librdkafka's local queue is full.
pub fn send(
    producer: &RecordingProducer,
    topic: &str,
    i: usize,
    key: &str,
    value: &[u8],
    extra_headers: &[(&str, &str)],
    timestamp: i64,
) -> anyhow::Result<()> {
    let mut headers = OwnedHeaders::new().insert(Header {
        key: "seq",
        value: Some(&i.to_string()),
    });
    for (k, v) in extra_headers {
        headers = headers.insert(Header {
            key: k,
            value: Some(*v),
        });
    }
    let record = BaseRecord::with_opaque_to(topic, i)
        .key(key)
        .payload(value)
        .headers(headers)
        .timestamp(timestamp);
    send_record(producer, record, i)
}

/// Sends `value` as message `i` (no key, a `seq` header) to `partition` of `topic`, so that a
/// test decides where every message lands.
pub fn send_to_partition(
    producer: &RecordingProducer,
    topic: &str,
    partition: i32,
    i: usize,
    value: &[u8],
) -> anyhow::Result<()> {
    let headers = OwnedHeaders::new().insert(Header {
        key: "seq",
        value: Some(&i.to_string()),
    });
    let record = BaseRecord::<(), [u8], usize>::with_opaque_to(topic, i)
        .payload(value)
        .headers(headers)
        .partition(partition);
    send_record(producer, record, i)
}

/// Hands `record` (message `i`) to librdkafka, waiting (bounded) while its local queue is full.
fn send_record<K, P>(
    producer: &RecordingProducer,
    mut record: BaseRecord<'_, K, P, usize>,
    i: usize,
) -> anyhow::Result<()>
where
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
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
pub fn await_reports(
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

pub fn consumer(broker: &Broker, settings: &[(&str, &str)]) -> anyhow::Result<TestConsumer> {
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
    config
        .create_with_context(PrintingContext)
        .context("create consumer")
}

pub fn create_topic(broker: &Broker, topic: &str, partitions: i32) -> anyhow::Result<()> {
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
pub fn consume(
    consumer: &TestConsumer,
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

pub fn poll_n(
    consumer: &TestConsumer,
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
            Some(Ok(m)) => out.push(Consumed::of(&m)),
        }
    }
    Ok(out)
}

pub fn watermarks(
    consumer: &TestConsumer,
    topic: &str,
    partition: i32,
) -> anyhow::Result<(i64, i64)> {
    consumer
        .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
        .with_context(|| format!("ListOffsets {topic}-{partition}"))
}

/// Checks that, in the order received, each partition's offsets run `first, first+1, ...`
/// with no gap and no duplicate.
pub fn check_contiguous(records: &[Consumed], first: &BTreeMap<i32, i64>) -> anyhow::Result<()> {
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

/// Checks a read-back of numbered messages (a `seq` header, payload `value(seq)`): every record
/// is one that was sent (`seq < sent`) with its own payload, no message is stored twice, and
/// every acknowledged message sits at the partition and offset its delivery report named.
pub fn check_acknowledged(
    records: &[Consumed],
    sent: usize,
    value: impl Fn(usize) -> Vec<u8>,
    acked: &HashMap<usize, (i32, i64)>,
) -> anyhow::Result<()> {
    let mut found: HashMap<usize, (i32, i64)> = HashMap::new();
    for r in records {
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
    let mut lost: Vec<_> = acked
        .iter()
        .filter(|(m, at)| found.get(m) != Some(at))
        .map(|(m, at)| (*m, *at, found.get(m).copied()))
        .collect();
    lost.sort_unstable();
    ensure!(
        lost.is_empty(),
        "{} acknowledged messages lost or moved (message, acked at, found at), first: {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    Ok(())
}
