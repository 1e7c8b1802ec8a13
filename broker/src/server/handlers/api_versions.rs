//! ApiVersions (key 18): the versions table, built from `strata_protocol::versions`.

use strata_protocol::codec::api_versions_body;
use strata_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::RequestContext;

/// Answers with every supported API. Versions newer than we serve never reach this handler:
/// the codec answers them with the KIP-511 fallback.
#[must_use]
pub fn handle(_ctx: &RequestContext, _req: ApiVersionsRequest) -> ApiVersionsResponse {
    // No finalized features and no supported features are sent: librdkafka before 2.2 cannot
    // skip top-level tagged fields, and the codec omits tagged fields holding defaults.
    api_versions_body(0)
}
