"""kafka-python (a pure-Python client with its own protocol code) against the real broker."""

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

PARTITIONS = 3
TIMEOUT_S = 60


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=30000)
        deadline = time.monotonic() + TIMEOUT_S
        while name not in admin.list_topics():
            assert time.monotonic() < deadline, f"{name} not listed by KafkaAdminClient"
            time.sleep(0.1)
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, n: int, base_ts: int, compression=None):
    """Sends n keyed messages with headers and timestamps base_ts + 10*i; returns metadata."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        compression_type=compression,
        request_timeout_ms=30000,
    )
    try:
        futures = [
            producer.send(
                topic,
                key=f"k{i % 50}".encode(),
                value=f"kafka-python-value-{i}".encode(),
                headers=[("seq", str(i).encode()), ("client", b"kafka-python")],
                timestamp_ms=base_ts + 10 * i,
            )
            for i in range(n)
        ]
        producer.flush(timeout=TIMEOUT_S)
        return [f.get(timeout=TIMEOUT_S) for f in futures]
    finally:
        producer.close(timeout=10)


def new_consumer(bootstrap: str) -> KafkaConsumer:
    # group_id=None: no group coordination, manual assignment only.
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
    )


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_produce_and_consume_by_assignment(broker, compression):
    topic = f"kp-{compression or 'none'}"
    n = 2000
    create_topic(broker.bootstrap, topic, PARTITIONS)
    base_ts = int(time.time() * 1000) - 3_600_000
    metas = produce(broker.bootstrap, topic, n, base_ts, compression)
    acked = {i: (m.partition, m.offset) for i, m in enumerate(metas)}
    assert len(set(acked.values())) == n, "two messages acknowledged at the same offset"

    consumer = new_consumer(broker.bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < n:
            assert time.monotonic() < deadline, f"consumed {len(got)} of {n}"
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
    finally:
        consumer.close()

    assert len(got) == n
    next_offset = {p: 0 for p in range(PARTITIONS)}
    key_partition = {}
    for r in got:
        headers = dict(r.headers)
        i = int(headers["seq"])
        assert acked[i] == (r.partition, r.offset), f"message {i}"
        assert r.offset == next_offset[r.partition], "gap, duplicate or reorder"
        next_offset[r.partition] += 1
        assert r.key == f"k{i % 50}".encode()
        assert r.value == f"kafka-python-value-{i}".encode()
        assert headers["client"] == b"kafka-python"
        assert r.timestamp == base_ts + 10 * i
        assert r.timestamp_type == 0  # CreateTime
        assert key_partition.setdefault(r.key, r.partition) == r.partition
    assert all(v > 0 for v in next_offset.values()), next_offset


def test_topics_and_offsets(broker):
    topic = "kp-offsets"
    n = 300
    create_topic(broker.bootstrap, topic, PARTITIONS)
    base_ts = int(time.time() * 1000) - 3_600_000
    metas = produce(broker.bootstrap, topic, n, base_ts)

    per_partition = {p: [] for p in range(PARTITIONS)}  # partition -> [(offset, ts)]
    for i, m in enumerate(metas):
        per_partition[m.partition].append((m.offset, base_ts + 10 * i))

    consumer = new_consumer(broker.bootstrap)
    try:
        assert topic in consumer.topics()
        assert consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = consumer.end_offsets(tps)
        begins = consumer.beginning_offsets(tps)
        for tp in tps:
            assert begins[tp] == 0
            assert ends[tp] == len(per_partition[tp.partition])

        # offsets_for_times: the earliest offset whose timestamp is >= the query.
        for tp in tps:
            entries = per_partition[tp.partition]
            assert entries, f"partition {tp.partition} got no messages"
            offset, ts = entries[len(entries) // 2]
            found = consumer.offsets_for_times({tp: ts})[tp]
            assert found is not None and found.offset == offset and found.timestamp == ts
            # A time just before a message finds that message.
            found = consumer.offsets_for_times({tp: ts - 1})[tp]
            assert found is not None and found.offset == offset
            # Past the newest message: no offset.
            assert consumer.offsets_for_times({tp: base_ts + 10 * n + 10_000})[tp] is None
    finally:
        consumer.close()
