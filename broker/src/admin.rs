//! The admin client: a blocking Kafka client that routes requests the way Kafka's admin
//! client does (metadata writes to a broker that forwards them, partition reads to each
//! leader, group requests to the group's coordinator), and the partition reads the
//! operator's tools share.
//!
//! Two users: `strata admin` (the binary's command line) and the web console (the server's
//! `console`), which runs it on the blocking pool as the signed-in user. It sits on
//! [`crate::peer_client`] and `security::peer`, and reads one encoding of the node's (the
//! log cleaner's dirty ratio in DescribeLogDirs): a layer of its own under the server, as a
//! client of the wire, not of the node.

pub mod client;
pub mod groups;
pub mod hot;
pub mod logs;
