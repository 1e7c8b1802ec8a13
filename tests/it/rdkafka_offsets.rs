//! Committed offsets (OffsetCommit, OffsetFetch, OffsetDelete) against the real `strata`
//! binary, through librdkafka (the `rdkafka` crate) and, where librdkafka has no API, raw
//! frames.
//!
//! - `a_new_consumer_resumes_at_the_committed_offsets`: a sync commit, then a second consumer
//!   of the group starts exactly there.
//! - `a_subscribed_consumer_commits_and_its_successor_resumes`: a group member (JoinGroup,
//!   SyncGroup) commits its consumer state in its generation; the next member resumes there.
//! - `commits_survive_kill9`: offsets, leader epochs and metadata strings survive `kill -9`.
//! - `auto_offset_reset_applies_without_a_commit`: `latest` sees only later messages,
//!   `earliest` sees everything.
//! - `never_committed_partitions_answer_invalid`: OffsetFetch answers -1 (`Offset::Invalid`).
//! - `a_deleted_topics_offsets_go_with_it`: after DeleteTopics, a topic created again under the
//!   same name has no committed offsets, also after a `kill -9`; other topics keep theirs.
//! - `commit_errors_are_kafkas`: unknown partitions and oversized metadata.
//! - `offset_delete_deletes_and_persists`: OffsetDelete over raw frames, its error codes, and that it persists.
//! - `compaction_bounds_consumer_offsets`: 20,000 commits of three partitions keep
//!   `__consumer_offsets` small (the log cleaner compacts it, as any compacted topic, over
//!   1 MiB `offsets.topic.segment.bytes`), and the latest offsets are there after a restart.
//!
//! Apart from the subscribed test, consumers `assign` partitions and commit as "simple"
//! consumers (generation -1), which needs no group membership.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{Broker, wire, with_broker};

use crate::admin_client::block;

const TIMEOUT: Duration = Duration::from_secs(30);

fn create_topic(b: &Broker, name: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    let opts = AdminOptions::new().operation_timeout(Some(TIMEOUT));
    let r = block(admin.create_topics(
        &[NewTopic::new(name, partitions, TopicReplication::Fixed(1))],
        &opts,
    ))?;
    for res in r {
        res.map_err(|(t, e)| anyhow::anyhow!("create {t}: {e}"))?;
    }
    Ok(())
}

/// Produces `n` messages `"<tag>-<i>"` to `partition` and waits for all acks.
fn produce(b: &Broker, topic: &str, partition: i32, n: usize, tag: &str) -> anyhow::Result<()> {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("acks", "all")
        .set("linger.ms", "0")
        .create()?;
    for i in 0..n {
        let value = format!("{tag}-{i}");
        p.send(
            BaseRecord::<(), _>::to(topic)
                .partition(partition)
                .payload(&value),
        )
        .map_err(|(e, _)| e)?;
    }
    p.flush(TIMEOUT)?;
    Ok(())
}

fn consumer(b: &Broker, group: &str, reset: &str) -> anyhow::Result<BaseConsumer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", reset)
        .create()?)
}

/// Assigns every partition of `topic` at the committed offset (or the reset policy).
fn assign_stored(c: &BaseConsumer, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Stored)?;
    }
    c.assign(&tpl)?;
    Ok(())
}

/// Polls until `n` messages arrived, then a little longer to catch extras; returns
/// (partition, offset, value) in arrival order.
fn consume(c: &BaseConsumer, n: usize) -> anyhow::Result<Vec<(i32, i64, String)>> {
    let mut out = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while out.len() < n {
        ensure!(
            Instant::now() < deadline,
            "only {} of {n} messages within {TIMEOUT:?}: {out:?}",
            out.len()
        );
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let Some(m) = skip_eof(m)? else { continue };
            let v = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            out.push((m.partition(), m.offset(), v));
        }
    }
    let settle = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < settle {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let Some(m) = skip_eof(m)? else { continue };
            let v = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            out.push((m.partition(), m.offset(), v));
        }
    }
    Ok(out)
}

/// A message, `None` for the end-of-partition event (`enable.partition.eof`), or the error.
fn skip_eof<M>(m: Result<M, KafkaError>) -> Result<Option<M>, KafkaError> {
    match m {
        Ok(m) => Ok(Some(m)),
        Err(KafkaError::PartitionEOF(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Commits `offsets` (partition -> (offset, metadata)) synchronously.
fn commit(c: &BaseConsumer, topic: &str, offsets: &[(i32, i64, &str)]) -> Result<(), KafkaError> {
    let mut tpl = TopicPartitionList::new();
    for &(p, o, meta) in offsets {
        tpl.add_partition_offset(topic, p, Offset::Offset(o))?;
        tpl.find_partition(topic, p)
            .expect("just added")
            .set_metadata(meta);
    }
    c.commit(&tpl, CommitMode::Sync)
}

/// partition -> (offset, metadata, per-partition error) as OffsetFetch answers.
fn committed(
    c: &BaseConsumer,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<BTreeMap<i32, (Offset, String)>> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = c.committed_offsets(tpl, TIMEOUT)?;
    let mut out = BTreeMap::new();
    for e in got.elements() {
        e.error()?;
        out.insert(e.partition(), (e.offset(), e.metadata().to_owned()));
    }
    Ok(out)
}

#[test]
fn a_new_consumer_resumes_at_the_committed_offsets() {
    with_broker(&[], |b| {
        create_topic(b, "resume", 3)?;
        for p in 0..3 {
            produce(b, "resume", p, 10, &format!("p{p}"))?;
        }
        let first = consumer(b, "resumers", "earliest")?;
        assign_stored(&first, "resume", 3)?;
        let seen = consume(&first, 30)?;
        ensure!(seen.len() == 30, "first consumer saw {}", seen.len());
        commit(&first, "resume", &[(0, 4, ""), (1, 7, "m1"), (2, 10, "")])?;
        drop(first);

        let second = consumer(b, "resumers", "earliest")?;
        let c = committed(&second, "resume", 3)?;
        ensure!(
            c[&0].0 == Offset::Offset(4) && c[&1].0 == Offset::Offset(7),
            "{c:?}"
        );
        ensure!(c[&2].0 == Offset::Offset(10) && c[&1].1 == "m1", "{c:?}");
        assign_stored(&second, "resume", 3)?;
        let mut seen = consume(&second, 9)?;
        seen.sort();
        let want: Vec<(i32, i64, String)> = (4..10)
            .map(|o| (0, o, format!("p0-{o}")))
            .chain((7..10).map(|o| (1, o, format!("p1-{o}"))))
            .collect();
        ensure!(seen == want, "resumed at the wrong place: {seen:?}");
        Ok(())
    });
}

#[test]
fn a_subscribed_consumer_commits_and_its_successor_resumes() {
    with_broker(&[("group.initial.rebalance.delay.ms", "0")], |b| {
        create_topic(b, "grouped", 3)?;
        for p in 0..3 {
            produce(b, "grouped", p, 10, &format!("g{p}"))?;
        }
        let member = |b: &Broker| -> anyhow::Result<BaseConsumer> {
            let c: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", b.bootstrap())
                .set("group.id", "subscribers")
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .set("session.timeout.ms", "10000")
                .create()?;
            c.subscribe(&["grouped"])?;
            Ok(c)
        };
        let first = member(b)?;
        let mut seen = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        while seen.len() < 12 {
            ensure!(Instant::now() < deadline, "first member saw only {seen:?}");
            if let Some(m) = first.poll(Duration::from_millis(200)) {
                let m = m?;
                seen.push((m.partition(), m.offset()));
            }
        }
        // Commits the position after each consumed message, in the group's generation.
        first.commit_consumer_state(CommitMode::Sync)?;
        drop(first); // leaves the group

        let second = member(b)?;
        let rest = consume(&second, 30 - seen.len())?;
        let mut all: Vec<(i32, i64)> = seen
            .into_iter()
            .chain(rest.iter().map(|(p, o, _)| (*p, *o)))
            .collect();
        all.sort_unstable();
        let want: Vec<(i32, i64)> = (0..3).flat_map(|p| (0..10).map(move |o| (p, o))).collect();
        ensure!(
            all == want,
            "the two members together did not see each message once: {all:?}"
        );
        Ok(())
    });
}

#[test]
fn commits_survive_kill9() {
    with_broker(&[], |b| {
        create_topic(b, "durable", 2)?;
        produce(b, "durable", 0, 20, "d0")?;
        produce(b, "durable", 1, 20, "d1")?;
        let c = consumer(b, "survivors", "earliest")?;
        commit(&c, "durable", &[(0, 3, "first"), (1, 5, "")])?;
        commit(
            &c,
            "durable",
            &[(0, 12, "checkpoint ☃ 12"), (1, 17, "seventeen")],
        )?;
        // Another group on the same node, so replay rebuilds more than one group.
        let other = consumer(b, "bystanders", "earliest")?;
        commit(&other, "durable", &[(0, 1, "x")])?;
        drop((c, other));

        b.kill9()?;
        b.restart()?;

        let c = consumer(b, "survivors", "earliest")?;
        let got = committed(&c, "durable", 2)?;
        ensure!(
            got[&0] == (Offset::Offset(12), "checkpoint ☃ 12".to_owned()),
            "{got:?}"
        );
        ensure!(
            got[&1] == (Offset::Offset(17), "seventeen".to_owned()),
            "{got:?}"
        );
        assign_stored(&c, "durable", 2)?;
        let mut seen = consume(&c, 11)?;
        seen.sort();
        let want: Vec<(i32, i64, String)> = (12..20)
            .map(|o| (0, o, format!("d0-{o}")))
            .chain((17..20).map(|o| (1, o, format!("d1-{o}"))))
            .collect();
        ensure!(seen == want, "after kill -9: {seen:?}");
        let other = consumer(b, "bystanders", "earliest")?;
        let got = committed(&other, "durable", 2)?;
        ensure!(got[&0] == (Offset::Offset(1), "x".to_owned()), "{got:?}");
        ensure!(got[&1].0 == Offset::Invalid, "{got:?}");
        Ok(())
    });
}

#[test]
fn auto_offset_reset_applies_without_a_commit() {
    with_broker(&[], |b| {
        create_topic(b, "reset", 1)?;
        produce(b, "reset", 0, 5, "old")?;

        let latest: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .set("group.id", "late-joiners")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "latest")
            .set("enable.partition.eof", "true")
            .create()?;
        assign_stored(&latest, "reset", 1)?;
        // PARTITION_EOF says the fetcher reached the end: the reset to "latest" has happened,
        // so "later" is well defined.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            ensure!(
                Instant::now() < deadline,
                "no PARTITION_EOF within {TIMEOUT:?}"
            );
            match latest.poll(Duration::from_millis(200)) {
                Some(Err(KafkaError::PartitionEOF(0))) => break,
                Some(Ok(m)) => {
                    anyhow::bail!("latest consumer got an old message at {}", m.offset())
                }
                _ => {}
            }
        }
        produce(b, "reset", 0, 3, "new")?;
        let seen = consume(&latest, 3)?;
        let values: Vec<&str> = seen.iter().map(|(_, _, v)| v.as_str()).collect();
        ensure!(values == ["new-0", "new-1", "new-2"], "latest saw {seen:?}");
        ensure!(seen[0].1 == 5, "{seen:?}");

        let earliest = consumer(b, "archivists", "earliest")?;
        assign_stored(&earliest, "reset", 1)?;
        let seen = consume(&earliest, 8)?;
        let offsets: Vec<i64> = seen.iter().map(|(_, o, _)| *o).collect();
        ensure!(
            offsets == (0..8).collect::<Vec<_>>(),
            "earliest saw {seen:?}"
        );
        Ok(())
    });
}

#[test]
fn never_committed_partitions_answer_invalid() {
    with_broker(&[], |b| {
        create_topic(b, "sparse", 3)?;
        let c = consumer(b, "sparse-group", "earliest")?;
        let got = committed(&c, "sparse", 3)?;
        ensure!(
            got.values()
                .all(|(o, m)| *o == Offset::Invalid && m.is_empty()),
            "{got:?}"
        );
        commit(&c, "sparse", &[(1, 0, "")])?;
        let got = committed(&c, "sparse", 3)?;
        ensure!(got[&0].0 == Offset::Invalid, "{got:?}");
        ensure!(got[&1].0 == Offset::Offset(0), "{got:?}");
        ensure!(got[&2].0 == Offset::Invalid, "{got:?}");
        Ok(())
    });
}

#[test]
fn a_deleted_topics_offsets_go_with_it() {
    with_broker(&[], |b| {
        create_topic(b, "doomed", 2)?;
        create_topic(b, "kept", 1)?;
        let c = consumer(b, "doomed-group", "earliest")?;
        commit(&c, "doomed", &[(0, 5, "m"), (1, 7, "")])?;
        commit(&c, "kept", &[(0, 3, "")])?;
        drop(c);
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .create()?;
        let opts = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        for r in block(admin.delete_topics(&["doomed"], &opts))? {
            r.map_err(|(t, e)| anyhow::anyhow!("delete {t}: {e}"))?;
        }
        create_topic(b, "doomed", 2)?;
        let check = |b: &Broker| -> anyhow::Result<()> {
            let c = consumer(b, "doomed-group", "earliest")?;
            let got = committed(&c, "doomed", 2)?;
            ensure!(
                got.values().all(|(o, _)| *o == Offset::Invalid),
                "the deleted topic's offsets are still there: {got:?}"
            );
            let kept = committed(&c, "kept", 1)?;
            ensure!(kept[&0].0 == Offset::Offset(3), "{kept:?}");
            Ok(())
        };
        check(b)?;
        b.kill9()?;
        b.restart()?;
        check(b)
    });
}

#[test]
fn commit_errors_are_kafkas() {
    with_broker(&[("offset.metadata.max.bytes", "10")], |b| {
        create_topic(b, "strict", 1)?;
        let c = consumer(b, "strict-group", "earliest")?;
        let err = commit(&c, "strict", &[(0, 1, "eleven char")]).unwrap_err();
        ensure!(
            err.rdkafka_error_code() == Some(RDKafkaErrorCode::OffsetMetadataTooLarge),
            "{err:?}"
        );
        commit(&c, "strict", &[(0, 2, "ten chars.")])?;
        let err = commit(&c, "strict", &[(5, 1, "")]).unwrap_err();
        ensure!(
            err.rdkafka_error_code() == Some(RDKafkaErrorCode::UnknownTopicOrPartition),
            "{err:?}"
        );
        let got = committed(&c, "strict", 1)?;
        ensure!(
            got[&0] == (Offset::Offset(2), "ten chars.".to_owned()),
            "{got:?}"
        );
        Ok(())
    });
}

/// An OffsetDelete answer: the group error and (topic, partition, error) per partition.
type DeleteResult = (i16, Vec<(String, i32, i16)>);

/// An OffsetDelete v0 request.
fn offset_delete_request(corr: i32, group: &str, topics: &[(&str, &[i32])]) -> Vec<u8> {
    let mut body = wire::header(47, 0, corr);
    wire::put_str(&mut body, group);
    body.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for (name, parts) in topics {
        wire::put_str(&mut body, name);
        body.extend_from_slice(&(parts.len() as i32).to_be_bytes());
        for p in *parts {
            body.extend_from_slice(&p.to_be_bytes());
        }
    }
    body
}

/// (group error, [(topic, partition, error)]) of an OffsetDelete v0 response.
fn offset_delete_result(resp: &[u8]) -> anyhow::Result<DeleteResult> {
    let mut r = Cursor(resp);
    let _correlation_id = r.i32()?;
    let error = r.i16()?;
    let _throttle = r.i32()?;
    let mut out = Vec::new();
    for _ in 0..r.i32()? {
        let name = r.string()?;
        for _ in 0..r.i32()? {
            let p = r.i32()?;
            out.push((name.clone(), p, r.i16()?));
        }
    }
    ensure!(r.0.is_empty(), "{} trailing bytes", r.0.len());
    Ok((error, out))
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
        ensure!(self.0.len() >= n, "response truncated");
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn i16(&mut self) -> anyhow::Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }
    fn i32(&mut self) -> anyhow::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }
    fn string(&mut self) -> anyhow::Result<String> {
        let n = usize::try_from(self.i16()?)?;
        Ok(String::from_utf8(self.take(n)?.to_vec())?)
    }
}

fn send_offset_delete(
    b: &Broker,
    group: &str,
    topics: &[(&str, &[i32])],
) -> anyhow::Result<DeleteResult> {
    let mut s = wire::connect(b.port());
    wire::send(&mut s, &offset_delete_request(7, group, topics));
    let resp = wire::recv(&mut s).context("broker closed the connection")?;
    ensure!(wire::correlation_id(&resp) == 7);
    offset_delete_result(&resp)
}

#[test]
fn offset_delete_deletes_and_persists() {
    with_broker(&[], |b| {
        create_topic(b, "pruned", 2)?;
        let c = consumer(b, "pruners", "earliest")?;
        commit(&c, "pruned", &[(0, 10, "a"), (1, 20, "b")])?;

        let (err, parts) =
            send_offset_delete(b, "pruners", &[("pruned", &[0]), ("nonesuch", &[0])])?;
        ensure!(err == 0, "group error {err}");
        ensure!(
            parts == [("pruned".into(), 0, 0), ("nonesuch".into(), 0, 3)],
            "{parts:?}"
        );
        let got = committed(&c, "pruned", 2)?;
        ensure!(got[&0].0 == Offset::Invalid, "{got:?}");
        ensure!(got[&1] == (Offset::Offset(20), "b".to_owned()), "{got:?}");

        // GROUP_ID_NOT_FOUND (69) for a group with nothing stored; INVALID_GROUP_ID (24).
        let (err, parts) = send_offset_delete(b, "strangers", &[("pruned", &[0])])?;
        ensure!(err == 69 && parts.is_empty(), "{err} {parts:?}");
        let (err, _) = send_offset_delete(b, "", &[("pruned", &[0])])?;
        ensure!(err == 24, "{err}");

        let status = b.stop()?;
        ensure!(status.success(), "{status}");
        b.restart()?;
        let c = consumer(b, "pruners", "earliest")?;
        let got = committed(&c, "pruned", 2)?;
        ensure!(
            got[&0].0 == Offset::Invalid,
            "deletion lost on restart: {got:?}"
        );
        ensure!(got[&1].0 == Offset::Offset(20), "{got:?}");
        Ok(())
    });
}

/// An OffsetCommit v2 request: a simple commit (generation -1, no member) of one offset.
fn offset_commit_request(
    corr: i32,
    group: &str,
    topic: &str,
    p: i32,
    offset: i64,
    meta: &str,
) -> Vec<u8> {
    let mut body = wire::header(8, 2, corr);
    wire::put_str(&mut body, group);
    body.extend_from_slice(&(-1i32).to_be_bytes()); // generation
    wire::put_str(&mut body, ""); // member id
    body.extend_from_slice(&(-1i64).to_be_bytes()); // retention: the broker's
    body.extend_from_slice(&1i32.to_be_bytes());
    wire::put_str(&mut body, topic);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&p.to_be_bytes());
    body.extend_from_slice(&offset.to_be_bytes());
    wire::put_str(&mut body, meta);
    body
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let path = e.path();
            total += if path.is_dir() {
                dir_size(&path)
            } else {
                e.metadata().map_or(0, |m| m.len())
            };
        }
    }
    total
}

/// Bytes in every `__consumer_offsets-*` directory.
fn offsets_topic_size(data: &Path) -> u64 {
    std::fs::read_dir(data)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("__consumer_offsets-")
                })
                .map(|e| dir_size(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn compaction_bounds_consumer_offsets() {
    const COMMITS: usize = 20_000;
    const WINDOW: usize = 32;
    // ~1 KiB per record: 20,000 commits would be ~22 MB without compaction. The active
    // segment (1 MiB) is never cleaned; the rest waits for the cleaner's next round. The
    // commits arrive at tens of MB/s, so the rounds are 10 ms apart.
    const BOUND: u64 = 4 << 20;
    let overrides = [
        ("offsets.topic.segment.bytes", "1048576"),
        ("log.cleaner.backoff.ms", "10"),
    ];
    with_broker(&overrides, |b| {
        create_topic(b, "busy", 3)?;
        let meta = "m".repeat(1000);
        let mut s = wire::connect(b.port());
        let started = Instant::now();
        let mut sent = 0;
        let mut received = 0;
        while received < COMMITS {
            // Keep a bounded window of requests in flight on one connection.
            while sent < COMMITS && sent - received < WINDOW {
                let req = offset_commit_request(
                    sent as i32,
                    "busy-group",
                    "busy",
                    (sent % 3) as i32,
                    sent as i64,
                    &meta,
                );
                let mut frame = (req.len() as i32).to_be_bytes().to_vec();
                frame.extend_from_slice(&req);
                s.write_all(&frame)?;
                sent += 1;
            }
            let mut len = [0u8; 4];
            s.read_exact(&mut len)?;
            let mut resp = vec![0u8; i32::from_be_bytes(len) as usize];
            s.read_exact(&mut resp)?;
            ensure!(
                wire::correlation_id(&resp) == received as i32,
                "out of order"
            );
            // corr(4) topics(4) name(2+4) partitions(4) index(4) error(2)
            let error = i16::from_be_bytes([resp[22], resp[23]]);
            ensure!(error == 0, "commit {received} failed with {error}");
            received += 1;
            ensure!(
                started.elapsed() < Duration::from_secs(240),
                "too slow: {received} commits"
            );
            if received % 5_000 == 0 {
                let size = offsets_topic_size(b.data_dir());
                ensure!(
                    size < BOUND,
                    "__consumer_offsets is {size} bytes after {received} commits"
                );
            }
        }
        let size = offsets_topic_size(b.data_dir());
        ensure!(
            size < BOUND,
            "__consumer_offsets is {size} bytes after {COMMITS} commits"
        );
        ensure!(size > 0, "nothing on disk");

        b.kill9()?;
        b.restart()?;
        let c = consumer(b, "busy-group", "earliest")?;
        let got = committed(&c, "busy", 3)?;
        for p in 0..3 {
            let last = (0..COMMITS).rev().find(|i| i % 3 == p as usize).unwrap() as i64;
            ensure!(
                got[&p] == (Offset::Offset(last), meta.clone()),
                "partition {p}: {:?}",
                got[&p].0
            );
        }
        Ok(())
    });
}
