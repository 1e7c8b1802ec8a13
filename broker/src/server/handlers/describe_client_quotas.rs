//! DescribeClientQuotas (key 48, KIP-546): the quotas of the entities a filter matches,
//! answered from this node's metadata image, as Kafka's brokers answer it
//! (`ClientQuotasImage.describe`). A filter Kafka refuses gets its top-level error code and
//! message and no entries.

use strata_kraft::acl::AclOperation;
use strata_kraft::client_quotas::{FilterComponent, describe_client_quotas};
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::messages::describe_client_quotas_response::{
    EntityData, EntryData, ValueData,
};
use strata_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::RequestContext;
use crate::server::error::client_quota_error_code;

/// Matches the filter against the image's quotas.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    // Kafka's check (`KafkaApis.handleDescribeClientQuotasRequest`): DESCRIBE_CONFIGS on the
    // cluster, else the whole answer is CLUSTER_AUTHORIZATION_FAILED.
    if !ctx.authorize_cluster(AclOperation::DescribeConfigs) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return DescribeClientQuotasResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(StrBytes::from_string(e.to_string())))
            .with_entries(None);
    }
    let image = ctx.broker.image();
    let components: Vec<FilterComponent> = req
        .components
        .iter()
        .map(|c| FilterComponent {
            entity_type: c.entity_type.to_string(),
            match_type: c.match_type,
            name: c._match.as_ref().map(ToString::to_string),
        })
        .collect();
    match describe_client_quotas(&image.client_quotas, &components, req.strict) {
        Ok(matched) => {
            let entries = matched
                .into_iter()
                .map(|(entity, quotas)| {
                    EntryData::default()
                        .with_entity(
                            entity
                                .iter()
                                .map(|(t, n)| {
                                    EntityData::default()
                                        .with_entity_type(StrBytes::from_string(t.clone()))
                                        .with_entity_name(n.clone().map(StrBytes::from_string))
                                })
                                .collect(),
                        )
                        .with_values(
                            quotas
                                .iter()
                                .map(|(k, v)| {
                                    ValueData::default()
                                        .with_key(StrBytes::from_string(k.clone()))
                                        .with_value(*v)
                                })
                                .collect(),
                        )
                })
                .collect();
            DescribeClientQuotasResponse::default().with_entries(Some(entries))
        }
        Err(e) => DescribeClientQuotasResponse::default()
            .with_error_code(client_quota_error_code(&e))
            .with_error_message(Some(StrBytes::from_string(e.to_string())))
            .with_entries(None),
    }
}
