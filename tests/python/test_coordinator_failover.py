"""A group's coordinator killed with SIGKILL on a three-node cluster, for every group protocol
and client the project tests: librdkafka (confluent-kafka) with the classic protocol's eager
`range` assignor, with `cooperative-sticky`, and with KIP-848 (`group.protocol=consumer`);
kafka-python; aiokafka.

The run, for each: a producer writes numbered messages to a 6-partition topic (replication
factor 3) while a group of 3 consumers reads it, committing synchronously what it read after
every poll. The node that coordinates the group (the leader of its `__consumer_offsets`
partition, three replicas) is killed with SIGKILL, then restarted; in the second variant its
whole data directory is deleted before the restart.

The checks:
- the group commits again within the session timeout plus the election time (a node's
  broker session is 3 s here, the consumers' 6 s), and the pause is printed;
- no committed offset goes backwards: a monitor reads the group's committed offsets through
  the admin API all along, and each partition's only grows;
- every produced message is consumed;
- a message is consumed twice only at or past the partition's committed offset at the time
  it moved (the window after the last commit), and duplicates are counted and printed.
"""

import asyncio
import shutil
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "failover"
PARTITIONS = 6
GROUP = "failover-group"
SESSION_MS = 6000
# The longest pause allowed between the kill and the group's next commit: the consumers'
# session timeout (a member on the dead node's side has to notice) plus the broker's session
# (3 s) and an election, with room for a loaded machine.
MAX_PAUSE_S = 25.0

SETTINGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": "500",
}


class Member:
    """One consumer in a thread of its own: what it consumed as (partition, offset, time),
    its successful commits as (partition, offset, time), and when its assignment changed."""

    def __init__(self, flavour: str, bootstrap: str, name: str):
        self.flavour = flavour
        self.bootstrap = bootstrap
        self.name = name
        self.lock = threading.Lock()
        self.consumed: list[tuple[int, int, float]] = []
        self.commits: list[tuple[int, int, float]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        target = self._run_aiokafka_thread if flavour == "aiokafka" else self._run
        self.thread = threading.Thread(target=target, name=name, daemon=True)
        self.thread.start()

    def _record(self, partition: int, offset: int) -> None:
        with self.lock:
            self.consumed.append((partition, offset, time.monotonic()))

    def _committed(self, offsets: dict[int, int]) -> None:
        now = time.monotonic()
        with self.lock:
            self.commits.extend((p, o, now) for p, o in offsets.items())

    def _error(self, e: object) -> None:
        with self.lock:
            self.errors.append(repr(e))

    def _python_client_settings(self) -> dict:
        """The consumer settings kafka-python and aiokafka take, under the same names."""
        return dict(
            bootstrap_servers=self.bootstrap,
            group_id=GROUP,
            client_id=self.name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            request_timeout_ms=30_000,
            retry_backoff_ms=100,
        )

    def _polled(self, polled: dict, pos: dict[int, int], owned: set[int]) -> dict[int, int]:
        """Records a kafka-python or aiokafka poll ({TopicPartition: records}); returns the
        positions of the partitions still owned, to commit (nothing after an empty poll)."""
        for tp, records in polled.items():
            for r in records:
                self._record(tp.partition, r.offset)
                pos[tp.partition] = r.offset + 1
        if not polled:
            return {}
        return {p: o for p, o in pos.items() if p in owned}

    def _run(self) -> None:
        if self.flavour == "kafka-python":
            self._run_kafka_python()
        else:
            self._run_librdkafka()

    def _run_librdkafka(self) -> None:
        cfg = {
            "bootstrap.servers": self.bootstrap,
            "group.id": GROUP,
            "client.id": self.name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # Connection refusals from the killed node are expected; keep stderr readable.
            "log_level": 2,
        }
        if self.flavour == "kip848":
            cfg["group.protocol"] = "consumer"
        else:
            cfg["session.timeout.ms"] = SESSION_MS
            cfg["heartbeat.interval.ms"] = 500
            cfg["partition.assignment.strategy"] = (
                "cooperative-sticky" if self.flavour == "cooperative-sticky" else "range"
            )
        c = Consumer(cfg)
        c.subscribe([TOPIC])
        pos: dict[int, int] = {}
        try:
            while not self.stop.is_set():
                msgs = c.consume(num_messages=500, timeout=0.2)
                for m in msgs:
                    if m.error():
                        self._error(m.error())
                        continue
                    self._record(m.partition(), m.offset())
                    pos[m.partition()] = m.offset() + 1
                owned = {tp.partition for tp in c.assignment()}
                to_commit = {p: o for p, o in pos.items() if p in owned}
                if msgs and to_commit:
                    try:
                        res = c.commit(
                            offsets=[TopicPartition(TOPIC, p, o) for p, o in to_commit.items()],
                            asynchronous=False,
                        )
                        ok = {tp.partition: tp.offset for tp in res or [] if tp.error is None}
                        self._committed(ok)
                    except KafkaException as e:
                        self._error(e)
        finally:
            c.close()

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTopicPartition
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        c = KafkaConsumer(**self._python_client_settings())
        c.subscribe([TOPIC])
        pos: dict[int, int] = {}
        try:
            while not self.stop.is_set():
                try:
                    polled = c.poll(timeout_ms=200)
                except KafkaError as e:
                    self._error(e)
                    continue
                to_commit = self._polled(polled, pos, {tp.partition for tp in c.assignment()})
                if to_commit:
                    try:
                        c.commit(
                            {
                                KTopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1)
                                for p, o in to_commit.items()
                            }
                        )
                        self._committed(to_commit)
                    except KafkaError as e:
                        self._error(e)
        finally:
            c.close(autocommit=False)

    def _run_aiokafka_thread(self) -> None:
        asyncio.run(self._run_aiokafka())

    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATopicPartition
        from aiokafka.errors import KafkaError

        c = AIOKafkaConsumer(**self._python_client_settings())
        c.subscribe([TOPIC])
        await c.start()
        pos: dict[int, int] = {}
        try:
            while not self.stop.is_set():
                try:
                    polled = await c.getmany(timeout_ms=200)
                except KafkaError as e:
                    self._error(e)
                    continue
                to_commit = self._polled(polled, pos, {tp.partition for tp in c.assignment()})
                if to_commit:
                    try:
                        await c.commit({ATopicPartition(TOPIC, p): o for p, o in to_commit.items()})
                        self._committed(to_commit)
                    except KafkaError as e:
                        self._error(e)
        finally:
            await c.stop()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), f"{self.name} did not close within 30 s"


class Writer:
    """Produces to every partition in turn, acks=all and idempotent, until stopped; keeps
    the (partition, offset) of every delivered message."""

    def __init__(self, bootstrap: str):
        self.delivered: set[tuple[int, int]] = set()
        self.failed = 0
        self.stop = threading.Event()
        self.p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "log_level": 2,
            }
        )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _done(self, err, msg) -> None:
        if err is None:
            self.delivered.add((msg.partition(), msg.offset()))
        else:
            self.failed += 1

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            for p in range(PARTITIONS):
                self.p.produce(TOPIC, f"m-{n}".encode(), partition=p, on_delivery=self._done)
                n += 1
            self.p.poll(0)
            time.sleep(0.02)
        self.p.flush(60)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(90)


class Monitor:
    """Reads the group's committed offsets every 200 ms with OffsetFetch (a consumer of the
    group that does not join it, as an operator's tool reads them), through whichever node
    coordinates; notes any that moved back."""

    def __init__(self, bootstrap: str):
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "log_level": 2,
            }
        )
        self.last: dict[int, int] = {}
        self.history: list[tuple[float, dict[int, int]]] = []
        self.backwards: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def read(self) -> dict[int, int] | None:
        try:
            tps = self.consumer.committed(
                [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=5
            )
        except KafkaException:
            return None  # unavailable while the coordinator moves
        return {tp.partition: tp.offset for tp in tps if tp.error is None and tp.offset >= 0}

    def _run(self) -> None:
        while not self.stop.is_set():
            now = self.read()
            if now is not None:
                t = time.monotonic()
                for p, o in now.items():
                    if o < self.last.get(p, -1):
                        self.backwards.append(f"partition {p}: {self.last[p]} -> {o}")
                    self.last[p] = max(o, self.last.get(p, -1))
                self.history.append((t, now))
            self.stop.wait(0.2)

    def committed_at(self, t: float) -> dict[int, int]:
        """The last committed offsets read at or before `t`."""
        out: dict[int, int] = {}
        for ht, offsets in self.history:
            if ht > t:
                break
            out = offsets
        return out

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def coordinator_of(cluster, alive: list[int]) -> int:
    """The node that coordinates the group, as FindCoordinator through the live nodes names
    it (kafka-python's admin client; librdkafka's admin API asserts when a broker it knows
    is down)."""
    from kafka import KafkaAdminClient

    deadline = time.monotonic() + 60
    last = None
    while True:
        try:
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(alive))
            try:
                last = admin._find_coordinator_ids([GROUP])[GROUP]
            finally:
                admin.close()
            if last in alive:
                return last
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        assert time.monotonic() < deadline, f"no live coordinator for the group in 60 s: {last}"
        time.sleep(0.2)


def last_commit(members: list[Member]) -> float:
    return max((t for m in members for (_, _, t) in m.commits), default=0.0)


def run_failover(cluster, flavour: str, wipe: bool) -> None:
    cluster.wait_registered()
    bootstrap = cluster.bootstrap()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    del admin
    writer = Writer(bootstrap)
    members = [Member(flavour, bootstrap, f"{flavour}-{i}") for i in range(3)]
    monitor = Monitor(bootstrap)
    try:
        # Running: every member commits.
        deadline = time.monotonic() + 60
        while not all(m.commits for m in members):
            assert time.monotonic() < deadline, (
                f"not every member committed in 60 s: {[m.errors[-3:] for m in members]}"
            )
            time.sleep(0.2)
        coordinator = coordinator_of(cluster, [1, 2, 3])
        time.sleep(1)
        node = cluster.node(coordinator)
        killed_at = time.monotonic()
        node.kill9()
            # The group commits again, through another node.
        deadline = killed_at + MAX_PAUSE_S
        while last_commit(members) <= killed_at:
            assert time.monotonic() < deadline, (
                f"{flavour}: no commit within {MAX_PAUSE_S} s of the coordinator's kill: "
                f"{[m.errors[-3:] for m in members]}"
            )
            time.sleep(0.05)
        pause = min(t for m in members for (_, _, t) in m.commits if t > killed_at) - killed_at
        alive = [i for i in (1, 2, 3) if i != coordinator]
        successor = coordinator_of(cluster, alive)
        print(
            f"measured: {flavour}{' (data wiped)' if wipe else ''}: coordinator {coordinator} "
            f"killed; the group committed again {pause:.2f} s later, through node {successor}"
        )
        time.sleep(2)
        if wipe:
            shutil.rmtree(node.data_dir)
            node.data_dir.mkdir()
        node.restart()
        time.sleep(5)
    finally:
        writer.close()
        # Let the group read to the end, then stop.
        end = time.monotonic() + 60
        while time.monotonic() < end:
            consumed = {(p, o) for m in members for (p, o, _) in m.consumed}
            if writer.delivered <= consumed:
                break
            time.sleep(0.5)
        for m in members:
            m.close()
        monitor.close()

    assert writer.failed == 0, f"{writer.failed} messages were not delivered"
    consumed = {(p, o) for m in members for (p, o, _) in m.consumed}
    missing = writer.delivered - consumed
    assert not missing, f"{len(missing)} produced messages never consumed, e.g. {sorted(missing)[:5]}"
    assert not monitor.backwards, f"committed offsets moved back: {monitor.backwards}"
    # A message is consumed again only by a member that took its partition over at the
    # group's committed offset, which was then at or below it: committed offsets only grow,
    # and the monitor's reading before that second read is a lower bound of it.
    seen: dict[tuple[int, int], float] = {}
    duplicates = 0
    early = []
    for p, o, t in sorted((r for m in members for r in m.consumed), key=lambda r: r[2]):
        if (p, o) not in seen:
            seen[(p, o)] = t
            continue
        duplicates += 1
        if o < monitor.committed_at(t).get(p, 0):
            early.append((p, o))
    assert not early, f"messages consumed again below the group's committed offset: {early[:5]}"
    print(
        f"measured: {flavour}{' (data wiped)' if wipe else ''}: {len(writer.delivered)} "
        f"messages produced and consumed, {duplicates} consumed again"
    )


FLAVOURS = ["classic-eager", "cooperative-sticky", "kip848", "kafka-python", "aiokafka"]


@pytest.mark.parametrize("cluster", [SETTINGS], indirect=True)
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_coordinator_killed(cluster, flavour):
    run_failover(cluster, flavour, wipe=False)


@pytest.mark.parametrize("cluster", [SETTINGS], indirect=True)
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_coordinator_killed_and_its_data_deleted(cluster, flavour):
    run_failover(cluster, flavour, wipe=True)
