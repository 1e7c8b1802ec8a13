//! Transaction version 2 (KIP-890 part 2, Kafka 4's default) against the real `strata`
//! binary, over frames encoded at the versions Kafka 4's Java producer sends: no client on
//! this machine speaks it (librdkafka, kafka-python, aiokafka and Sarama end transactions
//! as version 1 does, and the Java client cannot be fetched here), so the protocol is driven
//! by hand and the result read by librdkafka.
//!
//! - `transaction_version_2_over_frames`: ApiVersions finalizes `transaction.version` 2
//!   (and lists it as supported for v4); Produce v12 adds its partition to the transaction
//!   without an AddPartitionsToTxn, while Produce v11 for a partition not added is still
//!   refused (TRANSACTION_ABORTABLE); TxnOffsetCommit v5 adds the group's partition
//!   without an AddOffsetsToTxn; EndTxn v5 bumps the epoch at each end and names it, its
//!   lost-answer retry gets the same answer, the ended epoch is fenced, the next transaction
//!   starts at the new epoch from sequence 0, an abort with nothing ongoing is accepted and a
//!   commit is not; a read_committed librdkafka consumer then reads the committed records
//!   only, and the group's offset is the committed one.
//! - `transaction_version_is_a_setting`: with `transaction.version=1` the feature is
//!   finalized at 1, and with 0 it is not finalized at all.
//! - `transaction_version_2_across_three_nodes`: the same adds where the partition's leader
//!   and the group's coordinator are not the transaction's coordinator (AddPartitionsToTxn
//!   v5 between the nodes), the ended epoch fenced at the leader, and the results read by
//!   librdkafka from the cluster.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, TopicPartitionList};
use strata_protocol::messages::describe_transactions_request::DescribeTransactionsRequest;
use strata_protocol::messages::describe_transactions_response::TransactionState;
use strata_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strata_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use strata_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, EndTxnRequest, GroupId, ProduceRequest,
    ProducerId, RequestKind, ResponseKind, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use strata_tests::cluster::{self, Cluster};
use strata_tests::wire::{self};
use strata_tests::{Broker, serial, wait_until, with_broker};

use crate::transactions::{
    WAIT, committed_offset, first_init, latest, latest_committed, roundtrip, txn_batch,
};

const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const TRANSACTION_ABORTABLE: i16 = 120;

/// Sends `body` at `version` to the node at `port` and decodes the answer.
fn call(port: u16, key: ApiKey, version: i16, body: RequestKind) -> anyhow::Result<ResponseKind> {
    crate::acl_client::try_call(
        port,
        key,
        version,
        &body,
        std::time::Duration::from_secs(10),
    )
}

fn api_versions(b: &Broker, version: i16) -> anyhow::Result<ApiVersionsResponse> {
    let req = RequestKind::ApiVersions(
        ApiVersionsRequest::default()
            .with_client_software_name("txn-v2-test".into())
            .with_client_software_version("1".into()),
    );
    match call(b.port(), ApiKey::ApiVersions, version, req)? {
        ResponseKind::ApiVersions(r) => Ok(r),
        other => anyhow::bail!("unexpected {other:?}"),
    }
}

/// The finalized level of `transaction.version`, if any, and its supported range, if listed.
#[allow(clippy::type_complexity)]
fn transaction_feature(r: &ApiVersionsResponse) -> (Option<i16>, Option<(i16, i16)>) {
    let finalized = r
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| f.max_version_level);
    let supported = r
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.min_version, f.max_version));
    (finalized, supported)
}

/// A transactional Produce of `batch` to `partition` of `topic` at `version`, to the node at
/// `port`: its code.
fn produce(
    port: u16,
    version: i16,
    id: &str,
    (topic, partition): (&str, i32),
    batch: Vec<u8>,
) -> anyhow::Result<i16> {
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(id.to_owned().into())))
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(topic.to_owned().into()))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch.into())),
                ]),
        ]);
    match call(port, ApiKey::Produce, version, RequestKind::Produce(req))? {
        ResponseKind::Produce(r) => r
            .responses
            .first()
            .and_then(|t| t.partition_responses.first())
            .map(|p| p.error_code)
            .context("no partition in the Produce answer"),
        other => anyhow::bail!("unexpected {other:?}"),
    }
}

/// EndTxn v5: (error code, producer id, producer epoch) answered.
fn end_txn_v5(
    port: u16,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> anyhow::Result<(i16, i64, i16)> {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(id.to_owned().into()))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    match call(port, ApiKey::EndTxn, 5, RequestKind::EndTxn(req))? {
        ResponseKind::EndTxn(r) => Ok((r.error_code, r.producer_id.0, r.producer_epoch)),
        other => anyhow::bail!("unexpected {other:?}"),
    }
}

/// EndTxn v5 until its markers are written (CONCURRENT_TRANSACTIONS meanwhile).
fn end_txn_v5_done(
    port: u16,
    id: &str,
    producer: (i64, i16),
    commit: bool,
) -> anyhow::Result<(i16, i64, i16)> {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = end_txn_v5(port, id, producer, commit)?;
        if r.0 != CONCURRENT_TRANSACTIONS || Instant::now() > deadline {
            return Ok(r);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// TxnOffsetCommit v5 of `offset` for partition 0 of `topic`, as a producer with no group
/// membership sends it: the partition's code.
fn txn_offset_commit_v5(
    port: u16,
    id: &str,
    group: &str,
    (pid, epoch): (i64, i16),
    (topic, offset): (&str, i64),
) -> anyhow::Result<i16> {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(id.to_owned().into()))
        .with_group_id(GroupId(group.to_owned().into()))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(topic.to_owned().into()))
                .with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1),
                ]),
        ]);
    match call(
        port,
        ApiKey::TxnOffsetCommit,
        5,
        RequestKind::TxnOffsetCommit(req),
    )? {
        ResponseKind::TxnOffsetCommit(r) => r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| p.error_code)
            .context("no partition in the TxnOffsetCommit answer"),
        other => anyhow::bail!("unexpected {other:?}"),
    }
}

/// DescribeTransactions v0 of `id`: its entry.
fn describe_state(port: u16, id: &str) -> anyhow::Result<TransactionState> {
    let req = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(id.to_owned().into())]);
    match call(
        port,
        ApiKey::DescribeTransactions,
        0,
        RequestKind::DescribeTransactions(req),
    )? {
        ResponseKind::DescribeTransactions(r) => {
            r.transaction_states.into_iter().next().context("no state")
        }
        other => anyhow::bail!("unexpected {other:?}"),
    }
}

/// DescribeTransactions v0 of `id`: its error code.
pub(crate) fn describe_code(port: u16, id: &str) -> anyhow::Result<i16> {
    Ok(describe_state(port, id)?.error_code)
}

/// DescribeTransactions v0 of `id`: (state, epoch, partitions as `topic-N`).
fn describe(port: u16, id: &str) -> anyhow::Result<(String, i16, Vec<String>)> {
    let s = describe_state(port, id)?;
    ensure!(s.error_code == 0, "DescribeTransactions: {}", s.error_code);
    let mut partitions: Vec<String> = s
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| format!("{}-{p}", t.topic.0))
        })
        .collect();
    partitions.sort();
    Ok((
        s.transaction_state.to_string(),
        s.producer_epoch,
        partitions,
    ))
}

/// Every value of `partition` of `topic` a read_committed librdkafka consumer reads at
/// `bootstrap`, until `expect` have come and a second more, or 30 s.
fn read_committed(bootstrap: &str, (topic, partition): (&str, i32), expect: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "txn-v2-reader")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, rdkafka::Offset::Beginning)
        .expect("partition");
    consumer.assign(&tpl).expect("assign");
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut quiet: Option<Instant> = None;
    while Instant::now() < deadline {
        if values.len() >= expect {
            let q = *quiet.get_or_insert_with(|| Instant::now() + Duration::from_secs(1));
            if Instant::now() > q {
                break;
            }
        }
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    values
}

#[test]
fn transaction_version_2_over_frames() {
    let _serial = serial();
    with_broker(&[], |b| {
        // The feature, as the Java producer reads it.
        let v4 = api_versions(b, 4)?;
        ensure!(
            transaction_feature(&v4) == (Some(2), Some((0, 2))),
            "ApiVersions v4: {:?}",
            transaction_feature(&v4)
        );
        ensure!(
            v4.finalized_features_epoch > 0,
            "epoch {}",
            v4.finalized_features_epoch
        );
        let max = |key: ApiKey| {
            v4.api_keys
                .iter()
                .find(|k| k.api_key == key as i16)
                .map(|k| k.max_version)
        };
        ensure!(
            max(ApiKey::EndTxn) == Some(5),
            "EndTxn {:?}",
            max(ApiKey::EndTxn)
        );
        ensure!(
            max(ApiKey::Produce) == Some(12),
            "Produce {:?}",
            max(ApiKey::Produce)
        );
        ensure!(max(ApiKey::TxnOffsetCommit) == Some(5), "TxnOffsetCommit");
        // A feature whose minimum is 0 is not listed as supported before v4 (KAFKA-17492).
        let v3 = api_versions(b, 3)?;
        ensure!(
            transaction_feature(&v3) == (Some(2), None),
            "ApiVersions v3: {:?}",
            transaction_feature(&v3)
        );

        let (id, topic, other, group) = ("tv2", "tv2-out", "tv2-other", "tv2-group");
        for t in [topic, other] {
            roundtrip(b, &wire::metadata_request(1, t))?;
            wait_until(
                "the topic is served",
                WAIT,
                Duration::from_millis(50),
                || Ok(latest(b, t).is_ok()),
            )?;
        }
        let port = b.port();
        let (code, pid, e0) = first_init(b, id)?;
        ensure!(code == 0, "InitProducerId: {code}");

        // Produce v12 adds the partition; no AddPartitionsToTxn was sent.
        ensure!(
            produce(port, 12, id, (topic, 0), txn_batch((pid, e0), 0, 3))? == 0,
            "Produce v12"
        );
        let (state, epoch, partitions) = describe(port, id)?;
        ensure!(
            state == "Ongoing" && epoch == e0 && partitions == vec![format!("{topic}-0")],
            "after Produce v12: {state} {epoch} {partitions:?}"
        );
        // Produce v11 still only verifies: a partition not in the transaction is refused.
        let code = produce(port, 11, id, (other, 0), txn_batch((pid, e0), 0, 1))?;
        ensure!(code == TRANSACTION_ABORTABLE, "Produce v11: {code}");
        ensure!(latest(b, other)? == 0, "the refused batch was appended");
        // TxnOffsetCommit v5 adds the group's partition; no AddOffsetsToTxn was sent.
        let code = txn_offset_commit_v5(port, id, group, (pid, e0), (topic, 3))?;
        ensure!(code == 0, "TxnOffsetCommit v5: {code}");
        let (_, _, partitions) = describe(port, id)?;
        ensure!(
            partitions.len() == 2
                && partitions
                    .iter()
                    .any(|p| p.starts_with("__consumer_offsets-")),
            "the offsets partition is in the transaction: {partitions:?}"
        );
        ensure!(
            committed_offset(b, group, topic)? == -1,
            "offset before the commit"
        );
        ensure!(latest_committed(b, topic)? == 0, "stable before the commit");

        // EndTxn v5 commits and names the next epoch.
        let r = end_txn_v5(port, id, (pid, e0), true)?;
        ensure!(r == (0, pid, e0 + 1), "EndTxn v5 commit: {r:?}");
        // Its retry with the ended epoch gets the same answer once complete.
        let r = end_txn_v5_done(port, id, (pid, e0), true)?;
        ensure!(r == (0, pid, e0 + 1), "the commit's retry: {r:?}");
        ensure!(
            latest_committed(b, topic)? == 4,
            "three records and the marker"
        );
        wait_until(
            "the offset counts once its marker is written",
            WAIT,
            Duration::from_millis(20),
            || Ok(committed_offset(b, group, topic)? == 3),
        )?;
        let (state, epoch, _) = describe(port, id)?;
        ensure!(
            state == "CompleteCommit" && epoch == e0 + 1,
            "after the commit: {state} {epoch}"
        );

        // The ended epoch is fenced: the marker carried the new one.
        let code = produce(port, 12, id, (topic, 0), txn_batch((pid, e0), 3, 1))?;
        ensure!(code == INVALID_PRODUCER_EPOCH, "the ended epoch: {code}");
        // The next transaction runs at the new epoch, from sequence 0, and is aborted.
        let e1 = e0 + 1;
        ensure!(
            produce(port, 12, id, (topic, 0), txn_batch((pid, e1), 0, 2))? == 0,
            "the next transaction"
        );
        let r = end_txn_v5(port, id, (pid, e1), false)?;
        ensure!(r == (0, pid, e1 + 1), "EndTxn v5 abort: {r:?}");
        let e2 = e1 + 1;
        wait_until(
            "the abort marker is written",
            WAIT,
            Duration::from_millis(20),
            || Ok(latest_committed(b, topic)? == 7),
        )?;
        // With nothing ongoing: an abort is accepted (and bumps), a commit is not.
        let r = end_txn_v5_done(port, id, (pid, e2), false)?;
        ensure!(
            r == (0, pid, e2 + 1),
            "an abort with nothing ongoing: {r:?}"
        );
        let e3 = e2 + 1;
        let r = end_txn_v5_done(port, id, (pid, e3), true)?;
        ensure!(
            r.0 == INVALID_TXN_STATE,
            "a commit with nothing ongoing: {r:?}"
        );
        ensure!(latest(b, topic)? == 7, "no marker for the empty abort");

        // What a read_committed client sees: the first transaction only.
        let values = read_committed(&format!("127.0.0.1:{port}"), (topic, 0), 3);
        ensure!(
            values == vec!["v0", "v1", "v2"],
            "read_committed: {values:?}"
        );
        Ok(())
    });
}

#[test]
fn transaction_version_is_a_setting() {
    for (level, finalized) in [("1", Some(1)), ("0", None)] {
        with_broker(&[("transaction.version", level)], |b| {
            let r = api_versions(b, 4)?;
            ensure!(
                transaction_feature(&r) == (finalized, Some((0, 2))),
                "transaction.version={level}: {:?}",
                transaction_feature(&r)
            );
            Ok(())
        });
    }
}

/// Three nodes: the partition's leader is not the transaction's coordinator, so Produce v12
/// adds it with an AddPartitionsToTxn v5 between the nodes, and TxnOffsetCommit v5 adds the
/// group's partition from the group's coordinator the same way.
#[test]
fn transaction_version_2_across_three_nodes() {
    const ID: &str = "tv2-across";
    const TOPIC: &str = "tv2-across-out";
    const GROUP: &str = "tv2-across-group";
    const CLUSTER_WAIT: Duration = Duration::from_secs(30);
    let _serial = serial();
    let c = Cluster::start(
        3,
        &[
            ("broker.session.timeout.ms", "3000"),
            ("broker.heartbeat.interval.ms", "500"),
            ("transaction.state.log.num.partitions", "6"),
            ("offsets.topic.num.partitions", "6"),
        ],
    );
    let all = c.ids();
    c.wait_ready(CLUSTER_WAIT);
    let code = cluster::create_topic_raw(c.port(all[0]), TOPIC, 3, 3).expect("create");
    assert_eq!(code, 0, "CreateTopics");
    let coordinator = cluster::agreed_coordinator(&c, &all, ID, 1, CLUSTER_WAIT);
    let cport = c.port(coordinator);
    let mut init = None;
    wait_until(
        "the coordinator serves the id",
        CLUSTER_WAIT,
        cluster::POLL,
        || {
            let req = wire::init_producer_id_v4_request(3, Some(ID), 60_000, -1, -1);
            let r = wire::init_producer_id_v4_result(&cluster::round_trip(cport, &req)?);
            init = Some(r);
            Ok(r.0 == 0)
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}; last answer {init:?}"));
    let (_, pid, e0) = init.expect("answered");
    // A partition led elsewhere than the coordinator.
    let mut target = None;
    wait_until(
        "the topic's leaders are known",
        CLUSTER_WAIT,
        cluster::POLL,
        || {
            let m = c.metadata(coordinator)?;
            target = all
                .iter()
                .filter(|&&n| n != coordinator)
                .find_map(|&n| m.led_by(TOPIC, n).first().map(|&p| (n, p)));
            Ok(target.is_some())
        },
    )
    .expect("leaders");
    let (leader, partition) = target.expect("a partition");
    let lport = c.port(leader);
    println!(
        "measured: coordinator node {coordinator}, partition {partition} led by node {leader}"
    );

    // Produce v12 at the leader: the coordinator adds the partition.
    let code = produce(
        lport,
        12,
        ID,
        (TOPIC, partition),
        txn_batch((pid, e0), 0, 3),
    )
    .unwrap();
    assert_eq!(
        code, 0,
        "Produce v12 at a leader that is not the coordinator"
    );
    let (state, _, partitions) = describe(cport, ID).unwrap();
    assert_eq!(
        (state.as_str(), partitions),
        ("Ongoing", vec![format!("{TOPIC}-{partition}")])
    );
    // TxnOffsetCommit v5 at the group's coordinator.
    let mut code = None;
    wait_until(
        "the group's coordinator takes the offsets",
        CLUSTER_WAIT,
        cluster::POLL,
        || {
            let (found, node) = cluster::find_coordinator_of(cport, GROUP, 0)?;
            if found != 0 {
                return Ok(false);
            }
            let r = txn_offset_commit_v5(c.port(node), ID, GROUP, (pid, e0), (TOPIC, 3))?;
            code = Some(r);
            // The offsets partition loading on its first use: retried, as clients do.
            Ok(![14, 15, 16].contains(&r))
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}; last answer {code:?}"));
    assert_eq!(code, Some(0), "TxnOffsetCommit v5");
    let r = end_txn_v5(cport, ID, (pid, e0), true).unwrap();
    assert_eq!(r, (0, pid, e0 + 1), "EndTxn v5 commit");

    // Once the commit is complete (its retry answers so), the ended epoch is fenced at the
    // leader. Before that, as in Kafka 4.1, a batch of the ended epoch that reaches a
    // partition ahead of its marker joins the transaction there: the leader asks nobody
    // while the producer's transaction is open at that epoch.
    let r = end_txn_v5_done(cport, ID, (pid, e0), true).unwrap();
    assert_eq!(r, (0, pid, e0 + 1), "the commit's retry");
    let code = produce(
        lport,
        12,
        ID,
        (TOPIC, partition),
        txn_batch((pid, e0), 3, 1),
    )
    .unwrap();
    assert_eq!(
        code, INVALID_PRODUCER_EPOCH,
        "the ended epoch at the leader"
    );
    // The next transaction, at the new epoch from sequence 0, is aborted.
    let mut code = None;
    let e1 = e0 + 1;
    wait_until(
        "the next transaction starts once the commit completes",
        CLUSTER_WAIT,
        cluster::POLL,
        || {
            let r = produce(
                lport,
                12,
                ID,
                (TOPIC, partition),
                txn_batch((pid, e1), 0, 2),
            )?;
            code = Some(r);
            Ok(r != CONCURRENT_TRANSACTIONS)
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}; last answer {code:?}"));
    assert_eq!(code, Some(0), "the next transaction's batch");
    let r = end_txn_v5(cport, ID, (pid, e1), false).unwrap();
    assert_eq!(r, (0, pid, e1 + 1), "EndTxn v5 abort");

    let values = read_committed(&c.bootstrap(&all), (TOPIC, partition), 3);
    assert_eq!(values, vec!["v0", "v1", "v2"], "read_committed");
    let group: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", c.bootstrap(&all))
        .set("group.id", GROUP)
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(TOPIC, 0);
    let committed = group
        .committed_offsets(tpl, CLUSTER_WAIT)
        .expect("committed offsets");
    let offset = committed.find_partition(TOPIC, 0).map(|e| e.offset());
    assert_eq!(
        offset,
        Some(rdkafka::Offset::Offset(3)),
        "the group's offset"
    );
}
