//! OffsetFetch (key 9): a group's committed offsets, from `__consumer_offsets`.
//!
//! A partition without a committed offset answers offset -1 and empty metadata with no error,
//! which is how a consumer knows to apply `auto.offset.reset`. A null topic list (v2+) asks
//! for every committed offset of the group. v8 batches several groups in one request
//! (KIP-709). With `require_stable` (v7+, KIP-447; read_committed consumers ask it), a
//! partition whose offset a transaction holds, not yet committed or aborted, answers
//! UNSTABLE_OFFSET_COMMIT, and the consumer asks again.

use strata_protocol::StrBytes;
use strata_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use strata_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::RequestContext;
use super::offset_commit::valid_group_id;
use crate::server::error::{GroupRefusal, coordinator_unavailable_code, group_refusal_code};

/// The committed offset Kafka reports for a partition that has none.
const NO_OFFSET: i64 = -1;

/// One partition's answer: (partition, offset, leader epoch, metadata, error code).
type Answer = (i32, i64, i32, String, i16);

/// Answers each group.
#[must_use]
pub fn handle(ctx: &RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse {
    if ctx.api_version >= 8 {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let wanted = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name, t.partition_indexes))
                        .collect()
                });
                let group = g.group_id.0.to_string();
                let (mut error, topics) = lookup(ctx, &group, wanted);
                // KIP-848: v9 members name themselves and their epoch.
                if let Some(Err(e)) = ctx.broker.consumer_groups.validate_offset_fetch(
                    &g.group_id.0,
                    g.member_id.as_deref(),
                    g.member_epoch,
                ) {
                    error = crate::server::error::consumer_group_error_code(&e);
                }
                let topics = topics
                    .into_iter()
                    .map(|(name, parts)| {
                        OffsetFetchResponseTopics::default()
                            .with_name(name.clone())
                            .with_partitions(
                                parts
                                    .into_iter()
                                    .map(|(p, offset, epoch, metadata, refused)| {
                                        OffsetFetchResponsePartitions::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(offset)
                                            .with_committed_leader_epoch(epoch)
                                            .with_metadata(Some(StrBytes::from_string(metadata)))
                                            .with_error_code(match refused {
                                                0 => unstable(
                                                    ctx,
                                                    req.require_stable,
                                                    &group,
                                                    &name,
                                                    p,
                                                ),
                                                e => e,
                                            })
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id)
                    .with_topics(topics)
                    .with_error_code(error)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name, t.partition_indexes))
            .collect()
    });
    let group = req.group_id.0.to_string();
    let (error, topics) = lookup(ctx, &group, wanted);
    // v1 has no top-level error code: the partitions carry it.
    let partition_error = if ctx.api_version < 2 { error } else { 0 };
    let require_stable = ctx.api_version >= 7 && req.require_stable;
    let topics = topics
        .into_iter()
        .map(|(name, parts)| {
            OffsetFetchResponseTopic::default()
                .with_name(name.clone())
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(p, offset, epoch, metadata, refused)| {
                            let code = match (partition_error, refused) {
                                (0, 0) => unstable(ctx, require_stable, &group, &name, p),
                                (0, e) | (e, _) => e,
                            };
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(epoch)
                                .with_metadata(Some(StrBytes::from_string(metadata)))
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    let resp = OffsetFetchResponse::default().with_topics(topics);
    if ctx.api_version >= 2 {
        resp.with_error_code(error)
    } else {
        resp
    }
}

/// UNSTABLE_OFFSET_COMMIT when the client requires stable offsets and a transaction holds
/// one for `group`'s `topic`-`partition`; else 0.
fn unstable(
    ctx: &RequestContext,
    require_stable: bool,
    group: &str,
    topic: &TopicName,
    partition: i32,
) -> i16 {
    if require_stable
        && ctx
            .broker
            .offsets
            .has_pending_offset(group, &topic.0, partition)
    {
        strata_protocol::ResponseError::UnstableOffsetCommit.code()
    } else {
        0
    }
}

/// The groups answered without error: their answers wait until their partitions have
/// committed what they held (an offset is shown only once a leader change cannot lose it).
/// `single` is the group of a v0-7 request.
#[must_use]
pub fn answered(version: i16, resp: &OffsetFetchResponse, single: &str) -> Vec<String> {
    if version >= 8 {
        return resp
            .groups
            .iter()
            .filter(|g| g.error_code == 0)
            .map(|g| g.group_id.0.to_string())
            .collect();
    }
    let ok = if version >= 2 {
        resp.error_code == 0
    } else {
        resp.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.error_code == 0)
    };
    if ok {
        vec![single.to_owned()]
    } else {
        Vec::new()
    }
}

/// The answer once the groups' partitions committed what they held; a group whose wait
/// failed gets the error and no offsets, as Kafka answers a coordinator error (v0-1 carry
/// it in every partition, with no offset).
#[must_use]
pub fn failed(
    version: i16,
    mut resp: OffsetFetchResponse,
    failed: &[(String, i16)],
) -> OffsetFetchResponse {
    if version >= 8 {
        for g in &mut resp.groups {
            if let Some((_, code)) = failed.iter().find(|(id, _)| *id == *g.group_id.0) {
                g.error_code = *code;
                g.topics.clear();
            }
        }
        return resp;
    }
    let Some((_, code)) = failed.first() else {
        return resp;
    };
    if version >= 2 {
        resp.error_code = *code;
        resp.topics.clear();
    } else {
        for p in resp.topics.iter_mut().flat_map(|t| &mut t.partitions) {
            p.error_code = *code;
            p.committed_offset = NO_OFFSET;
            p.committed_leader_epoch = -1;
            p.metadata = Some(StrBytes::default());
        }
    }
    resp
}

/// The group's error code and its answers, for the wanted (topic, partitions), or for every
/// committed offset when `wanted` is `None`.
fn lookup(
    ctx: &RequestContext,
    group: &str,
    wanted: Option<Vec<(TopicName, Vec<i32>)>>,
) -> (i16, Vec<(TopicName, Vec<Answer>)>) {
    let store = &ctx.broker.offsets;
    // Kafka's handleOffsetFetchRequest: DESCRIBE on the group; the partitions of a named
    // topic the client may not DESCRIBE answer TOPIC_AUTHORIZATION_FAILED, and with every
    // topic asked for, such topics are left out.
    let error = if !ctx.authorize_group(strata_kraft::acl::AclOperation::Describe, group) {
        group_refusal_code(GroupRefusal::Unauthorized)
    } else if valid_group_id(group) {
        crate::server::placement::check(&ctx.broker, group)
            .map_or_else(coordinator_unavailable_code, |()| 0)
    } else {
        group_refusal_code(GroupRefusal::InvalidId)
    };
    // An invalid group, or one this node does not coordinate: no offsets are answered.
    let invalid = error != 0;
    match wanted {
        Some(topics) => {
            let answers = topics
                .into_iter()
                .map(|(name, partitions)| {
                    let refused = !invalid
                        && !ctx.authorize(
                            strata_kraft::acl::AclOperation::Describe,
                            strata_kraft::acl::ResourceType::Topic,
                            &name.0,
                        );
                    let parts = partitions
                        .into_iter()
                        .map(|p| {
                            if refused {
                                let code =
                                    strata_protocol::ResponseError::TopicAuthorizationFailed.code();
                                return (p, NO_OFFSET, -1, String::new(), code);
                            }
                            match store.fetch(group, &name.0, p).filter(|_| !invalid) {
                                Some(v) => (p, v.offset, v.leader_epoch, v.metadata, 0),
                                None => (p, NO_OFFSET, -1, String::new(), 0),
                            }
                        })
                        .collect();
                    (name, parts)
                })
                .collect();
            (error, answers)
        }
        None if invalid => (error, Vec::new()),
        None => {
            let mut out: Vec<(TopicName, Vec<Answer>)> = Vec::new();
            for (topic, p, v) in store.fetch_all(group).into_iter().filter(|(t, _, _)| {
                ctx.authorize(
                    strata_kraft::acl::AclOperation::Describe,
                    strata_kraft::acl::ResourceType::Topic,
                    t,
                )
            }) {
                let answer = (p, v.offset, v.leader_epoch, v.metadata, 0);
                match out.last_mut() {
                    Some((name, parts)) if *name.0 == *topic => parts.push(answer),
                    _ => out.push((TopicName(StrBytes::from_string(topic)), vec![answer])),
                }
            }
            (error, out)
        }
    }
}
