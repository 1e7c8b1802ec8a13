//! The partition log of Strata, in Kafka's on-disk format (ARCHITECTURE.md decision 2).
//!
//! # Layout
//!
//! On disk, one directory per partition, `<topic>-<partition>/`, holding segments named after
//! their base offset zero-padded to 20 digits:
//!
//! - `00000000000000000000.log`: record batches (RecordBatch v2) byte for byte as produced,
//!   with only the base offset and partition leader epoch rewritten (and the timestamp and CRC
//!   under LogAppendTime). No framing of our own.
//! - `00000000000000000000.index`: sparse offset index, 8-byte big-endian entries
//!   (relative offset u32, position u32), one per `index.interval.bytes` appended.
//! - `00000000000000000000.timeindex`: sparse time index, 12-byte entries
//!   (timestamp i64, relative offset u32), added when the segment's max timestamp grows.
//!
//! - `leader-epoch-checkpoint`: the first offset of each leader epoch (KIP-101), Kafka's text
//!   format (see [`leader_epoch`]), written before the first batch of a new epoch.
//! - `<20-digit offset>.snapshot`: producer state (see [`producer_state`]).
//!
//! Index files are written compactly (no preallocation, no mmap) and mirrored in memory.
//! The log directory holds the offset checkpoints (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`).
//!
//! In code:
//!
//! - [`config`]: [`LogConfig`] with Kafka's topic config names and defaults.
//! - [`log`]: [`Log`], the ordered segments; append, read, retention, flush, truncation.
//! - `segment`: one segment's files, header scans, recovery.
//! - `index`: the two index files and their lookups.
//! - [`region`]: [`FileRegion`] and the other values reads and appends return.
//! - [`sendfile`]: `sendfile(2)` of a [`FileRegion`] to a socket, for the zero-copy Fetch.
//! - [`producer_state`]: idempotent producers' sequence checks (KIP-98) and their
//!   `<20-digit offset>.snapshot` files, written on roll and clean close, rebuilt on open.
//! - [`leader_epoch`]: the leader epoch cache and its checkpoint; [`Log`] keeps one, assigns
//!   epochs on append, truncates it with the log and reconciles it with the log at open.
//! - [`txn_index`]: the aborted-transaction index of a segment (`.txnindex`, Kafka's
//!   `TransactionIndex`) and the search a `read_committed` read makes over it; not yet fed
//!   by the append path (transactions are not accepted yet).
//! - [`txn_state`]: a partition's open and unreplicated transactions, its first unstable
//!   and last stable offsets; not yet fed by the append path either.
//! - [`checkpoint`]: Kafka's offset checkpoint files (`recovery-point-offset-checkpoint`,
//!   `log-start-offset-checkpoint`), replaced atomically.
//! - [`error`]: the error enum, [`LogError`].
//!
//! # Invariants
//!
//! - Segments are sorted by base offset, never overlap, and the last (active) one alone takes
//!   appends. A log always has an active segment.
//! - Every `.log` holds only whole batches that passed validation; offsets strictly increase.
//! - `log_start_offset <= log_end_offset`; the log end offset never moves back except through
//!   [`Log::truncate_to`].
//!
//! # Crash policy
//!
//! Nothing past the last batch that checks out is trusted (Kafka's recovery). A roll does not
//! fsync: the sealed segment's files wait for the next flush, which the broker queues at once
//! and runs off the append path, and the log's *recovery point* (Kafka's `recoveryPoint`)
//! moves up when a flush that covered every segment below it completes. The broker persists
//! recovery points in each log directory's `recovery-point-offset-checkpoint`
//! ([`checkpoint`]). After a crash, every segment holding offsets at or above the recovery
//! point (all of them if it is unknown) is rescanned batch by batch, checking the length
//! against the file and the CRC32C, and truncated at the first torn or corrupt batch, its
//! indexes rebuilt; a sealed segment cut that way becomes the active one and the segments
//! after it are deleted. Segments below the recovery point, and all of them after a clean
//! shutdown, are trusted: only their indexes are checked (entry size multiple, monotonic,
//! within the log, and agreeing with the batch headers after the last entry) and rebuilt,
//! with a full rescan, if they fail. Files
//! left by interrupted deletions (`.deleted`, `.cleaned`, `.swap`) and indexes without a
//! `.log` are removed. Data reaches disk according to `flush.messages` / `flush.ms`; by default
//! that is left to the OS, as in Kafka, with durability coming from replication.

pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod direct;
pub mod error;
mod index;
pub mod io;
pub mod leader_epoch;
pub mod log;
pub mod producer_state;
pub mod region;
mod segment;
pub mod sendfile;
pub mod txn_index;
pub mod txn_state;

pub use config::LogConfig;
pub use error::LogError;
pub use log::{Log, PendingFlush, TxnMarker};
pub use producer_state::{ProducerStateEntry, ProducerStateTable};
pub use region::{AppendInfo, FileRegion, ReadResult, TimestampOffset};
pub use strata_protocol::record_batch::TimestampType;
