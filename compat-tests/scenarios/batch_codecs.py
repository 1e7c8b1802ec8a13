"""Which compression codecs a topic's stored batches carry, read from the broker's segments.

    python3 batch_codecs.py DATA_DIR TOPIC [--expect CODEC]

Reads Kafka's on-disk layout, `<log.dirs>/<topic>-<partition>/<20-digit base offset>.log`,
batch by batch. A v2 batch (magic 2) starts baseOffset int64, batchLength int32 (counted from
the next field), partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16; the
codec is `attributes & 7` (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd). Control batches
(attributes bit 5: transaction markers) are never compressed and are counted apart. A legacy
message set (magic 0/1: offset int64, size int32, crc uint32, magic int8, attributes int8) is
read the same way, so an old format on disk shows as such rather than as garbage.

Prints one line per codec seen (batches and records); with `--expect`, exits 1 unless the topic
holds what a producer asked to compress with that codec should store (`judge`): every data batch
carries the codec, except that an uncompressed batch of ONE record is allowed, since librdkafka
sends a batch uncompressed when compressing would make it larger ("If the compressed data is
larger than the uncompressed size then throw it away and send as uncompressed",
rdkafka_msgset_writer.c), which happens to a lone small record; and at least one batch must
carry the codec. A producer that stopped compressing (KAFKA-18659) or a broker that rewrote the
batches fails that. Standard library only: the scenarios import `check_codec` and `check_codecs`
from any Python.
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import sys
from dataclasses import dataclass, field

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CODEC_IDS = {name: i for i, name in CODECS.items()}
# The codecs a producer can ask for; a scenario's "compression" step produces with each.
COMPRESSED = ["gzip", "snappy", "lz4", "zstd"]
# The row name of that extra step (after scenario.STEPS).
COMPRESSION_STEP = "compression"
# baseOffset + batchLength: the part of a batch that batchLength does not count.
LOG_OVERHEAD = 12
# Up to and including recordCount (v2); a legacy message needs only up to its attributes.
V2_HEADER = 61
LEGACY_HEADER = 18
CONTROL = 0x20


@dataclass
class Batch:
    partition: int
    segment: str
    base_offset: int
    magic: int
    codec: str
    control: bool
    records: int  # -1 where the format does not say (legacy wrapper messages)


@dataclass
class Summary:
    topic: str
    partitions: list[int] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)

    def data_batches(self) -> list[Batch]:
        return [b for b in self.batches if not b.control]

    def codecs(self) -> set[str]:
        """The codecs of the data (non-control) batches."""
        return {b.codec for b in self.data_batches()}

    def describe(self) -> str:
        """E.g. `lz4: 12 batches, 10000 records; none: 1 batch, 5 records (6 partitions)`."""
        by: dict[str, list[Batch]] = {}
        for b in self.data_batches():
            by.setdefault(b.codec, []).append(b)
        parts = []
        for codec in sorted(by, key=lambda c: CODEC_IDS.get(c, 99)):
            bs = by[codec]
            n = len(bs)
            recs = sum(b.records for b in bs if b.records >= 0)
            # A legacy wrapper message does not say how many records it holds.
            records = f"{recs} records" if all(b.records >= 0 for b in bs) else "records not counted"
            magics = sorted({b.magic for b in bs})
            m = "" if magics == [2] else f", magic {'/'.join(map(str, magics))}"
            parts.append(f"{codec}: {n} batch{'es' if n != 1 else ''}, {records}{m}")
        control = len(self.batches) - len(self.data_batches())
        extra = f", {control} control batch{'es' if control != 1 else ''}" if control else ""
        body = "; ".join(parts) if parts else "no data batches"
        np = len(self.partitions)
        return f"{body} ({np} partition{'s' if np != 1 else ''}{extra})"


def segments(data_dir: str, topic: str) -> list[tuple[int, str]]:
    """(partition, segment path) for every `.log` segment of the topic, in partition and offset order."""
    pat = re.compile(re.escape(topic) + r"-(\d+)")
    found = []
    for name in os.listdir(data_dir):
        m = pat.fullmatch(name)
        d = os.path.join(data_dir, name)
        if not m or not os.path.isdir(d):
            continue
        for seg in sorted(os.listdir(d)):
            if re.fullmatch(r"\d{20}\.log", seg):
                found.append((int(m.group(1)), os.path.join(d, seg)))
    return sorted(found)


def read_segment(partition: int, path: str) -> list[Batch]:
    with open(path, "rb") as f:
        data = f.read()
    batches = []
    pos = 0
    name = os.path.basename(path)
    while len(data) - pos >= LOG_OVERHEAD:
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if length <= 0:
            break  # zero padding (a preallocated segment's tail) or garbage: no more batches
        end = pos + LOG_OVERHEAD + length
        if end > len(data):
            break  # a batch still being written
        magic = data[pos + 16] if len(data) > pos + 16 else -1
        if magic == 2 and end - pos >= V2_HEADER:
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            (records,) = struct.unpack_from(">i", data, pos + 57)
            control = bool(attributes & CONTROL)
        elif magic in (0, 1) and end - pos >= LEGACY_HEADER:
            attributes = data[pos + 17]
            records, control = -1, False
        else:
            raise ValueError(f"{path}: batch at byte {pos} (offset {base_offset}) has magic {magic}, length {length}")
        codec_id = attributes & 7
        codec = CODECS.get(codec_id, f"codec-{codec_id}")
        batches.append(Batch(partition, name, base_offset, magic, codec, control, records))
        pos = end
    return batches


def scan(data_dir: str, topic: str) -> Summary:
    """Every batch stored for `topic` under `data_dir` (a broker's log.dirs)."""
    s = Summary(topic)
    segs = segments(data_dir, topic)
    s.partitions = sorted({p for p, _ in segs})
    for p, path in segs:
        s.batches.extend(read_segment(p, path))
    return s


def judge(s: Summary, want: str) -> str | None:
    """None when `s` is what a producer compressing with `want` stores (see the module doc), else
    what is wrong."""
    data = s.data_batches()
    if not data:
        return f"no stored batches ({len(s.partitions)} partition dirs)"
    wrong = [b for b in data if b.codec != want and not (b.codec == "none" and b.records == 1)]
    if wrong:
        return f"{len(wrong)} of {len(data)} batches are not {want}"
    if not any(b.codec == want for b in data):
        return f"no batch is {want}"
    return None


def lone_uncompressed(s: Summary, want: str) -> str:
    n = sum(1 for b in s.data_batches() if b.codec == "none" and want != "none")
    return f", {n} single-record batch{'es' if n != 1 else ''} left uncompressed by the client" if n else ""


def check_codec(data_dir: str, topic: str, want: str) -> str:
    """Asserts that the topic's stored batches are what a producer asked to compress with `want`
    stores (`judge`); returns what was found (for a step's detail)."""
    assert want in CODEC_IDS, f"unknown codec {want!r} (know {', '.join(CODEC_IDS)})"
    s = scan(data_dir, topic)
    wrong = judge(s, want)
    assert wrong is None, f"{topic}: asked for {want}, {wrong}; stored: {s.describe()}"
    return f"{topic}: {s.describe()}{lone_uncompressed(s, want)}"


def check_codecs(data_dir: str, topic_of: dict[str, str]) -> str:
    """`check_codec` for each codec asked for (`topic_of`: codec -> the topic produced with it).
    Checks every topic before failing, so the detail names what each stored, e.g.
    `gzip: ok (6 batches); lz4: stored ['none'] (6 batches)`."""
    parts, bad = [], []
    for want, topic in topic_of.items():
        s = scan(data_dir, topic)
        n = len(s.data_batches())
        if judge(s, want) is None:
            parts.append(f"{want}: ok ({n} batch{'es' if n != 1 else ''}{lone_uncompressed(s, want)})")
        else:
            bad.append(want)
            parts.append(f"{want}: stored {sorted(s.codecs())} ({n} batch{'es' if n != 1 else ''})")
    detail = "; ".join(parts)
    assert not bad, f"stored batches without the codec asked for ({', '.join(bad)}): {detail}"
    return f"stored batches carry the codec asked for: {detail}"


# librdkafka's line when it will not compress for this broker (a debug line, `debug=msg`).
NOT_COMPRESSING = re.compile(r"Broker does not support compression type (\w+): not compressing batch")


def librdkafka_said(lines: list[str]) -> str:
    """`; librdkafka said "..." for gzip, lz4` from a client's log lines, or "" if it did not."""
    codecs = []
    for line in lines:
        for m in NOT_COMPRESSING.finditer(line):
            if m.group(1) not in codecs:
                codecs.append(m.group(1))
    if not codecs:
        return ""
    return f'; librdkafka said "Broker does not support compression type X: not compressing batch" for {", ".join(codecs)}'


def data_dir_from_env() -> str:
    """The broker's data directory, from STRATA_DATA_DIR (run.sh exports it)."""
    d = os.environ.get("STRATA_DATA_DIR", "")
    assert d, "STRATA_DATA_DIR is not set: the broker's log.dirs is needed to read its segments"
    assert os.path.isdir(d), f"STRATA_DATA_DIR={d} is not a directory"
    return d


def main() -> int:
    p = argparse.ArgumentParser(description="The codecs of a topic's stored batches.")
    p.add_argument("data_dir", help="the broker's log.dirs")
    p.add_argument("topic")
    p.add_argument("--expect", choices=sorted(CODEC_IDS), help="exit 1 unless the batches are this codec (see judge)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per batch")
    args = p.parse_args()
    s = scan(args.data_dir, args.topic)
    if args.verbose:
        for b in s.batches:
            kind = " control" if b.control else ""
            print(f"{b.partition}\t{b.segment}\t{b.base_offset}\tmagic {b.magic}\t{b.codec}{kind}\t{b.records} records")
    print(f"{args.topic}: codecs {sorted(s.codecs())}: {s.describe()}")
    if args.expect:
        wrong = judge(s, args.expect)
        print(f"expected {args.expect}: {'ok' if wrong is None else 'MISMATCH: ' + wrong}")
        return 0 if wrong is None else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
