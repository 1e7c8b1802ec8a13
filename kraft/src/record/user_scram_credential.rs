//! `UserScramCredentialRecord` (type 11) and `RemoveUserScramCredentialRecord` (type 12): one
//! user's SCRAM credential for one mechanism set or removed (KIP-554's
//! AlterUserScramCredentials, written by the controller as Kafka's `ScramControlManager`
//! does).

use super::compact::{DecodeError, Reader, Writer};

/// A user's SCRAM credential for one mechanism was set. Kafka's
/// `UserScramCredentialRecord`, version 0. The password itself is not kept: only what a
/// SCRAM server needs (RFC 5802 §3), derived from the salted password the client sent.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// name        compact string (the user)
/// mechanism   int8 (1 SCRAM-SHA-256, 2 SCRAM-SHA-512)
/// salt        compact bytes
/// stored_key  compact bytes (H(HMAC(salted password, "Client Key")))
/// server_key  compact bytes (HMAC(salted password, "Server Key"))
/// iterations  int32
/// tagged      uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserScramCredentialRecord {
    /// The user name.
    pub name: String,
    /// Kafka's `ScramMechanism` type id.
    pub mechanism: i8,
    /// The salt the client chose.
    pub salt: Vec<u8>,
    /// What a SCRAM server checks the client proof against.
    pub stored_key: Vec<u8>,
    /// What a SCRAM server signs its final message with.
    pub server_key: Vec<u8>,
    /// The PBKDF2 iteration count the salted password was made with.
    pub iterations: i32,
}

impl UserScramCredentialRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.string(&self.name);
        w.i8(self.mechanism);
        w.bytes(&self.salt);
        w.bytes(&self.stored_key);
        w.bytes(&self.server_key);
        w.i32(self.iterations);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = UserScramCredentialRecord {
            name: r.string("UserScramCredentialRecord.name")?,
            mechanism: r.i8("UserScramCredentialRecord.mechanism")?,
            salt: r.bytes("UserScramCredentialRecord.salt")?,
            stored_key: r.bytes("UserScramCredentialRecord.stored_key")?,
            server_key: r.bytes("UserScramCredentialRecord.server_key")?,
            iterations: r.i32("UserScramCredentialRecord.iterations")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}

/// A user's SCRAM credential for one mechanism was removed. Kafka's
/// `RemoveUserScramCredentialRecord`, version 0.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// name        compact string
/// mechanism   int8
/// tagged      uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveUserScramCredentialRecord {
    /// The user name.
    pub name: String,
    /// Kafka's `ScramMechanism` type id.
    pub mechanism: i8,
}

impl RemoveUserScramCredentialRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.string(&self.name);
        w.i8(self.mechanism);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rec = RemoveUserScramCredentialRecord {
            name: r.string("RemoveUserScramCredentialRecord.name")?,
            mechanism: r.i8("RemoveUserScramCredentialRecord.mechanism")?,
        };
        r.skip_tagged_fields()?;
        Ok(rec)
    }
}
