//! The leader epoch cache (KIP-101) and its `leader-epoch-checkpoint` file.
//!
//! The cache maps each leader epoch to the first offset written in it. A follower compares
//! its epochs with the leader's to find where their logs diverge (KIP-279), instead of
//! trusting its high watermark, which can lose acknowledged records or keep divergent ones.
//!
//! # File format
//!
//! `leader-epoch-checkpoint` in the partition directory, Kafka's `CheckpointFile` text
//! format, UTF-8, each line ended by `\n`:
//!
//! ```text
//! 0                 the format version
//! 2                 the number of entries
//! 0 0               "<epoch> <start offset>", one per entry, epochs increasing
//! 3 1042
//! ```
//!
//! # Crash policy
//!
//! The file is replaced whole: the entries go to `leader-epoch-checkpoint.tmp`, which is
//! fsynced, renamed over the checkpoint, and the directory fsynced. A reader therefore sees
//! the old file or the new one, never a mix. A file that does not parse (bad version, a count
//! that disagrees with the lines, garbage, epochs or offsets that do not increase) is refused
//! with [`LeaderEpochCheckpointError`] rather than half-trusted; a leftover `.tmp` is ignored.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The checkpoint file's name in the partition directory.
pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// The only checkpoint format version.
pub const LEADER_EPOCH_CHECKPOINT_VERSION: u32 = 0;
/// Kafka's `UNDEFINED_EPOCH` in OffsetForLeaderEpoch and the diverging epoch.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One entry: the first offset written under a leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: i32,
    /// The offset of the first record written under it.
    pub start_offset: i64,
}

/// A checkpoint that could not be read or written.
#[derive(Debug, Error)]
pub enum LeaderEpochCheckpointError {
    /// The file system failed.
    #[error("leader epoch checkpoint {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// The file exists but is not a valid checkpoint.
    #[error("corrupt leader epoch checkpoint {path} at line {line}: {reason}")]
    Corrupt {
        path: PathBuf,
        /// The 1-based line at fault (the line after the last for a missing one).
        line: usize,
        reason: &'static str,
    },
}

/// The in-memory cache: entries in increasing epoch and start offset order.
///
/// Pure: it never touches the disk. Each mutation returns whether it changed anything, and
/// the owner writes the checkpoint ([`write_checkpoint`]) when it did, as Kafka flushes after
/// every change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    /// Strictly increasing in both epoch and start offset.
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding `entries`, which must increase strictly in epoch and start offset
    /// (as [`read_checkpoint`] guarantees); entries breaking that order are dropped as
    /// [`Self::assign`] would drop them.
    pub fn from_entries(entries: impl IntoIterator<Item = EpochEntry>) -> Self {
        let mut cache = Self::new();
        for e in entries {
            cache.assign(e.epoch, e.start_offset);
        }
        cache
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// The newest entry, if any.
    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The oldest entry, if any.
    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// The start offset of `epoch`, if the cache holds it.
    pub fn start_offset_of(&self, epoch: i32) -> Option<i64> {
        self.entries
            .iter()
            .find(|e| e.epoch == epoch)
            .map(|e| e.start_offset)
    }

    /// The epoch of the record at `offset`: the newest entry starting at or below it (Kafka's
    /// `epochForOffset`). `None` below the first entry or in an empty cache.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset` (Kafka's `LeaderEpochFileCache.assign`).
    ///
    /// Nothing changes when the newest entry already has this epoch at the same or a lower
    /// start offset. Otherwise every entry that is not strictly older and strictly lower than
    /// the new one (epoch `>=` or start offset `>=`) is removed from the end, so the cache
    /// stays monotonic, and the entry is added. Negative epochs or offsets are ignored (Kafka
    /// refuses them; batches from before KIP-101 carry epoch -1). Returns whether the cache
    /// changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        if let Some(last) = self.entries.last()
            && last.epoch == epoch
            && start_offset >= last.start_offset
        {
            return false;
        }
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// The `(epoch, end offset)` answer to OffsetForLeaderEpoch for `requested_epoch`
    /// (Kafka's `LeaderEpochFileCache.endOffsetFor`): the end offset is the start offset of
    /// the first epoch above the requested one, or `log_end_offset` when the requested epoch
    /// is the newest; the epoch is the largest one at or below the requested epoch, or the
    /// requested epoch itself when every known epoch is above it. `(UNDEFINED_EPOCH,
    /// UNDEFINED_EPOCH_OFFSET)` when the requested epoch is undefined, or newer than every
    /// epoch without being the newest (including an empty cache).
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> (i32, i64) {
        if requested_epoch == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return (requested_epoch, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested_epoch) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self
            .entries
            .iter()
            .rev()
            .find(|e| e.epoch <= requested_epoch)
        {
            None => (requested_epoch, higher.start_offset),
            Some(floor) => (floor.epoch, higher.start_offset),
        }
    }

    /// Drops the entries starting at or after `end_offset`, after the log was truncated to
    /// it (Kafka's `truncateFromEnd`). Returns whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        if end_offset < 0 {
            return false;
        }
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        self.entries.len() != before
    }

    /// Drops the entries wholly below `start_offset`, after the log start moved to it
    /// (Kafka's `truncateFromStart`): entries starting at or before it are removed, and the
    /// last of them comes back starting at `start_offset`, since its epoch still covers the
    /// first records kept. Returns whether the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let Some(first) = self.entries.first() else {
            return false;
        };
        if start_offset < 0 || first.start_offset >= start_offset {
            return false;
        }
        let removed = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        let floor = self.entries[removed - 1];
        self.entries.drain(..removed);
        self.entries.insert(
            0,
            EpochEntry {
                epoch: floor.epoch,
                start_offset,
            },
        );
        true
    }

    /// Empties the cache (a log truncated fully).
    pub fn clear(&mut self) -> bool {
        let changed = !self.entries.is_empty();
        self.entries.clear();
        changed
    }
}

/// Reads `dir/leader-epoch-checkpoint`. A missing file is an empty cache.
///
/// # Errors
///
/// [`LeaderEpochCheckpointError::Io`] when the file cannot be read,
/// [`LeaderEpochCheckpointError::Corrupt`] when it does not parse or its entries do not
/// increase.
pub fn read_checkpoint(dir: &Path) -> Result<LeaderEpochCache, LeaderEpochCheckpointError> {
    let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(LeaderEpochCache::new()),
        Err(source) => return Err(LeaderEpochCheckpointError::Io { path, source }),
    };
    parse_checkpoint(&bytes).map_err(|(line, reason)| LeaderEpochCheckpointError::Corrupt {
        path,
        line,
        reason,
    })
}

/// Parses the checkpoint text; the error is the 1-based line and the reason.
fn parse_checkpoint(bytes: &[u8]) -> Result<LeaderEpochCache, (usize, &'static str)> {
    let text = std::str::from_utf8(bytes).map_err(|_| (1, "not UTF-8"))?;
    // Every line, the last one included, ends with '\n'; a file cut short is torn.
    let Some(body) = text.strip_suffix('\n') else {
        return Err((text.lines().count().max(1), "missing final newline"));
    };
    let mut lines = body.split('\n');
    let version: u32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or((1, "bad version line"))?;
    if version != LEADER_EPOCH_CHECKPOINT_VERSION {
        return Err((1, "unknown version"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or((2, "bad entry count line"))?;
    let mut entries: Vec<EpochEntry> = Vec::new();
    for (i, line) in lines.enumerate() {
        let at = i + 3;
        let mut fields = line.split_whitespace();
        let (Some(epoch), Some(offset), None) = (fields.next(), fields.next(), fields.next())
        else {
            return Err((at, "entry is not two fields"));
        };
        let epoch: i32 = epoch.parse().map_err(|_| (at, "bad epoch"))?;
        let start_offset: i64 = offset.parse().map_err(|_| (at, "bad start offset"))?;
        if epoch < 0 || start_offset < 0 {
            return Err((at, "negative epoch or offset"));
        }
        if let Some(prev) = entries.last()
            && (epoch <= prev.epoch || start_offset <= prev.start_offset)
        {
            return Err((at, "entries do not increase"));
        }
        entries.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    if entries.len() != count {
        return Err((entries.len() + 3, "entry count disagrees with the lines"));
    }
    Ok(LeaderEpochCache { entries })
}

/// The checkpoint text for `cache`.
fn render_checkpoint(cache: &LeaderEpochCache) -> String {
    let mut text = format!(
        "{LEADER_EPOCH_CHECKPOINT_VERSION}\n{}\n",
        cache.entries.len()
    );
    for e in &cache.entries {
        text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    text
}

/// Writes `cache` to `dir/leader-epoch-checkpoint` atomically: temp file, fsync, rename,
/// directory fsync.
///
/// # Errors
///
/// [`LeaderEpochCheckpointError::Io`] when any step fails; the previous checkpoint is then
/// still whole.
pub fn write_checkpoint(
    dir: &Path,
    cache: &LeaderEpochCache,
) -> Result<(), LeaderEpochCheckpointError> {
    let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
    let tmp = dir.join(format!("{LEADER_EPOCH_CHECKPOINT_FILE}.tmp"));
    let text = render_checkpoint(cache);
    let io_at = |p: &Path| {
        let path = p.to_path_buf();
        move |source| LeaderEpochCheckpointError::Io { path, source }
    };
    let mut f = fs::File::create(&tmp).map_err(io_at(&tmp))?;
    f.write_all(text.as_bytes()).map_err(io_at(&tmp))?;
    f.sync_all().map_err(io_at(&tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io_at(&path))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
        c.entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    fn cache(list: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(list.iter().map(|&(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        }))
    }

    #[test]
    fn assign_appends_newer_epochs() {
        let mut c = LeaderEpochCache::new();
        assert!(c.assign(0, 0));
        assert!(c.assign(2, 10));
        assert!(c.assign(5, 12));
        assert_eq!(entries(&c), [(0, 0), (2, 10), (5, 12)]);
        assert_eq!(c.latest_epoch(), Some(5));
    }

    #[test]
    fn assign_ignores_the_same_epoch_at_a_later_offset() {
        let mut c = cache(&[(1, 5)]);
        assert!(!c.assign(1, 5));
        assert!(!c.assign(1, 9));
        assert_eq!(entries(&c), [(1, 5)]);
        // The same epoch at an earlier offset replaces the entry.
        assert!(c.assign(1, 3));
        assert_eq!(entries(&c), [(1, 3)]);
    }

    #[test]
    fn assign_removes_entries_that_would_not_be_monotonic() {
        // An older epoch removes the newer ones (Kafka warns and does the same).
        let mut c = cache(&[(1, 0), (3, 10), (4, 20)]);
        assert!(c.assign(2, 15));
        assert_eq!(entries(&c), [(1, 0), (2, 15)]);
        // A newer epoch at an offset at or below existing starts removes those entries.
        let mut c = cache(&[(1, 0), (3, 10), (4, 20)]);
        assert!(c.assign(6, 10));
        assert_eq!(entries(&c), [(1, 0), (6, 10)]);
    }

    #[test]
    fn assign_refuses_negative_values() {
        let mut c = LeaderEpochCache::new();
        assert!(!c.assign(-1, 0));
        assert!(!c.assign(0, -1));
        assert!(c.entries().is_empty());
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let c = cache(&[(2, 10), (4, 20), (7, 35)]);
        let leo = 50;
        // Undefined in, undefined out.
        assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, leo), (-1, -1));
        // The newest epoch ends at the log end.
        assert_eq!(c.end_offset_for(7, leo), (7, 50));
        // A known older epoch ends where the next starts.
        assert_eq!(c.end_offset_for(2, leo), (2, 20));
        assert_eq!(c.end_offset_for(4, leo), (4, 35));
        // An unknown epoch between two answers with the floor epoch.
        assert_eq!(c.end_offset_for(3, leo), (2, 20));
        assert_eq!(c.end_offset_for(6, leo), (4, 35));
        // Below every epoch: the requested epoch, ending where the first starts.
        assert_eq!(c.end_offset_for(1, leo), (1, 10));
        assert_eq!(c.end_offset_for(0, leo), (0, 10));
        // Above the newest: undefined.
        assert_eq!(c.end_offset_for(8, leo), (-1, -1));
        // An empty cache knows nothing.
        assert_eq!(LeaderEpochCache::new().end_offset_for(0, leo), (-1, -1));
    }

    #[test]
    fn epoch_for_offset_is_the_covering_entry() {
        let c = cache(&[(2, 10), (4, 20)]);
        assert_eq!(c.epoch_for_offset(9), None);
        assert_eq!(c.epoch_for_offset(10), Some(2));
        assert_eq!(c.epoch_for_offset(19), Some(2));
        assert_eq!(c.epoch_for_offset(20), Some(4));
        assert_eq!(c.epoch_for_offset(1000), Some(4));
        assert_eq!(LeaderEpochCache::new().epoch_for_offset(0), None);
    }

    #[test]
    fn truncate_from_end_drops_entries_at_or_after_the_offset() {
        let mut c = cache(&[(1, 0), (2, 10), (3, 20)]);
        assert!(!c.truncate_from_end(25));
        assert!(c.truncate_from_end(20));
        assert_eq!(entries(&c), [(1, 0), (2, 10)]);
        assert!(c.truncate_from_end(5));
        assert_eq!(entries(&c), [(1, 0)]);
        assert!(c.truncate_from_end(0));
        assert!(c.entries().is_empty());
        assert!(!c.truncate_from_end(-1));
    }

    #[test]
    fn truncate_from_start_keeps_the_covering_epoch() {
        let mut c = cache(&[(1, 0), (2, 10), (3, 20)]);
        assert!(!c.truncate_from_start(0));
        assert!(c.truncate_from_start(15));
        assert_eq!(entries(&c), [(2, 15), (3, 20)]);
        assert!(c.truncate_from_start(20));
        assert_eq!(entries(&c), [(3, 20)]);
        assert!(c.truncate_from_start(30));
        assert_eq!(entries(&c), [(3, 30)]);
        assert!(!LeaderEpochCache::new().truncate_from_start(3));
    }

    #[test]
    fn checkpoint_round_trips_in_kafkas_format() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(&[(0, 0), (3, 1042)]);
        write_checkpoint(dir.path(), &c).unwrap();
        let text = fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap();
        assert_eq!(text, "0\n2\n0 0\n3 1042\n");
        assert_eq!(read_checkpoint(dir.path()).unwrap(), c);
        assert!(!dir.path().join("leader-epoch-checkpoint.tmp").exists());
        // Empty caches round-trip too; a missing file reads as empty.
        write_checkpoint(dir.path(), &LeaderEpochCache::new()).unwrap();
        assert!(read_checkpoint(dir.path()).unwrap().entries().is_empty());
        let empty = tempfile::tempdir().unwrap();
        assert!(read_checkpoint(empty.path()).unwrap().entries().is_empty());
    }

    #[test]
    fn a_leftover_temp_file_is_ignored_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        write_checkpoint(dir.path(), &cache(&[(1, 0)])).unwrap();
        fs::write(dir.path().join("leader-epoch-checkpoint.tmp"), b"0\n5\n1 0").unwrap();
        assert_eq!(entries(&read_checkpoint(dir.path()).unwrap()), [(1, 0)]);
        write_checkpoint(dir.path(), &cache(&[(1, 0), (2, 7)])).unwrap();
        assert_eq!(
            entries(&read_checkpoint(dir.path()).unwrap()),
            [(1, 0), (2, 7)]
        );
    }

    #[test]
    fn garbage_and_torn_files_are_refused() {
        let bad: &[(&[u8], usize)] = &[
            (b"", 1),
            (b"1\n0\n", 1),
            (b"x\n0\n", 1),
            (b"0\n", 2),
            (b"0\ntwo\n", 2),
            (b"0\n2\n0 0\n", 4),
            (b"0\n1\n0 0\n3 5\n", 5),
            (b"0\n2\n0 0\n3 10", 4),
            (b"0\n1\n0\n", 3),
            (b"0\n1\n0 0 0\n", 3),
            (b"0\n1\na 0\n", 3),
            (b"0\n1\n0 -4\n", 3),
            (b"0\n2\n3 0\n2 5\n", 4),
            (b"0\n2\n1 5\n2 5\n", 4),
            (b"\xff\xfe\n", 1),
        ];
        for (i, &(bytes, line)) in bad.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE), bytes).unwrap();
            match read_checkpoint(dir.path()) {
                Err(LeaderEpochCheckpointError::Corrupt { line: at, .. }) => {
                    assert_eq!(at, line, "case {i}: {:?}", String::from_utf8_lossy(bytes))
                }
                other => panic!("case {i}: {other:?}"),
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Assign(i32, i64),
        TruncateFromEnd(i64),
        TruncateFromStart(i64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..20i32, 0..200i64).prop_map(|(e, o)| Op::Assign(e, o)),
            1 => (0..200i64).prop_map(Op::TruncateFromEnd),
            1 => (0..200i64).prop_map(Op::TruncateFromStart),
        ]
    }

    proptest::proptest! {
        /// Whatever happens, entries increase strictly in epoch and offset, each known epoch
        /// ends where the next starts (the newest at the log end), and the checkpoint
        /// round-trips.
        #[test]
        fn the_cache_stays_monotonic_and_round_trips(ops in proptest::collection::vec(op(), 0..40)) {
            let mut c = LeaderEpochCache::new();
            for op in ops {
                match op {
                    Op::Assign(e, o) => {
                        let newest = c.latest_entry();
                        let changed = c.assign(e, o);
                        if changed {
                            proptest::prop_assert_eq!(c.latest_entry(), Some(EpochEntry { epoch: e, start_offset: o }));
                        } else {
                            proptest::prop_assert_eq!(c.latest_entry(), newest);
                        }
                    }
                    Op::TruncateFromEnd(o) => {
                        c.truncate_from_end(o);
                        proptest::prop_assert!(c.entries().iter().all(|x| x.start_offset < o));
                    }
                    Op::TruncateFromStart(o) => {
                        let had = !c.entries().is_empty();
                        c.truncate_from_start(o);
                        if had {
                            proptest::prop_assert!(c.entries()[0].start_offset >= o);
                        }
                    }
                }
                for w in c.entries().windows(2) {
                    proptest::prop_assert!(w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
                }
                let leo = 1000;
                for (i, x) in c.entries().iter().enumerate() {
                    let end = c.entries().get(i + 1).map_or(leo, |n| n.start_offset);
                    proptest::prop_assert_eq!(c.end_offset_for(x.epoch, leo), (x.epoch, end));
                }
            }
            let text = render_checkpoint(&c);
            proptest::prop_assert_eq!(parse_checkpoint(text.as_bytes()), Ok(c));
        }
    }

    #[test]
    fn every_prefix_of_a_checkpoint_is_whole_or_refused() {
        let c = cache(&[(0, 0), (3, 1042), (11, 99999)]);
        let dir = tempfile::tempdir().unwrap();
        write_checkpoint(dir.path(), &c).unwrap();
        let full = fs::read(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap();
        for cut in 0..full.len() {
            fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE), &full[..cut]).unwrap();
            assert!(
                read_checkpoint(dir.path()).is_err(),
                "a checkpoint cut at byte {cut} was accepted"
            );
        }
    }
}
