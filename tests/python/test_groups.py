"""Consumer groups (the classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup) with the
pure-Python clients kafka-python and aiokafka against the real broker.

Each test runs two members of one group on a four-partition topic and checks that they split
the partitions 2/2 and that together they consume every message produced. Offsets are not
committed (that is the offset APIs' business): consumers start from the earliest offset and
distinct messages are counted.
"""

import asyncio
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

PARTITIONS = 4
MESSAGES = 200
TIMEOUT_S = 60
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "100"}


def create_and_fill(bootstrap: str, topic: str) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)], timeout_ms=30000)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=30000)
    values = {f"v{i}" for i in range(MESSAGES)}
    try:
        for i in range(MESSAGES):
            producer.send(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
        producer.flush(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=10)
    return values


def is_split(assignments: list[set[int]]) -> bool:
    """Disjoint, complete, and two partitions each."""
    union = set().union(*assignments)
    return (
        all(len(a) == PARTITIONS // len(assignments) for a in assignments)
        and len(union) == PARTITIONS
    )


@pytest.mark.parametrize("broker", [GROUP_OVERRIDES], indirect=True)
def test_kafka_python_members_split_partitions_and_consume_everything(broker):
    topic = "kp-group"
    expected = create_and_fill(broker.bootstrap, topic)
    consumers = [
        KafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id="kp",
            client_id=f"kp-{i}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )
        for i in range(2)
    ]
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for c in consumers:
                for records in c.poll(timeout_ms=100).values():
                    seen.update(r.value.decode() for r in records)
            parts = [{tp.partition for tp in c.assignment()} for c in consumers]
            if is_split(parts) and seen >= expected:
                break
            assert time.monotonic() < deadline, f"assignments {parts}, {len(seen)} seen"
        assert seen == expected
    finally:
        for c in consumers:
            c.close()  # sends LeaveGroup


@pytest.mark.parametrize("broker", [GROUP_OVERRIDES], indirect=True)
def test_aiokafka_members_split_partitions_and_consume_everything(broker):
    from aiokafka import AIOKafkaConsumer

    topic = "aio-group"
    expected = create_and_fill(broker.bootstrap, topic)

    async def run() -> None:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                group_id="aio",
                client_id=f"aio-{i}",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=10000,
                heartbeat_interval_ms=500,
            )
            for i in range(2)
        ]
        seen: set[str] = set()
        for c in consumers:
            await c.start()
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                for c in consumers:
                    batches = await c.getmany(timeout_ms=100)
                    for records in batches.values():
                        seen.update(r.value.decode() for r in records)
                parts = [{tp.partition for tp in c.assignment()} for c in consumers]
                if is_split(parts) and seen >= expected:
                    break
                assert time.monotonic() < deadline, f"assignments {parts}, {len(seen)} seen"
            assert seen == expected
        finally:
            for c in consumers:
                await c.stop()  # sends LeaveGroup

    asyncio.run(run())
