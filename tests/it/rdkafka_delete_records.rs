//! DeleteRecords (key 21) against the real `strata` binary, driven by the rdkafka crate's
//! admin client and consumers:
//!
//! - `delete_records_moves_the_log_start_and_survives_restarts`: the admin call answers the
//!   new low watermarks (an offset, and -1 for the high watermark), ListOffsets EARLIEST
//!   answers them, the segments below go, a consumer from the beginning starts at the new
//!   start, one assigned below it resets (`earliest`) or gets OFFSET_OUT_OF_RANGE (`error`),
//!   and the start survives a clean restart and a kill -9 (`log-start-offset-checkpoint`).
//! - `an_offline_partition_keeps_its_log_start`: a partition whose log cannot be opened keeps
//!   its checkpointed start while DeleteRecords on another partition rewrites the file, so
//!   the deleted records stay deleted once it is repaired.
//! - `delete_records_refuses_bad_input`: an offset above the high watermark is
//!   OFFSET_OUT_OF_RANGE and changes nothing; over raw v0 and v2 frames, unknown topics and
//!   partitions are UNKNOWN_TOPIC_OR_PARTITION and the internal offsets topic is
//!   INVALID_TOPIC_EXCEPTION, next to a partition that succeeds.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{Broker, wait_until, wire, with_broker};

use crate::admin_client::{admin, admin_opts, block};
use crate::rdkafka_clients::*;

/// Records produced to partition 0; partition 1 gets a tenth of them.
const MESSAGES: usize = 2_000;

/// Runs the admin DeleteRecords call: each partition's (low watermark, error).
fn delete_records(
    b: &Broker,
    topic: &str,
    offsets: &[(i32, Offset)],
) -> anyhow::Result<BTreeMap<i32, Result<i64, KafkaError>>> {
    let mut tpl = TopicPartitionList::new();
    for &(p, o) in offsets {
        tpl.add_partition_offset(topic, p, o)?;
    }
    let client = admin(b);
    let result = block(async {
        tokio::time::timeout(
            REQUEST_TIMEOUT * 2,
            client.delete_records(&tpl, &admin_opts(REQUEST_TIMEOUT)),
        )
        .await
    })
    .context("DeleteRecords timed out")?
    .context("DeleteRecords failed")?;
    Ok(result
        .elements()
        .iter()
        .map(|e| {
            let low = match e.offset() {
                Offset::Offset(o) => o,
                other => -1_000 + other.to_raw().unwrap_or(0),
            };
            (e.partition(), e.error().map(|()| low))
        })
        .collect())
}

fn produce(b: &Broker, topic: &str) -> anyhow::Result<()> {
    let (producer, deliveries) = producer(b, &[("batch.size", "4096"), ("linger.ms", "1")])?;
    let total = MESSAGES + MESSAGES / 10;
    for i in 0..total {
        let partition = if i < MESSAGES { 0 } else { 1 };
        send_to_partition(&producer, topic, partition, i, &value_of("dr", i))?;
    }
    await_reports(&producer, &deliveries, total, PHASE_TIMEOUT)?;
    ensure!(deliveries.acked_count() == total, "not all acked");
    Ok(())
}

/// `.log` files of a partition, sorted: their base offsets.
fn segment_bases(dir: &std::path::Path) -> anyhow::Result<Vec<i64>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".log") {
            out.push(stem.parse()?);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Reads partition 0 from `start` to the end: the first offset delivered.
fn first_offset_from(b: &Broker, topic: &str, start: Offset, reset: &str) -> anyhow::Result<i64> {
    let c = consumer(b, &[("auto.offset.reset", reset)])?;
    let (low, high) = watermarks(&c, topic, 0)?;
    let got = consume(
        &c,
        topic,
        1,
        start,
        usize::try_from(high - low)?,
        PHASE_TIMEOUT,
    )?;
    check_contiguous(&got, &[(0, low)].into())?;
    for r in &got {
        ensure!(
            r.value.as_deref() == Some(&value_of("dr", r.seq()?)[..]),
            "offset {}: wrong value",
            r.offset
        );
    }
    Ok(got[0].offset)
}

/// Checks the watermarks, ListOffsets EARLIEST included, and that a consumer from the
/// beginning and one assigned at offset 0 (below the start, `earliest`) both start there.
fn check_start(b: &Broker, topic: &str, start: i64) -> anyhow::Result<()> {
    let c = consumer(b, &[])?;
    let (low, high) = watermarks(&c, topic, 0)?;
    ensure!(
        (low, high) == (start, MESSAGES as i64),
        "watermarks ({low}, {high}), want ({start}, {MESSAGES})"
    );
    let first = first_offset_from(b, topic, Offset::Beginning, "earliest")?;
    ensure!(
        first == start,
        "from the beginning: first offset {first}, want {start}"
    );
    let first = first_offset_from(b, topic, Offset::Offset(0), "earliest")?;
    ensure!(
        first == start,
        "reset from offset 0: first offset {first}, want {start}"
    );
    Ok(())
}

#[test]
fn delete_records_moves_the_log_start_and_survives_restarts() {
    with_broker(&[("log.segment.bytes", "16384")], |b| {
        let topic = "delete-records";
        create_topic(b, topic, 2)?;
        produce(b, topic)?;
        let dir = b.data_dir().join(format!("{topic}-0"));
        let before = segment_bases(&dir)?;
        ensure!(
            before.len() > 5,
            "too few segments to see deletion: {before:?}"
        );

        // An offset inside a batch, and -1 (the high watermark) for partition 1.
        let got = delete_records(b, topic, &[(0, Offset::Offset(1_234)), (1, Offset::End)])?;
        ensure!(
            matches!(got.get(&0), Some(Ok(1_234))),
            "partition 0: {:?}",
            got.get(&0)
        );
        let p1 = (MESSAGES / 10) as i64;
        ensure!(
            matches!(got.get(&1), Some(Ok(o)) if *o == p1),
            "partition 1: {:?}",
            got.get(&1)
        );
        let c = consumer(b, &[])?;
        ensure!(
            watermarks(&c, topic, 1)? == (p1, p1),
            "partition 1 not emptied"
        );

        // The segments wholly below the new start are gone now, the one holding it stays.
        let after = segment_bases(&dir)?;
        ensure!(
            after.first().is_some_and(|&s| s <= 1_234)
                && after.get(1).is_none_or(|&s| s > 1_234)
                && after.len() < before.len(),
            "segments before {before:?}, after {after:?}"
        );
        let checkpoint = std::fs::read_to_string(b.data_dir().join("log-start-offset-checkpoint"))?;
        ensure!(
            checkpoint == format!("0\n2\n{topic} 0 1234\n{topic} 1 {p1}\n"),
            "checkpoint: {checkpoint:?}"
        );
        check_start(b, topic, 1_234)?;

        // auto.offset.reset=error: a fetch below the start is OFFSET_OUT_OF_RANGE.
        let strict = consumer(b, &[("auto.offset.reset", "error")])?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(10))?;
        strict.assign(&tpl)?;
        let mut seen = None;
        wait_until(
            "OFFSET_OUT_OF_RANGE below the log start",
            REQUEST_TIMEOUT,
            Duration::from_millis(10),
            || {
                match strict.poll(Duration::from_millis(100)) {
                    Some(Err(e)) => seen = Some(e),
                    Some(Ok(m)) => {
                        bail!(
                            "delivered offset {} below the log start",
                            Consumed::of(&m).offset
                        )
                    }
                    None => {}
                }
                Ok(seen.is_some())
            },
        )?;
        ensure!(
            seen.as_ref().and_then(KafkaError::rdkafka_error_code)
                == Some(RDKafkaErrorCode::OffsetOutOfRange)
                || seen.as_ref().and_then(KafkaError::rdkafka_error_code)
                    == Some(RDKafkaErrorCode::AutoOffsetReset),
            "consumer error: {seen:?}"
        );

        // A clean restart keeps the start.
        b.stop()?;
        b.restart()?;
        check_start(b, topic, 1_234)?;

        // A later deletion is acknowledged only once it is on disk: kill -9 keeps it.
        let got = delete_records(b, topic, &[(0, Offset::Offset(1_500))])?;
        ensure!(matches!(got.get(&0), Some(Ok(1_500))), "{got:?}");
        b.kill9()?;
        b.restart()?;
        check_start(b, topic, 1_500)?;
        // A lower offset changes nothing and answers the current start.
        let got = delete_records(b, topic, &[(0, Offset::Offset(100))])?;
        ensure!(matches!(got.get(&0), Some(Ok(1_500))), "{got:?}");
        Ok(())
    });
}

/// A DeleteRecords request of `(topic, [(partition, offset)])` at v0 or v2 (flexible).
fn delete_records_frame(corr: i32, version: i16, topics: &[(&str, &[(i32, i64)])]) -> Vec<u8> {
    let flexible = version >= 2;
    let mut body = wire::header(21, version, corr);
    if flexible {
        body.push(0); // header tagged fields
    }
    let count = |v: &mut Vec<u8>, n: usize| {
        if flexible {
            v.push(u8::try_from(n + 1).expect("small count"));
        } else {
            v.extend_from_slice(&i32::try_from(n).expect("small count").to_be_bytes());
        }
    };
    count(&mut body, topics.len());
    for (name, partitions) in topics {
        if flexible {
            body.push(u8::try_from(name.len() + 1).expect("short name"));
            body.extend_from_slice(name.as_bytes());
        } else {
            wire::put_str(&mut body, name);
        }
        count(&mut body, partitions.len());
        for (p, o) in *partitions {
            body.extend_from_slice(&p.to_be_bytes());
            body.extend_from_slice(&o.to_be_bytes());
            if flexible {
                body.push(0);
            }
        }
        if flexible {
            body.push(0);
        }
    }
    body.extend_from_slice(&5_000i32.to_be_bytes());
    if flexible {
        body.push(0);
    }
    body
}

/// A cursor over a response body.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    flexible: bool,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        let s = self
            .buf
            .get(self.at..self.at + n)
            .context("truncated response")?;
        self.at += n;
        Ok(s)
    }

    /// An array count or string length: compact (unsigned varint + 1, one byte here) when
    /// flexible, else an int32 count or an int16 length.
    fn len(&mut self, classic_bytes: usize) -> anyhow::Result<usize> {
        if self.flexible {
            let b = self.take(1)?[0];
            ensure!(b > 0 && b < 0x80, "unexpected compact length {b}");
            return Ok(usize::from(b) - 1);
        }
        let b = self.take(classic_bytes)?;
        Ok(if classic_bytes == 2 {
            usize::try_from(i16::from_be_bytes(b.try_into()?))?
        } else {
            usize::try_from(i32::from_be_bytes(b.try_into()?))?
        })
    }

    fn tags(&mut self) -> anyhow::Result<()> {
        if self.flexible {
            ensure!(self.take(1)?[0] == 0, "unexpected tagged fields");
        }
        Ok(())
    }
}

/// Decodes a DeleteRecords v0 or v2 response: (topic, partition) -> (low watermark, error).
fn delete_records_answer(
    resp: &[u8],
    version: i16,
) -> anyhow::Result<BTreeMap<(String, i32), (i64, i16)>> {
    let mut r = Reader {
        buf: resp,
        at: 4, // correlation id
        flexible: version >= 2,
    };
    r.tags()?; // response header
    r.take(4)?; // throttle_time_ms
    let mut out = BTreeMap::new();
    for _ in 0..r.len(4)? {
        let len = r.len(2)?;
        let name = String::from_utf8(r.take(len)?.to_vec())?;
        for _ in 0..r.len(4)? {
            let p = i32::from_be_bytes(r.take(4)?.try_into()?);
            let low = i64::from_be_bytes(r.take(8)?.try_into()?);
            let code = i16::from_be_bytes(r.take(2)?.try_into()?);
            r.tags()?;
            out.insert((name.clone(), p), (low, code));
        }
        r.tags()?;
    }
    r.tags()?;
    ensure!(r.at == resp.len(), "{} bytes left over", resp.len() - r.at);
    Ok(out)
}

#[test]
fn delete_records_refuses_bad_input() {
    with_broker(&[], |b| {
        let topic = "delete-records-bad";
        create_topic(b, topic, 1)?;
        let (producer, deliveries) = producer(b, &[])?;
        for i in 0..10 {
            send_to_partition(&producer, topic, 0, i, &value_of("dr", i))?;
        }
        await_reports(&producer, &deliveries, 10, PHASE_TIMEOUT)?;

        // Above the high watermark: OFFSET_OUT_OF_RANGE, the start does not move.
        let got = delete_records(b, topic, &[(0, Offset::Offset(11))])?;
        let code = got
            .get(&0)
            .and_then(|r| r.as_ref().err())
            .and_then(KafkaError::rdkafka_error_code);
        ensure!(code == Some(RDKafkaErrorCode::OffsetOutOfRange), "{got:?}");
        let c = consumer(b, &[])?;
        ensure!(watermarks(&c, topic, 0)? == (0, 10), "the start moved");

        // librdkafka refuses unknown partitions itself, so the broker's answers are checked
        // over raw frames, at the oldest and the newest version.
        for (corr, version) in [(1, 0i16), (2, 2)] {
            let mut s = wire::connect(b.port());
            wire::send(
                &mut s,
                &delete_records_frame(
                    corr,
                    version,
                    &[
                        (topic, &[(0, 2 + i64::from(version)), (7, 0)]),
                        ("no-such-topic", &[(0, 0)]),
                        ("__consumer_offsets", &[(0, 0)]),
                        (topic, &[(0, 1_000)]),
                    ],
                ),
            );
            let resp = wire::recv(&mut s).context("no DeleteRecords answer")?;
            ensure!(wire::correlation_id(&resp) == corr, "correlation id");
            let got = delete_records_answer(&resp, version)?;
            let want: BTreeMap<(String, i32), (i64, i16)> = [
                // The second entry for partition 0 (above the high watermark, code 1) comes
                // last and wins the map slot; the first moved the start.
                ((topic.to_owned(), 0), (-1, 1)),
                ((topic.to_owned(), 7), (-1, 3)),
                (("no-such-topic".to_owned(), 0), (-1, 3)),
                (("__consumer_offsets".to_owned(), 0), (-1, 17)),
            ]
            .into();
            ensure!(got == want, "v{version}: {got:?}");
            ensure!(
                watermarks(&c, topic, 0)? == (2 + i64::from(version), 10),
                "v{version}: the start did not move to {}",
                2 + i64::from(version)
            );
        }
        Ok(())
    });
}

#[test]
fn an_offline_partition_keeps_its_log_start() {
    with_broker(&[], |b| {
        let (broken, healthy) = ("dr-broken", "dr-healthy");
        create_topic(b, broken, 1)?;
        create_topic(b, healthy, 1)?;
        let (producer, deliveries) = producer(b, &[])?;
        for i in 0..20 {
            let topic = if i < 10 { broken } else { healthy };
            send_to_partition(&producer, topic, 0, i, &value_of("dr", i))?;
        }
        await_reports(&producer, &deliveries, 20, PHASE_TIMEOUT)?;
        drop(producer);
        for topic in [broken, healthy] {
            let got = delete_records(b, topic, &[(0, Offset::Offset(5))])?;
            ensure!(matches!(got.get(&0), Some(Ok(5))), "{topic}: {got:?}");
        }
        ensure!(b.stop()?.success(), "clean stop");

        // The segment becomes a directory of the same name: the log cannot be opened.
        let segment = b
            .data_dir()
            .join(format!("{broken}-0"))
            .join("00000000000000000000.log");
        let saved = b.data_dir().join("saved.log.bak");
        std::fs::rename(&segment, &saved)?;
        std::fs::create_dir(&segment)?;
        b.restart()?;
        let got = delete_records(b, healthy, &[(0, Offset::Offset(7))])?;
        ensure!(matches!(got.get(&0), Some(Ok(7))), "{healthy}: {got:?}");
        let checkpoint = std::fs::read_to_string(b.data_dir().join("log-start-offset-checkpoint"))?;
        ensure!(
            checkpoint == format!("0\n2\n{broken} 0 5\n{healthy} 0 7\n"),
            "checkpoint with {broken} offline: {checkpoint:?}"
        );

        ensure!(b.stop()?.success(), "clean stop");
        std::fs::remove_dir(&segment)?;
        std::fs::rename(&saved, &segment)?;
        b.restart()?;
        let c = consumer(b, &[])?;
        ensure!(
            watermarks(&c, broken, 0)? == (5, 10),
            "{broken} after the repair"
        );
        ensure!(
            watermarks(&c, healthy, 0)? == (7, 10),
            "{healthy} after the restart"
        );
        Ok(())
    });
}
