"""Unit tests of the verification harness's history checkers (tests/verify/checkers.py).

Pure Python: no broker. Each checker gets a history that it must flag and a near miss that it
must not, built with `HistoryBuilder`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

VERIFY = Path(__file__).resolve().parents[1] / "verify"
sys.path.insert(0, str(VERIFY))

import checkers  # noqa: E402

T = "t"  # the default topic


def rec(offset: int, vid: str, partition: int = 0, topic: str = T) -> list[Any]:
    """A record as polls and final reads list them: [topic, partition, offset, id]."""
    return [topic, partition, offset, vid]


class HistoryBuilder:
    """Appends events with increasing "i" and "t", as the harness records them."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def event(self, proc: str, kind: str, f: str, value: Any) -> int:
        i = len(self.events)
        self.events.append(
            {"i": i, "t": i / 1000, "proc": proc, "type": kind, "f": f, "value": value}
        )
        return i

    # Sends.

    def send_invoke(
        self,
        proc: str,
        vid: str,
        partition: int | None = 0,
        *,
        topic: str = T,
        idempotent: bool = True,
        txn: str | None = None,
    ) -> int:
        value = {
            "id": vid,
            "topic": topic,
            "partition": partition,
            "idempotent": idempotent,
            "txn": txn,
        }
        return self.event(proc, "invoke", "send", value)

    def send_ok(self, proc: str, vid: str, offset: int, partition: int = 0, topic: str = T) -> int:
        value = {"id": vid, "topic": topic, "partition": partition, "offset": offset}
        return self.event(proc, "ok", "send", value)

    def send_end(self, proc: str, vid: str, kind: str, error: str = "timed out") -> int:
        return self.event(proc, kind, "send", {"id": vid, "error": error})

    def send(
        self,
        proc: str,
        vid: str,
        offset: int,
        partition: int = 0,
        *,
        topic: str = T,
        idempotent: bool = True,
        txn: str | None = None,
    ) -> int:
        """An acknowledged send; returns the index of its ok."""
        self.send_invoke(proc, vid, partition, topic=topic, idempotent=idempotent, txn=txn)
        return self.send_ok(proc, vid, offset, partition, topic)

    # Transactions.

    def txn_op(self, proc: str, f: str, txn: str, kind: str = "ok") -> int:
        self.event(proc, "invoke", f, {"txn": txn})
        return self.event(proc, kind, f, {"txn": txn})

    def begin(self, proc: str, txn: str) -> int:
        return self.txn_op(proc, "txn-begin", txn)

    def commit_txn(self, proc: str, txn: str, kind: str = "ok") -> int:
        return self.txn_op(proc, "txn-commit", txn, kind)

    def abort_txn(self, proc: str, txn: str, kind: str = "ok") -> int:
        return self.txn_op(proc, "txn-abort", txn, kind)

    # Consumers.

    def poll_invoke(self, consumer: str, isolation: str = "read_committed") -> int:
        value = {"consumer": consumer, "isolation": isolation}
        return self.event(consumer, "invoke", "poll", value)

    def poll_ok(
        self, consumer: str, records: list[list[Any]], isolation: str = "read_committed"
    ) -> int:
        value = {"consumer": consumer, "isolation": isolation, "records": records}
        return self.event(consumer, "ok", "poll", value)

    def poll(
        self, consumer: str, records: list[list[Any]], isolation: str = "read_committed"
    ) -> int:
        self.poll_invoke(consumer, isolation)
        return self.poll_ok(consumer, records, isolation)

    def assign(self, consumer: str, positions: list[list[Any]]) -> int:
        self.event(consumer, "invoke", "assign", {"consumer": consumer})
        return self.event(consumer, "ok", "assign", {"consumer": consumer, "positions": positions})

    def final_read(
        self,
        records: list[list[Any]],
        ends: list[list[Any]],
        isolation: str = "read_committed",
    ) -> int:
        self.event("final", "invoke", "final-read", {"isolation": isolation})
        value = {"isolation": isolation, "records": records, "ends": ends}
        return self.event("final", "ok", "final-read", value)

    # Group offsets.

    def offsets_invoke(self, proc: str, f: str, group: str) -> int:
        return self.event(proc, "invoke", f, {"group": group})

    def offsets_ok(self, proc: str, f: str, group: str, offsets: list[list[Any]]) -> int:
        return self.event(proc, "ok", f, {"group": group, "offsets": offsets})

    def commit_offsets(self, proc: str, group: str, offsets: list[list[Any]]) -> int:
        self.offsets_invoke(proc, "commit", group)
        return self.offsets_ok(proc, "commit", group, offsets)

    def committed(self, proc: str, group: str, offsets: list[list[Any]]) -> int:
        self.offsets_invoke(proc, "committed", group)
        return self.offsets_ok(proc, "committed", group, offsets)


def counts(history: HistoryBuilder) -> dict[str, int]:
    return checkers.check_all(history.events)["counts"]


def only(history: HistoryBuilder, name: str) -> list[dict[str, Any]]:
    """The anomalies of checker `name`, checking that every anomaly is well formed."""
    found = getattr(checkers, f"check_{name}")(history.events)
    for anomaly in found:
        assert anomaly["checker"] == name
        assert anomaly["explanation"].endswith(".")
        assert isinstance(anomaly["i"], int)
        json.dumps(anomaly)
    assert found.total == len(found)
    return found


def clean_history() -> HistoryBuilder:
    """Idempotent, plain and transactional writes, read by every kind of reader, with faults,
    commits of group offsets and a transaction marker in the log: no anomaly at all."""
    h = HistoryBuilder()
    h.event("nemesis", "info", "fault", {"kind": "partition", "nodes": [1, 2]})
    h.event("admin", "invoke", "create-topic", {"topic": T, "partitions": 2})
    h.event("admin", "ok", "create-topic", {"topic": T, "partitions": 2})
    # Two async sends of p1, completing out of order.
    h.send_invoke("p1", "p1-0")
    h.send_invoke("p1", "p1-1")
    h.send_ok("p1", "p1-1", 1)
    h.send_ok("p1", "p1-0", 0)
    h.send("p2", "p2-0", 0, partition=1, idempotent=False)
    # A committed transaction over both partitions (its markers at t-0@4 and t-1@2).
    h.begin("p3", "x1")
    h.send("p3", "x1-a", 2, txn="x1")
    h.send("p3", "x1-b", 1, partition=1, txn="x1")
    h.send("p3", "x1-c", 3, txn="x1")
    h.commit_txn("p3", "x1")
    # An aborted one (its record at t-1@3, its marker at t-1@4).
    h.begin("p3", "x2")
    h.send("p3", "x2-a", 3, partition=1, txn="x2")
    h.abort_txn("p3", "x2")
    h.send("p2", "p2-1", 5, partition=1, idempotent=False)
    h.send_invoke("p2", "p2-2", 1)
    h.send_end("p2", "p2-2", "fail")
    h.event("nemesis", "info", "fault", {"kind": "heal"})
    # A read_committed consumer, assigned from the start.
    h.assign("c1", [[T, 0, 0], [T, 1, 0]])
    h.poll("c1", [rec(0, "p1-0"), rec(1, "p1-1"), rec(0, "p2-0", 1)])
    h.poll("c1", [rec(2, "x1-a"), rec(3, "x1-c"), rec(1, "x1-b", 1), rec(5, "p2-1", 1)])
    h.commit_offsets("c1", "g", [[T, 0, 4], [T, 1, 6]])
    h.committed("c1", "g", [[T, 0, 4], [T, 1, 6]])
    # A read_uncommitted consumer sees the aborted record too.
    h.assign("c2", [[T, 1, None]])
    h.poll(
        "c2",
        [rec(0, "p2-0", 1), rec(1, "x1-b", 1), rec(3, "x2-a", 1), rec(5, "p2-1", 1)],
        "read_uncommitted",
    )
    h.final_read(
        [rec(0, "p1-0"), rec(1, "p1-1"), rec(2, "x1-a"), rec(3, "x1-c")]
        + [rec(0, "p2-0", 1), rec(1, "x1-b", 1), rec(5, "p2-1", 1)],
        [[T, 0, 5], [T, 1, 6]],
    )
    return h


def test_clean_history_has_no_anomaly() -> None:
    result = checkers.check_all(clean_history().events)
    assert set(result["counts"]) == set(checkers.CHECKERS)
    assert all(n == 0 for n in result["counts"].values()), result["anomalies"]
    assert set(result["anomalies"]) == set(checkers.CHECKERS)
    stats = result["stats"]
    assert stats["sends_invoked"] == 9
    assert stats["sends_ok"] == 8
    assert stats["sends_fail"] == 1
    assert stats["sends_info"] == 0
    assert stats["txns_committed"] == 1
    assert stats["txns_aborted"] == 1
    assert stats["txns_unknown"] == 0
    assert stats["records_polled"] == 11
    assert stats["final_read_records"] == 7
    assert stats["distinct_ids_read"] == 8
    assert not checkers.failed(result)


def test_index_can_be_shared_between_checkers() -> None:
    idx = checkers.analyze(clean_history().events)
    assert checkers.analyze(idx) is idx
    assert checkers.check_lost(idx) == []
    assert checkers.check_poll_skip(idx) == []


# 1 and 2: lost and unseen.


def test_lost_write_past_the_final_read_end() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    ok_i = h.send("p1", "b", 1)
    h.final_read([rec(0, "a")], [[T, 0, 2]])
    lost = only(h, "lost")
    assert [(a["id"], a["offset"], a["i"]) for a in lost] == [("b", 1, ok_i)]
    assert lost[0]["final_read_end"] == 2
    assert only(h, "unseen") == []
    assert checkers.failed(checkers.check_all(h.events))


def test_unseen_write_beyond_the_final_read_end_is_not_lost() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.send("p1", "b", 1)
    h.send("p1", "c", 0, partition=1)
    h.final_read([rec(0, "a")], [[T, 0, 1]])  # stopped at b's offset; t-1 not read at all
    assert only(h, "lost") == []
    assert sorted(a["id"] for a in only(h, "unseen")) == ["b", "c"]
    result = checkers.check_all(h.events)
    assert result["counts"]["unseen"] == 2
    assert not checkers.failed(result)


def test_writes_read_by_a_poll_failed_or_of_uncommitted_transactions_are_not_lost() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.poll("c1", [rec(0, "a")])
    h.send_invoke("p1", "b")
    h.send_end("p1", "b", "fail")
    h.send_invoke("p1", "c")
    h.send_end("p1", "c", "info")
    h.send("p2", "x", 1, txn="x1")
    h.abort_txn("p2", "x1")
    h.send("p2", "y", 2, txn="y1")
    h.commit_txn("p2", "y1", "info")
    h.final_read([rec(0, "a")], [[T, 0, 5]])
    assert only(h, "lost") == []
    assert only(h, "unseen") == []


def test_committed_transactional_write_can_be_lost() -> None:
    h = HistoryBuilder()
    h.send("p2", "x", 0, txn="x1")
    h.commit_txn("p2", "x1")
    h.final_read([], [[T, 0, 2]])
    assert [a["id"] for a in only(h, "lost")] == ["x"]


def test_committed_transaction_invisible_to_read_committed_is_flagged() -> None:
    h = HistoryBuilder()
    h.send("p2", "x", 0, txn="x1")
    h.commit_txn("p2", "x1")
    # Read uncommitted (so not lost), but read_committed went past it without returning it.
    h.final_read([rec(0, "x")], [[T, 0, 2]], isolation="read_uncommitted")
    h.final_read([], [[T, 0, 2]])
    assert [a["id"] for a in only(h, "committed_invisible")] == ["x"]
    assert counts(h)["lost"] == 0


def test_committed_invisible_needs_a_read_committed_read_past_the_write() -> None:
    h = HistoryBuilder()
    h.send("p2", "x", 0, txn="x1")
    h.commit_txn("p2", "x1")
    h.send("p3", "y", 1, txn="y1")
    h.abort_txn("p3", "y1")
    h.send("p4", "z", 2, txn="z1")
    h.commit_txn("p4", "z1")
    h.final_read([rec(0, "x"), rec(1, "y"), rec(2, "z")], [[T, 0, 3]], isolation="read_uncommitted")
    # x returned by read_committed; y aborted; z beyond the read_committed end.
    h.final_read([rec(0, "x")], [[T, 0, 2]])
    assert counts(h)["committed_invisible"] == 0


# 3: duplicates.


def test_idempotent_and_transactional_duplicates_are_flagged() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.send("p2", "x", 1, idempotent=False, txn="x1")
    h.commit_txn("p2", "x1")
    h.poll("c1", [rec(0, "a"), rec(1, "x"), rec(2, "a"), rec(3, "x")])
    found = only(h, "duplicate")
    assert sorted(a["id"] for a in found) == ["a", "x"]
    a = next(a for a in found if a["id"] == "a")
    assert a["positions"] == [[T, 0, 0], [T, 0, 2]]


def test_non_idempotent_duplicate_is_only_counted() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0, idempotent=False)
    h.poll("c1", [rec(0, "a"), rec(1, "a")])
    h.poll("c2", [rec(0, "a")])  # the same position again is no duplicate
    h.poll("c3", [rec(2, "unsent"), rec(3, "unsent")])
    assert only(h, "duplicate") == []
    stats = checkers.check_all(h.events)["stats"]
    assert stats["duplicates_non_idempotent"] == 1
    assert stats["duplicates_unsent"] == 1


# 4: inconsistent offsets.


def test_two_reads_of_one_offset_with_different_ids_are_inconsistent() -> None:
    h = HistoryBuilder()
    h.poll("c1", [rec(0, "a")], "read_uncommitted")
    second = h.final_read([rec(0, "b")], [[T, 0, 1]])
    found = only(h, "inconsistent_offsets")
    assert len(found) == 1
    assert found[0]["ids"] == ["a", "b"]
    assert found[0]["i"] == second
    assert (found[0]["topic"], found[0]["partition"], found[0]["offset"]) == (T, 0, 0)


def test_acknowledged_position_holding_another_id_is_inconsistent() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.send("p1", "b", 1)
    h.send("p2", "c", 1)  # two acknowledgements of offset 1
    h.poll("c1", [rec(0, "z")])
    found = only(h, "inconsistent_offsets")
    assert len(found) == 2
    by_offset = {a["offset"]: a for a in found}
    assert by_offset[0]["ids"] == ["a", "z"]
    assert by_offset[1]["ids"] == ["b", "c"]


def test_consistent_reads_are_not_inconsistent() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.poll("c1", [rec(0, "a"), rec(1, "transformed")])
    h.poll("c2", [rec(0, "a"), rec(1, "transformed")], "read_uncommitted")
    h.final_read([rec(0, "a"), rec(1, "transformed")], [[T, 0, 2]])
    assert only(h, "inconsistent_offsets") == []


# 5: G1a.


def test_read_committed_reads_of_aborted_writes_are_g1a() -> None:
    h = HistoryBuilder()
    h.send("p1", "x", 0, txn="x1")
    h.abort_txn("p1", "x1")
    h.send("p1", "y", 2, txn="y1")
    h.commit_txn("p1", "y1", "fail")  # a failed commit aborted it
    h.send_invoke("p1", "z", txn="z1")
    h.send_end("p1", "z", "info")  # unacknowledged, still an aborted write
    h.abort_txn("p1", "z1")
    poll_i = h.poll("c1", [rec(0, "x"), rec(2, "y")])
    h.poll("c1", [rec(0, "x")])
    h.final_read([rec(2, "y"), rec(4, "z")], [[T, 0, 6]])
    found = only(h, "g1a")
    assert sorted(a["id"] for a in found) == ["x", "y", "z"]
    x = next(a for a in found if a["id"] == "x")
    assert (x["i"], x["reads"], x["txn"]) == (poll_i, 2, "x1")


def test_unknown_outcome_and_read_uncommitted_are_not_g1a() -> None:
    h = HistoryBuilder()
    h.send("p1", "x", 0, txn="x1")
    h.commit_txn("p1", "x1", "info")
    h.send("p1", "y", 2, txn="y1")
    h.abort_txn("p1", "y1", "info")
    h.send("p1", "z", 4, txn="z1")
    h.abort_txn("p1", "z1")
    h.poll("c1", [rec(0, "x"), rec(2, "y")])
    h.poll("c2", [rec(4, "z")], "read_uncommitted")
    h.final_read([rec(0, "x"), rec(2, "y")], [[T, 0, 6]])
    assert only(h, "g1a") == []


# 6: early reads.


def test_read_committed_poll_before_the_commit_is_an_early_read() -> None:
    h = HistoryBuilder()
    h.send("p1", "x", 0, txn="x1")
    h.send("p1", "y", 0, partition=1, txn="x1")
    poll_i = h.poll("c1", [rec(0, "x"), rec(0, "y", 1)])
    h.commit_txn("p1", "x1")
    h.send("p1", "z", 2, txn="z1")  # never committed: commit never invoked
    second_i = h.poll("c1", [rec(2, "z")])
    found = only(h, "early_read")
    assert [(a["txn"], a["i"]) for a in found] == [("x1", poll_i), ("z1", second_i)]
    assert found[0]["ids"] == ["x", "y"]
    assert found[1]["commit_invoke_i"] is None


def test_poll_completing_after_the_commit_invoke_is_not_early() -> None:
    h = HistoryBuilder()
    h.send("p1", "x", 0, txn="x1")
    h.poll_invoke("c1")  # a blocking poll, invoked before the commit
    h.event("p1", "invoke", "txn-commit", {"txn": "x1"})
    h.poll_ok("c1", [rec(0, "x")])
    h.event("p1", "ok", "txn-commit", {"txn": "x1"})
    h.send("p1", "y", 2, txn="y1")
    h.poll("c2", [rec(2, "y")])  # aborted: G1a, not an early read
    h.abort_txn("p1", "y1")
    h.send("p1", "z", 4, txn="z1")
    h.poll("c3", [rec(4, "z")], "read_uncommitted")  # read_uncommitted may read early
    h.commit_txn("p1", "z1")
    assert only(h, "early_read") == []
    assert [a["id"] for a in only(h, "g1a")] == ["y"]


# 7: torn transactions.


def test_final_read_returning_part_of_a_committed_transaction_is_torn() -> None:
    h = HistoryBuilder()
    h.send("p1", "x", 0, txn="x1")
    h.send("p1", "y", 0, partition=1, txn="x1")
    h.commit_txn("p1", "x1")
    read_i = h.final_read([rec(0, "x")], [[T, 0, 2], [T, 1, 2]])
    found = only(h, "torn_transaction")
    assert len(found) == 1
    assert (found[0]["txn"], found[0]["i"]) == ("x1", read_i)
    assert found[0]["missing_ids"] == ["y"]


def test_final_read_not_covering_the_transaction_is_not_torn() -> None:
    h = HistoryBuilder()
    h.send("p1", "x", 0, txn="x1")
    h.send("p1", "y", 0, partition=1, txn="x1")
    h.commit_txn("p1", "x1")
    h.final_read([rec(0, "x")], [[T, 0, 2], [T, 1, 0]])  # t-1 ended before y
    h.final_read([rec(0, "x")], [[T, 0, 2]])  # t-1 not read
    h.final_read([rec(0, "x")], [[T, 0, 2], [T, 1, 2]], "read_uncommitted")
    h.final_read([rec(0, "x"), rec(0, "y", 1)], [[T, 0, 2], [T, 1, 2]])  # whole
    h.final_read([], [[T, 0, 2], [T, 1, 2]])  # none of it (that is a loss, not a tear)
    h.send("p2", "u", 2, txn="u1")
    h.send("p2", "v", 2, partition=1, txn="u1")
    h.commit_txn("p2", "u1", "info")  # unknown outcome
    h.final_read([rec(2, "u")], [[T, 0, 4], [T, 1, 4]])
    assert only(h, "torn_transaction") == []


# 8: poll skips.


def test_skipping_a_committed_record_is_a_poll_skip() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.send("p1", "b", 1)
    h.send("p1", "c", 2)
    poll_i = h.poll("c1", [rec(0, "a"), rec(2, "c")])
    found = only(h, "poll_skip")
    assert len(found) == 1
    anomaly = found[0]
    assert (anomaly["consumer"], anomaly["i"], anomaly["skipped_offset"]) == ("c1", poll_i, 1)
    assert (anomaly["previous_offset"], anomaly["offset"], anomaly["skipped_ids"]) == (0, 2, ["b"])


def test_skip_across_polls_and_after_an_assign() -> None:
    h = HistoryBuilder()
    h.poll("c2", [rec(0, "a"), rec(1, "b"), rec(2, "c"), rec(3, "d")], "read_uncommitted")
    h.poll("c1", [rec(0, "a")], "read_uncommitted")
    h.poll("c1", [rec(2, "c")], "read_uncommitted")  # skipped b, read by c2
    h.assign("c1", [[T, 0, 1]])
    h.poll("c1", [rec(3, "d")], "read_uncommitted")  # skipped 1 and 2 after the seek
    found = only(h, "poll_skip")
    assert [(a["previous_offset"], a["assigned_position"], a["skipped_offset"]) for a in found] == [
        (0, None, 1),
        (None, 1, 1),
    ]


def test_markers_aborted_and_unknown_records_are_no_read_committed_skip() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.send("p2", "x", 1, txn="x1")
    h.abort_txn("p2", "x1")  # its marker at 2
    h.send("p2", "y", 3, txn="y1")
    h.commit_txn("p2", "y1", "info")  # unknown: may be aborted; marker at 4
    h.send("p1", "b", 5)
    h.send("p3", "t1", 6, txn="t1")  # a later committed transaction, marker at 7
    h.commit_txn("p3", "t1")
    h.send("p1", "c", 8)
    h.poll("c2", [rec(0, "a"), rec(1, "x"), rec(3, "y"), rec(5, "b")], "read_uncommitted")
    h.poll("c2", [rec(6, "t1"), rec(8, "c")], "read_uncommitted")
    h.poll("c2", [rec(9, "aborted-transform-output")], "read_uncommitted")
    h.send("p1", "d", 10)
    h.assign("c1", [[T, 0, 1]])
    h.poll("c1", [rec(5, "b"), rec(6, "t1"), rec(8, "c"), rec(10, "d")])
    h.final_read([rec(0, "a"), rec(5, "b"), rec(6, "t1"), rec(8, "c"), rec(10, "d")], [[T, 0, 11]])
    assert only(h, "poll_skip") == []
    # The same jumps by a read_uncommitted consumer skip the aborted and unknown records.
    h.assign("c3", [[T, 0, 0]])
    h.poll("c3", [rec(0, "a"), rec(5, "b")], "read_uncommitted")
    assert [a["skipped_offset"] for a in only(h, "poll_skip")] == [1]


def test_unsent_value_is_visible_to_read_committed_once_read_committed_returned_it() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.send("p1", "b", 2)
    h.send("p1", "c", 4)
    # Transform outputs: out-1 returned to read_committed, out-3 only to read_uncommitted (it
    # may belong to an aborted transaction of the transform step).
    h.poll("c2", [rec(0, "a"), rec(1, "out-1"), rec(2, "b")])
    h.poll("c3", [rec(2, "b"), rec(3, "out-3"), rec(4, "c")], "read_uncommitted")
    h.poll("c1", [rec(0, "a"), rec(2, "b"), rec(4, "c")])
    assert [a["skipped_ids"] for a in only(h, "poll_skip")] == [["out-1"]]


def test_long_gaps() -> None:
    h = HistoryBuilder()
    for offset in range(100):
        h.send("p1", f"x{offset}", offset, txn="x1")
    h.abort_txn("p1", "x1")  # 100 aborted records, then the marker at 100
    h.send("p1", "a", 101)
    h.send("p1", "b", 150)
    h.poll("c2", [rec(o, f"x{o}") for o in range(100)], "read_uncommitted")
    h.assign("c1", [[T, 0, 0]])
    h.poll("c1", [rec(101, "a"), rec(150, "b")])  # nothing known between 101 and 150
    assert only(h, "poll_skip") == []
    h.assign("c2", [[T, 0, 0]])
    h.poll("c2", [rec(101, "a")], "read_uncommitted")
    assert [(a["consumer"], a["skipped_offset"]) for a in only(h, "poll_skip")] == [("c2", 0)]
    h.send("p1", "m", 120)
    assert [a["skipped_offset"] for a in only(h, "poll_skip")] == [120, 0]


def test_rebalance_with_unknown_position_starts_a_fresh_session() -> None:
    h = HistoryBuilder()
    for offset in range(4):
        h.send("p1", f"v{offset}", offset)
    h.poll("c1", [rec(0, "v0")])
    h.assign("c1", [[T, 0, None]])
    h.poll("c1", [rec(3, "v3")])
    h.assign("c1", [])
    h.assign("c1", [[T, 0, 3]])
    h.poll("c1", [rec(3, "v3")])
    h.event("c1", "invoke", "poll", {"consumer": "c1", "isolation": "read_committed"})
    h.event("c1", "info", "poll", {"consumer": "c1", "error": "crashed"})
    h.poll("c1", [rec(1, "v1")])  # after a poll of unknown outcome: a fresh session
    h.final_read([rec(o, f"v{o}") for o in range(4)], [[T, 0, 4]])
    assert only(h, "poll_skip") == []
    assert only(h, "nonmonotonic_poll") == []


# 9: nonmonotonic polls.


def test_rereading_in_one_session_is_nonmonotonic() -> None:
    h = HistoryBuilder()
    h.assign("c1", [[T, 0, 0], [T, 1, 0]])
    h.poll("c1", [rec(0, "a"), rec(1, "b"), rec(0, "z", 1)])
    poll_i = h.poll("c1", [rec(1, "b"), rec(1, "y", 1)])
    h.assign("c1", [[T, 0, 5]])
    h.poll("c1", [rec(2, "c")])  # below the position it was assigned
    found = only(h, "nonmonotonic_poll")
    assert [(a["i"], a["partition"], a["previous_offset"], a["offset"]) for a in found[:1]] == [
        (poll_i, 0, 1, 1)
    ]
    assert len(found) == 2
    assert (found[1]["assigned_position"], found[1]["offset"]) == (5, 2)


def test_rewind_through_an_assign_is_not_nonmonotonic() -> None:
    h = HistoryBuilder()
    h.poll("c1", [rec(0, "a"), rec(1, "b")])
    h.assign("c1", [[T, 0, 0]])  # a seek back to the start
    h.poll("c1", [rec(0, "a"), rec(1, "b")])
    h.poll("c2", [rec(0, "a")])  # another consumer
    h.poll("c1", [rec(0, "x", 1)])  # another partition
    assert only(h, "nonmonotonic_poll") == []


# 10: nonmonotonic sends.


def test_later_idempotent_send_at_a_lower_offset_is_nonmonotonic() -> None:
    h = HistoryBuilder()
    h.send_invoke("p1", "a")
    h.send_invoke("p1", "b")
    h.send_ok("p1", "b", 3)
    ok_i = h.send_ok("p1", "a", 5)
    h.send("p1", "c", 6)
    found = only(h, "nonmonotonic_send")
    assert len(found) == 1
    assert (found[0]["id"], found[0]["earlier_id"], found[0]["offset"]) == ("b", "a", 3)
    assert ok_i > found[0]["i"]


def test_non_idempotent_other_procs_and_other_partitions_are_not_nonmonotonic_sends() -> None:
    h = HistoryBuilder()
    h.send("p1", "a", 5, idempotent=False)
    h.send("p1", "b", 3, idempotent=False)
    h.send("p2", "c", 9)
    h.send("p3", "d", 4)
    h.send("p2", "e", 1, partition=1)
    h.send_invoke("p2", "f")
    h.send_invoke("p2", "g")
    h.send_ok("p2", "g", 11)  # completions out of order, offsets in invoke order
    h.send_ok("p2", "f", 10)
    h.send_invoke("p2", "h")
    h.send_end("p2", "h", "info")
    assert only(h, "nonmonotonic_send") == []


# 11: committed offsets going backwards.


def test_committed_read_below_an_earlier_commit_goes_backwards() -> None:
    h = HistoryBuilder()
    h.commit_offsets("c1", "g", [[T, 0, 10], [T, 1, 3]])
    read_i = h.committed("c1", "g", [[T, 0, 5], [T, 1, 3]])
    h.committed("c2", "g", [[T, 1, None]])  # the commit was forgotten
    found = only(h, "committed_offsets_backwards")
    assert [(a["kind"], a["partition"], a["offset"]) for a in found] == [
        ("committed", 0, 5),
        ("committed", 1, None),
    ]
    assert (found[0]["i"], found[0]["earlier_offset"]) == (read_i, 10)


def test_commit_below_an_earlier_completed_commit_goes_backwards() -> None:
    h = HistoryBuilder()
    h.commit_offsets("c1", "g", [[T, 0, 10]])
    h.commit_offsets("c2", "g", [[T, 0, 7]])
    found = only(h, "committed_offsets_backwards")
    assert [(a["kind"], a["offset"], a["earlier_offset"]) for a in found] == [("commit", 7, 10)]


def test_commit_racing_a_committed_read_is_one_anomaly() -> None:
    h = HistoryBuilder()
    h.commit_offsets("c1", "g", [[T, 0, 10]])
    h.offsets_invoke("c2", "committed", "g")
    commit_i = h.commit_offsets("c3", "g", [[T, 0, 5]])  # backwards, seen by the read
    h.offsets_ok("c2", "committed", "g", [[T, 0, 5]])
    found = only(h, "committed_offsets_backwards")
    assert [(a["kind"], a["i"]) for a in found] == [("commit", commit_i)]


def test_concurrent_or_unrelated_offset_operations_do_not_go_backwards() -> None:
    h = HistoryBuilder()
    h.commit_offsets("c1", "g", [[T, 0, 5]])
    h.offsets_invoke("c2", "committed", "g")  # invoked before the next commit completed
    h.offsets_invoke("c1", "commit", "g")
    h.offsets_ok("c1", "commit", "g", [[T, 0, 10]])
    h.offsets_ok("c2", "committed", "g", [[T, 0, 5]])
    h.offsets_invoke("c3", "commit", "g")  # concurrent commits, completing out of order
    h.offsets_invoke("c4", "commit", "g")
    h.offsets_ok("c4", "commit", "g", [[T, 0, 14]])
    h.offsets_ok("c3", "commit", "g", [[T, 0, 12]])
    h.committed("c1", "g", [[T, 0, 12]])  # either may have been applied last
    h.commit_offsets("c1", "g", [[T, 0, 13]])  # so 13 is no step back
    h.committed("c1", "other", [[T, 0, None]])  # another group
    h.committed("c1", "g", [[T, 1, 0]])  # another partition
    h.event("c1", "invoke", "commit", {"group": "g"})
    h.event("c1", "fail", "commit", {"group": "g", "error": "rebalancing"})
    h.committed("c1", "g", [[T, 0, 14]])
    assert only(h, "committed_offsets_backwards") == []


# The whole.


def test_caps_keep_the_full_count() -> None:
    h = HistoryBuilder()
    for n in range(1500):
        h.send("p1", f"v{n}", n)
    h.final_read([], [[T, 0, 1500]])
    lost = checkers.check_lost(h.events)
    assert (len(lost), lost.total) == (checkers.MAX_ANOMALIES, 1500)
    result = checkers.check_all(h.events)
    assert result["counts"]["lost"] == 1500
    assert len(result["anomalies"]["lost"]) == checkers.SUMMARY_ANOMALIES


def test_history_order_is_by_sequence_number() -> None:
    h = clean_history()
    shuffled = list(reversed(h.events))
    assert checkers.check_all(shuffled)["counts"] == checkers.check_all(h.events)["counts"]


def write_history(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def lost_history() -> HistoryBuilder:
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    h.final_read([], [[T, 0, 1]])
    return h


def test_load_history_skips_a_cut_last_line(tmp_path: Path) -> None:
    path = write_history(tmp_path / "h.jsonl", clean_history().events)
    with open(path, "a") as f:
        f.write('\n{"i": 999, "t": 1.0, "proc"')
    assert checkers.load_history(path) == clean_history().events


def test_main_exit_status(tmp_path: Path, capsys: Any) -> None:
    lost = write_history(tmp_path / "lost.jsonl", lost_history().events)
    clean = write_history(tmp_path / "clean.jsonl", clean_history().events)
    assert checkers.main([str(lost)]) == 1
    assert "lost" in capsys.readouterr().out
    assert checkers.main([str(clean)]) == 0
    capsys.readouterr()
    assert checkers.main([str(lost), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["counts"]["lost"] == 1
    # Unseen writes alone do not fail a run.
    h = HistoryBuilder()
    h.send("p1", "a", 0)
    unseen = write_history(tmp_path / "unseen.jsonl", h.events)
    assert checkers.main([str(unseen)]) == 0


def test_script_exit_status(tmp_path: Path) -> None:
    script = VERIFY / "checkers.py"
    lost = write_history(tmp_path / "lost.jsonl", lost_history().events)
    clean = write_history(tmp_path / "clean.jsonl", clean_history().events)
    run = [sys.executable, str(script)]
    assert subprocess.run(run + [str(lost)], capture_output=True).returncode == 1
    done = subprocess.run(run + [str(clean), "--json"], capture_output=True, text=True)
    assert done.returncode == 0
    assert json.loads(done.stdout)["counts"]["lost"] == 0


def test_large_clean_history_smoke() -> None:
    """200,000 sends and the polls reading them back (a speed check; the time is not asserted)."""
    h = HistoryBuilder()
    events = h.events
    partitions = 8
    procs = 4
    next_offset = [0] * partitions
    n = 200_000
    for k in range(n):
        proc = f"p{k % procs}"
        partition = (k // procs) % partitions
        vid = f"{proc}-{k}"
        offset = next_offset[partition]
        next_offset[partition] += 1
        h.send_invoke(proc, vid, partition)
        h.send_ok(proc, vid, offset, partition)
    records = [
        [T, e["value"]["partition"], e["value"]["offset"], e["value"]["id"]]
        for e in events
        if e["type"] == "ok"
    ]
    by_partition: list[list[list[Any]]] = [[] for _ in range(partitions)]
    for r in records:
        by_partition[r[1]].append(r)
    for consumer, isolation in (("c1", "read_committed"), ("c2", "read_uncommitted")):
        h.assign(consumer, [[T, p, 0] for p in range(partitions)])
        for p in range(partitions):
            batch = by_partition[p]
            for start in range(0, len(batch), 500):
                h.poll(consumer, batch[start : start + 500], isolation)
    h.final_read(records, [[T, p, next_offset[p]] for p in range(partitions)])
    result = checkers.check_all(events)
    assert all(v == 0 for v in result["counts"].values()), result["anomalies"]
    assert result["stats"]["sends_ok"] == n
    assert result["stats"]["records_polled"] == 2 * n
    assert result["stats"]["distinct_ids_read"] == n


def test_a_hung_send_offsets_is_abandoned_and_an_error_handed_back(monkeypatch):
    """The harness's guard around librdkafka's send_offsets_to_transaction: a call that
    does not return is abandoned as ClientHang, and one that fails hands its error back."""
    import threading

    import workloads

    monkeypatch.setattr(workloads, "HANG_S", 0.2)
    release = threading.Event()

    class Blocks:
        def send_offsets_to_transaction(self, *_a):
            release.wait(10)

    class Fails:
        def send_offsets_to_transaction(self, *_a):
            raise ValueError("refused")

    class Returns:
        calls = 0

        def send_offsets_to_transaction(self, positions, metadata, timeout):
            Returns.calls += 1
            assert (positions, metadata, timeout) == ([1], "m", 30)

    try:
        workloads.send_offsets(Blocks(), [1], "m")
        raise AssertionError("a hung call was not abandoned")
    except workloads.ClientHang:
        pass
    finally:
        release.set()
    try:
        workloads.send_offsets(Fails(), [1], "m")
        raise AssertionError("the error was not handed back")
    except ValueError as e:
        assert str(e) == "refused"
    workloads.send_offsets(Returns(), [1], "m")
    assert Returns.calls == 1


def _batch(base: int, last_delta: int, pid: int, epoch: int, seq: int) -> bytes:
    """A record batch v2 header with ten bytes of records after it."""
    import struct

    body = struct.pack(">ibI", 0, 2, 0)  # partition leader epoch, magic, CRC
    body += struct.pack(">hiqqqhii", 0, last_delta, 0, 0, pid, epoch, seq, last_delta + 1)
    body += bytes(10)
    return struct.pack(">qi", base, len(body)) + body


def test_duplicates_are_split_by_the_producer_epochs_of_their_batches(tmp_path):
    """A value whose copies lie in two epochs of one producer, the older first, is the
    client's re-send after its own epoch bump, and copies in one batch the client's own
    sends; two batches of one epoch holding it, an older epoch's batch after a newer one's,
    or a copy no node holds, are neither."""
    import batches

    for node, extra in (("n1", b""), ("n2", _batch(30, 0, 7, 0, 9))):
        d = tmp_path / node / "data" / "t-0"
        d.mkdir(parents=True)
        log = _batch(0, 9, 7, 0, 0) + _batch(10, 9, 7, 3, 0) + _batch(20, 4, 7, 3, 10)
        # Producer 8's epoch 1 lands after its epoch 2, which its leader refuses.
        log += _batch(25, 1, 8, 2, 0) + _batch(27, 1, 8, 1, 5)
        (d / "00000000000000000000.log").write_bytes(log + extra + b"\x00" * 7)
    dirs = [tmp_path / "n1" / "data", tmp_path / "n2" / "data"]
    assert batches.read_batches(dirs[0] / "t-0") == [
        (0, 9, 7, 0, 0),
        (10, 19, 7, 3, 0),
        (20, 24, 7, 3, 10),
        (25, 26, 8, 2, 0),
        (27, 28, 8, 1, 5),
    ]
    got = batches.classify_duplicates(
        {
            "bumped": [["t", 0, 4], ["t", 0, 14]],
            "same": [["t", 0, 12], ["t", 0, 22]],
            "only-on-n2": [["t", 0, 2], ["t", 0, 30]],
            "nowhere": [["t", 0, 3], ["t", 0, 99]],
            "sent-twice": [["t", 0, 11], ["t", 0, 13]],
            "older-after-newer": [["t", 0, 26], ["t", 0, 28]],
        },
        dirs,
    )
    kinds = ("one_batch", "epoch_bump", "same_epoch", "stale_epoch", "unresolved")
    assert tuple(got[k] for k in kinds) == (1, 1, 2, 1, 1)
    assert got["examples"]["epoch_bump"][0]["producers"] == [(7, 0), (7, 3)]


def test_the_copy_is_checked_below_its_committed_offsets_and_by_multiplicity():
    """Exactly-once of the consume-transform-produce copy: an input the feed wrote twice is
    copied twice; inputs past the copy's committed offsets are not copied yet, which fails
    only a copy that stopped moving."""
    sys.path.insert(0, str(VERIFY))
    import run
    import workloads as wl

    finals = {
        (wl.TXN_IN, "read_committed"): {
            "records": [
                [wl.TXN_IN, 0, 0, "feed-1"],
                [wl.TXN_IN, 0, 1, "feed-2"],
                [wl.TXN_IN, 0, 2, "feed-1"],  # the feed's duplicate
                [wl.TXN_IN, 0, 3, "feed-3"],  # past the committed offset 3
                [wl.TXN_IN, 1, 0, "feed-4"],
            ]
        },
        (wl.TXN_OUT, "read_committed"): {
            "records": [
                [wl.TXN_OUT, 0, 0, "feed-1@ctp#0"],
                [wl.TXN_OUT, 0, 1, "feed-2@ctp#0"],
                [wl.TXN_OUT, 0, 2, "feed-1@ctp#1"],
                [wl.TXN_OUT, 1, 0, "feed-4@ctp#1"],
                [wl.TXN_OUT, 1, 1, "feed-4@ctp#2"],
            ]
        },
    }
    got = run.Run.check_eos(None, finals, {0: 3, 1: 1}, True)
    assert (got["inputs"], got["missing"], got["duplicated"], got["uncopied"]) == (4, 0, 1, 1)
    assert got["examples"]["duplicated"] == ["feed-4"]
    assert got["stalled"] == 0
    assert run.Run.check_eos(None, finals, {0: 3, 1: 1}, False)["stalled"] == 1
    got = run.Run.check_eos(None, finals, {0: 4, 1: 1}, True)
    assert got["missing"] == 1 and got["examples"]["missing"] == ["feed-3"]
