//! SCRAM credentials (KIP-554) in the metadata image: each user's credential per mechanism,
//! the controller's checks that turn AlterUserScramCredentials into
//! `UserScramCredentialRecord`s and `RemoveUserScramCredentialRecord`s, and
//! DescribeUserScramCredentials' answer, all sans-IO. The rules and messages are Kafka's
//! `ScramControlManager` (what may be written) and `ScramImage.describe` (what is told).
//!
//! The client sends the salted password (PBKDF2 output, RFC 5802 §3); the controller keeps
//! only the salt, the iteration count and the keys a SCRAM server needs, StoredKey and
//! ServerKey, derived here. Nothing derived from the password is ever described back.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use crate::record::{MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord};

/// Kafka's `ScramMechanism.SCRAM_SHA_256` type id.
pub const SCRAM_SHA_256: i8 = 1;
/// Kafka's `ScramMechanism.SCRAM_SHA_512` type id.
pub const SCRAM_SHA_512: i8 = 2;
/// The fewest PBKDF2 iterations either mechanism accepts (Kafka's
/// `ScramMechanism.minIterations`, RFC 7677's 4096).
pub const MIN_ITERATIONS: i32 = 4096;
/// The most iterations the controller accepts (Kafka's `ScramControlManager.MAX_ITERATIONS`).
pub const MAX_ITERATIONS: i32 = 16384;

/// Why one user's alteration or description was refused; the broker maps each to Kafka's
/// error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// DUPLICATE_RESOURCE: the user is altered twice in one request, whatever the mechanisms.
    #[error("A user credential cannot be altered twice in the same request")]
    AlteredTwice,
    /// UNACCEPTABLE_CREDENTIAL.
    #[error("Username must not be empty")]
    EmptyUser,
    /// UNSUPPORTED_SASL_MECHANISM.
    #[error("Unknown SCRAM mechanism")]
    UnknownMechanism { mechanism: i8 },
    /// UNACCEPTABLE_CREDENTIAL.
    #[error("Too few iterations")]
    TooFewIterations { iterations: i32 },
    /// UNACCEPTABLE_CREDENTIAL.
    #[error("Too many iterations")]
    TooManyIterations { iterations: i32 },
    /// RESOURCE_NOT_FOUND.
    #[error("Attempt to delete a user credential that does not exist")]
    DeleteUnknown,
    /// DUPLICATE_RESOURCE.
    #[error(
        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
    )]
    DescribedTwice { user: String },
    /// RESOURCE_NOT_FOUND.
    #[error("Attempt to describe a user credential that does not exist: {user}")]
    DescribeUnknown { user: String },
}

/// One stored credential: what a SCRAM server needs, never the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// Every user's credentials, by user and mechanism type id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScramCredentials {
    pub users: BTreeMap<String, BTreeMap<i8, ScramCredential>>,
}

impl ScramCredentials {
    /// Applies a `UserScramCredentialRecord` (Kafka's `ScramControlManager.replay`).
    pub fn apply_set(&mut self, r: &UserScramCredentialRecord) {
        self.users.entry(r.name.clone()).or_default().insert(
            r.mechanism,
            ScramCredential {
                salt: r.salt.clone(),
                stored_key: r.stored_key.clone(),
                server_key: r.server_key.clone(),
                iterations: r.iterations,
            },
        );
    }

    /// Applies a `RemoveUserScramCredentialRecord`; a user with no credential left is
    /// dropped. Removing what is not there changes nothing.
    pub fn apply_remove(&mut self, r: &RemoveUserScramCredentialRecord) {
        if let Some(by_mechanism) = self.users.get_mut(&r.name) {
            by_mechanism.remove(&r.mechanism);
            if by_mechanism.is_empty() {
                self.users.remove(&r.name);
            }
        }
    }

    /// The records that rebuild these credentials (for a metadata snapshot).
    #[must_use]
    pub fn records(&self) -> Vec<MetadataRecord> {
        self.users
            .iter()
            .flat_map(|(name, by_mechanism)| {
                by_mechanism.iter().map(|(mechanism, c)| {
                    MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                        name: name.clone(),
                        mechanism: *mechanism,
                        salt: c.salt.clone(),
                        stored_key: c.stored_key.clone(),
                        server_key: c.server_key.clone(),
                        iterations: c.iterations,
                    })
                })
            })
            .collect()
    }
}

/// One AlterUserScramCredentials upsertion, as the client sent it.
#[derive(Debug, Clone)]
pub struct ScramUpsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

/// One result per altered user, in the order users first appear.
pub type ScramResults = Vec<(String, Result<(), ScramError>)>;

/// One AlterUserScramCredentials deletion: a user and a mechanism type id.
pub type ScramDeletion = (String, i8);

fn check_user_and_mechanism(name: &str, mechanism: i8) -> Result<(), ScramError> {
    if name.is_empty() {
        return Err(ScramError::EmptyUser);
    }
    if !matches!(mechanism, SCRAM_SHA_256 | SCRAM_SHA_512) {
        return Err(ScramError::UnknownMechanism { mechanism });
    }
    Ok(())
}

fn check_iterations(iterations: i32) -> Result<(), ScramError> {
    if iterations < MIN_ITERATIONS {
        Err(ScramError::TooFewIterations { iterations })
    } else if iterations > MAX_ITERATIONS {
        Err(ScramError::TooManyIterations { iterations })
    } else {
        Ok(())
    }
}

/// PBKDF2's `Hi` (RFC 5802 §2.2) with the mechanism's HMAC: the salted password a client
/// derives and sends in AlterUserScramCredentials. Clients compute it; `strata admin users
/// add` and the tests need it too.
#[must_use]
pub fn salted_password(mechanism: i8, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mac = |key: &[u8], data: &[u8]| mac(mechanism, key, data);
    let mut first = salt.to_vec();
    first.extend_from_slice(&1u32.to_be_bytes());
    let mut u = mac(password, &first);
    let mut out = u.clone();
    for _ in 1..iterations {
        u = mac(password, &u);
        for (o, x) in out.iter_mut().zip(&u) {
            *o ^= x;
        }
    }
    out
}

/// The mechanism's HMAC (SHA-256 or SHA-512) of `message` under `key`: RFC 5802's
/// `HMAC`, for the SCRAM server and client.
#[must_use]
pub fn mac(mechanism: i8, key: &[u8], message: &[u8]) -> Vec<u8> {
    if mechanism == SCRAM_SHA_512 {
        hmac::<Hmac<Sha512>>(key, message)
    } else {
        hmac::<Hmac<Sha256>>(key, message)
    }
}

/// The mechanism's hash of `data`: RFC 5802's `H`.
#[must_use]
pub fn digest(mechanism: i8, data: &[u8]) -> Vec<u8> {
    if mechanism == SCRAM_SHA_512 {
        Sha512::digest(data).to_vec()
    } else {
        Sha256::digest(data).to_vec()
    }
}

fn hmac<M: Mac + hmac::digest::KeyInit>(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

/// RFC 5802 §3: StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
/// ServerKey = HMAC(SaltedPassword, "Server Key"), with the mechanism's hash.
#[must_use]
pub fn derive_keys(mechanism: i8, salted_password: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let client_key = mac(mechanism, salted_password, b"Client Key");
    (
        digest(mechanism, &client_key),
        mac(mechanism, salted_password, b"Server Key"),
    )
}

/// Kafka's `ScramControlManager.alterCredentials`: the deletions, then the upsertions, are
/// checked user by user. A user altered twice (by any mix of deletions and upsertions, of
/// any mechanisms) is DUPLICATE_RESOURCE; each user keeps the first error it met. The
/// records of every accepted alteration, and one result per user in the order users first
/// appear.
#[must_use]
pub fn alter_user_scram_credentials(
    current: &ScramCredentials,
    deletions: &[ScramDeletion],
    upsertions: &[ScramUpsertion],
) -> (Vec<MetadataRecord>, ScramResults) {
    let mut order: Vec<&str> = Vec::new();
    let mut errors: BTreeMap<&str, ScramError> = BTreeMap::new();
    let mut deletes: BTreeMap<&str, i8> = BTreeMap::new();
    let mut upserts: BTreeMap<&str, &ScramUpsertion> = BTreeMap::new();
    for (name, mechanism) in deletions {
        if !order.contains(&name.as_str()) {
            order.push(name);
        }
        if errors.contains_key(name.as_str()) {
            continue;
        }
        if deletes.remove(name.as_str()).is_some() {
            errors.insert(name, ScramError::AlteredTwice);
            continue;
        }
        let exists = current
            .users
            .get(name)
            .is_some_and(|m| m.contains_key(mechanism));
        let found = if exists {
            Ok(())
        } else {
            Err(ScramError::DeleteUnknown)
        };
        match check_user_and_mechanism(name, *mechanism).and(found) {
            Ok(()) => {
                deletes.insert(name, *mechanism);
            }
            Err(e) => {
                errors.insert(name, e);
            }
        }
    }
    for u in upsertions {
        let name = u.name.as_str();
        if !order.contains(&name) {
            order.push(name);
        }
        if errors.contains_key(name) {
            continue;
        }
        if deletes.remove(name).is_some() || upserts.remove(name).is_some() {
            errors.insert(name, ScramError::AlteredTwice);
            continue;
        }
        match check_user_and_mechanism(name, u.mechanism).and(check_iterations(u.iterations)) {
            Ok(()) => {
                upserts.insert(name, u);
            }
            Err(e) => {
                errors.insert(name, e);
            }
        }
    }
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(order.len());
    for name in order {
        if let Some(mechanism) = deletes.get(name) {
            records.push(MetadataRecord::RemoveUserScramCredential(
                RemoveUserScramCredentialRecord {
                    name: name.to_owned(),
                    mechanism: *mechanism,
                },
            ));
            results.push((name.to_owned(), Ok(())));
        } else if let Some(u) = upserts.get(name) {
            let (stored_key, server_key) = derive_keys(u.mechanism, &u.salted_password);
            records.push(MetadataRecord::UserScramCredential(
                UserScramCredentialRecord {
                    name: name.to_owned(),
                    mechanism: u.mechanism,
                    salt: u.salt.clone(),
                    stored_key,
                    server_key,
                    iterations: u.iterations,
                },
            ));
            results.push((name.to_owned(), Ok(())));
        } else if let Some(e) = errors.remove(name) {
            results.push((name.to_owned(), Err(e)));
        }
    }
    (records, results)
}

/// One described user: each mechanism it has a credential for, with the iteration count.
pub type ScramDescription = Vec<(i8, i32)>;

/// Kafka's `ScramImage.describe`: every user with a credential when `users` is `None` or
/// empty; else each named user once, in request order, a user named twice
/// DUPLICATE_RESOURCE and a user without credentials RESOURCE_NOT_FOUND.
#[must_use]
pub fn describe_user_scram_credentials(
    current: &ScramCredentials,
    users: Option<&[String]>,
) -> Vec<(String, Result<ScramDescription, ScramError>)> {
    let describe = |by_mechanism: &BTreeMap<i8, ScramCredential>| -> ScramDescription {
        by_mechanism
            .iter()
            .map(|(m, c)| (*m, c.iterations))
            .collect()
    };
    let Some(users) = users.filter(|u| !u.is_empty()) else {
        return current
            .users
            .iter()
            .map(|(name, m)| (name.clone(), Ok(describe(m))))
            .collect();
    };
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for user in users {
        if seen.contains(&user.as_str()) {
            continue;
        }
        seen.push(user);
        let result = if users.iter().filter(|u| *u == user).count() > 1 {
            Err(ScramError::DescribedTwice { user: user.clone() })
        } else {
            current
                .users
                .get(user)
                .map(describe)
                .ok_or_else(|| ScramError::DescribeUnknown { user: user.clone() })
        };
        out.push((user.clone(), result));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramUpsertion {
        ScramUpsertion {
            name: name.to_owned(),
            mechanism,
            iterations,
            salt: b"salt".to_vec(),
            salted_password: b"salted".to_vec(),
        }
    }

    fn apply(c: &mut ScramCredentials, records: &[MetadataRecord]) {
        for r in records {
            match r {
                MetadataRecord::UserScramCredential(r) => c.apply_set(r),
                MetadataRecord::RemoveUserScramCredential(r) => c.apply_remove(r),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn rfc_7677_test_vector_keys() {
        // RFC 7677 §3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096
        // iterations; the server signature it lists follows from this ServerKey.
        let salted = [
            0xc4, 0xa4, 0x95, 0x10, 0x32, 0x3a, 0xb4, 0xf9, 0x52, 0xca, 0xc1, 0xfa, 0x99, 0x44,
            0x19, 0x39, 0xe7, 0x8e, 0xa7, 0x4d, 0x6b, 0xe8, 0x1d, 0xdf, 0x70, 0x96, 0xe8, 0x75,
            0x13, 0xdc, 0x61, 0x5d,
        ];
        let (stored, server) = derive_keys(SCRAM_SHA_256, &salted);
        assert_eq!(stored.len(), 32);
        assert_eq!(server.len(), 32);
        assert_ne!(stored, server);
        let (stored512, _) = derive_keys(SCRAM_SHA_512, &salted);
        assert_eq!(stored512.len(), 64);
    }

    #[test]
    fn upsert_describe_and_delete() {
        let mut c = ScramCredentials::default();
        let (records, results) =
            alter_user_scram_credentials(&c, &[], &[upsert("alice", SCRAM_SHA_256, 8192)]);
        assert_eq!(results, vec![("alice".to_owned(), Ok(()))]);
        apply(&mut c, &records);
        let d = describe_user_scram_credentials(&c, Some(&["alice".to_owned()]));
        assert_eq!(
            d,
            vec![("alice".to_owned(), Ok(vec![(SCRAM_SHA_256, 8192)]))]
        );
        let (records, results) =
            alter_user_scram_credentials(&c, &[("alice".to_owned(), SCRAM_SHA_256)], &[]);
        assert_eq!(results, vec![("alice".to_owned(), Ok(()))]);
        apply(&mut c, &records);
        assert!(c.users.is_empty());
        let d = describe_user_scram_credentials(&c, Some(&["alice".to_owned()]));
        assert!(matches!(d[0].1, Err(ScramError::DescribeUnknown { .. })));
    }

    #[test]
    fn kafkas_checks() {
        let c = ScramCredentials::default();
        let one = |u: ScramUpsertion| alter_user_scram_credentials(&c, &[], &[u]).1[0].1.clone();
        assert_eq!(
            one(upsert("", SCRAM_SHA_256, 4096)),
            Err(ScramError::EmptyUser)
        );
        assert!(matches!(
            one(upsert("a", 3, 4096)),
            Err(ScramError::UnknownMechanism { .. })
        ));
        assert!(matches!(
            one(upsert("a", SCRAM_SHA_512, 4095)),
            Err(ScramError::TooFewIterations { .. })
        ));
        assert!(matches!(
            one(upsert("a", SCRAM_SHA_512, 16385)),
            Err(ScramError::TooManyIterations { .. })
        ));
        assert_eq!(one(upsert("a", SCRAM_SHA_512, 16384)), Ok(()));
        // Two mechanisms of one user in one request: a duplicate, nothing written.
        let (records, results) = alter_user_scram_credentials(
            &c,
            &[],
            &[
                upsert("a", SCRAM_SHA_256, 4096),
                upsert("a", SCRAM_SHA_512, 4096),
            ],
        );
        assert!(records.is_empty());
        assert_eq!(
            results,
            vec![("a".to_owned(), Err(ScramError::AlteredTwice))]
        );
        let (_, results) = alter_user_scram_credentials(&c, &[("a".to_owned(), 1)], &[]);
        assert_eq!(results[0].1, Err(ScramError::DeleteUnknown));
        let d = describe_user_scram_credentials(&c, Some(&["x".to_owned(), "x".to_owned()]));
        assert!(matches!(d[0].1, Err(ScramError::DescribedTwice { .. })));
        assert_eq!(d.len(), 1);
    }
}
