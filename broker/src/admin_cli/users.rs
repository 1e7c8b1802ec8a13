//! `strata admin users`: SCRAM credentials (Kafka's `kafka-configs.sh --entity-type users
//! --alter --add-config 'SCRAM-SHA-256=[...]'`), with DescribeUserScramCredentials and
//! AlterUserScramCredentials (KIP-554). The password is salted here, as Kafka's tools do:
//! the broker receives the salt, the iteration count and the salted password, never the
//! password itself.

use anyhow::bail;
use strata_kraft::scram::{SCRAM_SHA_256, SCRAM_SHA_512};
use strata_protocol::StrBytes;
use strata_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use strata_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, DescribeUserScramCredentialsRequest, RequestKind,
    ResponseKind,
};

use super::args::Args;
use super::client::{Client, describe_error};
use super::table::Table;

pub const USAGE: &str = "\
strata admin users list
strata admin users add --user U --password P [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations 4096]
strata admin users remove --user U [--mechanism SCRAM-SHA-256|SCRAM-SHA-512]";

/// Runs `users <action> ...`.
///
/// # Errors
///
/// A bad command line, an unreachable broker, or any error a broker answered.
pub fn run(client: &mut Client, args: &[String]) -> anyhow::Result<()> {
    let a = Args::parse(
        args,
        &["--user", "--password", "--mechanism", "--iterations"],
        &[],
    )?;
    match a.positional.first().map(String::as_str) {
        Some("list") => list(client),
        Some("add") => add(client, &a),
        Some("remove") => remove(client, &a),
        _ => bail!("usage:\n{USAGE}"),
    }
}

fn mechanism(a: &Args) -> anyhow::Result<i8> {
    match a.value("--mechanism").unwrap_or("SCRAM-SHA-256") {
        "SCRAM-SHA-256" => Ok(SCRAM_SHA_256),
        "SCRAM-SHA-512" => Ok(SCRAM_SHA_512),
        other => bail!("--mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, not {other:?}"),
    }
}

fn mechanism_name(m: i8) -> &'static str {
    match m {
        SCRAM_SHA_256 => "SCRAM-SHA-256",
        SCRAM_SHA_512 => "SCRAM-SHA-512",
        _ => "UNKNOWN",
    }
}

fn list(client: &mut Client) -> anyhow::Result<()> {
    let ResponseKind::DescribeUserScramCredentials(r) = client.send_any(
        ApiKey::DescribeUserScramCredentials,
        RequestKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsRequest::default().with_users(None),
        ),
    )?
    else {
        bail!("DescribeUserScramCredentials was not answered with DescribeUserScramCredentials");
    };
    if r.error_code != 0 {
        bail!("{}", describe_error(r.error_code, r.error_message.as_ref()));
    }
    let mut table = Table::new(&["USER", "MECHANISM", "ITERATIONS"]);
    for u in r.results {
        for c in u.credential_infos {
            table.row(vec![
                u.user.to_string(),
                mechanism_name(c.mechanism).to_owned(),
                c.iterations.to_string(),
            ]);
        }
    }
    table.print();
    Ok(())
}

fn alter(client: &mut Client, req: AlterUserScramCredentialsRequest) -> anyhow::Result<()> {
    let ResponseKind::AlterUserScramCredentials(r) = client.send_any(
        ApiKey::AlterUserScramCredentials,
        RequestKind::AlterUserScramCredentials(req),
    )?
    else {
        bail!("AlterUserScramCredentials was not answered with AlterUserScramCredentials");
    };
    for result in r.results {
        if result.error_code != 0 {
            bail!(
                "user {}: {}",
                result.user,
                describe_error(result.error_code, result.error_message.as_ref())
            );
        }
    }
    Ok(())
}

fn add(client: &mut Client, a: &Args) -> anyhow::Result<()> {
    let user = a.required("--user")?;
    let password = a.required("--password")?;
    let m = mechanism(a)?;
    let iterations: i32 = a.number("--iterations")?.unwrap_or(4096);
    let salt: [u8; 32] = rand::random();
    let salted = strata_kraft::scram::salted_password(
        m,
        password.as_bytes(),
        &salt,
        u32::try_from(iterations).unwrap_or(0),
    );
    alter(
        client,
        AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            ScramCredentialUpsertion::default()
                .with_name(StrBytes::from_string(user.to_owned()))
                .with_mechanism(m)
                .with_iterations(iterations)
                .with_salt(salt.to_vec().into())
                .with_salted_password(salted.into()),
        ]),
    )?;
    eprintln!("{} credential of user {user} set", mechanism_name(m));
    Ok(())
}

fn remove(client: &mut Client, a: &Args) -> anyhow::Result<()> {
    let user = a.required("--user")?;
    let m = mechanism(a)?;
    alter(
        client,
        AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(StrBytes::from_string(user.to_owned()))
                .with_mechanism(m),
        ]),
    )?;
    eprintln!("{} credential of user {user} removed", mechanism_name(m));
    Ok(())
}
