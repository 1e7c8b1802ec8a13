"""Kafka's connection quotas against hostile clients: `max.connections.per.ip` (and its
overrides, changed live with IncrementalAlterConfigs), `max.connections` and
`max.connection.creation.rate`, while an attacker on another loopback address floods the
broker with connections, stalls mid-frame and pipelines requests it never reads, and a
well-behaved producer and consumer on 127.0.0.1 keep working. The attack's effect on the
producer's latency is printed (the p99 goes to docs/BENCHMARKS.md; speed is never asserted
here)."""

import socket
import struct
import threading
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from conftest import Broker, free_port

ATTACKER = "127.0.0.2"


def api_versions(s: socket.socket, corr: int = 1) -> bool:
    """ApiVersions v0; whether it was answered."""
    header = struct.pack(">hhih", 18, 0, corr, 4) + b"test"
    try:
        s.sendall(struct.pack(">i", len(header)) + header)
        size = s.recv(4)
        if len(size) < 4:
            return False
        want = struct.unpack(">i", size)[0]
        got = b""
        while len(got) < want:
            chunk = s.recv(want - len(got))
            if not chunk:
                return False
            got += chunk
        return struct.unpack(">i", got[:4])[0] == corr
    except OSError:
        return False


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket()
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def metric(port: int, name: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the metrics")


def set_broker_config(bootstrap: str, key: str, value: str) -> None:
    """Sets `key` on broker 1 (the test's node) with IncrementalAlterConfigs."""
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    res.add_incremental_config(
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.incremental_alter_configs([res]).values():
        f.result()


def test_per_ip_limit_and_its_live_override(tmp_path):
    metrics = free_port()
    b = Broker(
        tmp_path,
        {"max.connections.per.ip": "4", "metrics.listener": f"http://127.0.0.1:{metrics}"},
    )
    try:
        # The fixture's readiness probe is counted until the broker sees it close.
        time.sleep(0.5)
        held = [connect(b.port) for _ in range(4)]
        assert all(api_versions(s) for s in held)
        # The fifth from the same address is accepted by the kernel and closed at once.
        extra = connect(b.port)
        assert not api_versions(extra)
        extra.close()
        # Another address has its own count.
        other = connect(b.port, ATTACKER)
        assert api_versions(other)
        other.close()
        assert metric(metrics, "strata_connections_refused_per_ip_total") >= 1
        # One closes; a new one fits.
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:
            s = connect(b.port)
            if api_versions(s):
                held.append(s)
                break
            s.close()
            assert time.monotonic() < deadline, "no room after a connection closed"
            time.sleep(0.1)
        # Live: the attacker's address gets an override of 1 on this broker (node 1), without
        # a restart.
        # The admin client's connections come from 127.0.0.1: make room for them first.
        for s in held:
            s.close()
        set_broker_config(b.bootstrap, "max.connections.per.ip.overrides", f"{ATTACKER}:1")
        deadline = time.monotonic() + 10
        while True:
            first = connect(b.port, ATTACKER)
            second = connect(b.port, ATTACKER)
            ok = api_versions(first), api_versions(second)
            first.close()
            second.close()
            if ok == (True, False):
                break
            assert time.monotonic() < deadline, f"the override did not apply: {ok}"
            time.sleep(0.2)
    finally:
        b.kill()


def test_a_connection_flood_stalls_and_non_readers_do_not_stop_other_clients(tmp_path):
    b = Broker(
        tmp_path,
        {
            "max.connections.per.ip": "50",
            "max.connection.creation.rate": "200",
            "max.connections": "200",
            # The attacker's frames stall: each holds its memory until it is cut off.
            "queued.max.request.bytes": str(8 << 20),
        },
    )
    stop = threading.Event()
    attacks = {"flood": 0, "stalled": 0, "pipelined": 0, "refused": 0}

    def flood():
        # Connect and drop, as fast as the broker lets us: bounded by `stop` and a count.
        for _ in range(20000):
            if stop.is_set():
                return
            try:
                s = connect(b.port, ATTACKER)
                attacks["flood"] += 1
                s.close()
            except OSError:
                attacks["refused"] += 1

    def stall():
        # Half frames: a 900 KiB size prefix and a few bytes, then nothing.
        held = []
        while not stop.is_set() and len(held) < 40:
            try:
                s = connect(b.port, ATTACKER)
                s.sendall(struct.pack(">i", 900 << 10) + b"\x00\x00")
                held.append(s)
                attacks["stalled"] += 1
            except OSError:
                attacks["refused"] += 1
            time.sleep(0.05)
        stop.wait(60)
        for s in held:
            s.close()

    def pipeline():
        # Metadata requests written without ever reading an answer.
        try:
            s = connect(b.port, ATTACKER)
        except OSError:
            return
        s.settimeout(0.5)
        header = struct.pack(">hhih", 3, 1, 1, 4) + b"test" + struct.pack(">i", -1)
        frame = struct.pack(">i", len(header)) + header
        while not stop.is_set():
            try:
                s.sendall(frame * 100)
                attacks["pipelined"] += 100
            except OSError:
                break
        s.close()

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("victim", 1, 1)]).values():
        f.result()

    def produce_latencies(n: int) -> list[float]:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": "all"})
        lat = []
        for i in range(n):
            t0 = time.perf_counter()
            done = []
            p.produce("victim", str(i).encode(), on_delivery=lambda e, m: done.append(e))
            p.flush(10)
            assert done == [None], done
            lat.append(time.perf_counter() - t0)
        return lat

    quiet = produce_latencies(1000)
    threads = [threading.Thread(target=t, daemon=True) for t in (flood, stall, pipeline, pipeline)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        attacked = produce_latencies(1000)
        # The consumer reads everything during the attack too.
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "victim-reader"})
        c.assign([TopicPartition("victim", 0, 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 2000 and time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and not m.error():
                got += 1
        c.close()
        assert got == 2000
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=70)
        b.kill()

    def p(xs, q):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000

    print(
        f"\nproduce latency, ms: quiet p50 {p(quiet, .5):.2f} p99 {p(quiet, .99):.2f}; "
        f"under attack p50 {p(attacked, .5):.2f} p99 {p(attacked, .99):.2f}; attack {attacks}"
    )
    assert attacks["flood"] > 100 and attacks["stalled"] > 0 and attacks["pipelined"] > 0


def test_a_listener_s_max_connections_holds_that_listener_only_and_changes_live(tmp_path):
    """`listener.name.<l>.max.connections`: at the limit that listener stops accepting (the
    kernel queues the connection; the broker answers it once a connection of that listener
    closes), while the other listener accepts as before; raised with
    IncrementalAlterConfigs, it applies without a restart."""
    port, extra = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},EXTRA://127.0.0.1:{extra}"
    b = Broker(
        tmp_path,
        {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
            "listener.name.extra.max.connections": "2",
        },
        port=port,
    )
    try:
        held = [connect(extra) for _ in range(2)]
        assert all(api_versions(s) for s in held)
        waiting = connect(extra)
        waiting.settimeout(1.5)
        assert not api_versions(waiting), "a third connection was served on a full listener"
        # The other listener is not held.
        plain = connect(b.port)
        assert api_versions(plain)
        plain.close()
        # One of the listener's connections closes: the waiting one is accepted and served.
        held.pop().close()
        waiting.settimeout(5)
        got = waiting.recv(4)
        assert len(got) == 4, "the queued connection was not served after one closed"
        waiting.close()
        # Live: raised to 4 on this broker (node 1).
        set_broker_config(b.bootstrap, "listener.name.extra.max.connections", "4")
        deadline = time.monotonic() + 10
        while True:
            more = [connect(extra) for _ in range(3)]
            for s in more:
                s.settimeout(1.5)
            ok = [api_versions(s) for s in more]
            for s in more:
                s.close()
            if ok == [True, True, True]:
                break
            assert time.monotonic() < deadline, f"the raised limit did not apply: {ok}"
            time.sleep(0.3)
        for s in held:
            s.close()
    finally:
        b.kill()
