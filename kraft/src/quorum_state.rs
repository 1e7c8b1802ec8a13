//! The `quorum-state` file: the Raft election state a voter must not forget (KIP-595).
//!
//! A voter persists its current epoch, whom it voted for and the leader it knows *before*
//! it acts on them (grants a vote, follows a leader, starts an election). After a crash it
//! reads them back, so it never votes twice in one epoch and never goes back to an older
//! epoch (Raft §5.2, §5.4: at most one vote per term, and the term is stable storage).
//!
//! # Format
//!
//! Kafka's `FileQuorumStateStore` format, so that an operator who knows Kafka can read it:
//! one line of JSON holding `QuorumStateData` (camelCase field names) plus a
//! `data_version` field, in `<log.dirs>/__cluster_metadata-0/quorum-state`.
//!
//! ```text
//! {"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}
//! ```
//!
//! - `data_version` 1 (KIP-853, written by Strata): `leaderId`, `leaderEpoch`, `votedId`
//!   (all int32, -1 for none) and `votedDirectoryId` (a UUID in Kafka's 22-character
//!   URL-safe base64, all zeroes for none).
//! - `data_version` 0 (read only): the same without `votedDirectoryId`, plus `clusterId`,
//!   `appliedOffset` and `currentVoters`, which Kafka has stopped using and which are
//!   ignored here.
//!
//! Unknown fields are ignored, as Kafka's JSON reader does; a missing required field, a
//! value of the wrong type or out of range, or a version outside 0..=1 is refused.
//!
//! # Crash policy
//!
//! A write goes to `quorum-state.tmp`, which is fsynced, renamed over `quorum-state`, and
//! then the directory is fsynced so that the rename itself is durable. A crash at any point
//! leaves either the old file or the new one, never a mix; a leftover temp file is never
//! read and is replaced by the next write.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;
use uuid::Uuid;

use crate::meta_properties::{kafka_uuid_string, parse_kafka_uuid};

/// The file's name inside the metadata log directory (Kafka's `DEFAULT_FILE_NAME`).
pub const QUORUM_STATE_FILE: &str = "quorum-state";

/// The newest `data_version` this store reads, and the one it writes.
pub const QUORUM_STATE_VERSION: i16 = 1;

/// The file is one short line; anything much larger is not a quorum-state file.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The persisted election state (`QuorumStateData` version 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuorumStateData {
    /// The leader of `leader_epoch` this voter knows of, or -1.
    pub leader_id: i32,
    /// The current epoch (Raft's term); -1 before the first election.
    pub leader_epoch: i32,
    /// The candidate this voter voted for in `leader_epoch`, or -1.
    pub voted_id: i32,
    /// That candidate's log directory id (KIP-853), or the nil UUID.
    pub voted_directory_id: Uuid,
}

impl Default for QuorumStateData {
    /// Kafka's defaults: no leader, no epoch, no vote.
    fn default() -> Self {
        QuorumStateData {
            leader_id: -1,
            leader_epoch: -1,
            voted_id: -1,
            voted_directory_id: Uuid::nil(),
        }
    }
}

/// What the Raft core asks to persist (`raft::Action::PersistQuorumState`), in the file's
/// terms: -1 for no leader or vote, the nil UUID for no directory.
impl From<&crate::raft::QuorumState> for QuorumStateData {
    fn from(q: &crate::raft::QuorumState) -> Self {
        QuorumStateData {
            leader_id: q.leader.map_or(-1, |n| n.0),
            leader_epoch: q.epoch,
            voted_id: q.voted_for.map_or(-1, |k| k.id.0),
            voted_directory_id: q.voted_for.map_or(Uuid::nil(), |k| k.directory_id),
        }
    }
}

/// What the Raft core starts from after a restart. A file written before any election
/// (epoch -1, Kafka's default) starts at epoch 0, where every node starts.
impl From<QuorumStateData> for crate::raft::QuorumState {
    fn from(q: QuorumStateData) -> Self {
        crate::raft::QuorumState {
            epoch: q.leader_epoch.max(0),
            voted_for: (q.voted_id >= 0).then_some(crate::raft::ReplicaKey {
                id: crate::raft::NodeId(q.voted_id),
                directory_id: q.voted_directory_id,
            }),
            leader: (q.leader_id >= 0).then_some(crate::raft::NodeId(q.leader_id)),
        }
    }
}

/// Why the quorum state could not be read or written.
#[derive(Debug, Error)]
pub enum QuorumStateError {
    /// The file system refused.
    #[error("quorum state {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file is not a quorum-state file.
    #[error("quorum state {path} is malformed: {reason}")]
    Malformed { path: PathBuf, reason: String },
    /// The file was written by a newer (or broken) version.
    #[error(
        "quorum state {path}: data_version ({version}) is not within the min (0) and max (1) supported version"
    )]
    UnsupportedVersion { path: PathBuf, version: i64 },
}

/// Reads and atomically replaces `quorum-state` in one metadata log directory.
#[derive(Debug, Clone)]
pub struct QuorumStateStore {
    /// `<metadata log dir>/quorum-state`.
    path: PathBuf,
}

impl QuorumStateStore {
    /// The store for `metadata_log_dir` (e.g. `<log.dirs>/__cluster_metadata-0`). Nothing
    /// is touched until [`read`](Self::read) or [`write`](Self::write).
    #[must_use]
    pub fn new(metadata_log_dir: &Path) -> Self {
        QuorumStateStore {
            path: metadata_log_dir.join(QUORUM_STATE_FILE),
        }
    }

    /// Where the state lives.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn temp_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".tmp");
        PathBuf::from(name)
    }

    /// The persisted state, or `None` if none was ever written.
    ///
    /// # Errors
    ///
    /// [`QuorumStateError`] if the file cannot be read or is not a quorum-state file. The
    /// caller must not start as a voter then: guessing the epoch or the vote could let it
    /// vote twice in one epoch.
    pub fn read(&self) -> Result<Option<QuorumStateData>, QuorumStateError> {
        let io_err = |source| QuorumStateError::Io {
            path: self.path.clone(),
            source,
        };
        let file = match fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(e)),
        };
        let mut text = String::new();
        io::Read::read_to_string(&mut io::Read::take(file, MAX_FILE_BYTES + 1), &mut text)
            .map_err(|e| {
                if e.kind() == io::ErrorKind::InvalidData {
                    self.malformed("not UTF-8")
                } else {
                    io_err(e)
                }
            })?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(self.malformed("larger than 64 KiB"));
        }
        // Kafka reads the first line only.
        let line = text.lines().next().unwrap_or("");
        if line.trim().is_empty() {
            return Err(self.malformed("file ended prematurely"));
        }
        self.parse(line).map(Some)
    }

    fn malformed(&self, reason: impl Into<String>) -> QuorumStateError {
        QuorumStateError::Malformed {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    fn parse(&self, line: &str) -> Result<QuorumStateData, QuorumStateError> {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| self.malformed(format!("not JSON: {e}")))?;
        let obj = value
            .as_object()
            .ok_or_else(|| self.malformed("not a JSON object"))?;
        let version = obj
            .get("data_version")
            .ok_or_else(|| self.malformed("no data_version field"))?
            .as_i64()
            .ok_or_else(|| self.malformed("data_version is not an integer"))?;
        if !(0..=i64::from(QUORUM_STATE_VERSION)).contains(&version) {
            return Err(QuorumStateError::UnsupportedVersion {
                path: self.path.clone(),
                version,
            });
        }
        let int32 = |name: &str| -> Result<i32, QuorumStateError> {
            let v = obj
                .get(name)
                .ok_or_else(|| self.malformed(format!("no {name} field")))?;
            v.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| self.malformed(format!("{name} is not an int32")))
        };
        let voted_directory_id = if version >= 1 {
            let s = obj
                .get("votedDirectoryId")
                .ok_or_else(|| self.malformed("no votedDirectoryId field"))?
                .as_str()
                .ok_or_else(|| self.malformed("votedDirectoryId is not a string"))?;
            parse_kafka_uuid(s)
                .ok_or_else(|| self.malformed(format!("votedDirectoryId {s:?} is not a UUID")))?
        } else {
            Uuid::nil()
        };
        let state = QuorumStateData {
            leader_id: int32("leaderId")?,
            leader_epoch: int32("leaderEpoch")?,
            voted_id: int32("votedId")?,
            voted_directory_id,
        };
        if state.leader_id < -1 || state.voted_id < -1 || state.leader_epoch < -1 {
            return Err(self.malformed("a node id or epoch below -1"));
        }
        Ok(state)
    }

    /// Persists `state`, replacing the previous one atomically (see the module's crash
    /// policy). When this returns `Ok`, the new state survives a crash of the machine.
    ///
    /// # Errors
    ///
    /// [`QuorumStateError::Io`] if any step fails; the previous file is then still intact
    /// (or, if the rename happened but the directory fsync failed, the new one may or may
    /// not survive a crash, so the caller must not act on `state`).
    pub fn write(&self, state: &QuorumStateData) -> Result<(), QuorumStateError> {
        let line = render(state);
        let tmp = self.temp_path();
        let result = (|| -> io::Result<()> {
            {
                let mut f = fs::File::create(&tmp)?;
                f.write_all(line.as_bytes())?;
                f.sync_all()?;
            }
            fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent() {
                // The rename is durable only once the directory entry is.
                fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        result.map_err(|source| {
            let _ = fs::remove_file(&tmp);
            QuorumStateError::Io {
                path: self.path.clone(),
                source,
            }
        })
    }
}

/// The one JSON line, in Kafka's field order.
fn render(state: &QuorumStateData) -> String {
    let value = serde_json::json!({
        "leaderId": state.leader_id,
        "leaderEpoch": state.leader_epoch,
        "votedId": state.voted_id,
        "votedDirectoryId": kafka_uuid_string(state.voted_directory_id),
        "data_version": QUORUM_STATE_VERSION,
    });
    // serde_json writes the keys sorted; the order does not matter to a JSON reader,
    // Kafka's included.
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, QuorumStateStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = QuorumStateStore::new(dir.path());
        (dir, store)
    }

    fn sample() -> QuorumStateData {
        QuorumStateData {
            leader_id: 3,
            leader_epoch: 7,
            voted_id: 2,
            voted_directory_id: Uuid::from_u128(0x27c6_803d_c7cb_42dd_9baa_cd49_4ffa_cc81),
        }
    }

    #[test]
    fn no_file_is_no_state() {
        let (_dir, store) = store();
        assert_eq!(store.read().unwrap(), None);
    }

    #[test]
    fn round_trip_and_overwrite() {
        let (_dir, store) = store();
        store.write(&sample()).unwrap();
        assert_eq!(store.read().unwrap(), Some(sample()));
        let next = QuorumStateData {
            leader_epoch: 8,
            ..QuorumStateData::default()
        };
        store.write(&next).unwrap();
        assert_eq!(store.read().unwrap(), Some(next));
        assert!(!store.temp_path().exists(), "the temp file is renamed away");
    }

    #[test]
    fn writes_kafkas_json_line() {
        let (_dir, store) = store();
        store.write(&sample()).unwrap();
        let text = fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains('\n'), "one line: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["leaderId"], 3);
        assert_eq!(v["leaderEpoch"], 7);
        assert_eq!(v["votedId"], 2);
        assert_eq!(v["votedDirectoryId"], "J8aAPcfLQt2bqs1JT_rMgQ");
        assert_eq!(v["data_version"], 1);
    }

    #[test]
    fn reads_kafkas_version_0_and_1_files() {
        let (_dir, store) = store();
        // The examples in Kafka's FileQuorumStateStore documentation.
        fs::write(
            store.path(),
            r#"{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[],"data_version":0}"#,
        )
        .unwrap();
        assert_eq!(
            store.read().unwrap(),
            Some(QuorumStateData {
                leader_id: 1,
                leader_epoch: 2,
                voted_id: -1,
                voted_directory_id: Uuid::nil(),
            })
        );
        fs::write(
            store.path(),
            "{\"leaderId\":-1,\"leaderEpoch\":2,\"votedId\":1,\"votedDirectoryId\":\"J8aAPcfLQt2bqs1JT_rMgQ\",\"data_version\":1,\"futureField\":true}\n",
        )
        .unwrap();
        let s = store.read().unwrap().unwrap();
        assert_eq!((s.leader_id, s.leader_epoch, s.voted_id), (-1, 2, 1));
        assert_eq!(s.voted_directory_id, sample().voted_directory_id);
    }

    #[test]
    fn a_torn_temp_file_never_replaces_the_good_one() {
        let (_dir, store) = store();
        store.write(&sample()).unwrap();
        // A crash mid-write leaves a partial temp file beside the good state.
        let full = render(&QuorumStateData {
            leader_epoch: 99,
            ..sample()
        });
        for cut in [0, 1, full.len() / 2, full.len() - 1] {
            fs::write(store.temp_path(), &full.as_bytes()[..cut]).unwrap();
            assert_eq!(store.read().unwrap(), Some(sample()), "cut at {cut}");
        }
        // The next write replaces the leftover and succeeds.
        let next = QuorumStateData {
            leader_epoch: 100,
            ..sample()
        };
        store.write(&next).unwrap();
        assert_eq!(store.read().unwrap(), Some(next));
        assert!(!store.temp_path().exists());
    }

    #[test]
    fn a_failed_write_leaves_the_previous_state() {
        let (_dir, store) = store();
        store.write(&sample()).unwrap();
        // A directory where the temp file should go makes the write fail.
        fs::create_dir(store.temp_path()).unwrap();
        assert!(matches!(
            store.write(&QuorumStateData::default()),
            Err(QuorumStateError::Io { .. })
        ));
        assert_eq!(store.read().unwrap(), Some(sample()));
    }

    #[test]
    fn garbage_is_refused() {
        let (_dir, store) = store();
        let cases: &[&[u8]] = &[
            b"",
            b"\n",
            b"not json",
            b"[1,2,3]",
            b"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1}",
            b"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":\"1\"}",
            b"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"votedDirectoryId\":\"AAAAAAAAAAAAAAAAAAAAAA\",\"data_version\":2}",
            b"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":-1}",
            b"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":1}",
            b"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"votedDirectoryId\":\"short\",\"data_version\":1}",
            b"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"votedDirectoryId\":\"AAAAAAAAAAAAAAAAAAAAAB\",\"data_version\":1}",
            b"{\"leaderId\":1,\"leaderEpoch\":4294967296,\"votedId\":-1,\"data_version\":0}",
            b"{\"leaderId\":1.5,\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":0}",
            b"{\"leaderId\":-7,\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":0}",
            b"{\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":0}",
            b"\xff\xfe{}",
            b"{\"leaderId\":1,\"leaderEpoch\":2,\"votedId\":-1,\"data_version\":0",
        ];
        for bytes in cases {
            fs::write(store.path(), bytes).unwrap();
            assert!(
                store.read().is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let huge = vec![b' '; (MAX_FILE_BYTES + 10) as usize];
        fs::write(store.path(), huge).unwrap();
        assert!(store.read().is_err());
    }

    #[test]
    fn converts_to_and_from_the_raft_cores_state() {
        let core = crate::raft::QuorumState::from(sample());
        assert_eq!(core.epoch, 7);
        assert_eq!(core.leader, Some(crate::raft::NodeId(3)));
        assert_eq!(
            core.voted_for,
            Some(crate::raft::ReplicaKey {
                id: crate::raft::NodeId(2),
                directory_id: sample().voted_directory_id,
            })
        );
        assert_eq!(QuorumStateData::from(&core), sample());
        let fresh = crate::raft::QuorumState::from(QuorumStateData::default());
        assert_eq!(
            (fresh.epoch, fresh.leader, fresh.voted_for),
            (0, None, None)
        );
    }

    #[test]
    fn kafka_uuid_strings_parse() {
        for id in [Uuid::nil(), Uuid::from_u128(1), Uuid::from_u128(u128::MAX)] {
            assert_eq!(parse_kafka_uuid(&kafka_uuid_string(id)), Some(id));
        }
        assert_eq!(parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAAA="), None);
    }
}
