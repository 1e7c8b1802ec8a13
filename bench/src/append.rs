//! `strata-bench append-ab DIR`: the log's append primitive, buffered (`pwrite` into the page
//! cache, what segments do) against direct (`O_DIRECT` from a reused aligned buffer,
//! [`strata_storage::direct::DirectAppender`]), in alternation in one run, for each append
//! size. Two measurements per variant and size:
//!
//! - **flat out:** `--mib` MiB appended as fast as one thread can, then an fdatasync; MB/s
//!   before the fsync, and the process's CPU seconds per GB;
//! - **paced:** appends at `--rate` MB/s for as many bytes, and the time each append call
//!   takes (p50, p99, p99.9, max), which is what an append holding a partition's lock adds
//!   to a produce.
//!
//! Each run appends into a new file that is deleted after it, as a segment is rolled.
//!
//! ```text
//! strata-bench append-ab DIR [--sizes 4096,16384,65536,262144] [--mib 512] [--rate 200] [--rounds 2]
//! ```

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use strata_storage::direct::DirectAppender;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Buffered,
    Direct,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Self::Buffered => "buffered",
            Self::Direct => "direct",
        }
    }
}

/// One file being appended to by one variant.
enum Writer {
    Buffered {
        file: File,
        end: u64,
    },
    Direct {
        file: File,
        appender: DirectAppender,
    },
}

impl Writer {
    fn create(path: &Path, v: Variant) -> anyhow::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(match v {
            Variant::Buffered => Self::Buffered { file, end: 0 },
            Variant::Direct => {
                let appender = DirectAppender::open(path, &file, 0)
                    .with_context(|| format!("O_DIRECT on {}", path.display()))?;
                Self::Direct { file, appender }
            }
        })
    }

    fn append(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        match self {
            Self::Buffered { file, end } => {
                file.write_all_at(bytes, *end)?;
                *end += bytes.len() as u64;
            }
            Self::Direct { appender, .. } => appender.append(bytes)?,
        }
        Ok(())
    }

    fn finish(self) -> anyhow::Result<()> {
        match self {
            Self::Buffered { file, .. } => file.sync_data()?,
            Self::Direct { file, appender } => {
                drop(appender); // cuts the padding
                file.sync_data()?;
            }
        }
        Ok(())
    }
}

struct Args {
    dir: String,
    sizes: Vec<usize>,
    bytes: u64,
    rate_mb_s: f64,
    rounds: usize,
}

fn parse(mut it: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut a = Args {
        dir: it.next().context(
            "usage: strata-bench append-ab DIR [--sizes N,..] [--mib N] [--rate MB/s] [--rounds N]",
        )?,
        sizes: vec![4096, 16_384, 65_536, 262_144],
        bytes: 512 << 20,
        rate_mb_s: 200.0,
        rounds: 2,
    };
    while let Some(flag) = it.next() {
        let v = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--sizes" => {
                a.sizes = v
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .context("--sizes")?;
            }
            "--mib" => a.bytes = v.parse::<u64>().context("--mib")? << 20,
            "--rate" => a.rate_mb_s = v.parse().context("--rate")?,
            "--rounds" => a.rounds = v.parse().context("--rounds")?,
            _ => bail!("unknown flag {flag}"),
        }
    }
    Ok(a)
}

pub fn run(args: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let a = parse(args)?;
    let path = Path::new(&a.dir).join(format!("strata-append-ab-{}.log", std::process::id()));
    println!(
        "# append A/B in {}: {} MiB per run, paced at {} MB/s, {} rounds",
        a.dir,
        a.bytes >> 20,
        a.rate_mb_s,
        a.rounds
    );
    println!(
        "| append | variant | round | flat out MB/s | CPU s/GB | paced p50 us | p99 us | p99.9 us | max us |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for &size in &a.sizes {
        let chunk: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        for round in 1..=a.rounds {
            // Alternate which variant goes first, so neither always meets the other's
            // writeback.
            let order = if round % 2 == 1 {
                [Variant::Buffered, Variant::Direct]
            } else {
                [Variant::Direct, Variant::Buffered]
            };
            for v in order {
                let (mb_s, cpu_per_gb) = flat_out(&path, v, &chunk, a.bytes)?;
                let h = paced(&path, v, &chunk, a.bytes, a.rate_mb_s)?;
                println!(
                    "| {size} | {} | {round} | {mb_s:.0} | {cpu_per_gb:.2} | {} | {} | {} | {} |",
                    v.name(),
                    h.value_at_quantile(0.5),
                    h.value_at_quantile(0.99),
                    h.value_at_quantile(0.999),
                    h.max()
                );
            }
        }
    }
    Ok(())
}

fn flat_out(path: &Path, v: Variant, chunk: &[u8], bytes: u64) -> anyhow::Result<(f64, f64)> {
    let mut w = Writer::create(path, v)?;
    let pid = std::process::id();
    let cpu0 = crate::cpu_secs(pid).unwrap_or(0.0);
    let start = Instant::now();
    let mut written = 0u64;
    while written < bytes {
        w.append(chunk)?;
        written += chunk.len() as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = crate::cpu_secs(pid).unwrap_or(0.0) - cpu0;
    w.finish()?;
    std::fs::remove_file(path)?;
    Ok((written as f64 / 1e6 / secs, cpu / (written as f64 / 1e9)))
}

fn paced(
    path: &Path,
    v: Variant,
    chunk: &[u8],
    bytes: u64,
    rate_mb_s: f64,
) -> anyhow::Result<Histogram<u64>> {
    let mut w = Writer::create(path, v)?;
    let mut h = Histogram::<u64>::new(3)?;
    let interval = Duration::from_secs_f64(chunk.len() as f64 / (rate_mb_s * 1e6));
    let start = Instant::now();
    let mut written = 0u64;
    let mut n = 0u32;
    while written < bytes {
        let due = start + interval * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = Instant::now();
        w.append(chunk)?;
        h.record(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX))?;
        written += chunk.len() as u64;
        n += 1;
    }
    w.finish()?;
    std::fs::remove_file(path)?;
    Ok(h)
}
