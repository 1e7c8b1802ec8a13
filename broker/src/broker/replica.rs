//! Partition replication on a node of a cluster: follower fetchers ([`fetcher`]).
//!
//! The replication rules themselves (leader and follower state, the high watermark, ISR
//! proposals, truncation) are the sans-IO `strata-replication` crate; this module does the
//! I/O around them.

pub mod fetcher;
pub mod isr;

pub use fetcher::Fetchers;
