"""Fixtures for the Python client tests: one real `strata` broker per test (`broker`), or a
cluster of three (`cluster`).

The binary comes from $STRATA_BIN, else <repo>/target/release/strata. Each broker gets a free
127.0.0.1 port and its own data directory under pytest's tmp_path; its stderr goes to
broker.stderr.log there, and the tail is printed when the test fails. The broker is killed
(SIGKILL) at teardown. A test may crash the broker with `kill9()` and bring it back on the same
port and data directory with `restart()`.
"""

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0
TAIL_BYTES = 8192


def strata_bin() -> Path:
    env = os.environ.get("STRATA_BIN")
    return Path(env) if env else REPO / "target" / "release" / "strata"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certs(directory: Path) -> Path:
    """A throwaway authority and certificates in `directory` (tests/make-certs.sh)."""
    subprocess.run(
        [str(REPO / "tests" / "make-certs.sh"), str(directory)],
        check=True,
        capture_output=True,
    )
    return directory


class Broker:
    """A `strata` child process on 127.0.0.1:<port> with data in <tmp>/data."""

    def __init__(
        self, tmp: Path, overrides: dict[str, str] | None = None, port: int | None = None
    ):
        self.port = port or free_port()
        self.data_dir = tmp / "data"
        self.data_dir.mkdir()
        self.stderr_path = tmp / "broker.stderr.log"
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        all_overrides = {
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.data_dir),
            **(overrides or {}),
        }
        bin_path = strata_bin()
        if not bin_path.is_file():
            raise RuntimeError(
                f"strata binary not found at {bin_path} "
                "(cargo build --release --bin strata, or set STRATA_BIN)"
            )
        self._args = [str(bin_path)]
        for k, v in all_overrides.items():
            self._args += ["--override", f"{k}={v}"]
        self._cwd = tmp
        self._spawn()

    def _spawn(self) -> None:
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env["NO_COLOR"] = "1"  # the log is a file: no colour codes
        self._log = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            self._args,
            cwd=self._cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=env,
        )
        self._wait_ready()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"strata exited during startup with {self.proc.returncode}:\n{self.tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                self.kill()
                raise RuntimeError(
                    f"strata did not accept connections within {READY_TIMEOUT_S}s:\n{self.tail()}"
                )
            time.sleep(0.05)

    def tail(self) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - TAIL_BYTES))
                return f.read().decode("utf-8", "replace")
        except OSError as e:
            return f"<cannot read {self.stderr_path}: {e}>"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()

    def kill9(self) -> None:
        """Crashes the broker: SIGKILL, no shutdown hooks, nothing flushed but what the
        kernel already holds."""
        self.kill()

    def restart(self) -> None:
        """Starts the binary again with the same arguments: same port, same data directory.
        Its output is appended to the same log, after a marker line."""
        if self.proc.poll() is None:
            raise RuntimeError("restart() of a broker that is still running")
        with open(self.stderr_path, "ab") as f:
            f.write(b"==== restart ====\n")
        self._spawn()


class Cluster:
    """Combined `strata` nodes (broker and controller) forming one cluster on 127.0.0.1,
    as the Rust harness `tests/src/cluster.rs` starts them: node ids 1..n, a
    PLAINTEXT and a CONTROLLER listener each on free ports, every node a voter, one
    `cluster.id`, each with its own data directory and log under <tmp>/node<id>, plus the
    test's settings. Nodes start together; `node(id)` gives the `Broker` to kill9() or
    restart()."""

    CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"

    def __init__(
        self,
        tmp: Path,
        n: int = 3,
        settings: dict[str, str] | None = None,
        node_settings=None,
    ):
        """`node_settings(node_id)`, when given, adds settings of one node's own (a port of
        its own for `console.listener`)."""
        ports = [(free_port(), free_port()) for _ in range(n)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
        self.nodes: dict[int, Broker] = {}
        try:
            for i, (port, controller_port) in enumerate(ports):
                node_id = i + 1
                node_dir = tmp / f"node{node_id}"
                node_dir.mkdir()
                self.nodes[node_id] = Broker(
                    node_dir,
                    {
                        "process.roles": "broker,controller",
                        "node.id": str(node_id),
                        "cluster.id": self.CLUSTER_ID,
                        "listeners": f"PLAINTEXT://127.0.0.1:{port},"
                        f"CONTROLLER://127.0.0.1:{controller_port}",
                        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                        "controller.listener.names": "CONTROLLER",
                        "controller.quorum.voters": voters,
                        **(settings or {}),
                        **(node_settings(node_id) if node_settings else {}),
                    },
                    port=port,
                )
        except BaseException:
            self.kill()
            raise

    def node(self, node_id: int) -> Broker:
        return self.nodes[node_id]

    def wait_registered(self, timeout_s: float = 60.0) -> None:
        """Waits until Metadata through every node lists every node as a broker and names a
        controller. The fixture returns once the ports listen; a client bootstrapped before
        the brokers register sees an empty broker list and cannot address a node by id."""
        from confluent_kafka.admin import AdminClient

        n = len(self.nodes)
        deadline = time.monotonic() + timeout_s
        for node_id, b in self.nodes.items():
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            while True:
                try:
                    md = admin.list_topics(timeout=5)
                    if len(md.brokers) == n and md.controller_id >= 0:
                        break
                    seen = (sorted(md.brokers), md.controller_id)
                except Exception as e:  # noqa: BLE001 - retried until the deadline
                    seen = e
                assert time.monotonic() < deadline, (
                    f"node {node_id}: not {n} brokers and a controller in {timeout_s} s: {seen}"
                )
                time.sleep(0.2)

    def bootstrap(self, ids: list[int] | None = None) -> str:
        return ",".join(
            b.bootstrap for i, b in self.nodes.items() if ids is None or i in ids
        )

    def kill(self) -> None:
        for b in self.nodes.values():
            b.kill()

    def tails(self) -> str:
        return "\n".join(
            f"==== node {i} ({b.stderr_path}) ====\n{b.tail()}" for i, b in self.nodes.items()
        )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    # Lets the fixture know at teardown whether the test body failed.
    rep = yield
    setattr(item, "rep_" + rep.when, rep)
    return rep


@pytest.fixture
def broker(request, tmp_path):
    overrides = getattr(request, "param", None)
    b = Broker(tmp_path, overrides)
    yield b
    b.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"==== strata stderr tail ({b.stderr_path}) ====\n{b.tail()}\n==== end ====")


@pytest.fixture
def cluster(request, tmp_path):
    """Three nodes; a test passes extra settings with
    `@pytest.mark.parametrize("cluster", [{...}], indirect=True)`."""
    settings = getattr(request, "param", None)
    c = Cluster(tmp_path, 3, settings)
    yield c
    c.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(c.tails())
