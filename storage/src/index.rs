//! The sparse `.index` and `.timeindex` files of a segment.
//!
//! Both are kept fully in memory (a `Vec` of entries) and written to disk when the segment is
//! flushed or sealed ([`IndexFile::write_out`]): entries not yet on disk are appended then.
//! No file stays open between those moments, so a partition holds one file descriptor (its
//! active `.log`) however many indexes it has; with three per segment, ten thousand
//! partitions did not fit a 20,000-descriptor limit. Unlike Kafka we do not preallocate and
//! mmap the files to `segment.index.bytes`: they are written compactly, so the file length is
//! always `entries * entry size` and a torn tail shows up as a length that is not a multiple.
//!
//! Crash policy: an index is a cache of the `.log`. The active segment's indexes are always
//! rebuilt on open, so entries that were only in memory at a crash cost nothing; a sealed
//! segment's were written and fsynced when it was sealed, and are loaded and checked
//! ([`IndexFile::load`]) and rebuilt from the log if missing or inconsistent.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, LogError};

/// A fixed-size, big-endian index entry.
pub(crate) trait IndexEntry: Copy + std::fmt::Debug {
    const SIZE: usize;
    fn encode(&self, out: &mut [u8]);
    fn decode(b: &[u8]) -> Self;
    /// Whether `next` may follow `self` in a well-formed file.
    fn precedes(&self, next: &Self) -> bool;
}

/// One `.index` entry, 8 bytes:
///
/// ```text
/// @0 relativeOffset u32  (offset - segment base offset) of the indexed batch's LAST offset
/// @4 position       u32  byte position of that batch in the .log
/// ```
///
/// Keying on the batch's last offset (as Kafka's `LogSegment.append` does) means "the largest
/// entry with offset <= target" always points at or before the batch holding `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

impl IndexEntry for OffsetEntry {
    const SIZE: usize = 8;
    fn encode(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        out[4..8].copy_from_slice(&self.position.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        Self {
            relative_offset: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            position: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
    fn precedes(&self, next: &Self) -> bool {
        self.relative_offset < next.relative_offset && self.position < next.position
    }
}

/// One `.timeindex` entry, 12 bytes:
///
/// ```text
/// @0 timestamp      i64  the segment's largest timestamp so far
/// @8 relativeOffset u32  (offset - segment base offset) of the record carrying it
/// ```
///
/// Entries are added only when the largest timestamp grows, so timestamps strictly increase.
/// When a segment is sealed its final largest timestamp is always appended (Kafka's
/// `onBecomeInactiveSegment`), so the last entry of a sealed segment is its maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

impl IndexEntry for TimeEntry {
    const SIZE: usize = 12;
    fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[..8]);
        Self {
            timestamp: i64::from_be_bytes(ts),
            relative_offset: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        }
    }
    fn precedes(&self, next: &Self) -> bool {
        self.timestamp < next.timestamp && self.relative_offset <= next.relative_offset
    }
}

/// An index file and its in-memory copy.
#[derive(Debug)]
pub(crate) struct IndexFile<E: IndexEntry> {
    path: PathBuf,
    entries: Vec<E>,
    /// How many of `entries` the file holds.
    on_disk: usize,
}

pub(crate) type OffsetIndex = IndexFile<OffsetEntry>;
pub(crate) type TimeIndex = IndexFile<TimeEntry>;

impl<E: IndexEntry> IndexFile<E> {
    /// Creates (or empties) the file.
    pub fn create(path: &Path) -> Result<Self, LogError> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .at(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            entries: Vec::new(),
            on_disk: 0,
        })
    }

    /// Loads an existing file; `Ok(None)` when it is missing or malformed (length not a
    /// multiple of the entry size, entries out of order, or `valid` rejects an entry), in
    /// which case the caller rebuilds it.
    pub fn load(path: &Path, valid: impl Fn(&E) -> bool) -> Result<Option<Self>, LogError> {
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at(path),
        };
        let mut raw = Vec::new();
        file.read_to_end(&mut raw).at(path)?;
        if raw.len() % E::SIZE != 0 {
            return Ok(None);
        }
        let entries: Vec<E> = raw.chunks_exact(E::SIZE).map(E::decode).collect();
        let ordered = entries.windows(2).all(|w| w[0].precedes(&w[1]));
        if !ordered || !entries.iter().all(valid) {
            return Ok(None);
        }
        let on_disk = entries.len();
        Ok(Some(Self {
            path: path.to_path_buf(),
            entries,
            on_disk,
        }))
    }

    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    pub fn last(&self) -> Option<E> {
        self.entries.last().copied()
    }

    /// Bytes the file occupies.
    pub fn size_bytes(&self) -> u64 {
        (self.entries.len() * E::SIZE) as u64
    }

    /// Appends one entry (in memory; [`IndexFile::write_out`] puts it on disk).
    pub fn push(&mut self, entry: E) {
        self.entries.push(entry);
    }

    /// Keeps only the first `keep` entries, on disk too.
    pub fn truncate_entries(&mut self, keep: usize) -> Result<(), LogError> {
        self.entries.truncate(keep);
        if self.on_disk > keep {
            OpenOptions::new()
                .write(true)
                .open(&self.path)
                .and_then(|f| f.set_len((keep * E::SIZE) as u64))
                .at(&self.path)?;
            self.on_disk = keep;
        }
        Ok(())
    }

    /// Appends the entries the file does not hold yet and returns the open file, for the
    /// caller to fsync (a segment fsyncs its three files at once) and then close.
    pub fn write_out(&mut self) -> Result<File, LogError> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .at(&self.path)?;
        let pending = &self.entries[self.on_disk..];
        if !pending.is_empty() {
            let mut buf = vec![0u8; pending.len() * E::SIZE];
            for (e, out) in pending.iter().zip(buf.chunks_exact_mut(E::SIZE)) {
                e.encode(out);
            }
            crate::io::write_all_at(&file, &buf, (self.on_disk * E::SIZE) as u64).at(&self.path)?;
            self.on_disk = self.entries.len();
        }
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl OffsetIndex {
    /// Position of the batch to start scanning from for `relative_offset`: that of the largest
    /// entry whose offset is <= it, or 0 when there is none.
    pub fn lookup(&self, relative_offset: u32) -> u32 {
        let n = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        n.checked_sub(1).map_or(0, |i| self.entries[i].position)
    }
}

impl TimeIndex {
    /// The last entry whose timestamp is strictly below `timestamp`. Every batch up to that
    /// entry's offset has a largest timestamp below `timestamp` (entries record the running
    /// maximum), so a search for the first timestamp >= `timestamp` may start there.
    pub fn last_below(&self, timestamp: i64) -> Option<TimeEntry> {
        let n = self.entries.partition_point(|e| e.timestamp < timestamp);
        n.checked_sub(1).map(|i| self.entries[i])
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;

    fn oe(relative_offset: u32, position: u32) -> OffsetEntry {
        OffsetEntry {
            relative_offset,
            position,
        }
    }

    #[test]
    fn offset_lookup_finds_largest_lower_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::create(&dir.path().join("0.index")).unwrap();
        assert_eq!(idx.lookup(5), 0);
        for (o, p) in [(9, 100), (19, 250), (29, 400)] {
            idx.push(oe(o, p));
        }
        assert_eq!(idx.lookup(0), 0);
        assert_eq!(idx.lookup(8), 0);
        assert_eq!(idx.lookup(9), 100);
        assert_eq!(idx.lookup(18), 100);
        assert_eq!(idx.lookup(19), 250);
        assert_eq!(idx.lookup(1000), 400);
    }

    #[test]
    fn file_round_trips_and_rejects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.timeindex");
        let mut idx = TimeIndex::create(&path).unwrap();
        for (t, o) in [(10, 0), (20, 3), (30, 3)] {
            idx.push(TimeEntry {
                timestamp: t,
                relative_offset: o,
            });
        }
        // Nothing reaches the file before write_out.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        drop(idx.write_out().unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 36);
        // A second write_out appends only what is new.
        idx.push(TimeEntry {
            timestamp: 40,
            relative_offset: 5,
        });
        drop(idx.write_out().unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 48);
        idx.truncate_entries(3).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 36);
        let loaded = TimeIndex::load(&path, |_| true).unwrap().unwrap();
        assert_eq!(loaded.entries(), idx.entries());
        assert_eq!(loaded.last_below(20).unwrap().timestamp, 10);
        assert_eq!(loaded.last_below(10), None);
        assert_eq!(loaded.last_below(31).unwrap().timestamp, 30);
        // A validity predicate can reject entries (e.g. offsets past the log).
        assert!(
            TimeIndex::load(&path, |e| e.relative_offset < 3)
                .unwrap()
                .is_none()
        );
        // A torn tail.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all_at(&[1, 2, 3], 36)
            .unwrap();
        assert!(TimeIndex::load(&path, |_| true).unwrap().is_none());
        // Out of order.
        let opath = dir.path().join("0.index");
        let mut o = OffsetIndex::create(&opath).unwrap();
        o.push(oe(5, 10));
        o.push(oe(4, 20));
        drop(o.write_out().unwrap());
        assert!(OffsetIndex::load(&opath, |_| true).unwrap().is_none());
        assert!(
            OffsetIndex::load(&dir.path().join("missing.index"), |_| true)
                .unwrap()
                .is_none()
        );
    }
}
