//! A blocking Kafka client for the admin subcommands: one connection per broker, each
//! opened with ApiVersions, requests routed the way Kafka's admin client routes them
//! (metadata writes to any broker, which forwards them to the controller; partition reads
//! to each partition's leader; group requests to the group's coordinator).
//!
//! Every request is bounded by the client's timeout (connect, write and read together),
//! and a response's size prefix is checked against [`MAX_RESPONSE_BYTES`] before anything
//! is allocated for it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::peer_client::{Decoding, PeerError, blocking};
use crate::security::peer::PeerSecurity;
use anyhow::{Context, bail};
use strata_protocol::messages::{
    ApiKey, ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest, MetadataResponse,
    RequestKind, ResponseKind, TopicName, metadata_request::MetadataRequestTopic,
};
use strata_protocol::{ResponseError, StrBytes};

/// The client id the admin subcommands send.
pub const CLIENT_ID: &str = "strata-admin";

/// The largest response read: a Metadata or DescribeLogDirs answer for a large cluster fits
/// many times over.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// How often a request that met a retriable error (no leader yet, coordinator loading) is
/// sent again, in all.
pub const RETRIES: u32 = 10;

/// The pause between those tries.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(300);

/// The versions the subcommands send: each a version both Strata and Kafka 3.x/4.x brokers
/// serve, whose fields the subcommands fill in.
pub fn version_of(api: ApiKey) -> i16 {
    match api {
        ApiKey::ApiVersions => 3,
        ApiKey::Metadata => 12,
        ApiKey::CreateTopics => 7,
        ApiKey::DeleteTopics => 6,
        ApiKey::CreatePartitions => 3,
        ApiKey::IncrementalAlterConfigs => 1,
        ApiKey::DescribeConfigs => 4,
        ApiKey::DescribeLogDirs => 4,
        ApiKey::ListOffsets => 7,
        ApiKey::FindCoordinator => 4,
        ApiKey::ListGroups => 4,
        ApiKey::DescribeGroups => 5,
        ApiKey::OffsetFetch => 8,
        ApiKey::OffsetCommit => 8,
        ApiKey::DeleteGroups => 2,
        ApiKey::DescribeCluster => 1,
        ApiKey::DescribeQuorum => 2,
        ApiKey::ListTransactions => 1,
        ApiKey::WriteTxnMarkers => 1,
        ApiKey::DescribeAcls | ApiKey::CreateAcls | ApiKey::DeleteAcls => 1,
        // The console's reads: Fetch by topic name (v13 on addresses topics by id).
        ApiKey::Fetch => 12,
        ApiKey::DeleteRecords => 2,
        ApiKey::DescribeClientQuotas => 1,
        _ => 0,
    }
}

/// A Kafka error code as Kafka's tools print it (`UNKNOWN_TOPIC_OR_PARTITION`).
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE_{c}"),
        Some(e) => {
            let camel = format!("{e:?}");
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        }
    }
}

/// Whether Kafka marks `code` retriable (a leader being elected, a coordinator loading).
pub fn retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
}

/// An error code with the broker's message, when it gave one, for the operator.
pub fn describe_error(code: i16, message: Option<&StrBytes>) -> String {
    match message.filter(|m| !m.is_empty()) {
        Some(m) => format!("{} ({m})", error_name(code)),
        None => error_name(code),
    }
}

/// One broker connection, with the version ranges its ApiVersions answer listed.
struct Connection {
    stream: blocking::Connection,
    /// `api_key → max version` from ApiVersions.
    versions: HashMap<i16, (i16, i16)>,
}

/// A broker as Metadata names it.
#[derive(Debug, Clone)]
pub struct BrokerAddr {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// The admin client: the bootstrap address, the brokers Metadata named, and an open
/// connection to each broker asked so far.
pub struct Client {
    /// What `--bootstrap-server` named.
    bootstrap: String,
    /// Each request's bound.
    timeout: Duration,
    /// Brokers by id, from the last Metadata answer.
    brokers: BTreeMap<i32, BrokerAddr>,
    /// Open connections: `None` is the bootstrap connection, `Some(id)` a broker's.
    connections: HashMap<Option<i32>, Connection>,
    /// Whether the bootstrap address is a controller listener (`--bootstrap-controller`).
    controller_listener: bool,
    /// TLS and SASL, from `--command-config` (PLAINTEXT without it).
    security: Arc<PeerSecurity>,
    /// The client id every request carries ([`CLIENT_ID`] unless set).
    client_id: String,
    /// Where each broker is reached, in place of the address Metadata advertises (the
    /// console reaches every node on its inter-broker listener).
    routes: Option<BTreeMap<i32, String>>,
}

impl Client {
    /// A client of the cluster `bootstrap` (`host:port`) belongs to; nothing is sent yet.
    pub fn new(bootstrap: &str, timeout: Duration) -> Client {
        Client {
            bootstrap: bootstrap.to_owned(),
            timeout,
            brokers: BTreeMap::new(),
            connections: HashMap::new(),
            controller_listener: false,
            security: PeerSecurity::plaintext(),
            client_id: CLIENT_ID.to_owned(),
            routes: None,
        }
    }

    /// The same client, with `client_id` in every request's header.
    #[must_use]
    pub fn with_client_id(mut self, client_id: String) -> Client {
        self.client_id = client_id;
        self
    }

    /// The same client, reaching broker `id` at `routes[id]` (`host:port`) instead of the
    /// address Metadata and FindCoordinator advertise; a broker not in it is unreachable.
    #[must_use]
    pub fn with_routes(mut self, routes: BTreeMap<i32, String>) -> Client {
        self.routes = Some(routes);
        self
    }

    /// A client of a controller listener (KIP-919's `--bootstrap-controller`), which serves
    /// only the controller's APIs (DescribeQuorum among them).
    pub fn new_controller(bootstrap: &str, timeout: Duration) -> Client {
        let mut c = Client::new(bootstrap, timeout);
        c.controller_listener = true;
        c
    }

    /// The same client, securing its connections as `security` says.
    #[must_use]
    pub fn with_security(mut self, security: Arc<PeerSecurity>) -> Client {
        self.security = security;
        self
    }

    /// Points the client at another address in place of the bootstrap one (the quorum's
    /// leader, where a follower's DescribeQuorum names it), dropping that connection.
    pub fn redirect(&mut self, addr: &str) {
        self.bootstrap = addr.to_owned();
        self.connections.remove(&None);
    }

    /// Sends `body` to the bootstrap broker and returns its answer.
    ///
    /// # Errors
    ///
    /// When the broker cannot be reached, does not serve the API at the version sent, or
    /// the answer does not decode.
    pub fn send_any(&mut self, api: ApiKey, body: RequestKind) -> anyhow::Result<ResponseKind> {
        self.send(None, api, body)
    }

    /// Sends `body` to broker `id` (known from Metadata) and returns its answer.
    ///
    /// # Errors
    ///
    /// As [`Client::send_any`], and when no Metadata answer named the broker.
    pub fn send_to(
        &mut self,
        id: i32,
        api: ApiKey,
        body: RequestKind,
    ) -> anyhow::Result<ResponseKind> {
        self.send(Some(id), api, body)
    }

    fn send(
        &mut self,
        node: Option<i32>,
        api: ApiKey,
        body: RequestKind,
    ) -> anyhow::Result<ResponseKind> {
        let deadline = Instant::now() + self.timeout;
        let version = version_of(api);
        let result = self.round_trip(node, api, version, &body, deadline);
        if result.is_err() {
            // The connection may be mid-frame: never reuse it.
            self.connections.remove(&node);
        }
        result.with_context(|| format!("{api:?} to {}", self.describe_node(node)))
    }

    fn describe_node(&self, node: Option<i32>) -> String {
        match node {
            None => self.bootstrap.clone(),
            Some(id) => match self.brokers.get(&id) {
                Some(b) => format!("broker {id} ({}:{})", b.host, b.port),
                None => format!("broker {id}"),
            },
        }
    }

    fn round_trip(
        &mut self,
        node: Option<i32>,
        api: ApiKey,
        version: i16,
        body: &RequestKind,
        deadline: Instant,
    ) -> anyhow::Result<ResponseKind> {
        if !self.connections.contains_key(&node) {
            let conn = match node {
                None => self.open_bootstrap(deadline)?,
                Some(id) => {
                    let addr = match &self.routes {
                        Some(routes) => routes
                            .get(&id)
                            .with_context(|| format!("broker {id} has no inter-broker endpoint"))?
                            .clone(),
                        None => {
                            let b = self.brokers.get(&id).with_context(|| {
                                format!("broker {id} is not in the cluster's metadata")
                            })?;
                            format!("{}:{}", b.host, b.port)
                        }
                    };
                    self.open(&addr, deadline)?
                }
            };
            self.connections.insert(node, conn);
        }
        let conn = self
            .connections
            .get_mut(&node)
            .context("the connection just opened is gone")?;
        match conn.versions.get(&(api as i16)) {
            Some(&(min, max)) if (min..=max).contains(&version) => {}
            Some(&(min, max)) => bail!(
                "UNSUPPORTED_VERSION: the broker serves {api:?} v{min}-v{max}, this tool sends v{version}"
            ),
            None => bail!("UNSUPPORTED_VERSION: the broker does not serve {api:?}"),
        }
        exchange(&mut conn.stream, api, version, body, deadline)
    }

    /// The first of the bootstrap addresses (`host:port[,host:port...]`, as Kafka's tools
    /// take them) that answers.
    fn open_bootstrap(&mut self, deadline: Instant) -> anyhow::Result<Connection> {
        let addrs: Vec<String> = self
            .bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        let mut last = None;
        for addr in &addrs {
            match self.open(addr, deadline) {
                Ok(conn) => return Ok(conn),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no bootstrap address given")))
    }

    fn open(&mut self, addr: &str, deadline: Instant) -> anyhow::Result<Connection> {
        let mut stream =
            blocking::Connection::connect(addr, &self.client_id, MAX_RESPONSE_BYTES, deadline)
                .map_err(timed_out)
                .with_context(|| format!("connect {addr}"))?
                .with_decoding(Decoding::Client);
        if self.security.tls.is_some() || self.security.login.is_some() {
            let host = addr
                .rsplit_once(':')
                .map_or(addr, |(h, _)| h)
                .trim_start_matches('[')
                .trim_end_matches(']');
            stream = stream
                .secure(&self.security, host, deadline)
                .map_err(timed_out)
                .with_context(|| format!("{} with {addr}", self.security.protocol.name()))?;
        }
        let body = RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION"))),
        );
        let ResponseKind::ApiVersions(r) = exchange(
            &mut stream,
            ApiKey::ApiVersions,
            version_of(ApiKey::ApiVersions),
            &body,
            deadline,
        )?
        else {
            bail!("{addr} did not answer ApiVersions with ApiVersions");
        };
        if r.error_code != 0 {
            bail!(
                "{addr} answered ApiVersions with {}",
                error_name(r.error_code)
            );
        }
        let versions = r
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(Connection { stream, versions })
    }

    /// Metadata for `topics` (`None`: every topic), and the brokers it names are
    /// remembered for routing.
    ///
    /// # Errors
    ///
    /// As [`Client::send_any`].
    pub fn metadata(&mut self, topics: Option<&[String]>) -> anyhow::Result<MetadataResponse> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        let ResponseKind::Metadata(m) =
            self.send_any(ApiKey::Metadata, RequestKind::Metadata(request))?
        else {
            bail!("Metadata was not answered with Metadata");
        };
        self.brokers = m
            .brokers
            .iter()
            .map(|b| {
                (
                    b.node_id.0,
                    BrokerAddr {
                        id: b.node_id.0,
                        host: b.host.to_string(),
                        port: b.port,
                        rack: b.rack.as_ref().map(ToString::to_string),
                    },
                )
            })
            .collect();
        Ok(m)
    }

    /// The brokers the last Metadata answer named.
    pub fn brokers(&self) -> &BTreeMap<i32, BrokerAddr> {
        &self.brokers
    }

    /// The coordinator of `group` (FindCoordinator v4, key type 0), retried while the
    /// coordinator is not yet available (the first lookup has `__consumer_offsets` created).
    ///
    /// # Errors
    ///
    /// When the lookup fails or keeps answering a retriable error.
    pub fn coordinator(&mut self, group: &str) -> anyhow::Result<i32> {
        self.coordinator_of(group, 0)
            .with_context(|| format!("cannot find the coordinator of group {group}"))
    }

    /// The node that coordinates transactional id `id`, as [`Client::coordinator`] finds a
    /// group's.
    ///
    /// # Errors
    ///
    /// As [`Client::coordinator`].
    pub fn txn_coordinator(&mut self, id: &str) -> anyhow::Result<i32> {
        self.coordinator_of(id, 1)
            .with_context(|| format!("cannot find the coordinator of transactional id {id}"))
    }

    /// FindCoordinator for `key` of `key_type` (0 a group, 1 a transactional id), retried
    /// while the answer is retriable.
    fn coordinator_of(&mut self, key: &str, key_type: i8) -> anyhow::Result<i32> {
        let mut last = String::new();
        for _ in 0..RETRIES {
            let request = FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_coordinator_keys(vec![StrBytes::from_string(key.to_owned())]);
            let ResponseKind::FindCoordinator(r) = self.send_any(
                ApiKey::FindCoordinator,
                RequestKind::FindCoordinator(request),
            )?
            else {
                bail!("FindCoordinator was not answered with FindCoordinator");
            };
            let c = r
                .coordinators
                .first()
                .context("FindCoordinator answered no coordinator")?;
            if c.error_code == 0 {
                let id = c.node_id.0;
                self.brokers.insert(
                    id,
                    BrokerAddr {
                        id,
                        host: c.host.to_string(),
                        port: c.port,
                        rack: self.brokers.get(&id).and_then(|b| b.rack.clone()),
                    },
                );
                return Ok(id);
            }
            last = describe_error(c.error_code, c.error_message.as_ref());
            if !retriable(c.error_code) {
                break;
            }
            std::thread::sleep(RETRY_BACKOFF);
        }
        bail!("{last}")
    }

    /// Whether this client was pointed at a controller listener.
    pub fn is_controller_listener(&self) -> bool {
        self.controller_listener
    }
}

/// The leader of each partition of `m`'s topics: `(topic, partition) → leader id` (-1 when
/// none).
pub fn leaders(m: &MetadataResponse) -> BTreeMap<(String, i32), i32> {
    m.topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| (n.to_string(), t)))
        .flat_map(|(name, t)| {
            t.partitions
                .iter()
                .map(move |p| ((name.clone(), p.partition_index), p.leader_id.0))
        })
        .collect()
}

/// Writes one request and reads its answer on `stream`, within `deadline`.
fn exchange(
    stream: &mut blocking::Connection,
    api: ApiKey,
    version: i16,
    body: &RequestKind,
    deadline: Instant,
) -> anyhow::Result<ResponseKind> {
    stream
        .request(api, version, body, deadline)
        .map_err(timed_out)
}

/// A timeout as the admin tools report it (Kafka's REQUEST_TIMED_OUT); any other error as
/// it is.
fn timed_out(e: PeerError) -> anyhow::Error {
    match e {
        PeerError::Timeout => anyhow::anyhow!("REQUEST_TIMED_OUT: no answer in time"),
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(9999), "UNKNOWN_ERROR_CODE_9999");
    }
}
