"""What every client scenario shares: the steps, the message model, the checks and the results file.

Each `scenario_<client>.py` runs the same eight steps against one fresh broker and appends one
row per step to a TSV file (client, step, result, seconds, detail). `result` is `pass`,
`fail`, `skip` (an earlier step it needs failed) or `n/a` (the client cannot do it).

Everything about message `i` is derived from `i`: its key (`key_of`), its value (`value_of`)
and its headers (`headers_of`), so a consumer can recompute what it should have received. A
step passes only when its check holds; a failed check says what it saw instead.
"""

from __future__ import annotations

import argparse
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field

# The steps, in the order they run and are reported.
STEPS = [
    "create-topic",  # admin: CreateTopics, 6 partitions, one topic config
    "list-topics",  # admin: the topic is listed with 6 partitions
    "describe-configs",  # admin: DescribeConfigs shows the config set at creation
    "produce",  # 10,000 keyed messages with headers, acks=all, idempotence
    "group-consume",  # a group of 2 reads them all back, committing
    "committed-offsets",  # the group's committed offsets are the partitions' end offsets
    "latest-group",  # a new group with auto.offset.reset=latest sees only new messages
    "delete-topic",  # admin: DeleteTopics, the topic is no longer listed
]

PARTITIONS = 6
MESSAGES = 10_000
# Messages produced after the latest group has its position.
NEW_MESSAGES = 100
# Distinct keys: each is reused MESSAGES / KEYS times, so "one key, one partition" means something.
KEYS = 1_000
# A topic config set at creation, so DescribeConfigs has something non-default to show.
RETENTION_MS = "86400000"
# Bound on each wait inside a step.
STEP_TIMEOUT_S = 120.0
# How long a consumer keeps polling after it has what it expected, to catch extra messages.
QUIET_S = 2.0


def key_of(i: int) -> str:
    return f"key-{i % KEYS}"


def value_of(client: str, i: int) -> str:
    return f"{client}|{i}"


def headers_of(client: str, i: int) -> list[tuple[str, bytes]]:
    return [("seq", str(i).encode()), ("client", client.encode())]


@dataclass
class Record:
    """A message as a consumer saw it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]

    def seq(self) -> int:
        """The index `i` this message claims to be (its `seq` header)."""
        for k, v in self.headers:
            if k == "seq" and v is not None:
                return int(v)
        raise AssertionError(f"no seq header in {self}")


def check_record(client: str, r: Record, headers: list[tuple[str, bytes]] | None = None) -> int:
    """Checks key, value and headers against the model; returns the message index.

    `headers=None`: per-message headers (`headers_of`), the index comes from `seq`. Otherwise
    every message carries exactly `headers` (kcat sets the same headers on every message it
    sends) and the index comes from the value."""
    if headers is None:
        i = r.seq()
        want_headers = headers_of(client, i)
    else:
        i = int((r.value or b"").decode().rsplit("|", 1)[-1])
        want_headers = headers
    want_key, want_value = key_of(i).encode(), value_of(client, i).encode()
    assert r.key == want_key, f"message {i}: key {r.key!r}, expected {want_key!r}"
    assert r.value == want_value, f"message {i}: value {r.value!r}, expected {want_value!r}"
    assert r.headers == want_headers, f"message {i}: headers {r.headers!r}, expected {want_headers!r}"
    return i


@dataclass
class Produced:
    """What the produce step learned, for the steps after it."""

    # partition -> end offset (high watermark) after the 10,000 messages.
    end_offsets: dict[int, int] = field(default_factory=dict)
    # message index -> partition it was acknowledged on.
    partition_of: dict[int, int] = field(default_factory=dict)


def check_acks(acks: dict[int, tuple[int, int]], expected: range) -> Produced:
    """Checks delivery reports (index -> (partition, offset)): every message acknowledged once,
    all partitions used, each key on one partition, offsets 0..n-1 per partition."""
    missing = [i for i in expected if i not in acks]
    assert not missing, f"{len(missing)} of {len(expected)} not acknowledged (first {missing[:5]})"
    by_partition: dict[int, list[int]] = defaultdict(list)
    key_partitions: dict[str, set[int]] = defaultdict(set)
    for i in expected:
        p, off = acks[i]
        by_partition[p].append(off)
        key_partitions[key_of(i)].add(p)
    assert len(by_partition) == PARTITIONS, (
        f"messages landed on {len(by_partition)} partitions {sorted(by_partition)}, expected {PARTITIONS}"
    )
    split = {k: v for k, v in key_partitions.items() if len(v) > 1}
    assert not split, f"{len(split)} keys on more than one partition, e.g. {next(iter(split.items()))}"
    for p, offs in by_partition.items():
        offs.sort()
        assert offs == list(range(len(offs))), (
            f"partition {p}: offsets not 0..{len(offs) - 1} (duplicates or gaps), first {offs[:5]}"
        )
    return Produced(
        end_offsets={p: len(o) for p, o in by_partition.items()},
        partition_of={i: acks[i][0] for i in expected},
    )


def check_group_read(
    client: str,
    records_by_member: dict[str, list[Record]],
    assignments: dict[str, set[int]],
    produced: Produced | None,
    expected: range,
    headers: list[tuple[str, bytes]] | None = None,
) -> str:
    """Checks a group's read: every expected message seen with the right key, value, headers and
    partition; both members held partitions, disjoint and covering the topic."""
    members = sorted(records_by_member)
    assert len(members) == 2, f"expected 2 members, got {members}"
    for m in members:
        assert assignments.get(m), f"member {m} never held a partition (assignments {assignments})"
    a, b = (assignments[m] for m in members)
    assert not (a & b), f"members share partitions: {sorted(a)} and {sorted(b)}"
    assert a | b == set(range(PARTITIONS)), f"assignments {sorted(a)} + {sorted(b)} do not cover the topic"
    seen: dict[int, int] = defaultdict(int)
    key_partitions: dict[bytes | None, set[int]] = defaultdict(set)
    for m in members:
        for r in records_by_member[m]:
            i = check_record(client, r, headers)
            assert i in expected, f"member {m} read message {i}, outside {expected}"
            if produced is not None and produced.partition_of:
                want = produced.partition_of[i]
                assert r.partition == want, f"message {i} read from partition {r.partition}, acked on {want}"
            key_partitions[r.key].add(r.partition)
            seen[i] += 1
    missing = [i for i in expected if i not in seen]
    assert not missing, f"{len(missing)} of {len(expected)} never read (first {missing[:5]})"
    split = {k: v for k, v in key_partitions.items() if len(v) > 1}
    assert not split, f"{len(split)} keys read from more than one partition"
    dups = sum(n - 1 for n in seen.values())
    counts = ", ".join(f"{m}: {len(records_by_member[m])} msgs, partitions {sorted(assignments[m])}" for m in members)
    return f"all {len(expected)} read with keys and headers intact ({counts}; {dups} re-deliveries)"


def check_committed(committed: dict[int, int], produced: Produced) -> str:
    want = produced.end_offsets
    assert committed == want, f"committed {dict(sorted(committed.items()))}, end offsets {dict(sorted(want.items()))}"
    return f"committed offsets = end offsets on all {len(want)} partitions (sum {sum(want.values())})"


def check_latest(client: str, records: list[Record], headers: list[tuple[str, bytes]] | None = None) -> str:
    expected = range(MESSAGES, MESSAGES + NEW_MESSAGES)
    seqs = [check_record(client, r, headers) for r in records]
    old = sorted(i for i in seqs if i < MESSAGES)
    assert not old, f"read {len(old)} messages produced before it joined, e.g. {old[:5]}"
    assert sorted(seqs) == list(expected), (
        f"read {len(seqs)} messages ({len(set(seqs))} distinct), expected exactly the {NEW_MESSAGES} new ones"
    )
    return f"exactly the {NEW_MESSAGES} new messages, none of the {MESSAGES} old"


class Scenario:
    """Runs steps, times them, and appends one TSV row per step."""

    def __init__(self, client: str, out_path: str):
        self.client = client
        self.out_path = out_path
        self.failed: set[str] = set()
        self.done: set[str] = set()

    def _row(self, step: str, result: str, seconds: float, detail: str) -> None:
        detail = " ".join(detail.split())[:400]
        with open(self.out_path, "a", encoding="utf-8") as f:
            f.write(f"{self.client}\t{step}\t{result}\t{seconds:.1f}\t{detail}\n")
        print(f"[{self.client}] {step}: {result.upper()} ({seconds:.1f}s) {detail}", flush=True)

    def fail(self, step: str, detail: str) -> None:
        self.done.add(step)
        self.failed.add(step)
        self._row(step, "fail", 0.0, detail)

    def not_applicable(self, step: str, why: str) -> None:
        self.done.add(step)
        self._row(step, "n/a", 0.0, why)

    def run(self, name: str, body, needs: tuple[str, ...] = ()) -> None:
        """Runs `body()`, which returns the row's detail; an exception fails the step. A step
        whose prerequisite failed is skipped without running."""
        assert name in STEPS, name
        self.done.add(name)
        blocked = [n for n in needs if n in self.failed]
        if blocked:
            self.failed.add(name)
            self._row(name, "skip", 0.0, f"needs {', '.join(blocked)}, which failed")
            return
        start = time.monotonic()
        try:
            detail = body()
        except Exception as e:  # noqa: BLE001 - any error is this step's failure
            self.failed.add(name)
            msg = str(e) if isinstance(e, AssertionError) else f"{type(e).__name__}: {e}"
            traceback.print_exc()
            self._row(name, "fail", time.monotonic() - start, msg)
        else:
            self._row(name, "pass", time.monotonic() - start, detail or "")

    def finish(self) -> int:
        for name in STEPS:
            if name not in self.done:
                self._row(name, "fail", 0.0, "step did not run (scenario ended early)")
                self.failed.add(name)
        return 1 if self.failed else 0


def wait_for(what: str, cond, timeout: float = STEP_TIMEOUT_S, every: float = 0.1):
    """Polls `cond()` until it returns something truthy (returned) or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def parse_args(client: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=f"The client-library scenario for {client}.")
    p.add_argument("--bootstrap", required=True, help="host:port of a fresh broker")
    p.add_argument("--results", required=True, help="TSV file to append one row per step to")
    p.add_argument("--topic", default=f"scenario-{client}")
    return p.parse_args()
