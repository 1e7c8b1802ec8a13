//! kill -9 in the middle of an acks=all produce stream (librdkafka, the `rdkafka` crate): no
//! acknowledged write is lost, each sits at the offset its acknowledgement gave, offsets stay
//! contiguous with no duplicates, and the same producer carries on after the restart.

use std::thread;
use std::time::{Duration, Instant};

use anyhow::ensure;
use rdkafka::topic_partition_list::Offset;
use strata_tests::{serial, with_broker};

use crate::rdkafka_clients::*;

#[test]
fn kill9_during_acks_all_produce() {
    let _serial = serial();
    with_broker(&[], |broker| {
        let topic = "kill9";
        let partitions = 3;
        create_topic(broker, topic, partitions)?;
        let (producer, deliveries) = producer(
            broker,
            &[
                // No retries: a message is written at most once, so offsets must stay
                // contiguous with no duplicate values.
                ("message.send.max.retries", "0"),
                ("message.timeout.ms", "20000"),
                ("reconnect.backoff.ms", "50"),
                ("reconnect.backoff.max.ms", "500"),
            ],
        )?;
        const ACKED_BEFORE_KILL: usize = 20_000;
        const SENT_WHILE_DOWN: usize = 2_000;
        const SENT_AFTER_RESTART: usize = 10_000;
        let value = |i: usize| value_of("kill9", i);

        // Phase 1: stream until enough is acknowledged, then kill -9 while more is in flight.
        let deadline = Instant::now() + PHASE_TIMEOUT;
        let mut i = 0;
        while deliveries.acked_count() < ACKED_BEFORE_KILL {
            ensure!(
                Instant::now() < deadline,
                "only {} acked within {PHASE_TIMEOUT:?}",
                deliveries.acked_count()
            );
            send(&producer, topic, i, &key_of(i), &value(i), &[], now_ms())?;
            i += 1;
            if i % 64 == 0 {
                thread::sleep(Duration::from_millis(1));
            }
        }
        // A burst, then a pause just past linger.ms: produce requests are likely in flight at
        // the moment of the kill (the eprintln below shows how many were not acknowledged).
        for _ in 0..5_000 {
            send(&producer, topic, i, &key_of(i), &value(i), &[], now_ms())?;
            i += 1;
        }
        thread::sleep(Duration::from_millis(6));
        broker.kill9()?;
        let acked_at_kill = deliveries.acked_count();
        for _ in 0..SENT_WHILE_DOWN {
            send(&producer, topic, i, &key_of(i), &value(i), &[], now_ms())?;
            i += 1;
        }
        thread::sleep(Duration::from_millis(300));
        broker.restart()?;

        // Phase 2: the same producer keeps going after the restart.
        for _ in 0..SENT_AFTER_RESTART {
            send(&producer, topic, i, &key_of(i), &value(i), &[], now_ms())?;
            i += 1;
        }
        let sent = i;
        await_reports(&producer, &deliveries, sent, PHASE_TIMEOUT)?;
        let acked = deliveries.acked.lock().unwrap().clone();
        let failed = deliveries.failed.lock().unwrap().len();
        eprintln!(
            "kill9: sent {sent}, acked {} ({acked_at_kill} before the kill), failed {failed}",
            acked.len()
        );
        let acked_after_restart = acked.keys().filter(|&&m| m >= sent - SENT_AFTER_RESTART);
        ensure!(
            acked_after_restart.count() > 0,
            "no message sent after the restart was acknowledged; failures: {:?}",
            deliveries
                .failed
                .lock()
                .unwrap()
                .iter()
                .rev()
                .take(3)
                .collect::<Vec<_>>()
        );

        // Read everything back up to the high watermark of each partition.
        let consumer = consumer(broker, &[])?;
        let mut total = 0usize;
        for p in 0..partitions {
            let (low, high) = watermarks(&consumer, topic, p)?;
            ensure!(low == 0, "partition {p}: log start offset {low}");
            total += high as usize;
        }
        let records = consume(
            &consumer,
            topic,
            partitions,
            Offset::Beginning,
            total,
            PHASE_TIMEOUT,
        )?;
        check_contiguous(&records, &(0..partitions).map(|p| (p, 0)).collect())?;
        check_acknowledged(&records, sent, value, &acked)?;
        Ok(())
    });
}
