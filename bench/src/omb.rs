//! `strata-bench omb`: the OpenMessaging Benchmark's standard workload
//! `1-topic-100-partitions-1kb` (openmessaging/benchmark `workloads/`), with the settings of
//! its Kafka throughput driver (`driver-kafka/kafka-throughput.yaml`), driven by librdkafka:
//!
//! - one topic of 100 partitions, replication factor 3 with `min.insync.replicas=2`;
//! - one producer: 1 KB records with no key, `acks=all`, `linger.ms=1`, `batch.size=1048576`;
//! - one consumer reading every partition (`auto.offset.reset=earliest`,
//!   `enable.auto.commit=false`, `max.partition.fetch.bytes=10485760`).
//!
//! With `--rate 0` it first finds the maximum sustained rate as OMB does: from 10,000 msg/s,
//! every 3 s, a backlog (more than 1,000 messages sent and not yet received, or the producer
//! more than 1,000 behind its schedule) lowers the rate to the lesser of the achieved rate
//! and the rate that clears the backlog in one period and halves the growth factor (down to
//! 0.01); a clean period raises the rate by the factor and doubles it (up to 1). The maximum
//! sustained rate is the mean achieved rate over the second half of the search. It then
//! measures at half that rate (OMB's report point in this workload family).
//!
//! A measured run: `--warmup-secs` unrecorded, then `--secs` recorded. End-to-end latency is
//! the consumer's receipt minus the send time the payload carries (microseconds on one
//! clock: producer and consumer are threads of this process; OMB reads the record's
//! millisecond timestamp instead); publish latency is send to acknowledgement. With `--pids`,
//! each broker's CPU seconds per GB produced in the recorded window.
//!
//! Differences from OMB's Java driver, which follow from librdkafka's defaults: no
//! idempotence (Java 3.x turns it on with `acks=all`), librdkafka's sticky partitioner for
//! records with no key (10 ms per partition), and a local queue of 1,000,000 messages so that
//! the producer is never refused for a full queue below the broker's rate.
//!
//! Usage: `strata-bench omb --bootstrap B [--rate 0] [--partitions 100] [--rf 3] [--size 1024]
//! [--search-secs 60] [--warmup-secs 10] [--secs 60] [--pids 1,2,3] [--topic T]`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::{
    Counting, CountingContext, Scenario, block_on, client, cpu_secs, ms, payload, producer_counting,
};

/// OMB's rate controller: its period and backlog limit.
const PERIOD: Duration = Duration::from_secs(3);
const BACKLOG_LIMIT: u64 = 1000;
const FIRST_RATE: f64 = 10_000.0;

struct Args {
    bootstrap: String,
    topic: String,
    partitions: i32,
    rf: i32,
    size: usize,
    rate: u64,
    search_secs: u64,
    warmup_secs: u64,
    secs: u64,
    pids: Vec<u32>,
}

fn parse(argv: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut a = Args {
        bootstrap: String::new(),
        topic: String::new(),
        partitions: 100,
        rf: 3,
        size: 1024,
        rate: 0,
        search_secs: 60,
        warmup_secs: 10,
        secs: 60,
        pids: Vec::new(),
    };
    let mut it = argv;
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--bootstrap" => a.bootstrap = value()?,
            "--topic" => a.topic = value()?,
            "--partitions" => a.partitions = value()?.parse()?,
            "--rf" => a.rf = value()?.parse()?,
            "--size" => a.size = value()?.parse()?,
            "--rate" => a.rate = value()?.parse()?,
            "--search-secs" => a.search_secs = value()?.parse()?,
            "--warmup-secs" => a.warmup_secs = value()?.parse()?,
            "--secs" => a.secs = value()?.parse()?,
            "--pids" => {
                a.pids = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            other => bail!("unknown argument {other}; see `strata-bench omb` in bench/src/omb.rs"),
        }
    }
    if a.bootstrap.is_empty() {
        bail!("--bootstrap is required");
    }
    if a.size < 8 {
        bail!("--size must hold the 8-byte send time");
    }
    if a.topic.is_empty() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        a.topic = format!("omb-{}-{now}", a.partitions);
    }
    Ok(a)
}

/// The producer, the consumer's counters and histogram, and the clock the payloads carry.
struct Pipeline {
    producer: ThreadedProducer<CountingContext>,
    counts: Arc<Counting>,
    received: Arc<AtomicU64>,
    /// End-to-end times (µs) of records sent at or after `record_from` (µs on `epoch`).
    e2e: Arc<Mutex<Histogram<u64>>>,
    record_from: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
    epoch: Instant,
    sent: u64,
    template: Vec<u8>,
}

impl Pipeline {
    fn start(a: &Args) -> anyhow::Result<Self> {
        let epoch = Instant::now();
        let mut c = client(&a.bootstrap);
        c.set("group.id", "strata-bench-omb")
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .set("max.partition.fetch.bytes", "10485760");
        let consumer: BaseConsumer = c.create()?;
        let mut tpl = TopicPartitionList::new();
        for p in 0..a.partitions {
            tpl.add_partition_offset(&a.topic, p, Offset::Beginning)?;
        }
        consumer.assign(&tpl)?;
        let received = Arc::new(AtomicU64::new(0));
        let e2e = Arc::new(Mutex::new(Histogram::new_with_bounds(1, 600_000_000, 3)?));
        let record_from = Arc::new(AtomicU64::new(u64::MAX));
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (received, e2e, record_from, stop) = (
                received.clone(),
                e2e.clone(),
                record_from.clone(),
                stop.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(Ok(m)) = consumer.poll(Duration::from_millis(10))
                        && let Some(p) = m.payload()
                        && p.len() >= 8
                    {
                        let sent = u64::from_be_bytes(p[..8].try_into().unwrap_or_default());
                        let now = epoch.elapsed().as_micros() as u64;
                        received.fetch_add(1, Ordering::Relaxed);
                        if sent >= record_from.load(Ordering::Relaxed)
                            && let Ok(mut h) = e2e.lock()
                        {
                            let _ = h.record(now.saturating_sub(sent).max(1));
                        }
                    }
                }
            })
        };
        let scenario = Scenario {
            size: a.size,
            acks_all: true,
            partitions: a.partitions,
            lz4: false,
        };
        let extra = [
            ("batch.size", "1048576"),
            ("queue.buffering.max.messages", "1000000"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let (producer, counts) = producer_counting(
            &a.bootstrap,
            &scenario,
            "1",
            Counting {
                ack_latency: Some((
                    epoch,
                    Mutex::new(Histogram::new_with_bounds(1, 600_000_000, 3)?),
                )),
                ..Counting::default()
            },
            &extra,
        )?;
        Ok(Self {
            producer,
            counts,
            received,
            e2e,
            record_from,
            stop,
            reader: Some(reader),
            epoch,
            sent: 0,
            template: payload(a.size, 0),
        })
    }

    /// Sends at `rate`/s for `dur`, paced in 1 ms steps. Returns (sent, due).
    fn pace(&mut self, topic: &str, rate: f64, dur: Duration) -> (u64, u64) {
        let start = Instant::now();
        let mut sent = 0u64;
        let mut due = 0u64;
        let mut v = self.template.clone();
        while start.elapsed() < dur {
            due = (start.elapsed().as_secs_f64() * rate) as u64;
            while sent < due {
                v[..8].copy_from_slice(&(self.epoch.elapsed().as_micros() as u64).to_be_bytes());
                if self
                    .producer
                    .send::<(), _>(BaseRecord::to(topic).payload(&v))
                    .is_err()
                {
                    break;
                }
                sent += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.sent += sent;
        (sent, due)
    }

    fn backlog(&self) -> u64 {
        self.sent
            .saturating_sub(self.received.load(Ordering::Relaxed))
    }

    fn stop(mut self) {
        let _ = self.producer.flush(Duration::from_secs(30));
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// OMB's adaptive rate search; returns the maximum sustained rate (msg/s).
fn search(p: &mut Pipeline, a: &Args) -> f64 {
    let mut rate = FIRST_RATE;
    let mut factor = 1.0_f64;
    let periods = (a.search_secs / PERIOD.as_secs()).max(2);
    let mut achieved = Vec::new();
    for i in 0..periods {
        let (sent, due) = p.pace(&a.topic, rate, PERIOD);
        let got = sent as f64 / PERIOD.as_secs_f64();
        achieved.push(got);
        let backlog = p.backlog();
        let behind = due.saturating_sub(sent);
        if backlog > BACKLOG_LIMIT || behind > BACKLOG_LIMIT {
            factor = (factor / 2.0).max(0.01);
            let clearing = rate - backlog as f64 / PERIOD.as_secs_f64();
            rate = got.min(clearing).max(1000.0);
        } else {
            rate *= 1.0 + factor;
            factor = (factor * 2.0).min(1.0);
        }
        println!(
            "[search] period {i:>3}: achieved {got:>9.0} msg/s, backlog {backlog:>7}, behind {behind:>6}; next {rate:.0}"
        );
    }
    let second_half = &achieved[achieved.len() / 2..];
    second_half.iter().sum::<f64>() / second_half.len() as f64
}

/// One measured run at `rate`.
fn measure(p: &mut Pipeline, a: &Args, rate: f64) -> anyhow::Result<()> {
    p.pace(&a.topic, rate, Duration::from_secs(a.warmup_secs));
    if let Ok(mut h) = p.e2e.lock() {
        h.reset();
    }
    if let Some((_, h)) = &p.counts.ack_latency
        && let Ok(mut h) = h.lock()
    {
        h.reset();
    }
    p.record_from
        .store(p.epoch.elapsed().as_micros() as u64, Ordering::Relaxed);
    let acked0 = p.counts.acked_bytes.load(Ordering::Relaxed);
    let cpu0: Vec<Option<f64>> = a.pids.iter().map(|&pid| cpu_secs(pid)).collect();
    let start = Instant::now();
    let (sent, _) = p.pace(&a.topic, rate, Duration::from_secs(a.secs));
    let _ = p.producer.flush(Duration::from_secs(30));
    let secs = start.elapsed().as_secs_f64();
    let cpu1: Vec<Option<f64>> = a.pids.iter().map(|&pid| cpu_secs(pid)).collect();
    let bytes = p.counts.acked_bytes.load(Ordering::Relaxed) - acked0;
    // Bounded drain: the consumer reads what was sent.
    let drain = Instant::now() + Duration::from_secs(30);
    while p.backlog() > 0 && Instant::now() < drain {
        std::thread::sleep(Duration::from_millis(10));
    }
    let e2e = p
        .e2e
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    let publish = match &p.counts.ack_latency {
        Some((_, h)) => h.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone(),
        None => Histogram::new(3)?,
    };
    println!(
        "[measure] target {rate:.0} msg/s: sent {:.0} msg/s ({:.1} MB/s) for {secs:.1} s, failed {}, backlog after drain {}",
        sent as f64 / secs,
        sent as f64 * a.size as f64 / secs / 1e6,
        p.counts.failed.load(Ordering::Relaxed),
        p.backlog(),
    );
    for (name, h) in [("end-to-end", &e2e), ("publish", &publish)] {
        println!(
            "[measure] {name:>10} ms: p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2} ({} records)",
            ms(h.value_at_quantile(0.50)),
            ms(h.value_at_quantile(0.99)),
            ms(h.value_at_quantile(0.999)),
            ms(h.max()),
            h.len()
        );
    }
    for ((pid, c0), c1) in a.pids.iter().zip(&cpu0).zip(&cpu1) {
        if let (Some(c0), Some(c1)) = (c0, c1) {
            println!(
                "[measure] broker pid {pid}: {:.2} CPU s over {secs:.1} s, {:.2} CPU s per GB produced",
                c1 - c0,
                (c1 - c0) / (bytes as f64 / 1e9)
            );
        }
    }
    Ok(())
}

fn create_topic(a: &Args) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = client(&a.bootstrap).create()?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let min_isr = if a.rf >= 3 { "2" } else { "1" };
    let t = NewTopic::new(&a.topic, a.partitions, TopicReplication::Fixed(a.rf))
        .set("min.insync.replicas", min_isr);
    for r in block_on(admin.create_topics([&t], &opts))? {
        if let Err((name, code)) = r
            && code != RDKafkaErrorCode::TopicAlreadyExists
        {
            bail!("create topic {name}: {code:?}");
        }
    }
    // Let leaders settle before the clock matters.
    std::thread::sleep(Duration::from_secs(3));
    Ok(())
}

/// `strata-bench omb ...`.
pub fn run(argv: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let a = parse(argv)?;
    println!(
        "# omb 1-topic-{}-partitions-{}b: rf {} (min.insync.replicas {}), acks=all linger.ms=1 batch.size=1048576, one producer, one consumer, topic {}",
        a.partitions,
        a.size,
        a.rf,
        if a.rf >= 3 { 2 } else { 1 },
        a.topic
    );
    create_topic(&a)?;
    let mut p = Pipeline::start(&a)?;
    // Let the consumer's first fetches start.
    std::thread::sleep(Duration::from_secs(1));
    let rate = if a.rate == 0 {
        let max = search(&mut p, &a);
        println!("[search] maximum sustained rate {max:.0} msg/s; measuring at half of it");
        max / 2.0
    } else {
        a.rate as f64
    };
    let result = measure(&mut p, &a, rate);
    p.stop();
    result
}
