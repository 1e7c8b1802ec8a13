"""The idempotent producer (KIP-98) with confluent-kafka and kafka-python.

Each client initialises a producer id (InitProducerId), produces with
enable.idempotence on, and a consumer must see every message exactly once, in order per
partition. Both producers share one topic, so the two producer ids must differ and neither
may fence the other.
"""

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

PARTITIONS = 3
PER_CLIENT = 3000
TIMEOUT_S = 60


def produce_confluent(bootstrap: str, topic: str, n: int) -> list:
    acked = []
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": TIMEOUT_S * 1000,
        }
    )
    for i in range(n):
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                p.produce(topic, key=f"k{i % 17}".encode(), value=f"ck-{i}".encode(), on_delivery=report)
                break
            except BufferError:
                assert time.monotonic() < deadline, "producer queue stayed full"
                p.poll(0.01)
        p.poll(0)
    assert p.flush(TIMEOUT_S) == 0, "confluent-kafka did not deliver everything in time"
    assert not errors, f"delivery errors: {errors[:3]}"
    return acked


def produce_kafka_python(bootstrap: str, topic: str, n: int) -> list:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        request_timeout_ms=30000,
    )
    try:
        futures = [
            (i, producer.send(topic, key=f"k{i % 17}".encode(), value=f"kp-{i}".encode()))
            for i in range(n)
        ]
        producer.flush(timeout=TIMEOUT_S)
        out = []
        for i, f in futures:
            md = f.get(timeout=TIMEOUT_S)
            out.append((md.partition, md.offset, f"kp-{i}".encode()))
        return out
    finally:
        producer.close(timeout=10)


def consume_all(bootstrap: str, topic: str, expected: int) -> list:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "idempotence-assign-only",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.value()))
        # Anything beyond `expected` would be a duplicate: drain a little longer.
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                out.append((m.partition(), m.offset(), m.value()))
        return out
    finally:
        c.close()


def test_idempotent_producers_write_each_message_once(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "idempotent"
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
        topic
    ].result(timeout=TIMEOUT_S)

    acked = produce_confluent(broker.bootstrap, topic, PER_CLIENT)
    acked += produce_kafka_python(broker.bootstrap, topic, PER_CLIENT)
    assert len(acked) == 2 * PER_CLIENT

    consumed = consume_all(broker.bootstrap, topic, 2 * PER_CLIENT)
    values = [v for _, _, v in consumed]
    assert len(values) == len(set(values)), "a message was stored twice"
    assert sorted(values) == sorted(v for _, _, v in acked), "stored set differs from acked set"
    # Every acknowledgement names where the message really is.
    at = {(p, o): v for p, o, v in consumed}
    for p, o, v in acked:
        assert at.get((p, o)) == v, f"{v!r} acknowledged at {p}-{o}, found {at.get((p, o))!r}"
    # Per partition, each client's messages keep their send order.
    for prefix in (b"ck-", b"kp-"):
        for p in range(PARTITIONS):
            seqs = [int(v[3:]) for q, _, v in sorted(consumed) if q == p and v.startswith(prefix)]
            assert seqs == sorted(seqs), f"partition {p}: {prefix!r} out of order"
