//! ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3, KIP-734), earliest local
//! (-4, same as earliest without tiered storage), and the first offset at or after a timestamp.

use strata_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use strata_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::RequestContext;
use crate::error::{log_error_code, partition_unavailable_code};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

/// Answers each partition's lookup.
#[must_use]
pub fn handle(ctx: &RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse {
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
                    let part = match ctx.broker.hosted_partition(&name, p.partition_index) {
                        Ok(part) => part,
                        Err(e) => return resp.with_error_code(partition_unavailable_code(e)),
                    };
                    let found = match p.timestamp {
                        LATEST => Ok(Some((-1, part.high_watermark()))),
                        EARLIEST | EARLIEST_LOCAL => Ok(Some((-1, part.log_start_offset()))),
                        MAX_TIMESTAMP => {
                            Ok(part.log().max_timestamp().map(|t| (t.timestamp, t.offset)))
                        }
                        ts if ts >= 0 => part
                            .log()
                            .offset_for_timestamp(ts)
                            .map(|o| o.map(|t| (t.timestamp, t.offset))),
                        _ => Ok(None),
                    };
                    match found {
                        // A single leader that never changed: every batch carries epoch 0. The
                        // field exists from v4 (KIP-320).
                        Ok(Some((ts, off))) => {
                            let resp = resp.with_timestamp(ts).with_offset(off);
                            if ctx.api_version >= 4 {
                                resp.with_leader_epoch(0)
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
