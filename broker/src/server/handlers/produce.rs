//! Produce (key 0): validate each partition's record set, append it as sent (offsets and the
//! partition leader epoch rewritten in place), and answer per partition.
//!
//! Only the partition's leader in the metadata image appends; any other node answers
//! NOT_LEADER_OR_FOLLOWER, from v10 with the current leader and its endpoint (KIP-951) so the
//! producer redirects without a metadata round trip.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::BytesMut;
use strata_kraft::MetadataImage;
use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::StrBytes;
use strata_protocol::compression::decompress;
use strata_protocol::messages::BrokerId;
use strata_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use strata_protocol::messages::{ProduceRequest, ProduceResponse};
use strata_protocol::record_batch::{BATCH_HEADER_LEN, Compression, RecordBatchView};
use strata_replication::ReplicationError;

pub mod verification;

use super::RequestContext;
use crate::broker::leadership::{self, LeaderEndpoint, LeadershipError, NO_LEADER_EPOCH};
pub use crate::partition::AckError;
use crate::partition::{FlushWait, LeaderAppendError, Partition};
use crate::server::error::{TopicRefusal, ack_error_code, produce_refusal_code};

/// What a produce comes to once its records are appended.
pub enum Produced {
    /// acks=0 takes no response at all (the fsyncs its appends asked for happen anyway).
    NoResponse,
    /// The response.
    Ready(ProduceResponse),
    /// The response, to be sent once the group commit has fsynced the records that the flush
    /// policy says must be on disk first (`flush.messages`).
    AfterFlush(PendingProduce),
}

/// Why a partition of a produce is not appended (its Kafka code is
/// [`crate::server::error::produce_refusal_code`]).
#[derive(Debug)]
pub enum ProduceRefusal {
    /// The topic is refused before anything else (no WRITE on it).
    Topic(TopicRefusal),
    /// `acks` is not -1, 0 or 1.
    InvalidRequiredAcks,
    /// This node does not lead the partition.
    Unavailable(LeadershipError),
    /// The partition's record set is null.
    NullRecords,
    /// A compacted topic takes no record without a key (Kafka's `LogValidator`).
    KeylessRecordInCompactedTopic,
    /// A control batch (a transaction marker): only the transaction coordinator writes
    /// those (Kafka's `LogValidator`, for an append from a client).
    ControlBatch,
    /// Transactional records without a `transactional_id`, or one the principal may not
    /// write (Kafka's `handleProduceRequest`: every partition of the request is refused).
    TransactionalIdAuthorization,
    /// Transactional records that open a transaction on the partition, which the
    /// producer's transaction coordinator did not confirm ([`verification`]): the code to
    /// answer.
    Unverified(i16),
    /// acks=all while the ISR is below `min.insync.replicas`: refused before the append.
    Replication(ReplicationError),
    /// The leader's append was refused or failed.
    Append(LeaderAppendError),
}

/// An acks=all append on a replicated leader, waiting for the ISR.
struct Replicated {
    /// The topic's index in the response.
    topic: usize,
    /// The partition's index in the topic's response.
    partition: usize,
    /// The partition appended to.
    log: Arc<Partition>,
    /// The leader epoch of the append: only this epoch's high watermark acknowledges it
    /// (after a move to a follower and back, the same offsets may hold other records).
    leader_epoch: i32,
    /// The high watermark that covers the records.
    high_watermark: i64,
}

/// A produce response waiting on group commits.
pub struct PendingProduce {
    response: ProduceResponse,
    /// (topic index, partition index in the response, what that partition's append waits on).
    waits: Vec<(usize, usize, FlushWait)>,
    /// acks=all on replicated leaders: what each partition's answer waits for.
    replicated: Vec<Replicated>,
    /// The request's `timeout_ms`: how long acks=all waits for the ISR.
    timeout_ms: i32,
}

impl PendingProduce {
    /// Waits for every fsync; a partition whose fsync failed answers its error instead of an
    /// offset (the records were appended but are not known to be durable).
    pub async fn wait(self) -> ProduceResponse {
        let PendingProduce {
            mut response,
            waits,
            replicated,
            timeout_ms,
        } = self;
        for (t, p, wait) in waits {
            if let Err(e) = wait.wait().await
                && let Some(resp) = response
                    .responses
                    .get_mut(t)
                    .and_then(|topic| topic.partition_responses.get_mut(p))
            {
                resp.error_code = crate::server::error::flush_error_code(&e);
                resp.error_message = Some(StrBytes::from_string(e.to_string()));
                resp.base_offset = -1;
                resp.log_append_time_ms = -1;
            }
        }
        // acks=all: the ISR must hold the records (Kafka's DelayedProduce); a leader that
        // stops leading, or a timeout, answers an error and the producer retries.
        let deadline = tokio::time::Instant::now()
            + std::time::Duration::from_millis(u64::try_from(timeout_ms.max(0)).unwrap_or(0));
        for Replicated {
            topic: t,
            partition: p,
            log: partition,
            leader_epoch,
            high_watermark: target,
        } in replicated
        {
            let outcome = partition
                .wait_committed(leader_epoch, target, deadline)
                .await;
            if let Err(e) = outcome
                && let Some(resp) = response
                    .responses
                    .get_mut(t)
                    .and_then(|topic| topic.partition_responses.get_mut(p))
                && resp.error_code == 0
            {
                resp.error_code = ack_error_code(&e);
                resp.base_offset = -1;
                resp.log_append_time_ms = -1;
            }
        }
        response
    }
}

/// The bytes of a produce's record sets: what its producer quota counts (KIP-13; Kafka
/// counts the whole request, of which the record sets are all but a few bytes).
#[must_use]
pub fn record_bytes(req: &ProduceRequest) -> u64 {
    req.topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_ref())
        .map(|r| r.len() as u64)
        .sum()
}

/// Appends every partition's records (in the order sent) and answers, now or after the group
/// commit.
#[must_use]
pub fn handle(
    ctx: &RequestContext,
    req: ProduceRequest,
    unverified: &BTreeMap<(String, i32), i16>,
) -> Produced {
    answer(ctx, &ctx.broker.image(), req, unverified)
}

/// [`handle`] against a given metadata image: who leads each partition, at which epoch.
fn answer(
    ctx: &RequestContext,
    image: &MetadataImage,
    req: ProduceRequest,
    unverified: &BTreeMap<(String, i32), i16>,
) -> Produced {
    let acks = req.acks;
    let valid_acks = matches!(acks, -1..=1);
    let now = crate::now_ms();
    let mut responses = Vec::with_capacity(req.topic_data.len());
    let mut waits = Vec::new();
    let mut replicated = Vec::new();
    let timeout_ms = req.timeout_ms;
    // KIP-951: the endpoints of the leaders named in `current_leader`, by node id.
    let mut node_endpoints: BTreeMap<i32, LeaderEndpoint> = BTreeMap::new();
    // Kafka's handleProduceRequest: transactional records need a transactional id the
    // principal may write, or the whole request is refused.
    let transactional_refused = has_transactional_records(&req)
        && !req.transactional_id.as_ref().is_some_and(|id| {
            ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, id)
        });
    for topic in req.topic_data {
        let name = topic.name.0.to_string();
        let compacted = image.topics.get(&name).is_some_and(|t| {
            crate::config::dynamic::topic_value(
                image,
                ctx.broker.config.node_id,
                &t.configs,
                "cleanup.policy",
            )
            .unwrap_or(&ctx.broker.config.log_cleanup_policy)
            .split(',')
            .any(|p| p.trim() == "compact")
        });
        // Kafka's handleProduceRequest: WRITE on the topic, checked before anything else.
        let authorized = ctx.authorize(AclOperation::Write, ResourceType::Topic, &name);
        let mut partition_responses = Vec::with_capacity(topic.partition_data.len());
        for pd in topic.partition_data {
            let mut resp = PartitionProduceResponse::default()
                .with_index(pd.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            // Only the image's leader appends. An offline partition (its log could not be
            // opened) answers KAFKA_STORAGE_ERROR, as Kafka's ReplicaManager does for a
            // replica in a failed log directory.
            let partition = match leadership::leader_partition(
                &ctx.broker,
                image,
                &name,
                pd.index,
                NO_LEADER_EPOCH,
            ) {
                Ok(led) => Ok(led),
                Err(e) => {
                    if valid_acks && ctx.api_version >= 10 && leadership::redirects(e, false) {
                        let leader = leadership::current_leader(image, &name, pd.index);
                        resp = resp.with_current_leader(
                            LeaderIdAndEpoch::default()
                                .with_leader_id(BrokerId(leader.leader_id))
                                .with_leader_epoch(leader.leader_epoch),
                        );
                        if let Some(endpoint) = leader.endpoint {
                            node_endpoints.insert(endpoint.node_id, endpoint);
                        }
                    }
                    Err(e)
                }
            };
            let outcome = match (valid_acks, partition, pd.records) {
                _ if transactional_refused => {
                    Err((ProduceRefusal::TransactionalIdAuthorization, None))
                }
                _ if !authorized => Err((ProduceRefusal::Topic(TopicRefusal::Unauthorized), None)),
                (false, _, _) => Err((ProduceRefusal::InvalidRequiredAcks, None)),
                (true, Err(e), _) => Err((ProduceRefusal::Unavailable(e), None)),
                (true, Ok(_), None) => {
                    Err((ProduceRefusal::NullRecords, Some("null records".to_owned())))
                }
                (true, Ok(_), Some(records)) if any_batch(&records, |v| v.is_control()) => Err((
                    ProduceRefusal::ControlBatch,
                    Some("Clients are not allowed to write control records".to_owned()),
                )),
                (true, Ok(_), Some(_))
                    if let Some(&code) = unverified.get(&(name.clone(), pd.index)) =>
                {
                    Err((
                        ProduceRefusal::Unverified(code),
                        Some(format!(
                            "Partition {name}-{} was not added to the transaction",
                            pd.index
                        )),
                    ))
                }
                (true, Ok(_), Some(records))
                    if compacted && !keyless_records(&records).is_empty() =>
                {
                    // Kafka's LogValidator: a compacted topic takes no record without a key.
                    // The records are named by index so the client fails only those
                    // (INVALID_RECORD) and retries nothing of the rest of the batch.
                    resp = resp.with_record_errors(
                        keyless_records(&records)
                            .into_iter()
                            .map(|i| BatchIndexAndErrorMessage::default().with_batch_index(i))
                            .collect(),
                    );
                    Err((
                        ProduceRefusal::KeylessRecordInCompactedTopic,
                        Some(format!(
                            "Compacted topic cannot accept message without key in topic partition {name}-{}.",
                            pd.index
                        )),
                    ))
                }
                (true, Ok(led), Some(_)) if let Err(e) = led.partition.check_produce(acks) => {
                    // acks=all while the ISR is below min.insync.replicas: refused before the
                    // append (Kafka's NOT_ENOUGH_REPLICAS).
                    Err((ProduceRefusal::Replication(e), None))
                }
                (true, Ok(led), Some(records)) => {
                    // The request buffer is shared with the decoded header; the rewrite of base
                    // offsets needs a private copy (one per partition, never per record).
                    let mut buf = BytesMut::from(&records[..]);
                    // KIP-101: every batch carries the epoch of the leader that appended it.
                    // Only the replicated leader of the image's epoch appends (checked under
                    // the log's lock against a concurrent resign).
                    let appended = led
                        .partition
                        .append_as_leader(&mut buf, led.leader_epoch, now);
                    match appended {
                        Ok((info, wait)) => {
                            crate::metrics::record_produce(
                                &led.partition.topic,
                                led.partition.index,
                                buf.len(),
                                info.record_count,
                            );
                            if let Some(wait) = wait {
                                waits.push((responses.len(), partition_responses.len(), wait));
                            }
                            // acks=all on a replicated leader: answered once the high
                            // watermark (the ISR's) passes the records, in this epoch.
                            if acks == -1 && info.last_offset >= 0 {
                                replicated.push(Replicated {
                                    topic: responses.len(),
                                    partition: partition_responses.len(),
                                    log: led.partition.clone(),
                                    leader_epoch: led.leader_epoch,
                                    high_watermark: info.last_offset + 1,
                                });
                            }
                            resp = resp
                                .with_base_offset(info.base_offset)
                                .with_log_append_time_ms(info.log_append_time)
                                .with_log_start_offset(info.log_start_offset);
                            Ok(())
                        }
                        Err(LeaderAppendError::Log(e)) => {
                            tracing::debug!(topic = %name, partition = pd.index, error = %e, "produce rejected");
                            let message = e.to_string();
                            Err((
                                ProduceRefusal::Append(LeaderAppendError::Log(e)),
                                Some(message),
                            ))
                        }
                        Err(e @ LeaderAppendError::NotLeader { .. }) => {
                            tracing::debug!(topic = %name, partition = pd.index, error = %e, "produce rejected");
                            Err((ProduceRefusal::Append(e), None))
                        }
                    }
                }
            };
            if let Err((refusal, message)) = outcome {
                resp = resp
                    .with_error_code(produce_refusal_code(&refusal))
                    .with_error_message(message.map(StrBytes::from_string));
            }
            partition_responses.push(resp);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partition_responses),
        );
    }
    let response = ProduceResponse::default()
        .with_responses(responses)
        .with_node_endpoints(
            node_endpoints
                .into_values()
                .map(|e| {
                    NodeEndpoint::default()
                        .with_node_id(BrokerId(e.node_id))
                        .with_host(StrBytes::from_string(e.host))
                        .with_port(e.port)
                        .with_rack(e.rack.map(StrBytes::from_string))
                })
                .collect(),
        );
    if acks == 0 {
        Produced::NoResponse
    } else if waits.is_empty() && replicated.is_empty() {
        Produced::Ready(response)
    } else {
        Produced::AfterFlush(PendingProduce {
            response,
            waits,
            replicated,
            timeout_ms,
        })
    }
}

/// Whether any partition's record set holds a batch with the transactional bit (Kafka's
/// `ProduceRequest.hasTransactionalRecords`). Record sets that do not parse answer no.
fn has_transactional_records(req: &ProduceRequest) -> bool {
    req.topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_deref())
        .any(|records| any_batch(records, |v| v.is_transactional()))
}

/// Whether a batch of the record set satisfies `test`. A record set that does not parse
/// answers no for the rest: the append reports it.
fn any_batch(records: &[u8], test: impl Fn(&RecordBatchView<'_>) -> bool) -> bool {
    strata_protocol::record_batch::batches(records)
        .map_while(Result::ok)
        .any(|view| test(&view))
}

/// Largest decompressed records section examined for keys (as storage's own bound).
const DECOMPRESS_LIMIT: usize = 256 << 20;

/// Indexes (counted across the record set, as Kafka's `batchIndex`) of the records that have
/// no key. A record set that does not parse yields nothing here: the append reports it.
fn keyless_records(records: &[u8]) -> Vec<i32> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut index = 0i32;
    while pos < records.len() {
        let Ok(view) = RecordBatchView::parse(&records[pos..]) else {
            return Vec::new();
        };
        if view.is_control() {
            pos += view.total_len();
            continue;
        }
        let decompressed;
        let iter = match view.compression() {
            Compression::None => match view.records() {
                Ok(r) => r,
                Err(_) => return Vec::new(),
            },
            codec => {
                let Some(body) = view.bytes().get(BATCH_HEADER_LEN..) else {
                    return Vec::new();
                };
                match decompress(codec, body, DECOMPRESS_LIMIT) {
                    Ok(d) => decompressed = d,
                    Err(_) => return Vec::new(),
                }
                view.records_in(&decompressed)
            }
        };
        for record in iter {
            let Ok(record) = record else {
                return Vec::new();
            };
            if record.key.is_none() {
                out.push(index);
            }
            index += 1;
        }
        pos += view.total_len();
    }
    out
}

#[cfg(test)]
mod tests {
    use strata_protocol::ResponseError;
    use strata_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use strata_protocol::messages::{ApiKey, TopicName};
    use strata_protocol::record_batch::RecordBatchView;

    use super::*;
    use crate::server::handlers::fixture::{self, OTHER};

    fn request(topic: &str, n: usize) -> ProduceRequest {
        request_with_acks(topic, n, -1)
    }

    fn request_with_acks(topic: &str, n: usize, acks: i16) -> ProduceRequest {
        ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(1_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(fixture::records(n))),
                    ]),
            ])
    }

    fn ready(p: Produced) -> ProduceResponse {
        match p {
            Produced::Ready(r) => r,
            _ => panic!("expected an immediate response"),
        }
    }

    /// A follower (its log is here, the image names another leader) appends nothing and
    /// sends the producer to the leader: from v10 with KIP-951's current leader and endpoint.
    #[tokio::test]
    async fn a_follower_answers_not_leader_with_the_current_leader() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let image = fixture::led_by(&broker, "t", OTHER, 5);
        let part = broker
            .partition("t", 0)
            .expect("the follower's log is open");
        let epochs_before = part.log().leader_epochs().entries().to_vec();
        for version in [3, 9, 10, 11] {
            let ctx = fixture::ctx(&broker, ApiKey::Produce, version);
            let resp = ready(answer(&ctx, &image, request("t", 2), &BTreeMap::new()));
            let p = &resp.responses[0].partition_responses[0];
            assert_eq!(
                p.error_code,
                ResponseError::NotLeaderOrFollower.code(),
                "v{version}"
            );
            assert_eq!(p.base_offset, -1);
            if version >= 10 {
                assert_eq!(
                    (p.current_leader.leader_id, p.current_leader.leader_epoch),
                    (BrokerId(OTHER), 5)
                );
                assert_eq!(resp.node_endpoints.len(), 1);
                let e = &resp.node_endpoints[0];
                assert_eq!(
                    (e.node_id, e.host.as_str(), e.port, e.rack.as_deref()),
                    (BrokerId(OTHER), "127.0.0.1", 9093, Some("r2"))
                );
            } else {
                assert_eq!(p.current_leader, LeaderIdAndEpoch::default());
                assert!(resp.node_endpoints.is_empty());
            }
        }
        assert_eq!(part.log().log_end_offset(), 0, "nothing was appended");
        assert_eq!(part.log().leader_epochs().entries(), epochs_before);
    }

    /// A client's control batch (a forged transaction marker) is refused with INVALID_RECORD
    /// and nothing of the partition's record set is written, as Kafka's `LogValidator` does.
    #[tokio::test]
    async fn a_client_control_batch_is_invalid_record() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let ctx = fixture::ctx(&broker, ApiKey::Produce, 9);
        let image = fixture::lead_at(&broker, "t", 1);
        let plain = fixture::records(1);
        let mut marker = fixture::records(1).to_vec();
        // Attributes (@21, i16): transactional (bit 4) and control (bit 5).
        marker[22] |= 0x30;
        strata_protocol::record_batch::set_producer(&mut marker, 7, 0, -1);
        strata_protocol::record_batch::write_crc(&mut marker);
        let mut both = plain.to_vec();
        both.extend_from_slice(&marker);
        let mut req = request_with_acks("t", 1, 1);
        req.topic_data[0].partition_data[0].records = Some(bytes::Bytes::from(both));
        // Without a transactional id the whole request is refused first, as in Kafka.
        let resp = ready(answer(&ctx, &image, req.clone(), &BTreeMap::new()));
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (ResponseError::TransactionalIdAuthorizationFailed.code(), -1)
        );
        req.transactional_id = Some(strata_protocol::messages::TransactionalId(
            StrBytes::from_static_str("forger"),
        ));
        let resp = ready(answer(&ctx, &image, req, &BTreeMap::new()));
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (ResponseError::InvalidRecord.code(), -1)
        );
        assert_eq!(
            p.error_message.as_deref(),
            Some("Clients are not allowed to write control records")
        );
        assert_eq!(broker.partition("t", 0).unwrap().log().log_end_offset(), 0);
        // The same producer's data is taken.
        let resp = ready(answer(
            &ctx,
            &image,
            request_with_acks("t", 1, 1),
            &BTreeMap::new(),
        ));
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }

    /// The leader stamps every batch with the image's leader epoch and starts that epoch in
    /// its epoch cache.
    #[tokio::test]
    async fn the_leader_stamps_the_image_leader_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let ctx = fixture::ctx(&broker, ApiKey::Produce, 11);
        for (epoch, base) in [(3, 0), (3, 2), (7, 4)] {
            let image = fixture::lead_at(&broker, "t", epoch);
            // acks=1: answered on the append (acks=all waits for the high watermark).
            let resp = ready(answer(
                &ctx,
                &image,
                request_with_acks("t", 2, 1),
                &BTreeMap::new(),
            ));
            let p = &resp.responses[0].partition_responses[0];
            assert_eq!((p.error_code, p.base_offset), (0, base));
            assert!(resp.node_endpoints.is_empty());
        }
        let part = broker.partition("t", 0).unwrap();
        let cache: Vec<(i32, i64)> = part
            .log()
            .leader_epochs()
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        assert_eq!(cache, [(3, 0), (7, 4)]);
        let read = part.read(0, u32::MAX, true).unwrap();
        let mut bytes = Vec::new();
        for r in &read.regions {
            r.read_into(&mut bytes).unwrap();
        }
        let epochs: Vec<i32> = strata_protocol::record_batch::batches(&bytes)
            .map(|b| b.unwrap().partition_leader_epoch())
            .collect();
        assert_eq!(epochs, [3, 3, 7]);
        assert!(RecordBatchView::parse(&bytes).unwrap().verify_crc().is_ok());
    }

    /// A partition this node leads but has no log of (not opened yet) is not served either.
    #[tokio::test]
    async fn a_leader_without_its_log_answers_not_leader() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let mut image = (*broker.image()).clone();
        let mut ghost = image.topics["t"].clone();
        ghost.name = "ghost".to_owned();
        image.topics.insert("ghost".to_owned(), ghost);
        let ctx = fixture::ctx(&broker, ApiKey::Produce, 11);
        let resp = ready(answer(&ctx, &image, request("ghost", 1), &BTreeMap::new()));
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, ResponseError::NotLeaderOrFollower.code());
        assert_eq!(p.current_leader.leader_id, BrokerId(broker.config.node_id));
        let resp = ready(answer(&ctx, &image, request("nope", 1), &BTreeMap::new()));
        assert_eq!(
            resp.responses[0].partition_responses[0].error_code,
            ResponseError::UnknownTopicOrPartition.code()
        );
    }

    /// The acks=all answer of one partition's append `info`, made in `leader_epoch`, waiting
    /// for the high watermark to pass it (at most 10 s).
    fn acks_all_wait(
        part: &std::sync::Arc<crate::partition::Partition>,
        leader_epoch: i32,
        info: &strata_storage::AppendInfo,
    ) -> PendingProduce {
        PendingProduce {
            response: ProduceResponse::default().with_responses(vec![
                TopicProduceResponse::default().with_partition_responses(vec![
                    PartitionProduceResponse::default().with_base_offset(info.base_offset),
                ]),
            ]),
            waits: Vec::new(),
            replicated: vec![Replicated {
                topic: 0,
                partition: 0,
                log: part.clone(),
                leader_epoch,
                high_watermark: info.last_offset + 1,
            }],
            timeout_ms: 10_000,
        }
    }

    /// acks=all whose records the high watermark passed while the ISR then shrank below
    /// `min.insync.replicas` is NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's
    /// `checkEnoughReplicasReachOffset` answers; with the ISR whole it is acknowledged.
    #[tokio::test]
    async fn acks_all_after_an_isr_shrink_is_not_enough_replicas_after_append() {
        use strata_replication::leader::{PartitionRegistration, ReplicationConfig};
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let part = broker.partition("t", 0).unwrap();
        let config = ReplicationConfig {
            min_insync_replicas: 2,
            ..ReplicationConfig::default()
        };
        let registration = |isr: Vec<i32>, partition_epoch| PartitionRegistration {
            replicas: vec![1, 2],
            isr,
            leader_epoch: 5,
            partition_epoch,
        };
        part.make_leader(1, &registration(vec![1, 2], 5), config);
        let (info, _) = part
            .append_as_leader(&mut fixture::records(2).to_vec(), 5, 0)
            .unwrap();
        // The ISR whole and the high watermark past the records: acknowledged.
        part.set_high_watermark(info.last_offset + 1);
        let r = acks_all_wait(&part, 5, &info).wait().await;
        let p = &r.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, info.base_offset));
        // The controller shrinks the ISR to the leader alone after the high watermark passed.
        part.make_leader(1, &registration(vec![1], 6), config);
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            acks_all_wait(&part, 5, &info).wait(),
        )
        .await
        .expect("answered at once");
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (ResponseError::NotEnoughReplicasAfterAppend.code(), -1)
        );
    }

    /// acks=all answers for records only while this node leads in the epoch that appended
    /// them: once it follows, its high watermark (the new leader's, over a log truncated and
    /// refilled) passing the same offsets does not acknowledge them.
    #[tokio::test]
    async fn acks_all_is_not_answered_by_a_follower_s_high_watermark() {
        use strata_replication::leader::{PartitionRegistration, ReplicationConfig};
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let part = broker.partition("t", 0).unwrap();
        // Node 2 is in the ISR and never fetches: the high watermark stays put.
        let registration = PartitionRegistration {
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader_epoch: 5,
            partition_epoch: 5,
        };
        part.make_leader(1, &registration, ReplicationConfig::default());
        let (info, _) = part
            .append_as_leader(&mut fixture::records(2).to_vec(), 5, 0)
            .unwrap();
        let task = tokio::spawn(acks_all_wait(&part, 5, &info).wait());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!task.is_finished(), "waits for the ISR");
        // A follower now, whose high watermark the new leader moves past the records.
        part.resign();
        part.set_high_watermark(info.last_offset + 10);
        let r = tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .expect("answered")
            .unwrap();
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (ResponseError::NotLeaderOrFollower.code(), -1)
        );
    }
}
