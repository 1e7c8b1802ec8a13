"""Incremental fetch sessions (KIP-227) with kafka-python, which fetches in sessions (Fetch
v7+, its FetchSessionHandler) as the Java consumer does; librdkafka always fetches
sessionless, and the Rust suite drives the raw protocol and the followers' sessions."""

import re
import time
import urllib.request

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from conftest import Broker, free_port
from test_kafka_python import create_topic

TIMEOUT_S = 60
PARTITIONS = 8


def metric(port: int, name: str) -> int:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    m = re.search(rf"^{name} (-?\d+)$", body.decode(), re.M)
    assert m, f"{name} not exported"
    return int(m.group(1))


def produce(bootstrap: str, topic: str, messages: list[tuple[int, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for partition, value in messages:
            producer.send(topic, value=value, partition=partition)
        producer.flush(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=10)


def consumer(bootstrap: str, topic: str) -> KafkaConsumer:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    return c


def drain(c: KafkaConsumer, want: int) -> list[tuple[int, int, bytes]]:
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < want:
        assert time.monotonic() < deadline, f"read {len(got)} of {want}"
        for tp, records in c.poll(timeout_ms=200).items():
            got += [(tp.partition, r.offset, r.value) for r in records]
    return got


def session_of(c: KafkaConsumer):
    """kafka-python's session with the one broker: (session id, next epoch)."""
    handlers = list(c._fetcher._session_handlers.values())
    assert len(handlers) == 1
    meta = handlers[0].next_metadata
    return meta.session_id, meta.epoch


def start(tmp_path, **overrides) -> tuple[Broker, int]:
    metrics = free_port()
    b = Broker(tmp_path, {"metrics.listener": f"http://127.0.0.1:{metrics}", **overrides})
    return b, metrics


def test_a_consumer_fetches_incrementally_and_reads_everything(tmp_path):
    b, metrics = start(tmp_path)
    try:
        create_topic(b.bootstrap, "inc", PARTITIONS)
        first = [(i % PARTITIONS, f"a-{i}".encode()) for i in range(400)]
        produce(b.bootstrap, "inc", first)
        c = consumer(b.bootstrap, "inc")
        try:
            got = drain(c, 400)
            assert sorted(v for _, _, v in got) == sorted(v for _, v in first)
            # New records in one partition only: the session carries them, and every
            # other partition stays out of both the requests and the answers.
            more = [(5, f"b-{i}".encode()) for i in range(50)]
            produce(b.bootstrap, "inc", more)
            got = drain(c, 50)
            assert [v for _, _, v in got] == [v for _, v in more]
            assert {p for p, _, _ in got} == {5}
            assert [o for _, o, _ in got] == list(range(50, 100))
            # Idle polls: incremental fetches answered with no partitions at all.
            for _ in range(5):
                assert c.poll(timeout_ms=300) == {}
            session_id, epoch = session_of(c)
            assert session_id != 0, "kafka-python holds no session"
            assert epoch > 4, f"the session did not stay incremental (epoch {epoch})"
            assert metric(metrics, "strata_fetch_sessions") == 1
            assert metric(metrics, "strata_fetch_session_partitions") == PARTITIONS
        finally:
            c.close()
    finally:
        b.kill()


def test_a_full_cache_leaves_a_new_consumer_on_full_fetches(tmp_path):
    b, metrics = start(tmp_path, **{"max.incremental.fetch.session.cache.slots": "1"})
    try:
        create_topic(b.bootstrap, "full", PARTITIONS)
        msgs = [(i % PARTITIONS, f"m-{i}".encode()) for i in range(200)]
        produce(b.bootstrap, "full", msgs)
        first = consumer(b.bootstrap, "full")
        second = None
        try:
            assert len(drain(first, 200)) == 200
            # The one slot is taken by a session younger than two minutes, of the same
            # size: the second consumer gets no session and reads everything in full.
            second = consumer(b.bootstrap, "full")
            assert len(drain(second, 200)) == 200
            more = [(2, f"n-{i}".encode()) for i in range(20)]
            produce(b.bootstrap, "full", more)
            assert [v for _, _, v in drain(first, 20)] == [v for _, v in more]
            assert [v for _, _, v in drain(second, 20)] == [v for _, v in more]
            assert session_of(first)[0] != 0
            assert session_of(second) == (0, 0)
            assert metric(metrics, "strata_fetch_sessions") == 1
            assert metric(metrics, "strata_fetch_session_evictions_total") == 0
        finally:
            first.close()
            if second is not None:
                second.close()
    finally:
        b.kill()
