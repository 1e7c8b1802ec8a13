//! The KRaft cluster keys: `process.roles`, listeners and their security protocols,
//! `controller.listener.names`, `controller.quorum.voters` and
//! `controller.quorum.bootstrap.servers`, checked the way Kafka's `KafkaConfig` and
//! `QuorumConfig` check them, with their error messages.
//!
//! One deliberate difference keeps a node without any configuration working: a node with
//! the controller role and none of `controller.listener.names`,
//! `controller.quorum.voters` and `controller.quorum.bootstrap.servers` set is a
//! *standalone* node, the single voter of its own quorum, with no controller listener.
//! Kafka refuses such a configuration. Setting any of the three keys opts into Kafka's
//! rules in full.

use super::ConfigError;

/// `process.roles`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRoles {
    /// Serves clients (the `broker` role).
    pub broker: bool,
    /// Is a voter of the metadata quorum (the `controller` role).
    pub controller: bool,
}

impl ProcessRoles {
    /// Both roles in one process: Kafka's "combined" mode, and the default.
    #[must_use]
    pub fn is_combined(self) -> bool {
        self.broker && self.controller
    }
}

impl std::fmt::Display for ProcessRoles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.broker, self.controller) {
            (true, true) => f.write_str("broker,controller"),
            (true, false) => f.write_str("broker"),
            (false, true) => f.write_str("controller"),
            (false, false) => f.write_str(""),
        }
    }
}

/// Kafka's `SecurityProtocol`. Strata serves PLAINTEXT only; the others are recognised so
/// that a configuration using them is refused with a clear message, not a parse error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether connections are encrypted: SSL and SASL_SSL.
    #[must_use]
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL: SASL_PLAINTEXT and SASL_SSL.
    #[must_use]
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// The protocol Kafka names `name` (any case).
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    /// Kafka's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Kafka's wire id (BrokerRegistration's `SecurityProtocol` field).
    #[must_use]
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }
}

/// One entry of `listeners` or `advertised.listeners`: `NAME://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The listener name, upper-cased as Kafka normalises it (`PLAINTEXT`, `CONTROLLER`).
    pub name: String,
    /// Empty means every interface (Kafka's `PLAINTEXT://:9092`).
    pub host: String,
    pub port: u16,
    /// From the effective `listener.security.protocol.map`.
    pub security_protocol: SecurityProtocol,
}

/// One entry of `controller.quorum.voters`: `id@host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumVoter {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

/// The result of [`resolve`]: the cluster keys, parsed and checked together.
#[derive(Debug, Clone)]
pub struct ClusterKeys {
    pub process_roles: ProcessRoles,
    /// Every listener to bind, in the order given.
    pub listeners: Vec<Endpoint>,
    /// The listeners clients are told about: `advertised.listeners` (else `listeners`)
    /// without the controller listeners.
    pub advertised_broker_listeners: Vec<Endpoint>,
    /// `controller.listener.names`, upper-cased.
    pub controller_listener_names: Vec<String>,
    /// `inter.broker.listener.name` (Kafka's default: PLAINTEXT).
    pub inter_broker_listener_name: String,
    /// The effective `listener.security.protocol.map`: each listener name's protocol,
    /// including controller listeners this node does not bind (a broker's route to the
    /// controllers).
    pub listener_protocols: Vec<(String, SecurityProtocol)>,
    /// `controller.quorum.voters` (empty for a standalone node or a dynamic quorum).
    pub quorum_voters: Vec<QuorumVoter>,
    /// `controller.quorum.bootstrap.servers` (KIP-853), as host and port.
    pub quorum_bootstrap_servers: Vec<(String, u16)>,
    /// The standalone single node (see the module docs): the controller role with no
    /// controller listener, voters or bootstrap servers configured.
    pub standalone: bool,
}

/// The raw values [`resolve`] reads.
pub struct RawClusterKeys<'a> {
    pub process_roles: &'a str,
    pub node_id: i32,
    pub listeners: &'a str,
    pub advertised_listeners: &'a str,
    pub controller_listener_names: &'a str,
    /// The map's value, and whether it was set explicitly (Kafka adds implicit PLAINTEXT
    /// entries for controller listeners only to the default map).
    pub security_protocol_map: &'a str,
    pub security_protocol_map_explicit: bool,
    pub inter_broker_listener_name: &'a str,
    pub quorum_voters: &'a str,
    pub quorum_bootstrap_servers: &'a str,
}

fn rejected(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Rejected {
        key,
        message: message.into(),
    }
}

/// Kafka's `LIST` type: comma-separated, entries trimmed, empty entries dropped.
fn list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Parses `process.roles`.
///
/// # Errors
///
/// Kafka's messages for an unknown or duplicate role; an empty value is refused too (Kafka
/// 4.0 requires the key).
pub fn parse_process_roles(value: &str) -> Result<ProcessRoles, ConfigError> {
    let mut roles = ProcessRoles {
        broker: false,
        controller: false,
    };
    let entries = list(value);
    if entries.is_empty() {
        return Err(rejected(
            "process.roles",
            "process.roles must contain 'broker', 'controller' or both",
        ));
    }
    for role in &entries {
        let slot = match *role {
            "broker" => &mut roles.broker,
            "controller" => &mut roles.controller,
            other => {
                return Err(rejected(
                    "process.roles",
                    format!(
                        "Unknown process role '{other}' (only 'broker' and 'controller' are allowed roles)"
                    ),
                ));
            }
        };
        if *slot {
            return Err(rejected(
                "process.roles",
                format!(
                    "Duplicate role names found in `process.roles`: [{}]",
                    entries.join(", ")
                ),
            ));
        }
        *slot = true;
    }
    Ok(roles)
}

/// Parses `listener.security.protocol.map` (`NAME:PROTOCOL,...`).
fn parse_security_protocol_map(
    value: &str,
) -> Result<Vec<(String, SecurityProtocol)>, ConfigError> {
    list(value)
        .into_iter()
        .map(|entry| {
            let (name, protocol) = entry.split_once(':').ok_or_else(|| {
                rejected(
                    "listener.security.protocol.map",
                    format!(
                        "Error parsing configuration property 'listener.security.protocol.map': \
                         map entry '{entry}' is not of the form NAME:PROTOCOL"
                    ),
                )
            })?;
            let protocol = SecurityProtocol::parse(protocol.trim()).ok_or_else(|| {
                rejected(
                    "listener.security.protocol.map",
                    format!(
                        "Invalid security protocol `{}` defined in listener.security.protocol.map",
                        protocol.trim()
                    ),
                )
            })?;
            Ok((name.trim().to_ascii_uppercase(), protocol))
        })
        .collect()
}

/// Whether `host` matches Kafka's `Utils.validHostPattern` characters.
fn valid_host(host: &str) -> bool {
    host.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-%._:".contains(&b))
}

/// Kafka's `Utils.getHost` / `getPort`: `host:port`, the host optionally in brackets.
fn host_and_port(s: &str) -> (Option<String>, Option<u16>) {
    let Some((host, port)) = s.rsplit_once(':') else {
        return (None, None);
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let host = (!host.is_empty() && valid_host(host)).then(|| host.to_owned());
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|_| port.bytes().all(|b| b.is_ascii_digit()));
    (host, port)
}

/// Parses `listeners` / `advertised.listeners` (Kafka's `listenerListToEndPoints`).
fn parse_endpoints(
    key: &'static str,
    value: &str,
    protocols: &[(String, SecurityProtocol)],
    require_distinct_ports: bool,
) -> Result<Vec<Endpoint>, ConfigError> {
    let mut out: Vec<Endpoint> = Vec::new();
    for entry in list(value) {
        let unparsable = || {
            rejected(
                key,
                format!("Unable to parse {entry} to a broker endpoint (expected NAME://host:port)"),
            )
        };
        let (name, addr) = entry.split_once("://").ok_or_else(unparsable)?;
        let name = name.trim().to_ascii_uppercase();
        let (host, port) = match addr.rsplit_once(':') {
            Some((h, p)) => (h, p),
            None => return Err(unparsable()),
        };
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if name.is_empty() || !valid_host(host) {
            return Err(unparsable());
        }
        let port = port.parse::<u16>().map_err(|_| unparsable())?;
        let security_protocol = protocols
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                rejected(
                    key,
                    format!("No security protocol defined for listener {name}"),
                )
            })?;
        if out.iter().any(|e| e.name == name) {
            return Err(rejected(
                key,
                format!("Each listener must have a different name, {key}: {value}"),
            ));
        }
        if require_distinct_ports && port != 0 && out.iter().any(|e| e.port == port) {
            return Err(rejected(
                key,
                format!("Each listener must have a different port, {key}: {value}"),
            ));
        }
        out.push(Endpoint {
            name,
            host: host.to_owned(),
            port,
            security_protocol,
        });
    }
    Ok(out)
}

/// Parses `controller.quorum.voters` with Kafka's `QuorumConfig.parseVoterConnections`
/// rules and messages. Unlike Kafka, which keeps the last of two entries with one id, a
/// repeated id is refused.
///
/// # Errors
///
/// The entry that does not parse, in Kafka's words.
pub fn parse_quorum_voters(value: &str) -> Result<Vec<QuorumVoter>, ConfigError> {
    const FORM: &str = "Each entry should be in the form `{id}@{host}:{port}`.";
    let mut voters: Vec<QuorumVoter> = Vec::new();
    for entry in list(value) {
        let parts: Vec<&str> = entry.split('@').collect();
        let [id, addr] = parts[..] else {
            return Err(rejected(
                "controller.quorum.voters",
                format!("Invalid configuration value for controller.quorum.voters. {FORM}"),
            ));
        };
        let id: i32 = id.parse().map_err(|_| {
            rejected(
                "controller.quorum.voters",
                format!("Failed to parse voter ID as an integer from {id}"),
            )
        })?;
        let (host, port) = host_and_port(addr);
        let host = host.ok_or_else(|| {
            rejected(
                "controller.quorum.voters",
                format!(
                    "Failed to parse host name from entry {entry} for the configuration controller.quorum.voters. {FORM}"
                ),
            )
        })?;
        let port = port.ok_or_else(|| {
            rejected(
                "controller.quorum.voters",
                format!(
                    "Failed to parse host port from entry {entry} for the configuration controller.quorum.voters. {FORM}"
                ),
            )
        })?;
        if voters.iter().any(|v| v.id == id) {
            return Err(rejected(
                "controller.quorum.voters",
                format!("Voter id {id} appears more than once in controller.quorum.voters"),
            ));
        }
        voters.push(QuorumVoter { id, host, port });
    }
    Ok(voters)
}

/// Parses `controller.quorum.bootstrap.servers` (`host:port,...`, KIP-853).
///
/// # Errors
///
/// The entry that does not parse, in Kafka's words.
pub fn parse_bootstrap_servers(value: &str) -> Result<Vec<(String, u16)>, ConfigError> {
    const FORM: &str = "Each entry should be in the form \"{host}:{port}\"";
    list(value)
        .into_iter()
        .map(|entry| {
            let (host, port) = host_and_port(entry);
            let host = host.ok_or_else(|| {
                rejected(
                    "controller.quorum.bootstrap.servers",
                    format!(
                        "Failed to parse host name from {entry} for the configuration controller.quorum.bootstrap.servers. {FORM}"
                    ),
                )
            })?;
            let port = port.ok_or_else(|| {
                rejected(
                    "controller.quorum.bootstrap.servers",
                    format!(
                        "Failed to parse host port from {entry} for the configuration controller.quorum.bootstrap.servers. {FORM}"
                    ),
                )
            })?;
            Ok((host, port))
        })
        .collect()
}

/// Parses the cluster keys and applies Kafka's cross-checks (`KafkaConfig.validateValues`
/// for KRaft), in Kafka's order, with Kafka's messages.
///
/// # Errors
///
/// [`ConfigError::Rejected`] naming the key and the rule.
pub fn resolve(raw: &RawClusterKeys<'_>) -> Result<ClusterKeys, ConfigError> {
    let roles = parse_process_roles(raw.process_roles)?;
    if raw.node_id < 0 {
        return Err(rejected(
            "node.id",
            "Missing configuration `node.id` which is required when `process.roles` is defined \
             (i.e. when running in KRaft mode).",
        ));
    }
    let controller_names: Vec<String> = list(raw.controller_listener_names)
        .into_iter()
        .map(str::to_ascii_uppercase)
        .collect();
    let voters = parse_quorum_voters(raw.quorum_voters)?;
    let bootstrap = parse_bootstrap_servers(raw.quorum_bootstrap_servers)?;

    // Kafka's effectiveListenerSecurityProtocolMap: the default map gains a PLAINTEXT entry
    // for each controller listener name, unless SSL or SASL is in use anywhere.
    let mut protocols = parse_security_protocol_map(raw.security_protocol_map)?;
    if !raw.security_protocol_map_explicit {
        let is_ssl_or_sasl = |n: &str| matches!(n, "SSL" | "SASL_SSL" | "SASL_PLAINTEXT");
        let listener_names = list(raw.listeners).into_iter().map(|l| {
            l.split_once("://")
                .map_or(l, |(n, _)| n)
                .to_ascii_uppercase()
        });
        let secure = controller_names.iter().any(|n| is_ssl_or_sasl(n))
            || listener_names.clone().any(|n| is_ssl_or_sasl(&n));
        if !secure {
            for name in &controller_names {
                if !protocols.iter().any(|(n, _)| n == name) {
                    protocols.push((name.clone(), SecurityProtocol::Plaintext));
                }
            }
        }
    }

    let listeners = parse_endpoints("listeners", raw.listeners, &protocols, true)?;
    let advertised = if raw.advertised_listeners.trim().is_empty() {
        listeners.clone()
    } else {
        parse_endpoints(
            "advertised.listeners",
            raw.advertised_listeners,
            &protocols,
            false,
        )?
    };
    let is_controller_listener = |e: &Endpoint| controller_names.contains(&e.name);
    let controller_listeners: Vec<&Endpoint> = listeners
        .iter()
        .filter(|e| is_controller_listener(e))
        .collect();
    let standalone = roles.controller
        && controller_names.is_empty()
        && voters.is_empty()
        && bootstrap.is_empty();

    if !standalone {
        if voters.is_empty() && bootstrap.is_empty() {
            return Err(rejected(
                "controller.quorum.voters",
                "If using process.roles, either controller.quorum.bootstrap.servers must contain \
                 the set of bootstrap controllers or controller.quorum.voters must contain a \
                 parseable set of controllers.",
            ));
        }
        if roles.controller {
            if !voters.is_empty() && !voters.iter().any(|v| v.id == raw.node_id) {
                let ids: Vec<String> = voters.iter().map(|v| v.id.to_string()).collect();
                return Err(rejected(
                    "controller.quorum.voters",
                    format!(
                        "If process.roles contains the 'controller' role, the node id {} must be \
                         included in the set of voters controller.quorum.voters=Set({})",
                        raw.node_id,
                        ids.join(", ")
                    ),
                ));
            }
            if !roles.broker && controller_listeners.len() != listeners.len() {
                return Err(rejected(
                    "listeners",
                    "The listeners config must only contain KRaft controller listeners from \
                     controller.listener.names when process.roles=controller",
                ));
            }
            if controller_listeners.is_empty() {
                return Err(rejected(
                    "controller.listener.names",
                    "controller.listener.names must contain at least one value appearing in the \
                     'listeners' configuration when running the KRaft controller role",
                ));
            }
            if !controller_names
                .iter()
                .all(|n| listeners.iter().any(|e| &e.name == n))
            {
                return Err(rejected(
                    "controller.listener.names",
                    "controller.listener.names must only contain values appearing in the \
                     'listeners' configuration when running the KRaft controller role",
                ));
            }
        } else {
            if voters.iter().any(|v| v.id == raw.node_id) {
                let ids: Vec<String> = voters.iter().map(|v| v.id.to_string()).collect();
                return Err(rejected(
                    "controller.quorum.voters",
                    format!(
                        "If process.roles contains just the 'broker' role, the node id {} must \
                         not be included in the set of voters controller.quorum.voters=Set({})",
                        raw.node_id,
                        ids.join(", ")
                    ),
                ));
            }
            if controller_names.is_empty() {
                return Err(rejected(
                    "controller.listener.names",
                    "controller.listener.names must contain at least one value when running \
                     KRaft with just the broker role",
                ));
            }
            if !controller_listeners.is_empty() {
                return Err(rejected(
                    "controller.listener.names",
                    "controller.listener.names must not contain a value appearing in the \
                     'listeners' configuration when running KRaft with just the broker role",
                ));
            }
            for name in &controller_names {
                if !protocols.iter().any(|(n, _)| n == name) {
                    return Err(rejected(
                        "controller.listener.names",
                        format!(
                            "Controller listener with name {name} defined in \
                             controller.listener.names not found in \
                             listener.security.protocol.map (an explicit security mapping for \
                             each controller listener is required if \
                             listener.security.protocol.map is non-empty, or if there are \
                             security protocols other than PLAINTEXT in use)"
                        ),
                    ));
                }
            }
        }
    }

    let advertised_broker: Vec<Endpoint> = advertised
        .iter()
        .filter(|e| !is_controller_listener(e))
        .cloned()
        .collect();
    let inter_broker = match raw.inter_broker_listener_name.trim() {
        "" => "PLAINTEXT".to_owned(),
        name => {
            let name = name.to_ascii_uppercase();
            if !protocols.iter().any(|(n, _)| *n == name) {
                return Err(rejected(
                    "inter.broker.listener.name",
                    format!(
                        "Listener with name {name} defined in inter.broker.listener.name not \
                         found in listener.security.protocol.map."
                    ),
                ));
            }
            name
        }
    };
    if roles.broker {
        // Kafka 3.0-3.8: clients only talk to brokers, so a broker never advertises the
        // controller listener to them.
        if !raw.advertised_listeners.trim().is_empty()
            && advertised.iter().any(is_controller_listener)
        {
            return Err(rejected(
                "advertised.listeners",
                "The advertised.listeners config must not contain KRaft controller listeners \
                 from controller.listener.names when process.roles contains the broker role \
                 because Kafka clients that send requests via advertised listeners do not send \
                 requests to KRaft controllers -- they only send requests to KRaft brokers.",
            ));
        }
        if advertised_broker.is_empty() {
            return Err(rejected(
                "advertised.listeners",
                "There must be at least one broker advertised listener. Perhaps all listeners \
                 appear in controller.listener.names?",
            ));
        }
        let names = |v: &[Endpoint]| v.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
        if !advertised_broker.iter().any(|e| e.name == inter_broker) {
            return Err(rejected(
                "inter.broker.listener.name",
                format!(
                    "inter.broker.listener.name must be a listener name defined in \
                     advertised.listeners. The valid options based on currently configured \
                     listeners are {}",
                    names(&advertised_broker).join(",")
                ),
            ));
        }
        if !advertised_broker
            .iter()
            .all(|a| listeners.iter().any(|l| l.name == a.name))
        {
            return Err(rejected(
                "advertised.listeners",
                format!(
                    "advertised.listeners listener names must be equal to or a subset of the \
                     ones defined in listeners. Found {}. The valid options based on the current \
                     configuration are {}",
                    names(&advertised_broker).join(","),
                    names(&listeners).join(",")
                ),
            ));
        }
    }
    if !raw.advertised_listeners.trim().is_empty() && advertised.iter().any(|e| e.host == "0.0.0.0")
    {
        return Err(rejected(
            "advertised.listeners",
            "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a \
             routable IP address.",
        ));
    }
    Ok(ClusterKeys {
        process_roles: roles,
        listeners,
        advertised_broker_listeners: advertised_broker,
        controller_listener_names: controller_names,
        inter_broker_listener_name: inter_broker,
        listener_protocols: protocols,
        quorum_voters: voters,
        quorum_bootstrap_servers: bootstrap,
        standalone,
    })
}

#[cfg(test)]
mod tests;
