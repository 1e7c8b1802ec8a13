//! Kafka's offset checkpoint files in each log directory: `recovery-point-offset-checkpoint`
//! (the offset below which each partition's log is known to be on disk) and
//! `log-start-offset-checkpoint` (each partition's log start offset where DeleteRecords moved
//! it above the first segment's base offset).
//!
//! # Byte format
//!
//! UTF-8 text, one item per line, `\n`-terminated (Kafka's `CheckpointFile` with the
//! `OffsetCheckpointFile` formatter):
//!
//! ```text
//! 0                      the format version
//! 2                      how many entries follow
//! orders 0 1048576       topic, partition, offset: separated by one space
//! orders 1 2097152
//! ```
//!
//! Topic names cannot hold spaces (Kafka's legal characters are `[a-zA-Z0-9._-]`), so the
//! last two fields are split off from the right.
//!
//! # Crash policy
//!
//! A file is replaced whole: written to `<name>.tmp`, fsynced, renamed over the old one and
//! the directory fsynced, so a crash leaves either the old contents or the new. A file that
//! does not parse is treated as absent (every log is then recovered in full, which is safe).

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::{IoContext, LogError};

/// The file name Kafka gives the recovery points of one log directory.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";

/// The file name Kafka gives the log start offsets of one log directory.
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";

/// The only version of the format.
const VERSION: u32 = 0;

/// Writes `entries` (topic, partition, offset) to `path` atomically (see the module docs).
///
/// # Errors
/// [`LogError::Io`] when the temporary file cannot be written or renamed, or the directory
/// cannot be fsynced.
pub fn write_offsets(path: &Path, entries: &[(String, i32, i64)]) -> Result<(), LogError> {
    let mut text = format!("{VERSION}\n{}\n", entries.len());
    for (topic, partition, offset) in entries {
        text.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    write_atomically(path, text.as_bytes())
}

/// Reads a file written by [`write_offsets`]. A missing file gives an empty map; a file that
/// does not parse (wrong version, count or line) gives an empty map too, with a warning.
///
/// # Errors
/// [`LogError::Io`] when the file exists but cannot be read.
pub fn read_offsets(path: &Path) -> Result<HashMap<(String, i32), i64>, LogError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e).at(path),
    };
    match parse(&text) {
        Some(map) => Ok(map),
        None => {
            tracing::warn!(file = %path.display(), "malformed checkpoint file; ignoring it");
            Ok(HashMap::new())
        }
    }
}

fn parse(text: &str) -> Option<HashMap<(String, i32), i64>> {
    let mut lines = text.lines();
    if lines.next()?.trim().parse::<u32>().ok()? != VERSION {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut map = HashMap::with_capacity(count);
    for _ in 0..count {
        let line = lines.next()?;
        let (rest, offset) = line.rsplit_once(' ')?;
        let (topic, partition) = rest.rsplit_once(' ')?;
        if topic.is_empty() {
            return None;
        }
        map.insert(
            (topic.to_owned(), partition.parse().ok()?),
            offset.parse().ok()?,
        );
    }
    Some(map)
}

/// Replaces `path` with `bytes`: temporary file, fsync, rename, directory fsync.
///
/// # Errors
/// [`LogError::Io`].
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp_name);
    let mut f = fs::File::create(&tmp).at(&tmp)?;
    f.write_all(bytes).at(&tmp)?;
    f.sync_all().at(&tmp)?;
    drop(f);
    fs::rename(&tmp, path).at(path)?;
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        fs::File::open(dir).and_then(|d| d.sync_all()).at(dir)?;
    }
    Ok(())
}

/// The recovery point recorded for the partition directory `dir` (`<topic>-<partition>`) in
/// its parent's [`RECOVERY_POINT_CHECKPOINT`]; 0 (recover everything, as Kafka does for a
/// log missing from the file) when the file, the entry or a parsable name is missing.
pub(crate) fn recovery_point_of(dir: &Path) -> i64 {
    let Some((parent, name)) = dir.parent().zip(dir.file_name().and_then(|n| n.to_str())) else {
        return 0;
    };
    let Some((topic, partition)) = name.rsplit_once('-') else {
        return 0;
    };
    let Ok(partition) = partition.parse::<i32>() else {
        return 0;
    };
    recovery_points(parent)
        .get(&(topic.to_owned(), partition))
        .copied()
        .unwrap_or(0)
}

/// Every partition's recovery point recorded in `log_dir`'s
/// `recovery-point-offset-checkpoint`. A partition that is absent, or a file that cannot be
/// read, means 0: recover everything (with a warning for the unreadable file). A broker
/// opening many partitions reads this once rather than once per partition.
#[must_use]
pub fn recovery_points(log_dir: &Path) -> HashMap<(String, i32), i64> {
    read_offsets(&log_dir.join(RECOVERY_POINT_CHECKPOINT)).unwrap_or_else(|e| {
        tracing::warn!(dir = %log_dir.display(), error = %e, "cannot read the recovery points; recovering every segment");
        HashMap::new()
    })
}

/// Every partition's log start offset recorded in `log_dir`'s
/// [`LOG_START_OFFSET_CHECKPOINT`]. A partition that is absent starts at its first segment's
/// base offset; a file that cannot be read counts as empty (with a warning), which can only
/// expose records below a DeleteRecords offset, never lose one above it.
#[must_use]
pub fn log_start_offsets(log_dir: &Path) -> HashMap<(String, i32), i64> {
    read_offsets(&log_dir.join(LOG_START_OFFSET_CHECKPOINT)).unwrap_or_else(|e| {
        tracing::warn!(dir = %log_dir.display(), error = %e, "cannot read the log start offsets; logs start at their first segment");
        HashMap::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_kafkas_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        let entries = vec![
            ("orders".to_owned(), 0, 1_048_576),
            ("a.b-c_d".to_owned(), 12, 7),
        ];
        write_offsets(&path, &entries).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "0\n2\norders 0 1048576\na.b-c_d 12 7\n"
        );
        let map = read_offsets(&path).unwrap();
        assert_eq!(map.len(), 2);
        assert_eq!(map[&("a.b-c_d".to_owned(), 12)], 7);
        assert_eq!(recovery_point_of(&dir.path().join("a.b-c_d-12")), 7);
        assert_eq!(recovery_point_of(&dir.path().join("orders-0")), 1_048_576);
        assert_eq!(recovery_point_of(&dir.path().join("orders-1")), 0);
        assert!(
            !dir.path()
                .join(format!("{RECOVERY_POINT_CHECKPOINT}.tmp"))
                .exists()
        );
    }

    #[test]
    fn a_missing_or_malformed_file_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        assert!(read_offsets(&path).unwrap().is_empty());
        for bad in ["1\n0\n", "0\n2\nt 0 5\n", "0\nx\n", "0\n1\nt zero 5\n", ""] {
            fs::write(&path, bad).unwrap();
            assert!(read_offsets(&path).unwrap().is_empty(), "{bad:?}");
        }
    }
}
