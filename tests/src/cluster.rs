//! A cluster of real `strata` processes on 127.0.0.1 for the multi-node tests.
//!
//! [`Cluster::start`] writes one `server.properties` per node (`process.roles=broker,controller`,
//! a PLAINTEXT and a CONTROLLER listener on free ports, `controller.quorum.voters` naming every
//! node, its own `log.dirs` in the cluster's temporary directory, plus the test's settings) and
//! spawns the nodes. Each [`Node`] can be killed with SIGKILL, stopped with SIGTERM and
//! restarted on the same ports and data directory; its stdout and stderr go to a file that the
//! cluster prints (the tail of each) when a test fails.
//!
//! Metadata is read with a hand-built Metadata v1 request ([`metadata`]), independent of
//! Strata's codec and of librdkafka's cache: brokers, controller id, and each partition's
//! leader, replicas and ISR; [`cluster_id`] asks Metadata v2 for the cluster id, and
//! [`elect_leaders_raw`] sends an ElectLeaders v1; [`describe_quorum`] sends a DescribeQuorum
//! v0 to a controller listener. Every wait is bounded ([`crate::wait_until`]).
//!
//! [`Cluster::start_dedicated`] starts dedicated controllers and dedicated brokers instead
//! of combined nodes.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, read_tail, strata_bin, wait_until};
use anyhow::{Context, bail, ensure};

/// The cluster id every node is formatted with.
pub const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";

/// How long [`Node::stop`] waits for the process to exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the waits poll.
pub const POLL: Duration = Duration::from_millis(100);

/// One node of the cluster: its config file, ports, data directory and process.
pub struct Node {
    pub id: i32,
    pub config: PathBuf,
    /// The PLAINTEXT (client) listener's port.
    pub port: u16,
    /// The CONTROLLER listener's port (0 on a dedicated broker, which has none).
    pub controller_port: u16,
    /// `log.dirs`.
    pub data_dir: PathBuf,
    /// stdout and stderr of every run, appended.
    pub stderr: PathBuf,
    child: Option<Child>,
}

impl Node {
    /// Node `id` of a cluster in `dir`, not started: writes its `server.properties` there
    /// (`config`, then `settings` as `key=value` lines). Its `log.dirs` is `dir/node<id>`,
    /// which `config` must name.
    ///
    /// # Panics
    ///
    /// If the file cannot be written.
    fn write(
        dir: &Path,
        id: i32,
        port: u16,
        controller_port: u16,
        mut config: String,
        settings: &[(&str, &str)],
    ) -> Node {
        for (k, v) in settings {
            config.push_str(&format!("{k}={v}\n"));
        }
        let path = dir.join(format!("node{id}.properties"));
        std::fs::write(&path, config).expect("write the node's config");
        Node {
            id,
            config: path,
            port,
            controller_port,
            data_dir: Self::data_dir_in(dir, id),
            stderr: dir.join(format!("node{id}.log")),
            child: None,
        }
    }

    /// Appends `settings` to its config file, to take effect at its next start.
    ///
    /// # Panics
    ///
    /// If the file cannot be written.
    fn append_settings(&self, settings: &[(String, String)]) {
        let text: String = settings.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let mut f = File::options()
            .append(true)
            .open(&self.config)
            .expect("open the node's config");
        f.write_all(text.as_bytes())
            .expect("append to the node's config");
    }

    /// Where node `id` of a cluster in `dir` keeps its data.
    fn data_dir_in(dir: &Path, id: i32) -> PathBuf {
        dir.join(format!("node{id}"))
    }

    /// Starts the process (appending its output to [`Node::stderr`]).
    ///
    /// # Panics
    ///
    /// If it is already running or cannot be spawned.
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "node {} is already running", self.id);
        let out = File::options()
            .create(true)
            .append(true)
            .open(&self.stderr)
            .expect("open the node's log");
        let child = Command::new(strata_bin())
            .arg(&self.config)
            .env("NO_COLOR", "1")
            // The caller's RUST_LOG, to look closer at a failure; else info.
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup the node's log"))
            .stderr(out)
            .spawn()
            .expect("spawn strata (build it with `cargo build --release --bin strata`)");
        self.child = Some(child);
    }

    /// SIGKILL and reap; nothing if it is not running.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits at most `bound` for the exit: its status and how long it took, or
    /// an error (after a SIGKILL) if it did not exit in time.
    ///
    /// # Errors
    ///
    /// If it is not running, the signal cannot be sent or it does not exit within `bound`.
    pub fn stop(&mut self, bound: Duration) -> anyhow::Result<(ExitStatus, Duration)> {
        let Some(mut c) = self.child.take() else {
            bail!("node {} is not running", self.id);
        };
        let start = Instant::now();
        let sent = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if !sent {
            let _ = c.kill();
            let _ = c.wait();
            bail!("could not send SIGTERM to node {}", self.id);
        }
        while start.elapsed() < bound {
            if let Some(status) = c.try_wait()? {
                return Ok((status, start.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        bail!("node {} did not exit within {bound:?} of SIGTERM", self.id)
    }

    /// Starts it again after [`Node::kill9`] or [`Node::stop`]: same config, ports and data.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// Whether the process is still running (reaps it if it exited).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The process id while it runs (for SIGSTOP and SIGCONT).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `127.0.0.1:<client port>`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The last `max` bytes of its output.
    pub fn read_tail(&self, max: u64) -> String {
        read_tail(&self.stderr, max)
    }

    /// Its Metadata for every topic (see [`metadata`]).
    ///
    /// # Errors
    ///
    /// If it does not answer or the answer does not parse.
    pub fn metadata(&self) -> anyhow::Result<Metadata> {
        metadata(self.port)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// N combined nodes (broker and controller) forming one cluster; prints every node's log
/// tail when the test panics.
pub struct Cluster {
    pub nodes: Vec<Node>,
    /// Holds the config files, data directories and logs.
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Writes the config of `n` nodes (ids 1..=n) with `settings` appended to each, and
    /// starts them all.
    ///
    /// # Panics
    ///
    /// If a file cannot be written or a process spawned.
    pub fn start(n: usize, settings: &[(&str, &str)]) -> Cluster {
        Cluster::start_with_cluster_id(n, settings, Some(CLUSTER_ID))
    }

    /// [`Cluster::start`] with `cluster.id` set to `cluster_id`, or left out of every
    /// node's config for `None` (the nodes then derive one from their voter set).
    ///
    /// # Panics
    ///
    /// If a file cannot be written or a process spawned.
    pub fn start_with_cluster_id(
        n: usize,
        settings: &[(&str, &str)],
        cluster_id: Option<&str>,
    ) -> Cluster {
        Cluster::start_combined(n, settings, cluster_id, false, |_| Vec::new())
    }

    /// `n` combined nodes of a dynamic quorum (KIP-853): `controller.quorum.bootstrap.servers`
    /// names every controller listener (node 1's first, so node 1 founds the quorum),
    /// `controller.quorum.auto.join.enable=true`, no `controller.quorum.voters` and no
    /// `cluster.id`.
    ///
    /// # Panics
    ///
    /// If a file cannot be written or a process spawned.
    pub fn start_dynamic(n: usize, settings: &[(&str, &str)]) -> Cluster {
        Cluster::start_combined(n, settings, None, true, |_| Vec::new())
    }

    /// Adds a dedicated broker (`process.roles=broker`) with node id `id` to a cluster from
    /// [`Cluster::start_dynamic`], naming the same bootstrap servers, and starts it: it
    /// follows the quorum as an observer and registers with the active controller.
    ///
    /// # Panics
    ///
    /// If its file cannot be written or the process spawned.
    pub fn add_dynamic_broker(&mut self, id: i32) {
        let servers = self
            .nodes
            .iter()
            .filter(|n| n.controller_port != 0)
            .map(|n| format!("127.0.0.1:{}", n.controller_port))
            .collect::<Vec<_>>()
            .join(",");
        let port = free_port().unwrap();
        let text = format!(
            "process.roles=broker\n\
             node.id={id}\n\
             listeners=PLAINTEXT://127.0.0.1:{port}\n\
             controller.listener.names=CONTROLLER\n\
             controller.quorum.bootstrap.servers={servers}\n\
             log.dirs={}\n",
            Node::data_dir_in(self.dir.path(), id).display()
        );
        let mut node = Node::write(self.dir.path(), id, port, 0, text, &[]);
        node.spawn();
        self.nodes.push(node);
    }

    /// `n` combined nodes, `cluster_id` as in [`Cluster::start_with_cluster_id`], node `id`'s
    /// config ending with `settings` and then `node_settings(id)`.
    fn start_combined(
        n: usize,
        settings: &[(&str, &str)],
        cluster_id: Option<&str>,
        dynamic: bool,
        node_settings: impl Fn(i32) -> Vec<(String, String)>,
    ) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let ports: Vec<(u16, u16)> = (0..n)
            .map(|_| (free_port().unwrap(), free_port().unwrap()))
            .collect();
        let quorum = if dynamic {
            let servers = ports
                .iter()
                .map(|(_, c)| format!("127.0.0.1:{c}"))
                .collect::<Vec<_>>()
                .join(",");
            format!(
                "controller.quorum.bootstrap.servers={servers}
                 controller.quorum.auto.join.enable=true"
            )
        } else {
            let voters = ports
                .iter()
                .enumerate()
                .map(|(i, (_, c))| format!("{}@127.0.0.1:{c}", i + 1))
                .collect::<Vec<_>>()
                .join(",");
            format!("controller.quorum.voters={voters}")
        };
        let mut nodes = Vec::new();
        for (i, &(port, controller_port)) in ports.iter().enumerate() {
            let id = i32::try_from(i).unwrap() + 1;
            let data_dir = Node::data_dir_in(dir.path(), id);
            let mut text = format!(
                "process.roles=broker,controller\n\
                 node.id={id}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 {quorum}\n\
                 log.dirs={}\n",
                data_dir.display()
            );
            if let Some(cluster_id) = cluster_id {
                text.push_str(&format!("cluster.id={cluster_id}\n"));
            }
            let node = Node::write(dir.path(), id, port, controller_port, text, settings);
            node.append_settings(&node_settings(id));
            nodes.push(node);
        }
        for n in &mut nodes {
            n.spawn();
        }
        Cluster { nodes, dir }
    }

    /// `controllers` dedicated controllers (ids `1..=controllers`, `process.roles=controller`,
    /// a CONTROLLER listener only) and `brokers` dedicated brokers (the next ids,
    /// `process.roles=broker`, a PLAINTEXT listener, `controller.listener.names=CONTROLLER`),
    /// all naming the controllers in `controller.quorum.voters`, with `settings` appended to
    /// each, and no `cluster.id` (every node derives it from the voters). A controller has no
    /// client listener: its `port` is its controller port.
    ///
    /// # Panics
    ///
    /// If a file cannot be written or a process spawned.
    pub fn start_dedicated(
        controllers: usize,
        brokers: usize,
        settings: &[(&str, &str)],
    ) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let controller_ports: Vec<u16> = (0..controllers).map(|_| free_port().unwrap()).collect();
        let voters = controller_ports
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}@127.0.0.1:{c}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for i in 0..controllers + brokers {
            let id = i32::try_from(i).unwrap() + 1;
            let data_dir = Node::data_dir_in(dir.path(), id);
            let (port, controller_port, roles_and_listeners) = match controller_ports.get(i) {
                Some(&c) => (
                    c,
                    c,
                    format!("process.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{c}\n"),
                ),
                None => {
                    let p = free_port().unwrap();
                    (
                        p,
                        0,
                        format!(
                            "process.roles=broker\nlisteners=PLAINTEXT://127.0.0.1:{p}\n\
                             advertised.listeners=PLAINTEXT://127.0.0.1:{p}\n"
                        ),
                    )
                }
            };
            let text = format!(
                "{roles_and_listeners}node.id={id}\n\
                 controller.listener.names=CONTROLLER\n\
                 controller.quorum.voters={voters}\n\
                 log.dirs={}\n",
                data_dir.display()
            );
            nodes.push(Node::write(
                dir.path(),
                id,
                port,
                controller_port,
                text,
                settings,
            ));
        }
        for n in &mut nodes {
            n.spawn();
        }
        Cluster { nodes, dir }
    }

    /// [`Cluster::start`] with settings of each node's own as well: `node_settings(id)` is
    /// appended to node `id`'s config after `settings` (a `broker.rack`, a
    /// `metrics.listener` port...).
    ///
    /// # Panics
    ///
    /// If a file cannot be written or a process spawned.
    pub fn start_with_node_settings(
        n: usize,
        settings: &[(&str, &str)],
        node_settings: impl Fn(i32) -> Vec<(String, String)>,
    ) -> Cluster {
        Cluster::start_combined(n, settings, Some(CLUSTER_ID), false, node_settings)
    }

    /// The node with id `id`.
    ///
    /// # Panics
    ///
    /// If there is none.
    pub fn node(&mut self, id: i32) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// The ids of the nodes.
    pub fn ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// A bootstrap list of the nodes in `ids`.
    pub fn bootstrap(&self, ids: &[i32]) -> String {
        self.nodes
            .iter()
            .filter(|n| ids.contains(&n.id))
            .map(Node::bootstrap)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Metadata from node `id`.
    ///
    /// # Errors
    ///
    /// If it does not answer or the answer does not parse.
    pub fn metadata(&self, id: i32) -> anyhow::Result<Metadata> {
        let node = self
            .nodes
            .iter()
            .find(|n| n.id == id)
            .with_context(|| format!("no node {id}"))?;
        node.metadata()
    }

    /// Waits (at most `timeout`) until every node in `ids` names the same controller in its
    /// Metadata, one of `ids`; returns the controller id.
    ///
    /// # Errors
    ///
    /// On timeout, with the last answers.
    pub fn wait_controller(&self, ids: &[i32], timeout: Duration) -> anyhow::Result<i32> {
        let mut last: Vec<(i32, Option<i32>)> = Vec::new();
        let r = wait_until("an agreed controller", timeout, POLL, || {
            last = ids
                .iter()
                .map(|&id| (id, self.metadata(id).ok().map(|m| m.controller_id)))
                .collect();
            let first = last[0].1;
            Ok(first.is_some_and(|c| ids.contains(&c)) && last.iter().all(|(_, c)| *c == first))
        });
        r.with_context(|| format!("last (node, controller id) answers {last:?}"))?;
        Ok(last[0].1.expect("agreed"))
    }

    /// Waits (at most `timeout` for each) until every node names one controller and lists
    /// every node as a live broker; returns the controller's id.
    ///
    /// # Panics
    ///
    /// On timeout, with the last answers.
    pub fn wait_ready(&self, timeout: Duration) -> i32 {
        let ids = self.ids();
        let controller = self
            .wait_controller(&ids, timeout)
            .unwrap_or_else(|e| panic!("{e:?}"));
        self.wait_brokers(&ids, &ids, timeout)
            .unwrap_or_else(|e| panic!("{e:?}"));
        controller
    }

    /// Node `id`'s client port.
    ///
    /// # Panics
    ///
    /// If there is no node `id`.
    pub fn port(&self, id: i32) -> u16 {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id}"))
            .port
    }

    /// Waits (at most `timeout`) until every node in `ids` lists exactly `brokers` as its live
    /// brokers.
    ///
    /// # Errors
    ///
    /// On timeout, with the last answers.
    pub fn wait_brokers(
        &self,
        ids: &[i32],
        brokers: &[i32],
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let mut want = brokers.to_vec();
        want.sort_unstable();
        let mut last: Vec<(i32, Option<Vec<i32>>)> = Vec::new();
        let r = wait_until("the live brokers", timeout, POLL, || {
            last = ids
                .iter()
                .map(|&id| (id, self.metadata(id).ok().map(|m| m.brokers())))
                .collect();
            Ok(last.iter().all(|(_, b)| b.as_ref() == Some(&want)))
        });
        r.with_context(|| format!("want {want:?}; last (node, brokers) answers {last:?}"))
    }

    /// Waits (at most `timeout`) until node `id`'s Metadata satisfies `cond`; returns it.
    ///
    /// # Errors
    ///
    /// On timeout, with the last answer.
    pub fn wait_metadata(
        &self,
        id: i32,
        what: &str,
        timeout: Duration,
        mut cond: impl FnMut(&Metadata) -> bool,
    ) -> anyhow::Result<Metadata> {
        let mut last = None;
        let r = wait_until(what, timeout, POLL, || {
            let m = self.metadata(id)?;
            let ok = cond(&m);
            last = Some(m);
            Ok(ok)
        });
        r.with_context(|| format!("node {id}'s last Metadata: {last:#?}"))?;
        Ok(last.expect("set when the condition held"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for n in &self.nodes {
                eprintln!(
                    "--- node {} ({}) ---\n{}",
                    n.id,
                    n.stderr.display(),
                    n.read_tail(8 * 1024)
                );
            }
        }
    }
}

/// One partition as Metadata reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub error: i16,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// A Metadata v1 answer: the live brokers, the controller and every topic's partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// `(node id, host:port)` of each broker listed.
    pub brokers: Vec<(i32, String)>,
    pub controller_id: i32,
    /// Topic name to `(error code, partition id to partition)`.
    pub topics: BTreeMap<String, (i16, BTreeMap<i32, PartitionInfo>)>,
}

impl Metadata {
    /// The listed broker ids, sorted.
    pub fn brokers(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self.brokers.iter().map(|b| b.0).collect();
        ids.sort_unstable();
        ids
    }

    /// The partitions of `topic` (empty if it is not listed).
    pub fn partitions(&self, topic: &str) -> BTreeMap<i32, PartitionInfo> {
        self.topics
            .get(topic)
            .map(|(_, p)| p.clone())
            .unwrap_or_default()
    }

    /// The partitions of `topic` led by `broker`.
    pub fn led_by(&self, topic: &str, broker: i32) -> Vec<i32> {
        self.partitions(topic)
            .into_iter()
            .filter(|(_, p)| p.leader == broker)
            .map(|(id, _)| id)
            .collect()
    }
}

/// A bounded reader over a response frame: every read is checked against the frame.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
        let end = self.pos.checked_add(n).context("length overflow")?;
        let s = self
            .b
            .get(self.pos..end)
            .with_context(|| format!("frame ends at {} before {end}", self.b.len()))?;
        self.pos = end;
        Ok(s)
    }
    fn i16(&mut self) -> anyhow::Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }
    fn i32(&mut self) -> anyhow::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }
    fn u8(&mut self) -> anyhow::Result<u8> {
        Ok(self.take(1)?[0])
    }
    /// An array count: -1 (null) reads as 0; at most what the rest of the frame can hold.
    fn count(&mut self) -> anyhow::Result<usize> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(0);
        }
        let n = usize::try_from(n)?;
        ensure!(
            n <= self.b.len() - self.pos,
            "array of {n} in a short frame"
        );
        Ok(n)
    }
    fn string(&mut self) -> anyhow::Result<String> {
        let n = self.i16()?;
        if n < 0 {
            return Ok(String::new());
        }
        Ok(String::from_utf8_lossy(self.take(usize::try_from(n)?)?).into_owned())
    }
}

/// Sends one request frame (header included) to 127.0.0.1:`port` and reads the answer,
/// connecting within 5 s and each read or write bounded by 15 s (a metadata write waits for
/// the quorum's fsync, which a loaded machine can hold up for seconds).
///
/// # Errors
///
/// If the node does not accept, answer, or closes the connection.
pub fn round_trip(port: u16, request: &[u8]) -> anyhow::Result<Vec<u8>> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    s.set_write_timeout(Some(Duration::from_secs(15)))?;
    let mut frame = i32::try_from(request.len())?.to_be_bytes().to_vec();
    frame.extend_from_slice(request);
    s.write_all(&frame)?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).context("read the answer's size")?;
    let len = usize::try_from(i32::from_be_bytes(len))?;
    ensure!(len <= 64 << 20, "answer of {len} bytes");
    let mut b = vec![0u8; len];
    s.read_exact(&mut b).context("read the answer")?;
    Ok(b)
}

/// Request header v1: api key, version, correlation id, client id.
fn header(api: i16, version: i16, corr: i32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&api.to_be_bytes());
    v.extend_from_slice(&version.to_be_bytes());
    v.extend_from_slice(&corr.to_be_bytes());
    v.extend_from_slice(&12i16.to_be_bytes());
    v.extend_from_slice(b"cluster-test");
    v
}

/// Metadata v1 for every topic (a null topic array) from the node at `port`.
///
/// # Errors
///
/// If the node does not answer or the answer does not parse.
pub fn metadata(port: u16) -> anyhow::Result<Metadata> {
    const CORR: i32 = 0x3e7a;
    let mut req = header(3, 1, CORR);
    req.extend_from_slice(&(-1i32).to_be_bytes());
    let b = round_trip(port, &req)?;
    let mut r = Reader { b: &b, pos: 0 };
    ensure!(r.i32()? == CORR, "correlation id");
    let mut brokers = Vec::new();
    for _ in 0..r.count()? {
        let id = r.i32()?;
        let host = r.string()?;
        let port = r.i32()?;
        let _rack = r.string()?;
        brokers.push((id, format!("{host}:{port}")));
    }
    let controller_id = r.i32()?;
    let mut topics = BTreeMap::new();
    for _ in 0..r.count()? {
        let error = r.i16()?;
        let name = r.string()?;
        let _internal = r.u8()?;
        let mut partitions = BTreeMap::new();
        for _ in 0..r.count()? {
            let error = r.i16()?;
            let id = r.i32()?;
            let leader = r.i32()?;
            let replicas = (0..r.count()?)
                .map(|_| r.i32())
                .collect::<anyhow::Result<_>>()?;
            let isr = (0..r.count()?)
                .map(|_| r.i32())
                .collect::<anyhow::Result<_>>()?;
            partitions.insert(
                id,
                PartitionInfo {
                    error,
                    leader,
                    replicas,
                    isr,
                },
            );
        }
        topics.insert(name, (error, partitions));
    }
    ensure!(r.pos == b.len(), "{} bytes left over", b.len() - r.pos);
    Ok(Metadata {
        brokers,
        controller_id,
        topics,
    })
}

/// A raw CreateTopics v2 of one topic to the node at `port`: the topic's error code.
///
/// # Errors
///
/// If the node does not answer or the answer does not parse.
pub fn create_topic_raw(
    port: u16,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> anyhow::Result<i16> {
    const CORR: i32 = 0x3e7b;
    let mut req = header(19, 2, CORR);
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(&i16::try_from(topic.len())?.to_be_bytes());
    req.extend_from_slice(topic.as_bytes());
    req.extend_from_slice(&partitions.to_be_bytes());
    req.extend_from_slice(&replication_factor.to_be_bytes());
    req.extend_from_slice(&0i32.to_be_bytes()); // no assignments
    req.extend_from_slice(&0i32.to_be_bytes()); // no configs
    req.extend_from_slice(&10_000i32.to_be_bytes()); // timeout_ms
    req.push(0); // validate_only
    let b = round_trip(port, &req)?;
    let mut r = Reader { b: &b, pos: 0 };
    ensure!(r.i32()? == CORR, "correlation id");
    let _throttle = r.i32()?;
    ensure!(r.count()? == 1, "one topic in the answer");
    let name = r.string()?;
    ensure!(name == topic, "answer for {name}, not {topic}");
    let error = r.i16()?;
    let _message = r.string()?;
    Ok(error)
}

/// A raw FindCoordinator v1 for `key` of `key_type` (0 a group, 1 a transactional id):
/// (error code, node id).
///
/// # Errors
///
/// If the node does not answer, or the answer is malformed.
pub fn find_coordinator_of(port: u16, key: &str, key_type: i8) -> anyhow::Result<(i16, i32)> {
    const CORR: i32 = 0x0fc0;
    let mut req = header(10, 1, CORR);
    req.extend_from_slice(&i16::try_from(key.len())?.to_be_bytes());
    req.extend_from_slice(key.as_bytes());
    req.extend_from_slice(&key_type.to_be_bytes());
    let b = round_trip(port, &req)?;
    let mut r = Reader { b: &b, pos: 0 };
    ensure!(r.i32()? == CORR, "correlation id");
    let _throttle = r.i32()?;
    let error = r.i16()?;
    let _message = r.string()?;
    let node = r.i32()?;
    Ok((error, node))
}

/// Waits (at most `timeout`) until every node of `c` in `ids` names one coordinator, one of
/// `ids`, for `key` of `key_type` (0 a group, 1 a transactional id); returns it.
///
/// # Panics
///
/// On time out, with the last answers.
pub fn agreed_coordinator(
    c: &Cluster,
    ids: &[i32],
    key: &str,
    key_type: i8,
    timeout: Duration,
) -> i32 {
    let mut last = Vec::new();
    let r = crate::wait_until("one coordinator for the key", timeout, POLL, || {
        last = ids
            .iter()
            .map(|&id| (id, find_coordinator_of(c.port(id), key, key_type).ok()))
            .collect();
        let first = last[0].1;
        Ok(first.is_some_and(|(e, n)| e == 0 && ids.contains(&n))
            && last.iter().all(|(_, a)| *a == first))
    });
    r.unwrap_or_else(|e| panic!("{e:?}; last (node, (error, coordinator)) {last:?}"));
    last[0].1.expect("agreed").1
}

/// A raw group request naming one group, `api` DescribeGroups (15) or DeleteGroups (42) at
/// v0: the group's error code in the answer.
///
/// # Errors
///
/// If the node does not answer, or the answer is malformed or names no group.
pub fn group_error_raw(port: u16, api: i16, group: &str) -> anyhow::Result<i16> {
    const CORR: i32 = 0x0fc1;
    ensure!(
        api == 15 || api == 42,
        "DescribeGroups or DeleteGroups, not {api}"
    );
    let mut req = header(api, 0, CORR);
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(&i16::try_from(group.len())?.to_be_bytes());
    req.extend_from_slice(group.as_bytes());
    let b = round_trip(port, &req)?;
    let mut r = Reader { b: &b, pos: 0 };
    ensure!(r.i32()? == CORR, "correlation id");
    if api == 42 {
        let _throttle = r.i32()?;
    }
    ensure!(r.count()? == 1, "one group in the answer");
    if api == 15 {
        Ok(r.i16()?)
    } else {
        let _group = r.string()?;
        Ok(r.i16()?)
    }
}

/// ElectLeaders' election types (KIP-460).
pub const PREFERRED: i8 = 0;
pub const UNCLEAN: i8 = 1;

/// An ElectLeaders answer: the top-level error and, per topic in answer order, each
/// partition's `(partition, error code)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectLeadersAnswer {
    pub error: i16,
    pub topics: Vec<(String, Vec<(i32, i16)>)>,
}

impl ElectLeadersAnswer {
    /// Every `(topic, partition)` with its error code, sorted.
    pub fn partitions(&self) -> BTreeMap<(String, i32), i16> {
        self.topics
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |(p, e)| ((t.clone(), *p), *e)))
            .collect()
    }
}

/// A raw ElectLeaders v1 (KIP-460) to the node at `port`: `election_type` ([`PREFERRED`] or
/// [`UNCLEAN`]) for `partitions`, or every partition for `None`.
///
/// # Errors
///
/// If the node does not answer or the answer does not parse.
pub fn elect_leaders_raw(
    port: u16,
    election_type: i8,
    partitions: Option<&[(&str, &[i32])]>,
) -> anyhow::Result<ElectLeadersAnswer> {
    const CORR: i32 = 0x3e7c;
    let mut req = header(43, 1, CORR);
    req.extend_from_slice(&election_type.to_be_bytes());
    match partitions {
        None => req.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(topics) => {
            req.extend_from_slice(&i32::try_from(topics.len())?.to_be_bytes());
            for (topic, ps) in topics {
                req.extend_from_slice(&i16::try_from(topic.len())?.to_be_bytes());
                req.extend_from_slice(topic.as_bytes());
                req.extend_from_slice(&i32::try_from(ps.len())?.to_be_bytes());
                for p in *ps {
                    req.extend_from_slice(&p.to_be_bytes());
                }
            }
        }
    }
    req.extend_from_slice(&20_000i32.to_be_bytes()); // timeout_ms
    let b = round_trip(port, &req)?;
    let mut r = Reader { b: &b, pos: 0 };
    ensure!(r.i32()? == CORR, "correlation id");
    let _throttle = r.i32()?;
    let error = r.i16()?;
    let mut topics = Vec::new();
    for _ in 0..r.count()? {
        let topic = r.string()?;
        let mut ps = Vec::new();
        for _ in 0..r.count()? {
            let partition = r.i32()?;
            let code = r.i16()?;
            let _message = r.string()?;
            ps.push((partition, code));
        }
        topics.push((topic, ps));
    }
    ensure!(r.pos == b.len(), "{} bytes left over", b.len() - r.pos);
    Ok(ElectLeadersAnswer { error, topics })
}

/// The cluster id the node at `port` reports in Metadata v2 (asked for no topics); `None`
/// for a null id.
///
/// # Errors
///
/// If the node does not answer or the answer does not parse.
pub fn cluster_id(port: u16) -> anyhow::Result<Option<String>> {
    const CORR: i32 = 0x3e7d;
    let mut req = header(3, 2, CORR);
    req.extend_from_slice(&0i32.to_be_bytes()); // no topics
    let b = round_trip(port, &req)?;
    let mut r = Reader { b: &b, pos: 0 };
    ensure!(r.i32()? == CORR, "correlation id");
    // v2 has no throttle_time_ms (v3 adds it).
    for _ in 0..r.count()? {
        let _id = r.i32()?;
        let _host = r.string()?;
        let _port = r.i32()?;
        let _rack = r.string()?;
    }
    let at = r.pos;
    let null = r.i16()? < 0;
    r.pos = at;
    let id = r.string()?;
    let _controller = r.i32()?;
    ensure!(r.count()? == 0, "no topics asked for");
    ensure!(r.pos == b.len(), "{} bytes left over", b.len() - r.pos);
    Ok((!null).then_some(id))
}

/// The partition directories (`<topic>-<n>`) of `topic` under `data_dir`, sorted by `n`.
pub fn partition_dirs(data_dir: &Path, topic: &str) -> Vec<i32> {
    let prefix = format!("{topic}-");
    let mut found: Vec<i32> = std::fs::read_dir(data_dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_prefix(&prefix)?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_unstable();
    found
}

/// A loopback TCP proxy that can be cut: it listens on its own port and forwards each
/// connection to `target`, both ways, from two threads per connection. [`Proxy::cut`] closes
/// every forwarded connection and closes new ones at once until [`Proxy::heal`], which is
/// what a network partition looks like to both ends (resets and refused exchanges).
pub struct Proxy {
    /// The port clients connect to.
    pub port: u16,
    /// The port connections are forwarded to.
    pub target: u16,
    /// While set, connections are dropped.
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Tells the accepting thread to end.
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Both sockets of every forwarded connection, so that a cut can shut them down.
    conns: std::sync::Arc<std::sync::Mutex<Vec<TcpStream>>>,
    /// The accepting thread.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a free 127.0.0.1 port, forwarding to 127.0.0.1:`target`.
    ///
    /// # Panics
    ///
    /// If no port can be bound.
    pub fn start(target: u16) -> Proxy {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a proxy port");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("proxy address").port();
        let cut = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (c, s, k) = (cut.clone(), stop.clone(), conns.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                if c.load(Ordering::Relaxed) {
                    drop(client);
                    continue;
                }
                let addr = SocketAddr::from(([127, 0, 0, 1], target));
                let Ok(server) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
                    continue;
                };
                let _ = client.set_nonblocking(false);
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                {
                    let mut all = k.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    // Checked again under the lock that `cut` closes every connection
                    // under: a connection accepted just before a cut would otherwise be
                    // recorded after the cut closed the others, and outlive it.
                    if c.load(Ordering::Relaxed) {
                        continue;
                    }
                    // Forget the closed ones now and then.
                    all.retain(|t| t.peer_addr().is_ok());
                    if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
                        all.push(a);
                        all.push(b);
                    }
                }
                std::thread::spawn(move || pipe(client, server));
                std::thread::spawn(move || pipe(s2, c2));
            }
        });
        Proxy {
            port,
            target,
            cut,
            stop,
            conns,
            thread: Some(thread),
        }
    }

    /// Closes every forwarded connection and refuses (closes) new ones until healed.
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::Relaxed);
        self.close_all();
    }

    /// Forwards new connections again.
    pub fn heal(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::Relaxed);
    }

    fn close_all(&self) {
        let mut all = self
            .conns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for s in all.drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.close_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Copies `from` to `to` until either ends, then shuts both down.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// A cluster whose links go through [`Proxy`]s: each node has a client listener
/// (PLAINTEXT) and an inter-broker one (REPLICATION, `inter.broker.listener.name`, which
/// other brokers' replica fetchers use), each advertised at a proxy, and each node reaches
/// each other node's controller listener through a proxy of its own (its
/// `controller.quorum.voters` names them), so that one node can be cut off from the rest of
/// the cluster while its clients still reach it.
pub struct ProxiedCluster {
    /// The cluster; its nodes' `port` is the real client listener.
    pub cluster: Cluster,
    /// Node id to the proxy in front of its client listener.
    pub client_proxies: BTreeMap<i32, Proxy>,
    /// Node id to the proxy in front of its inter-broker listener.
    pub replication_proxies: BTreeMap<i32, Proxy>,
    /// `(from, to)` to the proxy `from` reaches `to`'s controller listener through.
    pub controller_proxies: BTreeMap<(i32, i32), Proxy>,
}

impl ProxiedCluster {
    /// Writes and starts `n` nodes as [`Cluster::start`] does, behind proxies.
    ///
    /// # Panics
    ///
    /// If a file cannot be written, a port bound or a process spawned.
    pub fn start(n: usize, settings: &[(&str, &str)]) -> ProxiedCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let ids: Vec<i32> = (1..=i32::try_from(n).unwrap()).collect();
        // The real ports stay bound until every proxy has its own, so that no proxy is
        // given one of them; they are released just before the nodes start.
        let mut reserved = Vec::new();
        let mut reserve = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
            let port = l.local_addr().expect("a bound address").port();
            reserved.push(l);
            port
        };
        let ports: BTreeMap<i32, (u16, u16)> =
            ids.iter().map(|&id| (id, (reserve(), reserve()))).collect();
        let replication_ports: BTreeMap<i32, u16> = ids.iter().map(|&id| (id, reserve())).collect();
        let client_proxies: BTreeMap<i32, Proxy> = ids
            .iter()
            .map(|&id| (id, Proxy::start(ports[&id].0)))
            .collect();
        let replication_proxies: BTreeMap<i32, Proxy> = ids
            .iter()
            .map(|&id| (id, Proxy::start(replication_ports[&id])))
            .collect();
        let mut controller_proxies = BTreeMap::new();
        for &from in &ids {
            for &to in &ids {
                if from != to {
                    controller_proxies.insert((from, to), Proxy::start(ports[&to].1));
                }
            }
        }
        let mut nodes = Vec::new();
        for &id in &ids {
            let (port, controller_port) = ports[&id];
            let voters = ids
                .iter()
                .map(|&to| {
                    let p = if to == id {
                        controller_port
                    } else {
                        controller_proxies[&(id, to)].port
                    };
                    format!("{to}@127.0.0.1:{p}")
                })
                .collect::<Vec<_>>()
                .join(",");
            let data_dir = Node::data_dir_in(dir.path(), id);
            let text = format!(
                "process.roles=broker,controller\n\
                 node.id={id}\n\
                 cluster.id={CLUSTER_ID}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},REPLICATION://127.0.0.1:{},CONTROLLER://127.0.0.1:{controller_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{},REPLICATION://127.0.0.1:{}\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 inter.broker.listener.name=REPLICATION\n\
                 controller.listener.names=CONTROLLER\n\
                 controller.quorum.voters={voters}\n\
                 log.dirs={}\n",
                replication_ports[&id],
                client_proxies[&id].port,
                replication_proxies[&id].port,
                data_dir.display()
            );
            nodes.push(Node::write(
                dir.path(),
                id,
                port,
                controller_port,
                text,
                settings,
            ));
        }
        drop(reserved);
        for n in &mut nodes {
            n.spawn();
        }
        ProxiedCluster {
            cluster: Cluster { nodes, dir },
            client_proxies,
            replication_proxies,
            controller_proxies,
        }
    }

    /// `127.0.0.1:<client proxy>` of each node in `ids`.
    pub fn bootstrap(&self, ids: &[i32]) -> String {
        ids.iter()
            .map(|id| format!("127.0.0.1:{}", self.client_proxies[id].port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Cuts node `id` off from the other nodes: its inter-broker listener's proxy (followers
    /// fetching from it) and every controller link to and from it. Its clients still reach
    /// it (a zombie leader keeps taking produces), and its own replica fetches to the other
    /// nodes' inter-broker proxies stay up.
    pub fn isolate(&self, id: i32) {
        self.replication_proxies[&id].cut();
        for ((from, to), p) in &self.controller_proxies {
            if *from == id || *to == id {
                p.cut();
            }
        }
    }

    /// Undoes [`ProxiedCluster::isolate`] (and any cut).
    pub fn heal(&self) {
        for p in self
            .client_proxies
            .values()
            .chain(self.replication_proxies.values())
        {
            p.heal();
        }
        for p in self.controller_proxies.values() {
            p.heal();
        }
    }
}

/// One node's DescribeQuorum answer for `__cluster_metadata-0`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quorum {
    pub error: i16,
    pub leader: i32,
    pub epoch: i32,
    pub high_watermark: i64,
    /// `(replica id, log end offset)` of each voter (the leader's answer only).
    pub voters: Vec<(i32, i64)>,
}

fn uvarint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn take<const N: usize>(b: &[u8], pos: &mut usize) -> Option<[u8; N]> {
    let v = b.get(*pos..*pos + N)?.try_into().ok()?;
    *pos += N;
    Some(v)
}

fn skip_tags(b: &[u8], pos: &mut usize) -> Option<()> {
    for _ in 0..uvarint(b, pos)? {
        uvarint(b, pos)?;
        let len = usize::try_from(uvarint(b, pos)?).ok()?;
        *pos += len;
    }
    Some(())
}

/// DescribeQuorum v0 (flexible; request header v2) to `port`; `None` if the node does not
/// answer.
pub fn describe_quorum(port: u16, corr: i32) -> Option<Quorum> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut req = Vec::new();
    req.extend_from_slice(&55i16.to_be_bytes());
    req.extend_from_slice(&0i16.to_be_bytes());
    req.extend_from_slice(&corr.to_be_bytes());
    req.extend_from_slice(&4i16.to_be_bytes());
    req.extend_from_slice(b"test");
    req.push(0); // header tags
    req.push(2); // one topic
    req.push(19); // "__cluster_metadata", 18 bytes
    req.extend_from_slice(b"__cluster_metadata");
    req.push(2); // one partition
    req.extend_from_slice(&0i32.to_be_bytes());
    req.push(0); // partition tags
    req.push(0); // topic tags
    req.push(0); // request tags
    let mut frame = (req.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&req);
    s.write_all(&frame).ok()?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut b = vec![0u8; usize::try_from(i32::from_be_bytes(len)).ok()?];
    s.read_exact(&mut b).ok()?;
    let mut pos = 0;
    assert_eq!(i32::from_be_bytes(take(&b, &mut pos)?), corr);
    skip_tags(&b, &mut pos)?;
    let top_error = i16::from_be_bytes(take(&b, &mut pos)?);
    assert_eq!(top_error, 0, "top-level error");
    assert_eq!(uvarint(&b, &mut pos)?, 2, "one topic");
    let name_len = usize::try_from(uvarint(&b, &mut pos)?).ok()? - 1;
    assert_eq!(&b[pos..pos + name_len], b"__cluster_metadata");
    pos += name_len;
    assert_eq!(uvarint(&b, &mut pos)?, 2, "one partition");
    assert_eq!(i32::from_be_bytes(take(&b, &mut pos)?), 0);
    let error = i16::from_be_bytes(take(&b, &mut pos)?);
    let leader = i32::from_be_bytes(take(&b, &mut pos)?);
    let epoch = i32::from_be_bytes(take(&b, &mut pos)?);
    let high_watermark = i64::from_be_bytes(take(&b, &mut pos)?);
    let mut voters = Vec::new();
    for _ in 1..uvarint(&b, &mut pos)? {
        let id = i32::from_be_bytes(take(&b, &mut pos)?);
        let leo = i64::from_be_bytes(take(&b, &mut pos)?);
        skip_tags(&b, &mut pos)?;
        voters.push((id, leo));
    }
    Some(Quorum {
        error,
        leader,
        epoch,
        high_watermark,
        voters,
    })
}
