//! The server side of OAUTHBEARER (RFC 7628; KIP-255, KIP-768), sans-IO: the client's one
//! message carries a JWT, which is validated as Kafka's two validators do.
//!
//! - **Unsecured** (Kafka's default, `OAuthBearerUnsecuredValidatorCallbackHandler`, for
//!   development): the token's header says `"alg":"none"` and it has no signature; it must
//!   carry `exp` and the principal claim (`unsecuredValidatorPrincipalClaimName`, `sub`), and
//!   not have expired (give or take `unsecuredValidatorAllowableClockSkewMs`).
//! - **JWKS** (KIP-768's `OAuthBearerValidatorCallbackHandler`, chosen with
//!   `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`, or by setting
//!   `sasl.oauthbearer.jwks.endpoint.url`): an RS256 signature by a key of the JSON Web Key
//!   Set (the `kid` picks it when given), `exp` in the future and `iat` not in it (give or
//!   take `sasl.oauthbearer.clock.skew.seconds`), one of `sasl.oauthbearer.expected.audience`
//!   in `aud` and `sasl.oauthbearer.expected.issuer` as `iss` when they are set, and the
//!   principal in `sasl.oauthbearer.sub.claim.name`. The key set is read from a `file://`
//!   URL at start.
//!
//! The principal is `User:<claim>`. A token's expiry bounds the session when
//! `connections.max.reauth.ms` is set (KIP-368), so a client re-authenticates with a fresh
//! token before its token runs out.

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
        keys: Vec<RsaKey>,
        audience: Vec<String>,
        issuer: Option<String>,
        principal_claim: String,
        skew_ms: i64,
    },
}

/// An RSA public key of the key set.
#[derive(Clone)]
pub struct RsaKey {
    kid: Option<String>,
    n: Vec<u8>,
    e: Vec<u8>,
}

impl std::fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RsaKey")
            .field("kid", &self.kid)
            .field("bits", &(self.n.len() * 8))
            .finish()
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
            let jaas = v("oauthbearer.sasl.jaas.config").or_else(|| v("sasl.jaas.config"));
            let options = match jaas {
                Some(text) => {
                    super::jaas::parse(&text)
                        .map_err(|e| anyhow::anyhow!("listener {listener}: OAUTHBEARER JAAS: {e}"))?
                        .options
                }
                None => Default::default(),
            };
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
        let Some(path) = url.strip_prefix("file://") else {
            anyhow::bail!(
                "sasl.oauthbearer.jwks.endpoint.url={url}: only file:// key sets are read (fetch the set to a file)"
            );
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!("sasl.oauthbearer.jwks.endpoint.url: cannot read {path}: {e}")
        })?;
        let keys = parse_jwks(&text)
            .map_err(|e| anyhow::anyhow!("sasl.oauthbearer.jwks.endpoint.url: {path}: {e}"))?;
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
                if alg != "RS256" {
                    return Err(format!("algorithm {alg:?} is not accepted (RS256)"));
                }
                let signature = B64URL
                    .decode(sig)
                    .map_err(|_| "the signature is not base64url".to_owned())?;
                let kid = header.get("kid").and_then(Value::as_str);
                let signed = &token.as_bytes()[..h.len() + 1 + p.len()];
                let verified = keys
                    .iter()
                    .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
                    .any(|k| {
                        ring::signature::RsaPublicKeyComponents { n: &k.n, e: &k.e }
                            .verify(
                                &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                                signed,
                                &signature,
                            )
                            .is_ok()
                    });
                if !verified {
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

/// The RSA keys of a JSON Web Key Set (RFC 7517); other key types are left out.
fn parse_jwks(text: &str) -> Result<Vec<RsaKey>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let keys: Vec<RsaKey> = v
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("no keys array")?
        .iter()
        .filter(|k| k.get("kty").and_then(Value::as_str) == Some("RSA"))
        .filter_map(|k| {
            let n = B64URL.decode(k.get("n")?.as_str()?).ok()?;
            let e = B64URL.decode(k.get("e")?.as_str()?).ok()?;
            Some(RsaKey {
                kid: k.get("kid").and_then(Value::as_str).map(str::to_owned),
                n,
                e,
            })
        })
        .collect();
    if keys.is_empty() {
        return Err("no RSA key".into());
    }
    Ok(keys)
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
        assert!(parse_jwks(r#"{"keys":[]}"#).is_err());
        assert!(parse_jwks("[").is_err());
    }

    #[test]
    fn a_signed_token_with_a_forged_signature_is_refused() {
        let v = Validator::Jwks {
            keys: parse_jwks(r#"{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}"#)
                .unwrap(),
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
