//! Size-based retention (librdkafka, the `rdkafka` crate): old segments are deleted, the log
//! start offset moves to the oldest remaining segment's base offset, and consumers assigned at
//! an offset that is gone reset to the log start (`earliest`) or the end (`latest`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rdkafka::consumer::Consumer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{wait_until, with_broker};

use crate::rdkafka_clients::*;

fn log_files(dir: &std::path::Path) -> anyhow::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".log") {
            out.push((name, e.metadata()?.len()));
        }
    }
    out.sort();
    Ok(out)
}

#[test]
fn retention_by_bytes_moves_log_start_offset() {
    const SEGMENT_BYTES: u64 = 16 * 1024;
    const RETENTION_BYTES: u64 = 64 * 1024;
    with_broker(
        &[
            ("log.segment.bytes", "16384"),
            ("log.retention.bytes", "65536"),
            ("log.retention.check.interval.ms", "500"),
        ],
        |broker| {
            let topic = "retention";
            create_topic(broker, topic, 1)?;
            // Small batches so many segments roll; ~640 KB in all, about 40 segments' worth.
            let (producer, deliveries) =
                producer(broker, &[("batch.size", "2048"), ("linger.ms", "1")])?;
            let total = 3_000;
            let value = |i: usize| format!("retention-{i:08}-{}", "x".repeat(180)).into_bytes();
            for i in 0..total {
                send(&producer, topic, i, "k", &value(i), &[], now_ms())?;
            }
            await_reports(&producer, &deliveries, total, PHASE_TIMEOUT)?;
            ensure!(deliveries.acked_count() == total, "not all acked");
            let acked = deliveries.acked.lock().unwrap().clone();
            let by_offset: HashMap<i64, usize> = acked.iter().map(|(&i, &(_, o))| (o, i)).collect();

            let dir = broker.data_dir().join(format!("{topic}-0"));
            let consumer = consumer(broker, &[])?;
            let mut last_state = String::new();
            wait_until(
                "retention deletes old segments and advances the log start offset",
                Duration::from_secs(30),
                Duration::from_millis(200),
                || {
                    let files = log_files(&dir)?;
                    let size: u64 = files.iter().map(|(_, s)| s).sum();
                    let (low, high) = watermarks(&consumer, topic, 0)?;
                    last_state = format!(
                        "log start {low}, end {high}, {} .log files ({size} bytes): {files:?}",
                        files.len()
                    );
                    Ok(low > 0
                        && high == total as i64
                        && size <= RETENTION_BYTES + SEGMENT_BYTES
                        && files.len() as u64 <= RETENTION_BYTES / SEGMENT_BYTES + 2)
                },
            )
            .with_context(|| format!("last seen: {last_state}"))?;
            let (log_start, high) = watermarks(&consumer, topic, 0)?;
            ensure!(
                log_files(&dir)?.first().map(|(n, _)| n.clone())
                    == Some(format!("{log_start:020}.log")),
                "oldest segment is not named after the log start offset {log_start}: {:?}",
                log_files(&dir)?
            );

            // earliest: assigned at offset 0 (now out of range) resets to the log start offset.
            let earliest = self::consumer(broker, &[("auto.offset.reset", "earliest")])?;
            let got = consume(
                &earliest,
                topic,
                1,
                Offset::Offset(0),
                (high - log_start) as usize,
                Duration::from_secs(30),
            )
            .context("consumer at offset 0 with auto.offset.reset=earliest")?;
            ensure!(
                got[0].offset == log_start,
                "earliest reset: first offset {}, log start {log_start}",
                got[0].offset
            );
            check_contiguous(&got, &[(0, log_start)].into())?;
            for r in &got {
                let i = r.seq()?;
                ensure!(
                    by_offset.get(&r.offset) == Some(&i)
                        && r.value.as_deref() == Some(&value(i)[..]),
                    "offset {}: got message {i}, acked there: {:?}",
                    r.offset,
                    by_offset.get(&r.offset)
                );
            }

            // latest: assigned at offset 0 resets to the end and then sees only new messages.
            // The reset happens asynchronously (and librdkafka's position() only moves on
            // consumed messages), so keep producing one message at a time until the consumer
            // sees one: it must be a new one, and from then on nothing is skipped.
            let latest = self::consumer(broker, &[("auto.offset.reset", "latest")])?;
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(topic, 0, Offset::Offset(0))?;
            latest.assign(&tpl)?;
            let mut next = total;
            let deadline = Instant::now() + Duration::from_secs(60);
            let first = loop {
                ensure!(
                    Instant::now() < deadline,
                    "latest consumer received nothing while {} new messages were produced",
                    next - total
                );
                send(&producer, topic, next, "k", &value(next), &[], now_ms())?;
                next += 1;
                await_reports(&producer, &deliveries, next, PHASE_TIMEOUT)?;
                let got = poll_n(&latest, 1, Duration::from_millis(300));
                if let Ok(mut got) = got {
                    break got.remove(0);
                }
            };
            ensure!(
                first.offset >= high && first.seq()? >= total,
                "latest consumer received an old message: offset {} (log end was {high})",
                first.offset
            );
            let fresh = 10;
            for i in next..next + fresh {
                send(&producer, topic, i, "k", &value(i), &[], now_ms())?;
            }
            await_reports(&producer, &deliveries, next + fresh, PHASE_TIMEOUT)?;
            let expected = (next + fresh - 1 - first.seq()?) as usize;
            let got = poll_n(&latest, expected, PHASE_TIMEOUT)?;
            check_contiguous(&got, &[(0, first.offset + 1)].into())?;
            for (n, r) in got.iter().enumerate() {
                ensure!(
                    r.seq()? == first.seq()? + 1 + n,
                    "latest consumer got {:?} at offset {}",
                    r.seq(),
                    r.offset
                );
            }
            Ok(())
        },
    );
}
