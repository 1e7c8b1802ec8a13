//! ElectLeaders (key 43, v0-2, KIP-460): preferred (0) or unclean (1) leader elections on
//! the controller (see `Broker::elect_leaders`). v0 has no election type and means
//! PREFERRED. A null `topic_partitions` asks for every partition, and then, as Kafka
//! answers it, each topic is listed with only the partitions that needed an election.
//!
//! Per-partition outcomes use Kafka's codes: ELECTION_NOT_NEEDED,
//! PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
//! UNKNOWN_TOPIC_OR_PARTITION. A failure of the whole request (an unknown election type,
//! not the controller, a timeout) is Kafka's `ElectLeadersRequest.getErrorResponse`: the
//! top-level error (v1+) and the same code for every partition named.

use strata_kraft::cluster_control::{ElectLeadersResult, ElectionType};
use strata_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use strata_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use strata_protocol::{ResponseError, StrBytes};

use super::RequestContext;
use crate::server::error::{election_error_code, metadata_error_code};

/// Runs the elections the request asks for.
#[must_use]
pub async fn handle(ctx: &RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let partitions: Option<Vec<(String, i32)>> = req.topic_partitions.as_ref().map(|topics| {
        let mut seen = std::collections::HashSet::new();
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
            // A partition named twice is elected once (the admin clients send a set).
            .filter(|tp| seen.insert(tp.clone()))
            .collect()
    });
    // KafkaApis: ALTER on the cluster.
    if !ctx.authorize_cluster(strata_kraft::acl::AclOperation::Alter) {
        return failed(
            ctx.api_version,
            ResponseError::ClusterAuthorizationFailed.code(),
            "Cluster authorization failed.",
            partitions.as_deref(),
        );
    }
    let election_type = match req.election_type {
        0 => ElectionType::Preferred,
        1 => ElectionType::Unclean,
        other => {
            return failed(
                ctx.api_version,
                ResponseError::InvalidRequest.code(),
                &format!("Unknown election type {other}"),
                partitions.as_deref(),
            );
        }
    };
    match ctx
        .broker
        .elect_leaders(election_type, partitions.as_deref())
        .await
    {
        Ok(done) => ElectLeadersResponse::default()
            .with_replica_election_results(by_topic(done.all_topics, done.results)),
        Err(e) => failed(
            ctx.api_version,
            metadata_error_code(&e),
            &e.to_string(),
            partitions.as_deref(),
        ),
    }
}

/// [`handle`] with its answer as a [`ResponseKind`](strata_protocol::messages::ResponseKind),
/// the shape [`crate::server::forward::relay`] falls back to.
#[must_use]
pub async fn handle_kind(
    ctx: RequestContext,
    req: ElectLeadersRequest,
) -> strata_protocol::messages::ResponseKind {
    strata_protocol::messages::ResponseKind::ElectLeaders(handle(&ctx, req).await)
}

/// Groups consecutive results of one topic. `all_topics` (the request named no partitions)
/// adds the topics none of whose partitions needed an election, with no results.
fn by_topic(
    all_topics: Vec<String>,
    results: Vec<ElectLeadersResult>,
) -> Vec<ReplicaElectionResult> {
    let mut out: Vec<ReplicaElectionResult> = Vec::new();
    let mut results = results.into_iter().peekable();
    let push = |out: &mut Vec<ReplicaElectionResult>, r: ElectLeadersResult| {
        let partition = PartitionResult::default()
            .with_partition_id(r.partition)
            .with_error_code(r.error.map_or(0, election_error_code))
            .with_error_message(r.error.map(|e| StrBytes::from_string(e.to_string())));
        match out.last_mut() {
            Some(last) if last.topic.0.as_str() == r.topic => last.partition_result.push(partition),
            _ => out.push(
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(r.topic)))
                    .with_partition_result(vec![partition]),
            ),
        }
    };
    if all_topics.is_empty() {
        for r in results {
            push(&mut out, r);
        }
        return out;
    }
    // Both lists are in topic-name order.
    for topic in all_topics {
        out.push(
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_string(topic.clone()))),
        );
        while let Some(r) = results.next_if(|r| r.topic == topic) {
            push(&mut out, r);
        }
    }
    out
}

/// The answer to a request that failed as a whole. v0 has no top-level error code: only
/// the partitions carry it.
fn failed(
    version: i16,
    code: i16,
    message: &str,
    partitions: Option<&[(String, i32)]>,
) -> ElectLeadersResponse {
    let results = partitions
        .unwrap_or_default()
        .iter()
        .map(|(topic, p)| ElectLeadersResult {
            topic: topic.clone(),
            partition: *p,
            error: None,
        });
    let mut out = by_topic(Vec::new(), results.collect());
    for t in &mut out {
        for p in &mut t.partition_result {
            p.error_code = code;
            p.error_message = Some(StrBytes::from_string(message.to_owned()));
        }
    }
    ElectLeadersResponse::default()
        .with_error_code(if version >= 1 { code } else { 0 })
        .with_replica_election_results(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_kraft::ElectionError;

    fn result(topic: &str, partition: i32, error: Option<ElectionError>) -> ElectLeadersResult {
        ElectLeadersResult {
            topic: topic.to_owned(),
            partition,
            error,
        }
    }

    #[test]
    fn every_topic_is_listed_when_every_partition_was_asked_for() {
        let out = by_topic(
            vec!["a".into(), "b".into(), "c".into()],
            vec![
                result("b", 0, None),
                result("b", 2, Some(ElectionError::PreferredLeaderNotAvailable)),
            ],
        );
        let shape: Vec<(String, Vec<(i32, i16)>)> = out
            .iter()
            .map(|t| {
                (
                    t.topic.0.to_string(),
                    t.partition_result
                        .iter()
                        .map(|p| (p.partition_id, p.error_code))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                ("a".into(), vec![]),
                ("b".into(), vec![(0, 0), (2, 80)]),
                ("c".into(), vec![]),
            ]
        );
        assert_eq!(out[1].partition_result[0].error_message, None);
    }

    #[test]
    fn a_failed_request_answers_every_partition_named() {
        let named = vec![
            ("t".to_owned(), 0),
            ("t".to_owned(), 1),
            ("u".to_owned(), 0),
        ];
        let r = failed(1, ResponseError::NotController.code(), "no", Some(&named));
        assert_eq!(r.error_code, 41);
        assert_eq!(r.replica_election_results.len(), 2);
        assert!(
            r.replica_election_results
                .iter()
                .flat_map(|t| &t.partition_result)
                .all(|p| p.error_code == 41)
        );
        assert!(
            failed(1, 41, "no", None)
                .replica_election_results
                .is_empty()
        );
        // v0 carries the code per partition only; a top-level one could not be encoded.
        let v0 = failed(0, 41, "no", Some(&named));
        assert_eq!(v0.error_code, 0);
        assert!(
            v0.replica_election_results
                .iter()
                .flat_map(|t| &t.partition_result)
                .all(|p| p.error_code == 41)
        );
        assert!(
            strata_protocol::codec::encode_response(
                strata_protocol::messages::ApiKey::ElectLeaders,
                0,
                1,
                &strata_protocol::messages::ResponseKind::ElectLeaders(v0),
            )
            .is_ok()
        );
    }

    #[test]
    fn election_codes_are_kafkas() {
        assert_eq!(
            election_error_code(ElectionError::UnknownTopicOrPartition),
            3
        );
        assert_eq!(
            election_error_code(ElectionError::PreferredLeaderNotAvailable),
            80
        );
        assert_eq!(
            election_error_code(ElectionError::EligibleLeadersNotAvailable),
            83
        );
        assert_eq!(election_error_code(ElectionError::ElectionNotNeeded), 84);
    }
}
