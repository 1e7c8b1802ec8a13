"""Transactional producers (KIP-98) of three Python clients initialise against Strata.

Each client looks up the coordinator of its transactional id (FindCoordinator with key
type TRANSACTION, whose first call has `__transaction_state` created) and gets a producer id
and epoch from it (InitProducerId with the id). A second instance with the same id then
initialises too: the coordinator fences the first by bumping the epoch (what the epochs
are is checked over raw frames in tests/it/transactions.rs). Running a transaction is not
served yet.
"""

import asyncio

from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from kafka import KafkaProducer

TIMEOUT_S = 60


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
