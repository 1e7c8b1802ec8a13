//! Single measurements, for finding where time goes rather than for the report matrix:
//!
//! - `strata-bench latency --bootstrap B --rates 1000,10000 [--secs 5] [--set k=v]...`:
//!   end-to-end latency (1 KB, acks=1, one partition, `linger.ms=0`) at each fixed rate,
//!   so that a fixed per-message delay (it shows at 1k/s) can be told from queueing (it
//!   grows with the rate).
//! - `strata-bench consume --bootstrap B [--lz4] [--partitions N] [--mb 256] [--set k=v]...`:
//!   writes `--mb` of 1 KB records with the matrix's producer settings, then reads them back
//!   and prints the consumer's rate.
//!
//! `--set key=value` (repeatable) overrides a consumer setting, for example
//! `--set debug=fetch` for librdkafka's fetch log or `--set fetch.queue.backoff.ms=1000` to
//! restore a default the matrix changes; `--pset key=value` does the same for the latency
//! producer (`--pset statistics.interval.ms=1000` prints librdkafka's statistics, with its
//! request round-trip times, to stderr). `--mock` measures librdkafka's mock cluster, started
//! as a child process, instead of `--bootstrap`. Every run prints the settings it used.

use std::time::Duration;

use anyhow::{Context, bail};

use crate::{
    Scenario, Target, consume, consumer_settings, cpu_secs, latency, ms, produce, spawn_mock,
};

struct Args {
    bootstrap: String,
    rates: Vec<u64>,
    secs: u64,
    lz4: bool,
    partitions: i32,
    mb: u64,
    broker_pid: Option<u32>,
    /// Measure librdkafka's mock cluster (a child process) instead of `--bootstrap`.
    mock: bool,
    extra: Vec<(String, String)>,
    /// `--pset`: producer overrides (latency runs).
    producer_extra: Vec<(String, String)>,
}

fn parse(argv: impl Iterator<Item = String>, usage: &str) -> anyhow::Result<Args> {
    let mut a = Args {
        bootstrap: String::new(),
        rates: vec![1000, 10_000],
        secs: 5,
        lz4: false,
        partitions: 1,
        mb: 256,
        broker_pid: None,
        mock: false,
        extra: Vec::new(),
        producer_extra: Vec::new(),
    };
    let mut it = argv;
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--bootstrap" => a.bootstrap = value()?,
            "--rates" => {
                a.rates = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--secs" => a.secs = value()?.parse()?,
            "--lz4" => a.lz4 = true,
            "--mock" => a.mock = true,
            "--partitions" => a.partitions = value()?.parse()?,
            "--mb" => a.mb = value()?.parse()?,
            "--broker-pid" => a.broker_pid = Some(value()?.parse()?),
            "--set" => {
                let kv = value()?;
                let (k, v) = kv.split_once('=').context("--set takes key=value")?;
                a.extra.push((k.to_string(), v.to_string()));
            }
            "--pset" => {
                let kv = value()?;
                let (k, v) = kv.split_once('=').context("--pset takes key=value")?;
                a.producer_extra.push((k.to_string(), v.to_string()));
            }
            "-h" | "--help" => {
                println!("{usage}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}\n{usage}"),
        }
    }
    if a.bootstrap.is_empty() && !a.mock {
        bail!("--bootstrap or --mock is required\n{usage}");
    }
    Ok(a)
}

/// The target: the broker at `--bootstrap`, or a mock cluster started for this run.
fn target(a: &Args) -> anyhow::Result<Target> {
    if a.mock {
        let (child, bootstrap) = spawn_mock()?;
        return Ok(Target {
            name: "mock".into(),
            bootstrap,
            pid: Some(child.child.id()),
            mock: Some(std::sync::Mutex::new(child)),
        });
    }
    Ok(Target {
        name: "broker".into(),
        bootstrap: a.bootstrap.clone(),
        pid: a.broker_pid,
        mock: None,
    })
}

/// The consumer settings a run uses: the matrix's, then the `--set` overrides.
fn stated(extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = consumer_settings()
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    all.extend(extra.iter().cloned());
    all
}

fn print_settings(extra: &[(String, String)]) {
    let s: Vec<String> = stated(extra)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    println!("consumer settings: {}", s.join(" "));
}

/// `strata-bench latency`.
pub fn latency_cmd(argv: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let a = parse(
        argv,
        "usage: strata-bench latency --bootstrap HOST:PORT [--rates 1000,10000] [--secs 5] [--broker-pid PID] [--mock] [--set key=value]... [--pset key=value]...",
    )?;
    println!(
        "producer settings: acks=1 linger.ms=0 batch.size={} enable.idempotence=false queue.buffering.max.kbytes=1048576{}; 1 KB records, one partition",
        crate::BATCH_SIZE,
        a.producer_extra
            .iter()
            .map(|(k, v)| format!(" {k}={v}"))
            .collect::<String>()
    );
    print_settings(&a.extra);
    let t = target(&a)?;
    println!("target: {} at {}", t.name, t.bootstrap);
    let run = std::process::id();
    for rate in &a.rates {
        let topic = format!("bench-{run}-latency-at-{rate}");
        t.create_topic(&topic, 1)?;
        let cpu0 = (t.pid.and_then(cpu_secs), cpu_secs(std::process::id()));
        let l = latency(
            &t.bootstrap,
            &topic,
            *rate,
            Duration::from_secs(a.secs),
            &a.extra,
            &a.producer_extra,
        )?;
        t.delete_topic(&topic);
        println!(
            "rate {rate} rec/s (achieved {:.0}): p50 {:.2} ms p90 {:.2} ms p99 {:.2} ms p99.9 {:.2} ms max {:.2} ms ({} records)",
            l.achieved,
            ms(l.hist.value_at_quantile(0.5)),
            ms(l.hist.value_at_quantile(0.9)),
            ms(l.hist.value_at_quantile(0.99)),
            ms(l.hist.value_at_quantile(0.999)),
            ms(l.hist.max()),
            l.hist.len()
        );
        println!(
            "    produce ack: p50 {:.2} ms p90 {:.2} ms p99 {:.2} ms max {:.2} ms",
            ms(l.ack.value_at_quantile(0.5)),
            ms(l.ack.value_at_quantile(0.9)),
            ms(l.ack.value_at_quantile(0.99)),
            ms(l.ack.max()),
        );
        let used = |before: Option<f64>, pid: Option<u32>| match (before, pid.and_then(cpu_secs)) {
            (Some(b), Some(n)) => format!("{:.2}", n - b),
            _ => "-".into(),
        };
        println!(
            "    CPU seconds over the run: broker {}, this tool (producer + consumer) {}",
            used(cpu0.0, t.pid),
            used(cpu0.1, Some(std::process::id()))
        );
    }
    Ok(())
}

/// `strata-bench consume`.
pub fn consume_cmd(argv: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let a = parse(
        argv,
        "usage: strata-bench consume --bootstrap HOST:PORT [--lz4] [--partitions N] [--mb 256] [--mock] [--set key=value]...",
    )?;
    print_settings(&a.extra);
    let s = Scenario {
        size: 1024,
        acks_all: false,
        partitions: a.partitions,
        lz4: a.lz4,
    };
    let t = target(&a)?;
    println!("target: {} at {}", t.name, t.bootstrap);
    let topic = format!("bench-{}-consume", std::process::id());
    t.create_topic(&topic, a.partitions)?;
    let w = produce(
        &t.bootstrap,
        &topic,
        &s,
        Duration::from_secs(120),
        a.mb << 20,
        crate::LINGER_MS,
    )?;
    println!(
        "wrote {} records ({:.1} MB) at {:.1} MB/s",
        w.records,
        w.bytes as f64 / 1e6,
        w.mb_s()
    );
    let c = consume(&t.bootstrap, &topic, a.partitions, w.records, &a.extra)?;
    t.delete_topic(&topic);
    println!(
        "consume {}: {} records in {:.2} s: {:.0} rec/s {:.1} MB/s",
        s.label(),
        c.records,
        c.secs,
        c.rec_s(),
        c.mb_s()
    );
    Ok(())
}
