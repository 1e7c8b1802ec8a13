//! AlterUserScramCredentials (key 51, KIP-554): upserts and deletes users' SCRAM
//! credentials as `UserScramCredentialRecord`s and `RemoveUserScramCredentialRecord`s in the
//! metadata log, so they survive restarts and reach every node. A node that is not the active
//! controller forwards the request (`forward.rs`), as Kafka's brokers do.
//!
//! The checks are Kafka's `ScramControlManager`: an empty user is UNACCEPTABLE_CREDENTIAL, an
//! unknown mechanism UNSUPPORTED_SASL_MECHANISM, fewer than 4096 or more than 16384
//! iterations UNACCEPTABLE_CREDENTIAL, deleting a credential that does not exist
//! RESOURCE_NOT_FOUND, and a user altered twice in one request DUPLICATE_RESOURCE. One result
//! per user. The client needs ALTER on the cluster. The controller keeps the salt, the
//! iteration count and the derived StoredKey and ServerKey, never the salted password.
//!
//! Strata stores the credentials but does not authenticate with them yet (it has no SASL).

use strata_kraft::acl::AclOperation;
use strata_kraft::scram::ScramUpsertion;
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use strata_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ResponseKind,
};

use super::RequestContext;
use crate::server::error::{metadata_error_code, scram_error_code};

/// Applies the alterations and answers one result per user.
#[must_use]
pub async fn handle(
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let deletions: Vec<(String, i8)> = req
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism))
        .collect();
    let upsertions: Vec<ScramUpsertion> = req
        .upsertions
        .iter()
        .map(|u| ScramUpsertion {
            name: u.name.to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    // Every user once, in the order of the request, for answers that cover them all.
    let mut users: Vec<&str> = Vec::new();
    for name in deletions
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(upsertions.iter().map(|u| u.name.as_str()))
    {
        if !users.contains(&name) {
            users.push(name);
        }
    }
    let all = |code: i16, message: String| {
        AlterUserScramCredentialsResponse::default().with_results(
            users
                .iter()
                .map(|u| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string((*u).to_owned()))
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_string(message.clone())))
                })
                .collect(),
        )
    };
    if !ctx.authorize_cluster(AclOperation::Alter) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return all(e.code(), e.to_string());
    }
    match ctx
        .broker
        .alter_user_scram_credentials(&deletions, &upsertions)
        .await
    {
        Ok(results) => AlterUserScramCredentialsResponse::default().with_results(
            results
                .into_iter()
                .map(|(user, outcome)| {
                    let result = AlterUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(user));
                    match outcome {
                        Ok(()) => result,
                        Err(e) => result
                            .with_error_code(scram_error_code(&e))
                            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                    }
                })
                .collect(),
        ),
        Err(e) => all(metadata_error_code(&e), e.to_string()),
    }
}

/// [`handle`] as a [`ResponseKind`], the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> ResponseKind {
    ResponseKind::AlterUserScramCredentials(handle(&ctx, req).await)
}
