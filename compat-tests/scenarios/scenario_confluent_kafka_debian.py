"""The client-library scenario with Debian's python3-confluent-kafka 1.7.0 (librdkafka 2.0.2,
Debian's librdkafka1). See scenario.py.

Runs with Debian's own Python, where the apt package installs the module:

    STRATA_DATA_DIR=<the broker's log.dirs> /usr/bin/python3 -B -u scenario_confluent_kafka_debian.py \
        --bootstrap ... --results ...

confluent-kafka 1.7.0 has no ConsumerGroupTopicPartitions nor AdminClient
.list_consumer_group_offsets (both 2.0), so scenario_confluent_kafka.py does not import here; this
file has the same steps with 1.7.0's calls. Differences:
- produce asks for compression.type=lz4 and then checks, in the broker's segments
  (batch_codecs.py, under STRATA_DATA_DIR), that the topic's batches are lz4 (batch_codecs.judge:
  every one, but for a single-record batch the client left uncompressed because it would not
  shrink). A produce row that fails only on that check has still delivered its messages, so
  the reading steps run;
- committed-offsets reads the group's offsets with Consumer.committed() (OffsetFetch from a
  consumer of the group) instead of the admin call 1.7.0 does not have;
- an extra step, "compression", produces 200 messages with each of gzip, snappy, lz4 and zstd,
  one topic each, and checks the same of each.

librdkafka before 2.11 stops compressing gzip, snappy and lz4 when the broker's Produce versions
do not start at v0 (KAFKA-18659); it says so only in a debug line ("Broker does not support
compression type lz4: not compressing batch", debug=msg: its NOTICE is once a day and not within
a day of boot), so the producers here turn on debug=msg into a logger and a failed row quotes it.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

import batch_codecs as bc
import scenario as sc

CLIENT = "confluent-kafka-debian"
REQUEST_TIMEOUT_S = 30.0
# The codec of the produce step's 10,000 messages.
PRODUCE_CODEC = "lz4"
# Messages per codec in the compression step: enough that a batch compresses smaller than it is
# (librdkafka sends a batch uncompressed when compressing does not shrink it).
CODEC_MESSAGES = 200

# This scenario reports one step more than scenario.STEPS; Scenario.run checks names against it.
if bc.COMPRESSION_STEP not in sc.STEPS:
    sc.STEPS.append(bc.COMPRESSION_STEP)


class LogLines(logging.Handler):
    """librdkafka's log lines (passed to the `logger` config), kept to quote in a row."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def about_compression(self) -> str:
        return bc.librdkafka_said(self.lines)


class Run:
    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap = bootstrap
        self.topic = topic
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.produced: sc.Produced | None = None
        self.group = f"{topic}-group"
        self.log = LogLines()
        self.logger = logging.getLogger(f"librdkafka.{CLIENT}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self.log)

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
        new = NewTopic(topic, partitions, 1, config=config)
        futures = self.admin.create_topics([new], operation_timeout=REQUEST_TIMEOUT_S)
        futures[topic].result(timeout=REQUEST_TIMEOUT_S)
        return sc.wait_for(f"{topic} in metadata with leaders", lambda: self.topic_partitions(topic))

    def create_topic(self) -> str:
        n = self.create(self.topic, sc.PARTITIONS, {"retention.ms": sc.RETENTION_MS})
        assert n == sc.PARTITIONS, f"metadata shows {n} partitions, expected {sc.PARTITIONS}"
        return (
            f"CreateTopics ok; metadata shows {n} partitions, each with a leader "
            f"(confluent-kafka {confluent_kafka.version()[0]}, librdkafka {confluent_kafka.libversion()[0]})"
        )

    def list_topics(self) -> str:
        md = self.admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        names = sorted(n for n in md.topics if not n.startswith("__"))
        assert self.topic in md.topics, f"{self.topic} not in {names}"
        n = len(md.topics[self.topic].partitions)
        assert n == sc.PARTITIONS, f"listed with {n} partitions"
        return f"listed with {n} partitions among {len(names)} topic(s); {len(md.brokers)} broker(s)"

    def describe_configs(self) -> str:
        res = ConfigResource(ConfigResource.Type.TOPIC, self.topic)  # 1.7.0: no ResourceType
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

    def producer(self, codec: str = PRODUCE_CODEC) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "compression.type": codec,
                "message.timeout.ms": int(sc.STEP_TIMEOUT_S * 1000),
                # A few lines per batch, into self.log: why a batch went uncompressed.
                "debug": "msg",
                "logger": self.logger,
            }
        )

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
                        value=sc.value_of(CLIENT, i),
                        headers=sc.headers_of(CLIENT, i),
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
        delivered = (
            f"{sc.MESSAGES} acked (acks=all, idempotence, compression.type={PRODUCE_CODEC}) in {took:.1f}s on "
            f"{sc.PARTITIONS} partitions ({counts[0]}..{counts[-1]} each), offsets 0..n-1, each of {sc.KEYS} keys "
            "on one partition"
        )
        try:
            stored = bc.check_codec(bc.data_dir_from_env(), self.topic, PRODUCE_CODEC)
        except AssertionError as e:
            raise AssertionError(f"{e}{self.log.about_compression()} [{delivered}]") from None
        return f"{delivered}; stored: {stored}"

    def compression(self) -> str:
        data_dir = bc.data_dir_from_env()
        topic_of = {codec: f"{self.topic}-{codec}" for codec in bc.COMPRESSED}
        self.log.lines.clear()
        for topic in topic_of.values():
            self.create(topic, 1, {})
        try:
            for codec, topic in topic_of.items():
                p = self.producer(codec)
                acks = self.send(p, range(CODEC_MESSAGES), topic)
                del p
                gc.collect()
                assert len(acks) == CODEC_MESSAGES, f"{codec}: {len(acks)} of {CODEC_MESSAGES} acked"
            try:
                detail = bc.check_codecs(data_dir, topic_of)
            except AssertionError as e:
                raise AssertionError(f"{e}{self.log.about_compression()}") from None
        finally:
            try:
                self.delete(list(topic_of.values()))
            except Exception as e:  # noqa: BLE001 - cleanup must not hide the step's own error
                print(f"deleting the codec topics failed: {e}", file=sys.stderr)
        return f"{CODEC_MESSAGES} messages per codec, one topic each (acks=all, idempotence); {detail}"

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
        detail = sc.check_group_read(CLIENT, records, final, self.produced, range(sc.MESSAGES))
        return f"{detail}; {commits['ok']} sync commits ({commits['failed']} failed)"

    def committed_offsets(self) -> str:
        # 1.7.0's AdminClient cannot list a group's offsets: a consumer of the group asks
        # (OffsetFetch) without subscribing, so the group is not disturbed.
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False})
        try:
            tps = c.committed(
                [TopicPartition(self.topic, p) for p in range(sc.PARTITIONS)], timeout=REQUEST_TIMEOUT_S
            )
        finally:
            c.close()
        errs = [f"{tp.partition}: {tp.error}" for tp in tps if tp.error is not None]
        assert not errs, f"OffsetFetch errors: {errs}"
        committed = {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
        return "OffsetFetch via Consumer.committed(): " + sc.check_committed(committed, self.produced)

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
        return "positioned at the end offsets (partition EOF); " + sc.check_latest(CLIENT, records)


def to_record(m) -> sc.Record:
    return sc.Record(
        partition=m.partition(),
        offset=m.offset(),
        key=m.key(),
        value=m.value(),
        headers=list(m.headers() or []),
    )


def main() -> int:
    args = sc.parse_args(CLIENT)
    s = sc.Scenario(CLIENT, args.results)
    if not os.environ.get("STRATA_DATA_DIR"):
        print("warning: STRATA_DATA_DIR is not set; the codec checks will fail", file=sys.stderr)
    run = Run(args.bootstrap, args.topic)
    s.run("create-topic", run.create_topic)
    s.run("list-topics", run.list_topics, needs=("create-topic",))
    s.run("describe-configs", run.describe_configs, needs=("create-topic",))
    s.run("produce", run.produce, needs=("create-topic",))
    # A produce that failed only on the stored codec delivered its messages: read them anyway.
    read_needs = () if run.produced is not None else ("produce",)
    s.run("group-consume", run.group_consume, needs=read_needs)
    s.run("committed-offsets", run.committed_offsets, needs=("group-consume",))
    s.run("latest-group", run.latest_group, needs=read_needs)
    s.run("delete-topic", run.delete_topic, needs=("create-topic",))
    s.run(bc.COMPRESSION_STEP, run.compression)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
