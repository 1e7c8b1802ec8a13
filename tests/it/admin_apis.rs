//! The legacy AlterConfigs through librdkafka's admin API (the `rdkafka` crate), and the
//! parts of DescribeCluster and DescribeLogDirs that no stock client here can reach
//! (DescribeLogDirs v4's file-system sizes, DescribeCluster's endpoint types and fenced
//! flag), as raw requests encoded by the protocol crate, against the real `strata` binary.
//! The client-side checks of DescribeCluster and DescribeLogDirs are in
//! tests/python/test_admin_apis.py.

use std::time::Duration;

use bytes::Bytes;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use strata_protocol::StrBytes;
use strata_protocol::messages::{
    AlterConfigsRequest, ApiKey, DescribeClusterRequest, DescribeClusterResponse,
    DescribeLogDirsRequest, DescribeLogDirsResponse, RequestKind, ResponseKind, TopicName,
    alter_configs_request, describe_log_dirs_request,
};
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_tests::Broker;
use strata_tests::wire::{self, recv, send};

use crate::admin_client::{admin, admin_opts, block};

const TIMEOUT: Duration = Duration::from_secs(15);

/// A topic's (value, source) for each key, as DescribeConfigs reports them.
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

fn alter(
    a: &AdminClient<DefaultClientContext>,
    config: &AlterConfig<'_>,
    opts: &AdminOptions,
) -> Result<(), RDKafkaErrorCode> {
    let mut r = block(a.alter_configs([config], opts)).expect("AlterConfigs request");
    assert_eq!(r.len(), 1);
    r.remove(0).map(|_| ()).map_err(|(_, code)| code)
}

/// One raw AlterConfigs resource: type, name, (key, value) pairs.
type RawResource<'a> = (i8, &'a str, Vec<(&'a str, Option<&'a str>)>);

/// Sends a raw AlterConfigs v2 and returns each resource's (error code, message).
fn alter_raw(b: &Broker, resources: Vec<RawResource<'_>>) -> Vec<(i16, Option<String>)> {
    let resources = resources
        .into_iter()
        .map(|(resource_type, name, configs)| {
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(name.to_owned()))
                .with_configs(
                    configs
                        .into_iter()
                        .map(|(k, v)| {
                            alter_configs_request::AlterableConfig::default()
                                .with_name(StrBytes::from_string(k.to_owned()))
                                .with_value(v.map(|v| StrBytes::from_string(v.to_owned())))
                        })
                        .collect(),
                )
        })
        .collect();
    let req = RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(resources));
    match call(b, ApiKey::AlterConfigs, 2, req) {
        ResponseKind::AlterConfigs(r) => r
            .responses
            .into_iter()
            .map(|r| (r.error_code, r.error_message.map(|m| m.to_string())))
            .collect(),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn alter_configs_error_codes() {
    let b = Broker::start(&[]).unwrap();
    let mut s = wire::connect(b.port());
    send(&mut s, &wire::metadata_request(1, "t"));
    recv(&mut s).expect("metadata (auto-creates the topic)");

    let codes = |r: Vec<(i16, Option<String>)>| r.into_iter().map(|(c, _)| c).collect::<Vec<_>>();
    // INVALID_CONFIG (40) for a bad value and an unknown key; UNKNOWN_TOPIC_OR_PARTITION (3).
    assert_eq!(
        codes(alter_raw(
            &b,
            vec![
                (2, "t", vec![("retention.ms", Some("forever"))]),
                (2, "u", vec![("retention.ms", Some("1"))]),
            ]
        )),
        vec![40, 3]
    );
    assert_eq!(
        codes(alter_raw(&b, vec![(2, "t", vec![("no.such", Some("1"))])])),
        vec![40]
    );
    // INVALID_REQUEST (42): a repeated key, a null value, a resource named twice (each
    // copy), a read-only broker config (KIP-226), a broker-logger resource (not in the
    // legacy API).
    let r = alter_raw(
        &b,
        vec![(
            2,
            "t",
            vec![("retention.ms", Some("1")), ("retention.ms", Some("2"))],
        )],
    );
    assert_eq!(
        r,
        vec![(42, Some("Error due to duplicate config keys".to_owned()))]
    );
    let r = alter_raw(
        &b,
        vec![(2, "t", vec![("retention.ms", None), ("segment.ms", None)])],
    );
    assert_eq!(
        r,
        vec![(
            42,
            Some("Null value not supported for : retention.ms, segment.ms".to_owned())
        )]
    );
    let twice = vec![
        (2, "t", vec![("retention.ms", Some("1"))]),
        (2, "t", vec![("retention.ms", Some("2"))]),
    ];
    assert_eq!(codes(alter_raw(&b, twice)), vec![42, 42]);
    assert_eq!(
        codes(alter_raw(
            &b,
            vec![
                (4, "1", vec![("log.retention.hours", Some("1"))]),
                (8, "1", vec![])
            ]
        )),
        vec![42, 42]
    );
    // An empty set on a topic without overrides is a success that changes nothing.
    assert_eq!(alter_raw(&b, vec![(2, "t", vec![])]), vec![(0, None)]);

    // Only the final set must keep max.compaction.lag.ms >= min.compaction.lag.ms (KIP-354),
    // not each step towards it: raising both past the old maximum is accepted.
    let lags = |min: &'static str, max: &'static str| {
        vec![(
            2,
            "t",
            vec![
                ("min.compaction.lag.ms", Some(min)),
                ("max.compaction.lag.ms", Some(max)),
            ],
        )]
    };
    assert_eq!(codes(alter_raw(&b, lags("100", "200"))), vec![0]);
    assert_eq!(codes(alter_raw(&b, lags("1000", "2000"))), vec![0]);
    assert_eq!(codes(alter_raw(&b, lags("3000", "2500"))), vec![40]);
    assert_eq!(codes(alter_raw(&b, lags("10", "20"))), vec![0]);
}

#[test]
fn alter_configs_replaces_a_topics_overrides() {
    let b = Broker::start(&[]).unwrap();
    let a = admin(&b);
    let t = NewTopic::new("legacy", 2, TopicReplication::Fixed(1))
        .set("retention.ms", "12345")
        .set("segment.bytes", "1048576");
    let created = block(a.create_topics(&[t], &admin_opts(TIMEOUT))).expect("CreateTopics");
    assert!(created[0].is_ok(), "{created:?}");
    assert_eq!(
        topic_config(&a, "legacy", "retention.ms"),
        ("12345".to_owned(), "DynamicTopic".to_owned())
    );

    // validate_only: checked, nothing written.
    let change =
        AlterConfig::new(ResourceSpecifier::Topic("legacy")).set("max.message.bytes", "2000");
    assert_eq!(
        alter(&a, &change, &admin_opts(TIMEOUT).validate_only(true)),
        Ok(())
    );
    assert_eq!(topic_config(&a, "legacy", "max.message.bytes").1, "Default");
    assert_eq!(topic_config(&a, "legacy", "retention.ms").0, "12345");

    // A bad value or an unknown key: nothing written. (The rdkafka crate drops the
    // per-resource error codes of AlterConfigs; the raw test below checks them.)
    for (k, v) in [("retention.ms", "forever"), ("no.such.config", "1")] {
        let bad = AlterConfig::new(ResourceSpecifier::Topic("legacy")).set(k, v);
        assert_eq!(alter(&a, &bad, &admin_opts(TIMEOUT)), Ok(()), "{k}={v}");
    }
    assert_eq!(topic_config(&a, "legacy", "retention.ms").0, "12345");

    // The whole set is replaced: max.message.bytes set, segment.bytes kept because it is
    // named again, retention.ms (not named) back to its default.
    let change = AlterConfig::new(ResourceSpecifier::Topic("legacy"))
        .set("max.message.bytes", "2000")
        .set("segment.bytes", "1048576");
    assert_eq!(alter(&a, &change, &admin_opts(TIMEOUT)), Ok(()));
    assert_eq!(
        topic_config(&a, "legacy", "max.message.bytes"),
        ("2000".to_owned(), "DynamicTopic".to_owned())
    );
    assert_eq!(
        topic_config(&a, "legacy", "segment.bytes"),
        ("1048576".to_owned(), "DynamicTopic".to_owned())
    );
    let (retention, source) = topic_config(&a, "legacy", "retention.ms");
    assert_eq!(retention, "604800000");
    assert_ne!(source, "DynamicTopic");

    // An empty set removes every override.
    let clear = AlterConfig::new(ResourceSpecifier::Topic("legacy"));
    assert_eq!(alter(&a, &clear, &admin_opts(TIMEOUT)), Ok(()));
    for key in ["max.message.bytes", "segment.bytes", "retention.ms"] {
        assert_ne!(topic_config(&a, "legacy", key).1, "DynamicTopic", "{key}");
    }
}

/// Sends `body` at `version` and decodes the answer (flexible header: correlation id and an
/// empty tagged-field section).
fn call(b: &Broker, key: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
    crate::acl_client::call(b.port(), key, version, body)
}

fn describe_log_dirs(b: &Broker, topics: Option<Vec<(&str, Vec<i32>)>>) -> DescribeLogDirsResponse {
    let topics = topics.map(|t| {
        t.into_iter()
            .map(|(name, partitions)| {
                describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(name.to_owned())))
                    .with_partitions(partitions)
            })
            .collect()
    });
    let req = RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(topics));
    match call(b, ApiKey::DescribeLogDirs, 4, req) {
        ResponseKind::DescribeLogDirs(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn describe_log_dirs_v4_reports_sizes_and_the_file_system() {
    let b = Broker::start(&[]).unwrap();
    let mut s = wire::connect(b.port());
    send(&mut s, &wire::metadata_request(1, "sized"));
    recv(&mut s).expect("metadata (auto-creates the topic)");

    let r = describe_log_dirs(&b, None);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.results.len(), 1);
    let dir = &r.results[0];
    assert_eq!(dir.error_code, 0);
    let data_dir = std::path::absolute(b.data_dir()).unwrap();
    assert_eq!(dir.log_dir.to_string(), data_dir.display().to_string());
    assert!(dir.total_bytes > 0, "{}", dir.total_bytes);
    assert!(
        (0..=dir.total_bytes).contains(&dir.usable_bytes),
        "{} of {}",
        dir.usable_bytes,
        dir.total_bytes
    );
    let size_of = |r: &DescribeLogDirsResponse| -> i64 {
        r.results[0]
            .topics
            .iter()
            .find(|t| t.name.0.as_str() == "sized")
            .and_then(|t| t.partitions.iter().find(|p| p.partition_index == 0))
            .map(|p| p.partition_size)
            .expect("sized-0 listed")
    };
    assert_eq!(size_of(&r), 0);

    let records: Vec<SimpleRecord> = (0..50)
        .map(|i| SimpleRecord {
            key: None,
            value: Some(Bytes::from(vec![b'v'; 1000])),
            timestamp: i,
            headers: vec![],
        })
        .collect();
    let batch = encode_batch(0, &records);
    send(&mut s, &wire::produce_request(2, "sized", &batch));
    let resp = recv(&mut s).expect("produce");
    assert_eq!(wire::produce_result(&resp, "sized"), (0, 0));

    let r = describe_log_dirs(&b, Some(vec![("sized", vec![0]), ("unknown", vec![0])]));
    let batch_len = i64::try_from(batch.len()).unwrap();
    assert_eq!(size_of(&r), batch_len);
    // Only the partition asked for; the unknown topic is simply absent.
    assert_eq!(r.results[0].topics.len(), 1);
    assert_eq!(r.results[0].topics[0].partitions.len(), 1);
}

fn describe_cluster(
    b: &Broker,
    version: i16,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    match call(
        b,
        ApiKey::DescribeCluster,
        version,
        RequestKind::DescribeCluster(req),
    ) {
        ResponseKind::DescribeCluster(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn describe_cluster_endpoint_types_and_fenced_flag() {
    let b = Broker::start(&[("node.id", "3")]).unwrap();

    let r = describe_cluster(
        &b,
        2,
        DescribeClusterRequest::default().with_include_fenced_brokers(true),
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(r.endpoint_type, 1);
    assert_eq!(r.controller_id.0, 3);
    assert_eq!(r.cluster_authorized_operations, i32::MIN);
    let brokers: Vec<(i32, String, i32, bool)> = r
        .brokers
        .iter()
        .map(|x| (x.broker_id.0, x.host.to_string(), x.port, x.is_fenced))
        .collect();
    assert_eq!(
        brokers,
        vec![(3, "127.0.0.1".to_owned(), i32::from(b.port()), false)]
    );

    // A broker serves the BROKER endpoint type only (KIP-919).
    let r = describe_cluster(
        &b,
        1,
        DescribeClusterRequest::default().with_endpoint_type(2),
    );
    assert_eq!(r.error_code, 114, "MISMATCHED_ENDPOINT_TYPE");
    assert!(r.brokers.is_empty());
    let r = describe_cluster(
        &b,
        1,
        DescribeClusterRequest::default().with_endpoint_type(9),
    );
    assert_eq!(r.error_code, 115, "UNSUPPORTED_ENDPOINT_TYPE");

    let r = describe_cluster(
        &b,
        0,
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
    );
    assert_eq!(r.error_code, 0);
    // CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE.
    assert_eq!(r.cluster_authorized_operations, 0b1_1111_1010_0000);
}
