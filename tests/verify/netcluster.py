"""A cluster of `strata` nodes, each in a network namespace of its own, with the means to fault
them: kill -9 and restart, pause and resume, cut links one way or both, slow a node's links,
wipe a replica's partitions, lose a replica's unsynced tail, and move its wall clock.

Each node runs in namespace `sv<run>n<id>` behind a veth pair on a bridge `sv<run>br` in the
root namespace, at 10.231.<net>.<10+id>; the bridge holds 10.231.<net>.1, so the harness and
its clients (in the root namespace) reach every node directly, and the nodes reach one another
through the bridge. Every address is on that private bridge: nothing is bound outside it.

- Cuts are `iptables` DROP rules in the receiving node's namespace (INPUT, by source address):
  a TCP segment is dropped, not refused, so a cut link hangs as a real partition does.
- Slow links are a `tbf` queue on the node's interface (this kernel has no `netem`): a rate
  limit whose queue delays every packet the node sends.
- Clock jumps go through libfaketime (Debian's `faketime`), preloaded into every node with a
  timestamp file the harness rewrites: the wall clock moves, the monotonic clock does not
  (`DONT_FAKE_MONOTONIC=1`), as when an operator or NTP steps a machine's clock.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

FAKETIME_LIBS = [
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1"),
]
CLUSTER_ID = "VmVyaWZ5SGFybmVzc0NsdQ"
KAFKA_PORT = 9092
RUNS = Path("/run/strata-verify")
CONTROLLER_PORT = 9093


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def free_subnet() -> int:
    """A third octet for 10.231.X.0/24 that no interface of this machine uses."""
    used = sh("ip", "-4", "-o", "addr").stdout
    choices = list(range(1, 250))
    random.SystemRandom().shuffle(choices)
    for x in choices:
        if f"10.231.{x}." not in used:
            return x
    raise RuntimeError("no free 10.231.X.0/24 subnet")


def faketime_lib() -> Path | None:
    return next((p for p in FAKETIME_LIBS if p.exists()), None)


class Node:
    def __init__(self, cluster: "NetCluster", node_id: int):
        self.cluster = cluster
        self.id = node_id
        self.ns = f"{cluster.prefix}n{node_id}"
        self.veth = f"{cluster.prefix}h{node_id}"
        self.ip = f"10.231.{cluster.net}.{10 + node_id}"
        self.dir = cluster.root / f"node{node_id}"
        self.data = self.dir / "data"
        self.log_path = self.dir / "strata.log"
        self.clock_file = self.dir / "faketime"
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.clock_offset_s = 0
        self.slow = False
        self.cut_from: set[str] = set()  # addresses whose packets this node drops

    @property
    def bootstrap(self) -> str:
        return f"{self.ip}:{KAFKA_PORT}"

    @property
    def controller(self) -> str:
        return f"{self.ip}:{CONTROLLER_PORT}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        assert not self.running(), f"node {self.id} is running"
        self.data.mkdir(parents=True, exist_ok=True)
        c = self.cluster
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self.id),
            "cluster.id": CLUSTER_ID,
            "listeners": f"PLAINTEXT://{self.ip}:{KAFKA_PORT},CONTROLLER://{self.ip}:{CONTROLLER_PORT}",
            "advertised.listeners": f"PLAINTEXT://{self.ip}:{KAFKA_PORT}",
            "controller.listener.names": "CONTROLLER",
            **c.quorum_settings(),
            "log.dirs": str(self.data),
            **c.settings,
        }
        args = ["ip", "netns", "exec", self.ns, str(c.binary)]
        for k, v in settings.items():
            args += ["--override", f"{k}={v}"]
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env["NO_COLOR"] = "1"
        lib = faketime_lib()
        if lib is not None and c.clock_faults:
            if not self.clock_file.exists():
                self.clock_file.write_text("+0s\n")
            env["LD_PRELOAD"] = str(lib)
            env["FAKETIME_TIMESTAMP_FILE"] = str(self.clock_file)
            env["FAKETIME_CACHE_DURATION"] = "1"
            env["DONT_FAKE_MONOTONIC"] = "1"
        with open(self.log_path, "ab") as log:
            log.write(f"==== start {time.strftime('%H:%M:%S')} ====\n".encode())
            log.flush()
            # `ip netns exec` execs the binary: the child's pid is the broker's.
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
            )
        self.paused = False

    def wait_listening(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(f"node {self.id} exited: {self.tail()}")
            try:
                with socket.create_connection((self.ip, KAFKA_PORT), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"node {self.id} not listening after {timeout_s} s: {self.tail()}")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.paused:
                os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.paused = False

    def pause(self) -> None:
        if self.running() and not self.paused:
            os.kill(self.proc.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.running() and self.paused:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def directory_id(self) -> str | None:
        """The log directory's id (meta.properties), which names this voter in a dynamic
        quorum."""
        try:
            for line in (self.data / "meta.properties").read_text().splitlines():
                if line.startswith("directory.id="):
                    return line.split("=", 1)[1].strip()
        except OSError:
            pass
        return None

    def partition_dirs(self) -> list[Path]:
        """The node's partition directories: everything in its log directory but the
        metadata log (a voter's Raft log is fsynced and is not a replica's data)."""
        if not self.data.exists():
            return []
        return [
            d
            for d in self.data.iterdir()
            if d.is_dir() and not d.name.startswith("__cluster_metadata")
        ]

    def wipe_partitions(self) -> int:
        """Deletes every partition's data (the node must be down): the replica comes back
        empty and copies from the leaders. Returns the bytes removed."""
        assert not self.running()
        removed = 0
        for d in self.partition_dirs():
            removed += sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
            shutil.rmtree(d)
        # Checkpoints name the partitions' offsets; they go with the data.
        for f in self.data.glob("*checkpoint*"):
            f.unlink()
        return removed

    def lose_unsynced(self, rng: random.Random, max_bytes: int = 1 << 20) -> int:
        """Cuts each partition's newest segment by up to `max_bytes` at a random point (the
        node must be down), as the page cache lost at a power cut would: a log keeps only
        what reached the disk. Partitions are not fsynced by default (`flush.messages`), so
        any tail may be lost. Returns the bytes cut."""
        assert not self.running()
        cut = 0
        for d in self.partition_dirs():
            logs = sorted(d.glob("*.log"))
            if not logs:
                continue
            newest = logs[-1]
            size = newest.stat().st_size
            if size == 0:
                continue
            n = rng.randint(0, min(size, max_bytes))
            os.truncate(newest, size - n)
            cut += n
        return cut

    def set_clock(self, offset_s: int) -> None:
        """Moves this node's wall clock to `offset_s` from the real one (libfaketime)."""
        self.clock_file.write_text(f"{offset_s:+d}s\n")
        self.clock_offset_s = offset_s

    def cut(self, sources: list[str]) -> None:
        for ip in sources:
            if ip not in self.cut_from:
                sh(
                    "ip",
                    "netns",
                    "exec",
                    self.ns,
                    "iptables",
                    "-A",
                    "INPUT",
                    "-s",
                    ip,
                    "-j",
                    "DROP",
                )
                self.cut_from.add(ip)

    def heal(self) -> None:
        sh("ip", "netns", "exec", self.ns, "iptables", "-F", "INPUT")
        self.cut_from.clear()

    def slow_link(self, rate: str = "2mbit") -> None:
        if not self.slow:
            sh(
                "ip", "netns", "exec", self.ns, "tc", "qdisc", "add", "dev", "eth0", "root",
                "tbf", "rate", rate, "burst", "16kb", "latency", "200ms",
            )  # fmt: skip
            self.slow = True

    def fast_link(self) -> None:
        if self.slow:
            sh(
                "ip",
                "netns",
                "exec",
                self.ns,
                "tc",
                "qdisc",
                "del",
                "dev",
                "eth0",
                "root",
                check=False,
            )
            self.slow = False

    def registered_since_start(self) -> bool:
        """Whether this process registered with the controller (its log says so after the
        last start marker)."""
        try:
            text = self.log_path.read_bytes()
        except OSError:
            return False
        return b"registered with the controller" in text[text.rfind(b"==== start") :]

    def tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - n))
                return f.read().decode("utf-8", "replace")
        except OSError as e:
            return f"<{e}>"


class NetCluster:
    """`n` combined broker-and-controller nodes, each in its own namespace."""

    def __init__(
        self,
        root: Path,
        n: int,
        binary: Path,
        settings: dict[str, str] | None = None,
        clock_faults: bool = True,
        dynamic_quorum: bool = False,
    ):
        self.root = root
        self.binary = binary
        self.settings = settings or {}
        self.clock_faults = clock_faults and faketime_lib() is not None
        self.dynamic_quorum = dynamic_quorum
        self.net = free_subnet()
        self.prefix = f"sv{self.net:02x}{os.getpid() % 4096:03x}"
        self.bridge = f"{self.prefix}br"
        self.nodes: dict[int, Node] = {}
        for i in range(1, n + 1):
            self.nodes[i] = Node(self, i)
        self._up = False

    def quorum_settings(self) -> dict[str, str]:
        """Static voters, or a dynamic quorum (KIP-853) that node 1 founds and the others
        join by themselves (auto-join), whose voters can then be removed and added."""
        endpoints = [f"{n.ip}:{CONTROLLER_PORT}" for n in self.nodes.values()]
        if self.dynamic_quorum:
            return {
                "controller.quorum.bootstrap.servers": ",".join(endpoints),
                "controller.quorum.auto.join.enable": "true",
            }
        return {
            "controller.quorum.voters": ",".join(
                f"{n.id}@{e}" for n, e in zip(self.nodes.values(), endpoints)
            )
        }

    def admin(self, *args: str, timeout_s: float = 30) -> subprocess.CompletedProcess:
        """`strata admin ARGS`, from the root namespace."""
        return subprocess.run(
            [str(self.binary), "admin", *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )

    def setup_network(self) -> None:
        cleanup_stale()
        (RUNS / self.prefix).write_text(f"{os.getpid()} {len(self.nodes)}\n")
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        self._up = True
        sh("ip", "addr", "add", f"10.231.{self.net}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        # Bridged packets pass the root namespace's FORWARD chain when br_netfilter is
        # loaded (Docker loads it and sets the policy to DROP): let the bridge's own through.
        forward_rule("-I", self.bridge)
        for node in self.nodes.values():
            sh("ip", "netns", "add", node.ns)
            sh(
                "ip",
                "link",
                "add",
                node.veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                node.ns,
            )
            sh("ip", "link", "set", node.veth, "master", self.bridge, "up")
            sh("ip", "-n", node.ns, "addr", "add", f"{node.ip}/24", "dev", "eth0")
            sh("ip", "-n", node.ns, "link", "set", "eth0", "up")
            sh("ip", "-n", node.ns, "link", "set", "lo", "up")

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.setup_network()
        for node in self.nodes.values():
            node.start()
        for node in self.nodes.values():
            node.wait_listening()

    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    def heal_all(self) -> None:
        for node in self.nodes.values():
            node.heal()
            node.fast_link()
            node.resume()
            if node.clock_offset_s:
                node.set_clock(0)

    def stop(self) -> None:
        for node in self.nodes.values():
            try:
                node.kill9()
            except Exception:  # noqa: BLE001 - teardown goes on
                pass
        if self._up:
            remove_network(self.prefix, len(self.nodes))
            self._up = False


def cleanup_stale() -> None:
    """Removes the namespaces and bridge of every earlier run whose harness process is gone
    (a run killed before its teardown). Each run records its pid in RUNS/<prefix>."""
    RUNS.mkdir(parents=True, exist_ok=True)
    for entry in RUNS.iterdir():
        try:
            pid, count = (int(x) for x in entry.read_text().split())
        except ValueError:
            entry.unlink()
            continue
        if alive(pid):
            continue
        remove_network(entry.name, count)


def alive(pid: int) -> bool:
    """Whether the process runs: a killed harness not yet reaped (a zombie) does not."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def forward_rule(action: str, bridge: str) -> None:
    """Inserts (-I) or deletes (-D) the root namespace's FORWARD rule that lets the
    bridge's own packets through: bridged packets pass that chain when br_netfilter is
    loaded, and Docker loads it and sets the chain's policy to DROP."""
    sh("iptables", action, "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT", check=False)


def remove_network(prefix: str, count: int) -> None:
    """Removes a run's namespaces (killing any process left in them), its bridge, its
    FORWARD rule and its record in RUNS."""
    for i in range(1, count + 1):
        ns = f"{prefix}n{i}"
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", ns, check=False)
    sh("ip", "link", "del", f"{prefix}br", check=False)
    forward_rule("-D", f"{prefix}br")
    (RUNS / prefix).unlink(missing_ok=True)
