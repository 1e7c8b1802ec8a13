"""The client-library scenario with kafka-python (pure Python). See scenario.py.

scenario_kafka_python_2_0_2.py subclasses Run for kafka-python 2.0.2, overriding the hooks
(`client`, `PRODUCE_SETTINGS`, `producer_config`, `commit`, `position`) where 2.0.2's calls differ.
"""

from __future__ import annotations

import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

import scenario as sc

CLIENT = "kafka-python"
REQUEST_TIMEOUT_MS = 30_000
# DescribeConfigs v1+ config_source: 1 = DYNAMIC_TOPIC_CONFIG, 5 = DEFAULT_CONFIG.
DYNAMIC_TOPIC_CONFIG = 1


class Run:
    # The client name in message values and rows.
    client = CLIENT
    # How the produce step's messages were sent, for its row.
    PRODUCE_SETTINGS = "acks=all, enable_idempotence"

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap = bootstrap
        self.topic = topic
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
        self.produced: sc.Produced | None = None
        self.group = f"{topic}-group"

    def close(self) -> None:
        self.admin.close()

    # ---- admin ----------------------------------------------------------------------------

    def described(self) -> dict | None:
        for t in self.admin.describe_topics([self.topic]):
            if t["topic"] == self.topic and t["error_code"] == 0:
                return t
        return None

    def create_topic(self) -> str:
        new = NewTopic(self.topic, sc.PARTITIONS, 1, topic_configs={"retention.ms": sc.RETENTION_MS})
        resp = self.admin.create_topics([new], timeout_ms=REQUEST_TIMEOUT_MS)
        errs = [e for e in resp.topic_errors if e[1] != 0]
        assert not errs, f"CreateTopics errors: {errs}"

        def led() -> dict | None:
            t = self.described()
            if t and all(p["error_code"] == 0 and p["leader"] >= 0 for p in t["partitions"]):
                return t
            return None

        t = sc.wait_for(f"{self.topic} in metadata with leaders", led)
        n = len(t["partitions"])
        assert n == sc.PARTITIONS, f"metadata shows {n} partitions, expected {sc.PARTITIONS}"
        return f"CreateTopics v{resp.API_VERSION} ok; metadata shows {n} partitions, each with a leader"

    def list_topics(self) -> str:
        names = self.admin.list_topics()
        assert self.topic in names, f"{self.topic} not in {sorted(names)}"
        t = self.described()
        assert t is not None and len(t["partitions"]) == sc.PARTITIONS, f"described as {t}"
        user = [n for n in names if not n.startswith("__")]
        return f"listed among {len(user)} topic(s); described with {sc.PARTITIONS} partitions"

    def describe_configs(self) -> str:
        res = ConfigResource(ConfigResourceType.TOPIC, self.topic)
        responses = self.admin.describe_configs([res])
        resources = [r for resp in responses for r in resp.resources]
        assert len(resources) == 1, f"{len(resources)} resources in the response"
        error_code, error_message, _rtype, name, entries = resources[0][:5]
        assert error_code == 0, f"error {error_code}: {error_message}"
        assert name == self.topic, f"resource {name}"
        # (name, value, read_only, config_source | is_default, is_sensitive, [synonyms])
        by_name = {e[0]: e for e in entries}
        ret, pol = by_name.get("retention.ms"), by_name.get("cleanup.policy")
        assert ret is not None, f"no retention.ms among {sorted(by_name)}"
        assert ret[1] == sc.RETENTION_MS, f"retention.ms = {ret[1]}, set to {sc.RETENTION_MS}"
        version = responses[0].API_VERSION
        if version >= 1:
            assert ret[3] == DYNAMIC_TOPIC_CONFIG, f"retention.ms config_source {ret[3]}"
        else:
            assert ret[3] is False, f"retention.ms is_default {ret[3]}"
        assert pol is not None and pol[1] == "delete", f"cleanup.policy = {pol and pol[1]}"
        return f"DescribeConfigs v{version}: {len(entries)} entries; retention.ms={ret[1]} (topic config), cleanup.policy=delete"

    def delete_topic(self) -> str:
        resp = self.admin.delete_topics([self.topic], timeout_ms=REQUEST_TIMEOUT_MS)
        errs = [e for e in resp.topic_error_codes if e[1] != 0]
        assert not errs, f"DeleteTopics errors: {errs}"
        sc.wait_for(f"{self.topic} gone from the topic list", lambda: self.topic not in self.admin.list_topics())
        time.sleep(1.0)
        assert self.topic not in self.admin.list_topics(), "topic came back"
        return "DeleteTopics ok; the topic is no longer listed"

    # ---- produce --------------------------------------------------------------------------

    def producer_config(self) -> dict:
        return dict(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )

    def producer(self) -> KafkaProducer:
        return KafkaProducer(**self.producer_config())

    def send(self, p: KafkaProducer, indexes: range) -> dict[int, tuple[int, int]]:
        futures = {
            i: p.send(
                self.topic,
                key=sc.key_of(i).encode(),
                value=sc.value_of(self.client, i).encode(),
                headers=sc.headers_of(self.client, i),
            )
            for i in indexes
        }
        p.flush(timeout=sc.STEP_TIMEOUT_S)
        acks = {}
        for i, f in futures.items():
            md = f.get(timeout=sc.STEP_TIMEOUT_S)
            acks[i] = (md.partition, md.offset)
        return acks

    def produce(self) -> str:
        p = self.producer()
        try:
            start = time.monotonic()
            acks = self.send(p, range(sc.MESSAGES))
            took = time.monotonic() - start
        finally:
            p.close(timeout=10)
        self.produced = sc.check_acks(acks, range(sc.MESSAGES))
        counts = sorted(self.produced.end_offsets.values())
        return (
            f"{sc.MESSAGES} acked ({self.PRODUCE_SETTINGS}) in {took:.1f}s on {sc.PARTITIONS} partitions "
            f"({counts[0]}..{counts[-1]} each), offsets 0..n-1, each of {sc.KEYS} keys on one partition"
        )

    # ---- consume --------------------------------------------------------------------------

    def consumer(self, group: str, reset: str, member: str) -> KafkaConsumer:
        return KafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=group,
            client_id=member,
            auto_offset_reset=reset,
            enable_auto_commit=False,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )

    def commit(self, c: KafkaConsumer) -> None:
        """A synchronous commit of what `c` has consumed."""
        c.commit(timeout_ms=REQUEST_TIMEOUT_MS)

    def position(self, c: KafkaConsumer, tp) -> int:
        """`c`'s position on `tp` (resolving auto.offset.reset if it has none yet)."""
        return c.position(tp, timeout_ms=REQUEST_TIMEOUT_MS)

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
                            records[name].append(to_record(m))
                            got += 1
                    assignments[name] = {tp.partition for tp in c.assignment()}
                    if got:
                        try:
                            self.commit(c)
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
        detail = sc.check_group_read(self.client, records, final, self.produced, range(sc.MESSAGES))
        return f"{detail}; {commits['ok']} sync commits ({commits['failed']} failed)"

    def committed_offsets(self) -> str:
        offsets = self.admin.list_consumer_group_offsets(self.group)
        committed = {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == self.topic}
        return "OffsetFetch via admin: " + sc.check_committed(committed, self.produced)

    def latest_group(self) -> str:
        c = self.consumer(f"{self.topic}-latest", "latest", "latest")
        early: list[sc.Record] = []
        records: list[sc.Record] = []

        def poll_into(sink: list[sc.Record]) -> None:
            for batch in c.poll(timeout_ms=200, max_records=500).values():
                sink.extend(to_record(m) for m in batch)

        try:

            def assigned() -> bool:
                poll_into(early)
                return len(c.assignment()) == sc.PARTITIONS

            sc.wait_for("6 partitions assigned", assigned)
            # position() resolves auto.offset.reset (ListOffsets latest) for each partition.
            positions = {tp.partition: self.position(c, tp) for tp in c.assignment()}
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
        return "positioned at the end offsets; " + sc.check_latest(self.client, records)


def to_record(m) -> sc.Record:
    return sc.Record(
        partition=m.partition,
        offset=m.offset,
        key=m.key,
        value=m.value,
        headers=[(k, v) for k, v in (m.headers or [])],
    )


def main(run_type: type[Run] = Run) -> int:
    args = sc.parse_args(run_type.client)
    s = sc.Scenario(run_type.client, args.results)
    try:
        run = run_type(args.bootstrap, args.topic)
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
