//! Appends through direct I/O (`STRATA_DIRECT_IO`, forced per thread here): a log written
//! that way reads back the same, from its tail cache and through the page cache, while it
//! grows, rolls, truncates and reopens; a crash image cut at or around every block boundary
//! recovers to the last whole batch; and reads racing appends (planned under the lock, read
//! after it, as fetches are) never see a byte the append did not write.
//!
//! Each test says so and passes where the file system has no direct I/O (tmpfs).

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use strata_protocol::record_batch::{self, SimpleRecord, encode_batch};
use strata_storage::direct::{self, BLOCK};
use strata_storage::{Log, LogConfig, ReadResult};

/// A batch of `n` records whose values are `value_len` bytes of `fill`.
fn batch(n: usize, value_len: usize, fill: u8) -> Vec<u8> {
    let recs: Vec<SimpleRecord> = (0..n)
        .map(|i| SimpleRecord {
            key: None,
            value: Some(Bytes::from(vec![fill; value_len])),
            timestamp: i as i64,
            headers: vec![],
        })
        .collect();
    encode_batch(0, &recs).to_vec()
}

/// Batch shapes whose lengths end below, on and across block boundaries.
const SHAPES: [(usize, usize); 8] = [
    (1, 10),
    (3, 1300),
    (1, 4000),
    (2, 2040),
    (5, 900),
    (1, 9000),
    (1, 1),
    (4, 3000),
];

fn config(segment_bytes: u32) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 4096,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

/// Every batch of the read, CRC-checked: (first offset, records).
fn batches_of(r: &ReadResult) -> Vec<(i64, usize)> {
    let mut bytes = Vec::new();
    for region in &r.regions {
        region.read_into(&mut bytes).unwrap();
    }
    record_batch::batches(&bytes)
        .map(|b| {
            let b = b.expect("a whole batch");
            b.verify_crc().expect("its CRC");
            (b.base_offset(), b.records().unwrap().count())
        })
        .collect()
}

fn records_in(log: &Log) -> usize {
    let r = log.read(0, u32::MAX, log.log_end_offset(), true).unwrap();
    batches_of(&r).iter().map(|&(_, n)| n).sum()
}

/// Whether `dir`'s file system takes `O_DIRECT`; turns direct appends on for this thread if
/// so.
fn direct_here(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join("probe");
    fs::write(&probe, b"").unwrap();
    let ok = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    fs::remove_file(&probe).unwrap();
    if ok {
        direct::set_thread_forced(Some(true));
    } else {
        eprintln!("no direct I/O on {}; skipped", dir.display());
    }
    ok
}

fn active_log_file(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a segment")
}

#[test]
fn a_direct_log_reads_back_through_growth_rolls_truncation_and_reopening() {
    let dir = tempfile::tempdir().unwrap();
    if !direct_here(dir.path()) {
        return;
    }
    let path = dir.path().join("t-0");
    let mut log = Log::open(&path, config(64 << 10), 0).unwrap();
    let mut records = 0;
    for round in 0..6 {
        for &(n, len) in &SHAPES {
            log.append(&mut batch(n, len, b'a' + round), 0, 0).unwrap();
            records += n;
            // Each read pulls the partial last block into the page cache; the next direct
            // write of that block must not leave the old copy there.
            assert_eq!(records_in(&log), records);
            let on_disk = fs::metadata(active_log_file(&path)).unwrap().len();
            assert_eq!(
                on_disk % BLOCK as u64,
                0,
                "the active segment is padded to a block"
            );
        }
    }
    assert!(log.segment_count() > 2, "the log rolled");
    // A read at the tail comes from the cache; one from the start, behind it, from the files.
    let end = log.log_end_offset();
    let tail = log.read(end - 1, u32::MAX, end, true).unwrap();
    assert!(!tail.regions.is_empty());
    assert!(
        tail.regions.iter().all(|r| r.cached.is_some()),
        "the tail is cached"
    );
    let all = log.read(0, u32::MAX, end, true).unwrap();
    assert!(
        all.regions[0].cached.is_none(),
        "the first segment is read from its file"
    );
    // Truncation into the active segment, then appends at the new end.
    log.truncate_to(end - 5).unwrap();
    let records_now = records_in(&log);
    assert!(records_now < records);
    log.append(&mut batch(2, 5000, b'z'), 0, 0).unwrap();
    assert_eq!(records_in(&log), records_now + 2);
    let size = log.size_bytes();
    log.close().unwrap();
    // Closing cut every padding: the files hold exactly the log's bytes.
    let on_disk: u64 = fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(on_disk, size);
    let mut log = Log::open(&path, config(64 << 10), 0).unwrap();
    assert_eq!(records_in(&log), records_now + 2);
    log.append(&mut batch(1, 100, b'y'), 0, 0).unwrap();
    assert_eq!(records_in(&log), records_now + 3);
    direct::set_thread_forced(None);
}

#[test]
fn a_crash_image_cut_around_every_block_boundary_recovers_to_the_last_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    if !direct_here(dir.path()) {
        return;
    }
    let path = dir.path().join("t-0");
    let mut ends = vec![0u64];
    let mut counts = vec![0usize];
    let mut log = Log::open(&path, config(1 << 30), 0).unwrap();
    for round in 0..3 {
        for &(n, len) in &SHAPES {
            log.append(&mut batch(n, len, b'a' + round), 0, 0).unwrap();
            ends.push(log.size_bytes());
            counts.push(counts.last().unwrap() + n);
        }
    }
    // The file as a kill -9 leaves it: every byte written, padded to a block.
    let seg = active_log_file(&path);
    let image = fs::read(&seg).unwrap();
    let end = *ends.last().unwrap();
    assert_eq!(image.len(), direct::round_up(end as usize));
    drop(log);
    // Cuts on, just below and just above every block boundary and every batch end: a direct
    // write that did not happen leaves the blocks before it, and zeros after the last block
    // it completed.
    let mut cuts: Vec<u64> = (0..=end / BLOCK as u64 + 1)
        .flat_map(|k| {
            let b = k * BLOCK as u64;
            [b.saturating_sub(1), b, b + 1]
        })
        .chain(ends.iter().flat_map(|&e| [e.saturating_sub(1), e, e + 1]))
        .filter(|&c| c <= end)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts {
        let mut bytes = image[..cut as usize].to_vec();
        bytes.resize(direct::round_up(cut as usize), 0);
        fs::write(&seg, &bytes).unwrap();
        let mut log = Log::open(&path, config(1 << 30), 0).unwrap();
        // A batch is whole if the cut kept its bytes: before the cut, or zeros after it
        // (a batch whose last bytes are zeros survives a cut through them).
        let whole = ends
            .iter()
            .filter(|&&e| e <= cut || image[cut as usize..e as usize].iter().all(|&b| b == 0))
            .count()
            - 1;
        assert_eq!(log.size_bytes(), ends[whole], "cut at {cut}");
        assert_eq!(records_in(&log), counts[whole], "cut at {cut}");
        // The log goes on through direct appends from there.
        log.append(&mut batch(1, 3000, b'n'), 0, 0).unwrap();
        assert_eq!(records_in(&log), counts[whole] + 1, "cut at {cut}");
        drop(log);
    }
    direct::set_thread_forced(None);
}

#[test]
fn reads_racing_direct_appends_see_only_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    if !direct_here(dir.path()) {
        return;
    }
    // A small cache, so that the reader behind it reads blocks of the active segment that
    // direct writes went to.
    direct::set_thread_tail_cache_bytes(Some(1 << 20));
    let log = Arc::new(Mutex::new(
        Log::open(&dir.path().join("t-0"), config(64 << 20), 0).unwrap(),
    ));
    let done = Arc::new(AtomicBool::new(false));
    // The fetch path: the read is planned under the lock, and its bytes are read after the
    // lock is let go, while appends go on.
    let reader = {
        let (log, done) = (log.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut reads, mut from_files) = (0u64, 0u64);
            while !done.load(Ordering::Relaxed) {
                let (r, end) = {
                    let log = log.lock().unwrap();
                    let end = log.log_end_offset();
                    // In turn at the tail (its cache) and far enough behind it that the
                    // active segment's file is read, through blocks direct writes went to.
                    let back = if reads % 2 == 0 { 40 } else { 2_000 };
                    let from = (end - back).max(0);
                    (log.read(from, u32::MAX, end, true).unwrap(), end)
                };
                let got = batches_of(&r);
                if let Some(&(first, _)) = got.first() {
                    let (last, n) = *got.last().unwrap();
                    assert!(
                        first <= end && last + n as i64 == end,
                        "a read short of its end"
                    );
                }
                reads += 1;
                from_files += u64::from(r.regions.iter().any(|r| r.cached.is_none()));
            }
            (reads, from_files)
        })
    };
    for i in 0..3_000 {
        let (n, len) = SHAPES[i % SHAPES.len()];
        log.lock()
            .unwrap()
            .append(&mut batch(n, len, b'a' + (i % 26) as u8), 0, 0)
            .unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let (reads, from_files) = reader.join().expect("the reader saw only whole batches");
    assert!(
        reads > 0 && from_files > 0,
        "{reads} reads, {from_files} from the file"
    );
    direct::set_thread_forced(None);
}
