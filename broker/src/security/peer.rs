//! What this node presents when it connects to another node, as Kafka's inter-broker and
//! controller clients do: the route's listener decides the protocol, its `ssl.*` keys the
//! TLS (its truststore verifies the peer, its keystore answers `ssl.client.auth`), and its
//! JAAS entry's `username` and `password` the SASL login, with the mechanism of
//! `sasl.mechanism.inter.broker.protocol` or `sasl.mechanism.controller.protocol`.
//!
//! | route | listener | mechanism key |
//! |---|---|---|
//! | the replica fetcher, transaction markers and verification | `inter.broker.listener.name` | `sasl.mechanism.inter.broker.protocol` |
//! | the quorum, the broker's controller client, forwarding | the first of `controller.listener.names` | `sasl.mechanism.controller.protocol` |
//!
//! Made once at start; the exchange itself is `peer_client`'s.

use std::sync::Arc;

use crate::config::{BrokerConfig, SecurityProtocol};
use crate::security::jaas;
use crate::security::scram::{ScramClient, ScramMechanism};

/// A SASL mechanism this node can log in to another node with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginMechanism {
    Plain,
    Scram(ScramMechanism),
}

impl LoginMechanism {
    /// The SASL mechanism name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            LoginMechanism::Plain => "PLAIN",
            LoginMechanism::Scram(m) => m.name(),
        }
    }
}

/// The SASL login of a route.
#[derive(Clone)]
pub struct Login {
    pub mechanism: LoginMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Login {
    /// The exchange of SaslAuthenticate tokens that logs in (sans-IO: the async peer client
    /// and the blocking one both drive it).
    #[must_use]
    pub fn exchange(&self) -> LoginExchange {
        LoginExchange {
            step: match self.mechanism {
                LoginMechanism::Plain => {
                    LoginStep::Plain(format!("\0{}\0{}", self.username, self.password).into_bytes())
                }
                LoginMechanism::Scram(m) => LoginStep::ScramFirst(ScramClient::new(
                    m,
                    &self.username,
                    &self.password,
                    crate::security::scram::server_nonce(),
                )),
            },
        }
    }
}

/// The client side of a login, token by token.
pub struct LoginExchange {
    step: LoginStep,
}

enum LoginStep {
    Plain(Vec<u8>),
    ScramFirst(ScramClient),
    ScramFinal(ScramClient),
    ScramVerify(ScramClient),
    Done,
}

impl LoginExchange {
    /// The next token to send, given the server's answer to the last one (`None` before the
    /// first); `None` once the login is complete.
    ///
    /// # Errors
    ///
    /// The server's SCRAM messages are malformed or its signature is wrong.
    pub fn next(&mut self, answer: Option<&[u8]>) -> Result<Option<Vec<u8>>, String> {
        match (std::mem::replace(&mut self.step, LoginStep::Done), answer) {
            (LoginStep::Plain(token), None) => Ok(Some(token)),
            (LoginStep::ScramFirst(client), None) => {
                let first = client.first();
                self.step = LoginStep::ScramFinal(client);
                Ok(Some(first))
            }
            (LoginStep::ScramFinal(mut client), Some(server_first)) => {
                let last = client
                    .respond(server_first)
                    .map_err(|e| format!("SCRAM: {e}"))?;
                self.step = LoginStep::ScramVerify(client);
                Ok(Some(last))
            }
            (LoginStep::ScramVerify(client), Some(server_final)) => client
                .verify(server_final)
                .map(|()| None)
                .map_err(|e| format!("SCRAM server: {e}")),
            (_, _) => Ok(None),
        }
    }
}

/// How this node connects to the nodes of one route.
#[derive(Clone)]
pub struct PeerSecurity {
    /// The route's listener, for logs.
    pub listener: String,
    /// Its protocol.
    pub protocol: SecurityProtocol,
    /// TLS, on SSL and SASL_SSL.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// SASL, on SASL_PLAINTEXT and SASL_SSL.
    pub login: Option<Login>,
}

impl std::fmt::Debug for PeerSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerSecurity")
            .field("listener", &self.listener)
            .field("protocol", &self.protocol)
            .field("tls", &self.tls.is_some())
            .field("login", &self.login)
            .finish()
    }
}

/// How this node secures its connections to other nodes, made once at start.
#[derive(Debug, Clone)]
pub struct PeerRoutes {
    /// To the controllers: the quorum's voters, the broker's controller client, forwarding
    /// to a dedicated controller.
    pub controller: Arc<PeerSecurity>,
    /// To the other brokers: the replica fetcher, transaction markers and verification,
    /// forwarding to a combined controller.
    pub inter_broker: Arc<PeerSecurity>,
}

impl PeerRoutes {
    /// Both routes of `config`.
    ///
    /// # Errors
    ///
    /// See [`PeerSecurity::for_route`].
    pub fn from_config(config: &BrokerConfig) -> anyhow::Result<PeerRoutes> {
        Ok(PeerRoutes {
            controller: PeerSecurity::controller(config)?,
            inter_broker: PeerSecurity::inter_broker(config)?,
        })
    }
}

impl PeerSecurity {
    /// A PLAINTEXT route.
    #[must_use]
    pub fn plaintext() -> Arc<PeerSecurity> {
        Arc::new(PeerSecurity {
            listener: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            login: None,
        })
    }

    /// The route to the controllers.
    ///
    /// # Errors
    ///
    /// See [`PeerSecurity::for_route`].
    pub fn controller(config: &BrokerConfig) -> anyhow::Result<Arc<PeerSecurity>> {
        match config.controller_listener_names.first() {
            Some(listener) => {
                Self::for_route(config, listener, "sasl.mechanism.controller.protocol")
            }
            None => Ok(Self::plaintext()),
        }
    }

    /// The route to the other brokers.
    ///
    /// # Errors
    ///
    /// See [`PeerSecurity::for_route`].
    pub fn inter_broker(config: &BrokerConfig) -> anyhow::Result<Arc<PeerSecurity>> {
        Self::for_route(
            config,
            &config.inter_broker_listener_name,
            "sasl.mechanism.inter.broker.protocol",
        )
    }

    /// The route whose listener is `listener`, its SASL mechanism named by `mechanism_key`.
    ///
    /// # Errors
    ///
    /// The listener's TLS keys do not make a client configuration (no truststore, a store
    /// that cannot be read), the mechanism is not one Strata can log in with (Kafka's
    /// default, GSSAPI, among them), or the listener's JAAS entry has no `username` and
    /// `password`.
    pub fn for_route(
        config: &BrokerConfig,
        listener: &str,
        mechanism_key: &str,
    ) -> anyhow::Result<Arc<PeerSecurity>> {
        let protocol = config
            .listener_protocols
            .iter()
            .find(|(n, _)| n == listener)
            .map_or(SecurityProtocol::Plaintext, |(_, p)| *p);
        let tls = if protocol.uses_tls() {
            let settings = super::tls::TlsSettings::from_config(config, listener)?;
            // Kafka's default is `https`: the peer's certificate must name the host.
            let verify_hostname = config
                .listener_value(listener, "ssl.endpoint.identification.algorithm")
                .is_some_and(|a| a.eq_ignore_ascii_case("https"))
                || !config
                    .listener_value_is_explicit(listener, "ssl.endpoint.identification.algorithm");
            Some(Arc::new(settings.client_config(verify_hostname)?))
        } else {
            None
        };
        let login = if protocol.uses_sasl() {
            Some(login(config, listener, mechanism_key)?)
        } else {
            None
        };
        Ok(Arc::new(PeerSecurity {
            listener: listener.to_owned(),
            protocol,
            tls,
            login,
        }))
    }
}

impl PeerSecurity {
    /// A command-line client's security, from Kafka's client properties (the tools'
    /// `--command-config` file): `security.protocol`, `sasl.mechanism`, `sasl.jaas.config`
    /// (its `username` and `password`), and the `ssl.*` keys (the truststore, a keystore
    /// for mutual TLS, `ssl.endpoint.identification.algorithm`). They are read by the same
    /// code as a node's route: the client is a route whose listener is `CLIENT`.
    ///
    /// # Errors
    ///
    /// An unknown protocol, a mechanism other than PLAIN and SCRAM, and what
    /// [`PeerSecurity::for_route`] refuses.
    pub fn for_client(properties: &[(String, String)]) -> anyhow::Result<Arc<PeerSecurity>> {
        let get = |key: &str| {
            properties
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let protocol = get("security.protocol").unwrap_or("PLAINTEXT");
        let protocol = SecurityProtocol::parse(protocol).ok_or_else(|| {
            anyhow::anyhow!(
                "security.protocol={protocol}: not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            )
        })?;
        let mechanism = get("sasl.mechanism").unwrap_or("GSSAPI");
        if protocol.uses_sasl()
            && !matches!(
                super::sasl::Mechanism::from_name(mechanism),
                Some(super::sasl::Mechanism::Plain | super::sasl::Mechanism::Scram(_))
            )
        {
            anyhow::bail!(
                "sasl.mechanism={mechanism}: strata admin logs in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served)"
            );
        }
        let mut pairs: Vec<(String, String)> = properties
            .iter()
            .filter(|(k, _)| k.starts_with("ssl.") || k == "sasl.jaas.config")
            .cloned()
            .collect();
        for (k, v) in [
            ("process.roles", "broker"),
            ("node.id", "1"),
            ("listeners", "CLIENT://127.0.0.1:0"),
            ("controller.listener.names", "CONTROLLER"),
            ("controller.quorum.voters", "2@127.0.0.1:1"),
            ("inter.broker.listener.name", "CLIENT"),
            ("sasl.mechanism.inter.broker.protocol", mechanism),
        ] {
            pairs.push((k.to_owned(), v.to_owned()));
        }
        pairs.push((
            "listener.security.protocol.map".to_owned(),
            format!("CLIENT:{},CONTROLLER:PLAINTEXT", protocol.name()),
        ));
        let config = BrokerConfig::from_pairs(pairs)?;
        Self::for_route(&config, "CLIENT", "sasl.mechanism.inter.broker.protocol")
    }
}

fn login(config: &BrokerConfig, listener: &str, mechanism_key: &str) -> anyhow::Result<Login> {
    let name = config
        .listener_value(listener, mechanism_key)
        .unwrap_or("GSSAPI");
    let mechanism = match super::sasl::Mechanism::from_name(name) {
        Some(super::sasl::Mechanism::Plain) => LoginMechanism::Plain,
        Some(super::sasl::Mechanism::Scram(m)) => LoginMechanism::Scram(m),
        _ => anyhow::bail!(
            "{mechanism_key}={name}: listener {listener} uses SASL, and Strata's nodes log in to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served)"
        ),
    };
    let key = format!("{}.sasl.jaas.config", name.to_ascii_lowercase());
    let jaas_key = crate::config::listener_key(listener, &key);
    let text = config
        .listener_value(listener, &key)
        .or_else(|| config.listener_value(listener, "sasl.jaas.config"))
        .ok_or_else(|| {
            anyhow::anyhow!("{jaas_key} must give the node's own username and password")
        })?;
    let entry = jaas::parse(text).map_err(|e| anyhow::anyhow!("{jaas_key}: {e}"))?;
    let (Some(username), Some(password)) =
        (entry.options.get("username"), entry.options.get("password"))
    else {
        anyhow::bail!(
            "{jaas_key}: the node logs in to other nodes with the entry's username and password options, and it has none"
        );
    };
    Ok(Login {
        mechanism,
        username: username.clone(),
        password: password.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let mut all = vec![
            ("listeners", "B://127.0.0.1:9092,C://127.0.0.1:9093"),
            ("advertised.listeners", "B://127.0.0.1:9092"),
            (
                "listener.security.protocol.map",
                "B:SASL_PLAINTEXT,C:SASL_PLAINTEXT",
            ),
            ("inter.broker.listener.name", "B"),
            ("controller.listener.names", "C"),
            ("process.roles", "broker,controller"),
            ("node.id", "1"),
            ("controller.quorum.voters", "1@127.0.0.1:9093"),
        ];
        all.extend_from_slice(pairs);
        BrokerConfig::from_pairs(
            all.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
        .unwrap()
    }

    const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required";

    #[test]
    fn each_route_logs_in_with_its_listener_s_entry_and_mechanism() {
        let c = config(&[
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
            ("sasl.mechanism.controller.protocol", "PLAIN"),
            (
                "listener.name.b.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"b-pw\";",
            ),
            (
                "listener.name.c.plain.sasl.jaas.config",
                &format!("{PLAIN} username=\"ctl\" password=\"c-pw\" user_ctl=\"c-pw\";"),
            ),
        ]);
        let b = PeerSecurity::inter_broker(&c).unwrap();
        let login = b.login.as_ref().unwrap();
        assert_eq!(
            (
                login.mechanism,
                login.username.as_str(),
                login.password.as_str()
            ),
            (
                LoginMechanism::Scram(ScramMechanism::Sha512),
                "broker",
                "b-pw"
            )
        );
        assert!(b.tls.is_none());
        let ctl = PeerSecurity::controller(&c).unwrap();
        let login = ctl.login.as_ref().unwrap();
        assert_eq!(
            (login.mechanism, login.username.as_str()),
            (LoginMechanism::Plain, "ctl")
        );
        // The password never reaches a log line.
        assert!(!format!("{ctl:?}").contains("c-pw"));
    }

    #[test]
    fn a_route_that_cannot_log_in_stops_the_node() {
        // Kafka's default mechanism, GSSAPI, is not served.
        let c = config(&[(
            "listener.name.c.plain.sasl.jaas.config",
            &format!("{PLAIN} username=\"ctl\" password=\"pw\";"),
        )]);
        let e = PeerSecurity::controller(&c).unwrap_err().to_string();
        assert!(
            e.contains("sasl.mechanism.controller.protocol=GSSAPI"),
            "{e}"
        );
        // An entry with users to serve but no login of its own.
        let c = config(&[
            ("sasl.mechanism.controller.protocol", "PLAIN"),
            (
                "listener.name.c.plain.sasl.jaas.config",
                &format!("{PLAIN} user_ctl=\"pw\";"),
            ),
        ]);
        let e = PeerSecurity::controller(&c).unwrap_err().to_string();
        assert!(e.contains("username and password"), "{e}");
        // No entry at all.
        let c = config(&[("sasl.mechanism.inter.broker.protocol", "PLAIN")]);
        let e = PeerSecurity::inter_broker(&c).unwrap_err().to_string();
        assert!(e.contains("listener.name.b.plain.sasl.jaas.config"), "{e}");
    }
}
