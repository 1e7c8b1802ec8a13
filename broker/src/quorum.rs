//! The tokio driver of the Raft core (`strata_kraft::raft::RaftNode`): the metadata quorum
//! every node runs (over the network, or alone as the only voter of a quorum of its own).
//!
//! One task, on a thread of its own (`metadata-quorum`), owns the core and everything
//! durable it asks for: the `quorum-state` file and the Raft log in
//! `<log_dir>/__cluster_metadata-0`. It feeds the core inputs one at a time and carries out
//! each step's actions in order, every storage action durable (written and fsynced) before
//! the next action runs, so a vote or a Fetch offset never leaves this node before what it
//! promises is on disk. Its fsyncs block only its own thread.
//!
//! - **Timers**: the task sleeps until the core's `next_deadline()` or the next input,
//!   whichever comes first, and ticks the core. `now` is milliseconds since the driver
//!   started (a monotonic clock); the election-timer seed comes from the OS.
//! - **Outbound**: one task per node the core talks to ([`peer`]), started on its first
//!   message, keeps one connection to its controller listener (where `controller.quorum.voters`,
//!   the voter set's endpoints (KIP-853), a leader's `NodeEndpoints` or the bootstrap servers
//!   say it is), sends the core's requests in order, waits a bounded time for each
//!   answer, hands the answer back to the core, and reconnects with a backoff when the
//!   connection fails. A request that fails is dropped; the core retries on its timers.
//! - **Inbound**: a controller-listener connection hands Vote, BeginQuorumEpoch,
//!   EndQuorumEpoch, Fetch and FetchSnapshot to the driver ([`QuorumHandle::request`]) and
//!   writes back the response the core sends to that node in the same step. DescribeQuorum
//!   is answered from the core's `describe_quorum` on the leader.
//! - **Snapshots** (KIP-630): after each step, once
//!   `metadata.log.max.record.bytes.between.snapshots` bytes of entries were applied since
//!   the last snapshot, or `metadata.log.max.snapshot.interval.ms` passed with new entries
//!   applied, the driver writes the image out as records ([`snapshot::Checkpoint`]) into a
//!   `.checkpoint` file (durably; older ones are pruned to the latest two) and hands the
//!   core `Input::Snapshot` for the *previous* snapshot, so the log keeps one snapshot
//!   interval of entries for followers that lag. The core answers `PersistSnapshot` (the
//!   file is already there) and `DeleteLogBefore` (whole segments below it go). A
//!   follower behind the leader's log start gets `InstallSnapshot` after fetching the
//!   snapshot in pages ([`peer`]): it stores the file, empties its log to start at the
//!   snapshot's end, and replaces and publishes the image. At start the newest snapshot
//!   that loads gives the image, and only the entries after it are replayed; a log that
//!   does not continue it (it ends before it, starts after it, or disagrees on its last
//!   epoch) is emptied to start at its end.
//!
//! # Layout
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | [`QuorumHandle`], [`QuorumStatus`], the driver task and its action loop |
//! | `disk.rs` | [`disk::RaftDisk`]: entries as record batches in `__cluster_metadata-0` |
//! | `snapshot.rs` | the `.checkpoint` files ([`snapshot::Checkpoint`]), and the assembly of a fetched one |
//! | `snapshotting.rs` | the driver's side: the triggers, taking and installing a snapshot, what start-up replays |
//! | `wire/mod.rs` | core messages to and from Kafka's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot, DescribeQuorum |
//! | `wire/fetch_snapshot.rs` | FetchSnapshot's pages: the request for one, cutting one, reading one back |
//! | `wire/refusal.rs` | [`wire::refusal::QuorumRefusal`]: the quorum's refusals as the Raft APIs' error codes |
//! | `peer.rs` | one outbound connection per voter |
//! | `membership.rs` | a dynamic quorum (KIP-853): founding it, auto-join, AddRaftVoter and RemoveRaftVoter |
//! | `upgrade.rs` | the one-time conversion of an old single-node metadata log into a snapshot |
//!
//! A snapshot is encoded on the driver's thread, so a very large image delays the quorum's
//! next step by that long (Kafka writes its snapshots on a separate thread).

pub mod disk;
mod membership;
mod peer;
pub mod snapshot;
mod snapshotting;
pub mod upgrade;
pub mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use strata_kraft::entry::{decode_entry, encode_entry};
use strata_kraft::quorum_state::QuorumStateStore;
use strata_kraft::raft::Payload;
use strata_kraft::raft::{
    Action, Endpoint, Entry, Input, Message, NodeId, Payload as RaftPayload, QuorumDescription,
    RaftConfig, RaftLog, RaftNode, ReplicaKey, RoleKind, VoterChangeError, VoterSet,
};
use strata_kraft::{MetadataError, MetadataImage, MetadataRecord, Uuid};
use strata_protocol::messages::{RequestKind, ResponseKind};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::BrokerConfig;
use snapshotting::{SnapshotPolicy, apply_all, entries_after};

pub use strata_kraft::METADATA_LOG_DIR;

/// How many inputs may wait for the driver.
const COMMAND_QUEUE: usize = 1024;
/// How many snapshot files are kept: the latest, and one to fall back on should it not load.
const SNAPSHOTS_KEPT: usize = 2;

/// Why the driver could not start.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    /// The quorum-state file.
    #[error(transparent)]
    QuorumState(#[from] strata_kraft::quorum_state::QuorumStateError),
    /// The Raft log.
    #[error(transparent)]
    Disk(#[from] disk::DiskError),
    /// A snapshot file.
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    /// A data directory of the old single-node layout could not be converted.
    #[error("cannot upgrade the single-node metadata log: {0}")]
    Upgrade(#[from] upgrade::UpgradeError),
    /// The driver's thread could not be started.
    #[error("cannot start the metadata quorum's thread: {0}")]
    Thread(std::io::Error),

    /// A directory could not be created.
    #[error("cannot create {path}: {source}")]
    Io {
        /// Which.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What the quorum looks like from this node, updated after every step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuorumStatus {
    /// This node's role.
    pub role: RoleKind,
    /// Its epoch.
    pub epoch: i32,
    /// The leader it knows, if any.
    pub leader: Option<NodeId>,
    /// Its high watermark.
    pub high_watermark: i64,
    /// Its log end offset.
    pub log_end_offset: i64,
    /// Every entry below this offset is applied to the published image.
    pub applied_offset: i64,
}

/// How long a proposal may wait to commit: Kafka's default `request.timeout.ms` for the
/// controller's writes is 30 s, but a client's admin request times out long before that;
/// 5 s is ample for a quorum with a majority on a LAN.
const PROPOSAL_TIMEOUT: Duration = Duration::from_secs(5);

/// DescribeQuorum's parts from the driver: the leader's description (`None` elsewhere) and
/// the voters' endpoints.
type Described = (Option<QuorumDescription>, Vec<(NodeId, Endpoint)>);

/// The answer to a proposal: the entry's offset once it is committed and applied. It fires
/// from the driver's task as the entry is applied, so the proposer awaits it and no thread
/// waits.
type ProposalReply = oneshot::Sender<Result<i64, MetadataError>>;

/// What the driver is asked from outside its task.
enum Command {
    /// An inbound RPC from a peer; the reply goes back on the connection it came from.
    Request {
        from: NodeId,
        msg: Message,
        reply: oneshot::Sender<Message>,
    },
    /// A peer's answer to a request of ours.
    Response { from: NodeId, msg: Message },
    /// Our requests to a peer were lost: no connection, or it failed mid-request.
    Unreachable { to: NodeId },
    /// Where nodes are, as a peer's answer named them (a leader's `NodeEndpoints`).
    Learned {
        endpoints: Vec<(NodeId, String, u16)>,
    },
    /// DescribeQuorum: the leader's view, and the voters' endpoints.
    Describe { reply: oneshot::Sender<Described> },
    /// AddRaftVoter or RemoveRaftVoter (KIP-853): the change's entry `(offset, epoch)`
    /// once the core appended it, or why it would not.
    ChangeVoters {
        change: Input,
        reply: oneshot::Sender<Result<(i64, i32), VoterChangeError>>,
    },
    /// A clean shutdown: a leader resigns (EndQuorumEpoch), so the others need not wait
    /// for the fetch timeout.
    Resign { done: oneshot::Sender<()> },
    /// One metadata operation's records, as one entry, from the active controller.
    Propose {
        data: bytes::Bytes,
        reply: ProposalReply,
    },
}

/// A cheap, cloneable handle to the running driver.
#[derive(Debug, Clone)]
pub struct QuorumHandle {
    /// Into the driver task.
    tx: mpsc::Sender<Command>,
    /// The latest status, readable without waiting for the driver, and awaitable: the
    /// driver sends a new one after every step.
    status: watch::Receiver<QuorumStatus>,
    /// The cluster id every request must carry.
    cluster_id: Arc<str>,
    /// Where each node the quorum knows of takes controller requests (see [`Addresses`]).
    addresses: Addresses,
}

/// Node id → controller listener `(host, port)`: from `controller.quorum.voters`, the
/// voter set's endpoints, leaders' `NodeEndpoints`, and (under negative ids) the bootstrap
/// servers. Shared by the driver, which keeps it current, and the handles.
type Addresses = Arc<RwLock<HashMap<NodeId, (String, u16)>>>;

impl QuorumHandle {
    /// Where controller `id` takes requests on its controller listener, if known: for a
    /// dynamic quorum the voters' addresses come from the metadata log, not the
    /// configuration.
    pub fn address_of(&self, id: i32) -> Option<(String, u16)> {
        self.addresses
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&NodeId(id))
            .cloned()
    }

    /// The latest status.
    pub fn status(&self) -> QuorumStatus {
        *self.status.borrow()
    }

    /// The status as it changes: sent after every step that changed it, and, for an
    /// applied offset, after the image that holds it was published.
    #[must_use]
    pub fn status_changes(&self) -> watch::Receiver<QuorumStatus> {
        self.status.clone()
    }

    /// Hands an inbound quorum RPC to the core and returns the body of its answer, or
    /// `None` when the request is not for this quorum or the core did not answer it (the
    /// connection is then closed, and the sender retries).
    pub async fn request(&self, body: &RequestKind) -> Option<ResponseKind> {
        let (from, msg) = match wire::request_from_wire(body, &self.cluster_id) {
            Ok(x) => x,
            Err(refused) => {
                tracing::warn!(?refused, "quorum request refused");
                return None;
            }
        };
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::Request { from, msg, reply })
            .await
            .ok()?;
        let answer = rx.await.ok()?;
        let mut response = wire::response_to_wire(&answer, crate::now_ms())?;
        wire::add_leader_endpoint(&mut response, |id| self.address_of(id.0));
        if let Some((position, max_bytes)) = wire::snapshot_page(body) {
            // KIP-630: the core answers with the whole snapshot; send the page asked for.
            wire::page_snapshot_response(&mut response, position, max_bytes);
        }
        Some(response)
    }

    /// Resigns leadership for a clean shutdown (KIP-595's EndQuorumEpoch to the other
    /// voters, most caught-up first), then gives the outbound connections up to `grace` to
    /// send it. Does nothing on a node that does not lead.
    pub async fn resign(&self, grace: Duration) {
        if self.status().role != RoleKind::Leader {
            return;
        }
        let (done, rx) = oneshot::channel();
        if self.tx.send(Command::Resign { done }).await.is_ok() {
            let _ = tokio::time::timeout(grace, rx).await;
            // The EndQuorumEpoch requests are queued now; let them go out.
            tokio::time::sleep(grace).await;
        }
    }

    /// Proposes one metadata operation's records as one entry and waits until it is
    /// committed and applied to the published image. Returns the entry's offset. Nothing
    /// blocks: the driver answers through a oneshot as it applies the entry.
    ///
    /// # Errors
    ///
    /// [`MetadataError::NotController`] when this node does not lead or stops leading
    /// before the entry commits (the entry may still commit under a later leader, as in
    /// Kafka, which answers NOT_CONTROLLER then too); [`MetadataError::Timeout`] when it
    /// does not commit within [`PROPOSAL_TIMEOUT`], or the driver's queue is full.
    pub async fn propose(&self, records: &[MetadataRecord]) -> Result<i64, MetadataError> {
        let (reply, rx) = oneshot::channel();
        let data = encode_entry(records);
        self.tx
            .try_send(Command::Propose { data, reply })
            .map_err(|_| MetadataError::Timeout)?;
        match tokio::time::timeout(PROPOSAL_TIMEOUT, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(MetadataError::NotController),
            Err(_) => Err(MetadataError::Timeout),
        }
    }

    /// Waits, at most `max`, until this node leads and has applied its whole log, so an
    /// operation computed from the published image sees every earlier one: a new leader
    /// first commits its predecessors' entries along with its own LeaderChange. It wakes on
    /// each status the driver sends; nothing polls.
    ///
    /// # Errors
    ///
    /// [`MetadataError::NotController`] when this node does not lead, stops leading
    /// meanwhile, or is not ready in time.
    pub async fn ready_to_lead(&self, max: Duration) -> Result<QuorumStatus, MetadataError> {
        let mut status = self.status.clone();
        let ready = tokio::time::timeout(
            max,
            status.wait_for(|s| s.role != RoleKind::Leader || s.applied_offset >= s.log_end_offset),
        )
        .await;
        match ready {
            Ok(Ok(s)) if s.role == RoleKind::Leader => Ok(*s),
            _ => Err(MetadataError::NotController),
        }
    }

    /// Waits (at most `max`) until this node leads and has applied its whole log: what
    /// the only voter waits for at start, so that the broker opens on the image its log
    /// holds. `false` when that did not happen in time.
    pub async fn lead_with_log_applied(&self, max: Duration) -> bool {
        let mut status = self.status.clone();
        tokio::time::timeout(
            max,
            status.wait_for(|s| s.role == RoleKind::Leader && s.applied_offset >= s.log_end_offset),
        )
        .await
        .is_ok_and(|r| r.is_ok())
    }

    /// DescribeQuorum's answer body, at request version `version`.
    pub async fn describe(&self, version: i16) -> ResponseKind {
        let (reply, rx) = oneshot::channel();
        let (description, nodes) = match self.tx.send(Command::Describe { reply }).await {
            Ok(()) => rx.await.unwrap_or_default(),
            Err(_) => Default::default(),
        };
        let s = self.status();
        // v2 (KIP-853) added the directory ids and the voters' endpoints.
        let v2 = version >= 2;
        let mut description = description;
        if let Some(d) = description.as_mut().filter(|_| !v2) {
            for r in d.voters.iter_mut().chain(d.observers.iter_mut()) {
                r.replica.directory_id = Uuid::nil();
            }
        }
        wire::describe_quorum_response(
            description.as_ref(),
            s.leader,
            s.epoch,
            s.high_watermark,
            if v2 { &nodes } else { &[] },
        )
    }
}

/// Starts the driver for `config`'s quorum: the static voter set of
/// `controller.quorum.voters`, or a dynamic one (KIP-853) found through
/// `controller.quorum.bootstrap.servers` (see [`membership`]), with this node's Raft state
/// in `<log_dir>/__cluster_metadata-0`.
///
/// # Errors
///
/// [`QuorumError`] when the quorum state or the log cannot be read.
///
/// Every committed metadata entry is applied, in order, to the image this node publishes
/// on `images` (its `controller_id` is the quorum's leader as this node knows it).
/// `security` secures the connections to the other voters (the controller route).
pub async fn start(
    config: &BrokerConfig,
    cluster_id: &str,
    images: tokio::sync::watch::Sender<Arc<MetadataImage>>,
    security: Arc<crate::security::peer::PeerSecurity>,
) -> Result<QuorumHandle, QuorumError> {
    let dir = config.log_dir.join(METADATA_LOG_DIR);
    std::fs::create_dir_all(&dir).map_err(|source| QuorumError::Io {
        path: dir.clone(),
        source,
    })?;
    let segment_bytes = u32::try_from(config.metadata_log_segment_bytes).unwrap_or(u32::MAX);
    if config.is_sole_voter() {
        upgrade::upgrade_single_node_log(
            &config.log_dir,
            METADATA_LOG_DIR,
            config.node_id,
            segment_bytes,
            crate::now_ms(),
        )?;
    }
    let state_store = QuorumStateStore::new(&dir);
    let quorum: strata_kraft::raft::QuorumState =
        state_store.read()?.map(Into::into).unwrap_or_default();
    let loaded = snapshot::load_latest(&dir)?;
    let mut raft_disk = disk::RaftDisk::open(&dir, crate::now_ms(), segment_bytes)?;
    let mut entries = entries_after(&mut raft_disk, loaded.as_ref().map(|l| l.snapshot.id))?;
    let mut image = MetadataImage::new(cluster_id.to_owned(), -1);
    let applied = loaded.as_ref().map_or(0, |l| l.snapshot.id.end_offset);
    if let Some(l) = &loaded {
        apply_all(&mut image, &l.checkpoint.records, applied);
        images.send_replace(Arc::new(image.clone()));
    }
    let dynamic = config.is_dynamic_quorum();
    // A static voter has no directory id (Kafka's NO_DIRECTORY_ID); a dynamic one is
    // known by the directory its metadata log was formatted in (KIP-853).
    let me = ReplicaKey {
        id: NodeId(config.node_id),
        directory_id: if dynamic {
            membership::directory_id(config, cluster_id)
        } else {
            Uuid::nil()
        },
    };
    let my_endpoint = membership::controller_endpoint(config);
    let t = config.quorum;
    let request_timeout_ms = u64::try_from(t.request_timeout_ms).unwrap_or(2000);
    let request_timeout = Duration::from_millis(request_timeout_ms);
    if dynamic
        && quorum.epoch == 0
        && loaded.is_none()
        && entries.is_empty()
        && let Some(endpoint) = &my_endpoint
        && membership::is_founder(config, endpoint)
        && !membership::quorum_exists(config, endpoint, cluster_id, request_timeout, &security)
            .await
    {
        // KIP-853's `format --standalone`: this node is the first voter.
        let founding = Entry {
            epoch: 0,
            payload: RaftPayload::Voters(VoterSet {
                keys: vec![me],
                endpoints: [(me.id, endpoint.clone())].into(),
            }),
        };
        raft_disk.append(0, std::slice::from_ref(&founding), crate::now_ms())?;
        entries.push(founding);
        tracing::info!(
            node_id = config.node_id,
            directory_id = %me.directory_id,
            endpoint = %format!("{}:{}", endpoint.host, endpoint.port),
            "founded the dynamic metadata quorum as its first voter (the first of controller.quorum.bootstrap.servers)"
        );
    }
    // A node with no quorum configured (the zero-configuration node) is the only voter of
    // its own, with no controller listener: nobody else ever asks it.
    let voters = if config.quorum_voters.is_empty() && !dynamic {
        vec![me]
    } else {
        config
            .quorum_voters
            .iter()
            .map(|v| ReplicaKey {
                id: NodeId(v.id),
                directory_id: Uuid::nil(),
            })
            .collect()
    };
    let mut raft_config = RaftConfig::new(voters);
    let mut addresses: HashMap<NodeId, (String, u16)> = config
        .quorum_voters
        .iter()
        .map(|v| (NodeId(v.id), (v.host.clone(), v.port)))
        .collect();
    if dynamic {
        for (i, (host, port)) in config.quorum_bootstrap_servers.iter().enumerate() {
            // Asking itself where the leader is would only cost a discovery round.
            if my_endpoint
                .as_ref()
                .is_some_and(|me| membership::is_this_node(me, host, *port))
            {
                continue;
            }
            raft_config.bootstrap.push(membership::bootstrap_id(i));
            addresses.insert(membership::bootstrap_id(i), (host.clone(), *port));
        }
    }
    raft_config.election_timeout_ms = u64::try_from(t.election_timeout_ms).unwrap_or(1000);
    raft_config.fetch_timeout_ms = u64::try_from(t.fetch_timeout_ms).unwrap_or(2000);
    raft_config.election_backoff_max_ms = u64::try_from(t.election_backoff_max_ms).unwrap_or(1000);
    raft_config.request_timeout_ms = request_timeout_ms;
    // The core's leader does not park an empty Fetch (Kafka's waits up to 500 ms and answers
    // on the next append), so an idle follower asks again after this pause instead; every
    // metadata write waits for the followers' next fetch to commit. 50 ms keeps a write's
    // commit near that of a parked fetch at twenty small requests a second per follower.
    raft_config.fetch_max_wait_ms = 50;
    raft_config.retry_backoff_ms = u64::try_from(t.retry_backoff_ms).unwrap_or(20).max(20);
    let retry_backoff = Duration::from_millis(raft_config.retry_backoff_ms);
    let seed = Uuid::new_v4().as_u64_pair().0;
    let node = RaftNode::new(
        raft_config,
        me,
        quorum,
        RaftLog::new(loaded.map(|l| l.snapshot), entries),
        0,
        seed,
    );
    tracing::info!(
        node_id = config.node_id,
        epoch = node.epoch(),
        snapshot_end_offset = applied,
        log_end_offset = raft_disk.log_end_offset(),
        voters = node.voters().len(),
        dynamic,
        "metadata quorum starting"
    );
    let (status, status_rx) = watch::channel(QuorumStatus {
        role: node.role(),
        epoch: node.epoch(),
        leader: node.leader(),
        high_watermark: node.high_watermark(),
        log_end_offset: raft_disk.log_end_offset(),
        applied_offset: applied,
    });
    let cluster_id: Arc<str> = Arc::from(cluster_id);
    let addresses: Addresses = Arc::new(RwLock::new(addresses));
    let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
    let listener_name = my_endpoint.as_ref().map_or_else(
        || {
            config
                .controller_listener_names
                .first()
                .cloned()
                .unwrap_or_default()
        },
        |e| e.name.clone(),
    );
    let auto_join = (dynamic && config.quorum_auto_join && config.process_roles.controller)
        .then_some(my_endpoint)
        .flatten();
    let mut driver = Driver {
        node,
        state_store,
        disk: raft_disk,
        peers: HashMap::new(),
        links: PeerLinks {
            my_id: config.node_id,
            cluster_id: Arc::clone(&cluster_id),
            commands: tx.clone(),
            request_timeout,
            retry_backoff,
            runtime: tokio::runtime::Handle::current(),
            security: security.clone(),
        },
        addresses: Arc::clone(&addresses),
        voter_endpoints: None,
        auto_join,
        listener_name,
        next_join_at: Instant::now(),
        status,
        started: Instant::now(),
        started_wall_ms: u64::try_from(crate::now_ms()).unwrap_or(0),
        image,
        applied,
        images,
        pending: std::collections::BTreeMap::new(),
        proposing: None,
        changing: None,
        dir,
        snapshot_policy: SnapshotPolicy {
            max_bytes: u64::try_from(config.metadata_log_max_record_bytes_between_snapshots)
                .unwrap_or(u64::MAX),
            interval: u64::try_from(config.metadata_log_max_snapshot_interval_ms)
                .ok()
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis),
        },
        bytes_since_snapshot: 0,
        last_snapshot_at: Instant::now(),
        unreleased: None,
    };
    driver.refresh_addresses();
    // The driver runs on a thread of its own, as Kafka's `KafkaRaftClientDriver` does: each
    // step's writes and fsyncs block that thread only, never a worker of the runtime that
    // serves clients, and no client request can starve the driver of its thread. Its peer
    // connections run on the serving runtime, so an fsync never holds up their sends.
    std::thread::Builder::new()
        .name("metadata-quorum".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(driver.run(rx)),
                Err(e) => tracing::error!(error = %e, "metadata quorum not started: no runtime"),
            }
        })
        .map_err(QuorumError::Thread)?;
    Ok(QuorumHandle {
        tx,
        status: status_rx,
        cluster_id,
        addresses,
    })
}

/// What a connection task to a peer is started with.
struct PeerLinks {
    /// This node's id, in the client id of its requests.
    my_id: i32,
    /// Sent in every request.
    cluster_id: Arc<str>,
    /// Where the peers' answers go.
    commands: mpsc::Sender<Command>,
    /// `controller.quorum.request.timeout.ms`.
    request_timeout: Duration,
    /// `controller.quorum.retry.backoff.ms`.
    retry_backoff: Duration,
    /// The runtime that serves clients, where the peer connections run (the driver's own
    /// thread blocks on its fsyncs).
    runtime: tokio::runtime::Handle,
    /// How connections to the other voters are secured (the controller route).
    security: Arc<crate::security::peer::PeerSecurity>,
}

/// The inbound request a step answers: its sender, its API (and version), and where the
/// answer goes.
type Awaiting = (
    NodeId,
    Option<(strata_protocol::messages::ApiKey, i16)>,
    oneshot::Sender<Message>,
);

/// The task that owns the core.
struct Driver {
    /// The core.
    node: RaftNode,
    /// `quorum-state`, written before anything that depends on it.
    state_store: QuorumStateStore,
    /// The durable log the core mirrors.
    disk: disk::RaftDisk,
    /// Outbound queues, one per node messaged so far, with the address each connects to.
    peers: HashMap<NodeId, ((String, u16), mpsc::Sender<Message>)>,
    /// What a new peer task is started with.
    links: PeerLinks,
    /// Where nodes are; shared with the handles.
    addresses: Addresses,
    /// The voter set whose endpoints are in `addresses`, to notice a new one.
    voter_endpoints: Option<VoterSet>,
    /// KIP-853 auto-join: this node's controller endpoint, when it is to ask to become a
    /// voter of a dynamic quorum.
    auto_join: Option<Endpoint>,
    /// The controller listener's name, under which static voters' endpoints are listed.
    listener_name: String,
    /// When it may ask next.
    next_join_at: Instant,
    /// Shared with the handles.
    status: watch::Sender<QuorumStatus>,
    /// The origin of the core's clock.
    started: Instant,
    /// The wall clock (ms since the epoch) at `started`.
    started_wall_ms: u64,
    /// The committed metadata, as of `applied`.
    image: MetadataImage,
    /// Every entry below this offset is applied to `image`.
    applied: i64,
    /// Where `image` is published after each commit.
    images: tokio::sync::watch::Sender<Arc<MetadataImage>>,
    /// Proposals waiting to commit: offset → (epoch, answer).
    pending: std::collections::BTreeMap<i64, (i32, ProposalReply)>,
    /// The answer to the proposal being stepped, until the core says where it went.
    proposing: Option<ProposalReply>,
    /// The answer to the voter change being stepped, likewise.
    changing: Option<oneshot::Sender<Result<(i64, i32), VoterChangeError>>>,
    /// `__cluster_metadata-0`, where the snapshot files live.
    dir: PathBuf,
    /// When to take a snapshot.
    snapshot_policy: SnapshotPolicy,
    /// Bytes of entries applied since the latest snapshot (or since start): the size
    /// trigger.
    bytes_since_snapshot: u64,
    /// When the latest snapshot was taken or installed (or the driver started): the time
    /// trigger.
    last_snapshot_at: Instant,
    /// The latest snapshot taken, `(end offset, bytes)`, not yet handed to the core. The
    /// core gets a snapshot only once the next one is taken, and then drops the entries
    /// below it at once; so the log keeps one snapshot interval of entries below the
    /// latest snapshot, and a follower lagging by less than that catches up by Fetch
    /// instead of downloading a snapshot (Kafka keeps its log for
    /// `metadata.max.retention.*` for the same reason).
    unreleased: Option<(i64, bytes::Bytes)>,
}

impl Driver {
    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        loop {
            let deadline = self.started + Duration::from_millis(self.node.next_deadline());
            let command = tokio::select! {
                c = rx.recv() => match c {
                    Some(c) => Some(c),
                    None => return,
                },
                () = tokio::time::sleep_until(deadline.into()) => None,
            };
            let result = match command {
                None => self.step(Input::Tick, None),
                Some(Command::Request { from, msg, reply }) => {
                    let api = wire::request_api(&msg);
                    self.step(Input::Message { from, msg }, Some((from, api, reply)))
                }
                Some(Command::Response { from, msg }) => {
                    self.step(Input::Message { from, msg }, None)
                }
                Some(Command::Unreachable { to }) => self.step(Input::Unreachable(to), None),
                Some(Command::Learned { endpoints }) => {
                    // Only for nodes not known otherwise: where this node's configuration
                    // or the voter set says a node is wins over what the node says of
                    // itself (a static voter may be reached through a proxy, say).
                    let mut addresses = self.addresses.write().unwrap_or_else(|e| e.into_inner());
                    for (id, host, port) in endpoints {
                        addresses.entry(id).or_insert((host, port));
                    }
                    Ok(())
                }
                Some(Command::Describe { reply }) => {
                    let _ = reply.send((self.describe(), self.voter_nodes()));
                    Ok(())
                }
                Some(Command::ChangeVoters { change, reply }) => {
                    self.changing = Some(reply);
                    let result = self.step(change, None);
                    if let Some(reply) = self.changing.take() {
                        let _ = reply.send(Err(VoterChangeError::NotLeader));
                    }
                    result
                }
                Some(Command::Resign { done }) => {
                    let result = self.step(Input::Resign, None);
                    let _ = done.send(());
                    result
                }
                Some(Command::Propose { data, reply }) => {
                    self.proposing = Some(reply);
                    let result = self.step(Input::Propose(vec![data]), None);
                    if let Some(reply) = self.proposing.take() {
                        let _ = reply.send(Err(MetadataError::NotController));
                    }
                    result
                }
            };
            if let Err(e) = result {
                // A write that failed leaves the disk and the core apart: stop taking part
                // rather than vote or acknowledge on a promise the disk does not keep.
                tracing::error!(error = %e, "metadata quorum stopped: the disk failed");
                return;
            }
        }
    }

    /// One step of the core, its actions carried out in order.
    fn step(&mut self, input: Input, mut reply: Option<Awaiting>) -> Result<(), QuorumError> {
        let now = self.now();
        let actions = self.node.step(now, input);
        for action in actions {
            self.carry_out(action, &mut reply)?;
        }
        self.maybe_snapshot()?;
        self.refresh_addresses();
        self.maybe_join();
        self.report_status();
        Ok(())
    }

    /// Sends the status, if it changed: after every step, and after entries are applied
    /// and before their proposers hear back, so that a proposer's next operation sees the
    /// log end its entry made (the controller computes each operation for that offset).
    fn report_status(&self) {
        let status = QuorumStatus {
            role: self.node.role(),
            epoch: self.node.epoch(),
            leader: self.node.leader(),
            high_watermark: self.node.high_watermark(),
            log_end_offset: self.disk.log_end_offset(),
            applied_offset: self.applied,
        };
        // Wakes whoever waits for this node to be ready to lead, only when it changed.
        self.status
            .send_if_modified(|s| std::mem::replace(s, status) != status);
    }

    fn carry_out(
        &mut self,
        action: Action,
        reply: &mut Option<Awaiting>,
    ) -> Result<(), QuorumError> {
        match action {
            Action::PersistQuorumState(q) => {
                let file: strata_kraft::quorum_state::QuorumStateData = (&q).into();
                self.state_store.write(&file)?;
            }
            Action::AppendToLog {
                base_offset,
                entries,
            } => {
                let now_ms = crate::now_ms();
                self.disk.append(base_offset, &entries, now_ms)?;
            }
            Action::TruncateLog { end_offset } => {
                self.disk.truncate(end_offset)?;
                // Proposals at or past the cut are gone: their leadership ended.
                for (_, (_, reply)) in self.pending.split_off(&end_offset) {
                    let _ = reply.send(Err(MetadataError::NotController));
                }
            }
            Action::Send { to, msg } => {
                if wire::request_api(&msg).is_none() {
                    // A response: it answers the request this step was fed, if any.
                    match reply.take() {
                        Some((from, api, tx)) if from == to && wire::response_api(&msg) == api => {
                            let _ = tx.send(msg);
                        }
                        other => {
                            *reply = other;
                            tracing::debug!(to = to.0, "dropping an unsolicited response");
                        }
                    }
                } else if let Some(peer) = self.peer(to) {
                    // A full queue means the peer is unreachable; the core retries.
                    let _ = peer.try_send(msg);
                }
            }
            Action::CommitTo { high_watermark } => {
                tracing::debug!(high_watermark, "metadata committed");
                self.apply_committed(high_watermark);
            }
            Action::RoleChanged {
                role,
                epoch,
                leader,
            } => {
                tracing::info!(
                    ?role,
                    epoch,
                    leader = leader.map(|l| l.0),
                    "metadata quorum role changed"
                );
                if role != RoleKind::Leader {
                    // Whether they commit is now up to another leader; the callers retry.
                    for (_, (_, reply)) in std::mem::take(&mut self.pending) {
                        let _ = reply.send(Err(MetadataError::NotController));
                    }
                }
                // Clients learn the new controller from the image's controller id.
                self.image.controller_id = leader.map_or(-1, |l| l.0);
                self.publish();
            }
            Action::PersistSnapshot(s) => {
                // The driver wrote it when it took it (see `unreleased`), unless pruned since.
                if !self.dir.join(snapshot::file_name(s.id)).is_file() {
                    snapshot::write(&self.dir, &s)?;
                    snapshot::prune(&self.dir, SNAPSHOTS_KEPT);
                }
            }
            Action::DeleteLogBefore { offset } => {
                let deleted = self.disk.delete_before(offset)?;
                tracing::debug!(
                    offset,
                    deleted,
                    "metadata log segments deleted below the snapshot"
                );
            }
            Action::InstallSnapshot(s) => self.install(&s)?,
            Action::Proposed {
                epoch, base_offset, ..
            } => {
                if let Some(reply) = self.proposing.take() {
                    self.pending.insert(base_offset, (epoch, reply));
                } else if let Some(reply) = self.changing.take() {
                    let _ = reply.send(Ok((base_offset, epoch)));
                }
            }
            Action::NotLeader { .. } => {
                if let Some(reply) = self.proposing.take() {
                    let _ = reply.send(Err(MetadataError::NotController));
                }
            }
            Action::VoterChangeRejected(e) => {
                if let Some(reply) = self.changing.take() {
                    let _ = reply.send(Err(e));
                }
            }
        }
        Ok(())
    }
}

impl Driver {
    /// The outbound queue to `to`, started on first use, and started again when the node's
    /// address changed (a voter re-added with another endpoint). `None` while its address
    /// is unknown: the message is dropped and the core sends again on its timers.
    fn peer(&mut self, to: NodeId) -> Option<&mpsc::Sender<Message>> {
        let addr = self
            .addresses
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&to)
            .cloned()?;
        let stale = self.peers.get(&to).is_none_or(|(a, _)| *a != addr);
        if stale {
            let queue = peer::spawn(to, format!("{}:{}", addr.0, addr.1), &self.links);
            self.peers.insert(to, (addr, queue));
        }
        self.peers.get(&to).map(|(_, q)| q)
    }

    /// Puts the endpoints of the voter set in force into `addresses` when it changed.
    fn refresh_addresses(&mut self) {
        let set = self.node.voter_set();
        if set == self.voter_endpoints.as_ref() {
            return;
        }
        if let Some(set) = set {
            let mut addresses = self.addresses.write().unwrap_or_else(|e| e.into_inner());
            for (id, e) in &set.endpoints {
                addresses.insert(*id, (e.host.clone(), e.port));
            }
        }
        self.voter_endpoints = set.cloned();
    }

    /// The leader's DescribeQuorum, its fetch times on the wall clock as Kafka reports them
    /// (the core's clock counts from the driver's start).
    fn describe(&self) -> Option<QuorumDescription> {
        let mut d = self.node.describe_quorum(self.now())?;
        let wall = |t: &mut Option<u64>| {
            *t = t.map(|t| self.started_wall_ms.saturating_add(t));
        };
        for r in d.voters.iter_mut().chain(d.observers.iter_mut()) {
            wall(&mut r.last_fetch_ms);
            wall(&mut r.last_caught_up_ms);
        }
        Some(d)
    }

    /// The voters with their endpoints, for DescribeQuorum v2's `Nodes`: from the voter
    /// set, else (static voters) `addresses` under this node's controller listener name.
    fn voter_nodes(&self) -> Vec<(NodeId, Endpoint)> {
        let set = self.node.voter_set();
        let addresses = self.addresses.read().unwrap_or_else(|e| e.into_inner());
        let name = &self.listener_name;
        self.node
            .voters()
            .iter()
            .filter_map(|v| {
                let endpoint = set
                    .and_then(|s| s.endpoints.get(&v.id))
                    .cloned()
                    .or_else(|| {
                        addresses.get(&v.id).map(|(host, port)| Endpoint {
                            name: name.clone(),
                            host: host.clone(),
                            port: *port,
                        })
                    })?;
                Some((v.id, endpoint))
            })
            .collect()
    }

    /// KIP-853 auto-join: a controller that follows a leader as an observer and has caught
    /// up asks the leader to add it, about once a second (see [`membership`]).
    fn maybe_join(&mut self) {
        let Some(endpoint) = &self.auto_join else {
            return;
        };
        let me = self.node.key();
        let (RoleKind::Follower, Some(leader)) = (self.node.role(), self.node.leader()) else {
            return;
        };
        let hw = self.node.high_watermark();
        if self.node.is_voter()
            || hw == 0
            || self.disk.log_end_offset() < hw
            || Instant::now() < self.next_join_at
        {
            return;
        }
        let Some((host, port)) = self
            .addresses
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&leader)
            .cloned()
        else {
            return;
        };
        self.next_join_at = Instant::now() + Duration::from_secs(1);
        let stale = self
            .node
            .voters()
            .iter()
            .find(|v| v.id == me.id && v.directory_id != me.directory_id)
            .copied();
        self.links.runtime.spawn(membership::join(
            format!("{host}:{port}"),
            self.links.cluster_id.to_string(),
            me,
            endpoint.clone(),
            stale,
            self.links.request_timeout,
            self.links.security.clone(),
        ));
    }

    /// Applies every committed entry not applied yet to the image, publishes it, and
    /// answers the proposals that committed. An entry that does not decode or apply is
    /// logged and skipped: every node skips it alike, since they all apply the same bytes.
    fn apply_committed(&mut self, high_watermark: i64) {
        let start = self.applied.max(self.node.log().start_offset());
        if high_watermark <= start {
            return;
        }
        let count = usize::try_from(high_watermark - start).unwrap_or(usize::MAX);
        let entries = self.node.log().read(start, count);
        let mut offset = start;
        let mut epochs = Vec::with_capacity(entries.len());
        for entry in &entries {
            if let Payload::Data(data) = &entry.payload {
                self.bytes_since_snapshot += data.len() as u64;
                match decode_entry(data) {
                    Ok(records) => {
                        for record in &records {
                            if let Err(e) = self.image.apply(record) {
                                tracing::error!(offset, error = %e, "cannot apply a committed metadata record");
                            }
                        }
                    }
                    Err(e) => {
                        tracing::error!(offset, error = %e, "cannot decode a committed metadata entry")
                    }
                }
            }
            epochs.push((offset, entry.epoch));
            offset += 1;
        }
        self.applied = offset;
        if let Some(leader) = self.node.leader() {
            self.image.controller_id = leader.0;
        }
        self.publish();
        self.report_status();
        for (offset, epoch) in epochs {
            if let Some((want, reply)) = self.pending.remove(&offset) {
                let result = if want == epoch {
                    Ok(offset)
                } else {
                    Err(MetadataError::NotController)
                };
                let _ = reply.send(result);
            }
        }
    }

    fn publish(&self) {
        self.images.send_replace(Arc::new(self.image.clone()));
    }
}
