//! # strata-bench
//!
//! Measures any Kafka-compatible broker at a bootstrap address, and in the same run the
//! baselines it is judged against (issue 5):
//!
//! - **The client's ceiling**: librdkafka's built-in mock cluster (the same in-memory broker
//!   `test.mock.num.brokers=1` creates), served from a child process of this tool
//!   (`strata-bench mock-server`) so that it pays for its own CPU and loopback like a broker.
//!   Every broker figure is also shown as a ratio of the mock's, with identical client
//!   settings.
//! - **The machine**: loopback TCP throughput between two threads, and sequential write
//!   throughput to the data directory (page cache, then with a final fdatasync).
//!
//! Scenarios: producer throughput (records/s, MB/s) over record sizes 100 B / 1 KB / 16 KB,
//! acks 1 and all, 1 and 6 partitions, compression none and lz4, with `linger.ms=5`,
//! `batch.size=1000000`; consumer throughput reading 256 MB of 1 KB records back (the same
//! amount on every target); end-to-end latency (1 KB, acks=1, one partition, `linger.ms=0`) at
//! 25/50/75% of the maximum rate measured with those same settings,
//! with p50/p99/p99.9/max from hdrhistogram and a `.hgrm` file per run. With `--broker-pid`,
//! the broker's CPU seconds per GB moved and its peak RSS (VmHWM) from `/proc`.
//!
//! Usage: `strata-bench --bootstrap 127.0.0.1:9092 [--broker-pid PID] [--data-dir DIR]
//! [--quick] [--out DIR] [--no-mock]`.
//!
//! Two more modes measure scale and restarts rather than throughput:
//!
//! - `strata-bench scale` ([`scale`]): memory and file descriptors of a running broker as it
//!   grows to 1,000 and 10,000 partitions.
//! - `strata-bench restart` ([`restart`]): runs the broker binary itself, fills its log
//!   directory (10 GB by default) and times it to ready after SIGTERM and after `kill -9`.
//!
//! - `strata-bench wait-ready`: seconds until a broker started beside it answers.
//! - `strata-bench ceiling DIR`: the raw append ceiling of DIR's file system (1 GiB of
//!   sequential 1 MiB writes into a new file), for runs that report against it.
//! - `strata-bench append-ab DIR` ([`append`]): the append primitive, buffered against
//!   direct I/O, flat out and paced, in alternation.
//! - `strata-bench latency` and `strata-bench consume` ([`diag`]): one latency sweep over
//!   chosen rates, or one consumer run, with client settings overridable, for finding where
//!   time goes.
//!
//! - `strata-bench compaction` ([`compaction`]): the log cleaner in process: disk use
//!   against live data, the cleaner's MB/s, and append latency with and without it.
//! - `strata-bench omb` ([`omb`]): the OpenMessaging Benchmark's workload
//!   `1-topic-100-partitions-1kb`: its maximum sustained rate, then latency and broker CPU
//!   per GB at half of it.
//!
//! [`probe`] holds what these read from outside the broker (`/proc`, readiness requests).
//!
//! Never run by tests or CI.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

mod append;
mod compaction;
mod diag;
mod omb;
mod probe;
mod restart;
mod scale;
mod txn;
mod validate;

/// Stated client settings, identical for every target.
const LINGER_MS: &str = "5";
const BATCH_SIZE: &str = "1000000";
/// What each target writes, then reads back, for the consumer figures.
const CONSUME_BYTES: u64 = 256 << 20;

/// The command line.
struct Args {
    bootstrap: Option<String>,
    broker_pid: Option<u32>,
    data_dir: Option<PathBuf>,
    quick: bool,
    out: PathBuf,
    mock: bool,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        bootstrap: None,
        broker_pid: None,
        data_dir: None,
        quick: false,
        out: PathBuf::from("bench-results"),
        mock: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--bootstrap" => a.bootstrap = Some(value()?),
            "--broker-pid" => a.broker_pid = Some(value()?.parse()?),
            "--data-dir" => a.data_dir = Some(PathBuf::from(value()?)),
            "--out" => a.out = PathBuf::from(value()?),
            "--quick" => a.quick = true,
            "--no-mock" => a.mock = false,
            "-h" | "--help" => {
                println!(
                    "usage: strata-bench --bootstrap HOST:PORT [--broker-pid PID] [--data-dir DIR] [--quick] [--out DIR] [--no-mock]\n       strata-bench scale --help\n       strata-bench restart --help\n       strata-bench wait-ready --bootstrap HOST:PORT [--timeout-secs 600]\n       strata-bench latency --help\n       strata-bench consume --help\n       strata-bench txn --bootstrap HOST:PORT [--secs 5] [--no-mock]\n       strata-bench mock-server"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}"),
        }
    }
    Ok(a)
}

fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("mock-server") => return mock_server(),
        Some("scale") => return scale::run(std::env::args().skip(2)),
        Some("restart") => return restart::run(std::env::args().skip(2)),
        Some("wait-ready") => return probe::wait_ready_cmd(std::env::args().skip(2)),
        Some("latency") => return diag::latency_cmd(std::env::args().skip(2)),
        Some("consume") => return diag::consume_cmd(std::env::args().skip(2)),
        Some("txn") => return txn::run(std::env::args().skip(2)),
        Some("compaction") => return compaction::run(std::env::args().skip(2)),
        Some("validate") => return validate::run(std::env::args().skip(2)),
        Some("omb") => return omb::run(std::env::args().skip(2)),
        Some("append-ab") => return append::run(std::env::args().skip(2)),
        Some("ceiling") => {
            let dir = std::env::args()
                .nth(2)
                .context("usage: strata-bench ceiling DIR")?;
            let (cached, synced) = disk_write_mb_s(Path::new(&dir), 1 << 30)?;
            println!(
                "[baseline] sequential write to {dir}: {cached:.0} MB/s to page cache ({:.0} records of 1 KB/s), {synced:.0} MB/s including fdatasync",
                cached * 1e6 / 1024.0
            );
            return Ok(());
        }
        _ => {}
    }
    let args = parse_args()?;
    std::fs::create_dir_all(&args.out)?;
    let started = Instant::now();
    println!(
        "# strata-bench ({} mode)",
        if args.quick { "quick" } else { "full" }
    );

    // Machine baselines first, while nothing else runs.
    let loopback = loopback_mb_s(if args.quick { 2 } else { 5 })?;
    println!("[baseline] loopback TCP: {loopback:.0} MB/s");
    let disk_dir = args.data_dir.clone().unwrap_or_else(std::env::temp_dir);
    let (disk_cache, disk_sync) =
        disk_write_mb_s(&disk_dir, if args.quick { 512 } else { 2048 } << 20)?;
    println!(
        "[baseline] sequential write to {}: {disk_cache:.0} MB/s to page cache, {disk_sync:.0} MB/s including fdatasync",
        disk_dir.display()
    );

    let mut targets: Vec<Target> = Vec::new();
    if args.mock {
        let (child, bootstrap) = spawn_mock()?;
        targets.push(Target {
            name: "mock".into(),
            bootstrap,
            pid: Some(child.child.id()),
            mock: Some(std::sync::Mutex::new(child)),
        });
    }
    if let Some(b) = &args.bootstrap {
        targets.push(Target {
            name: "broker".into(),
            bootstrap: b.clone(),
            pid: args.broker_pid,
            mock: None,
        });
    }
    if targets.is_empty() {
        bail!("nothing to measure: give --bootstrap, or drop --no-mock");
    }

    let mut results: Vec<TargetResults> = Vec::new();
    for t in &targets {
        println!("\n## target {} at {}", t.name, t.bootstrap);
        results.push(run_target(t, &args)?);
    }
    for t in targets {
        if let Some(m) = t.mock {
            let mut m = m.into_inner().map_err(|_| anyhow::anyhow!("poisoned"))?;
            drop(m.stdin);
            let _ = m.child.wait();
        }
    }

    let report = summary(&results, loopback, disk_cache, disk_sync);
    println!("\n{report}");
    std::fs::write(args.out.join("summary.md"), &report)?;
    println!(
        "total time {:.0} s; results in {}",
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}

/// `strata-bench mock-server`: serves librdkafka's mock cluster until stdin closes.
fn mock_server() -> anyhow::Result<()> {
    let cluster = rdkafka::mocking::MockCluster::new(1)?;
    println!("{}", cluster.bootstrap_servers());
    std::io::stdout().flush()?;
    // One command per line: `create <topic> <partitions>` (the mock does not serve the admin
    // API). The loop ends when the parent closes our stdin (or dies).
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut it = line.split_whitespace();
        if let (Some("create"), Some(topic), Some(n)) = (it.next(), it.next(), it.next()) {
            let res = cluster.create_topic(topic, n.parse()?, 1);
            println!("{}", if res.is_ok() { "ok" } else { "error" });
            std::io::stdout().flush()?;
        }
    }
    drop(cluster);
    Ok(())
}

/// The mock-server child and its command pipe.
struct MockControl {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl MockControl {
    fn create_topic(&mut self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        writeln!(self.stdin, "create {topic} {partitions}")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        if line.trim() != "ok" {
            bail!("mock could not create {topic}");
        }
        Ok(())
    }
}

fn spawn_mock() -> anyhow::Result<(MockControl, String)> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("mock-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("spawn mock-server")?;
    let mut stdout = BufReader::new(child.stdout.take().context("mock stdout")?);
    let stdin = child.stdin.take().context("mock stdin")?;
    let mut line = String::new();
    stdout.read_line(&mut line)?;
    let bootstrap = line.trim().to_string();
    if bootstrap.is_empty() {
        bail!("mock-server printed no bootstrap address");
    }
    Ok((
        MockControl {
            child,
            stdin,
            stdout,
        },
        bootstrap,
    ))
}

struct Target {
    name: String,
    bootstrap: String,
    pid: Option<u32>,
    /// Set for the mock cluster, whose topics are created through its control pipe.
    mock: Option<std::sync::Mutex<MockControl>>,
}

impl Target {
    fn create_topic(&self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        match &self.mock {
            Some(m) => m
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .create_topic(topic, partitions),
            None => create_topic(&self.bootstrap, topic, partitions),
        }
    }
    fn delete_topic(&self, topic: &str) {
        if self.mock.is_none() {
            delete_topic(&self.bootstrap, topic);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Scenario {
    size: usize,
    acks_all: bool,
    partitions: i32,
    lz4: bool,
}

impl Scenario {
    fn label(&self) -> String {
        format!(
            "{:>5} B acks={:<3} p={} {}",
            self.size,
            if self.acks_all { "all" } else { "1" },
            self.partitions,
            if self.lz4 { "lz4" } else { "none" }
        )
    }
    fn topic(&self, run: &str) -> String {
        format!(
            "bench-{run}-{}-{}-{}-{}",
            self.size,
            if self.acks_all { "all" } else { "1" },
            self.partitions,
            if self.lz4 { "lz4" } else { "none" }
        )
    }
}

fn scenarios(quick: bool) -> Vec<Scenario> {
    let mut out = Vec::new();
    for size in [100, 1024, 16384] {
        for acks_all in [false, true] {
            for partitions in [1, 6] {
                for lz4 in [false, true] {
                    let s = Scenario {
                        size,
                        acks_all,
                        partitions,
                        lz4,
                    };
                    // Quick: every size at the base settings, then one axis at a time at 1 KB.
                    let base = !acks_all && partitions == 1 && !lz4;
                    let one_axis = size == 1024
                        && [acks_all, partitions == 6, lz4]
                            .iter()
                            .filter(|x| **x)
                            .count()
                            == 1;
                    if !quick || base || one_axis {
                        out.push(s);
                    }
                }
            }
        }
    }
    out
}

#[derive(Default)]
struct Throughput {
    records: u64,
    bytes: u64,
    secs: f64,
    errors: u64,
    /// Broker CPU seconds over the run, when its pid is known.
    cpu_secs: Option<f64>,
}

impl Throughput {
    fn rec_s(&self) -> f64 {
        self.records as f64 / self.secs.max(1e-9)
    }
    fn mb_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.secs.max(1e-9)
    }
    fn cpu_per_gb(&self) -> Option<f64> {
        self.cpu_secs
            .map(|c| c / (self.bytes as f64 / 1e9).max(1e-9))
    }
}

struct Latency {
    rate: u64,
    achieved: f64,
    /// Produce to consume.
    hist: Histogram<u64>,
    /// Produce to the producer's acknowledgement (acks=1): the produce path's share.
    ack: Histogram<u64>,
}

#[derive(Default)]
struct TargetResults {
    name: String,
    /// The 1 KB acks=1 p=1 producer maximum with `linger.ms=0`, the latency runs' basis.
    latency_basis_rec_s: f64,
    produce: BTreeMap<Scenario, Throughput>,
    consume: BTreeMap<Scenario, Throughput>,
    latency: Vec<Latency>,
    peak_rss_kb: Option<u64>,
}

fn run_target(t: &Target, args: &Args) -> anyhow::Result<TargetResults> {
    let run = format!("{}", std::process::id());
    let mut res = TargetResults {
        name: t.name.clone(),
        ..TargetResults::default()
    };
    let secs = if args.quick { 3 } else { 8 };
    let byte_cap: u64 = if args.quick { 512 << 20 } else { 2 << 30 };
    let all = scenarios(args.quick);
    for (i, s) in all.iter().enumerate() {
        let topic = s.topic(&run);
        t.create_topic(&topic, s.partitions)?;
        let cpu0 = t.pid.and_then(cpu_secs);
        let p = produce(
            &t.bootstrap,
            &topic,
            s,
            Duration::from_secs(secs),
            byte_cap,
            LINGER_MS,
        )?;
        let p = Throughput {
            cpu_secs: cpu0.and_then(|c0| t.pid.and_then(cpu_secs).map(|c1| c1 - c0)),
            ..p
        };
        println!(
            "[{}/{}] {} produce {}: {:>9.0} rec/s {:>7.1} MB/s{}",
            i + 1,
            all.len(),
            t.name,
            s.label(),
            p.rec_s(),
            p.mb_s(),
            if p.errors > 0 {
                format!(" ({} delivery errors)", p.errors)
            } else {
                String::new()
            }
        );
        // Consumer throughput for the 1 KB topics, from the page cache. Every target reads the
        // same CONSUME_BYTES written to a topic of its own: the produce topics hold whatever
        // each target took in its time (up to 2 GB), and librdkafka's mock cluster does not
        // serve a partition of that size back at speed, which made the ratio meaningless.
        if s.size == 1024 && !s.acks_all {
            let read_topic = format!("{topic}-read");
            t.create_topic(&read_topic, s.partitions)?;
            let w = produce(
                &t.bootstrap,
                &read_topic,
                s,
                Duration::from_secs(120),
                CONSUME_BYTES,
                LINGER_MS,
            )?;
            let cpu0 = t.pid.and_then(cpu_secs);
            let c = consume(&t.bootstrap, &read_topic, s.partitions, w.records, &[])?;
            t.delete_topic(&read_topic);
            let c = Throughput {
                cpu_secs: cpu0.and_then(|c0| t.pid.and_then(cpu_secs).map(|c1| c1 - c0)),
                ..c
            };
            println!(
                "      {} consume {}: {:>9.0} rec/s {:>7.1} MB/s",
                t.name,
                s.label(),
                c.rec_s(),
                c.mb_s()
            );
            res.consume.insert(*s, c);
        }
        res.produce.insert(*s, p);
        t.delete_topic(&topic);
    }

    // End-to-end latency at fixed fractions of the measured maximum (1 KB, acks=1, p=1).
    let base = Scenario {
        size: 1024,
        acks_all: false,
        partitions: 1,
        lz4: false,
    };
    // The basis is the maximum of the latency producer's own settings (linger.ms=0): a
    // fraction of the linger.ms=5 maximum can be more than it sustains at all.
    let basis_topic = format!("bench-{run}-latency-basis");
    t.create_topic(&basis_topic, 1)?;
    let basis = produce(
        &t.bootstrap,
        &basis_topic,
        &base,
        Duration::from_secs(secs),
        byte_cap,
        "0",
    )?;
    t.delete_topic(&basis_topic);
    let max_rate = basis.rec_s().max(1.0);
    res.latency_basis_rec_s = max_rate;
    println!(
        "[latency] {} maximum at linger.ms=0: {max_rate:.0} rec/s",
        t.name
    );
    for pct in [25u64, 50, 75] {
        let rate = (max_rate * pct as f64 / 100.0) as u64;
        let topic = format!("bench-{run}-latency-{pct}");
        t.create_topic(&topic, 1)?;
        let l = latency(
            &t.bootstrap,
            &topic,
            rate,
            Duration::from_secs(secs),
            &[],
            &[],
        )?;
        let path = args.out.join(format!("latency-{}-{pct}pct.hgrm", t.name));
        std::fs::write(&path, hgrm(&l.hist))?;
        println!(
            "[latency] {} at {pct}% ({} rec/s, achieved {:.0}): p50 {:.2} ms p99 {:.2} ms p99.9 {:.2} ms max {:.2} ms; produce ack p50 {:.2} ms p99 {:.2} ms",
            t.name,
            rate,
            l.achieved,
            ms(l.hist.value_at_quantile(0.5)),
            ms(l.hist.value_at_quantile(0.99)),
            ms(l.hist.value_at_quantile(0.999)),
            ms(l.hist.max()),
            ms(l.ack.value_at_quantile(0.5)),
            ms(l.ack.value_at_quantile(0.99))
        );
        res.latency.push(l);
        t.delete_topic(&topic);
    }
    res.peak_rss_kb = t.pid.and_then(peak_rss_kb);
    Ok(res)
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

fn client(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    c
}

fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = client(bootstrap).create()?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let t = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let res = block_on(admin.create_topics([&t], &opts))?;
    for r in res {
        if let Err((name, code)) = r
            && code != RDKafkaErrorCode::TopicAlreadyExists
        {
            bail!("create topic {name}: {code:?}");
        }
    }
    Ok(())
}

fn delete_topic(bootstrap: &str, topic: &str) {
    let Ok(admin) = client(bootstrap).create::<AdminClient<DefaultClientContext>>() else {
        return;
    };
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let _ = block_on(admin.delete_topics(&[topic], &opts));
}

/// Drives an admin future to completion on this thread, bounded at 30 s.
fn block_on<T>(
    fut: impl std::future::Future<Output = rdkafka::error::KafkaResult<T>>,
) -> anyhow::Result<T> {
    block_on_within(fut, Duration::from_secs(30))
}

/// Drives an admin future to completion on this thread, bounded by `limit`. rdkafka's admin
/// futures are completed by librdkafka's threads, so polling with a no-op waker suffices.
fn block_on_within<T>(
    fut: impl std::future::Future<Output = rdkafka::error::KafkaResult<T>>,
    limit: Duration,
) -> anyhow::Result<T> {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let deadline = Instant::now() + limit;
    loop {
        if let std::task::Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            return Ok(r?);
        }
        if Instant::now() > deadline {
            bail!("admin request timed out");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Counts delivery reports.
#[derive(Default)]
struct Counting {
    acked: AtomicU64,
    acked_bytes: AtomicU64,
    failed: AtomicU64,
    /// Latency runs only: the clock their payloads carry (microseconds since this instant in
    /// the first 8 bytes), and the histogram of send-to-acknowledgement times.
    ack_latency: Option<(Instant, std::sync::Mutex<Histogram<u64>>)>,
}

struct CountingContext(Arc<Counting>);

impl ClientContext for CountingContext {
    /// With `statistics.interval.ms` set (`strata-bench latency --pset`), librdkafka's
    /// statistics JSON goes to stderr, one line per interval, prefixed `STATS `.
    fn stats_raw(&self, statistics: &[u8]) {
        eprintln!("STATS {}", String::from_utf8_lossy(statistics));
    }
}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(m) => {
                self.0.acked.fetch_add(1, Ordering::Relaxed);
                let n = m.payload().map_or(0, <[u8]>::len) as u64;
                self.0.acked_bytes.fetch_add(n, Ordering::Relaxed);
                if let Some((epoch, hist)) = &self.0.ack_latency
                    && let Some(p) = m.payload()
                    && p.len() >= 8
                {
                    let sent = u64::from_be_bytes(p[..8].try_into().unwrap_or_default());
                    let now = epoch.elapsed().as_micros() as u64;
                    if let Ok(mut h) = hist.lock() {
                        let _ = h.record(now.saturating_sub(sent).max(1));
                    }
                }
            }
            Err(_) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn producer(
    bootstrap: &str,
    s: &Scenario,
    linger_ms: &str,
) -> anyhow::Result<(ThreadedProducer<CountingContext>, Arc<Counting>)> {
    producer_counting(bootstrap, s, linger_ms, Counting::default(), &[])
}

fn producer_counting(
    bootstrap: &str,
    s: &Scenario,
    linger_ms: &str,
    counts: Counting,
    extra: &[(String, String)],
) -> anyhow::Result<(ThreadedProducer<CountingContext>, Arc<Counting>)> {
    let counts = Arc::new(counts);
    let mut c = client(bootstrap);
    c.set("acks", if s.acks_all { "all" } else { "1" })
        .set("linger.ms", linger_ms)
        .set("batch.size", BATCH_SIZE)
        .set("compression.type", if s.lz4 { "lz4" } else { "none" })
        .set("enable.idempotence", "false")
        .set("queue.buffering.max.kbytes", "1048576");
    for (k, v) in extra {
        c.set(k, v);
    }
    let p = c.create_with_context(CountingContext(counts.clone()))?;
    Ok((p, counts))
}

/// A payload that compresses like real data would (not all zeros): a repeating text.
fn payload(size: usize, seed: u64) -> Vec<u8> {
    let text = b"strata benchmark record; the quick brown fox jumps over the lazy dog 0123456789 ";
    let mut v: Vec<u8> = text.iter().cycle().take(size).copied().collect();
    for (i, b) in seed.to_be_bytes().iter().enumerate() {
        if i < v.len() {
            v[i] = *b;
        }
    }
    v
}

fn produce(
    bootstrap: &str,
    topic: &str,
    s: &Scenario,
    dur: Duration,
    byte_cap: u64,
    linger_ms: &str,
) -> anyhow::Result<Throughput> {
    let (p, counts) = producer(bootstrap, s, linger_ms)?;
    let value = payload(s.size, 0);
    let start = Instant::now();
    let mut sent: u64 = 0;
    let mut i = 0u64;
    while start.elapsed() < dur && sent * s.size as u64 <= byte_cap {
        // Spread over partitions without keys (round robin by explicit partition).
        let part = (i % s.partitions as u64) as i32;
        let rec = BaseRecord::to(topic).payload(&value).partition(part);
        match p.send::<(), _>(rec) {
            Ok(()) => {
                sent += 1;
                i += 1;
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err((e, _)) => bail!("produce: {e}"),
        }
    }
    p.flush(Duration::from_secs(120))?;
    let secs = start.elapsed().as_secs_f64();
    Ok(Throughput {
        records: counts.acked.load(Ordering::Relaxed),
        bytes: counts.acked_bytes.load(Ordering::Relaxed),
        secs,
        errors: counts.failed.load(Ordering::Relaxed),
        cpu_secs: None,
    })
}

/// The consumer settings of every consumer the tool runs, on every target (stated in the
/// summary); anything not named is librdkafka's default.
///
/// `fetch.queue.backoff.ms=10` (librdkafka's default is 1000): when one Fetch response holds
/// more than `queued.min.messages` (100,000) records or `queued.max.messages.kbytes` (64 MB),
/// librdkafka stops fetching that partition for this long, even after the application has
/// drained the queue. A 1 MB lz4 response of this tool's payload (about 100:1) decompresses
/// to about 104,000 records, so with the default every response was followed by a 1 s pause
/// and the lz4 consumer measured the client's backoff (`debug=fetch`: "Fetch backoff for
/// 1000ms: Local: Queue full"), not the broker. A broker that returns what
/// `max.partition.fetch.bytes` allows, as Kafka does, trips it; librdkafka's mock returns
/// one batch per Fetch and never does.
fn consumer_settings() -> &'static [(&'static str, &'static str)] {
    &[
        ("enable.auto.commit", "false"),
        ("auto.offset.reset", "earliest"),
        ("fetch.wait.max.ms", "100"),
        ("fetch.queue.backoff.ms", "10"),
    ]
}

/// The producer settings of the matrix, as stated in the summary (`linger.ms` aside, which
/// the latency runs set to 0).
fn producer_settings_text() -> String {
    format!(
        "batch.size={BATCH_SIZE} enable.idempotence=false queue.buffering.max.kbytes=1048576, \
         records spread round-robin by explicit partition; everything else librdkafka's default"
    )
}

fn consumer_settings_text() -> String {
    let s: Vec<String> = consumer_settings()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{}; everything else librdkafka's default", s.join(" "))
}

/// The consumers' context: librdkafka's log lines go to stderr (the `log` facade has no
/// logger in this tool), so that `--set debug=fetch` shows the client's fetch decisions.
struct StderrLog;

impl ClientContext for StderrLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        eprintln!("librdkafka {level:?} {fac} {log_message}");
    }
}

impl ConsumerContext for StderrLog {}

fn consumer(
    bootstrap: &str,
    extra: &[(String, String)],
) -> anyhow::Result<BaseConsumer<StderrLog>> {
    let mut c = client(bootstrap);
    c.set("group.id", "strata-bench");
    for (k, v) in consumer_settings() {
        c.set(*k, *v);
    }
    for (k, v) in extra {
        c.set(k, v);
        if k == "debug" {
            // rdkafka derives librdkafka's log level from the `log` facade's, which is off.
            c.set_log_level(RDKafkaLogLevel::Debug);
        }
    }
    Ok(c.create_with_context(StderrLog)?)
}

fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: u64,
    extra: &[(String, String)],
) -> anyhow::Result<Throughput> {
    let c = consumer(bootstrap, extra)?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(120);
    let (mut records, mut bytes, mut errors) = (0u64, 0u64, 0u64);
    while records < expected && Instant::now() < deadline {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                records += 1;
                bytes += m.payload().map_or(0, <[u8]>::len) as u64;
            }
            Some(Err(_)) => errors += 1,
            None => {}
        }
    }
    Ok(Throughput {
        records,
        bytes,
        secs: start.elapsed().as_secs_f64(),
        errors,
        cpu_secs: None,
    })
}

/// Produces 1 KB records at `rate`/s (paced in 1 ms steps) with the send time inside, and
/// records each record's produce-to-consume time in microseconds.
fn latency(
    bootstrap: &str,
    topic: &str,
    rate: u64,
    dur: Duration,
    extra: &[(String, String)],
    producer_extra: &[(String, String)],
) -> anyhow::Result<Latency> {
    let s = Scenario {
        size: 1024,
        acks_all: false,
        partitions: 1,
        lz4: false,
    };
    let c = consumer(bootstrap, extra)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
    c.assign(&tpl)?;
    let epoch = Instant::now();
    let stop = Arc::new(AtomicU64::new(0));
    type Histograms = (Histogram<u64>, f64, Histogram<u64>);
    let hist = std::thread::scope(|scope| -> anyhow::Result<Histograms> {
        let stop2 = stop.clone();
        let reader = scope.spawn(move || -> anyhow::Result<Histogram<u64>> {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
            // Bounded by the producer's stop signal plus a drain of 5 s.
            let mut drain_until: Option<Instant> = None;
            loop {
                if stop2.load(Ordering::Relaxed) > 0 && drain_until.is_none() {
                    drain_until = Some(Instant::now() + Duration::from_secs(5));
                }
                if drain_until.is_some_and(|d| Instant::now() > d)
                    || drain_until.is_some() && h.len() >= stop2.load(Ordering::Relaxed)
                {
                    break;
                }
                if let Some(Ok(m)) = c.poll(Duration::from_millis(10))
                    && let Some(p) = m.payload()
                    && p.len() >= 8
                {
                    let sent = u64::from_be_bytes(p[..8].try_into().unwrap_or_default());
                    let now = epoch.elapsed().as_micros() as u64;
                    let _ = h.record(now.saturating_sub(sent).max(1));
                }
            }
            Ok(h)
        });
        let (p, counts) = producer_counting(
            bootstrap,
            &s,
            "0",
            Counting {
                ack_latency: Some((
                    epoch,
                    std::sync::Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3)?),
                )),
                ..Counting::default()
            },
            producer_extra,
        )?;
        // Let the consumer's fetches start before the clock matters.
        std::thread::sleep(Duration::from_millis(500));
        let start = Instant::now();
        let mut sent = 0u64;
        let template = payload(s.size, 0);
        let mut v = template.clone();
        while start.elapsed() < dur {
            let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
            while sent < due {
                v[..8].copy_from_slice(&(epoch.elapsed().as_micros() as u64).to_be_bytes());
                match p.send::<(), _>(BaseRecord::to(topic).payload(&v).partition(0)) {
                    Ok(()) => sent += 1,
                    Err(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let achieved = sent as f64 / start.elapsed().as_secs_f64();
        p.flush(Duration::from_secs(30))?;
        stop.store(sent.max(1), Ordering::Relaxed);
        let h = reader
            .join()
            .map_err(|_| anyhow::anyhow!("latency reader panicked"))??;
        let ack = match &counts.ack_latency {
            Some((_, m)) => m.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone(),
            None => Histogram::new(3)?,
        };
        Ok((h, achieved, ack))
    })?;
    Ok(Latency {
        rate,
        achieved: hist.1,
        hist: hist.0,
        ack: hist.2,
    })
}

/// HdrHistogram's percentile-distribution text (`.hgrm`), values in milliseconds.
fn hgrm(h: &Histogram<u64>) -> String {
    let mut s = String::from("       Value     Percentile TotalCount 1/(1-Percentile)\n\n");
    for v in h.iter_quantiles(2) {
        let q = v.quantile_iterated_to();
        let inv = if q < 1.0 {
            1.0 / (1.0 - q)
        } else {
            f64::INFINITY
        };
        let _ = writeln!(
            s,
            "{:12.3} {:14.12} {:10} {:14.2}",
            ms(v.value_iterated_to()),
            q,
            v.count_since_last_iteration(),
            inv
        );
    }
    let _ = writeln!(
        s,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]\n#[Max     = {:12.3}, Total count    = {:12}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0,
        ms(h.max()),
        h.len()
    );
    s
}

/// Loopback TCP throughput between two threads, 1 MiB writes, for `secs` seconds.
fn loopback_mb_s(secs: u64) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
        }
    });
    let mut w = TcpStream::connect(addr)?;
    let chunk = vec![7u8; 1 << 20];
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        w.write_all(&chunk)?;
    }
    drop(w);
    let total = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))??;
    Ok(total as f64 / 1e6 / start.elapsed().as_secs_f64())
}

/// Sequential 1 MiB writes of `bytes` to a scratch file in `dir`: MB/s into the page cache,
/// and MB/s including a final fdatasync.
fn disk_write_mb_s(dir: &Path, bytes: u64) -> anyhow::Result<(f64, f64)> {
    let path = dir.join(format!("strata-bench-{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&path)?;
    let chunk = vec![3u8; 1 << 20];
    let start = Instant::now();
    let mut written = 0u64;
    while written < bytes {
        f.write_all(&chunk)?;
        written += chunk.len() as u64;
    }
    let cached = written as f64 / 1e6 / start.elapsed().as_secs_f64();
    f.sync_data()?;
    let synced = written as f64 / 1e6 / start.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    Ok((cached, synced))
}

/// User + system CPU seconds of a process, from `/proc/<pid>/stat`.
fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks())
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Peak resident set (VmHWM) in KiB, from `/proc/<pid>/status`.
fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ratio(a: f64, b: Option<f64>) -> String {
    match b {
        Some(b) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

fn summary(results: &[TargetResults], loopback: f64, disk_cache: f64, disk_sync: f64) -> String {
    let mut s = String::new();
    let machine_limit = loopback.min(disk_cache);
    let _ = writeln!(
        s,
        "## Baselines\n\nloopback TCP {loopback:.0} MB/s; sequential write {disk_cache:.0} MB/s (page cache), {disk_sync:.0} MB/s (with fdatasync); machine limit = min(loopback, page-cache write) = {machine_limit:.0} MB/s\n"
    );
    let _ = writeln!(
        s,
        "## Client settings (every target)\n\nlibrdkafka {}.\n\n- producer: {}\n- consumer (throughput and latency runs): {}\n- latency runs: one 1 KB record per send, paced in 1 ms steps, acks=1, linger.ms=0, one partition; the producer and the consumer run in this one process\n",
        rdkafka::util::get_rdkafka_version().1,
        producer_settings_text(),
        consumer_settings_text()
    );
    let mock = results.iter().find(|r| r.name == "mock");
    for r in results {
        let _ = writeln!(
            s,
            "## {} producer (linger.ms={LINGER_MS}, batch.size={BATCH_SIZE})\n",
            r.name
        );
        let _ = writeln!(
            s,
            "| scenario | rec/s | MB/s | vs mock | vs machine | broker CPU s/GB | errors |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        for (sc, t) in &r.produce {
            let m = mock.and_then(|m| m.produce.get(sc)).map(Throughput::mb_s);
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.1} | {} | {:.2} | {} | {} |",
                sc.label(),
                t.rec_s(),
                t.mb_s(),
                ratio(t.mb_s(), m),
                t.mb_s() / machine_limit,
                t.cpu_per_gb().map_or("-".into(), |c| format!("{c:.2}")),
                t.errors
            );
        }
        let _ = writeln!(s, "\n## {} consumer\n", r.name);
        let _ = writeln!(
            s,
            "| scenario | rec/s | MB/s | vs mock | broker CPU s/GB |\n|---|---:|---:|---:|---:|"
        );
        for (sc, t) in &r.consume {
            let m = mock.and_then(|m| m.consume.get(sc)).map(Throughput::mb_s);
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.1} | {} | {} |",
                sc.label(),
                t.rec_s(),
                t.mb_s(),
                ratio(t.mb_s(), m),
                t.cpu_per_gb().map_or("-".into(), |c| format!("{c:.2}"))
            );
        }
        let _ = writeln!(
            s,
            "\n## {} end-to-end latency (1 KB, acks=1, p=1, linger.ms=0; rates are fractions of the linger.ms=0 maximum, {:.0} rec/s; produce ack is send to delivery report of the same records)\n",
            r.name, r.latency_basis_rec_s
        );
        let _ = writeln!(
            s,
            "| target rate | achieved | p50 ms | p99 ms | p99.9 ms | max ms | produce ack p50 ms | produce ack p99 ms |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for l in &r.latency {
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                l.rate,
                l.achieved,
                ms(l.hist.value_at_quantile(0.5)),
                ms(l.hist.value_at_quantile(0.99)),
                ms(l.hist.value_at_quantile(0.999)),
                ms(l.hist.max()),
                ms(l.ack.value_at_quantile(0.5)),
                ms(l.ack.value_at_quantile(0.99))
            );
        }
        if let Some(kb) = r.peak_rss_kb {
            let _ = writeln!(
                s,
                "\npeak RSS (VmHWM) of {}: {:.1} MB",
                r.name,
                kb as f64 / 1024.0
            );
        }
        let _ = writeln!(s);
    }
    s
}
