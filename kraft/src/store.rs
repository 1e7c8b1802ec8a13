//! `MetadataStore`: the single-voter metadata quorum's I/O driver. It owns the metadata
//! log `<log_dir>/__cluster_metadata-0`, runs each admin operation through the pure
//! controller functions, makes the resulting records durable as one batch, and only then
//! publishes the new image.
//!
//! Crash policy: one operation = one batch, fsynced before the image changes or the caller
//! hears back (Raft §5.3/§5.4: an entry is committed once durable on a majority, which is
//! this node alone). A crash mid-append leaves a torn final batch that storage recovery
//! truncates on the next open, so replay sees whole operations or none of them.
//!
//! Topic and partition creation take a `prepare` step that sees the image the operation would
//! publish and runs before the write: the broker creates the partitions' logs there, so a
//! topic is committed only once this node can serve it; if `prepare` fails nothing is written.

use std::path::Path;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use strata_protocol::record_batch::{RecordBatchView, SimpleRecord, encode_batch, peek_total_len};
use strata_storage::{Log, LogConfig, LogError};
use uuid::Uuid;

use crate::controller::{
    BrokerRegistration, ControllerConfig, CreateTopic, create_partitions_records,
    create_topic_records, delete_topic_records, is_assignable_topic_id, producer_ids_records,
    register_broker_records, set_topic_config_records,
};
use crate::meta_properties::{META_PROPERTIES_FILE, MetaProperties, generate_cluster_id};
use crate::record::{DecodeError, MetadataRecord};
use crate::{MetaPropertiesError, MetadataError, MetadataImage};

/// Directory of the metadata log partition inside the log dir, as in Kafka.
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";

/// KafkaRaftClient's `MAX_BATCH_SIZE_BYTES`: one controller operation must fit a batch.
const MAX_METADATA_BATCH_BYTES: u32 = 8 * 1024 * 1024;

/// The Raft epoch stamped on our batches. A lone voter elects itself in epoch 1 on first
/// start (KIP-595); until quorum state is persisted, it stays 1.
const SINGLE_VOTER_EPOCH: i32 = 1;

/// How much of the log one replay read asks for.
const REPLAY_READ_BYTES: u32 = 16 * 1024 * 1024;

/// Settings of the metadata log: Kafka's topic defaults, except that nothing is ever
/// deleted by retention: without snapshots (KIP-630) the log is the only copy of the state.
fn metadata_log_config() -> LogConfig {
    LogConfig {
        retention_ms: -1,
        retention_bytes: -1,
        max_message_bytes: MAX_METADATA_BATCH_BYTES,
        ..LogConfig::default()
    }
}

/// A cheap, cloneable handle to the latest published image. Readers (request handlers)
/// hold one instead of the store, so they never wait behind a controller operation's
/// fsync: the lock guards only the swap of an `Arc`.
#[derive(Debug, Clone)]
pub struct ImageReader {
    /// The published image; replaced whole, never mutated.
    current: Arc<RwLock<Arc<MetadataImage>>>,
}

impl ImageReader {
    /// The latest published image.
    pub fn load(&self) -> Arc<MetadataImage> {
        // A poisoned lock still holds a whole image: the writer only swaps an Arc.
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn publish(&self, image: Arc<MetadataImage>) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = image;
    }
}

/// The metadata log and the image built from it, for a single voter.
#[derive(Debug)]
pub struct MetadataStore {
    /// `<log_dir>/__cluster_metadata-0`.
    log: Log,
    /// Broker defaults for `-1` partition counts and replication factors.
    config: ControllerConfig,
    /// The image as of the log end; what `image()` hands out.
    image: Arc<MetadataImage>,
    /// Shares `image` with readers that don't hold the store.
    reader: ImageReader,
    /// Random per process start (KIP-631), recorded when this node (re)registers.
    incarnation_id: Uuid,
    /// Set when a write reached the log but its durability is unknown; see
    /// [`MetadataError::LogFailed`].
    failed: bool,
}

impl MetadataStore {
    /// Opens (or on first start formats) `log_dir` for `node_id` with Kafka's default
    /// `num.partitions` and `default.replication.factor` (both 1).
    ///
    /// # Errors
    ///
    /// See [`MetadataStore::open_with_config`].
    pub fn open(log_dir: &Path, node_id: i32, now_ms: i64) -> Result<Self, MetadataError> {
        Self::open_with_config(log_dir, node_id, ControllerConfig::default(), now_ms)
    }

    /// Opens `log_dir`: reads or writes `meta.properties`, opens (and recovers) the
    /// metadata log, and replays it into the image.
    ///
    /// # Errors
    ///
    /// [`MetadataError::NodeIdMismatch`] / [`MetadataError::InvalidMetaProperties`] /
    /// [`MetadataError::Io`] for `meta.properties`; [`MetadataError::Storage`] if the log
    /// cannot be opened or read; [`MetadataError::CorruptBatch`],
    /// [`MetadataError::CorruptRecord`] or [`MetadataError::InconsistentRecord`] (with the
    /// offset) if replay meets a record it cannot apply.
    pub fn open_with_config(
        log_dir: &Path,
        node_id: i32,
        config: ControllerConfig,
        now_ms: i64,
    ) -> Result<Self, MetadataError> {
        Self::open_in(log_dir, METADATA_LOG_DIR, node_id, config, now_ms)
    }

    /// [`MetadataStore::open_with_config`] with the log in `<log_dir>/<metadata_dir>`
    /// instead of `__cluster_metadata-0`. A node of a multi-voter quorum keeps its Raft log
    /// in `__cluster_metadata-0`; until this store proposes through that quorum, its own
    /// single-node log lives beside it under another name, so neither writes the other's
    /// directory.
    ///
    /// # Errors
    ///
    /// See [`MetadataStore::open_with_config`].
    pub fn open_in(
        log_dir: &Path,
        metadata_dir: &str,
        node_id: i32,
        config: ControllerConfig,
        now_ms: i64,
    ) -> Result<Self, MetadataError> {
        let metadata_dir = log_dir.join(metadata_dir);
        let meta_path = log_dir.join(META_PROPERTIES_FILE);
        if !meta_path.exists() && dir_has_entries(&metadata_dir) {
            return Err(MetadataError::InvalidMetaProperties {
                path: meta_path,
                reason: MetaPropertiesError::MissingWithExistingLog,
            });
        }
        let props =
            MetaProperties::load_or_create(log_dir, node_id, || generate_cluster_id(Uuid::new_v4))?;
        let log = Log::open(&metadata_dir, metadata_log_config(), now_ms)?;
        // Single voter: this node is the controller.
        let mut image = MetadataImage::new(props.cluster_id, node_id);
        let records = replay(&log, &mut image)?;
        tracing::info!(
            cluster_id = %image.cluster_id,
            node_id,
            records,
            log_end_offset = log.log_end_offset(),
            topics = image.topics.len(),
            "replayed metadata log"
        );
        let image = Arc::new(image);
        Ok(MetadataStore {
            log,
            config,
            reader: ImageReader {
                current: Arc::new(RwLock::new(Arc::clone(&image))),
            },
            image,
            incarnation_id: Uuid::new_v4(),
            failed: false,
        })
    }

    /// The current image. Cheap: clones an `Arc`.
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image)
    }

    /// A handle that yields the latest image without borrowing the store.
    pub fn reader(&self) -> ImageReader {
        self.reader.clone()
    }

    /// The broker defaults used for `-1` in CreateTopics.
    pub fn controller_config(&self) -> ControllerConfig {
        self.config
    }

    /// Changes the broker defaults used for `-1` in CreateTopics.
    pub fn set_controller_config(&mut self, config: ControllerConfig) {
        self.config = config;
    }

    /// The Raft epoch of a single voter's log (DescribeQuorum reports it).
    #[must_use]
    pub fn epoch(&self) -> i32 {
        SINGLE_VOTER_EPOCH
    }

    /// The offset the next metadata record will take (KIP-631 uses it as the broker epoch).
    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Registers a broker's endpoint, writing a `RegisterBrokerRecord` only if the host,
    /// port or rack differ from the image, so restarts don't grow the log.
    ///
    /// # Errors
    ///
    /// [`MetadataError::Storage`] or [`MetadataError::LogFailed`] if the write fails.
    pub fn register_broker(
        &mut self,
        node_id: i32,
        host: &str,
        port: u16,
        rack: Option<String>,
        now_ms: i64,
    ) -> Result<(), MetadataError> {
        let reg = BrokerRegistration {
            node_id,
            host: host.to_owned(),
            port,
            rack,
            incarnation_id: self.incarnation_id,
            broker_epoch: self.log.log_end_offset(),
        };
        let records = register_broker_records(&self.image, &reg);
        if !records.is_empty() {
            tracing::info!(node_id, host, port, "registering broker");
        }
        self.commit(&records, now_ms)
    }

    /// Creates a topic (or, with `validate_only`, checks that it could be created).
    /// Returns the new topic id; for `validate_only` it is the id the topic would have
    /// had, as Kafka returns.
    ///
    /// # Errors
    ///
    /// The validation errors of [`crate::create_topic_records`], or a storage error.
    pub fn create_topic(&mut self, req: CreateTopic, now_ms: i64) -> Result<Uuid, MetadataError> {
        self.create_topic_prepared(req, now_ms, |_| Ok(()))
    }

    /// [`MetadataStore::create_topic`], with `prepare` called on the image the operation
    /// would publish after it is validated and before anything is written. If `prepare`
    /// fails, nothing is written and its error is returned: a broker creates the partitions'
    /// logs there, so a topic whose logs cannot be created is never committed. `prepare` is
    /// not called for `validate_only`. When the write itself fails after `prepare`
    /// succeeded, the caller undoes what `prepare` did.
    ///
    /// # Errors
    ///
    /// The validation errors of [`crate::create_topic_records`], a storage error, or the
    /// error of `prepare`.
    pub fn create_topic_prepared<E: From<MetadataError>>(
        &mut self,
        req: CreateTopic,
        now_ms: i64,
        prepare: impl FnOnce(&MetadataImage) -> Result<(), E>,
    ) -> Result<Uuid, E> {
        let topic_id = self.new_topic_id();
        let records = create_topic_records(&self.image, &req, &self.config, topic_id)?;
        if req.validate_only {
            return Ok(topic_id);
        }
        self.commit_prepared(&records, now_ms, prepare)?;
        tracing::info!(
            topic = %req.name,
            %topic_id,
            partitions = self.image.topics.get(&req.name).map_or(0, |t| t.partitions.len()),
            "created topic"
        );
        Ok(topic_id)
    }

    /// Grows a topic to `count` partitions (or, with `validate_only`, checks that it could).
    ///
    /// # Errors
    ///
    /// The validation errors of [`crate::create_partitions_records`], or a storage error.
    pub fn create_partitions(
        &mut self,
        topic: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
        now_ms: i64,
    ) -> Result<(), MetadataError> {
        self.create_partitions_prepared(
            topic,
            count,
            assignments,
            validate_only,
            now_ms,
            |_| Ok(()),
        )
    }

    /// [`MetadataStore::create_partitions`], with `prepare` called on the image the operation
    /// would publish before anything is written, as in
    /// [`MetadataStore::create_topic_prepared`].
    ///
    /// # Errors
    ///
    /// The validation errors of [`crate::create_partitions_records`], a storage error, or
    /// the error of `prepare`.
    pub fn create_partitions_prepared<E: From<MetadataError>>(
        &mut self,
        topic: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
        now_ms: i64,
        prepare: impl FnOnce(&MetadataImage) -> Result<(), E>,
    ) -> Result<(), E> {
        let records = create_partitions_records(&self.image, topic, count, assignments)?;
        if validate_only {
            return Ok(());
        }
        self.commit_prepared(&records, now_ms, prepare)?;
        tracing::info!(topic, partitions = count, "created partitions");
        Ok(())
    }

    /// Deletes the topic with this id and returns its name. Callers holding a name
    /// resolve it through `image().topics` first.
    ///
    /// # Errors
    ///
    /// [`MetadataError::UnknownTopicId`], or a storage error.
    pub fn delete_topic(&mut self, topic_id: Uuid, now_ms: i64) -> Result<String, MetadataError> {
        let (name, records) = delete_topic_records(&self.image, topic_id)?;
        self.commit(&records, now_ms)?;
        tracing::info!(topic = %name, %topic_id, "deleted topic");
        Ok(name)
    }

    /// Sets (`Some`) or removes (`None`) one config override of a topic.
    ///
    /// # Errors
    ///
    /// [`MetadataError::UnknownTopic`], [`MetadataError::InvalidConfig`], or a storage
    /// error.
    pub fn set_topic_config(
        &mut self,
        topic: &str,
        key: &str,
        value: Option<&str>,
        now_ms: i64,
    ) -> Result<(), MetadataError> {
        let records = set_topic_config_records(&self.image, topic, key, value)?;
        self.commit(&records, now_ms)
    }

    /// Sets or removes dynamic broker configs of one broker resource on the single voter,
    /// as one batch (see [`crate::set_broker_config_records`]).
    ///
    /// # Errors
    ///
    /// A storage error.
    pub fn set_broker_configs(
        &mut self,
        resource: &str,
        changes: &[(String, Option<String>)],
        now_ms: i64,
    ) -> Result<(), MetadataError> {
        let records: Vec<MetadataRecord> = changes
            .iter()
            .flat_map(|(k, v)| {
                crate::set_broker_config_records(&self.image, resource, k, v.as_deref())
            })
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        self.commit(&records, now_ms)
    }

    /// AlterClientQuotas (KIP-546) on the single voter: the records of every entry that
    /// passes its checks are committed as one batch (unless `validate_only`); the outcomes
    /// are in request order.
    ///
    /// # Errors
    ///
    /// A storage error writing the records; per-entry failures are data in the results.
    pub fn alter_client_quotas(
        &mut self,
        entries: &[crate::client_quotas::QuotaAlteration],
        validate_only: bool,
        now_ms: i64,
    ) -> Result<Vec<Result<(), crate::client_quotas::ClientQuotaError>>, MetadataError> {
        let (records, results) =
            crate::client_quotas::alter_client_quotas(&self.image.client_quotas, entries);
        if !validate_only {
            self.commit(&records, now_ms)?;
        }
        Ok(results)
    }

    /// AlterUserScramCredentials (KIP-554) on the single voter: the records of
    /// [`crate::scram::alter_user_scram_credentials`], committed before the results return.
    ///
    /// # Errors
    ///
    /// A storage error; per-user outcomes are data in the results.
    pub fn alter_user_scram_credentials(
        &mut self,
        deletions: &[crate::scram::ScramDeletion],
        upsertions: &[crate::scram::ScramUpsertion],
        now_ms: i64,
    ) -> Result<crate::scram::ScramResults, MetadataError> {
        let (records, results) =
            crate::scram::alter_user_scram_credentials(&self.image.scram, deletions, upsertions);
        self.commit(&records, now_ms)?;
        Ok(results)
    }

    /// ElectLeaders (KIP-460) on the single voter: the elections
    /// [`crate::cluster_control::elect_leaders`] finds are committed as one batch. On one
    /// node every partition's only replica is the node itself, so in practice each answer is
    /// ELECTION_NOT_NEEDED; the path is the cluster's all the same.
    ///
    /// # Errors
    ///
    /// A storage error; per-partition outcomes are data in the results.
    pub fn elect_leaders(
        &mut self,
        election_type: crate::cluster_control::ElectionType,
        partitions: Option<&[(String, i32)]>,
        now_ms: i64,
    ) -> Result<Vec<crate::cluster_control::ElectLeadersResult>, MetadataError> {
        let (records, results) =
            crate::cluster_control::elect_leaders(&self.image, election_type, partitions);
        self.commit(&records, now_ms)?;
        if !records.is_empty() {
            tracing::info!(elections = records.len(), ?election_type, "elected leaders");
        }
        Ok(results)
    }

    /// AlterPartitionReassignments (KIP-455) on this store: the records of
    /// [`crate::cluster_control::alter_partition_reassignments`], committed before the
    /// results return.
    ///
    /// # Errors
    ///
    /// A storage error writing the records.
    pub fn alter_partition_reassignments(
        &mut self,
        config: &crate::cluster_control::ClusterControlConfig,
        allow_replication_factor_change: bool,
        targets: &[crate::cluster_control::ReassignmentTarget],
        now_ms: i64,
    ) -> Result<Vec<crate::cluster_control::ReassignmentResult>, MetadataError> {
        let (records, results) = crate::cluster_control::alter_partition_reassignments(
            &self.image,
            config,
            allow_replication_factor_change,
            targets,
        );
        self.commit(&records, now_ms)?;
        Ok(results)
    }

    /// Allocates the next block of producer ids to `broker_id` and makes it durable with a
    /// `ProducerIdsRecord` before returning it, so ids survive restarts and are never
    /// handed out twice (Kafka's `ProducerIdControlManager`, KIP-730).
    ///
    /// # Errors
    ///
    /// The errors of [`crate::producer_ids_records`], or a storage error.
    pub fn allocate_producer_ids(
        &mut self,
        broker_id: i32,
        now_ms: i64,
    ) -> Result<crate::record::ProducerIdsBlock, MetadataError> {
        let (block, records) = producer_ids_records(&self.image, broker_id)?;
        self.commit(&records, now_ms)?;
        tracing::info!(
            broker_id,
            first_producer_id = block.first_producer_id,
            size = block.size,
            "allocated producer id block"
        );
        Ok(block)
    }

    /// Commits the records `op` computes from the current image as one batch and returns
    /// its result: for operations whose records come with per-item results (CreateAcls,
    /// DeleteAcls) rather than one error.
    ///
    /// # Errors
    ///
    /// A storage error writing the records.
    pub fn commit_operation<T>(
        &mut self,
        now_ms: i64,
        op: impl FnOnce(&MetadataImage) -> (Vec<MetadataRecord>, T),
    ) -> Result<T, MetadataError> {
        let (records, result) = op(&self.image);
        self.commit(&records, now_ms)?;
        Ok(result)
    }

    /// Closes the metadata log cleanly.
    ///
    /// # Errors
    ///
    /// [`MetadataError::Storage`] if the final flush fails.
    pub fn close(self) -> Result<(), MetadataError> {
        Ok(self.log.close()?)
    }

    fn new_topic_id(&self) -> Uuid {
        loop {
            let id = Uuid::new_v4();
            if is_assignable_topic_id(&self.image, id) {
                return id;
            }
        }
    }

    /// Appends one operation's records as one batch, fsyncs, then publishes the image.
    fn commit(&mut self, records: &[MetadataRecord], now_ms: i64) -> Result<(), MetadataError> {
        self.commit_prepared(records, now_ms, |_| Ok(()))
    }

    /// [`MetadataStore::commit`], calling `prepare` with the next image before the write; an
    /// error from it writes nothing.
    fn commit_prepared<E: From<MetadataError>>(
        &mut self,
        records: &[MetadataRecord],
        now_ms: i64,
        prepare: impl FnOnce(&MetadataImage) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.failed {
            return Err(MetadataError::LogFailed.into());
        }
        if records.is_empty() {
            return Ok(());
        }
        // Apply to a copy first: readers keep the old image, and a record that would not
        // apply is never written (replay would otherwise fail on it forever).
        let mut next = MetadataImage::clone(&self.image);
        for record in records {
            next.apply(record)
                .map_err(|source| MetadataError::InconsistentRecord {
                    offset: None,
                    source,
                })?;
        }
        prepare(&next)?;
        let batch: Vec<SimpleRecord> = records
            .iter()
            .map(|r| SimpleRecord {
                key: None,
                value: Some(Bytes::from(r.encode())),
                timestamp: now_ms,
                headers: Vec::new(),
            })
            .collect();
        // The log assigns the real base offset.
        let mut bytes = encode_batch(0, &batch).to_vec();
        let end_before = self.log.log_end_offset();
        if let Err(e) = self.log.append(&mut bytes, SINGLE_VOTER_EPOCH, now_ms) {
            // Rejected before writing (e.g. too large): nothing changed, carry on.
            self.failed = self.log.log_end_offset() != end_before;
            return Err(MetadataError::from(e).into());
        }
        if let Err(e) = self.log.flush() {
            // After a failed fsync the kernel may have dropped the dirty pages, so whether
            // the batch survives a crash is unknown: stop writing (see LogFailed).
            self.failed = true;
            return Err(MetadataError::from(e).into());
        }
        self.image = Arc::new(next);
        self.reader.publish(Arc::clone(&self.image));
        Ok(())
    }
}

/// Whether `dir` exists and holds anything (a metadata log from an earlier start).
fn dir_has_entries(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

/// Applies every record of `log` to `image`; returns how many were applied.
fn replay(log: &Log, image: &mut MetadataImage) -> Result<u64, MetadataError> {
    let end = log.log_end_offset();
    let mut offset = log.log_start_offset();
    let mut applied = 0u64;
    let mut buf = Vec::new();
    while offset < end {
        let read = log.read(offset, REPLAY_READ_BYTES, end, true)?;
        buf.clear();
        for region in &read.regions {
            region.read_into(&mut buf).map_err(|source| LogError::Io {
                path: log.dir().to_owned(),
                source,
            })?;
        }
        let start_offset = offset;
        let mut rest = buf.as_slice();
        while !rest.is_empty() {
            // A read may end inside a batch; take that batch up again in the next read.
            let complete = peek_total_len(rest).is_ok_and(|len| len <= rest.len());
            if !complete && offset > start_offset {
                break;
            }
            let batch = RecordBatchView::parse(rest)
                .map_err(|source| MetadataError::CorruptBatch { offset, source })?;
            rest = &rest[batch.total_len()..];
            applied += apply_batch(&batch, offset, image)?;
            offset = offset.max(batch.last_offset() + 1);
        }
        if offset == start_offset {
            // The log claims more offsets than it returned batches for.
            return Err(MetadataError::Storage(LogError::OffsetOutOfRange {
                requested: offset,
                log_start: log.log_start_offset(),
                log_end: end,
            }));
        }
    }
    Ok(applied)
}

/// Applies the records of one batch at or after `from`; returns how many.
fn apply_batch(
    batch: &RecordBatchView<'_>,
    from: i64,
    image: &mut MetadataImage,
) -> Result<u64, MetadataError> {
    let base = batch.base_offset();
    let corrupt_batch = |source| MetadataError::CorruptBatch {
        offset: base,
        source,
    };
    batch.verify_crc().map_err(corrupt_batch)?;
    if batch.is_control() {
        // KIP-595 leader-change and snapshot markers carry no metadata.
        return Ok(0);
    }
    let mut applied = 0;
    for record in batch.records().map_err(corrupt_batch)? {
        let record = record.map_err(corrupt_batch)?;
        if record.offset < from {
            continue;
        }
        let offset = Some(record.offset);
        let value = record.value.ok_or(MetadataError::CorruptRecord {
            offset,
            source: DecodeError::UnexpectedNull {
                field: "record value",
            },
        })?;
        let decoded = MetadataRecord::decode(value).map_err(|e| match e {
            MetadataError::CorruptRecord { source, .. } => {
                MetadataError::CorruptRecord { offset, source }
            }
            other => other,
        })?;
        image
            .apply(&decoded)
            .map_err(|source| MetadataError::InconsistentRecord { offset, source })?;
        applied += 1;
    }
    Ok(applied)
}
