//! The store against real partition logs in a temporary directory, led by this node as the
//! broker would lead them.

use bytes::BytesMut;
use strata_protocol::record_batch::{self, SimpleRecord};

use strata_storage::cleaner::{self, CleanerSettings, CompactionConfig, Throttler};

use super::*;
use crate::partition::AckError;

fn config() -> OffsetsConfig {
    OffsetsConfig {
        num_partitions: 50,
        retention_ms: 10_000,
        retention_check_interval_ms: 1_000,
        metadata_max_bytes: 4096,
    }
}

fn offset(offset: i64, metadata: &str, ts: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: 4,
        metadata: metadata.to_owned(),
        commit_timestamp: ts,
        expire_timestamp: None,
    }
}

fn dirs(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

const NODE: i32 = 1;

/// The partition of `group`, opened from `dir` and led by this node in `epoch` with
/// `replicas` (this node first) all in the ISR, then loaded by `store`.
fn lead_with(
    store: &OffsetStore,
    dir: &std::path::Path,
    group: &str,
    epoch: i32,
    replicas: Vec<i32>,
) -> Arc<Partition> {
    let index = store.partition_for(group);
    let p = runtime::led_partition(dir, OFFSETS_TOPIC, index, log_config(), epoch, replicas);
    assert!(store.begin_load(index, p.clone(), epoch));
    assert!(store.is_loading(index));
    assert!(store.load(index, epoch, |_| {}).unwrap());
    p
}

fn lead(store: &OffsetStore, dir: &std::path::Path, group: &str) -> Arc<Partition> {
    lead_with(store, dir, group, 1, vec![NODE])
}

/// Writes and waits for the commit (the ISR is this node alone, so at once).
fn done(w: Result<PendingWrite, OffsetStoreError>) {
    let w = w.unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(w.committed(Duration::from_secs(1)))
        .unwrap();
}

#[test]
fn commits_are_replayed_by_the_next_leader() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::new(config(), 0);
    let p = lead(&store, dir.path(), "group-a");
    done(store.commit(
        "group-a",
        vec![
            ("t".into(), 0, offset(10, "m0", 1)),
            ("t".into(), 1, offset(20, "", 1)),
        ],
        1,
    ));
    done(store.commit("group-a", vec![("t".into(), 0, offset(11, "m1", 2))], 2));
    done(store.store_group_metadata("group-a", Some(Bytes::from_static(b"gm")), 3));
    let index = store.partition_for("group-a");
    assert_eq!(
        dirs(dir.path()),
        vec![format!("__consumer_offsets-{index}")]
    );
    drop(p);
    drop(store);

    let store = OffsetStore::new(config(), 10);
    let mut metadata = Vec::new();
    let index = store.partition_for("group-a");
    let log = strata_storage::Log::open(
        &dir.path().join(format!("{OFFSETS_TOPIC}-{index}")),
        log_config(),
        0,
    )
    .unwrap();
    let p = Partition::new(OFFSETS_TOPIC.to_owned(), uuid::Uuid::nil(), index, log);
    p.become_leader(2).unwrap();
    assert!(store.begin_load(index, p.clone(), 2));
    assert!(!store.begin_load(index, p.clone(), 2), "one load per epoch");
    assert!(
        store
            .load(index, 2, |state| metadata = state
                .group_metadata()
                .map(|(g, v)| (g.clone(), v.clone()))
                .collect())
            .unwrap()
    );
    assert_eq!(store.fetch("group-a", "t", 0), Some(offset(11, "m1", 2)));
    assert_eq!(store.fetch("group-a", "t", 1), Some(offset(20, "", 1)));
    assert_eq!(store.fetch("group-a", "t", 2), None);
    assert_eq!(store.fetch("group-b", "t", 0), None);
    assert_eq!(
        metadata,
        vec![("group-a".to_owned(), Bytes::from_static(b"gm"))]
    );
    assert!(store.has_group("group-a"));
    assert!(!store.has_group("group-b"));
}

#[test]
fn only_the_loaded_leader_serves() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::new(config(), 0);
    let commit = |store: &OffsetStore| {
        store
            .commit("g", vec![("t".into(), 0, offset(1, "", 0))], 0)
            .map(|_| ())
    };
    assert!(matches!(
        commit(&store),
        Err(OffsetStoreError::NotCoordinator { .. })
    ));
    assert!(matches!(
        store.check("g"),
        Err(OffsetStoreError::NotCoordinator { .. })
    ));
    let p = lead(&store, dir.path(), "g");
    commit(&store).unwrap();
    let index = store.partition_for("g");
    // A newer epoch: loading until its load runs.
    assert!(store.begin_load(index, p.clone(), 2));
    assert!(matches!(
        commit(&store),
        Err(OffsetStoreError::LoadInProgress { .. })
    ));
    assert!(matches!(
        store.check("g"),
        Err(OffsetStoreError::LoadInProgress { .. })
    ));
    // The load of an epoch this node no longer leads in does nothing.
    assert!(!store.load(index, 1, |_| panic!("stale load")).unwrap());
    // Resigned while loading: the load finds nothing to do.
    let mut unloaded = false;
    assert!(store.resign(index, |_| unloaded = true));
    assert!(unloaded);
    assert!(!store.load(index, 2, |_| panic!("resigned")).unwrap());
    assert!(!store.resign(index, |_| panic!("twice")));
    assert_eq!(
        store.fetch("g", "t", 0),
        None,
        "the state went with the role"
    );
    assert!(matches!(
        commit(&store),
        Err(OffsetStoreError::NotCoordinator { .. })
    ));
}

#[tokio::test]
async fn a_commit_waits_for_the_isr() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::new(config(), 0);
    let p = lead_with(&store, dir.path(), "g", 3, vec![NODE, 2]);
    let pending = store
        .commit("g", vec![("t".into(), 0, offset(7, "", 0))], 0)
        .unwrap();
    // Follower 2 never fetches: not committed.
    let err = pending
        .committed(Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OffsetStoreError::NotCommitted {
                cause: AckError::TimedOut,
                ..
            }
        ),
        "{err:?}"
    );
    // Once the leader stops leading, a waiting write fails at once.
    let pending = store
        .commit("g", vec![("t".into(), 0, offset(8, "", 0))], 0)
        .unwrap();
    p.resign();
    let err = pending.committed(Duration::from_secs(5)).await.unwrap_err();
    assert!(
        matches!(
            err,
            OffsetStoreError::NotCommitted {
                cause: AckError::LeadershipEnded,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn deletes_survive_a_new_leader() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::new(config(), 0);
    let _p1 = lead(&store, dir.path(), "g1");
    let _p2 = lead(&store, dir.path(), "g2");
    let all = vec![
        ("t".into(), 0, offset(1, "", 1)),
        ("t".into(), 1, offset(2, "", 1)),
        ("u".into(), 0, offset(3, "", 1)),
    ];
    done(store.commit("g1", all.clone(), 1));
    done(store.commit("g2", all, 1));
    done(store.store_group_metadata("g2", Some(Bytes::from_static(b"x")), 1));
    let (n, w) = store
        .delete_offsets(
            "g1",
            &[("t".into(), 1), ("t".into(), 1), ("t".into(), 9)],
            2,
        )
        .unwrap();
    done(Ok(w));
    assert_eq!(n, 1);
    let (n, w) = store.delete_group("g2", 2).unwrap();
    done(Ok(w));
    assert_eq!(n, 3);
    drop((_p1, _p2, store));
    let store = OffsetStore::new(config(), 3);
    let _p1 = lead(&store, dir.path(), "g1");
    let _p2 = lead(&store, dir.path(), "g2");
    let left: Vec<(String, i32)> = store
        .fetch_all("g1")
        .into_iter()
        .map(|(t, p, _)| (t, p))
        .collect();
    assert_eq!(left, vec![("t".into(), 0), ("u".into(), 0)]);
    assert!(store.fetch_all("g2").is_empty());
    assert!(!store.has_group("g2"));
}

/// One pass of the log cleaner over `p`'s log, as the broker runs it, whatever its dirty
/// ratio; whether there was anything to clean.
pub(super) fn clean(p: &Partition, now_ms: i64) -> bool {
    let cc = CompactionConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionConfig::default()
    };
    let settings = CleanerSettings {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerSettings::default()
    };
    let Some(lso) = p.cleanable_last_stable_offset() else {
        return false;
    };
    let span = p.log().cleanable_span(None, lso, &cc, now_ms).unwrap();
    if !span.needs_cleaning(&cc) {
        return false;
    }
    let plan = p.log().clean_plan(span, &cc).unwrap();
    let mut throttle = Throttler::new(f64::MAX);
    cleaner::clean(&plan, &settings, now_ms, &mut throttle, &mut |g| {
        p.log().install_cleaned(g, now_ms)
    })
    .unwrap();
    true
}

#[test]
fn the_log_cleaner_keeps_the_latest_values_and_bounds_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::new(config(), 0);
    let p = lead(&store, dir.path(), "busy");
    // A group of the same partition whose offsets are deleted: its tombstones replay.
    let gone = (0..)
        .map(|n| format!("gone-{n}"))
        .find(|g| store.partition_for(g) == store.partition_for("busy"))
        .unwrap();
    done(store.commit(&gone, vec![("t".into(), 0, offset(7, "", 0))], 0));
    done(store.store_group_metadata("busy", Some(Bytes::from_static(b"gm")), 0));
    let meta = "x".repeat(200);
    let segment = log_config().segment_bytes as u64;
    for i in 0..30_000i64 {
        let part = (i % 4) as i32;
        done(store.commit("busy", vec![("t".into(), part, offset(i, &meta, i))], i));
        if i == 100 {
            done(store.delete_group(&gone, i).map(|(_, w)| w));
        }
        if i % 200 == 0 {
            clean(&p, i);
        }
        assert!(
            store.log_bytes() < 4 * segment,
            "log grew to {} after {i} commits",
            store.log_bytes()
        );
    }
    clean(&p, 30_000);
    drop((p, store));
    let store = OffsetStore::new(config(), 0);
    let _p = lead(&store, dir.path(), "busy");
    for part in 0..4 {
        let want = 30_000 - 4 + i64::from(part);
        assert_eq!(store.fetch("busy", "t", part).map(|v| v.offset), Some(want));
    }
    assert!(store.fetch_all(&gone).is_empty());
    assert!(store.has_group("busy"));
    let segments = dirs(&dir.path().join(format!(
        "__consumer_offsets-{}",
        store.partition_for("busy")
    )))
    .into_iter()
    .filter(|n| n.ends_with(".log"))
    .count();
    assert!(
        segments <= 3,
        "cleaned segments are merged ({segments} left)"
    );
}

#[test]
fn expiry_tombstones_only_expirable_groups_and_respects_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::new(config(), 0);
    let _a = lead(&store, dir.path(), "empty");
    let _b = lead(&store, dir.path(), "active");
    done(store.commit("empty", vec![("t".into(), 0, offset(1, "", 0))], 0));
    done(store.commit("active", vec![("t".into(), 0, offset(1, "", 0))], 0));
    let expirable = |g: &str, _: &str| g == "empty";
    // Too soon for the check interval.
    assert_eq!(store.maybe_expire(500, expirable).unwrap(), None);
    // The interval passed, the retention not yet.
    assert_eq!(store.maybe_expire(5_000, expirable).unwrap(), Some(0));
    assert_eq!(store.maybe_expire(10_000, expirable).unwrap(), Some(1));
    assert_eq!(store.group_ids(), vec!["active".to_owned()]);
    assert!(store.has_offsets("active") && !store.has_offsets("empty"));
    assert_eq!(store.fetch("empty", "t", 0), None);
    assert!(store.fetch("active", "t", 0).is_some());
    drop((_a, _b, store));
    let store = OffsetStore::new(config(), 0);
    let _a = lead(&store, dir.path(), "empty");
    let _b = lead(&store, dir.path(), "active");
    assert_eq!(store.fetch("empty", "t", 0), None);
    assert!(store.fetch("active", "t", 0).is_some());
}

#[test]
fn a_torn_tail_loses_only_the_unfinished_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::new(config(), 0);
    let p = lead(&store, dir.path(), "g");
    done(store.commit("g", vec![("t".into(), 0, offset(1, "", 0))], 0));
    done(store.commit("g", vec![("t".into(), 0, offset(2, "", 0))], 0));
    drop((p, store));
    let seg = dir
        .path()
        .join(format!(
            "__consumer_offsets-{}",
            records::partition_for("g", 50)
        ))
        .join("00000000000000000000.log");
    let len = std::fs::metadata(&seg).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(len - 3).unwrap();
    let store = OffsetStore::new(config(), 0);
    let _p = lead(&store, dir.path(), "g");
    assert_eq!(store.fetch("g", "t", 0).map(|v| v.offset), Some(1));
}

#[test]
fn an_undecodable_record_is_skipped_and_the_load_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::new(config(), 0);
    let p = lead(&store, dir.path(), "g");
    done(store.commit("g", vec![("t".into(), 0, offset(1, "", 0))], 0));
    // A record of an unknown key version, then one whose value is garbage, then a good one.
    let garbage = record_batch::encode_batch(
        0,
        &[
            SimpleRecord {
                key: Some(Bytes::from_static(b"\x7f\x7fjunk")),
                value: Some(Bytes::from_static(b"junk")),
                timestamp: 0,
                headers: Vec::new(),
            },
            SimpleRecord {
                key: Some(
                    CoordinatorRecord::OffsetCommit {
                        key: OffsetKey {
                            group: "g".into(),
                            topic: "t".into(),
                            partition: 1,
                        },
                        value: None,
                    }
                    .encode()
                    .0,
                ),
                value: Some(Bytes::from_static(b"\x00\x03\xff")),
                timestamp: 0,
                headers: Vec::new(),
            },
        ],
    );
    let mut buf = BytesMut::from(&garbage[..]);
    p.append_as_leader(&mut buf, 1, 0).unwrap();
    done(store.commit("g", vec![("t".into(), 2, offset(3, "", 0))], 0));
    drop((p, store));
    let store = OffsetStore::new(config(), 0);
    let _p = lead(&store, dir.path(), "g");
    assert_eq!(store.fetch("g", "t", 0).map(|v| v.offset), Some(1));
    assert_eq!(store.fetch("g", "t", 1), None);
    assert_eq!(store.fetch("g", "t", 2).map(|v| v.offset), Some(3));
}
