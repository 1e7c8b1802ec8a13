//! The admin client: a blocking Kafka client that routes requests the way Kafka's admin
//! client does (metadata writes to a broker that forwards them, partition reads to each
//! leader, group requests to the group's coordinator), and the partition reads the
//! operator's tools share.
//!
//! Two users: `strata admin` (the binary's command line) and the web console
//! ([`crate::server::console`]), which runs it on the blocking pool as the signed-in user.
//! A base layer like [`crate::peer_client`], on which it sits: it knows the wire, not the
//! node.

pub mod client;
pub mod groups;
pub mod hot;
pub mod logs;
