//! One file per Kafka API, each named after its `ApiKey`, and the single dispatch `match`.
//!
//! Every handler has the same shape: `handle(ctx, request) -> response`. Per-partition and
//! per-topic failures are data in the response; nothing here closes the connection.

use std::sync::Arc;

use strata_protocol::codec;
use strata_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};

use crate::broker::Broker;
use crate::server::connection::Slot;
use crate::server::forward;

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod allocate_producer_ids;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod broker_heartbeat;
pub mod broker_registration;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
#[cfg(test)]
pub(crate) mod fixture;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod replica_fetch;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

/// What a handler knows about the request it serves.
#[derive(Clone)]
pub struct RequestContext {
    /// The node.
    pub broker: Arc<Broker>,
    /// The API.
    pub api_key: ApiKey,
    /// The request's version: it decides which response fields exist.
    pub api_version: i16,
    /// Echoed in the response header.
    pub correlation_id: i32,
    /// `client.id`, for logs.
    pub client_id: Option<String>,
    /// The client's address, `None` where there is no socket. Kafka reports a group member's
    /// host from it.
    pub peer: Option<std::net::SocketAddr>,
    /// The name of the listener the request came in on (`INTERNAL`, `EXTERNAL`), `None`
    /// where there is no socket. Kafka answers Metadata and FindCoordinator with each
    /// broker's endpoint on that same listener, so that a client inside a network and one
    /// outside it are each given addresses they can reach.
    pub listener: Option<Arc<str>>,
    /// The connection's KIP-219 mute, which a quota-throttled Produce or Fetch extends;
    /// `None` where there is no client connection.
    pub mute: Option<Arc<crate::server::client_quotas::Mute>>,
    /// Who asks: the connection's principal (`User:ANONYMOUS` without TLS client
    /// certificates or SASL), which every authorization check is made against.
    pub principal: Arc<str>,
}

impl RequestContext {
    /// Builds the context from a decoded header and the connection's peer address.
    #[must_use]
    pub fn new(
        broker: Arc<Broker>,
        header: &RequestHeader,
        api_key: ApiKey,
        peer: Option<std::net::SocketAddr>,
        listener: Option<Arc<str>>,
    ) -> Self {
        RequestContext {
            broker,
            api_key,
            api_version: header.request_api_version,
            correlation_id: header.correlation_id,
            client_id: header.client_id.as_ref().map(|c| c.to_string()),
            peer,
            listener,
            mute: None,
            principal: Arc::from(crate::security::principal::ANONYMOUS),
        }
    }

    /// The user a quota is looked up for: the principal's name (`User:alice` is `alice`),
    /// as Kafka's `KafkaPrincipal.getName()`.
    #[must_use]
    pub fn quota_user(&self) -> &str {
        self.principal
            .strip_prefix("User:")
            .unwrap_or(&self.principal)
    }

    /// Records `bytes` against the client's `kind` quota (KIP-13) and returns the
    /// throttle time for the response's `throttle_time_ms`; a throttled connection is
    /// muted for that long (KIP-219).
    #[must_use]
    pub fn throttle(&self, kind: crate::server::client_quotas::QuotaType, bytes: u64) -> i32 {
        let throttle = crate::server::client_quotas::record(
            &self.broker.image(),
            kind,
            self.quota_user(),
            self.client_id.as_deref().unwrap_or(""),
            bytes,
            crate::now_ms(),
        );
        if throttle > 0
            && let Some(mute) = &self.mute
        {
            mute.extend(throttle);
        }
        throttle
    }

    /// Where a client on this request's listener reaches broker `b`: its advertised
    /// endpoint on the same listener (Kafka's `getAliveBrokerNode(id, listenerName)`). A
    /// broker that registered no endpoint of that name is given by its first one, where
    /// Kafka would leave it out: a single node registers one endpoint whatever its
    /// listeners, and a client is better served by an address than by a missing broker.
    #[must_use]
    pub fn endpoint_of(&self, b: &strata_kraft::BrokerImage) -> (String, u16) {
        let cfg = &self.broker.config;
        if let Some(name) = self.listener.as_deref() {
            if b.node_id == cfg.node_id
                && let Some((_, host, port)) =
                    cfg.advertised_endpoints.iter().find(|(n, _, _)| n == name)
            {
                return (host.clone(), *port);
            }
            if let Some(e) = b.endpoints.iter().find(|e| e.name == name) {
                return (e.host.clone(), e.port);
            }
        }
        (b.host.clone(), b.port)
    }

    /// This broker's own advertised endpoint on the request's listener, for the answers
    /// that name this node (FindCoordinator).
    #[must_use]
    pub fn own_endpoint(&self) -> (String, u16) {
        let cfg = &self.broker.config;
        self.listener
            .as_deref()
            .and_then(|name| cfg.advertised_endpoints.iter().find(|(n, _, _)| n == name))
            .map_or_else(
                || (cfg.advertised_host.clone(), cfg.advertised_port),
                |(_, host, port)| (host.clone(), *port),
            )
    }

    /// The client's host as Kafka prints a Java `InetAddress` in DescribeGroups:
    /// `"/127.0.0.1"`; empty when unknown.
    #[must_use]
    pub fn client_host(&self) -> String {
        self.peer
            .map(|p| format!("/{}", p.ip()))
            .unwrap_or_default()
    }

    /// Encodes a response for this request. An encoding failure is a broker bug: it is logged
    /// and the connection closes, since the client would otherwise wait forever.
    fn encode(&self, body: &ResponseKind) -> Option<bytes::Bytes> {
        match codec::encode_response(self.api_key, self.api_version, self.correlation_id, body) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::error!(error = %e, "response encoding failed");
                None
            }
        }
    }
}

/// Runs a request and returns its response slot, timing it for the metrics endpoint.
pub async fn dispatch(ctx: RequestContext, body: RequestKind) -> Slot {
    let timer = crate::metrics::RequestTimer::start(ctx.api_key as i16, ctx.api_version, &body);
    timed(timer, dispatch_api(ctx, body).await)
}

/// Records the request's latency when its response is ready: now for an inline answer,
/// when the task ends for one computed in a task (a parked fetch, a join, a produce waiting
/// for its fsync). A request whose connection closes is counted too.
fn timed(timer: crate::metrics::RequestTimer, slot: Slot) -> Slot {
    match slot {
        Slot::Ready(_) | Slot::NoResponse | Slot::Close => {
            timer.record();
            slot
        }
        Slot::Pending(handle) => Slot::Pending(timed_task(timer, handle)),
        Slot::PendingPlan(handle) => Slot::PendingPlan(timed_task(timer, handle)),
    }
}

/// `handle`'s answer once its task ends, with the request's latency recorded then; a task
/// that failed answers nothing (the connection closes).
fn timed_task<T: Send + 'static>(
    timer: crate::metrics::RequestTimer,
    handle: tokio::task::JoinHandle<Option<T>>,
) -> tokio::task::JoinHandle<Option<T>> {
    tokio::spawn(async move {
        let done = handle.await;
        timer.record();
        done.unwrap_or_else(|e| {
            tracing::error!(error = %e, "request task failed; closing connection");
            None
        })
    })
}

/// Runs a request and returns its response slot. Requests that may park (Fetch) run in a task
/// of their own; the others are answered inline, which keeps one connection's appends in the
/// order the client sent them.
async fn dispatch_api(ctx: RequestContext, body: RequestKind) -> Slot {
    let response = match body {
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(&ctx, r)),
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(&ctx, r).await),
        RequestKind::Produce(r) => {
            let bytes = produce::record_bytes(&r);
            // KIP-890: a batch that opens a transaction on a partition is checked with the
            // producer's coordinator first. Awaited inline, so that the connection's appends
            // stay in the order sent; only the first batch of a transaction on a partition
            // asks.
            let unverified = produce::verification::refused(&ctx, &r).await;
            let produced = produce::handle(&ctx, r, &unverified);
            let throttle = ctx.throttle(crate::server::client_quotas::QuotaType::Produce, bytes);
            match produced {
                produce::Produced::Ready(resp) => {
                    ResponseKind::Produce(resp.with_throttle_time_ms(throttle))
                }
                produce::Produced::NoResponse => return Slot::NoResponse,
                // The records are appended (in order, inline); only the answer waits for the
                // fsync, so the connection's next produce can join the same group commit.
                produce::Produced::AfterFlush(pending) => {
                    return Slot::Pending(tokio::spawn(async move {
                        let _waiting = crate::metrics::produce_waiting();
                        let resp = pending.wait().await.with_throttle_time_ms(throttle);
                        ctx.encode(&ResponseKind::Produce(resp))
                    }));
                }
            }
        }
        RequestKind::Fetch(r) => {
            let consumer = r.replica_id.0 < 0 && r.replica_state.replica_id.0 < 0;
            return Slot::PendingPlan(tokio::spawn(async move {
                let mut fetched = fetch::handle(&ctx, r).await;
                let throttled = consumer && fetch::apply_quota(&ctx, &mut fetched);
                let (response, records) = fetch::settle(&ctx, fetched, throttled);
                fetch::encode(&ctx, response, records)
            }));
        }
        RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(
            crate::server::authorization::list_offsets(&ctx, r, list_offsets::handle),
        ),
        RequestKind::OffsetCommit(r) => {
            // Appended here, in the connection's order; only the answer waits.
            let pending = offset_commit::handle(&ctx, r);
            return Slot::Pending(tokio::spawn(async move {
                let resp = pending.wait().await;
                ctx.encode(&ResponseKind::OffsetCommit(resp))
            }));
        }
        RequestKind::OffsetFetch(r) => {
            let single = r.group_id.0.to_string();
            let version = ctx.api_version;
            let resp = offset_fetch::handle(&ctx, r);
            let groups = offset_fetch::answered(version, &resp, &single);
            if !groups.is_empty() {
                return after_commit(ctx, groups, resp, move |resp, failed| {
                    ResponseKind::OffsetFetch(offset_fetch::failed(version, resp, failed))
                });
            }
            ResponseKind::OffsetFetch(resp)
        }
        RequestKind::OffsetDelete(r) => {
            let group = r.group_id.0.to_string();
            let resp = offset_delete::handle(&ctx, r);
            if resp.error_code == 0 {
                // The tombstones are answered once committed; a failure is the group's
                // error, with no partitions (as a group-level error is answered).
                return after_commit(ctx, vec![group], resp, |resp, failed| {
                    ResponseKind::OffsetDelete(match failed.first() {
                        None => resp,
                        Some((_, code)) => {
                            strata_protocol::messages::OffsetDeleteResponse::default()
                                .with_error_code(*code)
                        }
                    })
                });
            }
            ResponseKind::OffsetDelete(resp)
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(&ctx, r))
        }
        RequestKind::CreateTopics(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, create_topics::handle_kind);
        }
        RequestKind::CreateTopics(r) => create_topics::handle_kind(ctx.clone(), r).await,
        RequestKind::DeleteTopics(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, delete_topics::handle_kind);
        }
        RequestKind::DeleteTopics(r) => delete_topics::handle_kind(ctx.clone(), r).await,
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(&ctx, r))
        }
        RequestKind::CreatePartitions(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, create_partitions::handle_kind);
        }
        RequestKind::CreatePartitions(r) => create_partitions::handle_kind(ctx.clone(), r).await,
        RequestKind::ElectLeaders(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, elect_leaders::handle_kind);
        }
        RequestKind::ElectLeaders(r) => elect_leaders::handle_kind(ctx.clone(), r).await,
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(&ctx, r).await)
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(describe_producers::handle(&ctx, r))
        }
        // The transaction requests wait for their write to `__transaction_state` on a task of
        // their own, so the connection's next requests are processed meanwhile.
        RequestKind::AddPartitionsToTxn(r) => {
            return Slot::Pending(tokio::spawn(async move {
                let resp = add_partitions_to_txn::handle(&ctx, r).await;
                ctx.encode(&ResponseKind::AddPartitionsToTxn(resp))
            }));
        }
        RequestKind::AddOffsetsToTxn(r) => {
            return Slot::Pending(tokio::spawn(async move {
                let resp = add_offsets_to_txn::handle(&ctx, r).await;
                ctx.encode(&ResponseKind::AddOffsetsToTxn(resp))
            }));
        }
        RequestKind::TxnOffsetCommit(r) => {
            return Slot::Pending(tokio::spawn(async move {
                let resp = txn_offset_commit::handle(&ctx, r).await;
                ctx.encode(&ResponseKind::TxnOffsetCommit(resp))
            }));
        }
        RequestKind::EndTxn(r) => {
            return Slot::Pending(tokio::spawn(async move {
                let resp = end_txn::handle(&ctx, r).await;
                ctx.encode(&ResponseKind::EndTxn(resp))
            }));
        }
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(write_txn_markers::handle(&ctx, r).await)
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(describe_transactions::handle(&ctx, r))
        }
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(list_transactions::handle(&ctx, r))
        }
        RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(describe_acls::handle(&ctx, r)),
        RequestKind::CreateAcls(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, create_acls::handle_kind);
        }
        RequestKind::CreateAcls(r) => create_acls::handle_kind(ctx.clone(), r).await,
        RequestKind::DeleteAcls(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, delete_acls::handle_kind);
        }
        RequestKind::DeleteAcls(r) => delete_acls::handle_kind(ctx.clone(), r).await,
        RequestKind::DescribeConfigs(r) => ResponseKind::DescribeConfigs(
            crate::server::authorization::describe_configs(&ctx, r, describe_configs::handle),
        ),
        RequestKind::AlterConfigs(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, authorized_alter_configs);
        }
        RequestKind::AlterConfigs(r) => authorized_alter_configs(ctx.clone(), r).await,
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(&ctx, r))
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(&ctx, r))
        }
        RequestKind::IncrementalAlterConfigs(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, authorized_incremental_alter_configs);
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            authorized_incremental_alter_configs(ctx.clone(), r).await
        }
        RequestKind::AlterPartitionReassignments(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, alter_partition_reassignments::handle_kind);
        }
        RequestKind::AlterPartitionReassignments(r) => {
            alter_partition_reassignments::handle_kind(ctx.clone(), r).await
        }
        RequestKind::ListPartitionReassignments(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, list_partition_reassignments::handle_kind);
        }
        RequestKind::ListPartitionReassignments(r) => {
            list_partition_reassignments::handle_kind(ctx.clone(), r).await
        }
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(describe_client_quotas::handle(&ctx, r))
        }
        RequestKind::AlterClientQuotas(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, alter_client_quotas::handle_kind);
        }
        RequestKind::AlterClientQuotas(r) => alter_client_quotas::handle_kind(ctx.clone(), r).await,
        RequestKind::DescribeUserScramCredentials(r) => ResponseKind::DescribeUserScramCredentials(
            describe_user_scram_credentials::handle(&ctx, r),
        ),
        RequestKind::AlterUserScramCredentials(r) if forward::route(&ctx) => {
            return forwarded(ctx, r, alter_user_scram_credentials::handle_kind);
        }
        RequestKind::AlterUserScramCredentials(r) => {
            alter_user_scram_credentials::handle_kind(ctx.clone(), r).await
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(find_coordinator::handle(&ctx, r))
        }
        RequestKind::JoinGroup(r) => {
            return Slot::Pending(tokio::spawn(async move {
                let resp = join_group::handle(&ctx, r).await;
                ctx.encode(&ResponseKind::JoinGroup(resp))
            }));
        }
        RequestKind::SyncGroup(r) => {
            return Slot::Pending(tokio::spawn(async move {
                let resp = sync_group::handle(&ctx, r).await;
                ctx.encode(&ResponseKind::SyncGroup(resp))
            }));
        }
        RequestKind::Heartbeat(r) => {
            // Kafka defers a heartbeat, like any group operation, to its partition's last
            // written offset: REBALANCE_IN_PROGRESS or success is told of committed state.
            let group = r.group_id.0.to_string();
            let resp = heartbeat::handle(&ctx, r);
            if resp.error_code == 0
                || resp.error_code == strata_protocol::ResponseError::RebalanceInProgress.code()
            {
                return after_commit(ctx, vec![group], resp, |resp, failed| {
                    ResponseKind::Heartbeat(match failed.first() {
                        None => resp,
                        Some((_, code)) => resp.with_error_code(*code),
                    })
                });
            }
            ResponseKind::Heartbeat(resp)
        }
        RequestKind::LeaveGroup(r) => {
            let group = r.group_id.0.to_string();
            let resp = leave_group::handle(&ctx, r);
            if resp.error_code == 0 {
                return after_commit(ctx, vec![group], resp, |resp, failed| {
                    ResponseKind::LeaveGroup(leave_group::failed(resp, failed))
                });
            }
            ResponseKind::LeaveGroup(resp)
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(list_groups::handle(&ctx, r)),
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(describe_groups::handle(&ctx, r))
        }
        RequestKind::DeleteGroups(r) => {
            let resp = delete_groups::handle(&ctx, r);
            let deleted = delete_groups::deleted(&resp);
            return after_commit(ctx, deleted, resp, |resp, failed| {
                ResponseKind::DeleteGroups(delete_groups::failed(resp, failed))
            });
        }
        RequestKind::DescribeQuorum(r) => {
            return Slot::Pending(tokio::spawn(async move {
                let resp = describe_quorum::handle(&ctx, r).await;
                ctx.encode(&resp)
            }));
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            let group = r.group_id.0.to_string();
            let resp = consumer_group_heartbeat::handle(&ctx, r);
            if resp.error_code == 0 {
                return after_commit(ctx, vec![group], resp, |resp, failed| {
                    ResponseKind::ConsumerGroupHeartbeat(consumer_group_heartbeat::failed(
                        resp, failed,
                    ))
                });
            }
            ResponseKind::ConsumerGroupHeartbeat(resp)
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            ResponseKind::ConsumerGroupDescribe(consumer_group_describe::handle(&ctx, r))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions::handle(&ctx, r))
        }
        // A connection of a SASL listener has these answered by its authenticator
        // (`security::sasl`); anywhere else they are out of place, and Kafka's
        // `KafkaApis` answers ILLEGAL_SASL_STATE.
        RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(
            strata_protocol::messages::SaslHandshakeResponse::default()
                .with_error_code(strata_protocol::ResponseError::IllegalSaslState.code()),
        ),
        RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(
            strata_protocol::messages::SaslAuthenticateResponse::default()
                .with_error_code(strata_protocol::ResponseError::IllegalSaslState.code())
                .with_error_message(Some(strata_protocol::StrBytes::from_static_str(
                    "Unexpected SASL request on a connection that does not use SASL",
                ))),
        ),
        other => {
            // The decoder admits only the APIs in the version table, and each has an arm above;
            // reaching this means the table and this match disagree.
            tracing::error!(api = ?ctx.api_key, request = ?std::mem::discriminant(&other), "no handler");
            return Slot::Close;
        }
    };
    ctx.encode(&response).map_or(Slot::Close, Slot::Ready)
}

/// One of the metadata writes ([`codec::FORWARDED_APIS`]) that arrived on a controller
/// listener: a broker forwarding to a dedicated controller, or an admin client talking to
/// a controller directly. It is answered here, never forwarded again (a controller that
/// does not lead answers NOT_CONTROLLER, as Kafka's does), in a task of its own, since the
/// write waits for its entry to commit.
pub fn controller_write(ctx: RequestContext, body: RequestKind) -> Slot {
    Slot::Pending(tokio::spawn(async move {
        let response = match body {
            RequestKind::CreateTopics(r) => create_topics::handle_kind(ctx.clone(), r).await,
            RequestKind::DeleteTopics(r) => delete_topics::handle_kind(ctx.clone(), r).await,
            RequestKind::CreateAcls(r) => create_acls::handle_kind(ctx.clone(), r).await,
            RequestKind::DeleteAcls(r) => delete_acls::handle_kind(ctx.clone(), r).await,
            RequestKind::CreatePartitions(r) => {
                create_partitions::handle_kind(ctx.clone(), r).await
            }
            RequestKind::ElectLeaders(r) => elect_leaders::handle_kind(ctx.clone(), r).await,
            RequestKind::AlterConfigs(r) => authorized_alter_configs(ctx.clone(), r).await,
            RequestKind::IncrementalAlterConfigs(r) => {
                authorized_incremental_alter_configs(ctx.clone(), r).await
            }
            RequestKind::AlterPartitionReassignments(r) => {
                alter_partition_reassignments::handle_kind(ctx.clone(), r).await
            }
            RequestKind::ListPartitionReassignments(r) => {
                list_partition_reassignments::handle_kind(ctx.clone(), r).await
            }
            RequestKind::AlterClientQuotas(r) => {
                alter_client_quotas::handle_kind(ctx.clone(), r).await
            }
            RequestKind::AlterUserScramCredentials(r) => {
                alter_user_scram_credentials::handle_kind(ctx.clone(), r).await
            }
            other => {
                tracing::error!(api = ?ctx.api_key, request = ?std::mem::discriminant(&other), "not a metadata write");
                return None;
            }
        };
        ctx.encode(&response)
    }))
}

/// AlterConfigs behind its authorization, also where a forwarded one falls back to this
/// node.
async fn authorized_alter_configs(
    ctx: RequestContext,
    r: strata_protocol::messages::AlterConfigsRequest,
) -> ResponseKind {
    crate::server::authorization::alter_configs(ctx, r, alter_configs::handle_kind).await
}

/// IncrementalAlterConfigs behind its authorization, also where a forwarded one falls back
/// to this node.
async fn authorized_incremental_alter_configs(
    ctx: RequestContext,
    r: strata_protocol::messages::IncrementalAlterConfigsRequest,
) -> ResponseKind {
    crate::server::authorization::incremental_alter_configs(
        ctx,
        r,
        incremental_alter_configs::handle_kind,
    )
    .await
}

/// A group request applied inline (in the connection's order) whose answer waits until each
/// group's `__consumer_offsets` partition has committed what it held then
/// ([`crate::server::placement::committed`]). `finish` builds the response with the groups
/// whose wait failed and their error codes.
fn after_commit<R: Send + 'static>(
    ctx: RequestContext,
    groups: Vec<String>,
    answer: R,
    finish: impl FnOnce(R, &[(String, i16)]) -> ResponseKind + Send + 'static,
) -> Slot {
    Slot::Pending(tokio::spawn(async move {
        let mut failed = Vec::new();
        for group in groups {
            if let Err(code) = crate::server::placement::committed(&ctx.broker, &group).await {
                failed.push((group, code));
            }
        }
        ctx.encode(&finish(answer, &failed))
    }))
}

/// A controller-bound request on a node that is not the active controller: forwarded to it
/// in a task of its own, so that the wait for the controller (bounded by the request's
/// timeout) holds no worker thread and the connection's later requests are not held up
/// behind it either.
fn forwarded<R, F, A>(ctx: RequestContext, req: R, local: F) -> Slot
where
    R: Clone + Send + 'static,
    RequestKind: From<R>,
    F: FnOnce(RequestContext, R) -> A + Send + 'static,
    A: Future<Output = ResponseKind> + Send,
{
    Slot::Pending(tokio::spawn(async move {
        let response = forward::relay(&ctx, req, local).await;
        ctx.encode(&response)
    }))
}
