//! The store against real partition logs in a temporary directory, led by this node as the
//! broker would lead them.

use std::sync::atomic::{AtomicI64, Ordering};

use strata_storage::LogConfig;

use super::*;
use crate::coordinator::txn::records::TxnState;
use crate::partition::AckError;

const NODE: i32 = 1;

fn config() -> TxnConfig {
    TxnConfig {
        num_partitions: 50,
        max_timeout_ms: 900_000,
        id_expiration_ms: 10_000,
        remove_expired_interval_ms: 1_000,
        abort_timed_out_interval_ms: 1_000,
        transaction_version: 2,
    }
}

/// The partition of `id`, opened from `dir` and led by this node in `epoch` with
/// `replicas` (this node first) all in the ISR, then loaded by `store`.
fn lead_with(
    store: &TxnStore,
    dir: &std::path::Path,
    id: &str,
    epoch: i32,
    replicas: Vec<i32>,
) -> Arc<Partition> {
    let index = store.partition_for(id);
    let p = runtime::led_partition(
        dir,
        TRANSACTION_STATE_TOPIC,
        index,
        LogConfig::default(),
        epoch,
        replicas,
    );
    assert!(store.begin_load(index, p.clone(), epoch));
    assert!(store.is_loading(index));
    assert!(store.load(index, epoch).unwrap());
    p
}

/// Hands out 1000, 1001, ...
struct Ids(AtomicI64);

impl Ids {
    fn new() -> Self {
        Ids(AtomicI64::new(1000))
    }

    async fn next(&self) -> Result<i64, i16> {
        Ok(self.0.fetch_add(1, Ordering::Relaxed))
    }
}

async fn init(
    store: &TxnStore,
    ids: &Ids,
    id: &str,
    held: Option<(i64, i16)>,
) -> Result<(i64, i16), TxnError> {
    store
        .init_producer_id(id, 60_000, held, 5, || ids.next())
        .await
}

#[tokio::test]
async fn transitions_are_replayed_by_the_next_leader() {
    let dir = tempfile::tempdir().unwrap();
    let ids = Ids::new();
    let store = TxnStore::new(config(), 0);
    lead_with(&store, dir.path(), "a", 1, vec![NODE]);
    assert_ne!(store.partition_for("a"), store.partition_for("b"));
    lead_with(&store, dir.path(), "b", 1, vec![NODE]);
    assert_eq!(init(&store, &ids, "a", None).await.unwrap(), (1000, 0));
    assert_eq!(init(&store, &ids, "a", None).await.unwrap(), (1000, 1));
    assert_eq!(
        init(&store, &ids, "a", Some((1000, 1))).await.unwrap(),
        (1000, 2)
    );
    // Only a new id takes a producer id.
    assert_eq!(init(&store, &ids, "b", None).await.unwrap(), (1001, 0));
    let a = store.get("a").unwrap();
    assert_eq!(
        (a.state, a.pending, a.timeout_ms),
        (TxnState::Empty, None, 60_000)
    );

    // Another store (the next leader, or this node after a restart) reads it all back.
    let next = TxnStore::new(config(), 0);
    lead_with(&next, dir.path(), "a", 2, vec![NODE]);
    lead_with(&next, dir.path(), "b", 2, vec![NODE]);
    assert_eq!(next.get("a").map(|m| m.producer_epoch), Some(2));
    assert_eq!(next.get("b").map(|m| m.producer_id), Some(1001));
    assert_eq!(init(&next, &ids, "a", None).await.unwrap(), (1000, 3));
}

#[tokio::test]
async fn only_the_leader_of_a_loaded_partition_serves() {
    let dir = tempfile::tempdir().unwrap();
    let ids = Ids::new();
    let store = TxnStore::new(config(), 0);
    assert!(matches!(
        init(&store, &ids, "a", None).await,
        Err(TxnError::Coordinator(
            CoordinatorError::NotCoordinator { .. }
        ))
    ));
    let p = lead_with(&store, dir.path(), "a", 1, vec![NODE]);
    init(&store, &ids, "a", None).await.unwrap();
    let index = store.partition_for("a");
    assert!(store.begin_load(index, p, 2));
    assert!(matches!(
        store.check("a"),
        Err(CoordinatorError::LoadInProgress { .. })
    ));
    assert!(matches!(
        init(&store, &ids, "a", None).await,
        Err(TxnError::Coordinator(
            CoordinatorError::LoadInProgress { .. }
        ))
    ));
    // A load for an epoch no longer led does nothing; a resignation drops the ids.
    assert!(!store.load(index, 1).unwrap());
    assert!(store.resign(index));
    assert!(!store.load(index, 2).unwrap());
    assert!(store.get("a").is_none());
}

#[tokio::test]
async fn a_write_that_is_not_committed_is_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let ids = Ids::new();
    let store = Arc::new(TxnStore::new(config(), 0));
    // Follower 2 never fetches, so nothing is committed; the leadership then ends.
    let p = lead_with(&store, dir.path(), "a", 1, vec![NODE, 2]);
    let resign = {
        let p = p.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            p.resign();
        })
    };
    let err = init(&store, &ids, "a", None).await.unwrap_err();
    resign.await.unwrap();
    assert!(
        matches!(
            err,
            TxnError::Coordinator(CoordinatorError::NotCommitted {
                cause: AckError::LeadershipEnded,
                ..
            })
        ),
        "{err:?}"
    );
    // Nothing stays pending: the next request is not CONCURRENT_TRANSACTIONS forever.
    assert_eq!(store.get("a").map(|m| m.pending), Some(None));
}

#[tokio::test]
async fn idle_ids_expire_with_a_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let ids = Ids::new();
    let store = TxnStore::new(config(), 0);
    lead_with(&store, dir.path(), "a", 1, vec![NODE]);
    init(&store, &ids, "a", None).await.unwrap();
    // Not due before the interval; not expired before transactional.id.expiration.ms.
    assert_eq!(store.maybe_expire(500), None);
    assert_eq!(store.maybe_expire(5_000), Some(0));
    assert_eq!(store.maybe_expire(20_000), Some(1));
    assert!(store.get("a").is_none());
    let next = TxnStore::new(config(), 0);
    lead_with(&next, dir.path(), "a", 2, vec![NODE]);
    assert!(next.get("a").is_none(), "the tombstone is replayed");
    // A new instance starts over with a new producer id.
    assert_eq!(init(&next, &ids, "a", None).await.unwrap(), (1001, 0));
}
