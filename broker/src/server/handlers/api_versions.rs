//! ApiVersions (key 18): the versions table, built from `strata_protocol::versions`, and
//! the one feature clients act on, `transaction.version`.
//!
//! Kafka 4's Java producer runs transaction version 2 (KIP-890: no AddPartitionsToTxn or
//! AddOffsetsToTxn, an epoch bump at every EndTxn) exactly when the finalized level of
//! `transaction.version` is 2 or more, and sends EndTxn v5, Produce v12 and TxnOffsetCommit v5
//! then; the API ranges do not depend on the level, as in Kafka. The feature goes in
//! ApiVersions v3's tagged fields as Kafka sends it:
//! - `SupportedFeatures`: `transaction.version` 0..=2, for v4 requests only (Kafka leaves a
//!   feature whose minimum is 0 out of older answers, KAFKA-17492);
//! - `FinalizedFeatures`: the level, when it is not 0, with `FinalizedFeaturesEpoch`
//!   ([`crate::broker::Broker::features_epoch`]).
//!
//! The KIP-511 fallback (an unknown ApiVersions version) is the codec's, without features.

use strata_protocol::codec::api_versions_body;
use strata_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use strata_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::RequestContext;

/// The feature's name, as Kafka's `TransactionVersion.FEATURE_NAME`.
pub const TRANSACTION_VERSION: &str = "transaction.version";
/// The newest `transaction.version` level Strata serves.
pub const MAX_TRANSACTION_VERSION: i16 = 2;

/// Answers with every supported API and the transaction feature.
#[must_use]
pub fn handle(ctx: &RequestContext, _req: ApiVersionsRequest) -> ApiVersionsResponse {
    let body = api_versions_body(0);
    if ctx.api_version < 3 {
        return body;
    }
    let level = ctx.broker.config.transaction_version;
    let mut body = body;
    if ctx.api_version >= 4 {
        body = body.with_supported_features(vec![
            SupportedFeatureKey::default()
                .with_name(TRANSACTION_VERSION.into())
                .with_min_version(0)
                .with_max_version(MAX_TRANSACTION_VERSION),
        ]);
    }
    if level > 0 {
        body = body
            .with_finalized_features_epoch(ctx.broker.features_epoch)
            .with_finalized_features(vec![
                FinalizedFeatureKey::default()
                    .with_name(TRANSACTION_VERSION.into())
                    .with_min_version_level(level)
                    .with_max_version_level(level),
            ]);
    }
    body
}
