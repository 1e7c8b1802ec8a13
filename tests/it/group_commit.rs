//! Group commit with `log.flush.interval.messages=1` (librdkafka, the `rdkafka` crate, against
//! the real binary): concurrent producers to several partitions, a kill -9 while they run, and
//! every acknowledged record is read back at the offset its acknowledgement gave. The broker's
//! group-commit counters, logged at a clean shutdown, show that appends shared fsyncs. The same
//! produce / kill -9 / read-back runs under each `STRATA_IO_URING` mode, and the startup line
//! must name the path in use.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rdkafka::topic_partition_list::Offset;
use strata_tests::{Broker, serial, wait_until};

use crate::rdkafka_clients::*;

const PRODUCERS: usize = 4;
const PARTITIONS: i32 = 4;
/// Messages each producer sends before the kill (a cap; the kill comes at half of all).
const PER_PRODUCER: usize = 3_000;

/// Producer settings that make many small produce requests, several in flight per connection:
/// the case where appends either share fsyncs or each pay for one.
const SMALL_REQUESTS: &[(&str, &str)] = &[
    ("acks", "1"),
    ("linger.ms", "0"),
    ("batch.num.messages", "4"),
    ("max.in.flight.requests.per.connection", "5"),
    ("message.send.max.retries", "0"),
    ("message.timeout.ms", "15000"),
    ("reconnect.backoff.ms", "50"),
    ("reconnect.backoff.max.ms", "500"),
];

fn value(i: usize) -> Vec<u8> {
    value_of("group-commit", i)
}

/// Runs `PRODUCERS` producers at once, producer `p` sending messages `p * per..(p + 1) * per`
/// spread over the partitions; `kill_at` (total acknowledged) kill -9s the broker mid-stream
/// and restarts it. Returns every acknowledgement, message -> (partition, offset).
fn produce_concurrently(
    broker: &mut Broker,
    topic: &str,
    per: usize,
    kill_at: Option<usize>,
) -> anyhow::Result<HashMap<usize, (i32, i64)>> {
    let mut producers = Vec::new();
    for _ in 0..PRODUCERS {
        let (prod, deliveries) = producer(broker, SMALL_REQUESTS)?;
        producers.push((Arc::new(prod), deliveries));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for (p, (prod, _)) in producers.iter().enumerate() {
        let prod = prod.clone();
        let stop = stop.clone();
        let topic = topic.to_owned();
        senders.push(thread::spawn(move || -> anyhow::Result<usize> {
            let mut sent = 0;
            for k in 0..per {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = p * per + k;
                let partition = ((p + k) % PARTITIONS as usize) as i32;
                send_to_partition(&prod, &topic, partition, i, &value(i))?;
                sent += 1;
            }
            Ok(sent)
        }));
    }
    if let Some(kill_at) = kill_at {
        let deadline = Instant::now() + PHASE_TIMEOUT;
        loop {
            let acked: usize = producers.iter().map(|(_, d)| d.acked_count()).sum();
            if acked >= kill_at {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "only {acked} acknowledged within {PHASE_TIMEOUT:?}"
            );
            thread::sleep(Duration::from_millis(2));
        }
        broker.kill9()?;
        stop.store(true, Ordering::Relaxed);
        thread::sleep(Duration::from_millis(200));
        broker.restart()?;
    }
    let mut acked = HashMap::new();
    let mut failed = 0;
    for (sender, (prod, deliveries)) in senders.into_iter().zip(&producers) {
        let sent = sender
            .join()
            .map_err(|_| anyhow::anyhow!("sender panicked"))??;
        await_reports(prod, deliveries, sent, PHASE_TIMEOUT)?;
        acked.extend(
            deliveries
                .acked
                .lock()
                .unwrap()
                .iter()
                .map(|(k, v)| (*k, *v)),
        );
        failed += deliveries.failed.lock().unwrap().len();
    }
    eprintln!(
        "group commit: {} acknowledged, {failed} failed (kill at {kill_at:?})",
        acked.len()
    );
    Ok(acked)
}

/// Reads every partition from the start and checks that each acknowledged message is at the
/// offset its acknowledgement gave, with the right payload, offsets contiguous.
fn check_all_there(
    broker: &Broker,
    topic: &str,
    acked: &HashMap<usize, (i32, i64)>,
) -> anyhow::Result<()> {
    let consumer = consumer(broker, &[])?;
    let mut total = 0usize;
    for p in 0..PARTITIONS {
        let (low, high) = watermarks(&consumer, topic, p)?;
        ensure!(low == 0, "partition {p}: log start offset {low}");
        total += usize::try_from(high)?;
    }
    ensure!(
        total >= acked.len(),
        "{total} records in the log, {} acknowledged",
        acked.len()
    );
    let records = consume(
        &consumer,
        topic,
        PARTITIONS,
        Offset::Beginning,
        total,
        PHASE_TIMEOUT,
    )?;
    check_contiguous(&records, &(0..PARTITIONS).map(|p| (p, 0)).collect())?;
    // Messages are numbered from 0 by every producer run; none beyond those is expected.
    check_acknowledged(&records, usize::MAX, value, acked)?;
    Ok(())
}

/// The value of `name=<n>` in the last line of the broker's log that contains `marker`.
fn logged_counter(broker: &Broker, marker: &str, name: &str) -> anyhow::Result<u64> {
    let log = std::fs::read_to_string(broker.stderr_path())?;
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains(marker))
        .with_context(|| format!("no {marker:?} line in the broker's log"))?;
    let key = format!("{name}=");
    let at = line
        .find(&key)
        .with_context(|| format!("no {name} in {line:?}"))?;
    let digits: String = line[at + key.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Ok(digits.parse()?)
}

/// Starts a broker that fsyncs every append, with `env` for the process.
fn start(env: &[(&str, &str)]) -> anyhow::Result<Broker> {
    Broker::start_with_env(&[("log.flush.interval.messages", "1")], env)
}

/// Runs `scenario`; on failure panics while the broker lives, so its stderr tail is printed.
fn run(broker: &mut Broker, scenario: impl FnOnce(&mut Broker) -> anyhow::Result<()>) {
    if let Err(e) = scenario(broker) {
        panic!("{e:?}");
    }
}

#[test]
fn acknowledged_records_survive_kill9_and_appends_share_fsyncs() {
    let _serial = serial();
    let mut broker = start(&[]).unwrap_or_else(|e| panic!("starting strata: {e:?}"));
    run(&mut broker, |broker| {
        let topic = "group-commit";
        create_topic(broker, topic, PARTITIONS)?;
        let acked = produce_concurrently(
            broker,
            topic,
            PER_PRODUCER,
            Some(PRODUCERS * PER_PRODUCER / 2),
        )?;
        ensure!(!acked.is_empty(), "nothing acknowledged");
        check_all_there(broker, topic, &acked)?;

        // A second run on the restarted broker, then a clean stop: its counters tell whether
        // the appends that waited for an fsync shared them.
        let topic2 = "group-commit-2";
        create_topic(broker, topic2, PARTITIONS)?;
        let acked2 = produce_concurrently(broker, topic2, 1_000, None)?;
        ensure!(
            acked2.len() == PRODUCERS * 1_000,
            "{} of {} acknowledged without a fault",
            acked2.len(),
            PRODUCERS * 1_000
        );
        check_all_there(broker, topic2, &acked2)?;
        broker.stop()?;
        let waits = logged_counter(broker, "group commit:", "flush_waits")?;
        let batches = logged_counter(broker, "group commit:", "flush_batches")?;
        let files = logged_counter(broker, "group commit:", "files_fsynced")?;
        eprintln!("group commit: {waits} appends waited, {batches} batches, {files} .log fsyncs");
        // Every produce request appended at least once and waited (flush.messages=1).
        ensure!(waits >= 1_000, "only {waits} appends waited for an fsync");
        ensure!(
            files < waits && batches < waits,
            "no fsync was shared: {waits} appends waited, {batches} batches, {files} fsyncs"
        );
        Ok(())
    });
}

/// Produce, kill -9, restart, read back, under `STRATA_IO_URING=<mode>`; the startup line must
/// say `expect_line`.
fn io_mode_round_trip(mode: &str, expect_line: &str) {
    let mut broker =
        start(&[("STRATA_IO_URING", mode)]).unwrap_or_else(|e| panic!("starting strata: {e:?}"));
    run(&mut broker, |broker| {
        // The port accepts connections once it is bound, which is just before the line is
        // logged: wait for it (boundedly) rather than read the log once.
        let io_line = || -> anyhow::Result<Option<String>> {
            let log = std::fs::read_to_string(broker.stderr_path())?;
            Ok(log.lines().find(|l| l.contains(" io: ")).map(str::to_owned))
        };
        wait_until(
            "the startup line saying which I/O path is in use",
            Duration::from_secs(10),
            Duration::from_millis(50),
            || Ok(io_line()?.is_some()),
        )?;
        let line = io_line()?.context("no startup line saying which I/O path is in use")?;
        let refused = line.contains("refused io_uring");
        ensure!(
            line.contains(expect_line) || refused,
            "STRATA_IO_URING={mode}: startup line {line:?} does not say {expect_line:?}"
        );
        let topic = "io-mode";
        create_topic(broker, topic, PARTITIONS)?;
        let acked = produce_concurrently(broker, topic, 1_000, Some(PRODUCERS * 500))?;
        check_all_there(broker, topic, &acked)?;
        broker.stop()?;
        let uring = logged_counter(broker, "segment writes and fsyncs", "uring_ops")?;
        let plain = logged_counter(broker, "segment writes and fsyncs", "plain_ops")?;
        eprintln!(
            "STRATA_IO_URING={mode}: {uring} io_uring ops, {plain} plain ops after the restart"
        );
        match mode {
            "0" => ensure!(
                uring == 0,
                "STRATA_IO_URING=0 but {uring} io_uring operations"
            ),
            _ if refused => ensure!(uring == 0, "the kernel refused io_uring, yet {uring} ops"),
            "1" => ensure!(
                uring > 0 && plain == 0,
                "STRATA_IO_URING=1: {uring} io_uring, {plain} plain operations"
            ),
            // The default: appends by pwrite, fsyncs through the ring.
            _ => ensure!(
                uring > 0 && plain > 0,
                "default mode: {uring} io_uring, {plain} plain operations"
            ),
        }
        Ok(())
    });
}

#[test]
fn plain_io_mode_keeps_acknowledged_records() {
    let _serial = serial();
    io_mode_round_trip("0", "io: pwrite and fdatasync (STRATA_IO_URING=0)");
}

#[test]
fn io_uring_mode_keeps_acknowledged_records() {
    let _serial = serial();
    io_mode_round_trip("1", "io: appends and fsyncs through io_uring");
}

#[test]
fn default_io_mode_keeps_acknowledged_records() {
    let _serial = serial();
    io_mode_round_trip("", "fsyncs through io_uring");
}

/// acks=0 takes no answer, but its appends still go through the group commit: the records
/// become readable (the high watermark moves only after their fsync) and survive a restart.
#[test]
fn acks0_records_are_fsynced_and_become_readable() {
    let _serial = serial();
    let mut broker = start(&[]).unwrap_or_else(|e| panic!("starting strata: {e:?}"));
    run(&mut broker, |broker| {
        let topic = "group-commit-acks0";
        create_topic(broker, topic, 2)?;
        let (prod, deliveries) = producer(broker, &[("acks", "0"), ("linger.ms", "0")])?;
        const N: usize = 500;
        for i in 0..N {
            send_to_partition(&prod, topic, (i % 2) as i32, i, &value(i))?;
        }
        await_reports(&prod, &deliveries, N, PHASE_TIMEOUT)?;
        let reader = consumer(broker, &[])?;
        let records = consume(&reader, topic, 2, Offset::Beginning, N, PHASE_TIMEOUT)?;
        ensure!(records.len() == N, "read {} of {N}", records.len());
        broker.stop()?;
        let waits = logged_counter(broker, "group commit:", "flush_waits")?;
        ensure!(waits > 0, "no acks=0 append waited for an fsync");
        broker.restart()?;
        let reader = consumer(broker, &[])?;
        let again = consume(&reader, topic, 2, Offset::Beginning, N, PHASE_TIMEOUT)?;
        check_contiguous(&again, &[(0, 0), (1, 0)].into_iter().collect())?;
        Ok(())
    });
}
