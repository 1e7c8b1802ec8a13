"""The client-library scenario with Debian's python3-confluent-kafka 1.7.0 (librdkafka 2.0.2,
Debian's librdkafka1). See scenario.py.

Runs with Debian's own Python, where the apt package installs the module:

    STRATA_DATA_DIR=<the broker's log.dirs> /usr/bin/python3 -B -u scenario_confluent_kafka_debian.py \
        --bootstrap ... --results ...

It runs scenario_confluent_kafka.py's steps (its Run, subclassed here), which import under 1.7.0,
with 1.7.0's calls where they differ. Differences:
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

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition

import batch_codecs as bc
import scenario as sc
import scenario_confluent_kafka as ck

CLIENT = "confluent-kafka-debian"
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


class Run(ck.Run):
    client = CLIENT
    PRODUCE_SETTINGS = f"acks=all, idempotence, compression.type={PRODUCE_CODEC}"

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(bootstrap, topic)
        self.log = LogLines()
        self.logger = logging.getLogger(f"librdkafka.{CLIENT}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self.log)

    def create_topic(self) -> str:
        return (
            f"{super().create_topic()} "
            f"(confluent-kafka {confluent_kafka.version()[0]}, librdkafka {confluent_kafka.libversion()[0]})"
        )

    def producer(self, codec: str = PRODUCE_CODEC) -> Producer:
        return Producer(
            {
                **self.producer_config(),
                "compression.type": codec,
                # A few lines per batch, into self.log: why a batch went uncompressed.
                "debug": "msg",
                "logger": self.logger,
            }
        )

    def produce(self) -> str:
        delivered = super().produce()
        try:
            stored = bc.check_codec(bc.data_dir_from_env(), self.topic, PRODUCE_CODEC)
        except AssertionError as e:
            raise AssertionError(f"{e}{self.log.about_compression()} [{delivered}]") from None
        return f"{delivered}; stored: {stored}"

    def reading_needs(self) -> tuple[str, ...]:
        # A produce that failed only on the stored codec delivered its messages: read them anyway.
        return () if self.produced is not None else ("produce",)

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

    def committed(self) -> tuple[str, dict[int, int]]:
        # 1.7.0's AdminClient cannot list a group's offsets: a consumer of the group asks
        # (OffsetFetch) without subscribing, so the group is not disturbed.
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False})
        try:
            tps = c.committed(
                [TopicPartition(self.topic, p) for p in range(sc.PARTITIONS)], timeout=ck.REQUEST_TIMEOUT_S
            )
        finally:
            c.close()
        errs = [f"{tp.partition}: {tp.error}" for tp in tps if tp.error is not None]
        assert not errs, f"OffsetFetch errors: {errs}"
        return "Consumer.committed()", {tp.partition: tp.offset for tp in tps if tp.offset >= 0}

    def steps(self, s: sc.Scenario) -> None:
        super().steps(s)
        s.run(bc.COMPRESSION_STEP, self.compression)


def main() -> int:
    if not os.environ.get("STRATA_DATA_DIR"):
        print("warning: STRATA_DATA_DIR is not set; the codec checks will fail", file=sys.stderr)
    return ck.main(Run)


if __name__ == "__main__":
    sys.exit(main())
