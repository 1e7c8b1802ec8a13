//! One member of a classic group (Kafka's `ClassicGroupMember`).

use bytes::Bytes;

use super::Ticket;

/// One protocol a member supports (for consumers: an assignor name and its subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    /// The protocol (assignor) name, e.g. "range" or "cooperative-sticky".
    pub name: String,
    /// Opaque metadata; for protocol type "consumer" a `ConsumerProtocolSubscription`.
    pub metadata: Bytes,
}

/// A member of a classic group.
#[derive(Debug, Clone)]
pub struct Member {
    /// The id the coordinator gave it: `<client.id or group.instance.id>-<uuid>`.
    pub member_id: String,
    /// KIP-345 `group.instance.id`: present for static members.
    pub group_instance_id: Option<String>,
    /// `client.id`, for DescribeGroups.
    pub client_id: String,
    /// The client's address, for DescribeGroups.
    pub client_host: String,
    /// How long the group waits for this member to rejoin during a rebalance (the consumer's
    /// `max.poll.interval.ms`). The group's rebalance timeout is the largest of its members'.
    pub rebalance_timeout_ms: i32,
    /// How long the member may stay silent before it is removed.
    pub session_timeout_ms: i32,
    /// The protocol type it joined with ("consumer", "connect", ...).
    pub protocol_type: String,
    /// The protocols it supports, in its order of preference.
    pub protocols: Vec<Protocol>,
    /// Its share of the leader's assignment in the current generation.
    pub assignment: Bytes,
    /// The parked JoinGroup this member waits on, if any.
    pub awaiting_join: Option<Ticket>,
    /// The parked SyncGroup this member waits on, if any.
    pub awaiting_sync: Option<Ticket>,
    /// A member added in the current rebalance and not yet given a generation. A new member
    /// is expired by its join timeout even while its JoinGroup is parked.
    pub is_new: bool,
    /// When the member is expired unless it heartbeats (or satisfies the heartbeat by being
    /// parked in a rebalance); `i64::MAX` when no expiry is scheduled.
    pub heartbeat_deadline_ms: i64,
}

impl Member {
    /// Its metadata for `protocol`, empty if it does not support it.
    #[must_use]
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    /// Whether `protocols` are exactly the member's (names, metadata and order).
    #[must_use]
    pub fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    /// Its vote among `candidates`: its most preferred protocol that all members support.
    #[must_use]
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|n| candidates.contains(n))
    }

    /// Kafka's `hasSatisfiedHeartbeat`: a member parked in JoinGroup or SyncGroup needs no
    /// heartbeat, except a new member, whose parked JoinGroup may still time out.
    #[must_use]
    pub fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }
}
