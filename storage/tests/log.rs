//! Behaviour of `Log` through its public API: append/read, roll, recovery, retention,
//! timestamp lookup, truncation, and a property test against a `Vec` model.

use std::fs;
use std::path::Path;

use bytes::Bytes;
use proptest::prelude::*;
use strata_protocol::record_batch::{
    self, RecordBatchView, SimpleRecord, TimestampType, encode_batch,
};
use strata_storage::{Log, LogConfig, LogError, ReadResult, TimestampOffset, io};

fn batch(timestamps: &[i64], value_len: usize) -> Vec<u8> {
    let recs: Vec<SimpleRecord> = timestamps
        .iter()
        .map(|&t| SimpleRecord {
            key: None,
            value: Some(Bytes::from(vec![b'v'; value_len])),
            timestamp: t,
            headers: vec![],
        })
        .collect();
    encode_batch(0, &recs).to_vec()
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        index_interval_bytes: 100,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

fn bytes_of(r: &ReadResult) -> Vec<u8> {
    let mut out = Vec::new();
    for region in &r.regions {
        region.read_into(&mut out).unwrap();
    }
    assert_eq!(out.len() as u64, r.bytes);
    out
}

/// (offset, timestamp) of every record in the read.
fn records_of(r: &ReadResult) -> Vec<(i64, i64)> {
    let bytes = bytes_of(r);
    let mut out = Vec::new();
    for b in record_batch::batches(&bytes) {
        let b = b.unwrap();
        b.verify_crc().unwrap();
        for rec in b.records().unwrap() {
            let rec = rec.unwrap();
            out.push((rec.offset, rec.timestamp));
        }
    }
    out
}

fn read_all(log: &Log, from: i64) -> Vec<(i64, i64)> {
    let r = log
        .read(from, u32::MAX, log.log_end_offset(), true)
        .unwrap();
    records_of(&r)
}

fn segment_logs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    v.sort();
    v
}

#[test]
fn append_assigns_offsets_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    let info = log.append(&mut batch(&[10, 11, 12], 5), 3, 100).unwrap();
    assert_eq!(
        (info.base_offset, info.last_offset, info.record_count),
        (0, 2, 3)
    );
    assert_eq!(info.log_append_time, -1);
    let mut two = [batch(&[20], 5), batch(&[21, 22], 5)].concat();
    let info = log.append(&mut two, 4, 100).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (3, 5));
    assert_eq!(log.log_end_offset(), 6);

    let r = log.read(0, u32::MAX, 6, false).unwrap();
    assert_eq!(r.regions.len(), 1);
    let bytes = bytes_of(&r);
    let views: Vec<_> = record_batch::batches(&bytes).map(Result::unwrap).collect();
    assert_eq!(views.len(), 3);
    assert_eq!(views[0].partition_leader_epoch(), 3);
    assert_eq!(views[2].partition_leader_epoch(), 4);
    assert_eq!(views[2].base_offset(), 4);
    // Mid-batch fetch offset returns the whole batch.
    assert_eq!(read_all(&log, 5).first().unwrap().0, 4);
    // Read at log end: empty; past it: out of range.
    assert_eq!(log.read(6, 100, 6, true).unwrap().bytes, 0);
    assert!(matches!(
        log.read(7, 100, 7, true),
        Err(LogError::OffsetOutOfRange {
            requested: 7,
            log_start: 0,
            log_end: 6
        })
    ));
    // The high watermark bounds the read: batch [3] ends at 3 < 4, batch [4,5] does not.
    assert_eq!(
        records_of(&log.read(0, u32::MAX, 4, true).unwrap()).len(),
        4
    );
    // max_bytes: zero bytes allowed, but min_one_batch returns the first batch anyway.
    assert_eq!(log.read(0, 1, 6, false).unwrap().bytes, 0);
    assert_eq!(records_of(&log.read(0, 1, 6, true).unwrap()).len(), 3);
    let first_len = views[0].total_len() as u32;
    assert_eq!(
        log.read(0, first_len + 1, 6, false).unwrap().bytes,
        u64::from(first_len)
    );
}

#[test]
fn bad_batches_are_rejected_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    let good = batch(&[1], 3);
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 0xff;
    let mut set = [good.clone(), bad_crc].concat();
    assert!(matches!(
        log.append(&mut set, 0, 0),
        Err(LogError::CorruptMessage { position, .. }) if position == good.len()
    ));
    let mut truncated = good[..good.len() - 2].to_vec();
    assert!(matches!(
        log.append(&mut truncated, 0, 0),
        Err(LogError::CorruptMessage { .. })
    ));
    let mut bad_magic = good.clone();
    bad_magic[16] = 1;
    assert!(matches!(
        log.append(&mut bad_magic, 0, 0),
        Err(LogError::InvalidRecord { .. })
    ));
    let mut big = batch(&[1], 2_000_000);
    assert!(matches!(
        log.append(&mut big, 0, 0),
        Err(LogError::MessageTooLarge { max: 1_048_588, .. })
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_bytes(), 0);
    let info = log.append(&mut Vec::new(), 0, 0).unwrap();
    assert_eq!((info.base_offset, info.record_count), (-1, 0));
}

#[test]
fn log_append_time_stamps_batches() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config, 0).unwrap();
    let info = log.append(&mut batch(&[1, 2], 3), 0, 5555).unwrap();
    assert_eq!(info.log_append_time, 5555);
    let bytes = bytes_of(&log.read(0, u32::MAX, 2, true).unwrap());
    let v = RecordBatchView::parse(&bytes).unwrap();
    v.verify_crc().unwrap();
    assert_eq!(v.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(v.max_timestamp(), 5555);
    assert_eq!(
        log.max_timestamp(),
        Some(TimestampOffset {
            timestamp: 5555,
            offset: 0
        })
    );
}

/// Rolling seals segments (an fsync of the `.log` and both indexes), so this runs the write
/// and fsync paths of each I/O backend end to end, including a reopen.
#[test]
fn rolls_by_size_and_reads_across_segments() {
    rolls_by_size_with(io::Backend::Uring);
}

#[test]
fn the_pwrite_fallback_rolls_and_reopens_the_same() {
    rolls_by_size_with(io::Backend::Std);
}

fn rolls_by_size_with(backend: io::Backend) {
    io::set_thread_backend(Some(backend));
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    for i in 0..40 {
        log.append(&mut batch(&[i, i + 1], 50), 0, 0).unwrap();
    }
    let names = segment_logs(dir.path());
    assert!(names.len() > 3, "{names:?}");
    assert_eq!(names[0], "00000000000000000000.log");
    for n in &names {
        assert_eq!(n.len(), 24);
        assert!(fs::metadata(dir.path().join(n)).unwrap().len() <= 1000);
    }
    let all = read_all(&log, 0);
    assert_eq!(all.len(), 80);
    assert!(all.iter().enumerate().all(|(i, (o, _))| *o == i as i64));
    for from in 0..80 {
        assert_eq!(read_all(&log, from)[0].0, from - from % 2);
    }
    log.close().unwrap();
    let log = Log::open(dir.path(), small_config(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 80);
    assert_eq!(read_all(&log, 33).len(), 48);
    io::set_thread_backend(None);
}

#[test]
fn rolls_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config, 0).unwrap();
    log.append(&mut batch(&[1], 1), 0, 10_000).unwrap();
    log.append(&mut batch(&[1], 1), 0, 10_500).unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append(&mut batch(&[1], 1), 0, 11_001).unwrap();
    assert_eq!(log.segment_count(), 2);
    assert_eq!(read_all(&log, 0).len(), 3);
}

#[test]
fn crash_cut_at_every_byte_of_the_tail_recovers_to_last_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut ends = vec![0u64];
    {
        let mut log = Log::open(&path, small_config(), 0).unwrap();
        for i in 0..5 {
            log.append(&mut batch(&[i, i, i], 20), 0, 0).unwrap();
            ends.push(log.size_bytes());
        }
        log.close().unwrap();
    }
    let seg = path.join("00000000000000000000.log");
    let full = fs::read(&seg).unwrap();
    for cut in 0..=full.len() {
        fs::write(&seg, &full[..cut]).unwrap();
        let mut log = Log::open(&path, small_config(), 0).unwrap();
        let whole = ends.iter().filter(|&&e| e <= cut as u64).count() - 1;
        assert_eq!(log.log_end_offset(), whole as i64 * 3, "cut at {cut}");
        assert_eq!(log.size_bytes(), ends[whole]);
        assert_eq!(read_all(&log, 0).len(), whole * 3);
        let info = log.append(&mut batch(&[9], 1), 0, 0).unwrap();
        assert_eq!(info.base_offset, whole as i64 * 3);
        assert_eq!(read_all(&log, 0).len(), whole * 3 + 1);
    }
}

#[test]
fn crash_with_corrupt_byte_truncates_at_that_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    let mut ends = vec![0];
    for i in 0..4 {
        log.append(&mut batch(&[i], 30), 0, 0).unwrap();
        ends.push(log.size_bytes() as usize);
    }
    drop(log);
    let seg = dir.path().join("00000000000000000000.log");
    let mut bytes = fs::read(&seg).unwrap();
    bytes[ends[2] + 40] ^= 0x55; // inside batch 2, CRC-covered
    fs::write(&seg, &bytes).unwrap();
    let log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(fs::metadata(&seg).unwrap().len() as usize, ends[2]);
}

#[test]
fn sealed_segment_indexes_are_rebuilt_when_missing_or_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    for i in 0..30 {
        log.append(&mut batch(&[i * 10], 40), 0, 0).unwrap();
    }
    let expected = read_all(&log, 0);
    let max = log.max_timestamp();
    log.close().unwrap();
    fs::remove_file(dir.path().join("00000000000000000000.index")).unwrap();
    let mut ti = fs::read(dir.path().join("00000000000000000000.timeindex")).unwrap();
    ti.extend_from_slice(&[1, 2, 3]);
    let second = segment_logs(dir.path())[1].replace(".log", ".index");
    fs::write(dir.path().join(&second), [0xff; 16]).unwrap();
    fs::write(dir.path().join("00000000000000000000.timeindex"), ti).unwrap();
    let log = Log::open(dir.path(), small_config(), 0).unwrap();
    assert_eq!(read_all(&log, 0), expected);
    for from in 0..30 {
        assert_eq!(read_all(&log, from)[0].0, from);
        let found = log.offset_for_timestamp(from * 10 - 5).unwrap().unwrap();
        assert_eq!(found.offset, from);
    }
    assert_eq!(log.max_timestamp(), max);
    let idx = fs::metadata(dir.path().join("00000000000000000000.index")).unwrap();
    assert_eq!(idx.len() % 8, 0);
}

#[test]
fn leftovers_orphans_and_empty_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty-0");
    fs::create_dir(&p).unwrap();
    let mut log = Log::open(&p, LogConfig::default(), 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    log.append(&mut batch(&[1], 1), 0, 0).unwrap();
    drop(log);
    fs::write(p.join("00000000000000000007.log.deleted"), b"x").unwrap();
    fs::write(p.join("00000000000000000007.index.deleted"), b"x").unwrap();
    fs::write(p.join("00000000000000000009.index"), b"x").unwrap();
    fs::write(p.join("00000000000000000009.timeindex"), b"x").unwrap();
    fs::write(p.join("00000000000000000000.log.cleaned"), b"x").unwrap();
    let log = Log::open(&p, LogConfig::default(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 1);
    let mut names: Vec<_> = fs::read_dir(&p)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            "leader-epoch-checkpoint"
        ]
    );
    log.delete().unwrap();
    assert!(!p.exists());
}

#[test]
fn retention_by_time_deletes_old_segments_and_rolls_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: 1000,
        ..small_config()
    };
    let mut log = Log::open(dir.path(), config, 0).unwrap();
    // Segment per ~4 batches; timestamps rise with offsets.
    for i in 0..20 {
        log.append(&mut batch(&[i * 100], 150), 0, 0).unwrap();
    }
    let segs = log.segment_count();
    assert!(segs >= 4);
    let held = read_all(&log, 0);
    // Regions taken before deletion stay readable (unlinked files stay open).
    let before = log.read(0, u32::MAX, 20, true).unwrap();
    // now - 1000 = 500: segments whose newest record is < 500 go.
    let deleted = log.apply_retention(1500).unwrap();
    assert!(deleted >= 1);
    assert!(log.log_start_offset() > 0);
    assert!(log.log_start_offset() <= 5);
    assert!(matches!(
        log.read(0, 100, 20, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(records_of(&before), held);
    // Everything expired: the active segment goes too, after rolling an empty one.
    let remaining = log.segment_count();
    assert_eq!(log.apply_retention(1_000_000).unwrap(), remaining);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), 20);
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(log.size_bytes(), 0);
    assert_eq!(
        log.append(&mut batch(&[1], 1), 0, 0).unwrap().base_offset,
        20
    );
    drop(log);
    let log = Log::open(dir.path(), small_config(), 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (20, 21));
}

#[test]
fn retention_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_bytes: 2000,
        ..small_config()
    };
    let mut log = Log::open(dir.path(), config, 0).unwrap();
    for i in 0..40 {
        log.append(&mut batch(&[i], 150), 0, 0).unwrap();
    }
    let total = log.size_bytes();
    assert!(total > 4000);
    let deleted = log.apply_retention(0).unwrap();
    assert!(deleted > 0);
    assert!(log.size_bytes() >= 2000 - 1000, "{}", log.size_bytes());
    assert!(log.size_bytes() < total);
    // Kafka's rule: stop once dropping the next oldest would go below the limit.
    assert_eq!(log.apply_retention(0).unwrap(), 0);
    assert_eq!(
        read_all(&log, log.log_start_offset()).len() as i64,
        40 - log.log_start_offset()
    );
}

#[test]
fn timestamp_lookup_is_exact_for_uncompressed_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    // Batch i holds timestamps 1000*i + {30, 10, 20}: the max is not the last record.
    for i in 0..30 {
        let t = 1000 * i;
        log.append(&mut batch(&[t + 30, t + 10, t + 20], 30), 0, 0)
            .unwrap();
    }
    let check = |log: &Log| {
        assert_eq!(
            log.offset_for_timestamp(0).unwrap(),
            Some(TimestampOffset {
                timestamp: 30,
                offset: 0
            })
        );
        // First record with ts >= 5031 is batch 5's... none above 5030, so batch 6's first.
        assert_eq!(
            log.offset_for_timestamp(5031).unwrap(),
            Some(TimestampOffset {
                timestamp: 6030,
                offset: 18
            })
        );
        assert_eq!(
            log.offset_for_timestamp(7015).unwrap(),
            Some(TimestampOffset {
                timestamp: 7030,
                offset: 21
            })
        );
        assert_eq!(log.offset_for_timestamp(29_031).unwrap(), None);
        assert_eq!(
            log.max_timestamp(),
            Some(TimestampOffset {
                timestamp: 29_030,
                offset: 87
            })
        );
    };
    check(&log);
    assert!(log.segment_count() > 2);
    log.close().unwrap();
    check(&Log::open(dir.path(), small_config(), 0).unwrap());
}

#[test]
fn truncate_to_cuts_segments_and_mid_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    for i in 0..30 {
        log.append(&mut batch(&[i, i + 1, i + 2], 30), 0, 0)
            .unwrap();
    }
    let n = log.segment_count();
    log.truncate_to(46).unwrap(); // mid-batch [45, 47]
    assert_eq!(log.log_end_offset(), 45);
    assert!(log.segment_count() < n);
    assert_eq!(read_all(&log, 0).len(), 45);
    assert_eq!(
        log.append(&mut batch(&[1], 1), 0, 0).unwrap().base_offset,
        45
    );
    log.truncate_to(0).unwrap();
    assert_eq!((log.log_end_offset(), log.segment_count()), (0, 1));
    assert_eq!(log.max_timestamp(), None);
    assert_eq!(
        log.append(&mut batch(&[1], 1), 0, 0).unwrap().base_offset,
        0
    );
}

#[test]
fn flush_policy_by_messages() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_interval_messages: 2,
        flush_interval_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config, 0).unwrap();
    log.append(&mut batch(&[1], 1), 0, 0).unwrap();
    log.append(&mut batch(&[1], 1), 0, 0).unwrap();
    log.maybe_flush(5000).unwrap();
    log.flush().unwrap();
}

// --- property test against a Vec model ---

#[derive(Debug, Clone)]
enum Op {
    /// Batch sizes (record counts) and value length.
    Append(Vec<u8>, usize),
    /// Offset, high watermark (both picked within the log), max_bytes, min_one_batch.
    Read(prop::sample::Index, prop::sample::Index, u32, bool),
    Truncate(prop::sample::Index),
    Reopen,
    Crash(prop::sample::Index),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (proptest::collection::vec(1u8..5, 1..4), 0usize..120).prop_map(|(b, v)| Op::Append(b, v)),
        3 => (any::<prop::sample::Index>(), any::<prop::sample::Index>(), 0u32..800, any::<bool>()).prop_map(|(i, h, m, o)| Op::Read(i, h, m, o)),
        1 => any::<prop::sample::Index>().prop_map(Op::Truncate),
        1 => Just(Op::Reopen),
        1 => any::<prop::sample::Index>().prop_map(Op::Crash),
    ]
}

/// The model: every batch as (base offset, record timestamps, encoded length).
#[derive(Debug, Default)]
struct Model {
    batches: Vec<(i64, Vec<i64>, usize)>,
}

impl Model {
    fn end(&self) -> i64 {
        self.batches
            .last()
            .map_or(0, |(b, ts, _)| b + ts.len() as i64)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn log_matches_vec_model(ops in proptest::collection::vec(op(), 1..40), seg in 200u32..1500, interval in 0u32..300) {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { segment_bytes: seg, index_interval_bytes: interval, retention_ms: -1, ..LogConfig::default() };
        let mut log = Log::open(dir.path(), config.clone(), 0).unwrap();
        let mut model = Model::default();
        let mut ts = 0i64;
        for op in ops {
            match op {
                Op::Append(sizes, vlen) => {
                    let mut set = Vec::new();
                    let base = model.end();
                    let mut next = base;
                    for n in sizes {
                        let stamps: Vec<i64> = (0..n).map(|_| { ts += 7; ts }).collect();
                        let b = batch(&stamps, vlen);
                        model.batches.push((next, stamps.clone(), b.len()));
                        next += i64::from(n);
                        set.extend_from_slice(&b);
                    }
                    let info = log.append(&mut set, 1, 0).unwrap();
                    prop_assert_eq!(info.base_offset, base);
                    prop_assert_eq!(info.last_offset, next - 1);
                }
                Op::Read(at, hw, max_bytes, min_one) => {
                    let end = model.end();
                    let offset = at.index(end as usize + 1) as i64;
                    let hw = offset + hw.index((end - offset) as usize + 1) as i64;
                    let r = log.read(offset, max_bytes, hw, min_one).unwrap();
                    let got = records_of(&r);
                    // Expected: whole batches from the one holding `offset`, below the high
                    // watermark, within budget.
                    let mut want = Vec::new();
                    let mut used = 0usize;
                    for (base, stamps, len) in &model.batches {
                        let last = base + stamps.len() as i64 - 1;
                        if last < offset { continue; }
                        if last >= hw { break; }
                        if used + len > max_bytes as usize && !(min_one && used == 0) { break; }
                        used += len;
                        want.extend(stamps.iter().enumerate().map(|(i, t)| (base + i as i64, *t)));
                    }
                    prop_assert_eq!(got, want);
                    prop_assert_eq!(r.bytes, used as u64);
                }
                Op::Truncate(at) => {
                    let end = model.end();
                    let offset = at.index(end as usize + 1) as i64;
                    log.truncate_to(offset).unwrap();
                    model.batches.retain(|(b, ts, _)| b + ts.len() as i64 - 1 < offset);
                }
                Op::Reopen => {
                    log.close().unwrap();
                    log = Log::open(dir.path(), config.clone(), 0).unwrap();
                }
                Op::Crash(at) => {
                    // Cut the active segment at a random byte, as a torn write would.
                    drop(log);
                    let last = segment_logs(dir.path()).pop().unwrap();
                    let path = dir.path().join(&last);
                    let len = fs::metadata(&path).unwrap().len() as usize;
                    let cut = at.index(len + 1);
                    fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(cut as u64).unwrap();
                    let seg_base: i64 = last.trim_end_matches(".log").parse().unwrap();
                    // The model keeps batches of earlier segments plus those wholly before `cut`.
                    let mut pos = 0usize;
                    model.batches.retain(|(b, _, len)| {
                        if *b < seg_base { return true; }
                        pos += len;
                        pos <= cut
                    });
                    log = Log::open(dir.path(), config.clone(), 0).unwrap();
                }
            }
            prop_assert_eq!(log.log_end_offset(), model.end().max(log.log_start_offset()));
            let stamps: Vec<(i64, i64)> = model.batches.iter().flat_map(|(b, ts, _)| ts.iter().enumerate().map(move |(i, t)| (b + i as i64, *t))).collect();
            prop_assert_eq!(read_all(&log, log.log_start_offset()), stamps.clone());
            if let Some(&(o, t)) = stamps.get(stamps.len() / 2) {
                prop_assert_eq!(log.offset_for_timestamp(t).unwrap(), Some(TimestampOffset { timestamp: t, offset: o }));
            }
            prop_assert_eq!(log.max_timestamp().map(|m| (m.offset, m.timestamp)), stamps.last().copied());
        }
    }
}

#[test]
fn rolls_when_the_index_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 0,
        segment_index_bytes: 24, // three 8-byte entries (two 12-byte time entries)
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config, 0).unwrap();
    for i in 0..10 {
        log.append(&mut batch(&[i], 1), 0, 0).unwrap();
    }
    assert!(log.segment_count() >= 3, "{}", log.segment_count());
    for n in segment_logs(dir.path()) {
        let t = dir.path().join(n.replace(".log", ".timeindex"));
        assert!(fs::metadata(t).unwrap().len() <= 36);
    }
    assert_eq!(read_all(&log, 0).len(), 10);
}

#[test]
fn compressed_batches_are_stored_as_sent_and_timestamp_lookups_see_inside() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    log.append(&mut batch(&[5, 6], 3), 0, 0).unwrap();
    let mut gz = gzip_batch(&[100, 300, 200], 3);
    let sent = gz.clone();
    let info = log.append(&mut gz, 0, 0).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (2, 4));
    // Kafka's findOffsetByTimestamp: the first record at or after the target, found inside
    // the compressed payload.
    assert_eq!(
        log.offset_for_timestamp(250).unwrap(),
        Some(TimestampOffset {
            timestamp: 300,
            offset: 3
        })
    );
    assert_eq!(
        log.offset_for_timestamp(150).unwrap(),
        Some(TimestampOffset {
            timestamp: 300,
            offset: 3
        })
    );
    assert_eq!(
        log.offset_for_timestamp(50).unwrap(),
        Some(TimestampOffset {
            timestamp: 100,
            offset: 2
        })
    );
    // max_timestamp stays at batch granularity for compressed batches.
    assert_eq!(
        log.max_timestamp(),
        Some(TimestampOffset {
            timestamp: 300,
            offset: 2
        })
    );
    // The batch is stored byte for byte as sent, but for the base offset and the partition
    // leader epoch, which the CRC does not cover.
    let r = log.read(3, u32::MAX, 5, false).unwrap();
    let stored = bytes_of(&r);
    assert_eq!(stored.len(), sent.len());
    assert_eq!(&stored[8..12], &sent[8..12]);
    assert_eq!(&stored[16..], &sent[16..]);
}

#[test]
fn a_compressed_batch_that_does_not_decompress_fails_only_the_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    // Claim gzip for a payload that is not gzip. A produce walks compressed records, so it
    // is refused there; a follower, which takes its leader's batches as they are, still
    // stores it (a leader of an earlier release accepted such batches), and a timestamp
    // lookup that must look inside reports it.
    let mut fake = batch(&[100, 300, 200], 3);
    fake[22] |= 1;
    record_batch::write_crc(&mut fake);
    assert!(matches!(
        log.append(&mut fake.clone(), 0, 0),
        Err(strata_storage::LogError::CorruptMessage { .. })
    ));
    log.append_as_follower(&mut fake, 0).unwrap();
    assert!(matches!(
        log.offset_for_timestamp(250),
        Err(strata_storage::LogError::Decompress { .. })
    ));
    assert_eq!(log.log_end_offset(), 3);
}

/// A real gzip-compressed batch: the records section of [`batch`], gzipped, with the
/// compression bits, the batch length and the CRC fixed up.
fn gzip_batch(timestamps: &[i64], value_len: usize) -> Vec<u8> {
    use std::io::Write;
    let plain = batch(timestamps, value_len);
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&plain[record_batch::BATCH_HEADER_LEN..])
        .unwrap();
    let mut out = plain[..record_batch::BATCH_HEADER_LEN].to_vec();
    out.extend_from_slice(&enc.finish().unwrap());
    let batch_length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    out[22] |= 1;
    record_batch::write_crc(&mut out);
    out
}

#[test]
fn roll_then_delete_segments_before_keeps_only_the_rewrite() {
    // The group coordinator's compaction: roll, append the live state, drop what came before.
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    for i in 0..5 {
        log.append(&mut batch(&[i], 10), 0, 0).unwrap();
    }
    log.roll_if_not_empty().unwrap();
    log.roll_if_not_empty().unwrap(); // an empty active segment does not roll again
    assert_eq!(log.segment_count(), 2);
    let mark = log.log_end_offset();
    log.append(&mut batch(&[9, 9], 10), 0, 0).unwrap();
    assert_eq!(
        log.delete_segments_before(mark - 1).unwrap(),
        0,
        "segment 0 holds offset 4"
    );
    assert_eq!(log.delete_segments_before(mark).unwrap(), 1);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), mark);
    assert_eq!(read_all(&log, mark), vec![(5, 9), (6, 9)]);
    // The active segment is never deleted, whatever the offset.
    assert_eq!(log.delete_segments_before(i64::MAX).unwrap(), 0);
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (5, 7));
    assert_eq!(segment_logs(dir.path()).len(), 1);
}

/// After `prepare_clean_shutdown`, `open_with(clean)` trusts the active segment's indexes and
/// ends in the same state a full recovery does; batches appended after the indexes were last
/// written are still found (and a torn tail still sends the segment to recovery).
#[test]
fn a_clean_open_matches_a_recovering_open() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        index_interval_bytes: 256,
        ..small_config()
    };
    let mut log = Log::open(dir.path(), cfg.clone(), 0).unwrap();
    for i in 0..30 {
        log.append(&mut batch(&[1000 + i, 900 + i], 20), 0, 0)
            .unwrap();
    }
    log.prepare_clean_shutdown().unwrap();
    // Written after the indexes were: the clean open must still see it.
    log.append(&mut batch(&[5000], 20), 0, 0).unwrap();
    drop(log);
    let state = |log: &Log| {
        (
            log.log_end_offset(),
            log.max_timestamp(),
            log.offset_for_timestamp(1015).unwrap(),
            read_all(log, 0),
        )
    };
    let clean = Log::open_with(dir.path(), cfg.clone(), 0, true).unwrap();
    let recovered = Log::open(dir.path(), cfg.clone(), 0).unwrap();
    assert_eq!(state(&clean), state(&recovered));
    assert_eq!(clean.log_end_offset(), 61);
    assert_eq!(clean.max_timestamp().unwrap().timestamp, 5000);
    drop((clean, recovered));

    // A torn tail behind a clean marker: the segment is recovered, not trusted.
    let active = segment_logs(dir.path()).pop().unwrap();
    let path = dir.path().join(active);
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let clean = Log::open_with(dir.path(), cfg, 0, true).unwrap();
    assert_eq!(clean.log_end_offset(), 60);
}

#[test]
fn append_unflushed_leaves_the_fsync_to_begin_flush() {
    for backend in [io::Backend::Uring, io::Backend::Std] {
        io::set_thread_backend(Some(backend));
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            flush_interval_messages: 3,
            ..small_config()
        };
        let mut log = Log::open(dir.path(), config, 0).unwrap();
        log.append_unflushed(&mut batch(&[1, 2], 10), 0, 0).unwrap();
        assert!(!log.flush_messages_due(), "2 of 3 records");
        log.append_unflushed(&mut batch(&[3], 10), 0, 0).unwrap();
        assert!(log.flush_messages_due(), "3 of 3 records");
        let a = log.begin_flush(0).unwrap();
        assert_eq!(a.end_offset, 3);
        assert!(
            !log.flush_messages_due(),
            "begin_flush counts everything as flushed"
        );
        assert_eq!(
            a.files.len(),
            1,
            "nothing sealed yet: the active .log alone"
        );
        // Appends after begin_flush are not covered by it. The rolls in between leave their
        // fsyncs to the next flush, which takes every sealed segment's files along.
        for i in 0..30 {
            log.append_unflushed(&mut batch(&[i], 60), 0, 0).unwrap();
        }
        let b = log.begin_flush(0).unwrap();
        assert_eq!(b.end_offset, 33);
        let segments = segment_logs(dir.path()).len();
        assert!(segments > 1, "the log rolled");
        // .log, .index, .timeindex and the directory per sealed segment, plus the active .log.
        assert!(
            b.files.len() > 4 * (segments - 1),
            "{} files",
            b.files.len()
        );
        let files: Vec<&fs::File> = a.files.iter().chain(&b.files).map(|f| &**f).collect();
        let results = io::sync_data_many(&files);
        assert_eq!(results.len(), files.len());
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert!(b.path.ends_with(segment_logs(dir.path()).last().unwrap()));
        assert!(log.recovery_point() < 33);
        log.complete_flush(b.end_offset);
        assert_eq!(log.recovery_point(), 33);
        // Everything sealed was in that flush: the next one is the active .log alone.
        assert_eq!(log.begin_flush(0).unwrap().files.len(), 1);
        io::set_thread_backend(None);
    }
}

/// A broker partition's log, `<dir>/t-0`, with three-batch segments (60-byte records), built
/// through `append_unflushed` as the broker appends: rolls leave their fsync for later.
/// Returns the log directory and each segment's base offset.
fn rolled_partition_log(root: &Path, batches: i64) -> (std::path::PathBuf, Vec<i64>) {
    let path = root.join("t-0");
    let mut log = Log::open_with(&path, small_config(), 0, false).unwrap();
    for i in 0..batches {
        log.append_unflushed(&mut batch(&[i, i], 60), 0, 0).unwrap();
    }
    assert!(log.take_roll_flush_request(), "the log rolled");
    assert_eq!(log.recovery_point(), 0, "no roll fsynced anything");
    drop(log); // a crash: no close, no flush
    let bases = segment_logs(&path)
        .iter()
        .map(|n| n.trim_end_matches(".log").parse().unwrap())
        .collect();
    (path, bases)
}

fn write_recovery_point(root: &Path, offset: i64) {
    strata_storage::checkpoint::write_offsets(
        &root.join(strata_storage::checkpoint::RECOVERY_POINT_CHECKPOINT),
        &[("t".to_owned(), 0, offset)],
    )
    .unwrap();
}

/// Kafka's recovery after a crash: a sealed segment above the recovery point that lost its
/// tail (its fsync was still queued) is truncated at the last whole batch, becomes the
/// active segment, and the segments after it are deleted.
#[test]
fn a_torn_sealed_segment_above_the_recovery_point_is_truncated_and_later_ones_removed() {
    let root = tempfile::tempdir().unwrap();
    let (path, bases) = rolled_partition_log(root.path(), 20);
    assert!(bases.len() >= 4, "{bases:?}");
    // No checkpoint file: the recovery point is 0 and every segment is recovered.
    let torn = path.join(segment_logs(&path)[1].clone());
    let len = fs::metadata(&torn).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&torn)
        .unwrap()
        .set_len(len - 7)
        .unwrap();
    let mut log = Log::open_with(&path, small_config(), 0, false).unwrap();
    // Segment 1 held offsets bases[1]..bases[2]; its last batch (2 records) is gone.
    assert_eq!(log.log_end_offset(), bases[2] - 2);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(segment_logs(&path).len(), 2, "later segments deleted");
    let records = read_all(&log, 0);
    assert_eq!(records.len() as i64, bases[2] - 2);
    assert!(records.iter().enumerate().all(|(i, r)| r.0 == i as i64));
    // Appends continue in the cut segment, at the new end.
    let info = log.append(&mut batch(&[7], 10), 0, 0).unwrap();
    assert_eq!(info.base_offset, bases[2] - 2);
    assert_eq!(read_all(&log, 0).len() as i64, bases[2] - 1);
    drop(log);
    // And the result reopens as it was.
    let log = Log::open_with(&path, small_config(), 0, false).unwrap();
    assert_eq!(log.log_end_offset(), bases[2] - 1);
}

/// A sealed segment below the recovery point is trusted: damage inside it that only a CRC
/// check sees is not looked for (Kafka does not rescan it either), whereas the same damage
/// above the recovery point truncates the log there.
#[test]
fn a_sealed_segment_below_the_recovery_point_is_trusted() {
    for (recovery_point_segment, expect_trusted) in [(2, true), (1, false)] {
        let root = tempfile::tempdir().unwrap();
        let (path, bases) = rolled_partition_log(root.path(), 20);
        let leo = 40; // 20 batches of 2 records
        // Flip a CRC-covered byte in segment 1's first batch.
        let seg1 = path.join(segment_logs(&path)[1].clone());
        let mut bytes = fs::read(&seg1).unwrap();
        bytes[70] ^= 0x55;
        fs::write(&seg1, &bytes).unwrap();
        write_recovery_point(root.path(), bases[recovery_point_segment]);
        let log = Log::open_with(&path, small_config(), 0, false).unwrap();
        if expect_trusted {
            assert_eq!(log.log_end_offset(), leo);
            assert_eq!(log.segment_count(), bases.len());
        } else {
            assert_eq!(
                log.log_end_offset(),
                bases[1],
                "truncated at the damaged batch"
            );
            assert_eq!(log.segment_count(), 2);
        }
    }
}

/// The recovery point moves when a flush that covered every sealed segment completes, and a
/// clean shutdown's flush takes it to the log end; a clean open starts there.
#[test]
fn the_recovery_point_follows_completed_flushes() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("t-0");
    let mut log = Log::open_with(&path, small_config(), 0, false).unwrap();
    assert_eq!(log.recovery_point(), 0);
    for i in 0..10 {
        log.append_unflushed(&mut batch(&[i], 60), 0, 0).unwrap();
    }
    let flush = log.begin_flush(0).unwrap();
    for i in 0..10 {
        log.append_unflushed(&mut batch(&[i], 60), 0, 0).unwrap();
    }
    let files: Vec<&fs::File> = flush.files.iter().map(|f| &**f).collect();
    assert!(io::sync_data_many(&files).iter().all(Result::is_ok));
    log.complete_flush(flush.end_offset);
    assert_eq!(log.recovery_point(), 10);
    log.prepare_clean_shutdown().unwrap();
    assert_eq!(log.recovery_point(), 20);
    drop(log);
    let log = Log::open_with(&path, small_config(), 0, true).unwrap();
    assert_eq!(log.recovery_point(), 20);
}

/// A fetch from a sealed segment does not reopen its `.log` each time: the handle a read
/// opened stays open after the read's regions are dropped, and the next read uses it. It is
/// let go when the segment is deleted.
#[test]
fn a_sealed_segments_reader_is_kept_open_between_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    for i in 0..20 {
        log.append(&mut batch(&[i], 60), 0, 0).unwrap();
    }
    assert!(log.segment_count() > 2);
    let first = log.read(0, 100, i64::MAX, true).unwrap();
    let handle = std::sync::Arc::downgrade(&first.regions[0].file);
    drop(first);
    let kept = handle
        .upgrade()
        .expect("the sealed segment's handle was closed");
    let second = log.read(0, 100, i64::MAX, true).unwrap();
    assert!(std::sync::Arc::ptr_eq(&kept, &second.regions[0].file));
    drop((kept, second));
    log.delete_segments_before(log.log_end_offset()).unwrap();
    assert!(
        handle.upgrade().is_none(),
        "a deleted segment's handle stays open"
    );
}

/// DeleteRecords: the log start moves up (never down, never past the high watermark), reads
/// below it are OFFSET_OUT_OF_RANGE, whole segments below it go, and a reopened log given
/// the checkpointed start is back where it was, clamped to the log.
#[test]
fn incrementing_the_log_start_offset_hides_and_deletes_what_is_below() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = Log::open(&path, small_config(), 0).unwrap();
    // 20 batches of 2 records, ~150 bytes each: several 1000-byte segments.
    for i in 0..20 {
        log.append(&mut batch(&[i, i], 50), 0, 0).unwrap();
    }
    let end = log.log_end_offset();
    assert_eq!(end, 40);
    let segments_before = log.segment_count();
    assert!(segments_before > 3, "{segments_before}");

    assert!(matches!(
        log.increment_log_start_offset(end + 1, end),
        Err(LogError::LogStartAboveHighWatermark {
            requested: 41,
            high_watermark: 40
        })
    ));
    assert_eq!(log.log_start_offset(), 0);

    // Offset 25 lies inside the batch 24..=25: the start is the offset itself.
    assert_eq!(log.increment_log_start_offset(25, end).unwrap(), 25);
    assert_eq!(log.increment_log_start_offset(10, end).unwrap(), 25);
    assert!(matches!(
        log.read(24, u32::MAX, end, true),
        Err(LogError::OffsetOutOfRange {
            requested: 24,
            log_start: 25,
            ..
        })
    ));
    // The batch holding 25 comes whole; the client skips offset 24.
    let first = read_all(&log, 25);
    assert_eq!(first.first().map(|r| r.0), Some(24));
    assert_eq!(first.last().map(|r| r.0), Some(39));

    let deleted = log.delete_segments_below_log_start().unwrap();
    assert!(deleted > 0);
    assert_eq!(log.segment_count(), segments_before - deleted);
    assert_eq!(log.log_start_offset(), 25);
    assert_eq!(read_all(&log, 25), first);
    log.close().unwrap();

    // Reopened, the log starts at its first segment's base until the checkpointed start is
    // restored; a start past the log end is clamped to it.
    let mut log = Log::open(&path, small_config(), 0).unwrap();
    assert!(log.log_start_offset() <= 24);
    assert_eq!(log.restore_log_start_offset(25).unwrap(), 25);
    assert_eq!(read_all(&log, 25), first);
    assert_eq!(log.restore_log_start_offset(3).unwrap(), 25);
    // -1 (the high watermark) is the caller's to resolve; the whole log can go.
    assert_eq!(log.increment_log_start_offset(end, end).unwrap(), 40);
    log.delete_segments_below_log_start().unwrap();
    assert_eq!(log.segment_count(), 1);
    assert!(read_all(&log, 40).is_empty());
    log.close().unwrap();
    let mut log = Log::open(&path, small_config(), 0).unwrap();
    assert_eq!(log.restore_log_start_offset(1_000).unwrap(), 40);
    assert_eq!(log.log_end_offset(), 40);
}
