#!/usr/bin/env python3
"""Recovery time as a figure, on three combined nodes from config/cluster.

Two measurements, each repeated ROUNDS times (the killed node is restarted and the cluster
is given time to settle between rounds):

- leader: a producer (confluent-kafka, acks=all, idempotent, one record per millisecond)
  writes to a topic of 6 partitions, RF 3, min.insync.replicas=2. The leader of partition 0
  is killed with SIGKILL. Reported: the time from the kill until the first acknowledgement of
  a record of partition 0 sent after the kill, and the longest gap between two
  acknowledgements of partition 0 around it. Each row says whether the killed leader was also
  the active controller. 2 x ROUNDS rounds.
- controller: the active controller (from `strata admin cluster controller`) is killed with
  SIGKILL, then CreateTopics is sent again and again (a new name each time, 1 s timeout)
  until one succeeds. Reported: the time from the kill until that success. A topic that
  already exists counts as a success: its creation was committed and only its answer was
  lost.

Usage: target/venv/bin/python bench/scripts/recovery.py [ROUNDS] [--override KEY=VALUE]...
(ROUNDS defaults to 3; each --override goes to every node, e.g. broker.session.timeout.ms=3000)
Needs: cargo build --release --bin strata; confluent-kafka (tests/python/requirements.txt).
Everything binds to 127.0.0.1; every process started is killed at the end; data goes under
a temporary directory. Every wait is bounded.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRATA = os.path.join(ROOT, "target", "release", "strata")
PORTS = {1: 19092, 2: 29092, 3: 39092}
BOOTSTRAP = ",".join(f"127.0.0.1:{p}" for p in PORTS.values())
PARTITIONS = 6


class Cluster:
    def __init__(self, work, overrides):
        self.work = work
        self.overrides = overrides
        self.procs = {}

    def start(self, n):
        log = open(os.path.join(self.work, f"node{n}.log"), "ab")
        conf = os.path.join(ROOT, "config", "cluster", f"node{n}.properties")
        args = [STRATA, conf]
        for o in self.overrides:
            args += ["--override", o]
        self.procs[n] = subprocess.Popen(
            args, cwd=self.work, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", PORTS[n]), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"node {n} did not open its port")

    def kill9(self, n):
        self.procs[n].send_signal(signal.SIGKILL)
        self.procs[n].wait(timeout=30)

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)


def admin():
    return AdminClient({"bootstrap.servers": BOOTSTRAP, "socket.timeout.ms": 2000})


def active_controller():
    """The active controller's id, as `strata admin cluster controller` prints it."""
    for port in PORTS.values():
        try:
            out = subprocess.run(
                [STRATA, "admin", "--bootstrap-server", f"127.0.0.1:{port}", "cluster",
                 "controller"],
                capture_output=True, text=True, timeout=10,
            ).stdout
        except subprocess.TimeoutExpired:
            continue
        for word in out.replace(":", " ").split():
            if word.isdigit() and int(word) in PORTS:
                return int(word)
    raise RuntimeError("no broker named the active controller")


def leader_of(topic, partition, exclude=()):
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            md = admin().list_topics(topic=topic, timeout=5)
            p = md.topics[topic].partitions.get(partition)
            if p is not None and p.leader in PORTS and p.leader not in exclude and not p.error:
                return p.leader
        except Exception:  # noqa: BLE001 - a node is down; ask again
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no leader for {topic}-{partition}")


def create_topic(name, timeout_s):
    """True once the topic exists (created now or already there)."""
    client = admin()  # held until the answer: a dropped client cancels its requests
    fut = client.create_topics(
        [NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
        operation_timeout=timeout_s, request_timeout=timeout_s,
    )[name]
    try:
        fut.result(timeout=timeout_s + 1)
        return True
    except Exception as e:  # noqa: BLE001
        err = e.args[0] if e.args else None
        if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return True
        return False


def wait_all_in_sync(topic, timeout_s=90):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            md = admin().list_topics(topic=topic, timeout=5)
            parts = md.topics[topic].partitions.values()
            if len(parts) == PARTITIONS and all(len(p.isrs) == 3 for p in parts):
                return True
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.5)
    return False


class Load:
    """One record per millisecond to partition 0 (and the others), acks=all."""

    def __init__(self, topic):
        self.topic = topic
        self.p = Producer({
            "bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True,
            "linger.ms": 0, "message.timeout.ms": 60000, "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
        })
        self.acks = []  # (ack monotonic time, send monotonic time) for partition 0
        self.failed = 0
        self.stop = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            sent = time.monotonic()
            for part in range(PARTITIONS):
                def cb(err, _msg, sent=sent, part=part):
                    now = time.monotonic()
                    with self.lock:
                        if err is not None:
                            self.failed += 1
                        elif part == 0:
                            self.acks.append((now, sent))
                try:
                    self.p.produce(self.topic, b"x" * 100, partition=part, on_delivery=cb)
                except BufferError:
                    pass
            self.p.poll(0)
            time.sleep(0.001)
        self.p.flush(30)

    def close(self):
        self.stop = True
        self.thread.join(60)


def leader_round(cluster, load, topic):
    ctrl = active_controller()
    leader = leader_of(topic, 0)
    time.sleep(1)
    t0 = time.monotonic()
    cluster.kill9(leader)
    deadline = t0 + 60
    first = None
    while time.monotonic() < deadline and first is None:
        time.sleep(0.05)
        with load.lock:
            later = [a for a, s in load.acks if s >= t0]
        if later:
            first = min(later) - t0
    time.sleep(1)
    with load.lock:
        around = sorted(a for a, _ in load.acks if t0 - 5 <= a)
    gap = max((b - a for a, b in zip(around, around[1:])), default=None)
    cluster.start(leader)
    wait_all_in_sync(topic)
    return leader, leader == ctrl, first, gap


def controller_round(cluster, k):
    ctrl = active_controller()
    time.sleep(1)
    t0 = time.monotonic()
    cluster.kill9(ctrl)
    took = None
    i = 0
    while time.monotonic() - t0 < 60:
        i += 1
        if create_topic(f"recovery-ctl-{k}-{i}", 1.0):
            took = time.monotonic() - t0
            break
    cluster.start(ctrl)
    time.sleep(3)
    return ctrl, took, i


def fmt(x):
    return "-" if x is None else f"{x:.2f} s"


def main():
    args = sys.argv[1:]
    rounds = int(args.pop(0)) if args and args[0].isdigit() else 3
    overrides = [v for k, v in zip(args, args[1:]) if k == "--override"]
    print(f"nodes: config/cluster/node{{1,2,3}}.properties {' '.join(overrides) or '(as shipped)'}\n")
    work = tempfile.mkdtemp(prefix="strata-recovery.")
    cluster = Cluster(work, overrides)
    try:
        for n in PORTS:
            cluster.start(n)
        deadline = time.time() + 60
        while not create_topic("recovery", 5):
            if time.time() > deadline:
                raise RuntimeError("could not create the topic")
            time.sleep(0.5)
        wait_all_in_sync("recovery")
        load = Load("recovery")
        time.sleep(3)

        print("## kill -9 of partition 0's leader until acks=all produce is acknowledged again")
        print("| round | killed | was controller | first ack after the kill | longest ack gap |")
        print("|---:|---:|---|---:|---:|")
        for done in range(1, 2 * rounds + 1):
            node, was_ctrl, first, gap = leader_round(cluster, load, "recovery")
            print(f"| {done} | {node} | {'yes' if was_ctrl else 'no'} | {fmt(first)} | {fmt(gap)} |",
                  flush=True)
        load.close()
        print(f"\nfailed deliveries: {load.failed}\n")

        print("## kill -9 of the active controller until a CreateTopics succeeds")
        print("| round | killed | CreateTopics succeeded after | attempts |")
        print("|---:|---:|---:|---:|")
        for k in range(1, rounds + 1):
            node, took, attempts = controller_round(cluster, k)
            print(f"| {k} | {node} | {fmt(took)} | {attempts} |", flush=True)
    finally:
        cluster.stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
