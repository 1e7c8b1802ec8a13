//! Unit tests of single rules; the simulator (`sim/`) tests them together under faults.

use bytes::Bytes;
use uuid::Uuid;

use super::*;

fn key(id: i32) -> ReplicaKey {
    ReplicaKey {
        id: NodeId(id),
        directory_id: Uuid::from_u128(id as u128),
    }
}

fn voters(n: i32) -> RaftConfig {
    RaftConfig::new((1..=n).map(key).collect())
}

fn entries(epochs: &[i32]) -> Vec<Entry> {
    epochs
        .iter()
        .map(|&epoch| Entry {
            epoch,
            payload: Payload::Data(Bytes::from_static(b"x")),
        })
        .collect()
}

fn node(id: i32, n: i32, quorum: QuorumState, log: &[i32]) -> RaftNode {
    RaftNode::new(
        voters(n),
        key(id),
        quorum,
        RaftLog::from_entries(entries(log)),
        0,
        id as u64,
    )
}

fn vote_request(epoch: i32, candidate: i32, voter: ReplicaKey, log: (i32, i64)) -> Input {
    Input::Message {
        from: NodeId(candidate),
        msg: Message::VoteRequest {
            epoch,
            candidate: key(candidate),
            voter,
            last_epoch: log.0,
            end_offset: log.1,
            pre_vote: false,
        },
    }
}

/// A Fetch from node `from` as `replica`, at `offset` after an entry of epoch `last`.
fn fetch_from(from: i32, replica: ReplicaKey, epoch: i32, offset: i64, last: i32) -> Input {
    Input::Message {
        from: NodeId(from),
        msg: Message::FetchRequest {
            epoch,
            replica,
            fetch_offset: offset,
            last_fetched_epoch: last,
        },
    }
}

/// Following node 1 in `epoch`, with no vote cast.
fn following(epoch: i32) -> QuorumState {
    QuorumState {
        epoch,
        voted_for: None,
        leader: Some(NodeId(1)),
    }
}

fn granted(actions: &[Action]) -> bool {
    actions.iter().any(|a| {
        matches!(
            a,
            Action::Send {
                msg: Message::VoteResponse { granted: true, .. },
                ..
            }
        )
    })
}

/// Node 1 of 3, leading `epoch` over a log with these epochs (the last entry opened it).
fn leader_of(epoch: i32, log: &[i32]) -> RaftNode {
    let mut leader = node(1, 3, QuorumState::default(), log);
    leader.quorum = QuorumState {
        epoch,
        voted_for: Some(key(1)),
        leader: Some(NodeId(1)),
    };
    leader.role = state::Role::Leader(Box::new(state::LeaderState {
        epoch_start_offset: log.len() as i64 - 1,
        voters: (1..=3)
            .map(|i| (NodeId(i), (key(i), state::ReplicaProgress::default())))
            .collect(),
        observers: Default::default(),
        acknowledged: Default::default(),
        next_begin_epoch_at: 0,
        fetched_since_check: Default::default(),
        check_quorum_deadline: u64::MAX,
    }));
    leader
}

/// Delivers the last message of `actions` (from `from`) to `to`.
fn deliver(actions: &[Action], from: i32, to: &mut RaftNode, now: u64) -> Vec<Action> {
    let Some(Action::Send { msg, .. }) = actions.last().cloned() else {
        panic!("nothing sent: {actions:?}");
    };
    to.step(
        now,
        Input::Message {
            from: NodeId(from),
            msg,
        },
    )
}

#[test]
fn a_single_voter_elects_itself_and_commits_alone() {
    let mut n = node(1, 1, QuorumState::default(), &[]);
    let actions = n.step(5_000, Input::Tick);
    assert_eq!(n.role(), RoleKind::Leader);
    assert_eq!(n.epoch(), 1);
    // The vote for itself is on disk before the leadership, which is before the
    // LeaderChange entry.
    let persist = actions
        .iter()
        .position(|a| matches!(a, Action::PersistQuorumState(q) if q.leader.is_none()))
        .unwrap();
    let leader = actions
        .iter()
        .position(|a| matches!(a, Action::PersistQuorumState(q) if q.leader == Some(NodeId(1))))
        .unwrap();
    let append = actions
        .iter()
        .position(|a| matches!(a, Action::AppendToLog { .. }))
        .unwrap();
    assert!(persist < leader && leader < append);
    let actions = n.step(5_001, Input::Propose(vec![Bytes::from_static(b"r")]));
    assert!(actions.contains(&Action::CommitTo { high_watermark: 2 }));
    // With no one to fetch, the quorum check passes on its own.
    for t in 1..20 {
        n.step(5_001 + t * 1_000, Input::Tick);
    }
    assert_eq!(n.role(), RoleKind::Leader);
}

#[test]
fn the_only_voter_stands_at_once() {
    // Kafka's `KafkaRaftClient.initialize`: no election timeout to wait out alone, on a
    // first start or a restart as the former leader.
    for quorum in [
        QuorumState::default(),
        QuorumState {
            epoch: 4,
            leader: Some(NodeId(1)),
            ..QuorumState::default()
        },
    ] {
        let mut n = node(1, 1, quorum, &[]);
        n.step(0, Input::Tick);
        assert_eq!(n.role(), RoleKind::Leader, "{quorum:?}");
    }
    // With others to wait for, the first tick elects nobody.
    let mut n = node(1, 3, QuorumState::default(), &[]);
    n.step(0, Input::Tick);
    assert_ne!(n.role(), RoleKind::Leader);
}

#[test]
fn a_vote_is_persisted_before_it_is_granted() {
    let mut n = node(2, 3, QuorumState::default(), &[]);
    let actions = n.step(10, vote_request(1, 1, key(2), (0, 0)));
    let persisted = actions
        .iter()
        .position(|a| {
            matches!(a, Action::PersistQuorumState(q) if q.epoch == 1 && q.voted_for == Some(key(1)))
        })
        .expect("vote persisted");
    let sent = actions
        .iter()
        .position(|a| matches!(a, Action::Send { .. }))
        .unwrap();
    assert!(persisted < sent);
    assert!(granted(&actions));
    // One vote per epoch (Raft §5.2), also when asked again by someone else.
    assert!(!granted(&n.step(11, vote_request(1, 3, key(2), (0, 0)))));
    assert!(granted(&n.step(12, vote_request(1, 1, key(2), (0, 0)))));
}

#[test]
fn a_vote_needs_a_log_at_least_as_up_to_date() {
    // Raft §5.4.1: last epoch first, then end offset.
    let q = QuorumState::default();
    let mut n = node(2, 3, q, &[1, 1, 2]);
    assert!(!granted(&n.step(1, vote_request(3, 1, key(2), (1, 9)))));
    let mut n = node(2, 3, q, &[1, 1, 2]);
    assert!(!granted(&n.step(1, vote_request(3, 1, key(2), (2, 2)))));
    let mut n = node(2, 3, q, &[1, 1, 2]);
    assert!(granted(&n.step(1, vote_request(3, 1, key(2), (2, 3)))));
    let mut n = node(2, 3, q, &[1, 1, 2]);
    assert!(granted(&n.step(1, vote_request(3, 1, key(2), (3, 1)))));
}

#[test]
fn a_replaced_disk_neither_votes_nor_counts_toward_the_high_watermark() {
    // Node 2 came back with an empty disk: a new directory id.
    let new_disk = ReplicaKey {
        id: NodeId(2),
        directory_id: Uuid::from_u128(99),
    };
    let mut n = RaftNode::new(
        voters(3),
        new_disk,
        QuorumState::default(),
        RaftLog::default(),
        0,
        7,
    );
    assert!(!n.is_voter());
    assert!(!granted(&n.step(1, vote_request(1, 1, key(2), (0, 0)))));

    // A leader of 3 voters counts only voters with their own directory.
    let mut leader = node(1, 3, QuorumState::default(), &[]);
    leader.step(5_000, Input::Tick); // prospective
    for from in [2, 3] {
        leader.step(
            5_001,
            Input::Message {
                from: NodeId(from),
                msg: Message::VoteResponse {
                    epoch: 0,
                    granted: true,
                    leader: None,
                    pre_vote: true,
                },
            },
        );
    }
    leader.step(
        5_002,
        Input::Message {
            from: NodeId(2),
            msg: Message::VoteResponse {
                epoch: 1,
                granted: true,
                leader: None,
                pre_vote: false,
            },
        },
    );
    assert_eq!(leader.role(), RoleKind::Leader);
    leader.step(5_003, Input::Propose(vec![Bytes::from_static(b"r")]));
    let fetch = |replica| fetch_from(2, replica, 1, 2, 1);
    leader.step(5_004, fetch(new_disk));
    assert_eq!(leader.high_watermark(), 0);
    let describe = leader.describe_quorum(5_004).unwrap();
    assert_eq!(describe.observers[0].replica, new_disk);
    leader.step(5_005, fetch(key(2)));
    assert_eq!(leader.high_watermark(), 2);

    // The old directory stops fetching: listed for Kafka's observer session, then dropped.
    let expiry = 5_004 + super::leader::OBSERVER_SESSION_TIMEOUT_MS;
    for t in (5_006..expiry).step_by(1_000) {
        leader.step(t, fetch(key(2)));
    }
    let listed = |n: &RaftNode, now| {
        n.describe_quorum(now)
            .unwrap()
            .observers
            .iter()
            .map(|o| o.replica)
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(&leader, expiry - 1), vec![new_disk]);
    assert_eq!(listed(&leader, expiry), Vec::<ReplicaKey>::new());
    // A fetch from the voter does not bring it back; one from the old directory does.
    leader.step(expiry, fetch(key(2)));
    assert_eq!(listed(&leader, expiry), Vec::<ReplicaKey>::new());
    leader.step(expiry + 1, fetch(new_disk));
    assert_eq!(listed(&leader, expiry + 1), vec![new_disk]);
}

#[test]
fn a_follower_that_hears_its_leader_refuses_pre_votes_and_keeps_its_epoch() {
    let q = following(4);
    let mut n = node(2, 3, q, &[]);
    n.step(0, Input::Tick); // sends its first Fetch
    n.step(
        10,
        Input::Message {
            from: NodeId(1),
            msg: Message::FetchResponse {
                epoch: 4,
                leader: Some(NodeId(1)),
                error: None,
                fetch_offset: 0,
                last_fetched_epoch: 0,
                diverging: None,
                snapshot_id: None,
                entries: vec![],
                high_watermark: 0,
            },
        },
    );
    let pre_vote = Input::Message {
        from: NodeId(3),
        msg: Message::VoteRequest {
            epoch: 4,
            candidate: key(3),
            voter: key(2),
            last_epoch: 9,
            end_offset: 9,
            pre_vote: true,
        },
    };
    let actions = n.step(20, pre_vote.clone());
    assert!(!granted(&actions));
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::PersistQuorumState(_)))
    );
    assert_eq!(n.epoch(), 4);
    // Once the fetch timeout passed without the leader, it grants.
    assert!(granted(&n.step(2_500, pre_vote)));
}

#[test]
fn a_follower_whose_fetch_was_lost_fetches_again_after_the_retry_backoff() {
    let q = following(4);
    let mut n = node(2, 3, q, &[]);
    let fetched = |actions: &[Action]| {
        actions.iter().any(|a| {
            matches!(
                a,
                Action::Send {
                    to: NodeId(1),
                    msg: Message::FetchRequest { .. }
                }
            )
        })
    };
    assert!(fetched(&n.step(0, Input::Tick)));
    // Unanswered, the Fetch goes again only after the request timeout (2 s, the fetch
    // timeout too).
    assert!(!fetched(&n.step(1_000, Input::Tick)));
    // Another node's loss changes nothing.
    n.step(1_000, Input::Unreachable(NodeId(3)));
    assert!(!fetched(&n.step(1_100, Input::Tick)));
    // The leader's: again after the retry backoff, well inside the fetch timeout.
    n.step(1_100, Input::Unreachable(NodeId(1)));
    assert!(n.next_deadline() <= 1_120, "{}", n.next_deadline());
    assert!(!fetched(&n.step(1_110, Input::Tick)));
    assert!(fetched(&n.step(1_120, Input::Tick)));
    assert_eq!(n.role(), RoleKind::Follower);
    assert_eq!(n.epoch(), 4);
}

fn begin_epoch(epoch: i32, leader: i32, voter: i32) -> Input {
    Input::Message {
        from: NodeId(leader),
        msg: Message::BeginQuorumEpochRequest {
            epoch,
            leader: key(leader),
            voter: key(voter),
        },
    }
}

/// The state a hostile or confused message must not move.
fn standing(n: &RaftNode) -> (RoleKind, i32, Option<NodeId>, QuorumState, i64, i64) {
    (
        n.role(),
        n.epoch(),
        n.leader(),
        n.quorum_state(),
        n.log().end_offset(),
        n.high_watermark(),
    )
}

#[test]
fn a_follower_ignores_stale_misaddressed_and_self_proclaimed_claims() {
    let q = following(4);
    let mut n = node(2, 3, q, &[1, 2, 4]);
    n.step(0, Input::Tick);
    let before = standing(&n);
    // Votes: a stale epoch, one addressed to another voter, one in an epoch that has a
    // leader (from a voter and from node 9, which is none), however long the candidate's
    // log.
    assert!(!granted(&n.step(10, vote_request(3, 3, key(2), (9, 99)))));
    assert!(!granted(&n.step(11, vote_request(4, 3, key(1), (9, 99)))));
    assert!(!granted(&n.step(12, vote_request(4, 3, key(2), (9, 99)))));
    assert!(!granted(&n.step(13, vote_request(4, 9, key(2), (9, 99)))));
    // BeginQuorumEpoch: node 3 claims epoch 4, which node 1 leads, and an older one.
    n.step(14, begin_epoch(4, 3, 2));
    n.step(15, begin_epoch(3, 3, 2));
    // A Fetch answer from a node that is not the leader, whatever it carries.
    n.step(
        16,
        Input::Message {
            from: NodeId(3),
            msg: Message::FetchResponse {
                epoch: 4,
                leader: Some(NodeId(3)),
                error: None,
                fetch_offset: 3,
                last_fetched_epoch: 4,
                diverging: Some((1, 0)),
                snapshot_id: None,
                entries: entries(&[4, 4]),
                high_watermark: 9,
            },
        },
    );
    // A Fetch sent to a follower is refused, and moves nothing.
    let answer = n.step(17, fetch_from(3, key(3), 4, 0, 0));
    assert!(
        answer.iter().any(|a| matches!(
            a,
            Action::Send {
                msg: Message::FetchResponse { error: Some(_), entries, .. },
                ..
            } if entries.is_empty()
        )),
        "{answer:?}"
    );
    assert_eq!(standing(&n), before);
    // The epoch's real leader is still followed.
    n.step(18, begin_epoch(4, 1, 2));
    assert_eq!(standing(&n), before);
}

#[test]
fn a_leader_keeps_its_epoch_against_claims_and_unknown_fetchers() {
    let mut leader = leader_of(3, &[1, 2, 3]);
    leader.step(0, Input::Propose(vec![Bytes::from_static(b"r")]));
    leader.step(1, fetch_from(2, key(2), 3, 4, 3));
    assert_eq!(leader.high_watermark(), 4);
    let before = standing(&leader);
    // A node that did not win epoch 3 claims it; votes for it, from a voter and from node
    // 9 (no voter) with a longer log.
    leader.step(2, begin_epoch(3, 2, 1));
    assert!(!granted(
        &leader.step(3, vote_request(3, 2, key(1), (9, 99)))
    ));
    assert!(!granted(
        &leader.step(4, vote_request(3, 9, key(1), (9, 99)))
    ));
    // An unknown replica fetching far ahead, and a voter fetching in an epoch that does
    // not exist yet, move no high watermark.
    leader.step(5, fetch_from(9, key(9), 3, 99, 3));
    leader.step(6, fetch_from(3, key(3), 7, 99, 7));
    assert_eq!(standing(&leader), before);
    // A stale epoch's Fetch is told the current one.
    let answer = leader.step(7, fetch_from(3, key(3), 2, 0, 0));
    assert!(
        answer.iter().any(|a| matches!(
            a,
            Action::Send {
                msg: Message::FetchResponse {
                    epoch: 3,
                    error: Some(_),
                    ..
                },
                ..
            }
        )),
        "{answer:?}"
    );
    assert_eq!(standing(&leader), before);
}

#[test]
fn a_diverging_epoch_truncates_the_follower_to_where_the_logs_agree() {
    // The leader has epochs [1, 1, 3]; the follower [1, 1, 2, 2] from a leader of epoch 2
    // that never committed.
    let mut leader = leader_of(3, &[1, 1, 3]);
    let q = following(3);
    let mut follower = node(2, 3, q, &[1, 1, 2, 2]);
    let fetch = follower.step(0, Input::Tick);
    let Some(Action::Send { msg: request, .. }) = fetch.last().cloned() else {
        panic!("no fetch: {fetch:?}");
    };
    let answer = leader.step(
        1,
        Input::Message {
            from: NodeId(2),
            msg: request,
        },
    );
    let Some(Action::Send { msg: response, .. }) = answer.last().cloned() else {
        panic!("no answer: {answer:?}");
    };
    assert!(matches!(
        response,
        Message::FetchResponse {
            diverging: Some((1, 2)),
            ..
        }
    ));
    let actions = follower.step(
        2,
        Input::Message {
            from: NodeId(1),
            msg: response,
        },
    );
    assert_eq!(actions[0], Action::TruncateLog { end_offset: 2 });
    assert!(matches!(
        actions[1],
        Action::Send {
            msg: Message::FetchRequest {
                fetch_offset: 2,
                last_fetched_epoch: 1,
                ..
            },
            ..
        }
    ));
}

#[test]
fn a_follower_behind_the_log_start_installs_the_leaders_snapshot_once() {
    let mut leader = leader_of(2, &[1, 1, 1, 2]);
    leader.high_watermark = 4;
    let actions = leader.step(
        0,
        Input::Snapshot {
            end_offset: 3,
            data: Bytes::from_static(b"state"),
        },
    );
    let id = SnapshotId {
        end_offset: 3,
        epoch: 1,
    };
    assert!(matches!(&actions[0], Action::PersistSnapshot(s) if s.id == id));
    assert_eq!(actions[1], Action::DeleteLogBefore { offset: 3 });
    assert_eq!(leader.log().start_offset(), 3);

    let q = following(2);
    let mut follower = node(2, 3, q, &[]);
    let fetch = follower.step(0, Input::Tick);
    let answer = deliver(&fetch, 2, &mut leader, 1);
    assert!(matches!(
        answer.last(),
        Some(Action::Send {
            msg: Message::FetchResponse {
                snapshot_id: Some(s),
                ..
            },
            ..
        }) if *s == id
    ));
    let fetch_snapshot = deliver(&answer, 1, &mut follower, 2);
    let snapshot = deliver(&fetch_snapshot, 2, &mut leader, 3);
    let installed = deliver(&snapshot, 1, &mut follower, 4);
    assert!(matches!(&installed[0], Action::InstallSnapshot(s) if s.id == id));
    assert_eq!(installed[1], Action::CommitTo { high_watermark: 3 });
    assert!(matches!(
        installed[2],
        Action::Send {
            msg: Message::FetchRequest {
                fetch_offset: 3,
                last_fetched_epoch: 1,
                ..
            },
            ..
        }
    ));
    // The same answer again is late: it must not roll the log back.
    assert!(deliver(&snapshot, 1, &mut follower, 5).is_empty());
    let rest = deliver(&installed, 2, &mut leader, 6);
    deliver(&rest, 1, &mut follower, 7);
    assert_eq!(follower.log().end_offset(), 4);
    assert!(deliver(&snapshot, 1, &mut follower, 8).is_empty());
    assert_eq!(follower.log().end_offset(), 4);
}

#[test]
fn voter_changes_go_one_at_a_time_after_the_leader_commits_in_its_epoch() {
    let mut leader = leader_of(2, &[1, 2]);
    let rejected = |actions: &[Action]| match actions {
        [Action::VoterChangeRejected(e)] => Some(*e),
        _ => None,
    };
    // Nothing of epoch 2 is committed yet.
    assert_eq!(
        rejected(&leader.step(1, Input::RemoveVoter(key(3)))),
        Some(VoterChangeError::ChangeInProgress)
    );
    leader.high_watermark = 2;
    let actions = leader.step(2, Input::RemoveVoter(key(3)));
    assert!(matches!(
        &actions[0],
        Action::AppendToLog { base_offset: 2, entries }
            if entries[0].payload == Payload::Voters(VoterSet::of(vec![key(1), key(2)]))
    ));
    // The change is in force at once: two voters now.
    assert_eq!(leader.voters(), &[key(1), key(2)]);
    // The next waits for this one to commit.
    assert_eq!(
        rejected(&leader.step(3, Input::AddVoter(key(3), None))),
        Some(VoterChangeError::ChangeInProgress)
    );
    leader.high_watermark = 3;
    assert_eq!(
        rejected(&leader.step(4, Input::AddVoter(key(2), None))),
        Some(VoterChangeError::DuplicateVoter)
    );
    // Node 3 has not fetched as an observer: not caught up.
    assert_eq!(
        rejected(&leader.step(5, Input::AddVoter(key(3), None))),
        Some(VoterChangeError::NotCaughtUp)
    );
    leader.step(6, fetch_from(3, key(3), 2, 3, 2));
    assert!(rejected(&leader.step(7, Input::AddVoter(key(3), None))).is_none());
    assert_eq!(leader.voters(), &[key(1), key(2), key(3)]);
    assert_eq!(described_voters(&leader), 3);
}

fn described_voters(leader: &RaftNode) -> usize {
    leader.describe_quorum(0).map_or(0, |d| d.voters.len())
}

#[test]
fn an_observer_with_no_voters_finds_the_leader_through_a_bootstrap_server() {
    // KIP-853: a node that joins a dynamic quorum knows no voter, only bootstrap servers.
    let mut config = RaftConfig::new(Vec::new());
    config.bootstrap = vec![NodeId(-1), NodeId(-2)];
    let mut observer = RaftNode::new(
        config,
        key(4),
        QuorumState::default(),
        RaftLog::default(),
        0,
        4,
    );
    assert!(!observer.is_voter());
    let asked: Vec<NodeId> = observer
        .step(0, Input::Tick)
        .iter()
        .filter_map(|a| match a {
            Action::Send {
                to,
                msg: Message::FetchRequest { .. },
            } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].0 < 0, "asked {asked:?}");
    // The bootstrap server answers as the leader itself (node 1, epoch 3): follow node 1
    // by its id, and fetch from it there.
    let actions = observer.step(
        1,
        Input::Message {
            from: asked[0],
            msg: Message::FetchResponse {
                epoch: 3,
                leader: Some(NodeId(1)),
                error: None,
                fetch_offset: 0,
                last_fetched_epoch: 0,
                diverging: None,
                snapshot_id: None,
                entries: Vec::new(),
                high_watermark: 0,
            },
        },
    );
    assert_eq!(observer.leader(), Some(NodeId(1)));
    assert_eq!(observer.epoch(), 3);
    assert!(actions.iter().any(|a| matches!(
        a,
        Action::Send {
            to: NodeId(1),
            msg: Message::FetchRequest { .. }
        }
    )));
}

#[test]
fn an_added_voter_s_endpoint_is_recorded_in_the_voters_entry() {
    let mut leader = leader_of(2, &[1, 2]);
    leader.high_watermark = 2;
    leader.step(1, fetch_from(4, key(4), 2, 2, 2));
    let endpoint = Endpoint {
        name: "CONTROLLER".into(),
        host: "127.0.0.1".into(),
        port: 9093,
    };
    leader.step(2, Input::AddVoter(key(4), Some(endpoint.clone())));
    let set = leader.voter_set().expect("a Voters entry");
    assert_eq!(set.keys, vec![key(1), key(2), key(3), key(4)]);
    assert_eq!(set.endpoints.get(&NodeId(4)), Some(&endpoint));
    // Removing the voter drops its endpoint with it.
    leader.high_watermark = 3;
    leader.step(3, Input::RemoveVoter(key(4)));
    assert!(leader.voter_set().unwrap().endpoints.is_empty());
}
