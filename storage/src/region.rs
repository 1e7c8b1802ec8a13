//! What a read returns: byte ranges of segment files, not copies.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

/// A run of whole record batches in one segment file, ready for `sendfile` (ARCHITECTURE.md
/// decision 4). Holding the `Arc<File>` keeps the bytes readable even if retention unlinks
/// the segment meanwhile. A region is only invalidated by [`crate::Log::truncate_to`] cutting
/// the file under it, after which reads past the new end fail with `UnexpectedEof`.
#[derive(Debug, Clone)]
pub struct FileRegion {
    pub file: Arc<File>,
    /// Byte position of the first batch in the file.
    pub position: u64,
    /// Length in bytes; always a whole number of batches.
    pub len: u32,
    /// The same bytes in memory, when the segment's tail cache held them (direct I/O, see
    /// [`crate::direct`]): the writer sends these instead of reading the file.
    pub cached: Option<Bytes>,
}

impl FileRegion {
    /// Appends the region's bytes to `out` with positional reads: the fallback for
    /// transports that cannot `sendfile` (TLS) and for tests.
    ///
    /// # Errors
    /// Any read error; `out` is left as it was.
    pub fn read_into(&self, out: &mut Vec<u8>) -> io::Result<()> {
        if let Some(b) = &self.cached {
            out.extend_from_slice(b);
            return Ok(());
        }
        let start = out.len();
        out.resize(start + self.len as usize, 0);
        let res = self.file.read_exact_at(&mut out[start..], self.position);
        if res.is_err() {
            out.truncate(start);
        }
        res
    }
}

impl strata_protocol::fetch_plan::RegionLen for FileRegion {
    fn region_len(&self) -> u32 {
        self.len
    }
}

/// The answer to [`crate::Log::read`].
#[derive(Debug, Clone, Default)]
pub struct ReadResult {
    /// Contiguous, in offset order; consecutive regions are in consecutive segments, or in
    /// one segment whose tail cache served them (one region per cached append).
    pub regions: Vec<FileRegion>,
    /// Sum of the regions' lengths.
    pub bytes: u64,
}

/// The answer to timestamp lookups (ListOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// The record's timestamp (the batch's max timestamp where we answer per batch).
    pub timestamp: i64,
    /// The record's offset (the batch's base offset where we answer per batch).
    pub offset: i64,
}

/// What [`crate::Log::append`] assigned, for the Produce response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// First offset assigned, or -1 when the record set held no batch (Kafka answers -1 too).
    pub base_offset: i64,
    /// Last offset assigned, or -1 for an empty record set.
    pub last_offset: i64,
    /// The broker time stamped into the batches under LogAppendTime, else -1.
    pub log_append_time: i64,
    /// Records appended, over all batches.
    pub record_count: u32,
    /// The log start offset after the append, which Produce v7+ returns (KIP-107).
    pub log_start_offset: i64,
}
