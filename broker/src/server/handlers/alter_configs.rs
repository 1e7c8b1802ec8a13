//! AlterConfigs (key 33), the legacy non-incremental API: each topic resource *replaces*
//! the topic's whole set of overrides. Keys it names are set; overrides it does not name
//! are removed, so they revert to their defaults (Kafka's
//! `ConfigurationControlManager.legacyAlterConfigs`).
//!
//! Checks before anything is written, as Kafka's broker makes them
//! (`ConfigAdminManager.preprocess`): a resource named twice is INVALID_REQUEST for each of
//! its copies, a repeated key or a null value INVALID_REQUEST for its resource, and a
//! resource type other than topic or broker (BROKER_LOGGER included: the legacy API never
//! had it) INVALID_REQUEST. Values are validated and written exactly as
//! IncrementalAlterConfigs does (`incremental_alter_configs::write_topic_configs`); a
//! broker resource's set likewise replaces its dynamic broker configs
//! (`incremental_alter_configs::write_broker_configs`). With `validate_only` everything is
//! checked and nothing is written.

use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use strata_protocol::StrBytes;
use strata_protocol::messages::alter_configs_request::AlterConfigsResource;
use strata_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use strata_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::RequestContext;
use super::incremental_alter_configs::{
    ConfigRefusal, RESOURCE_BROKER, RESOURCE_TOPIC, broker_overrides, topic_overrides,
    write_broker_configs, write_topic_configs,
};
use crate::server::error::config_refusal_code;

/// Replaces each resource's configs independently and answers one result per resource.
#[must_use]
pub async fn handle(ctx: &RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut times: HashMap<(i8, String), usize> = HashMap::new();
    for r in &req.resources {
        *times
            .entry((r.resource_type, r.resource_name.to_string()))
            .or_default() += 1;
    }
    let times = &times;
    let responses = futures_util::stream::iter(req.resources)
        .then(|res| async move {
            let repeated = times
                .get(&(res.resource_type, res.resource_name.to_string()))
                .is_some_and(|n| *n > 1);
            let outcome = if repeated {
                Err(ConfigRefusal::InvalidRequest(
                    "Each resource must appear at most once.".to_owned(),
                ))
            } else {
                alter(ctx, &res, req.validate_only).await
            };
            let (code, message) = match outcome {
                Ok(()) => (0, None),
                Err(e) => (
                    config_refusal_code(&e),
                    Some(StrBytes::from_string(e.to_string())),
                ),
            };
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name)
        })
        .collect::<Vec<_>>()
        .await;
    AlterConfigsResponse::default().with_responses(responses)
}

async fn alter(
    ctx: &RequestContext,
    res: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ConfigRefusal> {
    let mut seen = BTreeSet::new();
    if !res.configs.iter().all(|c| seen.insert(c.name.to_string())) {
        return Err(ConfigRefusal::InvalidRequest(
            "Error due to duplicate config keys".to_owned(),
        ));
    }
    let nulls: Vec<String> = res
        .configs
        .iter()
        .filter(|c| c.value.is_none())
        .map(|c| c.name.to_string())
        .collect();
    if !nulls.is_empty() {
        return Err(ConfigRefusal::InvalidRequest(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    let name = res.resource_name.to_string();
    // The set replaces the resource's: what the request does not name reverts.
    let replace = |current: BTreeMap<String, String>| {
        let mut changes: Vec<(String, Option<String>)> = res
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.as_ref().map(ToString::to_string),
                )
            })
            .collect();
        changes.extend(
            current
                .into_keys()
                .filter(|k| !seen.contains(k))
                .map(|k| (k, None)),
        );
        changes
    };
    match res.resource_type {
        RESOURCE_TOPIC => {
            let changes = replace(topic_overrides(ctx, &name)?);
            write_topic_configs(ctx, &name, &changes, validate_only).await
        }
        RESOURCE_BROKER => {
            let changes = replace(broker_overrides(ctx, &name));
            write_broker_configs(ctx, &name, &changes, validate_only).await
        }
        other => Err(ConfigRefusal::InvalidRequest(format!(
            "Unknown resource type {other}"
        ))),
    }
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: AlterConfigsRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::AlterConfigs(handle(&ctx, req).await)
}
