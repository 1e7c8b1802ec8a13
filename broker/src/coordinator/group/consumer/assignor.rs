//! The server-side assignors of KIP-848: `uniform` (Kafka's `UniformAssignor`: balanced and
//! sticky) and `range` (Kafka's `RangeAssignor`: per topic, contiguous ranges in member-id
//! order). Both are pure functions of the members' subscriptions, their current target and the
//! topics' partition counts.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

pub use crate::config::Assignor;

/// Partitions by topic id: a member's assignment, current or target.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

impl Assignor {
    /// Computes every member's target assignment.
    #[must_use]
    pub fn assign(self, spec: &AssignmentSpec<'_>) -> BTreeMap<String, Assignment> {
        match self {
            Assignor::Uniform => uniform(spec),
            Assignor::Range => range(spec),
        }
    }
}

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct MemberSpec<'a> {
    pub member_id: &'a str,
    /// The subscribed topics that exist.
    pub topics: BTreeSet<Uuid>,
    /// Its previous target assignment, which `uniform` keeps where balance allows.
    pub current: Option<&'a Assignment>,
}

/// The assignor's input.
#[derive(Debug, Clone)]
pub struct AssignmentSpec<'a> {
    /// Members in member-id order.
    pub members: Vec<MemberSpec<'a>>,
    /// Partition count of every subscribed topic that exists.
    pub partitions: BTreeMap<Uuid, i32>,
}

fn add(a: &mut Assignment, topic: Uuid, p: i32) {
    a.entry(topic).or_default().insert(p);
}

/// Balanced and sticky. With identical subscriptions every member ends with `T / N` or
/// `T / N + 1` partitions, and a member keeps as many of its previous partitions as that
/// allows. With different subscriptions each member keeps up to its fair share of the topics
/// it can take, and the rest go to the least loaded eligible member.
fn uniform(spec: &AssignmentSpec<'_>) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = spec
        .members
        .iter()
        .map(|m| (m.member_id.to_owned(), Assignment::new()))
        .collect();
    let mut counts: Vec<usize> = vec![0; spec.members.len()];
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    let total = |topics: &BTreeSet<Uuid>| -> usize {
        topics
            .iter()
            .filter_map(|t| spec.partitions.get(t))
            .map(|&n| usize::try_from(n).unwrap_or(0))
            .sum()
    };
    let n = spec.members.len();
    if n == 0 {
        return out;
    }
    let homogeneous = spec.members.windows(2).all(|w| w[0].topics == w[1].topics);
    // Retention limits: pass one keeps up to `min` each, pass two lets `extra` members keep
    // one more (homogeneous); otherwise each keeps up to its rounded-up share.
    let all = total(&spec.members[0].topics);
    let (min, mut extra) = (all / n, all % n);
    let valid = |m: &MemberSpec<'_>| -> Vec<(Uuid, i32)> {
        m.current
            .into_iter()
            .flat_map(|a| a.iter())
            .filter(|(t, _)| m.topics.contains(*t))
            .flat_map(|(t, ps)| {
                let count = spec.partitions.get(t).copied().unwrap_or(0);
                ps.iter()
                    .filter(move |&&p| p < count)
                    .map(move |&p| (*t, p))
            })
            .collect()
    };
    let retained: Vec<Vec<(Uuid, i32)>> = spec.members.iter().map(valid).collect();
    for (i, m) in spec.members.iter().enumerate() {
        let limit = if homogeneous {
            min
        } else {
            let sharing = spec
                .members
                .iter()
                .filter(|o| !o.topics.is_disjoint(&m.topics))
                .count();
            total(&m.topics).div_ceil(sharing.max(1))
        };
        for &(t, p) in &retained[i] {
            if counts[i] < limit && taken.insert((t, p)) {
                add(out.get_mut(m.member_id).expect("member"), t, p);
                counts[i] += 1;
            }
        }
    }
    if homogeneous {
        for (i, m) in spec.members.iter().enumerate() {
            if extra == 0 {
                break;
            }
            if let Some(&(t, p)) = retained[i].iter().find(|tp| !taken.contains(tp)) {
                taken.insert((t, p));
                add(out.get_mut(m.member_id).expect("member"), t, p);
                counts[i] += 1;
                extra -= 1;
            }
        }
    }
    for (&t, &count) in &spec.partitions {
        for p in 0..count {
            if taken.contains(&(t, p)) {
                continue;
            }
            let best = spec
                .members
                .iter()
                .enumerate()
                .filter(|(_, m)| m.topics.contains(&t))
                .min_by_key(|(i, _)| counts[*i]);
            if let Some((i, m)) = best {
                add(out.get_mut(m.member_id).expect("member"), t, p);
                counts[i] += 1;
            }
        }
    }
    out
}

/// Per topic, the subscribers in member-id order take contiguous ranges; the first
/// `partitions % subscribers` take one more.
fn range(spec: &AssignmentSpec<'_>) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = spec
        .members
        .iter()
        .map(|m| (m.member_id.to_owned(), Assignment::new()))
        .collect();
    for (&t, &count) in &spec.partitions {
        let subs: Vec<&MemberSpec<'_>> = spec
            .members
            .iter()
            .filter(|m| m.topics.contains(&t))
            .collect();
        if subs.is_empty() {
            continue;
        }
        let m = i32::try_from(subs.len()).unwrap_or(i32::MAX);
        let (per, extra) = (count / m, count % m);
        let mut next = 0;
        for (i, s) in (0..).zip(&subs) {
            let len = per + i32::from(i < extra);
            for p in next..next + len {
                add(out.get_mut(s.member_id).expect("member"), t, p);
            }
            next += len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(ids: &'a [&'a str], t: Uuid, current: &'a [Assignment]) -> AssignmentSpec<'a> {
        AssignmentSpec {
            members: ids
                .iter()
                .enumerate()
                .map(|(i, id)| MemberSpec {
                    member_id: id,
                    topics: BTreeSet::from([t]),
                    current: current.get(i),
                })
                .collect(),
            partitions: BTreeMap::from([(t, 6)]),
        }
    }

    fn sizes(a: &BTreeMap<String, Assignment>) -> Vec<usize> {
        a.values()
            .map(|x| x.values().map(BTreeSet::len).sum())
            .collect()
    }

    fn covers_once(a: &BTreeMap<String, Assignment>, t: Uuid, n: i32) {
        let mut all: Vec<i32> = a
            .values()
            .flat_map(|x| x.get(&t).into_iter().flatten().copied())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn uniform_is_balanced_and_sticky_when_a_member_joins() {
        let t = Uuid::from_u128(1);
        let two = Assignor::Uniform.assign(&spec(&["a", "b"], t, &[]));
        covers_once(&two, t, 6);
        assert_eq!(sizes(&two), vec![3, 3]);
        let current: Vec<Assignment> = two.values().cloned().collect();
        let three = Assignor::Uniform.assign(&spec(&["a", "b", "c"], t, &current));
        covers_once(&three, t, 6);
        assert_eq!(sizes(&three), vec![2, 2, 2]);
        // a and b keep two of their three partitions each.
        for id in ["a", "b"] {
            assert!(three[id][&t].is_subset(&two[id][&t]));
        }
    }

    #[test]
    fn range_gives_contiguous_ranges() {
        let t = Uuid::from_u128(1);
        let a = Assignor::Range.assign(&spec(&["a", "b", "c", "d"], t, &[]));
        covers_once(&a, t, 6);
        assert_eq!(a["a"][&t], BTreeSet::from([0, 1]));
        assert_eq!(a["b"][&t], BTreeSet::from([2, 3]));
        assert_eq!(a["c"][&t], BTreeSet::from([4]));
        assert_eq!(a["d"][&t], BTreeSet::from([5]));
    }

    #[test]
    fn uniform_with_different_subscriptions_assigns_only_subscribed_topics() {
        let (t1, t2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let s = AssignmentSpec {
            members: vec![
                MemberSpec {
                    member_id: "a",
                    topics: BTreeSet::from([t1]),
                    current: None,
                },
                MemberSpec {
                    member_id: "b",
                    topics: BTreeSet::from([t1, t2]),
                    current: None,
                },
            ],
            partitions: BTreeMap::from([(t1, 2), (t2, 2)]),
        };
        let a = Assignor::Uniform.assign(&s);
        assert!(!a["a"].contains_key(&t2));
        covers_once(&a, t1, 2);
        covers_once(&a, t2, 2);
    }
}
