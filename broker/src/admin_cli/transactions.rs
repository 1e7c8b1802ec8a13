//! `strata admin transactions`: list, describe and abort (Kafka's `kafka-transactions.sh`).
//!
//! `list` asks every broker (each knows only the transactional ids it coordinates) with
//! ListTransactions; `describe` asks the id's coordinator, found with FindCoordinator, with
//! DescribeTransactions. The columns are those of Kafka's tool.
//!
//! `abort` ends a hanging transaction on one partition, as Kafka's tool does: the partition's
//! leader is asked with DescribeProducers for the producer whose open transaction starts at
//! `--start-offset` (or the producer is named with `--producer-id`, `--producer-epoch` and
//! `--coordinator-epoch`), and is sent an ABORT marker for it with WriteTxnMarkers. It is for
//! a transaction its coordinator no longer knows; one the coordinator knows ends with its
//! timeout.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_producers_request::TopicRequest;
use strata_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use strata_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest,
    ProducerId, RequestKind, ResponseKind, TopicName, TransactionalId, WriteTxnMarkersRequest,
};

use super::args::Args;
use super::client::{Client, error_name, leaders};
use super::table::Table;

pub const USAGE: &str = "\
strata admin transactions list
strata admin transactions describe --transactional-id ID
strata admin transactions abort --topic T --partition P --start-offset O
strata admin transactions abort --topic T --partition P --producer-id ID --producer-epoch E --coordinator-epoch C";

/// Runs `transactions <action> ...`.
///
/// # Errors
///
/// A bad command line, an unreachable broker, or any error a broker answered.
pub fn run(client: &mut Client, args: &[String]) -> anyhow::Result<()> {
    let a = Args::parse(
        args,
        &[
            "--transactional-id",
            "--topic",
            "--partition",
            "--start-offset",
            "--producer-id",
            "--producer-epoch",
            "--coordinator-epoch",
        ],
        &[],
    )?;
    match a.positional.first().map(String::as_str) {
        Some("list") => list(client),
        Some("describe") => describe(client, a.required("--transactional-id")?),
        Some("abort") => abort(client, &a),
        _ => bail!("usage:\n{USAGE}"),
    }
}

/// ListTransactions asked of every broker.
fn list(client: &mut Client) -> anyhow::Result<()> {
    client.metadata(Some(&[]))?;
    let ids: Vec<i32> = client.brokers().keys().copied().collect();
    let mut listed = BTreeMap::new();
    for id in ids {
        let ResponseKind::ListTransactions(r) = client.send_to(
            id,
            ApiKey::ListTransactions,
            RequestKind::ListTransactions(
                ListTransactionsRequest::default().with_duration_filter(-1),
            ),
        )?
        else {
            bail!("ListTransactions was not answered with ListTransactions");
        };
        if r.error_code != 0 {
            bail!(
                "ListTransactions on broker {id}: {}",
                error_name(r.error_code)
            );
        }
        for t in r.transaction_states {
            listed.insert(
                t.transactional_id.to_string(),
                (id, t.producer_id.0, t.transaction_state.to_string()),
            );
        }
    }
    let mut table = Table::new(&[
        "TransactionalId",
        "Coordinator",
        "ProducerId",
        "TransactionState",
    ]);
    for (txn, (coordinator, producer, state)) in listed {
        table.row(vec![
            txn,
            coordinator.to_string(),
            producer.to_string(),
            state,
        ]);
    }
    table.print();
    Ok(())
}

/// DescribeTransactions for one id at its coordinator.
fn describe(client: &mut Client, id: &str) -> anyhow::Result<()> {
    let coordinator = client.txn_coordinator(id)?;
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(StrBytes::from_string(id.to_owned()))]);
    let ResponseKind::DescribeTransactions(r) = client.send_to(
        coordinator,
        ApiKey::DescribeTransactions,
        RequestKind::DescribeTransactions(request),
    )?
    else {
        bail!("DescribeTransactions was not answered with DescribeTransactions");
    };
    let t = r
        .transaction_states
        .into_iter()
        .next()
        .context("DescribeTransactions answered no transaction")?;
    if t.error_code != 0 {
        bail!("transactional id {id}: {}", error_name(t.error_code));
    }
    let start = t.transaction_start_time_ms;
    let duration = if start < 0 {
        "None".to_owned()
    } else {
        (strata_broker::now_ms() - start).max(0).to_string()
    };
    let partitions: Vec<String> = t
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(move |p| format!("{}-{p}", topic.topic.0))
        })
        .collect();
    let mut table = Table::new(&[
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    ]);
    table.row(vec![
        coordinator.to_string(),
        id.to_owned(),
        t.producer_id.0.to_string(),
        t.producer_epoch.to_string(),
        t.transaction_state.to_string(),
        t.transaction_timeout_ms.to_string(),
        if start < 0 {
            "None".to_owned()
        } else {
            start.to_string()
        },
        duration,
        partitions.join(","),
    ]);
    table.print();
    Ok(())
}

/// Writes an ABORT marker for one producer's open transaction on one partition, at the
/// partition's leader.
fn abort(client: &mut Client, a: &Args) -> anyhow::Result<()> {
    let topic = a.required("--topic")?.to_owned();
    let partition: i32 = a
        .number("--partition")?
        .context("--partition is required")?;
    let metadata = client.metadata(Some(std::slice::from_ref(&topic)))?;
    let leader = *leaders(&metadata)
        .get(&(topic.clone(), partition))
        .with_context(|| format!("no leader for {topic}-{partition}"))?;
    let (producer_id, producer_epoch, coordinator_epoch) = match a
        .number::<i64>("--start-offset")?
    {
        Some(start) => {
            let request = DescribeProducersRequest::default().with_topics(vec![
                TopicRequest::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_indexes(vec![partition]),
            ]);
            let ResponseKind::DescribeProducers(r) = client.send_to(
                leader,
                ApiKey::DescribeProducers,
                RequestKind::DescribeProducers(request),
            )?
            else {
                bail!("DescribeProducers was not answered with DescribeProducers");
            };
            let p = r
                .topics
                .into_iter()
                .flat_map(|t| t.partitions)
                .next()
                .context("DescribeProducers answered no partition")?;
            if p.error_code != 0 {
                bail!("{topic}-{partition}: {}", error_name(p.error_code));
            }
            let producer = p
                .active_producers
                .into_iter()
                .find(|s| s.current_txn_start_offset == start)
                .with_context(|| {
                    format!("no open transaction on {topic}-{partition} starts at offset {start}")
                })?;
            (
                producer.producer_id.0,
                i16::try_from(producer.producer_epoch).context("producer epoch")?,
                producer.coordinator_epoch,
            )
        }
        None => (
            a.number("--producer-id")?.context(
                "--start-offset, or --producer-id with --producer-epoch and --coordinator-epoch",
            )?,
            a.number("--producer-epoch")?
                .context("--producer-epoch is required")?,
            a.number("--coordinator-epoch")?
                .context("--coordinator-epoch is required")?,
        ),
    };
    let request = WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_transaction_result(false)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_indexes(vec![partition]),
            ]),
    ]);
    let ResponseKind::WriteTxnMarkers(r) = client.send_to(
        leader,
        ApiKey::WriteTxnMarkers,
        RequestKind::WriteTxnMarkers(request),
    )?
    else {
        bail!("WriteTxnMarkers was not answered with WriteTxnMarkers");
    };
    let code = r
        .markers
        .into_iter()
        .flat_map(|m| m.topics)
        .flat_map(|t| t.partitions)
        .map(|p| p.error_code)
        .next()
        .context("WriteTxnMarkers answered no partition")?;
    if code != 0 {
        bail!("aborting on {topic}-{partition}: {}", error_name(code));
    }
    println!(
        "Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on {topic}-{partition}"
    );
    Ok(())
}
