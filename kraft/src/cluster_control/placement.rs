//! Rack-aware replica placement for new partitions, after Kafka's rack-aware assignment
//! (`AdminUtils.assignReplicasToBrokersRackAware`, whose goals KRaft's
//! `StripedReplicaPlacer` keeps): replicas spread over racks, leaders spread evenly over
//! brokers, never two replicas on one broker.
//!
//! The brokers are ordered rack by rack in turn ("rack-alternated": the first broker of
//! each rack, then the second of each, ...). Partition `p`'s leader is broker
//! `(p + start) mod n` of that list, so consecutive partitions' leaders walk the racks
//! and every broker leads one partition in `n`. Each follower is the next broker after
//! the leader, at a shift that changes every `n` partitions, that is on a rack without
//! a replica of the partition yet (while such racks remain) and on no broker the
//! partition already uses. Where Kafka draws `start` and the shift at random, we derive
//! them from the topic id, so placement is deterministic and still differs per topic.

use std::collections::BTreeMap;

/// A broker new replicas may go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlacementBroker {
    /// The broker id.
    pub(crate) id: i32,
    /// `broker.rack`; brokers without one share a rack.
    pub(crate) rack: Option<String>,
}

/// Replica lists for partitions `first_partition..first_partition + count`, each of
/// `replication_factor` distinct brokers, leader first. `seed` varies the starting
/// broker and follower shift per topic. The caller has checked
/// `1 <= replication_factor <= brokers.len()`.
pub(crate) fn place_replicas(
    brokers: &[PlacementBroker],
    first_partition: i32,
    count: usize,
    replication_factor: usize,
    seed: u128,
) -> Vec<Vec<i32>> {
    let list = rack_alternated(brokers);
    let n = list.len();
    if n == 0 || replication_factor == 0 || replication_factor > n {
        return Vec::new();
    }
    let racks: BTreeMap<i32, Option<&str>> =
        brokers.iter().map(|b| (b.id, b.rack.as_deref())).collect();
    let num_racks = {
        let mut r: Vec<Option<&str>> = racks.values().copied().collect();
        r.sort_unstable();
        r.dedup();
        r.len()
    };
    let n128 = n as u128;
    let start = (seed % n128) as usize;
    let base_shift = ((seed >> 64) % n128) as usize;
    let first = usize::try_from(first_partition).unwrap_or(0);
    (first..first + count)
        .map(|p| {
            let leader_index = (p + start) % n;
            // Followers shift once per full round of leaders, so a second round of
            // partitions does not repeat the first round's replica sets.
            let shift = base_shift + p / n;
            let mut replicas = vec![list[leader_index]];
            let mut used_racks = vec![racks[&list[leader_index]]];
            let mut k = 0usize;
            // With distinct broker ids, `n - 1` steps visit every other broker, so a
            // fitting one is always found; the bound only guards against a caller
            // passing a broker twice.
            while replicas.len() < replication_factor && k < 2 * n {
                let offset = 1 + (shift * num_racks + k) % (n - 1);
                let candidate = list[(leader_index + offset) % n];
                let rack = racks[&candidate];
                let rack_ok =
                    !used_racks.contains(&rack) || used_racks_full(&used_racks, num_racks);
                let broker_ok = !replicas.contains(&candidate);
                if broker_ok && (rack_ok || k >= n) {
                    replicas.push(candidate);
                    if !used_racks.contains(&rack) {
                        used_racks.push(rack);
                    }
                }
                k += 1;
            }
            replicas
        })
        .collect()
}

fn used_racks_full(used: &[Option<&str>], num_racks: usize) -> bool {
    used.len() >= num_racks
}

/// Brokers ordered rack by rack in turn: racks in name order, brokers in id order
/// within a rack.
fn rack_alternated(brokers: &[PlacementBroker]) -> Vec<i32> {
    let mut by_rack: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for b in brokers {
        by_rack.entry(b.rack.as_deref()).or_default().push(b.id);
    }
    for ids in by_rack.values_mut() {
        ids.sort_unstable();
        ids.dedup();
    }
    let deepest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    (0..deepest)
        .flat_map(|i| by_rack.values().filter_map(move |ids| ids.get(i).copied()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use proptest::prelude::*;

    use super::*;

    fn brokers(racks: &[&str]) -> Vec<PlacementBroker> {
        racks
            .iter()
            .enumerate()
            .map(|(i, r)| PlacementBroker {
                id: i as i32 + 1,
                rack: (!r.is_empty()).then(|| (*r).to_owned()),
            })
            .collect()
    }

    #[test]
    fn rack_alternated_order_takes_one_broker_per_rack_in_turn() {
        // Kafka's example: 0->rack1, 1->rack3, 2->rack3, 3->rack2, 4->rack2, 5->rack1.
        let b = [
            (0, "rack1"),
            (1, "rack3"),
            (2, "rack3"),
            (3, "rack2"),
            (4, "rack2"),
            (5, "rack1"),
        ]
        .iter()
        .map(|(id, r)| PlacementBroker {
            id: *id,
            rack: Some((*r).to_owned()),
        })
        .collect::<Vec<_>>();
        assert_eq!(rack_alternated(&b), vec![0, 3, 1, 5, 4, 2]);
    }

    #[test]
    fn every_replica_set_spans_as_many_racks_as_it_can() {
        let b = brokers(&["a", "a", "b", "b", "c", "c"]);
        let rack: HashMap<i32, Option<String>> = b.iter().map(|x| (x.id, x.rack.clone())).collect();
        for seed in 0..20u128 {
            for replicas in place_replicas(&b, 0, 12, 3, seed * 0x1234_5678_9abc_def1) {
                let racks: BTreeSet<_> = replicas.iter().map(|r| rack[r].clone()).collect();
                assert_eq!(racks.len(), 3, "{replicas:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn placement_is_distinct_and_leaders_are_balanced(
            racks in proptest::collection::vec(0..3u8, 1..7),
            rf_pick in 0..10usize,
            partitions in 1..40usize,
            seed in any::<u128>(),
        ) {
            let names: Vec<String> = racks.iter().map(|r| format!("r{r}")).collect();
            let b = brokers(&names.iter().map(String::as_str).collect::<Vec<_>>());
            let rf = 1 + rf_pick % b.len();
            let placed = place_replicas(&b, 0, partitions, rf, seed);
            prop_assert_eq!(placed.len(), partitions);
            let mut leaders: HashMap<i32, usize> = HashMap::new();
            for replicas in &placed {
                prop_assert_eq!(replicas.len(), rf);
                let set: BTreeSet<_> = replicas.iter().collect();
                prop_assert_eq!(set.len(), rf);
                *leaders.entry(replicas[0]).or_default() += 1;
            }
            // Leaders go round the brokers: counts differ by at most one.
            let most = leaders.values().max().copied().unwrap_or(0);
            let least = if leaders.len() == b.len() { leaders.values().min().copied().unwrap_or(0) } else { 0 };
            prop_assert!(most - least <= 1, "{:?}", leaders);
        }
    }
}
