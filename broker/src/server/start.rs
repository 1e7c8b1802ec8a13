//! Starting a node: its cluster id, the metadata quorum, the broker on the image the quorum
//! publishes, the controller task and the broker's lifecycle. `main.rs` runs it before it
//! serves; handler tests run it for a node in a temporary directory.
//!
//! Every node runs the metadata quorum (ARCHITECTURE.md decision 1): several voters over
//! the network, a dedicated broker as an observer, or a lone node as the only voter of a
//! quorum of its own. The driver publishes the committed image; the broker follows it.

use std::sync::Arc;
use std::time::Duration;

use strata_kraft::MetadataError;

use crate::broker::lifecycle::{self, Lifecycle};
use crate::broker::{Broker, CreateTopicError};
use crate::config::BrokerConfig;
use crate::coordinator::offsets::OFFSETS_TOPIC;
use crate::quorum::{self, QuorumHandle};

/// How long the only voter may take, at start, to elect itself and apply its log, and then
/// to register and unfence its broker.
pub const SOLE_VOTER_READY: Duration = Duration::from_secs(60);

/// How long a node of a cluster waits to catch up with the metadata (registered, unfenced)
/// before it serves clients anyway: a cluster whose controller quorum is lost cannot unfence
/// it, and a client is better told that than left unanswered.
pub const CLUSTER_READY: Duration = Duration::from_secs(30);

/// A started node.
pub struct Node {
    /// The broker, following the quorum's images.
    pub broker: Arc<Broker>,
    /// The quorum driver.
    pub quorum: QuorumHandle,
    /// The broker's registration and heartbeats, and the controller's tick.
    pub lifecycle: Arc<Lifecycle>,
}

/// Starts a node (see the module doc).
///
/// # Errors
///
/// The data directory's `meta.properties` does not fit the configuration, the quorum or
/// the broker cannot open their logs, or the only voter did not lead within
/// [`SOLE_VOTER_READY`].
pub async fn start(mut config: BrokerConfig) -> anyhow::Result<Node> {
    let resolve = config.clone();
    let cluster_id = tokio::task::spawn_blocking(move || resolve_cluster_id(&resolve)).await??;
    config.cluster_id = Some(cluster_id.clone());
    // How this node reaches the others, read once for the quorum and the broker.
    let peers = crate::security::peer::PeerRoutes::from_config(&config)?;
    let (images_tx, images_rx) = tokio::sync::watch::channel(Arc::new(
        strata_kraft::MetadataImage::new(cluster_id.clone(), -1),
    ));
    // The only voter leads at once and commits its whole log alone, so it opens the broker
    // on the image that log holds, as a node that replays its own log: partitions open and
    // groups load against the topics they name. Other nodes open first and follow the
    // quorum as it forms.
    let early_quorum = if config.is_sole_voter() {
        let q = quorum::start(
            &config,
            &cluster_id,
            images_tx.clone(),
            peers.controller.clone(),
        )
        .await?;
        if !q.lead_with_log_applied(SOLE_VOTER_READY).await {
            anyhow::bail!(
                "the metadata quorum of this node alone did not elect it and apply its log within {SOLE_VOTER_READY:?}"
            );
        }
        Some(q)
    } else {
        None
    };
    let follow = images_rx.clone();
    let broker = tokio::task::spawn_blocking(move || {
        Ok::<_, anyhow::Error>(Broker::open(config, follow, crate::now_ms(), peers)?)
    })
    .await??;
    let quorum = match early_quorum {
        Some(q) => q,
        None => {
            quorum::start(
                &broker.config,
                &cluster_id,
                images_tx,
                broker.peers.controller.clone(),
            )
            .await?
        }
    };
    broker.attach_quorum(quorum.clone());
    tokio::spawn(crate::broker::follow_images(
        broker.clone(),
        images_rx,
        quorum.status_changes(),
    ));
    let lifecycle = lifecycle::start(broker.clone());
    Ok(Node {
        broker,
        quorum,
        lifecycle,
    })
}

impl Node {
    /// Waits until the node may serve clients. Kafka opens the client listeners once the
    /// broker has caught up with the metadata log (`BrokerServer` waits for its lifecycle's
    /// initial catch-up); the only voter waits until it is unfenced (it waits for no one
    /// else), so its first clients find every partition led, and a node of a larger quorum
    /// that restarts with a metadata log likewise, bounded by [`CLUSTER_READY`]. The
    /// controller listeners are served before.
    ///
    /// The only voter also creates `__consumer_offsets` then, if it has none, and waits
    /// for its partitions to load, so that a lone node coordinates every group from its
    /// first request, as it always has (a cluster creates it at the first FindCoordinator,
    /// as Kafka does).
    pub async fn wait_for_clients(&self) {
        let config = &self.broker.config;
        if !config.process_roles.broker {
            return;
        }
        if !config.is_sole_voter() {
            // Kafka enables a broker's request processing once it has caught up with the
            // metadata log. A node restarted into a running cluster that answered Metadata
            // from the image it is still replaying would name no brokers and no leaders, and
            // librdkafka drops every broker such an answer leaves out (a transactional
            // producer then has no coordinator until it re-bootstraps, minutes later). So a
            // node that starts with a metadata log of its own (a restart) waits; a node of a
            // cluster being formed serves at once, as before, since no client knows any
            // broker yet (waiting there made a client created during the formation miss its
            // first CreateTopics now and then, not understood yet).
            let restarted = self.quorum.status().log_end_offset > 0;
            if restarted && !self.broker.wait_caught_up(CLUSTER_READY).await {
                tracing::warn!(bound = ?CLUSTER_READY, "the broker did not catch up with the metadata in time; serving clients anyway");
            }
            return;
        }
        if !self.broker.wait_caught_up(SOLE_VOTER_READY).await {
            tracing::warn!(bound = ?SOLE_VOTER_READY, "the broker was not unfenced in time; serving clients anyway");
            return;
        }
        if !self.broker.image().topics.contains_key(OFFSETS_TOPIC) {
            match self.broker.create_offsets_topic().await {
                Ok(_) | Err(CreateTopicError::Metadata(MetadataError::TopicAlreadyExists(_))) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot create {OFFSETS_TOPIC}; a FindCoordinator will try again")
                }
            }
        }
        // Its groups are served from the first request, not after a
        // COORDINATOR_LOAD_IN_PROGRESS.
        if !self.broker.offsets.wait_loaded(SOLE_VOTER_READY).await {
            tracing::warn!(bound = ?SOLE_VOTER_READY, "{OFFSETS_TOPIC} did not load in time; serving clients anyway");
        }
    }
}

/// The cluster id this node runs with, as its data directory's `meta.properties` holds it
/// (there is no separate format step: an empty data directory is formatted here).
///
/// - `cluster.id` set: an empty data directory is formatted with it, and a formatted one
///   must carry it, as Kafka checks `meta.properties` against the cluster it is told to
///   join.
/// - Not set, a node that names its quorum (`controller.quorum.voters`, one voter
///   included, or the bootstrap servers of a dynamic quorum): every node derives the same id from
///   `controller.quorum.voters` ([`strata_kraft::cluster_id_from_voters`]) and formats an
///   empty data directory with it; a formatted one keeps the id it holds, so a cluster
///   whose voter list is later edited stays one cluster. Dedicated brokers name the same
///   voters as the controllers, so they derive the same id. A dynamic quorum (KIP-853)
///   derives it likewise from `controller.quorum.bootstrap.servers`
///   ([`strata_kraft::cluster_id_from_bootstrap_servers`]).
/// - Not set, a node with no quorum configured at all (the zero-configuration node, the
///   only voter of a quorum of its own): an empty data directory is formatted with a
///   random id (a data directory with a metadata log but no `meta.properties` is refused,
///   as it always was).
pub fn resolve_cluster_id(config: &BrokerConfig) -> anyhow::Result<String> {
    let path = config.log_dir.join(strata_kraft::META_PROPERTIES_FILE);
    if let Some(expected) = &config.cluster_id {
        let props =
            strata_kraft::MetaProperties::load_or_create(&config.log_dir, config.node_id, || {
                expected.clone()
            })?;
        if &props.cluster_id != expected {
            anyhow::bail!(
                "Invalid cluster.id in: {}. Expected {expected}, but read {}",
                path.display(),
                props.cluster_id
            );
        }
        return Ok(props.cluster_id);
    }
    if config.standalone_quorum {
        let metadata = config.log_dir.join(strata_kraft::METADATA_LOG_DIR);
        let has_log = std::fs::read_dir(&metadata).is_ok_and(|mut d| d.next().is_some());
        if !path.exists() && has_log {
            return Err(strata_kraft::MetadataError::InvalidMetaProperties {
                path,
                reason: strata_kraft::MetaPropertiesError::MissingWithExistingLog,
            }
            .into());
        }
        let props =
            strata_kraft::MetaProperties::load_or_create(&config.log_dir, config.node_id, || {
                strata_kraft::generate_cluster_id(uuid::Uuid::new_v4)
            })?;
        return Ok(props.cluster_id);
    }
    let derived = if config.is_dynamic_quorum() {
        strata_kraft::cluster_id_from_bootstrap_servers(
            config
                .quorum_bootstrap_servers
                .iter()
                .map(|(host, port)| (host.as_str(), *port)),
        )
    } else {
        strata_kraft::cluster_id_from_voters(
            config
                .quorum_voters
                .iter()
                .map(|v| (v.id, v.host.as_str(), v.port)),
        )
    };
    let props =
        strata_kraft::MetaProperties::load_or_create(&config.log_dir, config.node_id, || {
            derived.clone()
        })?;
    if props.cluster_id == derived {
        tracing::info!(cluster_id = %derived, "cluster.id not set: the id derived from controller.quorum.voters (or controller.quorum.bootstrap.servers)");
    } else {
        tracing::info!(
            cluster_id = %props.cluster_id,
            derived = %derived,
            path = %path.display(),
            "cluster.id not set: the id this data directory was formatted with"
        );
    }
    Ok(props.cluster_id)
}
