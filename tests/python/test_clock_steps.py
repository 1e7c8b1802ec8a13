"""A step of the nodes' wall clocks (libfaketime, Debian's `faketime`) ends no session:
the active controller's clock moved five minutes ahead fences no broker, and the group
coordinator's moved ahead and back neither expires a member nor holds its timers back, nor
does a member's offset commit, plain or transactional, made while its clock is behind (a
commit counts as the member's heartbeat). Sessions are timed on a monotonic clock, as Kafka's
controller and coordinator time them."""

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import Cluster

LIBS = [
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1"),
]
FENCE = b"fencing broker: its session expired"
EXPIRE = b"session expired; removing the member"


def faketime() -> Path:
    lib = next((p for p in LIBS if p.exists()), None)
    assert lib is not None, "libfaketime is missing (apt-get install faketime; ./test.sh does)"
    return lib


def log_bytes(cluster: Cluster) -> dict[int, bytes]:
    return {i: b.stderr_path.read_bytes() for i, b in cluster.nodes.items()}


def test_a_clock_step_ends_no_session(tmp_path, monkeypatch):
    # Every node reads its wall clock through the preloaded library, from one file.
    shared = tmp_path / "clock"
    shared.write_text("+0s\n")
    monkeypatch.setenv("LD_PRELOAD", str(faketime()))
    monkeypatch.setenv("FAKETIME_TIMESTAMP_FILE", str(shared))
    monkeypatch.setenv("FAKETIME_CACHE_DURATION", "1")
    monkeypatch.setenv("DONT_FAKE_MONOTONIC", "1")
    cluster = Cluster(tmp_path, 3, {"broker.session.timeout.ms": "9000"})
    try:
        monkeypatch.delenv("LD_PRELOAD")
        cluster.wait_registered()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic("steps", 3, 3)])["steps"].result(timeout=30)
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap(),
                "group.id": "steps-group",
                "session.timeout.ms": 10000,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["steps"])
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})

        def work(seconds: float) -> int:
            got = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                producer.produce("steps", b"x")
                producer.poll(0)
                read = [m for m in consumer.consume(100, 0.2) if m.error() is None]
                if read:
                    # Each commit counts as the member's heartbeat at the coordinator.
                    consumer.commit(asynchronous=False)
                got += len(read)
            producer.flush(30)
            return got

        txp = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": "steps-tx"})
        txp.init_transactions(30)

        def commit_in_transaction() -> None:
            """The consumer's positions committed by a transaction (TxnOffsetCommit)."""
            txp.begin_transaction()
            txp.produce("steps", b"tx")
            positions = consumer.position(consumer.assignment())
            txp.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            txp.commit_transaction(30)

        assert work(8) > 0, "the group never consumed"
        assignment = sorted((t.topic, t.partition) for t in consumer.assignment())
        assert assignment, "no assignment before the step"
        before = log_bytes(cluster)
        # Every node's clock five minutes ahead (more than any session timeout), then back:
        # before sessions were monotonic, the controller fenced every broker and the
        # coordinator removed every member as soon as its clock read the step.
        shared.write_text("+300s\n")
        assert work(8) > 0, "nothing consumed while the clocks were ahead"
        shared.write_text("+0s\n")
        assert work(12) > 0, "nothing consumed after the clocks came back"
        # Five minutes behind: a commit timed on the wall clock set the member's session
        # deadline in the timer's past, and the coordinator removed it at the next tick.
        shared.write_text("-300s\n")
        time.sleep(2)
        for _ in range(3):
            commit_in_transaction()
            assert work(4) > 0, "nothing consumed while the clocks were behind"
        shared.write_text("+0s\n")
        assert work(4) > 0, "nothing consumed after the clocks came back again"
        after = log_bytes(cluster)
        for i in cluster.nodes:
            new = after[i][len(before[i]) :]
            assert FENCE not in new, f"node {i} fenced a broker at the step:\n{new[-3000:]!r}"
            assert EXPIRE not in new, f"node {i} expired a member at the step:\n{new[-3000:]!r}"
        assert sorted((t.topic, t.partition) for t in consumer.assignment()) == assignment
        md = admin.list_topics(timeout=10)
        assert len(md.brokers) == 3
        consumer.close()
        txp.flush(10)
    finally:
        cluster.kill()
