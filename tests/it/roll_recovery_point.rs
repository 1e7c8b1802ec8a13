//! Segment rolls leave their fsync to the group-commit thread, and the log keeps a recovery
//! point (librdkafka through the `rdkafka` crate against the real binary). With a 16 KiB
//! `log.segment.bytes` a partition rolls every ~100 messages:
//!
//! - a clean stop writes `recovery-point-offset-checkpoint` in Kafka's format, with each
//!   partition's recovery point at its log end;
//! - kill -9 in the middle of an acks=all stream full of rolls, then a restart: the sealed
//!   segments above the recovery point are recovered (the broker says so), every
//!   acknowledged message is at the offset its acknowledgement gave, offsets are contiguous,
//!   and the log reads cleanly to its end.

use std::collections::{BTreeMap, HashMap};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rdkafka::topic_partition_list::Offset;
use strata_tests::{Broker, serial, with_broker};

use crate::rdkafka_clients::*;

const TOPIC: &str = "rolls";
const PARTITIONS: i32 = 2;

fn segment_count(broker: &Broker, partition: i32) -> anyhow::Result<usize> {
    let dir = broker.data_dir().join(format!("{TOPIC}-{partition}"));
    Ok(std::fs::read_dir(&dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .count())
}

/// One past the largest acknowledged offset of each partition.
fn acked_ends(acked: &HashMap<usize, (i32, i64)>) -> BTreeMap<i32, i64> {
    let mut ends = BTreeMap::new();
    for &(p, o) in acked.values() {
        let e = ends.entry(p).or_insert(0);
        *e = (*e).max(o + 1);
    }
    ends
}

#[test]
fn kill9_with_frequent_rolls_keeps_every_acknowledged_message() {
    let _serial = serial();
    with_broker(&[("log.segment.bytes", "16384")], |broker| {
        create_topic(broker, TOPIC, PARTITIONS)?;
        let value = |i: usize| value_of("rolls", i);
        let settings = [
            // No retries: a message is written at most once, so offsets must stay
            // contiguous with no duplicate values.
            ("message.send.max.retries", "0"),
            ("message.timeout.ms", "20000"),
            ("reconnect.backoff.ms", "50"),
            ("reconnect.backoff.max.ms", "500"),
            // Small batches, so that segments fill one batch at a time and roll often.
            ("batch.size", "4096"),
        ];

        // Phase 1: rolls, then a clean stop, which checkpoints the recovery points.
        let (first_producer, first_deliveries) = producer(broker, &settings)?;
        const FIRST: usize = 5_000;
        for i in 0..FIRST {
            send(
                &first_producer,
                TOPIC,
                i,
                &key_of(i),
                &value(i),
                &[],
                now_ms(),
            )?;
        }
        await_reports(&first_producer, &first_deliveries, FIRST, PHASE_TIMEOUT)?;
        let first_acked = first_deliveries.acked.lock().unwrap().clone();
        ensure!(
            first_acked.len() == FIRST,
            "{} of {FIRST} acked",
            first_acked.len()
        );
        drop(first_producer);
        for p in 0..PARTITIONS {
            let n = segment_count(broker, p)?;
            ensure!(n > 5, "partition {p} has {n} segments: too few rolls");
        }
        let status = broker.stop()?;
        ensure!(status.success(), "clean stop exited {status}");
        let checkpoint =
            std::fs::read_to_string(broker.data_dir().join("recovery-point-offset-checkpoint"))
                .context("the clean stop wrote no recovery-point-offset-checkpoint")?;
        let mut lines = checkpoint.lines();
        ensure!(lines.next() == Some("0"), "version line: {checkpoint:?}");
        let count: usize = lines.next().context("no count line")?.parse()?;
        let entries: Vec<&str> = lines.collect();
        ensure!(count == entries.len(), "count {count} for {entries:?}");
        for (p, end) in acked_ends(&first_acked) {
            let line = format!("{TOPIC} {p} {end}");
            ensure!(
                entries.contains(&line.as_str()),
                "expected `{line}` (recovery point = log end) in {checkpoint:?}"
            );
        }
        broker.restart()?;

        // Phase 2: an acks=all stream full of rolls, killed with -9 while produces are in
        // flight.
        let (producer, deliveries) = producer(broker, &settings)?;
        let deadline = Instant::now() + PHASE_TIMEOUT;
        let mut i = FIRST;
        while deliveries.acked_count() < 15_000 {
            ensure!(
                Instant::now() < deadline,
                "only {} acked within {PHASE_TIMEOUT:?}",
                deliveries.acked_count()
            );
            send(&producer, TOPIC, i, &key_of(i), &value(i), &[], now_ms())?;
            i += 1;
            if i.is_multiple_of(64) {
                thread::sleep(Duration::from_millis(1));
            }
        }
        for _ in 0..3_000 {
            send(&producer, TOPIC, i, &key_of(i), &value(i), &[], now_ms())?;
            i += 1;
        }
        thread::sleep(Duration::from_millis(6));
        broker.kill9()?;
        let acked_at_kill = deliveries.acked_count();
        thread::sleep(Duration::from_millis(200));
        broker.restart()?;
        // The checkpoint on disk is the clean stop's: everything rolled since is above it.
        // The client port is bound before the logs open, so the line may come a little after
        // the broker accepts connections.
        let recovered = || -> anyhow::Result<bool> {
            let stderr = std::fs::read_to_string(broker.stderr_path())?;
            Ok(stderr
                .rsplit("restarting broker")
                .next()
                .unwrap_or_default()
                .contains("recovering sealed segments above the recovery point"))
        };
        if strata_tests::wait_until(
            "the unclean start's recovery",
            Duration::from_secs(10),
            Duration::from_millis(20),
            recovered,
        )
        .is_err()
        {
            anyhow::bail!(
                "the unclean start did not recover sealed segments:\n{}",
                broker.stderr_tail()
            );
        }
        const AFTER: usize = 2_000;
        for _ in 0..AFTER {
            send(&producer, TOPIC, i, &key_of(i), &value(i), &[], now_ms())?;
            i += 1;
        }
        let sent = i;
        await_reports(&producer, &deliveries, sent - FIRST, PHASE_TIMEOUT)?;
        let mut acked = deliveries.acked.lock().unwrap().clone();
        eprintln!(
            "rolls: sent {} after the clean restart, acked {} ({acked_at_kill} before the kill)",
            sent - FIRST,
            acked.len()
        );
        ensure!(
            acked.keys().any(|&m| m >= sent - AFTER),
            "nothing sent after the restart was acknowledged"
        );
        acked.extend(first_acked);

        // Read every partition back to its high watermark.
        let consumer = consumer(broker, &[])?;
        let mut total = 0usize;
        for p in 0..PARTITIONS {
            let (low, high) = watermarks(&consumer, TOPIC, p)?;
            ensure!(low == 0, "partition {p}: log start offset {low}");
            total += usize::try_from(high)?;
        }
        let records = consume(
            &consumer,
            TOPIC,
            PARTITIONS,
            Offset::Beginning,
            total,
            PHASE_TIMEOUT,
        )?;
        ensure!(records.len() == total, "read {} of {total}", records.len());
        check_contiguous(&records, &(0..PARTITIONS).map(|p| (p, 0)).collect())?;
        check_acknowledged(&records, sent, value, &acked)?;
        Ok(())
    });
}
