//! The log cleaner (compaction) against real segment files: what a pass keeps, tombstones
//! and their delete horizon, an interrupted install completed at open, and a model test of
//! random writes, deletes, rolls and passes.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use proptest::prelude::*;
use strata_protocol::record_batch::{self, RecordBatchView, SimpleRecord, encode_batch};
use strata_storage::cleaner::{self, CleanerSettings, CompactionConfig, Throttler};
use strata_storage::{Log, LogConfig};

const DAY: i64 = 86_400_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1_000,
        ..LogConfig::default()
    }
}

/// Appends one record (`None`: a tombstone) in a batch of its own.
fn put(log: &mut Log, key: &str, value: Option<&str>, now: i64) -> i64 {
    let mut b = encode_batch(
        0,
        &[SimpleRecord {
            key: Some(key.to_owned().into()),
            value: value.map(|v| v.to_owned().into()),
            timestamp: now,
            headers: vec![],
        }],
    )
    .to_vec();
    log.append(&mut b, 0, now).unwrap().base_offset
}

/// Every record in the directory's segments, in order: (offset, key, value).
fn records(dir: &Path) -> Vec<(i64, String, Option<String>)> {
    let mut logs: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let mut out = Vec::new();
    for p in logs {
        let bytes = fs::read(&p).unwrap();
        for view in record_batch::batches(&bytes) {
            let view: RecordBatchView<'_> = view.unwrap();
            view.verify_crc().unwrap();
            record_batch::validate_replicated_batch(view.bytes(), 0).unwrap();
            for r in view.records().unwrap() {
                let r = r.unwrap();
                out.push((
                    r.offset,
                    String::from_utf8(r.key.unwrap().to_vec()).unwrap(),
                    r.value.map(|v| String::from_utf8(v.to_vec()).unwrap()),
                ));
            }
        }
    }
    out
}

/// One pass as the broker runs it, from `checkpoint`; returns the new checkpoint.
fn pass(log: &mut Log, checkpoint: Option<i64>, cc: &CompactionConfig, now: i64) -> i64 {
    let end = log.log_end_offset();
    let span = log.cleanable_span(checkpoint, end, cc, now).unwrap();
    let plan = log.clean_plan(span, cc).unwrap();
    let mut throttle = Throttler::new(f64::MAX);
    let outcome = cleaner::clean(
        &plan,
        &CleanerSettings::default(),
        now,
        &mut throttle,
        &mut |g| log.install_cleaned(g, now),
    )
    .unwrap();
    outcome.end_offset
}

#[test]
fn a_pass_keeps_each_keys_latest_record_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 1_000).unwrap();
    let now = 1_000;
    for i in 0..100 {
        put(
            &mut log,
            &format!("k{}", i % 10),
            Some(&format!("v{i}")),
            now,
        );
    }
    put(&mut log, "k3", None, now);
    put(&mut log, "tail", Some("t"), now);
    log.roll_if_not_empty().unwrap();
    let before = log.size_bytes();
    let cc = CompactionConfig::default();
    let span = log
        .cleanable_span(None, log.log_end_offset(), &cc, now)
        .unwrap();
    assert!(span.needs_cleaning(&cc), "{span:?}");
    assert_eq!((span.first_dirty, span.first_uncleanable), (0, 102));
    let checkpoint = pass(&mut log, None, &cc, now);
    assert_eq!(checkpoint, 102);
    let got = records(dir.path());
    let mut want: Vec<(i64, String, Option<String>)> = (90..100)
        .filter(|i| i % 10 != 3)
        .map(|i| (i, format!("k{}", i % 10), Some(format!("v{i}"))))
        .collect();
    want.push((100, "k3".into(), None));
    want.push((101, "tail".into(), Some("t".into())));
    assert_eq!(got, want);
    assert!(
        log.size_bytes() * 5 < before,
        "{} bytes left of {before}",
        log.size_bytes()
    );
    // The log reads the same after a reopen, and appends go on at its end.
    drop(log);
    let mut log = Log::open(dir.path(), config(), now).unwrap();
    assert_eq!(log.log_end_offset(), 102);
    assert_eq!(records(dir.path()), want);

    // The tombstone stays until its horizon; a pass after it (with something new to clean)
    // removes it.
    put(&mut log, "k0", Some("new"), now);
    log.roll_if_not_empty().unwrap();
    let checkpoint = pass(&mut log, Some(checkpoint), &cc, now + DAY / 2);
    assert!(records(dir.path()).iter().any(|r| r.1 == "k3"));
    put(&mut log, "k1", Some("new"), now);
    log.roll_if_not_empty().unwrap();
    pass(&mut log, Some(checkpoint), &cc, now + DAY + 1);
    let got = records(dir.path());
    assert!(!got.iter().any(|r| r.1 == "k3"), "{got:?}");
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "offsets increase");
    assert_eq!(got.iter().filter(|r| r.1 == "k0").count(), 1);
}

#[test]
fn an_interrupted_install_completes_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 1_000).unwrap();
    for i in 0..60 {
        put(
            &mut log,
            &format!("k{}", i % 4),
            Some(&format!("v{i}")),
            1_000,
        );
    }
    log.roll_if_not_empty().unwrap();
    let cc = CompactionConfig::default();
    let span = log
        .cleanable_span(None, log.log_end_offset(), &cc, 1_000)
        .unwrap();
    let plan = log.clean_plan(span, &cc).unwrap();
    // The first group reaches `.swap`, and the process dies there.
    let mut first = true;
    let result = cleaner::clean(
        &plan,
        &CleanerSettings::default(),
        1_000,
        &mut Throttler::new(f64::MAX),
        &mut |g| {
            if first {
                first = false;
                let swap = g.path.with_extension("swap");
                fs::rename(&g.path, &swap).unwrap();
                return Err(strata_storage::LogError::Io {
                    path: swap,
                    source: std::io::Error::other("killed"),
                });
            }
            Ok(false)
        },
    );
    assert!(result.is_err());
    // A second, unfinished clean left a `.cleaned` file too.
    fs::write(
        dir.path().join("00000000000000000030.log.cleaned"),
        b"partial",
    )
    .unwrap();
    drop(log);
    let log = Log::open(dir.path(), config(), 1_000).unwrap();
    assert_eq!(log.log_end_offset(), 60);
    let got = records(dir.path());
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "offsets increase");
    // Every key's latest value survived; the first group was cleaned.
    for k in 0..4 {
        let last = got.iter().rev().find(|r| r.1 == format!("k{k}")).unwrap();
        assert_eq!(last.2.as_deref(), Some(format!("v{}", 56 + k).as_str()));
    }
    assert!(got.len() < 60, "the swap was installed: {}", got.len());
    assert!(!fs::read_dir(dir.path()).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".cleaned")
    }));
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u16),
    Delete(u8),
    Roll,
    Clean(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..12, any::<u16>()).prop_map(|(k, v)| Op::Put(k, v)),
        1 => (0u8..12).prop_map(Op::Delete),
        1 => Just(Op::Roll),
        1 => (0i64..(2 * DAY)).prop_map(Op::Clean),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Against a model: after any pass, a reader from offset 0 ends each key on its latest
    /// write (a tombstone until its horizon has passed, then nothing), offsets only
    /// increase, and every record still there was written at that offset.
    #[test]
    fn passes_agree_with_a_model(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LogConfig { segment_bytes: 400, ..LogConfig::default() };
        let mut log = Log::open(dir.path(), cfg, 0).unwrap();
        let cc = CompactionConfig { delete_retention_ms: DAY, ..CompactionConfig::default() };
        let mut written: BTreeMap<i64, (String, Option<String>)> = BTreeMap::new();
        let mut latest: BTreeMap<String, i64> = BTreeMap::new();
        let mut now = 0;
        let mut checkpoint = None;
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    let (key, value) = (format!("k{k}"), format!("{v}"));
                    let at = put(&mut log, &key, Some(&value), now);
                    written.insert(at, (key.clone(), Some(value)));
                    latest.insert(key, at);
                }
                Op::Delete(k) => {
                    let key = format!("k{k}");
                    let at = put(&mut log, &key, None, now);
                    written.insert(at, (key.clone(), None));
                    latest.insert(key, at);
                }
                Op::Roll => log.roll_if_not_empty().unwrap(),
                Op::Clean(advance) => {
                    now += advance;
                    checkpoint = Some(pass(&mut log, checkpoint, &cc, now));
                    let got = records(dir.path());
                    prop_assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
                    let mut last: BTreeMap<String, (i64, Option<String>)> = BTreeMap::new();
                    for (offset, key, value) in &got {
                        let w = &written[offset];
                        prop_assert_eq!(&w.0, key);
                        prop_assert_eq!(&w.1, value);
                        last.insert(key.clone(), (*offset, value.clone()));
                    }
                    for (key, at) in &latest {
                        match (&written[at].1, last.get(key)) {
                            (Some(_), Some((o, _))) => prop_assert_eq!(o, at, "{}", key),
                            (Some(_), None) => prop_assert!(false, "{} lost", key),
                            // A tombstone: still there, or gone with nothing older left.
                            (None, Some((o, _))) => prop_assert_eq!(o, at, "{}", key),
                            (None, None) => {}
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn segments_the_cleaner_empties_do_not_stop_retention() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 300,
        retention_ms: 10_000,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg, 1_000).unwrap();
    for i in 0..30 {
        put(&mut log, "same", Some(&format!("v{i}")), 1_000);
    }
    log.roll_if_not_empty().unwrap();
    put(&mut log, "other", Some("x"), 1_000);
    let cc = CompactionConfig::default();
    pass(&mut log, None, &cc, 1_000);
    assert!(log.segment_count() > 2, "{}", log.segment_count());
    // Every sealed segment but the one holding the latest "same" is empty now.
    assert_eq!(records(dir.path()).len(), 2);
    // Time retention goes past the empty segments to the old non-empty one.
    let deleted = log.apply_retention(1_000 + 10_001).unwrap();
    assert!(deleted >= 2, "{deleted}");
    assert!(log.log_start_offset() >= 29, "{}", log.log_start_offset());
}

#[test]
fn a_truncation_is_reported_once_at_its_lowest_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    for i in 0..20 {
        put(&mut log, &format!("k{}", i % 3), Some("v"), 1_000 + i);
    }
    assert_eq!(log.take_truncation(), None);
    log.truncate_to(15).unwrap();
    log.truncate_to(12).unwrap();
    log.truncate_to(14).unwrap();
    assert_eq!(log.take_truncation(), Some(12), "the lowest cut");
    assert_eq!(log.take_truncation(), None, "reported once");
    log.truncate_fully_and_start_at(30).unwrap();
    assert_eq!(log.take_truncation(), Some(30));
}
