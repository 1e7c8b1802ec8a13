//! The core driven directly: time is a number, tickets are counted, answers are collected.
//! Kafka references are to `GroupMetadataManagerTest` behaviours of the classic protocol.

use std::collections::HashMap;

use super::*;

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;
const DELAY: i64 = 100;

/// A coordinator with a clock and a record of every answer by ticket.
struct Sim {
    core: ClassicGroupCore,
    now: i64,
    next_ticket: u64,
    joins: HashMap<Ticket, JoinResponse>,
    syncs: HashMap<Ticket, SyncResponse>,
    uuid: u128,
}

fn consumer_protocols(names: &[&str], topics: &[&str]) -> Vec<Protocol> {
    names
        .iter()
        .map(|n| Protocol {
            name: (*n).to_owned(),
            metadata: subscription(topics),
        })
        .collect()
}

/// A ConsumerProtocolSubscription v0: version, topics array, null user data.
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = vec![0u8, 0];
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(b)
}

impl Sim {
    fn new() -> Self {
        Sim {
            core: ClassicGroupCore::new(GroupConfig {
                initial_rebalance_delay_ms: DELAY,
                ..GroupConfig::default()
            }),
            now: 1_000_000,
            next_ticket: 0,
            joins: HashMap::new(),
            syncs: HashMap::new(),
            uuid: 0,
        }
    }

    fn record(&mut self, out: Vec<Completion>) {
        for c in out {
            match c {
                Completion::Join(t, r) => {
                    assert!(self.joins.insert(t, r).is_none(), "{t:?} answered twice")
                }
                Completion::Sync(t, r) => {
                    assert!(self.syncs.insert(t, r).is_none(), "{t:?} answered twice")
                }
            }
        }
    }

    fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        Ticket(self.next_ticket)
    }

    fn join_req(
        &self,
        member_id: &str,
        instance: Option<&str>,
        protocols: Vec<Protocol>,
    ) -> JoinRequest {
        JoinRequest {
            group_id: "g".into(),
            member_id: member_id.into(),
            group_instance_id: instance.map(Into::into),
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: SESSION,
            rebalance_timeout_ms: REBALANCE,
            protocol_type: "consumer".into(),
            protocols,
            require_known_member_id: true,
            supports_skip_assignment: false,
        }
    }

    fn join(&mut self, req: JoinRequest) -> Ticket {
        let t = self.ticket();
        self.uuid += 1;
        let out = self.core.join(self.now, t, req, Uuid::from_u128(self.uuid));
        self.record(out);
        t
    }

    /// A new dynamic member: MEMBER_ID_REQUIRED, then the parked rejoin with its id.
    fn join_new(&mut self, protocols: Vec<Protocol>) -> (String, Ticket) {
        let t = self.join(self.join_req("", None, protocols.clone()));
        let r = self
            .joins
            .remove(&t)
            .expect("MEMBER_ID_REQUIRED is immediate");
        assert!(
            matches!(r.error, Some(GroupError::MemberIdRequired { .. })),
            "{r:?}"
        );
        assert!(r.member_id.starts_with("client-"), "{}", r.member_id);
        let t = self.join(self.join_req(&r.member_id, None, protocols));
        (r.member_id, t)
    }

    fn sync(
        &mut self,
        member_id: &str,
        generation_id: i32,
        assignments: &[(&str, &str)],
    ) -> Ticket {
        let t = self.ticket();
        let req = SyncRequest {
            group_id: "g".into(),
            generation_id,
            member_id: member_id.into(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| ((*m).to_owned(), Bytes::from(a.to_string())))
                .collect(),
        };
        let out = self.core.sync(self.now, t, req);
        self.record(out);
        t
    }

    fn advance(&mut self, ms: i64) {
        let end = self.now + ms;
        // Fire deadlines in order, as the driver does.
        while let Some(d) = self.core.next_deadline().filter(|d| *d <= end) {
            self.now = self.now.max(d);
            let out = self.core.tick(self.now);
            self.record(out);
        }
        self.now = end;
    }

    fn heartbeat(&mut self, member_id: &str, generation: i32) -> Result<(), GroupError> {
        self.core
            .heartbeat(self.now, "g", member_id, None, generation)
    }

    fn state(&self) -> GroupState {
        self.core.group("g").map_or(GroupState::Dead, |g| g.state)
    }

    /// Two dynamic members, one stable generation; returns (leader, follower, generation).
    fn stable_pair(&mut self) -> (String, String, i32) {
        let p = consumer_protocols(&["range"], &["t"]);
        let (a, ta) = self.join_new(p.clone());
        let (b, tb) = self.join_new(p);
        self.advance(10 * DELAY);
        let ra = self.joins.remove(&ta).expect("a joined");
        let rb = self.joins.remove(&tb).expect("b joined");
        let (leader, follower) = if ra.leader == a { (a, b) } else { (b, a) };
        let sl = self.sync(
            &leader,
            ra.generation_id,
            &[(&leader, "L"), (&follower, "F")],
        );
        assert!(self.syncs.remove(&sl).unwrap().error.is_none());
        let sf = self.sync(&follower, rb.generation_id, &[]);
        assert_eq!(self.syncs.remove(&sf).unwrap().assignment, Bytes::from("F"));
        (leader, follower, ra.generation_id)
    }
}

#[test]
fn first_rebalance_waits_for_the_initial_delay_and_the_leader_gets_the_members() {
    let mut s = Sim::new();
    let p = consumer_protocols(&["range", "roundrobin"], &["t"]);
    let (a, ta) = s.join_new(p.clone());
    assert_eq!(s.state(), GroupState::PreparingRebalance);
    let (b, tb) = s.join_new(p);
    assert!(s.joins.is_empty(), "parked until the initial delay passes");
    s.advance(DELAY - 1);
    assert!(s.joins.is_empty());
    // b arrived during the delay, which extends it once.
    s.advance(DELAY + 1);
    let ra = s.joins.remove(&ta).expect("answered");
    let rb = s.joins.remove(&tb).expect("answered");
    assert_eq!(s.state(), GroupState::CompletingRebalance);
    assert_eq!((ra.generation_id, rb.generation_id), (1, 1));
    assert_eq!(ra.protocol_name.as_deref(), Some("range"));
    assert_eq!(ra.leader, a, "the first member leads");
    assert_eq!(rb.leader, a);
    assert_eq!(ra.members.len(), 2, "the leader gets every member");
    assert!(rb.members.is_empty(), "followers get none");
    assert_eq!(rb.member_id, b);
}

#[test]
fn protocol_is_the_most_voted_among_those_all_members_support() {
    let mut s = Sim::new();
    // "rr" is not supported by the third member, so only range and sticky are candidates;
    // two members prefer sticky.
    let (_, t1) = s.join_new(consumer_protocols(&["rr", "sticky", "range"], &["t"]));
    let (_, t2) = s.join_new(consumer_protocols(&["range", "sticky"], &["t"]));
    let (_, t3) = s.join_new(consumer_protocols(&["sticky", "range"], &["t"]));
    s.advance(10 * DELAY);
    for t in [t1, t2, t3] {
        assert_eq!(s.joins[&t].protocol_name.as_deref(), Some("sticky"));
    }
}

#[test]
fn a_member_without_a_common_protocol_or_type_is_refused() {
    let mut s = Sim::new();
    let (_, _) = s.join_new(consumer_protocols(&["range"], &["t"]));
    let t = s.join(s.join_req("", None, consumer_protocols(&["sticky"], &["t"])));
    assert_eq!(
        s.joins[&t].error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    let mut req = s.join_req("", None, consumer_protocols(&["range"], &["t"]));
    req.protocol_type = "connect".into();
    let t = s.join(req);
    assert_eq!(
        s.joins[&t].error,
        Some(GroupError::InconsistentGroupProtocol)
    );
}

#[test]
fn session_timeout_bounds_and_empty_group_id_are_checked() {
    let mut s = Sim::new();
    let mut req = s.join_req("", None, consumer_protocols(&["range"], &["t"]));
    req.session_timeout_ms = 5999;
    let t = s.join(req.clone());
    assert!(matches!(
        s.joins[&t].error,
        Some(GroupError::InvalidSessionTimeout { .. })
    ));
    req.session_timeout_ms = 1_800_001;
    let t = s.join(req.clone());
    assert!(matches!(
        s.joins[&t].error,
        Some(GroupError::InvalidSessionTimeout { .. })
    ));
    req.session_timeout_ms = SESSION;
    req.group_id = String::new();
    let t = s.join(req);
    assert_eq!(s.joins[&t].error, Some(GroupError::InvalidGroupId));
    assert!(s.core.group("g").is_none(), "refused joins create no group");
}

#[test]
fn only_the_leaders_assignment_counts_and_followers_wait_for_it() {
    let mut s = Sim::new();
    let p = consumer_protocols(&["range"], &["t"]);
    let (a, ta) = s.join_new(p.clone());
    let (b, _) = s.join_new(p);
    s.advance(10 * DELAY);
    let generation = s.joins[&ta].generation_id;
    // The follower syncs first, with assignments of its own: they are ignored, and it waits.
    let tf = s.sync(&b, generation, &[(&a, "bogus"), (&b, "bogus")]);
    assert!(!s.syncs.contains_key(&tf));
    assert_eq!(s.state(), GroupState::CompletingRebalance);
    let tl = s.sync(&a, generation, &[(&a, "A"), (&b, "B")]);
    assert_eq!(s.syncs[&tl].assignment, Bytes::from("A"));
    assert_eq!(s.syncs[&tf].assignment, Bytes::from("B"));
    assert_eq!(s.syncs[&tf].protocol_name.as_deref(), Some("range"));
    assert_eq!(s.state(), GroupState::Stable);
    // A late SyncGroup in Stable gets the stored assignment.
    let again = s.sync(&b, generation, &[]);
    assert_eq!(s.syncs[&again].assignment, Bytes::from("B"));
}

#[test]
fn sync_and_heartbeat_errors() {
    let mut s = Sim::new();
    let (leader, follower, generation) = s.stable_pair();
    assert_eq!(s.heartbeat(&follower, generation), Ok(()));
    assert!(matches!(
        s.heartbeat("nobody", generation),
        Err(GroupError::UnknownMemberId { .. })
    ));
    assert!(matches!(
        s.heartbeat(&follower, generation + 1),
        Err(GroupError::IllegalGeneration { requested, current }) if requested == generation + 1 && current == generation
    ));
    assert!(matches!(
        s.core
            .heartbeat(s.now, "other-group", &follower, None, generation),
        Err(GroupError::UnknownMemberId { .. })
    ));
    let t = s.sync("nobody", generation, &[]);
    assert!(matches!(
        s.syncs[&t].error,
        Some(GroupError::UnknownMemberId { .. })
    ));
    let t = s.sync(&follower, generation - 1, &[]);
    assert!(matches!(
        s.syncs[&t].error,
        Some(GroupError::IllegalGeneration { .. })
    ));
    // SyncGroup v5 protocol checks.
    let t = s.ticket();
    let out = s.core.sync(
        s.now,
        t,
        SyncRequest {
            group_id: "g".into(),
            generation_id: generation,
            member_id: leader.clone(),
            group_instance_id: None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("roundrobin".into()),
            assignments: vec![],
        },
    );
    s.record(out);
    assert_eq!(
        s.syncs[&t].error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    // The leader rejoining starts a rebalance: heartbeats say so.
    let _ = s.join(s.join_req(&leader, None, consumer_protocols(&["range"], &["t"])));
    assert_eq!(s.state(), GroupState::PreparingRebalance);
    assert_eq!(
        s.heartbeat(&follower, generation),
        Err(GroupError::RebalanceInProgress)
    );
    let t = s.sync(&follower, generation, &[]);
    assert_eq!(s.syncs[&t].error, Some(GroupError::RebalanceInProgress));
}

#[test]
fn a_silent_member_is_removed_at_session_timeout_and_the_group_rebalances() {
    let mut s = Sim::new();
    let (leader, follower, generation) = s.stable_pair();
    // The leader keeps heartbeating, the follower is silent.
    for _ in 0..4 {
        s.advance(i64::from(SESSION) / 4);
        let _ = s.heartbeat(&leader, generation);
    }
    s.advance(10);
    assert_eq!(s.state(), GroupState::PreparingRebalance);
    assert!(s.core.group("g").unwrap().members.contains_key(&leader));
    assert!(!s.core.group("g").unwrap().members.contains_key(&follower));
    assert_eq!(
        s.heartbeat(&leader, generation),
        Err(GroupError::RebalanceInProgress)
    );
    // The survivor rejoins; everyone has rejoined, so the phase completes at once.
    let t = s.join(s.join_req(&leader, None, consumer_protocols(&["range"], &["t"])));
    let r = &s.joins[&t];
    assert_eq!(r.generation_id, generation + 1);
    assert_eq!(r.members.len(), 1);
}

#[test]
fn a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed() {
    let mut s = Sim::new();
    let (leader, follower, generation) = s.stable_pair();
    let t = s.join(s.join_req(&leader, None, consumer_protocols(&["range"], &["t"])));
    // The follower heartbeats (so its session stays alive) but never rejoins.
    for _ in 0..(REBALANCE / 5000) {
        assert!(!s.joins.contains_key(&t));
        s.advance(5000);
        let _ = s.heartbeat(&follower, generation);
    }
    s.advance(10);
    let r = &s.joins[&t];
    assert_eq!(r.generation_id, generation + 1);
    assert_eq!(r.members.len(), 1, "only the rejoined member remains");
    assert!(matches!(
        s.heartbeat(&follower, generation),
        Err(GroupError::UnknownMemberId { .. })
    ));
}

#[test]
fn a_member_that_never_syncs_is_removed_at_the_rebalance_timeout() {
    let mut s = Sim::new();
    let p = consumer_protocols(&["range"], &["t"]);
    let (a, ta) = s.join_new(p.clone());
    let (b, _) = s.join_new(p);
    s.advance(10 * DELAY);
    let generation = s.joins[&ta].generation_id;
    let leader = s.joins[&ta].leader.clone();
    let other = if leader == a { b.clone() } else { a.clone() };
    let tl = s.sync(&leader, generation, &[(&a, "A"), (&b, "B")]);
    assert!(s.syncs.contains_key(&tl));
    // The leader heartbeats; the other member never syncs.
    for _ in 0..(REBALANCE / 5000) {
        s.advance(5000);
        let _ = s.heartbeat(&leader, generation);
    }
    s.advance(10);
    let g = s.core.group("g").unwrap();
    assert!(
        !g.members.contains_key(&other),
        "the member that never synced is gone"
    );
    assert_eq!(g.state, GroupState::PreparingRebalance);
}

#[test]
fn static_member_rejoining_with_the_same_metadata_keeps_its_assignment_without_a_rebalance() {
    let mut s = Sim::new();
    let p = consumer_protocols(&["range"], &["t"]);
    let ta = s.join(s.join_req("", Some("inst-a"), p.clone()));
    let (b, tb) = s.join_new(p.clone());
    s.advance(10 * DELAY);
    let ra = s.joins.remove(&ta).unwrap();
    let old_a = ra.member_id.clone();
    assert!(old_a.starts_with("inst-a-"), "{old_a}");
    let generation = ra.generation_id;
    assert_eq!(ra.leader, old_a);
    let _ = s.sync(&old_a, generation, &[(&old_a, "A"), (&b, "B")]);
    let _ = s.sync(&b, generation, &[]);
    assert!(s.joins.remove(&tb).is_some());
    assert_eq!(s.state(), GroupState::Stable);

    // The static member restarts: unknown member id, same instance id, same metadata.
    let t = s.join(s.join_req("", Some("inst-a"), p));
    let r = s.joins.remove(&t).expect("answered at once");
    assert_eq!(r.error, None);
    assert_eq!(r.generation_id, generation, "no new generation");
    assert_ne!(r.member_id, old_a);
    assert_eq!(
        r.leader, old_a,
        "before v9 the old leader id makes it act as a follower"
    );
    assert_eq!(s.state(), GroupState::Stable);
    // It fetches its old assignment; the other member never noticed.
    let ts = s.sync(&r.member_id, generation, &[]);
    assert_eq!(s.syncs[&ts].assignment, Bytes::from("A"));
    assert_eq!(s.heartbeat(&b, generation), Ok(()));
    // The old member id is fenced.
    assert!(matches!(
        s.core
            .heartbeat(s.now, "g", &old_a, Some("inst-a"), generation),
        Err(GroupError::FencedInstanceId { .. })
    ));
    assert!(matches!(
        s.core
            .validate_offset_commit(s.now, "g", generation, &old_a, Some("inst-a")),
        Err(GroupError::FencedInstanceId { .. })
    ));
}

#[test]
fn a_static_member_missing_from_a_rebalance_is_kept() {
    let mut s = Sim::new();
    let p = consumer_protocols(&["range"], &["t"]);
    let ta = s.join(s.join_req("", Some("inst-a"), p.clone()));
    let (b, tb) = s.join_new(p.clone());
    s.advance(10 * DELAY);
    let a = s.joins[&ta].member_id.clone();
    let generation = s.joins[&tb].generation_id;
    let leader = s.joins[&ta].leader.clone();
    let _ = s.sync(&leader, generation, &[(&a, "A"), (&b, "B")]);
    let other = if leader == a { b.clone() } else { a.clone() };
    let _ = s.sync(&other, generation, &[]);
    // b (dynamic) rejoins with a new subscription, forcing a rebalance; a (static) does not
    // rejoin in time but keeps heartbeating, so its session lives.
    let _ = p;
    let t = s.join(s.join_req(&b, None, consumer_protocols(&["range"], &["t", "u"])));
    for _ in 0..(REBALANCE / 5000) {
        s.advance(5000);
        let _ = s.core.heartbeat(s.now, "g", &a, Some("inst-a"), generation);
    }
    s.advance(10);
    let r = &s.joins[&t];
    assert_eq!(r.generation_id, generation + 1);
    assert!(
        s.core.group("g").unwrap().members.contains_key(&a),
        "static members are not dropped"
    );
}

#[test]
fn leave_group_batch_reports_each_member() {
    let mut s = Sim::new();
    let (leader, follower, _) = s.stable_pair();
    let (results, out) = s
        .core
        .leave(
            s.now,
            "g",
            &[
                (follower.clone(), None),
                ("ghost".into(), None),
                (String::new(), Some("nope".into())),
            ],
        )
        .unwrap();
    s.record(out);
    assert_eq!(results[0], Ok(()));
    assert!(matches!(
        results[1],
        Err(GroupError::UnknownMemberId { .. })
    ));
    assert!(matches!(
        results[2],
        Err(GroupError::UnknownMemberId { .. })
    ));
    assert_eq!(s.state(), GroupState::PreparingRebalance);
    assert!(
        s.core
            .leave(s.now, "nogroup", &[(leader.clone(), None)])
            .is_err()
    );
    let (results, out) = s.core.leave(s.now, "g", &[(leader, None)]).unwrap();
    s.record(out);
    assert_eq!(results[0], Ok(()));
    assert_eq!(s.state(), GroupState::Empty);
    assert!(
        s.core
            .list(&["empty".into()])
            .iter()
            .any(|g| g.group_id == "g")
    );
    assert!(s.core.list(&["Stable".into()]).is_empty());
}

#[test]
fn delete_groups_only_removes_empty_groups() {
    let mut s = Sim::new();
    let (leader, follower, _) = s.stable_pair();
    assert!(matches!(
        s.core.delete("g"),
        Err(GroupError::NonEmptyGroup { .. })
    ));
    assert!(matches!(
        s.core.delete("x"),
        Err(GroupError::GroupIdNotFound { .. })
    ));
    let (_, out) = s
        .core
        .leave(s.now, "g", &[(leader, None), (follower, None)])
        .unwrap();
    s.record(out);
    assert_eq!(s.core.delete("g"), Ok(()));
    assert!(s.core.group("g").is_none());
}

#[test]
fn offset_commit_validation_follows_kafka() {
    let mut s = Sim::new();
    // Unknown group: only a simple commit.
    assert_eq!(
        s.core.validate_offset_commit(s.now, "g", -1, "", None),
        Ok(())
    );
    assert!(matches!(
        s.core.validate_offset_commit(s.now, "g", 3, "m", None),
        Err(GroupError::IllegalGeneration { .. })
    ));
    let (leader, follower, generation) = s.stable_pair();
    assert_eq!(
        s.core
            .validate_offset_commit(s.now, "g", generation, &follower, None),
        Ok(())
    );
    assert!(matches!(
        s.core.validate_offset_commit(s.now, "g", -1, "", None),
        Err(GroupError::UnknownMemberId { .. })
    ));
    assert!(matches!(
        s.core
            .validate_offset_commit(s.now, "g", generation + 1, &follower, None),
        Err(GroupError::IllegalGeneration { .. })
    ));
    assert!(matches!(
        s.core
            .validate_offset_commit(s.now, "g", generation, "ghost", None),
        Err(GroupError::UnknownMemberId { .. })
    ));
    // A commit is a heartbeat: the follower commits instead of heartbeating and survives.
    for _ in 0..4 {
        s.advance(i64::from(SESSION) / 2);
        assert_eq!(
            s.core
                .validate_offset_commit(s.now, "g", generation, &follower, None),
            Ok(())
        );
        assert_eq!(s.heartbeat(&leader, generation), Ok(()));
    }
    assert_eq!(s.state(), GroupState::Stable);
    // During CompletingRebalance, commits must wait.
    let tl = s.join(s.join_req(&leader, None, consumer_protocols(&["range"], &["t"])));
    let tf = s.join(s.join_req(&follower, None, consumer_protocols(&["range"], &["t"])));
    assert!(s.joins.contains_key(&tl) && s.joins.contains_key(&tf));
    assert_eq!(
        s.core
            .validate_offset_commit(s.now, "g", generation + 1, &follower, None),
        Err(GroupError::RebalanceInProgress)
    );
}

#[test]
fn subscribed_topics_come_from_the_consumer_protocol() {
    let mut s = Sim::new();
    let (_, ta) = s.join_new(consumer_protocols(&["range"], &["a", "b"]));
    let (_, _) = s.join_new(consumer_protocols(&["range"], &["c"]));
    assert_eq!(
        s.core.group("g").unwrap().subscribed_topics(),
        None,
        "no protocol selected yet"
    );
    s.advance(10 * DELAY);
    assert!(s.joins.contains_key(&ta));
    let topics = s.core.group("g").unwrap().subscribed_topics().unwrap();
    assert_eq!(topics.into_iter().collect::<Vec<_>>(), ["a", "b", "c"]);
}

#[test]
fn a_member_id_handed_out_but_never_used_expires() {
    let mut s = Sim::new();
    let t = s.join(s.join_req("", None, consumer_protocols(&["range"], &["t"])));
    let id = s.joins[&t].member_id.clone();
    assert!(s.core.group("g").unwrap().pending_join.contains_key(&id));
    s.advance(i64::from(SESSION) + 1);
    assert!(s.core.group("g").unwrap().pending_join.is_empty());
    assert_eq!(s.core.next_deadline(), None, "nothing left to wake for");
}

/// A seeded random schedule of joins, syncs, heartbeats, leaves and silences by a handful of
/// members. After every step: at most one leader, and it is a member; generations never go
/// back; and once everyone stops and time runs past every timeout, every parked request has
/// been answered exactly once (`record` asserts the "once").
#[test]
fn seeded_simulation_answers_every_parked_request() {
    for seed in 1..=40u64 {
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut s = Sim::new();
        let mut issued_joins = Vec::new();
        let mut issued_syncs = Vec::new();
        // Known member ids per simulated client (None: not joined yet).
        let mut ids: Vec<Option<String>> = vec![None; 4];
        let mut last_generation = 0;
        for _ in 0..300 {
            let c = usize::try_from(next(4)).unwrap();
            let generation = s.core.group("g").map_or(0, |g| g.generation_id);
            let instance = (c == 0).then_some("static-0");
            match next(6) {
                0 | 1 => {
                    let p = consumer_protocols(
                        if next(2) == 0 {
                            &["range"]
                        } else {
                            &["range", "rr"]
                        },
                        &["t"],
                    );
                    let id = ids[c].clone().unwrap_or_default();
                    let t = s.join(s.join_req(&id, instance, p));
                    issued_joins.push(t);
                    if let Some(r) = s.joins.get(&t)
                        && (r.error.is_none()
                            || matches!(r.error, Some(GroupError::MemberIdRequired { .. })))
                    {
                        ids[c] = Some(r.member_id.clone());
                    }
                }
                2 => {
                    if let Some(id) = ids[c].clone() {
                        let a = [(id.as_str(), "x")];
                        issued_syncs.push(s.sync(&id, generation, &a));
                    }
                }
                3 => {
                    if let Some(id) = &ids[c] {
                        let _ = s.core.heartbeat(s.now, "g", id, instance, generation);
                    }
                }
                4 => {
                    if let Some(id) = ids[c].take() {
                        let (_, out) = s.core.leave(s.now, "g", &[(id, None)]).unwrap_or_default();
                        s.record(out);
                    }
                }
                _ => s.advance(i64::try_from(next(8000)).unwrap()),
            }
            if let Some(g) = s.core.group("g") {
                if let Some(l) = &g.leader_id {
                    assert!(
                        g.members.contains_key(l),
                        "seed {seed}: leader {l} is not a member"
                    );
                }
                assert!(
                    g.generation_id >= last_generation,
                    "seed {seed}: generation went back"
                );
                last_generation = g.generation_id;
                assert_eq!(
                    g.static_members.len(),
                    g.members
                        .values()
                        .filter(|m| m.group_instance_id.is_some())
                        .count(),
                    "seed {seed}"
                );
            }
        }
        s.advance(10 * 300_000);
        for t in &issued_joins {
            assert!(
                s.joins.contains_key(t),
                "seed {seed}: JoinGroup {t:?} never answered"
            );
        }
        for t in &issued_syncs {
            assert!(
                s.syncs.contains_key(t),
                "seed {seed}: SyncGroup {t:?} never answered"
            );
        }
        assert!(
            s.core.group("g").is_none_or(|g| g.members.is_empty()),
            "seed {seed}: silent members expire"
        );
    }
}

#[test]
fn records_follow_kafkas_write_points_and_a_reload_lets_members_carry_on() {
    let mut s = Sim::new();
    let (leader, follower, generation) = s.stable_pair();
    // The leader's SyncGroup completed the generation: one record with both assignments.
    let records = s.core.take_records();
    assert_eq!(records.len(), 1, "{records:?}");
    let stored = records[0].1.clone().expect("not a tombstone");
    let v = GroupMetadataValue::decode(&stored).unwrap();
    assert_eq!(
        (v.generation, v.leader.as_deref()),
        (generation, Some(&*leader))
    );
    assert_eq!(v.members.len(), 2);
    assert!(s.core.take_records().is_empty(), "drained");

    // A restart: the group is Stable at its generation and heartbeats succeed.
    let mut reloaded = Sim::new();
    reloaded.now = s.now;
    reloaded.core.load(s.now, vec![("g".into(), stored)]);
    assert_eq!(reloaded.state(), GroupState::Stable);
    assert_eq!(reloaded.heartbeat(&leader, generation), Ok(()));
    // The follower stays silent: its session expires from the load time, and the leader is
    // asked to rebalance.
    reloaded.advance(i64::from(SESSION) / 2);
    assert_eq!(reloaded.heartbeat(&leader, generation), Ok(()));
    reloaded.advance(i64::from(SESSION) / 2 + 1);
    assert_eq!(
        reloaded.heartbeat(&leader, generation),
        Err(GroupError::RebalanceInProgress)
    );
    assert!(
        !reloaded
            .core
            .group("g")
            .unwrap()
            .members
            .contains_key(&follower)
    );

    // Everyone leaves: the Empty group is recorded; deleting it writes a tombstone.
    let (_, _) = s
        .core
        .leave(s.now, "g", &[(leader, None), (follower, None)])
        .unwrap();
    s.advance(REBALANCE.into());
    assert_eq!(s.state(), GroupState::Empty);
    let records = s.core.take_records();
    let v = GroupMetadataValue::decode(records[0].1.as_ref().unwrap()).unwrap();
    assert!(v.members.is_empty() && v.protocol.is_none());
    assert_eq!(v.generation, generation + 1);
    s.core.delete("g").unwrap();
    assert_eq!(s.core.take_records(), vec![("g".to_owned(), None)]);
}
