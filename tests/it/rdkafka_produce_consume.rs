//! librdkafka (the `rdkafka` crate, librdkafka 2.12) against the real `strata` binary.
//!
//! - `produce_consume_<codec>`: 100,000 keyed messages with headers and explicit timestamps
//!   into 6 partitions, consumed back by manual assignment and checked record by record
//!   against the producer's delivery reports.
//! - `on_disk_layout_is_kafkas`: segment files are named and laid out as Kafka's, and a clean
//!   SIGTERM shutdown exits 0 and keeps the data.
//! - `offsets_for_times_<codec>`: ListOffsets by timestamp (KIP-79) answers to the record, also
//!   inside a compressed batch.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use anyhow::{Context, ensure};
use rdkafka::consumer::Consumer;
use rdkafka::message::Timestamp;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::with_broker;

use crate::rdkafka_clients::*;

/// Messages per codec in `produce_consume_*`.
const CODEC_MESSAGES: usize = 100_000;

// ---------------------------------------------------------------------------------------------
// Every codec: 100k keyed messages with headers and timestamps, 6 partitions.

fn produce_consume(codec: &str) {
    with_broker(&[], |broker| {
        let topic = format!("codec-{codec}");
        let partitions = 6;
        create_topic(broker, &topic, partitions)?;

        let started = Instant::now();
        let (producer, deliveries) = producer(broker, &[("compression.type", codec)])?;
        let base_ts = now_ms() - 3_600_000;
        for i in 0..CODEC_MESSAGES {
            send(
                &producer,
                &topic,
                i,
                &key_of(i),
                &value_of(codec, i),
                &[("codec", codec)],
                base_ts + i as i64,
            )?;
        }
        await_reports(&producer, &deliveries, CODEC_MESSAGES, PHASE_TIMEOUT)?;
        let produce_time = started.elapsed();
        {
            let failed = deliveries.failed.lock().unwrap();
            ensure!(
                failed.is_empty(),
                "{} deliveries failed, first: {:?}",
                failed.len(),
                failed.first()
            );
        }
        let acked = deliveries.acked.lock().unwrap().clone();
        ensure!(acked.len() == CODEC_MESSAGES, "acked {}", acked.len());

        // High watermarks equal the number of messages acked into each partition.
        let consumer = consumer(broker, &[])?;
        let mut per_partition: BTreeMap<i32, i64> = (0..partitions).map(|p| (p, 0)).collect();
        for (p, _) in acked.values() {
            *per_partition
                .get_mut(p)
                .with_context(|| format!("acked into unknown partition {p}"))? += 1;
        }
        for (&p, &n) in &per_partition {
            ensure!(
                n > 0,
                "partition {p} received no messages (keys not spread)"
            );
            let (low, high) = watermarks(&consumer, &topic, p)?;
            ensure!(
                (low, high) == (0, n),
                "partition {p}: watermarks ({low}, {high}), expected (0, {n})"
            );
        }

        let started = Instant::now();
        let records = consume(
            &consumer,
            &topic,
            partitions,
            Offset::Beginning,
            CODEC_MESSAGES,
            PHASE_TIMEOUT,
        )?;
        let consume_time = started.elapsed();
        check_contiguous(&records, &(0..partitions).map(|p| (p, 0)).collect())?;

        let mut seen = vec![false; CODEC_MESSAGES];
        let mut key_partition: HashMap<Vec<u8>, i32> = HashMap::new();
        let mut last_seq_of_key: HashMap<Vec<u8>, usize> = HashMap::new();
        for r in &records {
            let i = r.seq()?;
            ensure!(i < CODEC_MESSAGES, "seq {i} out of range");
            ensure!(!seen[i], "message {i} consumed twice");
            seen[i] = true;
            ensure!(
                acked.get(&i) == Some(&(r.partition, r.offset)),
                "message {i} read at {}-{} but acked at {:?}",
                r.partition,
                r.offset,
                acked.get(&i)
            );
            let key = key_of(i).into_bytes();
            ensure!(
                r.key.as_deref() == Some(&key[..]),
                "message {i}: key {:?}",
                r.key
            );
            ensure!(
                r.value.as_deref() == Some(&value_of(codec, i)[..]),
                "message {i}: wrong payload {:?}",
                r.value.as_ref().map(|v| String::from_utf8_lossy(v))
            );
            let want_headers = vec![
                ("seq".to_string(), Some(i.to_string().into_bytes())),
                ("codec".to_string(), Some(codec.as_bytes().to_vec())),
            ];
            ensure!(
                r.headers == want_headers,
                "message {i}: headers {:?}",
                r.headers
            );
            ensure!(
                r.timestamp == Timestamp::CreateTime(base_ts + i as i64),
                "message {i}: timestamp {:?}, expected CreateTime({})",
                r.timestamp,
                base_ts + i as i64
            );
            let p = *key_partition.entry(key.clone()).or_insert(r.partition);
            ensure!(
                p == r.partition,
                "key {} seen in partitions {p} and {}",
                key_of(i),
                r.partition
            );
            if let Some(prev) = last_seq_of_key.insert(key, i) {
                ensure!(
                    prev < i,
                    "key {}: seq {i} read after {prev} in partition {p}",
                    key_of(i)
                );
            }
        }
        ensure!(seen.iter().all(|&s| s), "some messages never consumed");
        eprintln!(
            "{codec}: produced {CODEC_MESSAGES} in {produce_time:?}, consumed in {consume_time:?}"
        );
        Ok(())
    });
}

#[test]
fn produce_consume_none() {
    produce_consume("none");
}

#[test]
fn produce_consume_gzip() {
    produce_consume("gzip");
}

#[test]
fn produce_consume_snappy() {
    produce_consume("snappy");
}

#[test]
fn produce_consume_lz4() {
    produce_consume("lz4");
}

#[test]
fn produce_consume_zstd() {
    produce_consume("zstd");
}

// ---------------------------------------------------------------------------------------------
// Kafka's on-disk layout, and a clean shutdown keeps the data.

#[test]
fn on_disk_layout_is_kafkas() {
    with_broker(&[], |broker| {
        let topic = "layout";
        create_topic(broker, topic, 1)?;
        let (producer, deliveries) = producer(broker, &[])?;
        let n = 100;
        for i in 0..n {
            send(
                &producer,
                topic,
                i,
                &key_of(i),
                &value_of("layout", i),
                &[],
                now_ms(),
            )?;
        }
        await_reports(&producer, &deliveries, n, PHASE_TIMEOUT)?;
        ensure!(deliveries.acked_count() == n, "not all acked");
        drop(producer);

        let dir = broker.data_dir().join(format!("{topic}-0"));
        for ext in ["log", "index", "timeindex"] {
            let p = dir.join(format!("00000000000000000000.{ext}"));
            ensure!(p.is_file(), "missing {}", p.display());
        }
        // The .log holds record batches byte for byte: the first batch starts at offset 0
        // (8-byte base offset), then batch length (4), partition leader epoch (4), magic 2.
        let log = std::fs::read(dir.join("00000000000000000000.log"))?;
        ensure!(log.len() > 61, "segment too short: {} bytes", log.len());
        ensure!(
            i64::from_be_bytes(log[0..8].try_into()?) == 0,
            "first batch base offset"
        );
        let batch_len = i32::from_be_bytes(log[8..12].try_into()?);
        ensure!(
            batch_len > 49 && (batch_len as usize) + 12 <= log.len(),
            "first batch length {batch_len} in a {}-byte segment",
            log.len()
        );
        ensure!(log[16] == 2, "magic byte {} (want 2)", log[16]);

        // SIGTERM is a clean shutdown: exit 0, and everything is there after a restart.
        let status = broker.stop()?;
        ensure!(
            status.success(),
            "strata exited with {status} after SIGTERM"
        );
        broker.restart()?;
        let consumer = consumer(broker, &[])?;
        ensure!(
            watermarks(&consumer, topic, 0)? == (0, n as i64),
            "watermarks after restart"
        );
        let got = consume(&consumer, topic, 1, Offset::Beginning, n, PHASE_TIMEOUT)?;
        check_contiguous(&got, &[(0, 0)].into())?;
        for (i, r) in got.iter().enumerate() {
            ensure!(r.seq()? == i, "offset {i} holds {:?}", r.seq());
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// ListOffsets by timestamp (KIP-79): the earliest offset whose timestamp is >= the target, to
// the record, also inside a compressed batch.

fn offsets_for_times(codec: &str) {
    with_broker(&[], |broker| {
        let topic = format!("times-{codec}");
        create_topic(broker, &topic, 1)?;
        let (producer, deliveries) =
            producer(broker, &[("compression.type", codec), ("linger.ms", "50")])?;
        let n = 2_000;
        let base_ts = now_ms() - 3_600_000;
        // Timestamps 10 ms apart, so a query between two messages has one right answer.
        for i in 0..n {
            let ts = base_ts + 10 * i as i64;
            send(
                &producer,
                &topic,
                i,
                &key_of(i),
                &value_of(codec, i),
                &[],
                ts,
            )?;
        }
        await_reports(&producer, &deliveries, n, PHASE_TIMEOUT)?;
        let acked = deliveries.acked.lock().unwrap().clone();
        ensure!(acked.len() == n, "acked {}", acked.len());
        let consumer = consumer(broker, &[])?;
        let mut wrong = Vec::new();
        for i in (0..n).step_by(37).chain([1, n - 1]) {
            let want = acked[&i].1;
            for (what, ts) in [
                ("at", base_ts + 10 * i as i64),
                ("just before", base_ts + 10 * i as i64 - 5),
            ] {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition_offset(&topic, 0, Offset::Offset(ts))?;
                let res = consumer.offsets_for_times(tpl, REQUEST_TIMEOUT)?;
                let got = res
                    .find_partition(&topic, 0)
                    .context("no partition in reply")?;
                if got.offset() != Offset::Offset(want) {
                    wrong.push(format!(
                        "{what} ts of message {i}: {:?}, want {want}",
                        got.offset()
                    ));
                }
            }
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Offset(base_ts + 10 * n as i64 + 1_000))?;
        let res = consumer.offsets_for_times(tpl, REQUEST_TIMEOUT)?;
        let got = res
            .find_partition(&topic, 0)
            .context("no partition in reply")?;
        if got.offset() != Offset::End {
            wrong.push(format!(
                "past the newest message: {:?}, want End (-1)",
                got.offset()
            ));
        }
        ensure!(
            wrong.is_empty(),
            "{} wrong answers, first: {:#?}",
            wrong.len(),
            &wrong[..wrong.len().min(8)]
        );
        Ok(())
    });
}

#[test]
fn offsets_for_times_none() {
    offsets_for_times("none");
}

#[test]
fn offsets_for_times_gzip() {
    offsets_for_times("gzip");
}
