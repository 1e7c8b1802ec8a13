//! A clean shutdown leaves Kafka's `.kafka_cleanshutdown` marker, and the next start trusts
//! the active segments' indexes instead of rescanning them; a `kill -9` leaves no marker and
//! the next start recovers. Either way every record, offset and timestamp lookup is as before.

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{Broker, with_broker};

use crate::rdkafka_clients;

const TOPIC: &str = "clean";
const TIMEOUT: Duration = Duration::from_secs(30);

/// Record timestamps: `BASE_TS + value`, recent enough that retention keeps them.
fn base_ts() -> i64 {
    static BASE: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        i64::try_from(now).unwrap_or(i64::MAX) - 3_600_000
    })
}

/// Produces `values` with timestamps `base_ts() + value`; returns their offsets.
fn produce(b: &Broker, values: std::ops::Range<i64>) -> anyhow::Result<Vec<i64>> {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("linger.ms", "0")
        .create()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut offsets = Vec::new();
    for v in values {
        let payload = v.to_string();
        let record = FutureRecord::<(), _>::to(TOPIC)
            .payload(&payload)
            .partition(0)
            .timestamp(base_ts() + v);
        let delivery = rt.block_on(p.send(record, TIMEOUT)).map_err(|(e, _)| e)?;
        offsets.push(delivery.offset);
    }
    Ok(offsets)
}

/// Every (offset, value) from the beginning, until `n` are read.
fn read_all(b: &Broker, n: usize) -> anyhow::Result<Vec<(i64, i64)>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", "clean-reader")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)?;
    c.assign(&tpl)?;
    let started = Instant::now();
    let mut out = Vec::new();
    while out.len() < n {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m?;
            let v: i64 = std::str::from_utf8(m.payload().unwrap_or_default())?.parse()?;
            out.push((m.offset(), v));
        }
        if started.elapsed() > TIMEOUT {
            bail!("read {} of {n} records", out.len());
        }
    }
    // The timestamp index: the first record at or after a timestamp.
    let mut query = TopicPartitionList::new();
    query.add_partition_offset(TOPIC, 0, Offset::Offset(base_ts() + 250))?;
    let found = c.offsets_for_times(query, TIMEOUT)?;
    let at = found
        .find_partition(TOPIC, 0)
        .context("no answer for the timestamp")?
        .offset();
    ensure!(
        at == Offset::Offset(250),
        "timestamp lookup answered {at:?}"
    );
    Ok(out)
}

fn clean_starts(b: &Broker) -> usize {
    std::fs::read_to_string(b.stderr_path())
        .unwrap_or_default()
        .matches("clean shutdown marker found")
        .count()
}

#[test]
fn a_clean_restart_skips_recovery_and_a_crash_does_not() {
    // Small index interval: the indexes have many entries to trust or rebuild.
    with_broker(&[("log.index.interval.bytes", "512")], |b| {
        rdkafka_clients::create_topic(b, TOPIC, 1)?;
        let offsets = produce(b, 0..500)?;
        ensure!(offsets == (0..500).collect::<Vec<_>>(), "{offsets:?}");
        let marker = b.data_dir().join(".kafka_cleanshutdown");

        b.stop()?;
        ensure!(marker.exists(), "no marker after a clean shutdown");
        b.restart()?;
        // The listener is bound (and `restart` returns) before the data directory is
        // opened, which is when the marker goes and, just after, the start logs that it
        // used it: wait for both, boundedly.
        strata_tests::wait_until(
            "the start uses and removes the marker",
            Duration::from_secs(10),
            Duration::from_millis(20),
            || Ok(!marker.exists() && clean_starts(b) == 1),
        )?;
        let all = read_all(b, 500)?;
        ensure!(
            all == (0..500).map(|i| (i, i)).collect::<Vec<_>>(),
            "records moved after a clean restart"
        );
        let more = produce(b, 500..510)?;
        ensure!(more == (500..510).collect::<Vec<_>>(), "{more:?}");

        b.kill9()?;
        ensure!(!marker.exists(), "a marker after kill -9");
        b.restart()?;
        // Read first: by then the logs are open, so the marker check has been made.
        let all = read_all(b, 510)?;
        ensure!(clean_starts(b) == 1, "a crash start used a marker");
        ensure!(
            all == (0..510).map(|i| (i, i)).collect::<Vec<_>>(),
            "records moved after a crash restart"
        );
        Ok(())
    });
}
