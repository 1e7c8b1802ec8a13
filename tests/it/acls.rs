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
//! - OffsetDelete, DescribeLogDirs, DescribeProducers, OffsetForLeaderEpoch, the two
//!   reassignment APIs and the two client-quota APIs answer as Kafka's checks do once a DENY
//!   covers the topic, the group and the cluster, and answer normally before it.

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

/// The checks of the APIs Kafka authorizes beyond produce, fetch and groups: the same six
/// requests answer normally while everything is allowed, and are refused once a DENY on
/// the topic, the group and the cluster stands for `User:ANONYMOUS`.
#[test]
fn offset_delete_log_dirs_producers_epochs_and_reassignments_are_authorized() {
    use strata_protocol::StrBytes;
    use strata_protocol::messages::{
        AlterClientQuotasRequest, AlterPartitionReassignmentsRequest, ApiKey, BrokerId,
        DescribeClientQuotasRequest, DescribeLogDirsRequest, DescribeProducersRequest, GroupId,
        ListPartitionReassignmentsRequest, OffsetDeleteRequest, OffsetForLeaderEpochRequest,
        RequestKind, ResponseKind, TopicName, alter_client_quotas_request as acq,
        alter_partition_reassignments_request as apr, describe_producers_request as dp,
        offset_delete_request as od, offset_for_leader_epoch_request as ofle,
    };

    const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    let b = Broker::start(&[
        STANDARD_AUTHORIZER,
        ("allow.everyone.if.no.acl.found", "true"),
    ])
    .unwrap();
    let port = b.port();
    assert_eq!(produce_one(&b, "audited"), Ok(()));
    let topic = || TopicName(StrBytes::from_static_str("audited"));
    // Each request, and the error codes its answer carries (top level, then per partition).
    let ask = |key: ApiKey, version: i16, body: RequestKind| -> Vec<i16> {
        match crate::acl_client::call(port, key, version, body) {
            ResponseKind::OffsetDelete(r) => std::iter::once(r.error_code)
                .chain(
                    r.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                )
                .collect(),
            ResponseKind::DescribeLogDirs(r) => {
                vec![r.error_code, i16::from(r.results.is_empty())]
            }
            ResponseKind::DescribeProducers(r) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::OffsetForLeaderEpoch(r) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::AlterPartitionReassignments(r) => std::iter::once(r.error_code)
                .chain(
                    r.responses
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                )
                .collect(),
            ResponseKind::ListPartitionReassignments(r) => vec![r.error_code],
            ResponseKind::DescribeClientQuotas(r) => vec![r.error_code],
            ResponseKind::AlterClientQuotas(r) => r.entries.iter().map(|e| e.error_code).collect(),
            other => panic!("unexpected answer {other:?}"),
        }
    };
    let requests = || {
        vec![
            (
                ApiKey::OffsetDelete,
                0,
                RequestKind::OffsetDelete(
                    OffsetDeleteRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("auditors")))
                        .with_topics(vec![
                            od::OffsetDeleteRequestTopic::default()
                                .with_name(topic())
                                .with_partitions(vec![
                                    od::OffsetDeleteRequestPartition::default()
                                        .with_partition_index(0),
                                ]),
                        ]),
                ),
            ),
            (
                ApiKey::DescribeLogDirs,
                4,
                RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(None)),
            ),
            (
                ApiKey::DescribeProducers,
                0,
                RequestKind::DescribeProducers(DescribeProducersRequest::default().with_topics(
                    vec![dp::TopicRequest::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0])],
                )),
            ),
            (
                ApiKey::OffsetForLeaderEpoch,
                4,
                RequestKind::OffsetForLeaderEpoch(
                    OffsetForLeaderEpochRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![
                            ofle::OffsetForLeaderTopic::default()
                                .with_topic(topic())
                                .with_partitions(vec![
                                    ofle::OffsetForLeaderPartition::default()
                                        .with_partition(0)
                                        .with_current_leader_epoch(-1)
                                        .with_leader_epoch(0),
                                ]),
                        ]),
                ),
            ),
            (
                ApiKey::AlterPartitionReassignments,
                0,
                RequestKind::AlterPartitionReassignments(
                    AlterPartitionReassignmentsRequest::default()
                        .with_timeout_ms(10_000)
                        .with_topics(vec![
                            apr::ReassignableTopic::default()
                                .with_name(topic())
                                .with_partitions(vec![
                                    apr::ReassignablePartition::default()
                                        .with_partition_index(0)
                                        .with_replicas(None),
                                ]),
                        ]),
                ),
            ),
            (
                ApiKey::ListPartitionReassignments,
                0,
                RequestKind::ListPartitionReassignments(
                    ListPartitionReassignmentsRequest::default().with_timeout_ms(10_000),
                ),
            ),
            (
                ApiKey::DescribeClientQuotas,
                1,
                RequestKind::DescribeClientQuotas(
                    DescribeClientQuotasRequest::default()
                        .with_components(vec![])
                        .with_strict(false),
                ),
            ),
            (
                ApiKey::AlterClientQuotas,
                1,
                RequestKind::AlterClientQuotas(
                    AlterClientQuotasRequest::default()
                        .with_validate_only(true)
                        .with_entries(vec![
                            acq::EntryData::default()
                                .with_entity(vec![
                                    acq::EntityData::default()
                                        .with_entity_type(StrBytes::from_static_str("user"))
                                        .with_entity_name(Some(StrBytes::from_static_str(
                                            "auditor",
                                        ))),
                                ])
                                .with_ops(vec![
                                    acq::OpData::default()
                                        .with_key(StrBytes::from_static_str("producer_byte_rate"))
                                        .with_value(1_048_576.0),
                                ]),
                        ]),
                ),
            ),
        ]
    };
    // Allowed: no authorization error anywhere (OffsetDelete's group has no offsets, which
    // Kafka answers GROUP_ID_NOT_FOUND; cancelling a reassignment that is not there,
    // NO_REASSIGNMENT_IN_PROGRESS).
    let authz = [
        CLUSTER_AUTHORIZATION_FAILED,
        TOPIC_AUTHORIZATION_FAILED,
        GROUP_AUTHORIZATION_FAILED,
    ];
    for (key, version, body) in requests() {
        let codes = ask(key, version, body);
        assert!(
            codes.iter().all(|c| !authz.contains(c)),
            "{key:?} while allowed: {codes:?}"
        );
        if key == ApiKey::DescribeLogDirs {
            assert_eq!(codes, [0, 0], "the log directory is listed");
        }
        if matches!(
            key,
            ApiKey::DescribeClientQuotas | ApiKey::AlterClientQuotas
        ) {
            assert_eq!(codes, [0], "{key:?} while allowed");
        }
    }
    let denied = create(
        port,
        &[
            acl(TOPIC, "audited", LITERAL, ALL, DENY),
            acl(GROUP, "auditors", LITERAL, ALL, DENY),
            acl(CLUSTER, "kafka-cluster", LITERAL, ALL, DENY),
        ],
    );
    assert!(denied.iter().all(|r| r.0 == 0), "{denied:?}");
    // The quota APIs: DESCRIBE_CONFIGS and ALTER_CONFIGS on the cluster, as Kafka checks
    // them (the whole answer, and every entry).
    let expected: [(ApiKey, Vec<i16>); 8] = [
        (ApiKey::OffsetDelete, vec![GROUP_AUTHORIZATION_FAILED]),
        (
            ApiKey::DescribeLogDirs,
            vec![CLUSTER_AUTHORIZATION_FAILED, 1],
        ),
        (ApiKey::DescribeProducers, vec![TOPIC_AUTHORIZATION_FAILED]),
        (
            ApiKey::OffsetForLeaderEpoch,
            vec![TOPIC_AUTHORIZATION_FAILED],
        ),
        (
            ApiKey::AlterPartitionReassignments,
            vec![CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED],
        ),
        (
            ApiKey::ListPartitionReassignments,
            vec![CLUSTER_AUTHORIZATION_FAILED],
        ),
        (
            ApiKey::DescribeClientQuotas,
            vec![CLUSTER_AUTHORIZATION_FAILED],
        ),
        (
            ApiKey::AlterClientQuotas,
            vec![CLUSTER_AUTHORIZATION_FAILED],
        ),
    ];
    for ((key, version, body), (want_key, want)) in requests().into_iter().zip(expected) {
        assert_eq!(key, want_key);
        // The bindings reach the authorizer through the metadata log: wait for them.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let codes = ask(key, version, body.clone());
            if codes == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{key:?} once denied: {codes:?}, not {want:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// OffsetFetch's named topics, ConsumerGroupDescribe and a KIP-848 member's subscription
/// are checked against DESCRIBE on their topics, as Kafka's KafkaApis checks them: a
/// client refused a topic learns neither its offsets nor who consumes it.
#[test]
fn offset_fetch_group_descriptions_and_subscriptions_check_their_topics() {
    use strata_protocol::StrBytes;
    use strata_protocol::messages::{
        ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, GroupId,
        OffsetFetchRequest, RequestKind, ResponseKind, TopicName, offset_fetch_request as of,
    };

    const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    let b = Broker::start(&[
        STANDARD_AUTHORIZER,
        ("allow.everyone.if.no.acl.found", "true"),
    ])
    .unwrap();
    let port = b.port();
    assert_eq!(produce_one(&b, "hidden"), Ok(()));
    assert_eq!(produce_one(&b, "seen"), Ok(()));
    let name = |s: &'static str| TopicName(StrBytes::from_static_str(s));
    // A member's heartbeat: its error code and message.
    let join = |group: &'static str, topic: &'static str| -> (i16, Option<String>) {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str(group)))
            .with_member_id(StrBytes::from_string(format!("{group}-{topic}-member")))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![name(topic)]))
            .with_topic_partitions(Some(vec![]));
        match crate::acl_client::call(
            port,
            ApiKey::ConsumerGroupHeartbeat,
            1,
            RequestKind::ConsumerGroupHeartbeat(req),
        ) {
            ResponseKind::ConsumerGroupHeartbeat(r) => {
                (r.error_code, r.error_message.map(|m| m.to_string()))
            }
            other => panic!("unexpected answer {other:?}"),
        }
    };
    // OffsetFetch v8 naming `hidden`: the group's error and the partition's.
    let fetch = || -> (i16, Vec<i16>) {
        let req = OffsetFetchRequest::default().with_groups(vec![
            of::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("watchers")))
                .with_topics(Some(vec![
                    of::OffsetFetchRequestTopics::default()
                        .with_name(name("hidden"))
                        .with_partition_indexes(vec![0]),
                ])),
        ]);
        match crate::acl_client::call(port, ApiKey::OffsetFetch, 8, RequestKind::OffsetFetch(req)) {
            ResponseKind::OffsetFetch(r) => (
                r.groups[0].error_code,
                r.groups[0]
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect(),
            ),
            other => panic!("unexpected answer {other:?}"),
        }
    };
    // ConsumerGroupDescribe of `watchers`: its error and how many members it shows.
    let describe = || -> (i16, usize) {
        let req = ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(StrBytes::from_static_str("watchers"))])
            .with_include_authorized_operations(true);
        match crate::acl_client::call(
            port,
            ApiKey::ConsumerGroupDescribe,
            0,
            RequestKind::ConsumerGroupDescribe(req),
        ) {
            ResponseKind::ConsumerGroupDescribe(r) => {
                (r.groups[0].error_code, r.groups[0].members.len())
            }
            other => panic!("unexpected answer {other:?}"),
        }
    };

    assert_eq!(join("watchers", "hidden"), (0, None));
    assert_eq!(fetch(), (0, vec![0]));
    assert_eq!(describe(), (0, 1));

    let denied = create(port, &[acl(TOPIC, "hidden", LITERAL, DESCRIBE, DENY)]);
    assert!(denied.iter().all(|r| r.0 == 0), "{denied:?}");
    let deadline = Instant::now() + TIMEOUT;
    while fetch() != (0, vec![TOPIC_AUTHORIZATION_FAILED]) {
        assert!(
            Instant::now() < deadline,
            "OffsetFetch once denied: {:?}",
            fetch()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(describe(), (TOPIC_AUTHORIZATION_FAILED, 0));
    let (code, message) = join("others", "hidden");
    assert_eq!(code, TOPIC_AUTHORIZATION_FAILED, "{message:?}");
    assert!(message.is_some_and(|m| m.contains("hidden")));
    // A subscription to a topic the client may describe still joins.
    assert_eq!(join("others", "seen"), (0, None));
}
