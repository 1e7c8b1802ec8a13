//! Test fixtures of the handler tests: a started node with a topic, request contexts,
//! images that place a partition elsewhere, and record batches.

use std::sync::Arc;

use bytes::Bytes;
use strata_kraft::{BrokerImage, CreateTopic, MetadataImage};
use strata_protocol::messages::ApiKey;
use strata_protocol::record_batch::{SimpleRecord, encode_batch};

use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::server::handlers::RequestContext;

/// The other node of the images below.
pub const OTHER: i32 = 2;

/// A node started in `dir` (the only voter of its own quorum, as a zero-configuration
/// node runs) leading the one-partition topic `topic`.
pub async fn broker_with_topic(dir: &std::path::Path, topic: &str) -> Arc<Broker> {
    broker_with_topic_and(dir, topic, &[]).await
}

/// [`broker_with_topic`] with `settings` in its configuration.
pub async fn broker_with_topic_and(
    dir: &std::path::Path,
    topic: &str,
    settings: &[(&str, &str)],
) -> Arc<Broker> {
    let mut pairs = vec![("log.dirs".to_owned(), dir.display().to_string())];
    pairs.extend(
        settings
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let config = BrokerConfig::from_pairs(pairs).unwrap();
    let node = crate::server::start::start(config).await.unwrap();
    node.wait_for_clients().await;
    let broker = node.broker;
    create_topic(&broker, topic, 1).await;
    broker
}

/// Creates `topic` with `partitions` partitions of one replica. The write returns once this
/// node serves it, so its logs are open.
pub async fn create_topic(broker: &Broker, topic: &str, partitions: i32) {
    broker
        .create_topic(CreateTopic {
            name: topic.to_owned(),
            num_partitions: partitions,
            replication_factor: 1,
            configs: Default::default(),
            validate_only: false,
            assignments: None,
        })
        .await
        .unwrap();
    assert!(
        broker.partition(topic, 0).is_some(),
        "{topic}-0 is not open"
    );
}

/// A request context for `api_key` at `version`.
pub fn ctx(broker: &Arc<Broker>, api_key: ApiKey, version: i16) -> RequestContext {
    RequestContext {
        broker: broker.clone(),
        api_key,
        api_version: version,
        correlation_id: 1,
        client_id: None,
        peer: None,
        listener: None,
        mute: None,
        principal: Arc::from(crate::security::principal::ANONYMOUS),
    }
}

/// The broker's image with `topic`-0 led by `leader` at `leader_epoch`, and node
/// [`OTHER`] registered at `127.0.0.1:9093` in rack `r2`.
pub fn led_by(broker: &Broker, topic: &str, leader: i32, leader_epoch: i32) -> MetadataImage {
    let mut image = (*broker.image()).clone();
    let p = &mut image.topics.get_mut(topic).unwrap().partitions[0];
    p.leader = leader;
    p.leader_epoch = leader_epoch;
    p.replicas = vec![broker.config.node_id, OTHER];
    p.isr = p.replicas.clone();
    let mut other = image.brokers[&broker.config.node_id].clone();
    other.node_id = OTHER;
    other.host = "127.0.0.1".to_owned();
    other.port = 9093;
    other.rack = Some("r2".to_owned());
    image.brokers.insert(OTHER, BrokerImage { ..other });
    image
}

/// One batch of `n` records.
pub fn records(n: usize) -> Bytes {
    let recs: Vec<SimpleRecord> = (0..n)
        .map(|i| SimpleRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from_static(b"value")),
            timestamp: 1_000 + i as i64,
            headers: vec![],
        })
        .collect();
    encode_batch(0, &recs)
}

/// Makes this node the leader of `topic`-0 at `leader_epoch`, alone in its ISR, as applying
/// an image that says so would, and returns that image ([`led_by`] this node).
pub fn lead_at(broker: &Broker, topic: &str, leader_epoch: i32) -> MetadataImage {
    let node = broker.config.node_id;
    let p = broker.partition(topic, 0).unwrap();
    p.become_leader(leader_epoch).unwrap();
    let registration = strata_replication::leader::PartitionRegistration {
        replicas: vec![node],
        isr: vec![node],
        leader_epoch,
        partition_epoch: leader_epoch,
    };
    p.make_leader(
        node,
        &registration,
        strata_replication::leader::ReplicationConfig::default(),
    );
    let mut image = led_by(broker, topic, node, leader_epoch);
    let part = &mut image.topics.get_mut(topic).unwrap().partitions[0];
    part.replicas = vec![node];
    part.isr = vec![node];
    image
}
