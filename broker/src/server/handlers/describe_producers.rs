//! DescribeProducers (key 61, KIP-664): the idempotent producers a partition remembers.

use strata_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use strata_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::RequestContext;
use crate::server::error::{TopicRefusal, topic_refusal_code};

/// Lists each requested partition's active producers. Without transactions the
/// coordinator epoch and the transaction start offset are always -1.
#[must_use]
pub fn handle(ctx: &RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            // KafkaApis: READ on the topic, else every partition is refused.
            let readable = ctx.authorize(
                strata_kraft::acl::AclOperation::Read,
                strata_kraft::acl::ResourceType::Topic,
                &name,
            );
            let partitions = t
                .partition_indexes
                .into_iter()
                .map(|index| {
                    let resp = PartitionResponse::default().with_partition_index(index);
                    if !readable {
                        return resp.with_error_code(
                            strata_protocol::ResponseError::TopicAuthorizationFailed.code(),
                        );
                    }
                    let Some(p) = ctx.broker.partition(&name, index) else {
                        return resp.with_error_code(topic_refusal_code(TopicRefusal::Unknown));
                    };
                    let log = p.log();
                    let producers = log
                        .producer_state()
                        .entries()
                        .map(|e| {
                            ProducerState::default()
                                .with_producer_id(ProducerId(e.producer_id))
                                .with_producer_epoch(i32::from(e.producer_epoch))
                                .with_last_sequence(e.last_seq())
                                .with_last_timestamp(e.last_timestamp)
                                .with_coordinator_epoch(e.coordinator_epoch)
                                .with_current_txn_start_offset(e.current_txn_first_offset)
                        })
                        .collect();
                    resp.with_active_producers(producers)
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
