//! ACLs (KIP-140) and the StandardAuthorizer (KIP-801) on the real `strata` binary: the ACL
//! APIs as raw requests (`acl_client`), producers, consumers and the admin client of the
//! rdkafka crate as the clients they govern.
//!
//! - Without `authorizer.class.name` the three ACL APIs answer SECURITY_DISABLED.
//! - Bindings are created, described with each kind of filter (LITERAL, PREFIXED, ANY,
//!   MATCH), refused with INVALID_REQUEST where Kafka refuses them, deleted by filter, and
//!   are still there after a kill -9 and a restart (they live in the metadata log).
//! - With `allow.everyone.if.no.acl.found=false`, a producer without WRITE gets
//!   TOPIC_AUTHORIZATION_FAILED and succeeds once an ALLOW exists; a DENY wins over the
//!   ALLOW; a super user (`super.users`) is allowed regardless; a consumer without READ
//!   gets TOPIC_AUTHORIZATION_FAILED; an unauthorized CreateTopics is refused.

use std::time::{Duration, Instant};

use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use strata_tests::Broker;

use crate::acl_client::{
    ALL, ALLOW, ANY, CLUSTER, DENY, DESCRIBE, Filter, GROUP, LITERAL, MATCH, PREFIXED, READ, TOPIC,
    WRITE, acl, any, create, delete, describe,
};
use crate::admin_client::{admin, admin_opts, block};

const STANDARD_AUTHORIZER: (&str, &str) = (
    "authorizer.class.name",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
);
const SECURITY_DISABLED: i16 = 54;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_REQUEST: i16 = 42;
const TIMEOUT: Duration = Duration::from_secs(15);

fn filter(resource_type: i8, name: Option<&str>, pattern: i8) -> Filter {
    Filter {
        resource_type,
        name: name.map(str::to_owned),
        pattern,
        ..any()
    }
}

/// Produces one record to `topic` and returns its delivery outcome.
fn produce_one(b: &Broker, topic: &str) -> Result<(), RDKafkaErrorCode> {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("message.timeout.ms", "10000")
        .create()
        .expect("producer");
    let sent = block(p.send(
        FutureRecord::to(topic).key("k").payload("v"),
        Duration::from_secs(10),
    ));
    match sent {
        Ok(_) => Ok(()),
        Err((KafkaError::MessageProduction(code), _)) => Err(code),
        Err((e, _)) => panic!("unexpected delivery error {e}"),
    }
}

#[test]
fn without_an_authorizer_the_acl_apis_are_security_disabled() {
    let b = Broker::start(&[]).unwrap();
    let binding = acl(TOPIC, "t", LITERAL, READ, ALLOW);
    assert_eq!(create(b.port(), &[binding])[0].0, SECURITY_DISABLED);
    assert_eq!(describe(b.port(), &any()).0, SECURITY_DISABLED);
    assert_eq!(delete(b.port(), &[any()])[0].0, SECURITY_DISABLED);
    // Nothing is enforced either: a producer needs no ACL.
    assert_eq!(produce_one(&b, "open"), Ok(()));
}

#[test]
fn bindings_are_created_filtered_deleted_and_survive_a_restart() {
    // Every resource without a binding is open, so the test may administer ACLs.
    let mut b = Broker::start(&[
        STANDARD_AUTHORIZER,
        ("allow.everyone.if.no.acl.found", "true"),
    ])
    .unwrap();
    let port = b.port();
    let orders = acl(TOPIC, "orders", LITERAL, WRITE, ALLOW);
    let prefixed = acl(TOPIC, "ord", PREFIXED, READ, DENY);
    let wildcard = acl(TOPIC, "*", LITERAL, DESCRIBE, ALLOW);
    let group = acl(GROUP, "g1", LITERAL, READ, ALLOW);
    let results = create(
        port,
        &[
            orders.clone(),
            prefixed.clone(),
            wildcard.clone(),
            group.clone(),
            orders.clone(),
        ],
    );
    assert!(results.iter().all(|r| r.0 == 0), "{results:?}");
    // Kafka's INVALID_REQUEST for bindings it cannot store.
    let mut no_colon = orders.clone();
    no_colon.principal = "alice".into();
    let refused = create(
        port,
        &[
            acl(TOPIC, "x", MATCH, READ, ALLOW),
            acl(TOPIC, "x", LITERAL, ANY, ALLOW),
            acl(ANY, "x", LITERAL, READ, ALLOW),
            acl(TOPIC, "x", LITERAL, READ, ANY),
            acl(TOPIC, "", LITERAL, READ, ALLOW),
            acl(CLUSTER, "my-cluster", LITERAL, ALL, ALLOW),
            no_colon,
        ],
    );
    assert!(
        refused.iter().all(|r| r.0 == INVALID_REQUEST),
        "{refused:?}"
    );
    let check = |b: &Broker| {
        let (code, all) = describe(b.port(), &any());
        assert_eq!(code, 0);
        let mut want = vec![
            orders.clone(),
            prefixed.clone(),
            wildcard.clone(),
            group.clone(),
        ];
        want.sort();
        assert_eq!(all, want, "a binding created twice is stored once");
        // LITERAL: only literal bindings; a name compares exactly.
        assert_eq!(
            describe(b.port(), &filter(TOPIC, Some("orders"), LITERAL)).1,
            vec![orders.clone()]
        );
        // MATCH: what applies to "orders": the literal, the wildcard and the prefix.
        let mut applies = vec![orders.clone(), prefixed.clone(), wildcard.clone()];
        applies.sort();
        assert_eq!(
            describe(b.port(), &filter(TOPIC, Some("orders"), MATCH)).1,
            applies
        );
        assert_eq!(
            describe(b.port(), &filter(ANY, None, PREFIXED)).1,
            vec![prefixed.clone()]
        );
        assert_eq!(
            describe(b.port(), &filter(GROUP, None, ANY)).1,
            vec![group.clone()]
        );
    };
    check(&b);
    b.kill9().unwrap();
    b.restart().unwrap();
    check(&b);
    // DeleteAcls: each filter reports what it matched; a binding two filters match is
    // removed once and reported by both.
    let deleted = delete(
        port,
        &[
            filter(TOPIC, Some("orders"), MATCH),
            Filter {
                operation: READ,
                ..any()
            },
        ],
    );
    assert_eq!(deleted[0].0, 0);
    let mut matched = vec![orders.clone(), prefixed.clone(), wildcard.clone()];
    matched.sort();
    assert_eq!(deleted[0].1, matched);
    let mut reads = vec![prefixed.clone(), group.clone()];
    reads.sort();
    assert_eq!(deleted[1].1, reads);
    assert_eq!(describe(port, &any()).1, Vec::new());
    b.restart().unwrap();
    assert_eq!(
        describe(port, &any()).1,
        Vec::new(),
        "the deletes are durable"
    );
}

#[test]
fn producers_and_consumers_are_authorized_deny_wins_and_super_users_bypass() {
    // The first start makes the test's client a super user, to write the bindings that
    // let it administer ACLs once it is not one.
    let super_user = ("super.users", "User:admin;User:ANONYMOUS");
    let mut b = Broker::start(&[
        STANDARD_AUTHORIZER,
        ("allow.everyone.if.no.acl.found", "false"),
        super_user,
    ])
    .unwrap();
    let port = b.port();
    let a = admin(&b);
    let made = block(a.create_topics(
        &[NewTopic::new("orders", 1, TopicReplication::Fixed(1))],
        &admin_opts(TIMEOUT),
    ))
    .expect("CreateTopics");
    assert!(made[0].is_ok(), "{made:?}");
    // A super user needs no binding, and a DENY does not stop it.
    let deny_all = acl(TOPIC, "or", PREFIXED, ALL, DENY);
    assert!(
        create(port, std::slice::from_ref(&deny_all))
            .iter()
            .all(|r| r.0 == 0)
    );
    assert_eq!(produce_one(&b, "orders"), Ok(()));
    assert!(delete(port, &[any()])[0].0 == 0);
    let results = create(
        port,
        &[
            acl(CLUSTER, "kafka-cluster", LITERAL, ALL, ALLOW),
            acl(TOPIC, "orders", LITERAL, DESCRIBE, ALLOW),
            acl(GROUP, "unused", LITERAL, ALL, ALLOW),
        ],
    );
    assert!(results.iter().all(|r| r.0 == 0), "{results:?}");
    drop(a);
    b.set_override("super.users", None);
    b.restart().unwrap();

    // DESCRIBE but no WRITE: the producer's delivery fails with TOPIC_AUTHORIZATION_FAILED.
    assert_eq!(
        produce_one(&b, "orders"),
        Err(RDKafkaErrorCode::TopicAuthorizationFailed)
    );
    let write = acl(TOPIC, "orders", LITERAL, WRITE, ALLOW);
    assert!(create(port, &[write]).iter().all(|r| r.0 == 0));
    assert_eq!(produce_one(&b, "orders"), Ok(()));
    // A DENY on a prefix wins over the literal ALLOW.
    let deny = acl(TOPIC, "ord", PREFIXED, WRITE, DENY);
    assert!(
        create(port, std::slice::from_ref(&deny))
            .iter()
            .all(|r| r.0 == 0)
    );
    assert_eq!(
        produce_one(&b, "orders"),
        Err(RDKafkaErrorCode::TopicAuthorizationFailed)
    );
    delete(
        port,
        &[Filter {
            permission: DENY,
            ..any()
        }],
    );
    assert_eq!(produce_one(&b, "orders"), Ok(()));

    // A consumer without READ on the topic: TOPIC_AUTHORIZATION_FAILED from its fetch (the
    // ALLOW ALL on the cluster does not reach topics).
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("group.id", "unused")
        .create()
        .expect("consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset("orders", 0, rdkafka::Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = None;
    while Instant::now() < deadline && seen.is_none() {
        match c.poll(Duration::from_millis(200)) {
            Some(Err(KafkaError::MessageConsumption(code))) => seen = Some(code),
            Some(Ok(_)) => panic!("read a record without READ"),
            _ => {}
        }
    }
    assert_eq!(seen, Some(RDKafkaErrorCode::TopicAuthorizationFailed));

    // CreateTopics: ALLOW ALL on the cluster includes CREATE; without it, refused.
    delete(port, &[filter(CLUSTER, None, ANY)]);
    let a = admin(&b);
    let made = block(a.create_topics(
        &[NewTopic::new("refused", 1, TopicReplication::Fixed(1))],
        &admin_opts(TIMEOUT),
    ))
    .expect("CreateTopics");
    assert_eq!(
        made[0].as_ref().map_err(|(_, c)| *c),
        Err(RDKafkaErrorCode::TopicAuthorizationFailed)
    );
    // Nor may the client administer ACLs without ALTER on the cluster.
    assert_eq!(
        create(port, &[acl(TOPIC, "x", LITERAL, READ, ALLOW)])[0].0,
        CLUSTER_AUTHORIZATION_FAILED
    );
}
