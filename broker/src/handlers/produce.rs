//! Produce (key 0): validate each partition's record set, append it as sent (offsets and the
//! partition leader epoch rewritten in place), and answer per partition.

use bytes::BytesMut;
use strata_protocol::ResponseError;
use strata_protocol::StrBytes;
use strata_protocol::compression::decompress;
use strata_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use strata_protocol::messages::{ProduceRequest, ProduceResponse};
use strata_protocol::record_batch::{BATCH_HEADER_LEN, Compression, RecordBatchView};

use super::RequestContext;
use crate::error::{log_error_code, partition_unavailable_code};
use crate::partition::FlushWait;

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

/// A produce response waiting on group commits.
pub struct PendingProduce {
    response: ProduceResponse,
    /// (topic index, partition index in the response, what that partition's append waits on).
    waits: Vec<(usize, usize, FlushWait)>,
}

impl PendingProduce {
    /// Waits for every fsync; a partition whose fsync failed answers its error instead of an
    /// offset (the records were appended but are not known to be durable).
    pub async fn wait(self) -> ProduceResponse {
        let PendingProduce {
            mut response,
            waits,
        } = self;
        for (t, p, wait) in waits {
            if let Err((code, message)) = wait.wait().await
                && let Some(resp) = response
                    .responses
                    .get_mut(t)
                    .and_then(|topic| topic.partition_responses.get_mut(p))
            {
                resp.error_code = code;
                resp.error_message = Some(StrBytes::from_string(message));
                resp.base_offset = -1;
                resp.log_append_time_ms = -1;
            }
        }
        response
    }
}

/// Appends every partition's records (in the order sent) and answers, now or after the group
/// commit.
#[must_use]
pub fn handle(ctx: &RequestContext, req: ProduceRequest) -> Produced {
    let acks = req.acks;
    let valid_acks = matches!(acks, -1..=1);
    let image = ctx.broker.image();
    let now = crate::now_ms();
    let mut responses = Vec::with_capacity(req.topic_data.len());
    let mut waits = Vec::new();
    for topic in req.topic_data {
        let name = topic.name.0.to_string();
        let known = image.topics.contains_key(&name);
        let compacted = image.topics.get(&name).is_some_and(|t| {
            t.configs
                .get("cleanup.policy")
                .unwrap_or(&ctx.broker.config.log_cleanup_policy)
                .split(',')
                .any(|p| p.trim() == "compact")
        });
        let mut partition_responses = Vec::with_capacity(topic.partition_data.len());
        for pd in topic.partition_data {
            let mut resp = PartitionProduceResponse::default()
                .with_index(pd.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            // An offline partition (its log could not be opened) answers KAFKA_STORAGE_ERROR,
            // as Kafka's ReplicaManager does for a replica in a failed log directory.
            let (partition, unavailable) = match known {
                true => match ctx.broker.hosted_partition(&name, pd.index) {
                    Ok(p) => (Some(p), 0),
                    Err(e) => (None, partition_unavailable_code(e)),
                },
                false => (None, ResponseError::UnknownTopicOrPartition.code()),
            };
            let outcome = match (valid_acks, partition, pd.records) {
                (false, _, _) => Err((ResponseError::InvalidRequiredAcks.code(), None)),
                (true, None, _) => Err((unavailable, None)),
                (true, Some(_), None) => Err((
                    ResponseError::InvalidRecord.code(),
                    Some("null records".to_owned()),
                )),
                (true, Some(_), Some(records))
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
                        ResponseError::InvalidRecord.code(),
                        Some(format!(
                            "Compacted topic cannot accept message without key in topic partition {name}-{}.",
                            pd.index
                        )),
                    ))
                }
                (true, Some(p), Some(records)) => {
                    // The request buffer is shared with the decoded header; the rewrite of base
                    // offsets needs a private copy (one per partition, never per record).
                    let mut buf = BytesMut::from(&records[..]);
                    match p.append(&mut buf, now) {
                        Ok((info, wait)) => {
                            crate::metrics::record_produce(&p, buf.len(), info.record_count);
                            if let Some(wait) = wait {
                                waits.push((responses.len(), partition_responses.len(), wait));
                            }
                            resp = resp
                                .with_base_offset(info.base_offset)
                                .with_log_append_time_ms(info.log_append_time)
                                .with_log_start_offset(info.log_start_offset);
                            Ok(())
                        }
                        Err(e) => {
                            tracing::debug!(topic = %name, partition = pd.index, error = %e, "produce rejected");
                            Err((log_error_code(&e), Some(e.to_string())))
                        }
                    }
                }
            };
            if let Err((code, message)) = outcome {
                resp = resp
                    .with_error_code(code)
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
    let response = ProduceResponse::default().with_responses(responses);
    if acks == 0 {
        Produced::NoResponse
    } else if waits.is_empty() {
        Produced::Ready(response)
    } else {
        Produced::AfterFlush(PendingProduce { response, waits })
    }
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
