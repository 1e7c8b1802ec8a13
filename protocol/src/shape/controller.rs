//! Request schemas of the controller listener's APIs (`versions::CONTROLLER_APIS`): KIP-595
//! Raft, KIP-853 voter changes, KIP-631 broker registration and heartbeats, KIP-497
//! AlterPartition, KIP-730 AllocateProducerIds. Fetch and ApiVersions share the client APIs' schemas.

use super::{ALL, F, Schema, T, f};

/// `Listener` / `LeaderEndpoints`: name, host, port (uint16).
pub(super) const ENDPOINT_V: [F; 3] = [f(T::Str, 0, ALL), f(T::Str, 0, ALL), f(T::I16, 0, ALL)];

pub(super) const VOTE: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL), // cluster_id
        f(T::I32, 1, ALL), // voter_id
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // topic_name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),  // partition_index
                        f(T::I32, 0, ALL),  // replica_epoch
                        f(T::I32, 0, ALL),  // replica_id
                        f(T::Uuid, 1, ALL), // replica_directory_id
                        f(T::Uuid, 1, ALL), // voter_directory_id
                        f(T::I32, 0, ALL),  // last_offset_epoch
                        f(T::I64, 0, ALL),  // last_offset
                        f(T::I8, 2, ALL),   // pre_vote
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

pub(super) const BEGIN_QUORUM_EPOCH: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL), // cluster_id
        f(T::I32, 1, ALL), // voter_id
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // topic_name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),  // partition_index
                        f(T::Uuid, 1, ALL), // voter_directory_id
                        f(T::I32, 0, ALL),  // leader_id
                        f(T::I32, 0, ALL),  // leader_epoch
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ), // topics
        f(T::Array(&ENDPOINT_V), 1, ALL), // leader_endpoints
    ],
    flexible_from: 1,
};

pub(super) const END_QUORUM_EPOCH: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL), // cluster_id
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // topic_name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),                                             // partition_index
                        f(T::I32, 0, ALL),                                             // leader_id
                        f(T::I32, 0, ALL),    // leader_epoch
                        f(T::ArrayI32, 0, 0), // preferred_successors
                        f(T::Array(&[f(T::I32, 1, ALL), f(T::Uuid, 1, ALL)]), 1, ALL), // preferred_candidates: candidate_id, candidate_directory_id
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ), // topics
        f(T::Array(&ENDPOINT_V), 1, ALL), // leader_endpoints
    ],
    flexible_from: 1,
};

pub(super) const DESCRIBE_QUORUM: Schema = Schema {
    fields: &[f(
        T::Array(&[
            f(T::Str, 0, ALL),                         // topic_name
            f(T::Array(&[f(T::I32, 0, ALL)]), 0, ALL), // partitions: partition_index
        ]),
        0,
        ALL,
    )],
    flexible_from: 0,
};

pub(super) const ALTER_PARTITION: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // broker_id
        f(T::I64, 0, ALL), // broker_epoch
        f(
            T::Array(&[
                f(T::Uuid, 2, ALL), // topic_id
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),                                            // partition_index
                        f(T::I32, 0, ALL),    // leader_epoch
                        f(T::ArrayI32, 0, 2), // new_isr
                        f(T::Array(&[f(T::I32, 3, ALL), f(T::I64, 3, ALL)]), 3, ALL), // new_isr_with_epochs: broker_id, broker_epoch
                        f(T::I8, 0, ALL),  // leader_recovery_state
                        f(T::I32, 0, ALL), // partition_epoch
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

pub(super) const FETCH_SNAPSHOT: Schema = Schema {
    fields: &[
        f(T::Tagged(0, &T::Str), 0, ALL), // cluster_id
        f(T::I32, 0, ALL),                // replica_id
        f(T::I32, 0, ALL),                // max_bytes
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),                                             // partition
                        f(T::I32, 0, ALL), // current_leader_epoch
                        f(T::Struct(&[f(T::I64, 0, ALL), f(T::I32, 0, ALL)]), 0, ALL), // snapshot_id
                        f(T::I64, 0, ALL),                                             // position
                        f(T::Tagged(0, &T::Uuid), 1, ALL), // replica_directory_id
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

pub(super) const BROKER_REGISTRATION: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL),  // broker_id
        f(T::Str, 0, ALL),  // cluster_id
        f(T::Uuid, 0, ALL), // incarnation_id
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(T::Str, 0, ALL), // host
                f(T::I16, 0, ALL), // port
                f(T::I16, 0, ALL), // security_protocol
            ]),
            0,
            ALL,
        ), // listeners
        f(
            T::Array(&[f(T::Str, 0, ALL), f(T::I16, 0, ALL), f(T::I16, 0, ALL)]),
            0,
            ALL,
        ), // features: name, min_supported_version, max_supported_version
        f(T::Str, 0, ALL),  // rack
        f(T::I8, 1, ALL),   // is_migrating_zk_broker
        f(T::ArrayUuid, 2, ALL), // log_dirs
        f(T::I64, 3, ALL),  // previous_broker_epoch
    ],
    flexible_from: 0,
};

pub(super) const BROKER_HEARTBEAT: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL),                      // broker_id
        f(T::I64, 0, ALL),                      // broker_epoch
        f(T::I64, 0, ALL),                      // current_metadata_offset
        f(T::I8, 0, ALL),                       // want_fence
        f(T::I8, 0, ALL),                       // want_shut_down
        f(T::Tagged(0, &T::ArrayUuid), 1, ALL), // offline_log_dirs
    ],
    flexible_from: 0,
};

pub(super) const ALLOCATE_PRODUCER_IDS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // broker_id
        f(T::I64, 0, ALL), // broker_epoch
    ],
    flexible_from: 0,
};

pub(super) const ADD_RAFT_VOTER: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),                // cluster_id
        f(T::I32, 0, ALL),                // timeout_ms
        f(T::I32, 0, ALL),                // voter_id
        f(T::Uuid, 0, ALL),               // voter_directory_id
        f(T::Array(&ENDPOINT_V), 0, ALL), // listeners
    ],
    flexible_from: 0,
};

pub(super) const REMOVE_RAFT_VOTER: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),  // cluster_id
        f(T::I32, 0, ALL),  // voter_id
        f(T::Uuid, 0, ALL), // voter_directory_id
    ],
    flexible_from: 0,
};

pub(super) const UPDATE_RAFT_VOTER: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),                                             // cluster_id
        f(T::I32, 0, ALL),                                             // current_leader_epoch
        f(T::I32, 0, ALL),                                             // voter_id
        f(T::Uuid, 0, ALL),                                            // voter_directory_id
        f(T::Array(&ENDPOINT_V), 0, ALL),                              // listeners
        f(T::Struct(&[f(T::I16, 0, ALL), f(T::I16, 0, ALL)]), 0, ALL), // k_raft_version_feature
    ],
    flexible_from: 0,
};
