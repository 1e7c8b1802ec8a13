//! KIP-392: choosing the replica a consumer reads from (`replica.selector.class`).

/// One replica as a selector sees it (Kafka's `ReplicaView`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    /// The broker.
    pub node: i32,
    /// Its `broker.rack`, if set.
    pub rack: Option<String>,
    /// Its log end offset.
    pub log_end_offset: i64,
    /// How long since it was last caught up with the leader (0 for the leader).
    pub time_since_last_caught_up_ms: i64,
}

/// Kafka's `RackAwareReplicaSelector`: with a client rack, the leader if it is in that rack,
/// else the most caught-up replica of that rack (highest log end offset, then the most
/// recently caught up); the leader when the client has no rack or no replica shares it.
/// `replicas` are the candidates (the leader among them); the result is a node id.
pub fn rack_aware_select(
    client_rack: Option<&str>,
    leader: &ReplicaView,
    replicas: &[ReplicaView],
) -> i32 {
    let Some(rack) = client_rack.filter(|r| !r.is_empty()) else {
        return leader.node;
    };
    let same_rack: Vec<&ReplicaView> = replicas
        .iter()
        .filter(|r| r.rack.as_deref() == Some(rack))
        .collect();
    if same_rack.is_empty() || same_rack.iter().any(|r| r.node == leader.node) {
        return leader.node;
    }
    same_rack
        .into_iter()
        .max_by(|a, b| {
            a.log_end_offset
                .cmp(&b.log_end_offset)
                .then(
                    b.time_since_last_caught_up_ms
                        .cmp(&a.time_since_last_caught_up_ms),
                )
                // Ties broken by the lower node id, so the choice is deterministic.
                .then(b.node.cmp(&a.node))
        })
        .map_or(leader.node, |r| r.node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(node: i32, rack: &str, leo: i64, since: i64) -> ReplicaView {
        ReplicaView {
            node,
            rack: Some(rack.to_string()),
            log_end_offset: leo,
            time_since_last_caught_up_ms: since,
        }
    }

    #[test]
    fn no_client_rack_means_the_leader() {
        let leader = view(1, "a", 10, 0);
        let all = [leader.clone(), view(2, "b", 10, 0)];
        assert_eq!(rack_aware_select(None, &leader, &all), 1);
        assert_eq!(rack_aware_select(Some(""), &leader, &all), 1);
        assert_eq!(rack_aware_select(Some("c"), &leader, &all), 1);
    }

    #[test]
    fn the_leader_wins_in_its_own_rack() {
        let leader = view(1, "a", 10, 0);
        let all = [leader.clone(), view(2, "a", 10, 0)];
        assert_eq!(rack_aware_select(Some("a"), &leader, &all), 1);
    }

    #[test]
    fn the_most_caught_up_replica_of_the_rack_is_chosen() {
        let leader = view(1, "a", 10, 0);
        let all = [
            leader.clone(),
            view(2, "b", 8, 0),
            view(3, "b", 10, 500),
            view(4, "b", 10, 100),
        ];
        assert_eq!(rack_aware_select(Some("b"), &leader, &all), 4);
    }
}
