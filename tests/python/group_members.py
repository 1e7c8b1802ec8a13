"""Consumer-group members for the scenario tests (test_group_scenarios.py), and the check that
reads what they did.

A `Member` is a subscribed kafka-python or aiokafka consumer polling in a thread of its own
(kafka-python's KafkaConsumer and aiokafka's event loop are each confined to it). A
`ChildMember` is the same in a child process, so that it can die by SIGKILL with no LeaveGroup:
this file run as a script (`python group_members.py '<json>'`), which reports on stdout what it
was assigned, consumed and committed. Both keep a `MemberLog`.

`check_partition_history` is the central check: for a partition, each run of consumption (one
member, one assignment) starts exactly at the group's last successful commit (or at 0), has no
gap, and together the runs cover the log. So no message is skipped, and a message is consumed
twice only if it lay past the last commit when its partition moved.
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path

HEARTBEAT_MS = 500
SESSION_MS = 10_000  # where the session timeout is not what the test is about

Rec = namedtuple("Rec", "partition offset epoch t")
Event = namedtuple("Event", "kind partitions generation t")
Commit = namedtuple("Commit", "partition offset t")


class MemberLog:
    """What one member did, in the order it did it; `t` is time.monotonic() of this process."""

    def __init__(self, name: str):
        self.name = name
        self.lock = threading.Lock()
        self.records: list[Rec] = []
        self.events: list[Event] = []  # "assigned" / "revoked", from the rebalance listener
        self.commits: list[Commit] = []  # successful synchronous commits only
        self.positions: dict[int, int] | None = None  # see Member(record_positions=True)
        self.error: str | None = None
        self.epoch = 0  # number of "assigned" events so far; each starts a run

    def on_assigned(self, partitions, generation) -> None:
        with self.lock:
            self.epoch += 1
            event = Event("assigned", frozenset(partitions), generation, time.monotonic())
            self.events.append(event)

    def on_revoked(self, partitions) -> None:
        with self.lock:
            self.events.append(Event("revoked", frozenset(partitions), None, time.monotonic()))

    def on_record(self, partition: int, offset: int) -> None:
        with self.lock:
            self.records.append(Rec(partition, offset, self.epoch, time.monotonic()))

    def on_commit(self, partition: int, offset: int) -> None:
        with self.lock:
            self.commits.append(Commit(partition, offset, time.monotonic()))

    def assignment(self) -> frozenset:
        with self.lock:
            if not self.events or self.events[-1].kind == "revoked":
                return frozenset()
            return self.events[-1].partitions

    def offsets(self, partition: int) -> list[int]:
        with self.lock:
            return [r.offset for r in self.records if r.partition == partition]

    def committed(self, partition: int) -> int | None:
        with self.lock:
            offsets = [c.offset for c in self.commits if c.partition == partition]
        return max(offsets) if offsets else None

    def events_after(self, t: float) -> list[Event]:
        with self.lock:
            return [e for e in self.events if e.t > t]

    def check(self) -> None:
        assert self.error is None, f"{self.name}: {self.error}"


class Member(MemberLog):
    """A subscribed consumer polling in its own thread until `close()`.

    commit: after each non-empty poll, commit synchronously what was consumed, but never past
    `commit_below[partition]` when that is given. record_positions: after each new assignment,
    ask the client for its positions (this makes it resolve auto_offset_reset) and keep them.
    Clearing `polling` stops the poll calls while the client's heartbeats go on.
    """

    def __init__(
        self,
        client: str,
        bootstrap: str,
        topic: str,
        group: str,
        name: str,
        *,
        session_timeout_ms: int = SESSION_MS,
        max_poll_interval_ms: int = 300_000,
        instance_id: str | None = None,
        auto_offset_reset: str = "earliest",
        commit: bool = False,
        commit_below: dict[int, int] | None = None,
        record_positions: bool = False,
        report=None,
    ):
        super().__init__(name)
        self.client = client
        self.config = dict(
            bootstrap=bootstrap,
            topic=topic,
            group=group,
            session_timeout_ms=session_timeout_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            instance_id=instance_id,
            auto_offset_reset=auto_offset_reset,
        )
        self.commit = commit
        self.commit_below = commit_below or {}
        self.record_positions = record_positions
        self.report = report or (lambda line: None)
        self.polling = threading.Event()
        self.polling.set()
        self.last_poll_end = time.monotonic()
        self._stop = threading.Event()
        self._committed: dict[int, int] = {}
        self._positions_epoch = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- hooks shared by both clients; they run on the member's own thread

    def _assigned(self, partitions, generation) -> None:
        partitions = frozenset(partitions)
        self.on_assigned(partitions, generation)
        self.report(f"assigned {generation} {','.join(map(str, sorted(partitions)))}")

    def _revoked(self, partitions) -> None:
        partitions = frozenset(partitions)
        self.on_revoked(partitions)
        self.report(f"revoked {','.join(map(str, sorted(partitions)))}")

    def _consumed(self, batch: dict) -> dict[int, int]:
        """Records a poll's result; returns the offsets to commit, by partition."""
        self.last_poll_end = time.monotonic()
        to_commit = {}
        for tp, records in batch.items():
            for r in records:
                self.on_record(tp.partition, r.offset)
                self.report(f"record {tp.partition} {r.offset}")
            if self.commit and records:
                offset = records[-1].offset + 1
                cap = self.commit_below.get(tp.partition)
                if cap is not None:
                    offset = min(offset, cap)
                if offset > self._committed.get(tp.partition, 0):
                    to_commit[tp.partition] = offset
        return to_commit

    def _committed_ok(self, offsets: dict[int, int]) -> None:
        for p, o in offsets.items():
            self._committed[p] = o
            self.on_commit(p, o)
            self.report(f"commit {p} {o}")

    def _run(self) -> None:
        try:
            if self.client == "kafka-python":
                self._run_kafka_python()
            else:
                asyncio.run(self._run_aiokafka())
        except BaseException as e:  # surfaced by check()
            self.error = f"{type(e).__name__}: {e}"
            self.report(f"error {self.error}")

    def _consumer_settings(self) -> dict:
        """The consumer settings both clients take, under the same names."""
        cfg = self.config
        return dict(
            bootstrap_servers=cfg["bootstrap"],
            group_id=cfg["group"],
            client_id=self.name,
            group_instance_id=cfg["instance_id"],
            auto_offset_reset=cfg["auto_offset_reset"],
            enable_auto_commit=False,
            session_timeout_ms=cfg["session_timeout_ms"],
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=cfg["max_poll_interval_ms"],
            request_timeout_ms=30_000,
            retry_backoff_ms=100,
        )

    def _run_kafka_python(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        cfg = self.config
        consumer = KafkaConsumer(**self._consumer_settings())
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._revoked(tp.partition for tp in revoked)

            def on_partitions_assigned(self, assigned):
                generation = consumer._coordinator._generation.generation_id
                member._assigned((tp.partition for tp in assigned), generation)

        consumer.subscribe([cfg["topic"]], listener=Listener())
        try:
            while not self._stop.is_set():
                if not self.polling.is_set():
                    time.sleep(0.05)
                    continue
                to_commit = self._consumed(consumer.poll(timeout_ms=100))
                if to_commit:
                    try:
                        consumer.commit(
                            {
                                TopicPartition(cfg["topic"], p): OffsetAndMetadata(o, "", -1)
                                for p, o in to_commit.items()
                            }
                        )
                        self._committed_ok(to_commit)
                    except KafkaError as e:  # e.g. CommitFailedError in a rebalance
                        self.report(f"commit-failed {e!r}")
                if self.record_positions and self.epoch != self._positions_epoch:
                    epoch = self.epoch
                    tps = consumer.assignment()
                    self.positions = {tp.partition: consumer.position(tp) for tp in tps}
                    self._positions_epoch = epoch
        finally:
            consumer.close(autocommit=False)  # LeaveGroup, unless a static member

    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.errors import KafkaError

        cfg = self.config
        consumer = AIOKafkaConsumer(**self._consumer_settings())
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._revoked(tp.partition for tp in revoked)

            def on_partitions_assigned(self, assigned):
                generation = consumer._coordinator.generation
                member._assigned((tp.partition for tp in assigned), generation)

        consumer.subscribe([cfg["topic"]], listener=Listener())
        await consumer.start()
        try:
            while not self._stop.is_set():
                if not self.polling.is_set():
                    await asyncio.sleep(0.05)
                    continue
                to_commit = self._consumed(await consumer.getmany(timeout_ms=100))
                if to_commit:
                    try:
                        await consumer.commit(
                            {TopicPartition(cfg["topic"], p): o for p, o in to_commit.items()}
                        )
                        self._committed_ok(to_commit)
                    except KafkaError as e:  # e.g. CommitFailedError in a rebalance
                        self.report(f"commit-failed {e!r}")
                if self.record_positions and self.epoch != self._positions_epoch:
                    epoch = self.epoch
                    tps = consumer.assignment()
                    self.positions = {tp.partition: await consumer.position(tp) for tp in tps}
                    self._positions_epoch = epoch
        finally:
            await consumer.stop()  # LeaveGroup, unless a static member

    def begin_close(self) -> None:
        """Asks the thread to close the consumer; `close()` waits for that."""
        self._stop.set()

    def close(self, timeout: float = 30) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not close within {timeout}s"


class ChildMember(MemberLog):
    """A Member in a child process, so that it can die by SIGKILL with no LeaveGroup. Its stdout
    lines are replayed into this log as they arrive (so `t` is when the parent read them)."""

    def __init__(self, client: str, name: str, stderr_path: Path, **kwargs):
        super().__init__(name)
        self._stderr = open(stderr_path, "wb")
        self.stderr_path = stderr_path
        self.proc = subprocess.Popen(
            [sys.executable, __file__, json.dumps({"client": client, "name": name, **kwargs})],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, name=f"{name}-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "assigned":
                gen, _, parts = rest.partition(" ")
                self.on_assigned({int(p) for p in parts.split(",") if p}, int(gen))
            elif kind == "revoked":
                self.on_revoked({int(p) for p in rest.split(",") if p})
            elif kind == "record":
                p, o = rest.split()
                self.on_record(int(p), int(o))
            elif kind == "commit":
                p, o = rest.split()
                self.on_commit(int(p), int(o))
            elif kind == "error":
                self.error = rest

    def check(self) -> None:
        super().check()
        assert self.proc.poll() is None, (
            f"{self.name} exited with {self.proc.returncode}: {self.stderr_tail()}"
        )

    def stderr_tail(self) -> str:
        try:
            return self.stderr_path.read_bytes()[-4000:].decode("utf-8", "replace")
        except OSError as e:
            return f"<{e}>"

    def kill9(self) -> float:
        """SIGKILL; returns the monotonic time just before the signal."""
        t = time.monotonic()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        return t

    def close(self, timeout: float = 10) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
        self._stderr.close()


def child_main(args: dict) -> None:
    """The child process: one Member that reports on stdout until it is killed."""
    lock = threading.Lock()

    def report(line: str) -> None:
        with lock:
            print(line, flush=True)

    client, name = args.pop("client"), args.pop("name")
    bootstrap, topic, group = args.pop("bootstrap"), args.pop("topic"), args.pop("group")
    if "commit_below" in args:
        args["commit_below"] = {int(k): v for k, v in args["commit_below"].items()}
    parent = os.getppid()
    Member(client, bootstrap, topic, group, name, report=report, **args)
    while os.getppid() == parent:  # else the test process died without killing us
        time.sleep(1)
    os._exit(1)


def check_partition_history(partition: int, ms, log_end: int, start: int = 0) -> None:
    """Each run of consumption of `partition` (one member, one assignment) starts exactly at the
    group's last successful commit before it (or at `start` if none), and runs without a gap;
    together the runs cover [start, log_end). So nothing was skipped, and an offset was consumed
    again only if it lay past the last commit when the partition changed hands."""
    runs = []
    for m in ms:
        by_epoch: dict[int, list[Rec]] = {}
        with m.lock:
            for r in m.records:
                if r.partition == partition:
                    by_epoch.setdefault(r.epoch, []).append(r)
        runs += [(recs[0].t, m.name, [r.offset for r in recs]) for recs in by_epoch.values()]
    runs.sort()
    commits = sorted(
        (c.t, c.offset) for m in ms for c in m.commits if c.partition == partition
    )
    history = [(name, offs[0], offs[-1]) for _, name, offs in runs]
    seen = set()
    for t0, name, offsets in runs:
        committed = max((o for t, o in commits if t < t0), default=start)
        assert offsets[0] == committed, (
            f"partition {partition}: {name} started at {offsets[0]}, the last commit was "
            f"{committed}; runs (member, first, last) {history}"
        )
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), (
            f"partition {partition}: {name} skipped or repeated within a run: {offsets}"
        )
        seen.update(offsets)
    assert seen == set(range(start, log_end)), (
        f"partition {partition}: consumed {sorted(seen)[:3]}.., expected [{start}, {log_end}); "
        f"runs {history}"
    )


if __name__ == "__main__":
    child_main(json.loads(sys.argv[1]))
