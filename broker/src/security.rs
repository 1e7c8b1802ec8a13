//! Security at the connection (ARCHITECTURE.md decision 13): each listener's TLS and SASL
//! settings, made once at start from Kafka's keys, and the principal each connection
//! carries into every authorization check (`server::authorization`).
//!
//! | protocol | TLS | SASL | principal |
//! |---|---|---|---|
//! | PLAINTEXT | | | `User:ANONYMOUS` |
//! | SSL | yes | | the client certificate's name (mapped by `ssl.principal.mapping.rules`), else `User:ANONYMOUS` |
//! | SASL_PLAINTEXT | | yes | `User:<the authenticated user>` |
//! | SASL_SSL | yes | yes | `User:<the authenticated user>` |
//!
//! The listener's keys are read with its `listener.name.<l>.` prefix first
//! ([`crate::config::BrokerConfig::listener_value`]).

pub mod jaas;
pub mod ktls;
pub mod oauth;
pub mod peer;
pub mod principal;
pub mod sasl;
pub mod scram;
pub mod tls;

use std::sync::Arc;

use crate::config::{BrokerConfig, Endpoint, SecurityProtocol};

/// One listener's security, shared by its connections.
pub struct ListenerSecurity {
    /// The listener's protocol.
    pub protocol: SecurityProtocol,
    /// TLS, on SSL and SASL_SSL listeners.
    pub tls: Option<Arc<tls::ReloadingConfig>>,
    /// Whether a TLS client must present a certificate (`ssl.client.auth=required`).
    pub client_auth: tls::ClientAuth,
    /// SASL, on SASL_PLAINTEXT and SASL_SSL listeners.
    pub sasl: Option<Arc<sasl::SaslSettings>>,
    /// `ssl.principal.mapping.rules`.
    pub ssl_principal: principal::SslPrincipalMapper,
}

impl ListenerSecurity {
    /// A PLAINTEXT listener's (and the one tests use for connections with no listener).
    #[must_use]
    pub fn plaintext() -> Self {
        ListenerSecurity {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            client_auth: tls::ClientAuth::None,
            sasl: None,
            ssl_principal: principal::SslPrincipalMapper::parse("DEFAULT").expect("DEFAULT parses"),
        }
    }

    /// Reads the listener's settings.
    ///
    /// # Errors
    ///
    /// A key does not parse, a store cannot be read, or a SASL listener offers no mechanism
    /// Strata serves.
    pub fn for_listener(config: &BrokerConfig, endpoint: &Endpoint) -> anyhow::Result<Self> {
        let name = endpoint.name.as_str();
        let protocol = endpoint.security_protocol;
        let mut client_auth = tls::ClientAuth::None;
        let tls = if protocol.uses_tls() {
            let settings = tls::TlsSettings::from_config(config, name)?;
            client_auth = settings.client_auth;
            Some(tls::ReloadingConfig::new(settings)?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(Arc::new(sasl_settings(config, name)?))
        } else {
            None
        };
        let rules = config
            .listener_value(name, "ssl.principal.mapping.rules")
            .unwrap_or("DEFAULT");
        let ssl_principal = principal::SslPrincipalMapper::parse(rules)
            .map_err(|e| anyhow::anyhow!("ssl.principal.mapping.rules: {e}"))?;
        Ok(ListenerSecurity {
            protocol,
            tls,
            client_auth,
            sasl,
            ssl_principal,
        })
    }

    /// The principal of a TLS client that presented `cert` (DER), before any SASL: its
    /// mapped name, or `None` when no mapping rule matches (the connection is refused, as
    /// Kafka refuses it).
    #[must_use]
    pub fn certificate_principal(&self, cert: &[u8]) -> Option<String> {
        let dn = principal::subject_dn(cert)?;
        self.ssl_principal.map(&dn).map(|n| principal::user(&n))
    }
}

/// The PLAIN users and passwords of SASL listener `listener` (none when it does not offer
/// PLAIN): the console checks HTTP basic credentials against them.
///
/// # Errors
///
/// As the listener's own settings fail.
pub fn plain_users(
    config: &BrokerConfig,
    listener: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    Ok(sasl_settings(config, listener)?.plain_users)
}

/// A SASL listener's mechanisms and users.
fn sasl_settings(config: &BrokerConfig, listener: &str) -> anyhow::Result<sasl::SaslSettings> {
    let enabled = config
        .listener_value(listener, "sasl.enabled.mechanisms")
        .unwrap_or("GSSAPI");
    let mut mechanisms = Vec::new();
    for name in enabled.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match sasl::Mechanism::from_name(name) {
            Some(m) => mechanisms.push(m),
            None => tracing::warn!(
                listener,
                mechanism = name,
                "sasl.enabled.mechanisms: not served by Strata, left out"
            ),
        }
    }
    if mechanisms.is_empty() {
        anyhow::bail!(
            "listener {listener}: sasl.enabled.mechanisms ({enabled}) names no mechanism Strata serves (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)"
        );
    }
    let mut plain_users = std::collections::BTreeMap::new();
    if mechanisms.contains(&sasl::Mechanism::Plain) {
        let jaas = config
            .listener_value(listener, "plain.sasl.jaas.config")
            .or_else(|| config.listener_value(listener, "sasl.jaas.config"))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "listener {listener}: PLAIN needs {} with the users (user_<name>=\"<password>\")",
                    crate::config::listener_key(listener, "plain.sasl.jaas.config")
                )
            })?;
        let entry = jaas::parse(jaas).map_err(|e| {
            anyhow::anyhow!(
                "{}: {e}",
                crate::config::listener_key(listener, "plain.sasl.jaas.config")
            )
        })?;
        for (k, v) in &entry.options {
            if let Some(user) = k.strip_prefix("user_") {
                plain_users.insert(user.to_owned(), v.clone());
            }
        }
    }
    let max_reauth_ms = config
        .listener_value(listener, "connections.max.reauth.ms")
        .unwrap_or("0")
        .parse::<i64>()
        .map_err(|_| anyhow::anyhow!("connections.max.reauth.ms is not a number"))?;
    let oauth = if mechanisms.contains(&sasl::Mechanism::OAuthBearer) {
        Some(oauth::Validator::for_listener(config, listener)?)
    } else {
        None
    };
    Ok(sasl::SaslSettings {
        mechanisms,
        plain_users,
        max_reauth_ms,
        oauth,
    })
}
