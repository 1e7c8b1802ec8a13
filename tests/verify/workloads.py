"""The clients of a run, each a thread recording what it does in the history.

- queue: producers (confluent-kafka with and without idempotence, kafka-python with
  idempotence; acks=all) write unique values to the `queue` topic; consumers in a group
  (confluent-kafka, subscribed) and one assigned consumer (kafka-python) read and commit as
  they go, and now and then read their committed offsets back.
- transactions: transactional producers (confluent-kafka) commit or abort transactions over
  `txn-out`'s partitions, each left open a while after its sends are written; a
  consume-transform-produce application copies `txn-in` into `txn-out` exactly once; a
  read_committed consumer reads `txn-out` all along; a fencer now and then starts a producer
  with a running one's transactional id.
- admin: creates and deletes topics, adds partitions and reassigns partitions while the
  others run.

Every value written is unique (`<proc>-<n>`), so a read names the write it saw.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from history import History

QUEUE = "queue"
TXN_IN = "txn-in"
TXN_OUT = "txn-out"

# librdkafka's and kafka-python's logs: the runner sends them to clients.log in the run's
# directory (connection errors under faults are expected and many).
CLIENT_LOG = logging.getLogger("verify.clients")


def quiet(err) -> None:
    """librdkafka's error callback: connection errors are expected under faults; a fatal
    error is logged with its cause (librdkafka logs no line of its own for it), since the
    client's next call only says "Local: Fatal error"."""
    if err.fatal():
        CLIENT_LOG.warning("fatal client error: %s", err)


class Worker(threading.Thread):
    def __init__(
        self, name: str, history: History, bootstrap: str, stop: threading.Event, seed: int
    ):
        super().__init__(name=name, daemon=True)
        self.proc = name
        self.h = history
        self.bootstrap = bootstrap
        self.stop_ev = stop
        self.rng = random.Random(seed)
        self.error: BaseException | None = None
        self.ops = 0

    def run(self) -> None:
        try:
            self.body()
        except BaseException as e:  # noqa: BLE001 - reported by the runner
            self.error = e
            CLIENT_LOG.exception("%s crashed", self.proc)
            self.h.add(self.proc, "info", "crash", {"error": repr(e)})

    def body(self) -> None:
        raise NotImplementedError

    def group_member(self, group: str, topic: str, isolation: str) -> Consumer:
        """A confluent-kafka consumer subscribed to `topic` in `group`, committing by hand,
        whose every assignment and revocation is recorded (the checkers' sessions)."""
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": isolation,
                "session.timeout.ms": 15000,
                "error_cb": quiet,
                "logger": CLIENT_LOG,
            }
        )

        def on_assign(_c, parts) -> None:
            positions = [[p.topic, p.partition, None] for p in parts]
            self.h.ok(self.proc, "assign", {"consumer": self.proc, "positions": positions})

        def on_revoke(_c, _parts) -> None:
            self.h.ok(self.proc, "assign", {"consumer": self.proc, "positions": []})

        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        return c

    def invoke_send(self, vid: str, topic: str, partition: int, idempotent: bool, txn) -> None:
        self.h.invoke(
            self.proc,
            "send",
            {
                "id": vid,
                "topic": topic,
                "partition": partition,
                "idempotent": idempotent,
                "txn": txn,
            },
        )

    def delivered(self, vid: str, then=None):
        """librdkafka's delivery report for `vid`, recorded: ok with its offset, or info
        (an error after a send may still have been written). `then(vid)` runs first."""

        def cb(err, msg) -> None:
            if then is not None:
                then(vid)
            if err is None:
                self.h.ok(
                    self.proc,
                    "send",
                    {
                        "id": vid,
                        "topic": msg.topic(),
                        "partition": msg.partition(),
                        "offset": msg.offset(),
                    },
                )
            else:
                self.h.info(self.proc, "send", {"id": vid, "error": str(err)})

        return cb

    def pace(self, per_s: float) -> None:
        time.sleep(self.rng.expovariate(per_s))


class CkProducer(Worker):
    """confluent-kafka, acks=all, with or without idempotence, to the queue topic (or, as the
    consume-transform-produce application's input, to txn-in)."""

    def __init__(self, *a, idempotent: bool, partitions: int, rate: float, topic: str = QUEUE, **k):
        super().__init__(*a, **k)
        self.topic = topic
        self.idempotent = idempotent
        self.partitions = partitions
        self.rate = rate
        self.pending: set[str] = set()
        self.lock = threading.Lock()

    def body(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": self.idempotent,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "error_cb": quiet,
                "logger": CLIENT_LOG,
                # The idempotence state machine's log (epoch bumps, sequence errors) in
                # clients.log: what explains a duplicate if one is found.
                **({"debug": "eos", "log_level": 7} if self.idempotent else {}),
            }
        )
        n = 0
        while not self.stop_ev.is_set():
            vid = f"{self.proc}-{n}"
            n += 1
            part = self.rng.randrange(self.partitions)
            self.invoke_send(vid, self.topic, part, self.idempotent, None)
            try:
                p.produce(
                    self.topic,
                    value=vid.encode(),
                    partition=part,
                    on_delivery=self._delivered(vid),
                )
                with self.lock:
                    self.pending.add(vid)
            except BufferError as e:
                self.h.fail(self.proc, "send", {"id": vid, "error": str(e)})
            p.poll(0)
            self.ops += 1
            self.pace(self.rate)
        p.flush(90)
        with self.lock:
            left = sorted(self.pending)
        for vid in left:
            self.h.info(self.proc, "send", {"id": vid, "error": "not delivered by the end"})

    def _delivered(self, vid: str):
        return self.delivered(vid, then=self._settled)

    def _settled(self, vid: str) -> None:
        with self.lock:
            self.pending.discard(vid)


class KpProducer(Worker):
    """kafka-python (not built on librdkafka), acks=all with idempotence, to the queue topic."""

    def __init__(self, *a, partitions: int, rate: float, **k):
        super().__init__(*a, **k)
        self.partitions = partitions
        self.rate = rate

    def body(self) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=15000,
            delivery_timeout_ms=60000,
        )
        futures = []
        n = 0
        while not self.stop_ev.is_set():
            vid = f"{self.proc}-{n}"
            n += 1
            part = self.rng.randrange(self.partitions)
            self.invoke_send(vid, QUEUE, part, True, None)
            try:
                fut = p.send(QUEUE, value=vid.encode(), partition=part)
                fut.add_callback(self._ok, vid)
                fut.add_errback(self._err, vid)
                futures.append(fut)
            except Exception as e:  # noqa: BLE001 - kafka-python raises several kinds
                self.h.info(self.proc, "send", {"id": vid, "error": repr(e)})
            self.ops += 1
            self.pace(self.rate)
            if len(futures) > 1000:
                futures = [f for f in futures if not f.is_done]
        try:
            p.flush(timeout=90)
        except Exception:  # noqa: BLE001 - undelivered sends stay open (unknown)
            pass
        # A send still undelivered keeps an invoke without completion: unknown to the checker.
        p.close(timeout=5)

    def _ok(self, vid: str, md) -> None:
        self.h.ok(
            self.proc,
            "send",
            {"id": vid, "topic": md.topic, "partition": md.partition, "offset": md.offset},
        )

    def _err(self, vid: str, exc) -> None:
        self.h.info(self.proc, "send", {"id": vid, "error": repr(exc)})


def offsets_of(tps) -> list:
    """The offsets librdkafka answered for a commit or a committed() read, as the history
    records them: those without an error and with an offset."""
    return [[t.topic, t.partition, t.offset] for t in tps if t.error is None and t.offset >= 0]


def records_of(msgs) -> list:
    out = []
    for m in msgs:
        if m.error() is None:
            out.append([m.topic(), m.partition(), m.offset(), m.value().decode()])
    return out


class CkGroupConsumer(Worker):
    """confluent-kafka, subscribed in a group, commits synchronously after each batch and
    reads its committed offsets back now and then."""

    def __init__(self, *a, group: str, topic: str, isolation: str = "read_uncommitted", **k):
        super().__init__(*a, **k)
        self.group = group
        self.topic = topic
        self.isolation = isolation

    def body(self) -> None:
        c = self.group_member(self.group, self.topic, self.isolation)
        last_committed_read = time.monotonic()
        while not self.stop_ev.is_set():
            self.h.invoke(self.proc, "poll", {"consumer": self.proc, "isolation": self.isolation})
            msgs = c.consume(num_messages=200, timeout=0.5)
            recs = records_of(msgs)
            self.h.ok(
                self.proc,
                "poll",
                {"consumer": self.proc, "isolation": self.isolation, "records": recs},
            )
            self.ops += 1
            if recs:
                self.h.invoke(self.proc, "commit", {"group": self.group})
                try:
                    done = c.commit(asynchronous=False)
                    self.h.ok(
                        self.proc,
                        "commit",
                        {"group": self.group, "offsets": offsets_of(done)},
                    )
                except KafkaException as e:
                    self.h.info(self.proc, "commit", {"group": self.group, "error": str(e)})
            if time.monotonic() - last_committed_read > 3:
                last_committed_read = time.monotonic()
                assigned = c.assignment()
                if assigned:
                    self.h.invoke(self.proc, "committed", {"group": self.group})
                    try:
                        got = c.committed(assigned, timeout=5)
                        self.h.ok(
                            self.proc,
                            "committed",
                            {"group": self.group, "offsets": offsets_of(got)},
                        )
                    except KafkaException as e:
                        self.h.info(self.proc, "committed", {"group": self.group, "error": str(e)})
        c.close()


class KpAssignedConsumer(Worker):
    """kafka-python, assigned every partition of the topic (no group membership), commits its
    positions under its group id after each batch."""

    def __init__(self, *a, group: str, topic: str, partitions: int, **k):
        super().__init__(*a, **k)
        self.group = group
        self.topic = topic
        self.partitions = partitions

    def body(self) -> None:
        from kafka import KafkaConsumer, TopicPartition as KTP

        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap.split(","),
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=15000,
        )
        tps = [KTP(self.topic, p) for p in range(self.partitions)]
        c.assign(tps)
        positions = []
        for tp in tps:
            try:
                positions.append([tp.topic, tp.partition, c.position(tp, timeout_ms=30000)])
            except Exception:  # noqa: BLE001 - position unknown until the first fetch
                positions.append([tp.topic, tp.partition, None])
        self.h.ok(self.proc, "assign", {"consumer": self.proc, "positions": positions})
        while not self.stop_ev.is_set():
            self.h.invoke(
                self.proc, "poll", {"consumer": self.proc, "isolation": "read_uncommitted"}
            )
            got = c.poll(timeout_ms=500, max_records=500)
            recs = []
            for tp, msgs in got.items():
                for m in msgs:
                    recs.append([tp.topic, tp.partition, m.offset, m.value.decode()])
            self.h.ok(
                self.proc,
                "poll",
                {"consumer": self.proc, "isolation": "read_uncommitted", "records": recs},
            )
            self.ops += 1
            if recs:
                offsets = {}
                for tp in got:
                    offsets[tp] = c.position(tp)
                self.h.invoke(self.proc, "commit", {"group": self.group})
                try:
                    c.commit()
                    self.h.ok(
                        self.proc,
                        "commit",
                        {
                            "group": self.group,
                            "offsets": [[tp.topic, tp.partition, o] for tp, o in offsets.items()],
                        },
                    )
                except Exception as e:  # noqa: BLE001 - kafka-python raises several kinds
                    self.h.info(self.proc, "commit", {"group": self.group, "error": repr(e)})
        c.close(autocommit=False)


class TxnProducer(Worker):
    """A transactional producer: each transaction writes 1-5 records to `txn-out`, is left
    open a while once written (so that a reader that ignored the LSO would see it), then
    commits (4 in 5) or aborts."""

    def __init__(self, *a, partitions: int, rate: float, **k):
        super().__init__(*a, **k)
        self.partitions = partitions
        self.rate = rate
        self.txid = self.proc
        self.committed = 0
        self.aborted = 0
        self.n = 0

    def make(self) -> Producer:
        """A new instance, once init_transactions succeeded (which fences the one before and
        aborts what it left open)."""
        p = self.make_raw()
        while not self.stop_ev.is_set():
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                if e.args[0].fatal():
                    p = self.make_raw()
                time.sleep(0.5)
        return p

    def make_raw(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.txid,
                "transaction.timeout.ms": 30000,
                "message.timeout.ms": 30000,
                "linger.ms": 2,
                "error_cb": quiet,
                "logger": CLIENT_LOG,
            }
        )

    def body(self) -> None:
        p = self.make()
        attempt = 0
        while not self.stop_ev.is_set():
            tx = f"{self.proc}#{attempt}"
            attempt += 1
            self.h.invoke(self.proc, "txn-begin", {"txn": tx})
            try:
                p.begin_transaction()
            except KafkaException as e:
                self.h.fail(self.proc, "txn-begin", {"txn": tx, "error": str(e)})
                CLIENT_LOG.warning("%s: begin failed (%s): a new instance", self.proc, e)
                time.sleep(0.5)
                p = self.make()
                continue
            self.h.ok(self.proc, "txn-begin", {"txn": tx})
            try:
                p = self.one_transaction(p, tx)
            except Exception as e:  # noqa: BLE001 - e.g. flush of a fenced instance
                # The transaction's outcome is left unknown; a new instance aborts it.
                CLIENT_LOG.warning("%s: %r in %s: a new instance", self.proc, e, tx)
                self.h.add(self.proc, "info", "reinit", {"error": repr(e)})
                p = self.make()
            self.ops += 1
            self.pace(self.rate)

    def one_transaction(self, p: Producer, tx: str) -> Producer:
        for _ in range(self.rng.randint(1, 5)):
            # Numbered on the object: a transaction cut short by an exception must not give
            # its numbers to the next one (every value written is unique).
            vid = f"{self.proc}-{self.n}"
            self.n += 1
            part = self.rng.randrange(self.partitions)
            self.invoke_send(vid, TXN_OUT, part, True, tx)
            try:
                p.produce(
                    TXN_OUT, value=vid.encode(), partition=part, on_delivery=self.delivered(vid)
                )
            except (BufferError, KafkaException) as e:
                self.h.fail(self.proc, "send", {"id": vid, "error": str(e)})
        p.flush(30)
        # Written, not committed: a read_committed reader must not see these yet.
        time.sleep(self.rng.uniform(0.05, 0.3))
        if self.rng.random() < 0.8:
            p = self.commit(p, tx)
        else:
            p = self.abort(p, tx)
        return p

    def commit(self, p: Producer, tx: str) -> Producer:
        """commit_transaction, called again while librdkafka says the call may be resumed (a
        retriable error, e.g. its timeout), for at most two minutes."""
        self.h.invoke(self.proc, "txn-commit", {"txn": tx})
        deadline = time.monotonic() + 120
        while True:
            try:
                p.commit_transaction(30)
                self.h.ok(self.proc, "txn-commit", {"txn": tx})
                self.committed += 1
                return p
            except KafkaException as e:
                err = e.args[0]
                if err.retriable() and time.monotonic() < deadline:
                    continue
                if err.txn_requires_abort():
                    self.h.fail(self.proc, "txn-commit", {"txn": tx, "error": str(e)})
                    return self.abort(p, tx)
                self.h.info(self.proc, "txn-commit", {"txn": tx, "error": str(e)})
                return self.recover(p, e, stuck=err.retriable())

    def abort(self, p: Producer, tx: str) -> Producer:
        """abort_transaction, resumed as commit is."""
        self.h.invoke(self.proc, "txn-abort", {"txn": tx})
        deadline = time.monotonic() + 120
        while True:
            try:
                p.abort_transaction(30)
                self.h.ok(self.proc, "txn-abort", {"txn": tx})
                self.aborted += 1
                return p
            except KafkaException as e:
                if e.args[0].retriable() and time.monotonic() < deadline:
                    continue
                self.h.info(self.proc, "txn-abort", {"txn": tx, "error": str(e)})
                return self.recover(p, e, stuck=e.args[0].retriable())

    def recover(self, p: Producer, e: KafkaException, stuck: bool = False) -> Producer:
        """After a fatal error (fenced, or an epoch the coordinator refused) the instance is
        replaced: the new one's init_transactions aborts whatever the old one left open. So
        is an instance `stuck` in a commit or abort that its retries did not finish in two
        minutes, or whose every call now conflicts with that one (_CONFLICT): librdkafka's
        request can wait without end for a coordinator it no longer looks up (issue 5511)."""
        err = e.args[0]
        if stuck or err.fatal() or not err.retriable() or err.code() == KafkaError._CONFLICT:
            self.h.add(self.proc, "info", "reinit", {"error": str(e)})
            try:
                p.flush(5)
            except Exception:  # noqa: BLE001
                pass
            return self.make()
        return p


class Fencer(Worker):
    """Now and then starts a producer with one of the transactional producers' ids and runs
    one transaction of its own: the running instance is fenced and must start again."""

    def __init__(self, *a, txids: list[str], partitions: int, every_s: float, **k):
        super().__init__(*a, **k)
        self.txids = txids
        self.partitions = partitions
        self.every_s = every_s
        self.fences = 0

    def body(self) -> None:
        n = 0
        while not self.stop_ev.wait(self.rng.uniform(0.5, 1.5) * self.every_s):
            txid = self.rng.choice(self.txids)
            p = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "transactional.id": txid,
                    "transaction.timeout.ms": 30000,
                    "error_cb": quiet,
                    "logger": CLIENT_LOG,
                }
            )
            tx = f"{self.proc}#{n}"
            n += 1
            self.h.add(self.proc, "ok", "fence", {"txid": txid})
            try:
                p.init_transactions(30)
                self.fences += 1
                self.h.invoke(self.proc, "txn-begin", {"txn": tx})
                p.begin_transaction()
                self.h.ok(self.proc, "txn-begin", {"txn": tx})
                vid = f"{self.proc}-{n}"
                part = self.rng.randrange(self.partitions)
                self.invoke_send(vid, TXN_OUT, part, True, tx)
                p.produce(
                    TXN_OUT, value=vid.encode(), partition=part, on_delivery=self.delivered(vid)
                )
                self.h.invoke(self.proc, "txn-commit", {"txn": tx})
                try:
                    p.commit_transaction(30)
                    self.h.ok(self.proc, "txn-commit", {"txn": tx})
                except KafkaException as e:
                    self.h.info(self.proc, "txn-commit", {"txn": tx, "error": str(e)})
            except KafkaException as e:
                self.h.add(self.proc, "info", "fence-failed", {"txid": txid, "error": str(e)})
            try:
                p.flush(5)
            except KafkaException:
                pass  # fenced in turn by the instance it fenced: expected
            self.ops += 1


class ClientHang(Exception):
    """A client call that did not return long after its own timeout."""


# How long past its own 30 s timeout send_offsets_to_transaction is waited for.
HANG_S = 90


def send_offsets(p: Producer, positions, group_metadata) -> None:
    """send_offsets_to_transaction with a 30 s timeout, in a thread of its own that is
    abandoned if it has not returned after HANG_S (ClientHang): librdkafka's call can block
    past its timeout, without end, when the group's coordinator it had cached left the
    Metadata answers meanwhile (a restarted broker is fenced, and unlisted, until it has
    caught up), as librdkafka issues 5456 and 5511 describe."""
    outcome: dict = {}

    def call() -> None:
        try:
            p.send_offsets_to_transaction(positions, group_metadata, 30)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome["error"] = e

    t = threading.Thread(target=call, name="send-offsets", daemon=True)
    t.start()
    t.join(HANG_S)
    if t.is_alive():
        raise ClientHang(f"send_offsets_to_transaction did not return in {HANG_S} s")
    if "error" in outcome:
        raise outcome["error"]


class Transformer(Worker):
    """Consume-transform-produce: reads txn-in with read_committed in group `ctp`, writes
    `<input>@<proc>.<attempt>` to the same partition of txn-out, and commits its input
    offsets in the same transaction (send_offsets_to_transaction). An aborted transaction
    rewinds to the committed offsets."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.group = "ctp"
        self.done = 0
        self.hangs = 0

    def body(self) -> None:
        c = self.group_member(self.group, TXN_IN, "read_committed")
        txp = TxnProducer(self.proc, self.h, self.bootstrap, self.stop_ev, 0, partitions=1, rate=1)
        txp.txid = f"{self.proc}-tx"
        p = txp.make()
        attempt = 0
        while not self.stop_ev.is_set():
            self.h.invoke(self.proc, "poll", {"consumer": self.proc, "isolation": "read_committed"})
            msgs = [m for m in c.consume(num_messages=50, timeout=0.5) if m.error() is None]
            self.h.ok(
                self.proc,
                "poll",
                {"consumer": self.proc, "isolation": "read_committed", "records": records_of(msgs)},
            )
            if not msgs:
                continue
            tx = f"{self.proc}#{attempt}"
            attempt += 1
            ok = False
            try:
                self.h.invoke(self.proc, "txn-begin", {"txn": tx})
                p.begin_transaction()
                self.h.ok(self.proc, "txn-begin", {"txn": tx})
                for m in msgs:
                    vid = f"{m.value().decode()}@{tx}"
                    self.invoke_send(vid, TXN_OUT, m.partition(), True, tx)
                    p.produce(
                        TXN_OUT,
                        value=vid.encode(),
                        partition=m.partition(),
                        on_delivery=txp.delivered(vid),
                    )
                send_offsets(p, c.position(c.assignment()), c.consumer_group_metadata())
                before = txp.committed
                p = txp.commit(p, tx)
                ok = txp.committed > before
                if ok:
                    self.done += len(msgs)
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort():
                    self.h.fail(self.proc, "txn-commit", {"txn": tx, "error": str(e)})
                    p = txp.abort(p, tx)
                else:
                    self.h.info(self.proc, "txn-commit", {"txn": tx, "error": str(e)})
                    p = txp.recover(p, e)
            except ClientHang as e:
                # The instance is left to its hung call; a new one fences it and aborts
                # the transaction it left open.
                CLIENT_LOG.warning("%s: %s in %s: a new instance", self.proc, e, tx)
                self.h.add(self.proc, "info", "client-hang", {"txn": tx, "call": str(e)})
                self.hangs += 1
                p = txp.make()
            except Exception as e:  # noqa: BLE001 - e.g. flush of a fenced instance
                CLIENT_LOG.warning("%s: %r in %s: a new instance", self.proc, e, tx)
                self.h.add(self.proc, "info", "reinit", {"error": repr(e)})
                p = txp.make()
            self.ops += 1
            if not ok:
                self.rewind(c)
        c.close()

    def rewind(self, c: Consumer) -> None:
        """Back to the committed offsets, as after an aborted transaction an application
        must. A read of them that failed, as a whole or for one partition, is no answer:
        it is asked again until it is one (or the run ends), since taking it for "nothing
        committed" would copy every input from offset 0 again. Each failed read is an
        `info` event in the history."""
        assigned = c.assignment()
        if not assigned:
            return
        while True:
            try:
                committed = c.committed(assigned, timeout=10)
                failed = {f"{t.topic}-{t.partition}": str(t.error) for t in committed if t.error}
                if not failed:
                    break
                self.h.add(self.proc, "info", "committed-read", {"errors": failed})
            except KafkaException as e:
                self.h.add(self.proc, "info", "committed-read", {"error": str(e)})
            if self.stop_ev.wait(1.0):
                return
        positions = []
        for t in committed:
            off = t.offset if t.offset >= 0 else 0
            try:
                c.seek(TopicPartition(t.topic, t.partition, off))
            except KafkaException:
                pass
            positions.append([t.topic, t.partition, off])
        self.h.ok(self.proc, "assign", {"consumer": self.proc, "positions": positions})


class CkAssignedReader(Worker):
    """Reads every partition of a topic from the beginning, without a group, at an isolation
    level: what a read_committed reader of txn-out sees all along."""

    def __init__(self, *a, topic: str, partitions: int, isolation: str, **k):
        super().__init__(*a, **k)
        self.topic = topic
        self.partitions = partitions
        self.isolation = isolation

    def body(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"{self.proc}-unused",
                "enable.auto.commit": False,
                "isolation.level": self.isolation,
                "error_cb": quiet,
                "logger": CLIENT_LOG,
            }
        )
        c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        self.h.ok(
            self.proc,
            "assign",
            {
                "consumer": self.proc,
                "positions": [[self.topic, p, 0] for p in range(self.partitions)],
            },
        )
        while not self.stop_ev.is_set():
            self.h.invoke(self.proc, "poll", {"consumer": self.proc, "isolation": self.isolation})
            msgs = c.consume(num_messages=500, timeout=0.5)
            self.h.ok(
                self.proc,
                "poll",
                {"consumer": self.proc, "isolation": self.isolation, "records": records_of(msgs)},
            )
            self.ops += 1
        c.close()


def final_read(
    h: History, bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = 120
) -> dict:
    """After the faults are healed: a fresh consumer reads each partition from offset 0 to its
    end (the high watermark, or the last stable offset for read_committed) and records it."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "final-read-unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "error_cb": quiet,
            "logger": CLIENT_LOG,
        }
    )
    ends = {}
    deadline = time.monotonic() + timeout_s
    for p in range(partitions):
        while True:
            try:
                lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                ends[p] = hi
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    recs = []
    # Where each partition's reading reached: the end of file position librdkafka reports
    # (the high watermark, or for read_committed the last stable offset), once it is at
    # least the high watermark taken before reading. A read_committed reader stays short of
    # it while a transaction is open, until the coordinator ends it.
    reached: dict[int, int] = {}
    remaining = set(range(partitions))
    while remaining and time.monotonic() < deadline:
        for m in c.consume(num_messages=1000, timeout=1.0):
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    reached[m.partition()] = m.offset()
                    if m.offset() >= ends[m.partition()]:
                        remaining.discard(m.partition())
                continue
            recs.append([m.topic(), m.partition(), m.offset(), m.value().decode()])
    c.close()
    value = {
        "isolation": isolation,
        "records": recs,
        "ends": [[topic, p, reached[p]] for p in sorted(reached)],
        "unfinished": sorted(remaining),
    }
    h.ok("final", "final-read", value)
    return value


class AdminWorker(Worker):
    """Admin operations under load: creates topics `adm-<n>`, deletes them, and adds
    partitions, at random, recording each request and its answer. At the end the runner
    checks the cluster's topics against the last acknowledged operation on each."""

    def __init__(self, *a, every_s: float, **k):
        super().__init__(*a, **k)
        self.every_s = every_s
        self.expected: dict[str, int | None] = {}  # topic -> partitions, None once deleted

    def body(self) -> None:
        from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap, "error_cb": quiet, "logger": CLIENT_LOG}
        )
        n = 0
        while not self.stop_ev.wait(self.rng.uniform(0.5, 1.5) * self.every_s):
            live = sorted(t for t, p in self.expected.items() if p is not None)
            op = (
                self.rng.choice(["create", "create", "delete", "add-partitions"])
                if live
                else "create"
            )
            if op == "create":
                topic = f"adm-{n}"
                n += 1
                value = {"op": op, "topic": topic, "partitions": 2}
                self.h.invoke(self.proc, "admin", value)
                fut = admin.create_topics([NewTopic(topic, 2, 3)], request_timeout=30)[topic]
                after = 2
            elif op == "delete":
                topic = self.rng.choice(live)
                value = {"op": op, "topic": topic}
                self.h.invoke(self.proc, "admin", value)
                fut = admin.delete_topics([topic], request_timeout=30)[topic]
                after = None
            else:
                topic = self.rng.choice(live)
                after = self.expected[topic] + 1
                value = {"op": op, "topic": topic, "partitions": after}
                self.h.invoke(self.proc, "admin", value)
                fut = admin.create_partitions([NewPartitions(topic, after)], request_timeout=30)[
                    topic
                ]
            try:
                fut.result(timeout=40)
                self.h.ok(self.proc, "admin", value)
                self.expected[topic] = after
            except Exception as e:  # noqa: BLE001 - KafkaException, or a timeout
                self.h.info(self.proc, "admin", {**value, "error": str(e)})
                # The outcome is unknown: the end check skips this topic.
                self.expected.pop(topic, None)
                self.expected[f"?{topic}"] = None
            self.ops += 1
