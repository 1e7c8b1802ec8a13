//! The server side of OAUTHBEARER (RFC 7628; KIP-255, KIP-768), sans-IO: the client's one
//! message carries a JWT, which is validated as Kafka's two validators do.
//!
//! - **Unsecured** (Kafka's default, `OAuthBearerUnsecuredValidatorCallbackHandler`, for
//!   development): the token's header says `"alg":"none"` and it has no signature; it must
//!   carry `exp` and the principal claim (`unsecuredValidatorPrincipalClaimName`, `sub`), and
//!   not have expired (give or take `unsecuredValidatorAllowableClockSkewMs`).
//! - **JWKS** (KIP-768's `OAuthBearerValidatorCallbackHandler`, chosen with
//!   `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`, or by setting
//!   `sasl.oauthbearer.jwks.endpoint.url`): a signature (RS256/384/512, PS256/384/512,
//!   ES256, ES384) by a key of the JSON Web Key Set (the `kid` picks it when given), `exp`
//!   in the future and `iat` not in it (give or take `sasl.oauthbearer.clock.skew.seconds`),
//!   one of `sasl.oauthbearer.expected.audience` in `aud` and
//!   `sasl.oauthbearer.expected.issuer` as `iss` when they are set, and the principal in
//!   `sasl.oauthbearer.sub.claim.name`.
//!
//! A `file://` key set is read at start. An `https://` (or `http://`) one is fetched at
//! start and again every `sasl.oauthbearer.jwks.endpoint.refresh.ms`, retried with
//! `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms` doubling up to `...backoff.max.ms`;
//! a token whose `kid` the set lacks asks for an early fetch (once a minute per `kid`, as
//! Kafka's `RefreshingHttpsJwks`), so a rotated key is served without waiting for the
//! period. A failed fetch keeps the keys already held. The server's certificate is checked
//! against `ssl.truststore.*` given in the listener's OAUTHBEARER JAAS options (Kafka's
//! `JaasOptionsUtils`), or else against the Mozilla roots built in.
//!
//! The principal is `User:<claim>`. A token's expiry bounds the session when
//! `connections.max.reauth.ms` is set (KIP-368), so a client re-authenticates with a fresh
//! token before its token runs out.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use serde_json::Value;

use crate::config::BrokerConfig;

/// Kafka's class name of the secured validator.
const JWKS_VALIDATOR: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";
/// Its older name (before Kafka 3.9).
const JWKS_VALIDATOR_OLD: &str =
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler";

/// How a listener validates tokens.
#[derive(Debug, Clone)]
pub enum Validator {
    /// `alg: none` tokens.
    Unsecured {
        principal_claim: String,
        skew_ms: i64,
    },
    /// Signed tokens, checked against a key set.
    Jwks {
        keys: Arc<KeySet>,
        audience: Vec<String>,
        issuer: Option<String>,
        principal_claim: String,
        skew_ms: i64,
    },
}

/// A public key of the key set.
#[derive(Clone)]
pub struct Jwk {
    kid: Option<String>,
    key: PublicKey,
}

#[derive(Clone)]
enum PublicKey {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point (`04 || x || y`) on P-256 or P-384.
    Ec {
        p384: bool,
        point: Vec<u8>,
    },
}

impl std::fmt::Debug for Jwk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.key {
            PublicKey::Rsa { n, .. } => format!("RSA {} bits", n.len() * 8),
            PublicKey::Ec { p384: false, .. } => "EC P-256".into(),
            PublicKey::Ec { p384: true, .. } => "EC P-384".into(),
        };
        f.debug_struct("Jwk")
            .field("kid", &self.kid)
            .field("key", &kind)
            .finish()
    }
}

impl Jwk {
    /// Whether this key verifies `signature` over `signed` with JWS algorithm `alg`.
    fn verifies(&self, alg: &str, signed: &[u8], signature: &[u8]) -> bool {
        use ring::signature as sig;
        match &self.key {
            PublicKey::Rsa { n, e } => {
                let params: &sig::RsaParameters = match alg {
                    "RS256" => &sig::RSA_PKCS1_2048_8192_SHA256,
                    "RS384" => &sig::RSA_PKCS1_2048_8192_SHA384,
                    "RS512" => &sig::RSA_PKCS1_2048_8192_SHA512,
                    "PS256" => &sig::RSA_PSS_2048_8192_SHA256,
                    "PS384" => &sig::RSA_PSS_2048_8192_SHA384,
                    "PS512" => &sig::RSA_PSS_2048_8192_SHA512,
                    _ => return false,
                };
                sig::RsaPublicKeyComponents { n, e }
                    .verify(params, signed, signature)
                    .is_ok()
            }
            PublicKey::Ec { p384, point } => {
                let params = match (alg, p384) {
                    ("ES256", false) => &sig::ECDSA_P256_SHA256_FIXED,
                    ("ES384", true) => &sig::ECDSA_P384_SHA384_FIXED,
                    _ => return false,
                };
                sig::UnparsedPublicKey::new(params, point)
                    .verify(signed, signature)
                    .is_ok()
            }
        }
    }
}

/// The algorithms a signed token may use (JWS, RFC 7518); `none` and the HMAC ones, whose
/// key would be a shared secret, are not among them.
const SIGNED_ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
];

/// A listener's key set: fixed for a `file://` URL, refreshed in the background for an
/// HTTP one.
#[derive(Debug)]
pub struct KeySet {
    url: String,
    keys: RwLock<Arc<Vec<Jwk>>>,
    /// Wakes the refresher early (a token named a `kid` the set lacks).
    wake: tokio::sync::Notify,
    /// When each missing `kid` last asked for an early fetch.
    missing: Mutex<HashMap<String, Instant>>,
}

/// How long a missing `kid` waits before it may ask for another early fetch (Kafka's
/// `MISSING_KEY_ID_CACHE_IN_FLIGHT_MS`), and how many such `kid`s are remembered.
const MISSING_KID_PAUSE: Duration = Duration::from_secs(60);
const MISSING_KIDS_KEPT: usize = 16;
/// The least time between two fetches that tokens asked for.
const EARLY_FETCH_SPACING: Duration = Duration::from_secs(1);

impl KeySet {
    fn new(url: String, keys: Vec<Jwk>) -> Arc<KeySet> {
        Arc::new(KeySet {
            url,
            keys: RwLock::new(Arc::new(keys)),
            wake: tokio::sync::Notify::new(),
            missing: Mutex::new(HashMap::new()),
        })
    }

    fn current(&self) -> Arc<Vec<Jwk>> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn replace(&self, keys: Vec<Jwk>) {
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
    }

    /// A token named `kid`, which the set lacks: ask for an early fetch, unless this `kid`
    /// asked within the last minute.
    fn missing_kid(&self, kid: &str) {
        if kid.len() > 1000 {
            return;
        }
        let now = Instant::now();
        let mut missing = self.missing.lock().unwrap_or_else(|e| e.into_inner());
        missing.retain(|_, at| now.duration_since(*at) < MISSING_KID_PAUSE);
        if missing.contains_key(kid) || missing.len() >= MISSING_KIDS_KEPT {
            return;
        }
        missing.insert(kid.to_owned(), now);
        self.wake.notify_one();
    }
}

/// Fetches a key set over HTTP(S).
struct Fetcher {
    agent: ureq::Agent,
    url: String,
}

/// The most a key set's document may weigh.
const JWKS_MAX_BYTES: u64 = 1 << 20;

impl Fetcher {
    fn new(url: &str, jaas: &BTreeMap<String, String>) -> anyhow::Result<Fetcher> {
        let roots = match jaas.get("ssl.truststore.location") {
            Some(path) => {
                let certs = super::tls::trusted_certificates(
                    std::path::Path::new(path),
                    jaas.get("ssl.truststore.type").map(String::as_str),
                    jaas.get("ssl.truststore.password")
                        .map_or("", String::as_str),
                )
                .map_err(|e| anyhow::anyhow!("sasl.oauthbearer.jwks.endpoint.url: {e}"))?;
                ureq::tls::RootCerts::Specific(Arc::new(
                    certs
                        .iter()
                        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
                        .collect(),
                ))
            }
            None => ureq::tls::RootCerts::WebPki,
        };
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .max_redirects(0)
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
            .build();
        Ok(Fetcher {
            agent: ureq::Agent::new_with_config(config),
            url: url.to_owned(),
        })
    }

    /// One fetch (blocking, at most 10 s).
    fn fetch(&self) -> Result<Vec<Jwk>, String> {
        let mut response = self
            .agent
            .get(&self.url)
            .header("Accept", "application/json")
            .call()
            .map_err(|e| e.to_string())?;
        let text = response
            .body_mut()
            .with_config()
            .limit(JWKS_MAX_BYTES)
            .read_to_string()
            .map_err(|e| e.to_string())?;
        parse_jwks(&text)
    }
}

/// When an HTTP key set is fetched again.
#[derive(Debug, Clone, Copy)]
struct Refresh {
    every: Duration,
    backoff: Duration,
    backoff_max: Duration,
}

/// Keeps `set` fresh from `fetcher`, for as long as the process runs.
async fn refresh_forever(set: Arc<KeySet>, fetcher: Arc<Fetcher>, refresh: Refresh) {
    let mut failing_since: Option<Instant> = None;
    let mut delay = refresh.backoff;
    let mut last_fetch = tokio::time::Instant::now();
    loop {
        let wait = if failing_since.is_some() {
            delay
        } else {
            refresh.every
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = set.wake.notified() => {
                // Tokens cannot make the endpoint be asked more than once a second.
                tokio::time::sleep_until(last_fetch + EARLY_FETCH_SPACING).await;
            }
        }
        last_fetch = tokio::time::Instant::now();
        let f = fetcher.clone();
        match tokio::task::spawn_blocking(move || f.fetch()).await {
            Ok(Ok(keys)) => {
                if failing_since.take().is_some() || keys.len() != set.current().len() {
                    tracing::info!(url = %set.url, keys = keys.len(), "OAUTHBEARER key set fetched");
                }
                set.replace(keys);
                delay = refresh.backoff;
            }
            Ok(Err(e)) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                tracing::warn!(url = %set.url, error = %e, held = set.current().len(), "OAUTHBEARER key set: fetch failed; the keys held stay in use");
                // Retries back off up to the maximum; a set that holds keys stops retrying
                // after that long and waits for the next period, an empty one keeps trying.
                if !set.current().is_empty() && since.elapsed() >= refresh.backoff_max {
                    failing_since = None;
                    delay = refresh.backoff;
                } else {
                    delay = (delay * 2).min(refresh.backoff_max);
                }
            }
            Err(_) => return,
        }
    }
}

/// A validated token: its principal's name, and when it expires (ms since the epoch).
#[derive(Debug, PartialEq, Eq)]
pub struct Valid {
    pub name: String,
    pub expires_at_ms: i64,
}

impl Validator {
    /// The listener's validator, from its keys.
    ///
    /// # Errors
    ///
    /// A key set that is not a `file://` URL, cannot be read, or holds no RSA key; a
    /// JAAS entry that does not parse.
    pub fn for_listener(config: &BrokerConfig, listener: &str) -> anyhow::Result<Validator> {
        let v = |k: &str| config.listener_value(listener, k).map(str::to_owned);
        let class = v("oauthbearer.sasl.server.callback.handler.class")
            .or_else(|| v("sasl.server.callback.handler.class"));
        let jwks_url = v("sasl.oauthbearer.jwks.endpoint.url");
        let secured = matches!(class.as_deref(), Some(JWKS_VALIDATOR | JWKS_VALIDATOR_OLD))
            || (class.is_none() && jwks_url.is_some());
        if let Some(other) = class.as_deref().filter(|_| !secured) {
            anyhow::bail!(
                "listener {listener}: OAUTHBEARER validator {other} is not served; use {JWKS_VALIDATOR}, or none for unsecured tokens"
            );
        }
        if !secured {
            let options = jaas_options(config, listener)?;
            return Ok(Validator::Unsecured {
                principal_claim: options
                    .get("unsecuredValidatorPrincipalClaimName")
                    .cloned()
                    .unwrap_or_else(|| "sub".into()),
                skew_ms: options
                    .get("unsecuredValidatorAllowableClockSkewMs")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0),
            });
        }
        let url = jwks_url.ok_or_else(|| {
            anyhow::anyhow!(
                "listener {listener}: {JWKS_VALIDATOR} needs sasl.oauthbearer.jwks.endpoint.url"
            )
        })?;
        let keys = if let Some(path) = url.strip_prefix("file://") {
            let text = std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("sasl.oauthbearer.jwks.endpoint.url: cannot read {path}: {e}")
            })?;
            let keys = parse_jwks(&text)
                .map_err(|e| anyhow::anyhow!("sasl.oauthbearer.jwks.endpoint.url: {path}: {e}"))?;
            KeySet::new(url.clone(), keys)
        } else if url.starts_with("https://") || url.starts_with("http://") {
            http_key_set(config, listener, &url)?
        } else {
            anyhow::bail!(
                "sasl.oauthbearer.jwks.endpoint.url={url}: not a file://, https:// or http:// URL"
            );
        };
        Ok(Validator::Jwks {
            keys,
            audience: v("sasl.oauthbearer.expected.audience")
                .map(|a| {
                    a.split(',')
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            issuer: v("sasl.oauthbearer.expected.issuer"),
            principal_claim: v("sasl.oauthbearer.sub.claim.name").unwrap_or_else(|| "sub".into()),
            skew_ms: v("sasl.oauthbearer.clock.skew.seconds")
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(30)
                .saturating_mul(1000),
        })
    }

    /// Validates the client's initial response (`n,[a=authzid],` then `\x01auth=Bearer
    /// <token>\x01` ... `\x01\x01`) at `now_ms`.
    ///
    /// # Errors
    ///
    /// Why it was refused (for the broker's log; the client is told less).
    pub fn validate(&self, response: &[u8], now_ms: i64) -> Result<Valid, String> {
        let token = bearer_token(response)?;
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("the token is not a JWS (three dot-separated parts)".into());
        };
        let header = json_part(h, "header")?;
        let claims = json_part(p, "payload")?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        let (principal_claim, skew_ms) = match self {
            Validator::Unsecured {
                principal_claim,
                skew_ms,
            } => {
                if alg != "none" || !sig.is_empty() {
                    return Err(format!(
                        "unsecured validation takes alg none with no signature, not {alg:?}"
                    ));
                }
                (principal_claim, *skew_ms)
            }
            Validator::Jwks {
                keys,
                audience,
                issuer,
                principal_claim,
                skew_ms,
            } => {
                if !SIGNED_ALGORITHMS.contains(&alg) {
                    return Err(format!(
                        "algorithm {alg:?} is not accepted ({})",
                        SIGNED_ALGORITHMS.join(", ")
                    ));
                }
                let signature = B64URL
                    .decode(sig)
                    .map_err(|_| "the signature is not base64url".to_owned())?;
                let kid = header.get("kid").and_then(Value::as_str);
                let signed = &token.as_bytes()[..h.len() + 1 + p.len()];
                let held = keys.current();
                if held.is_empty() {
                    keys.wake.notify_one();
                    return Err(format!("no key set is held yet from {}", keys.url));
                }
                let mut named = held
                    .iter()
                    .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
                    .peekable();
                if named.peek().is_none() {
                    if let Some(kid) = kid {
                        keys.missing_kid(kid);
                    }
                    return Err(format!("the key set has no key {kid:?}"));
                }
                if !named.any(|k| k.verifies(alg, signed, &signature)) {
                    return Err(format!(
                        "no key of the set (kid {kid:?}) verifies the signature"
                    ));
                }
                if !audience.is_empty() {
                    let aud: Vec<&str> = match claims.get("aud") {
                        Some(Value::String(s)) => vec![s.as_str()],
                        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    if !aud.iter().any(|a| audience.iter().any(|x| x == a)) {
                        return Err(format!("audience {aud:?} is not one of {audience:?}"));
                    }
                }
                if let Some(iss) = issuer
                    && claims.get("iss").and_then(Value::as_str) != Some(iss.as_str())
                {
                    return Err(format!("issuer is not {iss}"));
                }
                (principal_claim, *skew_ms)
            }
        };
        let seconds_ms = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_f64)
                .map(|s| (s * 1000.0) as i64)
        };
        let exp = seconds_ms("exp").ok_or("the token has no exp claim")?;
        if exp.saturating_add(skew_ms) <= now_ms {
            return Err("the token has expired".into());
        }
        if let Some(iat) = seconds_ms("iat")
            && iat.saturating_sub(skew_ms) > now_ms
        {
            return Err("the token was issued in the future".into());
        }
        let name = claims
            .get(principal_claim.as_str())
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("the token has no {principal_claim} claim"))?;
        Ok(Valid {
            name: name.to_owned(),
            expires_at_ms: exp,
        })
    }
}

/// The token of an initial client response (RFC 7628 §3.1).
fn bearer_token(response: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(response).map_err(|_| "not UTF-8".to_owned())?;
    // gs2-header: "n," [ "a=" authzid ] "," then key=value pairs, each ended by \x01.
    let rest = text
        .strip_prefix("n,")
        .or_else(|| text.strip_prefix("y,"))
        .ok_or("no gs2 header")?;
    let (_, pairs) = rest.split_once(',').ok_or("no gs2 header")?;
    let pairs = pairs.strip_prefix('\u{1}').ok_or("no key-value pairs")?;
    for kv in pairs.split('\u{1}') {
        if let Some(auth) = kv.strip_prefix("auth=") {
            let (scheme, token) = auth.split_once(' ').ok_or("auth is not `Bearer <token>`")?;
            if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
                return Err("auth is not `Bearer <token>`".into());
            }
            return Ok(token.trim());
        }
    }
    Err("no auth= pair".into())
}

fn json_part(part: &str, what: &str) -> Result<Value, String> {
    let raw = B64URL
        .decode(part.trim_end_matches('='))
        .map_err(|_| format!("the {what} is not base64url"))?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| format!("the {what} is not JSON"))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(format!("the {what} is not a JSON object"))
    }
}

/// The signing keys of a JSON Web Key Set (RFC 7517): RSA, and EC on P-256 and P-384. Keys
/// for encryption (`"use": "enc"`) and of other types are left out.
fn parse_jwks(text: &str) -> Result<Vec<Jwk>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let field = |k: &Value, name: &str| {
        k.get(name)
            .and_then(Value::as_str)
            .and_then(|s| B64URL.decode(s.trim_end_matches('=')).ok())
    };
    let keys: Vec<Jwk> = v
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("no keys array")?
        .iter()
        .filter(|k| {
            k.get("use")
                .and_then(Value::as_str)
                .is_none_or(|u| u == "sig")
        })
        .filter_map(|k| {
            let key = match k.get("kty").and_then(Value::as_str)? {
                "RSA" => PublicKey::Rsa {
                    n: field(k, "n")?,
                    e: field(k, "e")?,
                },
                "EC" => {
                    let (p384, len) = match k.get("crv").and_then(Value::as_str)? {
                        "P-256" => (false, 32),
                        "P-384" => (true, 48),
                        _ => return None,
                    };
                    let (x, y) = (field(k, "x")?, field(k, "y")?);
                    if x.len() != len || y.len() != len {
                        return None;
                    }
                    let mut point = vec![4u8];
                    point.extend_from_slice(&x);
                    point.extend_from_slice(&y);
                    PublicKey::Ec { p384, point }
                }
                _ => return None,
            };
            Some(Jwk {
                kid: k.get("kid").and_then(Value::as_str).map(str::to_owned),
                key,
            })
        })
        .collect();
    if keys.is_empty() {
        return Err("no RSA or EC signing key".into());
    }
    Ok(keys)
}

/// The options of the listener's OAUTHBEARER JAAS entry (none without one).
fn jaas_options(config: &BrokerConfig, listener: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let entry = config
        .listener_value(listener, "oauthbearer.sasl.jaas.config")
        .or_else(|| config.listener_value(listener, "sasl.jaas.config"));
    match entry {
        Some(text) => Ok(super::jaas::parse(text)
            .map_err(|e| anyhow::anyhow!("listener {listener}: OAUTHBEARER JAAS: {e}"))?
            .options),
        None => Ok(BTreeMap::new()),
    }
}

/// An `https://` or `http://` key set: fetched once now (a failure is logged, and the
/// refresher keeps trying), then kept fresh by a task of the runtime.
fn http_key_set(config: &BrokerConfig, listener: &str, url: &str) -> anyhow::Result<Arc<KeySet>> {
    let v = |k: &str| config.listener_value(listener, k).map(str::to_owned);
    let ms = |k: &str, default: u64| -> anyhow::Result<Duration> {
        match v(k) {
            None => Ok(Duration::from_millis(default)),
            Some(s) => s
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| anyhow::anyhow!("{k}={s}: not a number of milliseconds")),
        }
    };
    let refresh = Refresh {
        every: ms("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000)?
            .max(Duration::from_millis(100)),
        backoff: ms("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100)?
            .max(Duration::from_millis(10)),
        backoff_max: ms(
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
            10_000,
        )?,
    };
    let jaas = jaas_options(config, listener)?;
    if url.starts_with("http://") {
        tracing::warn!(listener, url, "OAUTHBEARER key set is fetched without TLS");
    }
    let fetcher = Arc::new(Fetcher::new(url, &jaas)?);
    let keys = match fetcher.fetch() {
        Ok(keys) => {
            tracing::info!(
                listener,
                url,
                keys = keys.len(),
                "OAUTHBEARER key set fetched"
            );
            keys
        }
        Err(e) => {
            tracing::error!(listener, url, error = %e, "OAUTHBEARER key set: the first fetch failed; tokens are refused until a fetch succeeds");
            Vec::new()
        }
    };
    let set = KeySet::new(url.to_owned(), keys);
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(refresh_forever(set.clone(), fetcher, refresh));
        }
        Err(_) => tracing::warn!(listener, url, "no runtime: the key set is not refreshed"),
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unsecured_token(claims: &str) -> Vec<u8> {
        let h = B64URL.encode(r#"{"alg":"none"}"#);
        let p = B64URL.encode(claims);
        format!("n,,\u{1}auth=Bearer {h}.{p}.\u{1}\u{1}").into_bytes()
    }

    #[test]
    fn unsecured_tokens_carry_their_principal_until_they_expire() {
        let v = Validator::Unsecured {
            principal_claim: "sub".into(),
            skew_ms: 0,
        };
        let got = v
            .validate(
                &unsecured_token(r#"{"sub":"alice","exp":2000,"iat":1000}"#),
                1_500_000,
            )
            .unwrap();
        assert_eq!(
            got,
            Valid {
                name: "alice".into(),
                expires_at_ms: 2_000_000
            }
        );
        // Expired, no exp, no principal, a signature, another algorithm, garbage.
        for (token, now) in [
            (unsecured_token(r#"{"sub":"alice","exp":2000}"#), 2_000_000),
            (unsecured_token(r#"{"sub":"alice"}"#), 0),
            (unsecured_token(r#"{"exp":2000}"#), 0),
            (
                unsecured_token(r#"{"sub":"a","exp":2000,"iat":1900}"#),
                1_000_000,
            ),
            (
                b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.e30.c2ln\x01\x01".to_vec(),
                0,
            ),
            (
                b"n,,\x01auth=Bearer eyJhbGciOiJIUzI1NiJ9.e30.\x01\x01".to_vec(),
                0,
            ),
            (b"n,,\x01auth=Basic abc\x01\x01".to_vec(), 0),
            (b"garbage".to_vec(), 0),
            (b"n,,\x01auth=Bearer a.b\x01\x01".to_vec(), 0),
            (b"n,,\x01\x01".to_vec(), 0),
            (vec![0xff, 0xfe], 0),
        ] {
            assert!(
                v.validate(&token, now).is_err(),
                "{:?}",
                String::from_utf8_lossy(&token)
            );
        }
    }

    #[test]
    fn a_key_set_keeps_its_rsa_keys() {
        let set = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"},
                              {"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}"#;
        let keys = parse_jwks(set).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("k1"));
        // A P-256 key with coordinates of the right length is kept; encryption keys are not.
        let x = B64URL.encode([1u8; 32]);
        let set = format!(
            r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"e1","x":"{x}","y":"{x}"}},
                        {{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"}}]}}"#
        );
        let keys = parse_jwks(&set).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("e1"));
        assert!(parse_jwks(r#"{"keys":[]}"#).is_err());
        assert!(parse_jwks("[").is_err());
    }

    #[test]
    fn a_signed_token_with_a_forged_signature_is_refused() {
        let v = Validator::Jwks {
            keys: KeySet::new(
                "file:///test".into(),
                parse_jwks(r#"{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}"#).unwrap(),
            ),
            audience: vec![],
            issuer: None,
            principal_claim: "sub".into(),
            skew_ms: 0,
        };
        let h = B64URL.encode(r#"{"alg":"RS256","kid":"k1"}"#);
        let p = B64URL.encode(r#"{"sub":"mallory","exp":99999999999}"#);
        let token = format!(
            "n,,\u{1}auth=Bearer {h}.{p}.{}\u{1}\u{1}",
            B64URL.encode([7u8; 256])
        );
        assert!(
            v.validate(token.as_bytes(), 0)
                .unwrap_err()
                .contains("verifies")
        );
        // An unsecured token is not accepted by a JWKS listener.
        assert!(
            v.validate(
                &unsecured_token(r#"{"sub":"mallory","exp":99999999999}"#),
                0
            )
            .is_err()
        );
    }
}
