//! KIP-392: which replica a consumer reads a partition from (`replica.selector.class`).
//!
//! The leader decides, per partition of each consumer Fetch v11+ that carries a `rack_id`,
//! as Kafka's `ReplicaManager.findPreferredReadReplica` does: the candidates are the
//! leader and the followers that are in the ISR, whose last fetch showed a log holding the
//! fetch offset, and whose broker is registered and not fenced (Kafka only offers replicas
//! with a live endpoint). The choice itself is the replication crate's
//! `RackAwareReplicaSelector` ([`strata_replication::selector::rack_aware_select`]). The
//! answer names the chosen replica in `preferred_read_replica` with no records; the
//! consumer then fetches from that follower, which serves it up to its own high watermark.

use strata_kraft::MetadataImage;

/// The rack a selector sees for replica `node`: its registered `broker.rack` while it is
/// registered and not fenced, else none (Kafka's `Node.noNode()`, which no rack matches),
/// so that no consumer is sent to a broker that cannot answer. `local` is this node, the
/// leader, with its own configured rack: the leader's own rack decides whether the
/// consumer stays with it, whatever the image says of it in the meantime.
#[must_use]
pub fn live_rack(image: &MetadataImage, local: (i32, Option<&str>), node: i32) -> Option<String> {
    if node == local.0 {
        return local.1.map(str::to_owned);
    }
    image
        .brokers
        .get(&node)
        .filter(|b| !b.fenced)
        .and_then(|b| b.rack.clone())
}

#[cfg(test)]
mod tests {
    use strata_kraft::BrokerImage;
    use strata_replication::leader::{LeaderState, PartitionRegistration, ReplicationConfig};
    use strata_storage::leader_epoch::LeaderEpochCache;
    use uuid::Uuid;

    use super::*;

    fn broker(node_id: i32, rack: Option<&str>, fenced: bool) -> BrokerImage {
        BrokerImage {
            node_id,
            host: "127.0.0.1".to_owned(),
            port: 9092,
            rack: rack.map(str::to_owned),
            broker_epoch: 100 + i64::from(node_id),
            incarnation_id: Uuid::nil(),
            endpoints: Vec::new(),
            fenced,
            in_controlled_shutdown: false,
        }
    }

    /// Brokers 1 (r1, this node), 2 (r2), 3 (r3, fenced) and 4 (no rack); 5 unregistered.
    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        for b in [
            broker(1, Some("r1-image"), false),
            broker(2, Some("r2"), false),
            broker(3, Some("r3"), true),
            broker(4, None, false),
        ] {
            image.brokers.insert(b.node_id, b);
        }
        image
    }

    #[test]
    fn only_live_registered_brokers_have_a_rack() {
        let image = image();
        let local = (1, Some("r1"));
        assert_eq!(live_rack(&image, local, 1).as_deref(), Some("r1"));
        assert_eq!(live_rack(&image, local, 2).as_deref(), Some("r2"));
        assert_eq!(live_rack(&image, local, 3), None, "fenced");
        assert_eq!(live_rack(&image, local, 4), None, "no broker.rack");
        assert_eq!(live_rack(&image, local, 5), None, "not registered");
        assert_eq!(live_rack(&image, (1, None), 1), None);
    }

    /// Node 1 leads replicas 1-4 with `isr`, every follower having fetched up to offset 10.
    fn leader(isr: &[i32]) -> LeaderState {
        let registration = PartitionRegistration {
            replicas: vec![1, 2, 3, 4],
            isr: isr.to_vec(),
            leader_epoch: 5,
            partition_epoch: 5,
        };
        let mut l =
            LeaderState::become_leader(1, &registration, ReplicationConfig::default(), 10, 10, 0);
        let mut epochs = LeaderEpochCache::default();
        epochs.assign(5, 0);
        for id in [2, 3, 4] {
            let fetch = strata_replication::FetchPartition {
                replica_id: id,
                fetch_offset: 10,
                current_leader_epoch: 5,
                last_fetched_epoch: -1,
                replica_epoch: 100 + i64::from(id),
                log_start_offset: 0,
            };
            // A follower outside the ISR is refused nothing: it fetches all the same.
            l.on_fetch(&fetch, 0, &epochs, 0).unwrap();
        }
        l
    }

    /// The whole decision as the fetch handler makes it: replicas, ISR, racks from the
    /// image (live brokers only), the leader and the client's rack.
    fn choose(l: &LeaderState, image: &MetadataImage, client_rack: &str) -> Option<i32> {
        let rack_of = |node| live_rack(image, (1, Some("r1")), node);
        l.preferred_read_replica(Some(client_rack), 5, &rack_of, 0)
    }

    #[test]
    fn a_live_in_sync_follower_of_the_clients_rack_is_preferred() {
        let image = image();
        let l = leader(&[1, 2, 3, 4]);
        assert_eq!(choose(&l, &image, "r2"), Some(2));
        // The leader's own rack: the leader.
        assert_eq!(choose(&l, &image, "r1"), None);
        // A fenced follower is not offered, nor a rack no replica has.
        assert_eq!(choose(&l, &image, "r3"), None);
        assert_eq!(choose(&l, &image, "elsewhere"), None);
    }

    #[test]
    fn a_follower_outside_the_isr_is_not_offered() {
        let image = image();
        let l = leader(&[1, 3, 4]);
        assert_eq!(choose(&l, &image, "r2"), None);
    }

    #[test]
    fn among_several_the_most_caught_up_then_the_lowest_id_wins() {
        let mut image = image();
        for id in [3, 4] {
            let b = image.brokers.get_mut(&id).unwrap();
            b.fenced = false;
            b.rack = Some("r2".to_owned());
        }
        let l = leader(&[1, 2, 3, 4]);
        // Same log end and catch-up time everywhere: the lowest id, every time.
        assert_eq!(choose(&l, &image, "r2"), Some(2));
        assert_eq!(choose(&l, &image, "r2"), Some(2));
    }
}
