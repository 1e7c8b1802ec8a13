"""Exactly-once under faults, run by hand (docs/RELIABILITY.md):

    target/venv/bin/python tests/python/eos_faults.py [--faults 20] [--records 20000]

Three `strata` nodes on 127.0.0.1 (the pytest fixture's Cluster, in a temporary directory).
An input topic of `--records` numbered records (3 partitions, replication factor 3,
min.insync.replicas 2) is copied to an output topic by a consume-transform-produce loop
with confluent-kafka: a transactional producer, `send_offsets_to_transaction` and a
read_committed consumer, transactions of at most `--batch` records `--pause` s apart, so
that the copy runs through the faults. Meanwhile a fault loop kills a
random node with SIGKILL every few seconds and starts it again, one node down at a time
(`--faults` times, each bounded). The loop handles errors as an application must: an abortable error aborts and
rewinds the consumer to the committed offsets, a fatal one (fenced) makes a new producer
and consumer. At the end, a read_committed consumer reads the output: every input record
must be there exactly once. Bounded: the whole run stops after `--limit` seconds.
"""

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from conftest import Cluster  # noqa: E402

PARTITIONS = 3


def make_clients(bootstrap: str):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-faults",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition("in", p) for p in range(PARTITIONS)])
    rewind(consumer)
    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": "eos-faults-app",
        "transaction.timeout.ms": 30000,
    }
    if os.environ.get("EOS_DEBUG"):
        conf["debug"] = os.environ["EOS_DEBUG"]
    producer = Producer(conf)
    producer.init_transactions(60)
    return consumer, producer


SLOW_REWINDS: list[float] = []


def rewind(consumer) -> None:
    """Back to the group's committed offsets (the start where there are none), asking again
    while a fault leaves the group's coordinator unreachable (up to 120 s)."""
    began = time.time()
    while True:
        try:
            committed = consumer.committed([TopicPartition("in", p) for p in range(PARTITIONS)], 10)
            break
        except KafkaException:
            if time.time() - began > 120:
                raise
    if time.time() - began > 5:
        SLOW_REWINDS.append(round(time.time() - began, 1))
    for tp in committed:
        consumer.seek(TopicPartition("in", tp.partition, max(tp.offset, 0)))


def caught_up(consumer, ends: list[int]) -> bool:
    """Whether the group's committed offsets reached the input's end."""
    try:
        committed = consumer.committed([TopicPartition("in", p) for p in range(PARTITIONS)], 10)
    except KafkaException:
        return False
    return all(tp.offset == ends[tp.partition] for tp in committed)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--faults", type=int, default=20)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--interval", type=float, default=4.0, help="seconds between faults")
    ap.add_argument("--batch", type=int, default=50, help="records per transaction at most")
    ap.add_argument("--pause", type=float, default=0.1, help="seconds between transactions")
    ap.add_argument("--limit", type=float, default=900.0, help="bound on the whole run, s")
    args = ap.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp), 3, {"transaction.state.log.num.partitions": "6"})
        try:
            return run(cluster, args, started)
        finally:
            cluster.kill()


def run(cluster: Cluster, args, started: float) -> int:
    cluster.wait_registered()
    bootstrap = cluster.bootstrap()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for t in ("in", "out")
    ]
    for f in admin.create_topics(topics).values():
        f.result(60)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(args.records):
        plain.produce("in", value=str(i), partition=i % PARTITIONS)
        if i % 10000 == 0:
            plain.poll(0)
    assert plain.flush(120) == 0, "input not fully written"

    stop = threading.Event()
    faults: list[str] = []

    def fault_loop():
        rng = random.Random(7)
        while not stop.is_set() and len(faults) < args.faults:
            if stop.wait(args.interval):
                return
            node = rng.choice(sorted(cluster.nodes))
            cluster.node(node).kill9()
            faults.append(f"node {node} at {time.time() - started:.1f}s")
            stop.wait(rng.uniform(0.5, 3.0))
            cluster.node(node).restart()
            # One node down at a time, as replication factor 3 with min.insync.replicas 2
            # tolerates: the next fault waits until all three are registered again.
            cluster.wait_registered(120)

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-faults-probe"})
    ends = [probe.get_watermark_offsets(TopicPartition("in", p), 30)[1] for p in range(PARTITIONS)]
    probe.close()
    assert sum(ends) == args.records, f"input ends {ends}"
    faulter = threading.Thread(target=fault_loop, daemon=True)
    faulter.start()
    consumer, producer = make_clients(bootstrap)
    copied = commits = aborts = fatal = 0
    copied_at = None
    done_at = None
    while time.time() - started < args.limit:
        batch = [m for m in consumer.consume(args.batch, 1.0) if not m.error()]
        if not batch:
            if len(faults) >= args.faults and caught_up(consumer, ends):
                done_at = time.time()
                break
            continue
        try:
            producer.begin_transaction()
            for m in batch:
                producer.produce("out", value=m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
            )
            producer.commit_transaction(60)
            commits += 1
            copied += len(batch)
            if copied >= args.records and copied_at is None:
                copied_at = time.time() - started
            time.sleep(args.pause)
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                aborts += 1
                try:
                    producer.abort_transaction(60)
                except KafkaException:
                    pass
                rewind(consumer)
            elif err.retriable():
                # The commit's outcome is unknown: commit_transaction may be called again.
                try:
                    producer.commit_transaction(60)
                    commits += 1
                    copied += len(batch)
                except KafkaException:
                    aborts += 1
                    try:
                        producer.abort_transaction(60)
                    except KafkaException:
                        pass
                    rewind(consumer)
            else:
                fatal += 1
                consumer.close()
                consumer, producer = make_clients(bootstrap)
    stop.set()
    faulter.join(30)
    consumer.close()
    print(f"faults: {len(faults)}: {', '.join(faults)}")
    print(f"rewinds that took over 5 s: {SLOW_REWINDS}")
    print(
        f"transactions committed {commits}, aborted {aborts}, fatal errors {fatal}; "
        f"input first copied through at {copied_at}s"
    )
    if done_at is None:
        print(f"FAIL: not done within {args.limit} s (copied about {copied})")
        return 1

    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-faults-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition("out", p, 0) for p in range(PARTITIONS)])
    seen: dict[int, int] = {}
    quiet = time.time() + 10
    deadline = time.time() + 120
    while time.time() < deadline and time.time() < quiet:
        m = reader.poll(0.5)
        if m is None or m.error():
            continue
        v = int(m.value())
        seen[v] = seen.get(v, 0) + 1
        quiet = time.time() + 10
    reader.close()
    missing = [i for i in range(args.records) if i not in seen]
    dups = {v: n for v, n in seen.items() if n > 1}
    print(
        f"output: {sum(seen.values())} records, {len(seen)} distinct of {args.records}; "
        f"missing {len(missing)}, duplicated {len(dups)}; run {done_at - started:.0f} s"
    )
    if missing or dups:
        print(f"FAIL: missing {missing[:10]} duplicated {list(dups.items())[:10]}")
        return 1
    print("PASS: every input record in the output exactly once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
