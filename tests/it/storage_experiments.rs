//! The storage experiments change how a segment is written, never what.
//!
//! - With early writeback (`STRATA_WRITEBACK_KB`) and preallocation (`STRATA_PREALLOCATE`)
//!   both on and segments of 1 MiB, a log rolls several times, every sealed segment holds no
//!   blocks past its bytes, the active one holds its reservation without growing, and a
//!   kill -9 loses no acknowledged record.
//! - With direct I/O (`STRATA_DIRECT_IO`), a consumer reads every record while the log grows
//!   and rolls, sealed segments hold exactly their bytes while the active one is padded to a
//!   block, and after kill -9 (which leaves the padding) every acknowledged record reads back
//!   and the log goes on.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, ensure};
use rdkafka::topic_partition_list::Offset;
use strata_tests::{Broker, serial};

use crate::rdkafka_clients;

const TOPIC: &str = "experiments";
const SEGMENT: u64 = 1 << 20;
const RECORDS: usize = 3_000;
const TIMEOUT: Duration = Duration::from_secs(30);

/// A record of about 1 KB whose first bytes are its number.
fn payload(i: usize) -> Vec<u8> {
    let mut p = format!("{i:08}").into_bytes();
    p.resize(1000, b'.');
    p
}

/// Produces messages `range` to partition 0 (acks=all); checks that each was acknowledged at
/// the offset equal to its number and returns where each went.
fn produce(
    b: &Broker,
    range: std::ops::Range<usize>,
) -> anyhow::Result<HashMap<usize, (i32, i64)>> {
    let (p, deliveries) = rdkafka_clients::producer(b, &[("batch.size", "16384")])?;
    for i in range.clone() {
        rdkafka_clients::send_to_partition(&p, TOPIC, 0, i, &payload(i))?;
    }
    rdkafka_clients::await_reports(&p, &deliveries, range.len(), TIMEOUT)?;
    let acked = deliveries.acked.lock().unwrap().clone();
    for i in range {
        ensure!(
            acked.get(&i) == Some(&(0, i as i64)),
            "message {i} acknowledged at {:?}",
            acked.get(&i)
        );
    }
    Ok(acked)
}

/// The partition's `.log` files, in offset order, with (size, bytes of blocks held).
fn segments(dir: &Path) -> anyhow::Result<Vec<(u64, u64)>> {
    let mut names: Vec<_> = std::fs::read_dir(dir.join(format!("{TOPIC}-0")))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| {
            let m = std::fs::metadata(p).with_context(|| p.display().to_string())?;
            Ok((m.len(), m.blocks() * 512))
        })
        .collect()
}

/// Kills the broker with kill -9 and restarts it: every acknowledged record must read back
/// in order, and the log must go on from where it was.
fn kill9_and_check(b: &mut Broker, acked: &HashMap<usize, (i32, i64)>) -> anyhow::Result<()> {
    b.kill9()?;
    b.restart()?;
    let c = rdkafka_clients::consumer(b, &[])?;
    let records = rdkafka_clients::consume(&c, TOPIC, 1, Offset::Beginning, RECORDS, TIMEOUT)?;
    rdkafka_clients::check_contiguous(&records, &BTreeMap::from([(0, 0)]))?;
    rdkafka_clients::check_acknowledged(&records, RECORDS, payload, acked)?;
    produce(b, RECORDS..RECORDS + 10)?;
    Ok(())
}

#[test]
fn writeback_and_preallocation_keep_every_acknowledged_record_through_kill9() {
    let _serial = serial();
    let mut b = Broker::start_with_env(
        &[("log.segment.bytes", &SEGMENT.to_string())],
        &[("STRATA_WRITEBACK_KB", "64"), ("STRATA_PREALLOCATE", "1")],
    )
    .expect("start the broker");
    let result = (|| -> anyhow::Result<()> {
        rdkafka_clients::create_topic(&b, TOPIC, 1)?;
        let acked = produce(&b, 0..RECORDS)?;

        let segs = segments(b.data_dir())?;
        ensure!(segs.len() >= 3, "only {} segments: no rolls", segs.len());
        let (active, sealed) = segs.split_last().context("no segment")?;
        for (i, &(size, held)) in sealed.iter().enumerate() {
            ensure!(size <= SEGMENT, "sealed segment {i} has {size} bytes");
            // Blocks round up to the file system's block; nothing reserved is kept.
            ensure!(
                held < size + (64 << 10),
                "sealed segment {i} of {size} bytes still holds {held}"
            );
        }
        ensure!(
            active.0 < SEGMENT,
            "the active segment's size is {}: the reservation grew it",
            active.0
        );
        ensure!(
            active.1 >= SEGMENT,
            "the active segment holds {} bytes of blocks: nothing was reserved",
            active.1
        );

        kill9_and_check(&mut b, &acked)
    })();
    if let Err(e) = result {
        panic!("{e:?}\n{}", b.stderr_tail());
    }
}

#[test]
fn direct_io_serves_readers_and_keeps_every_acknowledged_record_through_kill9() {
    let _serial = serial();
    let mut b = Broker::start_with_env(
        &[("log.segment.bytes", &SEGMENT.to_string())],
        &[("STRATA_DIRECT_IO", "1")],
    )
    .expect("start the broker");
    let result = (|| -> anyhow::Result<()> {
        rdkafka_clients::create_topic(&b, TOPIC, 1)?;
        // A consumer reads while the log grows, so fetches read blocks that direct writes
        // then rewrite.
        let c = rdkafka_clients::consumer(&b, &[])?;
        let mut acked = HashMap::new();
        let mut records = Vec::new();
        for part in 0..3 {
            let range = part * RECORDS / 3..(part + 1) * RECORDS / 3;
            acked.extend(produce(&b, range.clone())?);
            let from = Offset::Offset(range.start as i64);
            records.extend(rdkafka_clients::consume(
                &c,
                TOPIC,
                1,
                from,
                range.len(),
                TIMEOUT,
            )?);
        }
        rdkafka_clients::check_contiguous(&records, &BTreeMap::from([(0, 0)]))?;
        rdkafka_clients::check_acknowledged(&records, RECORDS, payload, &acked)?;
        ensure!(
            !b.stderr_tail().contains("direct I/O refused"),
            "the data directory refused direct I/O: nothing here tested it"
        );

        let segs = segments(b.data_dir())?;
        ensure!(segs.len() >= 3, "only {} segments: no rolls", segs.len());
        let (active, sealed) = segs.split_last().context("no segment")?;
        ensure!(
            sealed.iter().any(|&(size, _)| size % 4096 != 0),
            "every sealed segment ends on a block: their padding was not cut ({sealed:?})"
        );
        ensure!(
            active.0 % 4096 == 0,
            "the active segment's size {} is not padded to a block: it was not written direct",
            active.0
        );

        kill9_and_check(&mut b, &acked)
    })();
    if let Err(e) = result {
        panic!("{e:?}\n{}", b.stderr_tail());
    }
}
