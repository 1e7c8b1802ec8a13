//! ACLs in a three-node combined cluster of real `strata` processes: a binding created
//! through a node that is not the active controller is forwarded to it (KIP-590), committed
//! to the metadata log, and reaches every node's image, where each node's authorizer
//! enforces it; deleting it through another non-controller node lifts it everywhere.

use std::time::Duration;

use strata_protocol::StrBytes;
use strata_protocol::messages::metadata_request::MetadataRequestTopic;
use strata_protocol::messages::{ApiKey, MetadataRequest, RequestKind, ResponseKind, TopicName};
use strata_tests::cluster::Cluster;
use strata_tests::{serial, wait_until};

use crate::acl_client;
use crate::acl_client::{
    ALLOW, DENY, DESCRIBE, LITERAL, TOPIC, WRITE, acl, any, call, create, delete, describe,
};
use crate::cluster_clients::create_topic;

const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    (
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ),
    ("allow.everyone.if.no.acl.found", "true"),
];

const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// The error code Metadata v12 gives `topic` on the node at `port`.
fn metadata_error(port: u16, topic: &str) -> i16 {
    let req = RequestKind::Metadata(
        MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_string(topic.to_owned())),
            ))]))
            .with_allow_auto_topic_creation(false),
    );
    match call(port, ApiKey::Metadata, 12, req) {
        ResponseKind::Metadata(r) => r.topics.first().map_or(-1, |t| t.error_code),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_binding_created_through_a_follower_is_enforced_on_every_node() {
    let _serial = serial();
    let c = Cluster::start(3, SETTINGS);
    let controller = c.wait_ready(WAIT);
    let others: Vec<i32> = c.ids().into_iter().filter(|id| *id != controller).collect();
    let (via, later) = (others[0], others[1]);
    create_topic(&c.bootstrap(&c.ids()), "guarded", 3, 3).expect("create topic");
    for id in c.ids() {
        wait_until("the topic on every node", WAIT, POLL, || {
            Ok(metadata_error(c.port(id), "guarded") == 0)
        })
        .unwrap_or_else(|e| panic!("node {id} never served the topic: {e}"));
    }

    let deny = acl(TOPIC, "guarded", LITERAL, DESCRIBE, DENY);
    let allow_write = acl(TOPIC, "guarded", LITERAL, WRITE, ALLOW);
    let created = create(c.port(via), &[deny.clone(), allow_write.clone()]);
    assert!(created.iter().all(|r| r.0 == 0), "{created:?}");
    let mut want = vec![deny.clone(), allow_write];
    want.sort();
    for id in c.ids() {
        let port = c.port(id);
        wait_until("the bindings on every node", WAIT, POLL, || {
            Ok(describe(port, &any()).1 == want)
        })
        .unwrap_or_else(|e| panic!("node {id} never saw the bindings: {e}"));
        // The DENY of DESCRIBE wins over the ALLOW of WRITE (which implies DESCRIBE).
        assert_eq!(
            metadata_error(port, "guarded"),
            TOPIC_AUTHORIZATION_FAILED,
            "node {id}"
        );
    }

    let deleted = delete(
        c.port(later),
        &[acl_client::Filter {
            permission: DENY,
            ..any()
        }],
    );
    assert_eq!(deleted, vec![(0, vec![deny])]);
    for id in c.ids() {
        let port = c.port(id);
        wait_until("the binding gone from every node", WAIT, POLL, || {
            Ok(metadata_error(port, "guarded") == 0)
        })
        .unwrap_or_else(|e| panic!("node {id} kept the deleted binding: {e}"));
    }
}
