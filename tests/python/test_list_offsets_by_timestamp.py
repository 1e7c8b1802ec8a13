"""ListOffsets by timestamp, exactly as Kafka answers it, through confluent-kafka's admin
`list_offsets` (ListOffsets v7+: timestamps, MAX_TIMESTAMP, earliest, latest, with the
leader epoch) and its consumer's `offsets_for_times`.

Records carry explicit, out-of-order CreateTime timestamps, three to a batch, in plain and
lz4-compressed batches spread over several segments. The answers are checked against a model
of the log: for a target timestamp, the earliest offset at or after the log start whose
record timestamp is at or after it (so the broker must look inside batches, compressed ones
too), offset -1 and timestamp -1 past every record; MAX_TIMESTAMP is the first record with
the largest timestamp. Then DeleteRecords moves the log start into the middle of a batch and
the same questions are asked again.
"""

from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

TIMEOUT_S = 60
TOPIC = "by-time"

# (compressed, timestamps of the batch's records): 12 records, offsets 0..11.
BATCHES = [
    (False, [5000, 3000, 9000]),
    (True, [2000, 8000, 4000]),
    (False, [7000, 1000, 6000]),
    (True, [9500, 9500, 100]),
]
TARGETS = [0, 100, 101, 1000, 1500, 2000, 2500, 3000, 4500, 6500, 8000, 8500, 9001, 9500,
           9501, 10**12]


def produce_batches(bootstrap: str) -> dict[int, int]:
    """Each batch through its own flush; returns {offset: timestamp}."""
    stamps = {}
    for compressed, timestamps in BATCHES:
        p = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1000,
            "batch.num.messages": len(timestamps),
            "compression.type": "lz4" if compressed else "none",
        })
        for ts in timestamps:
            def report(err, msg, ts=ts):
                assert err is None, err
                stamps[msg.offset()] = ts
            p.produce(TOPIC, key=b"k", value=b"v" * 700, partition=0, timestamp=ts,
                      on_delivery=report)
        assert p.flush(TIMEOUT_S) == 0
    assert sorted(stamps) == list(range(12)), stamps
    return stamps


def expected(stamps: dict[int, int], start: int, target: int) -> tuple[int, int]:
    for offset in sorted(o for o in stamps if o >= start):
        if stamps[offset] >= target:
            return offset, stamps[offset]
    return -1, -1


def list_offsets(admin: AdminClient, spec) -> tuple[int, int, int]:
    tp = TopicPartition(TOPIC, 0)
    info = admin.list_offsets({tp: spec})[tp].result(timeout=TIMEOUT_S)
    return info.offset, info.timestamp, info.leader_epoch


def check_all(admin: AdminClient, consumer: Consumer, stamps: dict[int, int], start: int):
    for target in TARGETS:
        want = expected(stamps, start, target)
        offset, ts, epoch = list_offsets(admin, OffsetSpec.for_timestamp(target))
        assert (offset, ts) == want, (target, start, (offset, ts), want)
        if offset >= 0:
            assert epoch == 0, (target, epoch)
        found = consumer.offsets_for_times([TopicPartition(TOPIC, 0, target)],
                                           timeout=TIMEOUT_S)
        assert found[0].offset == want[0], (target, found[0].offset, want)
    top = max(stamps[o] for o in stamps if o >= start)
    first_top = min(o for o in stamps if o >= start and stamps[o] == top)
    assert list_offsets(admin, OffsetSpec.max_timestamp())[:2] == (first_top, top)
    assert list_offsets(admin, OffsetSpec.earliest())[0] == start
    assert list_offsets(admin, OffsetSpec.latest())[0] == 12


def test_list_offsets_by_timestamp_across_batches_segments_and_log_start(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics(
        [NewTopic(TOPIC, num_partitions=1, replication_factor=1,
                  config={"segment.bytes": "1000"})],
        operation_timeout=30,
    )[TOPIC].result(timeout=TIMEOUT_S)
    stamps = produce_batches(broker.bootstrap)
    segments = sorted(Path(broker.data_dir, f"{TOPIC}-0").glob("*.log"))
    assert len(segments) >= 3, segments
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "by-time"})
    try:
        check_all(admin, consumer, stamps, start=0)
        # The log start moves into the second batch (offsets 3..5): offset 3 (timestamp
        # 2000) is gone, so a target of 2000 now finds offset 4 with its own timestamp.
        tp = TopicPartition(TOPIC, 0, 4)
        admin.delete_records([tp])[tp].result(timeout=TIMEOUT_S)
        check_all(admin, consumer, stamps, start=4)
    finally:
        consumer.close()
