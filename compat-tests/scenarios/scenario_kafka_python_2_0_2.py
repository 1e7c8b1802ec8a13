"""The client-library scenario with kafka-python 2.0.2, the last 2.0 release (2020). See scenario.py.

Runs from its own venv (target/venv-kafka-python-2.0.2, set up by setup_old_clients.sh):

    target/venv-kafka-python-2.0.2/bin/python -B -u scenario_kafka_python_2_0_2.py --bootstrap ... --results ...

It reuses scenario_kafka_python.py's steps where 2.0.2 has the same calls (admin, produce and
read-back checks, committed offsets, delete) and has its own where it does not:
- KafkaProducer has no `enable_idempotence` (idempotence came in kafka-python 2.1): the
  producer is acks=all without it, and the produce row says so;
- KafkaConsumer.commit() and position() take no `timeout_ms` (added in 2.1).
The api version kafka-python detects from ApiVersions (`api_version=None`, its default) is
reported in the create-topic row.
"""

from __future__ import annotations

import sys
import threading
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer

import scenario as sc
import scenario_kafka_python as kp

CLIENT = "kafka-python-2.0.2"
# scenario_kafka_python's steps build and check message values with its module's CLIENT.
kp.CLIENT = CLIENT


class Run(kp.Run):
    def create_topic(self) -> str:
        detail = super().create_topic()
        detected = ".".join(map(str, self.admin.config["api_version"]))
        return f"{detail}; kafka-python {kafka.__version__} detected broker api_version {detected}"

    def producer(self) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            linger_ms=5,
            request_timeout_ms=kp.REQUEST_TIMEOUT_MS,
        )

    def produce(self) -> str:
        p = self.producer()
        try:
            start = time.monotonic()
            acks = self.send(p, range(sc.MESSAGES))
            took = time.monotonic() - start
            detected = ".".join(map(str, p.config["api_version"]))
        finally:
            p.close(timeout=10)
        self.produced = sc.check_acks(acks, range(sc.MESSAGES))
        counts = sorted(self.produced.end_offsets.values())
        return (
            f"{sc.MESSAGES} acked (acks=all; no idempotence, which kafka-python 2.0.2 does not have) in "
            f"{took:.1f}s on {sc.PARTITIONS} partitions ({counts[0]}..{counts[-1]} each), offsets 0..n-1, "
            f"each of {sc.KEYS} keys on one partition; producer api_version {detected}"
        )

    def group_consume(self) -> str:
        stop = threading.Event()
        records: dict[str, list[sc.Record]] = {"m1": [], "m2": []}
        assignments: dict[str, set[int]] = {"m1": set(), "m2": set()}
        errors: list[str] = []
        commits = {"ok": 0, "failed": 0}

        def member(name: str) -> None:
            c = None
            try:
                c = self.consumer(self.group, "earliest", name)
                while not stop.is_set():
                    got = 0
                    for batch in c.poll(timeout_ms=200, max_records=500).values():
                        for m in batch:
                            records[name].append(kp.to_record(m))
                            got += 1
                    assignments[name] = {tp.partition for tp in c.assignment()}
                    if got:
                        try:
                            c.commit()  # 2.0.2: synchronous, no timeout argument
                            commits["ok"] += 1
                        except Exception as e:  # noqa: BLE001 - a commit racing a rebalance
                            commits["failed"] += 1
                            print(f"{name}: commit failed: {e}", file=sys.stderr)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{name}: {type(e).__name__}: {e}")
            finally:
                if c is not None:
                    c.close()

        threads = [threading.Thread(target=member, args=(n,), daemon=True) for n in records]
        for t in threads:
            t.start()

        def done() -> bool:
            if errors:
                return True
            seen = {r.seq() for rs in list(records.values()) for r in list(rs)}
            return len(seen) >= sc.MESSAGES and all(assignments.values())

        try:
            sc.wait_for("the group to read every message with both members assigned", done)
        finally:
            final = {n: set(a) for n, a in assignments.items()}
            stop.set()
            for t in threads:
                t.join(timeout=30)
        assert not errors, f"consumer errors: {errors[:3]}"
        detail = sc.check_group_read(CLIENT, records, final, self.produced, range(sc.MESSAGES))
        return f"{detail}; {commits['ok']} sync commits ({commits['failed']} failed)"

    def latest_group(self) -> str:
        c = self.consumer(f"{self.topic}-latest", "latest", "latest")
        early: list[sc.Record] = []
        records: list[sc.Record] = []

        def poll_into(sink: list[sc.Record]) -> None:
            for batch in c.poll(timeout_ms=200, max_records=500).values():
                sink.extend(kp.to_record(m) for m in batch)

        try:

            def assigned() -> bool:
                poll_into(early)
                return len(c.assignment()) == sc.PARTITIONS

            sc.wait_for("6 partitions assigned", assigned)
            # position() resolves auto.offset.reset (ListOffsets latest); 2.0.2: no timeout argument.
            positions = {tp.partition: c.position(tp) for tp in c.assignment()}
            assert not early, f"read {len(early)} old messages before anything new was produced"
            assert positions == self.produced.end_offsets, (
                f"positioned at {dict(sorted(positions.items()))}, end offsets {self.produced.end_offsets}"
            )
            p = self.producer()
            try:
                self.send(p, range(sc.MESSAGES, sc.MESSAGES + sc.NEW_MESSAGES))
            finally:
                p.close(timeout=10)

            def got_all() -> bool:
                poll_into(records)
                return len(records) >= sc.NEW_MESSAGES

            sc.wait_for(f"{sc.NEW_MESSAGES} new messages", got_all)
            quiet_end = time.monotonic() + sc.QUIET_S
            while time.monotonic() < quiet_end:
                poll_into(records)
        finally:
            c.close()
        return "positioned at the end offsets; " + sc.check_latest(CLIENT, records)


def main() -> int:
    args = sc.parse_args(CLIENT)
    s = sc.Scenario(CLIENT, args.results)
    if kafka.__version__ != "2.0.2":
        for step in sc.STEPS:
            s.fail(step, f"kafka-python {kafka.__version__} imported, expected 2.0.2 (not its venv?)")
        return s.finish()
    try:
        run = Run(args.bootstrap, args.topic)
    except Exception as e:  # noqa: BLE001 - KafkaAdminClient connects in its constructor
        s.fail("create-topic", f"KafkaAdminClient: {type(e).__name__}: {e}")
        return s.finish()
    try:
        s.run("create-topic", run.create_topic)
        s.run("list-topics", run.list_topics, needs=("create-topic",))
        s.run("describe-configs", run.describe_configs, needs=("create-topic",))
        s.run("produce", run.produce, needs=("create-topic",))
        s.run("group-consume", run.group_consume, needs=("produce",))
        s.run("committed-offsets", run.committed_offsets, needs=("group-consume",))
        s.run("latest-group", run.latest_group, needs=("produce",))
        s.run("delete-topic", run.delete_topic, needs=("create-topic",))
    finally:
        run.close()
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
