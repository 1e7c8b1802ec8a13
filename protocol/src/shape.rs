//! A structural check of request bodies before `kafka-protocol` decodes them.
//!
//! Why this exists: the codec preallocates every array with the element count read from the
//! wire (`Vec::with_capacity(n)`), before it reads a single element. A 20-byte Fetch request
//! claiming 2^31 topics asks for ~150 GB and aborts the process. This walker reads the same
//! fields the codec will read, from a compact description of each supported request's
//! schema, and refuses the frame unless every array, string and byte field is really present.
//! After it passes, the codec's allocations are proportional to bytes actually received.
//!
//! The schemas below describe only the requests in [`crate::versions::SUPPORTED_APIS`] and
//! [`crate::versions::CONTROLLER_APIS`], at exactly their supported versions; a unit test
//! fails if an API is added to either table without one.
//!
//! Tagged fields: the codec reads a tagged field it knows straight from the body, at its
//! type, whatever size the tag claims, and skips an unknown one by its size. The walker
//! does the same: a field listed as `T::Tagged` in a struct's schema is walked at its
//! type, any other tag is skipped by its (checked) size. Only tagged fields that hold an
//! array, or that sit inside an array (where a size that lies would put the walker and the
//! codec out of step for the elements after it), need listing; the client APIs' known
//! tagged fields are top-level scalars and strings, so they are skipped by size.

use kafka_protocol::messages::ApiKey;
use thiserror::Error;

/// Why a body failed the check.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ShapeError {
    /// A field runs past the end of the frame.
    #[error("field at byte {at} runs past the end of the frame")]
    Truncated { at: usize },
    /// A length or count is negative (other than the null marker) or malformed.
    #[error("invalid length {len} at byte {at}")]
    InvalidLength { at: usize, len: i64 },
    /// No schema is recorded for this API (a bug: the version table and this file disagree).
    #[error("no schema for {api_key:?}")]
    NoSchema { api_key: ApiKey },
}

/// A field type on the wire.
#[derive(Clone, Copy)]
enum T {
    I8,
    I16,
    I32,
    I64,
    Uuid,
    /// A string (nullable or not: the null marker is accepted either way; the codec decides).
    Str,
    /// A byte blob (nullable).
    Bytes,
    /// An array of structs.
    Array(&'static [F]),
    /// An array of int32.
    ArrayI32,
    /// An array of int64.
    ArrayI64,
    /// An array of strings.
    ArrayStr,
    /// An array of UUIDs.
    ArrayUuid,
    /// A struct embedded in its parent (not an array), with its own tagged fields when
    /// flexible.
    Struct(&'static [F]),
    /// A nullable struct: an int8 presence marker (1 present, anything else null, as the
    /// codec reads it), then the struct when present.
    OptStruct(&'static [F]),
    /// A known tagged field: its tag and type. Not part of the struct's fixed fields; it is
    /// walked where the tagged-field section names it.
    Tagged(u32, &'static T),
}

/// A field present from version `min` through `max`.
#[derive(Clone, Copy)]
struct F {
    t: T,
    min: i16,
    max: i16,
}

const fn f(t: T, min: i16, max: i16) -> F {
    F { t, min, max }
}
const ALL: i16 = i16::MAX;

/// A request schema: its fields, and the first flexible (compact, tagged) version.
struct Schema {
    fields: &'static [F],
    flexible_from: i16,
}

const PRODUCE: Schema = Schema {
    fields: &[
        f(T::Str, 3, ALL), // transactional_id
        f(T::I16, 0, ALL), // acks
        f(T::I32, 0, ALL), // timeout_ms
        f(
            T::Array(&[
                f(T::Str, 0, 12),                                               // name
                f(T::Uuid, 13, ALL),                                            // topic_id
                f(T::Array(&[f(T::I32, 0, ALL), f(T::Bytes, 0, ALL)]), 0, ALL), // index, records
            ]),
            0,
            ALL,
        ),
    ],
    flexible_from: 9,
};

const FETCH: Schema = Schema {
    fields: &[
        f(T::I32, 0, 14),  // replica_id
        f(T::I32, 0, ALL), // max_wait_ms
        f(T::I32, 0, ALL), // min_bytes
        f(T::I32, 3, ALL), // max_bytes
        f(T::I8, 4, ALL),  // isolation_level
        f(T::I32, 7, ALL), // session_id
        f(T::I32, 7, ALL), // session_epoch
        f(
            T::Array(&[
                f(T::Str, 0, 12),
                f(T::Uuid, 13, ALL),
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),  // partition
                        f(T::I32, 9, ALL),  // current_leader_epoch
                        f(T::I64, 0, ALL),  // fetch_offset
                        f(T::I32, 12, ALL), // last_fetched_epoch
                        f(T::I64, 5, ALL),  // log_start_offset
                        f(T::I32, 0, ALL),  // partition_max_bytes
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ),
        f(
            T::Array(&[
                f(T::Str, 7, 12),
                f(T::Uuid, 13, ALL),
                f(T::ArrayI32, 7, ALL),
            ]),
            7,
            ALL,
        ), // forgotten
        f(T::Str, 11, ALL), // rack_id
    ],
    flexible_from: 12,
};

const LIST_OFFSETS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // replica_id
        f(T::I8, 2, ALL),  // isolation_level
        f(
            T::Array(&[
                f(T::Str, 0, ALL),
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL), // partition_index
                        f(T::I32, 4, ALL), // current_leader_epoch
                        f(T::I64, 0, ALL), // timestamp
                        f(T::I32, 0, 0),   // max_num_offsets
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ),
        f(T::I32, 10, ALL), // timeout_ms
    ],
    flexible_from: 6,
};

const METADATA: Schema = Schema {
    fields: &[
        f(T::Array(&[f(T::Uuid, 10, ALL), f(T::Str, 0, ALL)]), 0, ALL), // topics
        f(T::I8, 4, ALL),                                               // allow_auto_topic_creation
        f(T::I8, 8, 10),  // include_cluster_authorized_operations
        f(T::I8, 8, ALL), // include_topic_authorized_operations
    ],
    flexible_from: 9,
};

const FIND_COORDINATOR: Schema = Schema {
    fields: &[
        f(T::Str, 0, 3),        // key
        f(T::I8, 1, ALL),       // key_type
        f(T::ArrayStr, 4, ALL), // coordinator_keys
    ],
    flexible_from: 3,
};

const API_VERSIONS: Schema = Schema {
    fields: &[f(T::Str, 3, ALL), f(T::Str, 3, ALL)],
    flexible_from: 3,
};

/// SaslHandshake v0-1: the mechanism.
const SASL_HANDSHAKE: Schema = Schema {
    fields: &[f(T::Str, 0, ALL)],
    flexible_from: 2,
};

/// SaslAuthenticate v0-2: the mechanism's token (flexible from v2).
const SASL_AUTHENTICATE: Schema = Schema {
    fields: &[f(T::Bytes, 0, ALL)],
    flexible_from: 2,
};

const CREATE_TOPICS: Schema = Schema {
    fields: &[
        f(
            T::Array(&[
                f(T::Str, 0, ALL),
                f(T::I32, 0, ALL),
                f(T::I16, 0, ALL),
                f(
                    T::Array(&[f(T::I32, 0, ALL), f(T::ArrayI32, 0, ALL)]),
                    0,
                    ALL,
                ),
                f(T::Array(&[f(T::Str, 0, ALL), f(T::Str, 0, ALL)]), 0, ALL),
            ]),
            0,
            ALL,
        ),
        f(T::I32, 0, ALL), // timeout_ms
        f(T::I8, 1, ALL),  // validate_only
    ],
    flexible_from: 5,
};

const DELETE_TOPICS: Schema = Schema {
    fields: &[
        f(T::Array(&[f(T::Str, 6, ALL), f(T::Uuid, 6, ALL)]), 6, ALL), // topics
        f(T::ArrayStr, 0, 5),                                          // topic_names
        f(T::I32, 0, ALL),                                             // timeout_ms
    ],
    flexible_from: 4,
};

const DELETE_RECORDS: Schema = Schema {
    fields: &[
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(
                    T::Array(&[f(T::I32, 0, ALL), f(T::I64, 0, ALL)]), // partition_index, offset
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ), // topics
        f(T::I32, 0, ALL), // timeout_ms
    ],
    flexible_from: 2,
};

const CREATE_PARTITIONS: Schema = Schema {
    fields: &[
        f(
            T::Array(&[
                f(T::Str, 0, ALL),                              // name
                f(T::I32, 0, ALL),                              // count
                f(T::Array(&[f(T::ArrayI32, 0, ALL)]), 0, ALL), // assignments (nullable)
            ]),
            0,
            ALL,
        ),
        f(T::I32, 0, ALL), // timeout_ms
        f(T::I8, 0, ALL),  // validate_only
    ],
    flexible_from: 2,
};

const ELECT_LEADERS: Schema = Schema {
    fields: &[
        f(T::I8, 1, ALL), // election_type
        f(
            T::Array(&[
                f(T::Str, 0, ALL),      // topic
                f(T::ArrayI32, 0, ALL), // partitions
            ]),
            0,
            ALL,
        ), // topic_partitions (nullable: every partition)
        f(T::I32, 0, ALL), // timeout_ms
    ],
    flexible_from: 2,
};

/// AlterPartitionReassignments v0-1 (KIP-455; v1 adds KIP-860's flag).
const ALTER_PARTITION_REASSIGNMENTS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // timeout_ms
        f(T::I8, 1, ALL),  // allow_replication_factor_change
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),      // partition_index
                        f(T::ArrayI32, 0, ALL), // replicas (nullable: cancel)
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

/// ListPartitionReassignments v0 (KIP-455).
const LIST_PARTITION_REASSIGNMENTS: Schema = Schema {
    fields: &[
        f(T::I32, 0, ALL), // timeout_ms
        f(
            T::Array(&[
                f(T::Str, 0, ALL),      // name
                f(T::ArrayI32, 0, ALL), // partition_indexes
            ]),
            0,
            ALL,
        ), // topics (nullable: every reassignment)
    ],
    flexible_from: 0,
};

const DESCRIBE_CONFIGS: Schema = Schema {
    fields: &[
        f(
            T::Array(&[f(T::I8, 0, ALL), f(T::Str, 0, ALL), f(T::ArrayStr, 0, ALL)]),
            0,
            ALL,
        ),
        f(T::I8, 1, ALL), // include_synonyms
        f(T::I8, 3, ALL), // include_documentation
    ],
    flexible_from: 4,
};

const INCREMENTAL_ALTER_CONFIGS: Schema = Schema {
    fields: &[
        f(
            T::Array(&[
                f(T::I8, 0, ALL),  // resource_type
                f(T::Str, 0, ALL), // resource_name
                f(
                    T::Array(&[f(T::Str, 0, ALL), f(T::I8, 0, ALL), f(T::Str, 0, ALL)]),
                    0,
                    ALL,
                ), // configs: name, config_operation, value
            ]),
            0,
            ALL,
        ),
        f(T::I8, 0, ALL), // validate_only
    ],
    flexible_from: 1,
};

const OFFSET_FOR_LEADER_EPOCH: Schema = Schema {
    fields: &[
        f(T::I32, 3, ALL), // replica_id
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // topic
                f(
                    // partition, current_leader_epoch, leader_epoch
                    T::Array(&[f(T::I32, 0, ALL), f(T::I32, 0, ALL), f(T::I32, 0, ALL)]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ),
    ],
    flexible_from: 4,
};

/// DescribeClientQuotas v0-1 (KIP-546).
const DESCRIBE_CLIENT_QUOTAS: Schema = Schema {
    fields: &[
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // entity_type
                f(T::I8, 0, ALL),  // match_type
                f(T::Str, 0, ALL), // match (nullable)
            ]),
            0,
            ALL,
        ), // components
        f(T::I8, 0, ALL), // strict
    ],
    flexible_from: 1,
};

/// DescribeUserScramCredentials v0 (KIP-554): a nullable array of user names.
const DESCRIBE_USER_SCRAM_CREDENTIALS: Schema = Schema {
    fields: &[f(T::Array(&[f(T::Str, 0, ALL)]), 0, ALL)], // users: name
    flexible_from: 0,
};

/// AlterUserScramCredentials v0 (KIP-554).
const ALTER_USER_SCRAM_CREDENTIALS: Schema = Schema {
    fields: &[
        f(T::Array(&[f(T::Str, 0, ALL), f(T::I8, 0, ALL)]), 0, ALL), // deletions: name, mechanism
        f(
            T::Array(&[
                f(T::Str, 0, ALL),   // name
                f(T::I8, 0, ALL),    // mechanism
                f(T::I32, 0, ALL),   // iterations
                f(T::Bytes, 0, ALL), // salt
                f(T::Bytes, 0, ALL), // salted_password
            ]),
            0,
            ALL,
        ), // upsertions
    ],
    flexible_from: 0,
};

/// AlterClientQuotas v0-1 (KIP-546). A float64 value takes the eight bytes of an int64.
const ALTER_CLIENT_QUOTAS: Schema = Schema {
    fields: &[
        f(
            T::Array(&[
                f(T::Array(&[f(T::Str, 0, ALL), f(T::Str, 0, ALL)]), 0, ALL), // entity: type, name
                f(
                    T::Array(&[f(T::Str, 0, ALL), f(T::I64, 0, ALL), f(T::I8, 0, ALL)]),
                    0,
                    ALL,
                ), // ops: key, value, remove
            ]),
            0,
            ALL,
        ), // entries
        f(T::I8, 0, ALL), // validate_only
    ],
    flexible_from: 1,
};

const ALTER_CONFIGS: Schema = Schema {
    fields: &[
        f(
            T::Array(&[
                f(T::I8, 0, ALL),                                             // resource_type
                f(T::Str, 0, ALL),                                            // resource_name
                f(T::Array(&[f(T::Str, 0, ALL), f(T::Str, 0, ALL)]), 0, ALL), // configs: name, value
            ]),
            0,
            ALL,
        ),
        f(T::I8, 0, ALL), // validate_only
    ],
    flexible_from: 2,
};

const DESCRIBE_LOG_DIRS: Schema = Schema {
    fields: &[f(
        T::Array(&[f(T::Str, 0, ALL), f(T::ArrayI32, 0, ALL)]), // topics (nullable): topic, partitions
        0,
        ALL,
    )],
    flexible_from: 2,
};

const DESCRIBE_CLUSTER: Schema = Schema {
    fields: &[
        f(T::I8, 0, ALL), // include_cluster_authorized_operations
        f(T::I8, 1, ALL), // endpoint_type
        f(T::I8, 2, ALL), // include_fenced_brokers
    ],
    flexible_from: 0,
};

// Classic consumer-group APIs (JoinGroup..DeleteGroups). Protocol metadata and assignments
// are opaque byte blobs here; the coordinator never decodes them on the request path.

const JOIN_GROUP: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),                                              // group_id
        f(T::I32, 0, ALL),                                              // session_timeout_ms
        f(T::I32, 1, ALL),                                              // rebalance_timeout_ms
        f(T::Str, 0, ALL),                                              // member_id
        f(T::Str, 5, ALL),                                              // group_instance_id
        f(T::Str, 0, ALL),                                              // protocol_type
        f(T::Array(&[f(T::Str, 0, ALL), f(T::Bytes, 0, ALL)]), 0, ALL), // protocols
        f(T::Str, 8, ALL),                                              // reason
    ],
    flexible_from: 6,
};

const HEARTBEAT: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL), // group_id
        f(T::I32, 0, ALL), // generation_id
        f(T::Str, 0, ALL), // member_id
        f(T::Str, 3, ALL), // group_instance_id
    ],
    flexible_from: 4,
};

const LEAVE_GROUP: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL), // group_id
        f(T::Str, 0, 2),   // member_id
        f(
            T::Array(&[f(T::Str, 3, ALL), f(T::Str, 3, ALL), f(T::Str, 5, ALL)]),
            3,
            ALL,
        ), // members: member_id, group_instance_id, reason
    ],
    flexible_from: 4,
};

const SYNC_GROUP: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),                                              // group_id
        f(T::I32, 0, ALL),                                              // generation_id
        f(T::Str, 0, ALL),                                              // member_id
        f(T::Str, 3, ALL),                                              // group_instance_id
        f(T::Str, 5, ALL),                                              // protocol_type
        f(T::Str, 5, ALL),                                              // protocol_name
        f(T::Array(&[f(T::Str, 0, ALL), f(T::Bytes, 0, ALL)]), 0, ALL), // assignments
    ],
    flexible_from: 4,
};

const DESCRIBE_GROUPS: Schema = Schema {
    fields: &[
        f(T::ArrayStr, 0, ALL), // groups
        f(T::I8, 3, ALL),       // include_authorized_operations
    ],
    flexible_from: 5,
};

const LIST_GROUPS: Schema = Schema {
    fields: &[
        f(T::ArrayStr, 4, ALL), // states_filter
        f(T::ArrayStr, 5, ALL), // types_filter
    ],
    flexible_from: 3,
};

const DELETE_GROUPS: Schema = Schema {
    fields: &[f(T::ArrayStr, 0, ALL)], // groups_names
    flexible_from: 2,
};

const OFFSET_COMMIT: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL), // group_id
        f(T::I32, 1, ALL), // generation_id_or_member_epoch
        f(T::Str, 1, ALL), // member_id
        f(T::Str, 7, ALL), // group_instance_id
        f(T::I64, 2, 4),   // retention_time_ms
        f(
            T::Array(&[
                f(T::Str, 0, ALL), // name
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL), // partition_index
                        f(T::I64, 0, ALL), // committed_offset
                        f(T::I64, 1, 1),   // commit_timestamp
                        f(T::I32, 6, ALL), // committed_leader_epoch
                        f(T::Str, 0, ALL), // committed_metadata
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ),
    ],
    flexible_from: 8,
};

const OFFSET_FETCH: Schema = Schema {
    fields: &[
        f(T::Str, 0, 7),                                             // group_id
        f(T::Array(&[f(T::Str, 0, 7), f(T::ArrayI32, 0, 7)]), 0, 7), // topics
        f(
            T::Array(&[
                f(T::Str, 8, ALL), // group_id
                f(T::Str, 9, ALL), // member_id
                f(T::I32, 9, ALL), // member_epoch
                f(
                    T::Array(&[f(T::Str, 8, ALL), f(T::ArrayI32, 8, ALL)]),
                    8,
                    ALL,
                ), // topics
            ]),
            8,
            ALL,
        ), // groups
        f(T::I8, 7, ALL),                                            // require_stable
    ],
    flexible_from: 6,
};

const OFFSET_DELETE: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL), // group_id
        f(
            T::Array(&[f(T::Str, 0, ALL), f(T::Array(&[f(T::I32, 0, ALL)]), 0, ALL)]),
            0,
            ALL,
        ),
    ],
    flexible_from: ALL,
};

const INIT_PRODUCER_ID: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL), // transactional_id
        f(T::I32, 0, ALL), // transaction_timeout_ms
        f(T::I64, 3, ALL), // producer_id
        f(T::I16, 3, ALL), // producer_epoch
    ],
    flexible_from: 2,
};

const DESCRIBE_PRODUCERS: Schema = Schema {
    fields: &[f(
        T::Array(&[f(T::Str, 0, ALL), f(T::ArrayI32, 0, ALL)]), // name, partition_indexes
        0,
        ALL,
    )],
    flexible_from: 0,
};

const CONSUMER_GROUP_HEARTBEAT: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),      // group_id
        f(T::Str, 0, ALL),      // member_id
        f(T::I32, 0, ALL),      // member_epoch
        f(T::Str, 0, ALL),      // instance_id
        f(T::Str, 0, ALL),      // rack_id
        f(T::I32, 0, ALL),      // rebalance_timeout_ms
        f(T::ArrayStr, 0, ALL), // subscribed_topic_names
        f(T::Str, 1, ALL),      // subscribed_topic_regex
        f(T::Str, 0, ALL),      // server_assignor
        f(
            T::Array(&[f(T::Uuid, 0, ALL), f(T::ArrayI32, 0, ALL)]), // topic_id, partitions
            0,
            ALL,
        ), // topic_partitions
    ],
    flexible_from: 0,
};

const CONSUMER_GROUP_DESCRIBE: Schema = Schema {
    fields: &[
        f(T::ArrayStr, 0, ALL), // group_ids
        f(T::I8, 0, ALL),       // include_authorized_operations
    ],
    flexible_from: 0,
};

/// WriteTxnMarkers v1 (KIP-98; v0 went in Kafka 4.0): producer_id, producer_epoch,
/// transaction_result, topics, coordinator_epoch.
const WRITE_TXN_MARKERS: Schema = Schema {
    fields: &[f(
        T::Array(&[
            f(T::I64, 0, ALL),
            f(T::I16, 0, ALL),
            f(T::I8, 0, ALL),
            f(
                T::Array(&[f(T::Str, 0, ALL), f(T::ArrayI32, 0, ALL)]),
                0,
                ALL,
            ),
            f(T::I32, 0, ALL),
        ]),
        0,
        ALL,
    )],
    flexible_from: 1,
};

/// AddPartitionsToTxn's topics: name, partitions.
const ADD_PARTITIONS_TOPIC: &[F] = &[f(T::Str, 0, ALL), f(T::ArrayI32, 0, ALL)];

/// AddPartitionsToTxn v0-5 (KIP-98; v4+ batched for brokers, KIP-890): v0-3 one
/// transaction (transactional_id, producer_id, producer_epoch, topics), v4+ an array of
/// them, each with verify_only.
const ADD_PARTITIONS_TO_TXN: Schema = Schema {
    fields: &[
        f(
            T::Array(&[
                f(T::Str, 0, ALL),                         // transactional_id
                f(T::I64, 0, ALL),                         // producer_id
                f(T::I16, 0, ALL),                         // producer_epoch
                f(T::I8, 0, ALL),                          // verify_only
                f(T::Array(ADD_PARTITIONS_TOPIC), 0, ALL), // topics
            ]),
            4,
            ALL,
        ),
        f(T::Str, 0, 3),
        f(T::I64, 0, 3),
        f(T::I16, 0, 3),
        f(T::Array(ADD_PARTITIONS_TOPIC), 0, 3),
    ],
    flexible_from: 3,
};

/// AddOffsetsToTxn v0-4: transactional_id, producer_id, producer_epoch, group_id.
const ADD_OFFSETS_TO_TXN: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),
        f(T::I64, 0, ALL),
        f(T::I16, 0, ALL),
        f(T::Str, 0, ALL),
    ],
    flexible_from: 3,
};

/// EndTxn v0-5: transactional_id, producer_id, producer_epoch, committed.
const END_TXN: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),
        f(T::I64, 0, ALL),
        f(T::I16, 0, ALL),
        f(T::I8, 0, ALL),
    ],
    flexible_from: 3,
};

/// TxnOffsetCommit v0-5: transactional_id, group_id, producer_id, producer_epoch, the
/// member's generation_id, member_id and group_instance_id (v3+), then topics of
/// partitions (index, offset, leader epoch from v2, metadata).
const TXN_OFFSET_COMMIT: Schema = Schema {
    fields: &[
        f(T::Str, 0, ALL),
        f(T::Str, 0, ALL),
        f(T::I64, 0, ALL),
        f(T::I16, 0, ALL),
        f(T::I32, 3, ALL),
        f(T::Str, 3, ALL),
        f(T::Str, 3, ALL),
        f(
            T::Array(&[
                f(T::Str, 0, ALL),
                f(
                    T::Array(&[
                        f(T::I32, 0, ALL),
                        f(T::I64, 0, ALL),
                        f(T::I32, 2, ALL),
                        f(T::Str, 0, ALL),
                    ]),
                    0,
                    ALL,
                ),
            ]),
            0,
            ALL,
        ),
    ],
    flexible_from: 3,
};

/// DescribeTransactions v0 (KIP-664): transactional_ids.
const DESCRIBE_TRANSACTIONS: Schema = Schema {
    fields: &[f(T::ArrayStr, 0, ALL)],
    flexible_from: 0,
};

/// ListTransactions v0-2 (KIP-664, KIP-994, KIP-1152).
const LIST_TRANSACTIONS: Schema = Schema {
    fields: &[
        f(T::ArrayStr, 0, ALL), // state_filters
        f(T::ArrayI64, 0, ALL), // producer_id_filters
        f(T::I64, 1, ALL),      // duration_filter
        f(T::Str, 2, ALL),      // transactional_id_pattern
    ],
    flexible_from: 0,
};

/// DescribeTopicPartitions v0 (KIP-966).
const DESCRIBE_TOPIC_PARTITIONS: Schema = Schema {
    fields: &[
        f(T::Array(&[f(T::Str, 0, ALL)]), 0, ALL), // topics: name
        f(T::I32, 0, ALL),                         // response_partition_limit
        f(
            T::OptStruct(&[f(T::Str, 0, ALL), f(T::I32, 0, ALL)]),
            0,
            ALL,
        ), // cursor
    ],
    flexible_from: 0,
};

/// The fields of an ACL binding or filter (CreateAcls' creations, DescribeAcls' and
/// DeleteAcls' filters): the same seven in the same order.
const ACL_FIELDS: [F; 7] = [
    f(T::I8, 0, ALL),  // resource_type
    f(T::Str, 0, ALL), // resource_name
    f(T::I8, 1, ALL),  // pattern_type
    f(T::Str, 0, ALL), // principal
    f(T::Str, 0, ALL), // host
    f(T::I8, 0, ALL),  // operation
    f(T::I8, 0, ALL),  // permission_type
];

const DESCRIBE_ACLS: Schema = Schema {
    fields: &ACL_FIELDS,
    flexible_from: 2,
};

const CREATE_ACLS: Schema = Schema {
    fields: &[f(T::Array(&ACL_FIELDS), 0, ALL)], // creations
    flexible_from: 2,
};

const DELETE_ACLS: Schema = Schema {
    fields: &[f(T::Array(&ACL_FIELDS), 0, ALL)], // filters
    flexible_from: 2,
};

mod controller;
mod responses;

use controller::*;

fn schema(key: ApiKey) -> Option<&'static Schema> {
    Some(match key {
        ApiKey::Produce => &PRODUCE,
        ApiKey::Fetch => &FETCH,
        ApiKey::ListOffsets => &LIST_OFFSETS,
        ApiKey::Metadata => &METADATA,
        ApiKey::OffsetCommit => &OFFSET_COMMIT,
        ApiKey::OffsetFetch => &OFFSET_FETCH,
        ApiKey::FindCoordinator => &FIND_COORDINATOR,
        ApiKey::JoinGroup => &JOIN_GROUP,
        ApiKey::Heartbeat => &HEARTBEAT,
        ApiKey::LeaveGroup => &LEAVE_GROUP,
        ApiKey::SyncGroup => &SYNC_GROUP,
        ApiKey::DescribeGroups => &DESCRIBE_GROUPS,
        ApiKey::ListGroups => &LIST_GROUPS,
        ApiKey::ApiVersions => &API_VERSIONS,
        ApiKey::SaslHandshake => &SASL_HANDSHAKE,
        ApiKey::SaslAuthenticate => &SASL_AUTHENTICATE,
        ApiKey::CreateTopics => &CREATE_TOPICS,
        ApiKey::DeleteTopics => &DELETE_TOPICS,
        ApiKey::DeleteRecords => &DELETE_RECORDS,
        ApiKey::DescribeConfigs => &DESCRIBE_CONFIGS,
        ApiKey::DescribeAcls => &DESCRIBE_ACLS,
        ApiKey::CreateAcls => &CREATE_ACLS,
        ApiKey::DeleteAcls => &DELETE_ACLS,
        ApiKey::OffsetForLeaderEpoch => &OFFSET_FOR_LEADER_EPOCH,
        ApiKey::AlterConfigs => &ALTER_CONFIGS,
        ApiKey::DescribeLogDirs => &DESCRIBE_LOG_DIRS,
        ApiKey::DescribeCluster => &DESCRIBE_CLUSTER,
        ApiKey::CreatePartitions => &CREATE_PARTITIONS,
        ApiKey::ElectLeaders => &ELECT_LEADERS,
        ApiKey::IncrementalAlterConfigs => &INCREMENTAL_ALTER_CONFIGS,
        ApiKey::AlterPartitionReassignments => &ALTER_PARTITION_REASSIGNMENTS,
        ApiKey::ListPartitionReassignments => &LIST_PARTITION_REASSIGNMENTS,
        ApiKey::DeleteGroups => &DELETE_GROUPS,
        ApiKey::OffsetDelete => &OFFSET_DELETE,
        ApiKey::InitProducerId => &INIT_PRODUCER_ID,
        ApiKey::DescribeProducers => &DESCRIBE_PRODUCERS,
        ApiKey::WriteTxnMarkers => &WRITE_TXN_MARKERS,
        ApiKey::DescribeTransactions => &DESCRIBE_TRANSACTIONS,
        ApiKey::AddPartitionsToTxn => &ADD_PARTITIONS_TO_TXN,
        ApiKey::AddOffsetsToTxn => &ADD_OFFSETS_TO_TXN,
        ApiKey::EndTxn => &END_TXN,
        ApiKey::TxnOffsetCommit => &TXN_OFFSET_COMMIT,
        ApiKey::ListTransactions => &LIST_TRANSACTIONS,
        ApiKey::DescribeClientQuotas => &DESCRIBE_CLIENT_QUOTAS,
        ApiKey::AlterClientQuotas => &ALTER_CLIENT_QUOTAS,
        ApiKey::DescribeUserScramCredentials => &DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey::AlterUserScramCredentials => &ALTER_USER_SCRAM_CREDENTIALS,
        ApiKey::ConsumerGroupHeartbeat => &CONSUMER_GROUP_HEARTBEAT,
        ApiKey::ConsumerGroupDescribe => &CONSUMER_GROUP_DESCRIBE,
        ApiKey::DescribeTopicPartitions => &DESCRIBE_TOPIC_PARTITIONS,
        ApiKey::Vote => &VOTE,
        ApiKey::BeginQuorumEpoch => &BEGIN_QUORUM_EPOCH,
        ApiKey::EndQuorumEpoch => &END_QUORUM_EPOCH,
        ApiKey::DescribeQuorum => &DESCRIBE_QUORUM,
        ApiKey::AlterPartition => &ALTER_PARTITION,
        ApiKey::FetchSnapshot => &FETCH_SNAPSHOT,
        ApiKey::BrokerRegistration => &BROKER_REGISTRATION,
        ApiKey::BrokerHeartbeat => &BROKER_HEARTBEAT,
        ApiKey::AllocateProducerIds => &ALLOCATE_PRODUCER_IDS,
        ApiKey::AddRaftVoter => &ADD_RAFT_VOTER,
        ApiKey::RemoveRaftVoter => &REMOVE_RAFT_VOTER,
        ApiKey::UpdateRaftVoter => &UPDATE_RAFT_VOTER,
        _ => return None,
    })
}

/// Checks that `body` (the request after its header) holds every field the codec will read
/// for `key` at `version`.
///
/// # Errors
///
/// [`ShapeError`] when a field is missing, a length lies, or no schema exists.
pub fn check(key: ApiKey, version: i16, body: &[u8]) -> Result<(), ShapeError> {
    let s = schema(key).ok_or(ShapeError::NoSchema { api_key: key })?;
    let mut w = Walker {
        buf: body,
        pos: 0,
        version,
        flexible: version >= s.flexible_from,
    };
    w.structure(s.fields)
}

/// Whether [`check_response`] has a schema for `key`'s responses.
#[must_use]
pub fn response_schema_known(key: ApiKey) -> bool {
    responses::response_schema(key).is_some()
}

/// Checks that `body` (a response after its header) holds every field the codec will read
/// for `key` at `version`. Only the controller listener's APIs have response schemas: they
/// are the responses a node reads from its peers.
///
/// # Errors
///
/// [`ShapeError`] when a field is missing, a length lies, or no schema exists.
pub fn check_response(key: ApiKey, version: i16, body: &[u8]) -> Result<(), ShapeError> {
    let s = responses::response_schema(key).ok_or(ShapeError::NoSchema { api_key: key })?;
    let mut w = Walker {
        buf: body,
        pos: 0,
        version,
        flexible: version >= s.flexible_from,
    };
    w.structure(s.fields)
}

struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
    version: i16,
    flexible: bool,
}

impl Walker<'_> {
    fn skip(&mut self, n: usize) -> Result<(), ShapeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or(ShapeError::Truncated { at: self.pos })?;
        self.pos = end;
        Ok(())
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], ShapeError> {
        let at = self.pos;
        self.skip(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[at..at + N]);
        Ok(out)
    }

    fn uvarint(&mut self) -> Result<u64, ShapeError> {
        let at = self.pos;
        let mut value = 0u64;
        for shift in (0..35).step_by(7) {
            let [b] = self.take::<1>()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ShapeError::InvalidLength { at, len: -1 })
    }

    /// A length prefix: `Some(n)` or `None` for null. Compact forms store n+1, 0 being null.
    fn length(&mut self, classic_i16: bool) -> Result<Option<usize>, ShapeError> {
        let at = self.pos;
        let n: i64 = if self.flexible {
            i64::try_from(self.uvarint()?).unwrap_or(i64::MAX) - 1
        } else if classic_i16 {
            i64::from(i16::from_be_bytes(self.take::<2>()?))
        } else {
            i64::from(i32::from_be_bytes(self.take::<4>()?))
        };
        match n {
            -1 => Ok(None),
            n if n >= 0 => Ok(Some(
                usize::try_from(n).map_err(|_| ShapeError::InvalidLength { at, len: n })?,
            )),
            n => Err(ShapeError::InvalidLength { at, len: n }),
        }
    }

    fn field(&mut self, t: T) -> Result<(), ShapeError> {
        match t {
            T::I8 => self.skip(1),
            T::I16 => self.skip(2),
            T::I32 => self.skip(4),
            T::I64 => self.skip(8),
            T::Uuid => self.skip(16),
            T::Str => match self.length(true)? {
                Some(n) => self.skip(n),
                None => Ok(()),
            },
            T::Bytes => match self.length(false)? {
                Some(n) => self.skip(n),
                None => Ok(()),
            },
            T::Array(fields) => self.array(|w| w.structure(fields)),
            T::ArrayI32 => self.array(|w| w.skip(4)),
            T::ArrayI64 => self.array(|w| w.skip(8)),
            T::ArrayStr => self.array(|w| w.field(T::Str)),
            T::ArrayUuid => self.array(|w| w.skip(16)),
            T::Struct(fields) => self.structure(fields),
            T::OptStruct(fields) => {
                let [present] = self.take::<1>()?;
                if present == 1 {
                    self.structure(fields)
                } else {
                    Ok(())
                }
            }
            // Walked from the tagged-field section only (see `tagged_fields`).
            T::Tagged(..) => Ok(()),
        }
    }

    fn array(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Result<(), ShapeError>,
    ) -> Result<(), ShapeError> {
        let at = self.pos;
        let Some(n) = self.length(false)? else {
            return Ok(());
        };
        // Each element takes at least one byte: a count beyond the bytes left is a lie, and
        // refusing it here keeps this walk itself bounded by the frame size.
        if n > self.buf.len() - self.pos {
            return Err(ShapeError::InvalidLength { at, len: n as i64 });
        }
        for _ in 0..n {
            element(self)?;
        }
        Ok(())
    }

    fn structure(&mut self, fields: &[F]) -> Result<(), ShapeError> {
        for fl in fields {
            if (fl.min..=fl.max).contains(&self.version) {
                self.field(fl.t)?;
            }
        }
        if self.flexible {
            self.tagged_fields(fields)?;
        }
        Ok(())
    }

    /// The tagged-field section of a struct whose schema is `fields`: a known tag is walked
    /// at its type, as the codec reads it; any other is skipped by its size.
    fn tagged_fields(&mut self, fields: &[F]) -> Result<(), ShapeError> {
        let at = self.pos;
        let n = self.uvarint()?;
        if n > (self.buf.len() - self.pos) as u64 {
            return Err(ShapeError::InvalidLength { at, len: n as i64 });
        }
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = self.uvarint()?;
            let known = fields.iter().find_map(|fl| match fl.t {
                T::Tagged(t, inner)
                    if u64::from(t) == tag && (fl.min..=fl.max).contains(&self.version) =>
                {
                    Some(*inner)
                }
                _ => None,
            });
            match known {
                Some(t) => self.field(t)?,
                None => self.skip(
                    usize::try_from(size).map_err(|_| ShapeError::Truncated { at: self.pos })?,
                )?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::{CONTROLLER_APIS, SUPPORTED_APIS};

    #[test]
    fn every_supported_api_has_a_schema() {
        for a in SUPPORTED_APIS.iter().chain(CONTROLLER_APIS) {
            assert!(schema(a.key).is_some(), "{:?}", a.key);
        }
        for a in CONTROLLER_APIS {
            assert!(responses::response_schema(a.key).is_some(), "{:?}", a.key);
        }
        for key in crate::codec::FORWARDED_APIS {
            assert!(responses::response_schema(key).is_some(), "{key:?}");
        }
    }

    #[test]
    fn huge_array_count_is_refused() {
        // Fetch v4 body: replica, max_wait, min_bytes, max_bytes, isolation, topics = 2^31-1.
        let mut body = Vec::new();
        for v in [-1i32, 0, 0, 0] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        body.push(0);
        body.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            check(ApiKey::Fetch, 4, &body),
            Err(ShapeError::InvalidLength { .. })
        ));
    }

    #[test]
    fn huge_compact_count_is_refused() {
        // Metadata v12 body: topics compact array with count 2^32-2.
        let body = [0xfe, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0];
        assert!(check(ApiKey::Metadata, 12, &body).is_err());
    }

    #[test]
    fn a_tagged_array_with_a_huge_count_is_refused() {
        // BrokerHeartbeat v1: broker_id, broker_epoch, metadata offset, two booleans, then
        // one tagged field: tag 0 (offline_log_dirs) claiming 2^28 UUIDs in a 5-byte size.
        let mut body = Vec::new();
        body.extend_from_slice(&1i32.to_be_bytes());
        body.extend_from_slice(&1i64.to_be_bytes());
        body.extend_from_slice(&1i64.to_be_bytes());
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&[1, 0, 5, 0x80, 0x80, 0x80, 0x80, 0x01]);
        assert!(matches!(
            check(ApiKey::BrokerHeartbeat, 1, &body),
            Err(ShapeError::InvalidLength { .. })
        ));
        // The same tag in v0 is unknown to the schema: skipped by its size (the codec then
        // refuses it, as Kafka's does).
        assert!(check(ApiKey::BrokerHeartbeat, 0, &body).is_ok());
    }

    #[test]
    fn a_tagged_field_is_walked_at_its_type_not_its_claimed_size() {
        // FetchSnapshot v1, one topic, one partition whose tagged replica_directory_id
        // claims size 0 but, as the codec reads it, takes 16 bytes.
        let mut body = Vec::new();
        body.extend_from_slice(&1i32.to_be_bytes()); // replica_id
        body.extend_from_slice(&1i32.to_be_bytes()); // max_bytes
        body.push(2); // one topic
        body.extend_from_slice(&[2, b't']); // name "t"
        body.push(2); // one partition
        body.extend_from_slice(&0i32.to_be_bytes()); // partition
        body.extend_from_slice(&0i32.to_be_bytes()); // current_leader_epoch
        body.extend_from_slice(&0i64.to_be_bytes()); // snapshot_id.end_offset
        body.extend_from_slice(&0i32.to_be_bytes()); // snapshot_id.epoch
        body.push(0); // snapshot_id tags
        body.extend_from_slice(&0i64.to_be_bytes()); // position
        body.extend_from_slice(&[1, 0, 0]); // one tag: 0, size 0 (a lie)
        body.extend_from_slice(&[0u8; 16]); // the uuid the codec reads
        body.push(0); // topic tags
        body.push(0); // top-level tags
        assert_eq!(check(ApiKey::FetchSnapshot, 1, &body), Ok(()));
        // Without the 16 bytes the walk runs out, as the codec would.
        let mut short = body.clone();
        short.truncate(short.len() - 18);
        short.extend_from_slice(&[0, 0]);
        assert!(check(ApiKey::FetchSnapshot, 1, &short).is_err());
    }
}
