//! DescribeUserScramCredentials (key 50, KIP-554): each user's SCRAM mechanisms and
//! iteration counts from the metadata image, never the salt or keys. No users (or a null
//! list) describes every user with a credential; a user named twice is DUPLICATE_RESOURCE and
//! a user without one RESOURCE_NOT_FOUND (Kafka's `ScramImage.describe`). The client needs
//! DESCRIBE on the cluster (Kafka's `KafkaApis`).
//!
//! Strata stores the credentials but does not authenticate with them yet (it has no SASL).

use strata_kraft::acl::AclOperation;
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use strata_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::RequestContext;
use crate::server::error::scram_error_code;

/// Describes the requested users' credentials.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let users: Option<Vec<String>> = req
        .users
        .map(|us| us.iter().map(|u| u.name.to_string()).collect());
    if !ctx.authorize_cluster(AclOperation::Describe) {
        let e = ResponseError::ClusterAuthorizationFailed;
        let message = Some(StrBytes::from_string(e.to_string()));
        let results = users
            .unwrap_or_default()
            .into_iter()
            .map(|u| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(u))
                    .with_error_code(e.code())
                    .with_error_message(message.clone())
            })
            .collect();
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(e.code())
            .with_error_message(message)
            .with_results(results);
    }
    let image = ctx.broker.image();
    let described =
        strata_kraft::scram::describe_user_scram_credentials(&image.scram, users.as_deref());
    let results = described
        .into_iter()
        .map(|(user, outcome)| {
            let result = DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user));
            match outcome {
                Ok(infos) => result.with_credential_infos(
                    infos
                        .into_iter()
                        .map(|(mechanism, iterations)| {
                            CredentialInfo::default()
                                .with_mechanism(mechanism)
                                .with_iterations(iterations)
                        })
                        .collect(),
                ),
                Err(e) => result
                    .with_error_code(scram_error_code(&e))
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
