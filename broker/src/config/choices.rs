//! The configuration values that name a behaviour of a layer above (a KIP-848 assignor, a
//! KIP-392 replica selector): parsed here with the rest of the configuration, so that
//! `config` imports nothing from the crate. What each does is its layer's own
//! (`coordinator::group::consumer::assignor`, `partition::read_replica`).

/// `replica.selector.class`: Kafka's plug-in point for KIP-392, with the two selectors it
/// ships. Unset, Kafka sends every consumer to the leader, and so does Strata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplicaSelector {
    /// `org.apache.kafka.common.replica.LeaderSelector`, or unset: the leader only.
    #[default]
    Leader,
    /// `org.apache.kafka.common.replica.RackAwareReplicaSelector`: a follower in the
    /// client's rack when the leader is not in it.
    RackAware,
}

impl ReplicaSelector {
    /// Reads a `replica.selector.class` value: Kafka's class names, or their simple names
    /// (what an operator may write without the package); `None` for any other class,
    /// since Strata cannot load one.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        let class = value.trim();
        let simple = class
            .strip_prefix("org.apache.kafka.common.replica.")
            .unwrap_or(class);
        match simple {
            "" | "LeaderSelector" => Some(ReplicaSelector::Leader),
            "RackAwareReplicaSelector" => Some(ReplicaSelector::RackAware),
            _ => None,
        }
    }
}

/// A server-side assignor, chosen by `server_assignor` or `group.consumer.assignors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    /// The assignor's name on the wire.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// Parses a name as Kafka accepts it in `group.consumer.assignors`: the short name or the
    /// class name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim() {
            "uniform" | "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => {
                Some(Assignor::Uniform)
            }
            "range" | "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => {
                Some(Assignor::Range)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_class_names_and_their_simple_names_parse() {
        for (value, want) in [
            ("", Some(ReplicaSelector::Leader)),
            (
                "org.apache.kafka.common.replica.LeaderSelector",
                Some(ReplicaSelector::Leader),
            ),
            ("LeaderSelector", Some(ReplicaSelector::Leader)),
            (
                "org.apache.kafka.common.replica.RackAwareReplicaSelector",
                Some(ReplicaSelector::RackAware),
            ),
            (
                " RackAwareReplicaSelector ",
                Some(ReplicaSelector::RackAware),
            ),
            ("com.example.MySelector", None),
            ("org.apache.kafka.common.replica.Other", None),
            ("rackawarereplicaselector", None),
        ] {
            assert_eq!(ReplicaSelector::parse(value), want, "{value:?}");
        }
    }
}
