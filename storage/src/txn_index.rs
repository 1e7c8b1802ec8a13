//! The aborted-transaction index of a segment, `<base offset>.txnindex` (Kafka's
//! `TransactionIndex`): one entry per transaction aborted by a marker in that segment, so that
//! a `read_committed` Fetch can tell the consumer which producers' records to drop.
//!
//! # Format
//!
//! Entries back to back, no header, each 34 bytes, big-endian (Kafka's `AbortedTxn`):
//!
//! ```text
//! @0  version            i16   0
//! @2  producer_id        i64
//! @10 first_offset       i64   the transaction's first offset (may lie in an earlier segment)
//! @18 last_offset        i64   the offset of its ABORT marker, in this segment
//! @26 last_stable_offset i64   the partition's last stable offset when the marker was written
//! ```
//!
//! Only aborts are indexed; a commit needs no entry. The file exists only once an entry does.
//! As with the other indexes, entries are kept in memory and appended to the file when the
//! segment is flushed or sealed ([`TxnIndex::write_out`]); a file whose length is not a
//! multiple of the entry size, that holds a version other than 0, an entry below the
//! segment's base offset, or markers out of order, is not trusted ([`TxnIndex::load`]
//! answers `None`) and is rebuilt from the segment by replaying its batches.
//!
//! # Search
//!
//! [`TxnIndex::collect`] is Kafka's `collectAbortedTxns`: the entries whose marker is at or
//! after the fetch offset and whose transaction starts before the upper bound of the read.
//! Each entry records the last stable offset at its abort; once an entry's is at or past the
//! upper bound, no later segment can hold a transaction that started below it, and the search
//! over the segments ([`collect_aborted`]) stops there.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, LogError};

/// Bytes of one entry.
pub const ENTRY_SIZE: usize = 34;
/// The only entry version Kafka writes (`AbortedTxn.CURRENT_VERSION`).
pub const VERSION: i16 = 0;

/// One aborted transaction: Kafka's `AbortedTxn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// The transaction's first offset.
    pub first_offset: i64,
    /// The offset of the ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset when the marker was appended.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The entry's 34 bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut out = [0u8; ENTRY_SIZE];
        out[..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// An entry from its bytes; `None` for a version this broker does not know.
    #[must_use]
    pub fn decode(b: &[u8; ENTRY_SIZE]) -> Option<Self> {
        let i64_at = |at: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[at..at + 8]);
            i64::from_be_bytes(v)
        };
        (i16::from_be_bytes([b[0], b[1]]) == VERSION).then(|| Self {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// The aborted-transaction index of one segment.
#[derive(Debug)]
pub struct TxnIndex {
    path: PathBuf,
    entries: Vec<AbortedTxn>,
    /// How many of `entries` the file holds.
    on_disk: usize,
}

/// The path of the index of the segment at `base_offset` in `dir`.
#[must_use]
pub fn path_for(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{base_offset:020}.txnindex"))
}

impl TxnIndex {
    /// An empty index; no file is written until it has an entry.
    #[must_use]
    pub fn empty(path: PathBuf) -> Self {
        Self {
            path,
            entries: Vec::new(),
            on_disk: 0,
        }
    }

    /// The index of the segment at `base_offset` as its file holds it (empty when there is no
    /// file), or `None` when the file cannot be trusted and must be rebuilt (Kafka's
    /// `sanityCheck` failing): a torn entry, an unknown version, a marker below the segment,
    /// or markers out of order.
    ///
    /// # Errors
    /// [`LogError::Io`] when the file exists but cannot be read.
    pub fn load(path: PathBuf, base_offset: i64) -> Result<Option<Self>, LogError> {
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Some(Self::empty(path))),
            Err(e) => return Err(e).at(&path),
        };
        let mut raw = Vec::new();
        file.read_to_end(&mut raw).at(&path)?;
        if raw.len() % ENTRY_SIZE != 0 {
            return Ok(None);
        }
        let mut entries = Vec::with_capacity(raw.len() / ENTRY_SIZE);
        for chunk in raw.chunks_exact(ENTRY_SIZE) {
            let mut b = [0u8; ENTRY_SIZE];
            b.copy_from_slice(chunk);
            let Some(e) = AbortedTxn::decode(&b) else {
                return Ok(None);
            };
            if e.last_offset < base_offset
                || entries
                    .last()
                    .is_some_and(|prev: &AbortedTxn| prev.last_offset >= e.last_offset)
            {
                return Ok(None);
            }
            entries.push(e);
        }
        let on_disk = entries.len();
        Ok(Some(Self {
            path,
            entries,
            on_disk,
        }))
    }

    /// The entries, in marker order.
    #[must_use]
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Adds the entry of an aborted transaction (in memory until [`TxnIndex::write_out`]).
    ///
    /// # Panics
    /// If its marker is not after the last one indexed: markers are appended in offset
    /// order, so anything else is a bug of the caller (Kafka throws there too).
    pub fn push(&mut self, entry: AbortedTxn) {
        if let Some(last) = self.entries.last() {
            assert!(
                entry.last_offset > last.last_offset,
                "aborted transaction marker {} is not after the last one indexed, {}",
                entry.last_offset,
                last.last_offset
            );
        }
        self.entries.push(entry);
    }

    /// Kafka's `collectAbortedTxns`: the entries with `last_offset >= fetch_offset` and
    /// `first_offset < upper_bound`, and whether the search may stop here (an entry's last
    /// stable offset reached `upper_bound`).
    #[must_use]
    pub fn collect(&self, fetch_offset: i64, upper_bound: i64) -> (Vec<AbortedTxn>, bool) {
        let mut found = Vec::new();
        for e in &self.entries {
            if e.last_offset >= fetch_offset && e.first_offset < upper_bound {
                found.push(*e);
            }
            if e.last_stable_offset >= upper_bound {
                return (found, true);
            }
        }
        (found, false)
    }

    /// Drops the entries whose marker is at or after `offset` (Kafka's `truncateTo`: from the
    /// first such entry on), on disk too.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        let keep = self
            .entries
            .iter()
            .position(|e| e.last_offset >= offset)
            .unwrap_or(self.entries.len());
        self.entries.truncate(keep);
        if self.on_disk > keep {
            OpenOptions::new()
                .write(true)
                .open(&self.path)
                .and_then(|f| f.set_len((keep * ENTRY_SIZE) as u64))
                .at(&self.path)?;
            self.on_disk = keep;
        }
        Ok(())
    }

    /// Empties the index and removes its file (a segment's recovery starts from nothing).
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn reset(&mut self) -> Result<(), LogError> {
        self.entries.clear();
        self.on_disk = 0;
        self.delete()
    }

    /// Appends the entries the file does not hold yet, creating it if needed, and returns the
    /// open file for the caller to fsync with the segment's others; `None` while the index
    /// has no entry and no file.
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn write_out(&mut self) -> Result<Option<File>, LogError> {
        if self.entries.is_empty() {
            return Ok(None);
        }
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .at(&self.path)?;
        let pending = &self.entries[self.on_disk..];
        if !pending.is_empty() {
            let buf: Vec<u8> = pending.iter().flat_map(AbortedTxn::encode).collect();
            crate::io::write_all_at(&file, &buf, (self.on_disk * ENTRY_SIZE) as u64)
                .at(&self.path)?;
            self.on_disk = self.entries.len();
        }
        Ok(Some(file))
    }

    /// Removes the file, if there is one (the segment is deleted).
    ///
    /// # Errors
    /// [`LogError::Io`].
    pub fn delete(&self) -> Result<(), LogError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e).at(&self.path),
            _ => Ok(()),
        }
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The aborted transactions a `read_committed` read from `fetch_offset` up to `upper_bound`
/// must report, over the indexes of the segment it starts in and the segments after it, in
/// order (Kafka's `LocalLog.collectAbortedTransactions`): each segment's entries are added
/// until one says the search is complete.
pub fn collect_aborted<'a>(
    indexes: impl IntoIterator<Item = &'a TxnIndex>,
    fetch_offset: i64,
    upper_bound: i64,
) -> Vec<AbortedTxn> {
    let mut all = Vec::new();
    for index in indexes {
        let (found, complete) = index.collect(fetch_offset, upper_bound);
        all.extend(found);
        if complete {
            break;
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn an_entry_is_kafka_s_34_bytes() {
        let e = txn(0x0102_0304_0506_0708, 10, 0x20, -1);
        let b = e.encode();
        assert_eq!(
            b.to_vec(),
            [
                vec![0, 0],
                vec![1, 2, 3, 4, 5, 6, 7, 8],
                10i64.to_be_bytes().to_vec(),
                0x20i64.to_be_bytes().to_vec(),
                vec![0xff; 8],
            ]
            .concat()
        );
        assert_eq!(AbortedTxn::decode(&b), Some(e));
        let mut v1 = b;
        v1[1] = 1;
        assert_eq!(AbortedTxn::decode(&v1), None, "an unknown version");
    }

    #[test]
    fn the_file_is_written_lazily_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(dir.path(), 100);
        assert!(path.ends_with("00000000000000000100.txnindex"));
        let mut index = TxnIndex::load(path.clone(), 100).unwrap().unwrap();
        assert!(index.write_out().unwrap().is_none());
        assert!(!path.exists(), "no file without an entry");
        index.push(txn(7, 90, 105, 90));
        index.push(txn(8, 101, 110, 101));
        index.write_out().unwrap();
        index.push(txn(7, 111, 120, 111));
        index.write_out().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 34);
        let loaded = TxnIndex::load(path.clone(), 100).unwrap().unwrap();
        assert_eq!(loaded.entries(), index.entries());
        // Truncation on disk too: from the first marker at or after the offset.
        index.truncate_to(110).unwrap();
        assert_eq!(index.entries().len(), 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
        index.reset().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_file_that_cannot_be_trusted_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(dir.path(), 100);
        let write = |entries: &[AbortedTxn], extra: &[u8]| {
            let mut b: Vec<u8> = entries.iter().flat_map(AbortedTxn::encode).collect();
            b.extend_from_slice(extra);
            std::fs::write(&path, b).unwrap();
        };
        write(&[txn(1, 90, 105, 90)], &[0, 0, 1]);
        assert!(TxnIndex::load(path.clone(), 100).unwrap().is_none(), "torn");
        write(&[txn(1, 90, 99, 90)], &[]);
        assert!(
            TxnIndex::load(path.clone(), 100).unwrap().is_none(),
            "below the segment"
        );
        write(&[txn(1, 100, 110, 100), txn(2, 100, 110, 100)], &[]);
        assert!(
            TxnIndex::load(path.clone(), 100).unwrap().is_none(),
            "out of order"
        );
        let mut v1 = txn(1, 100, 110, 100).encode();
        v1[1] = 1;
        std::fs::write(&path, v1).unwrap();
        assert!(
            TxnIndex::load(path.clone(), 100).unwrap().is_none(),
            "unknown version"
        );
        write(&[txn(1, 100, 110, 100)], &[]);
        assert!(TxnIndex::load(path, 100).unwrap().is_some());
    }

    /// The aborted-transaction entries of a partition's history, cut into segments. The
    /// history is made of steps, one offset each: a producer's transactional batch (which
    /// opens its transaction), or its COMMIT or ABORT marker. An abort's last stable offset
    /// is Kafka's: the first offset of the earliest other open transaction, else the
    /// offset after the marker.
    fn segments() -> impl Strategy<Value = Vec<Vec<AbortedTxn>>> {
        prop::collection::vec((0i64..4, 0u8..4), 0..120).prop_map(|steps| {
            let mut open: std::collections::BTreeMap<i64, i64> = Default::default();
            let mut all = Vec::new();
            for (offset, (pid, action)) in (0i64..).zip(steps) {
                match (action, open.get(&pid).copied()) {
                    (0 | 1, None) => {
                        open.insert(pid, offset);
                    }
                    (2, Some(first)) => {
                        open.remove(&pid);
                        let lso = open.values().min().copied().unwrap_or(offset + 1);
                        all.push(txn(pid, first, offset, lso));
                    }
                    (3, Some(_)) => {
                        open.remove(&pid);
                    }
                    _ => {}
                }
            }
            // Cut into segments of about five entries.
            all.chunks(5).map(<[AbortedTxn]>::to_vec).collect()
        })
    }

    proptest! {
        /// The segment walk reports every aborted transaction a consumer needs (marker at or
        /// after the fetch offset, started before the read's end), and only such ones.
        #[test]
        fn the_walk_finds_exactly_what_a_consumer_needs(
            segs in segments(),
            fetch in 0i64..130,
            len in 0i64..40,
        ) {
            let indexes: Vec<TxnIndex> = segs
                .iter()
                .map(|entries| {
                    let mut i = TxnIndex::empty(PathBuf::from("unused"));
                    for e in entries {
                        i.push(*e);
                    }
                    i
                })
                .collect();
            let upper = fetch + len;
            // The read starts in the segment holding the fetch offset: the first whose last
            // marker is at or after it (earlier ones cannot match).
            let start = indexes
                .iter()
                .position(|i| i.entries().last().is_some_and(|e| e.last_offset >= fetch))
                .unwrap_or(indexes.len());
            let got = collect_aborted(&indexes[start..], fetch, upper);
            let want: Vec<AbortedTxn> = segs
                .iter()
                .flatten()
                .filter(|e| e.last_offset >= fetch && e.first_offset < upper)
                .copied()
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
