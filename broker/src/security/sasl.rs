//! SASL on a connection (Kafka's `SaslServerAuthenticator`), sans-IO: what a connection of
//! a SASL listener may send before it has authenticated, the mechanisms, and
//! re-authentication (KIP-368).
//!
//! The exchange, as Kafka runs it:
//! 1. ApiVersions, any number of times (the client learns the SASL versions).
//! 2. SaslHandshake names a mechanism. One the listener does not offer is answered
//!    UNSUPPORTED_SASL_MECHANISM, with the list it does, and the connection closes.
//! 3. v1 of the handshake: SaslAuthenticate requests carry the mechanism's tokens. v0: the
//!    tokens follow as bare size-prefixed frames, with no request header (the old
//!    clients' way).
//! 4. A failure is answered SASL_AUTHENTICATION_FAILED (v0 tokens: nothing), and the
//!    connection closes. Any other request before the end closes it too.
//!
//! With `connections.max.reauth.ms` set, SaslAuthenticate v1+ tells the client how long its
//! session lasts; a client that sends anything but a new handshake after that is cut off,
//! and a re-authentication must be as the same principal.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_kraft::scram::ScramCredential;

use super::scram::{self, ScramMechanism, ScramServer};

/// A SASL mechanism Strata serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    /// OAUTHBEARER (`security::oauth`).
    OAuthBearer,
}

impl Mechanism {
    /// The mechanism of a SASL name, if served.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "SCRAM-SHA-256" => Some(Mechanism::Scram(ScramMechanism::Sha256)),
            "SCRAM-SHA-512" => Some(Mechanism::Scram(ScramMechanism::Sha512)),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            _ => None,
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// A SASL listener's settings.
#[derive(Debug, Clone)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, in the order given.
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords, from the `user_<name>` options of
    /// `listener.name.<l>.plain.sasl.jaas.config`.
    pub plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms`; 0 means sessions never expire.
    pub max_reauth_ms: i64,
    /// OAUTHBEARER's validator, when the listener offers it.
    pub oauth: Option<super::oauth::Validator>,
}

/// A request's place in the exchange, as the connection sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Serve it as usual.
    Serve,
    /// A SASL request: the authenticator answers it.
    Sasl,
    /// Not allowed now: close the connection.
    Close(&'static str),
}

/// What SaslHandshake decided.
#[derive(Debug, PartialEq, Eq)]
pub struct HandshakeOutcome {
    /// The response's error code (0 or UNSUPPORTED_SASL_MECHANISM or ILLEGAL_SASL_STATE).
    pub error_code: i16,
    /// The mechanisms offered, for the response.
    pub mechanisms: Vec<&'static str>,
    /// Close once the response is out.
    pub close: bool,
}

/// What one token did.
#[derive(Debug, PartialEq, Eq)]
pub enum TokenOutcome {
    /// The exchange goes on: send this challenge.
    Challenge(Vec<u8>),
    /// Authenticated: send this last token; the session lasts `session_lifetime_ms` (0:
    /// for ever).
    Authenticated {
        reply: Vec<u8>,
        session_lifetime_ms: i64,
    },
    /// Refused: answer with this message, then close.
    Failed(String),
    /// SaslAuthenticate on a connection that is not authenticating (it has authenticated and
    /// has not begun a re-authentication): ILLEGAL_SASL_STATE with this message, and the
    /// connection stays open, as Kafka's `KafkaApis` answers it.
    OutOfPlace(String),
}

enum State {
    /// Before a handshake: ApiVersions or SaslHandshake.
    Handshake,
    /// After a handshake: the mechanism's tokens.
    Authenticating {
        mechanism: Mechanism,
        exchange: Exchange,
    },
    /// Authenticated.
    Done,
}

enum Exchange {
    Plain,
    Scram(ScramServer),
    /// The error challenge sent for a refused token (RFC 7628 §3.2.2), awaiting the
    /// client's `%x01`.
    OAuthBearer {
        refused: Option<String>,
    },
}

/// The authentication state of one connection of a SASL listener.
pub struct Authenticator {
    settings: Arc<SaslSettings>,
    state: State,
    /// Whether the tokens come as bare frames (SaslHandshake v0).
    raw_tokens: bool,
    /// The authenticated principal, once known.
    principal: Option<String>,
    /// When the session expires (`now_ms` clock), if it does.
    expires_at_ms: Option<i64>,
}

impl Authenticator {
    #[must_use]
    pub fn new(settings: Arc<SaslSettings>) -> Self {
        Authenticator {
            settings,
            state: State::Handshake,
            raw_tokens: false,
            principal: None,
            expires_at_ms: None,
        }
    }

    /// The authenticated principal (`User:<name>`), once authenticated.
    #[must_use]
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// Whether the next frame is a bare token (after SaslHandshake v0).
    #[must_use]
    pub fn expects_raw_token(&self) -> bool {
        self.raw_tokens && matches!(self.state, State::Authenticating { .. })
    }

    /// Whether a request of `api` may be served now.
    #[must_use]
    pub fn gate(&self, api: strata_protocol::messages::ApiKey, now_ms: i64) -> Gate {
        use strata_protocol::messages::ApiKey;
        match (&self.state, api) {
            (_, ApiKey::SaslHandshake) => Gate::Sasl,
            (State::Authenticating { .. }, ApiKey::SaslAuthenticate) => Gate::Sasl,
            (State::Handshake, ApiKey::ApiVersions) if self.principal.is_none() => Gate::Serve,
            (State::Handshake, _) if self.principal.is_none() => Gate::Close(
                "a request other than ApiVersions or SaslHandshake before authentication",
            ),
            (State::Authenticating { .. }, _) => {
                Gate::Close("a request other than SaslAuthenticate during SASL authentication")
            }
            (_, ApiKey::SaslAuthenticate) => Gate::Sasl, // TokenOutcome::OutOfPlace
            _ if self.expires_at_ms.is_some_and(|t| now_ms >= t) => {
                Gate::Close("the SASL session expired and the client did not re-authenticate")
            }
            _ => Gate::Serve,
        }
    }

    /// SaslHandshake: choose `mechanism`.
    pub fn handshake(&mut self, version: i16, mechanism: &str) -> HandshakeOutcome {
        let offered: Vec<&'static str> =
            self.settings.mechanisms.iter().map(|m| m.name()).collect();
        if matches!(self.state, State::Authenticating { .. }) {
            return HandshakeOutcome {
                error_code: strata_protocol::ResponseError::IllegalSaslState.code(),
                mechanisms: offered,
                close: true,
            };
        }
        // A re-authentication (KIP-368) needs the v1 handshake.
        if self.principal.is_some() && version < 1 {
            return HandshakeOutcome {
                error_code: strata_protocol::ResponseError::IllegalSaslState.code(),
                mechanisms: offered,
                close: true,
            };
        }
        let chosen =
            Mechanism::from_name(mechanism).filter(|m| self.settings.mechanisms.contains(m));
        let Some(m) = chosen else {
            return HandshakeOutcome {
                error_code: strata_protocol::ResponseError::UnsupportedSaslMechanism.code(),
                mechanisms: offered,
                close: true,
            };
        };
        self.raw_tokens = version == 0;
        self.state = State::Authenticating {
            mechanism: m,
            exchange: match m {
                Mechanism::Plain => Exchange::Plain,
                Mechanism::Scram(s) => Exchange::Scram(ScramServer::new(s)),
                Mechanism::OAuthBearer => Exchange::OAuthBearer { refused: None },
            },
        };
        HandshakeOutcome {
            error_code: 0,
            mechanisms: offered,
            close: false,
        }
    }

    /// One token of the exchange. `scram_credential` looks a user's credential up in the
    /// metadata image.
    pub fn token(
        &mut self,
        token: &[u8],
        now_ms: i64,
        scram_credential: impl FnOnce(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> TokenOutcome {
        let State::Authenticating {
            mechanism,
            exchange,
        } = &mut self.state
        else {
            return TokenOutcome::OutOfPlace(
                "SaslAuthenticate request received after successful authentication".into(),
            );
        };
        let mechanism = *mechanism;
        // A token's expiry bounds the session (KIP-368), when sessions are bounded at all.
        let mut token_expires_at_ms = None;
        let (reply, user) = match exchange {
            Exchange::OAuthBearer { refused } => {
                // RFC 7628 §3.2.2, as Kafka's OAuthBearerSaslServer: a refused token is
                // answered with a JSON error as a challenge; the client's `%x01` then ends
                // the exchange with that error. Anything else is a new attempt.
                if let Some(error) = refused.take()
                    && token == [0x01]
                {
                    return TokenOutcome::Failed(error);
                }
                let validated = self
                    .settings
                    .oauth
                    .as_ref()
                    .ok_or_else(|| "the listener has no OAUTHBEARER validator".to_owned())
                    .and_then(|v| v.validate(token, now_ms));
                match validated {
                    Ok(valid) => {
                        token_expires_at_ms = Some(valid.expires_at_ms);
                        (Vec::new(), valid.name)
                    }
                    Err(why) => {
                        tracing::info!(mechanism = "OAUTHBEARER", reason = %why, "SASL authentication failed");
                        let error = r#"{"status":"invalid_token"}"#;
                        *refused = Some(error.to_owned());
                        return TokenOutcome::Challenge(error.as_bytes().to_vec());
                    }
                }
            }
            Exchange::Plain => match plain(token, &self.settings.plain_users) {
                Ok(user) => (Vec::new(), user),
                Err(why) => {
                    tracing::info!(
                        mechanism = "PLAIN",
                        reason = why,
                        "SASL authentication failed"
                    );
                    return TokenOutcome::Failed(format!(
                        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                        mechanism.name()
                    ));
                }
            },
            Exchange::Scram(server) => {
                match server.step(token, &scram::server_nonce(), scram_credential) {
                    Ok(scram::Step::Challenge(c)) => return TokenOutcome::Challenge(c),
                    Ok(scram::Step::Done { reply, user }) => (reply, user),
                    Err(e) => {
                        tracing::info!(mechanism = mechanism.name(), reason = %e, "SASL authentication failed");
                        return TokenOutcome::Failed(scram::ScramFailure::CLIENT_MESSAGE.into());
                    }
                }
            }
        };
        let principal = super::principal::user(&user);
        if let Some(before) = &self.principal
            && *before != principal
        {
            return TokenOutcome::Failed(format!(
                "Cannot change principals during re-authentication from {before}: {principal}"
            ));
        }
        self.principal = Some(principal);
        self.state = State::Done;
        self.raw_tokens = false;
        let mut lifetime = self.settings.max_reauth_ms;
        if lifetime > 0
            && let Some(exp) = token_expires_at_ms
        {
            lifetime = lifetime.min(exp.saturating_sub(now_ms).max(1));
        }
        self.expires_at_ms = (lifetime > 0).then(|| now_ms.saturating_add(lifetime));
        TokenOutcome::Authenticated {
            reply,
            session_lifetime_ms: lifetime.max(0),
        }
    }
}

/// PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`, checked against the JAAS users.
/// The authorization id, when given, must be the user (Kafka's `PlainSaslServer`).
fn plain(token: &[u8], users: &BTreeMap<String, String>) -> Result<String, &'static str> {
    let text = std::str::from_utf8(token).map_err(|_| "not UTF-8")?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not three NUL-separated fields");
    };
    if user.is_empty() {
        return Err("empty user name");
    }
    if password.is_empty() {
        return Err("empty password");
    }
    if !authzid.is_empty() && authzid != user {
        return Err("authorization id is not the user");
    }
    match users.get(user) {
        Some(expected) if scram::constant_time_eq(expected.as_bytes(), password.as_bytes()) => {
            Ok(user.to_owned())
        }
        _ => Err("unknown user or wrong password"),
    }
}

#[cfg(test)]
mod tests {
    use strata_protocol::messages::ApiKey;

    use super::*;

    fn settings(reauth: i64) -> Arc<SaslSettings> {
        Arc::new(SaslSettings {
            mechanisms: vec![Mechanism::Plain, Mechanism::Scram(ScramMechanism::Sha512)],
            plain_users: [("alice".to_owned(), "pw".to_owned())].into(),
            max_reauth_ms: reauth,
            oauth: None,
        })
    }

    #[test]
    fn only_api_versions_and_handshake_come_before_authentication() {
        let mut a = Authenticator::new(settings(0));
        assert_eq!(a.gate(ApiKey::ApiVersions, 0), Gate::Serve);
        assert!(matches!(a.gate(ApiKey::Metadata, 0), Gate::Close(_)));
        assert!(matches!(a.gate(ApiKey::Produce, 0), Gate::Close(_)));
        assert_eq!(a.gate(ApiKey::SaslHandshake, 0), Gate::Sasl);
        let h = a.handshake(1, "PLAIN");
        assert_eq!((h.error_code, h.close), (0, false));
        assert_eq!(h.mechanisms, vec!["PLAIN", "SCRAM-SHA-512"]);
        assert!(matches!(a.gate(ApiKey::ApiVersions, 0), Gate::Close(_)));
        assert_eq!(a.gate(ApiKey::SaslAuthenticate, 0), Gate::Sasl);
        assert!(matches!(
            a.token(b"\0alice\0pw", 0, |_, _| None),
            TokenOutcome::Authenticated { .. }
        ));
        assert_eq!(a.principal(), Some("User:alice"));
        assert_eq!(a.gate(ApiKey::Metadata, 0), Gate::Serve);
        // After authentication, SaslAuthenticate is ILLEGAL_SASL_STATE, and the session
        // goes on.
        assert_eq!(a.gate(ApiKey::SaslAuthenticate, 0), Gate::Sasl);
        assert!(matches!(
            a.token(b"x", 0, |_, _| None),
            TokenOutcome::OutOfPlace(_)
        ));
        assert_eq!(a.principal(), Some("User:alice"));
        assert_eq!(a.gate(ApiKey::Metadata, 0), Gate::Serve);
    }

    #[test]
    fn refusals() {
        let mut a = Authenticator::new(settings(0));
        let h = a.handshake(1, "GSSAPI");
        assert_eq!(
            h.error_code,
            strata_protocol::ResponseError::UnsupportedSaslMechanism.code()
        );
        assert!(h.close);
        let mut a = Authenticator::new(settings(0));
        a.handshake(1, "PLAIN");
        assert!(matches!(
            a.token(b"\0alice\0nope", 0, |_, _| None),
            TokenOutcome::Failed(_)
        ));
        for bad in [
            &b"alice\0pw"[..],
            b"\0\0pw",
            b"\0alice\0",
            b"bob\0alice\0pw",
            b"\xff\0a\0b",
            b"\0alice\0pw\0x",
        ] {
            let mut a = Authenticator::new(settings(0));
            a.handshake(1, "PLAIN");
            assert!(
                matches!(a.token(bad, 0, |_, _| None), TokenOutcome::Failed(_)),
                "{bad:?}"
            );
        }
        // The authzid may equal the user.
        let mut a = Authenticator::new(settings(0));
        a.handshake(0, "PLAIN");
        assert!(a.expects_raw_token());
        assert!(matches!(
            a.token(b"alice\0alice\0pw", 0, |_, _| None),
            TokenOutcome::Authenticated { .. }
        ));
        assert!(!a.expects_raw_token());
    }

    #[test]
    fn sessions_expire_and_reauthenticate_as_the_same_principal() {
        let mut a = Authenticator::new(settings(1000));
        a.handshake(1, "PLAIN");
        let TokenOutcome::Authenticated {
            session_lifetime_ms,
            ..
        } = a.token(b"\0alice\0pw", 5, |_, _| None)
        else {
            panic!()
        };
        assert_eq!(session_lifetime_ms, 1000);
        assert_eq!(a.gate(ApiKey::Fetch, 1004), Gate::Serve);
        assert!(matches!(a.gate(ApiKey::Fetch, 1005), Gate::Close(_)));
        // Re-authentication: v0 refused, v1 accepted, as the same user.
        assert!(a.handshake(0, "PLAIN").close);
        let mut a = Authenticator::new(Arc::new(SaslSettings {
            plain_users: [
                ("alice".to_owned(), "pw".to_owned()),
                ("bob".to_owned(), "pw".to_owned()),
            ]
            .into(),
            ..(*settings(1000)).clone()
        }));
        a.handshake(1, "PLAIN");
        a.token(b"\0alice\0pw", 0, |_, _| None);
        assert_eq!(a.handshake(1, "PLAIN").error_code, 0);
        assert!(matches!(
            a.token(b"\0alice\0pw", 2000, |_, _| None),
            TokenOutcome::Authenticated { .. }
        ));
        assert_eq!(a.gate(ApiKey::Fetch, 2999), Gate::Serve);
        a.handshake(1, "PLAIN");
        assert!(matches!(
            a.token(b"\0bob\0pw", 3000, |_, _| None),
            TokenOutcome::Failed(_)
        ));
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever a client sends, in whatever order, the authenticator answers without
        /// panicking, and only a real proof authenticates.
        #[test]
        fn arbitrary_tokens_never_panic_or_authenticate(
            mech in 0usize..4,
            v0 in any::<bool>(),
            tokens in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..4),
        ) {
            let m = ScramMechanism::Sha512;
            let cred = m.credential(&m.salted_password(b"pw", b"salt", 4096), b"salt", 4096);
            let mut a = Authenticator::new(Arc::new(SaslSettings {
                mechanisms: vec![Mechanism::Plain, Mechanism::Scram(ScramMechanism::Sha256), Mechanism::Scram(m)],
                plain_users: [("alice".to_owned(), "pw".to_owned())].into(),
                max_reauth_ms: 0,
            oauth: None,
            }));
            a.handshake(i16::from(!v0), ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OTHER"][mech]);
            for t in &tokens {
                let c = cred.clone();
                if let TokenOutcome::Authenticated { .. } = a.token(t, 0, move |_, _| Some(c)) {
                    // Only PLAIN's exact token can get here with random bytes.
                    prop_assert!(t.ends_with(b"\0alice\0pw"));
                }
            }
        }
    }
}
