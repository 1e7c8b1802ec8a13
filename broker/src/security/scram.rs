//! The server side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's
//! `ScramSaslServer` runs it, sans-IO: two client messages in, two server messages out.
//!
//! The credentials are those AlterUserScramCredentials stored (`strata_kraft::scram`): the
//! salt, the iteration count, StoredKey and ServerKey. The password never reaches the
//! broker. Kafka's rules apply: the channel-binding flag must be `n` (no channel binding),
//! an authorization id must equal the user name, delegation tokens (`tokenauth=true`) are
//! not served, and every failure is told to the client in the same words, whatever went
//! wrong, so that a client cannot tell an unknown user from a wrong password.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use strata_kraft::scram::ScramCredential;

/// The two mechanisms, with Kafka's type ids (`strata_kraft::scram`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// The SASL mechanism name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's `ScramMechanism` type id, the key of the stored credentials.
    #[must_use]
    pub fn type_id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => strata_kraft::scram::SCRAM_SHA_256,
            ScramMechanism::Sha512 => strata_kraft::scram::SCRAM_SHA_512,
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        strata_kraft::scram::mac(self.type_id(), key, data)
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        strata_kraft::scram::digest(self.type_id(), data)
    }

    /// PBKDF2's `Hi` (RFC 5802 §2.2): the salted password (`strata_kraft::scram`).
    #[must_use]
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        strata_kraft::scram::salted_password(self.type_id(), password, salt, iterations)
    }

    /// The credential a server keeps for `salted_password` (RFC 5802 §3).
    #[must_use]
    pub fn credential(
        self,
        salted_password: &[u8],
        salt: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let (stored_key, server_key) =
            strata_kraft::scram::derive_keys(self.type_id(), salted_password);
        ScramCredential {
            salt: salt.to_vec(),
            stored_key,
            server_key,
            iterations,
        }
    }
}

/// Why an exchange failed. The client is told only
/// [`ScramFailure::CLIENT_MESSAGE`]; the reason goes to the broker's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramFailure {
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("unknown user or no {0} credential for it")]
    UnknownUser(&'static str),
    #[error("the authorization id is not the user name")]
    AuthzidMismatch,
    #[error("delegation tokens are not served")]
    TokenAuth,
    #[error("the nonce does not continue the server's")]
    NonceMismatch,
    #[error("the channel binding is not the first message's")]
    ChannelBinding,
    #[error("invalid proof")]
    BadProof,
    #[error("a message arrived after the exchange ended")]
    Finished,
}

impl ScramFailure {
    /// What Kafka tells the client whatever the reason.
    pub const CLIENT_MESSAGE: &'static str = "Authentication failed: Invalid user credentials";
}

enum State {
    /// Waiting for client-first.
    First,
    /// Sent server-first; waiting for client-final.
    Final {
        user: String,
        credential: ScramCredential,
        gs2_header: String,
        nonce: String,
        /// client-first-message-bare "," server-first-message
        auth_prefix: String,
    },
    Done,
}

/// One SCRAM exchange on the server.
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

impl ScramServer {
    #[must_use]
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer {
            mechanism,
            state: State::First,
        }
    }

    /// Handles the client's next message: the server-first message after client-first, or
    /// the server-final message and the authenticated user after client-final.
    ///
    /// # Errors
    ///
    /// The exchange failed; it cannot go on.
    pub fn step(
        &mut self,
        message: &[u8],
        server_nonce: &str,
        lookup: impl FnOnce(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> Result<Step, ScramFailure> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::First => {
                let (sent, next) = self.client_first(message, server_nonce, lookup)?;
                self.state = next;
                Ok(Step::Challenge(sent))
            }
            State::Final {
                user,
                credential,
                gs2_header,
                nonce,
                auth_prefix,
            } => {
                let reply =
                    self.client_final(message, &credential, &gs2_header, &nonce, &auth_prefix)?;
                Ok(Step::Done { reply, user })
            }
            State::Done => Err(ScramFailure::Finished),
        }
    }

    fn client_first(
        &self,
        message: &[u8],
        server_nonce: &str,
        lookup: impl FnOnce(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> Result<(Vec<u8>, State), ScramFailure> {
        let text =
            std::str::from_utf8(message).map_err(|_| ScramFailure::Malformed("not UTF-8"))?;
        // gs2-header: "n," [ "a=" authzid ] ","
        let rest = text
            .strip_prefix("n,")
            .ok_or(ScramFailure::Malformed("channel binding flag is not n"))?;
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or(ScramFailure::Malformed("no gs2 header"))?;
        let authzid = match authzid {
            "" => None,
            a => Some(decode_saslname(
                a.strip_prefix("a=")
                    .ok_or(ScramFailure::Malformed("bad authorization id"))?,
            )?),
        };
        let gs2_header = format!("n,{},", &rest[..rest.len() - bare.len() - 1]);
        let mut fields = bare.split(',');
        let first = fields.next().unwrap_or("");
        if first.starts_with("m=") {
            return Err(ScramFailure::Malformed("mandatory extension"));
        }
        let user = decode_saslname(
            first
                .strip_prefix("n=")
                .ok_or(ScramFailure::Malformed("no user name"))?,
        )?;
        let client_nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_graphic() && c != ','))
            .ok_or(ScramFailure::Malformed("no nonce"))?;
        for ext in fields {
            let (k, v) = ext
                .split_once('=')
                .ok_or(ScramFailure::Malformed("bad extension"))?;
            if k == "tokenauth" && v.eq_ignore_ascii_case("true") {
                return Err(ScramFailure::TokenAuth);
            }
        }
        if authzid.as_ref().is_some_and(|a| *a != user) {
            return Err(ScramFailure::AuthzidMismatch);
        }
        let credential = lookup(&user, self.mechanism)
            .ok_or(ScramFailure::UnknownUser(self.mechanism.name()))?;
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let auth_prefix = format!("{bare},{server_first}");
        Ok((
            server_first.into_bytes(),
            State::Final {
                user,
                credential,
                gs2_header,
                nonce,
                auth_prefix,
            },
        ))
    }

    fn client_final(
        &self,
        message: &[u8],
        credential: &ScramCredential,
        gs2_header: &str,
        nonce: &str,
        auth_prefix: &str,
    ) -> Result<Vec<u8>, ScramFailure> {
        let text =
            std::str::from_utf8(message).map_err(|_| ScramFailure::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramFailure::Malformed("no proof"))?;
        let mut fields = without_proof.split(',');
        let binding = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or(ScramFailure::Malformed("no channel binding"))?;
        if B64.decode(binding).ok().as_deref() != Some(gs2_header.as_bytes()) {
            return Err(ScramFailure::ChannelBinding);
        }
        let got_nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(ScramFailure::Malformed("no nonce"))?;
        // Kafka's check is `endsWith`, not equality: librdkafka before 2.2 sends its own
        // nonce in front of the combined one, and Kafka brokers accept it.
        if !got_nonce.ends_with(nonce) {
            return Err(ScramFailure::NonceMismatch);
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramFailure::Malformed("proof is not base64"))?;
        let auth_message = format!("{auth_prefix},{without_proof}");
        let m = self.mechanism;
        let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(ScramFailure::BadProof);
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        if !constant_time_eq(&m.hash(&client_key), &credential.stored_key) {
            return Err(ScramFailure::BadProof);
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

/// What one step produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The server-first message; the exchange goes on.
    Challenge(Vec<u8>),
    /// The server-final message: the client proved it knows the password of `user`.
    Done { reply: Vec<u8>, user: String },
}

/// RFC 5802's `saslname`: `=2C` is `,` and `=3D` is `=`; any other `=` is malformed.
fn decode_saslname(s: &str) -> Result<String, ScramFailure> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramFailure::Malformed("bad escape in a name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(ScramFailure::Malformed("empty name"));
    }
    Ok(out)
}

/// The client side of one SCRAM exchange, for this node's connections to other nodes
/// (`sasl.mechanism.inter.broker.protocol`, `sasl.mechanism.controller.protocol`), as
/// Kafka's `ScramSaslClient` runs it: client-first, then client-final with the proof, then
/// a check of the server's signature, so that a server that does not hold the credential
/// is not believed.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    client_first_bare: String,
    /// The ServerSignature the server-final message must carry, once client-final is made.
    server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// An exchange for `user` with `nonce` (printable, without commas).
    #[must_use]
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str, nonce: String) -> Self {
        let name = user.replace('=', "=3D").replace(',', "=2C");
        let client_first_bare = format!("n={name},r={nonce}");
        ScramClient {
            mechanism,
            password: password.to_owned(),
            nonce,
            client_first_bare,
            server_signature: None,
        }
    }

    /// The client-first message (no channel binding, no authorization id).
    #[must_use]
    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// The client-final message for the server-first message `server_first`.
    ///
    /// # Errors
    ///
    /// The server-first message is malformed, its nonce does not extend this client's, or
    /// its iteration count is below the mechanism's minimum or above Kafka's maximum.
    pub fn respond(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramFailure> {
        let text =
            std::str::from_utf8(server_first).map_err(|_| ScramFailure::Malformed("not UTF-8"))?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for field in text.split(',') {
            if let Some(v) = field.strip_prefix("r=") {
                nonce = Some(v);
            } else if let Some(v) = field.strip_prefix("s=") {
                salt = B64.decode(v).ok();
            } else if let Some(v) = field.strip_prefix("i=") {
                iterations = v.parse::<u32>().ok();
            }
        }
        let nonce = nonce.ok_or(ScramFailure::Malformed("no nonce"))?;
        let salt = salt.ok_or(ScramFailure::Malformed("no salt"))?;
        let iterations = iterations.ok_or(ScramFailure::Malformed("no iteration count"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramFailure::NonceMismatch);
        }
        let allowed = strata_kraft::scram::MIN_ITERATIONS.unsigned_abs()
            ..=strata_kraft::scram::MAX_ITERATIONS.unsigned_abs();
        if !allowed.contains(&iterations) {
            return Err(ScramFailure::Malformed("iteration count out of range"));
        }
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let server_key = m.hmac(&salted, b"Server Key");
        let without_proof = format!("c={},r={nonce}", B64.encode("n,,"));
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        self.server_signature = Some(m.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message.
    ///
    /// # Errors
    ///
    /// It is an error (`e=`), malformed, or its signature is not the one the password gives.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramFailure> {
        let text =
            std::str::from_utf8(server_final).map_err(|_| ScramFailure::Malformed("not UTF-8"))?;
        let got = text
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v.split(',').next().unwrap_or("")).ok())
            .ok_or(ScramFailure::Malformed("no server signature"))?;
        match &self.server_signature {
            Some(expected) if constant_time_eq(expected, &got) => Ok(()),
            _ => Err(ScramFailure::BadProof),
        }
    }
}

/// Whether `a` and `b` are equal, in a time that depends on their length only (SCRAM's
/// StoredKey check and PLAIN's password check).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh server nonce: 32 printable characters from the OS's random source.
#[must_use]
pub fn server_nonce() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..32)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client, written from RFC 5802, to drive the server.
    fn client_final(
        m: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        gs2: &str,
    ) -> String {
        let mut salt = None;
        let mut iterations = 0;
        let mut nonce = "";
        for f in server_first.split(',') {
            if let Some(s) = f.strip_prefix("s=") {
                salt = Some(B64.decode(s).unwrap());
            } else if let Some(i) = f.strip_prefix("i=") {
                iterations = i.parse().unwrap();
            } else if let Some(r) = f.strip_prefix("r=") {
                nonce = r;
            }
        }
        let salted = m.salted_password(password.as_bytes(), &salt.unwrap(), iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c={},r={nonce}", B64.encode(gs2));
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let sig = m.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        format!("{without_proof},p={}", B64.encode(proof))
    }

    fn stored(m: ScramMechanism, password: &str) -> ScramCredential {
        let salt = b"0123456789abcdef";
        m.credential(
            &m.salted_password(password.as_bytes(), salt, 4096),
            salt,
            4096,
        )
    }

    fn run(
        m: ScramMechanism,
        user: &str,
        password: &str,
        first: &str,
    ) -> Result<Step, ScramFailure> {
        let cred = stored(m, "s3cret");
        let mut server = ScramServer::new(m);
        let Step::Challenge(sf) = server.step(first.as_bytes(), "SRV", |u, _| {
            (u == user).then(|| cred.clone())
        })?
        else {
            panic!("expected a challenge")
        };
        let sf = String::from_utf8(sf).unwrap();
        let gs2_end = first.match_indices(',').nth(1).unwrap().0 + 1;
        let cf = client_final(m, password, &first[gs2_end..], &sf, &first[..gs2_end]);
        server.step(cf.as_bytes(), "unused", |_, _| None)
    }

    #[test]
    fn both_mechanisms_authenticate_the_right_password_only() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let done = run(m, "alice", "s3cret", "n,,n=alice,r=abc").unwrap();
            let Step::Done { reply, user } = done else {
                panic!()
            };
            assert_eq!(user, "alice");
            assert!(reply.starts_with(b"v="));
            assert_eq!(
                run(m, "alice", "wrong", "n,,n=alice,r=abc"),
                Err(ScramFailure::BadProof)
            );
        }
    }

    #[test]
    fn rfc7677_vector_verifies() {
        // RFC 7677 §3: user "user", password "pencil".
        let m = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let cred = m.credential(&salted, &salt, 4096);
        let mut s = ScramServer::new(m);
        let first = s
            .step(
                b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
                |_, _| Some(cred.clone()),
            )
            .unwrap();
        assert_eq!(
            first,
            Step::Challenge(
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                    .to_vec()
            )
        );
        let last = s
            .step(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                "",
                |_, _| None,
            )
            .unwrap();
        assert_eq!(
            last,
            Step::Done {
                reply: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
                user: "user".into()
            }
        );
    }

    #[test]
    fn refusals() {
        let m = ScramMechanism::Sha256;
        assert_eq!(
            run(m, "bob", "s3cret", "n,,n=alice,r=abc"),
            Err(ScramFailure::UnknownUser("SCRAM-SHA-256"))
        );
        assert_eq!(
            run(m, "alice", "s3cret", "n,a=bob,n=alice,r=abc"),
            Err(ScramFailure::AuthzidMismatch)
        );
        assert!(run(m, "alice", "s3cret", "n,a=alice,n=alice,r=abc").is_ok());
        assert_eq!(
            run(m, "alice", "s3cret", "n,,n=alice,r=abc,tokenauth=true"),
            Err(ScramFailure::TokenAuth)
        );
        for bad in [
            "y,,n=alice,r=abc",
            "p=tls-unique,,n=alice,r=abc",
            "n,,n=alice",
            "n,,n=,r=abc",
            "n,,n=al=ice,r=abc",
            "n,,m=x,n=alice,r=abc",
            "garbage",
            "",
        ] {
            assert!(
                matches!(
                    run(m, "alice", "s3cret", bad),
                    Err(ScramFailure::Malformed(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(decode_saslname("a=2Cb=3Dc").unwrap(), "a,b=c");
        // A wrong nonce or binding in client-final.
        let cred = stored(m, "s3cret");
        let mut s = ScramServer::new(m);
        s.step(b"n,,n=alice,r=abc", "SRV", |_, _| Some(cred.clone()))
            .unwrap();
        assert_eq!(
            s.step(b"c=biws,r=abcSRVX,p=AAAA", "", |_, _| None),
            Err(ScramFailure::NonceMismatch)
        );
        assert_eq!(
            s.step(b"c=biws,r=abcSRV,p=AAAA", "", |_, _| None),
            Err(ScramFailure::Finished)
        );
        let mut s = ScramServer::new(m);
        s.step(b"n,,n=alice,r=abc", "SRV", |_, _| Some(cred.clone()))
            .unwrap();
        assert_eq!(
            s.step(b"c=eSws,r=abcSRV,p=AAAA", "", |_, _| None),
            Err(ScramFailure::ChannelBinding)
        );
    }

    #[test]
    fn the_client_authenticates_and_checks_the_server() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let cred = stored(m, "s3cret");
            let exchange = |user: &str, password: &str| {
                let mut client = ScramClient::new(m, user, password, "cn0nce".into());
                let mut server = ScramServer::new(m);
                let lookup = |u: &str, _| (u == "al,i=ce").then(|| cred.clone());
                let Step::Challenge(sf) = server.step(&client.first(), "SRV", lookup)? else {
                    panic!("expected a challenge")
                };
                let cf = client.respond(&sf)?;
                let Step::Done { reply, user } = server.step(&cf, "", |_, _| None)? else {
                    panic!("expected the end")
                };
                client.verify(&reply)?;
                Ok::<_, ScramFailure>((user, client, reply))
            };
            // A name with the two characters SCRAM escapes.
            let (user, client, reply) = exchange("al,i=ce", "s3cret").unwrap();
            assert_eq!(user, "al,i=ce");
            // A server that does not hold the credential cannot sign.
            let mut forged = reply.clone();
            forged[4] ^= 1;
            assert!(client.verify(&forged).is_err());
            assert!(client.verify(b"e=other-error").is_err());
            assert_eq!(
                exchange("al,i=ce", "wrong").err(),
                Some(ScramFailure::BadProof)
            );
        }
        let mut c = ScramClient::new(ScramMechanism::Sha256, "u", "p", "abc".into());
        // The server's nonce must extend the client's.
        assert_eq!(
            c.respond(b"r=xyzSRV,s=c2FsdA==,i=4096"),
            Err(ScramFailure::NonceMismatch)
        );
        assert_eq!(
            c.respond(b"r=abc,s=c2FsdA==,i=4096"),
            Err(ScramFailure::NonceMismatch)
        );
        // An iteration count that would make the client spin, or is too weak.
        for i in ["1", "100000000", "-1", "x"] {
            assert!(
                c.respond(format!("r=abcS,s=c2FsdA==,i={i}").as_bytes())
                    .is_err(),
                "{i}"
            );
        }
        assert!(c.respond(b"garbage").is_err());
        // The verification before a final message was made.
        assert!(c.verify(b"v=AAAA").is_err());
    }
}
