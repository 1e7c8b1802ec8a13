//! Zero-copy Fetch (ARCHITECTURE.md decision 4, issue 5) against the real binary.
//!
//! - `multi_partition_fetch_returns_the_segment_bytes`: a hand-built Fetch v4 for three
//!   partitions at once, read to the end in small steps, returns exactly the bytes of each
//!   partition's `.log` segment; a librdkafka consumer then reads every record back; the
//!   broker's shutdown log shows the bytes went out with sendfile and none were copied.
//! - `copy_fallback_returns_the_same_bytes`: the same with `STRATA_ZERO_COPY=0`, the
//!   read-and-write path, which must count copied bytes and no zero-copy ones.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use rdkafka::topic_partition_list::Offset;
use strata_tests::wire::{self, header, put_str, recv};
use strata_tests::{Broker, read_tail};

use crate::rdkafka_clients::*;

const TOPIC: &str = "zero-copy";
const PARTITIONS: i32 = 3;
const MESSAGES: usize = 6_000;

/// A Fetch v4 request for `offsets` (partition, offset) of one topic, with small per-partition
/// limits so that many responses carry several partitions' regions.
fn fetch_v4(corr: i32, topic: &str, offsets: &BTreeMap<i32, i64>, partition_max: i32) -> Vec<u8> {
    let mut body = header(1, 4, corr);
    body.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    body.extend_from_slice(&0i32.to_be_bytes()); // max wait
    body.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    body.extend_from_slice(&(4i32 << 20).to_be_bytes()); // max bytes
    body.push(0); // read_uncommitted
    body.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut body, topic);
    body.extend_from_slice(&(offsets.len() as i32).to_be_bytes());
    for (&p, &o) in offsets {
        body.extend_from_slice(&p.to_be_bytes());
        body.extend_from_slice(&o.to_be_bytes());
        body.extend_from_slice(&partition_max.to_be_bytes());
    }
    body
}

/// Cursor over a response body.
struct Rd<'a>(&'a [u8], usize);

impl Rd<'_> {
    fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
        ensure!(
            self.1 + n <= self.0.len(),
            "response truncated at {}",
            self.1
        );
        let s = &self.0[self.1..self.1 + n];
        self.1 += n;
        Ok(s)
    }
    fn i16(&mut self) -> anyhow::Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }
    fn i32(&mut self) -> anyhow::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }
    fn i64(&mut self) -> anyhow::Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into()?))
    }
}

/// (partition, error code, high watermark, records).
type PartitionAnswer = (i32, i16, i64, Vec<u8>);

/// Parses a Fetch v4 response: (partition, error, high watermark, records) per partition.
fn parse_v4(resp: &[u8]) -> anyhow::Result<Vec<PartitionAnswer>> {
    let mut r = Rd(resp, 0);
    r.i32()?; // correlation id
    r.i32()?; // throttle
    let mut out = Vec::new();
    for _ in 0..r.i32()? {
        let n = r.i16()?;
        r.take(n as usize)?;
        for _ in 0..r.i32()? {
            let p = r.i32()?;
            let err = r.i16()?;
            let hw = r.i64()?;
            r.i64()?; // last stable offset
            let aborted = r.i32()?;
            if aborted > 0 {
                r.take(aborted as usize * 16)?;
            }
            let len = r.i32()?;
            let records = if len > 0 {
                r.take(len as usize)?.to_vec()
            } else {
                Vec::new()
            };
            out.push((p, err, hw, records));
        }
    }
    ensure!(r.1 == resp.len(), "{} trailing bytes", resp.len() - r.1);
    Ok(out)
}

/// The offset after the last whole batch in `records`.
fn next_offset(records: &[u8]) -> anyhow::Result<i64> {
    let mut at = 0;
    let mut next = None;
    while at + 61 <= records.len() {
        let base = i64::from_be_bytes(records[at..at + 8].try_into()?);
        let len = i32::from_be_bytes(records[at + 8..at + 12].try_into()?) as usize;
        let delta = i32::from_be_bytes(records[at + 23..at + 27].try_into()?);
        ensure!(at + 12 + len <= records.len(), "partial batch at {at}");
        next = Some(base + i64::from(delta) + 1);
        at += 12 + len;
    }
    ensure!(at == records.len(), "stray bytes after the last batch");
    next.context("no batch")
}

fn scenario(broker: &mut Broker, expect_zero_copy: bool) -> anyhow::Result<()> {
    create_topic(broker, TOPIC, PARTITIONS)?;
    // Mixed sizes and codecs: batches of every shape land in the segments. Batches stay well
    // under the per-partition fetch limit, so one response carries several partitions.
    for (codec, count) in [("none", MESSAGES / 2), ("lz4", MESSAGES / 2)] {
        let (producer, deliveries) = producer(
            broker,
            &[("compression.type", codec), ("batch.size", "16384")],
        )?;
        for i in 0..count {
            let value = value_of(codec, i).repeat(1 + i % 7);
            send(&producer, TOPIC, i, &key_of(i), &value, &[], now_ms())?;
        }
        await_reports(&producer, &deliveries, count, PHASE_TIMEOUT)?;
        ensure!(
            deliveries.failed.lock().unwrap().is_empty(),
            "deliveries failed"
        );
    }

    // Raw Fetch v4 across all partitions until every one reaches its high watermark.
    let mut conn = wire::connect(broker.port());
    let mut offsets: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let mut got: BTreeMap<i32, Vec<u8>> = BTreeMap::new();
    let mut multi = 0;
    let started = Instant::now();
    for corr in 0.. {
        ensure!(started.elapsed() < PHASE_TIMEOUT, "fetching did not finish");
        wire::send(&mut conn, &fetch_v4(corr, TOPIC, &offsets, 48 * 1024));
        let resp = recv(&mut conn).context("fetch response")?;
        let parts = parse_v4(&resp)?;
        ensure!(
            parts.len() == offsets.len(),
            "answered {} partitions",
            parts.len()
        );
        if parts.iter().filter(|p| !p.3.is_empty()).count() > 1 {
            multi += 1;
        }
        let mut done = true;
        for (p, err, hw, records) in parts {
            ensure!(err == 0, "partition {p}: error {err}");
            if !records.is_empty() {
                offsets.insert(p, next_offset(&records)?);
                got.entry(p).or_default().extend_from_slice(&records);
            }
            if offsets[&p] < hw {
                done = false;
            }
        }
        if done {
            break;
        }
        if corr > 100_000 {
            bail!("too many fetches");
        }
    }
    ensure!(
        multi > 0,
        "no response carried more than one partition's records (offsets {offsets:?}, bytes {:?})",
        got.iter().map(|(p, b)| (*p, b.len())).collect::<Vec<_>>()
    );
    for p in 0..PARTITIONS {
        let seg = broker
            .data_dir()
            .join(format!("{TOPIC}-{p}"))
            .join("00000000000000000000.log");
        let on_disk = std::fs::read(&seg).with_context(|| seg.display().to_string())?;
        let fetched = got.remove(&p).unwrap_or_default();
        ensure!(!on_disk.is_empty(), "partition {p} is empty");
        ensure!(
            fetched == on_disk,
            "partition {p}: fetched {} bytes differ from the segment's {} bytes",
            fetched.len(),
            on_disk.len()
        );
    }

    // A stock client reads every record back through the same path (its newest Fetch version).
    let consumer = consumer(broker, &[])?;
    let records = consume(
        &consumer,
        TOPIC,
        PARTITIONS,
        Offset::Beginning,
        MESSAGES,
        PHASE_TIMEOUT,
    )?;
    ensure!(records.len() == MESSAGES, "consumed {}", records.len());
    drop(consumer);

    broker.stop()?;
    let log = read_tail(broker.stderr_path(), 64 * 1024);
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("fetch bytes sent"))
        .context("no fetch counters in the shutdown log")?;
    let counter = |name: &str| -> anyhow::Result<u64> {
        let at = line.find(&format!("{name}=")).context("counter missing")? + name.len() + 1;
        let digits: String = line[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Ok(digits.parse()?)
    };
    let (zero_copy, copied) = (counter("zero_copy_bytes")?, counter("copied_bytes")?);
    if expect_zero_copy {
        ensure!(
            zero_copy > 0 && copied == 0,
            "zero-copy {zero_copy}, copied {copied}"
        );
    } else {
        ensure!(
            zero_copy == 0 && copied > 0,
            "zero-copy {zero_copy}, copied {copied}"
        );
    }
    Ok(())
}

#[test]
fn multi_partition_fetch_returns_the_segment_bytes() {
    let mut b = Broker::start(&[]).unwrap();
    if let Err(e) = scenario(&mut b, true) {
        panic!("{e:?}");
    }
}

#[test]
fn copy_fallback_returns_the_same_bytes() {
    // The variable goes to the broker process only.
    let mut b = Broker::start_with_env(&[], &[("STRATA_ZERO_COPY", "0")]).unwrap();
    if let Err(e) = scenario(&mut b, false) {
        panic!("{e:?}");
    }
}
