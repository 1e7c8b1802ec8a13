"""The client-library scenario with confluent-kafka (librdkafka underneath). See scenario.py.

It also imports under confluent-kafka 1.7.0, whose scenario (scenario_confluent_kafka_debian.py)
subclasses Run: names newer than 1.7.0 are imported where they are used, and the hooks
(`client`, `PRODUCE_SETTINGS`, `producer_config`, `committed`, `reading_needs`, `steps`) are
what an older client's subclass overrides.
"""

from __future__ import annotations

import gc
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

import scenario as sc

CLIENT = "confluent-kafka"
REQUEST_TIMEOUT_S = 30.0


class Run:
    # The client name in message values and rows.
    client = CLIENT
    # How the produce step's messages were sent, for its row.
    PRODUCE_SETTINGS = "acks=all, idempotence"

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap = bootstrap
        self.topic = topic
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.produced: sc.Produced | None = None
        self.group = f"{topic}-group"

    # ---- admin ----------------------------------------------------------------------------

    def topic_partitions(self, topic: str) -> int | None:
        md = self.admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return None
        if any(p.error is not None or p.leader < 0 for p in t.partitions.values()):
            return None
        return len(t.partitions)

    def create(self, topic: str, partitions: int, config: dict[str, str]) -> int:
        """Creates `topic`; returns its partition count once metadata shows each with a leader."""
        new = NewTopic(topic, partitions, 1, config=config)
        futures = self.admin.create_topics([new], operation_timeout=REQUEST_TIMEOUT_S)
        futures[topic].result(timeout=REQUEST_TIMEOUT_S)
        return sc.wait_for(f"{topic} in metadata with leaders", lambda: self.topic_partitions(topic))

    def create_topic(self) -> str:
        n = self.create(self.topic, sc.PARTITIONS, {"retention.ms": sc.RETENTION_MS})
        assert n == sc.PARTITIONS, f"metadata shows {n} partitions, expected {sc.PARTITIONS}"
        return f"CreateTopics ok; metadata shows {n} partitions, each with a leader"

    def list_topics(self) -> str:
        md = self.admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        names = sorted(n for n in md.topics if not n.startswith("__"))
        assert self.topic in md.topics, f"{self.topic} not in {names}"
        n = len(md.topics[self.topic].partitions)
        assert n == sc.PARTITIONS, f"listed with {n} partitions"
        return f"listed with {n} partitions among {len(names)} topic(s); {len(md.brokers)} broker(s)"

    def describe_configs(self) -> str:
        # ConfigResource.Type: 1.7.0's name for what 2.x also calls ResourceType.
        res = ConfigResource(ConfigResource.Type.TOPIC, self.topic)
        entries = self.admin.describe_configs([res], request_timeout=REQUEST_TIMEOUT_S)[res].result(
            timeout=REQUEST_TIMEOUT_S
        )
        ret, pol = entries.get("retention.ms"), entries.get("cleanup.policy")
        assert ret is not None, f"no retention.ms among {sorted(entries)}"
        assert ret.value == sc.RETENTION_MS, f"retention.ms = {ret.value}, set to {sc.RETENTION_MS}"
        assert ret.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, f"retention.ms source {ret.source}"
        assert pol is not None and pol.value == "delete", f"cleanup.policy = {pol and pol.value}"
        return (
            f"{len(entries)} entries; retention.ms={ret.value} (DYNAMIC_TOPIC_CONFIG), "
            f"cleanup.policy=delete (default)"
        )

    def delete(self, topics: list[str]) -> None:
        futures = self.admin.delete_topics(topics, operation_timeout=REQUEST_TIMEOUT_S)
        for f in futures.values():
            f.result(timeout=REQUEST_TIMEOUT_S)

    def delete_topic(self) -> str:
        self.delete([self.topic])
        sc.wait_for(
            f"{self.topic} gone from metadata",
            lambda: self.topic not in self.admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics,
        )
        time.sleep(1.0)
        assert self.topic not in self.admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics, "topic came back"
        return "DeleteTopics ok; the topic is no longer listed"

    # ---- produce --------------------------------------------------------------------------

    def producer_config(self) -> dict:
        return {
            "bootstrap.servers": self.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": int(sc.STEP_TIMEOUT_S * 1000),
        }

    def producer(self) -> Producer:
        return Producer(self.producer_config())

    def send(self, p: Producer, indexes: range, topic: str | None = None) -> dict[int, tuple[int, int]]:
        topic = topic or self.topic
        acks: dict[int, tuple[int, int]] = {}
        errors: list[str] = []

        def report(i: int):
            def cb(err, msg):
                if err is not None:
                    errors.append(f"message {i}: {err}")
                elif i in acks:
                    errors.append(f"message {i} acknowledged twice")
                else:
                    acks[i] = (msg.partition(), msg.offset())

            return cb

        for i in indexes:
            while True:
                try:
                    p.produce(
                        topic,
                        key=sc.key_of(i),
                        value=sc.value_of(self.client, i),
                        headers=sc.headers_of(self.client, i),
                        on_delivery=report(i),
                    )
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        left = p.flush(sc.STEP_TIMEOUT_S)
        assert left == 0, f"{left} messages still queued after {sc.STEP_TIMEOUT_S:.0f}s"
        assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"
        return acks

    def produce(self) -> str:
        p = self.producer()
        start = time.monotonic()
        acks = self.send(p, range(sc.MESSAGES))
        took = time.monotonic() - start
        self.produced = sc.check_acks(acks, range(sc.MESSAGES))
        del p
        gc.collect()
        counts = sorted(self.produced.end_offsets.values())
        return (
            f"{sc.MESSAGES} acked ({self.PRODUCE_SETTINGS}) in {took:.1f}s on {sc.PARTITIONS} partitions "
            f"({counts[0]}..{counts[-1]} each), offsets 0..n-1, each of {sc.KEYS} keys on one partition"
        )

    # ---- consume --------------------------------------------------------------------------

    def consumer(self, group: str, reset: str, member: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": group,
                "client.id": member,
                "auto.offset.reset": reset,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )

    def group_consume(self) -> str:
        stop = threading.Event()
        records: dict[str, list[sc.Record]] = {"m1": [], "m2": []}
        assignments: dict[str, set[int]] = {"m1": set(), "m2": set()}
        errors: list[str] = []
        commits = {"ok": 0, "failed": 0}

        def member(name: str) -> None:
            def on_assign(c, parts):
                assignments[name] = {tp.partition for tp in parts}

            def on_revoke(c, parts):
                assignments[name] = set()

            c = self.consumer(self.group, "earliest", name)
            try:
                c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
                while not stop.is_set():
                    batch = c.consume(500, 0.2)
                    got = 0
                    for m in batch:
                        if m.error() is not None:
                            if m.error().code() != KafkaError._PARTITION_EOF:
                                errors.append(f"{name}: {m.error()}")
                            continue
                        records[name].append(to_record(m))
                        got += 1
                    if got:
                        try:
                            c.commit(asynchronous=False)
                            commits["ok"] += 1
                        except KafkaException as e:
                            # A commit racing a rebalance may fail; the offsets check catches
                            # a group that ends up without them.
                            commits["failed"] += 1
                            print(f"{name}: commit failed: {e}", file=sys.stderr)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{name}: {type(e).__name__}: {e}")
            finally:
                c.close()

        threads = [threading.Thread(target=member, args=(n,), daemon=True) for n in records]
        for t in threads:
            t.start()

        def done() -> bool:
            if errors:
                return True
            seen = {r.seq() for rs in records.values() for r in rs}
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

    def committed(self) -> tuple[str, dict[int, int]]:
        """How the group's committed offsets are read (for the row), and them: partition -> offset."""
        from confluent_kafka import ConsumerGroupTopicPartitions  # 2.0+

        req = ConsumerGroupTopicPartitions(self.group)
        res = self.admin.list_consumer_group_offsets([req], request_timeout=REQUEST_TIMEOUT_S)[self.group].result(
            timeout=REQUEST_TIMEOUT_S
        )
        return "admin", {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == self.topic}

    def committed_offsets(self) -> str:
        how, committed = self.committed()
        return f"OffsetFetch via {how}: " + sc.check_committed(committed, self.produced)

    def latest_group(self) -> str:
        c = self.consumer(f"{self.topic}-latest", "latest", "latest")
        assigned: set[int] = set()
        eof_at: dict[int, int] = {}
        early: list[sc.Record] = []
        records: list[sc.Record] = []

        def on_assign(cons, parts):
            assigned.update(tp.partition for tp in parts)

        def poll_into(sink: list[sc.Record]) -> None:
            for m in c.consume(500, 0.2):
                err = m.error()
                if err is None:
                    sink.append(to_record(m))
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof_at[m.partition()] = m.offset()
                else:
                    raise AssertionError(f"consumer error: {err}")

        try:
            c.subscribe([self.topic], on_assign=on_assign)

            # Partition EOF at the end offset means "latest" was resolved and fetching is there.
            def positioned() -> bool:
                poll_into(early)
                return len(assigned) == sc.PARTITIONS and len(eof_at) == sc.PARTITIONS

            sc.wait_for("6 partitions assigned and at their end (partition EOF)", positioned)
            assert not early, f"read {len(early)} old messages before anything new was produced"
            assert eof_at == self.produced.end_offsets, (
                f"positioned at {dict(sorted(eof_at.items()))}, end offsets {self.produced.end_offsets}"
            )
            p = self.producer()
            self.send(p, range(sc.MESSAGES, sc.MESSAGES + sc.NEW_MESSAGES))
            del p

            def got_all() -> bool:
                poll_into(records)
                return len(records) >= sc.NEW_MESSAGES

            sc.wait_for(f"{sc.NEW_MESSAGES} new messages", got_all)
            quiet_end = time.monotonic() + sc.QUIET_S
            while time.monotonic() < quiet_end:
                poll_into(records)
        finally:
            c.close()
        return "positioned at the end offsets (partition EOF); " + sc.check_latest(self.client, records)

    # ---- the steps ------------------------------------------------------------------------

    def reading_needs(self) -> tuple[str, ...]:
        """What the steps that read the produced messages need (asked once produce has run)."""
        return ("produce",)

    def steps(self, s: sc.Scenario) -> None:
        s.run("create-topic", self.create_topic)
        s.run("list-topics", self.list_topics, needs=("create-topic",))
        s.run("describe-configs", self.describe_configs, needs=("create-topic",))
        s.run("produce", self.produce, needs=("create-topic",))
        read_needs = self.reading_needs()
        s.run("group-consume", self.group_consume, needs=read_needs)
        s.run("committed-offsets", self.committed_offsets, needs=("group-consume",))
        s.run("latest-group", self.latest_group, needs=read_needs)
        s.run("delete-topic", self.delete_topic, needs=("create-topic",))


def to_record(m) -> sc.Record:
    return sc.Record(
        partition=m.partition(),
        offset=m.offset(),
        key=m.key(),
        value=m.value(),
        headers=list(m.headers() or []),
    )


def main(run_type: type[Run] = Run) -> int:
    args = sc.parse_args(run_type.client)
    s = sc.Scenario(run_type.client, args.results)
    run_type(args.bootstrap, args.topic).steps(s)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
