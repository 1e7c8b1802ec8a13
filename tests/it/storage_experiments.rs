//! The two storage experiments change how a segment is written, never what: with early
//! writeback (`STRATA_WRITEBACK_KB`) and preallocation (`STRATA_PREALLOCATE`) both on and
//! segments of 1 MiB, a log rolls several times, every sealed segment holds no blocks past
//! its bytes, the active one holds its reservation without growing, and a kill -9 loses no
//! acknowledged record.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
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

/// Produces `range` with acks=all, many in flight; returns the acknowledged offsets.
fn produce(b: &Broker, range: std::ops::Range<usize>) -> anyhow::Result<Vec<i64>> {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("acks", "all")
        .set("linger.ms", "2")
        .set("batch.size", "16384")
        .create()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let bodies: Vec<Vec<u8>> = range.map(payload).collect();
        let mut pending = Vec::new();
        for body in &bodies {
            pending.push(p.send(
                FutureRecord::<(), _>::to(TOPIC).payload(body).partition(0),
                TIMEOUT,
            ));
        }
        let mut offsets = Vec::new();
        for d in pending {
            offsets.push(d.await.map_err(|(e, _)| e)?.offset);
        }
        Ok(offsets)
    })
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

fn read_all(b: &Broker, n: usize) -> anyhow::Result<()> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", "experiments-reader")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)?;
    c.assign(&tpl)?;
    let started = Instant::now();
    let mut next = 0;
    while next < n {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m?;
            ensure!(
                m.offset() == next as i64,
                "offset {} after {next}",
                m.offset()
            );
            ensure!(
                m.payload() == Some(payload(next).as_slice()),
                "record {next} changed"
            );
            next += 1;
        }
        if started.elapsed() > TIMEOUT {
            bail!("read {next} of {n} records");
        }
    }
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
        let offsets = produce(&b, 0..RECORDS)?;
        ensure!(
            offsets == (0..RECORDS as i64).collect::<Vec<_>>(),
            "offsets out of order"
        );

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

        b.kill9()?;
        b.restart()?;
        read_all(&b, RECORDS)?;
        // The log goes on from where it was.
        let more = produce(&b, RECORDS..RECORDS + 10)?;
        ensure!(
            more == (RECORDS as i64..RECORDS as i64 + 10).collect::<Vec<_>>(),
            "{more:?}"
        );
        Ok(())
    })();
    if let Err(e) = result {
        panic!("{e:?}\n{}", b.stderr_tail());
    }
}
