"""Transactions (KIP-98) with three Python clients against Strata.

- Each client initialises: it looks up the coordinator of its transactional id
  (FindCoordinator with key type TRANSACTION, whose first call has `__transaction_state`
  created) and gets a producer id and epoch from it (InitProducerId with the id).
- confluent-kafka (librdkafka): committed and aborted transactions over several partitions,
  read by read_committed and read_uncommitted consumers; a consume-transform-produce loop
  with `send_offsets_to_transaction` (AddOffsetsToTxn, TxnOffsetCommit) and an abort in the
  middle, which ends with every input record in the output exactly once and the group's
  offsets at the input's end; a second instance fencing the first in the middle of a
  transaction, whose records are aborted; and a transaction that outlives its timeout,
  which the coordinator aborts; a read_committed consumer's offsets wait for the transaction
  that holds them (UNSTABLE_OFFSET_COMMIT).
- kafka-python and aiokafka commit one transaction and abort another.
"""

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

TIMEOUT_S = 60


def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics]).values():
        f.result(TIMEOUT_S)


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int) -> list[str]:
    """The values of `topic` from the start, as a consumer of `isolation` reads them: until
    `expect` have come and then 1 s more, or 30 s in all."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    deadline = time.time() + 30
    quiet_until = None
    while time.time() < deadline:
        if len(values) >= expect:
            quiet_until = quiet_until or time.time() + 1
            if time.time() > quiet_until:
                break
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        values.append(m.value().decode())
    c.close()
    return values


def test_confluent_kafka_initialises_and_a_second_instance_takes_over(broker):
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-tx"}
    first = Producer(conf)
    first.init_transactions(TIMEOUT_S)
    second = Producer(conf)
    second.init_transactions(TIMEOUT_S)
    second.flush(5)


def test_kafka_python_initialises(broker):
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id="kp-tx",
        request_timeout_ms=TIMEOUT_S * 1000,
    )
    try:
        p.init_transactions()
    finally:
        p.close(timeout=5)


def test_aiokafka_initialises(broker):
    async def run():
        p = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap,
            transactional_id="aio-tx",
            request_timeout_ms=TIMEOUT_S * 1000,
        )
        # start() looks the coordinator up and initialises the producer id.
        await asyncio.wait_for(p.start(), TIMEOUT_S)
        await p.stop()

    asyncio.run(run())


def test_confluent_kafka_commits_and_aborts(broker):
    create_topics(broker.bootstrap, ("tx-out", 3))
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-commit"})
    p.init_transactions(TIMEOUT_S)
    for t in range(4):
        p.begin_transaction()
        for i in range(30):
            p.produce("tx-out", value=f"t{t}-{i}", partition=i % 3)
        # Sent before the end: an abort would drop what is still queued in the client.
        p.flush(TIMEOUT_S)
        if t % 2 == 1:
            p.abort_transaction(TIMEOUT_S)
        else:
            p.commit_transaction(TIMEOUT_S)
    committed = read_all(broker.bootstrap, "tx-out", 3, "read_committed", 60)
    assert sorted(committed) == sorted(f"t{t}-{i}" for t in (0, 2) for i in range(30))
    everything = read_all(broker.bootstrap, "tx-out", 3, "read_uncommitted", 120)
    assert len(everything) == 120


def test_confluent_kafka_consume_transform_produce_exactly_once(broker):
    create_topics(broker.bootstrap, ("eos-in", 2), ("eos-out", 2))
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        plain.produce("eos-in", key=str(i), value=str(i), partition=i % 2)
    plain.flush(TIMEOUT_S)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "eos-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["eos-in"])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "eos-app"})
    producer.init_transactions(TIMEOUT_S)
    done, rounds, aborted = 0, 0, False
    deadline = time.time() + 90
    while done < 200 and time.time() < deadline:
        batch = consumer.consume(25, 1.0)
        if not batch:
            continue
        producer.begin_transaction()
        for m in batch:
            producer.produce("eos-out", key=m.key(), value=b"out-" + m.value(), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()),
            consumer.consumer_group_metadata(),
            TIMEOUT_S,
        )
        rounds += 1
        if rounds == 2 and not aborted:
            # The abort drops the output and the offsets: rewind to what is committed.
            producer.abort_transaction(TIMEOUT_S)
            aborted = True
            for tp in consumer.committed(consumer.assignment(), TIMEOUT_S):
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        producer.commit_transaction(TIMEOUT_S)
        done += len(batch)
    assert aborted and done == 200
    committed = consumer.committed([TopicPartition("eos-in", p) for p in (0, 1)], TIMEOUT_S)
    assert sorted(tp.offset for tp in committed) == [100, 100]
    consumer.close()
    out = read_all(broker.bootstrap, "eos-out", 2, "read_committed", 200)
    assert sorted(out) == sorted(f"out-{i}" for i in range(200))


def test_confluent_kafka_a_new_instance_fences_and_aborts_the_old(broker):
    create_topics(broker.bootstrap, ("fenced", 1))
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": "zombie"}
    old = Producer(conf)
    old.init_transactions(TIMEOUT_S)
    old.begin_transaction()
    for i in range(10):
        old.produce("fenced", value=f"old-{i}")
    old.flush(TIMEOUT_S)
    new = Producer(conf)
    # Its InitProducerId aborts the old instance's open transaction first (its markers),
    # then answers with the bumped epoch.
    new.init_transactions(TIMEOUT_S)
    with pytest.raises(KafkaException) as err:
        old.commit_transaction(TIMEOUT_S)
    assert err.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    new.begin_transaction()
    new.produce("fenced", value="new-0")
    new.commit_transaction(TIMEOUT_S)
    assert read_all(broker.bootstrap, "fenced", 1, "read_committed", 1) == ["new-0"]


@pytest.mark.parametrize(
    "broker",
    [{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}],
    indirect=True,
)
def test_a_transaction_past_its_timeout_is_aborted(broker):
    create_topics(broker.bootstrap, ("slow", 1))
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "slow-app",
            "transaction.timeout.ms": 2000,
        }
    )
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.produce("slow", value="late")
    p.flush(TIMEOUT_S)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("slow", value="after")
    plain.flush(TIMEOUT_S)
    # The coordinator aborts it after 2 s: a read_committed consumer gets past it.
    assert read_all(broker.bootstrap, "slow", 1, "read_committed", 1) == ["after"]
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT_S)


def test_kafka_python_commits_and_aborts(broker):
    create_topics(broker.bootstrap, ("kp-out", 2))
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id="kp-app",
        request_timeout_ms=TIMEOUT_S * 1000,
    )
    try:
        p.init_transactions()
        for t in range(2):
            p.begin_transaction()
            for i in range(10):
                p.send("kp-out", value=f"t{t}-{i}".encode(), partition=i % 2)
            if t == 0:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close(timeout=5)
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    c.assign([__import__("kafka").TopicPartition("kp-out", p) for p in (0, 1)])
    values = sorted(m.value.decode() for m in c)
    c.close()
    assert values == sorted(f"t0-{i}" for i in range(10))


def test_aiokafka_commits_and_aborts(broker):
    create_topics(broker.bootstrap, ("aio-out", 1))

    async def run():
        p = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap,
            transactional_id="aio-app",
            request_timeout_ms=TIMEOUT_S * 1000,
        )
        await asyncio.wait_for(p.start(), TIMEOUT_S)
        try:
            async with p.transaction():
                for i in range(5):
                    await p.send("aio-out", f"kept-{i}".encode())
            await p.begin_transaction()
            await p.send("aio-out", b"dropped")
            await p.abort_transaction()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(
            "aio-out",
            bootstrap_servers=broker.bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        await c.start()
        values = []
        try:
            while len(values) < 5:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), TIMEOUT_S)
                for msgs in batch.values():
                    values.extend(m.value.decode() for m in msgs)
            more = await c.getmany(timeout_ms=2000)
            values.extend(m.value.decode() for msgs in more.values() for m in msgs)
        finally:
            await c.stop()
        return values

    assert asyncio.run(run()) == [f"kept-{i}" for i in range(5)]


def test_offsets_in_an_open_transaction_are_unstable_for_read_committed(broker):
    """KIP-447: a read_committed consumer's OffsetFetch (require_stable) gets
    UNSTABLE_OFFSET_COMMIT, and retries, while a transaction holds the group's offsets."""
    create_topics(broker.bootstrap, ("stable-in", 1))
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "stable-group",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "stable-app"})
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.send_offsets_to_transaction(
        [TopicPartition("stable-in", 0, 42)], consumer.consumer_group_metadata(), TIMEOUT_S
    )
    tp = [TopicPartition("stable-in", 0)]
    with pytest.raises(KafkaException) as err:
        consumer.committed(tp, 3)
    assert err.value.args[0].code() == KafkaError._TIMED_OUT
    p.commit_transaction(TIMEOUT_S)
    assert consumer.committed(tp, TIMEOUT_S)[0].offset == 42
    consumer.close()
