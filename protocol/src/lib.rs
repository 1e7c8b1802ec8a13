//! # strata-protocol
//!
//! The Kafka wire protocol as Strata speaks it.
//!
//! # Layout
//!
//! - [`frame`]: the 4-byte size prefix, checked against `socket.request.max.bytes` before any
//!   allocation (`check` first, then the caller splits the frame off).
//! - [`versions`]: the tables of supported APIs and versions, one for client listeners and
//!   one for the controller listener (the KRaft RPCs). ApiVersions is built from the
//!   connection's table and the decoder refuses anything outside it.
//! - [`codec`]: request header and body decoding, response encoding. Response header versions
//!   come from the API and version; ApiVersions always answers with header v0.
//! - [`fetch_plan`]: Fetch responses as encoded bytes around file regions, for the zero-copy
//!   writer (ARCHITECTURE.md decision 4).
//! - [`consumer_protocol`]: the subscribed topics inside a consumer's JoinGroup metadata.
//! - [`shape`]: a structural walk of each supported request body before the codec decodes
//!   it, because the codec preallocates arrays from unverified wire counts.
//! - [`compression`]: bounded decompression, for the rare paths that must see records inside
//!   a compressed batch (ListOffsets by timestamp).
//! - [`record_batch`]: a borrowed view of RecordBatch v2 (magic 2): CRC32C check, field access,
//!   and in-place rewrites of the base offset and partition leader epoch, which the CRC does
//!   not cover.
//!
//! # Invariants
//!
//! - Only this crate calls `kafka-protocol`'s encoders and decoders. The other crates use the
//!   typed structs re-exported here.
//! - No length read from the wire is trusted past the buffer that holds it.

pub mod codec;
pub mod compression;
pub mod consumer_protocol;
pub mod fetch_plan;
pub mod frame;
pub mod record_batch;
pub mod shape;
pub mod versions;

/// Kafka's error codes.
pub use kafka_protocol::error::ResponseError;
/// The typed messages, re-exported so that other crates do not depend on the codec.
pub use kafka_protocol::messages;
/// String and byte newtypes used by the messages.
pub use kafka_protocol::protocol::StrBytes;
