//! The transaction coordinator (KIP-98, with KIP-890's transaction version 2): a state
//! machine per transactional id, whose records live in the internal compacted topic
//! `__transaction_state`, on the coordinator runtime the group coordinators use
//! (ARCHITECTURE.md decision 12).
//!
//! - [`records`]: the key and value encodings, Kafka's, and the partition of an id.
//! - [`state`]: the sans-IO state machine of the transactional ids of one partition.
//! - [`store`]: the runtime over `__transaction_state`: the partitions led here, their
//!   loads, and the writes of the state machine's transitions.
//!
//! The handlers are the server's (`server::handlers`), and so is the marker sender
//! (`server::txn_markers`), which takes the store's [`store::MarkerJob`]s over a channel.
//! Transaction version 2 is decided by the state machine but not offered to clients yet (see
//! the module map in `docs/ARCHITECTURE.md`).

pub mod records;
pub mod state;
pub mod store;
