//! A dynamic quorum (KIP-853): `controller.quorum.bootstrap.servers` instead of a static
//! `controller.quorum.voters`.
//!
//! - **Bootstrap.** Kafka formats the first controller with `kafka-storage format
//!   --standalone`, which writes a voter set of that controller alone. Strata has no format
//!   step, so the rule is in the configuration: the controller whose own controller
//!   listener is the *first* entry of `controller.quorum.bootstrap.servers` writes that
//!   voter set (a `Voters` entry of itself, with its endpoint, at offset 0) when its
//!   metadata log is empty, unless another bootstrap server already reports a quorum epoch
//!   above 0: then a quorum exists (this node lost its disk, say) and founding a second
//!   one would split the cluster, so it joins as an observer instead. Every other node
//!   starts with no voters: an observer that asks the bootstrap servers for the leader.
//! - **Joining.** With `controller.quorum.auto.join.enable`, a controller that is not a
//!   voter asks the leader to add it (AddRaftVoter) once it has caught up, about once a
//!   second until it is one. A voter set that still holds this node id with another
//!   directory (the disk it had before) has that voter removed first (RemoveRaftVoter).
//! - **AddRaftVoter and RemoveRaftVoter** on the controller listener: the leader's core
//!   takes one change at a time; an answer waits until the change commits, and a change
//!   that cannot start yet (the voter is still catching up, or another change is in
//!   flight) is retried until the request's timeout, as Kafka's leader does.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_kraft::Uuid;
use strata_kraft::raft::{Endpoint, Input, NodeId, ReplicaKey, RoleKind, VoterChangeError};
use strata_protocol::StrBytes;
use strata_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, ApiKey, DescribeQuorumRequest,
    RemoveRaftVoterRequest, RemoveRaftVoterResponse, RequestKind, ResponseKind,
    add_raft_voter_request, describe_quorum_request,
};

use super::QuorumHandle;
use crate::config::BrokerConfig;
use crate::peer_client::{self, PeerClient, PeerError};
use crate::quorum::wire::refusal::{QuorumRefusal, quorum_refusal_code};
use crate::security::peer::PeerSecurity;

/// No error.
const NONE: i16 = 0;

/// The most an AddRaftVoter or RemoveRaftVoter waits, whatever its `TimeoutMs` says.
const MAX_CHANGE_WAIT: Duration = Duration::from_secs(30);
/// How often a change that cannot start yet is tried again.
const CHANGE_RETRY: Duration = Duration::from_millis(100);
/// The largest response frame accepted from a bootstrap server or the leader.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// The id the driver gives the `i`-th bootstrap server: negative, as its node id is not
/// known (Kafka does the same).
pub(super) fn bootstrap_id(i: usize) -> NodeId {
    NodeId(-1 - i32::try_from(i).unwrap_or(i32::MAX - 1))
}

/// This node's controller listener as the other controllers reach it: the first listener
/// named in `controller.listener.names`. A wildcard host is replaced by the bootstrap
/// server that is this node, if one is.
pub(super) fn controller_endpoint(config: &BrokerConfig) -> Option<Endpoint> {
    let listener = config
        .controller_listener_names
        .iter()
        .find_map(|name| config.listeners.iter().find(|l| &l.name == name))?;
    let mut endpoint = Endpoint {
        name: listener.name.clone(),
        host: listener.host.clone(),
        port: listener.port,
    };
    if is_wildcard(&endpoint.host)
        && let Some((host, _)) = config
            .quorum_bootstrap_servers
            .iter()
            .find(|(h, p)| is_this_node(&endpoint, h, *p))
    {
        endpoint.host.clone_from(host);
    }
    Some(endpoint)
}

/// Whether this node founds the dynamic quorum: it has the controller role and its
/// controller listener is the first bootstrap server (see the module doc).
pub(super) fn is_founder(config: &BrokerConfig, me: &Endpoint) -> bool {
    config.process_roles.controller
        && config
            .quorum_bootstrap_servers
            .first()
            .is_some_and(|(host, port)| is_this_node(me, host, *port))
}

fn is_wildcard(host: &str) -> bool {
    matches!(host, "" | "0.0.0.0" | "::" | "[::]")
}

/// Whether `host:port` names `me`: the same port, and the same host, or a host that
/// resolves to one of `me`'s addresses, or (for a wildcard listener) to an address of
/// this machine (one a socket can be bound to).
pub(super) fn is_this_node(me: &Endpoint, host: &str, port: u16) -> bool {
    if port != me.port {
        return false;
    }
    if host.eq_ignore_ascii_case(&me.host) {
        return true;
    }
    let theirs = resolve(host, port);
    if is_wildcard(&me.host) {
        return theirs
            .iter()
            .any(|ip| UdpSocket::bind(SocketAddr::new(*ip, 0)).is_ok());
    }
    let mine = resolve(&me.host, port);
    theirs.iter().any(|ip| mine.contains(ip))
}

fn resolve(host: &str, port: u16) -> Vec<IpAddr> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .map(|a| a.map(|a| a.ip()).collect())
        .unwrap_or_default()
}

/// Whether another bootstrap server reports a quorum that has had an epoch: asks each one
/// for DescribeQuorum (every node of a quorum answers it, a non-leader with the epoch it
/// knows), each within `timeout`. A server that does not answer counts as none.
pub(super) async fn quorum_exists(
    config: &BrokerConfig,
    me: &Endpoint,
    cluster_id: &str,
    timeout: Duration,
    security: &Arc<PeerSecurity>,
) -> bool {
    let mut request = DescribeQuorumRequest::default();
    let mut partition = describe_quorum_request::PartitionData::default();
    partition.partition_index = 0;
    let mut topic = describe_quorum_request::TopicData::default();
    topic.topic_name = super::wire::metadata_topic();
    topic.partitions = vec![partition];
    request.topics = vec![topic];
    let body = RequestKind::DescribeQuorum(request);
    for (host, port) in &config.quorum_bootstrap_servers {
        if is_this_node(me, host, *port) {
            continue;
        }
        let answer = request_once(
            &format!("{host}:{port}"),
            ApiKey::DescribeQuorum,
            2,
            &body,
            &format!("raft-client-{}", config.node_id),
            timeout,
            security,
        )
        .await;
        if let Ok(ResponseKind::DescribeQuorum(r)) = answer {
            let epoch = r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.leader_epoch)
                .max()
                .unwrap_or(0);
            if epoch > 0 {
                tracing::info!(
                    bootstrap_server = %format!("{host}:{port}"),
                    epoch,
                    cluster_id,
                    "a metadata quorum already exists: joining it instead of founding one"
                );
                return true;
            }
        }
    }
    false
}

/// One request on a fresh connection, answered within `timeout`.
async fn request_once(
    addr: &str,
    api: ApiKey,
    version: i16,
    body: &RequestKind,
    client_id: &str,
    timeout: Duration,
    security: &Arc<PeerSecurity>,
) -> Result<ResponseKind, PeerError> {
    let mut client = PeerClient::new(client_id, MAX_RESPONSE_BYTES).secured(security.clone());
    peer_client::within(timeout, async {
        client.connect(addr).await?;
        client.request(api, version, body).await
    })
    .await
}

/// KIP-853 auto-join: asks the leader at `addr` to make `me` a voter, after removing
/// `stale` (this node id with the directory it had before) if the voter set still holds
/// it. Failures are logged; the driver asks again on its next attempt.
pub(super) async fn join(
    addr: String,
    cluster_id: String,
    me: ReplicaKey,
    endpoint: Endpoint,
    stale: Option<ReplicaKey>,
    timeout: Duration,
    security: Arc<PeerSecurity>,
) {
    let client_id = format!("raft-client-{}", me.id.0);
    let cluster = Some(StrBytes::from_string(cluster_id));
    let (api, body) = match stale {
        Some(old) => {
            let mut r = RemoveRaftVoterRequest::default();
            r.cluster_id = cluster;
            r.voter_id = old.id.0;
            r.voter_directory_id = old.directory_id;
            (ApiKey::RemoveRaftVoter, RequestKind::RemoveRaftVoter(r))
        }
        None => {
            let mut listener = add_raft_voter_request::Listener::default();
            listener.name = StrBytes::from_string(endpoint.name);
            listener.host = StrBytes::from_string(endpoint.host);
            listener.port = endpoint.port;
            let mut r = AddRaftVoterRequest::default();
            r.cluster_id = cluster;
            r.timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
            r.voter_id = me.id.0;
            r.voter_directory_id = me.directory_id;
            r.listeners = vec![listener];
            (ApiKey::AddRaftVoter, RequestKind::AddRaftVoter(r))
        }
    };
    let answer = request_once(&addr, api, 0, &body, &client_id, timeout, &security).await;
    let code = match &answer {
        Ok(ResponseKind::AddRaftVoter(r)) => Some(r.error_code),
        Ok(ResponseKind::RemoveRaftVoter(r)) => Some(r.error_code),
        _ => None,
    };
    match (code, stale) {
        (Some(NONE), Some(old)) => tracing::info!(
            node_id = old.id.0,
            old_directory_id = %old.directory_id,
            "auto-join: removed this node's previous directory from the voters"
        ),
        (Some(NONE), None) => tracing::info!(
            node_id = me.id.0,
            directory_id = %me.directory_id,
            "auto-join: added as a voter"
        ),
        (code, _) => {
            tracing::debug!(?api, ?code, error = ?answer.err(), %addr, "auto-join attempt failed")
        }
    }
}

/// A voter change refused: why, and the error message its answer carries, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Refusal {
    /// Why: the answer's code ([`quorum_refusal_code`]).
    why: QuorumRefusal,
    /// What the answer's `ErrorMessage` says, where a client may want to know more.
    message: Option<&'static str>,
}

impl From<QuorumRefusal> for Refusal {
    fn from(why: QuorumRefusal) -> Self {
        Self { why, message: None }
    }
}

impl Refusal {
    fn because(why: QuorumRefusal, message: &'static str) -> Self {
        Self {
            why,
            message: Some(message),
        }
    }
}

/// The leader's core refusing a voter change, with the message its answer carries.
fn voter_change_refused(e: VoterChangeError) -> Refusal {
    let message = match e {
        VoterChangeError::NotLeader | VoterChangeError::DuplicateVoter => None,
        VoterChangeError::VoterNotFound => Some("no such voter, or it is the last one"),
        VoterChangeError::NotCaughtUp => Some("the new voter has not caught up with the leader"),
        VoterChangeError::ChangeInProgress => Some("another voter change is not committed yet"),
    };
    Refusal {
        why: QuorumRefusal::VoterChange(e),
        message,
    }
}

/// A voter change's outcome as its answer's error code and message.
fn outcome(result: Result<(), Refusal>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(()) => (NONE, None),
        Err(r) => (
            quorum_refusal_code(r.why),
            r.message.map(StrBytes::from_static_str),
        ),
    }
}

impl QuorumHandle {
    /// AddRaftVoter (KIP-853) on this node: see the module doc.
    pub async fn add_voter(&self, r: &AddRaftVoterRequest, listeners: &[String]) -> ResponseKind {
        let (code, message) = outcome(self.try_add_voter(r, listeners).await);
        let mut a = AddRaftVoterResponse::default();
        a.error_code = code;
        a.error_message = message;
        ResponseKind::AddRaftVoter(a)
    }

    /// Checks an AddRaftVoter and steps its change on the leader.
    async fn try_add_voter(
        &self,
        r: &AddRaftVoterRequest,
        listeners: &[String],
    ) -> Result<(), Refusal> {
        if !self.same_cluster(r.cluster_id.as_deref()) {
            return Err(QuorumRefusal::OtherCluster.into());
        }
        // The voter is reached at its listener for our controller listener name, as in
        // Kafka; with none of those named, at the first one given.
        let Some(l) = r
            .listeners
            .iter()
            .find(|l| listeners.iter().any(|n| n.as_str() == l.name.as_str()))
            .or_else(|| r.listeners.first())
        else {
            return Err(Refusal::because(
                QuorumRefusal::InvalidRequest,
                "AddRaftVoter needs the voter's listeners",
            ));
        };
        let key = ReplicaKey {
            id: NodeId(r.voter_id),
            directory_id: r.voter_directory_id,
        };
        if key.id.0 < 0 || key.directory_id.is_nil() {
            return Err(Refusal::because(
                QuorumRefusal::InvalidRequest,
                "a voter needs a node id and a directory id",
            ));
        }
        let endpoint = Endpoint {
            name: l.name.to_string(),
            host: l.host.to_string(),
            port: l.port,
        };
        self.change_voters(
            Input::AddVoter(key, Some(endpoint)),
            change_wait(r.timeout_ms),
        )
        .await
    }

    /// RemoveRaftVoter (KIP-853) on this node.
    pub async fn remove_voter(&self, r: &RemoveRaftVoterRequest) -> ResponseKind {
        let result = if self.same_cluster(r.cluster_id.as_deref()) {
            let key = ReplicaKey {
                id: NodeId(r.voter_id),
                directory_id: r.voter_directory_id,
            };
            self.change_voters(Input::RemoveVoter(key), MAX_CHANGE_WAIT)
                .await
        } else {
            Err(QuorumRefusal::OtherCluster.into())
        };
        let (code, message) = outcome(result);
        let mut a = RemoveRaftVoterResponse::default();
        a.error_code = code;
        a.error_message = message;
        ResponseKind::RemoveRaftVoter(a)
    }

    /// Kafka takes a request without a cluster id (an admin client's) as one for its own.
    fn same_cluster(&self, requested: Option<&str>) -> bool {
        requested.is_none_or(|c| c == &*self.cluster_id)
    }

    /// Steps one voter change on the leader, retrying while it cannot start yet, and waits
    /// until it commits.
    async fn change_voters(&self, change: Input, wait: Duration) -> Result<(), Refusal> {
        let deadline = Instant::now() + wait;
        let proposed = loop {
            let (reply, rx) = tokio::sync::oneshot::channel();
            if self
                .tx
                .send(super::Command::ChangeVoters {
                    change: change.clone(),
                    reply,
                })
                .await
                .is_err()
            {
                return Err(QuorumRefusal::NotLeader.into());
            }
            match rx.await {
                Ok(Ok(proposed)) => break proposed,
                Ok(Err(VoterChangeError::NotCaughtUp | VoterChangeError::ChangeInProgress))
                    if Instant::now() + CHANGE_RETRY < deadline =>
                {
                    tokio::time::sleep(CHANGE_RETRY).await;
                }
                Ok(Err(e)) => return Err(voter_change_refused(e)),
                Err(_) => return Err(QuorumRefusal::NotLeader.into()),
            }
        };
        let (offset, epoch) = proposed;
        loop {
            let s = self.status();
            if s.epoch != epoch || s.role != RoleKind::Leader {
                return Err(QuorumRefusal::NotLeader.into());
            }
            if s.high_watermark > offset {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Refusal::because(
                    QuorumRefusal::NotCommitted,
                    "the voter change has not committed yet",
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// How long a voter change may wait: the request's `TimeoutMs`, within
/// [`MAX_CHANGE_WAIT`].
fn change_wait(timeout_ms: i32) -> Duration {
    u64::try_from(timeout_ms)
        .map(Duration::from_millis)
        .unwrap_or(MAX_CHANGE_WAIT)
        .min(MAX_CHANGE_WAIT)
}

/// The directory id of this node's metadata log: the one in `meta.properties` (written
/// when the log dir was formatted), or the nil id when there is none.
pub(super) fn directory_id(config: &BrokerConfig, cluster_id: &str) -> Uuid {
    strata_kraft::MetaProperties::load_or_create(&config.log_dir, config.node_id, || {
        cluster_id.to_owned()
    })
    .map_or(Uuid::nil(), |p| p.directory_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(host: &str, port: u16) -> Endpoint {
        Endpoint {
            name: "CONTROLLER".into(),
            host: host.into(),
            port,
        }
    }

    #[test]
    fn a_bootstrap_server_is_this_node_by_port_and_address() {
        let me = endpoint("127.0.0.1", 19093);
        assert!(is_this_node(&me, "127.0.0.1", 19093));
        assert!(is_this_node(&me, "localhost", 19093));
        assert!(!is_this_node(&me, "127.0.0.1", 19094));
        assert!(!is_this_node(&me, "127.0.0.2", 19093));
        // A wildcard listener is this node for any local address on its port.
        let any = endpoint("0.0.0.0", 19093);
        assert!(is_this_node(&any, "127.0.0.1", 19093));
        assert!(!is_this_node(&any, "127.0.0.1", 19095));
        assert!(!is_this_node(&any, "192.0.2.1", 19093)); // TEST-NET-1: never local
    }

    #[test]
    fn bootstrap_ids_are_negative_and_distinct() {
        assert_eq!(bootstrap_id(0), NodeId(-1));
        assert_eq!(bootstrap_id(2), NodeId(-3));
    }

    /// The codes and messages AddRaftVoter and RemoveRaftVoter answer with (KIP-853).
    #[test]
    fn refused_voter_changes_answer_kafkas_codes_and_messages() {
        let cases = [
            (Ok(()), 0, None),
            (Err(QuorumRefusal::OtherCluster.into()), 104, None),
            (
                Err(Refusal::because(
                    QuorumRefusal::InvalidRequest,
                    "AddRaftVoter needs the voter's listeners",
                )),
                42,
                Some("AddRaftVoter needs the voter's listeners"),
            ),
            (Err(QuorumRefusal::NotLeader.into()), 6, None),
            (
                Err(voter_change_refused(VoterChangeError::NotLeader)),
                6,
                None,
            ),
            (
                Err(voter_change_refused(VoterChangeError::DuplicateVoter)),
                126,
                None,
            ),
            (
                Err(voter_change_refused(VoterChangeError::VoterNotFound)),
                127,
                Some("no such voter, or it is the last one"),
            ),
            (
                Err(voter_change_refused(VoterChangeError::NotCaughtUp)),
                7,
                Some("the new voter has not caught up with the leader"),
            ),
            (
                Err(voter_change_refused(VoterChangeError::ChangeInProgress)),
                7,
                Some("another voter change is not committed yet"),
            ),
            (
                Err(Refusal::because(
                    QuorumRefusal::NotCommitted,
                    "the voter change has not committed yet",
                )),
                7,
                Some("the voter change has not committed yet"),
            ),
        ];
        for (result, code, message) in cases {
            let (got_code, got_message) = outcome(result);
            assert_eq!(got_code, code, "{result:?}");
            assert_eq!(got_message.as_deref(), message, "{result:?}");
        }
    }

    #[test]
    fn a_change_waits_at_most_thirty_seconds() {
        assert_eq!(change_wait(500), Duration::from_millis(500));
        assert_eq!(change_wait(600_000), MAX_CHANGE_WAIT);
        assert_eq!(change_wait(-1), MAX_CHANGE_WAIT);
    }
}
