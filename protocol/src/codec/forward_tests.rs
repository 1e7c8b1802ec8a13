//! Responses to forwarded requests (KIP-590): what the active controller answers on its
//! client listener decodes with `decode_forwarded_response`, and nothing else does.

use super::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use proptest::prelude::*;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A response with every field of `v` set away from its default, so that a field the
/// schema walks at the wrong version shows up as a failed decode.
fn sample(key: ApiKey, v: i16, topic: &str, id: uuid::Uuid, n: i32) -> ResponseKind {
    let name = TopicName(s(topic));
    match key {
        ApiKey::CreateTopics => {
            let mut t = create_topics_response::CreatableTopicResult::default()
                .with_name(name)
                .with_error_code(36)
                .with_error_message(Some(s("exists")));
            if v >= 5 {
                t = t
                    .with_num_partitions(n)
                    .with_replication_factor(3)
                    .with_topic_config_error_code(12)
                    .with_configs(Some(vec![
                        create_topics_response::CreatableTopicConfigs::default()
                            .with_name(s("cleanup.policy"))
                            .with_value(Some(s("compact")))
                            .with_config_source(5),
                    ]));
            }
            if v >= 7 {
                t = t.with_topic_id(id);
            }
            ResponseKind::CreateTopics(
                CreateTopicsResponse::default()
                    .with_throttle_time_ms(n)
                    .with_topics(vec![t.clone(), t]),
            )
        }
        ApiKey::DeleteTopics => {
            let mut r = delete_topics_response::DeletableTopicResult::default()
                .with_name(Some(name))
                .with_error_code(3);
            if v >= 5 {
                r = r.with_error_message(Some(s("unknown")));
            }
            if v >= 6 {
                r = r.with_topic_id(id);
            }
            ResponseKind::DeleteTopics(
                DeleteTopicsResponse::default()
                    .with_throttle_time_ms(n)
                    .with_responses(vec![r]),
            )
        }
        ApiKey::CreatePartitions => ResponseKind::CreatePartitions(
            CreatePartitionsResponse::default()
                .with_throttle_time_ms(n)
                .with_results(vec![
                    create_partitions_response::CreatePartitionsTopicResult::default()
                        .with_name(name)
                        .with_error_code(37)
                        .with_error_message(Some(s("fewer"))),
                ]),
        ),
        ApiKey::ElectLeaders => ResponseKind::ElectLeaders(
            ElectLeadersResponse::default()
                .with_throttle_time_ms(n)
                .with_error_code(if v >= 1 { 41 } else { 0 })
                .with_replica_election_results(vec![
                    elect_leaders_response::ReplicaElectionResult::default()
                        .with_topic(name)
                        .with_partition_result(vec![
                            elect_leaders_response::PartitionResult::default()
                                .with_partition_id(n)
                                .with_error_code(80)
                                .with_error_message(Some(s("not in sync"))),
                            elect_leaders_response::PartitionResult::default().with_partition_id(0),
                        ]),
                ]),
        ),
        ApiKey::AlterConfigs => ResponseKind::AlterConfigs(
            AlterConfigsResponse::default()
                .with_throttle_time_ms(n)
                .with_responses(vec![
                    alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_error_code(41)
                        .with_error_message(Some(s("not the controller")))
                        .with_resource_type(2)
                        .with_resource_name(s(topic)),
                ]),
        ),
        ApiKey::IncrementalAlterConfigs => ResponseKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsResponse::default()
                .with_throttle_time_ms(n)
                .with_responses(vec![
                    incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_error_code(40)
                        .with_error_message(None)
                        .with_resource_type(2)
                        .with_resource_name(s(topic)),
                ]),
        ),
        ApiKey::CreateAcls => ResponseKind::CreateAcls(
            CreateAclsResponse::default()
                .with_throttle_time_ms(n)
                .with_results(vec![
                    create_acls_response::AclCreationResult::default()
                        .with_error_code(42)
                        .with_error_message(Some(s("Invalid patternType MATCH"))),
                ]),
        ),
        ApiKey::DeleteAcls => ResponseKind::DeleteAcls(
            DeleteAclsResponse::default()
                .with_throttle_time_ms(n)
                .with_filter_results(vec![
                    delete_acls_response::DeleteAclsFilterResult::default()
                        .with_error_code(42)
                        .with_error_message(Some(s("bad filter")))
                        .with_matching_acls(vec![
                            delete_acls_response::DeleteAclsMatchingAcl::default()
                                .with_error_code(0)
                                .with_resource_type(2)
                                .with_resource_name(s(topic))
                                .with_pattern_type(if v >= 1 { 4 } else { 3 })
                                .with_principal(s("User:alice"))
                                .with_host(s("*"))
                                .with_operation(4)
                                .with_permission_type(3),
                        ]),
                ]),
        ),
        ApiKey::AlterPartitionReassignments => ResponseKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default()
                .with_throttle_time_ms(n)
                .with_allow_replication_factor_change(v == 0 || n % 2 == 0)
                .with_error_code(41)
                .with_error_message(Some(s("not the controller")))
                .with_responses(vec![
                    alter_partition_reassignments_response::ReassignableTopicResponse::default()
                        .with_name(name)
                        .with_partitions(vec![
                            alter_partition_reassignments_response::ReassignablePartitionResponse::default()
                                .with_partition_index(n)
                                .with_error_code(85)
                                .with_error_message(Some(s("none in progress"))),
                        ]),
                ]),
        ),
        ApiKey::ListPartitionReassignments => ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default()
                .with_throttle_time_ms(n)
                .with_error_code(41)
                .with_error_message(Some(s("not the controller")))
                .with_topics(vec![
                    list_partition_reassignments_response::OngoingTopicReassignment::default()
                        .with_name(name)
                        .with_partitions(vec![
                            list_partition_reassignments_response::OngoingPartitionReassignment::default()
                                .with_partition_index(n)
                                .with_replicas(vec![BrokerId(2), BrokerId(3), BrokerId(1)])
                                .with_adding_replicas(vec![BrokerId(3)])
                                .with_removing_replicas(vec![BrokerId(1)]),
                        ]),
                ]),
        ),
        ApiKey::AlterClientQuotas => ResponseKind::AlterClientQuotas(
            AlterClientQuotasResponse::default()
                .with_throttle_time_ms(n)
                .with_entries(vec![
                    alter_client_quotas_response::EntryData::default()
                        .with_error_code(42)
                        .with_error_message(Some(s("Invalid configuration key x")))
                        .with_entity(vec![
                            alter_client_quotas_response::EntityData::default()
                                .with_entity_type(s("client-id"))
                                .with_entity_name(Some(s(topic))),
                        ]),
                ]),
        ),
        ApiKey::AlterUserScramCredentials => ResponseKind::AlterUserScramCredentials(
            AlterUserScramCredentialsResponse::default()
                .with_throttle_time_ms(n)
                .with_results(vec![
                    alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                        .with_user(s(topic))
                        .with_error_code(92)
                        .with_error_message(Some(s(
                            "A user credential cannot be altered twice in the same request",
                        ))),
                ]),
        ),
        other => panic!("{other:?} is not forwarded"),
    }
}

fn forwarded() -> impl Iterator<Item = &'static crate::versions::SupportedApi> {
    FORWARDED_APIS
        .iter()
        .map(|k| crate::versions::supported(*k).expect("a forwarded API is a client API"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn forwarded_responses_round_trip(
        topic in "[a-zA-Z0-9._-]{1,40}",
        id in any::<u128>(),
        n in 0..i32::MAX,
    ) {
        let id = uuid::Uuid::from_u128(id);
        for api in forwarded() {
            for v in (api.min..=api.max).filter(|v| !legacy::is_legacy(api.key, *v)) {
                let body = sample(api.key, v, &topic, id, n);
                let f = encode_response(api.key, v, n, &body).unwrap();
                let got = decode_forwarded_response(api.key, v, f.slice(4..))
                    .unwrap_or_else(|e| panic!("{:?} v{v}: {e}", api.key));
                prop_assert_eq!(got.correlation_id, n);
                prop_assert_eq!(&f, &encode_response(api.key, v, n, &got.body).unwrap());
                // Cut anywhere, the frame is refused rather than half read.
                for cut in [1, f.len() / 2, f.len() - 1] {
                    prop_assert!(
                        decode_forwarded_response(api.key, v, f.slice(4..cut.max(4))).is_err(),
                        "{:?} v{} cut at {}", api.key, v, cut
                    );
                }
            }
        }
    }

    #[test]
    fn arbitrary_forwarded_responses_never_panic(
        which in 0..FORWARDED_APIS.len(),
        version in 0i16..8,
        tail in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let _ = decode_forwarded_response(FORWARDED_APIS[which], version, Bytes::from(tail));
    }
}

#[test]
fn a_huge_count_in_a_forwarded_response_is_refused() {
    // CreateTopics v4: correlation id, throttle_time_ms, then topics = 2^31-1 with no bytes.
    let mut f = 9i32.to_be_bytes().to_vec();
    f.extend_from_slice(&0i32.to_be_bytes());
    f.extend_from_slice(&i32::MAX.to_be_bytes());
    match decode_forwarded_response(ApiKey::CreateTopics, 4, Bytes::from(f)) {
        Err(DecodeError::Malformed {
            correlation_id: 9, ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn only_forwarded_apis_at_served_versions() {
    assert!(matches!(
        decode_forwarded_response(ApiKey::Metadata, 12, Bytes::new()),
        Err(DecodeError::UnknownApiKey { .. })
    ));
    assert!(matches!(
        decode_forwarded_response(ApiKey::Vote, 1, Bytes::new()),
        Err(DecodeError::UnknownApiKey { .. })
    ));
    assert!(matches!(
        decode_forwarded_response(ApiKey::CreateTopics, 1, Bytes::new()),
        Err(DecodeError::UnsupportedVersion { version: 1, .. })
    ));
    // The controller listener's reader takes the forwarded writes (a dedicated controller
    // serves them) at the served versions only, and no other client API.
    assert!(matches!(
        decode_response(ApiKey::CreateTopics, 1, Bytes::new()),
        Err(DecodeError::UnsupportedVersion { version: 1, .. })
    ));
    assert!(matches!(
        decode_response(ApiKey::Metadata, 12, Bytes::new()),
        Err(DecodeError::UnknownApiKey { .. })
    ));
}
