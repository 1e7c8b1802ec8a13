//! AlterClientQuotas (key 49, KIP-546): sets and removes the quotas of user and client-id
//! entities (a null name is the type's default) as `ClientQuotaRecord`s in the metadata
//! log, so they survive restarts and reach every node. A node that is not the active
//! controller forwards the request (`forward.rs`), as Kafka's brokers do.
//!
//! Every entry is checked on its own (`strata_kraft::client_quotas`): an unknown entity
//! type, an empty name, a key the entity does not have, a byte rate that is not a whole
//! number or not positive, a key or an entity named twice are INVALID_REQUEST for that
//! entry, and nothing of it is written. The entries that pass are written as one batch;
//! with `validate_only` nothing is.

use strata_kraft::acl::AclOperation;
use strata_kraft::client_quotas::QuotaAlteration;
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use strata_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};

use super::RequestContext;
use crate::server::error::{client_quota_error_code, metadata_error_code};

/// Applies the request's entries and answers one result per entry, in request order.
#[must_use]
pub async fn handle(
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let alterations: Vec<QuotaAlteration> = req
        .entries
        .iter()
        .map(|e| {
            (
                e.entity
                    .iter()
                    .map(|p| {
                        (
                            p.entity_type.to_string(),
                            p.entity_name.as_ref().map(ToString::to_string),
                        )
                    })
                    .collect(),
                e.ops
                    .iter()
                    .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
                    .collect(),
            )
        })
        .collect();
    // Kafka's check (`ControllerApis.handleAlterClientQuotas`): ALTER_CONFIGS on the cluster,
    // else every entry is CLUSTER_AUTHORIZATION_FAILED and nothing is applied. A forwarded
    // request is checked here, on the quorum's leader, as its original principal.
    let outcomes: Vec<(i16, Option<String>)> = if !ctx.authorize_cluster(AclOperation::AlterConfigs)
    {
        let e = ResponseError::ClusterAuthorizationFailed;
        vec![(e.code(), Some(e.to_string())); alterations.len()]
    } else {
        match ctx
            .broker
            .alter_client_quotas(&alterations, req.validate_only)
            .await
        {
            Ok(results) => results
                .into_iter()
                .map(|r| match r {
                    Ok(()) => (0, None),
                    Err(e) => (client_quota_error_code(&e), Some(e.to_string())),
                })
                .collect(),
            Err(e) => {
                let answer = (metadata_error_code(&e), Some(e.to_string()));
                vec![answer; alterations.len()]
            }
        }
    };
    let entries = req
        .entries
        .into_iter()
        .zip(outcomes)
        .map(|(e, (code, message))| {
            EntryData::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_entity(
                    e.entity
                        .into_iter()
                        .map(|p| {
                            EntityData::default()
                                .with_entity_type(p.entity_type)
                                .with_entity_name(p.entity_name)
                        })
                        .collect(),
                )
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: AlterClientQuotasRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::AlterClientQuotas(handle(&ctx, req).await)
}
