//! `strata admin transactions`: list and describe (Kafka's `kafka-transactions.sh`).
//!
//! `list` asks every broker (each knows only the transactional ids it coordinates) with
//! ListTransactions; `describe` asks the id's coordinator, found with FindCoordinator, with
//! DescribeTransactions. The columns are those of Kafka's tool.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use strata_protocol::StrBytes;
use strata_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, ListTransactionsRequest, RequestKind, ResponseKind,
    TransactionalId,
};

use super::args::Args;
use super::client::{Client, error_name};
use super::table::Table;

pub const USAGE: &str = "\
strata admin transactions list
strata admin transactions describe --transactional-id ID";

/// Runs `transactions <action> ...`.
///
/// # Errors
///
/// A bad command line, an unreachable broker, or any error a broker answered.
pub fn run(client: &mut Client, args: &[String]) -> anyhow::Result<()> {
    let a = Args::parse(args, &["--transactional-id"], &[])?;
    match a.positional.first().map(String::as_str) {
        Some("list") => list(client),
        Some("describe") => describe(client, a.required("--transactional-id")?),
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
