//! `strata-bench restart`: time to ready after a clean stop and after `kill -9`, with a given
//! volume of data in the log directory.
//!
//! The tool runs the broker binary itself (it has to stop and kill it) on 127.0.0.1:`--port`
//! with `log.dirs` under `--work-dir`:
//!
//! 1. Checks with `df` that the file system holds the volume plus 2 GB, refuses a work
//!    directory that already has files in it, and starts the broker on the empty directory
//!    (the baseline row: time to ready with nothing to open).
//! 2. Fills one topic of `--partitions` partitions with `--gb` GB of `--record-size` records
//!    (acks=1, no compression) through the broker, and notes each partition's high watermark.
//! 3. Restarts it: SIGTERM, wait for exit (timed: the clean shutdown fsyncs every log), start;
//!    then `kill -9` while a producer is writing, start. With `--cold` each case is run a
//!    second time after the data files are synced and dropped from the page cache
//!    (`dd iflag=nocache count=0` per file, residency checked with `fincore`).
//! 4. Stops the broker and removes the work directory (unless `--keep`).
//!
//! Ready is timed from spawning the process: first to an ApiVersions answer, then to a
//! Metadata answer in which every partition of the topic has a leader (both over fresh
//! connections, see [`crate::probe`]). After each start the records are counted again from
//! the high watermarks: a clean restart must show all of them, a `kill -9` at least every
//! record acknowledged before the kill.
//!
//! Usage: `strata-bench restart [--broker-bin target/release/strata] [--work-dir DIR]
//! [--port 39491] [--gb 10] [--partitions 10] [--record-size 16384] [--batch-size 1000000]
//! [--cold] [--repeat N] [--keep] [--override key=value]... [--out FILE]`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use crate::probe::{self, ProcSample};
use crate::{Counting, CountingContext, client, create_topic};

const TOPIC: &str = "restart-fill";

struct Args {
    broker_bin: PathBuf,
    work_dir: PathBuf,
    port: u16,
    gb: f64,
    partitions: usize,
    record_size: usize,
    /// The fill producer's `batch.size`: 1 MB makes few large batches, Java's default 16384
    /// one batch per 16 KB record (recovery work grows with the number of batches).
    batch_size: usize,
    cold: bool,
    /// Restarts per case (clean/kill -9 × warm/cold).
    repeat: usize,
    keep: bool,
    overrides: Vec<String>,
    out: Option<PathBuf>,
}

fn parse_args(argv: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut a = Args {
        broker_bin: PathBuf::from("target/release/strata"),
        work_dir: PathBuf::from(format!("/tmp/strata-restart-{}", std::process::id())),
        port: 39491,
        gb: 10.0,
        partitions: 10,
        record_size: 16384,
        batch_size: 1_000_000,
        cold: false,
        repeat: 1,
        keep: false,
        overrides: Vec::new(),
        out: None,
    };
    let mut it = argv;
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--broker-bin" => a.broker_bin = value()?.into(),
            "--work-dir" => a.work_dir = value()?.into(),
            "--port" => a.port = value()?.parse()?,
            "--gb" => a.gb = value()?.parse()?,
            "--partitions" => a.partitions = value()?.parse()?,
            "--record-size" => a.record_size = value()?.parse()?,
            "--batch-size" => a.batch_size = value()?.parse()?,
            "--cold" => a.cold = true,
            "--repeat" => a.repeat = value()?.parse()?,
            "--keep" => a.keep = true,
            "--override" => a.overrides.push(value()?),
            "--out" => a.out = Some(value()?.into()),
            "-h" | "--help" => {
                println!(
                    "usage: strata-bench restart [--broker-bin PATH] [--work-dir DIR] [--port N] [--gb 10] [--partitions 10] [--record-size 16384] [--batch-size 1000000] [--cold] [--repeat N] [--keep] [--override key=value]... [--out FILE]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}"),
        }
    }
    if a.gb.is_nan() || a.gb <= 0.0 || a.partitions == 0 || a.record_size < 16 || a.repeat == 0 {
        bail!("--gb, --partitions, --record-size and --repeat must be positive");
    }
    Ok(a)
}

/// The broker child process and when it was spawned.
struct Broker {
    child: Child,
    spawned: Instant,
}

impl Drop for Broker {
    /// A broker still running when the measurement stops early (an error) is killed, so that
    /// no broker outlives the tool or its removed work directory.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One restart and what the broker looked like once ready.
struct Case {
    name: String,
    /// SIGTERM to exit, for the clean cases.
    shutdown_secs: Option<f64>,
    /// Bytes of the data files in the page cache when the broker was started.
    cached_bytes: Option<u64>,
    /// Bytes under the data directory when the broker was started.
    data_bytes: u64,
    api_secs: f64,
    meta_secs: f64,
    /// Sum of high watermarks once ready, and the least it must be.
    records: u64,
    expected: u64,
    sample: ProcSample,
}

/// # Errors
///
/// Bad arguments, too little disk, a non-empty work directory, a broker that does not start
/// or get ready within 10 minutes, or a fill that falls short.
pub fn run(argv: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let args = parse_args(argv)?;
    let data = args.work_dir.join("data");
    if std::fs::read_dir(&args.work_dir).is_ok_and(|mut d| d.next().is_some()) {
        bail!(
            "{} exists and is not empty; give a fresh --work-dir",
            args.work_dir.display()
        );
    }
    std::fs::create_dir_all(&data)?;
    let outcome = measure(&args, &data);
    if args.keep {
        println!("kept {}", args.work_dir.display());
    } else {
        std::fs::remove_dir_all(&args.work_dir)?;
        println!("removed {}", args.work_dir.display());
    }
    let report = outcome?;
    println!("\n{report}");
    if let Some(out) = &args.out {
        std::fs::write(out, &report)?;
    }
    Ok(())
}

fn measure(args: &Args, data: &Path) -> anyhow::Result<String> {
    let want = (args.gb * 1e9) as u64;
    let (avail, df_line) = df(data)?;
    println!("# strata-bench restart: {df_line}");
    if avail < want + want / 20 + 2_000_000_000 {
        bail!(
            "{} has {:.1} GB free; {:.1} GB needed",
            data.display(),
            avail as f64 / 1e9,
            (want + 2_000_000_000) as f64 / 1e9
        );
    }
    let bootstrap = format!("127.0.0.1:{}", args.port);
    let addr = probe::resolve(&bootstrap)?;
    let mut cases: Vec<Case> = Vec::new();

    // Baseline: the first start, on an empty directory.
    let mut broker = spawn(args, data, 0)?;
    let (api, meta) = wait_ready(&mut broker, addr, None, args)?;
    cases.push(Case {
        name: "first start, empty data dir".into(),
        shutdown_secs: None,
        cached_bytes: None,
        data_bytes: 0,
        api_secs: api,
        meta_secs: meta,
        records: 0,
        expected: 0,
        sample: probe::sample(broker.child.id()).unwrap_or_default(),
    });
    println!("[ready] empty data dir: ApiVersions {api:.3} s, Metadata {meta:.3} s");

    create_topic(&bootstrap, TOPIC, args.partitions as i32)?;
    let fill = fill(&bootstrap, args, want)?;
    let fill_peak = probe::sample(broker.child.id()).unwrap_or_default();
    let mut expected = high_watermarks(&bootstrap, args.partitions)?;
    if expected < fill.acked {
        bail!(
            "high watermarks sum to {expected} but {} records were acked",
            fill.acked
        );
    }
    let (bytes, files) = probe::dir_usage(data);
    let (batches, active_batches, active_bytes) = probe::count_batches(data);
    println!(
        "[fill] {batches} record batches on disk, {active_batches} of them in active segments ({:.2} GB)",
        active_bytes as f64 / 1e9
    );
    println!(
        "[fill] {} records, {:.2} GB acked in {:.1} s ({:.0} MB/s), {} failed; data dir {:.2} GB in {files} files",
        fill.acked,
        fill.bytes as f64 / 1e9,
        fill.secs,
        fill.bytes as f64 / 1e6 / fill.secs,
        fill.failed,
        bytes as f64 / 1e9
    );

    let mut starts = 1;
    let colds: &[bool] = if args.cold { &[false, true] } else { &[false] };
    let runs = |cold: bool| {
        (1..=args.repeat).map(move |r| {
            let cache = if cold { "cold" } else { "warm" };
            if args.repeat > 1 {
                (cold, format!("{cache} cache, #{r}"))
            } else {
                (cold, format!("{cache} cache"))
            }
        })
    };
    for (cold, label) in colds.iter().flat_map(|&c| runs(c)) {
        let shutdown = stop_clean(&mut broker)?;
        starts += 1;
        let case = restart(
            args,
            data,
            addr,
            &mut broker,
            starts,
            cold,
            &format!("clean SIGTERM stop, {label}"),
            expected,
        )?;
        cases.push(Case {
            shutdown_secs: Some(shutdown),
            ..case
        });
    }
    for (cold, label) in colds.iter().flat_map(|&c| runs(c)) {
        let acked_before_kill = produce_then_kill(&bootstrap, args, &mut broker)?;
        expected += acked_before_kill;
        starts += 1;
        let case = restart(
            args,
            data,
            addr,
            &mut broker,
            starts,
            cold,
            &format!("kill -9 during produce, {label}"),
            expected,
        )?;
        // Whatever the kill left beyond the acked records is on disk too; count from there.
        expected = expected.max(case.records);
        cases.push(case);
    }
    let final_shutdown = stop_clean(&mut broker)?;

    // Same-run baseline for reading everything: every data file, cold, then again warm.
    let read = if args.cold {
        evict(data)?;
        let cold = read_all(data)?;
        let warm = read_all(data)?;
        Some((cold, warm))
    } else {
        None
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        "{df_line}\nbroker: {} {}\nfill: {} partitions, {} B records, batch.size {}, {:.2} GB acked in {:.1} s ({:.0} MB/s, {} failed); data dir {:.2} GB in {files} files, {batches} record batches, {active_batches} of them in active segments ({:.2} GB); broker VmHWM after fill {:.1} MB\n",
        args.broker_bin.display(),
        args.overrides.join(" "),
        args.partitions,
        args.record_size,
        args.batch_size,
        fill.bytes as f64 / 1e9,
        fill.secs,
        fill.bytes as f64 / 1e6 / fill.secs,
        fill.failed,
        bytes as f64 / 1e9,
        active_bytes as f64 / 1e9,
        fill_peak.hwm_kb as f64 / 1024.0
    );
    let _ = writeln!(
        s,
        "| case | shutdown s | data dir GB | of it in page cache GB | ready: ApiVersions s | ready: Metadata, all partitions led s | records after / expected | VmRSS MB | fds |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for c in &cases {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} | {} | {:.3} | {:.3} | {} / {} | {:.1} | {} |",
            c.name,
            c.shutdown_secs.map_or("-".into(), |x| format!("{x:.2}")),
            c.data_bytes as f64 / 1e9,
            c.cached_bytes
                .map_or("-".into(), |b| format!("{:.2}", b as f64 / 1e9)),
            c.api_secs,
            c.meta_secs,
            c.records,
            c.expected,
            c.sample.rss_kb as f64 / 1024.0,
            c.sample.fds
        );
    }
    let _ = writeln!(s, "\nfinal clean shutdown: {final_shutdown:.2} s");
    if let Some((cold, warm)) = read {
        let _ = writeln!(
            s,
            "reading every data file once (1 MiB reads, this tool): {cold:.2} s from disk ({:.0} MB/s), {warm:.2} s from the page cache ({:.0} MB/s)",
            bytes as f64 / 1e6 / cold,
            bytes as f64 / 1e6 / warm
        );
    }
    Ok(s)
}

/// Stops (already done by the caller), optionally evicts, starts, waits for ready and counts
/// the records.
#[allow(clippy::too_many_arguments)]
fn restart(
    args: &Args,
    data: &Path,
    addr: std::net::SocketAddr,
    broker: &mut Broker,
    start_no: usize,
    cold: bool,
    name: &str,
    expected: u64,
) -> anyhow::Result<Case> {
    if cold {
        evict(data)?;
    }
    let cached = cached_bytes(data);
    let (data_bytes, _) = probe::dir_usage(data);
    *broker = spawn(args, data, start_no)?;
    let (api, meta) = wait_ready(broker, addr, Some(args.partitions), args)?;
    let sample = probe::sample(broker.child.id()).unwrap_or_default();
    let records = high_watermarks(&format!("127.0.0.1:{}", args.port), args.partitions)?;
    println!(
        "[ready] {name}: ApiVersions {api:.3} s, Metadata {meta:.3} s; {records} records (expected at least {expected}); page cache held {}",
        cached.map_or("?".into(), |b| format!("{:.2} GB", b as f64 / 1e9))
    );
    Ok(Case {
        name: name.into(),
        shutdown_secs: None,
        cached_bytes: cached,
        data_bytes,
        api_secs: api,
        meta_secs: meta,
        records,
        expected,
        sample,
    })
}

/// `df -B1` of the directory: (available bytes, the df line for the report).
fn df(dir: &Path) -> anyhow::Result<(u64, String)> {
    let out = Command::new("df")
        .args(["-B1", "--output=source,size,used,avail,target"])
        .arg(dir)
        .output()
        .context("df")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .nth(1)
        .context("df printed no line")?
        .to_string();
    let f: Vec<&str> = line.split_whitespace().collect();
    let num =
        |i: usize| -> anyhow::Result<u64> { Ok(f.get(i).context("df field")?.parse::<u64>()?) };
    let (size, used, avail) = (num(1)?, num(2)?, num(3)?);
    Ok((
        avail,
        format!(
            "df {}: {} on {}, size {:.0} GB, used {:.0} GB, available {:.0} GB",
            dir.display(),
            f[0],
            f.get(4).unwrap_or(&"?"),
            size as f64 / 1e9,
            used as f64 / 1e9,
            avail as f64 / 1e9
        ),
    ))
}

fn spawn(args: &Args, data: &Path, start_no: usize) -> anyhow::Result<Broker> {
    let listener = format!("PLAINTEXT://127.0.0.1:{}", args.port);
    let log = std::fs::File::create(args.work_dir.join(format!("broker-{start_no}.log")))?;
    let mut cmd = Command::new(&args.broker_bin);
    for kv in [
        format!("listeners={listener}"),
        format!("advertised.listeners={listener}"),
        format!("log.dirs={}", data.display()),
    ]
    .iter()
    .chain(&args.overrides)
    {
        cmd.arg("--override").arg(kv);
    }
    let spawned = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {}", args.broker_bin.display()))?;
    Ok(Broker { child, spawned })
}

/// Polls every 5 ms, for at most 10 minutes, until the broker answers ApiVersions and then
/// (when `partitions` is given) a Metadata request with every partition of the topic led.
/// Returns both times since the process was spawned.
fn wait_ready(
    b: &mut Broker,
    addr: std::net::SocketAddr,
    partitions: Option<usize>,
    args: &Args,
) -> anyhow::Result<(f64, f64)> {
    let deadline = b.spawned + Duration::from_secs(600);
    let mut api = None;
    while Instant::now() < deadline {
        if let Some(status) = b.child.try_wait()? {
            bail!(
                "broker exited with {status} before it was ready; see {}",
                args.work_dir.display()
            );
        }
        let timeout = Duration::from_secs(2);
        if api.is_none() && probe::api_versions_ok(addr, timeout) {
            api = Some(b.spawned.elapsed().as_secs_f64());
        }
        if let Some(api) = api {
            match partitions {
                None => return Ok((api, api)),
                Some(n) => {
                    if probe::metadata_led_partitions(addr, TOPIC, timeout).is_ok_and(|l| l >= n) {
                        return Ok((api, b.spawned.elapsed().as_secs_f64()));
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    bail!("broker not ready after 600 s")
}

/// SIGTERM and wait for the exit (at most 5 minutes, then SIGKILL). Returns the seconds.
fn stop_clean(b: &mut Broker) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &b.child.id().to_string()])
        .status()?;
    if !status.success() {
        bail!("kill -TERM failed");
    }
    while t0.elapsed() < Duration::from_secs(300) {
        if let Some(st) = b.child.try_wait()? {
            if !st.success() {
                bail!("broker exited with {st} on SIGTERM");
            }
            return Ok(t0.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = b.child.kill();
    let _ = b.child.wait();
    bail!("broker did not exit within 300 s of SIGTERM")
}

struct Fill {
    acked: u64,
    bytes: u64,
    failed: u64,
    secs: f64,
}

fn fill_producer(
    bootstrap: &str,
    batch_size: usize,
    message_timeout_ms: &str,
) -> anyhow::Result<(ThreadedProducer<CountingContext>, Arc<Counting>)> {
    let counts = Arc::new(Counting::default());
    let p = client(bootstrap)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("batch.size", batch_size.to_string())
        .set("compression.type", "none")
        .set("enable.idempotence", "false")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("message.timeout.ms", message_timeout_ms)
        .create_with_context(CountingContext(counts.clone()))?;
    Ok((p, counts))
}

/// Produces `want` bytes of record values round-robin over the partitions; at most 30
/// minutes of sending plus 5 minutes of flushing.
fn fill(bootstrap: &str, args: &Args, want: u64) -> anyhow::Result<Fill> {
    let (p, counts) = fill_producer(bootstrap, args.batch_size, "300000")?;
    let value = crate::payload(args.record_size, 1);
    let start = Instant::now();
    let (mut sent, mut i) = (0u64, 0u64);
    while sent < want && start.elapsed() < Duration::from_secs(1800) {
        let part = (i % args.partitions as u64) as i32;
        match p.send::<(), _>(BaseRecord::to(TOPIC).payload(&value).partition(part)) {
            Ok(()) => {
                sent += value.len() as u64;
                i += 1;
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err((e, _)) => bail!("produce: {e}"),
        }
    }
    p.flush(Duration::from_secs(300))?;
    let f = Fill {
        acked: counts.acked.load(Ordering::Relaxed),
        bytes: counts.acked_bytes.load(Ordering::Relaxed),
        failed: counts.failed.load(Ordering::Relaxed),
        secs: start.elapsed().as_secs_f64(),
    };
    if f.bytes < want {
        bail!(
            "fill fell short: {} of {want} bytes acked, {} failed",
            f.bytes,
            f.failed
        );
    }
    Ok(f)
}

/// Write rate of the producer that is running when the broker is killed: 2 s of it add
/// about 200 MB to the volume.
const LOAD_BYTES_PER_SEC: f64 = 100e6;

/// Produces for 2 s at [`LOAD_BYTES_PER_SEC`], kills the broker with SIGKILL while records
/// are in flight, and returns how many records were acknowledged before the kill.
fn produce_then_kill(bootstrap: &str, args: &Args, b: &mut Broker) -> anyhow::Result<u64> {
    let (p, counts) = fill_producer(bootstrap, args.batch_size, "5000")?;
    let value = crate::payload(args.record_size, 2);
    let stop = AtomicBool::new(false);
    let acked_at_kill = std::thread::scope(|scope| -> anyhow::Result<u64> {
        let sender = scope.spawn(|| {
            let start = Instant::now();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(30) {
                // Paced at LOAD_BYTES_PER_SEC so the kill adds little to the volume.
                let allowed = start.elapsed().as_secs_f64() * LOAD_BYTES_PER_SEC;
                if (i * value.len() as u64) as f64 > allowed {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                let part = (i % args.partitions as u64) as i32;
                match p.send::<(), _>(BaseRecord::to(TOPIC).payload(&value).partition(part)) {
                    Ok(()) => i += 1,
                    Err(_) => std::thread::sleep(Duration::from_micros(200)),
                }
            }
        });
        std::thread::sleep(Duration::from_secs(2));
        b.child.kill()?;
        // Acks counted after the kill signal can only be for records the broker wrote before.
        b.child.wait()?;
        let acked = counts.acked.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        sender
            .join()
            .map_err(|_| anyhow::anyhow!("sender panicked"))?;
        Ok(acked)
    })?;
    // The rest fail against the dead broker within message.timeout.ms; drop purges them.
    drop(p);
    println!("[kill -9] {acked_at_kill} records acked before the kill");
    Ok(acked_at_kill)
}

/// Sum over partitions of the high watermark (each asked with a 10 s bound).
fn high_watermarks(bootstrap: &str, partitions: usize) -> anyhow::Result<u64> {
    let c: BaseConsumer = client(bootstrap).create()?;
    let mut sum = 0u64;
    for p in 0..partitions {
        let (_, high) = c
            .fetch_watermarks(TOPIC, p as i32, Duration::from_secs(10))
            .with_context(|| format!("watermarks of partition {p}"))?;
        sum += u64::try_from(high).unwrap_or(0);
    }
    Ok(sum)
}

/// Writes back and drops every data file from the page cache: fsync, then
/// `dd iflag=nocache count=0` (posix_fadvise DONTNEED over the whole file).
fn evict(data: &Path) -> anyhow::Result<()> {
    for f in probe::files_under(data) {
        std::fs::File::open(&f)?.sync_all()?;
        let st = Command::new("dd")
            .arg(format!("if={}", f.display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .status()?;
        if !st.success() {
            bail!("dd nocache {} failed", f.display());
        }
    }
    Ok(())
}

/// Bytes of the data files resident in the page cache, from `fincore`.
fn cached_bytes(data: &Path) -> Option<u64> {
    let files = probe::files_under(data);
    let out = Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .args(&files)
        .output()
        .ok()?;
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse::<u64>().ok())
            .sum(),
    )
}

/// Reads every file under `data` once with 1 MiB reads; the seconds taken.
fn read_all(data: &Path) -> anyhow::Result<f64> {
    use std::io::Read;
    let t0 = Instant::now();
    let mut buf = vec![0u8; 1 << 20];
    for f in probe::files_under(data) {
        let mut file = std::fs::File::open(&f)?;
        // Bounded by the file's length: read returns 0 at the end.
        while file.read(&mut buf)? > 0 {}
    }
    Ok(t0.elapsed().as_secs_f64())
}
