//! SASL tokens and the security configuration parsers: nothing a client sends during
//! authentication, and no configuration value, may panic the broker.
//! Run: RUSTC_BOOTSTRAP=1 cargo fuzz run sasl -s none
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata_broker::security::sasl::{Authenticator, Mechanism, SaslSettings};
use strata_broker::security::scram::ScramMechanism;
use strata_broker::security::{jaas, oauth, principal};

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let settings = Arc::new(SaslSettings {
        mechanisms: vec![
            Mechanism::Plain,
            Mechanism::Scram(ScramMechanism::Sha256),
            Mechanism::Scram(ScramMechanism::Sha512),
            Mechanism::OAuthBearer,
        ],
        plain_users: [("alice".to_owned(), "pw".to_owned())].into(),
        max_reauth_ms: 1000,
        oauth: Some(oauth::Validator::Unsecured {
            principal_claim: "sub".into(),
            skew_ms: 0,
        }),
    });
    let mech = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]
        [usize::from(choice % 5)];
    let m = ScramMechanism::Sha256;
    let cred = m.credential(&m.salted_password(b"pw", b"salt", 4096), b"salt", 4096);
    let mut a = Authenticator::new(settings);
    a.handshake(i16::from(choice >> 7), mech);
    // Tokens: the rest, split at 0xFF bytes.
    for token in rest.split(|b| *b == 0xFF).take(4) {
        let c = cred.clone();
        a.token(token, 0, move |_, _| Some(c));
    }
    if let Ok(s) = std::str::from_utf8(rest) {
        let _ = jaas::parse(s);
        if let Ok(m) = principal::SslPrincipalMapper::parse(s) {
            let _ = m.map(s);
        }
    }
});
