//! The node's shared state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

use strata_kraft::{CreateTopic, MetadataError, MetadataImage};
use strata_storage::{LogConfig, LogError, TimestampType};
use uuid::Uuid;

use crate::config::BrokerConfig;
use crate::coordinator::InternalTopic;
use crate::coordinator::group::classic::{GroupConfig, GroupCoordinator};
use crate::coordinator::group::consumer::{ConsumerGroupConfig, ConsumerGroupCoordinator};
use crate::coordinator::offsets::{OFFSETS_TOPIC, OffsetStore, OffsetsConfig};
use crate::coordinator::txn::records::TRANSACTION_STATE_TOPIC;
use crate::partition::Partition;
use request_memory::RequestMemory;

mod acls;
mod cluster;
mod elections;
pub mod groups;
pub mod leadership;
pub mod lifecycle;
pub mod log_cleaner;
mod log_start_checkpoint;
mod partition_logs;
mod reassignments;
pub mod replica;
pub mod request_memory;

pub use cluster::{ControllerError, follow_images, inter_broker_endpoint};
pub use elections::Elections;

/// A failure while opening the node at startup.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("metadata: {0}")]
    Metadata(#[from] MetadataError),
    #[error("cannot create log directory {dir}: {source}")]
    LogDir {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// Everything one broker node shares between connections.
pub struct Broker {
    /// Static configuration.
    pub config: BrokerConfig,
    /// The quorum-backed metadata: the images the quorum driver publishes, and the active
    /// controller's task when this node leads.
    metadata: cluster::ClusterMetadata,
    /// The latest applied image. Readers clone the `Arc` and never wait on the controller.
    image: RwLock<Arc<MetadataImage>>,
    /// Open partitions by (topic, index).
    partitions: RwLock<HashMap<(String, i32), Arc<Partition>>>,
    /// Partitions this node leads whose log could not be opened at start (the cause is in
    /// the broker's log): Kafka's `HostedPartition.Offline`. They are never in `partitions`; Metadata shows them
    /// without a leader, and requests for them get KAFKA_STORAGE_ERROR. Their directories are
    /// left exactly as found, and the next start tries them again.
    offline: RwLock<HashSet<(String, i32)>>,
    /// The unused rest of this broker's producer id block, `next..end` (Kafka's
    /// `RPCProducerIdManager`); empty until the first InitProducerId.
    producer_ids: tokio::sync::Mutex<std::ops::Range<i64>>,
    /// Committed offsets and group metadata, in `__consumer_offsets` (not a user topic, so
    /// neither in the image nor in `partitions`). Shared with the group coordinator, which
    /// writes its group metadata records there.
    pub offsets: Arc<OffsetStore>,
    /// The transaction coordinator's transactional ids, in `__transaction_state`.
    pub txns: Arc<crate::coordinator::txn::store::TxnStore>,
    /// The classic group coordinator; its groups are loaded from `offsets` at start.
    pub groups: GroupCoordinator,
    /// The KIP-848 consumer-group coordinator (in memory: members rejoin after a restart).
    pub consumer_groups: ConsumerGroupCoordinator,
    /// Fetched record bytes sent with `sendfile` (ARCHITECTURE.md decision 4), so benchmarks
    /// and metrics can show that the zero-copy path is taken.
    pub zero_copy_bytes: AtomicU64,
    /// Fetched record bytes sent by reading and writing (where `sendfile` is unsupported).
    pub copied_bytes: AtomicU64,
    /// The follower replicas' fetchers (a node of a cluster).
    pub fetchers: crate::broker::replica::Fetchers,
    /// This process's broker incarnation (KIP-631), random per start: what its broker
    /// registers with, and how a controller in the same process tells this life of its own
    /// broker from the previous one.
    pub incarnation_id: Uuid,
    /// The budget for request bytes read from sockets (`queued.max.request.bytes`), shared by
    /// every connection: a connection stops reading while it is exhausted (back-pressure).
    pub request_memory: RequestMemory,
    /// The epoch of the finalized features ApiVersions advertises: the time this process
    /// opened, in ms. Kafka's is the metadata offset they were read at; the features here are
    /// settings of the process, so a restart (the only way they change) moves it forward, and
    /// a client takes the features of the node with the newest.
    pub features_epoch: i64,
    /// The log cleaner's state ([`log_cleaner`]): compaction of the logs whose
    /// `cleanup.policy` includes `compact`.
    pub log_cleaner: log_cleaner::LogCleanerState,
    /// How connections to other nodes are secured.
    pub peers: crate::security::peer::PeerRoutes,
    /// Incremental fetch sessions (KIP-227), of consumers and followers.
    pub fetch_sessions: crate::fetch_session::FetchSessionCache,
}

impl Broker {
    /// Opens the node's data directory for the metadata image `images` publishes (the quorum
    /// driver's, see `server::start`): the offset store and the group coordinators, and, on
    /// the only voter, whose image is whole when it opens, the partitions it leads. Other
    /// nodes open their partitions' logs as the images they follow place them
    /// ([`Broker::apply_image`]). `peers` secures its connections to other nodes.
    ///
    /// # Errors
    ///
    /// [`StartupError`] when the data directory or a log cannot be opened.
    pub fn open(
        config: BrokerConfig,
        images: tokio::sync::watch::Receiver<Arc<MetadataImage>>,
        now_ms: i64,
        peers: crate::security::peer::PeerRoutes,
    ) -> Result<Arc<Self>, StartupError> {
        let dir = config.log_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|source| StartupError::LogDir {
            dir: dir.clone(),
            source,
        })?;
        // Kafka's `.kafka_cleanshutdown`: present only if every log was closed by a clean
        // shutdown. It goes before any log is opened, so a crash from here on means a full
        // recovery next time.
        let clean = take_clean_shutdown_marker(&dir);
        if clean {
            tracing::info!("clean shutdown marker found: active segments are not rescanned");
        }
        let image = images.borrow().clone();
        let metadata = cluster::ClusterMetadata::new(&config, images, clean);
        let offsets = Arc::new(OffsetStore::new(
            OffsetsConfig {
                num_partitions: config.offsets_topic_num_partitions,
                retention_ms: config.offsets_retention_ms,
                retention_check_interval_ms: i64::try_from(
                    config.offsets_retention_check_interval_ms,
                )
                .unwrap_or(i64::MAX),
                metadata_max_bytes: config.offset_metadata_max_bytes,
            },
            now_ms,
        ));
        let txns = Arc::new(crate::coordinator::txn::store::TxnStore::new(
            crate::coordinator::txn::store::TxnConfig {
                num_partitions: config.transaction_state_log_num_partitions,
                max_timeout_ms: config.transaction_max_timeout_ms,
                id_expiration_ms: i64::from(config.transactional_id_expiration_ms),
                remove_expired_interval_ms: i64::from(
                    config.transaction_remove_expired_interval_ms,
                ),
                abort_timed_out_interval_ms: i64::from(
                    config.transaction_abort_timed_out_interval_ms,
                ),
                transaction_version: config.transaction_version,
            },
            now_ms,
        ));
        let groups = GroupCoordinator::with_log(
            GroupConfig {
                initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
                min_session_timeout_ms: config.group_min_session_timeout_ms,
                max_session_timeout_ms: config.group_max_session_timeout_ms,
                ..GroupConfig::default()
            },
            offsets.clone(),
            Vec::new(),
            now_ms,
        );
        let consumer_groups = ConsumerGroupCoordinator::with_log(
            ConsumerGroupConfig {
                heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
                session_timeout_ms: config.group_consumer_session_timeout_ms,
                assignors: config.group_consumer_assignors.clone(),
                max_size: config.group_consumer_max_size,
            },
            offsets.clone(),
            Vec::new(),
            &image,
            now_ms,
        );
        let config_values = config.values.clone();
        let request_memory = RequestMemory::new(
            config.queued_max_request_bytes,
            config.socket_request_max_bytes,
        );
        let fetch_sessions =
            crate::fetch_session::FetchSessionCache::new(config.fetch_session_cache_slots);
        let broker = Arc::new(Broker {
            config,
            metadata,
            image: RwLock::new(image.clone()),
            partitions: RwLock::new(HashMap::new()),
            offline: RwLock::new(HashSet::new()),
            producer_ids: tokio::sync::Mutex::new(0..0),
            offsets,
            txns,
            groups,
            consumer_groups,
            fetchers: crate::broker::replica::Fetchers::default(),
            zero_copy_bytes: AtomicU64::new(0),
            copied_bytes: AtomicU64::new(0),
            request_memory,
            incarnation_id: Uuid::new_v4(),
            features_epoch: now_ms,
            log_cleaner: log_cleaner_state(&config_values),
            peers,
            fetch_sessions,
        });
        // The only voter opens on the image its whole log gives (`server::start` waits for
        // it), so it opens what it leads now, as a node that replays its own log; other
        // nodes open their partitions as the images they follow place them.
        if broker.config.is_sole_voter() {
            broker.open_partitions_at_start(&image, clean, now_ms);
            broker.remove_orphan_dirs(&image);
        }
        Ok(broker)
    }

    /// The current metadata image.
    #[must_use]
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The partition, if this broker hosts it.
    #[must_use]
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.partitions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(topic.to_owned(), index))
            .cloned()
    }

    /// The partition, or why this broker does not serve it.
    ///
    /// # Errors
    ///
    /// [`PartitionUnavailable::Offline`] for a partition whose log could not be opened at
    /// start, [`PartitionUnavailable::Unknown`] for one this broker does not host.
    pub fn hosted_partition(
        &self,
        topic: &str,
        index: i32,
    ) -> Result<Arc<Partition>, PartitionUnavailable> {
        if let Some(p) = self.partition(topic, index) {
            return Ok(p);
        }
        if self.is_offline(topic, index) {
            Err(PartitionUnavailable::Offline)
        } else {
            Err(PartitionUnavailable::Unknown)
        }
    }

    /// Whether this partition's log could not be opened at start.
    #[must_use]
    pub fn is_offline(&self, topic: &str, index: i32) -> bool {
        let offline = self
            .offline
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        !offline.is_empty() && offline.contains(&(topic.to_owned(), index))
    }

    /// The partitions whose logs could not be opened at start (usually none).
    #[must_use]
    pub fn offline_partitions(&self) -> HashSet<(String, i32)> {
        self.offline
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Every open partition.
    #[must_use]
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Creates `__consumer_offsets`, as the active controller: its
    /// `offsets.topic.num.partitions` partitions of
    /// [`BrokerConfig::offsets_replication_factor`] replicas, placed like any topic's,
    /// compacted (see `offsets::placement`). Clients cannot create it.
    ///
    /// # Errors
    ///
    /// [`CreateTopicError::Metadata`]: TOPIC_ALREADY_EXISTS when it exists, NOT_CONTROLLER
    /// off the controller.
    pub async fn create_offsets_topic(&self) -> Result<Uuid, CreateTopicError> {
        self.cluster_create_topic(CreateTopic {
            name: OFFSETS_TOPIC.to_owned(),
            num_partitions: self.config.offsets_topic_num_partitions,
            replication_factor: self.config.offsets_replication_factor(),
            configs: crate::coordinator::offsets::topic_configs(
                self.config.offsets_topic_segment_bytes,
            )
            .into_iter()
            .collect(),
            validate_only: false,
            assignments: None,
        })
        .await
    }

    /// Creates `__transaction_state`, as the active controller: its
    /// `transaction.state.log.num.partitions` partitions of
    /// [`BrokerConfig::transaction_state_replication_factor`] replicas, compacted, with
    /// `min.insync.replicas` from [`BrokerConfig::transaction_state_min_isr`]. Clients cannot
    /// create it.
    ///
    /// # Errors
    ///
    /// As [`Broker::create_offsets_topic`].
    pub async fn create_transaction_state_topic(&self) -> Result<Uuid, CreateTopicError> {
        self.cluster_create_topic(CreateTopic {
            name: TRANSACTION_STATE_TOPIC.to_owned(),
            num_partitions: self.config.transaction_state_log_num_partitions,
            replication_factor: self.config.transaction_state_replication_factor(),
            configs: crate::coordinator::txn::store::topic_configs(
                self.config.transaction_state_log_segment_bytes,
                self.config.transaction_state_min_isr(),
            )
            .into_iter()
            .collect(),
            validate_only: false,
            assignments: None,
        })
        .await
    }

    /// Creates one of the coordinators' internal topics, as the active controller.
    ///
    /// # Errors
    ///
    /// As [`Broker::create_offsets_topic`].
    pub async fn create_internal_topic(
        &self,
        topic: InternalTopic,
    ) -> Result<Uuid, CreateTopicError> {
        match topic {
            InternalTopic::ConsumerOffsets => self.create_offsets_topic().await,
            InternalTopic::TransactionState => self.create_transaction_state_topic().await,
        }
    }

    /// Creates a topic through the active controller: its records are committed as one
    /// entry, and every replica creates its partitions' logs as it applies them (as in
    /// Kafka); a log that cannot be created there is an offline replica
    /// ([`Broker::hosted_partition`]) until it is repaired and the node restarted. Returns
    /// once this node serves the new topic.
    ///
    /// # Errors
    ///
    /// [`CreateTopicError::Metadata`] for Kafka's validation failures (name, partitions,
    /// configs, existing) and metadata write failures.
    pub async fn create_topic(&self, mut req: CreateTopic) -> Result<Uuid, CreateTopicError> {
        if req.num_partitions == -1 {
            req.num_partitions = self.config.num_partitions;
        }
        if req.replication_factor == -1 {
            req.replication_factor = self.config.default_replication_factor;
        }
        // The coordinator's internal topic exists, as far as clients can tell, and its
        // directories are the offset store's; a user topic of that name would collide.
        if req.name == OFFSETS_TOPIC || req.name == TRANSACTION_STATE_TOPIC {
            return Err(CreateTopicError::Metadata(
                MetadataError::TopicAlreadyExists(req.name),
            ));
        }
        self.cluster_create_topic(req).await
    }

    /// Grows a topic to `count` partitions (CreatePartitions) through the active controller,
    /// as [`Broker::create_topic`] creates one. With `validate_only` nothing is written.
    ///
    /// # Errors
    ///
    /// [`CreateTopicError::Metadata`] for what the controller refuses.
    pub async fn create_partitions(
        &self,
        topic: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<(), CreateTopicError> {
        self.cluster_create_partitions(topic, count, assignments, validate_only)
            .await
            .map_err(CreateTopicError::Metadata)
    }

    /// Deletes a topic through the metadata log, then removes its partitions' data.
    ///
    /// # Errors
    ///
    /// [`MetadataError::UnknownTopic`] and storage failures.
    pub async fn delete_topic(&self, topic_id: Uuid) -> Result<String, MetadataError> {
        // Every node removes the data as it applies the deletion.
        self.cluster_delete_topic(topic_id).await
    }

    /// Removes a deleted topic's partitions, their data and its committed offsets.
    fn remove_topic_data(&self, name: &str, now_ms: i64) {
        let removed: Vec<Arc<Partition>> = {
            let mut parts = self
                .partitions
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let keys: Vec<_> = parts.keys().filter(|(t, _)| *t == name).cloned().collect();
            keys.iter().filter_map(|k| parts.remove(k)).collect()
        };
        // An offline partition of the topic goes too: its data is what the deletion asked to
        // remove, and a topic created again under the name must not start offline.
        let offline: Vec<i32> = {
            let mut offline = self
                .offline
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let keys: Vec<_> = offline
                .iter()
                .filter(|(t, _)| *t == name)
                .cloned()
                .collect();
            keys.into_iter()
                .filter(|k| offline.remove(k))
                .map(|(_, index)| index)
                .collect()
        };
        // Kafka's `onPartitionsDeleted`: every group's offsets of the topic go too, so a topic
        // created again under the name starts without them.
        match self.offsets.delete_topic_offsets(name, now_ms) {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(topic = %name, offsets = n, "deleted committed offsets of deleted topic")
            }
            Err(e) => {
                tracing::warn!(topic = %name, error = %e, "cannot delete committed offsets of deleted topic")
            }
        }
        self.checkpoint_log_start_offsets_or_warn();
        let indexes = removed.iter().map(|p| p.index).chain(offline);
        for index in indexes {
            let dir = self.partition_dir(name, index);
            // In-flight readers keep their file handles; the directory goes now.
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot remove deleted partition");
            }
        }
    }

    /// AlterClientQuotas (KIP-546) through the metadata log, as one entry of the active
    /// controller. Each entry's outcome, in request order;
    /// with `validate_only` everything is checked and nothing written.
    ///
    /// # Errors
    ///
    /// Not the controller, or a storage error; per-entry failures are data in the results.
    pub async fn alter_client_quotas(
        &self,
        entries: &[strata_kraft::client_quotas::QuotaAlteration],
        validate_only: bool,
    ) -> Result<Vec<Result<(), strata_kraft::client_quotas::ClientQuotaError>>, MetadataError> {
        self.cluster_alter_client_quotas(entries, validate_only)
            .await
    }

    /// AlterUserScramCredentials (KIP-554): the controller's checks, then the accepted
    /// alterations as `UserScramCredentialRecord`s and `RemoveUserScramCredentialRecord`s
    /// in the metadata log, through the active controller.
    ///
    /// # Errors
    ///
    /// A storage or controller error; per-user outcomes are data in the results.
    pub async fn alter_user_scram_credentials(
        &self,
        deletions: &[strata_kraft::scram::ScramDeletion],
        upsertions: &[strata_kraft::scram::ScramUpsertion],
    ) -> Result<strata_kraft::scram::ScramResults, MetadataError> {
        self.cluster_alter_user_scram_credentials(deletions, upsertions)
            .await
    }

    /// Sets (`Some`) or removes (`None`) config overrides of one topic through the metadata
    /// log (IncrementalAlterConfigs), then gives the topic's open partitions their new
    /// effective log config. Every change is validated before any is written; with
    /// `validate_only` nothing is written.
    ///
    /// # Errors
    ///
    /// [`MetadataError::UnknownTopic`], [`MetadataError::InvalidConfig`] or a storage error.
    pub async fn alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<(), MetadataError> {
        // Every node gives its logs the new config as it applies the change.
        self.cluster_alter_topic_configs(topic, changes, validate_only)
            .await
    }

    /// Sets (`Some`) or removes (`None`) dynamic broker configs of one BROKER resource (a
    /// broker id, or `""` for the cluster-wide default) through the metadata log, then gives
    /// every open partition its new effective log config. The changes were validated by the
    /// caller ([`crate::config::dynamic::validate`]); with `validate_only` nothing is
    /// written.
    ///
    /// # Errors
    ///
    /// The controller's answer: not the controller, a timeout, a storage error.
    pub async fn alter_broker_configs(
        &self,
        resource: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<(), MetadataError> {
        if validate_only {
            return Ok(());
        }
        // Every node refreshes its logs as it applies the records (`apply_image`).
        self.cluster_alter_broker_configs(resource, changes).await
    }

    /// Applies each partition's retention and flush policy.
    pub fn housekeeping(&self, now_ms: i64) {
        for p in self.all_partitions() {
            let mut log = p.log();
            match log.apply_retention(now_ms) {
                Ok(0) => {}
                Ok(n) => tracing::info!(topic = %p.topic, partition = p.index, segments = n,
                    log_start_offset = log.log_start_offset(), "retention deleted segments"),
                Err(e) => {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "retention failed")
                }
            }
            if let Err(e) = log.maybe_flush(now_ms) {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "flush failed");
            }
            // Retention rolls when it deletes the active segment; its fsync goes the way an
            // append's roll does.
            if log.take_roll_flush_request()
                && let Err(e) = p.queue_roll_flush(&mut log)
            {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "flush failed");
            }
        }
        // Offset expiry keeps its own interval (`offsets.retention.check.interval.ms`).
        let expirable = |group: &str, topic: &str| groups::offsets_expirable(self, group, topic);
        match self.offsets.maybe_expire(now_ms, expirable) {
            // Kafka's `cleanupGroupMetadata`: an Empty group left without offsets is deleted.
            Ok(Some(_)) => {
                self.groups
                    .delete_empty_groups_without_offsets(|g| self.offsets.has_offsets(g));
                self.consumer_groups
                    .delete_empty_groups_without_offsets(|g| self.offsets.has_offsets(g));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "offset expiry failed"),
        }
        // Idle transactional ids, on `transaction.remove.expired.transaction.cleanup.interval.ms`.
        self.txns.maybe_expire(now_ms);
    }

    /// A producer id for InitProducerId, never handed out before. Ids come in blocks that the
    /// controller allocates through the metadata log (`ProducerIdsRecord`, KIP-730), so only
    /// one InitProducerId in 1000 waits for a metadata write, and a restart never reuses an
    /// id: what was left of the block is skipped, as in Kafka. The block comes from the
    /// active controller, asked with AllocateProducerIds when it runs on another node.
    ///
    /// # Errors
    ///
    /// [`MetadataError`] when a new block cannot be allocated or made durable;
    /// `NotController` or `Timeout` when the controller gave none.
    pub async fn next_producer_id(&self) -> Result<i64, MetadataError> {
        // Held while a block is fetched, so one InitProducerId asks and the others wait.
        let mut ids = self.producer_ids.lock().await;
        if ids.is_empty() {
            let block = self.cluster_allocate_producer_ids().await?;
            // Kafka's RPCProducerIdManager: a block below the previous one is refused, so
            // a confused controller cannot make this broker hand out an id twice.
            if block.first_producer_id < ids.end {
                tracing::error!(
                    first_producer_id = block.first_producer_id,
                    previous_end = ids.end,
                    "refusing a producer id block below the previous one"
                );
                return Err(MetadataError::NotController);
            }
            *ids = block.first_producer_id..block.next_block_first_id();
        }
        let id = ids.start;
        ids.start += 1;
        Ok(id)
    }

    /// Flushes every log: the clean-shutdown path. Partitions are flushed by
    /// [`SHUTDOWN_FLUSH_THREADS`] threads at once, so that their fsyncs overlap and the file
    /// system commits many with one journal write, instead of one partition after another.
    pub fn flush_all(&self) {
        let partitions = self.all_partitions();
        let failed = std::sync::atomic::AtomicBool::new(false);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let flush_one = |p: &Partition| {
            // Kafka snapshots producer state on clean close, so a restart need not scan.
            let mut log = p.log();
            if let Err(e) = log
                .prepare_clean_shutdown()
                .and_then(|()| log.take_producer_snapshot())
            {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "flush on shutdown failed");
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let work = || {
            while let Some(p) =
                partitions.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
            {
                flush_one(p);
            }
        };
        std::thread::scope(|scope| {
            for _ in 1..SHUTDOWN_FLUSH_THREADS.min(partitions.len()) {
                if let Err(e) = std::thread::Builder::new().spawn_scoped(scope, work) {
                    // The threads that did start (and this one) still flush everything.
                    tracing::warn!(error = %e, "cannot start a shutdown flush thread");
                    break;
                }
            }
            work();
        });
        // After the final flushes every recovery point is its log's end, so a crash before
        // the marker is written recovers nothing needlessly.
        if let Err(e) = self.checkpoint_recovery_points() {
            tracing::warn!(error = %e, "cannot write the recovery point checkpoint");
            failed.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // An offline partition was not closed cleanly (it was never opened): once repaired, it
        // must be recovered, so no marker may vouch for it.
        let all_ok = !failed.load(std::sync::atomic::Ordering::Relaxed)
            && self.offline_partitions().is_empty();
        // Only a shutdown that closed every log cleanly lets the next start skip recovery.
        if all_ok && let Err(e) = write_clean_shutdown_marker(&self.config.log_dir) {
            tracing::warn!(error = %e, "cannot write the clean shutdown marker");
        }
    }

    /// Writes every partition's recovery point to `recovery-point-offset-checkpoint` in the
    /// log directory (Kafka's `LogManager.checkpointLogRecoveryOffsets`), replacing the file
    /// atomically. Housekeeping calls it every [`RECOVERY_POINT_CHECKPOINT_INTERVAL_MS`], and
    /// the clean shutdown after its final flushes. An unclean start recovers each log from
    /// the point recorded here. Each log's lock is held only to read the value.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] when the file cannot be written.
    pub fn checkpoint_recovery_points(&self) -> Result<(), LogError> {
        let mut entries: Vec<(String, i32, i64)> = self
            .all_partitions()
            .iter()
            .map(|p| (p.topic.clone(), p.index, p.log().recovery_point()))
            .collect();
        entries.sort();
        strata_storage::checkpoint::write_offsets(
            &self
                .config
                .log_dir
                .join(strata_storage::checkpoint::RECOVERY_POINT_CHECKPOINT),
            &entries,
        )
    }

    /// The effective log configuration of a topic: its overrides, else the dynamic broker
    /// configs of this node (KIP-226), else the broker's static `log.*` defaults, else
    /// Kafka's.
    #[must_use]
    pub fn log_config(&self, topic_configs: &BTreeMap<String, String>) -> LogConfig {
        self.log_config_in(&self.image(), topic_configs)
    }

    /// [`Broker::log_config`] under a given image's dynamic broker configs (an image being
    /// applied, before it is published).
    #[must_use]
    pub fn log_config_in(
        &self,
        image: &MetadataImage,
        overrides: &BTreeMap<String, String>,
    ) -> LogConfig {
        let topic_configs =
            &crate::config::dynamic::with_dynamic_defaults(image, self.config.node_id, overrides);
        let c = &self.config;
        let get = |k: &str| topic_configs.get(k).and_then(|v| v.parse::<i64>().ok());
        // Values were validated by the controller (topic) or at startup (broker), so the
        // clamps below only guard the narrowing.
        let u32_of = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
        // Kafka's `UnifiedLog.deleteOldSegments`: time and size retention apply only to a
        // log whose `cleanup.policy` includes `delete`; a compact-only log keeps its
        // segments (the log start offset still moves them out).
        let delete = topic_configs
            .get("cleanup.policy")
            .unwrap_or(&c.log_cleanup_policy)
            .split(',')
            .any(|p| p.trim() == "delete");
        // Kafka's `LogConfig.maxSegmentMs`: a compacted log rolls by `max.compaction.lag.ms`
        // too, so that nothing waits in the active segment (never cleaned) past its lag.
        let segment_ms = get("segment.ms").unwrap_or(c.log_roll_ms);
        let segment_ms = match log_cleaner::compaction_of(c, topic_configs) {
            Some(cc) if cc.max_compaction_lag_ms > 0 => segment_ms.min(cc.max_compaction_lag_ms),
            _ => segment_ms,
        };
        let append_time = match topic_configs.get("message.timestamp.type") {
            Some(v) => v == "LogAppendTime",
            None => c.log_append_time,
        };
        LogConfig {
            segment_bytes: u32_of(get("segment.bytes").unwrap_or(c.log_segment_bytes)),
            segment_ms,
            index_interval_bytes: u32_of(
                get("index.interval.bytes").unwrap_or(i64::from(c.log_index_interval_bytes)),
            ),
            segment_index_bytes: u32_of(
                get("segment.index.bytes").unwrap_or(i64::from(c.log_index_size_max_bytes)),
            ),
            retention_ms: if delete {
                get("retention.ms").unwrap_or(c.log_retention_ms)
            } else {
                -1
            },
            retention_bytes: if delete {
                get("retention.bytes").unwrap_or(c.log_retention_bytes)
            } else {
                -1
            },
            flush_interval_messages: get("flush.messages").unwrap_or(c.log_flush_interval_messages),
            flush_interval_ms: get("flush.ms")
                .or(c.log_flush_interval_ms)
                .unwrap_or(i64::MAX),
            max_message_bytes: u32_of(
                get("max.message.bytes").unwrap_or(i64::from(c.message_max_bytes)),
            ),
            timestamp_type: if append_time {
                TimestampType::LogAppendTime
            } else {
                TimestampType::CreateTime
            },
        }
    }

    fn partition_dir(&self, topic: &str, index: i32) -> PathBuf {
        self.config.log_dir.join(format!("{topic}-{index}"))
    }

    /// The data directory.
    #[must_use]
    pub fn log_dir(&self) -> &Path {
        &self.config.log_dir
    }
}

/// Why a topic (or new partitions) could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateTopicError {
    /// The controller refused the creation, or could not commit it.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
}

/// Why this broker does not serve a partition it was asked for (Kafka's `HostedPartition`
/// other than `Online`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionUnavailable {
    /// Not hosted here: an unknown topic or partition.
    Unknown,
    /// Its log could not be opened at start (Kafka: in an offline log directory).
    Offline,
}

/// How often housekeeping writes the recovery points: Kafka's
/// `log.flush.offset.checkpoint.interval.ms` default.
pub const RECOVERY_POINT_CHECKPOINT_INTERVAL_MS: u64 = 60_000;

/// Threads that flush partitions at once on clean shutdown ([`Broker::flush_all`]).
const SHUTDOWN_FLUSH_THREADS: usize = 16;

/// Kafka's name for the clean-shutdown marker in a log directory.
const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// Whether the marker was there; it is removed (and the removal made durable) either way.
fn take_clean_shutdown_marker(dir: &std::path::Path) -> bool {
    let path = dir.join(CLEAN_SHUTDOWN_MARKER);
    if !path.exists() {
        return false;
    }
    let removed = std::fs::remove_file(&path)
        .and_then(|()| std::fs::File::open(dir)?.sync_all())
        .is_ok();
    if !removed {
        tracing::warn!(path = %path.display(), "cannot remove the clean shutdown marker; recovering every log");
    }
    removed
}

/// Writes the marker after every log was flushed, and makes it durable.
fn write_clean_shutdown_marker(dir: &std::path::Path) -> std::io::Result<()> {
    let path = dir.join(CLEAN_SHUTDOWN_MARKER);
    std::fs::File::create(&path)?.sync_all()?;
    std::fs::File::open(dir)?.sync_all()
}

/// The cleaner's settings from the broker's `log.cleaner.*` keys (Kafka's `CleanerConfig`):
/// the dedupe buffer is shared by `log.cleaner.threads`; none of them, or
/// `log.cleaner.enable=false`, turns compaction off.
fn log_cleaner_state(values: &BTreeMap<String, String>) -> log_cleaner::LogCleanerState {
    let num = |k: &str, default: f64| {
        values
            .get(k)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(default)
    };
    let threads = num("log.cleaner.threads", 1.0).max(0.0);
    let settings = strata_storage::cleaner::CleanerSettings {
        dedupe_buffer_bytes: (num("log.cleaner.dedupe.buffer.size", 134_217_728.0)
            / threads.max(1.0))
        .clamp(1024.0, f64::from(i32::MAX)) as u64,
        load_factor: num("log.cleaner.io.buffer.load.factor", 0.9).clamp(0.01, 1.0),
        max_io_bytes_per_sec: num("log.cleaner.io.max.bytes.per.second", f64::MAX),
    };
    let enabled = values.get("log.cleaner.enable").is_none_or(|v| v == "true") && threads >= 1.0;
    let backoff_ms = num("log.cleaner.backoff.ms", 15_000.0).max(0.0) as u64;
    log_cleaner::LogCleanerState::new(settings, enabled, backoff_ms, threads as usize)
}
