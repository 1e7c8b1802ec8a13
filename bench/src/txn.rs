//! `strata-bench txn`: what transactions cost a producer, against the broker and against
//! librdkafka's mock cluster in the same run (the client's ceiling; it serves transactions
//! in memory), with the machine's loopback and page-cache write baselines.
//!
//! Each target gets the same runs, 1 KB records round-robin over 3 partitions, acks=all,
//! `linger.ms=5`: an idempotent producer without transactions, then a transactional one
//! that commits every 100, 1,000 and 10,000 records (`commit_transaction` after a flush).
//! Reported: records/s; the commit's latency (p50, p99, max: `commit_transaction` once
//! every record is acknowledged, which is the EndTxn round trip; the markers' completion
//! shows in the next transaction, whose first AddPartitionsToTxn waits for it); and the
//! end-to-end latency, from the send to a read_committed consumer in the same process
//! (each record carries its send time), which for a transaction includes the wait for its
//! commit and markers.
//!
//! Usage: `strata-bench txn --bootstrap HOST:PORT [--secs 5] [--no-mock]`.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::{Target, client, consumer, disk_write_mb_s, loopback_mb_s, spawn_mock};

const RECORD: usize = 1024;
const PARTITIONS: i32 = 3;

/// One run's outcome.
struct Run {
    label: String,
    records_per_s: f64,
    /// Commit latency in microseconds (empty without transactions).
    commits: Histogram<u64>,
    /// Send to read_committed consumption, in microseconds.
    end_to_end: Histogram<u64>,
}

/// Runs the subcommand.
///
/// # Errors
/// A bad command line, a target that cannot be reached, or a failed run.
pub fn run(argv: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let mut bootstrap = None;
    let mut secs = 5u64;
    let mut mock = true;
    let mut argv = argv;
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--bootstrap" => bootstrap = Some(argv.next().context("--bootstrap needs a value")?),
            "--secs" => secs = argv.next().context("--secs needs a value")?.parse()?,
            "--no-mock" => mock = false,
            _ => bail!("usage: strata-bench txn --bootstrap HOST:PORT [--secs 5] [--no-mock]"),
        }
    }
    let loopback = loopback_mb_s(2)?;
    let (cache, sync) = disk_write_mb_s(&std::env::temp_dir(), 512 << 20)?;
    println!(
        "[baseline] loopback TCP {loopback:.0} MB/s; page-cache write {cache:.0} MB/s ({sync:.0} MB/s with fdatasync)"
    );
    let mut targets = Vec::new();
    let mut mock_child = None;
    if mock {
        let (child, bootstrap) = spawn_mock()?;
        targets.push(Target {
            name: "mock".into(),
            bootstrap,
            pid: Some(child.child.id()),
            mock: Some(std::sync::Mutex::new(child)),
        });
    }
    if let Some(b) = bootstrap {
        targets.push(Target {
            name: "broker".into(),
            bootstrap: b,
            pid: None,
            mock: None,
        });
    }
    let mut all: Vec<(String, Vec<Run>)> = Vec::new();
    for t in &targets {
        let stamp = std::process::id();
        let mut runs = Vec::new();
        for every in [0usize, 100, 1_000, 10_000] {
            let topic = format!("txn-bench-{stamp}-{every}");
            t.create_topic(&topic, PARTITIONS)?;
            let run = measure(&t.bootstrap, &topic, every, Duration::from_secs(secs))?;
            println!(
                "{:<6} {:<28} {:>9.0} records/s  commit p50 {:>6} us p99 {:>6} us max {:>6} us",
                t.name,
                run.label,
                run.records_per_s,
                run.commits.value_at_quantile(0.5),
                run.commits.value_at_quantile(0.99),
                run.commits.max()
            );
            t.delete_topic(&topic);
            runs.push(run);
        }
        all.push((t.name.clone(), runs));
    }
    for t in targets {
        if let Some(m) = t.mock {
            mock_child = Some(m.into_inner().map_err(|_| anyhow::anyhow!("poisoned"))?);
        }
    }
    if let Some(mut m) = mock_child {
        drop(m.stdin);
        let _ = m.child.wait();
    }
    println!(
        "\n| run | target | records/s | MB/s | of the mock | of idempotent | commit p50 / p99 / max (ms) | end to end p50 / p99 (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mock_runs = all.iter().find(|(n, _)| n == "mock").map(|(_, r)| r);
    for (name, runs) in &all {
        for (i, r) in runs.iter().enumerate() {
            let ratio = mock_runs
                .and_then(|m| m.get(i))
                .map_or("-".to_owned(), |m| {
                    format!("{:.2}", r.records_per_s / m.records_per_s)
                });
            let ms = |us: u64| us as f64 / 1000.0;
            let commit = if r.commits.is_empty() {
                "-".to_owned()
            } else {
                format!(
                    "{:.1} / {:.1} / {:.1}",
                    ms(r.commits.value_at_quantile(0.5)),
                    ms(r.commits.value_at_quantile(0.99)),
                    ms(r.commits.max())
                )
            };
            let of_idempotent = r.records_per_s / runs[0].records_per_s;
            println!(
                "| {} | {name} | {:.0} | {:.1} | {ratio} | {of_idempotent:.2} | {commit} | {:.1} / {:.1} |",
                r.label,
                r.records_per_s,
                r.records_per_s * RECORD as f64 / 1e6,
                ms(r.end_to_end.value_at_quantile(0.5)),
                ms(r.end_to_end.value_at_quantile(0.99)),
            );
        }
    }
    Ok(())
}

/// Produces for `duration`: idempotent without transactions when `every` is 0, else in
/// transactions of `every` records.
fn measure(bootstrap: &str, topic: &str, every: usize, duration: Duration) -> anyhow::Result<Run> {
    let mut config = client(bootstrap);
    config
        .set("linger.ms", "5")
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("queue.buffering.max.kbytes", "1048576");
    if every > 0 {
        config.set("transactional.id", format!("bench-{topic}"));
    }
    let producer: BaseProducer = config.create()?;
    let mut commits = Histogram::<u64>::new(3)?;
    if every > 0 {
        producer.init_transactions(Duration::from_secs(30))?;
    }
    let mut payload = vec![b'x'; RECORD];
    let started = Instant::now();
    let reading = Arc::new(AtomicBool::new(true));
    let reader = {
        let (bootstrap, topic, reading) = (bootstrap.to_owned(), topic.to_owned(), reading.clone());
        std::thread::spawn(move || read_latencies(&bootstrap, &topic, started, &reading))
    };
    let mut sent = 0usize;
    let mut in_txn = 0usize;
    while started.elapsed() < duration {
        if every > 0 && in_txn == 0 {
            producer.begin_transaction()?;
        }
        let partition = i32::try_from(sent % PARTITIONS as usize)?;
        let now = u64::try_from(started.elapsed().as_micros())?;
        payload[..8].copy_from_slice(&now.to_be_bytes());
        match producer.send(
            BaseRecord::<(), _>::to(topic)
                .payload(&payload)
                .partition(partition),
        ) {
            Ok(()) => {
                sent += 1;
                in_txn += 1;
            }
            Err((e, _)) => {
                if !format!("{e}").contains("Queue full") {
                    bail!("send: {e}");
                }
                producer.poll(Duration::from_millis(1));
                continue;
            }
        }
        if every > 0 && in_txn == every {
            // The records first, polled out (librdkafka's flush inside the commit waits in
            // 100 ms steps without a delivery callback), so the commit times EndTxn.
            while producer.in_flight_count() > 0 {
                producer.poll(Duration::from_millis(1));
            }
            let t = Instant::now();
            producer.commit_transaction(Duration::from_secs(30))?;
            commits.record(u64::try_from(t.elapsed().as_micros())?)?;
            in_txn = 0;
        }
        if sent.is_multiple_of(1000) {
            producer.poll(Duration::ZERO);
        }
    }
    if every > 0 && in_txn > 0 {
        producer.commit_transaction(Duration::from_secs(30))?;
    }
    producer.flush(Duration::from_secs(30))?;
    let secs = started.elapsed().as_secs_f64();
    // The consumer reads on for 2 s past the last commit.
    std::thread::sleep(Duration::from_secs(2));
    reading.store(false, Ordering::Relaxed);
    let end_to_end = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader panicked"))??;
    Ok(Run {
        label: if every == 0 {
            "idempotent, no transactions".to_owned()
        } else {
            format!("transactions of {every}")
        },
        records_per_s: sent as f64 / secs,
        commits,
        end_to_end,
    })
}

/// Reads `topic` with read_committed from the start while `reading`, recording each record's
/// age (now, minus the send time it carries, both from `started`).
fn read_latencies(
    bootstrap: &str,
    topic: &str,
    started: Instant,
    reading: &AtomicBool,
) -> anyhow::Result<Histogram<u64>> {
    let c = consumer(
        bootstrap,
        &[("isolation.level".to_owned(), "read_committed".to_owned())],
    )?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    let mut h = Histogram::<u64>::new(3)?;
    while reading.load(Ordering::Relaxed) {
        let Some(Ok(m)) = c.poll(Duration::from_millis(100)) else {
            continue;
        };
        if let Some(sent) = m.payload().and_then(|p| p.get(..8)) {
            let sent = u64::from_be_bytes(sent.try_into()?);
            let now = u64::try_from(started.elapsed().as_micros())?;
            h.record(now.saturating_sub(sent).max(1))?;
        }
    }
    Ok(h)
}
