"""KIP-320 offset validation by librdkafka (confluent-kafka) against the broker's
OffsetForLeaderEpoch answers.

A seek to a position that carries a leader epoch is validated before librdkafka fetches from
it: it asks the leader where that epoch ends (OffsetForLeaderEpoch, with the current leader
epoch from Metadata) and carries on only if the end is at or past the position. An epoch the
leader's cache cannot place is answered (-1, -1), which librdkafka treats as a truncation and
resolves with auto.offset.reset.
"""

import logging
import time

from confluent_kafka import Consumer, Producer, TopicPartition

TIMEOUT_S = 30


class Lines(logging.Handler):
    """Keeps librdkafka's log lines (delivered through the consumer's `logger`)."""

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def produce(broker, topic, n, start=0):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(start, start + n):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0


def consumer_with_log(broker, reset):
    lines = Lines()
    logger = logging.getLogger(f"librdkafka-{id(lines)}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "strata-tests-assign-only",
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
            "debug": "fetch",
            "logger": logger,
        }
    )
    return consumer, lines


def read(consumer, n):
    """The offsets of the next `n` messages."""
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg.offset())
    return got


def wait_for(consumer, lines, text, after=0):
    """Polls until a log line from index `after` on contains `text`; returns its index."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        for i, line in enumerate(lines.lines[after:], start=after):
            if text in line:
                return i
        assert time.monotonic() < deadline, f"no log line with {text!r}: {lines.lines[-30:]}"
        consumer.poll(0.2)


def test_a_seek_with_a_leader_epoch_is_validated_and_served(broker):
    topic = "validated"
    produce(broker, topic, 10)
    consumer, lines = consumer_with_log(broker, "earliest")
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert read(consumer, 1) == [0]
        # Epoch 0 is the leader's current epoch: it ends at the log end (10), past 6.
        consumer.seek(TopicPartition(topic, 0, 6, leader_epoch=0))
        assert read(consumer, 4) == [6, 7, 8, 9]
        wait_for(consumer, lines, "validation succeeded: broker end offset 10")
    finally:
        consumer.close()


def test_an_epoch_the_leader_never_had_is_a_truncation(broker):
    topic = "truncated"
    produce(broker, topic, 10)
    consumer, lines = consumer_with_log(broker, "latest")
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        consumer.poll(1.0)
        # Epoch 3 is newer than any in the leader's cache: (-1, -1), so librdkafka resets
        # to the latest offset instead of reading from 4.
        consumer.seek(TopicPartition(topic, 0, 4, leader_epoch=3))
        reset = wait_for(consumer, lines, "No epoch found less or equal to")
        # The reset's own ListOffsets must land before the next records, or it resolves
        # past them: wait until the partition fetches again at the old end.
        wait_for(consumer, lines, "in state active at offset 10 ", after=reset)
        produce(broker, topic, 2, start=10)
        got = read(consumer, 2)
        assert got == [10, 11], got
    finally:
        consumer.close()
