"""Jepsen-style checkers for the histories that the Strata verification harness records.

A history is a list of events, one JSON object a line on disk (see `history.py`):

    {"i": int, "t": float, "proc": str, "type": "invoke"|"ok"|"fail"|"info", "f": str, "value": ...}

`invoke` starts an operation and the same proc's next `ok`/`fail`/`info` event with the same `f`
completes it (`fail`: it definitely did not happen; `info`: its outcome is unknown). Sends are
asynchronous: a send's completion carries the `value["id"]` of its invoke, and one proc may have
many sends open at once. Events whose `f` no checker knows (faults, admin calls, ...) are skipped.

Each `check_<name>(history)` returns that checker's anomalies, each a dict with at least
"checker", "explanation" (one sentence) and "i" (the index of the event where the anomaly shows),
plus the ids, positions and other event indices involved. A list holds at most `MAX_ANOMALIES`
entries; its `total` attribute holds the full count. `check_all(history)` runs every checker on
one shared index of the history and returns counts, the first anomalies of each and statistics.

Every checker accepts either the list of events or a `HistoryIndex` built once from it, so a
caller running several checkers indexes the history only once. All passes are linear (plus a sort
of the known offsets of each partition), so a history of a few million events checks in seconds.

Run as a script, `python3 checkers.py HISTORY.jsonl [--json]` prints the counts and the first
anomalies of each checker, and exits 1 if any checker other than `unseen` found something.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import gc
import itertools
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Event = dict[str, Any]
Anomaly = dict[str, Any]
TopicPartition = tuple[str, int]
Position = tuple[str, int, int]

MAX_ANOMALIES = 1000
"""The most anomalies one checker returns; `Anomalies.total` still counts all of them."""

SUMMARY_ANOMALIES = 20
"""How many anomalies of each checker `check_all` keeps."""

READ_COMMITTED = "read_committed"
COMMITTED = "committed"
ABORTED = "aborted"
UNKNOWN = "unknown"

CHECKERS = (
    "lost",
    "unseen",
    "committed_invisible",
    "duplicate",
    "inconsistent_offsets",
    "g1a",
    "early_read",
    "torn_transaction",
    "poll_skip",
    "nonmonotonic_poll",
    "nonmonotonic_send",
    "committed_offsets_backwards",
)
"""Every checker's name, in the order reports list them."""

BENIGN_CHECKERS = frozenset({"unseen"})
"""Checkers whose findings do not fail a run (an unseen write may simply not have been read)."""

_OPERATIONS = frozenset(
    {"poll", "final-read", "assign", "commit", "committed", "txn-begin", "txn-commit", "txn-abort"}
)
"""The operations other than `send` that the checkers read; events of any other `f` are skipped."""


class Anomalies(list[Anomaly]):
    """A checker's anomalies: at most `cap` of them, with `total` counting every one found."""

    def __init__(self, cap: int = MAX_ANOMALIES) -> None:
        super().__init__()
        self.cap = cap
        self.total = 0

    def add(self, anomaly: Anomaly) -> None:
        """Counts `anomaly`, keeping it while fewer than `cap` are kept."""
        self.total += 1
        if len(self) < self.cap:
            self.append(anomaly)


@dataclass(slots=True)
class Send:
    """One send: what its invoke asked for and, once acknowledged, where it landed.

    `HistoryIndex.sends` holds sends in the order of their invokes (or, for a send whose invoke
    was not recorded, of its completion).
    """

    id: str
    proc: str
    idempotent: bool
    txn: str | None
    invoke_i: int | None
    outcome: str | None = None  # "ok", "fail", "info"; None while never completed
    done_i: int = -1  # the completion's event, once completed
    position: Position | None = None  # (topic, partition, offset) once acknowledged


@dataclass(slots=True)
class Txn:
    """One transaction attempt and what is known of its outcome."""

    id: str
    commit_invoke_i: int | None = None  # the first txn-commit invoke (-1: completed, no invoke)
    commit_ok: bool = False
    commit_fail: bool = False
    abort_ok: bool = False

    @property
    def status(self) -> str:
        """`COMMITTED`, `ABORTED` or `UNKNOWN` (possibly either)."""
        if self.commit_ok:
            return COMMITTED
        if self.abort_ok or self.commit_fail:
            return ABORTED
        return UNKNOWN


@dataclass(slots=True)
class Read:
    """A completed poll or final read and the records it returned, in the client's order."""

    kind: str  # "poll" or "final-read"
    consumer: str
    isolation: str
    invoke_i: int | None
    i: int
    records: list[list[Any]]
    ends: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def read_committed(self) -> bool:
        return self.isolation == READ_COMMITTED


# A step of a consumer's timeline: ("assign", consumer, positions or None), ("forget", consumer,
# None) after a poll whose outcome is unknown, or ("read", consumer, Read).
ConsumerOp = tuple[str, str, Any]


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Suspends the cyclic garbage collector while millions of acyclic objects are built (its
    passes over them would only cost time), restoring its previous state after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _value(event: Event | None) -> dict[str, Any]:
    if event is None:
        return {}
    value = event.get("value")
    return value if isinstance(value, dict) else {}


def _from(key: str, done: Event, invoke: Event | None, default: Any = None) -> Any:
    """`key` of the completion's value, else of the invoke's value, else `default`."""
    value = _value(done)
    if value.get(key) is not None:
        return value[key]
    value = _value(invoke)
    if value.get(key) is not None:
        return value[key]
    return default


class HistoryIndex:
    """Everything the checkers need from a history, gathered in linear passes.

    The first pass pairs invokes with completions and collects sends, transactions, reads,
    consumer assignments and group offset operations; the next ones index acknowledged sends by
    position, and every record read by position and by id.
    """

    def __init__(self, history: Sequence[Event]) -> None:
        self.sends: dict[str, Send] = {}
        self.txns: dict[str, Txn] = {}
        self.reads: list[Read] = []
        self.consumer_ops: list[ConsumerOp] = []
        # ("commit" | "committed", invoke or None, ok event), in completion order.
        self.offset_ops: list[tuple[str, Event | None, Event]] = []
        self.stats: dict[str, int] = {
            "events": len(history),
            "sends_invoked": 0,
            "sends_ok": 0,
            "sends_fail": 0,
            "sends_info": 0,
            "sends_incomplete": 0,
            "txns_committed": 0,
            "txns_aborted": 0,
            "txns_unknown": 0,
            "polls_ok": 0,
            "records_polled": 0,
            "final_reads": 0,
            "final_read_records": 0,
            "distinct_ids_read": 0,
            "duplicates_non_idempotent": 0,
            "duplicates_unsent": 0,
        }
        # Records read, by position: the first id and event; every id when they differ.
        self.read_at: dict[Position, tuple[str, int]] = {}
        self.read_conflicts: dict[Position, dict[str, int]] = {}
        # Acknowledged sends, by position, likewise.
        self.ack_at: dict[Position, tuple[str, int]] = {}
        self.ack_conflicts: dict[Position, dict[str, int]] = {}
        # Ids read: the first position and event; every position when they differ.
        self.id_read_at: dict[str, tuple[Position, int]] = {}
        self.id_positions: dict[str, dict[Position, int]] = {}
        # Ids some read_committed read returned.
        self.read_committed_ids: set[str] = set()
        # The furthest end each partition's final reads reached: (end, final read's event).
        self.final_ends: dict[TopicPartition, tuple[int, int]] = {}

        with _no_gc():
            self._pair(self._ordered(history))
            self._index_acks()
            self._index_reads()
        for txn in self.txns.values():
            self.stats["txns_" + txn.status] += 1

    @staticmethod
    def _ordered(history: Sequence[Event]) -> Sequence[Event]:
        last = None
        for event in history:
            i = event["i"]
            if last is not None and i < last:
                return sorted(history, key=lambda e: e["i"])
            last = i
        return history

    def _txn(self, txn_id: str) -> Txn:
        txn = self.txns.get(txn_id)
        if txn is None:
            txn = self.txns[txn_id] = Txn(txn_id)
        return txn

    def _pair(self, history: Sequence[Event]) -> None:
        open_ops: dict[tuple[str, str], Event] = {}
        stats = self.stats
        for event in history:
            f = event.get("f")
            kind = event.get("type")
            if f == "send":
                self._on_send(event, kind)
                continue
            if f not in _OPERATIONS:
                continue
            proc = event.get("proc", "")
            if kind == "invoke":
                open_ops[(proc, f)] = event
                txn_id = _value(event).get("txn")
                if f == "txn-commit" and txn_id is not None:
                    txn = self._txn(txn_id)
                    if txn.commit_invoke_i is None:
                        txn.commit_invoke_i = event["i"]
                continue
            invoke = open_ops.pop((proc, f), None)
            if f == "poll":
                consumer = str(_from("consumer", event, invoke, proc))
                if kind == "ok":
                    stats["polls_ok"] += 1
                    self._add_read("poll", consumer, event, invoke)
                elif kind == "info":
                    self.consumer_ops.append(("forget", consumer, None))
            elif f == "final-read":
                if kind == "ok":
                    stats["final_reads"] += 1
                    read = self._add_read("final-read", "final-read", event, invoke)
                    for topic, partition, end in _value(event).get("ends") or ():
                        if end is None:
                            continue
                        tp = (topic, partition)
                        best = self.final_ends.get(tp)
                        if best is None or end > best[0]:
                            self.final_ends[tp] = (end, event["i"])
                        read.ends[tp] = end
            elif f == "assign":
                consumer = str(_from("consumer", event, invoke, proc))
                if kind == "ok":
                    positions = _value(event).get("positions")
                    self.consumer_ops.append(("assign", consumer, positions))
                elif kind == "info":
                    self.consumer_ops.append(("assign", consumer, None))
            elif f in ("commit", "committed"):
                if kind == "ok":
                    self.offset_ops.append((f, invoke, event))
            else:  # txn-begin, txn-commit, txn-abort
                txn_id = _from("txn", event, invoke)
                if txn_id is None:
                    continue
                txn = self._txn(txn_id)
                if f == "txn-commit":
                    if txn.commit_invoke_i is None:
                        txn.commit_invoke_i = -1  # completed, invoke not recorded
                    if kind == "ok":
                        txn.commit_ok = True
                    elif kind == "fail":
                        txn.commit_fail = True
                elif f == "txn-abort" and kind == "ok":
                    txn.abort_ok = True

    def _on_send(self, event: Event, kind: str | None) -> None:
        value = event.get("value")
        if not isinstance(value, dict) or value.get("id") is None:
            return
        send_id = value["id"]
        send = self.sends.get(send_id)
        if kind == "invoke":
            self.stats["sends_invoked"] += 1
            if send is None:
                txn = value.get("txn")
                if txn is not None and txn not in self.txns:
                    self.txns[txn] = Txn(txn)
                self.sends[send_id] = Send(
                    send_id, event.get("proc", ""), bool(value.get("idempotent")), txn, event["i"]
                )
            return
        if send is None:  # a completion whose invoke was not recorded
            send = self.sends[send_id] = Send(send_id, event.get("proc", ""), False, None, None)
        elif send.outcome == "ok":
            return  # the acknowledgement stands
        send.outcome = kind
        send.done_i = event["i"]
        if kind == "ok":
            topic = value.get("topic")
            partition = value.get("partition")
            offset = value.get("offset")
            if topic is not None and partition is not None and offset is not None:
                send.position = (topic, partition, offset)

    def _add_read(self, kind: str, consumer: str, event: Event, invoke: Event | None) -> Read:
        read = Read(
            kind=kind,
            consumer=consumer,
            isolation=str(_from("isolation", event, invoke, "read_uncommitted")),
            invoke_i=None if invoke is None else invoke["i"],
            i=event["i"],
            records=_value(event).get("records") or [],
        )
        self.reads.append(read)
        if kind == "poll":
            self.consumer_ops.append(("read", consumer, read))
        return read

    def _index_acks(self) -> None:
        stats = self.stats
        for send in self.sends.values():
            if send.outcome is None:
                stats["sends_incomplete"] += 1
                continue
            stats["sends_" + send.outcome] += 1
            pos = send.position
            if pos is None:
                continue
            first = self.ack_at.get(pos)
            if first is None:
                self.ack_at[pos] = (send.id, send.done_i)
            elif first[0] != send.id:
                ids = self.ack_conflicts.setdefault(pos, {first[0]: first[1]})
                ids.setdefault(send.id, send.done_i)

    def _index_reads(self) -> None:
        read_at = self.read_at
        read_conflicts = self.read_conflicts
        id_read_at = self.id_read_at
        id_positions = self.id_positions
        rc_ids = self.read_committed_ids
        polled = 0
        final = 0
        for read in self.reads:
            i = read.i
            rc = read.read_committed
            if read.kind == "poll":
                polled += len(read.records)
            else:
                final += len(read.records)
            for topic, partition, offset, vid in read.records:
                pos = (topic, partition, offset)
                first = read_at.setdefault(pos, (vid, i))
                if first[0] != vid:
                    read_conflicts.setdefault(pos, {first[0]: first[1]}).setdefault(vid, i)
                seen = id_read_at.setdefault(vid, (pos, i))
                if seen[0] != pos:
                    id_positions.setdefault(vid, {seen[0]: seen[1]}).setdefault(pos, i)
            if rc:
                rc_ids.update(record[3] for record in read.records)
        self.stats["records_polled"] = polled
        self.stats["final_read_records"] = final
        self.stats["distinct_ids_read"] = len(id_read_at)
        for vid in id_positions:
            send = self.sends.get(vid)
            if send is None:
                self.stats["duplicates_unsent"] += 1
            elif not (send.idempotent or send.txn is not None):
                self.stats["duplicates_non_idempotent"] += 1

    # Queries shared by the checkers.

    def txn_status(self, txn_id: str) -> str:
        txn = self.txns.get(txn_id)
        return UNKNOWN if txn is None else txn.status

    def is_committed_write(self, send: Send) -> bool:
        """Acknowledged, and either outside a transaction or in a committed one."""
        if send.outcome != "ok":
            return False
        return send.txn is None or self.txn_status(send.txn) == COMMITTED

    def is_aborted_write(self, send: Send) -> bool:
        """In a transaction that was aborted (whatever the send's own outcome)."""
        return send.txn is not None and self.txn_status(send.txn) == ABORTED

    def visible_read_committed(self, vid: str) -> bool:
        """Whether a record holding `vid` must be returned to a read_committed consumer.

        Writes outside transactions and writes of committed transactions are; writes of aborted
        or unknown-outcome transactions are not. A value no send wrote (the transform step's
        output, whose producer the history does not show) counts only once some read_committed
        read returned it, which shows it committed.
        """
        send = self.sends.get(vid)
        if send is None:
            return vid in self.read_committed_ids
        return send.txn is None or self.txn_status(send.txn) == COMMITTED

    def ids_at(self, pos: Position) -> dict[str, tuple[str, int]]:
        """Every id known at `pos`: id -> ("read" | "ack", index of the first event showing it)."""
        ids: dict[str, tuple[str, int]] = {}
        conflicts = self.read_conflicts.get(pos)
        if conflicts is not None:
            for vid, i in conflicts.items():
                ids[vid] = ("read", i)
        else:
            first = self.read_at.get(pos)
            if first is not None:
                ids[first[0]] = ("read", first[1])
        acks = self.ack_conflicts.get(pos)
        if acks is None:
            first = self.ack_at.get(pos)
            acks = {} if first is None else {first[0]: first[1]}
        for vid, i in acks.items():
            if vid not in ids:
                ids[vid] = ("ack", i)
        return ids


HistoryLike = Sequence[Event] | HistoryIndex


def analyze(history: HistoryLike) -> HistoryIndex:
    """The index of `history` (returned as is when it already is one)."""
    return history if isinstance(history, HistoryIndex) else HistoryIndex(history)


def _pos_text(topic: str, partition: int, offset: int | None = None) -> str:
    return f"{topic}-{partition}" if offset is None else f"{topic}-{partition}@{offset}"


def _reader(read: Read) -> str:
    if read.kind == "poll":
        return f"A {read.isolation} poll of consumer {read.consumer}"
    return f"A {read.isolation} final read"


# 1 and 2: lost and unseen writes.


def _unread_writes(idx: HistoryIndex, lost: bool) -> Anomalies:
    found = Anomalies()
    for send in idx.sends.values():
        pos = send.position
        if pos is None or send.id in idx.id_read_at or not idx.is_committed_write(send):
            continue
        topic, partition, offset = pos
        reached = idx.final_ends.get((topic, partition))
        is_lost = reached is not None and reached[0] > offset
        if is_lost != lost:
            continue
        where = _pos_text(topic, partition, offset)
        anomaly: Anomaly = {
            "checker": "lost" if lost else "unseen",
            "id": send.id,
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "txn": send.txn,
            "i": send.done_i,
            "invoke_i": send.invoke_i,
            "final_read_end": None if reached is None else reached[0],
            "final_read_i": None if reached is None else reached[1],
        }
        if reached is not None and lost:
            anomaly["explanation"] = (
                f"Write {send.id} was acknowledged at {where} but no read returned it, though a "
                f"final read reached offset {reached[0]}."
            )
        elif reached is None:
            anomaly["explanation"] = (
                f"Write {send.id} was acknowledged at {where} but no read returned it, and no "
                "final read covered its partition."
            )
        else:
            anomaly["explanation"] = (
                f"Write {send.id} was acknowledged at {where} but no read returned it, and the "
                f"final reads stopped at offset {reached[0]}."
            )
        found.add(anomaly)
    return found


def check_lost(history: HistoryLike) -> Anomalies:
    """Committed writes that no read returned although a final read went past their offset."""
    return _unread_writes(analyze(history), lost=True)


def check_unseen(history: HistoryLike) -> Anomalies:
    """Committed writes that no read returned and no final read went past (not proof of loss)."""
    return _unread_writes(analyze(history), lost=False)


def check_committed_invisible(history: HistoryLike) -> Anomalies:
    """Writes of committed transactions that no read_committed read returned, although a
    read_committed final read went past their offset: the transaction was aborted in that
    partition after its commit was acknowledged. A read_uncommitted read may have returned
    them, so `lost` does not see this."""
    idx = analyze(history)
    ends: dict[TopicPartition, tuple[int, int]] = {}
    for read in idx.reads:
        if read.kind == "final-read" and read.read_committed:
            for tp, end in read.ends.items():
                if tp not in ends or end > ends[tp][0]:
                    ends[tp] = (end, read.i)
    found = Anomalies()
    for send in idx.sends.values():
        pos = send.position
        if (
            pos is None
            or send.txn is None
            or send.id in idx.read_committed_ids
            or not idx.is_committed_write(send)
        ):
            continue
        topic, partition, offset = pos
        reached = ends.get((topic, partition))
        if reached is None or reached[0] <= offset:
            continue
        found.add(
            {
                "checker": "committed_invisible",
                "explanation": (
                    f"Write {send.id} of committed transaction {send.txn}, acknowledged at "
                    f"{_pos_text(topic, partition, offset)}, was never returned to a "
                    f"read_committed reader, though a read_committed final read reached offset "
                    f"{reached[0]}."
                ),
                "id": send.id,
                "txn": send.txn,
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "i": send.done_i,
                "final_read_i": reached[1],
            }
        )
    return found


# 3: duplicates.


def check_duplicate(history: HistoryLike) -> Anomalies:
    """Ids of idempotent or transactional sends read at two or more different positions.

    Ids of non-idempotent sends (which retries may legitimately duplicate) and ids no send wrote
    are only counted, in the stats `duplicates_non_idempotent` and `duplicates_unsent`.
    """
    idx = analyze(history)
    found = Anomalies()
    for vid, positions in idx.id_positions.items():
        send = idx.sends.get(vid)
        if send is None or not (send.idempotent or send.txn is not None):
            continue
        ordered = sorted(positions.items(), key=lambda item: item[1])
        where = ", ".join(_pos_text(*pos) for pos, _ in ordered)
        found.add(
            {
                "checker": "duplicate",
                "explanation": (
                    f"Write {vid} of {'a transactional' if send.txn else 'an idempotent'} "
                    f"producer was read at {len(ordered)} positions: {where}."
                ),
                "id": vid,
                "txn": send.txn,
                "positions": [list(pos) for pos, _ in ordered],
                "read_i": [i for _, i in ordered],
                "i": ordered[1][1],
            }
        )
    return found


# 4: inconsistent offsets.


def check_inconsistent_offsets(history: HistoryLike) -> Anomalies:
    """Positions that reads, or a read and an acknowledgement, or two acknowledgements, place
    different ids at."""
    idx = analyze(history)
    found = Anomalies()
    suspects: dict[Position, None] = dict.fromkeys(idx.read_conflicts)
    suspects.update(dict.fromkeys(idx.ack_conflicts))
    read_at = idx.read_at
    for pos, (vid, _) in idx.ack_at.items():
        first = read_at.get(pos)
        if first is not None and first[0] != vid:
            suspects[pos] = None
    conflicts = []
    for pos in suspects:
        ids = idx.ids_at(pos)
        conflicts.append((pos, ids, sorted(ids.items(), key=lambda item: item[1][1])))
    conflicts.sort(key=lambda conflict: conflict[2][1][1][1])
    for pos, ids, shown in conflicts:
        sources = {source for source, _ in ids.values()}
        if sources == {"read"}:
            how = "reads returned"
        elif sources == {"ack"}:
            how = "sends were acknowledged with"
        else:
            how = "reads and acknowledgements gave"
        found.add(
            {
                "checker": "inconsistent_offsets",
                "explanation": (
                    f"At {_pos_text(*pos)} {how} different values: "
                    + ", ".join(f"{vid} ({source} at i={i})" for vid, (source, i) in shown)
                    + "."
                ),
                "topic": pos[0],
                "partition": pos[1],
                "offset": pos[2],
                "ids": [vid for vid, _ in shown],
                "events": [{"id": vid, "source": src, "i": i} for vid, (src, i) in shown],
                "i": shown[1][1][1],
            }
        )
    return found


# 5 and 6: aborted reads and early reads.


def check_g1a(history: HistoryLike) -> Anomalies:
    """Writes of aborted transactions returned by read_committed polls or final reads.

    One anomaly per id, at its first such read; "reads" counts how often such reads returned it.
    """
    idx = analyze(history)
    found = Anomalies()
    by_id: dict[str, Anomaly] = {}
    sends = idx.sends
    for read in idx.reads:
        if not read.read_committed:
            continue
        for topic, partition, offset, vid in read.records:
            send = sends.get(vid)
            if send is None or send.txn is None or not idx.is_aborted_write(send):
                continue
            seen = by_id.get(vid)
            if seen is not None:
                seen["reads"] += 1
                continue
            by_id[vid] = anomaly = {
                "checker": "g1a",
                "explanation": (
                    f"{_reader(read)} returned {vid} at {_pos_text(topic, partition, offset)}, "
                    f"a write of aborted transaction {send.txn}."
                ),
                "id": vid,
                "txn": send.txn,
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "consumer": read.consumer,
                "kind": read.kind,
                "i": read.i,
                "reads": 1,
            }
            found.add(anomaly)
    return found


def check_early_read(history: HistoryLike) -> Anomalies:
    """read_committed polls that returned a transaction's writes before its commit was invoked.

    The poll's completion is the bound: a poll may block, so one invoked before the commit may
    rightly return the transaction's writes once the commit is under way, but one that completed
    before the commit was even invoked read them too early. Only transactions that committed or
    whose outcome is unknown count (reads of aborted ones are G1a); a transaction whose commit
    was never invoked counts too. One anomaly per poll and transaction.
    """
    idx = analyze(history)
    found = Anomalies()
    sends = idx.sends
    txns = idx.txns
    for read in idx.reads:
        if read.kind != "poll" or not read.read_committed:
            continue
        early: dict[str, list[str]] = {}
        for _topic, _partition, _offset, vid in read.records:
            send = sends.get(vid)
            if send is None or send.txn is None:
                continue
            txn = txns[send.txn]
            if txn.status == ABORTED:
                continue
            if txn.commit_invoke_i is None or txn.commit_invoke_i > read.i:
                early.setdefault(txn.id, []).append(vid)
        for txn_id, ids in early.items():
            txn = txns[txn_id]
            when = (
                "was never invoked"
                if txn.commit_invoke_i is None
                else f"was only invoked at i={txn.commit_invoke_i}"
            )
            found.add(
                {
                    "checker": "early_read",
                    "explanation": (
                        f"A read_committed poll of consumer {read.consumer} returned {len(ids)} "
                        f"write(s) of transaction {txn_id} at i={read.i}, but its commit {when}."
                    ),
                    "txn": txn_id,
                    "status": txn.status,
                    "ids": ids,
                    "consumer": read.consumer,
                    "i": read.i,
                    "poll_invoke_i": read.invoke_i,
                    "commit_invoke_i": txn.commit_invoke_i,
                }
            )
    return found


# 7: torn transactions.


def check_torn_transaction(history: HistoryLike) -> Anomalies:
    """Committed transactions of which a read_committed final read covering all their partitions
    returned some but not all acknowledged writes."""
    idx = analyze(history)
    found = Anomalies()
    # Each committed transaction's acknowledged writes, and its highest offset per partition.
    writes: dict[str, list[str]] = {}
    highest: dict[str, dict[TopicPartition, int]] = {}
    for send in idx.sends.values():
        pos = send.position
        if send.txn is None or pos is None or idx.txn_status(send.txn) != COMMITTED:
            continue
        writes.setdefault(send.txn, []).append(send.id)
        txn_highest = highest.setdefault(send.txn, {})
        topic, partition, offset = pos
        if offset > txn_highest.get((topic, partition), -1):
            txn_highest[(topic, partition)] = offset
    if not writes:
        return found
    for read in idx.reads:
        if read.kind != "final-read" or not read.read_committed:
            continue
        ids = {record[3] for record in read.records}
        for txn_id, sends in writes.items():
            if any(read.ends.get(tp, -1) <= end for tp, end in highest[txn_id].items()):
                continue
            present = [vid for vid in sends if vid in ids]
            if not present or len(present) == len(sends):
                continue
            missing = [vid for vid in sends if vid not in ids]
            found.add(
                {
                    "checker": "torn_transaction",
                    "explanation": (
                        f"A read_committed final read covering committed transaction {txn_id} "
                        f"returned {len(present)} of its {len(sends)} acknowledged writes."
                    ),
                    "txn": txn_id,
                    "i": read.i,
                    "read_ids": present[:SUMMARY_ANOMALIES],
                    "missing_ids": missing[:SUMMARY_ANOMALIES],
                    "read_count": len(present),
                    "acked_count": len(sends),
                }
            )
    return found


# 8 and 9: consumer sessions.

# A record read, with what its session of the partition knew before it: (read, topic, partition,
# assigned start or None, previous offset or None, previous record's event or None, offset).
Step = tuple[Read, str, int, int | None, int | None, int | None, int]


def _session_jumps(idx: HistoryIndex) -> Iterator[Step]:
    """The records read by polls and final reads that do not simply follow the previous record
    of their session (the next offset), in order, with the session's state before them.

    A session of a consumer's partition begins at an assign that lists the partition (with its
    position, when known), or at the first record read from a partition without one. An assign
    whose outcome is unknown, or a poll whose outcome is unknown (its records may have moved the
    position unseen), ends all of the consumer's sessions. Each final read is a session of its
    own per partition, with an unknown start. The first record of a session is yielded when the
    session's start is known.
    """
    sessions: dict[str, dict[TopicPartition, list[Any]]] = {}
    finals = (("read", "", read) for read in idx.reads if read.kind == "final-read")
    for kind, consumer, payload in itertools.chain(idx.consumer_ops, finals):
        if kind == "assign":
            sessions[consumer] = {
                (topic, partition): [offset, None, None]
                for topic, partition, offset in payload or ()
            }
            continue
        if kind == "forget":
            sessions[consumer] = {}
            continue
        read: Read = payload
        session = sessions.setdefault(consumer, {}) if read.kind == "poll" else {}
        i = read.i
        for topic, partition, offset, _vid in read.records:
            state = session.get((topic, partition))
            if state is None:
                state = session[(topic, partition)] = [None, None, None]
            prev = state[1]
            if prev is None:
                if state[0] is not None:
                    yield read, topic, partition, state[0], None, None, offset
            elif offset != prev + 1:
                yield read, topic, partition, state[0], prev, state[2], offset
            state[1] = offset
            state[2] = i


class _KnownRecords:
    """The positions known to hold a record (read there, or a send acknowledged there), and
    whether a consumer must return it: a read_uncommitted one any such record, a read_committed
    one only those visible to it (a position whose known ids disagree only if all of them are).
    """

    PROBE = 64
    """Gaps up to this long are probed offset by offset; longer ones search sorted offsets."""

    def __init__(self, idx: HistoryIndex) -> None:
        self.idx = idx
        # Per partition, the sorted offsets read_uncommitted and read_committed consumers must
        # read; built on first need (a gap longer than PROBE).
        self._every: dict[TopicPartition, list[int]] = {}
        self._committed: dict[TopicPartition, list[int]] = {}
        self._built = False

    def must_read(self, pos: Position, read_committed: bool) -> bool:
        """Whether a record is known at `pos` that a consumer of this isolation must return."""
        idx = self.idx
        read = idx.read_at.get(pos)
        ack = idx.ack_at.get(pos)
        if read is None and ack is None:
            return False
        if not read_committed:
            return True
        visible = idx.visible_read_committed
        if pos in idx.read_conflicts or pos in idx.ack_conflicts:
            return all(visible(vid) for vid in idx.ids_at(pos))
        if read is not None and not visible(read[0]):
            return False
        return ack is None or (read is not None and ack[0] == read[0]) or visible(ack[0])

    def first_between(
        self, topic: str, partition: int, low: int, high: int, read_committed: bool
    ) -> int | None:
        """The least offset c, low <= c < high, holding a record the consumer must return."""
        if high - low <= self.PROBE:
            for offset in range(low, high):
                if self.must_read((topic, partition, offset), read_committed):
                    return offset
            return None
        offsets = self._offsets(read_committed).get((topic, partition))
        if not offsets:
            return None
        j = bisect.bisect_left(offsets, low)
        return offsets[j] if j < len(offsets) and offsets[j] < high else None

    def _offsets(self, read_committed: bool) -> dict[TopicPartition, list[int]]:
        if not self._built:
            idx = self.idx
            ack_only = (pos for pos in idx.ack_at if pos not in idx.read_at)
            for pos in itertools.chain(idx.read_at, ack_only):
                topic, partition, offset = pos
                self._every.setdefault((topic, partition), []).append(offset)
                if self.must_read(pos, True):
                    self._committed.setdefault((topic, partition), []).append(offset)
            for offsets in itertools.chain(self._every.values(), self._committed.values()):
                offsets.sort()
            self._built = True
        return self._committed if read_committed else self._every


def check_poll_skip(history: HistoryLike) -> Anomalies:
    """Consecutive reads in one session of a consumer's partition that jumped over a record known
    to be there and visible to that consumer, or a first read after an assign that jumped past
    such a record at or after the assigned position.

    Final reads count as sessions of their own. Gaps that only transaction markers, or records
    invisible to read_committed (of aborted or unknown-outcome transactions), could fill are not
    skips for read_committed consumers.
    """
    idx = analyze(history)
    found = Anomalies()
    known = _KnownRecords(idx)
    for read, topic, partition, start, prev, prev_i, offset in _session_jumps(idx):
        if prev is None:
            if start is None or offset <= start:
                continue
            low = start
            after = f"its first read after being assigned position {start}"
        else:
            if offset <= prev + 1:
                continue
            low = prev + 1
            after = f"its read of offset {prev} (i={prev_i})"
        skipped = known.first_between(topic, partition, low, offset, read.read_committed)
        if skipped is None:
            continue
        skipped_ids = list(idx.ids_at((topic, partition, skipped)))
        found.add(
            {
                "checker": "poll_skip",
                "explanation": (
                    f"{_reader(read)} read {_pos_text(topic, partition, offset)} right after "
                    f"{after}, skipping {skipped_ids[0]} at offset {skipped}."
                ),
                **_jump_fields(read, topic, partition, start, prev, prev_i, offset),
                "skipped_offset": skipped,
                "skipped_ids": skipped_ids,
            }
        )
    return found


def _jump_fields(
    read: Read,
    topic: str,
    partition: int,
    start: int | None,
    prev: int | None,
    prev_i: int | None,
    offset: int,
) -> dict[str, Any]:
    """The fields a poll-skip and a nonmonotonic-poll anomaly share: one step of
    `_session_jumps`."""
    return {
        "consumer": read.consumer,
        "kind": read.kind,
        "isolation": read.isolation,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "previous_offset": prev,
        "previous_i": prev_i,
        "assigned_position": start if prev is None else None,
        "i": read.i,
    }


def check_nonmonotonic_poll(history: HistoryLike) -> Anomalies:
    """Reads in one session of a consumer's partition at an offset not above the previous read's,
    or a first read after an assign below the assigned position. Final reads count as sessions
    of their own."""
    idx = analyze(history)
    found = Anomalies()
    for read, topic, partition, start, prev, prev_i, offset in _session_jumps(idx):
        if prev is None:
            if start is None or offset >= start:
                continue
            after = f"being assigned position {start}"
        else:
            if offset > prev:
                continue
            after = f"reading offset {prev} (i={prev_i})"
        found.add(
            {
                "checker": "nonmonotonic_poll",
                "explanation": (
                    f"{_reader(read)} read {_pos_text(topic, partition, offset)} after {after} "
                    "in the same session."
                ),
                **_jump_fields(read, topic, partition, start, prev, prev_i, offset),
            }
        )
    return found


# 10: nonmonotonic sends.


def check_nonmonotonic_send(history: HistoryLike) -> Anomalies:
    """Idempotent (or transactional, hence idempotent) sends of one proc to one partition whose
    acknowledged offsets do not increase in the order the sends were invoked."""
    idx = analyze(history)
    found = Anomalies()
    # Per (proc, topic, partition), the highest offset acknowledged so far and its send. The
    # index holds sends in invoke order.
    highest: dict[tuple[str, str, int], tuple[int, Send]] = {}
    for send in idx.sends.values():
        pos = send.position
        if pos is None or not (send.idempotent or send.txn is not None):
            continue
        topic, partition, offset = pos
        key = (send.proc, topic, partition)
        before = highest.get(key)
        if before is None or offset > before[0]:
            highest[key] = (offset, send)
            continue
        earlier = before[1]
        found.add(
            {
                "checker": "nonmonotonic_send",
                "explanation": (
                    f"{send.proc}'s send {send.id} (invoked at i={send.invoke_i}) was "
                    f"acknowledged at {_pos_text(topic, partition, offset)}, not above offset "
                    f"{before[0]} of its earlier send {earlier.id} (invoked at "
                    f"i={earlier.invoke_i})."
                ),
                "proc": send.proc,
                "topic": topic,
                "partition": partition,
                "id": send.id,
                "offset": offset,
                "invoke_i": send.invoke_i,
                "i": send.done_i,
                "earlier_id": earlier.id,
                "earlier_offset": before[0],
                "earlier_invoke_i": earlier.invoke_i,
            }
        )
    return found


# 11: committed offsets going backwards.


@dataclass(slots=True)
class _GroupOffsets:
    """One group partition's successful commits, in completion order, and its committed reads.

    Concurrent commits may reach the broker in either order, so the offset a group partition
    must hold when an operation begins is not simply the highest one committed before. A commit
    that completed before another commit was invoked is superseded by it; the commits completed
    before an event and superseded by none of them (the "frontier") are those that may have been
    applied last, and the group must hold at least the lowest of their offsets.
    """

    invoke_i: list[int] = field(default_factory=list)
    done_i: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    latest_invoke: list[int] = field(default_factory=list)  # running maximum of invoke_i
    by_offset: dict[int, list[int]] = field(default_factory=dict)  # offset -> commit numbers
    reads: list[tuple[int, int, Any]] = field(default_factory=list)  # (invoke, done, offset)

    def add_commit(self, invoke_i: int, done_i: int, offset: int) -> None:
        n = len(self.done_i)
        self.invoke_i.append(invoke_i)
        self.done_i.append(done_i)
        self.offset.append(offset)
        latest = self.latest_invoke[-1] if self.latest_invoke else invoke_i
        self.latest_invoke.append(max(latest, invoke_i))
        self.by_offset.setdefault(offset, []).append(n)

    def floor(self, i: int) -> tuple[int | None, int]:
        """The commit of the lowest offset on the frontier of commits completed before event
        `i` (None if there is none), and the last invoke among those commits."""
        j = bisect.bisect_left(self.done_i, i)
        if j == 0:
            return None, -1
        latest = self.latest_invoke[j - 1]
        lowest = j - 1
        k = j - 2
        while k >= 0 and self.done_i[k] > latest:
            if self.offset[k] < self.offset[lowest]:
                lowest = k
            k -= 1
        return lowest, latest

    def explains(self, offset: int, read_invoke: int, read_done: int, latest: int) -> bool:
        """Whether a commit of exactly `offset`, not superseded before the read began and
        invoked before it ended, may have been the last applied when the read ran."""
        for n in self.by_offset.get(offset, ()):
            if self.invoke_i[n] < read_done and self.done_i[n] > latest:
                return True
        return False


def check_committed_offsets_backwards(history: HistoryLike) -> Anomalies:
    """Group offsets that went backwards.

    Either a commit set a lower offset for a partition than every commit that may have been the
    last one applied when it was invoked (the frontier of the commits completed by then), or a
    `committed` read returned a lower offset (or none) than every such commit when the read was
    invoked, and than every commit that may have been applied while it ran. Commits of unknown
    outcome are not taken into account.
    """
    idx = analyze(history)
    anomalies: list[Anomaly] = []
    partitions: dict[tuple[str, str, int], _GroupOffsets] = {}
    for f, invoke, done in idx.offset_ops:
        group = str(_from("group", done, invoke, ""))
        done_i = done["i"]
        invoke_i = invoke["i"] if invoke is not None else done_i
        for topic, partition, offset in _value(done).get("offsets") or ():
            key = (group, topic, partition)
            log = partitions.get(key)
            if log is None:
                log = partitions[key] = _GroupOffsets()
            if f == "committed":
                log.reads.append((invoke_i, done_i, offset))
                continue
            if offset is None or offset < 0:
                continue
            floor, _ = log.floor(invoke_i)
            if floor is not None and offset < log.offset[floor]:
                anomalies.append(
                    {
                        "checker": "committed_offsets_backwards",
                        "kind": "commit",
                        "explanation": (
                            f"Group {group} committed offset {offset} for "
                            f"{_pos_text(topic, partition)}, below offset {log.offset[floor]} "
                            f"that a commit completed at i={log.done_i[floor]} had set before."
                        ),
                        "group": group,
                        "topic": topic,
                        "partition": partition,
                        "offset": offset,
                        "earlier_offset": log.offset[floor],
                        "earlier_i": log.done_i[floor],
                        "invoke_i": invoke_i,
                        "i": done_i,
                    }
                )
            log.add_commit(invoke_i, done_i, offset)
    for (group, topic, partition), log in partitions.items():
        for invoke_i, done_i, offset in log.reads:
            floor, latest = log.floor(invoke_i)
            if floor is None:
                continue
            has_offset = offset is not None and offset >= 0
            if has_offset and offset >= log.offset[floor]:
                continue
            if has_offset and log.explains(offset, invoke_i, done_i, latest):
                continue
            shown = offset if has_offset else "no offset"
            anomalies.append(
                {
                    "checker": "committed_offsets_backwards",
                    "kind": "committed",
                    "explanation": (
                        f"Group {group}'s committed offset for {_pos_text(topic, partition)} "
                        f"read back as {shown}, below offset {log.offset[floor]} committed at "
                        f"i={log.done_i[floor]} before the read began."
                    ),
                    "group": group,
                    "topic": topic,
                    "partition": partition,
                    "offset": offset,
                    "earlier_offset": log.offset[floor],
                    "earlier_i": log.done_i[floor],
                    "invoke_i": invoke_i,
                    "i": done_i,
                }
            )
    found = Anomalies()
    for anomaly in sorted(anomalies, key=lambda a: a["i"]):
        found.add(anomaly)
    return found


# Everything at once.

_CHECKS: dict[str, Callable[[HistoryLike], Anomalies]] = {
    "lost": check_lost,
    "unseen": check_unseen,
    "committed_invisible": check_committed_invisible,
    "duplicate": check_duplicate,
    "inconsistent_offsets": check_inconsistent_offsets,
    "g1a": check_g1a,
    "early_read": check_early_read,
    "torn_transaction": check_torn_transaction,
    "poll_skip": check_poll_skip,
    "nonmonotonic_poll": check_nonmonotonic_poll,
    "nonmonotonic_send": check_nonmonotonic_send,
    "committed_offsets_backwards": check_committed_offsets_backwards,
}


def check_all(history: HistoryLike) -> dict[str, Any]:
    """Runs every checker over one index of `history`.

    Returns {"counts": {checker: total}, "anomalies": {checker: first SUMMARY_ANOMALIES},
    "stats": {...}} with every checker present, also those that found nothing.
    """
    counts: dict[str, int] = {}
    anomalies: dict[str, list[Anomaly]] = {}
    with _no_gc():
        idx = analyze(history)
        for name in CHECKERS:
            found = _CHECKS[name](idx)
            counts[name] = found.total
            anomalies[name] = list(found[:SUMMARY_ANOMALIES])
    return {"counts": counts, "anomalies": anomalies, "stats": dict(idx.stats)}


def failed(result: dict[str, Any]) -> bool:
    """Whether `check_all`'s result holds an anomaly that fails the run (any but `unseen`)."""
    return any(n for name, n in result["counts"].items() if name not in BENIGN_CHECKERS)


def load_history(path: str | Path) -> list[Event]:
    """The events of a history file, one JSON object a line.

    Blank lines are skipped, and so is a last line cut short (a run killed while writing it).
    """
    events: list[Event] = []
    broken: int | None = None  # the number of a line that did not parse
    with open(path, encoding="utf-8") as f, _no_gc():
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            if broken is not None:
                raise ValueError(f"{path}:{broken}: not a JSON object")
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                broken = n
    return events


def format_report(result: dict[str, Any], shown: int = 3) -> str:
    """`check_all`'s result as text: a table of counts, the stats, the first anomalies."""
    lines = [f"{'checker':<30}{'anomalies':>10}"]
    for name in CHECKERS:
        note = "" if name not in BENIGN_CHECKERS else "  (not a failure)"
        lines.append(f"{name:<30}{result['counts'][name]:>10}{note}")
    lines.append("")
    lines.append(f"{'stat':<30}{'value':>10}")
    for key, value in result["stats"].items():
        lines.append(f"{key:<30}{value:>10}")
    for name in CHECKERS:
        first = result["anomalies"][name][:shown]
        if not first:
            continue
        lines.append("")
        lines.append(f"{name} (first {len(first)} of {result['counts'][name]}):")
        for anomaly in first:
            lines.append(f"  i={anomaly.get('i')}: {anomaly['explanation']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Checks a history file and prints the result; returns 1 if it holds a failing anomaly."""
    parser = argparse.ArgumentParser(description="Check a Strata verification history.")
    parser.add_argument("history", type=Path, help="the history, one JSON event a line")
    parser.add_argument("--json", action="store_true", help="print check_all's result as JSON")
    args = parser.parse_args(argv)
    result = check_all(load_history(args.history))
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=False))
    else:
        print(format_report(result))
    return 1 if failed(result) else 0


if __name__ == "__main__":
    sys.exit(main())
