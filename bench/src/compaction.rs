//! `strata-bench compaction`: the log cleaner in process, on the file system of `--dir`.
//!
//! One log takes `--updates` keyed records (`--keys` keys, `--value-bytes` each, in batches of
//! `--batch`) through `Log::append_unflushed`, as the broker's produce path does, with
//! `segment.bytes` = `--segment-bytes`, while a second thread runs the cleaner as the broker
//! does (a pass whenever the dirty ratio is above 0.5, else a 100 ms wait). It reports:
//!
//! - the log's size on disk at the end and at its largest, against the live data (one record
//!   per key), which is what "bounded disk" means for a compacted topic;
//! - the cleaner's throughput: bytes its passes read per second of pass time;
//! - the append latency (p50, p99, p99.9, max) with the cleaner running, and in a second run
//!   of the same appends without it, as the cleaner's effect on produce latency at the log;
//! - the baseline: sequential `pwrite` of the same bytes into the same file system.
//!
//! Usage: `strata-bench compaction [--dir DIR] [--updates N] [--keys N] [--value-bytes N]
//! [--segment-bytes N] [--batch N]`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_storage::cleaner::{self, CleanerSettings, CompactionConfig, Throttler};
use strata_storage::{Log, LogConfig};

struct Args {
    dir: PathBuf,
    updates: u64,
    keys: u64,
    value_bytes: usize,
    segment_bytes: u32,
    batch: u64,
}

fn parse(args: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut a = Args {
        dir: std::env::temp_dir(),
        updates: 1_000_000,
        keys: 1_000,
        value_bytes: 1_024,
        segment_bytes: 1 << 20,
        batch: 100,
    };
    let mut it = args;
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => a.dir = PathBuf::from(value()?),
            "--updates" => a.updates = value()?.parse()?,
            "--keys" => a.keys = value()?.parse()?,
            "--value-bytes" => a.value_bytes = value()?.parse()?,
            "--segment-bytes" => a.segment_bytes = value()?.parse()?,
            "--batch" => a.batch = value()?.parse()?,
            other => anyhow::bail!("unknown option {other}"),
        }
    }
    Ok(a)
}

/// What one run of the appends measured.
struct Run {
    appended_bytes: u64,
    final_bytes: u64,
    max_bytes: u64,
    latency: Histogram<u64>,
    elapsed: Duration,
    passes: u64,
    cleaned_read: u64,
    clean_time: Duration,
}

fn run_appends(dir: &Path, a: &Args, with_cleaner: bool) -> anyhow::Result<Run> {
    let _ = std::fs::remove_dir_all(dir);
    let config = LogConfig {
        segment_bytes: a.segment_bytes,
        retention_ms: -1,
        ..LogConfig::default()
    };
    let log = Arc::new(Mutex::new(Log::open(dir, config, now_ms())?));
    let done = Arc::new(AtomicBool::new(false));
    let passes = Arc::new(AtomicU64::new(0));
    let cleaned_read = Arc::new(AtomicU64::new(0));
    let clean_us = Arc::new(AtomicU64::new(0));
    let cleaner_thread = with_cleaner.then(|| {
        let (log, done) = (log.clone(), done.clone());
        let (passes, cleaned_read, clean_us) =
            (passes.clone(), cleaned_read.clone(), clean_us.clone());
        std::thread::spawn(move || -> anyhow::Result<()> {
            let cc = CompactionConfig::default();
            let settings = CleanerSettings::default();
            let mut throttle = Throttler::new(f64::MAX);
            let mut checkpoint = None;
            while !done.load(Ordering::Relaxed) {
                let plan = {
                    let l = log.lock().expect("log lock");
                    let end = l.log_end_offset();
                    let span = l.cleanable_span(checkpoint, end, &cc, now_ms())?;
                    if span.needs_cleaning(&cc) {
                        Some(l.clean_plan(span, &cc)?)
                    } else {
                        None
                    }
                };
                let Some(plan) = plan else {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                let started = Instant::now();
                let outcome =
                    cleaner::clean(&plan, &settings, now_ms(), &mut throttle, &mut |g| {
                        log.lock().expect("log lock").install_cleaned(g, now_ms())
                    })?;
                clean_us.fetch_add(
                    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
                cleaned_read.fetch_add(outcome.stats.bytes_read, Ordering::Relaxed);
                passes.fetch_add(1, Ordering::Relaxed);
                checkpoint = Some(outcome.end_offset);
            }
            Ok(())
        })
    });
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let value = vec![b'v'; a.value_bytes];
    let mut appended = 0u64;
    let mut max_bytes = 0u64;
    let started = Instant::now();
    let mut i = 0u64;
    let mut batches = 0u64;
    while i < a.updates {
        let records: Vec<SimpleRecord> = (0..a.batch.min(a.updates - i))
            .map(|j| SimpleRecord {
                key: Some(format!("key-{:06}", (i + j) % a.keys).into()),
                value: Some(value.clone().into()),
                timestamp: now_ms(),
                headers: vec![],
            })
            .collect();
        i += records.len() as u64;
        let mut bytes = encode_batch(0, &records).to_vec();
        appended += bytes.len() as u64;
        let t = Instant::now();
        {
            let mut l = log.lock().expect("log lock");
            l.append_unflushed(&mut bytes, 0, now_ms())?;
            if batches.is_multiple_of(100) {
                max_bytes = max_bytes.max(l.size_bytes());
            }
        }
        latency.saturating_record(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
        batches += 1;
    }
    let elapsed = started.elapsed();
    // Let the cleaner finish what is due, then stop it.
    if with_cleaner {
        std::thread::sleep(Duration::from_secs(2));
    }
    done.store(true, Ordering::Relaxed);
    if let Some(t) = cleaner_thread {
        t.join().expect("cleaner thread")?;
    }
    let final_bytes = log.lock().expect("log lock").size_bytes();
    Ok(Run {
        appended_bytes: appended,
        final_bytes,
        max_bytes: max_bytes.max(final_bytes),
        latency,
        elapsed,
        passes: passes.load(Ordering::Relaxed),
        cleaned_read: cleaned_read.load(Ordering::Relaxed),
        clean_time: Duration::from_micros(clean_us.load(Ordering::Relaxed)),
    })
}

/// Sequential `pwrite` of `bytes` in 1 MiB writes into a file in `dir`: MB/s (page cache).
fn pwrite_baseline(dir: &Path, bytes: u64) -> anyhow::Result<f64> {
    use std::os::unix::fs::FileExt;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("pwrite-baseline");
    let f = std::fs::File::create(&path)?;
    let chunk = vec![0x5au8; 1 << 20];
    let started = Instant::now();
    let mut at = 0u64;
    while at < bytes {
        f.write_all_at(&chunk, at)?;
        at += chunk.len() as u64;
    }
    let secs = started.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(&path)?;
    Ok(at as f64 / 1e6 / secs)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// Runs the measurement and prints a Markdown summary.
///
/// # Errors
/// A log or file error.
pub fn run(args: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let a = parse(args)?;
    let base = a
        .dir
        .join(format!("strata-bench-compaction-{}", std::process::id()));
    let with = run_appends(&base.join("with-cleaner"), &a, true)?;
    let without = run_appends(&base.join("without-cleaner"), &a, false)?;
    let baseline = pwrite_baseline(&base, with.appended_bytes)?;
    let _ = std::fs::remove_dir_all(&base);
    // One record per key: its batch share of the bytes appended.
    let live = with.appended_bytes * a.keys / a.updates.max(1);
    let cleaner_mbps = mb(with.cleaned_read) / with.clean_time.as_secs_f64().max(1e-9);
    println!(
        "| updates | keys | value bytes | segment bytes | appended MB | live MB | final MB | largest MB |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} |",
        a.updates,
        a.keys,
        a.value_bytes,
        a.segment_bytes,
        mb(with.appended_bytes),
        mb(live),
        mb(with.final_bytes),
        mb(with.max_bytes)
    );
    println!();
    println!(
        "cleaner: {} passes read {:.1} MB in {:.2} s of pass time: {cleaner_mbps:.0} MB/s; \
         pwrite baseline {baseline:.0} MB/s (ratio {:.2})",
        with.passes,
        mb(with.cleaned_read),
        with.clean_time.as_secs_f64(),
        cleaner_mbps / baseline
    );
    println!();
    println!("| appends | MB/s | p50 µs | p99 µs | p99.9 µs | max µs |");
    println!("|---|---|---|---|---|---|");
    for (name, r) in [("with the cleaner", &with), ("without", &without)] {
        println!(
            "| {name} | {:.0} | {} | {} | {} | {} |",
            mb(r.appended_bytes) / r.elapsed.as_secs_f64(),
            r.latency.value_at_quantile(0.5),
            r.latency.value_at_quantile(0.99),
            r.latency.value_at_quantile(0.999),
            r.latency.max()
        );
    }
    Ok(())
}
