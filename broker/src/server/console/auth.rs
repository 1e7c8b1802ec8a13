//! Who is asking the console.
//!
//! With security on (an authorizer, or any SASL listener), every request must carry HTTP
//! basic credentials: a user of the cluster's SCRAM credentials (`strata admin users`,
//! Kafka's `kafka-configs.sh --alter --add-config SCRAM-SHA-256=...`) or a PLAIN user of a
//! SASL listener's JAAS configuration, with its password. The request then acts as
//! `User:<name>`, the principal the same user gets over SASL. Without credentials, or with
//! wrong ones, the answer is 401 and nothing is shown or done. With security off, a request
//! without credentials acts as `User:ANONYMOUS`, as a PLAINTEXT client does.
//!
//! A SCRAM check derives the salted password (thousands of HMAC rounds), so a verified
//! login is remembered for [`REMEMBER`], keyed by a digest of the user and password; a
//! changed credential is checked again once that has passed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::config::BrokerConfig;

/// How long a verified login is remembered.
const REMEMBER: Duration = Duration::from_secs(60);
/// The most logins remembered; beyond it the memory is cleared.
const REMEMBER_MAX: usize = 1024;

/// The principal of a request without credentials when security is off.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Why a request is not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No credentials, and security is on.
    Missing,
    /// Credentials that do not parse, or an unknown user or wrong password.
    Wrong,
}

/// Checks credentials.
pub struct Authenticator {
    required: bool,
    /// PLAIN users and passwords of every SASL listener that offers PLAIN.
    plain: BTreeMap<String, String>,
    /// Verified logins: digest of user and password, to the user and when it was verified.
    verified: Mutex<HashMap<Vec<u8>, (String, Instant)>>,
}

impl Authenticator {
    /// The authenticator of this node's configuration.
    ///
    /// # Errors
    ///
    /// A SASL listener's settings that do not parse (the listener itself would refuse to
    /// start too).
    pub fn for_node(config: &BrokerConfig) -> anyhow::Result<Self> {
        let mut plain = BTreeMap::new();
        let mut sasl = false;
        for endpoint in &config.listeners {
            if endpoint.security_protocol.uses_sasl() {
                sasl = true;
                plain.extend(crate::security::plain_users(config, &endpoint.name)?);
            }
        }
        Ok(Authenticator {
            required: sasl || config.authorizer.is_some(),
            plain,
            verified: Mutex::new(HashMap::new()),
        })
    }

    /// Whether requests must carry credentials.
    pub fn required(&self) -> bool {
        self.required
    }

    /// The principal of a request with `authorization` (the header's value, if any).
    ///
    /// # Errors
    ///
    /// [`Denied`] when the request may not go on.
    pub fn principal(
        &self,
        authorization: Option<&str>,
        scram: &strata_kraft::scram::ScramCredentials,
    ) -> Result<String, Denied> {
        let Some(value) = authorization else {
            return if self.required {
                Err(Denied::Missing)
            } else {
                Ok(ANONYMOUS.to_owned())
            };
        };
        let (user, password) = basic(value).ok_or(Denied::Wrong)?;
        let key = digest(&user, &password);
        if let Some((known, at)) = self.lock().get(&key)
            && at.elapsed() < REMEMBER
        {
            return Ok(format!("User:{known}"));
        }
        if !self.check(&user, &password, scram) {
            return Err(Denied::Wrong);
        }
        let mut verified = self.lock();
        if verified.len() >= REMEMBER_MAX {
            verified.clear();
        }
        verified.insert(key, (user.clone(), Instant::now()));
        Ok(format!("User:{user}"))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, (String, Instant)>> {
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `password` is `user`'s: a PLAIN user's, or any of its SCRAM credentials'.
    fn check(
        &self,
        user: &str,
        password: &str,
        scram: &strata_kraft::scram::ScramCredentials,
    ) -> bool {
        if let Some(expected) = self.plain.get(user)
            && crate::security::scram::constant_time_eq(expected.as_bytes(), password.as_bytes())
        {
            return true;
        }
        let Some(credentials) = scram.users.get(user) else {
            return false;
        };
        credentials.iter().any(|(&mechanism, c)| {
            let Ok(iterations) = u32::try_from(c.iterations) else {
                return false;
            };
            let salted = strata_kraft::scram::salted_password(
                mechanism,
                password.as_bytes(),
                &c.salt,
                iterations,
            );
            let (stored, _) = strata_kraft::scram::derive_keys(mechanism, &salted);
            crate::security::scram::constant_time_eq(&stored, &c.stored_key)
        })
    }
}

/// The user and password of a `Basic` authorization value.
fn basic(value: &str) -> Option<(String, String)> {
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    if user.is_empty() || password.is_empty() {
        return None;
    }
    Some((user.to_owned(), password.to_owned()))
}

fn digest(user: &str, password: &str) -> Vec<u8> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(user.as_bytes());
    ctx.update(&[0]);
    ctx.update(password.as_bytes());
    ctx.finish().as_ref().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_parse_as_browsers_send_them() {
        let v = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:s3cr:et")
        );
        assert_eq!(basic(&v), Some(("alice".into(), "s3cr:et".into())));
        assert_eq!(basic("Bearer abc"), None);
        assert_eq!(basic("Basic !!!"), None);
        let empty = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(":x")
        );
        assert_eq!(basic(&empty), None);
    }
}
