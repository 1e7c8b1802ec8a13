//! The records of `__transaction_state`, byte for byte as Kafka's transaction coordinator
//! writes them (`TransactionLog`, schemas `TransactionLogKey.json` and
//! `TransactionLogValue.json`), and the mapping of a transactional id to its partition.
//!
//! # Key
//!
//! ```text
//! version i16 = 0 | transactional_id string (int16 length, UTF-8)
//! ```
//!
//! # Value
//!
//! A version prefix, then the fields. A null value is a tombstone: the transactional id
//! expired (`transactional.id.expiration.ms`).
//!
//! ```text
//! v0  producer_id i64 | producer_epoch i16 | timeout_ms i32 | status i8
//!     | partitions [topic string | partition_ids [i32]] (null when Empty)
//!     | last_update_ms i64 | start_ms i64
//! v1  the same fields, flexible: compact strings and arrays, a tagged-field section after
//!     each partition entry and at the end, where tag 0 is previous_producer_id (i64,
//!     default -1), tag 1 next_producer_id (i64, default -1) and tag 2
//!     client_transaction_version (i16, default 0); defaults are not written
//! ```
//!
//! We write v1, which carries what transaction version 2 (KIP-890) needs; v0 is read.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::coordinator::codec::{
    CodecError, Reader, put_compact_len, put_compact_str, put_str, put_uvarint,
};

/// The internal topic's name.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The only key version.
const KEY_VERSION: i16 = 0;
/// The value version written.
const VALUE_VERSION: i16 = 1;
const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;

/// A transaction's state, with Kafka's codes (`TransactionState`) and names (what
/// DescribeTransactions and ListTransactions answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnState {
    /// No transaction ongoing: after InitProducerId, before the first partition is added.
    Empty,
    /// Partitions have been added.
    Ongoing,
    /// EndTxn(commit) is decided; markers are being written.
    PrepareCommit,
    /// EndTxn(abort), or a timeout or fencing, is decided; markers are being written.
    PrepareAbort,
    /// Every marker of the commit is written.
    CompleteCommit,
    /// Every marker of the abort is written.
    CompleteAbort,
    /// The transactional id expired; its tombstone is being written.
    Dead,
    /// An ongoing transaction is being aborted because a newer producer fenced it.
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in code order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The int8 code in the log.
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state of a code, `None` for one Kafka does not define.
    #[must_use]
    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }

    /// Kafka's name of the state (`TransactionState.stateName`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state named `name` (case-insensitive, as Kafka's `fromName` filters accept).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

/// What `__transaction_state` holds for one transactional id: Kafka's `TransactionLogValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogValue {
    pub producer_id: i64,
    /// The producer id of the last committed transaction, -1 if none (TV2).
    pub previous_producer_id: i64,
    /// The producer id the coordinator moves to when the epoch is exhausted, -1 if none.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions in the transaction, by topic.
    pub partitions: BTreeMap<String, BTreeSet<i32>>,
    pub last_update_ms: i64,
    /// When the ongoing transaction started, -1 if none.
    pub start_ms: i64,
    /// The transaction version the client uses (0 and 1 are the original protocol, 2 is
    /// KIP-890's).
    pub client_transaction_version: i16,
}

/// Why a record of `__transaction_state` could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TxnRecordError {
    #[error("record has no key")]
    MissingKey,
    #[error("unknown transaction log key version {0}")]
    UnknownKeyVersion(i16),
    #[error("unknown transaction log value version {0}")]
    UnknownValueVersion(i16),
    #[error("unknown transaction state {0}")]
    UnknownState(i8),
    #[error(transparent)]
    Codec(#[from] CodecError),
}

/// The key of `transactional_id`'s records.
#[must_use]
pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut k = BytesMut::with_capacity(4 + transactional_id.len());
    k.put_i16(KEY_VERSION);
    put_str(&mut k, transactional_id);
    k.freeze()
}

/// The transactional id of a key.
///
/// # Errors
/// [`TxnRecordError`] for another key version or bytes that do not follow the schema.
pub fn decode_key(bytes: &[u8]) -> Result<String, TxnRecordError> {
    let mut r = Reader(bytes);
    let version = r.i16("key version")?;
    if version != KEY_VERSION {
        return Err(TxnRecordError::UnknownKeyVersion(version));
    }
    Ok(r.string("transactional id")?)
}

impl TxnLogValue {
    /// The value as we write it: version 1.
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let mut v = BytesMut::with_capacity(64);
        v.put_i16(VALUE_VERSION);
        v.put_i64(self.producer_id);
        v.put_i16(self.producer_epoch);
        v.put_i32(self.timeout_ms);
        v.put_i8(self.state.code());
        if self.state == TxnState::Empty {
            put_compact_len(&mut v, None);
        } else {
            put_compact_len(&mut v, Some(self.partitions.len()));
            for (topic, ids) in &self.partitions {
                put_compact_str(&mut v, topic);
                put_compact_len(&mut v, Some(ids.len()));
                for id in ids {
                    v.put_i32(*id);
                }
                put_uvarint(&mut v, 0); // the entry's tagged fields
            }
        }
        v.put_i64(self.last_update_ms);
        v.put_i64(self.start_ms);
        let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
        if self.previous_producer_id != -1 {
            tagged.push((
                TAG_PREVIOUS_PRODUCER_ID,
                self.previous_producer_id.to_be_bytes().to_vec(),
            ));
        }
        if self.next_producer_id != -1 {
            tagged.push((
                TAG_NEXT_PRODUCER_ID,
                self.next_producer_id.to_be_bytes().to_vec(),
            ));
        }
        if self.client_transaction_version != 0 {
            tagged.push((
                TAG_CLIENT_TRANSACTION_VERSION,
                self.client_transaction_version.to_be_bytes().to_vec(),
            ));
        }
        put_uvarint(&mut v, tagged.len() as u32);
        for (tag, data) in tagged {
            put_uvarint(&mut v, tag);
            put_uvarint(&mut v, data.len() as u32);
            v.put_slice(&data);
        }
        v.freeze()
    }

    /// A value of version 0 or 1.
    ///
    /// # Errors
    /// [`TxnRecordError`] for an unknown version or state, or bytes that do not follow the
    /// schema.
    pub fn decode(bytes: &[u8]) -> Result<Self, TxnRecordError> {
        let mut r = Reader(bytes);
        let version = r.i16("value version")?;
        let flexible = match version {
            0 => false,
            1 => true,
            v => return Err(TxnRecordError::UnknownValueVersion(v)),
        };
        let producer_id = r.i64("producer id")?;
        let producer_epoch = r.i16("producer epoch")?;
        let timeout_ms = r.i32("transaction timeout")?;
        let code = r.i8("transaction status")?;
        let state = TxnState::from_code(code).ok_or(TxnRecordError::UnknownState(code))?;
        let mut partitions: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        let topics = if flexible {
            r.compact_array_len("transaction partitions")?
        } else {
            r.array_len("transaction partitions")?
        };
        for _ in 0..topics.unwrap_or(0) {
            let topic = if flexible {
                r.compact_string("topic")?
            } else {
                r.string("topic")?
            };
            let n = if flexible {
                r.compact_array_len("partition ids")?
            } else {
                r.array_len("partition ids")?
            };
            let ids = partitions.entry(topic).or_default();
            for _ in 0..n.unwrap_or(0) {
                ids.insert(r.i32("partition id")?);
            }
            if flexible {
                r.tagged_fields("partition entry tags", |_, _| Ok(()))?;
            }
        }
        let last_update_ms = r.i64("last update timestamp")?;
        let start_ms = r.i64("start timestamp")?;
        let mut value = TxnLogValue {
            producer_id,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch,
            timeout_ms,
            state,
            partitions,
            last_update_ms,
            start_ms,
            client_transaction_version: 0,
        };
        if flexible {
            r.tagged_fields("tagged fields", |tag, data| {
                let mut d = Reader(data);
                match tag {
                    TAG_PREVIOUS_PRODUCER_ID => {
                        value.previous_producer_id = d.i64("previous producer id")?;
                    }
                    TAG_NEXT_PRODUCER_ID => value.next_producer_id = d.i64("next producer id")?,
                    TAG_CLIENT_TRANSACTION_VERSION => {
                        value.client_transaction_version = d.i16("client transaction version")?;
                    }
                    _ => {}
                }
                Ok(())
            })?;
        }
        Ok(value)
    }
}

/// The `__transaction_state` partition of `transactional_id`:
/// `Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`, the same
/// placement as a group's in `__consumer_offsets`.
#[must_use]
pub fn partition_for(transactional_id: &str, num_partitions: i32) -> i32 {
    crate::coordinator::offsets::records::partition_for(transactional_id, num_partitions)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn value(state: TxnState) -> TxnLogValue {
        let mut partitions = BTreeMap::new();
        if state != TxnState::Empty {
            partitions.insert("orders".to_owned(), BTreeSet::from([0, 3]));
            partitions.insert("__consumer_offsets".to_owned(), BTreeSet::from([17]));
        }
        TxnLogValue {
            producer_id: 4001,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state,
            partitions,
            last_update_ms: 1_700_000_000_123,
            start_ms: 1_700_000_000_000,
            client_transaction_version: 0,
        }
    }

    #[test]
    fn the_key_is_version_0_and_a_classic_string() {
        assert_eq!(
            &encode_key("tx-1")[..],
            &[0, 0, 0, 4, b't', b'x', b'-', b'1']
        );
        assert_eq!(decode_key(&encode_key("tx-1")).unwrap(), "tx-1");
        assert_eq!(
            decode_key(&[0, 1, 0, 0]),
            Err(TxnRecordError::UnknownKeyVersion(1))
        );
    }

    #[test]
    fn a_v1_value_has_kafka_s_layout() {
        let v = value(TxnState::Ongoing);
        let b = v.encode();
        let mut want = vec![0, 1];
        want.extend_from_slice(&4001i64.to_be_bytes());
        want.extend_from_slice(&3i16.to_be_bytes());
        want.extend_from_slice(&60_000i32.to_be_bytes());
        want.push(1); // Ongoing
        want.push(3); // two topics
        want.push(19); // "__consumer_offsets", 18 bytes
        want.extend_from_slice(b"__consumer_offsets");
        want.push(2);
        want.extend_from_slice(&17i32.to_be_bytes());
        want.push(0);
        want.push(7);
        want.extend_from_slice(b"orders");
        want.push(3);
        want.extend_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&3i32.to_be_bytes());
        want.push(0);
        want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        want.push(0); // no tagged fields: every one is at its default
        assert_eq!(&b[..], &want[..]);
        assert_eq!(TxnLogValue::decode(&b).unwrap(), v);
    }

    #[test]
    fn a_v0_value_decodes_and_empty_has_null_partitions() {
        let mut b = vec![0, 0];
        b.extend_from_slice(&9i64.to_be_bytes());
        b.extend_from_slice(&1i16.to_be_bytes());
        b.extend_from_slice(&1000i32.to_be_bytes());
        b.push(4); // CompleteCommit
        b.extend_from_slice(&1i32.to_be_bytes());
        b.extend_from_slice(&1i16.to_be_bytes());
        b.push(b't');
        b.extend_from_slice(&2i32.to_be_bytes());
        b.extend_from_slice(&5i32.to_be_bytes());
        b.extend_from_slice(&6i32.to_be_bytes());
        b.extend_from_slice(&7i64.to_be_bytes());
        b.extend_from_slice(&8i64.to_be_bytes());
        let v = TxnLogValue::decode(&b).unwrap();
        assert_eq!(v.state, TxnState::CompleteCommit);
        assert_eq!(v.partitions["t"], BTreeSet::from([5, 6]));
        assert_eq!((v.last_update_ms, v.start_ms), (7, 8));
        assert_eq!(v.previous_producer_id, -1);
        let empty = value(TxnState::Empty).encode();
        assert_eq!(empty[2 + 8 + 2 + 4 + 1], 0, "null partitions");
        assert!(TxnLogValue::decode(&empty).unwrap().partitions.is_empty());
    }

    #[test]
    fn states_have_kafka_s_codes_and_names() {
        for s in TxnState::ALL {
            assert_eq!(TxnState::from_code(s.code()), Some(s));
            assert_eq!(TxnState::from_name(&s.name().to_uppercase()), Some(s));
        }
        assert_eq!(TxnState::PrepareEpochFence.code(), 7);
        assert_eq!(TxnState::from_code(8), None);
    }

    fn arb_value() -> impl Strategy<Value = TxnLogValue> {
        (
            any::<i64>(),
            prop_oneof![Just(-1i64), any::<i64>()],
            prop_oneof![Just(-1i64), any::<i64>()],
            any::<i16>(),
            any::<i32>(),
            0usize..8,
            prop::collection::btree_map(
                "[a-z._-]{1,20}",
                prop::collection::btree_set(0i32..100, 0..5),
                0..4,
            ),
            any::<i64>(),
            any::<i64>(),
            0i16..3,
        )
            .prop_map(
                |(pid, prev, next, epoch, timeout, s, parts, upd, start, tv)| {
                    let state = TxnState::ALL[s];
                    TxnLogValue {
                        producer_id: pid,
                        previous_producer_id: prev,
                        next_producer_id: next,
                        producer_epoch: epoch,
                        timeout_ms: timeout,
                        state,
                        partitions: if state == TxnState::Empty {
                            BTreeMap::new()
                        } else {
                            parts
                        },
                        last_update_ms: upd,
                        start_ms: start,
                        client_transaction_version: tv,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn values_round_trip(v in arb_value()) {
            prop_assert_eq!(TxnLogValue::decode(&v.encode()).unwrap(), v);
        }

        #[test]
        fn garbage_never_panics(b in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = TxnLogValue::decode(&b);
            let _ = decode_key(&b);
        }
    }
}
