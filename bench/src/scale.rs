//! `strata-bench scale`: the broker's memory and file descriptors against partition count.
//!
//! Grows the broker to each step's total of partitions (cumulatively, in topics of
//! `--per-topic` partitions), then produces `--messages` records of 100 B to every partition
//! that exists and reads everything back with one consumer assigned to all of them. After
//! the idle start and after each phase it samples `/proc/<pid>`: `VmRSS`, `VmHWM`, threads,
//! and open descriptors (all, on segment files, sockets). The summary gives the growth from
//! the first step to the last as ratios and as the cost of one more partition.
//!
//! Usage: `strata-bench scale --bootstrap HOST:PORT [--broker-pid PID] [--steps 1000,10000]
//! [--per-topic 100] [--messages 3] [--out FILE]`. Without `--broker-pid` the broker is found
//! by its command line (an executable named `strata` whose arguments contain `:PORT`).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::probe::{self, ProcSample};
use crate::{Scenario, block_on_within, client, producer};

struct Args {
    bootstrap: String,
    broker_pid: Option<u32>,
    steps: Vec<usize>,
    per_topic: usize,
    messages: usize,
    out: Option<std::path::PathBuf>,
}

fn parse_args(argv: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut a = Args {
        bootstrap: String::new(),
        broker_pid: None,
        steps: vec![1000, 10_000],
        per_topic: 100,
        messages: 3,
        out: None,
    };
    let mut it = argv;
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--bootstrap" => a.bootstrap = value()?,
            "--broker-pid" => a.broker_pid = Some(value()?.parse()?),
            "--steps" => {
                a.steps = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--per-topic" => a.per_topic = value()?.parse()?,
            "--messages" => a.messages = value()?.parse()?,
            "--out" => a.out = Some(value()?.into()),
            "-h" | "--help" => {
                println!(
                    "usage: strata-bench scale --bootstrap HOST:PORT [--broker-pid PID] [--steps 1000,10000] [--per-topic 100] [--messages 3] [--out FILE]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}"),
        }
    }
    if a.bootstrap.is_empty() {
        bail!("--bootstrap is required");
    }
    if a.per_topic == 0 || a.steps.is_empty() || !a.steps.is_sorted() {
        bail!("--per-topic must be positive and --steps ascending");
    }
    Ok(a)
}

/// One line of the table: the broker as seen after a phase.
struct Row {
    step: usize,
    phase: &'static str,
    /// Partitions created so far (the broker's total, ours only).
    partitions: usize,
    /// Wall time of the phase.
    secs: f64,
    sample: ProcSample,
    note: String,
}

/// # Errors
///
/// Bad arguments, no broker process, or a client that cannot be created. Failures of the
/// broker under load (a topic that cannot be created, delivery errors, the process exiting)
/// are reported in the table instead.
pub fn run(argv: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let args = parse_args(argv)?;
    let addr = probe::resolve(&args.bootstrap)?;
    let pid = match args.broker_pid {
        Some(p) => p,
        None => probe::find_broker_pid(addr.port())
            .with_context(|| format!("no strata process for port {}", addr.port()))?,
    };
    let fd_limit = probe::max_open_files(pid);
    println!(
        "# strata-bench scale: broker pid {pid} at {}, its open-files limit {}",
        args.bootstrap,
        fd_limit.map_or("?".into(), |l| l.to_string())
    );
    let run = std::process::id();
    let mut rows = vec![Row {
        step: 0,
        phase: "idle",
        partitions: 0,
        secs: 0.0,
        sample: probe::sample(pid).context("broker process not found")?,
        note: String::new(),
    }];
    print_row(rows.last());
    let mut topics: Vec<(String, usize)> = Vec::new();
    let mut total = 0usize;
    let mut delivered = 0u64;
    'steps: for &step in &args.steps {
        // Create: ten topics per CreateTopics request. Each iteration adds at least one
        // partition or stops, so it runs at most `step - total` times.
        let t0 = Instant::now();
        let mut note = String::new();
        while total < step {
            let mut batch = Vec::new();
            let mut planned = total;
            while batch.len() < 10 && planned < step {
                let n = args.per_topic.min(step - planned);
                batch.push((format!("scale-{run}-{}", topics.len() + batch.len()), n));
                planned += n;
            }
            // Topics the broker confirmed join the set; the first refusal ends the growth.
            let results = create_topics(&args.bootstrap, &batch);
            let mut refused = None;
            for ((name, n), r) in batch.into_iter().zip(results) {
                match r {
                    Ok(()) => {
                        total += n;
                        topics.push((name, n));
                    }
                    Err(e) => {
                        refused.get_or_insert(format!("{name}: {e}"));
                    }
                }
            }
            if let Some(e) = refused {
                note = format!("create refused beyond {total} partitions ({e})");
                break;
            }
        }
        let create_failed = !note.is_empty();
        if !record(&mut rows, pid, step, "create", total, t0, note) {
            break 'steps;
        }
        if total == 0 {
            break;
        }

        // Produce a few records to every partition created so far.
        let t0 = Instant::now();
        let (acked, failed) = produce_all(&args.bootstrap, &topics, args.messages)?;
        delivered += acked;
        let note = format!(
            "{acked} records acked{}",
            if failed > 0 {
                format!(", {failed} failed")
            } else {
                String::new()
            }
        );
        if !record(&mut rows, pid, step, "produce", total, t0, note) {
            break 'steps;
        }

        // Read everything back with one consumer assigned to every partition.
        let t0 = Instant::now();
        let note = match consume_all(&args.bootstrap, &topics, delivered) {
            Ok(n) => format!("{n} of {delivered} records read"),
            Err(e) => format!("consume failed: {e:#}"),
        };
        if !record(&mut rows, pid, step, "consume", total, t0, note) || create_failed {
            break 'steps;
        }
    }

    let report = report(&rows, fd_limit);
    println!("\n{report}");
    if let Some(out) = &args.out {
        std::fs::write(out, &report)?;
    }
    Ok(())
}

/// Samples the broker after a phase and prints the row; false when the broker is gone.
fn record(
    rows: &mut Vec<Row>,
    pid: u32,
    step: usize,
    phase: &'static str,
    partitions: usize,
    t0: Instant,
    note: String,
) -> bool {
    let secs = t0.elapsed().as_secs_f64();
    let (sample, note, alive) = match probe::sample(pid) {
        Some(s) => (s, note, true),
        None => (
            ProcSample::default(),
            format!("{note}; broker process exited"),
            false,
        ),
    };
    rows.push(Row {
        step,
        phase,
        partitions,
        secs,
        sample,
        note,
    });
    print_row(rows.last());
    alive
}

fn print_row(r: Option<&Row>) {
    if let Some(r) = r {
        println!(
            "[{:>6} {:<7}] {:>6} partitions {:>7.1} s  RSS {:>7.1} MB  HWM {:>7.1} MB  fds {:>6} (segment {:>6}, sockets {:>3})  threads {:>3}  {}",
            r.step,
            r.phase,
            r.partitions,
            r.secs,
            mb(r.sample.rss_kb),
            mb(r.sample.hwm_kb),
            r.sample.fds,
            r.sample.segment_fds,
            r.sample.socket_fds,
            r.sample.threads,
            r.note
        );
    }
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// Creates the topics in one CreateTopics request, bounded at 120 s; one result per topic,
/// in order (all failed with the same reason when the request itself failed).
fn create_topics(bootstrap: &str, batch: &[(String, usize)]) -> Vec<Result<(), String>> {
    let all_failed = |e: String| batch.iter().map(|_| Err(e.clone())).collect();
    let admin: AdminClient<DefaultClientContext> = match client(bootstrap).create() {
        Ok(a) => a,
        Err(e) => return all_failed(e.to_string()),
    };
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(120)));
    let new: Vec<NewTopic<'_>> = batch
        .iter()
        .map(|(name, n)| NewTopic::new(name, *n as i32, TopicReplication::Fixed(1)))
        .collect();
    let res = match block_on_within(
        admin.create_topics(new.iter(), &opts),
        Duration::from_secs(130),
    ) {
        Ok(r) => r,
        Err(e) => return all_failed(format!("{e:#}")),
    };
    batch
        .iter()
        .map(|(name, _)| {
            match res.iter().find(|r| match r {
                Ok(n) | Err((n, _)) => n == name,
            }) {
                Some(Ok(_)) => Ok(()),
                Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(()),
                Some(Err((_, code))) => Err(format!("{code:?}")),
                None => Err("no result".into()),
            }
        })
        .collect()
}

/// Sends `messages` 100 B records to every partition and waits (up to 120 s) for their
/// delivery reports. Returns (acked, failed).
fn produce_all(
    bootstrap: &str,
    topics: &[(String, usize)],
    messages: usize,
) -> anyhow::Result<(u64, u64)> {
    let s = Scenario {
        size: 100,
        acks_all: false,
        partitions: 1,
        lz4: false,
    };
    let (p, counts) = producer(bootstrap, &s, "5")?;
    let value = crate::payload(s.size, 0);
    let mut unsent = 0u64;
    for (topic, n) in topics {
        for part in 0..*n {
            for _ in 0..messages {
                // A full queue is retried for at most ~2 s per record.
                let mut tries = 0;
                loop {
                    let rec = BaseRecord::to(topic).payload(&value).partition(part as i32);
                    match p.send::<(), _>(rec) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                            if tries < 10_000 =>
                        {
                            tries += 1;
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        Err(_) => {
                            unsent += 1;
                            break;
                        }
                    }
                }
            }
        }
    }
    let _ = p.flush(Duration::from_secs(120));
    let acked = counts.acked.load(std::sync::atomic::Ordering::Relaxed);
    let failed = counts.failed.load(std::sync::atomic::Ordering::Relaxed) + unsent;
    Ok((acked, failed))
}

/// Reads every partition from the beginning until `expected` records arrive, at most 180 s.
/// The consumer is assigned the partitions (librdkafka still wants a `group.id`) and commits
/// nothing, so the broker creates no `__consumer_offsets` partitions that would blur the
/// figures.
fn consume_all(bootstrap: &str, topics: &[(String, usize)], expected: u64) -> anyhow::Result<u64> {
    let c: BaseConsumer = client(bootstrap)
        .set("group.id", format!("scale-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for (topic, n) in topics {
        for part in 0..*n {
            tpl.add_partition_offset(topic, part as i32, Offset::Beginning)?;
        }
    }
    c.assign(&tpl)?;
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut read = 0u64;
    while read < expected && Instant::now() < deadline {
        if let Some(Ok(_)) = c.poll(Duration::from_millis(100)) {
            read += 1;
        }
    }
    Ok(read)
}

/// The table, then growth from the first step to the last completed one.
fn report(rows: &[Row], fd_limit: Option<u64>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "broker open-files limit: {}\n",
        fd_limit.map_or("?".into(), |l| l.to_string())
    );
    let _ = writeln!(
        s,
        "| step | phase | partitions | phase s | VmRSS MB | VmHWM MB | fds | segment fds | sockets | threads | note |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
            r.step,
            r.phase,
            r.partitions,
            r.secs,
            mb(r.sample.rss_kb),
            mb(r.sample.hwm_kb),
            r.sample.fds,
            r.sample.segment_fds,
            r.sample.socket_fds,
            r.sample.threads,
            r.note
        );
    }
    // Per step, the last row (after its consume phase, or wherever it stopped).
    let mut last_of_step: Vec<&Row> = Vec::new();
    for r in rows.iter().filter(|r| r.step > 0 && r.sample.fds > 0) {
        match last_of_step.last_mut() {
            Some(l) if l.step == r.step => *l = r,
            _ => last_of_step.push(r),
        }
    }
    let idle = &rows[0];
    let _ = writeln!(
        s,
        "\n| partitions | VmRSS MB | VmHWM MB | fds | RSS KB per partition over idle | fds per partition over idle |\n|---:|---:|---:|---:|---:|---:|"
    );
    let _ = writeln!(
        s,
        "| 0 (idle) | {:.1} | {:.1} | {} | - | - |",
        mb(idle.sample.rss_kb),
        mb(idle.sample.hwm_kb),
        idle.sample.fds
    );
    for r in &last_of_step {
        let n = r.partitions.max(1) as f64;
        let _ = writeln!(
            s,
            "| {} | {:.1} | {:.1} | {} | {:.1} | {:.2} |",
            r.partitions,
            mb(r.sample.rss_kb),
            mb(r.sample.hwm_kb),
            r.sample.fds,
            (r.sample.rss_kb as f64 - idle.sample.rss_kb as f64) / n,
            (r.sample.fds as f64 - idle.sample.fds as f64) / n
        );
    }
    if let (Some(a), Some(b)) = (last_of_step.first(), last_of_step.last())
        && b.partitions > a.partitions
    {
        let ratio = |x: u64, y: u64| x as f64 / (y as f64).max(1.0);
        let dn = (b.partitions - a.partitions) as f64;
        let _ = writeln!(
            s,
            "\ngrowth {} -> {} partitions (x{:.1}): VmRSS x{:.2}, VmHWM x{:.2}, fds x{:.2}; marginal {:.1} KB RSS and {:.2} fds per added partition",
            a.partitions,
            b.partitions,
            ratio(b.partitions as u64, a.partitions as u64),
            ratio(b.sample.rss_kb, a.sample.rss_kb),
            ratio(b.sample.hwm_kb, a.sample.hwm_kb),
            ratio(b.sample.fds, a.sample.fds),
            (b.sample.rss_kb as f64 - a.sample.rss_kb as f64) / dn,
            (b.sample.fds as f64 - a.sample.fds as f64) / dn
        );
    }
    s
}
