//! The leader epoch cache kept by `Log` (KIP-101): epochs stamped and assigned on append,
//! `leader-epoch-checkpoint` written and reloaded, and the cache kept consistent with the log
//! across truncation, retention, crashes (kill -9, torn tails) and a lost checkpoint.

use std::fs;
use std::path::Path;

use bytes::Bytes;
use proptest::prelude::*;
use strata_protocol::record_batch::{self, SimpleRecord, encode_batch};
use strata_storage::leader_epoch::{EpochEntry, LEADER_EPOCH_CHECKPOINT_FILE, read_checkpoint};
use strata_storage::{Log, LogConfig};

fn batch(records: usize) -> Vec<u8> {
    let recs: Vec<SimpleRecord> = (0..records)
        .map(|i| SimpleRecord {
            key: None,
            value: Some(Bytes::from(vec![b'v'; 20 + i])),
            timestamp: 1,
            headers: vec![],
        })
        .collect();
    encode_batch(0, &recs).to_vec()
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 100,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

fn entries(log: &Log) -> Vec<(i32, i64)> {
    log.leader_epochs()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

fn on_disk(dir: &Path) -> Vec<(i32, i64)> {
    read_checkpoint(dir)
        .unwrap()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

/// (base offset, partition leader epoch) of every batch in the log, as stored.
fn stored_batches(log: &Log) -> Vec<(i64, i32)> {
    let r = log
        .read(log.log_start_offset(), u32::MAX, log.log_end_offset(), true)
        .unwrap();
    let mut bytes = Vec::new();
    for region in &r.regions {
        region.read_into(&mut bytes).unwrap();
    }
    record_batch::batches(&bytes)
        .map(|b| {
            let b = b.unwrap();
            b.verify_crc().unwrap();
            (b.base_offset(), b.partition_leader_epoch())
        })
        .collect()
}

/// The cache the stored batches imply: each batch of an epoch newer than all before it starts
/// that epoch (at the log start at the earliest).
fn implied(log: &Log) -> Vec<(i32, i64)> {
    let mut out: Vec<(i32, i64)> = Vec::new();
    for (base, epoch) in stored_batches(log) {
        if out.last().is_none_or(|&(e, _)| epoch > e) {
            out.push((epoch, base.max(log.log_start_offset())));
        }
    }
    out
}

#[test]
fn append_stamps_the_epoch_and_assigns_its_start_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert!(entries(&log).is_empty());
    assert!(
        !dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE).exists(),
        "an empty log writes no checkpoint"
    );
    log.append(&mut batch(2), 0, 0).unwrap();
    log.append(&mut batch(3), 0, 0).unwrap();
    log.append(&mut batch(1), 3, 0).unwrap();
    log.append(&mut batch(4), 7, 0).unwrap();
    assert_eq!(entries(&log), [(0, 0), (3, 5), (7, 6)]);
    assert_eq!(
        stored_batches(&log),
        [(0, 0), (2, 0), (5, 3), (6, 7)],
        "each batch carries the epoch it was appended in"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap(),
        "0\n3\n0 0\n3 5\n7 6\n"
    );
    // OffsetForLeaderEpoch: an epoch ends where the next starts; the newest at the log end.
    assert_eq!(log.end_offset_for_epoch(0), (0, 5));
    assert_eq!(log.end_offset_for_epoch(2), (0, 5));
    assert_eq!(log.end_offset_for_epoch(3), (3, 6));
    assert_eq!(log.end_offset_for_epoch(7), (7, 10));
    assert_eq!(log.end_offset_for_epoch(8), (-1, -1));
    log.close().unwrap();
    let log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(entries(&log), [(0, 0), (3, 5), (7, 6)]);
}

#[test]
fn becoming_leader_starts_the_epoch_at_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    log.append(&mut batch(2), 1, 0).unwrap();
    assert!(log.maybe_assign_leader_epoch(4).unwrap());
    assert!(!log.maybe_assign_leader_epoch(4).unwrap(), "already there");
    assert!(
        !log.maybe_assign_leader_epoch(2).unwrap(),
        "older epochs change nothing"
    );
    assert_eq!(entries(&log), [(1, 0), (4, 2)]);
    assert_eq!(log.end_offset_for_epoch(4), (4, 2));
    assert_eq!(log.end_offset_for_epoch(1), (1, 2));
    // The first batch of the epoch does not move its start.
    log.append(&mut batch(1), 4, 0).unwrap();
    assert_eq!(entries(&log), [(1, 0), (4, 2)]);
    assert_eq!(on_disk(dir.path()), [(1, 0), (4, 2)]);
}

#[test]
fn truncation_and_retention_truncate_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    for epoch in 0..6 {
        log.append(&mut batch(3), epoch, 0).unwrap();
        log.roll_if_not_empty().unwrap();
    }
    assert_eq!(
        entries(&log),
        [(0, 0), (1, 3), (2, 6), (3, 9), (4, 12), (5, 15)]
    );
    // A follower's truncation (KIP-101) drops the epochs that started at or after the cut.
    log.truncate_to(10).unwrap();
    assert_eq!(log.log_end_offset(), 9, "the cut fell inside a batch");
    assert_eq!(entries(&log), [(0, 0), (1, 3), (2, 6)]);
    assert_eq!(on_disk(dir.path()), entries(&log));
    // Deleting whole segments moves the covering epoch up to the new log start.
    assert_eq!(log.delete_segments_before(4).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 3);
    assert_eq!(entries(&log), [(1, 3), (2, 6)]);
    assert_eq!(entries(&log), implied(&log));
    assert_eq!(on_disk(dir.path()), entries(&log));
    // Record deletion (DeleteRecords) moves the covering epoch up to the new log start too.
    log.increment_log_start_offset(7, log.log_end_offset())
        .unwrap();
    assert_eq!(entries(&log), [(2, 7)]);
    assert_eq!(on_disk(dir.path()), entries(&log));
    // A truncation below the log start empties the log and the cache.
    log.truncate_to(0).unwrap();
    assert!(entries(&log).is_empty());
    assert!(on_disk(dir.path()).is_empty());
}

/// A replica that led an epoch without writing in it holds an entry past its last record. A
/// truncation at or past the log end removes no record but drops that entry, as Kafka's
/// `truncateTo` does; otherwise, as a follower, it would send that epoch as its last fetched
/// one for ever and its leader would answer a divergence at its own log end every time.
#[test]
fn a_truncation_at_the_log_end_drops_an_epoch_no_record_carries() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    log.append(&mut batch(3), 4, 0).unwrap();
    assert!(log.maybe_assign_leader_epoch(5).unwrap());
    assert_eq!(entries(&log), [(4, 0), (5, 3)]);
    log.truncate_to(3).unwrap();
    assert_eq!(log.log_end_offset(), 3, "no record went");
    assert_eq!(entries(&log), [(4, 0)]);
    assert_eq!(on_disk(dir.path()), entries(&log));
    // Past the log end too; and a cache that ends in a written epoch stays as it is.
    assert!(log.maybe_assign_leader_epoch(6).unwrap());
    log.truncate_to(10).unwrap();
    assert_eq!(entries(&log), [(4, 0)]);
    log.append(&mut batch(1), 7, 0).unwrap();
    log.truncate_to(4).unwrap();
    assert_eq!(entries(&log), [(4, 0), (7, 3)]);
    assert_eq!(on_disk(dir.path()), entries(&log));
}

/// kill -9: nothing flushed or closed, then a tail torn at every byte of the last batch (the
/// write of the newest epoch's first batch did not finish). The cache reopened never claims an
/// epoch whose records are gone, and never lacks one whose records survived.
#[test]
fn a_crash_leaves_the_cache_consistent_with_the_recovered_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = Log::open_with(&path, LogConfig::default(), 0, false).unwrap();
    log.append_unflushed(&mut batch(2), 0, 0).unwrap();
    log.append_unflushed(&mut batch(2), 1, 0).unwrap();
    let before_last = fs::metadata(path.join("00000000000000000000.log"))
        .unwrap()
        .len();
    log.append_unflushed(&mut batch(2), 5, 0).unwrap();
    let full = fs::read(path.join("00000000000000000000.log")).unwrap();
    drop(log); // kill -9: no flush, no clean-shutdown marker
    assert_eq!(on_disk(&path), [(0, 0), (1, 2), (5, 4)]);

    let log = Log::open_with(&path, LogConfig::default(), 0, false).unwrap();
    assert_eq!(entries(&log), [(0, 0), (1, 2), (5, 4)]);
    drop(log);
    for cut in (before_last..full.len() as u64).step_by(7) {
        fs::write(path.join("00000000000000000000.log"), &full[..cut as usize]).unwrap();
        // The checkpoint as the crash left it: written before the batch.
        strata_storage::leader_epoch::write_checkpoint(
            &path,
            &strata_storage::leader_epoch::LeaderEpochCache::from_entries([
                EpochEntry {
                    epoch: 0,
                    start_offset: 0,
                },
                EpochEntry {
                    epoch: 1,
                    start_offset: 2,
                },
                EpochEntry {
                    epoch: 5,
                    start_offset: 4,
                },
            ]),
        )
        .unwrap();
        let log = Log::open_with(&path, LogConfig::default(), 0, false).unwrap();
        assert_eq!(log.log_end_offset(), 4, "cut at {cut}");
        assert_eq!(entries(&log), [(0, 0), (1, 2)], "cut at {cut}");
        assert_eq!(entries(&log), implied(&log));
        assert_eq!(on_disk(&path), entries(&log), "the file is rewritten");
        assert_eq!(log.end_offset_for_epoch(1), (1, 4));
    }
}

#[test]
fn a_missing_or_corrupt_checkpoint_is_rebuilt_from_the_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    for epoch in [0, 0, 2, 2, 2, 3, 9, 9] {
        log.append(&mut batch(2), epoch, 0).unwrap();
    }
    let expected = entries(&log);
    assert_eq!(expected, [(0, 0), (2, 4), (3, 10), (9, 12)]);
    drop(log);
    let file = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
    // A log written before the cache existed has no checkpoint.
    fs::remove_file(&file).unwrap();
    let log = Log::open(dir.path(), small_config(), 0).unwrap();
    assert_eq!(entries(&log), expected);
    assert_eq!(on_disk(dir.path()), expected);
    drop(log);
    // A checkpoint that does not parse is not half-trusted.
    fs::write(&file, b"0\n4\n0 0\n2 4\n3 1").unwrap();
    let log = Log::open(dir.path(), small_config(), 0).unwrap();
    assert_eq!(entries(&log), expected);
    assert_eq!(on_disk(dir.path()), expected);
}

#[derive(Debug, Clone)]
enum Op {
    /// Append a batch of this many records in the current epoch plus this bump.
    Append(usize, i32),
    /// Truncate to this fraction (per mille) of the log end.
    Truncate(u16),
    /// Drop segments below this fraction of the log end.
    DeleteBefore(u16),
    /// Close cleanly and reopen.
    Reopen,
    /// kill -9 and cut the active segment this many bytes short.
    Crash(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1..4usize, prop_oneof![3 => Just(0), 1 => 1..3i32]).prop_map(|(n, b)| Op::Append(n, b)),
        1 => (0..1000u16).prop_map(Op::Truncate),
        1 => (0..1000u16).prop_map(Op::DeleteBefore),
        1 => Just(Op::Reopen),
        1 => (0..200u16).prop_map(Op::Crash),
    ]
}

fn active_segment(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever happens to the log, the cache (in memory and on disk) is exactly what its
    /// batches imply.
    #[test]
    fn the_cache_always_matches_the_batches(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let mut log = Log::open_with(&path, small_config(), 0, false).unwrap();
        let mut epoch = 0;
        for op in ops {
            match op {
                Op::Append(n, bump) => {
                    epoch += bump;
                    log.append_unflushed(&mut batch(n), epoch, 0).unwrap();
                }
                Op::Truncate(f) => {
                    let end = log.log_end_offset() * i64::from(f) / 1000;
                    log.truncate_to(end.max(log.log_start_offset())).unwrap();
                }
                Op::DeleteBefore(f) => {
                    let end = log.log_end_offset() * i64::from(f) / 1000;
                    log.delete_segments_before(end).unwrap();
                }
                Op::Reopen => {
                    log.close().unwrap();
                    log = Log::open_with(&path, small_config(), 0, true).unwrap();
                }
                Op::Crash(short) => {
                    drop(log);
                    let active = active_segment(&path);
                    let len = fs::metadata(&active).unwrap().len();
                    fs::OpenOptions::new().write(true).open(&active).unwrap()
                        .set_len(len.saturating_sub(u64::from(short))).unwrap();
                    log = Log::open_with(&path, small_config(), 0, false).unwrap();
                }
            }
            prop_assert_eq!(entries(&log), implied(&log));
            if path.join(LEADER_EPOCH_CHECKPOINT_FILE).exists() {
                prop_assert_eq!(on_disk(&path), entries(&log));
            } else {
                prop_assert!(entries(&log).is_empty());
            }
        }
    }
}
