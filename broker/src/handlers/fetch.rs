//! Fetch (key 1): read whole batches from each partition's log up to the high watermark, and
//! long-poll until `min_bytes` are available or `max_wait_ms` passes.
//!
//! Fetch sessions (KIP-227) are answered sessionless: a request that asks for a new session
//! (id 0, epoch 0) gets session id 0, which tells the client to keep sending full requests;
//! a request naming a session we never created gets FETCH_SESSION_ID_NOT_FOUND.
//!
//! Only the partition's leader in the metadata image serves a consumer's fetch, and the
//! fetch's `current_leader_epoch` (v9+, KIP-320) must match the image's leader epoch; a
//! v16 answer of NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the current leader and
//! its endpoint (KIP-951).
//!
//! Records are never copied here (ARCHITECTURE.md decision 4): each partition's answer is the
//! file regions `Log::read` returns, and [`encode`] turns the response into a plan of encoded
//! bytes around those regions, which the connection writer sends with `sendfile`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::select_all;
use strata_kraft::MetadataImage;
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::fetch_plan::{self, ResponsePlan};
use strata_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use strata_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use strata_storage::FileRegion;
use tokio::time::Instant;

use super::RequestContext;
use crate::error::{leadership_error_code, log_error_code};
use crate::partition::Partition;
use crate::partition::leadership::{self, LeaderEndpoint};

/// KIP-447: read_committed. With no transactions yet, the last stable offset is the high
/// watermark, and the aborted-transaction list is empty.
const READ_COMMITTED: i8 = 1;

/// One requested partition, resolved.
struct Wanted {
    topic_slot: usize,
    index: i32,
    fetch_offset: i64,
    partition_max_bytes: i32,
    partition: Result<Arc<Partition>, i16>,
    /// KIP-951 (v16): where the client should fetch instead, with the error.
    current_leader: Option<LeaderIdAndEpoch>,
}

/// A fetch's answer: the response with its records fields left out, and each partition's
/// records as file regions, in response order (topics in order, then their partitions).
pub struct Fetched {
    /// Everything but the records.
    pub response: FetchResponse,
    /// One list of regions per partition in `response`.
    pub records: Vec<Vec<FileRegion>>,
}

/// Answers a fetch, parking until enough bytes arrive.
pub async fn handle(ctx: &RequestContext, req: FetchRequest) -> Fetched {
    answer(ctx, &ctx.broker.image(), req).await
}

/// [`handle`] against a given metadata image: who leads each partition, at which epoch.
async fn answer(ctx: &RequestContext, image: &MetadataImage, req: FetchRequest) -> Fetched {
    let version = ctx.api_version;
    if version >= 7 && (req.session_id != 0 || req.session_epoch > 0) {
        return Fetched {
            response: FetchResponse::default()
                .with_error_code(ResponseError::FetchSessionIdNotFound.code())
                .with_session_id(0),
            records: Vec::new(),
        };
    }
    let mut topics: Vec<FetchableTopicResponse> = Vec::with_capacity(req.topics.len());
    let mut wanted = Vec::new();
    // KIP-951: the endpoints of the leaders named in `current_leader`, by node id.
    let mut node_endpoints: BTreeMap<i32, LeaderEndpoint> = BTreeMap::new();
    for t in &req.topics {
        let name = if version >= 13 {
            image.topic_by_id(t.topic_id).map(|ti| ti.name.clone())
        } else {
            Some(t.topic.0.to_string())
        };
        let mut resp = FetchableTopicResponse::default();
        if version >= 13 {
            resp = resp.with_topic_id(t.topic_id);
        } else {
            resp = resp.with_topic(t.topic.clone());
        }
        let slot = topics.len();
        topics.push(resp);
        for p in &t.partitions {
            let mut current_leader = None;
            let partition = match &name {
                None => Err(ResponseError::UnknownTopicId.code()),
                Some(n) => leadership::leader_partition(
                    &ctx.broker,
                    image,
                    n,
                    p.partition,
                    p.current_leader_epoch,
                )
                .map(|led| led.partition)
                .map_err(|e| {
                    if version >= 16 && leadership::redirects(e, true) {
                        let leader = leadership::current_leader(image, n, p.partition);
                        current_leader = Some(
                            LeaderIdAndEpoch::default()
                                .with_leader_id(BrokerId(leader.leader_id))
                                .with_leader_epoch(leader.leader_epoch),
                        );
                        if let Some(endpoint) = leader.endpoint {
                            node_endpoints.insert(endpoint.node_id, endpoint);
                        }
                    }
                    leadership_error_code(e)
                }),
            };
            wanted.push(Wanted {
                topic_slot: slot,
                index: p.partition,
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes,
                partition,
                current_leader,
            });
        }
    }
    let deadline =
        Instant::now() + Duration::from_millis(u64::try_from(req.max_wait_ms.max(0)).unwrap_or(0));
    let min_bytes = i64::from(req.min_bytes.max(0));
    let max_bytes = u32::try_from(req.max_bytes.max(0)).unwrap_or(0);
    let node_endpoints: Vec<NodeEndpoint> = node_endpoints
        .into_values()
        .map(|e| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(e.node_id))
                .with_host(StrBytes::from_string(e.host))
                .with_port(e.port)
                .with_rack(e.rack.map(StrBytes::from_string))
        })
        .collect();
    loop {
        // Subscribe before reading, so an append between the read and the wait still wakes us.
        let mut watchers: Vec<_> = wanted
            .iter()
            .filter_map(|w| w.partition.as_ref().ok())
            .map(|p| p.subscribe())
            .collect();
        let (parts, bytes, errors) = read_all(&wanted, max_bytes, req.isolation_level);
        if bytes >= min_bytes || errors || Instant::now() >= deadline {
            let mut topics = topics;
            let mut records = Vec::with_capacity(parts.len());
            // `wanted` runs topic by topic in slot order, so pushing in its order keeps the
            // region lists in response order.
            for (w, (pd, regions)) in wanted.iter().zip(parts) {
                crate::metrics::record_fetch(w.partition.as_ref().ok(), &regions);
                topics[w.topic_slot].partitions.push(pd);
                records.push(regions);
            }
            return Fetched {
                response: FetchResponse::default()
                    .with_session_id(0)
                    .with_responses(topics)
                    .with_node_endpoints(node_endpoints),
                records,
            };
        }
        let _parked = crate::metrics::fetch_parked();
        let changed = watchers
            .iter_mut()
            .map(|w| Box::pin(w.changed()))
            .collect::<Vec<_>>();
        if changed.is_empty() {
            tokio::time::sleep_until(deadline).await;
        } else {
            tokio::select! {
                _ = select_all(changed) => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// Encodes a fetch's answer as a response plan. An encoding failure is a broker bug: it is
/// logged and the connection closes, since the client would otherwise wait forever.
pub fn encode(ctx: &RequestContext, fetched: Fetched) -> Option<ResponsePlan<FileRegion>> {
    match fetch_plan::encode_fetch_plan(
        ctx.api_version,
        ctx.correlation_id,
        fetched.response,
        fetched.records,
    ) {
        Ok(plan) => Some(plan),
        Err(e) => {
            tracing::error!(error = %e, "fetch response encoding failed");
            None
        }
    }
}

/// One partition's answer: its fields, and its records as regions.
type PartitionAnswer = (PartitionData, Vec<FileRegion>);

/// Reads every partition once. Returns the partition answers in request order, the bytes
/// read, and whether any partition has an error (an error answers at once, as in Kafka).
fn read_all(
    wanted: &[Wanted],
    max_bytes: u32,
    isolation_level: i8,
) -> (Vec<PartitionAnswer>, i64, bool) {
    let mut remaining = max_bytes;
    let mut total: i64 = 0;
    let mut any_error = false;
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let mut pd = PartitionData::default()
            .with_partition_index(w.index)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_preferred_read_replica((-1).into());
        let p = match &w.partition {
            Ok(p) => p,
            Err(code) => {
                any_error = true;
                if let Some(leader) = &w.current_leader {
                    pd = pd.with_current_leader(leader.clone());
                }
                out.push((pd.with_error_code(*code), Vec::new()));
                continue;
            }
        };
        let hw = p.high_watermark();
        pd = pd
            .with_high_watermark(hw)
            .with_last_stable_offset(hw)
            .with_log_start_offset(p.log_start_offset());
        if isolation_level == READ_COMMITTED {
            pd = pd.with_aborted_transactions(Some(Vec::new()));
        }
        let limit = remaining.min(u32::try_from(w.partition_max_bytes.max(0)).unwrap_or(0));
        // Kafka's rule: the first batch of the response is returned whole even when it exceeds
        // the limits, so that a consumer can always make progress.
        let min_one = total == 0;
        match p.read(w.fetch_offset, limit, min_one) {
            Ok(r) => {
                let n = u32::try_from(r.bytes).unwrap_or(u32::MAX);
                remaining = remaining.saturating_sub(n);
                total += i64::from(n);
                out.push((pd, r.regions));
            }
            Err(e) => {
                any_error = true;
                // Kafka answers an error with empty records, never null: librdkafka rejects a
                // null record set as a parse failure and never applies auto.offset.reset. The
                // plan writes an empty record set for a partition without regions.
                out.push((pd.with_error_code(log_error_code(&e)), Vec::new()));
            }
        }
    }
    (out, total, any_error)
}

#[cfg(test)]
mod tests {
    use strata_protocol::messages::ApiKey;
    use strata_protocol::messages::fetch_request::{FetchPartition, FetchTopic};

    use super::*;
    use crate::partition::leadership::fixture::{self, OTHER};

    fn request(image: &MetadataImage, version: i16, current_leader_epoch: i32) -> FetchRequest {
        let topic = &image.topics["t"];
        let t = FetchTopic::default().with_partitions(vec![
            FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current_leader_epoch)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20),
        ]);
        let t = if version >= 13 {
            t.with_topic_id(topic.topic_id)
        } else {
            t.with_topic(strata_protocol::messages::TopicName(StrBytes::from_string(
                topic.name.clone(),
            )))
        };
        FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![t])
    }

    /// (error code, current leader id and epoch, endpoints named) of the one partition.
    async fn fetch(
        ctx: &RequestContext,
        image: &MetadataImage,
        current_leader_epoch: i32,
    ) -> (i16, (i32, i32), Vec<i32>) {
        let f = answer(
            ctx,
            image,
            request(image, ctx.api_version, current_leader_epoch),
        )
        .await;
        let p = &f.response.responses[0].partitions[0];
        (
            p.error_code,
            (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
            f.response
                .node_endpoints
                .iter()
                .map(|e| e.node_id.0)
                .collect(),
        )
    }

    /// KIP-320's epoch check comes before the leadership check (Kafka's
    /// `Partition.getLocalLog`); a v16 answer to NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    /// names the current leader and its endpoint (KIP-951), older versions do not.
    #[tokio::test]
    async fn the_epoch_is_checked_before_leadership_and_v16_names_the_leader() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t");
        let node = broker.config.node_id;
        let elsewhere = fixture::led_by(&broker, "t", OTHER, 5);
        let here = fixture::led_by(&broker, "t", node, 5);
        let none = (-1, -1);
        let v16 = fixture::ctx(&broker, ApiKey::Fetch, 16);
        let v12 = fixture::ctx(&broker, ApiKey::Fetch, 12);
        assert_eq!(
            fetch(&v16, &elsewhere, -1).await,
            (6, (OTHER, 5), vec![OTHER])
        );
        assert_eq!(
            fetch(&v16, &elsewhere, 5).await,
            (6, (OTHER, 5), vec![OTHER])
        );
        assert_eq!(
            fetch(&v16, &elsewhere, 4).await,
            (74, (OTHER, 5), vec![OTHER])
        );
        assert_eq!(fetch(&v16, &elsewhere, 6).await, (75, none, vec![]));
        assert_eq!(fetch(&v12, &elsewhere, 5).await, (6, none, vec![]));
        assert_eq!(fetch(&v12, &elsewhere, 4).await, (74, none, vec![]));
        // The leader: its own epoch, or none, is served; an older one is fenced.
        assert_eq!(fetch(&v16, &here, 5).await, (0, none, vec![]));
        assert_eq!(fetch(&v16, &here, -1).await, (0, none, vec![]));
        assert_eq!(fetch(&v16, &here, 4).await, (74, (node, 5), vec![node]));
        assert_eq!(fetch(&v16, &here, 6).await, (75, none, vec![]));
        let v9 = fixture::ctx(&broker, ApiKey::Fetch, 9);
        assert_eq!(fetch(&v9, &here, 4).await, (74, none, vec![]));
    }

    /// The redirect survives the zero-copy encoder: what goes on the wire decodes to the
    /// current leader and its endpoint.
    #[tokio::test]
    async fn the_v16_redirect_is_on_the_wire() {
        use bytes::Buf;
        use strata_protocol::fetch_plan::Piece;
        use strata_protocol::messages::ResponseKind;

        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t");
        let elsewhere = fixture::led_by(&broker, "t", OTHER, 5);
        let ctx = fixture::ctx(&broker, ApiKey::Fetch, 16);
        let fetched = answer(&ctx, &elsewhere, request(&elsewhere, 16, 5)).await;
        let plan = encode(&ctx, fetched).expect("encodes");
        let mut wire = Vec::new();
        for piece in plan.pieces {
            match piece {
                Piece::Bytes(b) => wire.extend_from_slice(&b),
                Piece::Region(_) => panic!("an error answer has no records"),
            }
        }
        // Size, correlation id, the response header's empty tagged fields, then the body.
        let mut body = bytes::Bytes::from(wire);
        assert_eq!(usize::try_from(body.get_i32()).unwrap(), body.len());
        assert_eq!(body.get_i32(), ctx.correlation_id);
        assert_eq!(body.get_u8(), 0);
        let ResponseKind::Fetch(r) = ResponseKind::decode(ApiKey::Fetch, &mut body, 16).unwrap()
        else {
            panic!("not a fetch response");
        };
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, ResponseError::NotLeaderOrFollower.code());
        assert_eq!(
            (p.current_leader.leader_id, p.current_leader.leader_epoch),
            (BrokerId(OTHER), 5)
        );
        let e = &r.node_endpoints[0];
        assert_eq!(
            (e.node_id, e.host.as_str(), e.port, e.rack.as_deref()),
            (BrokerId(OTHER), "127.0.0.1", 9093, Some("r2"))
        );
    }
}
