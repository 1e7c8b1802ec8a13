//! KIP-848 regular expression subscriptions through librdkafka (`group.protocol=consumer`,
//! `subscribe(["^metrics-.*"])`): the broker resolves the expression against its topics,
//! assigns the partitions of every topic whose whole name matches, and picks up a matching
//! topic created later.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use strata_tests::{Broker, with_broker};

use crate::rdkafka_clients;

/// Upper bound of every wait.
const PHASE: Duration = Duration::from_secs(60);

const OVERRIDES: &[(&str, &str)] = &[("group.consumer.heartbeat.interval.ms", "500")];

fn produce(b: &Broker, topic: &str, n: usize) -> anyhow::Result<()> {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()?;
    for i in 0..n {
        let v = format!("{topic}-{i}");
        p.send(BaseRecord::<(), _>::to(topic).payload(&v))
            .map_err(|(e, _)| e)?;
    }
    p.flush(Duration::from_secs(30))?;
    Ok(())
}

/// Polls until `done(messages per topic)` holds, at most `PHASE`.
fn consume_until(
    c: &BaseConsumer,
    seen: &mut BTreeMap<String, usize>,
    what: &str,
    done: impl Fn(&BTreeMap<String, usize>) -> bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    while !done(seen) {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => *seen.entry(m.topic().to_owned()).or_default() += 1,
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => return Err(e.into()),
        }
        if started.elapsed() > PHASE {
            bail!("timed out after {PHASE:?} waiting for {what}; consumed {seen:?}");
        }
    }
    Ok(())
}

#[test]
fn a_regex_subscription_gets_every_matching_topic_and_later_ones() {
    with_broker(OVERRIDES, |b| {
        rdkafka_clients::create_topic(b, "metrics-a", 2)?;
        rdkafka_clients::create_topic(b, "metrics-b", 1)?;
        rdkafka_clients::create_topic(b, "other", 1)?;
        produce(b, "metrics-a", 20)?;
        produce(b, "metrics-b", 10)?;
        produce(b, "other", 5)?;
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .set("group.id", "regex")
            .set("group.protocol", "consumer")
            .set("auto.offset.reset", "earliest")
            .set("topic.metadata.refresh.interval.ms", "1000")
            .create()?;
        c.subscribe(&["^metrics-.*"])?;
        let mut seen = BTreeMap::new();
        consume_until(&c, &mut seen, "both matching topics", |s| {
            s.get("metrics-a") == Some(&20) && s.get("metrics-b") == Some(&10)
        })?;
        let topics: BTreeSet<String> = c
            .assignment()?
            .elements()
            .iter()
            .map(|e| e.topic().to_owned())
            .collect();
        ensure!(
            topics == ["metrics-a".to_owned(), "metrics-b".to_owned()].into(),
            "assigned {topics:?}"
        );

        // A matching topic created later joins the subscription.
        rdkafka_clients::create_topic(b, "metrics-c", 3)?;
        produce(b, "metrics-c", 15)?;
        consume_until(&c, &mut seen, "the new matching topic", |s| {
            s.get("metrics-c") == Some(&15)
        })?;
        ensure!(
            !seen.contains_key("other"),
            "consumed a topic that does not match: {seen:?}"
        );
        Ok(())
    });
}
