//! Transactions (KIP-98, KIP-890) against the real `strata` binary: what of the transaction
//! coordinator is served so far.
//!
//! - `a_transactional_producer_initialises`: librdkafka's `init_transactions` finds the
//!   coordinator of its transactional id (the first FindCoordinator has
//!   `__transaction_state` created) and gets a producer id from it.
//! - `init_producer_id_fences_and_survives_kill9`: over raw frames, each InitProducerId for
//!   one transactional id keeps its producer id and bumps its epoch; an instance holding
//!   an older epoch is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4), a retry whose
//!   answer was lost gets the same answer, a bad timeout is INVALID_TRANSACTION_TIMEOUT; the
//!   internal topic is not listed to clients; after `kill -9` the next epoch follows the
//!   last acknowledged one; `strata admin transactions list` and `describe` show it
//!   (ListTransactions, DescribeTransactions), ListTransactions filters by state and
//!   producer id, and an unknown id is TRANSACTIONAL_ID_NOT_FOUND.
//! - `a_transaction_over_raw_frames`: AddPartitionsToTxn v0 (an unknown partition is
//!   UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, an old epoch
//!   INVALID_PRODUCER_EPOCH), Produce's KIP-890 verification (a transactional batch for a
//!   partition not in the transaction is INVALID_TXN_STATE, one in it is appended), EndTxn v0
//!   (the commit, its retry, and an abort after it, INVALID_TXN_STATE), the commit marker
//!   written by the coordinator, and AddPartitionsToTxn v4's `verify_only`
//!   (TRANSACTION_ABORTABLE once the transaction is over); then a transaction left open on
//!   the partition, which `strata admin transactions abort --start-offset` ends there.
//! - `offsets_in_a_transaction_over_raw_frames`: TxnOffsetCommit v2 before AddOffsetsToTxn
//!   (INVALID_TXN_STATE: the group's `__consumer_offsets` partition is not in the
//!   transaction) and for an unknown partition (UNKNOWN_TOPIC_OR_PARTITION); AddOffsetsToTxn
//!   v0 for an unknown id (INVALID_PRODUCER_ID_MAPPING) and an old epoch
//!   (INVALID_PRODUCER_EPOCH); then the offset written in the transaction is not the
//!   group's until the commit, and is after it (OffsetFetch v1).
//! - `markers_are_appended_by_the_partition_leader`: WriteTxnMarkers over raw frames: a
//!   marker takes one offset once committed; an older producer epoch is
//!   INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED, and
//!   neither writes anything; a partition not hosted is UNKNOWN_TOPIC_OR_PARTITION.

use std::time::Duration;

use anyhow::{Context, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, Producer};
use strata_tests::cluster::find_coordinator_of;
use strata_tests::wire::{self, recv, send};
use strata_tests::{Broker, serial, wait_until, with_broker};

use crate::admin_cli_run::{admin, admin_ok, table};

/// The longest any one wait here takes.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const INVALID_REQUEST: i16 = 42;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const PRODUCER_FENCED: i16 = 90;

/// `transaction.max.timeout.ms` for these tests.
const MAX_TIMEOUT_MS: i32 = 120_000;

pub(crate) fn roundtrip(b: &Broker, frame: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut s = wire::connect(b.port());
    send(&mut s, frame);
    recv(&mut s).context("the broker closed the connection instead of answering")
}

/// InitProducerId v4: (error code, producer id, epoch).
pub(crate) fn init_v4(
    b: &Broker,
    id: &str,
    timeout_ms: i32,
    held: (i64, i16),
) -> anyhow::Result<(i16, i64, i16)> {
    let r = roundtrip(
        b,
        &wire::init_producer_id_v4_request(9, Some(id), timeout_ms, held.0, held.1),
    )?;
    Ok(wire::init_producer_id_v4_result(&r))
}

/// InitProducerId v0 (no producer id held).
fn init_v0(b: &Broker, id: &str) -> anyhow::Result<(i16, i64, i16)> {
    let r = roundtrip(b, &wire::init_producer_id_request(5, Some(id)))?;
    Ok(wire::init_producer_id_result(&r))
}

/// Looks the coordinator of `id` up until this node names itself and its partition is
/// loaded: InitProducerId v0 stops answering the coordinator-lookup errors. Returns that
/// first answer.
pub(crate) fn first_init(b: &Broker, id: &str) -> anyhow::Result<(i16, i64, i16)> {
    let mut answer = None;
    wait_until(
        "the transaction coordinator serves the id",
        WAIT,
        Duration::from_millis(100),
        || {
            let (code, _node) = find_coordinator_of(b.port(), id, 1)?;
            if code != 0 {
                return Ok(false);
            }
            let r = init_v0(b, id)?;
            let retriable = [
                COORDINATOR_LOAD_IN_PROGRESS,
                COORDINATOR_NOT_AVAILABLE,
                NOT_COORDINATOR,
            ];
            if retriable.contains(&r.0) {
                return Ok(false);
            }
            answer = Some(r);
            Ok(true)
        },
    )?;
    answer.context("no answer")
}

/// A ListTransactions v1 (flexible) round trip: (error code, unknown state filters,
/// (transactional id, producer id, state) listed).
#[allow(clippy::type_complexity)]
pub(crate) fn list_transactions(
    b: &Broker,
    states: &[&str],
    producer_ids: &[i64],
) -> anyhow::Result<(i16, Vec<String>, Vec<(String, i64, String)>)> {
    let mut req = wire::header(66, 1, 11);
    req.push(0); // header tagged fields
    req.push(u8::try_from(states.len() + 1)?);
    for s in states {
        req.push(u8::try_from(s.len() + 1)?);
        req.extend_from_slice(s.as_bytes());
    }
    req.push(u8::try_from(producer_ids.len() + 1)?);
    for p in producer_ids {
        req.extend_from_slice(&p.to_be_bytes());
    }
    req.extend_from_slice(&(-1i64).to_be_bytes()); // duration_filter
    req.push(0); // tagged fields
    let r = roundtrip(b, &req)?;
    // corr(4) header tags(1) throttle(4) error(2), then compact arrays of one-byte lengths
    // (short ids and states).
    let mut at = 9;
    let take = |at: &mut usize, n: usize| -> anyhow::Result<&[u8]> {
        let s = r.get(*at..*at + n).context("truncated")?;
        *at += n;
        Ok(s)
    };
    let code = i16::from_be_bytes(take(&mut at, 2)?.try_into()?);
    let string = |at: &mut usize| -> anyhow::Result<String> {
        let len = usize::from(take(at, 1)?[0]) - 1;
        Ok(String::from_utf8(take(at, len)?.to_vec())?)
    };
    let count = usize::from(take(&mut at, 1)?[0]) - 1;
    let mut unknown = Vec::new();
    for _ in 0..count {
        unknown.push(string(&mut at)?);
    }
    let count = usize::from(take(&mut at, 1)?[0]) - 1;
    let mut listed = Vec::new();
    for _ in 0..count {
        let id = string(&mut at)?;
        let pid = i64::from_be_bytes(take(&mut at, 8)?.try_into()?);
        let state = string(&mut at)?;
        take(&mut at, 1)?; // tagged fields
        listed.push((id, pid, state));
    }
    Ok((code, unknown, listed))
}

/// WriteTxnMarkers v1 for one marker on partition `partition` of `topic`: that partition's
/// error code.
pub(crate) fn write_marker(
    b: &Broker,
    topic: &str,
    partition: i32,
    (producer_id, epoch, coordinator_epoch): (i64, i16, i32),
    commit: bool,
) -> anyhow::Result<i16> {
    let mut req = wire::header(27, 1, 13);
    req.push(0); // header tagged fields
    req.push(2); // one marker
    req.extend_from_slice(&producer_id.to_be_bytes());
    req.extend_from_slice(&epoch.to_be_bytes());
    req.push(u8::from(commit));
    req.push(2); // one topic
    req.push(u8::try_from(topic.len() + 1)?);
    req.extend_from_slice(topic.as_bytes());
    req.push(2); // one partition
    req.extend_from_slice(&partition.to_be_bytes());
    req.push(0); // topic tagged fields
    req.extend_from_slice(&coordinator_epoch.to_be_bytes());
    req.push(0); // marker tagged fields
    req.push(0); // tagged fields
    let r = roundtrip(b, &req)?;
    // corr(4) tags(1) markers(1) producer_id(8) topics(1) name(1+n) partitions(1) index(4)
    let at = 21 + topic.len();
    let code = r
        .get(at..at + 2)
        .context("truncated WriteTxnMarkers answer")?;
    Ok(i16::from_be_bytes(code.try_into()?))
}

/// The log end offset of partition 0 of `topic` (ListOffsets latest).
pub(crate) fn latest(b: &Broker, topic: &str) -> anyhow::Result<i64> {
    let r = roundtrip(b, &wire::list_offsets_request(3, topic, -1))?;
    let (code, offset) = wire::list_offsets_result(&r, topic);
    ensure!(code == 0, "ListOffsets error {code}");
    Ok(offset)
}

/// AddPartitionsToTxn v0 for one transaction: each (topic, partition, code) answered.
pub(crate) fn add_partitions_v0(
    b: &Broker,
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> anyhow::Result<Vec<(String, i32, i16)>> {
    let mut req = wire::header(24, 0, 21);
    wire::put_str(&mut req, id);
    req.extend_from_slice(&pid.to_be_bytes());
    req.extend_from_slice(&epoch.to_be_bytes());
    req.extend_from_slice(&i32::try_from(partitions.len())?.to_be_bytes());
    for (topic, p) in partitions {
        wire::put_str(&mut req, topic);
        req.extend_from_slice(&1i32.to_be_bytes());
        req.extend_from_slice(&p.to_be_bytes());
    }
    let r = roundtrip(b, &req)?;
    // corr(4) throttle(4) topics(4) [name(2+n) partitions(4) [index(4) code(2)]]
    let mut at = 8;
    let mut out = Vec::new();
    let mut take = |n: usize| -> anyhow::Result<&[u8]> {
        let v = r
            .get(at..at + n)
            .context("truncated AddPartitionsToTxn answer")?;
        at += n;
        Ok(v)
    };
    let topics = i32::from_be_bytes(take(4)?.try_into()?);
    for _ in 0..topics {
        let len = usize::try_from(i16::from_be_bytes(take(2)?.try_into()?))?;
        let name = String::from_utf8(take(len)?.to_vec())?;
        let n = i32::from_be_bytes(take(4)?.try_into()?);
        for _ in 0..n {
            let index = i32::from_be_bytes(take(4)?.try_into()?);
            let code = i16::from_be_bytes(take(2)?.try_into()?);
            out.push((name.clone(), index, code));
        }
    }
    out.sort();
    Ok(out)
}

/// AddPartitionsToTxn v4 (a broker's, batched) with `verify_only` for partition 0 of
/// `topic`: (top-level code, the partition's code).
pub(crate) fn verify_v4(
    b: &Broker,
    id: &str,
    (pid, epoch): (i64, i16),
    topic: &str,
) -> anyhow::Result<(i16, i16)> {
    let compact = |v: &mut Vec<u8>, s: &str| -> anyhow::Result<()> {
        v.push(u8::try_from(s.len() + 1)?);
        v.extend_from_slice(s.as_bytes());
        Ok(())
    };
    let mut req = wire::header(24, 4, 22);
    req.push(0); // header tagged fields
    req.push(2); // one transaction
    compact(&mut req, id)?;
    req.extend_from_slice(&pid.to_be_bytes());
    req.extend_from_slice(&epoch.to_be_bytes());
    req.push(1); // verify_only
    req.push(2); // one topic
    compact(&mut req, topic)?;
    req.push(2); // one partition
    req.extend_from_slice(&0i32.to_be_bytes());
    req.push(0); // topic tagged fields
    req.push(0); // transaction tagged fields
    req.push(0); // tagged fields
    let r = roundtrip(b, &req)?;
    // corr(4) tags(1) throttle(4) error(2) results(1) id(1+n) topics(1) name(1+m)
    // partitions(1) index(4) code(2)
    let top = i16::from_be_bytes(r.get(9..11).context("truncated")?.try_into()?);
    if top != 0 {
        return Ok((top, -1));
    }
    let at = 11 + 1 + 1 + id.len() + 1 + 1 + topic.len() + 1 + 4;
    let code = i16::from_be_bytes(r.get(at..at + 2).context("truncated")?.try_into()?);
    Ok((top, code))
}

/// EndTxn v0: its error code.
pub(crate) fn end_txn_v0(
    b: &Broker,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> anyhow::Result<i16> {
    let mut req = wire::header(26, 0, 23);
    wire::put_str(&mut req, id);
    req.extend_from_slice(&pid.to_be_bytes());
    req.extend_from_slice(&epoch.to_be_bytes());
    req.push(u8::from(commit));
    let r = roundtrip(b, &req)?;
    Ok(i16::from_be_bytes(
        r.get(8..10)
            .context("truncated EndTxn answer")?
            .try_into()?,
    ))
}

/// The last stable offset of partition 0 of `topic` (ListOffsets v2, latest, READ_COMMITTED).
pub(crate) fn latest_committed(b: &Broker, topic: &str) -> anyhow::Result<i64> {
    let mut req = wire::header(2, 2, 24);
    req.extend_from_slice(&(-1i32).to_be_bytes()); // replica_id
    req.push(1); // READ_COMMITTED
    req.extend_from_slice(&1i32.to_be_bytes());
    wire::put_str(&mut req, topic);
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(&0i32.to_be_bytes());
    req.extend_from_slice(&(-1i64).to_be_bytes());
    let r = roundtrip(b, &req)?;
    // corr(4) throttle(4) topics(4) name(2+n) partitions(4) index(4) error(2) ts(8) offset(8)
    let at = 4 + 4 + 4 + 2 + topic.len() + 4 + 4;
    let code = i16::from_be_bytes(r.get(at..at + 2).context("truncated")?.try_into()?);
    ensure!(code == 0, "ListOffsets error {code}");
    Ok(i64::from_be_bytes(
        r.get(at + 10..at + 18).context("truncated")?.try_into()?,
    ))
}

/// A transactional batch of `n` records of producer `pid` at `epoch`, first sequence `seq`.
pub(crate) fn txn_batch((pid, epoch): (i64, i16), seq: i32, n: usize) -> Vec<u8> {
    use strata_protocol::record_batch::{self, SimpleRecord};
    let records: Vec<SimpleRecord> = (0..n)
        .map(|i| SimpleRecord {
            key: Some(format!("k{i}").into()),
            value: Some(format!("v{i}").into()),
            timestamp: 1_700_000_000_000,
            headers: vec![],
        })
        .collect();
    let mut batch = record_batch::encode_batch(0, &records).to_vec();
    record_batch::set_producer(&mut batch, pid, epoch, seq);
    record_batch::set_transactional(&mut batch);
    record_batch::write_crc(&mut batch);
    batch
}

#[test]
fn a_transaction_over_raw_frames() {
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    const INVALID_TXN_STATE: i16 = 48;
    const CONCURRENT_TRANSACTIONS: i16 = 51;
    const OPERATION_NOT_ATTEMPTED: i16 = 55;
    const TRANSACTION_ABORTABLE: i16 = 120;
    let _serial = serial();
    with_broker(&[], |b| {
        let (id, topic) = ("raw-tx", "raw-txn-topic");
        roundtrip(b, &wire::metadata_request(1, topic))?;
        wait_until(
            "the topic is served",
            WAIT,
            Duration::from_millis(50),
            || Ok(latest(b, topic).is_ok()),
        )?;
        let (code, pid, epoch) = first_init(b, id)?;
        ensure!(code == 0, "InitProducerId: {code}");
        let producer = (pid, epoch);
        let produce = |seq: i32| -> anyhow::Result<i16> {
            let batch = txn_batch(producer, seq, 3);
            let r = roundtrip(
                b,
                &wire::transactional_produce_request(31, Some(id), topic, &batch),
            )?;
            Ok(wire::produce_result(&r, topic).0)
        };
        // Not in the transaction: the coordinator does not confirm the partition.
        ensure!(produce(0)? == INVALID_TXN_STATE, "unverified batch");
        ensure!(latest(b, topic)? == 0, "an unverified batch was appended");
        // One unknown partition: nothing is added.
        let codes = add_partitions_v0(b, id, producer, &[(topic, 0), ("no-such-topic", 0)])?;
        ensure!(
            codes
                == vec![
                    ("no-such-topic".to_owned(), 0, UNKNOWN_TOPIC_OR_PARTITION),
                    (topic.to_owned(), 0, OPERATION_NOT_ATTEMPTED),
                ],
            "{codes:?}"
        );
        // An internal topic is never the client's to add.
        let codes = add_partitions_v0(b, id, producer, &[("__consumer_offsets", 0)])?;
        ensure!(
            codes
                == vec![(
                    "__consumer_offsets".to_owned(),
                    0,
                    TOPIC_AUTHORIZATION_FAILED
                )],
            "{codes:?}"
        );
        let codes = add_partitions_v0(b, id, (pid, epoch - 1), &[(topic, 0)])?;
        ensure!(codes[0].2 == INVALID_PRODUCER_EPOCH, "old epoch: {codes:?}");
        let codes = add_partitions_v0(b, id, producer, &[(topic, 0)])?;
        ensure!(codes == vec![(topic.to_owned(), 0, 0)], "{codes:?}");
        ensure!(produce(0)? == 0, "verified batch");
        ensure!(produce(3)? == 0, "second batch");
        ensure!(latest(b, topic)? == 6, "six records");
        ensure!(end_txn_v0(b, id, producer, true)? == 0, "commit");
        // The commit's retry succeeds once the markers are written.
        wait_until(
            "the commit completes",
            WAIT,
            Duration::from_millis(20),
            || {
                let code = end_txn_v0(b, id, producer, true)?;
                ensure!(
                    code == 0 || code == CONCURRENT_TRANSACTIONS,
                    "retry: {code}"
                );
                Ok(code == 0)
            },
        )?;
        ensure!(latest(b, topic)? == 7, "the commit marker");
        let code = end_txn_v0(b, id, producer, false)?;
        ensure!(code == INVALID_TXN_STATE, "abort after commit: {code}");
        // A broker's verification: the partition left the transaction with its end.
        let (top, code) = verify_v4(b, id, producer, topic)?;
        ensure!(
            top == 0 && code == TRANSACTION_ABORTABLE,
            "verify: {top} {code}"
        );
        ensure!(produce(6)? == INVALID_TXN_STATE, "batch after the end");
        ensure!(latest_committed(b, topic)? == 7, "stable after the commit");

        // A transaction left hanging on the partition: the operator aborts it there
        // (kafka-transactions.sh abort), and read_committed consumers get past it.
        let codes = add_partitions_v0(b, id, producer, &[(topic, 0)])?;
        ensure!(codes == vec![(topic.to_owned(), 0, 0)], "{codes:?}");
        ensure!(produce(6)? == 0, "the next transaction's batch");
        ensure!(latest(b, topic)? == 10, "three more records");
        ensure!(
            latest_committed(b, topic)? == 7,
            "held at the open transaction"
        );
        // A list of bootstrap servers, as Kafka's tools take it; the first is not there.
        let bootstrap = format!("127.0.0.1:1,127.0.0.1:{}", b.port());
        let out = admin_ok(
            &bootstrap,
            &[
                "transactions",
                "abort",
                "--topic",
                topic,
                "--partition",
                "0",
                "--start-offset",
                "7",
            ],
        );
        ensure!(out.contains("Aborted the transaction"), "{out}");
        ensure!(
            latest_committed(b, topic)? == 11,
            "stable after the abort marker"
        );
        let r = admin(
            &bootstrap,
            &[
                "transactions",
                "abort",
                "--topic",
                topic,
                "--partition",
                "0",
                "--start-offset",
                "7",
            ],
        );
        ensure!(!r.ok, "no transaction starts there any more: {r:?}");
        Ok(())
    });
}

/// AddOffsetsToTxn v0: its error code.
pub(crate) fn add_offsets_v0(
    b: &Broker,
    id: &str,
    (pid, epoch): (i64, i16),
    group: &str,
) -> anyhow::Result<i16> {
    let mut req = wire::header(25, 0, 25);
    wire::put_str(&mut req, id);
    req.extend_from_slice(&pid.to_be_bytes());
    req.extend_from_slice(&epoch.to_be_bytes());
    wire::put_str(&mut req, group);
    let r = roundtrip(b, &req)?;
    Ok(i16::from_be_bytes(
        r.get(8..10)
            .context("truncated AddOffsetsToTxn answer")?
            .try_into()?,
    ))
}

/// TxnOffsetCommit v2 of one offset for partition `partition` of `topic`: that partition's
/// error code.
pub(crate) fn txn_offset_commit_v2(
    b: &Broker,
    id: &str,
    group: &str,
    (pid, epoch): (i64, i16),
    (topic, partition, offset): (&str, i32, i64),
) -> anyhow::Result<i16> {
    let mut req = wire::header(28, 2, 26);
    wire::put_str(&mut req, id);
    wire::put_str(&mut req, group);
    req.extend_from_slice(&pid.to_be_bytes());
    req.extend_from_slice(&epoch.to_be_bytes());
    req.extend_from_slice(&1i32.to_be_bytes());
    wire::put_str(&mut req, topic);
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(&partition.to_be_bytes());
    req.extend_from_slice(&offset.to_be_bytes());
    req.extend_from_slice(&(-1i32).to_be_bytes()); // leader epoch
    req.extend_from_slice(&(-1i16).to_be_bytes()); // null metadata
    let r = roundtrip(b, &req)?;
    // corr(4) throttle(4) topics(4) name(2+n) partitions(4) index(4) code(2)
    let at = 4 + 4 + 4 + 2 + topic.len() + 4 + 4;
    Ok(i16::from_be_bytes(
        r.get(at..at + 2)
            .context("truncated TxnOffsetCommit answer")?
            .try_into()?,
    ))
}

/// The group's committed offset of partition 0 of `topic` (OffsetFetch v1; -1 for none).
pub(crate) fn committed_offset(b: &Broker, group: &str, topic: &str) -> anyhow::Result<i64> {
    let mut req = wire::header(9, 1, 27);
    wire::put_str(&mut req, group);
    req.extend_from_slice(&1i32.to_be_bytes());
    wire::put_str(&mut req, topic);
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(&0i32.to_be_bytes());
    let r = roundtrip(b, &req)?;
    // corr(4) topics(4) name(2+n) partitions(4) index(4) offset(8)
    let at = 4 + 4 + 2 + topic.len() + 4 + 4;
    Ok(i64::from_be_bytes(
        r.get(at..at + 8)
            .context("truncated OffsetFetch answer")?
            .try_into()?,
    ))
}

#[test]
fn offsets_in_a_transaction_over_raw_frames() {
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const INVALID_TXN_STATE: i16 = 48;
    const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    let _serial = serial();
    with_broker(&[], |b| {
        let (id, group, topic) = ("raw-offsets", "raw-offsets-group", "raw-offsets-in");
        roundtrip(b, &wire::metadata_request(1, topic))?;
        wait_until(
            "the topic is served",
            WAIT,
            Duration::from_millis(50),
            || Ok(latest(b, topic).is_ok()),
        )?;
        let (code, pid, epoch) = first_init(b, id)?;
        ensure!(code == 0, "InitProducerId: {code}");
        let producer = (pid, epoch);
        let code = txn_offset_commit_v2(b, id, group, producer, (topic, 0, 5))?;
        ensure!(code == INVALID_TXN_STATE, "before AddOffsetsToTxn: {code}");
        let code = add_offsets_v0(b, "no-such-id", producer, group)?;
        ensure!(code == INVALID_PRODUCER_ID_MAPPING, "unknown id: {code}");
        let code = add_offsets_v0(b, id, (pid, epoch - 1), group)?;
        ensure!(code == INVALID_PRODUCER_EPOCH, "old epoch: {code}");
        ensure!(
            add_offsets_v0(b, id, producer, group)? == 0,
            "AddOffsetsToTxn"
        );
        let code = txn_offset_commit_v2(b, id, group, producer, (topic, 7, 5))?;
        ensure!(
            code == UNKNOWN_TOPIC_OR_PARTITION,
            "unknown partition: {code}"
        );
        ensure!(
            txn_offset_commit_v2(b, id, group, producer, (topic, 0, 5))? == 0,
            "TxnOffsetCommit"
        );
        ensure!(
            committed_offset(b, group, topic)? == -1,
            "the offset counts before the commit"
        );
        ensure!(end_txn_v0(b, id, producer, true)? == 0, "commit");
        wait_until(
            "the offset counts once the marker is written",
            WAIT,
            Duration::from_millis(20),
            || Ok(committed_offset(b, group, topic)? == 5),
        )?;
        Ok(())
    });
}

#[test]
fn markers_are_appended_by_the_partition_leader() {
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
    let _serial = serial();
    with_broker(&[], |b| {
        let topic = "marked";
        roundtrip(b, &wire::metadata_request(1, topic))?;
        wait_until(
            "the topic is served",
            WAIT,
            Duration::from_millis(50),
            || Ok(latest(b, topic).is_ok()),
        )?;
        // A commit marker takes one offset, once committed.
        ensure!(
            write_marker(b, topic, 0, (4242, 2, 5), true)? == 0,
            "first marker"
        );
        ensure!(latest(b, topic)? == 1, "the marker's offset");
        // An older producer epoch, an older coordinator epoch: refused, nothing written.
        let code = write_marker(b, topic, 0, (4242, 1, 5), false)?;
        ensure!(
            code == INVALID_PRODUCER_EPOCH,
            "older producer epoch: {code}"
        );
        let code = write_marker(b, topic, 0, (4242, 2, 4), false)?;
        ensure!(
            code == TRANSACTION_COORDINATOR_FENCED,
            "older coordinator epoch: {code}"
        );
        ensure!(latest(b, topic)? == 1, "a refused marker was written");
        // The same epochs again (a retry, or the next transaction's abort) are accepted.
        ensure!(
            write_marker(b, topic, 0, (4242, 2, 5), false)? == 0,
            "abort marker"
        );
        ensure!(latest(b, topic)? == 2, "the second marker's offset");
        // Partitions not hosted here.
        let code = write_marker(b, topic, 9, (4242, 2, 5), true)?;
        ensure!(
            code == UNKNOWN_TOPIC_OR_PARTITION,
            "unknown partition: {code}"
        );
        let code = write_marker(b, "no-such-topic", 0, (4242, 2, 5), true)?;
        ensure!(code == UNKNOWN_TOPIC_OR_PARTITION, "unknown topic: {code}");
        Ok(())
    });
}

#[test]
fn a_transactional_producer_initialises() {
    let _serial = serial();
    with_broker(&[], |b| {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .set("transactional.id", "rdkafka-init")
            .create()
            .context("create the producer")?;
        producer
            .init_transactions(WAIT)
            .context("init_transactions")?;
        // The internal topic is created by the lookup and is not listed to clients.
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .create()?;
        let all = consumer.fetch_metadata(None, Duration::from_secs(10))?;
        ensure!(
            all.topics()
                .iter()
                .all(|t| t.name() != "__transaction_state"),
            "__transaction_state listed to clients"
        );
        let named =
            consumer.fetch_metadata(Some("__transaction_state"), Duration::from_secs(10))?;
        ensure!(
            named.topics()[0].partitions().len() == 50,
            "transaction.state.log.num.partitions"
        );
        Ok(())
    });
}

#[test]
fn init_producer_id_fences_and_survives_kill9() {
    let _serial = serial();
    let max = MAX_TIMEOUT_MS.to_string();
    with_broker(&[("transaction.max.timeout.ms", &max)], |b| {
        let id = "raw-tx";
        let (code, pid, epoch) = first_init(b, id)?;
        ensure!(
            code == 0 && pid >= 0 && epoch == 0,
            "first: {code} {pid} {epoch}"
        );
        // A second instance without a producer id: the same id, the next epoch.
        ensure!(init_v0(b, id)? == (0, pid, 1), "second instance");
        // An instance that holds the fenced epoch.
        let (code, ..) = init_v4(b, id, 60_000, (pid, 0))?;
        ensure!(code == PRODUCER_FENCED, "stale epoch at v4: {code}");
        let r = roundtrip(b, &{
            let mut req = wire::init_producer_id_v4_request(9, Some(id), 60_000, pid, 0);
            req[3] = 3; // the same body is v3's
            req
        })?;
        let (code, ..) = wire::init_producer_id_v4_result(&r);
        ensure!(code == INVALID_PRODUCER_EPOCH, "stale epoch at v3: {code}");
        // The current instance bumps its own epoch (KIP-360); a retry of that request whose
        // answer was lost gets the same answer.
        ensure!(init_v4(b, id, 60_000, (pid, 1))? == (0, pid, 2), "bump");
        ensure!(
            init_v4(b, id, 60_000, (pid, 1))? == (0, pid, 2),
            "retried bump"
        );
        // Another producer id is not this transactional id's.
        let (code, ..) = init_v4(b, id, 60_000, (pid + 7, 2))?;
        ensure!(code == PRODUCER_FENCED, "foreign producer id: {code}");
        // Timeouts outside 1..=transaction.max.timeout.ms, and an empty id.
        for timeout in [0, -1, MAX_TIMEOUT_MS + 1] {
            let (code, ..) = init_v4(b, id, timeout, (-1, -1))?;
            ensure!(
                code == INVALID_TRANSACTION_TIMEOUT,
                "timeout {timeout}: {code}"
            );
        }
        let (code, ..) = init_v4(b, "", 60_000, (-1, -1))?;
        ensure!(code == INVALID_REQUEST, "empty transactional id: {code}");
        // A half-given producer id is refused as for an idempotent producer.
        let (code, ..) = init_v4(b, id, 60_000, (pid, -1))?;
        ensure!(code == INVALID_REQUEST, "producer id without epoch: {code}");

        // Every acknowledged transition was committed: after kill -9 the next instance
        // gets the epoch after the last one answered.
        b.kill9()?;
        b.restart()?;
        let (code, again, epoch) = first_init(b, id)?;
        ensure!(
            (code, again, epoch) == (0, pid, 3),
            "after kill -9: {code} {again} {epoch}"
        );

        // The admin tool lists and describes it (ListTransactions, DescribeTransactions).
        let out = admin_ok(&b.bootstrap(), &["transactions", "list"]);
        let rows = table(&out, "TransactionalId");
        ensure!(
            rows.iter().any(|r| r["TransactionalId"] == id
                && r["ProducerId"] == pid.to_string()
                && r["TransactionState"] == "Empty"),
            "transactions list:\n{out}"
        );
        let out = admin_ok(
            &b.bootstrap(),
            &["transactions", "describe", "--transactional-id", id],
        );
        let rows = table(&out, "CoordinatorId");
        ensure!(rows.len() == 1, "transactions describe:\n{out}");
        let row = &rows[0];
        ensure!(
            row["ProducerEpoch"] == "3"
                && row["TransactionState"] == "Empty"
                && row["TransactionTimeoutMs"] == "60000"
                && row["CurrentTransactionStartTimeMs"] == "None",
            "transactions describe:\n{out}"
        );
        // ListTransactions' filters, over raw frames: an unknown state is named back and
        // matches nothing, like any state filter; producer id filters select.
        let (code, unknown_states, listed) = list_transactions(b, &["Ongoing", "Bogus"], &[])?;
        ensure!(
            code == 0 && unknown_states == ["Bogus"] && listed.is_empty(),
            "filtered by Ongoing and Bogus: {code} {unknown_states:?} {listed:?}"
        );
        let (_, _, listed) = list_transactions(b, &["Empty"], &[pid])?;
        ensure!(
            listed == [(id.to_owned(), pid, "Empty".to_owned())],
            "filtered by Empty and its producer id: {listed:?}"
        );
        let (_, _, listed) = list_transactions(b, &[], &[pid + 1])?;
        ensure!(listed.is_empty(), "another producer id: {listed:?}");

        let unknown = admin(
            &b.bootstrap(),
            &[
                "transactions",
                "describe",
                "--transactional-id",
                "never-used",
            ],
        );
        ensure!(
            !unknown.ok && unknown.stderr.contains("TRANSACTIONAL_ID_NOT_FOUND"),
            "an unknown id: {unknown:?}"
        );
        Ok(())
    });
}
