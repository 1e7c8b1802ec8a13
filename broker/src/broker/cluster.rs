//! A node of the metadata quorum (every node, a lone one included): metadata written
//! through the quorum's active controller, and this node's logs following the committed
//! image.
//!
//! - **Writes.** Only the quorum's leader writes metadata. The active controller is one
//!   task ([`run_controller`]) that owns the controller's state (the brokers' sessions) and
//!   takes operations from a channel, one at a time: it waits until this node leads and has
//!   applied its whole log (a new leader first commits its predecessors' entries with its
//!   own LeaderChange), computes the operation's records from that image with the same
//!   sans-IO controller functions (`strata_kraft`), proposes them as one entry, and answers
//!   the caller's oneshot once the quorum driver has committed and applied it; the caller
//!   returns once this node serves the entry (read-your-writes on the node that wrote it). Nothing on this
//!   path blocks a thread: it once did (a std `Mutex` held across the commit, a 5 ms
//!   `thread::sleep` poll for readiness, `block_in_place` around both), and a forwarded
//!   request answered inline on a runtime worker then starved the quorum driver of that
//!   worker, so the entry it waited for could not commit: the quorum stalled for the 5 s
//!   proposal timeout. `tests/it/cluster_controller_writes.rs` is the test that catches it.
//!   On any other node a write is `MetadataError::NotController`: clients look the
//!   controller up again (Metadata's `controller_id` is the quorum leader) and retry there,
//!   as they do with a ZooKeeper-mode Kafka controller. Kafka's KRaft brokers would forward
//!   the request instead (KIP-590); Strata does not forward yet.
//! - **Broker lifecycle.** The active controller keeps the brokers' sessions
//!   (`BrokerHeartbeats`, fresh on each new leadership, as Kafka's) and answers
//!   BrokerRegistration and BrokerHeartbeat (from `crate::broker::lifecycle`, on every node) with
//!   the cluster-control functions; its periodic tick fences brokers whose session expired,
//!   which elects new leaders for their partitions, and runs the preferred-leader pass.
//! - **Reads.** Every node applies committed entries in the quorum driver and publishes the
//!   image; [`Broker::apply_image`] opens (or creates) the log of every partition whose
//!   replica set holds this node, removes the data of deleted topics and of replicas moved
//!   away, gives changed topic configs to the open logs, and only then makes the image the
//!   one requests see, so a client never learns of a partition here before its log exists.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use strata_kraft::cluster_control::{
    self, BrokerHeartbeatReply, BrokerHeartbeatRequest, BrokerHeartbeats,
    BrokerRegistrationRequest, ClusterControlConfig,
};
use strata_kraft::raft::RoleKind;
use strata_kraft::record::ProducerIdsBlock;
use strata_kraft::{
    BrokerImage, ClusterControlError, ControllerConfig, MetadataError, MetadataImage,
    MetadataRecord,
};
use strata_storage::Log;
use tokio::sync::{mpsc, oneshot, watch};

use super::Broker;
use crate::coordinator::InternalTopic;
use crate::coordinator::offsets::OFFSETS_TOPIC;
use crate::coordinator::txn::records::TRANSACTION_STATE_TOPIC;
use crate::partition::Partition;
use crate::quorum::QuorumHandle;

/// How long a write waits for a new leader to apply its predecessors' entries.
const READY_TIMEOUT: Duration = Duration::from_secs(3);

/// How many operations may wait for the controller task.
const CONTROLLER_QUEUE: usize = 1024;

/// How many preferred-leader elections one rebalancing pass writes at most (Kafka's
/// `maxElectionsPerImbalance`).
const MAX_ELECTIONS_PER_PASS: usize = 1000;

/// The quorum-backed metadata of a node.
pub(super) struct ClusterMetadata {
    /// The running quorum driver, set once it has started (after the broker opened).
    quorum: OnceLock<QuorumHandle>,
    /// The committed image as the driver publishes it.
    images: watch::Receiver<Arc<MetadataImage>>,
    /// Into the controller task, started with the quorum driver: operations run there one
    /// at a time, each computed from the image the previous one left.
    controller: OnceLock<mpsc::Sender<Box<dyn ControllerJob>>>,
    /// The cluster-control settings the controller task starts with.
    control_config: ClusterControlConfig,
    /// Whether this start found the clean-shutdown marker: logs opened for the first time
    /// since start skip recovery.
    clean_start: bool,
    /// The recovery points of an unclean start, read once, used as logs open.
    recovery_points: HashMap<(String, i32), i64>,
    /// The log start offsets checkpointed before this start (DeleteRecords, retention),
    /// read once; each is taken by the first open of its partition's log, so a topic
    /// created again under the name later does not inherit it.
    log_starts: std::sync::Mutex<HashMap<(String, i32), i64>>,
    /// Becomes `true` once an applied image shows this process's broker registered and
    /// unfenced (see [`Broker::wait_caught_up`]), after the partition directories the
    /// metadata does not place here were removed (Kafka's stray replicas).
    caught_up: watch::Sender<bool>,
    /// Every metadata entry below this offset is in the image this node serves.
    applied: watch::Sender<i64>,
    /// This broker's epoch, from its current registration with the controller (KIP-631),
    /// or -1 while it has none. The lifecycle sets it; AllocateProducerIds sends it, so the
    /// controller can tell this registration from an older one of the same broker id.
    broker_epoch: AtomicI64,
}

/// What the active controller keeps outside the image.
struct ControllerState {
    /// Broker sessions, as of the leadership in `epoch`.
    heartbeats: BrokerHeartbeats,
    /// The quorum epoch `heartbeats` was activated in; another epoch starts them afresh.
    epoch: i32,
    /// The cluster-control settings.
    config: ClusterControlConfig,
    /// The CreateTopics defaults.
    topics: ControllerConfig,
    /// The broker of this process (a combined node): its id and incarnation.
    this_process: Option<(i32, uuid::Uuid)>,
}

/// Why a controller operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error(transparent)]
    Cluster(#[from] ClusterControlError),
}

impl ClusterMetadata {
    pub(super) fn new(
        config: &crate::config::BrokerConfig,
        images: watch::Receiver<Arc<MetadataImage>>,
        clean_start: bool,
    ) -> Self {
        let recovery_points = if clean_start {
            HashMap::new()
        } else {
            strata_storage::checkpoint::recovery_points(&config.log_dir)
        };
        let cc = ClusterControlConfig {
            broker_session_timeout_ms: config.broker_session_timeout_ms,
            unclean_leader_election_enable: config.unclean_leader_election_enable,
            auto_leader_rebalance_enable: config.auto_leader_rebalance_enable,
        };
        ClusterMetadata {
            quorum: OnceLock::new(),
            images,
            controller: OnceLock::new(),
            control_config: cc,
            clean_start,
            recovery_points,
            log_starts: std::sync::Mutex::new(strata_storage::checkpoint::log_start_offsets(
                &config.log_dir,
            )),
            caught_up: watch::Sender::new(false),
            applied: watch::Sender::new(0),
            broker_epoch: AtomicI64::new(-1),
        }
    }
}

impl Broker {
    fn cluster(&self) -> &ClusterMetadata {
        &self.metadata
    }

    /// The newest committed image the quorum has published, which may be ahead of the one
    /// this node has applied ([`Broker::image`]): `apply_image` takes partitions' roles
    /// (and so loads coordinators) before it publishes the image it applies, and while a
    /// restarted node replays its log the applied image lags far behind.
    #[must_use]
    pub fn committed_image(&self) -> Arc<MetadataImage> {
        self.cluster().images.borrow().clone()
    }

    /// Hands the started quorum driver to the broker, and
    /// starts the controller task on the current runtime.
    pub fn attach_quorum(&self, quorum: QuorumHandle) {
        let c = self.cluster();
        if c.quorum.set(quorum.clone()).is_err() {
            return;
        }
        let (tx, rx) = mpsc::channel(CONTROLLER_QUEUE);
        let state = ControllerState {
            heartbeats: BrokerHeartbeats::new(c.control_config.broker_session_timeout_ms),
            epoch: -1,
            config: c.control_config,
            topics: ControllerConfig::default(),
            this_process: self
                .config
                .process_roles
                .broker
                .then_some((self.config.node_id, self.incarnation_id)),
        };
        if c.controller.set(tx).is_ok() {
            tokio::spawn(run_controller(quorum, c.images.clone(), state, rx));
        }
    }

    /// The quorum driver, once it has started (`None` only while the node starts).
    #[must_use]
    pub fn quorum(&self) -> Option<&QuorumHandle> {
        self.cluster().quorum.get()
    }

    /// Runs one metadata operation on the active controller: `op` gets the committed image,
    /// the offset its entry will take and the controller's state, and returns its result
    /// and records; the records are committed as one entry before this returns. The
    /// operation runs on the controller task ([`run_controller`]), so it owns what it
    /// reads; the caller only awaits the answer.
    pub(super) async fn controller_write<T, E, F>(&self, op: F) -> Result<T, E>
    where
        F: for<'a> FnOnce(
                &MetadataImage,
                i64,
                &mut ControllerStateRef<'a>,
            ) -> Result<(T, Vec<MetadataRecord>), E>
            + Send
            + 'static,
        T: Send + 'static,
        E: From<MetadataError> + Send + 'static,
    {
        let jobs = self
            .cluster()
            .controller
            .get()
            .ok_or(MetadataError::NotController)?;
        let (reply, answer) = oneshot::channel();
        jobs.send(Box::new(Job { op, reply }))
            .await
            .map_err(|_| MetadataError::NotController)?;
        let (result, offset) = answer
            .await
            .unwrap_or_else(|_| Err(MetadataError::NotController.into()))?;
        if let Some(offset) = offset {
            self.wait_applied(offset + 1).await;
        }
        Ok(result)
    }

    /// Waits (at most [`READY_TIMEOUT`]) until this node serves an image with every entry
    /// below `offset`: the writer of an entry then reads it back here, as clients of a
    /// lone node always could (a topic just created is in the next Metadata answer).
    async fn wait_applied(&self, offset: i64) {
        let mut applied = self.cluster().applied.subscribe();
        if tokio::time::timeout(READY_TIMEOUT, applied.wait_for(|&a| a >= offset))
            .await
            .is_err()
        {
            tracing::warn!(
                offset,
                "a committed metadata entry was not applied here in time"
            );
        }
    }

    /// BrokerRegistration on the active controller. Returns the broker epoch: the offset
    /// of the entry that registers it (KIP-631).
    ///
    /// # Errors
    ///
    /// [`ControllerError`]: not the controller, a duplicate registration, a bad request.
    pub async fn controller_register(
        &self,
        req: &BrokerRegistrationRequest,
    ) -> Result<i64, ControllerError> {
        let req = req.clone();
        self.controller_write(move |image, next_offset, st| {
            let (_, mut records) = cluster_control::register_broker(
                image,
                &mut st.state.heartbeats,
                &st.state.config,
                &req,
                next_offset,
                st.now_ms,
            )?;
            // The operation's records share one entry, so the epoch is that entry's offset.
            for r in &mut records {
                if let MetadataRecord::RegisterBroker(reg) = r {
                    reg.broker_epoch = next_offset;
                }
            }
            tracing::info!(
                broker_id = req.broker_id,
                broker_epoch = next_offset,
                "registering broker"
            );
            Ok((next_offset, records))
        })
        .await
    }

    /// BrokerHeartbeat on the active controller.
    ///
    /// # Errors
    ///
    /// [`ControllerError`]: not the controller, an unknown broker or a stale epoch.
    pub async fn controller_heartbeat(
        &self,
        req: &BrokerHeartbeatRequest,
    ) -> Result<BrokerHeartbeatReply, ControllerError> {
        let req = *req;
        self.controller_write(move |image, next_offset, st| {
            let (reply, records) = cluster_control::broker_heartbeat(
                image,
                &mut st.state.heartbeats,
                &st.state.config,
                &req,
                next_offset,
                st.now_ms,
            )?;
            if reply.in_controlled_shutdown && !records.is_empty() {
                st.state
                    .heartbeats
                    .move_controlled_shutdown_offset(req.broker_id, next_offset);
            }
            if !records.is_empty() {
                tracing::info!(
                    broker_id = req.broker_id,
                    ?reply,
                    records = records.len(),
                    "broker state changed"
                );
            }
            Ok((reply, records))
        })
        .await
    }

    /// The active controller's periodic work: fences brokers whose session expired (one
    /// entry each, with the leader elections it forces) and, when `rebalance` is set,
    /// moves leadership back to preferred replicas. Does nothing on another node.
    pub async fn controller_tick(&self, rebalance: bool) {
        if self
            .quorum()
            .is_none_or(|q| q.status().role != strata_kraft::raft::RoleKind::Leader)
        {
            return;
        }
        for _ in 0..64 {
            let fenced = self
                .controller_write(|image, _, st| {
                    Ok::<_, MetadataError>(
                        match cluster_control::fence_stale_broker(
                            image,
                            &st.state.heartbeats,
                            &st.state.config,
                            st.now_ms,
                        ) {
                            Some((id, records)) => {
                                tracing::warn!(
                                    broker_id = id,
                                    "fencing broker: its session expired"
                                );
                                (true, records)
                            }
                            None => (false, Vec::new()),
                        },
                    )
                })
                .await;
            match fenced {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "controller tick");
                    return;
                }
            }
        }
        if rebalance {
            let result = self
                .controller_write(|image, _, st| {
                    let records = cluster_control::rebalance_leaders_records(
                        image,
                        &st.state.config,
                        MAX_ELECTIONS_PER_PASS,
                    );
                    if !records.is_empty() {
                        tracing::info!(
                            elections = records.len(),
                            "moving leadership back to preferred replicas"
                        );
                    }
                    Ok::<_, MetadataError>(((), records))
                })
                .await;
            if let Err(e) = result {
                tracing::debug!(error = %e, "preferred leader election");
            }
        }
    }

    /// CreateTopics on the active controller: the
    /// topic's records are committed; every replica creates its log as it applies them.
    pub(super) async fn cluster_create_topic(
        &self,
        req: strata_kraft::CreateTopic,
    ) -> Result<uuid::Uuid, super::CreateTopicError> {
        self.controller_write(move |image, _, st| {
            let topic_id = loop {
                let id = uuid::Uuid::new_v4();
                if strata_kraft::is_assignable_topic_id(image, id) {
                    break id;
                }
            };
            let records =
                strata_kraft::create_topic_records(image, &req, &st.state.topics, topic_id)?;
            if req.validate_only {
                return Ok((topic_id, Vec::new()));
            }
            tracing::info!(topic = %req.name, %topic_id, partitions = req.num_partitions,
                replication_factor = req.replication_factor, "creating topic");
            Ok((topic_id, records))
        })
        .await
    }

    /// CreatePartitions on the active controller.
    pub(super) async fn cluster_create_partitions(
        &self,
        topic: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<(), MetadataError> {
        let topic = topic.to_owned();
        let assignments = assignments.map(<[Vec<i32>]>::to_vec);
        self.controller_write(move |image, _, _| {
            let records = strata_kraft::create_partitions_records(
                image,
                &topic,
                count,
                assignments.as_deref(),
            )?;
            Ok(((), if validate_only { Vec::new() } else { records }))
        })
        .await
    }

    /// DeleteTopics on the active controller; returns the topic's name.
    pub(super) async fn cluster_delete_topic(
        &self,
        topic_id: uuid::Uuid,
    ) -> Result<String, MetadataError> {
        self.controller_write(move |image, _, _| {
            let (name, records) = strata_kraft::delete_topic_records(image, topic_id)?;
            tracing::info!(topic = %name, %topic_id, "deleting topic");
            Ok((name, records))
        })
        .await
    }

    /// IncrementalAlterConfigs of one topic on the active controller. Every change is
    /// checked against the same image, and all of them commit as one entry.
    pub(super) async fn cluster_alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<(), MetadataError> {
        let topic = topic.to_owned();
        let changes = changes.to_vec();
        self.controller_write(move |image, _, _| {
            let mut records = Vec::new();
            for (key, value) in &changes {
                records.extend(strata_kraft::set_topic_config_records(
                    image,
                    &topic,
                    key,
                    value.as_deref(),
                )?);
            }
            Ok(((), if validate_only { Vec::new() } else { records }))
        })
        .await
    }

    /// Dynamic broker configs through the active controller (see
    /// [`Broker::alter_broker_configs`]).
    pub(super) async fn cluster_alter_broker_configs(
        &self,
        resource: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), MetadataError> {
        let resource = resource.to_owned();
        let changes = changes.to_vec();
        self.controller_write(move |image, _, _| {
            let records = changes
                .iter()
                .flat_map(|(key, value)| {
                    strata_kraft::set_broker_config_records(image, &resource, key, value.as_deref())
                })
                .collect();
            Ok(((), records))
        })
        .await
    }

    /// AlterClientQuotas on the active controller: every entry that passes its checks in
    /// one entry of the metadata log (see [`Broker::alter_client_quotas`]).
    pub(super) async fn cluster_alter_client_quotas(
        &self,
        entries: &[strata_kraft::client_quotas::QuotaAlteration],
        validate_only: bool,
    ) -> Result<Vec<Result<(), strata_kraft::client_quotas::ClientQuotaError>>, MetadataError> {
        let entries = entries.to_vec();
        self.controller_write(move |image, _, _| {
            let (records, results) =
                strata_kraft::client_quotas::alter_client_quotas(&image.client_quotas, &entries);
            Ok((results, if validate_only { Vec::new() } else { records }))
        })
        .await
    }

    /// AlterUserScramCredentials on the active controller: the records of
    /// [`strata_kraft::scram::alter_user_scram_credentials`], committed before the results
    /// return.
    pub(super) async fn cluster_alter_user_scram_credentials(
        &self,
        deletions: &[strata_kraft::scram::ScramDeletion],
        upsertions: &[strata_kraft::scram::ScramUpsertion],
    ) -> Result<strata_kraft::scram::ScramResults, MetadataError> {
        let deletions = deletions.to_vec();
        let upsertions = upsertions.to_vec();
        self.controller_write(move |image, _, _| {
            let (records, results) = strata_kraft::scram::alter_user_scram_credentials(
                &image.scram,
                &deletions,
                &upsertions,
            );
            Ok((results, records))
        })
        .await
    }

    /// Records this broker's epoch from its registration (`-1`: it has none).
    pub fn set_broker_epoch(&self, epoch: i64) {
        self.cluster().broker_epoch.store(epoch, Ordering::Relaxed);
    }

    /// AllocateProducerIds on the active controller (KIP-730): the next block of producer
    /// ids goes to `broker_id`, recorded by a committed `ProducerIdsRecord`.
    ///
    /// # Errors
    ///
    /// [`ControllerError`]: not the controller; STALE_BROKER_EPOCH when `broker_epoch` is not
    /// the epoch of the broker's registration, or it has none (Kafka's
    /// `ClusterControlManager.checkBrokerEpoch` answers both the same); the ids exhausted.
    pub async fn controller_allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<ProducerIdsBlock, ControllerError> {
        self.controller_write(move |image, _, _| {
            let current = image.brokers.get(&broker_id).map(|b| b.broker_epoch);
            if current != Some(broker_epoch) {
                return Err(ClusterControlError::StaleBrokerEpoch {
                    broker_id,
                    requested: broker_epoch,
                    current: current.unwrap_or(-1),
                }
                .into());
            }
            let (block, records) = strata_kraft::producer_ids_records(image, broker_id)?;
            tracing::info!(
                broker_id,
                first_producer_id = block.first_producer_id,
                size = block.size,
                "allocating a producer id block"
            );
            Ok((block, records))
        })
        .await
    }

    /// This broker's epoch from its current registration, or -1 while it has none (or on a
    /// node without a quorum).
    #[must_use]
    pub fn broker_epoch(&self) -> i64 {
        self.cluster().broker_epoch.load(Ordering::Relaxed)
    }

    /// AlterPartition on the active controller (KIP-497): the requesting leader's ISR
    /// changes, validated and committed as one entry by
    /// [`cluster_control::alter_partition`]. Returns one result per requested partition,
    /// each the partition's committed state or its error.
    ///
    /// # Errors
    ///
    /// [`ControllerError`]: not the controller; STALE_BROKER_EPOCH for the requester as a
    /// whole (an epoch other than its registration's, or no registration).
    pub async fn controller_alter_partition(
        &self,
        req: &cluster_control::AlterPartitionRequest,
    ) -> Result<Vec<cluster_control::AlterPartitionResult>, ControllerError> {
        let req = req.clone();
        self.controller_write(move |image, _, st| {
            let (records, results) =
                cluster_control::alter_partition(image, &st.state.config, &req).map_err(
                    |e| match e {
                        // Kafka's `ClusterControlManager.checkBrokerEpoch` answers an unknown
                        // broker as STALE_BROKER_EPOCH too.
                        ClusterControlError::BrokerNotRegistered(broker_id) => {
                            ClusterControlError::StaleBrokerEpoch {
                                broker_id,
                                requested: req.broker_epoch,
                                current: -1,
                            }
                        }
                        other => other,
                    },
                )?;
            if !records.is_empty() {
                // KIP-455: an expansion that brings a move's last target replica into the
                // ISR completes the move in the same record (`PartitionChangeBuilder`).
                let completed = records
                    .iter()
                    .filter(|r| {
                        matches!(r, MetadataRecord::PartitionChange(c)
                            if c.replicas.is_some()
                                && (c.adding_replicas.as_ref().is_some_and(Vec::is_empty)
                                    || c.removing_replicas.as_ref().is_some_and(Vec::is_empty)))
                    })
                    .count();
                tracing::info!(
                    broker_id = req.broker_id,
                    changes = records.len(),
                    completed_reassignments = completed,
                    "committing ISR changes"
                );
            }
            Ok((results, records))
        })
        .await
    }

    /// The next producer id block for this node. The active
    /// controller allocates every block; this node asks it with AllocateProducerIds, in
    /// process when it is the controller, else over the controller listener (bounded by
    /// the request timeout), with the broker epoch of its registration, as Kafka's
    /// `RPCProducerIdManager` does.
    ///
    /// Every failure (no registration yet, no known controller, a controller that cannot
    /// be reached or refuses) is logged and comes back as [`MetadataError::NotController`]
    /// or [`MetadataError::Timeout`]: InitProducerId answers them with a retriable error.
    pub(super) async fn cluster_allocate_producer_ids(
        &self,
    ) -> Result<ProducerIdsBlock, MetadataError> {
        let cluster = self.cluster();
        let status = cluster
            .quorum
            .get()
            .ok_or(MetadataError::NotController)?
            .status();
        let node_id = self.config.node_id;
        let broker_epoch = cluster.broker_epoch.load(Ordering::Relaxed);
        if broker_epoch < 0 {
            tracing::debug!("no producer id block yet: this broker is not registered");
            return Err(MetadataError::NotController);
        }
        if status.role == RoleKind::Leader {
            return self
                .controller_allocate_producer_ids(node_id, broker_epoch)
                .await
                .map_err(|e| match e {
                    ControllerError::Metadata(m) => m,
                    ControllerError::Cluster(c) => {
                        tracing::warn!(error = %c, "cannot allocate a producer id block");
                        MetadataError::NotController
                    }
                });
        }
        let leader = match status.leader {
            // Resigned (or about to): it answers no AllocateProducerIds, not even its own.
            Some(l) if l.0 != node_id => l.0,
            _ => return Err(MetadataError::NotController),
        };
        crate::broker::lifecycle::request_producer_ids(self, leader, broker_epoch)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "cannot get a producer id block from the controller");
                if e.is_timeout() {
                    MetadataError::Timeout
                } else {
                    MetadataError::NotController
                }
            })
    }

    /// Makes a committed image the one this node serves: logs for the partitions it
    /// replicates, deleted topics' data removed, configs applied; then publishes it.
    pub fn apply_image(self: &Arc<Self>, new: Arc<MetadataImage>) {
        let cluster = self.cluster();
        let old = self.image();
        let me = self.config.node_id;
        let now_ms = crate::now_ms();
        // No partition takes a role (leader or follower) before the image holds this
        // process's own registration. Until then the image is the one from before the
        // restart, in which this node may still lead partitions whose data it lost with a
        // crash (an unsynced tail, a replaced disk): leading them would make the followers
        // truncate to its shorter log. The controller takes a re-registered broker out of
        // every ISR and leadership before its registration record, so roles read from an
        // image that holds the registration are this process's own. Kafka's broker likewise
        // waits for its registration and the metadata after it (`initialCatchUpFuture`)
        // before its replica manager applies leadership.
        let registered = self.own_registration(&new).is_some();
        for t in old.topics.values() {
            if new.topics.get(&t.name).map(|n| n.topic_id) != Some(t.topic_id) {
                for p in &t.partitions {
                    self.fetchers.unfollow(&t.name, p.partition);
                }
                self.remove_topic_data(&t.name, now_ms);
            }
        }
        // A dynamic broker config (KIP-226) is the default of every topic without an
        // override, so a change to any gives every hosted partition its config again.
        let broker_configs_changed = old.broker_configs != new.broker_configs;
        for t in new.topics.values() {
            let cfg = self.log_config_in(&new, &t.configs);
            let configs_changed = old.topics.get(&t.name).is_some_and(|o| {
                o.topic_id == t.topic_id && (broker_configs_changed || o.configs != t.configs)
            });
            for p in &t.partitions {
                let hosted = self.partition(&t.name, p.partition);
                if !p.replicas.contains(&me) {
                    if hosted.is_some() {
                        self.fetchers.unfollow(&t.name, p.partition);
                        self.remove_partition_data(&t.name, p.partition);
                    }
                    continue;
                }
                if let Some(hosted) = hosted {
                    if configs_changed {
                        hosted.log().set_config(cfg.clone());
                    }
                    if registered {
                        self.take_role(&new, hosted, t, p);
                    }
                    continue;
                }
                if self.is_offline(&t.name, p.partition) {
                    continue;
                }
                let dir = self.partition_dir(&t.name, p.partition);
                let recovery_point = cluster
                    .recovery_points
                    .get(&(t.name.clone(), p.partition))
                    .copied()
                    .unwrap_or(0);
                let log_start = self.take_checkpointed_log_start(&t.name, p.partition);
                match Log::open_with_recovery_point(
                    &dir,
                    cfg.clone(),
                    now_ms,
                    cluster.clean_start,
                    recovery_point,
                )
                .and_then(|mut log| match log_start {
                    Some(start) => log.restore_log_start_offset(start).map(|_| log),
                    None => Ok(log),
                }) {
                    Ok(log) => {
                        let part = Partition::new(t.name.clone(), t.topic_id, p.partition, log);
                        self.partitions
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert((t.name.clone(), p.partition), part.clone());
                        if registered {
                            self.take_role(&new, part, t, p);
                        }
                    }
                    Err(e) => {
                        tracing::error!(topic = %t.name, partition = p.partition, dir = %dir.display(), error = %e,
                            "cannot open the log of a replica; the partition is offline here");
                        self.offline
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert((t.name.clone(), p.partition));
                    }
                }
            }
        }
        *self
            .image
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = new;
    }

    /// This process's registration in `image`: the broker record of this node id with this
    /// process's incarnation id, not one left by an earlier life of the node.
    fn own_registration<'a>(&self, image: &'a MetadataImage) -> Option<&'a BrokerImage> {
        image
            .brokers
            .get(&self.config.node_id)
            .filter(|b| b.incarnation_id == self.incarnation_id)
    }

    /// Removes, once, the partition directories `image` does not place on this node (see
    /// [`Broker::remove_orphan_dirs`]): when `image`, just applied, shows this process's
    /// broker registered and unfenced, which the controller grants only once the broker's
    /// metadata has caught up with its registration. Before that an image may be stale,
    /// and a directory it does not know may belong to a topic it has not caught up with.
    /// Called on the task that applies images, so no directory is created meanwhile.
    fn remove_strays_once_caught_up(&self, image: &MetadataImage) {
        let cluster = self.cluster();
        let caught_up = self.own_registration(image).is_some_and(|b| !b.fenced);
        // Only this task sets the flag, so reading it first is not a race.
        if caught_up && !*cluster.caught_up.borrow() {
            self.remove_orphan_dirs(image);
            cluster.caught_up.send_replace(true);
        }
    }

    /// The log start offset checkpointed before this start for a partition, taken: the
    /// first open of its log restores it, and a later one (a topic created again under
    /// the name) does not.
    pub(super) fn take_checkpointed_log_start(&self, topic: &str, index: i32) -> Option<i64> {
        self.cluster()
            .log_starts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(topic.to_owned(), index))
    }

    /// Waits (at most `max`) until this node has applied an image in which its broker is
    /// registered and unfenced: its metadata has caught up, and every partition it leads
    /// has taken its role. `false` on time out, or on a node without a broker.
    pub async fn wait_caught_up(&self, max: Duration) -> bool {
        let mut caught_up = self.cluster().caught_up.subscribe();
        tokio::time::timeout(max, caught_up.wait_for(|&c| c))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Takes this node's role for a partition it replicates, as the image gives it:
    /// leader (Kafka's `makeLeader`: the epoch recorded in the log's cache, then the
    /// replication state over the image's replicas and ISR), or follower of another node, or
    /// neither while no node leads.
    fn take_role(
        self: &Arc<Self>,
        image: &MetadataImage,
        partition: Arc<Partition>,
        topic: &strata_kraft::TopicImage,
        p: &strata_kraft::PartitionImage,
    ) {
        let me = self.config.node_id;
        if p.leader == me {
            self.fetchers.unfollow(&partition.topic, partition.index);
            if let Err(e) = partition.become_leader(p.leader_epoch) {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e,
                    "cannot record the leader epoch; not taking the leadership");
                partition.resign();
                self.stop_coordinating(&partition.topic, partition.index);
                return;
            }
            let min_isr = crate::config::dynamic::topic_value(
                image,
                me,
                &topic.configs,
                "min.insync.replicas",
            )
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or_else(|| usize::try_from(self.config.min_insync_replicas).unwrap_or(1));
            let registration = strata_replication::leader::PartitionRegistration {
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
            };
            let config = strata_replication::leader::ReplicationConfig {
                replica_lag_time_max_ms: self.config.replica_lag_time_max_ms,
                min_insync_replicas: min_isr.max(1),
            };
            partition.make_leader(me, &registration, config);
            self.coordinate(partition, p.leader_epoch);
        } else {
            partition.resign();
            self.stop_coordinating(&partition.topic, partition.index);
            if p.leader >= 0 {
                self.fetchers
                    .follow(self, partition, p.leader, p.leader_epoch);
            } else {
                self.fetchers.unfollow(&partition.topic, partition.index);
            }
        }
    }

    /// This node leads `partition` in `epoch`: if it is a coordinator's internal topic's,
    /// that coordinator loads it on a blocking thread.
    fn coordinate(self: &Arc<Self>, partition: Arc<Partition>, epoch: i32) {
        match InternalTopic::from_name(&partition.topic) {
            Some(InternalTopic::ConsumerOffsets) => self.coordinate_groups(partition, epoch),
            Some(InternalTopic::TransactionState) => self.coordinate_txns(partition, epoch),
            None => {}
        }
    }

    /// This node leads `__transaction_state` partition `partition` in `epoch`: the
    /// transaction store loads its transactional ids (Kafka's
    /// `TransactionCoordinator.onElection`).
    fn coordinate_txns(self: &Arc<Self>, partition: Arc<Partition>, epoch: i32) {
        let index = partition.index;
        if !self.txns.begin_load(index, partition, epoch) {
            return;
        }
        let broker = self.clone();
        let load = move || {
            if let Err(e) = broker.txns.load(index, epoch) {
                tracing::error!(partition = index, epoch, error = %e,
                    "cannot load {TRANSACTION_STATE_TOPIC} partition; its transactional ids stay unavailable here until its next leader change");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(load);
            }
            Err(_) => load(),
        }
    }

    /// This node leads `__consumer_offsets` partition `partition` in `epoch`: the offset
    /// store loads it on a blocking thread, and the group coordinators take its groups
    /// (Kafka's `GroupCoordinatorService.onElection`).
    fn coordinate_groups(self: &Arc<Self>, partition: Arc<Partition>, epoch: i32) {
        let index = partition.index;
        if !self.offsets.begin_load(index, partition, epoch) {
            return;
        }
        let broker = self.clone();
        let load = move || {
            let image = broker.image();
            let loaded = broker.offsets.load(index, epoch, |state| {
                broker.groups.load_partition(
                    state
                        .group_metadata()
                        .map(|(g, v)| (g.clone(), v.clone()))
                        .collect(),
                );
                broker.consumer_groups.load_partition(
                    state
                        .consumer_group_records()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    &image,
                );
            });
            match loaded {
                Ok(true) => {
                    broker.groups.after_load();
                    broker.consumer_groups.after_load();
                }
                Ok(false) => {}
                Err(e) => tracing::error!(partition = index, epoch, error = %e,
                    "cannot load {OFFSETS_TOPIC} partition; its groups stay unavailable here until its next leader change"),
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(load);
            }
            Err(_) => load(),
        }
    }

    /// This node no longer leads partition `index` of `topic`: if it is a coordinator's
    /// internal topic's, that coordinator unloads it (Kafka's `onResignation`).
    fn stop_coordinating(&self, topic: &str, index: i32) {
        match InternalTopic::from_name(topic) {
            Some(InternalTopic::ConsumerOffsets) => self.stop_coordinating_groups(index),
            Some(InternalTopic::TransactionState) => {
                self.txns.resign(index);
            }
            None => {}
        }
    }

    /// This node no longer leads `__consumer_offsets` partition `index`: its groups go
    /// (Kafka's `GroupCoordinatorService.onResignation`).
    fn stop_coordinating_groups(&self, index: i32) {
        let offsets = &self.offsets;
        offsets.resign(index, |_| {
            let gone = |g: &str| offsets.partition_for(g) == index;
            self.groups.unload_partition(gone);
            self.consumer_groups.unload_partition(gone);
        });
    }

    /// Closes and removes one partition replica this node no longer holds (a replica a
    /// reassignment moved away, KIP-455).
    fn remove_partition_data(&self, topic: &str, index: i32) {
        let removed = self
            .partitions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(topic.to_owned(), index));
        if let Some(partition) = &removed {
            // A leader moved away: a produce still holding the partition is refused from
            // here on rather than appended to a log about to be deleted.
            partition.resign();
            self.stop_coordinating(&partition.topic, partition.index);
        }
        if removed.is_some() {
            let dir = self.partition_dir(topic, index);
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a replica moved away");
            }
        }
    }
}

/// Where another broker reaches `node`: its registered endpoint on this node's
/// `inter.broker.listener.name`, else the first one it registered (what clients see).
#[must_use]
pub fn inter_broker_endpoint(
    broker: &Broker,
    image: &MetadataImage,
    node: i32,
) -> Option<(String, u16)> {
    let b = image.brokers.get(&node)?;
    let name = &broker.config.inter_broker_listener_name;
    Some(
        b.endpoints
            .iter()
            .find(|e| &e.name == name)
            .map_or_else(|| (b.host.clone(), b.port), |e| (e.host.clone(), e.port)),
    )
}

/// The controller's state as an operation sees it.
pub(super) struct ControllerStateRef<'a> {
    state: &'a mut ControllerState,
    /// The operation's time, on [`crate::monotonic_ms`]: only the brokers' sessions use it.
    pub(super) now_ms: i64,
}

impl ControllerStateRef<'_> {
    /// The cluster-control settings (unclean election defaults and the like).
    pub(super) fn cluster_config(&self) -> &ClusterControlConfig {
        &self.state.config
    }
}

/// Follows the images the quorum driver publishes, applying each in turn (images that
/// arrive while one is applied are coalesced: the next apply diffs against the last).
///
/// The driver reports its applied offset after it publishes the image that holds it, so
/// once an image borrowed after reading the status is applied, this node serves every
/// entry below that offset ([`ClusterMetadata::applied`]).
pub async fn follow_images(
    broker: Arc<Broker>,
    mut images: watch::Receiver<Arc<MetadataImage>>,
    mut status: watch::Receiver<crate::quorum::QuorumStatus>,
) {
    let mut last: Option<Arc<MetadataImage>> = None;
    loop {
        tokio::select! {
            changed = images.changed() => if changed.is_err() { return },
            changed = status.changed() => if changed.is_err() { return },
        }
        let applied = status.borrow_and_update().applied_offset;
        let image = images.borrow_and_update().clone();
        if last.as_ref().is_none_or(|l| !Arc::ptr_eq(l, &image)) {
            last = Some(image.clone());
            let b = broker.clone();
            if tokio::task::spawn_blocking(move || {
                b.apply_image(image.clone());
                b.remove_strays_once_caught_up(&image);
            })
            .await
            .is_err()
            {
                tracing::error!("applying a metadata image failed");
            }
        }
        broker
            .cluster()
            .applied
            .send_if_modified(|a| std::mem::replace(a, (*a).max(applied)) < applied);
    }
}

/// One operation on its way to the controller task: [`ControllerJob::run`] computes its
/// records and keeps what answers the caller once they are committed; [`ControllerJob::fail`]
/// answers it when the task cannot run it (this node does not lead).
trait ControllerJob: Send {
    /// Runs the operation on `image`. `None`: it is answered already (refused, or it wrote
    /// nothing).
    fn run(
        self: Box<Self>,
        image: &MetadataImage,
        next_offset: i64,
        state: &mut ControllerStateRef<'_>,
    ) -> Option<(Vec<MetadataRecord>, Committed)>;

    /// Answers the caller with `error` without running the operation.
    fn fail(self: Box<Self>, error: MetadataError);
}

/// What answers a caller once its records are committed (or failed to be).
type Committed = Box<dyn FnOnce(Result<i64, MetadataError>) + Send>;

/// An operation and the oneshot its caller awaits.
struct Job<F, T, E> {
    op: F,
    /// The result, and the offset of the entry that committed it (`None`: it wrote nothing).
    reply: oneshot::Sender<Result<(T, Option<i64>), E>>,
}

impl<F, T, E> ControllerJob for Job<F, T, E>
where
    F: for<'a> FnOnce(
            &MetadataImage,
            i64,
            &mut ControllerStateRef<'a>,
        ) -> Result<(T, Vec<MetadataRecord>), E>
        + Send,
    T: Send + 'static,
    E: From<MetadataError> + Send + 'static,
{
    fn run(
        self: Box<Self>,
        image: &MetadataImage,
        next_offset: i64,
        state: &mut ControllerStateRef<'_>,
    ) -> Option<(Vec<MetadataRecord>, Committed)> {
        let Job { op, reply } = *self;
        match op(image, next_offset, state) {
            Err(e) => {
                let _ = reply.send(Err(e));
                None
            }
            Ok((result, records)) if records.is_empty() => {
                let _ = reply.send(Ok((result, None)));
                None
            }
            Ok((result, records)) => Some((
                records,
                Box::new(move |committed: Result<i64, MetadataError>| {
                    let _ = reply.send(
                        committed
                            .map(|offset| (result, Some(offset)))
                            .map_err(E::from),
                    );
                }),
            )),
        }
    }

    fn fail(self: Box<Self>, error: MetadataError) {
        let _ = self.reply.send(Err(error.into()));
    }
}

/// The active controller: one task that owns the controller's state and runs the
/// operations it is sent one at a time. Each waits until this node leads and has applied
/// its whole log, is computed from that image, and (when it writes) is proposed as one
/// entry; its caller hears back once the entry is committed and applied. On a node that
/// does not lead every operation fails with NOT_CONTROLLER, after at most
/// [`READY_TIMEOUT`] for a leadership just won to catch up.
async fn run_controller(
    quorum: QuorumHandle,
    images: watch::Receiver<Arc<MetadataImage>>,
    mut state: ControllerState,
    mut jobs: mpsc::Receiver<Box<dyn ControllerJob>>,
) {
    while let Some(job) = jobs.recv().await {
        let status = match quorum.ready_to_lead(READY_TIMEOUT).await {
            Ok(status) => status,
            Err(e) => {
                job.fail(e);
                continue;
            }
        };
        let image = images.borrow().clone();
        // Sessions are timed on the monotonic clock: a step of this node's wall clock must
        // not expire every broker's session at once (nor keep a dead one alive).
        let now_ms = crate::monotonic_ms();
        if state.epoch != status.epoch {
            // A new leadership: every session starts afresh (Kafka's controller does not
            // replicate them either).
            state.heartbeats = BrokerHeartbeats::new(state.config.broker_session_timeout_ms);
            state
                .heartbeats
                .activate(&image, now_ms, state.this_process);
            state.epoch = status.epoch;
        }
        let next_offset = status.log_end_offset;
        let mut state_ref = ControllerStateRef {
            state: &mut state,
            now_ms,
        };
        let Some((records, committed)) = job.run(&image, next_offset, &mut state_ref) else {
            continue;
        };
        let result = match quorum.propose(&records).await {
            Ok(offset) if offset == next_offset => Ok(offset),
            Ok(offset) => {
                // Only a leadership change appends in between, and it fails the proposal
                // first; an offset other than the one the records were computed for is not
                // used.
                tracing::error!(
                    offset,
                    next_offset,
                    "a metadata entry took an unexpected offset"
                );
                Err(MetadataError::NotController)
            }
            Err(e) => Err(e),
        };
        committed(result);
    }
}
