"""confluent-kafka (Python over librdkafka 2.16) against the real broker."""

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3
TIMEOUT_S = 60


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)],
        operation_timeout=30,
    )
    futures[name].result(timeout=TIMEOUT_S)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_admin_produce_consume(broker, compression):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"ck-{compression}"
    create_topic(admin, topic, PARTITIONS)

    # Creating it again fails with TOPIC_ALREADY_EXISTS.
    with pytest.raises(KafkaException) as exc:
        create_topic(admin, topic, PARTITIONS)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    md = admin.list_topics(timeout=TIMEOUT_S)
    assert topic in md.topics
    assert sorted(md.topics[topic].partitions) == list(range(PARTITIONS))
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", broker.port)]

    n = 5000
    base_ts = int(time.time() * 1000) - 3_600_000
    acked, failed = {}, []

    def on_delivery(i, err, msg):
        if err is not None:
            failed.append((i, err))
        else:
            acked[i] = (msg.partition(), msg.offset())

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": compression,
            "enable.idempotence": False,
        }
    )
    for i in range(n):
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"k{i % 40}",
                    value=f"confluent-value-{i}",
                    headers=[("seq", str(i).encode()), ("client", b"confluent")],
                    timestamp=base_ts + i,
                    on_delivery=lambda err, msg, i=i: on_delivery(i, err, msg),
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0, "messages still queued after flush"
    assert not failed, failed[:5]
    assert len(acked) == n

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            # Required by librdkafka for assign(); nothing is committed.
            "group.id": "strata-tests-assign-only",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        counts = {p: 0 for p in range(PARTITIONS)}
        for p, _ in acked.values():
            counts[p] += 1
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=TIMEOUT_S
            )
            assert (low, high) == (0, counts[p])

        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < n:
            assert time.monotonic() < deadline, f"consumed {len(got)} of {n}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)

        next_offset = {p: 0 for p in range(PARTITIONS)}
        for m in got:
            headers = dict(m.headers())
            i = int(headers["seq"])
            assert acked[i] == (m.partition(), m.offset())
            assert m.offset() == next_offset[m.partition()], "gap, duplicate or reorder"
            next_offset[m.partition()] += 1
            assert m.key() == f"k{i % 40}".encode()
            assert m.value() == f"confluent-value-{i}".encode()
            assert headers["client"] == b"confluent"
            assert m.timestamp() == (TIMESTAMP_CREATE_TIME, base_ts + i)

        # offsets_for_times on the first partition: the message at offset 1 (if any).
        p0 = sorted((o, i) for i, (p, o) in acked.items() if p == 0)
        assert len(p0) > 1
        offset, i = p0[1]
        [res] = consumer.offsets_for_times(
            [TopicPartition(topic, 0, base_ts + i)], timeout=TIMEOUT_S
        )
        assert res.error is None and res.offset == offset
    finally:
        consumer.close()
