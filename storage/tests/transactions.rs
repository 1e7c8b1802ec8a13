//! Transactions in a partition's log, through `Log`'s public API: transactional appends and
//! markers, the refusals Kafka makes, the last stable offset, the aborted-transaction index
//! (`.txnindex`) and its rebuild after a crash, truncation, replication and retention; and a
//! property test against a model of the log.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use bytes::Bytes;
use proptest::prelude::*;
use strata_protocol::record_batch::{
    self, SimpleRecord, encode_batch, set_producer, set_transactional,
};
use strata_storage::txn_index::AbortedTxn;
use strata_storage::{Log, LogConfig, LogError, TxnMarker};

/// A batch of `n` records of producer `pid` (epoch `epoch`) from sequence `seq`.
fn data(pid: i64, epoch: i16, seq: i32, n: usize, transactional: bool) -> Vec<u8> {
    let recs: Vec<SimpleRecord> = (0..n)
        .map(|_| SimpleRecord {
            value: Some(Bytes::from(vec![b'v'; 60])),
            timestamp: 1_000,
            ..Default::default()
        })
        .collect();
    let mut b = encode_batch(0, &recs).to_vec();
    if pid >= 0 {
        set_producer(&mut b, pid, epoch, seq);
    }
    if transactional {
        set_transactional(&mut b);
    }
    b
}

fn marker(pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> TxnMarker {
    TxnMarker {
        producer_id: pid,
        producer_epoch: epoch,
        coordinator_epoch,
        commit,
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 100,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

fn txnindex_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".txnindex"))
        .collect();
    v.sort();
    v
}

fn all_aborted(log: &Log) -> Vec<AbortedTxn> {
    log.aborted_transactions(log.log_start_offset(), i64::MAX)
}

#[test]
fn an_open_transaction_holds_the_last_stable_offset_until_its_marker_is_replicated() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    log.append(&mut data(-1, -1, -1, 2, false), 0, 0).unwrap(); // 0..=1
    log.append(&mut data(7, 0, 0, 3, true), 0, 0).unwrap(); // 2..=4
    log.append(&mut data(-1, -1, -1, 1, false), 0, 0).unwrap(); // 5
    assert_eq!(log.last_stable_offset(6), 2);
    assert_eq!(
        log.last_stable_offset(1),
        1,
        "never past the high watermark"
    );
    let info = log.append_marker(&marker(7, 0, true, 0), 0, 0).unwrap();
    assert_eq!((info.base_offset, info.record_count), (6, 1));
    // Decided, but the marker is not below the high watermark yet.
    assert_eq!(log.last_stable_offset(6), 2);
    assert_eq!(log.last_stable_offset(7), 7);
    assert!(all_aborted(&log).is_empty(), "a commit indexes nothing");
    assert_eq!(log.producer_state().entry(7).unwrap().coordinator_epoch, 0);
    assert_eq!(
        log.producer_state()
            .entry(7)
            .unwrap()
            .current_txn_first_offset,
        -1
    );
}

#[test]
fn an_abort_is_indexed_with_the_earliest_other_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    log.append(&mut data(1, 0, 0, 1, true), 0, 0).unwrap(); // 0
    log.append(&mut data(2, 0, 0, 1, true), 0, 0).unwrap(); // 1
    log.append(&mut data(1, 0, 1, 1, true), 0, 0).unwrap(); // 2
    log.append_marker(&marker(1, 0, false, 0), 0, 0).unwrap(); // 3
    assert_eq!(
        all_aborted(&log),
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0,
            last_offset: 3,
            last_stable_offset: 1,
        }]
    );
    assert_eq!(log.last_stable_offset(4), 1);
    log.append_marker(&marker(2, 0, true, 0), 0, 0).unwrap(); // 4
    assert_eq!(log.last_stable_offset(5), 5);
    // The search from past the abort's marker reports nothing; from inside it, the abort.
    assert!(log.aborted_transactions(4, 5).is_empty());
    assert_eq!(log.aborted_transactions(2, 5).len(), 1);
}

#[test]
fn kafka_s_refusals_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    log.append(&mut data(5, 3, 0, 1, true), 0, 0).unwrap();
    // A non-transactional batch inside the producer's open transaction.
    assert!(matches!(
        log.append(&mut data(5, 3, 1, 1, false), 0, 0),
        Err(LogError::InvalidTxnState {
            producer_id: 5,
            first_offset: 0
        })
    ));
    // A client may not write a marker.
    let mut forged = record_batch::encode_end_txn_marker(
        5,
        3,
        record_batch::EndTxnMarker {
            commit: true,
            coordinator_epoch: 0,
        },
        0,
    )
    .to_vec();
    assert!(matches!(
        log.append(&mut forged, 0, 0),
        Err(LogError::ControlBatchFromClient)
    ));
    // An older epoch is fenced (the same one is not: Kafka 4.0 and 4.1 accept it).
    assert!(matches!(
        log.append_marker(&marker(5, 2, false, 0), 0, 0),
        Err(LogError::InvalidProducerEpoch { .. })
    ));
    assert_eq!(log.log_end_offset(), 1);
    log.append_marker(&marker(5, 4, false, 3), 0, 0).unwrap();
    // A marker from an older coordinator is fenced.
    log.append(&mut data(5, 4, 0, 1, true), 0, 0).unwrap();
    assert!(matches!(
        log.append_marker(&marker(5, 5, true, 2), 0, 0),
        Err(LogError::TransactionCoordinatorFenced {
            coordinator_epoch: 2,
            current: 3,
            ..
        })
    ));
    // The epoch bump of version 2 restarts the producer's sequences.
    log.append_marker(&marker(5, 5, true, 3), 0, 0).unwrap();
    log.append(&mut data(5, 5, 0, 1, false), 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 5);
}

#[test]
fn the_index_survives_a_clean_restart_and_is_rebuilt_after_a_crash_or_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open_with(dir.path(), config(), 0, false).unwrap();
    let mut seq = BTreeMap::new();
    for round in 0..12i64 {
        let pid = round % 3;
        let s = seq.entry(pid).or_insert(0);
        log.append_unflushed(&mut data(pid, 0, *s, 2, true), 0, 0)
            .unwrap();
        *s += 2;
        log.append_marker(&marker(pid, 0, round % 2 == 0, 0), 0, 0)
            .unwrap();
    }
    let want = all_aborted(&log);
    assert_eq!(want.len(), 6);
    assert!(log.segment_count() > 3, "the aborts span several segments");
    log.prepare_clean_shutdown().unwrap();
    log.close().unwrap();
    let files = txnindex_files(dir.path());
    assert!(files.len() >= 2, "{files:?}");
    let log = Log::open_with(dir.path(), config(), 0, true).unwrap();
    assert_eq!(all_aborted(&log), want, "clean restart");
    drop(log);
    // A crash: every segment recovered (no recovery point checkpoint), every index rebuilt.
    for f in &files {
        fs::remove_file(dir.path().join(f)).unwrap();
    }
    let log = Log::open_with(dir.path(), config(), 0, false).unwrap();
    assert_eq!(all_aborted(&log), want, "rebuilt after a crash");
    drop(log);
    // A torn index in a trusted segment is rebuilt too.
    let torn = dir.path().join(&txnindex_files(dir.path())[0]);
    let mut bytes = fs::read(&torn).unwrap();
    bytes.extend_from_slice(&[1, 2, 3]);
    fs::write(&torn, bytes).unwrap();
    let log = Log::open_with(dir.path(), config(), 0, true).unwrap();
    assert_eq!(all_aborted(&log), want, "rebuilt after damage");
    assert_eq!(fs::read(&torn).unwrap().len() % 34, 0);
}

#[test]
fn truncation_reopens_a_transaction_and_a_follower_indexes_what_it_copies() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = Log::open(&dir.path().join("leader"), config(), 0).unwrap();
    leader.append(&mut data(9, 1, 0, 2, true), 0, 0).unwrap(); // 0..=1
    leader
        .append(&mut data(-1, -1, -1, 1, false), 0, 0)
        .unwrap(); // 2
    leader.append_marker(&marker(9, 1, false, 0), 0, 0).unwrap(); // 3
    let want = all_aborted(&leader);
    assert_eq!(want.len(), 1);
    // A follower copies the leader's batches as they are.
    let read = leader.read(0, u32::MAX, i64::MAX, true).unwrap();
    let mut bytes = Vec::new();
    for r in &read.regions {
        r.read_into(&mut bytes).unwrap();
    }
    let mut follower = Log::open(&dir.path().join("follower"), config(), 0).unwrap();
    follower.append_as_follower(&mut bytes, 0).unwrap();
    assert_eq!(all_aborted(&follower), want);
    assert_eq!(follower.last_stable_offset(4), 4);
    // Truncating the marker away reopens the transaction.
    leader.truncate_to(3).unwrap();
    assert!(all_aborted(&leader).is_empty());
    assert_eq!(leader.last_stable_offset(3), 0);
    assert_eq!(
        leader
            .producer_state()
            .entry(9)
            .unwrap()
            .current_txn_first_offset,
        0
    );
    leader.append_marker(&marker(9, 1, true, 0), 0, 0).unwrap();
    assert_eq!(leader.last_stable_offset(4), 4);
}

#[test]
fn retention_takes_the_index_files_and_clamps_an_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    log.append(&mut data(1, 0, 0, 1, true), 0, 0).unwrap();
    log.append_marker(&marker(1, 0, false, 0), 0, 0).unwrap();
    log.append(&mut data(2, 0, 0, 1, true), 0, 0).unwrap(); // open from offset 2
    for _ in 0..10 {
        log.append(&mut data(-1, -1, -1, 3, false), 0, 0).unwrap();
    }
    log.roll_if_not_empty().unwrap();
    assert!(!txnindex_files(dir.path()).is_empty());
    let end = log.log_end_offset();
    log.set_config(LogConfig {
        retention_bytes: 0,
        ..config()
    });
    log.apply_retention(0).unwrap();
    assert!(txnindex_files(dir.path()).is_empty());
    assert!(log.log_start_offset() > 2);
    // The open transaction's start went with the log: the LSO is the log start.
    assert_eq!(log.last_stable_offset(end), log.log_start_offset());
}

/// One step of a history.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A transactional batch of producer `0..3`.
    Txn(i64),
    /// A plain batch.
    Plain,
    /// A marker for producer `0..3`, commit or abort.
    End(i64, bool),
    /// Close cleanly and reopen.
    Restart,
    /// Drop without closing, and reopen as after a crash.
    Crash,
    /// Truncate to this per-mille of the log end.
    Truncate(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0i64..3).prop_map(Step::Txn),
        2 => Just(Step::Plain),
        3 => ((0i64..3), any::<bool>()).prop_map(|(p, c)| Step::End(p, c)),
        1 => Just(Step::Restart),
        1 => Just(Step::Crash),
        1 => (0i64..1000).prop_map(Step::Truncate),
    ]
}

/// What the log holds, offset by offset: the producer of a transactional record, `None`
/// for a plain one, and markers as (producer, aborted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rec {
    Plain,
    Txn(i64),
    Marker(i64, bool),
}

/// The aborted transactions and last stable offset (high watermark at the log end) the
/// model's log defines.
fn model(log: &[Rec]) -> (Vec<AbortedTxn>, i64) {
    let mut open: BTreeMap<i64, i64> = BTreeMap::new();
    let mut aborted = Vec::new();
    for (i, r) in log.iter().enumerate() {
        let offset = i as i64;
        match *r {
            Rec::Plain => {}
            Rec::Txn(p) => {
                open.entry(p).or_insert(offset);
            }
            Rec::Marker(p, abort) => {
                if let Some(first) = open.remove(&p)
                    && abort
                {
                    aborted.push(AbortedTxn {
                        producer_id: p,
                        first_offset: first,
                        last_offset: offset,
                        last_stable_offset: open.values().min().copied().unwrap_or(offset + 1),
                    });
                }
            }
        }
    }
    let lso = open.values().min().copied().unwrap_or(log.len() as i64);
    (aborted, lso)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the history of appends, markers, restarts, crashes and truncations, the
    /// aborted transactions the log reports and its last stable offset are the model's.
    #[test]
    fn the_log_agrees_with_the_model(steps in prop::collection::vec(step(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open_with(dir.path(), config(), 0, false).unwrap();
        let mut recs: Vec<Rec> = Vec::new();
        for s in steps {
            match s {
                Step::Txn(p) => {
                    let last = log.producer_state().entry(p).map_or(-1, |e| e.last_seq());
                    log.append_unflushed(&mut data(p, 0, last + 1, 2, true), 0, 0).unwrap();
                    recs.extend([Rec::Txn(p), Rec::Txn(p)]);
                }
                Step::Plain => {
                    log.append_unflushed(&mut data(-1, -1, -1, 1, false), 0, 0).unwrap();
                    recs.push(Rec::Plain);
                }
                Step::End(p, commit) => {
                    log.append_marker(&marker(p, 0, commit, 0), 0, 0).unwrap();
                    recs.push(Rec::Marker(p, !commit));
                }
                Step::Restart => {
                    log.prepare_clean_shutdown().unwrap();
                    log.close().unwrap();
                    log = Log::open_with(dir.path(), config(), 0, true).unwrap();
                }
                Step::Crash => {
                    drop(log);
                    log = Log::open_with(dir.path(), config(), 0, false).unwrap();
                }
                Step::Truncate(permille) => {
                    log.truncate_to(log.log_end_offset() * permille / 1000).unwrap();
                    recs.truncate(usize::try_from(log.log_end_offset()).unwrap());
                }
            }
            prop_assert_eq!(log.log_end_offset(), recs.len() as i64);
            let (aborted, lso) = model(&recs);
            prop_assert_eq!(all_aborted(&log), aborted);
            prop_assert_eq!(log.last_stable_offset(log.log_end_offset()), lso);
        }
    }
}
