//! Replication under repeated faults: three real `strata` processes on 127.0.0.1, a topic with
//! replication factor 3 and `min.insync.replicas=2`, and idempotent acks=all rdkafka producers
//! writing numbered messages while a bounded loop injects faults:
//!
//! - **leader kills**: kill -9 of the current leader of one partition after another, a wait
//!   for its new leader, the restart of the killed node and a wait for it to be back in every
//!   ISR;
//! - **stopped followers**: SIGSTOP of a node that follows partitions (not the active
//!   controller), for a short time or longer than `replica.lag.time.max.ms` so that its
//!   leaders shrink it out of their ISRs, then SIGCONT and a wait for it to rejoin;
//! - **isolated leaders**: the links between nodes go through loopback proxies
//!   ([`ProxiedCluster`]); the current leader of one partition after another is cut off
//!   from the other nodes (followers cannot fetch from it, no controller link either way)
//!   while its clients still reach it, until another node leads the partition and a little
//!   longer; then the links are healed and the test waits for it to be back in every ISR.
//!   Meanwhile the cut-off node believes it still leads and takes produces: none of them
//!   may be acknowledged, since no follower has them.
//!
//! Each message's key names its producer and partition, and its payload is its sequence number
//! for that pair. Delivery reports record each acknowledged `(partition, offset, sequence)`.
//! At the end a consumer reads every partition from the beginning to its high watermark, and
//! the checks are: every acknowledged message is at its acknowledged offset (no loss), no
//! `(producer, partition, sequence)` is in the log twice (idempotence), and each producer's
//! sequences rise with the offsets of each partition (order). Each test prints the faults
//! injected and the messages checked as `measured: ...` lines.
//!
//! The tests run one at a time; every loop and wait is bounded in count and time.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use strata_tests::cluster::{Cluster, Metadata, ProxiedCluster};
use strata_tests::{serial, strata_bin};

use crate::admin_client::{admin_opts, block};

/// The topic every test writes.
const TOPIC: &str = "faults";
/// Its partitions.
const PARTITIONS: i32 = 3;
/// The bound on the first election and the brokers' registration.
const ELECTION: Duration = Duration::from_secs(30);
/// The bound on a metadata change once its cause has happened (a new leader after a kill).
const MARGIN: Duration = Duration::from_secs(20);
/// The bound on a restarted or resumed node catching up and rejoining every ISR.
const REJOIN: Duration = Duration::from_secs(45);
/// How long the producers may take to deliver what is queued once the faults are over.
const FLUSH: Duration = Duration::from_secs(60);
/// How long the final read may take.
const READ: Duration = Duration::from_secs(60);
/// The producers' `message.timeout.ms`: longer than any fault, so that a message is only
/// reported failed if the cluster stayed unavailable far longer than the test injects.
const MESSAGE_TIMEOUT_MS: &str = "120000";
/// The pause between two rounds of one message per partition, per producer.
const SEND_PAUSE: Duration = Duration::from_millis(4);

/// Starts three nodes and waits for their controller and for all three brokers.
fn start_cluster(settings: &[(&str, &str)]) -> Cluster {
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let c = Cluster::start(3, settings);
    c.wait_ready(ELECTION);
    c
}

/// Whether every partition of the topic has a leader and all three replicas in its ISR.
fn whole(m: &Metadata) -> bool {
    let p = m.partitions(TOPIC);
    p.len() == usize::try_from(PARTITIONS).unwrap()
        && p.values()
            .all(|p| p.error == 0 && p.leader >= 0 && p.isr.len() == 3)
}

/// Creates the topic (replication factor 3, `min.insync.replicas=2`) through the rdkafka
/// admin client and waits until node `observer` sees it whole.
fn create_topic(c: &Cluster, observer: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap(&c.ids()))
        .create()
        .expect("admin client");
    let topic = NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(3))
        .set("min.insync.replicas", "2");
    let results = block(admin.create_topics([&topic], &admin_opts(MARGIN)))
        .unwrap_or_else(|e| panic!("CreateTopics: {e}"));
    for r in results {
        r.unwrap_or_else(|(name, code)| panic!("CreateTopics {name}: {code:?}"));
    }
    c.wait_metadata(observer, "the topic led with 3 in sync", MARGIN, whole)
        .unwrap_or_else(|e| panic!("{e:?}"));
}

/// One acknowledged message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ack {
    partition: i32,
    offset: i64,
    /// `<producer>-<partition>`.
    key: String,
    /// The message's number for its key.
    seq: u64,
}

/// What a producer's delivery reports said.
#[derive(Default)]
struct Reports {
    /// Every acknowledged message.
    acked: Mutex<Vec<Ack>>,
    /// Failed deliveries, by error (the messages may or may not be in the log).
    failed: Mutex<BTreeMap<String, u64>>,
    /// Reports of any kind.
    reports: AtomicU64,
}

/// The producer's context: records the reports.
struct Recorder(Arc<Reports>);

/// Transport errors while a node is down are expected; a fatal idempotence error is read
/// with `fatal_error()` once the load is over.
impl ClientContext for Recorder {
    fn log(&self, _: RDKafkaLogLevel, _: &str, _: &str) {}

    fn error(&self, _: KafkaError, _: &str) {}
}

/// The key and sequence of a message as the producers write them.
fn parse(key: Option<&[u8]>, payload: Option<&[u8]>) -> Option<(String, u64)> {
    let key = String::from_utf8(key?.to_vec()).ok()?;
    let seq = std::str::from_utf8(payload?).ok()?.parse().ok()?;
    Some((key, seq))
}

impl ProducerContext for Recorder {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, (): ()) {
        self.0.reports.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(m) => {
                let (key, seq) = parse(m.key(), m.payload()).expect("a message of this test");
                self.0.acked.lock().unwrap().push(Ack {
                    partition: m.partition(),
                    offset: m.offset(),
                    key,
                    seq,
                });
            }
            Err((e, _)) => {
                *self
                    .0
                    .failed
                    .lock()
                    .unwrap()
                    .entry(e.to_string())
                    .or_default() += 1;
            }
        }
    }
}

/// Producers writing numbered messages to every partition from their own threads until
/// stopped.
struct Load {
    /// Tells the sending threads to stop.
    stop: Arc<AtomicBool>,
    /// The sending threads; each returns how many messages it sent.
    threads: Vec<thread::JoinHandle<u64>>,
    /// Each producer's name, client and reports.
    producers: Vec<(String, Arc<ThreadedProducer<Recorder>>, Arc<Reports>)>,
}

impl Load {
    /// Starts `n` idempotent acks=all producers bootstrapped at `bootstrap`.
    fn start(bootstrap: &str, n: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut producers = Vec::new();
        for i in 0..n {
            let name = format!("p{i}");
            let reports = Arc::new(Reports::default());
            let producer: ThreadedProducer<Recorder> = ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("enable.idempotence", "true")
                .set("acks", "all")
                .set("linger.ms", "5")
                .set("batch.num.messages", "200")
                .set("message.timeout.ms", MESSAGE_TIMEOUT_MS)
                .set("topic.metadata.refresh.interval.ms", "1000")
                .set("retry.backoff.ms", "100")
                .set("reconnect.backoff.ms", "50")
                .set("reconnect.backoff.max.ms", "500")
                .create_with_context(Recorder(reports.clone()))
                .expect("producer");
            let producer = Arc::new(producer);
            let (p, s, id) = (producer.clone(), stop.clone(), name.clone());
            threads.push(thread::spawn(move || send_until(&p, &s, &id)));
            producers.push((name, producer, reports));
        }
        Load {
            stop,
            threads,
            producers,
        }
    }

    /// Stops sending, waits (bounded) for the reports of everything sent, and returns the
    /// acknowledged messages, the number sent, the failures and librdkafka's errors.
    fn finish(self) -> Outcome {
        self.stop.store(true, Ordering::Relaxed);
        let mut sent = 0;
        for t in self.threads {
            sent += t.join().expect("a producing thread");
        }
        let mut out = Outcome {
            sent,
            ..Outcome::default()
        };
        for (name, producer, reports) in self.producers {
            if let Err(e) = producer.flush(FLUSH) {
                out.errors.push(format!("{name}: flush: {e}"));
            }
            if let Some(fatal) = producer.client().fatal_error() {
                out.errors.push(format!("{name}: fatal: {fatal:?}"));
            }
            drop(producer);
            out.acked.extend(reports.acked.lock().unwrap().drain(..));
            for (e, n) in reports.failed.lock().unwrap().iter() {
                *out.failed.entry(e.clone()).or_default() += n;
            }
        }
        out
    }
}

/// What the producers reported.
#[derive(Default)]
struct Outcome {
    /// Messages handed to the producers.
    sent: u64,
    /// The acknowledged ones.
    acked: Vec<Ack>,
    /// Failed deliveries by error.
    failed: BTreeMap<String, u64>,
    /// Fatal errors (an idempotent producer gives up on a sequence gap) and failed flushes.
    errors: Vec<String>,
}

/// Sends one message per partition, then pauses, until `stop`; returns how many were sent.
fn send_until(p: &ThreadedProducer<Recorder>, stop: &AtomicBool, name: &str) -> u64 {
    let mut next = vec![0u64; usize::try_from(PARTITIONS).unwrap()];
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) {
        for partition in 0..PARTITIONS {
            let key = format!("{name}-{partition}");
            let seq = &mut next[usize::try_from(partition).unwrap()];
            let value = seq.to_string();
            let mut record = BaseRecord::to(TOPIC)
                .partition(partition)
                .key(&key)
                .payload(&value);
            // A full queue (the partition has no leader yet) waits, boundedly: the
            // message.timeout.ms of what is queued bounds it.
            let deadline = Instant::now() + Duration::from_secs(150);
            loop {
                match p.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                        if Instant::now() < deadline && !stop.load(Ordering::Relaxed) =>
                    {
                        record = r;
                        thread::sleep(Duration::from_millis(5));
                    }
                    Err((e, _)) => {
                        eprintln!("{name}: not sent: {e}");
                        return sent;
                    }
                }
            }
            *seq += 1;
            sent += 1;
        }
        thread::sleep(SEND_PAUSE);
    }
    sent
}

/// Reads every partition from the beginning to its high watermark at the time of the call.
fn read_all(bootstrap: &str) -> BTreeMap<i32, Vec<(i64, String, u64)>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "cluster-faults-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_uncommitted")
        .create()
        .expect("consumer");
    let mut ends = BTreeMap::new();
    let deadline = Instant::now() + READ;
    for partition in 0..PARTITIONS {
        // A leader may still be moving: ask again, boundedly.
        let high = loop {
            match consumer.fetch_watermarks(TOPIC, partition, Duration::from_secs(10)) {
                Ok((_, high)) => break high,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("watermarks of partition {partition}: {e}");
                    thread::sleep(Duration::from_millis(500));
                }
                Err(e) => panic!("watermarks of partition {partition}: {e}"),
            }
        };
        ends.insert(partition, high);
    }
    let mut tpl = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, partition, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).expect("assign");
    let mut read: BTreeMap<i32, Vec<(i64, String, u64)>> = BTreeMap::new();
    let done = |read: &BTreeMap<i32, Vec<(i64, String, u64)>>| {
        ends.iter().all(|(p, &end)| {
            end == 0
                || read
                    .get(p)
                    .and_then(|v| v.last())
                    .is_some_and(|l| l.0 + 1 >= end)
        })
    };
    let deadline = Instant::now() + READ;
    while !done(&read) {
        assert!(
            Instant::now() < deadline,
            "read back short of the high watermarks {ends:?} within {READ:?}: read to {:?}",
            read.iter()
                .map(|(p, v)| (p, v.last().map(|l| l.0)))
                .collect::<Vec<_>>()
        );
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let (key, seq) = parse(m.key(), m.payload()).unwrap_or_else(|| {
                    panic!("a foreign record at {}:{}", m.partition(), m.offset())
                });
                read.entry(m.partition())
                    .or_default()
                    .push((m.offset(), key, seq));
            }
            Some(Err(e)) => eprintln!("consumer: {e}"),
            None => {}
        }
    }
    for (p, v) in &mut read {
        v.retain(|r| r.0 < ends[p]);
    }
    read
}

/// What the read-back found wrong.
#[derive(Debug, Default)]
struct Verdict {
    /// Records read.
    read: usize,
    /// Acknowledged messages checked.
    acked: usize,
    /// Acknowledged messages not at their offset.
    lost: Vec<String>,
    /// `(key, sequence)` found more than once.
    duplicates: Vec<String>,
    /// A producer's sequence not rising with the offsets of a partition.
    out_of_order: Vec<String>,
    /// Acknowledged twice.
    acked_twice: usize,
}

/// Checks the log against the acknowledgements: no loss, no duplicates, order.
fn verify(read: &BTreeMap<i32, Vec<(i64, String, u64)>>, acked: &[Ack]) -> Verdict {
    let mut v = Verdict {
        read: read.values().map(Vec::len).sum(),
        acked: acked.len(),
        ..Verdict::default()
    };
    let mut at: BTreeMap<(i32, i64), (&str, u64)> = BTreeMap::new();
    let mut seen: BTreeMap<(&str, u64), Vec<(i32, i64)>> = BTreeMap::new();
    for (&p, records) in read {
        let mut last: BTreeMap<&str, (i64, u64)> = BTreeMap::new();
        for (offset, key, seq) in records {
            at.insert((p, *offset), (key.as_str(), *seq));
            seen.entry((key.as_str(), *seq))
                .or_default()
                .push((p, *offset));
            if let Some(&(prev_offset, prev)) = last.get(key.as_str())
                && prev >= *seq
            {
                v.out_of_order.push(format!(
                    "{key}: {prev} at {p}:{prev_offset}, then {seq} at {p}:{offset}"
                ));
            }
            last.insert(key.as_str(), (*offset, *seq));
        }
    }
    for ((key, seq), places) in &seen {
        if places.len() > 1 {
            v.duplicates.push(format!("{key} #{seq} at {places:?}"));
        }
    }
    let mut once = BTreeSet::new();
    for a in acked {
        if !once.insert((a.key.as_str(), a.seq)) {
            v.acked_twice += 1;
        }
        if at.get(&(a.partition, a.offset)) != Some(&(a.key.as_str(), a.seq)) {
            v.lost.push(format!(
                "{} #{} acknowledged at {}:{}, found {:?}",
                a.key,
                a.seq,
                a.partition,
                a.offset,
                at.get(&(a.partition, a.offset))
            ));
        }
    }
    v
}

/// Finishes the load, waits for a whole ISR, reads everything back and asserts the checks;
/// prints the counts.
fn finish_and_verify(c: &Cluster, load: Load, scenario: &str, faults: usize) {
    let out = load.finish();
    let observer = c.ids()[0];
    c.wait_metadata(
        observer,
        "every partition led with 3 in sync",
        REJOIN,
        whole,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let read = read_all(&c.bootstrap(&c.ids()));
    let v = verify(&read, &out.acked);
    let failed: u64 = out.failed.values().sum();
    println!(
        "measured: {scenario}: {faults} faults injected; {} messages sent, {} acknowledged, \
         {failed} reported failed {:?}; {} records read back; {} lost, {} duplicated, {} out \
         of order, {} acknowledged twice",
        out.sent,
        v.acked,
        out.failed,
        v.read,
        v.lost.len(),
        v.duplicates.len(),
        v.out_of_order.len(),
        v.acked_twice
    );
    let first = |list: &[String]| list.iter().take(20).cloned().collect::<Vec<_>>();
    assert!(
        v.lost.is_empty(),
        "{} acknowledged messages lost, the first: {:#?}",
        v.lost.len(),
        first(&v.lost)
    );
    assert!(
        v.duplicates.is_empty(),
        "{} messages in the log more than once, the first: {:#?}",
        v.duplicates.len(),
        first(&v.duplicates)
    );
    assert!(
        v.out_of_order.is_empty(),
        "{} messages out of order, the first: {:#?}",
        v.out_of_order.len(),
        first(&v.out_of_order)
    );
    assert_eq!(v.acked_twice, 0, "a message acknowledged twice");
    assert!(out.errors.is_empty(), "producer errors: {:#?}", out.errors);
    assert!(
        v.acked > 1000,
        "only {} messages acknowledged: the check means little",
        v.acked
    );
    assert!(faults > 0, "no fault was injected");
}

/// A node of `ids` other than `not`.
fn other(ids: &[i32], not: &[i32]) -> i32 {
    *ids.iter()
        .find(|i| !not.contains(i))
        .expect("a node to ask")
}

#[test]
fn idempotent_producers_lose_and_duplicate_nothing_across_leader_kills() {
    const ROUNDS: usize = 5;
    const FAULT_BUDGET: Duration = Duration::from_secs(60);
    let _serial = serial();
    let mut c = start_cluster(&[
        ("broker.session.timeout.ms", "3000"),
        ("broker.heartbeat.interval.ms", "500"),
        ("replica.lag.time.max.ms", "5000"),
        // Preferred leaders come back between kills: more leader changes, without a fault.
        ("leader.imbalance.check.interval.seconds", "5"),
    ]);
    let ids = c.ids();
    create_topic(&c, ids[0]);
    let load = Load::start(&c.bootstrap(&ids), 2);
    thread::sleep(Duration::from_secs(1));

    let t0 = Instant::now();
    let mut faults = 0;
    for round in 0..ROUNDS {
        if t0.elapsed() > FAULT_BUDGET {
            break;
        }
        let partition = i32::try_from(round).unwrap() % PARTITIONS;
        let m = c
            .wait_metadata(ids[0], "every partition whole", REJOIN, whole)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let victim = m.partitions(TOPIC)[&partition].leader;
        let observer = other(&ids, &[victim]);
        c.node(victim).kill9();
        faults += 1;
        let killed = Instant::now();
        let m = c
            .wait_metadata(observer, "a new leader", MARGIN, |m| {
                m.partitions(TOPIC)
                    .get(&partition)
                    .is_some_and(|p| p.leader >= 0 && p.leader != victim)
            })
            .unwrap_or_else(|e| panic!("{e:?}"));
        let new_leader = m.partitions(TOPIC)[&partition].leader;
        let moved_ms = killed.elapsed().as_millis();
        // Let the producers write to the new leader for a while.
        thread::sleep(Duration::from_millis(500));
        c.node(victim).restart();
        let restarted = Instant::now();
        c.wait_metadata(observer, "the killed node back in every ISR", REJOIN, whole)
            .unwrap_or_else(|e| panic!("{e:?}"));
        println!(
            "measured: round {round}: leader {victim} of partition {partition} killed; node \
             {new_leader} led it {moved_ms} ms later; restarted, {victim} was back in every ISR \
             {} ms after its restart",
            restarted.elapsed().as_millis()
        );
    }
    finish_and_verify(&c, load, "leader kills", faults);
}

/// Sends `sig` (`-STOP`, `-CONT`) to `pid`.
fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// Resumes a stopped process when dropped, so a failing test does not leave it stopped.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

#[test]
fn idempotent_producers_lose_and_duplicate_nothing_across_stopped_followers() {
    const ROUNDS: usize = 6;
    const FAULT_BUDGET: Duration = Duration::from_secs(60);
    /// `replica.lag.time.max.ms` of this cluster.
    const LAG_MAX: Duration = Duration::from_millis(2000);
    let _serial = serial();
    // Sessions outlive every stop: the stopped node is a slow replica, never fenced.
    let mut c = start_cluster(&[
        ("broker.session.timeout.ms", "20000"),
        ("broker.heartbeat.interval.ms", "500"),
        ("replica.lag.time.max.ms", "2000"),
        ("leader.imbalance.check.interval.seconds", "3600"),
    ]);
    let ids = c.ids();
    create_topic(&c, ids[0]);
    let load = Load::start(&c.bootstrap(&ids), 2);
    thread::sleep(Duration::from_secs(1));

    let t0 = Instant::now();
    let mut faults = 0;
    let mut shrinks = 0;
    let mut long_stops = 0;
    for round in 0..ROUNDS {
        if t0.elapsed() > FAULT_BUDGET {
            break;
        }
        let m = c
            .wait_metadata(ids[0], "every partition whole", REJOIN, whole)
            .unwrap_or_else(|e| panic!("{e:?}"));
        // A node that is not the active controller, in turn.
        let candidates: Vec<i32> = ids
            .iter()
            .copied()
            .filter(|&i| i != m.controller_id)
            .collect();
        let victim = candidates[(round / 2) % candidates.len()];
        let observer = other(&ids, &[victim, m.controller_id]);
        let observer = if observer == victim {
            m.controller_id
        } else {
            observer
        };
        let long = round % 2 == 1;
        let stop_for = if long {
            LAG_MAX * 2 + Duration::from_millis(500)
        } else {
            LAG_MAX / 2
        };
        let pid = c.node(victim).pid().expect("the victim runs");
        signal(pid, "-STOP");
        let resume = Resume(pid);
        faults += 1;
        let stopped = Instant::now();
        let mut shrunk = false;
        while stopped.elapsed() < stop_for {
            if !shrunk
                && c.metadata(observer).is_ok_and(|m| {
                    m.partitions(TOPIC)
                        .values()
                        .any(|p| p.leader != victim && !p.isr.contains(&victim))
                })
            {
                shrunk = true;
            }
            thread::sleep(Duration::from_millis(100));
        }
        drop(resume);
        if long {
            long_stops += 1;
        }
        if shrunk {
            shrinks += 1;
        }
        let resumed = Instant::now();
        c.wait_metadata(
            observer,
            "the resumed node back in every ISR",
            REJOIN,
            whole,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        println!(
            "measured: round {round}: node {victim} stopped for {} ms, shrunk out of an ISR: \
             {shrunk}; back in every ISR {} ms after SIGCONT",
            stop_for.as_millis(),
            resumed.elapsed().as_millis()
        );
    }
    println!(
        "measured: {long_stops} stops longer than replica.lag.time.max.ms, {shrinks} ISR shrinks seen"
    );
    assert!(
        shrinks > 0,
        "no stop shrank an ISR: the slow replica was never taken out"
    );
    finish_and_verify(&c, load, "stopped followers", faults);
}

#[test]
fn idempotent_producers_lose_and_duplicate_nothing_across_isolated_leaders() {
    const ROUNDS: usize = 4;
    const FAULT_BUDGET: Duration = Duration::from_secs(60);
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let pc = ProxiedCluster::start(
        3,
        &[
            ("broker.session.timeout.ms", "3000"),
            ("broker.heartbeat.interval.ms", "500"),
            ("replica.lag.time.max.ms", "3000"),
            ("leader.imbalance.check.interval.seconds", "3600"),
        ],
    );
    let c = &pc.cluster;
    let ids = c.ids();
    c.wait_controller(&ids, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    c.wait_brokers(&ids, &ids, ELECTION)
        .unwrap_or_else(|e| panic!("{e:?}"));
    create_topic(c, ids[0]);
    let load = Load::start(&pc.bootstrap(&ids), 2);
    thread::sleep(Duration::from_secs(1));

    let t0 = Instant::now();
    let mut faults = 0;
    for round in 0..ROUNDS {
        if t0.elapsed() > FAULT_BUDGET {
            break;
        }
        let partition = i32::try_from(round).unwrap() % PARTITIONS;
        let m = c
            .wait_metadata(ids[0], "every partition whole", REJOIN, whole)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let victim = m.partitions(TOPIC)[&partition].leader;
        let was_controller = m.controller_id == victim;
        let observer = other(&ids, &[victim]);
        pc.isolate(victim);
        faults += 1;
        let cut = Instant::now();
        let m = c
            .wait_metadata(observer, "a new leader", MARGIN, |m| {
                m.partitions(TOPIC)
                    .get(&partition)
                    .is_some_and(|p| p.leader >= 0 && p.leader != victim)
            })
            .unwrap_or_else(|e| panic!("{e:?}"));
        let new_leader = m.partitions(TOPIC)[&partition].leader;
        let moved_ms = cut.elapsed().as_millis();
        // The cut-off node goes on believing it leads, and taking produces, for a while.
        thread::sleep(Duration::from_secs(2));
        pc.heal();
        let healed = Instant::now();
        c.wait_metadata(
            observer,
            "the isolated node back in every ISR",
            REJOIN,
            whole,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        println!(
            "measured: round {round}: leader {victim} of partition {partition} (controller: \
             {was_controller}) cut off; node {new_leader} led it {moved_ms} ms later; healed \
             after {} ms, {victim} was back in every ISR {} ms after",
            moved_ms + 2000,
            healed.elapsed().as_millis()
        );
    }
    finish_and_verify(c, load, "isolated leaders", faults);
}
