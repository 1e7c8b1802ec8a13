"""Exactly-once under faults, run by hand (docs/RELIABILITY.md):

    target/venv/bin/python tests/python/eos_faults.py [--faults 21] [--records 20000]

Three `strata` nodes on 127.0.0.1 (the pytest fixture's Cluster, in a temporary directory).
An input topic of `--records` numbered records (3 partitions, replication factor 3,
min.insync.replicas 2; record i in partition i % 3) is copied to an output topic, partition
for partition, by a consume-transform-produce application in confluent-kafka, run as a child
process of this script: a transactional producer, `send_offsets_to_transaction` and a
read_committed consumer, transactions of at most `--batch` records `--pause` s apart.

Meanwhile the fault loop SIGKILLs, in turn, the node that coordinates the application's
transactional id (asked with `strata admin transactions describe`), the node that leads a
random output partition, and the application itself, `--faults` times in all, one at a time:
a killed node is started again and the next fault waits until all three are registered; a
killed application is started again at once (its `init_transactions` fences the killed
instance and aborts its open transaction). The application handles errors as one must: an
abortable error aborts and rewinds the consumer to the committed offsets, a fatal one makes a
new producer and consumer. It logs each transaction it commits.

At the end the output is read with read_committed and checked, and each count reported:
every input record exactly once (missing, duplicated), none of an aborted transaction visible
(records read with read_uncommitted but not with read_committed are the aborted ones; none
may be in the read_committed view twice or out of place), every output partition in the
input's order, and every record of a transaction the application saw committed present.
Bounded: the run stops after `--limit` seconds.
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 3
APP_ID = "eos-faults-app"
GROUP = "eos-faults"


# ---- the application (a child process) ---------------------------------------------------


def make_clients(bootstrap: str):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    rewind(consumer)
    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": APP_ID,
        "transaction.timeout.ms": 30000,
    }
    if os.environ.get("EOS_DEBUG"):
        conf["debug"] = os.environ["EOS_DEBUG"]
    producer = Producer(conf)
    producer.init_transactions(60)
    return consumer, producer


def committed(consumer) -> list[TopicPartition]:
    """The group's committed offsets, asked again while a fault leaves the group's
    coordinator unreachable (up to 120 s)."""
    began = time.time()
    while True:
        try:
            return consumer.committed([TopicPartition("in", p) for p in range(PARTITIONS)], 10)
        except KafkaException:
            if time.time() - began > 120:
                raise


def rewind(consumer) -> None:
    """Back to the group's committed offsets (the start where there are none), by assigning
    the partitions at them (a seek right after an assignment fails with _STATE)."""
    consumer.assign(
        [TopicPartition("in", tp.partition, max(tp.offset, 0)) for tp in committed(consumer)]
    )


def app(args) -> int:
    ends = [int(e) for e in args.ends.split(",")]
    log = open(args.log, "a", buffering=1)
    consumer, producer = make_clients(args.bootstrap)
    while True:
        batch = [m for m in consumer.consume(args.batch, 1.0) if not m.error()]
        if not batch:
            if all(tp.offset == ends[tp.partition] for tp in committed(consumer)):
                log.write("done\n")
                return 0
            continue
        try:
            producer.begin_transaction()
            for m in batch:
                producer.produce("out", value=m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
            )
            producer.commit_transaction(60)
            log.write("commit " + ",".join(m.value().decode() for m in batch) + "\n")
            time.sleep(args.pause)
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                log.write("abort\n")
                try:
                    producer.abort_transaction(60)
                except KafkaException:
                    pass
                rewind(consumer)
            elif err.retriable():
                # The commit's outcome is unknown: commit_transaction may be called again.
                try:
                    producer.commit_transaction(60)
                    log.write("commit " + ",".join(m.value().decode() for m in batch) + "\n")
                except KafkaException:
                    log.write("abort\n")
                    try:
                        producer.abort_transaction(60)
                    except KafkaException:
                        pass
                    rewind(consumer)
            else:
                log.write(f"fatal {err.code()}\n")
                consumer.close()
                consumer, producer = make_clients(args.bootstrap)


# ---- the run -----------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", action="store_true", help="(internal) run the application")
    ap.add_argument("--bootstrap")
    ap.add_argument("--ends")
    ap.add_argument("--log")
    ap.add_argument("--faults", type=int, default=21)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--interval", type=float, default=4.0, help="seconds between faults")
    ap.add_argument("--batch", type=int, default=50, help="records per transaction at most")
    ap.add_argument("--pause", type=float, default=0.1, help="seconds between transactions")
    ap.add_argument("--limit", type=float, default=1200.0, help="bound on the whole run, s")
    args = ap.parse_args()
    if args.app:
        return app(args)
    from conftest import Cluster, strata_bin

    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp), 3, {"transaction.state.log.num.partitions": "6"})
        try:
            return run(cluster, args, started, Path(tmp), str(strata_bin()))
        finally:
            cluster.kill()


def coordinator_of(strata: str, bootstrap: str) -> int | None:
    out = subprocess.run(
        [strata, "admin", "--bootstrap-server", bootstrap, "transactions", "describe",
         "--transactional-id", APP_ID],
        capture_output=True, text=True, timeout=60,
    )
    lines = [line.split() for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or len(lines) < 2 or not lines[1][0].isdigit():
        return None
    return int(lines[1][0])


def leader_of(bootstrap: str, partition: int) -> int | None:
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("out", timeout=10)
        return md.topics["out"].partitions[partition].leader
    except Exception:  # noqa: BLE001 - a fault may leave no node to ask; the caller skips
        return None


def run(cluster, args, started: float, tmp: Path, strata: str) -> int:
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
    ends = [sum(1 for i in range(args.records) if i % PARTITIONS == p) for p in range(PARTITIONS)]

    app_log = tmp / "app.log"
    app_out = open(tmp / "app.stderr", "ab")

    def start_app():
        return subprocess.Popen(
            [sys.executable, __file__, "--app", "--bootstrap", bootstrap,
             "--ends", ",".join(map(str, ends)), "--log", str(app_log),
             "--batch", str(args.batch), "--pause", str(args.pause)],
            stdout=app_out, stderr=app_out, env=dict(os.environ),
        )

    worker = start_app()
    faults: list[str] = []
    crashes: list[str] = []

    def app_running() -> bool:
        """Whether the application still runs; one that stopped with an error (an
        exception its loop does not handle) is counted and started again."""
        nonlocal worker
        if worker.poll() is None:
            return True
        if worker.returncode == 0:
            return False
        crashes.append(f"exit {worker.returncode} at {time.time() - started:.1f}s")
        worker = start_app()
        return True
    kinds = ["coordinator", "leader", "application"]
    rng = random.Random(7)
    while len(faults) < args.faults and time.time() - started < args.limit:
        time.sleep(args.interval)
        if not app_running():
            break  # done before the faults ran out
        kind = kinds[len(faults) % len(kinds)]
        at = time.time() - started
        if kind == "application":
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            faults.append(f"application at {at:.1f}s")
            worker = start_app()
            continue
        if kind == "coordinator":
            node = coordinator_of(strata, bootstrap)
        else:
            p = rng.randrange(PARTITIONS)
            node = leader_of(bootstrap, p)
            kind = f"leader of out-{p}"
        if node is None or node < 0:
            continue
        cluster.node(node).kill9()
        faults.append(f"{kind} (node {node}) at {at:.1f}s")
        time.sleep(rng.uniform(0.5, 3.0))
        cluster.node(node).restart()
        cluster.wait_registered(120)
    faults_done_at = time.time() - started
    while app_running() and time.time() - started < args.limit:
        time.sleep(1)
    if worker.poll() is None:
        worker.kill()
        print(f"FAIL: the application did not finish within {args.limit} s")
        return 1
    done_at = time.time() - started
    lines = app_log.read_text().splitlines()
    commits = [line for line in lines if line.startswith("commit ")]
    acked = {int(v) for line in commits for v in line[len("commit "):].split(",")}
    print(f"faults: {len(faults)} (last at {faults_done_at:.0f}s): {'; '.join(faults)}")
    keep = Path(os.environ.get("EOS_LOGS", "/tmp/eos-faults-logs"))
    keep.mkdir(parents=True, exist_ok=True)
    for name in ("app.log", "app.stderr"):
        if (tmp / name).exists():
            (keep / name).write_bytes((tmp / name).read_bytes())
    print(f"application crashes (restarted): {len(crashes)} {crashes}; logs in {keep}")
    print(
        f"application: {len(commits)} transactions seen committed, "
        f"{sum(1 for line in lines if line == 'abort')} aborted, "
        f"{sum(1 for line in lines if line.startswith('fatal'))} fatal errors; done at {done_at:.0f}s"
    )

    def read(isolation: str) -> dict[int, list[int]]:
        reader = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"eos-faults-check-{isolation}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
            }
        )
        reader.assign([TopicPartition("out", p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        quiet = time.time() + 10
        deadline = time.time() + 180
        while time.time() < deadline and time.time() < quiet:
            m = reader.poll(0.5)
            if m is None or m.error():
                continue
            out[m.partition()].append(int(m.value()))
            quiet = time.time() + 10
        reader.close()
        return out

    view = read("read_committed")
    everything = read("read_uncommitted")
    seen: dict[int, int] = {}
    for values in view.values():
        for v in values:
            seen[v] = seen.get(v, 0) + 1
    missing = [i for i in range(args.records) if i not in seen]
    duplicated = {v: n for v, n in seen.items() if n > 1}
    misplaced = sum(1 for p, values in view.items() for v in values if v % PARTITIONS != p)
    disorder = sum(
        1 for values in view.values() for a, b in zip(values, values[1:]) if b <= a
    )
    aborted = sum(len(v) for v in everything.values()) - sum(len(v) for v in view.values())
    lost = sorted(acked - set(seen))
    print(
        f"output (read_committed): {sum(seen.values())} records, {len(seen)} distinct of "
        f"{args.records}; missing {len(missing)}, duplicated {len(duplicated)}, in another "
        f"partition {misplaced}, out of order {disorder}; records of aborted transactions: "
        f"{aborted} in the log, none visible unless counted as duplicated or out of order; "
        f"seen committed by the application but not in the output {len(lost)}"
    )
    if missing or duplicated or misplaced or disorder or lost:
        print(
            f"FAIL: missing {missing[:10]} duplicated {list(duplicated.items())[:10]} "
            f"lost {lost[:10]}"
        )
        return 1
    print("PASS: every input record once, in order, nothing committed lost")
    return 0


if __name__ == "__main__":
    sys.exit(main())
