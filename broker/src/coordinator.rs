//! The coordinator layer: group membership and committed offsets, each a state machine
//! whose records live in `__consumer_offsets`. It imports nothing from `server` or `broker`;
//! the broker owns the coordinators and the server calls them.
//!
//! - [`group`]: the classic group coordinator ([`group::classic`]) and the KIP-848 consumer
//!   group coordinator ([`group::consumer`]).
//! - [`offsets`]: committed offsets in `__consumer_offsets`, Kafka's internal compacted
//!   topic, which both group coordinators write their records to.
//! - [`txn`]: the transaction coordinator, whose records live in `__transaction_state`.
//! - [`runtime`]: what both stores share: a coordinator partition's role, its load, and
//!   the writes answered once committed.
//! - [`codec`]: the primitives of the coordinator records' schemas.
//! - `deadline_timer`: the lazily started task both group coordinators use to sleep until
//!   their core's next deadline.

pub mod codec;
mod deadline_timer;
pub mod group;
pub mod offsets;
pub mod runtime;
pub mod txn;

/// The coordinators' internal topics, which the controller creates on a node's request and
/// clients cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalTopic {
    /// `__consumer_offsets`: groups and their committed offsets.
    ConsumerOffsets,
    /// `__transaction_state`: transactional ids.
    TransactionState,
}

impl InternalTopic {
    /// Both, in a fixed order.
    pub const ALL: [InternalTopic; 2] = [
        InternalTopic::ConsumerOffsets,
        InternalTopic::TransactionState,
    ];

    /// The topic's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            InternalTopic::ConsumerOffsets => offsets::OFFSETS_TOPIC,
            InternalTopic::TransactionState => txn::records::TRANSACTION_STATE_TOPIC,
        }
    }

    /// Whether `name` is an internal topic's: never a subscription's match, listed only
    /// when named, never trimmed or created by clients.
    #[must_use]
    pub fn is_internal(name: &str) -> bool {
        Self::from_name(name).is_some()
    }

    /// The internal topic named `name`, if it is one.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}
