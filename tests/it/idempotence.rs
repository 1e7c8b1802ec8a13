//! The idempotent producer (KIP-98) against the real `strata` binary.
//!
//! - `sequence_checks_over_raw_frames`: hand-built frames, independent of Strata's codec.
//!   InitProducerId hands out distinct ids (a transactional id has no coordinator before
//!   one is looked up); a retried batch is acknowledged with its original offsets and
//!   stored once; a sequence gap is
//!   OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH; DescribeProducers
//!   reports the state. Then `kill -9`: the state is rebuilt from the log, so retries of any
//!   of the last batches are still duplicates. Then a clean stop: a producer snapshot is
//!   written at the log end and reloaded, and producer ids are never handed out twice.
//! - `rdkafka_idempotent_producer_survives_kill9`: librdkafka with `enable.idempotence`
//!   streams numbered messages while the broker is killed and restarted under it; every
//!   message is delivered, stored exactly once, where its acknowledgement says.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_protocol::record_batch::{SimpleRecord, encode_batch, set_producer};
use strata_tests::wire::{self, header, recv, send};
use strata_tests::{Broker, serial, wait_until, with_broker};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

/// Upper bound for each phase of a scenario.
const PHASE_TIMEOUT: Duration = Duration::from_secs(120);
/// Upper bound for single requests and metadata waits.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Crashes at most this many times, until one lands between a write and its acknowledgement.
const MAX_KILLS: usize = 5;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

// ---------------------------------------------------------------------------------------------
// Raw frames.

/// One request on a fresh connection; the broker must answer.
fn roundtrip(b: &Broker, frame: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut s = wire::connect(b.port());
    send(&mut s, frame);
    recv(&mut s).context("the broker closed the connection instead of answering")
}

/// An idempotent batch of `n` records from producer (`id`, `epoch`) starting at `seq`.
fn batch(id: i64, epoch: i16, seq: i32, n: usize, tag: &str) -> Vec<u8> {
    let ts = now_ms();
    let records: Vec<SimpleRecord> = (0..n)
        .map(|i| SimpleRecord {
            key: Some(Bytes::from(format!("{tag}-k{i}"))),
            value: Some(Bytes::from(format!("{tag}-v{i}"))),
            timestamp: ts,
            headers: vec![],
        })
        .collect();
    let mut b = encode_batch(0, &records).to_vec();
    set_producer(&mut b, id, epoch, seq);
    b
}

/// Produce v3 (acks=all) to partition 0: (error code, base offset).
fn produce(b: &Broker, topic: &str, records: &[u8]) -> anyhow::Result<(i16, i64)> {
    let r = roundtrip(b, &wire::produce_request(7, topic, records))?;
    Ok(wire::produce_result(&r, topic))
}

/// The log end offset (ListOffsets latest) of partition 0.
fn latest(b: &Broker, topic: &str) -> anyhow::Result<i64> {
    let r = roundtrip(b, &wire::list_offsets_request(3, topic, -1))?;
    let (code, offset) = wire::list_offsets_result(&r, topic);
    ensure!(code == 0, "ListOffsets error {code}");
    Ok(offset)
}

/// InitProducerId v0: (error code, producer id, epoch).
fn init_producer_id(b: &Broker, transactional_id: Option<&str>) -> anyhow::Result<(i16, i64, i16)> {
    let r = roundtrip(b, &wire::init_producer_id_request(5, transactional_id))?;
    Ok(wire::init_producer_id_result(&r))
}

/// Auto-creates `topic` through Metadata and waits until ListOffsets knows it.
fn ensure_topic(b: &Broker, topic: &str) -> anyhow::Result<()> {
    roundtrip(b, &wire::metadata_request(1, topic))?;
    wait_until(
        "auto-created topic is served",
        REQUEST_TIMEOUT,
        Duration::from_millis(50),
        || {
            let r = roundtrip(b, &wire::list_offsets_request(2, topic, -1))?;
            Ok(wire::list_offsets_result(&r, topic).0 != UNKNOWN_TOPIC_OR_PARTITION)
        },
    )
}

/// One producer as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Described {
    producer_id: i64,
    epoch: i32,
    last_sequence: i32,
    last_timestamp: i64,
    coordinator_epoch: i32,
    current_txn_start_offset: i64,
}

/// A reader over a flexible-version response.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> anyhow::Result<[u8; N]> {
        ensure!(self.0.len() >= N, "response truncated");
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        Ok(head.try_into().expect("N bytes"))
    }
    fn uvarint(&mut self) -> anyhow::Result<u64> {
        let mut v = 0u64;
        for shift in (0..35).step_by(7) {
            let [b] = self.take::<1>()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        bail!("varint too long")
    }
    fn skip_compact_bytes(&mut self) -> anyhow::Result<()> {
        let n = self.uvarint()?.saturating_sub(1) as usize;
        ensure!(self.0.len() >= n, "response truncated");
        self.0 = &self.0[n..];
        Ok(())
    }
    fn tagged(&mut self) -> anyhow::Result<()> {
        ensure!(self.uvarint()? == 0, "unexpected tagged fields");
        Ok(())
    }
}

/// DescribeProducers v0 (flexible, KIP-664) for `topic` partition 0: (error code, producers).
fn describe_producers(b: &Broker, topic: &str) -> anyhow::Result<(i16, Vec<Described>)> {
    let mut frame = header(61, 0, 11);
    frame.push(0); // request header v2: no tagged fields
    frame.push(2); // topics: one
    frame.push(topic.len() as u8 + 1);
    frame.extend_from_slice(topic.as_bytes());
    frame.push(2); // partition indexes: one
    frame.extend_from_slice(&0i32.to_be_bytes());
    frame.push(0); // topic tagged fields
    frame.push(0); // request tagged fields
    let r = roundtrip(b, &frame)?;
    let mut c = Cursor(&r);
    ensure!(i32::from_be_bytes(c.take()?) == 11, "correlation id");
    c.tagged()?; // response header v1
    c.take::<4>()?; // throttle
    ensure!(c.uvarint()? == 2, "one topic expected");
    c.skip_compact_bytes()?; // name
    ensure!(c.uvarint()? == 2, "one partition expected");
    ensure!(i32::from_be_bytes(c.take()?) == 0, "partition index");
    let code = i16::from_be_bytes(c.take()?);
    c.skip_compact_bytes()?; // error message
    let n = c.uvarint()?.saturating_sub(1);
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Described {
            producer_id: i64::from_be_bytes(c.take()?),
            epoch: i32::from_be_bytes(c.take()?),
            last_sequence: i32::from_be_bytes(c.take()?),
            last_timestamp: i64::from_be_bytes(c.take()?),
            coordinator_epoch: i32::from_be_bytes(c.take()?),
            current_txn_start_offset: i64::from_be_bytes(c.take()?),
        });
        c.tagged()?;
    }
    Ok((code, out))
}

#[test]
fn sequence_checks_over_raw_frames() {
    let _serial = serial();
    with_broker(&[], |b| {
        let topic = "idem-raw";
        ensure_topic(b, topic)?;

        // InitProducerId: distinct ids, epoch 0. A transactional id has no coordinator
        // before a FindCoordinator for it has `__transaction_state` created.
        let (code, p1, epoch) = init_producer_id(b, None)?;
        ensure!(
            (code, epoch) == (0, 0),
            "InitProducerId: error {code}, epoch {epoch}"
        );
        let (code, p2, _) = init_producer_id(b, None)?;
        ensure!(
            code == 0 && p2 != p1 && p1 >= 0 && p2 >= 0,
            "ids {p1} and {p2}"
        );
        let (code, id, _) = init_producer_id(b, Some("txn-1"))?;
        ensure!(
            (code, id) == (COORDINATOR_NOT_AVAILABLE, -1),
            "transactional InitProducerId answered {code} with id {id}"
        );

        // A retried batch is acknowledged with its original offsets and stored once.
        let a = batch(p1, 0, 0, 3, "a");
        ensure!(produce(b, topic, &a)? == (0, 0), "first append of A");
        ensure!(produce(b, topic, &a)? == (0, 0), "retry of A");
        ensure!(latest(b, topic)? == 3, "A stored twice");
        let bb = batch(p1, 0, 3, 2, "b");
        ensure!(produce(b, topic, &bb)? == (0, 3), "B follows A");
        ensure!(
            produce(b, topic, &a)? == (0, 0),
            "A is still among the last 5"
        );
        ensure!(produce(b, topic, &bb)? == (0, 3), "retry of B");
        ensure!(latest(b, topic)? == 5, "a retry was appended");

        // A gap in the sequence: refused, nothing written.
        let (code, _) = produce(b, topic, &batch(p1, 0, 10, 1, "gap"))?;
        ensure!(code == OUT_OF_ORDER_SEQUENCE_NUMBER, "gap answered {code}");
        ensure!(
            latest(b, topic)? == 5,
            "the out-of-order batch was appended"
        );

        // A second producer interleaves; its batches are its own business.
        let d: Vec<Vec<u8>> = (0..3).map(|i| batch(p2, 0, i * 2, 2, "d")).collect();
        for (i, x) in d.iter().enumerate() {
            ensure!(
                produce(b, topic, x)? == (0, 5 + 2 * i as i64),
                "producer 2 batch {i}"
            );
        }

        // A new epoch starts at sequence 0 and fences the old one.
        let c = batch(p1, 1, 0, 1, "c");
        ensure!(produce(b, topic, &c)? == (0, 11), "epoch 1");
        let (code, _) = produce(b, topic, &batch(p1, 0, 5, 1, "zombie"))?;
        ensure!(
            code == INVALID_PRODUCER_EPOCH,
            "stale epoch answered {code}"
        );
        let (code, _) = produce(b, topic, &batch(p1, 2, 7, 1, "e2"))?;
        ensure!(
            code == OUT_OF_ORDER_SEQUENCE_NUMBER,
            "new epoch not at 0 answered {code}"
        );
        ensure!(latest(b, topic)? == 12, "a refused batch was appended");

        let (code, mut producers) = describe_producers(b, topic)?;
        ensure!(code == 0, "DescribeProducers error {code}");
        producers.sort_by_key(|p| p.producer_id);
        let expected_of = |id, epoch, last_sequence| Described {
            producer_id: id,
            epoch,
            last_sequence,
            last_timestamp: 0,
            coordinator_epoch: -1,
            current_txn_start_offset: -1,
        };
        let mut expected = vec![expected_of(p1, 1, 0), expected_of(p2, 0, 5)];
        expected.sort_by_key(|p| p.producer_id);
        let seen: Vec<Described> = producers
            .iter()
            .map(|p| Described {
                last_timestamp: 0,
                ..*p
            })
            .collect();
        ensure!(seen == expected, "DescribeProducers: {producers:?}");
        ensure!(
            producers
                .iter()
                .all(|p| p.last_timestamp > now_ms() - 600_000),
            "last timestamps: {producers:?}"
        );

        // kill -9: the state comes back from the log, so retries are still duplicates.
        b.kill9()?;
        b.restart()?;
        ensure!(latest(b, topic)? == 12, "log end after the crash");
        for (i, x) in d.iter().enumerate() {
            ensure!(
                produce(b, topic, x)? == (0, 5 + 2 * i as i64),
                "retry of producer 2 batch {i} after kill -9"
            );
        }
        ensure!(
            produce(b, topic, &c)? == (0, 11),
            "retry of C after kill -9"
        );
        let (code, _) = produce(b, topic, &batch(p1, 0, 5, 1, "zombie"))?;
        ensure!(
            code == INVALID_PRODUCER_EPOCH,
            "stale epoch after kill -9: {code}"
        );
        ensure!(
            produce(b, topic, &batch(p2, 0, 6, 1, "d3"))? == (0, 12),
            "producer 2 continues"
        );
        ensure!(latest(b, topic)? == 13, "log end after the retries");

        // A clean stop writes a snapshot at the log end; the restart loads it.
        let status = b.stop()?;
        ensure!(status.success(), "SIGTERM exit status {status}");
        let snapshot = b
            .data_dir()
            .join(format!("{topic}-0"))
            .join(format!("{:020}.snapshot", 13));
        ensure!(
            snapshot.is_file(),
            "no producer snapshot at {}",
            snapshot.display()
        );
        let mut bytes = Vec::new();
        std::fs::File::open(&snapshot)?.read_to_end(&mut bytes)?;
        // Kafka's format: version 1, crc, two 46-byte entries.
        ensure!(
            bytes.len() == 10 + 2 * 46 && bytes[..2] == 1i16.to_be_bytes(),
            "snapshot bytes {bytes:?}"
        );
        b.restart()?;
        ensure!(
            produce(b, topic, &batch(p2, 0, 6, 1, "d3"))? == (0, 12),
            "retry of the last batch after a clean restart"
        );
        let (code, _) = produce(b, topic, &batch(p2, 0, 9, 1, "gap"))?;
        ensure!(
            code == OUT_OF_ORDER_SEQUENCE_NUMBER,
            "gap after restart answered {code}"
        );
        ensure!(latest(b, topic)? == 13, "log end after the clean restart");

        // Producer ids survive restarts: the old block is never reused.
        let (code, p3, _) = init_producer_id(b, None)?;
        ensure!(
            code == 0 && p3 > p2.max(p1),
            "id {p3} after restarts, before {p1}, {p2}"
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// librdkafka under kill -9.

/// Delivery reports by message number.
#[derive(Default)]
struct Deliveries {
    acked: Mutex<HashMap<usize, (i32, i64)>>,
    failed: Mutex<Vec<(usize, KafkaError)>>,
    reports: AtomicU64,
    duplicate_reports: AtomicU64,
}

struct RecordingContext(Arc<Deliveries>);

impl ClientContext for RecordingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
            eprintln!("librdkafka producer {level:?} {fac}: {message}");
        }
    }
}

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
                    self.0.duplicate_reports.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err((e, _)) => self.0.failed.lock().unwrap().push((i, e.clone())),
        }
        self.0.reports.fetch_add(1, Ordering::Relaxed);
    }
}

fn payload(i: usize) -> String {
    format!("idem|seq={i:08}")
}

fn create_topic(broker: &Broker, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    for r in runtime
        .block_on(async {
            tokio::time::timeout(
                REQUEST_TIMEOUT * 2,
                admin.create_topics([&new_topic], &opts),
            )
            .await
        })
        .context("CreateTopics timed out")??
    {
        if let Err((name, code)) = r {
            bail!("CreateTopics {name}: {code:?}");
        }
    }
    Ok(())
}

#[test]
fn rdkafka_idempotent_producer_survives_kill9() {
    let _serial = serial();
    with_broker(&[("log.flush.interval.messages", "1")], |broker| {
        let topic = "idem-kill9";
        let partitions = 3;
        create_topic(broker, topic, partitions)?;
        let deliveries = Arc::new(Deliveries::default());
        let producer: ThreadedProducer<RecordingContext> = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap())
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("batch.num.messages", "200")
            .set("message.timeout.ms", "120000")
            .set("reconnect.backoff.ms", "50")
            .set("reconnect.backoff.max.ms", "500")
            .create_with_context(RecordingContext(deliveries.clone()))?;
        let send = |i: usize| -> anyhow::Result<()> {
            let value = payload(i);
            let key = format!("k{}", i % 97);
            let mut record = BaseRecord::with_opaque_to(topic, i)
                .key(&key)
                .payload(&value);
            let deadline = Instant::now() + PHASE_TIMEOUT;
            loop {
                match producer.send(record) {
                    Ok(()) => return Ok(()),
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        ensure!(Instant::now() < deadline, "queue full for too long");
                        record = r;
                        thread::sleep(Duration::from_millis(1));
                    }
                    Err((e, _)) => bail!("send {i}: {e}"),
                }
            }
        };
        let acked = || deliveries.acked.lock().unwrap().len();
        let duplicates_logged = |b: &Broker| {
            std::fs::read_to_string(b.stderr_path())
                .map(|log| log.matches("duplicate idempotent batch").count())
                .unwrap_or(0)
        };

        // A sender thread streams without pause while the broker is killed and restarted
        // under it. With an fsync per append, most of the broker's time is spent between
        // writing a batch and acknowledging it, so a kill usually leaves written but
        // unacknowledged batches, which librdkafka then retries with the same sequences.
        let stop = std::sync::atomic::AtomicBool::new(false);
        let sent = thread::scope(|scope| -> anyhow::Result<usize> {
            let sender = scope.spawn(|| -> anyhow::Result<usize> {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    send(i)?;
                    i += 1;
                    if i % 32 == 0 {
                        thread::sleep(Duration::from_millis(1));
                    }
                }
                Ok(i)
            });
            let result = (|| -> anyhow::Result<()> {
                let mut kills = 0;
                while kills < MAX_KILLS && duplicates_logged(broker) == 0 {
                    let target = acked() + 3_000;
                    let deadline = Instant::now() + PHASE_TIMEOUT;
                    while acked() < target {
                        ensure!(!sender.is_finished(), "the sender stopped");
                        ensure!(Instant::now() < deadline, "only {} acked", acked());
                        thread::sleep(Duration::from_millis(1));
                    }
                    broker.kill9()?;
                    kills += 1;
                    thread::sleep(Duration::from_millis(200));
                    broker.restart()?;
                    // Let the retries land before deciding whether to crash again.
                    let deadline = Instant::now() + REQUEST_TIMEOUT;
                    let resumed = acked() + 2_000;
                    while acked() < resumed && Instant::now() < deadline {
                        thread::sleep(Duration::from_millis(5));
                    }
                }
                eprintln!(
                    "idempotent kill9: {kills} kill(s), {} duplicate batches answered",
                    duplicates_logged(broker)
                );
                Ok(())
            })();
            stop.store(true, Ordering::Relaxed);
            let sent = sender
                .join()
                .map_err(|_| anyhow::anyhow!("sender panicked"))??;
            result.map(|()| sent)
        })?;
        ensure!(
            duplicates_logged(broker) > 0,
            "no kill hit a written but unacknowledged batch in {MAX_KILLS} tries: retries untested"
        );
        let _ = producer.flush(PHASE_TIMEOUT);
        let deadline = Instant::now() + PHASE_TIMEOUT;
        while (deliveries.reports.load(Ordering::Relaxed) as usize) < sent {
            ensure!(
                Instant::now() < deadline,
                "not every delivery report arrived"
            );
            thread::sleep(Duration::from_millis(10));
        }
        let acked = deliveries.acked.lock().unwrap().clone();
        let failed = deliveries.failed.lock().unwrap().clone();
        eprintln!(
            "idempotent kill9: sent {sent}, acked {}, failed {}",
            acked.len(),
            failed.len()
        );
        ensure!(
            deliveries.duplicate_reports.load(Ordering::Relaxed) == 0,
            "a message was acknowledged twice"
        );
        // Idempotence lets librdkafka retry without limit inside message.timeout.ms, so
        // everything must get through.
        ensure!(
            failed.is_empty(),
            "failed deliveries, first: {:?}",
            &failed[..failed.len().min(3)]
        );
        ensure!(acked.len() == sent, "acked {} of {sent}", acked.len());

        // Read everything back: each message exactly once, where its ack says.
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap())
            .set("group.id", "idempotence-assign-only")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .create()?;
        let mut total = 0i64;
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            let (low, high) = consumer.fetch_watermarks(topic, p, REQUEST_TIMEOUT)?;
            ensure!(low == 0, "partition {p} starts at {low}");
            total += high;
            tpl.add_partition_offset(topic, p, Offset::Beginning)?;
        }
        ensure!(
            total == sent as i64,
            "the partitions hold {total} records for {sent} messages (duplicates or losses)"
        );
        consumer.assign(&tpl)?;
        let mut found: HashMap<usize, (i32, i64)> = HashMap::new();
        let mut next: BTreeMap<i32, i64> = (0..partitions).map(|p| (p, 0)).collect();
        let deadline = Instant::now() + PHASE_TIMEOUT;
        while (found.len() as i64) < total {
            ensure!(
                Instant::now() < deadline,
                "consumed {} of {total}",
                found.len()
            );
            let Some(m) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let m = m?;
            let n = next
                .get_mut(&m.partition())
                .context("unexpected partition")?;
            ensure!(
                m.offset() == *n,
                "partition {}: offset {} after {}",
                m.partition(),
                m.offset(),
                *n - 1
            );
            *n += 1;
            let value = std::str::from_utf8(m.payload().context("null payload")?)?;
            let seq: usize = value
                .strip_prefix("idem|seq=")
                .context("foreign payload")?
                .parse()?;
            ensure!(seq < sent && value == payload(seq), "bad payload {value}");
            if let Some(prev) = found.insert(seq, (m.partition(), m.offset())) {
                bail!(
                    "message {seq} stored twice: {prev:?} and {}-{}",
                    m.partition(),
                    m.offset()
                );
            }
        }
        let mut moved: Vec<_> = acked
            .iter()
            .filter(|(m, at)| found.get(m) != Some(at))
            .map(|(m, at)| (*m, *at, found.get(m).copied()))
            .collect();
        moved.sort();
        ensure!(
            moved.is_empty(),
            "{} acknowledged messages lost or elsewhere, first: {:?}",
            moved.len(),
            &moved[..moved.len().min(5)]
        );
        Ok(())
    });
}
