//! The controller listener's APIs (`versions::CONTROLLER_APIS`): every version round-trips
//! through the codec, none of them is accepted on a client listener, and garbage for them
//! is refused without a panic.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;

use super::*;
use crate::versions::{CONTROLLER_APIS, ListenerType};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn metadata_topic() -> TopicName {
    TopicName(s("__cluster_metadata"))
}

/// A request of every controller RPC, with every field of version `v` set to something
/// other than its default where that is cheap, so the round trip checks it.
fn request(key: ApiKey, v: i16, id: uuid::Uuid, n: i32) -> RequestKind {
    match key {
        ApiKey::Vote => {
            let mut p = vote_request::PartitionData::default()
                .with_replica_epoch(n)
                .with_replica_id(BrokerId(2))
                .with_last_offset_epoch(n - 1)
                .with_last_offset(i64::from(n) * 10);
            if v >= 1 {
                p = p.with_replica_directory_id(id).with_voter_directory_id(id);
            }
            if v >= 2 {
                p = p.with_pre_vote(true);
            }
            let mut r = VoteRequest::default()
                .with_cluster_id(Some(s("Ki0XBHpBRhWUb0kH5v1KgQ")))
                .with_topics(vec![
                    vote_request::TopicData::default()
                        .with_topic_name(metadata_topic())
                        .with_partitions(vec![p]),
                ]);
            if v >= 1 {
                r = r.with_voter_id(BrokerId(3));
            }
            RequestKind::Vote(r)
        }
        ApiKey::BeginQuorumEpoch => {
            let mut p = begin_quorum_epoch_request::PartitionData::default()
                .with_leader_id(BrokerId(1))
                .with_leader_epoch(n);
            if v >= 1 {
                p = p.with_voter_directory_id(id);
            }
            let mut r = BeginQuorumEpochRequest::default()
                .with_cluster_id(Some(s("c")))
                .with_topics(vec![
                    begin_quorum_epoch_request::TopicData::default()
                        .with_topic_name(metadata_topic())
                        .with_partitions(vec![p]),
                ]);
            if v >= 1 {
                r = r.with_voter_id(BrokerId(2)).with_leader_endpoints(vec![
                    begin_quorum_epoch_request::LeaderEndpoint::default()
                        .with_name(s("CONTROLLER"))
                        .with_host(s("127.0.0.1"))
                        .with_port(9093),
                ]);
            }
            RequestKind::BeginQuorumEpoch(r)
        }
        ApiKey::EndQuorumEpoch => {
            let mut p = end_quorum_epoch_request::PartitionData::default()
                .with_leader_id(BrokerId(1))
                .with_leader_epoch(n);
            p = if v == 0 {
                p.with_preferred_successors(vec![2, 3])
            } else {
                p.with_preferred_candidates(vec![
                    end_quorum_epoch_request::ReplicaInfo::default()
                        .with_candidate_id(BrokerId(2))
                        .with_candidate_directory_id(id),
                ])
            };
            let mut r = EndQuorumEpochRequest::default()
                .with_cluster_id(Some(s("c")))
                .with_topics(vec![
                    end_quorum_epoch_request::TopicData::default()
                        .with_topic_name(metadata_topic())
                        .with_partitions(vec![p]),
                ]);
            if v >= 1 {
                r = r.with_leader_endpoints(vec![
                    end_quorum_epoch_request::LeaderEndpoint::default()
                        .with_name(s("CONTROLLER"))
                        .with_host(s("h"))
                        .with_port(9093),
                ]);
            }
            RequestKind::EndQuorumEpoch(r)
        }
        ApiKey::DescribeQuorum => {
            RequestKind::DescribeQuorum(DescribeQuorumRequest::default().with_topics(vec![
                describe_quorum_request::TopicData::default()
                    .with_topic_name(metadata_topic())
                    .with_partitions(vec![
                        describe_quorum_request::PartitionData::default().with_partition_index(0),
                    ]),
            ]))
        }
        ApiKey::AlterPartition => {
            let mut p = alter_partition_request::PartitionData::default()
                .with_partition_index(n)
                .with_leader_epoch(4)
                .with_leader_recovery_state(1)
                .with_partition_epoch(9);
            p = if v == 2 {
                p.with_new_isr(vec![BrokerId(1), BrokerId(2)])
            } else {
                p.with_new_isr_with_epochs(vec![
                    alter_partition_request::BrokerState::default()
                        .with_broker_id(BrokerId(1))
                        .with_broker_epoch(77),
                ])
            };
            RequestKind::AlterPartition(
                AlterPartitionRequest::default()
                    .with_broker_id(BrokerId(1))
                    .with_broker_epoch(77)
                    .with_topics(vec![
                        alter_partition_request::TopicData::default()
                            .with_topic_id(id)
                            .with_partitions(vec![p]),
                    ]),
            )
        }
        ApiKey::FetchSnapshot => {
            let mut p = fetch_snapshot_request::PartitionSnapshot::default()
                .with_partition(0)
                .with_current_leader_epoch(n)
                .with_snapshot_id(
                    fetch_snapshot_request::SnapshotId::default()
                        .with_end_offset(100)
                        .with_epoch(3),
                )
                .with_position(12);
            if v >= 1 {
                p = p.with_replica_directory_id(id);
            }
            RequestKind::FetchSnapshot(
                FetchSnapshotRequest::default()
                    .with_cluster_id(Some(s("c")))
                    .with_replica_id(BrokerId(2))
                    .with_max_bytes(1 << 20)
                    .with_topics(vec![
                        fetch_snapshot_request::TopicSnapshot::default()
                            .with_name(metadata_topic())
                            .with_partitions(vec![p]),
                    ]),
            )
        }
        ApiKey::BrokerRegistration => {
            let mut r = BrokerRegistrationRequest::default()
                .with_broker_id(BrokerId(n))
                .with_cluster_id(s("c"))
                .with_incarnation_id(id)
                .with_listeners(vec![
                    broker_registration_request::Listener::default()
                        .with_name(s("PLAINTEXT"))
                        .with_host(s("127.0.0.1"))
                        .with_port(9092)
                        .with_security_protocol(0),
                ])
                .with_features(vec![
                    broker_registration_request::Feature::default()
                        .with_name(s("metadata.version"))
                        .with_min_supported_version(1)
                        .with_max_supported_version(25),
                ])
                .with_rack(Some(s("r1")));
            if v >= 2 {
                r = r.with_log_dirs(vec![id]);
            }
            if v >= 3 {
                r = r.with_previous_broker_epoch(55);
            }
            RequestKind::BrokerRegistration(r)
        }
        ApiKey::BrokerHeartbeat => {
            let mut r = BrokerHeartbeatRequest::default()
                .with_broker_id(BrokerId(n))
                .with_broker_epoch(55)
                .with_current_metadata_offset(1234)
                .with_want_fence(true)
                .with_want_shut_down(true);
            if v >= 1 {
                r = r.with_offline_log_dirs(vec![id]);
            }
            RequestKind::BrokerHeartbeat(r)
        }
        ApiKey::AllocateProducerIds => RequestKind::AllocateProducerIds(
            AllocateProducerIdsRequest::default()
                .with_broker_id(BrokerId(n))
                .with_broker_epoch(i64::from(n) * 3),
        ),
        ApiKey::AddRaftVoter => RequestKind::AddRaftVoter(
            AddRaftVoterRequest::default()
                .with_cluster_id(Some(s("c")))
                .with_timeout_ms(3000)
                .with_voter_id(n)
                .with_voter_directory_id(id)
                .with_listeners(vec![
                    add_raft_voter_request::Listener::default()
                        .with_name(s("CONTROLLER"))
                        .with_host(s("h"))
                        .with_port(9093),
                ]),
        ),
        ApiKey::RemoveRaftVoter => RequestKind::RemoveRaftVoter(
            RemoveRaftVoterRequest::default()
                .with_cluster_id(Some(s("c")))
                .with_voter_id(n)
                .with_voter_directory_id(id),
        ),
        ApiKey::UpdateRaftVoter => RequestKind::UpdateRaftVoter(
            UpdateRaftVoterRequest::default()
                .with_cluster_id(Some(s("c")))
                .with_current_leader_epoch(n)
                .with_voter_id(2)
                .with_voter_directory_id(id)
                .with_listeners(vec![
                    update_raft_voter_request::Listener::default()
                        .with_name(s("CONTROLLER"))
                        .with_host(s("h"))
                        .with_port(9093),
                ])
                .with_k_raft_version_feature(
                    update_raft_voter_request::KRaftVersionFeature::default()
                        .with_min_supported_version(0)
                        .with_max_supported_version(1),
                ),
        ),
        ApiKey::SaslHandshake => {
            RequestKind::SaslHandshake(SaslHandshakeRequest::default().with_mechanism(s("PLAIN")))
        }
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from(format!("\0node-{n}\0pw"))),
        ),
        other => panic!("no controller sample for {other:?}"),
    }
}

/// A response of every controller RPC, as the controller would send it.
fn response(key: ApiKey, v: i16, id: uuid::Uuid, n: i32) -> ResponseKind {
    match key {
        ApiKey::Vote => {
            let mut r = VoteResponse::default().with_topics(vec![
                vote_response::TopicData::default()
                    .with_topic_name(metadata_topic())
                    .with_partitions(vec![
                        vote_response::PartitionData::default()
                            .with_leader_id(BrokerId(1))
                            .with_leader_epoch(n)
                            .with_vote_granted(true),
                    ]),
            ]);
            if v >= 1 {
                r = r.with_node_endpoints(vec![
                    vote_response::NodeEndpoint::default()
                        .with_node_id(BrokerId(1))
                        .with_host(s("h"))
                        .with_port(9093),
                ]);
            }
            ResponseKind::Vote(r)
        }
        ApiKey::BeginQuorumEpoch => {
            ResponseKind::BeginQuorumEpoch(BeginQuorumEpochResponse::default().with_topics(vec![
                begin_quorum_epoch_response::TopicData::default()
                    .with_topic_name(metadata_topic())
                    .with_partitions(vec![
                        begin_quorum_epoch_response::PartitionData::default()
                            .with_error_code(6)
                            .with_leader_id(BrokerId(1))
                            .with_leader_epoch(n),
                    ]),
            ]))
        }
        ApiKey::EndQuorumEpoch => {
            ResponseKind::EndQuorumEpoch(EndQuorumEpochResponse::default().with_topics(vec![
                end_quorum_epoch_response::TopicData::default()
                    .with_topic_name(metadata_topic())
                    .with_partitions(vec![
                        end_quorum_epoch_response::PartitionData::default()
                            .with_leader_id(BrokerId(2))
                            .with_leader_epoch(n),
                    ]),
            ]))
        }
        ApiKey::DescribeQuorum => {
            let mut voter = describe_quorum_response::ReplicaState::default()
                .with_replica_id(BrokerId(1))
                .with_log_end_offset(i64::from(n));
            if v >= 1 {
                voter = voter
                    .with_last_fetch_timestamp(1_700_000_000_000)
                    .with_last_caught_up_timestamp(1_700_000_000_000);
            }
            if v >= 2 {
                voter = voter.with_replica_directory_id(id);
            }
            let mut r = DescribeQuorumResponse::default().with_topics(vec![
                describe_quorum_response::TopicData::default()
                    .with_topic_name(metadata_topic())
                    .with_partitions(vec![
                        describe_quorum_response::PartitionData::default()
                            .with_leader_id(BrokerId(1))
                            .with_leader_epoch(3)
                            .with_high_watermark(i64::from(n))
                            .with_current_voters(vec![voter]),
                    ]),
            ]);
            if v >= 2 {
                r = r.with_nodes(vec![
                    describe_quorum_response::Node::default()
                        .with_node_id(BrokerId(1))
                        .with_listeners(vec![
                            describe_quorum_response::Listener::default()
                                .with_name(s("CONTROLLER"))
                                .with_host(s("h"))
                                .with_port(9093),
                        ]),
                ]);
            }
            ResponseKind::DescribeQuorum(r)
        }
        ApiKey::AlterPartition => {
            ResponseKind::AlterPartition(AlterPartitionResponse::default().with_topics(vec![
                alter_partition_response::TopicData::default()
                    .with_topic_id(id)
                    .with_partitions(vec![
                        alter_partition_response::PartitionData::default()
                            .with_partition_index(n)
                            .with_leader_id(BrokerId(1))
                            .with_leader_epoch(4)
                            .with_isr(vec![BrokerId(1), BrokerId(2)])
                            .with_partition_epoch(10),
                    ]),
            ]))
        }
        ApiKey::FetchSnapshot => {
            ResponseKind::FetchSnapshot(FetchSnapshotResponse::default().with_topics(vec![
                fetch_snapshot_response::TopicSnapshot::default()
                    .with_name(metadata_topic())
                    .with_partitions(vec![
                        fetch_snapshot_response::PartitionSnapshot::default()
                            .with_snapshot_id(
                                fetch_snapshot_response::SnapshotId::default()
                                    .with_end_offset(100)
                                    .with_epoch(3),
                            )
                            .with_size(5)
                            .with_position(0)
                            .with_unaligned_records(Bytes::from_static(b"abcde")),
                    ]),
            ]))
        }
        ApiKey::BrokerRegistration => ResponseKind::BrokerRegistration(
            BrokerRegistrationResponse::default().with_broker_epoch(i64::from(n)),
        ),
        ApiKey::BrokerHeartbeat => ResponseKind::BrokerHeartbeat(
            BrokerHeartbeatResponse::default()
                .with_is_caught_up(true)
                .with_is_fenced(false)
                .with_should_shut_down(n % 2 == 0),
        ),
        ApiKey::AllocateProducerIds => ResponseKind::AllocateProducerIds(
            AllocateProducerIdsResponse::default()
                .with_error_code(if n % 2 == 0 { 0 } else { 41 })
                .with_producer_id_start(ProducerId(i64::from(n) * 1000))
                .with_producer_id_len(1000),
        ),
        ApiKey::AddRaftVoter => ResponseKind::AddRaftVoter(
            AddRaftVoterResponse::default()
                .with_error_code(41)
                .with_error_message(Some(s("not the leader"))),
        ),
        ApiKey::RemoveRaftVoter => {
            ResponseKind::RemoveRaftVoter(RemoveRaftVoterResponse::default().with_error_code(41))
        }
        ApiKey::UpdateRaftVoter => {
            ResponseKind::UpdateRaftVoter(UpdateRaftVoterResponse::default().with_error_code(0))
        }
        ApiKey::Fetch => {
            let p = fetch_response::PartitionData::default()
                .with_partition_index(0)
                .with_high_watermark(i64::from(n))
                .with_last_stable_offset(i64::from(n))
                .with_log_start_offset(0)
                .with_diverging_epoch(
                    fetch_response::EpochEndOffset::default()
                        .with_epoch(3)
                        .with_end_offset(40),
                )
                .with_current_leader(
                    fetch_response::LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(2))
                        .with_leader_epoch(4),
                )
                .with_snapshot_id(
                    fetch_response::SnapshotId::default()
                        .with_end_offset(30)
                        .with_epoch(2),
                )
                .with_aborted_transactions(Some(vec![
                    fetch_response::AbortedTransaction::default()
                        .with_producer_id(ProducerId(9))
                        .with_first_offset(1),
                ]))
                .with_records(Some(Bytes::from_static(b"records")));
            let mut t = fetch_response::FetchableTopicResponse::default().with_partitions(vec![p]);
            t = if v >= 13 {
                t.with_topic_id(id)
            } else {
                t.with_topic(metadata_topic())
            };
            let mut r = FetchResponse::default().with_responses(vec![t]);
            if v >= 16 {
                r = r.with_node_endpoints(vec![
                    fetch_response::NodeEndpoint::default()
                        .with_node_id(BrokerId(2))
                        .with_host(s("h"))
                        .with_port(9093)
                        .with_rack(Some(s("r"))),
                ]);
            }
            ResponseKind::Fetch(r)
        }
        ApiKey::ApiVersions => {
            let mut r = api_versions_body_for(ListenerType::Controller, 0);
            if v >= 3 {
                r = r
                    .with_supported_features(vec![
                        api_versions_response::SupportedFeatureKey::default()
                            .with_name(s("kraft.version"))
                            .with_min_version(0)
                            .with_max_version(1),
                    ])
                    .with_finalized_features_epoch(i64::from(n))
                    .with_finalized_features(vec![
                        api_versions_response::FinalizedFeatureKey::default()
                            .with_name(s("kraft.version"))
                            .with_max_version_level(1)
                            .with_min_version_level(1),
                    ]);
            }
            ResponseKind::ApiVersions(r)
        }
        ApiKey::SaslHandshake => ResponseKind::SaslHandshake(
            SaslHandshakeResponse::default().with_mechanisms(vec![s("PLAIN"), s("SCRAM-SHA-512")]),
        ),
        ApiKey::SaslAuthenticate => ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(if n > 5 { 58 } else { 0 })
                .with_error_message((n > 5).then(|| s("failed")))
                .with_auth_bytes(Bytes::from_static(b"v=abc"))
                .with_session_lifetime_ms(if v >= 1 { i64::from(n) * 1000 } else { 0 }),
        ),
        other => panic!("no controller sample for {other:?}"),
    }
}

/// The entries of the table with samples here: all but the metadata writes brokers forward
/// (the client table's round trips and `forward_tests` cover those).
fn sampled() -> impl Iterator<Item = &'static crate::versions::SupportedApi> {
    CONTROLLER_APIS
        .iter()
        .filter(|a| !crate::codec::FORWARDED_APIS.contains(&a.key))
}

/// The controller's own RPCs: every entry of the table except those it shares with the
/// client listener, whose versions the client table's round trip already covers.
fn controller_rpcs() -> impl Iterator<Item = &'static crate::versions::SupportedApi> {
    CONTROLLER_APIS.iter().filter(|a| {
        let shared = crate::versions::supported(a.key);
        if let Some(client) = shared {
            // Fetch v17 (KIP-853's ReplicaDirectoryId) is the controller's alone: a
            // broker's client listener stops at v16 (see the test below).
            assert!(
                client.min <= a.min && (a.max <= client.max || a.key == ApiKey::Fetch),
                "{:?} is covered by the client table",
                a.key
            );
        }
        shared.is_none()
    })
}

fn frame(key: ApiKey, v: i16, body: &RequestKind) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(v)
        .with_correlation_id(5)
        .with_client_id(Some(s("raft-client-2")))
        .encode(&mut buf, key.request_header_version(v))
        .unwrap();
    body.encode(&mut buf, v).unwrap();
    buf.freeze()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn controller_requests_round_trip_only_on_the_controller_listener(
        id in any::<u128>(),
        n in 1..i32::MAX,
    ) {
        let id = uuid::Uuid::from_u128(id);
        for api in controller_rpcs() {
            for v in api.min..=api.max {
                let body = request(api.key, v, id, n);
                let f = frame(api.key, v, &body);
                let decoded = match decode_request_on(ListenerType::Controller, f.clone()) {
                    Ok(Decoded::Request(r)) => r,
                    other => panic!("{:?} v{v}: {other:?}", api.key),
                };
                prop_assert_eq!(decoded.api_key, api.key);
                prop_assert_eq!(&f, &frame(api.key, v, &decoded.body), "{:?} v{}", api.key, v);
                // A client listener does not serve it: Kafka closes the connection.
                let on_client = decode_request(f);
                prop_assert!(
                    matches!(on_client, Err(DecodeError::UnknownApiKey { correlation_id: 5, .. })),
                    "{:?} v{} on a client listener: {:?}", api.key, v, on_client
                );
            }
        }
    }

    /// What a peer sends (`encode_request`) decodes on its controller listener, and what
    /// the peer answers (`encode_response`) decodes with `decode_response`, for every API
    /// and version of the controller's table, Fetch and ApiVersions included.
    #[test]
    fn node_to_node_frames_round_trip(id in any::<u128>(), n in 1..i32::MAX) {
        let id = uuid::Uuid::from_u128(id);
        for api in sampled() {
            for v in api.min..=api.max {
                if controller_rpcs().any(|a| a.key == api.key) {
                    let body = request(api.key, v, id, n);
                    let sent = encode_request(api.key, v, n, "raft-client-2", &body).unwrap();
                    prop_assert_eq!(
                        i32::from_be_bytes(sent[..4].try_into().unwrap()) as usize,
                        sent.len() - 4
                    );
                    match decode_request_on(ListenerType::Controller, sent.slice(4..)) {
                        Ok(Decoded::Request(r)) => {
                            prop_assert_eq!(r.header.correlation_id, n);
                            prop_assert_eq!(
                                &sent,
                                &encode_request(api.key, v, n, "raft-client-2", &r.body).unwrap()
                            );
                        }
                        other => panic!("{:?} v{v}: {other:?}", api.key),
                    }
                }
                let body = response(api.key, v, id, n);
                let f = encode_response(api.key, v, n, &body).unwrap();
                let got = decode_response(api.key, v, f.slice(4..))
                    .unwrap_or_else(|e| panic!("{:?} v{v}: {e}", api.key));
                prop_assert_eq!(got.correlation_id, n);
                prop_assert_eq!(&f, &encode_response(api.key, v, n, &got.body).unwrap());
            }
        }
    }

    #[test]
    fn controller_responses_round_trip(id in any::<u128>(), n in 1..i32::MAX) {
        let id = uuid::Uuid::from_u128(id);
        for api in controller_rpcs() {
            for v in api.min..=api.max {
                let body = response(api.key, v, id, n);
                let f = encode_response(api.key, v, 77, &body).unwrap();
                let mut rest = f.slice(4..);
                let header =
                    ResponseHeader::decode(&mut rest, api.key.response_header_version(v)).unwrap();
                prop_assert_eq!(header.correlation_id, 77);
                let decoded = ResponseKind::decode(api.key, &mut rest, v).unwrap();
                prop_assert_eq!(rest.len(), 0);
                prop_assert_eq!(&f, &encode_response(api.key, v, 77, &decoded).unwrap());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Garbage after a controller API's header is refused (or decoded), never a panic or
    /// an allocation the bytes do not back.
    #[test]
    fn arbitrary_controller_bodies_never_panic(
        key in prop::sample::select(CONTROLLER_APIS.iter().map(|a| a.key as i16).collect::<Vec<_>>()),
        version in 0i16..6,
        tail in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut f = key.to_be_bytes().to_vec();
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&1i32.to_be_bytes());
        f.extend_from_slice(&tail);
        let _ = decode_request_on(ListenerType::Controller, Bytes::from(f));
    }

    /// A valid controller request cut short or with a byte flipped is refused or decoded,
    /// never a panic.
    #[test]
    fn mangled_controller_requests_never_panic(
        which in 0..CONTROLLER_APIS.len(),
        cut in 0usize..400,
        flip in 0usize..400,
        byte in any::<u8>(),
    ) {
        let api = CONTROLLER_APIS[which];
        if crate::versions::supported(api.key).is_some() {
            return Ok(());
        }
        let body = request(api.key, api.max, uuid::Uuid::from_u128(7), 3);
        let mut raw = frame(api.key, api.max, &body).to_vec();
        if !raw.is_empty() {
            let i = flip % raw.len();
            raw[i] = byte;
        }
        raw.truncate(cut.max(8));
        let _ = decode_request_on(ListenerType::Controller, Bytes::from(raw));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A peer's garbage is refused (or decoded), never a panic or an allocation the bytes do
    /// not back.
    #[test]
    fn arbitrary_responses_never_panic(
        which in 0..CONTROLLER_APIS.len(),
        version in 0i16..20,
        tail in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let _ = decode_response(CONTROLLER_APIS[which].key, version, Bytes::from(tail));
    }

    #[test]
    fn mangled_responses_never_panic(
        which in 0..CONTROLLER_APIS.len(),
        cut in 0usize..400,
        flip in 0usize..400,
        byte in any::<u8>(),
    ) {
        let api = CONTROLLER_APIS[which];
        if crate::codec::FORWARDED_APIS.contains(&api.key) {
            return Ok(());
        }
        let body = response(api.key, api.max, uuid::Uuid::from_u128(7), 3);
        let mut raw = encode_response(api.key, api.max, 1, &body).unwrap().slice(4..).to_vec();
        if !raw.is_empty() {
            let i = flip % raw.len();
            raw[i] = byte;
        }
        raw.truncate(cut);
        let _ = decode_response(api.key, api.max, Bytes::from(raw));
    }
}

/// KIP-853: a dynamic quorum's fetcher names its directory in Fetch v17, which only the
/// controller listener accepts.
#[test]
fn fetch_v17_is_served_on_the_controller_listener_only() {
    let mut p = fetch_request::FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(7)
        .with_last_fetched_epoch(2);
    p.replica_directory_id = uuid::Uuid::from_u128(9);
    let body = RequestKind::Fetch(
        FetchRequest::default()
            .with_cluster_id(Some(s("c")))
            .with_replica_state(fetch_request::ReplicaState::default().with_replica_id(BrokerId(2)))
            .with_topics(vec![
                fetch_request::FetchTopic::default()
                    .with_topic_id(uuid::Uuid::from_u128(1))
                    .with_partitions(vec![p]),
            ]),
    );
    let f = frame(ApiKey::Fetch, 17, &body);
    match decode_request_on(ListenerType::Controller, f.clone()) {
        Ok(Decoded::Request(r)) => match r.body {
            RequestKind::Fetch(got) => assert_eq!(
                got.topics[0].partitions[0].replica_directory_id,
                uuid::Uuid::from_u128(9)
            ),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(
            decode_request(f),
            Err(DecodeError::UnsupportedVersion { .. })
        ),
        "a client listener serves Fetch up to v16"
    );
}

#[test]
fn a_huge_tagged_array_in_a_response_is_refused() {
    // Vote v1 response: correlation id, header tags, error_code, no topics, then the
    // tagged node_endpoints claiming 2^28 - 1 entries.
    let mut f = Vec::new();
    f.extend_from_slice(&4i32.to_be_bytes());
    f.push(0); // header tags
    f.extend_from_slice(&0i16.to_be_bytes());
    f.push(1); // topics: empty
    f.extend_from_slice(&[1, 0, 4, 0xff, 0xff, 0xff, 0x7f]); // one tag: 0, size 4, count
    match decode_response(ApiKey::Vote, 1, Bytes::from(f)) {
        Err(DecodeError::Malformed {
            correlation_id: 4,
            source,
            ..
        }) => assert!(source.to_string().contains("invalid length"), "{source}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn responses_only_for_the_controller_table() {
    assert!(matches!(
        decode_response(ApiKey::Metadata, 12, Bytes::new()),
        Err(DecodeError::UnknownApiKey { .. })
    ));
    assert!(matches!(
        decode_response(ApiKey::Vote, 3, Bytes::new()),
        Err(DecodeError::UnsupportedVersion { .. })
    ));
}

#[test]
fn a_huge_count_in_a_controller_request_is_refused() {
    // Vote v2: compact cluster_id "c", voter_id, then topics claiming 2^28 - 1 entries.
    let mut f = frame(ApiKey::Vote, 2, &RequestKind::Vote(VoteRequest::default())).to_vec();
    let header_len = f.len() - 1 - 4 - 1 - 1; // null cluster id, voter id, topics, tags
    f.truncate(header_len);
    f.extend_from_slice(&[2, b'c']);
    f.extend_from_slice(&1i32.to_be_bytes());
    f.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
    f.push(0);
    match decode_request_on(ListenerType::Controller, Bytes::from(f)) {
        Err(DecodeError::Malformed { source, .. }) => {
            assert!(source.to_string().contains("invalid length"), "{source}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn controller_api_versions_lists_the_controller_table() {
    let body = api_versions_body_for(ListenerType::Controller, 0);
    let keys: Vec<i16> = body.api_keys.iter().map(|k| k.api_key).collect();
    assert_eq!(
        keys,
        CONTROLLER_APIS
            .iter()
            .map(|a| a.key as i16)
            .collect::<Vec<_>>()
    );
    assert!(keys.contains(&(ApiKey::Vote as i16)));
    assert!(!keys.contains(&(ApiKey::Produce as i16)));
    let client: Vec<i16> = api_versions_body(0)
        .api_keys
        .iter()
        .map(|k| k.api_key)
        .collect();
    assert!(!client.contains(&(ApiKey::Vote as i16)));
    // KIP-511's fallback on the controller listener carries the controller's ranges.
    let fallback = encode_api_versions_fallback_for(ListenerType::Controller, 3);
    let mut rest = fallback.slice(4..);
    ResponseHeader::decode(&mut rest, 0).unwrap();
    let decoded = ApiVersionsResponse::decode(&mut rest, 0).unwrap();
    assert_eq!(decoded.error_code, UNSUPPORTED_VERSION);
    assert_eq!(decoded.api_keys.len(), CONTROLLER_APIS.len());
}

#[test]
fn a_client_api_on_the_controller_listener_is_refused() {
    let f = frame(
        ApiKey::Metadata,
        12,
        &RequestKind::Metadata(MetadataRequest::default()),
    );
    assert!(matches!(
        decode_request_on(ListenerType::Controller, f),
        Err(DecodeError::UnknownApiKey {
            api_key: 3,
            correlation_id: 5
        })
    ));
}

/// AllocateProducerIds v0 byte for byte as Kafka's schema lays it out (flexible from v0):
/// request `broker_id int32, broker_epoch int64, tags`; response `throttle_time_ms int32,
/// error_code int16, producer_id_start int64, producer_id_len int32, tags`.
#[test]
fn allocate_producer_ids_v0_bytes() {
    let mut f = Vec::new();
    f.extend_from_slice(&67i16.to_be_bytes());
    f.extend_from_slice(&0i16.to_be_bytes());
    f.extend_from_slice(&8i32.to_be_bytes());
    f.extend_from_slice(&[0, 1, b'b']); // client id "b" (nullable int16 string)
    f.push(0); // header tags
    f.extend_from_slice(&2i32.to_be_bytes());
    f.extend_from_slice(&77i64.to_be_bytes());
    f.push(0); // body tags
    let Ok(Decoded::Request(r)) =
        decode_request_on(ListenerType::Controller, Bytes::from(f.clone()))
    else {
        panic!("AllocateProducerIds v0 decodes on the controller listener");
    };
    let RequestKind::AllocateProducerIds(req) = &r.body else {
        panic!("{:?}", r.body);
    };
    assert_eq!((req.broker_id, req.broker_epoch), (BrokerId(2), 77));
    // Cut anywhere in the body: refused, never a panic.
    for cut in 9..f.len() {
        assert!(
            decode_request_on(ListenerType::Controller, Bytes::from(f[..cut].to_vec())).is_err(),
            "cut at {cut}"
        );
    }

    let body = ResponseKind::AllocateProducerIds(
        AllocateProducerIdsResponse::default()
            .with_producer_id_start(ProducerId(3000))
            .with_producer_id_len(1000),
    );
    let sent = encode_response(ApiKey::AllocateProducerIds, 0, 8, &body).unwrap();
    let mut want = Vec::new();
    want.extend_from_slice(&24i32.to_be_bytes()); // frame size
    want.extend_from_slice(&8i32.to_be_bytes()); // correlation id
    want.push(0); // header tags
    want.extend_from_slice(&0i32.to_be_bytes());
    want.extend_from_slice(&0i16.to_be_bytes());
    want.extend_from_slice(&3000i64.to_be_bytes());
    want.extend_from_slice(&1000i32.to_be_bytes());
    want.push(0); // body tags
    assert_eq!(&sent[..], &want[..]);
    let got = decode_response(ApiKey::AllocateProducerIds, 0, sent.slice(4..)).unwrap();
    assert_eq!(got.body, body);
    assert!(
        decode_response(
            ApiKey::AllocateProducerIds,
            0,
            sent.slice(4..sent.len() - 3)
        )
        .is_err()
    );
}
