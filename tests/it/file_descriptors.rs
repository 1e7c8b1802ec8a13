//! File descriptors do not grow with segments, and grow by one per partition: an active
//! segment holds its `.log` open, indexes are written when a segment is flushed or sealed and
//! closed again, and a sealed segment's `.log` is opened only while something reads it (and
//! then kept in a process-wide cache of at most 64 handles, which this test never fills).

use std::time::Duration;

use anyhow::{Context, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use strata_tests::{Broker, serial, with_broker};

use crate::rdkafka_clients;

fn open_fds(b: &Broker) -> anyhow::Result<usize> {
    let pid = b.pid().context("broker not running")?;
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

fn produce(b: &Broker, topic: &str, partitions: i32, per_partition: usize) -> anyhow::Result<()> {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("linger.ms", "0")
        .create()?;
    let value = vec![b'x'; 900];
    for i in 0..per_partition {
        for partition in 0..partitions {
            // One batch per send (linger 0, flushed per round), so segments fill and roll.
            p.send(
                BaseRecord::<(), _>::to(topic)
                    .payload(&value)
                    .partition(partition),
            )
            .map_err(|(e, _)| e)?;
        }
        if i % 10 == 9 {
            p.flush(Duration::from_secs(30))?;
        }
    }
    p.flush(Duration::from_secs(30))?;
    Ok(())
}

#[test]
fn descriptors_grow_with_partitions_not_with_segments() {
    let _serial = serial();
    // 16 KiB segments: 200 records of ~1 KB roll each partition a dozen times.
    with_broker(&[("log.segment.bytes", "16384")], |b| {
        let idle = open_fds(b)?;
        rdkafka_clients::create_topic(b, "many", 200)?;
        produce(b, "many", 200, 3)?;
        let partitions = open_fds(b)?;
        let per_partition = (partitions - idle) as f64 / 200.0;
        ensure!(
            per_partition < 1.5,
            "{per_partition:.2} descriptors per partition ({idle} idle, {partitions} with 200 partitions)"
        );
        rdkafka_clients::create_topic(b, "rolling", 4)?;
        let before = open_fds(b)?;
        produce(b, "rolling", 4, 200)?;
        let segments = std::fs::read_dir(b.data_dir().join("rolling-0"))?
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
            })
            .count();
        ensure!(
            segments > 5,
            "only {segments} segments: the topic did not roll"
        );
        // A roll's fsync runs on the group-commit thread, which holds the sealed segment's
        // files until it is done: wait (bounded) for the last ones to finish.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut after = open_fds(b)?;
        while after > before + 4 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            after = open_fds(b)?;
        }
        ensure!(
            after <= before + 4,
            "{before} descriptors before and {after} after rolling to {segments} segments per partition"
        );
        Ok(())
    });
}
