//! The transaction coordinator on a three-node cluster of real `strata` processes:
//!
//! - every node names the same coordinator for a transactional id (FindCoordinator, raw),
//!   the leader of the id's `__transaction_state` partition, which the first lookup has
//!   the controller create with three replicas; the other nodes answer InitProducerId for
//!   the id with NOT_COORDINATOR;
//! - the coordinator killed with SIGKILL: another replica takes the id over, and the next
//!   InitProducerId keeps the producer id and bumps the last acknowledged epoch, so no
//!   instance fenced through the killed node comes back; the killed node rejoins, and a
//!   producer that holds the current epoch bumps it (KIP-360) wherever the id now lives.
//! - librdkafka transactions over partitions led by all three nodes: the coordinator killed
//!   with SIGKILL right after a commit is acknowledged (its markers may still be on their
//!   way) and, in the next transaction, before the commit: the next coordinator completes
//!   the first (it resumes the markers of a decided transaction it loads), the producer's
//!   EndTxn finds it for the second, and a read_committed consumer reads every committed
//!   record exactly once and no aborted one; the group offset sent in the first
//!   transaction (`send_offsets_to_transaction`) is the group's.
//!
//! Raw frames, independent of Strata's codec. Every wait is bounded; what is measured is
//! printed as `measured:` lines.

use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, TopicPartitionList};
use strata_tests::cluster::{self, Cluster, round_trip};
use strata_tests::{serial, strata_bin, wait_until, wire};

const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    // Fewer partitions than Kafka's 50 keep the image small; the placement is the same.
    ("transaction.state.log.num.partitions", "6"),
    ("offsets.topic.num.partitions", "6"),
];

/// The bound on the cluster's start and on the coordinator's return.
const WAIT: Duration = Duration::from_secs(30);

const ID: &str = "replicated-tx";
const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;

/// Waits until every node in `ids` names one coordinator (one of `ids`) for `ID`.
fn agreed_coordinator(c: &Cluster, ids: &[i32]) -> i32 {
    cluster::agreed_coordinator(c, ids, ID, TRANSACTION, WAIT)
}

/// InitProducerId v4 for `ID` at `port`, holding `held`: (error code, producer id, epoch).
fn init(port: u16, held: (i64, i16)) -> anyhow::Result<(i16, i64, i16)> {
    let req = wire::init_producer_id_v4_request(3, Some(ID), 60_000, held.0, held.1);
    Ok(wire::init_producer_id_v4_result(&round_trip(port, &req)?))
}

/// [`init`] until the coordinator at `port` has loaded the id's partition.
fn init_loaded(port: u16, held: (i64, i16)) -> (i16, i64, i16) {
    let mut answer = None;
    wait_until("the coordinator serves the id", WAIT, cluster::POLL, || {
        let r = init(port, held)?;
        let loading = [
            COORDINATOR_LOAD_IN_PROGRESS,
            COORDINATOR_NOT_AVAILABLE,
            NOT_COORDINATOR,
        ];
        answer = Some(r);
        Ok(!loading.contains(&r.0))
    })
    .unwrap_or_else(|e| panic!("{e:?}; last answer {answer:?}"));
    answer.expect("answered")
}

#[test]
fn a_transactional_id_survives_its_coordinator() {
    let _serial = serial();
    assert!(
        Path::new(&strata_bin()).is_file(),
        "build strata first: cargo build --release --bin strata"
    );
    let mut c = Cluster::start(3, SETTINGS);
    let all = c.ids();
    c.wait_ready(WAIT);

    let t = Instant::now();
    let coordinator = agreed_coordinator(&c, &all);
    println!(
        "measured: node {coordinator} coordinates {ID} on all three nodes, {} ms after the first FindCoordinator",
        t.elapsed().as_millis()
    );
    let (code, pid, epoch) = init_loaded(c.port(coordinator), (-1, -1));
    assert_eq!((code, epoch), (0, 0), "first InitProducerId");
    assert_eq!(
        init(c.port(coordinator), (-1, -1)).unwrap(),
        (0, pid, 1),
        "a second instance"
    );
    let others: Vec<i32> = all.iter().copied().filter(|&i| i != coordinator).collect();
    for &id in &others {
        let (code, ..) = init(c.port(id), (-1, -1)).unwrap();
        assert_eq!(code, NOT_COORDINATOR, "InitProducerId on node {id}");
    }
    let m = c.metadata(1).expect("metadata");
    assert!(
        !m.topics.contains_key("__transaction_state"),
        "the internal topic is not listed to clients"
    );

    // The coordinator killed: another replica leads the partition, loads the id, and
    // goes on from the last acknowledged epoch.
    c.node(coordinator).kill9();
    let t = Instant::now();
    let successor = agreed_coordinator(&c, &others);
    assert_ne!(successor, coordinator);
    let answer = init_loaded(c.port(successor), (-1, -1));
    println!(
        "measured: node {coordinator} killed: node {successor} serves {ID} {} ms later",
        t.elapsed().as_millis()
    );
    assert_eq!(answer, (0, pid, 2), "InitProducerId after the failover");

    // The killed node back: wherever the id lives, its current holder bumps its epoch.
    c.node(coordinator).restart();
    let now = agreed_coordinator(&c, &all);
    assert_eq!(
        init_loaded(c.port(now), (pid, 2)),
        (0, pid, 3),
        "a KIP-360 bump at node {now}"
    );
}

/// Every value of `topic`'s `partitions` a read_committed consumer reads at `bootstrap`, until
/// `expect` have come (and 2 s more) or 60 s have passed.
fn read_committed(bootstrap: &str, topic: &str, partitions: i32, expect: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "txn-reader")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut quiet: Option<Instant> = None;
    while Instant::now() < deadline {
        if values.len() >= expect {
            let q = *quiet.get_or_insert_with(|| Instant::now() + Duration::from_secs(2));
            if Instant::now() > q {
                break;
            }
        }
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    values
}

#[test]
fn transactions_survive_their_coordinator() {
    const TOPIC: &str = "txn-across";
    const N: i32 = 30;
    let _serial = serial();
    let mut c = Cluster::start(3, SETTINGS);
    let all = c.ids();
    c.wait_ready(WAIT);
    let code = cluster::create_topic_raw(c.port(all[0]), TOPIC, 3, 3).expect("create");
    assert_eq!(code, 0, "CreateTopics");
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap(&all))
        .set("transactional.id", "across")
        .set("transaction.timeout.ms", "60000")
        .create()
        .expect("producer");
    producer.init_transactions(WAIT).expect("init_transactions");
    let send = |tag: &str| {
        for i in 0..N {
            let value = format!("{tag}-{i}");
            loop {
                let record = BaseRecord::<(), _>::to(TOPIC)
                    .payload(&value)
                    .partition(i % 3);
                match producer.send(record) {
                    Ok(()) => break,
                    Err((e, _)) => {
                        assert!(format!("{e}").contains("Queue full"), "send: {e}");
                        producer.poll(Duration::from_millis(10));
                    }
                }
            }
        }
        producer.flush(WAIT).expect("flush");
    };
    let coordinator_now =
        |c: &Cluster, ids: &[i32]| cluster::agreed_coordinator(c, ids, "across", TRANSACTION, WAIT);

    // Committed with a group's offsets (TxnOffsetCommit at the group's coordinator, which
    // verifies with the transaction's coordinator, often another node), then its
    // coordinator killed at once: the markers may be in flight.
    let group: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap(&all))
        .set("group.id", "across-group")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    // The group's coordinator is found (and `__consumer_offsets` created) before the
    // transaction begins, so that its creation on a loaded machine is not part of the
    // transaction's time, which `transaction.timeout.ms` bounds: a coordinator that aborts
    // the transaction for its timeout fences the producer (INVALID_PRODUCER_EPOCH at the
    // TxnOffsetCommit), which is Kafka's behaviour and not what this test is about.
    let t = Instant::now();
    cluster::agreed_coordinator(&c, &all, "across-group", GROUP, WAIT);
    println!(
        "measured: the group's coordinator agreed on {} ms after the first lookup",
        t.elapsed().as_millis()
    );
    let t = Instant::now();
    producer.begin_transaction().expect("begin");
    send("first");
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(TOPIC, 0, rdkafka::Offset::Offset(30))
        .expect("offset");
    producer
        .send_offsets_to_transaction(&offsets, &group.group_metadata().expect("metadata"), WAIT)
        .expect("send_offsets_to_transaction");
    let first = coordinator_now(&c, &all);
    producer.commit_transaction(WAIT).expect("commit");
    println!(
        "measured: the first transaction (30 sends, the group's offsets, the commit) took {} ms",
        t.elapsed().as_millis()
    );
    c.node(first).kill9();
    let t = Instant::now();
    let rest: Vec<i32> = all.iter().copied().filter(|&i| i != first).collect();

    // An aborted transaction, then one whose coordinator dies before the commit.
    producer.begin_transaction().expect("begin");
    send("aborted");
    producer.abort_transaction(WAIT).expect("abort");
    println!(
        "measured: first coordinator (node {first}) killed; the next transaction aborted {} ms later",
        t.elapsed().as_millis()
    );
    c.node(first).restart();
    producer.begin_transaction().expect("begin");
    send("second");
    let second = coordinator_now(&c, &all);
    c.node(second).kill9();
    let t = Instant::now();
    producer
        .commit_transaction(Duration::from_secs(60))
        .expect("commit through the next coordinator");
    println!(
        "measured: coordinator node {second} killed before EndTxn; the commit took {} ms",
        t.elapsed().as_millis()
    );
    let live: Vec<i32> = all.iter().copied().filter(|&i| i != second).collect();
    let mut asked = TopicPartitionList::new();
    asked.add_partition(TOPIC, 0);
    let committed = group
        .committed_offsets(asked, Duration::from_secs(60))
        .expect("committed offsets");
    assert_eq!(
        committed.find_partition(TOPIC, 0).map(|p| p.offset()),
        Some(rdkafka::Offset::Offset(30)),
        "the offset committed in the first transaction"
    );
    let mut values = read_committed(&c.bootstrap(&live), TOPIC, 3, 2 * N as usize);
    values.sort();
    let mut want: Vec<String> = ["first", "second"]
        .iter()
        .flat_map(|tag| (0..N).map(move |i| format!("{tag}-{i}")))
        .collect();
    want.sort();
    assert_eq!(
        values, want,
        "read_committed after two coordinator failures (rest {rest:?})"
    );
}
