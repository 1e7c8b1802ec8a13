//! ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3, KIP-734: the record
//! with the largest timestamp, found inside its batch), earliest local (-4, same as earliest
//! without tiered storage), and the earliest offset at or after the log start whose record
//! timestamp is at or after a timestamp (records inside batches, compressed ones included). A
//! timestamp past every record answers offset -1 and timestamp -1, as Kafka does.
//!
//! The isolation level (v2+) bounds what is visible, as Kafka's
//! `Partition.fetchOffsetForTimestamp` does: latest is the high watermark under
//! READ_UNCOMMITTED and the last stable offset under READ_COMMITTED, and a timestamp or
//! max-timestamp lookup that finds a record at or past that bound answers -1.
//!
//! Only the partition's leader in the metadata image answers, and the request's
//! `current_leader_epoch` (v4+, KIP-320) must match the image's. From v4 each answer carries
//! the leader epoch of the offset, as Kafka's `Partition.fetchOffsetForTimestamp` gives it:
//! the image's leader epoch for latest, the epoch cache's for the others.

use strata_kraft::MetadataImage;
use strata_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use strata_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::RequestContext;
use crate::broker::leadership;
use crate::server::error::{leadership_error_code, log_error_code};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
/// The request's `isolation_level` for READ_COMMITTED.
const READ_COMMITTED: i8 = 1;

/// Answers each partition's lookup.
#[must_use]
pub fn handle(ctx: &RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse {
    answer(ctx, &ctx.broker.image(), req)
}

/// [`handle`] against a given metadata image: who leads each partition, at which epoch.
fn answer(
    ctx: &RequestContext,
    image: &MetadataImage,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let committed = req.isolation_level == READ_COMMITTED;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let resp = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1);
                    let led = match leadership::leader_partition(
                        &ctx.broker,
                        image,
                        &name,
                        p.partition_index,
                        p.current_leader_epoch,
                    ) {
                        Ok(led) => led,
                        Err(e) => return resp.with_error_code(leadership_error_code(e)),
                    };
                    let part = &led.partition;
                    let last_fetchable = if committed {
                        part.last_stable_offset()
                    } else {
                        part.high_watermark()
                    };
                    // (timestamp, offset, leader epoch of the offset or -1).
                    let found = match p.timestamp {
                        LATEST => Ok(Some((-1, last_fetchable, led.leader_epoch))),
                        EARLIEST | EARLIEST_LOCAL => {
                            let log = part.log();
                            let start = log.log_start_offset();
                            // Kafka: the first cached epoch, if it covers the log start.
                            let epoch = log
                                .leader_epochs()
                                .earliest_entry()
                                .filter(|e| e.start_offset <= start)
                                .map_or(-1, |e| e.epoch);
                            Ok(Some((-1, start, epoch)))
                        }
                        MAX_TIMESTAMP => {
                            let log = part.log();
                            let epoch = log.leader_epochs().latest_epoch().unwrap_or(-1);
                            log.max_timestamp_record()
                                .map(|m| m.map(|t| (t.timestamp, t.offset, epoch)))
                        }
                        ts if ts >= 0 => {
                            let log = part.log();
                            log.offset_for_timestamp(ts).map(|o| {
                                o.map(|t| {
                                    let epoch = log
                                        .leader_epochs()
                                        .epoch_for_offset(t.offset)
                                        .unwrap_or(-1);
                                    (t.timestamp, t.offset, epoch)
                                })
                            })
                        }
                        _ => Ok(None),
                    };
                    // Kafka: a lookup by timestamp answers only what a consumer may read.
                    let found = match (p.timestamp, found) {
                        (LATEST | EARLIEST | EARLIEST_LOCAL, found) => found,
                        (_, found) => found.map(|f| f.filter(|&(_, off, _)| off < last_fetchable)),
                    };
                    match found {
                        // The leader epoch field exists from v4 (KIP-320).
                        Ok(Some((ts, off, epoch))) => {
                            let resp = resp.with_timestamp(ts).with_offset(off);
                            if ctx.api_version >= 4 {
                                resp.with_leader_epoch(epoch)
                            } else {
                                resp
                            }
                        }
                        Ok(None) => resp,
                        Err(e) => resp.with_error_code(log_error_code(&e)),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use strata_protocol::StrBytes;
    use strata_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use strata_protocol::messages::{ApiKey, TopicName};

    use super::*;
    use crate::server::handlers::fixture::{self, OTHER};

    /// (error code, offset, leader epoch) of partition 0 of `t`.
    fn list(
        ctx: &RequestContext,
        image: &MetadataImage,
        timestamp: i64,
        current_leader_epoch: i32,
    ) -> (i16, i64, i32) {
        let req = ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_current_leader_epoch(current_leader_epoch)
                        .with_timestamp(timestamp),
                ]),
        ]);
        list_with(ctx, image, req)
    }

    fn list_with(
        ctx: &RequestContext,
        image: &MetadataImage,
        req: ListOffsetsRequest,
    ) -> (i16, i64, i32) {
        let resp = answer(ctx, image, req);
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.offset, p.leader_epoch)
    }

    /// Isolation (v2+): latest is the last stable offset under READ_COMMITTED, and a lookup
    /// by timestamp never answers a record at or past what the consumer may read.
    #[tokio::test]
    async fn read_committed_lists_up_to_the_last_stable_offset() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let image = fixture::lead_at(&broker, "t", 5);
        let part = broker.partition("t", 0).unwrap();
        part.append_as_leader(&mut fixture::records(2).to_vec(), 5, 0)
            .unwrap();
        let mut txn = fixture::records(3).to_vec();
        strata_protocol::record_batch::set_producer(&mut txn, 11, 0, 0);
        strata_protocol::record_batch::set_transactional(&mut txn);
        part.append_as_leader(&mut txn, 5, 0).unwrap(); // 2..=4, timestamps 1000..=1002
        let ctx = fixture::ctx(&broker, ApiKey::ListOffsets, 4);
        let query = |timestamp: i64, isolation: i8| {
            ListOffsetsRequest::default()
                .with_isolation_level(isolation)
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partitions(vec![
                            ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(timestamp),
                        ]),
                ])
        };
        assert_eq!(list_with(&ctx, &image, query(LATEST, 0)).1, 5);
        assert_eq!(list_with(&ctx, &image, query(LATEST, READ_COMMITTED)).1, 2);
        // Timestamp 1001 is first held at offset 1 (plain) and 3 (open transaction).
        assert_eq!(list_with(&ctx, &image, query(1_001, READ_COMMITTED)).1, 1);
        assert_eq!(list_with(&ctx, &image, query(1_002, 0)).1, 4);
        assert_eq!(list_with(&ctx, &image, query(1_002, READ_COMMITTED)).1, -1);
        assert_eq!(
            list_with(&ctx, &image, query(MAX_TIMESTAMP, READ_COMMITTED)).1,
            -1
        );
        let marker = strata_storage::TxnMarker {
            producer_id: 11,
            producer_epoch: 0,
            coordinator_epoch: 0,
            commit: true,
        };
        part.append_marker_as_leader(&marker, 5, 0).unwrap();
        assert_eq!(list_with(&ctx, &image, query(LATEST, READ_COMMITTED)).1, 6);
        assert_eq!(list_with(&ctx, &image, query(1_002, READ_COMMITTED)).1, 4);
    }

    #[tokio::test]
    async fn only_the_leader_answers_with_the_epochs_of_its_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let broker = fixture::broker_with_topic(dir.path(), "t").await;
        let node = broker.config.node_id;
        let part = broker.partition("t", 0).unwrap();
        part.append(&mut fixture::records(2).to_vec(), 2, 0)
            .unwrap();
        part.append(&mut fixture::records(2).to_vec(), 4, 0)
            .unwrap();
        let ctx = fixture::ctx(&broker, ApiKey::ListOffsets, 4);
        let elsewhere = fixture::led_by(&broker, "t", OTHER, 6);
        assert_eq!(list(&ctx, &elsewhere, LATEST, -1), (6, -1, -1));
        assert_eq!(list(&ctx, &elsewhere, LATEST, 5), (74, -1, -1));
        assert_eq!(list(&ctx, &elsewhere, LATEST, 7), (75, -1, -1));
        let here = fixture::led_by(&broker, "t", node, 6);
        assert_eq!(list(&ctx, &here, LATEST, 5), (74, -1, -1));
        assert_eq!(list(&ctx, &here, LATEST, 7), (75, -1, -1));
        // Latest: the image's epoch; earliest: the first cached epoch; by timestamp: the
        // epoch of the batch holding the offset; max timestamp: the newest cached epoch.
        assert_eq!(list(&ctx, &here, LATEST, 6), (0, 4, 6));
        assert_eq!(list(&ctx, &here, EARLIEST, -1), (0, 0, 2));
        assert_eq!(list(&ctx, &here, 1_000, -1), (0, 0, 2));
        assert_eq!(list(&ctx, &here, 1_001, 6), (0, 1, 2));
        assert_eq!(list(&ctx, &here, MAX_TIMESTAMP, -1).2, 6);
        // v1-3 have no leader epoch field.
        let v1 = fixture::ctx(&broker, ApiKey::ListOffsets, 1);
        assert_eq!(list(&v1, &here, LATEST, -1), (0, 4, -1));
    }
}
