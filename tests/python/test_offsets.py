"""Committed offsets through kafka-python and confluent-kafka against the real broker.

Consumers use manual assignment and commit as "simple" consumers (generation -1), which needs
no group membership: OffsetCommit, then OffsetFetch through each client's `committed`.
"""

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

TIMEOUT_S = 30


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)],
        operation_timeout=30,
    )
    futures[name].result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, partition: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert p.flush(TIMEOUT_S) == 0


def test_kafka_python_commit_and_committed(broker):
    create_topic(broker.bootstrap, "kp-offsets", 2)
    produce(broker.bootstrap, "kp-offsets", 0, 10)
    tp0, tp1 = TopicPartition("kp-offsets", 0), TopicPartition("kp-offsets", 1)

    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="kp-group",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
    )
    try:
        c.assign([tp0, tp1])
        assert c.committed(tp0) is None  # never committed: OffsetFetch answered -1
        c.commit({tp0: OffsetAndMetadata(6, "kafka-python was here", -1)})
        assert c.committed(tp0) == 6
        assert c.committed(tp1) is None
        meta = c.committed(tp0, metadata=True)
        assert (meta.offset, meta.metadata) == (6, "kafka-python was here")
    finally:
        c.close()

    # A new consumer of the group resumes at the commit.
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="kp-group",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
    )
    try:
        c.assign([tp0])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 4:
            assert time.monotonic() < deadline, f"only got {got}"
            for records in c.poll(timeout_ms=500).values():
                got.extend((r.offset, r.value) for r in records)
        assert got == [(o, f"v{o}".encode()) for o in range(6, 10)]
    finally:
        c.close()


def test_confluent_kafka_commit_and_committed(broker):
    create_topic(broker.bootstrap, "ck-offsets", 3)
    produce(broker.bootstrap, "ck-offsets", 1, 5)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "ck-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        parts = [CkTopicPartition("ck-offsets", p) for p in range(3)]
        c.assign(parts)
        before = c.committed(parts, timeout=TIMEOUT_S)
        assert [tp.offset for tp in before] == [-1001] * 3  # OFFSET_INVALID

        c.commit(
            offsets=[
                CkTopicPartition("ck-offsets", 1, 3, metadata="confluent"),
                CkTopicPartition("ck-offsets", 2, 42),
            ],
            asynchronous=False,
        )
        after = {tp.partition: tp for tp in c.committed(parts, timeout=TIMEOUT_S)}
        assert after[0].offset == -1001
        assert (after[1].offset, after[1].metadata) == (3, "confluent")
        assert after[2].offset == 42

        # A partition the topic does not have: UNKNOWN_TOPIC_OR_PARTITION.
        # librdkafka reports it either as the commit's error or on the partition.
        try:
            result = c.commit(offsets=[CkTopicPartition("ck-offsets", 9, 1)], asynchronous=False)
            codes = [tp.error.code() if tp.error else None for tp in result]
        except KafkaException as e:
            codes = [e.args[0].code()]
        assert codes == [KafkaError.UNKNOWN_TOPIC_OR_PART], codes
    finally:
        c.close()


def test_kafka_python_admin_describes_a_simple_group(broker):
    """kafka-python's admin asks DescribeGroups for authorized operations (KIP-430); the
    bit set must hold only real group operations, and an offsets-only group is Empty."""
    from kafka import KafkaAdminClient

    create_topic(broker.bootstrap, "kp-admin-groups", 1)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-simple", enable_auto_commit=False)
    tp = TopicPartition("kp-admin-groups", 0)
    c.assign([tp])
    c.commit({tp: OffsetAndMetadata(0, "m", -1)})
    c.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert ("kp-simple", "") in admin.list_consumer_groups()
        (info,) = admin.describe_consumer_groups(["kp-simple"])
        assert info.error_code == 0
        assert info.state == "Empty"
        assert sorted(info.authorized_operations) == ["DELETE", "DESCRIBE", "READ"]
        offsets = admin.list_consumer_group_offsets("kp-simple")
        assert offsets[tp].offset == 0 and offsets[tp].metadata == "m"
    finally:
        admin.close()
