"""What incremental fetch sessions (KIP-227) save a broker on idle partitions.

Starts the `strata` binary twice on 127.0.0.1, with fetch sessions (the default) and with
`max.incremental.fetch.session.cache.slots=0`, creates one topic of PARTITIONS partitions,
and has one kafka-python consumer (which fetches in sessions when the broker offers them)
poll every partition, idle, for SECONDS. Reports the broker's CPU per fetch (`/proc/PID/stat`,
fetches counted by its metrics endpoint), and the client's mean request size and its incoming
bytes per fetch (kafka-python's node metrics; a rate over its 30 s window, so approximate).

Usage: target/venv/bin/python bench/scripts/fetch_sessions_idle.py [PARTITIONS] [SECONDS]
"""

import os
import socket
import subprocess
import sys
import tempfile
import re
import time
import urllib.request

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRATA = os.environ.get("STRATA_BIN", os.path.join(ROOT, "target/release/strata"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_and_written(pid: int) -> tuple[float, int]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    with open(f"/proc/{pid}/io") as f:
        io = dict(line.split(": ") for line in f.read().splitlines())
    return cpu, int(io["wchar"])


def fetch_requests(port: int) -> int:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0
    for m in re.finditer(r'^kafka_network_requestmetrics_requests_total\{([^}]*)\} (\d+)', body, re.M):
        if 'request="Fetch"' in m.group(1):
            total += int(m.group(2))
    return total


def run(partitions: int, seconds: float, slots: str) -> dict:
    port = free_port()
    metrics = free_port()
    tmp = tempfile.mkdtemp(prefix="strata-sessions-")
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    args = [STRATA]
    for k, v in {
        "listeners": listener,
        "advertised.listeners": listener,
        "log.dirs": os.path.join(tmp, "data"),
        "max.incremental.fetch.session.cache.slots": slots,
        "metrics.listener": f"http://127.0.0.1:{metrics}/metrics",
    }.items():
        args += ["--override", f"{k}={v}"]
    log = open(os.path.join(tmp, "broker.log"), "wb")
    broker = subprocess.Popen(args, stdout=log, stderr=log)
    try:
        bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "broker did not start"
                time.sleep(0.05)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic("idle", partitions, 1)], timeout_ms=60000)
        admin.close()
        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
        )
        c.assign([TopicPartition("idle", p) for p in range(partitions)])
        # Warm up: positions resolved, the session (if any) made.
        end = time.monotonic() + 5
        while time.monotonic() < end:
            c.poll(timeout_ms=100)
        fetches0 = fetch_requests(metrics)
        cpu0, written0 = proc_cpu_and_written(broker.pid)
        polls = 0
        end = time.monotonic() + seconds
        start = time.monotonic()
        while time.monotonic() < end:
            c.poll(timeout_ms=100)
            polls += 1
        elapsed = time.monotonic() - start
        cpu1, written1 = proc_cpu_and_written(broker.pid)
        fetches = fetch_requests(metrics) - fetches0
        node = next(
            (v for k, v in c.metrics().items() if k.startswith("consumer-node-metrics.node-1")),
            {},
        )
        handlers = list(c._fetcher._session_handlers.values())
        session = handlers[0].next_metadata if handlers else None
        c.close()
        return {
            "slots": slots,
            "cpu_s": cpu1 - cpu0,
            "written": written1 - written0,
            "elapsed": elapsed,
            "fetches": fetches,
            "request_avg": node.get("request-size-avg", 0.0),
            "incoming_rate": node.get("incoming-byte-rate", 0.0),
            "session": (session.session_id, session.epoch) if session else None,
        }
    finally:
        broker.kill()
        broker.wait()


def main() -> None:
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 30
    print(f"# {partitions} idle partitions, one kafka-python consumer, {seconds:.0f} s each")
    for slots in ("1000", "0"):
        r = run(partitions, seconds, slots)
        print(
            f"slots={r['slots']:>4}: broker CPU {r['cpu_s']:.2f} s "
            f"({100 * r['cpu_s'] / r['elapsed']:.1f}% of a core), "
            f"{r['fetches']} fetches, "
            f"{1e3 * r['cpu_s'] / max(r['fetches'], 1):.2f} ms CPU and "
            f"requests {r['request_avg'] / 1024:.1f} KiB on average, "
            f"answers {r['incoming_rate'] * r['elapsed'] / max(r['fetches'], 1) / 1024:.1f} KiB per fetch, "
            f"client session (id, next epoch) {r['session']}"
        )


if __name__ == "__main__":
    main()
