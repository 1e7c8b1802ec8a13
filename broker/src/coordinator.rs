//! The coordinator layer: group membership and committed offsets, each a state machine
//! whose records live in `__consumer_offsets`. It imports nothing from `server` or `broker`;
//! the broker owns the coordinators and the server calls them.
//!
//! - [`group`]: the classic group coordinator ([`group::classic`]) and the KIP-848 consumer
//!   group coordinator ([`group::consumer`]).
//! - [`offsets`]: committed offsets in `__consumer_offsets`, Kafka's internal compacted
//!   topic, which both group coordinators write their records to.
//! - [`txn`]: the transaction coordinator's records of `__transaction_state` (the
//!   coordinator itself is not built yet).
//! - [`codec`]: the primitives of the coordinator records' schemas.
//! - `deadline_timer`: the lazily started task both group coordinators use to sleep until
//!   their core's next deadline.

pub mod codec;
mod deadline_timer;
pub mod group;
pub mod offsets;
pub mod txn;
