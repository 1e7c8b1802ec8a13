//! The store against real partition logs in a temporary directory.

use super::state::COMPACTION_FLOOR_BYTES;
use super::*;

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

fn dirs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn partitions_are_created_lazily_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path(), config(), 0).unwrap();
    assert!(
        dirs(dir.path()).is_empty(),
        "nothing created before the first commit"
    );
    store
        .commit(
            "group-a",
            vec![
                ("t".into(), 0, offset(10, "m0", 1)),
                ("t".into(), 1, offset(20, "", 1)),
            ],
            1,
        )
        .unwrap();
    store
        .commit("group-a", vec![("t".into(), 0, offset(11, "m1", 2))], 2)
        .unwrap();
    store
        .store_group_metadata("group-a", Some(Bytes::from_static(b"gm")), 3)
        .unwrap();
    let p = store.partition_for("group-a");
    assert_eq!(dirs(dir.path()), vec![format!("__consumer_offsets-{p}")]);
    drop(store);

    let store = OffsetStore::open(dir.path(), config(), 10).unwrap();
    assert_eq!(store.fetch("group-a", "t", 0), Some(offset(11, "m1", 2)));
    assert_eq!(store.fetch("group-a", "t", 1), Some(offset(20, "", 1)));
    assert_eq!(store.fetch("group-a", "t", 2), None);
    assert_eq!(store.fetch("group-b", "t", 0), None);
    assert_eq!(
        store.group_metadata(),
        vec![("group-a".to_owned(), Bytes::from_static(b"gm"))]
    );
    assert!(store.has_group("group-a"));
    assert!(!store.has_group("group-b"));
}

#[test]
fn deletes_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path(), config(), 0).unwrap();
    let all = vec![
        ("t".into(), 0, offset(1, "", 1)),
        ("t".into(), 1, offset(2, "", 1)),
        ("u".into(), 0, offset(3, "", 1)),
    ];
    store.commit("g1", all.clone(), 1).unwrap();
    store.commit("g2", all, 1).unwrap();
    store
        .store_group_metadata("g2", Some(Bytes::from_static(b"x")), 1)
        .unwrap();
    let n = store
        .delete_offsets(
            "g1",
            &[("t".into(), 1), ("t".into(), 1), ("t".into(), 9)],
            2,
        )
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(store.delete_group("g2", 2).unwrap(), 3);
    drop(store);
    let store = OffsetStore::open(dir.path(), config(), 3).unwrap();
    let left: Vec<(String, i32)> = store
        .fetch_all("g1")
        .into_iter()
        .map(|(t, p, _)| (t, p))
        .collect();
    assert_eq!(left, vec![("t".into(), 0), ("u".into(), 0)]);
    assert!(store.fetch_all("g2").is_empty());
    assert!(!store.has_group("g2"));
    assert!(store.group_metadata().is_empty());
}

#[test]
fn compaction_keeps_the_log_bounded_and_the_latest_values() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path(), config(), 0).unwrap();
    let meta = "x".repeat(200);
    for i in 0..30_000i64 {
        let p = (i % 4) as i32;
        store
            .commit("busy", vec![("t".into(), p, offset(i, &meta, i))], i)
            .unwrap();
        assert!(
            store.log_bytes() < 2 * COMPACTION_FLOOR_BYTES,
            "log grew to {} after {i} commits",
            store.log_bytes()
        );
    }
    drop(store);
    let store = OffsetStore::open(dir.path(), config(), 0).unwrap();
    for p in 0..4 {
        let want = 30_000 - 4 + i64::from(p);
        assert_eq!(store.fetch("busy", "t", p).map(|v| v.offset), Some(want));
    }
    let part = dir.path().join(format!(
        "__consumer_offsets-{}",
        store.partition_for("busy")
    ));
    let segments = dirs(&part)
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .count();
    assert_eq!(segments, 1, "older segments are deleted");
}

#[test]
fn expiry_tombstones_only_expirable_groups_and_respects_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path(), config(), 0).unwrap();
    store
        .commit("empty", vec![("t".into(), 0, offset(1, "", 0))], 0)
        .unwrap();
    store
        .commit("active", vec![("t".into(), 0, offset(1, "", 0))], 0)
        .unwrap();
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
    drop(store);
    let store = OffsetStore::open(dir.path(), config(), 0).unwrap();
    assert_eq!(store.fetch("empty", "t", 0), None);
    assert!(store.fetch("active", "t", 0).is_some());
}

#[test]
fn a_torn_tail_loses_only_the_unfinished_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path(), config(), 0).unwrap();
    store
        .commit("g", vec![("t".into(), 0, offset(1, "", 0))], 0)
        .unwrap();
    store
        .commit("g", vec![("t".into(), 0, offset(2, "", 0))], 0)
        .unwrap();
    drop(store);
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
    let store = OffsetStore::open(dir.path(), config(), 0).unwrap();
    assert_eq!(store.fetch("g", "t", 0).map(|v| v.offset), Some(1));
}
