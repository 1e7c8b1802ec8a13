//! Topic administration through librdkafka's admin API (the `rdkafka` crate) against the real
//! `strata` binary: CreateTopics and its Kafka error codes, DescribeConfigs with sources,
//! LogAppendTime topics, DeleteTopics, CreatePartitions, and metadata that survives restarts.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, Timestamp};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;
use strata_tests::Broker;

use crate::admin_client::{admin, admin_opts, block};

const TIMEOUT: Duration = Duration::from_secs(15);

fn create(
    a: &AdminClient<DefaultClientContext>,
    topic: NewTopic<'_>,
) -> Result<String, RDKafkaErrorCode> {
    let mut r =
        block(a.create_topics(&[topic], &admin_opts(TIMEOUT))).expect("CreateTopics request");
    r.remove(0).map_err(|(_, code)| code)
}

fn partitions_of(b: &Broker, topic: &str) -> Option<usize> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()
        .unwrap();
    let md = c.fetch_metadata(Some(topic), TIMEOUT).expect("metadata");
    let t = md.topics().first()?;
    if t.error().is_some() {
        return None;
    }
    Some(t.partitions().len())
}

/// The value and the source (as `ConfigSource`'s Debug name, since it is neither Clone nor PartialEq).
fn topic_config(a: &AdminClient<DefaultClientContext>, topic: &str, key: &str) -> (String, String) {
    let r = block(a.describe_configs(&[ResourceSpecifier::Topic(topic)], &admin_opts(TIMEOUT)))
        .expect("DescribeConfigs");
    let res = r.into_iter().next().unwrap().expect("resource");
    let e = res
        .get(key)
        .unwrap_or_else(|| panic!("{key} missing from DescribeConfigs"));
    (
        e.value.clone().unwrap_or_default(),
        format!("{:?}", e.source),
    )
}

#[test]
fn create_describe_delete_and_restart() {
    let mut b = Broker::start(&[
        ("log.retention.hours", "48"),
        ("log.segment.bytes", "1048576"),
    ])
    .unwrap();
    let a = admin(&b);

    let t = NewTopic::new("orders", 3, TopicReplication::Fixed(1)).set("retention.ms", "12345");
    assert_eq!(create(&a, t), Ok("orders".to_owned()));
    assert_eq!(partitions_of(&b, "orders"), Some(3));

    // Kafka's error codes for each kind of bad request.
    let cases: Vec<(NewTopic<'_>, RDKafkaErrorCode)> = vec![
        (
            NewTopic::new("orders", 1, TopicReplication::Fixed(1)),
            RDKafkaErrorCode::TopicAlreadyExists,
        ),
        (
            NewTopic::new("bad/name", 1, TopicReplication::Fixed(1)),
            RDKafkaErrorCode::InvalidTopic,
        ),
        (
            NewTopic::new("..", 1, TopicReplication::Fixed(1)),
            RDKafkaErrorCode::InvalidTopic,
        ),
        (
            NewTopic::new("zero", 0, TopicReplication::Fixed(1)),
            RDKafkaErrorCode::InvalidPartitions,
        ),
        (
            NewTopic::new("rf3", 1, TopicReplication::Fixed(3)),
            RDKafkaErrorCode::InvalidReplicationFactor,
        ),
        (
            NewTopic::new("badcfg", 1, TopicReplication::Fixed(1)).set("retention.ms", "soon"),
            RDKafkaErrorCode::InvalidConfig,
        ),
        (
            NewTopic::new("unknowncfg", 1, TopicReplication::Fixed(1)).set("no.such.config", "1"),
            RDKafkaErrorCode::InvalidConfig,
        ),
    ];
    for (topic, want) in cases {
        let name = topic.name.to_owned();
        assert_eq!(create(&a, topic), Err(want), "creating {name}");
    }
    for name in ["zero", "rf3", "badcfg", "unknowncfg"] {
        assert_eq!(
            partitions_of(&b, name),
            None,
            "{name} must not exist after a failed create"
        );
    }

    // validate_only creates nothing.
    let r = block(a.create_topics(
        &[NewTopic::new("dry-run", 2, TopicReplication::Fixed(1))],
        &admin_opts(TIMEOUT).validate_only(true),
    ))
    .unwrap();
    assert!(r[0].is_ok(), "{r:?}");

    // Sources: a topic override, a broker setting, and Kafka's default. The broker's
    // `log.retention.hours` gives the value, but Kafka's ConfigHelper reports
    // DEFAULT_CONFIG for it: the synonym chain of `retention.ms` is cut before its first
    // `log.retention.ms` entry, and there is none.
    assert_eq!(
        topic_config(&a, "orders", "retention.ms"),
        ("12345".to_owned(), "DynamicTopic".to_owned())
    );
    let t2 = NewTopic::new("plain", 1, TopicReplication::Fixed(1));
    assert!(create(&a, t2).is_ok());
    assert_eq!(
        topic_config(&a, "plain", "retention.ms"),
        ((48 * 3_600_000i64).to_string(), "Default".to_owned())
    );
    assert_eq!(
        topic_config(&a, "plain", "segment.bytes"),
        ("1048576".to_owned(), "StaticBroker".to_owned())
    );
    assert_eq!(
        topic_config(&a, "plain", "cleanup.policy"),
        ("delete".to_owned(), "Default".to_owned())
    );
    drop(a);

    // Everything above survives a clean restart and a kill -9.
    b.stop().unwrap();
    b.restart().unwrap();
    assert_eq!(partitions_of(&b, "orders"), Some(3));
    assert_eq!(partitions_of(&b, "dry-run"), None);
    b.kill9().unwrap();
    b.restart().unwrap();
    let a = admin(&b);
    assert_eq!(
        topic_config(&a, "orders", "retention.ms"),
        ("12345".to_owned(), "DynamicTopic".to_owned())
    );

    // Delete, and the deletion survives a restart too; the data directory goes with it.
    let r = block(a.delete_topics(&["orders"], &admin_opts(TIMEOUT))).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let r = block(a.delete_topics(&["orders"], &admin_opts(TIMEOUT))).unwrap();
    assert_eq!(
        r[0].as_ref().map_err(|(_, c)| *c),
        Err(RDKafkaErrorCode::UnknownTopicOrPartition)
    );
    drop(a);
    b.kill9().unwrap();
    b.restart().unwrap();
    assert_eq!(partitions_of(&b, "plain"), Some(1));
    assert!(
        !b.data_dir().join("orders-0").exists(),
        "deleted topic's data is gone"
    );
    let md_consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()
        .unwrap();
    let md = md_consumer.fetch_metadata(None, TIMEOUT).unwrap();
    assert!(
        md.topics().iter().all(|t| t.name() != "orders"),
        "orders is gone from the topic list"
    );
}

#[test]
fn log_append_time_topic_stamps_the_broker_clock() {
    let b = Broker::start(&[]).unwrap();
    let a = admin(&b);
    let t = NewTopic::new("stamped", 1, TopicReplication::Fixed(1))
        .set("message.timestamp.type", "LogAppendTime");
    assert!(create(&a, t).is_ok());
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let before = now_ms();
    for i in 0..10 {
        // A client timestamp from 2001: the broker must replace it.
        p.send(
            BaseRecord::to("stamped")
                .key(&format!("k{i}"))
                .payload("v")
                .timestamp(1_000_000_000_000),
        )
        .unwrap();
    }
    p.flush(TIMEOUT).unwrap();
    let after = now_ms();
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("stamped", 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut seen = 0;
    let deadline = Instant::now() + TIMEOUT;
    while seen < 10 && Instant::now() < deadline {
        let Some(m) = c.poll(Duration::from_millis(500)) else {
            continue;
        };
        let m = m.unwrap();
        match m.timestamp() {
            Timestamp::LogAppendTime(ts) => assert!(
                (before..=after).contains(&ts),
                "{ts} not in [{before}, {after}]"
            ),
            other => panic!("expected LogAppendTime, got {other:?}"),
        }
        seen += 1;
    }
    assert_eq!(seen, 10);
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn grow(
    a: &AdminClient<DefaultClientContext>,
    p: &rdkafka::admin::NewPartitions<'_>,
    validate_only: bool,
) -> Result<String, RDKafkaErrorCode> {
    let mut r = block(a.create_partitions([p], &admin_opts(TIMEOUT).validate_only(validate_only)))
        .expect("CreatePartitions request");
    r.remove(0).map_err(|(_, code)| code)
}

/// CreatePartitions (Kafka's `ReplicationControlManager.createPartitions`): a topic grows, its new partitions take messages at once and survive a
/// kill -9; counts that are not an increase, unknown topics and unusable manual assignments
/// get Kafka's codes; `validate_only` checks without writing.
#[test]
fn create_partitions_grows_a_topic() {
    use rdkafka::admin::NewPartitions;
    let mut b = Broker::start(&[]).unwrap();
    let a = admin(&b);
    create(&a, NewTopic::new("grow", 2, TopicReplication::Fixed(1))).unwrap();

    assert_eq!(
        grow(&a, &NewPartitions::new("grow", 5), false),
        Ok("grow".into())
    );
    assert_eq!(partitions_of(&b, "grow"), Some(5));
    assert_eq!(
        grow(&a, &NewPartitions::new("grow", 3), false),
        Err(RDKafkaErrorCode::InvalidPartitions)
    );
    assert_eq!(
        grow(&a, &NewPartitions::new("grow", 5), false),
        Err(RDKafkaErrorCode::InvalidPartitions)
    );
    assert_eq!(
        grow(&a, &NewPartitions::new("no-such-topic", 5), false),
        Err(RDKafkaErrorCode::UnknownTopicOrPartition)
    );
    // Broker 7 is not registered; one replica list for two new partitions.
    let bad: &[&[i32]] = &[&[7]];
    assert_eq!(
        grow(&a, &NewPartitions::new("grow", 6).assign(bad), false),
        Err(RDKafkaErrorCode::InvalidReplicaAssignment)
    );
    let good: &[&[i32]] = &[&[1]];
    assert_eq!(
        grow(&a, &NewPartitions::new("grow", 6).assign(good), true),
        Ok("grow".into())
    );
    assert_eq!(partitions_of(&b, "grow"), Some(5), "validate_only wrote");
    assert_eq!(
        grow(&a, &NewPartitions::new("grow", 6).assign(good), false),
        Ok("grow".into())
    );
    assert_eq!(partitions_of(&b, "grow"), Some(6));

    // A new partition takes messages.
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()
        .unwrap();
    p.send(
        BaseRecord::<(), _>::to("grow")
            .payload("in p5")
            .partition(5),
    )
    .map_err(|(e, _)| e)
    .unwrap();
    p.flush(TIMEOUT).unwrap();
    drop(p);
    drop(a);

    b.kill9().unwrap();
    b.restart().unwrap();
    assert_eq!(partitions_of(&b, "grow"), Some(6));
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", "grow-reader")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("grow", 5, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let started = Instant::now();
    let value = loop {
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            break String::from_utf8_lossy(m.unwrap().payload().unwrap_or_default()).into_owned();
        }
        assert!(started.elapsed() < TIMEOUT, "nothing read from partition 5");
    };
    assert_eq!(value, "in p5");
    // Closed before the broker stops: a consumer closing against a stopped broker waits out
    // its commit and leave timeouts.
    drop(c);
    b.stop().unwrap();
}
