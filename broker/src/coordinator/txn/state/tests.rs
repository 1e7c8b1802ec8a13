//! The decision tables of the state machine, and a property test of its invariants: only
//! the newest producer instance commits, never two instances in one epoch, and the markers
//! of every decided transaction cover exactly the partitions it added.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use strata_protocol::ResponseError;

use super::*;

const ID: &str = "tx";

fn parts(list: &[(&str, i32)]) -> BTreeMap<String, BTreeSet<i32>> {
    let mut m: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for (t, p) in list {
        m.entry((*t).to_owned()).or_default().insert(*p);
    }
    m
}

/// Hands out producer ids 1000, 1001, ...
fn ids() -> impl FnMut() -> i64 {
    let mut next = 1000;
    move || {
        next += 1;
        next - 1
    }
}

fn err(e: ResponseError) -> i16 {
    e.code()
}

/// Runs an InitProducerId to its written answer.
fn init(
    s: &mut TxnStates,
    expected: Option<(i64, i16)>,
    alloc: &mut dyn FnMut() -> i64,
) -> (i64, i16) {
    match s
        .init_producer_id(ID, 60_000, expected, false, 0, alloc)
        .unwrap()
    {
        InitOutcome::Write(next) => {
            let answer = (next.producer_id, next.producer_epoch);
            s.complete(ID, next);
            answer
        }
        InitOutcome::Fence(_) => panic!("fenced"),
    }
}

fn add(s: &mut TxnStates, pid: i64, epoch: i16, p: &[(&str, i32)], tv2: bool) -> Result<(), i16> {
    if let Some(next) = s.add_partitions(ID, pid, epoch, &parts(p), tv2, 5)? {
        s.complete(ID, next);
    }
    Ok(())
}

/// EndTxn through its markers: returns the prepared state's (pid, epoch), the markers'.
fn end(
    s: &mut TxnStates,
    pid: i64,
    epoch: i16,
    commit: bool,
    tv2: bool,
) -> Result<TxnMetadata, i16> {
    match s.end_txn(ID, pid, epoch, commit, tv2, 9, &mut || 7777)? {
        EndOutcome::Prepare(prepared) => {
            s.complete(ID, prepared.clone());
            let done = s.prepare_complete(ID, 10).unwrap();
            s.complete(ID, done);
            Ok(prepared)
        }
        EndOutcome::Done { .. } => Ok(s.get(ID).unwrap().clone()),
    }
}

#[test]
fn init_bumps_the_epoch_and_recognises_a_retry() {
    let mut s = TxnStates::default();
    let mut alloc = ids();
    assert_eq!(init(&mut s, None, &mut alloc), (1000, 0));
    assert_eq!(init(&mut s, None, &mut alloc), (1000, 1));
    assert_eq!(init(&mut s, Some((1000, 1)), &mut alloc), (1000, 2));
    // The answer was lost; the retry carries the epoch the producer had.
    assert_eq!(init(&mut s, Some((1000, 1)), &mut alloc), (1000, 2));
    assert_eq!(
        s.init_producer_id(ID, 60_000, Some((1000, 0)), false, 0, &mut alloc),
        Err(err(ResponseError::ProducerFenced))
    );
    assert_eq!(
        s.init_producer_id(ID, 60_000, Some((55, 2)), false, 0, &mut alloc),
        Err(err(ResponseError::ProducerFenced))
    );
    // A pending write makes everyone wait.
    let InitOutcome::Write(next) = s
        .init_producer_id(ID, 60_000, None, false, 0, &mut alloc)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        s.add_partitions(ID, 1000, 2, &parts(&[("t", 0)]), false, 0),
        Err(err(ResponseError::ConcurrentTransactions))
    );
    s.abandon(ID);
    assert_eq!(
        s.get(ID).unwrap().producer_epoch,
        2,
        "the failed write changed nothing"
    );
    drop(next);
}

#[test]
fn a_version_1_transaction_commits_at_its_epoch_and_a_retry_is_answered() {
    let mut s = TxnStates::default();
    let mut alloc = ids();
    let (pid, epoch) = init(&mut s, None, &mut alloc);
    add(&mut s, pid, epoch, &[("a", 0), ("b", 1)], false).unwrap();
    assert_eq!(s.get(ID).unwrap().state, TxnState::Ongoing);
    assert_eq!(s.get(ID).unwrap().start_ms, 5);
    assert_eq!(
        s.add_partitions(ID, pid, epoch, &parts(&[("a", 0)]), false, 6),
        Ok(None),
        "nothing new to add"
    );
    assert_eq!(
        s.verify(ID, pid, epoch, &parts(&[("a", 0), ("c", 0)]))
            .unwrap(),
        BTreeMap::from([
            (("a".to_owned(), 0), 0),
            (
                ("c".to_owned(), 0),
                err(ResponseError::TransactionAbortable)
            )
        ])
    );
    let EndOutcome::Prepare(prepared) = s
        .end_txn(ID, pid, epoch, true, false, 9, &mut alloc)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (prepared.state, prepared.producer_epoch),
        (TxnState::PrepareCommit, epoch)
    );
    assert_eq!(prepared.partitions, parts(&[("a", 0), ("b", 1)]));
    s.complete(ID, prepared);
    assert_eq!(
        s.add_partitions(ID, pid, epoch, &parts(&[("a", 0)]), false, 6),
        Err(err(ResponseError::ConcurrentTransactions)),
        "while the markers go out"
    );
    let done = s.prepare_complete(ID, 10).unwrap();
    assert!(done.partitions.is_empty());
    s.complete(ID, done);
    assert_eq!(s.get(ID).unwrap().state, TxnState::CompleteCommit);
    assert!(matches!(
        s.end_txn(ID, pid, epoch, true, false, 11, &mut alloc),
        Ok(EndOutcome::Done { .. })
    ));
    assert_eq!(
        s.end_txn(ID, pid, epoch, false, false, 11, &mut alloc),
        Err(err(ResponseError::InvalidTxnState))
    );
    // The next transaction starts from CompleteCommit at the same epoch.
    add(&mut s, pid, epoch, &[("c", 2)], false).unwrap();
    assert_eq!(s.get(ID).unwrap().partitions, parts(&[("c", 2)]));
}

#[test]
fn version_2_bumps_at_every_end_and_aborts_an_empty_transaction() {
    let mut s = TxnStates::default();
    let mut alloc = ids();
    let (pid, e0) = init(&mut s, None, &mut alloc);
    add(&mut s, pid, e0, &[("a", 0)], true).unwrap();
    let prepared = end(&mut s, pid, e0, true, true).unwrap();
    assert_eq!(
        prepared.producer_epoch,
        e0 + 1,
        "the markers carry the bumped epoch"
    );
    let meta = s.get(ID).unwrap();
    assert_eq!(
        (meta.state, meta.producer_epoch),
        (TxnState::CompleteCommit, e0 + 1)
    );
    // A retry with the old epoch is answered with the new one.
    assert_eq!(
        s.end_txn(ID, pid, e0, true, true, 12, &mut alloc),
        Ok(EndOutcome::Done {
            producer_id: pid,
            producer_epoch: e0 + 1
        })
    );
    assert_eq!(
        s.end_txn(ID, pid, e0, false, true, 12, &mut alloc),
        Err(err(ResponseError::InvalidTxnState))
    );
    assert_eq!(
        s.end_txn(ID, pid, e0 + 1, true, true, 12, &mut alloc),
        Err(err(ResponseError::InvalidTxnState))
    );
    // The old epoch may not start a transaction.
    assert_eq!(
        add(&mut s, pid, e0, &[("a", 0)], true),
        Err(err(ResponseError::ProducerFenced))
    );
    // Aborting with nothing added bumps too, and sends no marker.
    let prepared = end(&mut s, pid, e0 + 1, false, true).unwrap();
    assert!(prepared.partitions.is_empty());
    assert_eq!(s.get(ID).unwrap().producer_epoch, e0 + 2);
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    let mut s = TxnStates::default();
    let mut alloc = ids();
    let (pid, _) = init(&mut s, None, &mut alloc);
    let meta = s.entries.get_mut(ID).unwrap();
    meta.producer_epoch = EXHAUSTED_EPOCH;
    add(&mut s, pid, EXHAUSTED_EPOCH, &[("a", 0)], true).unwrap();
    let prepared = end(&mut s, pid, EXHAUSTED_EPOCH, true, true).unwrap();
    assert_eq!(
        (prepared.producer_id, prepared.producer_epoch),
        (pid, i16::MAX)
    );
    let meta = s.get(ID).unwrap();
    assert_eq!((meta.producer_id, meta.producer_epoch), (7777, 0));
    assert_eq!(meta.previous_producer_id, pid);
    // The retry from the old producer id is recognised.
    assert_eq!(
        s.end_txn(ID, pid, EXHAUSTED_EPOCH, true, true, 20, &mut alloc),
        Ok(EndOutcome::Done {
            producer_id: 7777,
            producer_epoch: 0
        })
    );
    // Version 1 rotates at InitProducerId instead.
    let mut s = TxnStates::default();
    let (pid, _) = init(&mut s, None, &mut alloc);
    s.entries.get_mut(ID).unwrap().producer_epoch = EXHAUSTED_EPOCH;
    let (new_pid, epoch) = init(&mut s, None, &mut alloc);
    assert_ne!(new_pid, pid);
    assert_eq!(epoch, 0);
}

#[test]
fn a_new_instance_fences_an_ongoing_transaction() {
    for tv2 in [false, true] {
        let mut s = TxnStates::default();
        let mut alloc = ids();
        let (pid, e) = init(&mut s, None, &mut alloc);
        add(&mut s, pid, e, &[("a", 0)], tv2).unwrap();
        let InitOutcome::Fence(abort) = s
            .init_producer_id(ID, 60_000, None, tv2, 30, &mut alloc)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (abort.state, abort.producer_epoch),
            (TxnState::PrepareAbort, e + 1)
        );
        assert_eq!(abort.partitions, parts(&[("a", 0)]));
        // The zombie cannot commit meanwhile.
        assert!(s.end_txn(ID, pid, e, true, tv2, 31, &mut alloc).is_err());
        s.complete(ID, abort);
        let done = s.prepare_complete(ID, 32).unwrap();
        s.complete(ID, done);
        assert_eq!(
            s.end_txn(ID, pid, e, true, tv2, 33, &mut alloc),
            Err(err(if tv2 {
                ResponseError::InvalidTxnState
            } else {
                ResponseError::ProducerFenced
            })),
            "tv2 {tv2}: the zombie's commit"
        );
        let (_, newer) = init(&mut s, None, &mut alloc);
        assert_eq!(newer, e + 2);
    }
}

#[test]
fn timeouts_abort_and_idle_ids_expire() {
    let mut s = TxnStates::default();
    let mut alloc = ids();
    let (pid, e) = init(&mut s, None, &mut alloc);
    add(&mut s, pid, e, &[("a", 0)], false).unwrap(); // started at 5
    assert!(
        s.abort_timed_out(false, 60_005).is_empty(),
        "strictly past the timeout"
    );
    let aborts = s.abort_timed_out(false, 60_006);
    assert_eq!(aborts.len(), 1);
    s.complete(ID, aborts[0].1.clone());
    assert!(
        s.expire(i64::MAX, 1).is_empty(),
        "a decided transaction never expires"
    );
    let done = s.prepare_complete(ID, 60_007).unwrap();
    s.complete(ID, done);
    assert!(s.expire(60_007 + 99, 100).is_empty());
    assert_eq!(s.expire(60_007 + 100, 100), vec![ID.to_owned()]);
    assert_eq!(
        s.init_producer_id(ID, 1, None, false, 0, &mut alloc),
        Err(err(ResponseError::ConcurrentTransactions)),
        "while the tombstone is written"
    );
    s.complete_dead(ID);
    assert!(s.get(ID).is_none());
}

#[test]
fn a_load_resumes_the_decided_transactions() {
    let mut s = TxnStates::default();
    let mut alloc = ids();
    let (pid, e) = init(&mut s, None, &mut alloc);
    add(&mut s, pid, e, &[("a", 0)], false).unwrap();
    let EndOutcome::Prepare(prepared) = s.end_txn(ID, pid, e, true, false, 9, &mut alloc).unwrap()
    else {
        panic!()
    };
    // The new leader replays the log, which ends at the PrepareCommit record.
    let mut loaded = TxnStates::default();
    loaded.replay(ID.to_owned(), Some(prepared.log_value()));
    let resumed = loaded.resume_prepared(50);
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].1.partitions, parts(&[("a", 0)]));
    assert_eq!(resumed[0].2.state, TxnState::CompleteCommit);
    loaded.replay(ID.to_owned(), None);
    assert!(loaded.get(ID).is_none());
}

/// One step of the simulation: which of two instances of the producer acts, and whether
/// the write it leads to succeeds.
#[derive(Debug, Clone)]
enum Op {
    Init(usize, bool),
    Add(usize, i32, bool),
    End(usize, bool, bool),
    Markers(bool),
    Tick(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0usize..2, prop::bool::weighted(0.8)).prop_map(|(i, ok)| Op::Init(i, ok)),
        4 => (0usize..2, 0i32..4, prop::bool::weighted(0.9)).prop_map(|(i, p, ok)| Op::Add(i, p, ok)),
        3 => (0usize..2, any::<bool>(), prop::bool::weighted(0.9)).prop_map(|(i, c, ok)| Op::End(i, c, ok)),
        3 => prop::bool::weighted(0.8).prop_map(Op::Markers),
        1 => (0i64..40_000).prop_map(Op::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn only_the_newest_instance_commits_and_markers_cover_what_was_added(
        ops in prop::collection::vec(op(), 1..80),
        tv2 in any::<bool>(),
    ) {
        let mut s = TxnStates::default();
        let mut alloc = ids();
        let mut now = 0i64;
        // What each instance holds, and which was answered last.
        let mut held: [Option<(i64, i16)>; 2] = [None, None];
        let mut newest: Option<usize> = None;
        // Partitions added (written) in the current transaction.
        let mut added: BTreeSet<i32> = BTreeSet::new();
        // A decided transaction waiting for its markers: (prepared state, partitions).
        let mut deciding: Option<TxnMetadata> = None;
        let mut committed: BTreeMap<(i64, i16), usize> = BTreeMap::new();
        let decided = |prepared: &TxnMetadata, added: &mut BTreeSet<i32>| -> Result<(), TestCaseError> {
            let marked: BTreeSet<i32> = prepared.partitions.get("t").cloned().unwrap_or_default();
            prop_assert_eq!(&marked, &*added, "the markers cover exactly the partitions added");
            added.clear();
            Ok(())
        };
        for op in ops {
            match op {
                Op::Init(i, ok) => match s.init_producer_id(ID, 30_000, held[i], tv2, now, &mut alloc) {
                    Ok(InitOutcome::Write(next)) => {
                        if ok {
                            held[i] = Some((next.producer_id, next.producer_epoch));
                            newest = Some(i);
                            s.complete(ID, next);
                        } else {
                            s.abandon(ID);
                        }
                    }
                    Ok(InitOutcome::Fence(abort)) => {
                        if ok {
                            decided(&abort, &mut added)?;
                            s.complete(ID, abort.clone());
                            deciding = Some(abort);
                        } else {
                            s.abandon(ID);
                        }
                    }
                    Err(_) => {}
                },
                Op::Add(i, p, ok) => {
                    let Some((pid, epoch)) = held[i] else { continue };
                    match s.add_partitions(ID, pid, epoch, &parts(&[("t", p)]), tv2, now) {
                        Ok(Some(next)) => {
                            if ok {
                                s.complete(ID, next);
                                added.insert(p);
                            } else {
                                s.abandon(ID);
                            }
                        }
                        Ok(None) => prop_assert!(added.contains(&p)),
                        Err(_) => {}
                    }
                }
                Op::End(i, commit, ok) => {
                    let Some((pid, epoch)) = held[i] else { continue };
                    match s.end_txn(ID, pid, epoch, commit, tv2, now, &mut alloc) {
                        Ok(EndOutcome::Prepare(prepared)) => {
                            if ok {
                                if commit {
                                    prop_assert_eq!(Some(i), newest, "a zombie committed");
                                    let by = committed.entry((prepared.producer_id, prepared.producer_epoch)).or_insert(i);
                                    prop_assert_eq!(*by, i, "two instances committed in one epoch");
                                }
                                decided(&prepared, &mut added)?;
                                s.complete(ID, prepared.clone());
                                if tv2 {
                                    held[i] = Some((prepared.producer_id, prepared.producer_epoch));
                                }
                                deciding = Some(prepared);
                            } else {
                                s.abandon(ID);
                            }
                        }
                        Ok(EndOutcome::Done { producer_id, producer_epoch }) => {
                            held[i] = Some((producer_id, producer_epoch));
                        }
                        Err(_) => {}
                    }
                }
                Op::Markers(ok) => {
                    if deciding.is_some() && let Some(done) = s.prepare_complete(ID, now) {
                        if ok {
                            s.complete(ID, done);
                            deciding = None;
                        } else {
                            s.abandon(ID);
                        }
                    }
                }
                Op::Tick(ms) => {
                    now += ms;
                    for (id, abort) in s.abort_timed_out(tv2, now) {
                        decided(&abort, &mut added)?;
                        s.complete(&id, abort.clone());
                        deciding = Some(abort);
                    }
                }
            }
            // Whatever happened, a decided transaction can always finish.
            if let Some(m) = s.get(ID) {
                prop_assert_eq!(m.is_prepare(), deciding.is_some());
            }
        }
        // Every decided transaction completes once its markers are written.
        if deciding.is_some() {
            let done = s.prepare_complete(ID, now).expect("a decided transaction completes");
            s.complete(ID, done);
            prop_assert!(s.get(ID).unwrap().is_complete());
        }
    }
}

#[test]
fn while_the_markers_are_written_everything_waits() {
    let mut s = TxnStates::default();
    let mut alloc = ids();
    let (pid, _) = init(&mut s, None, &mut alloc);
    s.entries.get_mut(ID).unwrap().producer_epoch = EXHAUSTED_EPOCH;
    add(&mut s, pid, EXHAUSTED_EPOCH, &[("a", 0)], true).unwrap();
    // A version-2 commit that runs out of epochs: PrepareCommit is written, the producer is
    // answered with the next producer id, and the markers are still on their way.
    let EndOutcome::Prepare(prepared) = s
        .end_txn(ID, pid, EXHAUSTED_EPOCH, true, true, 9, &mut || 7777)
        .unwrap()
    else {
        panic!("a prepare")
    };
    assert_eq!(prepared.next_producer_id, 7777);
    s.complete(ID, prepared);
    let ct = Err(err(ResponseError::ConcurrentTransactions));
    // The producer goes on at once with the id it was given: it waits, it is not refused
    // as an unknown id (KAFKA-18660), nor fenced.
    assert_eq!(add(&mut s, 7777, 0, &[("a", 0)], true), ct);
    assert_eq!(
        s.end_txn(ID, 7777, 0, false, true, 11, &mut || 1)
            .map(|_| ()),
        ct
    );
    // Version 1: ending either way waits too, as Kafka's pending completion makes it.
    let mut v1 = TxnStates::default();
    let (pid1, e1) = init(&mut v1, None, &mut alloc);
    add(&mut v1, pid1, e1, &[("a", 0)], false).unwrap();
    let EndOutcome::Prepare(prepared) =
        v1.end_txn(ID, pid1, e1, true, false, 9, &mut || 1).unwrap()
    else {
        panic!("a prepare")
    };
    v1.complete(ID, prepared);
    for commit in [true, false] {
        assert_eq!(
            v1.end_txn(ID, pid1, e1, commit, false, 11, &mut || 1)
                .map(|_| ()),
            ct
        );
    }
    // Once complete, the new id runs its transaction.
    let done = s.prepare_complete(ID, 12).unwrap();
    s.complete(ID, done);
    assert_eq!(add(&mut s, 7777, 0, &[("a", 0)], true), Ok(()));
}
