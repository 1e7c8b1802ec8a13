//! The heartbeat protocol on the sans-IO core, driven by hand (KIP-848 §"Reconciliation").

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::*;

const T: Uuid = Uuid::from_u128(7);

struct Topics;
impl TopicMetadata for Topics {
    fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
        (name == "orders").then_some((T, 6))
    }
    fn topic_names(&self) -> Vec<&str> {
        vec!["orders"]
    }
}

fn join(c: &mut ConsumerGroupCore, now: i64, id: &str) -> HeartbeatResponse {
    c.heartbeat(
        now,
        HeartbeatRequest {
            api_version: 1,
            group_id: "g".into(),
            member_id: id.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["orders".into()]),
            owned: Some(Assignment::new()),
            ..HeartbeatRequest::default()
        },
        "unused",
        &Topics,
    )
    .expect("join")
}

fn beat(
    c: &mut ConsumerGroupCore,
    now: i64,
    id: &str,
    epoch: i32,
    owned: &Assignment,
) -> Result<HeartbeatResponse, ConsumerGroupError> {
    c.heartbeat(
        now,
        HeartbeatRequest {
            api_version: 1,
            group_id: "g".into(),
            member_id: id.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            owned: Some(owned.clone()),
            ..HeartbeatRequest::default()
        },
        "unused",
        &Topics,
    )
}

fn parts(a: &Assignment) -> BTreeSet<i32> {
    a.get(&T).cloned().unwrap_or_default()
}

#[test]
fn a_partition_moves_only_after_its_owner_revoked_it() {
    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig::default());
    let a = join(&mut c, 0, "a");
    assert_eq!(a.member_epoch, 1);
    let a_parts = a.assignment.expect("assignment");
    assert_eq!(parts(&a_parts).len(), 6);

    let b = join(&mut c, 1, "b");
    assert_eq!(b.member_epoch, 2);
    // b is at the new epoch but gets nothing a still owns.
    assert!(parts(b.assignment.as_ref().expect("assignment")).is_empty());
    assert_eq!(c.group("g").unwrap().state(), "Reconciling");

    // a is asked to revoke three partitions and stays at epoch 1.
    let r = beat(&mut c, 2, "a", 1, &a_parts).unwrap();
    assert_eq!(r.member_epoch, 1);
    let kept = r.assignment.expect("revocation");
    assert_eq!(parts(&kept).len(), 3);
    // An epoch ahead of the member's is fenced.
    assert!(matches!(
        beat(&mut c, 2, "a", 5, &kept),
        Err(ConsumerGroupError::FencedMemberEpoch { .. })
    ));
    // b still waits for them.
    let r = beat(&mut c, 3, "b", 2, &Assignment::new()).unwrap();
    assert!(r.assignment.is_none());
    // a reports the revocation and moves to epoch 2.
    let r = beat(&mut c, 4, "a", 1, &kept).unwrap();
    assert_eq!(r.member_epoch, 2);
    // Now b gets the released partitions.
    let r = beat(&mut c, 5, "b", 2, &Assignment::new()).unwrap();
    let b_parts = parts(r.assignment.as_ref().expect("assignment"));
    assert_eq!(b_parts.len(), 3);
    assert!(b_parts.is_disjoint(&parts(&kept)));
    assert_eq!(c.group("g").unwrap().state(), "Stable");
}

#[test]
fn leaving_and_expiry_give_partitions_to_the_others() {
    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig {
        session_timeout_ms: 100,
        ..ConsumerGroupConfig::default()
    });
    join(&mut c, 0, "a");
    let owned_a = c.group("g").unwrap().members["a"].assigned.clone();
    join(&mut c, 0, "b");
    // a leaves with epoch -1: b may take everything at once.
    let r = c
        .heartbeat(
            1,
            HeartbeatRequest {
                api_version: 1,
                group_id: "g".into(),
                member_id: "a".into(),
                member_epoch: LEAVE_EPOCH,
                ..HeartbeatRequest::default()
            },
            "x",
            &Topics,
        )
        .unwrap();
    assert_eq!(r.member_epoch, LEAVE_EPOCH);
    let r = beat(&mut c, 2, "b", 2, &Assignment::new()).unwrap();
    assert_eq!(parts(r.assignment.as_ref().unwrap()), parts(&owned_a));
    // b goes silent: its session expires and the group is empty.
    c.tick(200);
    assert_eq!(c.group("g").unwrap().state(), "Empty");
    assert!(matches!(
        beat(&mut c, 201, "b", 3, &Assignment::new()),
        Err(ConsumerGroupError::UnknownMemberId { .. })
    ));
}

#[test]
fn offset_commits_check_the_member_epoch() {
    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig::default());
    join(&mut c, 0, "a");
    assert_eq!(c.validate_offset_commit("g", "a", 1, 9), Some(Ok(())));
    assert!(matches!(
        c.validate_offset_commit("g", "a", 0, 9),
        Some(Err(ConsumerGroupError::StaleMemberEpoch { .. }))
    ));
    assert!(matches!(
        c.validate_offset_commit("g", "zz", 1, 9),
        Some(Err(ConsumerGroupError::UnknownMemberId { .. }))
    ));
    assert_eq!(c.validate_offset_commit("other", "a", 1, 9), None);
    assert_eq!(c.validate_offset_fetch("g", None, -1), Some(Ok(())));
}

#[test]
fn requests_that_break_the_rules_are_invalid() {
    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig::default());
    let bad = HeartbeatRequest {
        api_version: 1,
        group_id: "g".into(),
        member_epoch: 0,
        ..HeartbeatRequest::default()
    };
    assert!(matches!(
        c.heartbeat(0, bad, "x", &Topics),
        Err(ConsumerGroupError::InvalidRequest { .. })
    ));
    // v0 without a member id: the coordinator names the member.
    let r = c
        .heartbeat(
            0,
            HeartbeatRequest {
                api_version: 0,
                group_id: "g".into(),
                rebalance_timeout_ms: 1000,
                subscribed_topic_names: Some(vec!["orders".into()]),
                owned: Some(BTreeMap::new()),
                ..HeartbeatRequest::default()
            },
            "generated",
            &Topics,
        )
        .unwrap();
    assert_eq!(r.member_id, "generated");
}

/// Topics "orders", "orders-eu" and "payments" (ids 7, 8 and 9).
struct ThreeTopics;
impl TopicMetadata for ThreeTopics {
    fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
        match name {
            "orders" => Some((T, 6)),
            "orders-eu" => Some((Uuid::from_u128(8), 2)),
            "payments" => Some((Uuid::from_u128(9), 1)),
            _ => None,
        }
    }
    fn topic_names(&self) -> Vec<&str> {
        vec!["orders", "orders-eu", "payments"]
    }
}

fn join_regex(
    c: &mut ConsumerGroupCore,
    regex: &str,
) -> Result<HeartbeatResponse, ConsumerGroupError> {
    c.heartbeat(
        0,
        HeartbeatRequest {
            api_version: 1,
            group_id: "g".into(),
            member_id: "a".into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec![]),
            subscribed_topic_regex: Some(regex.into()),
            owned: Some(Assignment::new()),
            ..HeartbeatRequest::default()
        },
        "unused",
        &ThreeTopics,
    )
}

#[test]
fn a_regular_expression_subscribes_to_every_whole_name_it_matches() {
    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig::default());
    let r = join_regex(&mut c, "orders.*").expect("join");
    let got: BTreeSet<Uuid> = r.assignment.expect("assignment").keys().copied().collect();
    // "payments" does not match; the match is against the whole name.
    assert_eq!(got, [T, Uuid::from_u128(8)].into());
    let m = &c.group("g").unwrap().members["a"];
    assert_eq!(m.subscribed_topic_regex.as_deref(), Some("orders.*"));

    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig::default());
    let r = join_regex(&mut c, "rders").expect("join");
    assert!(r.assignment.expect("assignment").is_empty());

    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig::default());
    assert!(matches!(
        join_regex(&mut c, "orders(["),
        Err(ConsumerGroupError::InvalidRegularExpression { .. })
    ));
    // Neither names nor a regular expression.
    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig::default());
    assert!(matches!(
        join_regex(&mut c, ""),
        Err(ConsumerGroupError::InvalidRequest { .. })
    ));
}

#[test]
fn empty_groups_without_offsets_are_deleted_with_tombstones() {
    let mut c = ConsumerGroupCore::new(ConsumerGroupConfig::default());
    join(&mut c, 0, "a");
    assert!(!c.take_records().is_empty());
    // Not empty: kept whatever the offsets.
    assert_eq!(c.delete_empty_groups(|_| false), 0);
    c.heartbeat(
        1,
        HeartbeatRequest {
            api_version: 1,
            group_id: "g".into(),
            member_id: "a".into(),
            member_epoch: LEAVE_EPOCH,
            ..HeartbeatRequest::default()
        },
        "unused",
        &Topics,
    )
    .expect("leave");
    c.take_records();
    // Empty but with offsets: kept.
    assert_eq!(c.delete_empty_groups(|_| true), 0);
    assert_eq!(c.delete_empty_groups(|_| false), 1);
    assert!(c.group("g").is_none());
    let records = c.take_records();
    assert!(
        records
            .iter()
            .all(|(_, rs)| rs.iter().all(|(_, v)| v.is_none())),
        "{records:?}"
    );
    assert!(!records.is_empty());
}
