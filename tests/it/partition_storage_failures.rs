//! Partition logs that cannot be created or opened, against the real `strata` binary.
//!
//! - CreateTopics and CreatePartitions commit the metadata records, and each replica
//!   creates its log as it applies them (as in Kafka): a partition whose log cannot be
//!   created (a regular file where its directory `<log.dirs>/<topic>-<n>` would go) is an
//!   offline replica here, the other partitions are served, and once the cause is gone a
//!   restart opens it.
//! - A partition whose log cannot be opened at start (its `.log` replaced by a directory) is
//!   offline: the broker serves everything else, Metadata shows the partition without a
//!   leader and with the replica in `offline_replicas`, ListOffsets answers
//!   KAFKA_STORAGE_ERROR, nothing in its directory is touched, and after a repair and a
//!   restart its records are back.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use rdkafka::admin::{NewPartitions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_tests::{Broker, wire, with_broker};

use crate::admin_client::{admin, admin_opts, block};

const TIMEOUT: Duration = Duration::from_secs(20);
/// Kafka's error codes, as they go over the wire.
const LEADER_NOT_AVAILABLE: i16 = 5;
const KAFKA_STORAGE_ERROR: i16 = 56;
/// The broker's `node.id` by default.
const NODE: i32 = 1;
/// Broker overrides: no auto-creation, so a Metadata request never creates what a test
/// checks is absent.
const OVERRIDES: &[(&str, &str)] = &[("auto.create.topics.enable", "false")];

/// Creates topics of `(name, partitions)` in one CreateTopics request; the result per name.
fn create_topics(
    b: &Broker,
    topics: &[(&str, i32)],
) -> anyhow::Result<BTreeMap<String, Result<(), RDKafkaErrorCode>>> {
    let a = admin(b);
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|(name, n)| NewTopic::new(name, *n, TopicReplication::Fixed(1)))
        .collect();
    let results = block(a.create_topics(&new, &admin_opts(TIMEOUT)))?;
    Ok(results
        .into_iter()
        .map(|r| match r {
            Ok(name) => (name, Ok(())),
            Err((name, code)) => (name, Err(code)),
        })
        .collect())
}

/// Grows `topic` to `count` partitions with CreatePartitions.
fn create_partitions(
    b: &Broker,
    topic: &str,
    count: usize,
) -> anyhow::Result<Result<(), RDKafkaErrorCode>> {
    let a = admin(b);
    let mut r =
        block(a.create_partitions(&[NewPartitions::new(topic, count)], &admin_opts(TIMEOUT)))?;
    Ok(r.remove(0).map(drop).map_err(|(_, code)| code))
}

/// Every topic the broker advertises, with its partition count.
fn advertised_topics(b: &Broker) -> anyhow::Result<BTreeMap<String, usize>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    let md = c.fetch_metadata(None, TIMEOUT)?;
    Ok(md
        .topics()
        .iter()
        .map(|t| (t.name().to_owned(), t.partitions().len()))
        .collect())
}

/// Produces `tag-0..tag-n` to one partition and checks each was acknowledged.
fn produce(b: &Broker, topic: &str, partition: i32, tag: &str, n: usize) -> anyhow::Result<()> {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("linger.ms", "0")
        .set("message.timeout.ms", "20000")
        .create()?;
    block(async {
        for i in 0..n {
            let value = format!("{tag}-{i}");
            let record = FutureRecord::<(), _>::to(topic)
                .payload(&value)
                .partition(partition);
            p.send(record, TIMEOUT)
                .await
                .map_err(|(e, _)| e)
                .with_context(|| format!("producing {value} to {topic}-{partition}"))?;
        }
        Ok(())
    })
}

/// Every value of one partition from the beginning, until `n` were read.
fn consume(b: &Broker, topic: &str, partition: i32, n: usize) -> anyhow::Result<Vec<String>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", "storage-failures-reader")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning)?;
    c.assign(&tpl)?;
    let started = Instant::now();
    let mut out = Vec::new();
    while out.len() < n {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m?;
            out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
        if started.elapsed() > TIMEOUT {
            bail!(
                "read {} of {n} records of {topic}-{partition}: {out:?}",
                out.len()
            );
        }
    }
    Ok(out)
}

fn values(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag}-{i}")).collect()
}

#[test]
fn a_partition_whose_log_cannot_be_created_is_offline_until_repaired() {
    with_broker(OVERRIDES, |b| {
        let data = b.data_dir().to_path_buf();
        // A regular file where partition 1's directory would go: mkdir fails, even as root.
        let obstacle = data.join("blocked-1");
        fs::write(&obstacle, b"not a partition")?;

        // The controller commits the topics; each replica creates its log as it applies
        // them (as in Kafka), so the creation succeeds and the one log that cannot be made
        // is an offline replica here.
        let results = create_topics(b, &[("blocked", 3), ("fine", 2)])?;
        ensure!(
            results["blocked"] == Ok(()),
            "blocked: {:?}",
            results["blocked"]
        );
        ensure!(results["fine"] == Ok(()), "fine: {:?}", results["fine"]);
        let topics = advertised_topics(b)?;
        ensure!(topics.get("blocked") == Some(&3), "advertised: {topics:?}");
        ensure!(topics.get("fine") == Some(&2), "advertised: {topics:?}");
        let offline = |b: &Broker| -> anyhow::Result<Vec<i32>> {
            Ok(metadata_v5(b, "blocked")?
                .into_iter()
                .filter(|p| p.offline_replicas == [NODE])
                .map(|p| p.index)
                .collect())
        };
        let deadline = Instant::now() + TIMEOUT;
        while offline(b)? != [1] {
            ensure!(
                Instant::now() < deadline,
                "blocked-1 never offline: {:?}",
                metadata_v5(b, "blocked")?
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let p1 = metadata_v5(b, "blocked")?.remove(1);
        ensure!(p1.leader == -1 || p1.error != 0, "blocked-1: {p1:?}");
        ensure!(
            fs::read(&obstacle)? == b"not a partition",
            "the obstacle is not ours"
        );
        // The other partitions are served.
        for p in [0, 2] {
            produce(b, "blocked", p, &format!("blocked{p}"), 5)?;
        }

        // CreatePartitions: the same, for a partition it adds.
        let obstacle3 = data.join("fine-3");
        fs::write(&obstacle3, b"not a partition")?;
        ensure!(
            create_partitions(b, "fine", 4)? == Ok(()),
            "CreatePartitions"
        );

        // Once the cause is gone, a restart opens every log and serves every partition.
        fs::remove_file(&obstacle)?;
        fs::remove_file(&obstacle3)?;
        b.stop()?;
        b.restart()?;
        ensure!(
            offline(b)?.is_empty(),
            "offline after repair: {:?}",
            offline(b)?
        );
        produce(b, "blocked", 1, "blocked1", 5)?;
        for p in 2..4 {
            produce(b, "fine", p, &format!("fine{p}"), 5)?;
        }
        for p in 0..2 {
            produce(b, "fine", p, &format!("fine{p}"), 5)?;
        }
        let served = [("blocked", 3), ("fine", 4)];
        for round in ["before", "after"] {
            if round == "after" {
                b.stop()?;
                b.restart()?;
            }
            for (topic, n) in served {
                for p in 0..n {
                    let tag = format!("{topic}{p}");
                    let got = consume(b, topic, p, 5)?;
                    ensure!(
                        got == values(&tag, 5),
                        "{round} restart, {topic}-{p}: {got:?}"
                    );
                }
            }
        }
        Ok(())
    });
}

/// Every file under `dir` with its bytes (directories as `None`), to show nothing changed.
fn snapshot(dir: &Path) -> anyhow::Result<BTreeMap<String, Option<Vec<u8>>>> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() {
            out.insert(name, None);
        } else {
            out.insert(name, Some(fs::read(entry.path())?));
        }
    }
    Ok(out)
}

/// A reader over a response body, for the fields the checks need.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
        ensure!(self.0.len() >= n, "response too short");
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i16(&mut self) -> anyhow::Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }
    fn i32(&mut self) -> anyhow::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }
    fn string(&mut self) -> anyhow::Result<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(String::from_utf8(self.take(len as usize)?.to_vec())?))
    }
    fn i32s(&mut self) -> anyhow::Result<Vec<i32>> {
        let n = self.i32()?;
        (0..n).map(|_| self.i32()).collect()
    }
}

/// One partition of a Metadata v5 response.
#[derive(Debug, PartialEq)]
struct PartitionMetadata {
    error: i16,
    index: i32,
    leader: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    offline_replicas: Vec<i32>,
}

/// Metadata v5 (the first with `offline_replicas`) for one topic, over a raw connection.
fn metadata_v5(b: &Broker, topic: &str) -> anyhow::Result<Vec<PartitionMetadata>> {
    let mut s = wire::connect(b.port());
    let mut body = wire::header(3, 5, 7);
    body.extend_from_slice(&1i32.to_be_bytes());
    wire::put_str(&mut body, topic);
    body.push(0); // allow_auto_topic_creation
    wire::send(&mut s, &body);
    let resp = wire::recv(&mut s).context("no Metadata response")?;
    let mut r = Reader(&resp);
    ensure!(r.i32()? == 7, "correlation id");
    r.i32()?; // throttle_time_ms
    for _ in 0..r.i32()? {
        r.i32()?; // node_id
        r.string()?; // host
        r.i32()?; // port
        r.string()?; // rack
    }
    r.string()?; // cluster_id
    r.i32()?; // controller_id
    ensure!(r.i32()? == 1, "one topic");
    let topic_error = r.i16()?;
    ensure!(topic_error == 0, "topic error {topic_error}");
    ensure!(r.string()?.as_deref() == Some(topic), "topic name");
    r.take(1)?; // is_internal
    let mut partitions = Vec::new();
    for _ in 0..r.i32()? {
        partitions.push(PartitionMetadata {
            error: r.i16()?,
            index: r.i32()?,
            leader: r.i32()?,
            replicas: r.i32s()?,
            isr: r.i32s()?,
            offline_replicas: r.i32s()?,
        });
    }
    partitions.sort_by_key(|p| p.index);
    Ok(partitions)
}

/// The error code of partition 0 of `topic` in a ListOffsets v1, Produce v3 and Fetch v4
/// request, each over a raw connection.
fn partition0_errors(b: &Broker, topic: &str) -> anyhow::Result<(i16, i16, i16)> {
    let mut s = wire::connect(b.port());
    wire::send(&mut s, &wire::list_offsets_request(1, topic, -1));
    let resp = wire::recv(&mut s).context("no ListOffsets response")?;
    let (list_offsets, _) = wire::list_offsets_result(&resp, topic);

    let batch = encode_batch(
        0,
        &[SimpleRecord {
            key: None,
            value: Some(Bytes::from_static(b"refused")),
            timestamp: 1_700_000_000_000,
            headers: vec![],
        }],
    );
    wire::send(&mut s, &wire::produce_request(2, topic, &batch));
    let resp = wire::recv(&mut s).context("no Produce response")?;
    let (produce, _) = wire::produce_result(&resp, topic);

    wire::send(&mut s, &wire::fetch_request(3, topic, 0, 0, 1));
    let resp = wire::recv(&mut s).context("no Fetch response")?;
    let mut r = Reader(&resp);
    ensure!(r.i32()? == 3, "correlation id");
    r.i32()?; // throttle_time_ms
    ensure!(r.i32()? == 1, "one topic");
    r.string()?;
    ensure!(r.i32()? == 1, "one partition");
    ensure!(r.i32()? == 0, "partition 0");
    let fetch = r.i16()?;
    Ok((list_offsets, produce, fetch))
}

#[test]
fn a_partition_that_cannot_be_opened_is_offline_and_the_rest_is_served() {
    with_broker(OVERRIDES, |b| {
        let data = b.data_dir().to_path_buf();
        let created = create_topics(b, &[("healthy", 1), ("broken", 2), ("doomed", 1)])?;
        ensure!(created.values().all(Result::is_ok), "{created:?}");
        produce(b, "healthy", 0, "h", 10)?;
        produce(b, "broken", 0, "b0", 10)?;
        produce(b, "broken", 1, "b1", 10)?;
        produce(b, "doomed", 0, "d", 3)?;
        ensure!(b.stop()?.success(), "clean stop");
        // A second broken partition, whose topic is deleted while it is offline.
        let doomed = data.join("doomed-0");
        fs::remove_file(doomed.join("00000000000000000000.log"))?;
        fs::create_dir(doomed.join("00000000000000000000.log"))?;

        // The segment file becomes a directory of the same name: opening it fails (EISDIR)
        // for any user, root included.
        let dir = data.join("broken-0");
        let segment = dir.join("00000000000000000000.log");
        let saved = data.parent().context("data dir parent")?.join("saved.log");
        fs::rename(&segment, &saved)?;
        fs::create_dir(&segment)?;
        let before = snapshot(&dir)?;

        b.restart()?;
        // The port accepts connections once it is bound, before the logs are opened: wait
        // (boundedly) for the line rather than read the log once.
        let logged = strata_tests::wait_until(
            "an error naming broken-0 in the broker's log",
            Duration::from_secs(15),
            Duration::from_millis(50),
            || {
                let log = fs::read_to_string(b.stderr_path())?;
                Ok(log.lines().any(|l| {
                    l.contains("ERROR") && l.contains("broken-0") && l.contains("Is a directory")
                }))
            },
        );
        ensure!(
            logged.is_ok(),
            "no error naming broken-0 and its cause in the broker's log"
        );

        // Everything else is served.
        produce(b, "healthy", 0, "h2", 5)?;
        produce(b, "broken", 1, "b1b", 5)?;
        let mut want = values("h", 10);
        want.extend(values("h2", 5));
        ensure!(consume(b, "healthy", 0, 15)? == want, "healthy-0");
        let mut want = values("b1", 10);
        want.extend(values("b1b", 5));
        ensure!(consume(b, "broken", 1, 15)? == want, "broken-1");

        // The offline partition, as Kafka's KRaft metadata cache shows a replica in an
        // offline log directory that no other replica could take over.
        let md = metadata_v5(b, "broken")?;
        let expected = vec![
            PartitionMetadata {
                error: LEADER_NOT_AVAILABLE,
                index: 0,
                leader: -1,
                replicas: vec![NODE],
                isr: vec![NODE],
                offline_replicas: vec![NODE],
            },
            PartitionMetadata {
                error: 0,
                index: 1,
                leader: NODE,
                replicas: vec![NODE],
                isr: vec![NODE],
                offline_replicas: vec![],
            },
        ];
        ensure!(md == expected, "Metadata v5: {md:?}");
        // librdkafka reads it the same way.
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .create()?;
        let md = c.fetch_metadata(Some("broken"), TIMEOUT)?;
        let p0 = md.topics()[0]
            .partitions()
            .iter()
            .find(|p| p.id() == 0)
            .context("partition 0")?;
        ensure!(p0.leader() == -1, "rdkafka leader {}", p0.leader());
        ensure!(
            p0.error() == Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE),
            "rdkafka error {:?}",
            p0.error()
        );

        // Requests for it fail and the broker stays up. ListOffsets, Produce and Fetch answer
        // as Kafka's ReplicaManager does for an offline partition.
        let (list_offsets, produce_code, fetch_code) = partition0_errors(b, "broken")?;
        ensure!(
            list_offsets == KAFKA_STORAGE_ERROR,
            "ListOffsets: {list_offsets}"
        );
        ensure!(
            produce_code == KAFKA_STORAGE_ERROR,
            "Produce to an offline partition: {produce_code}"
        );
        ensure!(
            fetch_code == KAFKA_STORAGE_ERROR,
            "Fetch from an offline partition: {fetch_code}"
        );
        ensure!(b.is_running(), "broker exited");
        ensure!(
            snapshot(&dir)? == before,
            "the offline partition's directory changed"
        );

        // Deleting the topic of an offline partition removes it, and the name can be used
        // again: the new topic is not offline.
        ensure!(
            metadata_v5(b, "doomed")?[0].error == LEADER_NOT_AVAILABLE,
            "doomed offline"
        );
        let a = admin(b);
        let deleted = block(a.delete_topics(&["doomed"], &admin_opts(TIMEOUT)))?;
        ensure!(
            deleted.iter().all(Result::is_ok),
            "DeleteTopics: {deleted:?}"
        );
        ensure!(
            !doomed.exists(),
            "the deleted offline partition's directory is still there"
        );
        let created = create_topics(b, &[("doomed", 1)])?;
        ensure!(created["doomed"] == Ok(()), "recreate: {created:?}");
        produce(b, "doomed", 0, "d2", 3)?;
        ensure!(
            consume(b, "doomed", 0, 3)? == values("d2", 3),
            "recreated doomed-0"
        );

        // A clean restart with the partition still broken changes nothing either.
        ensure!(b.stop()?.success(), "clean stop with an offline partition");
        // No clean-shutdown marker may vouch for a log that was never opened: once repaired,
        // it must be recovered.
        ensure!(
            !data.join(".kafka_cleanshutdown").exists(),
            "a clean stop with an offline partition wrote the clean-shutdown marker"
        );
        b.restart()?;
        ensure!(
            snapshot(&dir)? == before,
            "the offline partition's directory changed"
        );
        ensure!(metadata_v5(b, "broken")? == expected, "still offline");

        // Repaired, and restarted: the records are back and the partition takes more.
        ensure!(b.stop()?.success(), "clean stop");
        fs::remove_dir(&segment)?;
        fs::rename(&saved, &segment)?;
        b.restart()?;
        let md = metadata_v5(b, "broken")?;
        ensure!(
            md.iter()
                .all(|p| p.error == 0 && p.leader == NODE && p.offline_replicas.is_empty()),
            "after repair: {md:?}"
        );
        produce(b, "broken", 0, "b0b", 5)?;
        let mut want = values("b0", 10);
        want.extend(values("b0b", 5));
        ensure!(
            consume(b, "broken", 0, 15)? == want,
            "broken-0 after repair"
        );
        let mut want = values("h", 10);
        want.extend(values("h2", 5));
        ensure!(
            consume(b, "healthy", 0, 15)? == want,
            "healthy-0 after repair"
        );
        Ok(())
    });
}
