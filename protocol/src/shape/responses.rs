//! Response schemas of the controller listener's APIs, for the responses a node reads from
//! its peers (`codec::decode_response`), and of the client-listener APIs a node forwards to
//! the active controller (`codec::decode_forwarded_response`). A peer is no more trusted
//! than a client: its counts are checked before the codec allocates, exactly as a
//! request's are.
//!
//! Tagged fields the codec knows are listed (`T::Tagged`) wherever they hold an array or
//! sit inside one (see the parent module).

use kafka_protocol::messages::ApiKey;

use super::{ALL, F, Schema, T, f};

/// `NodeEndpoints` (KIP-853), a top-level tagged array: node_id, host, port (uint16).
const NODE_ENDPOINTS: T = T::Array(&[f(T::I32, 0, ALL), f(T::Str, 0, ALL), f(T::I16, 0, ALL)]);

/// `TopicData` of Begin/EndQuorumEpoch responses: partition_index, error_code, leader_id,
/// leader_epoch.
const QUORUM_EPOCH_TOPICS: F = f(
    T::Array(&[
        f(T::Str, 0, ALL),
        f(
            T::Array(&[
                f(T::I32, 0, ALL),
                f(T::I16, 0, ALL),
                f(T::I32, 0, ALL),
                f(T::I32, 0, ALL),
            ]),
            0,
            ALL,
        ),
    ]),
    0,
    ALL,
);

const VOTE: Schema = Schema {
    fields: &[
        f(T::I16, 0, ALL), // error_code
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // topic_name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL), // partition_index
                        f(T::I16, 0, ALL), // error_code
                        f(T::I32, 0, ALL), // leader_id
                        f(T::I32, 0, ALL), // leader_epoch
                        f(T::I8, 0, ALL),  // vote_granted
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ), // topics
        f(T::Tagged(0, &NODE_ENDPOINTS), 1, ALL), // node_endpoints
    ],
    flexible_from: 0,
};

const BEGIN_QUORUM_EPOCH: Schema = Schema {
    fields: &[
        f(T::I16, 0, ALL), // error_code
        QUORUM_EPOCH_TOPICS,
        f(T::Tagged(0, &NODE_ENDPOINTS), 1, ALL), // node_endpoints
    ],
    flexible_from: 1,
};

const END_QUORUM_EPOCH: Schema = BEGIN_QUORUM_EPOCH;

const DESCRIBE_QUORUM: Schema = Schema {
    fields: &[
        f(T::I16, 0, ALL), // error_code
        f(T::Str, 2, ALL), // error_message
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // topic_name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),                   // partition_index
                        f(T::I16, 0, ALL),                   // error_code
                        f(T::Str, 2, ALL),                   // error_message
                        f(T::I32, 0, ALL),                   // leader_id
                        f(T::I32, 0, ALL),                   // leader_epoch
                        f(T::I64, 0, ALL),                   // high_watermark
                        f(T::Array(&REPLICA_STATE), 0, ALL), // current_voters
                        f(T::Array(&REPLICA_STATE), 0, ALL), // observers
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ), // topics
        f(
            T::Array(&[
                f(T::I32, 2, ALL), // node_id
                f(
                    T::Array(&[f(T::Str, 2, ALL), f(T::Str, 2, ALL), f(T::I16, 2, ALL)]),
                    2,
                    ALL,
                ), // listeners: name, host, port
            ]),
            2,
            ALL,
        ), // nodes
    ],
    flexible_from: 0,
};

/// DescribeQuorum's `ReplicaState`.
const REPLICA_STATE: [F; 5] = [
    f(T::I32, 0, ALL),  // replica_id
    f(T::Uuid, 2, ALL), // replica_directory_id
    f(T::I64, 0, ALL),  // log_end_offset
    f(T::I64, 1, ALL),  // last_fetch_timestamp
    f(T::I64, 1, ALL),  // last_caught_up_timestamp
];

const ALTER_PARTITION: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(T::I16, 0, ALL), // error_code
        f(
            T::Array(&[
                f(T::Uuid, 0, ALL), // topic_id
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),      // partition_index
                        f(T::I16, 0, ALL),      // error_code
                        f(T::I32, 0, ALL),      // leader_id
                        f(T::I32, 0, ALL),      // leader_epoch
                        f(T::ArrayI32, 0, ALL), // isr
                        f(T::I8, 0, ALL),       // leader_recovery_state
                        f(T::I32, 0, ALL),      // partition_epoch
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ), // topics
    ],
    flexible_from: 0,
};

const FETCH_SNAPSHOT: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(T::I16, 0, ALL), // error_code
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),                                             // index
                        f(T::I16, 0, ALL),                                             // error_code
                        f(T::Struct(&[f(T::I64, 0, ALL), f(T::I32, 0, ALL)]), 0, ALL), // snapshot_id
                        f(
                            T::Tagged(0, &T::Struct(&[f(T::I32, 0, ALL), f(T::I32, 0, ALL)])),
                            0,
                            ALL,
                        ), // current_leader
                        f(T::I64, 0, ALL),                                             // size
                        f(T::I64, 0, ALL),                                             // position
                        f(T::Bytes, 0, ALL), // unaligned_records
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ), // topics
        f(T::Tagged(0, &NODE_ENDPOINTS), 1, ALL), // node_endpoints
    ],
    flexible_from: 0,
};

const BROKER_REGISTRATION: Schema = Schema {
    fields: &[f(T::I32, 0, ALL), f(T::I16, 0, ALL), f(T::I64, 0, ALL)],
    flexible_from: 0,
};

const BROKER_HEARTBEAT: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(T::I16, 0, ALL), // error_code
        f(T::I8, 0, ALL),  // is_caught_up
        f(T::I8, 0, ALL),  // is_fenced
        f(T::I8, 0, ALL),  // should_shut_down
    ],
    flexible_from: 0,
};

const ALLOCATE_PRODUCER_IDS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(T::I16, 0, ALL), // error_code
        f(T::I64, 0, ALL), // producer_id_start
        f(T::I32, 0, ALL), // producer_id_len
    ],
    flexible_from: 0,
};

/// AddRaftVoter and RemoveRaftVoter: throttle_time_ms, error_code, error_message.
const RAFT_VOTER_CHANGE: Schema = Schema {
    fields: &[f(T::I32, 0, ALL), f(T::I16, 0, ALL), f(T::Str, 0, ALL)],
    flexible_from: 0,
};

const UPDATE_RAFT_VOTER: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(T::I16, 0, ALL), // error_code
        f(
            T::Tagged(
                0,
                &T::Struct(&[
                    f(T::I32, 0, ALL), // leader_id
                    f(T::I32, 0, ALL), // leader_epoch
                    f(T::Str, 0, ALL), // host
                    f(T::I32, 0, ALL), // port
                ]),
            ),
            0,
            ALL,
        ), // current_leader
    ],
    flexible_from: 0,
};

/// Fetch as the Raft quorum uses it (v12+, the controller table's range).
const FETCH: Schema = Schema {
    fields: &[
        f(T::I32, 1, ALL), // throttle_time_ms
        f(T::I16, 7, ALL), // error_code
        f(T::I32, 7, ALL), // session_id
        f(
            T::Array(&[
                f(T::Str, 0, 12),    // topic
                f(T::Uuid, 13, ALL), // topic_id
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL), // partition_index
                        f(T::I16, 0, ALL), // error_code
                        f(T::I64, 0, ALL), // high_watermark
                        f(T::I64, 4, ALL), // last_stable_offset
                        f(T::I64, 5, ALL), // log_start_offset
                        f(
                            T::Tagged(0, &T::Struct(&[f(T::I32, 0, ALL), f(T::I64, 0, ALL)])),
                            12,
                            ALL,
                        ), // diverging_epoch: epoch, end_offset
                        f(
                            T::Tagged(1, &T::Struct(&[f(T::I32, 0, ALL), f(T::I32, 0, ALL)])),
                            12,
                            ALL,
                        ), // current_leader: leader_id, leader_epoch
                        f(
                            T::Tagged(2, &T::Struct(&[f(T::I64, 0, ALL), f(T::I32, 0, ALL)])),
                            12,
                            ALL,
                        ), // snapshot_id: end_offset, epoch
                        f(T::Array(&[f(T::I64, 4, ALL), f(T::I64, 4, ALL)]), 4, ALL), // aborted_transactions: producer_id, first_offset
                        f(T::I32, 11, ALL),  // preferred_read_replica
                        f(T::Bytes, 0, ALL), // records
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ), // responses
        f(
            T::Tagged(
                0,
                &T::Array(&[
                    f(T::I32, 16, ALL), // node_id
                    f(T::Str, 16, ALL), // host
                    f(T::I32, 16, ALL), // port
                    f(T::Str, 16, ALL), // rack
                ]),
            ),
            16,
            ALL,
        ), // node_endpoints
    ],
    flexible_from: 12,
};

const API_VERSIONS: Schema = Schema {
    fields: &[
        f(T::I16, 0, ALL), // error_code
        f(
            T::Array(&[f(T::I16, 0, ALL), f(T::I16, 0, ALL), f(T::I16, 0, ALL)]),
            0,
            ALL,
        ), // api_keys
        f(T::I32, 1, ALL), // throttle_time_ms
        f(
            T::Tagged(
                0,
                &T::Array(&[f(T::Str, 3, ALL), f(T::I16, 3, ALL), f(T::I16, 3, ALL)]),
            ),
            3,
            ALL,
        ), // supported_features
        f(
            T::Tagged(
                2,
                &T::Array(&[f(T::Str, 3, ALL), f(T::I16, 3, ALL), f(T::I16, 3, ALL)]),
            ),
            3,
            ALL,
        ), // finalized_features
    ],
    flexible_from: 3,
};

/// The response schema of a controller-listener API.
/// CreateTopics v2-7 (KIP-590 forwarding). `topic_config_error_code` (tag 0, v5+) is a
/// scalar and is skipped by its size.
const CREATE_TOPICS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(
            T::Array(&[
                f(T::Str, 0, ALL),  // name
                f(T::Uuid, 7, ALL), // topic_id
                f(T::I16, 0, ALL),  // error_code
                f(T::Str, 1, ALL),  // error_message
                f(T::I32, 5, ALL),  // num_partitions
                f(T::I16, 5, ALL),  // replication_factor
                f(
                    T::Array(&[
                        f(T::Str, 5, ALL), // name
                        f(T::Str, 5, ALL), // value
                        f(T::I8, 5, ALL),  // read_only
                        f(T::I8, 5, ALL),  // config_source
                        f(T::I8, 5, ALL),  // is_sensitive
                    ]),
                    5,
                    ALL,
                ), // configs (nullable)
            ]),
            0,
            ALL,
        ), // topics
    ],
    flexible_from: 5,
};

/// DeleteTopics v1-6 (KIP-590 forwarding).
const DELETE_TOPICS: Schema = Schema {
    fields: &[
        f(T::I32, 1, ALL), // throttle_time_ms
        f(
            T::Array(&[
                f(T::Str, 0, ALL),  // name (nullable from v6)
                f(T::Uuid, 6, ALL), // topic_id
                f(T::I16, 0, ALL),  // error_code
                f(T::Str, 5, ALL),  // error_message
            ]),
            0,
            ALL,
        ), // responses
    ],
    flexible_from: 4,
};

/// CreatePartitions v0-3 (KIP-590 forwarding).
const CREATE_PARTITIONS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(T::I16, 0, ALL), // error_code
                f(T::Str, 0, ALL), // error_message
            ]),
            0,
            ALL,
        ), // results
    ],
    flexible_from: 2,
};

/// ElectLeaders v0-2 (KIP-460; forwarded as KIP-590 does).
const ELECT_LEADERS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(T::I16, 1, ALL), // error_code
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // topic
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL), // partition_id
                        f(T::I16, 0, ALL), // error_code
                        f(T::Str, 0, ALL), // error_message
                    ]),
                    0,
                    ALL,
                ), // partition_result
            ]),
            0,
            ALL,
        ), // replica_election_results
    ],
    flexible_from: 2,
};

/// AlterPartitionReassignments v0-1 (KIP-455; forwarded as KIP-590 does).
const ALTER_PARTITION_REASSIGNMENTS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(T::I8, 1, ALL),  // allow_replication_factor_change
        f(T::I16, 0, ALL), // error_code
        f(T::Str, 0, ALL), // error_message
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL), // partition_index
                        f(T::I16, 0, ALL), // error_code
                        f(T::Str, 0, ALL), // error_message
                    ]),
                    0,
                    ALL,
                ), // partitions
            ]),
            0,
            ALL,
        ), // responses
    ],
    flexible_from: 0,
};

/// ListPartitionReassignments v0 (KIP-455; forwarded to the controller).
const LIST_PARTITION_REASSIGNMENTS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(T::I16, 0, ALL), // error_code
        f(T::Str, 0, ALL), // error_message
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),      // partition_index
                        f(T::ArrayI32, 0, ALL), // replicas
                        f(T::ArrayI32, 0, ALL), // adding_replicas
                        f(T::ArrayI32, 0, ALL), // removing_replicas
                    ]),
                    0,
                    ALL,
                ), // partitions
            ]),
            0,
            ALL,
        ), // topics
    ],
    flexible_from: 0,
};

/// AlterConfigs and IncrementalAlterConfigs responses share one shape; only the first
/// flexible version differs.
const ALTER_CONFIGS_RESULTS: [F; 2] = [
    f(T::I32, 0, ALL), // throttle_time_ms
    f(
        T::Array(&[
            f(T::I16, 0, ALL), // error_code
            f(T::Str, 0, ALL), // error_message
            f(T::I8, 0, ALL),  // resource_type
            f(T::Str, 0, ALL), // resource_name
        ]),
        0,
        ALL,
    ), // responses
];

/// AlterConfigs v0-2 (KIP-590 forwarding).
const ALTER_CONFIGS: Schema = Schema {
    fields: &ALTER_CONFIGS_RESULTS,
    flexible_from: 2,
};

/// IncrementalAlterConfigs v0-1 (KIP-590 forwarding).
const INCREMENTAL_ALTER_CONFIGS: Schema = Schema {
    fields: &ALTER_CONFIGS_RESULTS,
    flexible_from: 1,
};

/// AlterClientQuotas v0-1 (KIP-590 forwarding).
const ALTER_CLIENT_QUOTAS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(
            T::Array(&[
                f(T::I16, 0, ALL),                                            // error_code
                f(T::Str, 0, ALL),                                            // error_message
                f(T::Array(&[f(T::Str, 0, ALL), f(T::Str, 0, ALL)]), 0, ALL), // entity: type, name
            ]),
            0,
            ALL,
        ), // entries
    ],
    flexible_from: 1,
};

/// AlterUserScramCredentials v0 (KIP-590 forwarding).
const ALTER_USER_SCRAM_CREDENTIALS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // user
                f(T::I16, 0, ALL), // error_code
                f(T::Str, 0, ALL), // error_message
            ]),
            0,
            ALL,
        ), // results
    ],
    flexible_from: 0,
};

/// CreateAcls v1-3 (KIP-590 forwarding).
const CREATE_ACLS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(
            T::Array(&[
                f(T::I16, 0, ALL), // error_code
                f(T::Str, 0, ALL), // error_message
            ]),
            0,
            ALL,
        ), // results
    ],
    flexible_from: 2,
};

/// DeleteAcls v1-3 (KIP-590 forwarding).
const DELETE_ACLS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // throttle_time_ms
        f(
            T::Array(&[
                f(T::I16, 0, ALL), // error_code
                f(T::Str, 0, ALL), // error_message
                f(
                    T::Array(&[
                        f(T::I16, 0, ALL), // error_code
                        f(T::Str, 0, ALL), // error_message
                        f(T::I8, 0, ALL),  // resource_type
                        f(T::Str, 0, ALL), // resource_name
                        f(T::I8, 1, ALL),  // pattern_type
                        f(T::Str, 0, ALL), // principal
                        f(T::Str, 0, ALL), // host
                        f(T::I8, 0, ALL),  // operation
                        f(T::I8, 0, ALL),  // permission_type
                    ]),
                    0,
                    ALL,
                ), // matching_acls
            ]),
            0,
            ALL,
        ), // filter_results
    ],
    flexible_from: 2,
};

/// SaslHandshake v0-1: error_code, mechanisms.
const SASL_HANDSHAKE: Schema = Schema {
    fields: &[f(T::I16, 0, ALL), f(T::ArrayStr, 0, ALL)],
    flexible_from: 2,
};

/// SaslAuthenticate v0-2: error_code, error_message, auth_bytes, session_lifetime_ms (v1+).
const SASL_AUTHENTICATE: Schema = Schema {
    fields: &[
        f(T::I16, 0, ALL),
        f(T::Str, 0, ALL),
        f(T::Bytes, 0, ALL),
        f(T::I64, 1, ALL),
    ],
    flexible_from: 2,
};

pub(super) fn response_schema(key: ApiKey) -> Option<&'static Schema> {
    Some(match key {
        ApiKey::Fetch => &FETCH,
        ApiKey::ApiVersions => &API_VERSIONS,
        ApiKey::SaslHandshake => &SASL_HANDSHAKE,
        ApiKey::SaslAuthenticate => &SASL_AUTHENTICATE,
        ApiKey::Vote => &VOTE,
        ApiKey::BeginQuorumEpoch => &BEGIN_QUORUM_EPOCH,
        ApiKey::EndQuorumEpoch => &END_QUORUM_EPOCH,
        ApiKey::DescribeQuorum => &DESCRIBE_QUORUM,
        ApiKey::AlterPartition => &ALTER_PARTITION,
        ApiKey::FetchSnapshot => &FETCH_SNAPSHOT,
        ApiKey::BrokerRegistration => &BROKER_REGISTRATION,
        ApiKey::BrokerHeartbeat => &BROKER_HEARTBEAT,
        ApiKey::AllocateProducerIds => &ALLOCATE_PRODUCER_IDS,
        ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter => &RAFT_VOTER_CHANGE,
        ApiKey::UpdateRaftVoter => &UPDATE_RAFT_VOTER,
        ApiKey::CreateTopics => &CREATE_TOPICS,
        ApiKey::DeleteTopics => &DELETE_TOPICS,
        ApiKey::CreatePartitions => &CREATE_PARTITIONS,
        ApiKey::ElectLeaders => &ELECT_LEADERS,
        ApiKey::AlterConfigs => &ALTER_CONFIGS,
        ApiKey::IncrementalAlterConfigs => &INCREMENTAL_ALTER_CONFIGS,
        ApiKey::CreateAcls => &CREATE_ACLS,
        ApiKey::DeleteAcls => &DELETE_ACLS,
        ApiKey::AlterPartitionReassignments => &ALTER_PARTITION_REASSIGNMENTS,
        ApiKey::ListPartitionReassignments => &LIST_PARTITION_REASSIGNMENTS,
        ApiKey::AlterClientQuotas => &ALTER_CLIENT_QUOTAS,
        ApiKey::AlterUserScramCredentials => &ALTER_USER_SCRAM_CREDENTIALS,
        _ => return None,
    })
}
