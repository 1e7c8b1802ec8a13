"""Which producer wrote each record, read from the record batches in the nodes' partition logs.

The history says a value was read at two offsets (the `duplicate` checker); the batch headers
say whether the two copies came from one producer epoch or from two. An idempotent producer
that bumps its epoch on its own (librdkafka does, KIP-360, after messages time out or a
sequence it cannot resolve) sends its unacknowledged messages again under the new epoch
with sequences from 0, and no broker can tell them from new ones: a request of the old epoch
that was delayed, not lost, still lands (librdkafka issue 4953: "the only option to ensure
EOS in all cases ... is using transactions"). Copies within one batch are the client's
own sends of the value (the copy of an input the feed wrote twice). Two batches of one
epoch holding it are the broker's failure to deduplicate a retry, which no client
behaviour excuses.

The headers are Kafka's record batch v2 (magic 2): base offset (8 bytes), batch length (4),
partition leader epoch (4), magic (1), CRC (4), attributes (2), last offset delta (4), first
and max timestamp (8 + 8), producer id (8), producer epoch (2), base sequence (4), record
count (4). Only headers are read; a batch cut short at a log's end ends the scan.
"""

from __future__ import annotations

import bisect
import struct
from pathlib import Path

HEADER = 61
_FIRST = struct.Struct(">qi")  # base offset, batch length
_PRODUCER = struct.Struct(">hiqqqhii")  # attributes .. record count, from byte 21

# (base offset, last offset, producer id, producer epoch, base sequence)
Batch = tuple[int, int, int, int, int]


def read_batches(partition_dir: Path) -> list[Batch]:
    """Every complete batch of a partition directory's segments, in offset order."""
    out: list[Batch] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        i = 0
        while i + HEADER <= len(data):
            base, length = _FIRST.unpack_from(data, i)
            if length <= 0 or i + 12 + length > len(data) or data[i + 16] != 2:
                break
            _attrs, last_delta, _t0, _t1, pid, epoch, seq, _n = _PRODUCER.unpack_from(data, i + 21)
            out.append((base, base + last_delta, pid, epoch, seq))
            i += 12 + length
    out.sort()
    return out


class BatchIndex:
    """The batches of every node's copy of the partitions asked about, read once each."""

    def __init__(self, data_dirs: list[Path]):
        self.data_dirs = data_dirs
        self._logs: dict[tuple[str, int], list[list[Batch]]] = {}

    def batch_at(self, topic: str, partition: int, offset: int) -> Batch | None:
        """The batch holding `offset` in the first node's log that holds it, or None if no
        node's log does."""
        key = (topic, partition)
        if key not in self._logs:
            self._logs[key] = [
                read_batches(d / f"{topic}-{partition}")
                for d in self.data_dirs
                if (d / f"{topic}-{partition}").is_dir()
            ]
        for batches in self._logs[key]:
            k = bisect.bisect_right(batches, (offset, float("inf"))) - 1
            if k >= 0 and batches[k][0] <= offset <= batches[k][1]:
                return batches[k]
        return None


def classify_duplicates(duplicates: dict[str, list[list]], data_dirs: list[Path]) -> dict:
    """Splits duplicated values ({id: [[topic, partition, offset], ...]}) by the batches that
    hold their copies:

    - `one_batch`: every copy in one batch, so the client itself sent the value that many
      times (the copy of an input the feed wrote more than once);
    - `epoch_bump`: copies in batches of different epochs of one producer;
    - `same_epoch`: two batches of one producer epoch hold it, which a broker that
      deduplicates retries never lets happen;
    - `stale_epoch`: copies in two epochs of one producer, but in one partition the older
      epoch's batch lies after the newer one's: once a partition holds a batch of an
      epoch, its leader refuses older epochs (INVALID_PRODUCER_EPOCH), so only a broker
      that forgot the producer's epoch appends it, and the client's re-send does not
      explain the copy;
    - `unresolved`: a copy no node's log holds now.
    """
    index = BatchIndex(data_dirs)
    out: dict = {
        "one_batch": 0,
        "epoch_bump": 0,
        "same_epoch": 0,
        "stale_epoch": 0,
        "unresolved": 0,
    }
    out["examples"] = {}
    for vid, positions in duplicates.items():
        found = [(t, p, index.batch_at(t, p, o)) for t, p, o in positions]
        # Each batch once, by where it is.
        holding = {(t, p, b[0]): b for t, p, b in found if b is not None}
        producers = [(b[2], b[3]) for b in holding.values()]
        if any(b is None for _, _, b in found):
            kind = "unresolved"
        elif len(holding) == 1:
            kind = "one_batch"
        elif len({pid for pid, _ in producers}) == 1 and len(set(producers)) == len(producers):
            kind = "stale_epoch" if _older_epoch_after_newer(holding) else "epoch_bump"
        else:
            kind = "same_epoch"
        out[kind] += 1
        examples = out["examples"].setdefault(kind, [])
        if len(examples) < 5:
            examples.append({"id": vid, "positions": positions, "producers": producers})
    return out


def _older_epoch_after_newer(holding: dict) -> bool:
    """Whether, within one partition, a batch of an older producer epoch lies at a higher
    offset than a batch of a newer one (`holding`: {(topic, partition, base offset): batch})."""
    by_partition: dict = {}
    for (topic, partition, base), batch in holding.items():
        by_partition.setdefault((topic, partition), []).append((base, batch[3]))
    for placed in by_partition.values():
        epochs = [epoch for _, epoch in sorted(placed)]
        if any(a > b for a, b in zip(epochs, epochs[1:])):
            return True
    return False
