//! Incremental fetch sessions (KIP-227), sans-IO: the broker's cache of fetch sessions, as
//! Kafka's `FetchSessionCache` and `FetchManager.newContext` keep them.
//!
//! A fetcher that sends SessionId 0 and SessionEpoch 0 asks for a session: its full fetch is
//! answered in full, and the answer names a new session id. Its later fetches name that id
//! and the next epoch, and carry only what changed: partitions added or whose fetch offset
//! moved, and partitions to forget. The broker fetches every partition of the session and
//! answers only those with something new: records, a changed high watermark or log start
//! offset, an error, a diverging epoch or a preferred read replica. Where partitions are many
//! and mostly idle, requests and answers shrink from every partition to the few that moved.
//!
//! - Epoch 0 is a full fetch that (re)creates a session; -1 is a full fetch that closes the
//!   named session and creates none; anything else is incremental and must name a cached
//!   session (else FETCH_SESSION_ID_NOT_FOUND) at its expected epoch (else
//!   INVALID_FETCH_SESSION_EPOCH), with topics named the way the session was made, by id
//!   from Fetch v13 or by name before (else FETCH_SESSION_TOPIC_ID_ERROR).
//! - Epochs run 1, 2, ... and wrap from `i32::MAX` to 1.
//! - The broker never moves a cached fetch offset itself: only the fetcher's request does.
//! - A partition that returned records goes to the end of the session's order, so that a
//!   response's byte limit does not starve the partitions behind it (Kafka 3.0+).
//! - The cache holds `max.incremental.fetch.session.cache.slots` sessions (1000). When it is
//!   full, a session unused for two minutes is evicted first; otherwise a new session may
//!   evict the least valuable one that is evictable, ordered by (follower, partitions, id):
//!   a follower's session (privileged) may evict a consumer's, and any session older than two
//!   minutes may be evicted by a bigger one. A fetcher that loses the race gets session id 0
//!   and keeps fetching in full.
//!
//! One mutex guards the cache; what is done under it is a map lookup and the session's own
//! partition list, never I/O.

use std::collections::HashMap;
use std::sync::Mutex;

/// Kafka's `INVALID_SESSION_ID`: no session.
pub const NO_SESSION: i32 = 0;
/// A request epoch that asks for a new session.
pub const INITIAL_EPOCH: i32 = 0;
/// A request epoch that closes a session.
pub const FINAL_EPOCH: i32 = -1;
/// Kafka's `max.incremental.fetch.session.cache.slots` default.
pub const DEFAULT_SLOTS: usize = 1000;
/// How long a session may go unused before any new session may evict it, and how old a
/// session must be before a bigger one may (Kafka's `evictionMs`, fixed at two minutes).
pub const EVICTION_MS: i64 = 120_000;

/// A topic as a session names it: by id from Fetch v13, by name before.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TopicKey {
    /// A topic id (Fetch v13+).
    Id(uuid::Uuid),
    /// A topic name (Fetch v7-v12).
    Name(String),
}

/// One partition of a session.
pub type PartitionKey = (TopicKey, i32);

/// What a fetcher asks of one partition; a session keeps the last it was told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionParams {
    /// Where to read from.
    pub fetch_offset: i64,
    /// The partition's byte limit.
    pub partition_max_bytes: i32,
    /// The leader epoch the fetcher knows (KIP-320), or -1.
    pub current_leader_epoch: i32,
    /// A follower's last fetched epoch (KIP-595), or -1.
    pub last_fetched_epoch: i32,
    /// A follower's log start offset, or -1.
    pub log_start_offset: i64,
}

/// What a fetch's answer says of one partition, as far as a session cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answered {
    /// The answer holds records.
    pub records: bool,
    /// The answered high watermark.
    pub high_watermark: i64,
    /// The answered log start offset.
    pub log_start_offset: i64,
    /// The answer has an error, a diverging epoch or a preferred read replica: always sent.
    pub must_send: bool,
}

/// Why a session request is refused; each is a top-level Kafka error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// FETCH_SESSION_ID_NOT_FOUND (70).
    #[error("fetch session not found")]
    IdNotFound,
    /// INVALID_FETCH_SESSION_EPOCH (71).
    #[error("invalid fetch session epoch")]
    InvalidEpoch,
    /// FETCH_SESSION_TOPIC_ID_ERROR (106).
    #[error("fetch session topic id mismatch")]
    TopicIdMismatch,
}

/// The incoming request's session fields, as the handler decoded them.
pub struct SessionRequest {
    /// SessionId.
    pub id: i32,
    /// SessionEpoch.
    pub epoch: i32,
    /// Topics by id (Fetch v13+).
    pub uses_topic_ids: bool,
    /// From a follower replica.
    pub privileged: bool,
    /// The partitions the request names, in its order.
    pub partitions: Vec<(PartitionKey, PartitionParams)>,
    /// ForgottenTopicsData.
    pub forgotten: Vec<PartitionKey>,
}

/// How a fetch is answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Context {
    /// Every requested partition, session id 0 (epoch -1, or a session emptied).
    Sessionless(Vec<(PartitionKey, PartitionParams)>),
    /// Every requested partition; a session is created from the answer
    /// ([`FetchSessionCache::create`]), with the request's kind of fetcher and topic naming.
    Full {
        /// The requested partitions, in order.
        partitions: Vec<(PartitionKey, PartitionParams)>,
        /// From a follower replica.
        privileged: bool,
        /// Topics by id (Fetch v13+).
        uses_topic_ids: bool,
    },
    /// Every partition of session `id`, in its order; only those with news are answered
    /// ([`FetchSessionCache::finish`]).
    Incremental {
        /// The session.
        id: i32,
        /// The epoch the session now expects next; `finish` checks no one used it since.
        next_epoch: i32,
        /// The session's partitions with their current parameters.
        partitions: Vec<(PartitionKey, PartitionParams)>,
    },
}

/// One cached partition: the fetcher's parameters and what it was last told.
#[derive(Clone, Debug)]
struct Cached {
    key: PartitionKey,
    params: PartitionParams,
    high_watermark: i64,
    log_start_offset: i64,
}

struct Session {
    privileged: bool,
    uses_topic_ids: bool,
    /// The epoch the next request must carry.
    epoch: i32,
    /// In fetch order.
    partitions: Vec<Cached>,
    /// Position of each key in `partitions`.
    index: HashMap<PartitionKey, usize>,
    created_ms: i64,
    last_used_ms: i64,
}

impl Session {
    fn reindex(&mut self) {
        self.index = self
            .partitions
            .iter()
            .enumerate()
            .map(|(i, c)| (c.key.clone(), i))
            .collect();
    }

    /// Kafka's `FetchSession.update`: add or update the requested partitions, then drop the
    /// forgotten ones.
    fn update(&mut self, req: &SessionRequest) {
        for (key, params) in &req.partitions {
            match self.index.get(key) {
                Some(&i) => self.partitions[i].params = *params,
                None => {
                    self.index.insert(key.clone(), self.partitions.len());
                    self.partitions.push(Cached {
                        key: key.clone(),
                        params: *params,
                        high_watermark: -1,
                        log_start_offset: -1,
                    });
                }
            }
        }
        if !req.forgotten.is_empty() {
            let before = self.partitions.len();
            self.partitions.retain(|c| !req.forgotten.contains(&c.key));
            if self.partitions.len() != before {
                self.reindex();
            }
        }
    }

    /// Kafka's `EvictableKey`: (privileged, size, id), least valuable first.
    fn value(&self, id: i32) -> (bool, usize, i32) {
        (self.privileged, self.partitions.len(), id)
    }
}

/// Kafka's `JFetchMetadata.nextEpoch`.
#[must_use]
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// The cache's counters, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Sessions cached.
    pub sessions: usize,
    /// Partitions over all cached sessions.
    pub partitions: usize,
    /// Sessions evicted to make room, since start.
    pub evictions: u64,
}

struct Inner {
    sessions: HashMap<i32, Session>,
    evictions: u64,
}

/// The node's fetch sessions.
pub struct FetchSessionCache {
    slots: usize,
    inner: Mutex<Inner>,
}

impl FetchSessionCache {
    /// A cache of `slots` sessions (0 serves every fetch sessionless).
    #[must_use]
    pub fn new(slots: usize) -> Self {
        Self {
            slots,
            inner: Mutex::new(Inner {
                sessions: HashMap::new(),
                evictions: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Kafka's `FetchManager.newContext`: how to answer `req`. An incremental request
    /// updates its session and moves it to the next epoch here.
    ///
    /// # Errors
    ///
    /// The session is unknown, at another epoch, or names topics the other way.
    pub fn begin(&self, req: SessionRequest, now_ms: i64) -> Result<Context, SessionError> {
        let mut inner = self.lock();
        if req.epoch == INITIAL_EPOCH || req.epoch == FINAL_EPOCH {
            if req.id != NO_SESSION {
                inner.sessions.remove(&req.id);
            }
            return Ok(if req.epoch == FINAL_EPOCH || self.slots == 0 {
                Context::Sessionless(req.partitions)
            } else {
                Context::Full {
                    partitions: req.partitions,
                    privileged: req.privileged,
                    uses_topic_ids: req.uses_topic_ids,
                }
            });
        }
        let Some(session) = inner.sessions.get_mut(&req.id) else {
            return Err(SessionError::IdNotFound);
        };
        if session.epoch != req.epoch {
            return Err(SessionError::InvalidEpoch);
        }
        if session.uses_topic_ids != req.uses_topic_ids {
            return Err(SessionError::TopicIdMismatch);
        }
        session.update(&req);
        if session.partitions.is_empty() {
            inner.sessions.remove(&req.id);
            return Ok(Context::Sessionless(req.partitions));
        }
        session.epoch = next_epoch(session.epoch);
        session.last_used_ms = now_ms;
        Ok(Context::Incremental {
            id: req.id,
            next_epoch: session.epoch,
            partitions: session
                .partitions
                .iter()
                .map(|c| (c.key.clone(), c.params))
                .collect(),
        })
    }

    /// Kafka's `maybeCreateSession`, after a full fetch's answer: a new session of
    /// `partitions` (with what each was answered), if there is room or a less valuable
    /// session to evict. Returns its id, or [`NO_SESSION`].
    pub fn create(
        &self,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: Vec<(PartitionKey, PartitionParams, Answered)>,
        now_ms: i64,
    ) -> i32 {
        if self.slots == 0 || partitions.is_empty() {
            return NO_SESSION;
        }
        let mut inner = self.lock();
        if inner.sessions.len() >= self.slots
            && !Self::evict_for(&mut inner, privileged, partitions.len(), now_ms)
        {
            return NO_SESSION;
        }
        let id = loop {
            let id = rand::random_range(1..i32::MAX);
            if !inner.sessions.contains_key(&id) {
                break id;
            }
        };
        let mut session = Session {
            privileged,
            uses_topic_ids,
            epoch: next_epoch(INITIAL_EPOCH),
            partitions: partitions
                .into_iter()
                .map(|(key, params, a)| Cached {
                    key,
                    params,
                    high_watermark: if a.must_send { -1 } else { a.high_watermark },
                    log_start_offset: a.log_start_offset,
                })
                .collect(),
            index: HashMap::new(),
            created_ms: now_ms,
            last_used_ms: now_ms,
        };
        session.reindex();
        inner.sessions.insert(id, session);
        id
    }

    /// Kafka's `tryEvict`: makes room for a session of `size` partitions.
    fn evict_for(inner: &mut Inner, privileged: bool, size: usize, now_ms: i64) -> bool {
        let stale = inner
            .sessions
            .iter()
            .min_by_key(|(id, s)| (s.last_used_ms, **id))
            .filter(|(_, s)| now_ms - s.last_used_ms > EVICTION_MS)
            .map(|(id, _)| *id);
        let victim = stale.or_else(|| {
            inner
                .sessions
                .iter()
                .filter(|(_, s)| {
                    let old = now_ms - s.created_ms > EVICTION_MS;
                    old || (privileged && !s.privileged)
                })
                .map(|(id, s)| s.value(*id))
                .min()
                .filter(|least| (privileged, size, NO_SESSION) >= *least)
                .map(|(_, _, id)| id)
        });
        match victim {
            Some(id) => {
                inner.sessions.remove(&id);
                inner.evictions += 1;
                true
            }
            None => false,
        }
    }

    /// After an incremental fetch's answer (in the order [`Context::Incremental`] gave):
    /// which partitions the answer includes. The session keeps what they were told, and the
    /// partitions that returned records go to the end of its order. (A throttled answer,
    /// which includes none, commits nothing: it is only [`FetchSessionCache::check`]ed.)
    ///
    /// # Errors
    ///
    /// The session was evicted, or another request moved its epoch, while this one waited.
    pub fn finish(
        &self,
        id: i32,
        next_epoch: i32,
        answered: &[Answered],
    ) -> Result<Vec<bool>, SessionError> {
        let mut inner = self.lock();
        let Some(session) = inner.sessions.get_mut(&id) else {
            return Err(SessionError::IdNotFound);
        };
        if session.epoch != next_epoch || session.partitions.len() != answered.len() {
            return Err(SessionError::InvalidEpoch);
        }
        let mut include = Vec::with_capacity(answered.len());
        for (c, a) in session.partitions.iter_mut().zip(answered) {
            let mut send = a.records || a.must_send;
            if c.high_watermark != a.high_watermark {
                send = true;
                c.high_watermark = a.high_watermark;
            }
            if c.log_start_offset != a.log_start_offset {
                send = true;
                c.log_start_offset = a.log_start_offset;
            }
            if a.must_send {
                // Sent again once the error is gone.
                c.high_watermark = -1;
            }
            include.push(send);
        }
        if answered.iter().any(|a| a.records) {
            let (rest, moved): (Vec<_>, Vec<_>) = std::mem::take(&mut session.partitions)
                .into_iter()
                .zip(answered)
                .partition(|(_, a)| !a.records);
            session.partitions = rest.into_iter().chain(moved).map(|(c, _)| c).collect();
            session.reindex();
        }
        Ok(include)
    }

    /// Whether session `id` is still at `next_epoch`: a throttled incremental answer,
    /// which commits nothing, still names a session that exists.
    ///
    /// # Errors
    ///
    /// As [`FetchSessionCache::finish`].
    pub fn check(&self, id: i32, next_epoch: i32) -> Result<(), SessionError> {
        match self.lock().sessions.get(&id) {
            None => Err(SessionError::IdNotFound),
            Some(s) if s.epoch != next_epoch => Err(SessionError::InvalidEpoch),
            Some(_) => Ok(()),
        }
    }

    /// Sessions, cached partitions and evictions.
    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            sessions: inner.sessions.len(),
            partitions: inner.sessions.values().map(|s| s.partitions.len()).sum(),
            evictions: inner.evictions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> PartitionKey {
        (TopicKey::Name("t".into()), p)
    }

    fn params(offset: i64) -> PartitionParams {
        PartitionParams {
            fetch_offset: offset,
            partition_max_bytes: 1 << 20,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            log_start_offset: -1,
        }
    }

    fn quiet(hw: i64) -> Answered {
        Answered {
            records: false,
            high_watermark: hw,
            log_start_offset: 0,
            must_send: false,
        }
    }

    fn req(id: i32, epoch: i32, parts: &[(i32, i64)], forgotten: &[i32]) -> SessionRequest {
        SessionRequest {
            id,
            epoch,
            uses_topic_ids: false,
            privileged: false,
            partitions: parts.iter().map(|&(p, o)| (key(p), params(o))).collect(),
            forgotten: forgotten.iter().map(|&p| key(p)).collect(),
        }
    }

    /// A session of partitions 0..n, each answered with high watermark 10.
    fn session(cache: &FetchSessionCache, n: i32, privileged: bool, now: i64) -> i32 {
        cache.create(
            privileged,
            false,
            (0..n).map(|p| (key(p), params(0), quiet(10))).collect(),
            now,
        )
    }

    fn order(ctx: &Context) -> Vec<i32> {
        match ctx {
            Context::Incremental { partitions, .. } => {
                partitions.iter().map(|(k, _)| k.1).collect()
            }
            other => panic!("not incremental: {other:?}"),
        }
    }

    #[test]
    fn epochs_wrap_to_one_and_final_stays_final() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(41), 42);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(-1), -1);
    }

    #[test]
    fn a_full_fetch_creates_and_final_closes() {
        let cache = FetchSessionCache::new(10);
        assert_eq!(
            cache.begin(req(0, 0, &[(0, 0)], &[]), 0).unwrap(),
            Context::Full {
                partitions: vec![(key(0), params(0))],
                privileged: false,
                uses_topic_ids: false,
            }
        );
        let id = session(&cache, 2, false, 0);
        assert!(id > 0);
        assert_eq!(cache.stats().sessions, 1);
        // Epoch -1 names the session: it is closed, and the fetch is sessionless.
        assert!(matches!(
            cache.begin(req(id, FINAL_EPOCH, &[], &[]), 0).unwrap(),
            Context::Sessionless(_)
        ));
        assert_eq!(cache.stats().sessions, 0);
        assert_eq!(
            cache.begin(req(id, 1, &[], &[]), 0),
            Err(SessionError::IdNotFound)
        );
    }

    #[test]
    fn errors_in_kafkas_order() {
        let cache = FetchSessionCache::new(10);
        let id = session(&cache, 1, false, 0);
        assert_eq!(
            cache.begin(req(id + 1, 1, &[], &[]), 0),
            Err(SessionError::IdNotFound)
        );
        assert_eq!(
            cache.begin(req(id, 2, &[], &[]), 0),
            Err(SessionError::InvalidEpoch)
        );
        // Below -1 is incremental, and no session expects it.
        assert_eq!(
            cache.begin(req(id, -2, &[], &[]), 0),
            Err(SessionError::InvalidEpoch)
        );
        let mut by_id = req(id, 1, &[], &[]);
        by_id.uses_topic_ids = true;
        assert_eq!(cache.begin(by_id, 0), Err(SessionError::TopicIdMismatch));
        // None of these moved the epoch.
        assert!(cache.begin(req(id, 1, &[], &[]), 0).is_ok());
        assert!(cache.begin(req(id, 2, &[], &[]), 0).is_ok());
    }

    #[test]
    fn incremental_updates_adds_and_forgets() {
        let cache = FetchSessionCache::new(10);
        let id = session(&cache, 3, false, 0);
        let ctx = cache.begin(req(id, 1, &[(1, 7), (5, 0)], &[0]), 0).unwrap();
        let Context::Incremental {
            partitions,
            next_epoch,
            ..
        } = ctx
        else {
            panic!("{ctx:?}")
        };
        assert_eq!(next_epoch, 2);
        assert_eq!(
            partitions,
            vec![
                (key(1), params(7)),
                (key(2), params(0)),
                (key(5), params(0))
            ]
        );
        // Forgetting everything ends the session.
        assert!(matches!(
            cache.begin(req(id, 2, &[], &[1, 2, 5]), 0).unwrap(),
            Context::Sessionless(_)
        ));
        assert_eq!(cache.stats().sessions, 0);
    }

    #[test]
    fn only_partitions_with_news_are_answered_and_records_move_to_the_end() {
        let cache = FetchSessionCache::new(10);
        let id = session(&cache, 4, false, 0);
        let ctx = cache.begin(req(id, 1, &[], &[]), 0).unwrap();
        let Context::Incremental { next_epoch, .. } = ctx else {
            panic!()
        };
        let mut answered = vec![quiet(10); 4];
        answered[1].records = true;
        answered[2].high_watermark = 11;
        answered[3].must_send = true;
        assert_eq!(
            cache.finish(id, next_epoch, &answered).unwrap(),
            vec![false, true, true, true]
        );
        let ctx = cache.begin(req(id, 2, &[], &[]), 0).unwrap();
        assert_eq!(order(&ctx), vec![0, 2, 3, 1]);
        let Context::Incremental { next_epoch, .. } = ctx else {
            panic!()
        };
        // In the new order (0, 2, 3, 1): partition 2's new high watermark was told, and
        // partition 3, whose error is gone, is sent again.
        let mut answered = vec![quiet(10); 4];
        answered[1].high_watermark = 11;
        assert_eq!(
            cache.finish(id, next_epoch, &answered).unwrap(),
            vec![false, false, true, false]
        );
    }

    #[test]
    fn a_throttled_answer_commits_nothing() {
        let cache = FetchSessionCache::new(10);
        let id = session(&cache, 1, false, 0);
        let mut a = quiet(12);
        a.records = true;
        let Context::Incremental { next_epoch, .. } = cache.begin(req(id, 1, &[], &[]), 0).unwrap()
        else {
            panic!()
        };
        // Throttled: the session is only checked.
        assert_eq!(cache.check(id, next_epoch), Ok(()));
        let Context::Incremental { next_epoch, .. } = cache.begin(req(id, 2, &[], &[]), 0).unwrap()
        else {
            panic!()
        };
        a.records = false;
        assert_eq!(cache.finish(id, next_epoch, &[a]).unwrap(), vec![true]);
    }

    #[test]
    fn a_request_that_raced_another_on_the_session_is_refused() {
        let cache = FetchSessionCache::new(10);
        let id = session(&cache, 1, false, 0);
        let Context::Incremental { next_epoch, .. } = cache.begin(req(id, 1, &[], &[]), 0).unwrap()
        else {
            panic!()
        };
        cache.begin(req(id, 2, &[], &[]), 0).unwrap();
        assert_eq!(
            cache.finish(id, next_epoch, &[quiet(10)]),
            Err(SessionError::InvalidEpoch)
        );
    }

    #[test]
    fn eviction_follows_kafkas_rules() {
        let now = 1_000_000;
        let cache = FetchSessionCache::new(2);
        let small = session(&cache, 1, false, now);
        let big = session(&cache, 5, false, now);
        // Full, both young: a consumer's session of any size evicts nothing.
        assert_eq!(session(&cache, 9, false, now + 1), NO_SESSION);
        // A follower's evicts the least valuable consumer session.
        let follower = session(&cache, 1, true, now + 1);
        assert!(follower > 0);
        assert_eq!(cache.stats().evictions, 1);
        assert_eq!(
            cache.begin(req(small, 1, &[], &[]), now + 2),
            Err(SessionError::IdNotFound)
        );
        // Past two minutes, a bigger session evicts the least valuable old one, and a
        // smaller one does not; a consumer's session never evicts a follower's.
        let later = now + EVICTION_MS + 10;
        cache.begin(req(big, 1, &[], &[]), later - 20).unwrap();
        let mut f = req(follower, 1, &[], &[]);
        f.privileged = true;
        cache.begin(f, later - 20).unwrap();
        assert_eq!(session(&cache, 4, false, later), NO_SESSION);
        let bigger = session(&cache, 9, false, later);
        assert!(bigger > 0);
        assert_eq!(cache.stats().evictions, 2);
        assert_eq!(
            cache.begin(req(big, 2, &[], &[]), later),
            Err(SessionError::IdNotFound)
        );
        // A session unused for two minutes goes first, whatever its value.
        let stale = later + EVICTION_MS + 1;
        cache.begin(req(bigger, 1, &[], &[]), stale).unwrap();
        assert!(session(&cache, 1, false, stale) > 0);
        assert_eq!(cache.stats().evictions, 3);
        let mut f = req(follower, 2, &[], &[]);
        f.privileged = true;
        assert_eq!(cache.begin(f, stale), Err(SessionError::IdNotFound));
        assert!(cache.begin(req(bigger, 2, &[], &[]), stale).is_ok());
    }

    #[test]
    fn no_slots_means_sessionless() {
        let cache = FetchSessionCache::new(0);
        assert!(matches!(
            cache.begin(req(0, 0, &[(0, 0)], &[]), 0).unwrap(),
            Context::Sessionless(_)
        ));
        assert_eq!(session(&cache, 1, false, 0), NO_SESSION);
    }
}
