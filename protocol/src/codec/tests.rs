use super::*;
use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest, RequestHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

fn frame_of<T: Encodable + HeaderVersion>(key: ApiKey, version: i16, corr: i32, body: &T) -> Bytes {
    let mut buf = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(corr)
        .with_client_id(Some(crate::StrBytes::from_static_str("test")));
    header.encode(&mut buf, T::header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

#[test]
fn unknown_api_key_is_refused_with_its_correlation_id() {
    let mut f = vec![0x7f, 0x00, 0, 0, 0, 0, 0, 42];
    f.extend_from_slice(&[0, 0]);
    match decode_request(Bytes::from(f)) {
        Err(DecodeError::UnknownApiKey {
            api_key: 0x7f00,
            correlation_id: 42,
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn newer_api_versions_gets_the_fallback() {
    let f = frame_of(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default());
    let mut raw = f.to_vec();
    raw[2..4].copy_from_slice(&99i16.to_be_bytes());
    assert!(matches!(
        decode_request(Bytes::from(raw)),
        Ok(Decoded::ApiVersionsTooNew { correlation_id: 7 })
    ));
    let resp = encode_api_versions_fallback(7);
    // size, correlation id, error code 35, then the array of APIs.
    assert_eq!(&resp[4..8], &7i32.to_be_bytes());
    assert_eq!(&resp[8..10], &35i16.to_be_bytes());
}

#[test]
fn unsupported_version_of_other_apis_is_an_error() {
    let f = frame_of(ApiKey::Metadata, 12, 1, &MetadataRequest::default());
    let mut raw = f.to_vec();
    raw[2..4].copy_from_slice(&13i16.to_be_bytes());
    assert!(matches!(
        decode_request(Bytes::from(raw)),
        Err(DecodeError::UnsupportedVersion { version: 13, .. })
    ));
}

#[test]
fn truncated_body_is_malformed() {
    let f = frame_of(ApiKey::Metadata, 9, 1, &MetadataRequest::default());
    let cut = f.slice(..f.len() - 1);
    assert!(matches!(
        decode_request(cut),
        Err(DecodeError::Malformed { .. })
    ));
}

mod round_trip {
    //! Every advertised API and version survives encode → decode → encode unchanged, for
    //! requests (as a client would send them) and for responses (as we send them).
    use super::*;
    use crate::versions::SUPPORTED_APIS;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Decodable, StrBytes};
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    struct Sample {
        topic: String,
        partition: i32,
        offset: i64,
        payload: Vec<u8>,
        id: uuid::Uuid,
    }

    fn sample() -> impl Strategy<Value = Sample> {
        (
            "[a-zA-Z0-9._-]{1,40}",
            0..10_000i32,
            0..i64::MAX,
            proptest::collection::vec(any::<u8>(), 0..300),
            any::<u128>(),
        )
            .prop_map(|(topic, partition, offset, payload, id)| Sample {
                topic,
                partition,
                offset,
                payload,
                id: uuid::Uuid::from_u128(id),
            })
    }

    fn name(s: &Sample) -> TopicName {
        TopicName(StrBytes::from_string(s.topic.clone()))
    }

    fn request(key: ApiKey, v: i16, s: &Sample) -> RequestKind {
        match key {
            ApiKey::Produce => RequestKind::Produce(
                ProduceRequest::default()
                    .with_acks(-1)
                    .with_timeout_ms(1000)
                    .with_topic_data(vec![
                        produce_request::TopicProduceData::default()
                            .with_name(name(s))
                            .with_partition_data(vec![
                                produce_request::PartitionProduceData::default()
                                    .with_index(s.partition)
                                    .with_records(Some(Bytes::from(s.payload.clone()))),
                            ]),
                    ]),
            ),
            ApiKey::Fetch => {
                let mut t = fetch_request::FetchTopic::default().with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(s.partition)
                        .with_fetch_offset(s.offset)
                        .with_partition_max_bytes(1 << 20),
                ]);
                t = if v >= 13 {
                    t.with_topic_id(s.id)
                } else {
                    t.with_topic(name(s))
                };
                RequestKind::Fetch(
                    FetchRequest::default()
                        .with_max_wait_ms(500)
                        .with_min_bytes(1)
                        .with_topics(vec![t]),
                )
            }
            ApiKey::ListOffsets => {
                RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
                    list_offsets_request::ListOffsetsTopic::default()
                        .with_name(name(s))
                        .with_partitions(vec![
                            list_offsets_request::ListOffsetsPartition::default()
                                .with_partition_index(s.partition)
                                .with_timestamp(s.offset),
                        ]),
                ]))
            }
            ApiKey::Metadata => {
                RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                    metadata_request::MetadataRequestTopic::default().with_name(Some(name(s))),
                ])))
            }
            ApiKey::FindCoordinator => {
                let r = FindCoordinatorRequest::default();
                let key = StrBytes::from_string(s.topic.clone());
                RequestKind::FindCoordinator(if v >= 4 {
                    r.with_coordinator_keys(vec![key])
                } else {
                    r.with_key(key)
                })
            }
            ApiKey::ApiVersions => {
                let r = ApiVersionsRequest::default();
                RequestKind::ApiVersions(if v >= 3 {
                    r.with_client_software_name(StrBytes::from_static_str("strata-test"))
                        .with_client_software_version(StrBytes::from_static_str("1.0"))
                } else {
                    r
                })
            }
            ApiKey::CreateTopics => {
                RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(name(s))
                    .with_num_partitions(s.partition)
                    .with_replication_factor(1)
                    .with_configs(vec![
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(StrBytes::from_static_str("retention.ms"))
                            .with_value(Some(StrBytes::from_string(s.offset.to_string()))),
                    ]),
            ]))
            }
            ApiKey::CreatePartitions => RequestKind::CreatePartitions(
                CreatePartitionsRequest::default()
                    .with_topics(vec![
                        create_partitions_request::CreatePartitionsTopic::default()
                            .with_name(name(s))
                            .with_count(s.partition)
                            .with_assignments(Some(vec![
                                create_partitions_request::CreatePartitionsAssignment::default()
                                    .with_broker_ids(vec![BrokerId(1)]),
                            ])),
                    ])
                    .with_validate_only(true),
            ),
            ApiKey::DeleteTopics => RequestKind::DeleteTopics(if v >= 6 {
                DeleteTopicsRequest::default().with_topics(vec![
                    delete_topics_request::DeleteTopicState::default().with_name(Some(name(s))),
                ])
            } else {
                DeleteTopicsRequest::default().with_topic_names(vec![name(s)])
            }),
            ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(
                DescribeConfigsRequest::default().with_resources(vec![
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_string(s.topic.clone())),
                ]),
            ),
            ApiKey::DescribeAcls => RequestKind::DescribeAcls(
                DescribeAclsRequest::default()
                    .with_resource_type_filter(2)
                    .with_resource_name_filter(Some(StrBytes::from_string(s.topic.clone())))
                    .with_pattern_type_filter(2)
                    .with_principal_filter(None)
                    .with_host_filter(Some(StrBytes::from_static_str("*")))
                    .with_operation(4)
                    .with_permission_type(3),
            ),
            ApiKey::CreateAcls => RequestKind::CreateAcls(
                CreateAclsRequest::default().with_creations(vec![
                    create_acls_request::AclCreation::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_string(s.topic.clone()))
                        .with_resource_pattern_type(4)
                        .with_principal(StrBytes::from_static_str("User:alice"))
                        .with_host(StrBytes::from_static_str("*"))
                        .with_operation(3)
                        .with_permission_type(3),
                ]),
            ),
            ApiKey::DeleteAcls => RequestKind::DeleteAcls(
                DeleteAclsRequest::default().with_filters(vec![
                    delete_acls_request::DeleteAclsFilter::default()
                        .with_resource_type_filter(1)
                        .with_resource_name_filter(None)
                        .with_pattern_type_filter(3)
                        .with_principal_filter(Some(StrBytes::from_static_str("User:alice")))
                        .with_host_filter(None)
                        .with_operation(1)
                        .with_permission_type(1),
                ]),
            ),
            ApiKey::AlterConfigs => RequestKind::AlterConfigs(
                AlterConfigsRequest::default()
                    .with_resources(vec![
                        alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_string(s.topic.clone()))
                            .with_configs(vec![
                                alter_configs_request::AlterableConfig::default()
                                    .with_name(StrBytes::from_static_str("retention.ms"))
                                    .with_value(Some(StrBytes::from_string(s.offset.to_string()))),
                            ]),
                    ])
                    .with_validate_only(s.partition % 2 == 0),
            ),
            ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(
                DescribeLogDirsRequest::default().with_topics(if s.partition % 2 == 0 {
                    None
                } else {
                    Some(vec![
                        describe_log_dirs_request::DescribableLogDirTopic::default()
                            .with_topic(name(s))
                            .with_partitions(vec![s.partition, 0]),
                    ])
                }),
            ),
            ApiKey::DescribeCluster => {
                let mut r = DescribeClusterRequest::default()
                    .with_include_cluster_authorized_operations(s.partition % 2 == 0);
                if v >= 1 {
                    r = r.with_endpoint_type(2);
                }
                if v >= 2 {
                    r = r.with_include_fenced_brokers(true);
                }
                RequestKind::DescribeCluster(r)
            }
            ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(
                IncrementalAlterConfigsRequest::default()
                    .with_resources(vec![
                        incremental_alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_string(s.topic.clone()))
                            .with_configs(vec![
                                incremental_alter_configs_request::AlterableConfig::default()
                                    .with_name(StrBytes::from_static_str("cleanup.policy"))
                                    .with_config_operation(2)
                                    .with_value(Some(StrBytes::from_static_str("compact"))),
                            ]),
                    ])
                    .with_validate_only(s.partition % 2 == 0),
            ),
            ApiKey::JoinGroup => {
                let mut r = JoinGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                    .with_session_timeout_ms(10_000)
                    .with_rebalance_timeout_ms(s.partition)
                    .with_member_id(StrBytes::from_static_str("m-1"))
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                    .with_protocols(vec![
                        join_group_request::JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_static_str("range"))
                            .with_metadata(Bytes::from(s.payload.clone())),
                    ]);
                if v >= 5 {
                    r = r.with_group_instance_id(Some(StrBytes::from_static_str("i-1")));
                }
                if v >= 8 {
                    r = r.with_reason(Some(StrBytes::from_static_str("test")));
                }
                RequestKind::JoinGroup(r)
            }
            ApiKey::Heartbeat => {
                let mut r = HeartbeatRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                    .with_generation_id(s.partition)
                    .with_member_id(StrBytes::from_static_str("m-1"));
                if v >= 3 {
                    r = r.with_group_instance_id(Some(StrBytes::from_static_str("i-1")));
                }
                RequestKind::Heartbeat(r)
            }
            ApiKey::LeaveGroup => {
                let r = LeaveGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())));
                RequestKind::LeaveGroup(if v >= 3 {
                    r.with_members(vec![
                        leave_group_request::MemberIdentity::default()
                            .with_member_id(StrBytes::from_static_str("m-1"))
                            .with_group_instance_id(Some(StrBytes::from_static_str("i-1"))),
                    ])
                } else {
                    r.with_member_id(StrBytes::from_static_str("m-1"))
                })
            }
            ApiKey::SyncGroup => {
                let mut r = SyncGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                    .with_generation_id(s.partition)
                    .with_member_id(StrBytes::from_static_str("m-1"))
                    .with_assignments(vec![
                        sync_group_request::SyncGroupRequestAssignment::default()
                            .with_member_id(StrBytes::from_static_str("m-1"))
                            .with_assignment(Bytes::from(s.payload.clone())),
                    ]);
                if v >= 3 {
                    r = r.with_group_instance_id(Some(StrBytes::from_static_str("i-1")));
                }
                if v >= 5 {
                    r = r
                        .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                        .with_protocol_name(Some(StrBytes::from_static_str("range")));
                }
                RequestKind::SyncGroup(r)
            }
            ApiKey::DescribeGroups => RequestKind::DescribeGroups(
                DescribeGroupsRequest::default()
                    .with_groups(vec![GroupId(StrBytes::from_string(s.topic.clone()))]),
            ),
            ApiKey::SaslHandshake => RequestKind::SaslHandshake(
                SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            ),
            ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
                SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from_static(b"n,,n=user,r=nonce")),
            ),
            ApiKey::ListGroups => {
                let mut r = ListGroupsRequest::default();
                if v >= 4 {
                    r = r.with_states_filter(vec![StrBytes::from_static_str("Stable")]);
                }
                if v >= 5 {
                    r = r.with_types_filter(vec![StrBytes::from_static_str("classic")]);
                }
                RequestKind::ListGroups(r)
            }
            ApiKey::DeleteGroups => RequestKind::DeleteGroups(
                DeleteGroupsRequest::default()
                    .with_groups_names(vec![GroupId(StrBytes::from_string(s.topic.clone()))]),
            ),
            ApiKey::OffsetCommit => {
                let mut part = offset_commit_request::OffsetCommitRequestPartition::default()
                    .with_partition_index(s.partition)
                    .with_committed_offset(s.offset)
                    .with_committed_metadata(Some(StrBytes::from_string(s.topic.clone())));
                if v >= 6 {
                    part = part.with_committed_leader_epoch(3);
                }
                let mut r = OffsetCommitRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                    .with_generation_id_or_member_epoch(7)
                    .with_member_id(StrBytes::from_static_str("member-1"))
                    .with_topics(vec![
                        offset_commit_request::OffsetCommitRequestTopic::default()
                            .with_name(name(s))
                            .with_partitions(vec![part]),
                    ]);
                if v >= 7 {
                    r = r.with_group_instance_id(Some(StrBytes::from_static_str("instance-1")));
                }
                if v <= 4 {
                    r = r.with_retention_time_ms(60_000);
                }
                RequestKind::OffsetCommit(r)
            }
            ApiKey::OffsetFetch => {
                let group = GroupId(StrBytes::from_string(s.topic.clone()));
                RequestKind::OffsetFetch(if v >= 8 {
                    let mut g = offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group)
                        .with_topics(Some(vec![
                            offset_fetch_request::OffsetFetchRequestTopics::default()
                                .with_name(name(s))
                                .with_partition_indexes(vec![s.partition]),
                        ]));
                    if v >= 9 {
                        g = g
                            .with_member_id(Some(StrBytes::from_static_str("member-1")))
                            .with_member_epoch(5);
                    }
                    OffsetFetchRequest::default()
                        .with_groups(vec![g])
                        .with_require_stable(true)
                } else {
                    let r = OffsetFetchRequest::default()
                        .with_group_id(group)
                        .with_topics(Some(vec![
                            offset_fetch_request::OffsetFetchRequestTopic::default()
                                .with_name(name(s))
                                .with_partition_indexes(vec![s.partition]),
                        ]));
                    if v >= 7 {
                        r.with_require_stable(true)
                    } else {
                        r
                    }
                })
            }
            ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(
                OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(if v >= 3 { -1 } else { -2 }))
                    .with_topics(vec![
                        offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                            .with_topic(name(s))
                            .with_partitions(vec![
                                offset_for_leader_epoch_request::OffsetForLeaderPartition::default(
                                )
                                .with_partition(s.partition)
                                .with_current_leader_epoch(s.partition % 7 - 1)
                                .with_leader_epoch(s.partition % 5),
                            ]),
                    ]),
            ),
            ApiKey::InitProducerId => {
                let r = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
                RequestKind::InitProducerId(if v >= 3 {
                    r.with_producer_id(ProducerId(s.offset))
                        .with_producer_epoch(s.partition as i16)
                } else {
                    r
                })
            }
            ApiKey::DeleteRecords => RequestKind::DeleteRecords(
                DeleteRecordsRequest::default()
                    .with_topics(vec![
                        delete_records_request::DeleteRecordsTopic::default()
                            .with_name(name(s))
                            .with_partitions(vec![
                                delete_records_request::DeleteRecordsPartition::default()
                                    .with_partition_index(s.partition)
                                    .with_offset(s.offset),
                            ]),
                    ])
                    .with_timeout_ms(30_000),
            ),
            ApiKey::AlterPartitionReassignments => RequestKind::AlterPartitionReassignments(
                AlterPartitionReassignmentsRequest::default()
                    .with_timeout_ms(30_000)
                    .with_allow_replication_factor_change(v == 0 || s.partition % 2 == 0)
                    .with_topics(vec![
                        alter_partition_reassignments_request::ReassignableTopic::default()
                            .with_name(name(s))
                            .with_partitions(vec![
                                alter_partition_reassignments_request::ReassignablePartition::default()
                                    .with_partition_index(s.partition)
                                    .with_replicas(Some(vec![BrokerId(1), BrokerId(s.partition)])),
                                alter_partition_reassignments_request::ReassignablePartition::default()
                                    .with_partition_index(s.partition + 1)
                                    .with_replicas(None),
                            ]),
                    ]),
            ),
            ApiKey::ListPartitionReassignments => RequestKind::ListPartitionReassignments(
                ListPartitionReassignmentsRequest::default()
                    .with_timeout_ms(30_000)
                    .with_topics(if s.partition % 2 == 0 {
                        None
                    } else {
                        Some(vec![
                            list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
                                .with_name(name(s))
                                .with_partition_indexes(vec![s.partition]),
                        ])
                    }),
            ),
            ApiKey::ElectLeaders => RequestKind::ElectLeaders(
                ElectLeadersRequest::default()
                    .with_election_type(if v >= 1 { 1 } else { 0 })
                    .with_topic_partitions(if s.partition % 2 == 0 {
                        None
                    } else {
                        Some(vec![
                            elect_leaders_request::TopicPartitions::default()
                                .with_topic(name(s))
                                .with_partitions(vec![s.partition, s.partition + 1]),
                        ])
                    })
                    .with_timeout_ms(30_000),
            ),
            ApiKey::WriteTxnMarkers => RequestKind::WriteTxnMarkers(
                WriteTxnMarkersRequest::default().with_markers(vec![
                    write_txn_markers_request::WritableTxnMarker::default()
                        .with_producer_id(ProducerId(s.offset))
                        .with_producer_epoch(3)
                        .with_transaction_result(s.partition % 2 == 0)
                        .with_topics(vec![
                            write_txn_markers_request::WritableTxnMarkerTopic::default()
                                .with_name(name(s))
                                .with_partition_indexes(vec![s.partition, 0]),
                        ])
                        .with_coordinator_epoch(s.partition),
                ]),
            ),
            ApiKey::AddPartitionsToTxn => {
                let topics = vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(name(s))
                        .with_partitions(vec![s.partition, 0]),
                ];
                let id = TransactionalId(StrBytes::from_string(s.topic.clone()));
                let r = AddPartitionsToTxnRequest::default();
                RequestKind::AddPartitionsToTxn(if v >= 4 {
                    r.with_transactions(vec![
                        add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                            .with_transactional_id(id)
                            .with_producer_id(ProducerId(s.offset))
                            .with_producer_epoch(2)
                            .with_verify_only(s.partition % 2 == 0)
                            .with_topics(topics),
                    ])
                } else {
                    r.with_v3_and_below_transactional_id(id)
                        .with_v3_and_below_producer_id(ProducerId(s.offset))
                        .with_v3_and_below_producer_epoch(2)
                        .with_v3_and_below_topics(topics)
                })
            }
            ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(
                AddOffsetsToTxnRequest::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(s.topic.clone())))
                    .with_producer_id(ProducerId(s.offset))
                    .with_producer_epoch(1)
                    .with_group_id(GroupId(StrBytes::from_static_str("g"))),
            ),
            ApiKey::EndTxn => RequestKind::EndTxn(
                EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(s.topic.clone())))
                    .with_producer_id(ProducerId(s.offset))
                    .with_producer_epoch(1)
                    .with_committed(s.partition % 2 == 0),
            ),
            ApiKey::TxnOffsetCommit => {
                let r = TxnOffsetCommitRequest::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(s.topic.clone())))
                    .with_group_id(GroupId(StrBytes::from_static_str("g")))
                    .with_producer_id(ProducerId(s.offset))
                    .with_producer_epoch(1)
                    .with_topics(vec![
                        txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                            .with_name(name(s))
                            .with_partitions(vec![
                                txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                    .with_partition_index(s.partition)
                                    .with_committed_offset(s.offset)
                                    .with_committed_leader_epoch(if v >= 2 { 3 } else { -1 })
                                    .with_committed_metadata(Some(StrBytes::from_static_str("m"))),
                            ]),
                    ]);
                RequestKind::TxnOffsetCommit(if v >= 3 {
                    r.with_generation_id(4)
                        .with_member_id(StrBytes::from_static_str("member"))
                        .with_group_instance_id(Some(StrBytes::from_static_str("i")))
                } else {
                    r
                })
            }
            ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(
                DescribeTransactionsRequest::default().with_transactional_ids(vec![
                    TransactionalId(StrBytes::from_string(s.topic.clone())),
                    TransactionalId(StrBytes::from_static_str("other")),
                ]),
            ),
            ApiKey::ListTransactions => RequestKind::ListTransactions(
                ListTransactionsRequest::default()
                    .with_state_filters(vec![StrBytes::from_static_str("Ongoing")])
                    .with_producer_id_filters(vec![ProducerId(s.offset), ProducerId(7)])
                    .with_duration_filter(if v >= 1 { i64::from(s.partition) } else { -1 }),
            ),
            ApiKey::DescribeProducers => RequestKind::DescribeProducers(
                DescribeProducersRequest::default().with_topics(vec![
                    describe_producers_request::TopicRequest::default()
                        .with_name(name(s))
                        .with_partition_indexes(vec![s.partition]),
                ]),
            ),
            ApiKey::OffsetDelete => RequestKind::OffsetDelete(
                OffsetDeleteRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                    .with_topics(vec![
                        offset_delete_request::OffsetDeleteRequestTopic::default()
                            .with_name(name(s))
                            .with_partitions(vec![
                                offset_delete_request::OffsetDeleteRequestPartition::default()
                                    .with_partition_index(s.partition),
                            ]),
                    ]),
            ),
            ApiKey::ConsumerGroupHeartbeat => {
                let r = ConsumerGroupHeartbeatRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                    .with_member_id(StrBytes::from_static_str("m-1"))
                    .with_member_epoch(s.partition)
                    .with_instance_id(Some(StrBytes::from_static_str("i-1")))
                    .with_rebalance_timeout_ms(30_000)
                    .with_subscribed_topic_names(Some(vec![name(s)]))
                    .with_server_assignor(Some(StrBytes::from_static_str("uniform")))
                    .with_topic_partitions(Some(vec![
                        consumer_group_heartbeat_request::TopicPartitions::default()
                            .with_topic_id(s.id)
                            .with_partitions(vec![s.partition]),
                    ]));
                RequestKind::ConsumerGroupHeartbeat(if v >= 1 {
                    r.with_subscribed_topic_regex(Some(StrBytes::from_static_str("o.*")))
                } else {
                    r
                })
            }
            ApiKey::DescribeQuorum => {
                RequestKind::DescribeQuorum(DescribeQuorumRequest::default().with_topics(vec![
                    describe_quorum_request::TopicData::default()
                        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                        .with_partitions(vec![
                            describe_quorum_request::PartitionData::default()
                                .with_partition_index(0),
                        ]),
                ]))
            }
            ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(
                ConsumerGroupDescribeRequest::default()
                    .with_group_ids(vec![GroupId(StrBytes::from_string(s.topic.clone()))])
                    .with_include_authorized_operations(true),
            ),
            ApiKey::DescribeTopicPartitions => RequestKind::DescribeTopicPartitions(
                DescribeTopicPartitionsRequest::default()
                    .with_topics(vec![
                        describe_topic_partitions_request::TopicRequest::default()
                            .with_name(name(s)),
                    ])
                    .with_response_partition_limit(2000)
                    .with_cursor((s.partition % 2 == 0).then(|| {
                        describe_topic_partitions_request::Cursor::default()
                            .with_topic_name(name(s))
                            .with_partition_index(s.partition)
                    })),
            ),
            ApiKey::DescribeClientQuotas => RequestKind::DescribeClientQuotas(
                DescribeClientQuotasRequest::default()
                    .with_components(vec![
                        describe_client_quotas_request::ComponentData::default()
                            .with_entity_type(StrBytes::from_static_str("client-id"))
                            .with_match_type(0)
                            .with_match(Some(StrBytes::from_string(s.topic.clone()))),
                        describe_client_quotas_request::ComponentData::default()
                            .with_entity_type(StrBytes::from_static_str("user"))
                            .with_match_type(1)
                            .with_match(None),
                    ])
                    .with_strict(s.partition % 2 == 0),
            ),
            ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(
                AlterClientQuotasRequest::default()
                    .with_entries(vec![
                        alter_client_quotas_request::EntryData::default()
                            .with_entity(vec![
                                alter_client_quotas_request::EntityData::default()
                                    .with_entity_type(StrBytes::from_static_str("user"))
                                    .with_entity_name(None),
                                alter_client_quotas_request::EntityData::default()
                                    .with_entity_type(StrBytes::from_static_str("client-id"))
                                    .with_entity_name(Some(StrBytes::from_string(
                                        s.topic.clone(),
                                    ))),
                            ])
                            .with_ops(vec![
                                alter_client_quotas_request::OpData::default()
                                    .with_key(StrBytes::from_static_str("producer_byte_rate"))
                                    .with_value(f64::from(s.partition) * 1024.0)
                                    .with_remove(s.partition % 2 == 0),
                            ]),
                    ])
                    .with_validate_only(s.partition % 3 == 0),
            ),
            ApiKey::DescribeUserScramCredentials => RequestKind::DescribeUserScramCredentials(
                DescribeUserScramCredentialsRequest::default().with_users(
                    (s.partition % 2 == 0).then(|| {
                        vec![
                            describe_user_scram_credentials_request::UserName::default()
                                .with_name(StrBytes::from_string(s.topic.clone())),
                        ]
                    }),
                ),
            ),
            ApiKey::AlterUserScramCredentials => RequestKind::AlterUserScramCredentials(
                AlterUserScramCredentialsRequest::default()
                    .with_deletions(vec![
                        alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                            .with_name(StrBytes::from_static_str("alice"))
                            .with_mechanism(2),
                    ])
                    .with_upsertions(vec![
                        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                            .with_name(StrBytes::from_string(s.topic.clone()))
                            .with_mechanism(1)
                            .with_iterations(4096 + s.partition)
                            .with_salt(Bytes::from_static(b"salt"))
                            .with_salted_password(Bytes::from(vec![7u8; 32])),
                    ]),
            ),
            other => panic!("no sample for {other:?}"),
        }
    }

    fn encode_request_frame(key: ApiKey, v: i16, body: &RequestKind) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(v)
            .with_correlation_id(9)
            .with_client_id(Some(StrBytes::from_static_str("rt")))
            .encode(&mut buf, key.request_header_version(v))
            .unwrap();
        body.encode(&mut buf, v).unwrap();
        buf.freeze()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn requests_round_trip(s in sample()) {
            for api in SUPPORTED_APIS {
                // Old versions are translated, and tested on their own (`legacy::tests`).
                for v in (api.min..=api.max).filter(|v| !legacy::is_legacy(api.key, *v)) {
                    let body = request(api.key, v, &s);
                    let frame = encode_request_frame(api.key, v, &body);
                    let decoded = match decode_request(frame.clone()) {
                        Ok(Decoded::Request(r)) => r,
                        other => panic!("{:?} v{v}: {other:?}", api.key),
                    };
                    prop_assert_eq!(decoded.header.correlation_id, 9);
                    let again = encode_request_frame(api.key, v, &decoded.body);
                    prop_assert_eq!(&frame, &again, "{:?} v{}", api.key, v);
                }
            }
        }

        #[test]
        fn responses_round_trip(s in sample()) {
            for api in SUPPORTED_APIS {
                for v in (api.min..=api.max).filter(|v| !legacy::is_legacy(api.key, *v)) {
                    let body = response(api.key, v, &s);
                    let frame = encode_response(api.key, v, 77, &body).unwrap();
                    let mut rest = frame.slice(4..);
                    prop_assert_eq!(i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, rest.len());
                    let header = ResponseHeader::decode(&mut rest, api.key.response_header_version(v)).unwrap();
                    prop_assert_eq!(header.correlation_id, 77);
                    let decoded = ResponseKind::decode(api.key, &mut rest, v).unwrap();
                    prop_assert_eq!(rest.len(), 0);
                    let again = encode_response(api.key, v, 77, &decoded).unwrap();
                    prop_assert_eq!(&frame, &again, "{:?} v{}", api.key, v);
                }
            }
        }
    }

    fn response(key: ApiKey, v: i16, s: &Sample) -> ResponseKind {
        match key {
            ApiKey::Produce => {
                let mut redirected = produce_response::PartitionProduceResponse::default()
                    .with_index(s.partition + 1)
                    .with_error_code(6)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1);
                let mut r = ProduceResponse::default();
                // KIP-951: the current leader and its endpoint with NOT_LEADER_OR_FOLLOWER.
                if v >= 10 {
                    redirected = redirected.with_current_leader(
                        produce_response::LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(2))
                            .with_leader_epoch(s.partition),
                    );
                    r = r.with_node_endpoints(vec![
                        produce_response::NodeEndpoint::default()
                            .with_node_id(BrokerId(2))
                            .with_host(StrBytes::from_static_str("127.0.0.1"))
                            .with_port(9093)
                            .with_rack(Some(StrBytes::from_static_str("r2"))),
                    ]);
                }
                ResponseKind::Produce(r.with_responses(vec![
                    produce_response::TopicProduceResponse::default()
                        .with_name(name(s))
                        .with_partition_responses(vec![
                            produce_response::PartitionProduceResponse::default()
                                .with_index(s.partition)
                                .with_base_offset(s.offset)
                                .with_log_append_time_ms(-1),
                            redirected,
                        ]),
                ]))
            }
            ApiKey::Fetch => {
                let mut t =
                    fetch_response::FetchableTopicResponse::default().with_partitions(vec![
                        fetch_response::PartitionData::default()
                            .with_partition_index(s.partition)
                            .with_high_watermark(s.offset)
                            .with_last_stable_offset(s.offset)
                            .with_records(Some(Bytes::from(s.payload.clone()))),
                    ]);
                t = if v >= 13 {
                    t.with_topic_id(s.id)
                } else {
                    t.with_topic(name(s))
                };
                let mut r = FetchResponse::default();
                // KIP-951 (v16): FENCED_LEADER_EPOCH with the current leader and its endpoint.
                if v >= 16 {
                    t.partitions.push(
                        fetch_response::PartitionData::default()
                            .with_partition_index(s.partition + 1)
                            .with_error_code(74)
                            .with_high_watermark(-1)
                            .with_last_stable_offset(-1)
                            .with_current_leader(
                                fetch_response::LeaderIdAndEpoch::default()
                                    .with_leader_id(BrokerId(2))
                                    .with_leader_epoch(s.partition),
                            )
                            .with_records(Some(Bytes::new())),
                    );
                    r = r.with_node_endpoints(vec![
                        fetch_response::NodeEndpoint::default()
                            .with_node_id(BrokerId(2))
                            .with_host(StrBytes::from_static_str("127.0.0.1"))
                            .with_port(9093)
                            .with_rack(None),
                    ]);
                }
                ResponseKind::Fetch(r.with_responses(vec![t]))
            }
            ApiKey::ListOffsets => {
                ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(vec![
                    list_offsets_response::ListOffsetsTopicResponse::default()
                        .with_name(name(s))
                        .with_partitions(vec![
                            list_offsets_response::ListOffsetsPartitionResponse::default()
                                .with_partition_index(s.partition)
                                .with_offset(s.offset)
                                .with_timestamp(-1),
                        ]),
                ]))
            }
            ApiKey::Metadata => ResponseKind::Metadata(
                MetadataResponse::default()
                    .with_brokers(vec![
                        metadata_response::MetadataResponseBroker::default()
                            .with_node_id(BrokerId(1))
                            .with_host(StrBytes::from_static_str("localhost"))
                            .with_port(9092),
                    ])
                    .with_topics(vec![
                        metadata_response::MetadataResponseTopic::default()
                            .with_name(Some(name(s)))
                            .with_partitions(vec![
                                metadata_response::MetadataResponsePartition::default()
                                    .with_partition_index(s.partition)
                                    .with_replica_nodes(vec![BrokerId(1)])
                                    .with_isr_nodes(vec![BrokerId(1)]),
                            ]),
                    ]),
            ),
            ApiKey::FindCoordinator => {
                let r = FindCoordinatorResponse::default();
                ResponseKind::FindCoordinator(if v >= 4 {
                    r.with_coordinators(vec![
                        find_coordinator_response::Coordinator::default()
                            .with_key(StrBytes::from_string(s.topic.clone()))
                            .with_node_id(BrokerId(1))
                            .with_host(StrBytes::from_static_str("localhost"))
                            .with_port(9092),
                    ])
                } else {
                    r.with_node_id(BrokerId(1))
                        .with_host(StrBytes::from_static_str("localhost"))
                        .with_port(9092)
                })
            }
            ApiKey::ApiVersions => ResponseKind::ApiVersions(api_versions_body(0)),
            ApiKey::CreateTopics => {
                ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(vec![
                    create_topics_response::CreatableTopicResult::default().with_name(name(s)),
                ]))
            }
            ApiKey::CreatePartitions => ResponseKind::CreatePartitions(
                CreatePartitionsResponse::default().with_results(vec![
                    create_partitions_response::CreatePartitionsTopicResult::default()
                        .with_name(name(s))
                        .with_error_code(37)
                        .with_error_message(Some(StrBytes::from_static_str("no"))),
                ]),
            ),
            ApiKey::DeleteTopics => {
                ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(vec![
                delete_topics_response::DeletableTopicResult::default().with_name(Some(name(s))),
            ]))
            }
            ApiKey::DescribeConfigs => ResponseKind::DescribeConfigs(
                DescribeConfigsResponse::default().with_results(vec![
                    describe_configs_response::DescribeConfigsResult::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_string(s.topic.clone())),
                ]),
            ),
            ApiKey::DescribeAcls => ResponseKind::DescribeAcls(
                DescribeAclsResponse::default()
                    .with_error_code(0)
                    .with_resources(vec![
                        describe_acls_response::DescribeAclsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_string(s.topic.clone()))
                            .with_pattern_type(3)
                            .with_acls(vec![
                                describe_acls_response::AclDescription::default()
                                    .with_principal(StrBytes::from_static_str("User:alice"))
                                    .with_host(StrBytes::from_static_str("*"))
                                    .with_operation(3)
                                    .with_permission_type(3),
                            ]),
                    ]),
            ),
            ApiKey::CreateAcls => ResponseKind::CreateAcls(
                CreateAclsResponse::default().with_results(vec![
                    create_acls_response::AclCreationResult::default()
                        .with_error_code(42)
                        .with_error_message(Some(StrBytes::from_static_str("bad"))),
                ]),
            ),
            ApiKey::DeleteAcls => ResponseKind::DeleteAcls(
                DeleteAclsResponse::default().with_filter_results(vec![
                    delete_acls_response::DeleteAclsFilterResult::default()
                        .with_matching_acls(vec![
                            delete_acls_response::DeleteAclsMatchingAcl::default()
                                .with_resource_type(2)
                                .with_resource_name(StrBytes::from_string(s.topic.clone()))
                                .with_pattern_type(3)
                                .with_principal(StrBytes::from_static_str("User:alice"))
                                .with_host(StrBytes::from_static_str("*"))
                                .with_operation(3)
                                .with_permission_type(3),
                        ]),
                ]),
            ),
            ApiKey::AlterConfigs => {
                ResponseKind::AlterConfigs(AlterConfigsResponse::default().with_responses(vec![
                    alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_error_code(40)
                        .with_error_message(Some(StrBytes::from_static_str("bad")))
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_string(s.topic.clone())),
                ]))
            }
            ApiKey::DescribeLogDirs => {
                let mut dir = describe_log_dirs_response::DescribeLogDirsResult::default()
                    .with_log_dir(StrBytes::from_static_str("/var/lib/strata"))
                    .with_topics(vec![
                        describe_log_dirs_response::DescribeLogDirsTopic::default()
                            .with_name(name(s))
                            .with_partitions(vec![
                                describe_log_dirs_response::DescribeLogDirsPartition::default()
                                    .with_partition_index(s.partition)
                                    .with_partition_size(s.offset),
                            ]),
                    ]);
                if v >= 4 {
                    dir = dir
                        .with_total_bytes(s.offset)
                        .with_usable_bytes(s.offset / 2);
                }
                let mut r = DescribeLogDirsResponse::default().with_results(vec![dir]);
                if v >= 3 {
                    r = r.with_error_code(31);
                }
                ResponseKind::DescribeLogDirs(r)
            }
            ApiKey::DescribeCluster => {
                let mut broker = describe_cluster_response::DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(s.partition))
                    .with_host(StrBytes::from_static_str("127.0.0.1"))
                    .with_port(9092)
                    .with_rack(Some(StrBytes::from_static_str("r1")));
                if v >= 2 {
                    broker = broker.with_is_fenced(true);
                }
                let mut r = DescribeClusterResponse::default()
                    .with_cluster_id(StrBytes::from_static_str("MkU3OEVBNTcwNTJENDM2Qg"))
                    .with_controller_id(BrokerId(s.partition))
                    .with_cluster_authorized_operations(i32::MIN)
                    .with_brokers(vec![broker]);
                if v >= 1 {
                    r = r.with_endpoint_type(2);
                }
                ResponseKind::DescribeCluster(r)
            }
            ApiKey::IncrementalAlterConfigs => ResponseKind::IncrementalAlterConfigs(
                IncrementalAlterConfigsResponse::default().with_responses(vec![
                    incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_error_code(40)
                        .with_error_message(Some(StrBytes::from_static_str("bad")))
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_string(s.topic.clone())),
                ]),
            ),
            ApiKey::JoinGroup => {
                let mut member = join_group_response::JoinGroupResponseMember::default()
                    .with_member_id(StrBytes::from_static_str("m-1"))
                    .with_metadata(Bytes::from(s.payload.clone()));
                if v >= 5 {
                    member = member.with_group_instance_id(Some(StrBytes::from_static_str("i-1")));
                }
                let mut r = JoinGroupResponse::default()
                    .with_generation_id(s.partition)
                    .with_protocol_name(Some(StrBytes::from_static_str("range")))
                    .with_leader(StrBytes::from_static_str("m-1"))
                    .with_member_id(StrBytes::from_static_str("m-1"))
                    .with_members(vec![member]);
                if v >= 7 {
                    r = r.with_protocol_type(Some(StrBytes::from_static_str("consumer")));
                }
                if v >= 9 {
                    r = r.with_skip_assignment(true);
                }
                ResponseKind::JoinGroup(r)
            }
            ApiKey::Heartbeat => {
                ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(27))
            }
            ApiKey::LeaveGroup => {
                let r = LeaveGroupResponse::default();
                ResponseKind::LeaveGroup(if v >= 3 {
                    r.with_members(vec![
                        leave_group_response::MemberResponse::default()
                            .with_member_id(StrBytes::from_static_str("m-1"))
                            .with_group_instance_id(Some(StrBytes::from_static_str("i-1")))
                            .with_error_code(25),
                    ])
                } else {
                    r.with_error_code(25)
                })
            }
            ApiKey::SyncGroup => {
                let mut r =
                    SyncGroupResponse::default().with_assignment(Bytes::from(s.payload.clone()));
                if v >= 5 {
                    r = r
                        .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                        .with_protocol_name(Some(StrBytes::from_static_str("range")));
                }
                ResponseKind::SyncGroup(r)
            }
            ApiKey::DescribeGroups => {
                let mut member = describe_groups_response::DescribedGroupMember::default()
                    .with_member_id(StrBytes::from_static_str("m-1"))
                    .with_client_id(StrBytes::from_static_str("c"))
                    .with_client_host(StrBytes::from_static_str("/127.0.0.1"))
                    .with_member_metadata(Bytes::from(s.payload.clone()))
                    .with_member_assignment(Bytes::from(s.payload.clone()));
                if v >= 4 {
                    member = member.with_group_instance_id(Some(StrBytes::from_static_str("i-1")));
                }
                let mut g = describe_groups_response::DescribedGroup::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                    .with_group_state(StrBytes::from_static_str("Stable"))
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                    .with_protocol_data(StrBytes::from_static_str("range"))
                    .with_members(vec![member]);
                if v >= 6 {
                    g = g.with_error_message(Some(StrBytes::from_static_str("none")));
                }
                ResponseKind::DescribeGroups(DescribeGroupsResponse::default().with_groups(vec![g]))
            }
            ApiKey::SaslHandshake => ResponseKind::SaslHandshake(
                SaslHandshakeResponse::default()
                    .with_mechanisms(vec![StrBytes::from_static_str("SCRAM-SHA-512")]),
            ),
            ApiKey::SaslAuthenticate => {
                let mut r = SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from_static(b"r=nonce,s=c2FsdA==,i=4096"));
                if v >= 1 {
                    r = r.with_session_lifetime_ms(60_000);
                }
                ResponseKind::SaslAuthenticate(r)
            }
            ApiKey::ListGroups => {
                let mut g = list_groups_response::ListedGroup::default()
                    .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                    .with_protocol_type(StrBytes::from_static_str("consumer"));
                if v >= 4 {
                    g = g.with_group_state(StrBytes::from_static_str("Stable"));
                }
                if v >= 5 {
                    g = g.with_group_type(StrBytes::from_static_str("classic"));
                }
                ResponseKind::ListGroups(ListGroupsResponse::default().with_groups(vec![g]))
            }
            ApiKey::DeleteGroups => {
                ResponseKind::DeleteGroups(DeleteGroupsResponse::default().with_results(vec![
                    delete_groups_response::DeletableGroupResult::default()
                        .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                        .with_error_code(68),
                ]))
            }
            ApiKey::OffsetCommit => {
                ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(vec![
                    offset_commit_response::OffsetCommitResponseTopic::default()
                        .with_name(name(s))
                        .with_partitions(vec![
                            offset_commit_response::OffsetCommitResponsePartition::default()
                                .with_partition_index(s.partition)
                                .with_error_code(28),
                        ]),
                ]))
            }
            ApiKey::OffsetFetch => {
                ResponseKind::OffsetFetch(if v >= 8 {
                    OffsetFetchResponse::default().with_groups(vec![
                        offset_fetch_response::OffsetFetchResponseGroup::default()
                            .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                            .with_topics(vec![
                                offset_fetch_response::OffsetFetchResponseTopics::default()
                                    .with_name(name(s))
                                    .with_partitions(vec![
                                        offset_fetch_response::OffsetFetchResponsePartitions::default()
                                            .with_partition_index(s.partition)
                                            .with_committed_offset(s.offset)
                                            .with_committed_leader_epoch(2)
                                            .with_metadata(Some(StrBytes::from_string(s.topic.clone()))),
                                    ]),
                            ]),
                    ])
                } else {
                    let r = OffsetFetchResponse::default().with_topics(vec![
                        offset_fetch_response::OffsetFetchResponseTopic::default()
                            .with_name(name(s))
                            .with_partitions(vec![
                                offset_fetch_response::OffsetFetchResponsePartition::default()
                                    .with_partition_index(s.partition)
                                    .with_committed_offset(s.offset)
                                    .with_committed_leader_epoch(if v >= 5 { 2 } else { -1 })
                                    .with_metadata(Some(StrBytes::from_string(s.topic.clone()))),
                            ]),
                    ]);
                    if v >= 2 { r.with_error_code(69) } else { r }
                })
            }
            ApiKey::OffsetForLeaderEpoch => ResponseKind::OffsetForLeaderEpoch(
                OffsetForLeaderEpochResponse::default().with_topics(vec![
                    offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default()
                        .with_topic(name(s))
                        .with_partitions(vec![
                            offset_for_leader_epoch_response::EpochEndOffset::default()
                                .with_partition(s.partition)
                                .with_leader_epoch(s.partition % 5)
                                .with_end_offset(s.offset),
                            offset_for_leader_epoch_response::EpochEndOffset::default()
                                .with_error_code(74)
                                .with_partition(s.partition + 1),
                        ]),
                ]),
            ),
            ApiKey::InitProducerId => ResponseKind::InitProducerId(
                InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(s.offset))
                    .with_producer_epoch(0),
            ),
            ApiKey::DeleteRecords => {
                ResponseKind::DeleteRecords(DeleteRecordsResponse::default().with_topics(vec![
                    delete_records_response::DeleteRecordsTopicResult::default()
                        .with_name(name(s))
                        .with_partitions(vec![
                            delete_records_response::DeleteRecordsPartitionResult::default()
                                .with_partition_index(s.partition)
                                .with_low_watermark(s.offset)
                                .with_error_code(1),
                        ]),
                ]))
            }
            ApiKey::AlterPartitionReassignments => ResponseKind::AlterPartitionReassignments(
                AlterPartitionReassignmentsResponse::default()
                    .with_throttle_time_ms(1)
                    .with_allow_replication_factor_change(v == 0 || s.partition % 2 == 0)
                    .with_error_code(0)
                    .with_responses(vec![
                        alter_partition_reassignments_response::ReassignableTopicResponse::default()
                            .with_name(name(s))
                            .with_partitions(vec![
                                alter_partition_reassignments_response::ReassignablePartitionResponse::default()
                                    .with_partition_index(s.partition)
                                    .with_error_code(39)
                                    .with_error_message(Some(StrBytes::from_static_str("bad"))),
                            ]),
                    ]),
            ),
            ApiKey::ListPartitionReassignments => ResponseKind::ListPartitionReassignments(
                ListPartitionReassignmentsResponse::default()
                    .with_throttle_time_ms(1)
                    .with_topics(vec![
                        list_partition_reassignments_response::OngoingTopicReassignment::default()
                            .with_name(name(s))
                            .with_partitions(vec![
                                list_partition_reassignments_response::OngoingPartitionReassignment::default()
                                    .with_partition_index(s.partition)
                                    .with_replicas(vec![BrokerId(2), BrokerId(3), BrokerId(1)])
                                    .with_adding_replicas(vec![BrokerId(3)])
                                    .with_removing_replicas(vec![BrokerId(1)]),
                            ]),
                    ]),
            ),
            ApiKey::ElectLeaders => ResponseKind::ElectLeaders(
                ElectLeadersResponse::default()
                    .with_throttle_time_ms(1)
                    .with_error_code(if v >= 1 { 41 } else { 0 })
                    .with_replica_election_results(vec![
                        elect_leaders_response::ReplicaElectionResult::default()
                            .with_topic(name(s))
                            .with_partition_result(vec![
                                elect_leaders_response::PartitionResult::default()
                                    .with_partition_id(s.partition)
                                    .with_error_code(84)
                                    .with_error_message(Some(StrBytes::from_static_str(
                                        "not needed",
                                    ))),
                                elect_leaders_response::PartitionResult::default()
                                    .with_partition_id(s.partition + 1),
                            ]),
                    ]),
            ),
            ApiKey::WriteTxnMarkers => ResponseKind::WriteTxnMarkers(
                WriteTxnMarkersResponse::default().with_markers(vec![
                    write_txn_markers_response::WritableTxnMarkerResult::default()
                        .with_producer_id(ProducerId(s.offset))
                        .with_topics(vec![
                            write_txn_markers_response::WritableTxnMarkerTopicResult::default()
                                .with_name(name(s))
                                .with_partitions(vec![
                                    write_txn_markers_response::WritableTxnMarkerPartitionResult::default()
                                        .with_partition_index(s.partition)
                                        .with_error_code(52),
                                ]),
                        ]),
                ]),
            ),
            ApiKey::AddPartitionsToTxn => {
                let topics = vec![
                    add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                        .with_name(name(s))
                        .with_results_by_partition(vec![
                            add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(s.partition)
                                .with_partition_error_code(55),
                        ]),
                ];
                let r = AddPartitionsToTxnResponse::default();
                ResponseKind::AddPartitionsToTxn(if v >= 4 {
                    r.with_results_by_transaction(vec![
                        add_partitions_to_txn_response::AddPartitionsToTxnResult::default()
                            .with_transactional_id(TransactionalId(StrBytes::from_string(
                                s.topic.clone(),
                            )))
                            .with_topic_results(topics),
                    ])
                } else {
                    r.with_results_by_topic_v3_and_below(topics)
                })
            }
            ApiKey::AddOffsetsToTxn => {
                ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(51))
            }
            ApiKey::EndTxn => ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(48)),
            ApiKey::TxnOffsetCommit => ResponseKind::TxnOffsetCommit(
                TxnOffsetCommitResponse::default().with_topics(vec![
                    txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                        .with_name(name(s))
                        .with_partitions(vec![
                            txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(s.partition)
                                .with_error_code(0),
                        ]),
                ]),
            ),
            ApiKey::DescribeTransactions => ResponseKind::DescribeTransactions(
                DescribeTransactionsResponse::default().with_transaction_states(vec![
                    describe_transactions_response::TransactionState::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(
                            s.topic.clone(),
                        )))
                        .with_transaction_state(StrBytes::from_static_str("Ongoing"))
                        .with_transaction_timeout_ms(60_000)
                        .with_transaction_start_time_ms(1_700_000_000_000)
                        .with_producer_id(ProducerId(s.offset))
                        .with_producer_epoch(2)
                        .with_topics(vec![
                            describe_transactions_response::TopicData::default()
                                .with_topic(name(s))
                                .with_partitions(vec![s.partition]),
                        ]),
                ]),
            ),
            ApiKey::ListTransactions => ResponseKind::ListTransactions(
                ListTransactionsResponse::default()
                    .with_unknown_state_filters(vec![StrBytes::from_static_str("Bogus")])
                    .with_transaction_states(vec![
                        list_transactions_response::TransactionState::default()
                            .with_transactional_id(TransactionalId(StrBytes::from_string(
                                s.topic.clone(),
                            )))
                            .with_producer_id(ProducerId(s.offset))
                            .with_transaction_state(StrBytes::from_static_str("Empty")),
                    ]),
            ),
            ApiKey::DescribeProducers => ResponseKind::DescribeProducers(
                DescribeProducersResponse::default().with_topics(vec![
                    describe_producers_response::TopicResponse::default()
                        .with_name(name(s))
                        .with_partitions(vec![
                            describe_producers_response::PartitionResponse::default()
                                .with_partition_index(s.partition)
                                .with_active_producers(vec![
                                    describe_producers_response::ProducerState::default()
                                        .with_producer_id(ProducerId(s.offset))
                                        .with_producer_epoch(3)
                                        .with_last_sequence(41)
                                        .with_last_timestamp(1_700_000_000_000)
                                        .with_coordinator_epoch(-1)
                                        .with_current_txn_start_offset(-1),
                                ]),
                        ]),
                ]),
            ),
            ApiKey::OffsetDelete => {
                ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_topics(vec![
                    offset_delete_response::OffsetDeleteResponseTopic::default()
                        .with_name(name(s))
                        .with_partitions(vec![
                            offset_delete_response::OffsetDeleteResponsePartition::default()
                                .with_partition_index(s.partition)
                                .with_error_code(93),
                        ]),
                ]))
            }
            ApiKey::ConsumerGroupHeartbeat => ResponseKind::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse::default()
                    .with_member_id(Some(StrBytes::from_static_str("m-1")))
                    .with_member_epoch(s.partition)
                    .with_heartbeat_interval_ms(5000)
                    .with_assignment(Some(
                        consumer_group_heartbeat_response::Assignment::default()
                            .with_topic_partitions(vec![
                                consumer_group_heartbeat_response::TopicPartitions::default()
                                    .with_topic_id(s.id)
                                    .with_partitions(vec![s.partition]),
                            ]),
                    )),
            ),
            ApiKey::DescribeQuorum => {
                let mut voter = describe_quorum_response::ReplicaState::default()
                    .with_replica_id(BrokerId(s.partition))
                    .with_log_end_offset(s.offset);
                if v >= 1 {
                    voter = voter
                        .with_last_fetch_timestamp(1_700_000_000_000)
                        .with_last_caught_up_timestamp(-1);
                }
                if v >= 2 {
                    voter = voter.with_replica_directory_id(s.id);
                }
                ResponseKind::DescribeQuorum(DescribeQuorumResponse::default().with_topics(vec![
                    describe_quorum_response::TopicData::default()
                        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                        .with_partitions(vec![
                            describe_quorum_response::PartitionData::default()
                                .with_leader_id(BrokerId(s.partition))
                                .with_leader_epoch(3)
                                .with_high_watermark(s.offset)
                                .with_current_voters(vec![voter.clone()])
                                .with_observers(vec![voter]),
                        ]),
                ]))
            }
            ApiKey::ConsumerGroupDescribe => {
                let tp = consumer_group_describe_response::TopicPartitions::default()
                    .with_topic_id(s.id)
                    .with_topic_name(name(s))
                    .with_partitions(vec![s.partition]);
                let assignment = consumer_group_describe_response::Assignment::default()
                    .with_topic_partitions(vec![tp]);
                let mut member = consumer_group_describe_response::Member::default()
                    .with_member_id(StrBytes::from_static_str("m-1"))
                    .with_member_epoch(3)
                    .with_client_id(StrBytes::from_static_str("c"))
                    .with_client_host(StrBytes::from_static_str("/127.0.0.1"))
                    .with_subscribed_topic_names(vec![name(s)])
                    .with_assignment(assignment.clone())
                    .with_target_assignment(assignment);
                if v >= 1 {
                    member = member.with_member_type(1);
                }
                ResponseKind::ConsumerGroupDescribe(
                    ConsumerGroupDescribeResponse::default().with_groups(vec![
                        consumer_group_describe_response::DescribedGroup::default()
                            .with_group_id(GroupId(StrBytes::from_string(s.topic.clone())))
                            .with_group_state(StrBytes::from_static_str("Stable"))
                            .with_group_epoch(3)
                            .with_assignment_epoch(3)
                            .with_assignor_name(StrBytes::from_static_str("uniform"))
                            .with_members(vec![member])
                            .with_authorized_operations(i32::MIN),
                    ]),
                )
            }
            ApiKey::DescribeTopicPartitions => ResponseKind::DescribeTopicPartitions(
                DescribeTopicPartitionsResponse::default()
                    .with_topics(vec![
                        describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default()
                            .with_name(Some(name(s)))
                            .with_topic_id(s.id)
                            .with_partitions(vec![
                                describe_topic_partitions_response::DescribeTopicPartitionsResponsePartition::default()
                                    .with_partition_index(s.partition)
                                    .with_leader_id(BrokerId(1))
                                    .with_leader_epoch(4)
                                    .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
                                    .with_isr_nodes(vec![BrokerId(1)])
                                    .with_eligible_leader_replicas(Some(Vec::new()))
                                    .with_last_known_elr(Some(Vec::new())),
                            ])
                            .with_topic_authorized_operations(0x0df8),
                    ])
                    .with_next_cursor((s.partition % 2 == 0).then(|| {
                        describe_topic_partitions_response::Cursor::default()
                            .with_topic_name(name(s))
                            .with_partition_index(s.partition + 1)
                    })),
            ),
            ApiKey::DescribeClientQuotas => ResponseKind::DescribeClientQuotas(
                DescribeClientQuotasResponse::default()
                    .with_throttle_time_ms(s.partition)
                    .with_error_code(0)
                    .with_error_message(None)
                    .with_entries(Some(vec![
                        describe_client_quotas_response::EntryData::default()
                            .with_entity(vec![
                                describe_client_quotas_response::EntityData::default()
                                    .with_entity_type(StrBytes::from_static_str("client-id"))
                                    .with_entity_name(Some(StrBytes::from_string(
                                        s.topic.clone(),
                                    ))),
                            ])
                            .with_values(vec![
                                describe_client_quotas_response::ValueData::default()
                                    .with_key(StrBytes::from_static_str("consumer_byte_rate"))
                                    .with_value(f64::from(s.partition)),
                            ]),
                    ])),
            ),
            ApiKey::AlterClientQuotas => ResponseKind::AlterClientQuotas(
                AlterClientQuotasResponse::default()
                    .with_throttle_time_ms(s.partition)
                    .with_entries(vec![
                        alter_client_quotas_response::EntryData::default()
                            .with_error_code(42)
                            .with_error_message(Some(StrBytes::from_static_str("bad")))
                            .with_entity(vec![
                                alter_client_quotas_response::EntityData::default()
                                    .with_entity_type(StrBytes::from_static_str("user"))
                                    .with_entity_name(None),
                            ]),
                    ]),
            ),
            ApiKey::DescribeUserScramCredentials => ResponseKind::DescribeUserScramCredentials(
                DescribeUserScramCredentialsResponse::default()
                    .with_throttle_time_ms(s.partition)
                    .with_results(vec![
                        describe_user_scram_credentials_response::DescribeUserScramCredentialsResult::default()
                            .with_user(StrBytes::from_string(s.topic.clone()))
                            .with_credential_infos(vec![
                                describe_user_scram_credentials_response::CredentialInfo::default()
                                    .with_mechanism(1)
                                    .with_iterations(8192),
                            ]),
                        describe_user_scram_credentials_response::DescribeUserScramCredentialsResult::default()
                            .with_user(StrBytes::from_static_str("nobody"))
                            .with_error_code(91)
                            .with_error_message(Some(StrBytes::from_static_str("missing"))),
                    ]),
            ),
            ApiKey::AlterUserScramCredentials => ResponseKind::AlterUserScramCredentials(
                AlterUserScramCredentialsResponse::default()
                    .with_throttle_time_ms(s.partition)
                    .with_results(vec![
                        alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                            .with_user(StrBytes::from_string(s.topic.clone()))
                            .with_error_code(93)
                            .with_error_message(Some(StrBytes::from_static_str("Too few iterations"))),
                    ]),
            ),
            other => panic!("no sample for {other:?}"),
        }
    }
}

mod arbitrary_input {
    //! Garbage never panics the decoder (the fuzz target explores this further).
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bodies_never_panic(
            key in prop::sample::select(crate::versions::SUPPORTED_APIS.iter().map(|a| a.key as i16).collect::<Vec<_>>()),
            version in 0i16..20,
            tail in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut f = key.to_be_bytes().to_vec();
            f.extend_from_slice(&version.to_be_bytes());
            f.extend_from_slice(&1i32.to_be_bytes());
            f.extend_from_slice(&tail);
            let _ = decode_request(Bytes::from(f));
        }
    }
}
