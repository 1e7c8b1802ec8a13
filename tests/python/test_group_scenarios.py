"""Consumer-group scenarios (the classic protocol) with kafka-python and with aiokafka against the
real broker: the split of partitions, failover of a SIGKILLed member after its session timeout, a
consumer that stops polling, auto_offset_reset, committed offsets across a broker crash, and
static membership (KIP-345).

The members and `check_partition_history` live in group_members.py.
"""

import time

import pytest
from group_members import (
    HEARTBEAT_MS,
    SESSION_MS,
    ChildMember,
    Member,
    MemberLog,
    check_partition_history,
)
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

CLIENTS = ["kafka-python", "aiokafka"]
PHASE_S = 60  # every wait for one phase of a scenario is bounded by this
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "100",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture
def members():
    """Collects the test's members and closes them (LeaveGroup) before the broker goes."""
    started: list[MemberLog] = []
    yield started
    for m in started:
        if isinstance(m, Member):
            m.begin_close()  # all at once: each close may wait on a LeaveGroup
    for m in started:
        try:
            m.close()
        except Exception:
            pass
        if isinstance(m, ChildMember) and m.error is None and m.proc.returncode not in (None, -9):
            print(f"==== {m.name} stderr ====\n{m.stderr_tail()}")


# ---------------------------------------------------------------------------------------------
# Helpers


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=30_000)
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> dict[int, int]:
    """Appends per_partition messages to each partition; returns each partition's log end."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=30_000)
    try:
        futures = [
            producer.send(topic, value=f"p{p}-{i}".encode(), partition=p)
            for i in range(per_partition)
            for p in range(partitions)
        ]
        producer.flush(timeout=PHASE_S)
        metas = [f.get(timeout=PHASE_S) for f in futures]
    finally:
        producer.close(timeout=10)
    return {p: max(m.offset for m in metas if m.partition == p) + 1 for p in range(partitions)}


def wait_until(cond, what, members=(), timeout: float = PHASE_S) -> None:
    """Polls cond() until true; fails with what() after timeout, or at once if a member broke."""
    deadline = time.monotonic() + timeout
    while not cond():
        for m in members:
            m.check()
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting: {what()}"
        time.sleep(0.05)
    for m in members:
        m.check()


def assignments(ms) -> list[list[int]]:
    return [sorted(m.assignment()) for m in ms]


def is_split(ms, partitions: int) -> bool:
    """Disjoint, complete, and even."""
    parts = [m.assignment() for m in ms]
    return (
        all(len(a) == partitions // len(ms) for a in parts)
        and len(frozenset().union(*parts)) == partitions
    )


def consumed_through(ms, log_end: dict[int, int]) -> bool:
    """Every offset below each partition's log end has been consumed by one of ms."""
    for p, end in log_end.items():
        seen = set()
        for m in ms:
            seen.update(m.offsets(p))
        if not seen >= set(range(end)):
            return False
    return True


def progress(ms, log_end) -> str:
    return (
        f"assignments {dict((m.name, sorted(m.assignment())) for m in ms)}, "
        f"consumed {dict((m.name, len(m.records)) for m in ms)}, log end {log_end}"
    )


# ---------------------------------------------------------------------------------------------
# 1. Split


@pytest.mark.parametrize("broker", [GROUP_OVERRIDES], indirect=True)
@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_split_six_partitions_and_each_consumes_its_own(broker, members, client):
    topic, group, partitions = "split", f"split-{client}", 6
    create_topic(broker.bootstrap, topic, partitions)
    ms = [Member(client, broker.bootstrap, topic, group, f"{client}-{i}") for i in range(3)]
    members += ms
    wait_until(lambda: is_split(ms, partitions), lambda: f"split: {assignments(ms)}", ms)
    settled = time.monotonic()

    # Produced only now, so that every message is consumed under this one generation.
    log_end = produce(broker.bootstrap, topic, partitions, 30)
    wait_until(lambda: consumed_through(ms, log_end), lambda: progress(ms, log_end), ms)
    time.sleep(0.5)  # let any duplicate arrive

    for m in ms:
        owned = m.assignment()
        assert len(owned) == 2
        assert {r.partition for r in m.records} == owned, f"{m.name} consumed outside {owned}"
        assert m.events_after(settled) == [], f"{m.name} saw a rebalance after the split"
    all_records = [(r.partition, r.offset) for m in ms for r in m.records]
    assert len(all_records) == sum(log_end.values()), "a message was consumed twice"
    assert set(all_records) == {(p, o) for p, end in log_end.items() for o in range(end)}
    generations = {m.events[-1].generation for m in ms}
    assert len(generations) == 1, f"members hold different generations {generations}"


# ---------------------------------------------------------------------------------------------
# 2. Failover of a member killed by SIGKILL

FAILOVER_SESSION_MS = 6000


@pytest.mark.parametrize("broker", [GROUP_OVERRIDES], indirect=True)
@pytest.mark.parametrize("client", CLIENTS)
def test_killed_member_partitions_move_after_session_timeout(broker, members, client, tmp_path):
    topic, group, partitions = "failover", f"failover-{client}", 6
    create_topic(broker.bootstrap, topic, partitions)
    # The child commits synchronously after each poll, but never past offset 25: it dies with
    # 25..39 consumed and uncommitted, which the survivors must replay (and nothing else).
    first, cap = 40, 25
    common = dict(bootstrap=broker.bootstrap, topic=topic, group=group)
    child = ChildMember(
        client,
        f"{client}-child",
        tmp_path / "child.stderr.log",
        session_timeout_ms=FAILOVER_SESSION_MS,
        commit=True,
        commit_below={p: cap for p in range(partitions)},
        **common,
    )
    members.append(child)
    # The child first owns everything, so that it is the member that joined first.
    wait_until(lambda: len(child.assignment()) == partitions, lambda: "child assignment", [child])
    survivors = [
        Member(client, name=f"{client}-{i}", commit=True, session_timeout_ms=SESSION_MS, **common)
        for i in range(2)
    ]
    members += survivors
    everyone = [child, *survivors]
    wait_until(
        lambda: is_split(everyone, partitions), lambda: f"split {assignments(everyone)}", everyone
    )
    theirs = child.assignment()

    log_end = produce(broker.bootstrap, topic, partitions, first)
    wait_until(
        lambda: consumed_through(everyone, log_end)
        and all(child.committed(p) == cap for p in theirs),
        lambda: progress(everyone, log_end) + f", child commits {child.commits[-2:]}",
        everyone,
    )
    assert sorted(child.offsets(p)[-1] for p in theirs) == [first - 1] * 2

    t_kill = child.kill9()
    log_end = produce(broker.bootstrap, topic, partitions, 10)  # while the child is dead
    wait_until(
        lambda: is_split(survivors, partitions) and consumed_through(everyone, log_end),
        lambda: progress(everyone, log_end),
        survivors,
    )

    # The survivors heard of a rebalance only when the broker expired the child's session: its
    # last heartbeat was at most a heartbeat interval before the kill.
    revoked = [e.t for m in survivors for e in m.events_after(t_kill) if e.kind == "revoked"]
    assert revoked, "the survivors took over without a revocation"
    noticed = min(revoked) - t_kill
    print(f"{client}: rebalance began {noticed:.2f}s after the SIGKILL")
    assert noticed >= (FAILOVER_SESSION_MS - 2 * HEARTBEAT_MS) / 1000 - 0.5, (
        f"rebalance began {noticed:.2f}s after the SIGKILL: before the session timeout "
        f"({FAILOVER_SESSION_MS} ms) could expire"
    )
    assert noticed < FAILOVER_SESSION_MS / 1000 + 20, f"rebalance began only after {noticed:.1f}s"

    for p in range(partitions):
        check_partition_history(p, everyone, log_end[p])
    for p in theirs:
        # Replayed: exactly what the child consumed past its last commit.
        taken_over = {o for m in survivors for o in m.offsets(p)}
        assert taken_over & set(child.offsets(p)) == set(range(cap, first)), p


# ---------------------------------------------------------------------------------------------
# 3. A consumer that stops polling

SLOW_POLL_MS = 3000
SLOW_SESSION_MS = 20_000


@pytest.mark.parametrize("broker", [GROUP_OVERRIDES], indirect=True)
@pytest.mark.parametrize("client", CLIENTS)
def test_consumer_that_stops_polling_loses_its_partitions(broker, members, client):
    """Past max_poll_interval_ms without a poll, each client leaves the group *itself*: with
    its heartbeats still flowing the broker would not notice (it enforces the interval only as
    the rebalance timeout, when a rebalance waits for the member to rejoin).

    - kafka-python: the heartbeat thread sees `poll_timeout_expired()` and calls
      `maybe_leave_group()` (kafka/coordinator/base.py, HeartbeatThread._run_once).
    - aiokafka: the heartbeat task compares `fetcher_idle_time` (time since the last getmany
      returned) with max_poll_interval_ms and calls `_maybe_leave_group()`
      (aiokafka/consumer/group_coordinator.py, _heartbeat_routine); it also will not rejoin
      until getmany is called again.

    Both send LeaveGroup, so the partitions move well before the (long) session timeout.
    """
    topic, group, partitions = "slow", f"slow-{client}", 4
    create_topic(broker.bootstrap, topic, partitions)
    common = dict(bootstrap=broker.bootstrap, topic=topic, group=group, commit=True)
    steady = Member(client, name=f"{client}-steady", session_timeout_ms=SLOW_SESSION_MS, **common)
    members.append(steady)
    wait_until(lambda: len(steady.assignment()) == partitions, lambda: "first assignment", [steady])
    slow = Member(
        client,
        name=f"{client}-slow",
        session_timeout_ms=SLOW_SESSION_MS,
        max_poll_interval_ms=SLOW_POLL_MS,
        **common,
    )
    members.append(slow)
    both = [steady, slow]
    wait_until(lambda: is_split(both, partitions), lambda: f"split {assignments(both)}", both)
    theirs = slow.assignment()
    log_end = produce(broker.bootstrap, topic, partitions, 20)
    wait_until(
        lambda: consumed_through(both, log_end) and all(slow.committed(p) == 20 for p in theirs),
        lambda: progress(both, log_end),
        both,
    )

    slow.polling.clear()
    time.sleep(0.3)  # let a poll in progress return
    last_poll = slow.last_poll_end
    log_end = produce(broker.bootstrap, topic, partitions, 10)
    wait_until(
        lambda: len(steady.assignment()) == partitions and consumed_through(both, log_end),
        lambda: progress(both, log_end),
        both,
    )
    taken = [e.t for e in steady.events_after(last_poll) if e.kind == "assigned"][-1] - last_poll
    print(f"{client}: partitions moved {taken:.2f}s after the last poll")
    assert taken >= SLOW_POLL_MS / 1000 - 0.5, (
        f"partitions moved {taken:.2f}s after the last poll, before max_poll_interval_ms"
    )
    assert taken < SLOW_SESSION_MS / 1000 - 2, (
        f"partitions moved only {taken:.2f}s after the last poll: that is the session timeout, "
        "not the poll interval"
    )
    for p in range(partitions):
        check_partition_history(p, both, log_end[p])


# ---------------------------------------------------------------------------------------------
# 4. auto_offset_reset


@pytest.mark.parametrize("broker", [GROUP_OVERRIDES], indirect=True)
@pytest.mark.parametrize("client", CLIENTS)
def test_auto_offset_reset_latest_and_earliest(broker, members, client):
    topic, partitions = "reset", 2
    create_topic(broker.bootstrap, topic, partitions)
    old_end = produce(broker.bootstrap, topic, partitions, 15)
    common = dict(bootstrap=broker.bootstrap, topic=topic, record_positions=True)
    latest = Member(
        client, group=f"latest-{client}", name="latest", auto_offset_reset="latest", **common
    )
    earliest = Member(
        client, group=f"earliest-{client}", name="earliest", auto_offset_reset="earliest", **common
    )
    members += [latest, earliest]
    both = [latest, earliest]
    wait_until(
        lambda: all(m.positions is not None and len(m.positions) == partitions for m in both),
        lambda: f"positions {[m.positions for m in both]}, assignments {assignments(both)}",
        both,
    )
    assert latest.positions == old_end, "'latest' must start at the log end"

    log_end = produce(broker.bootstrap, topic, partitions, 10)
    wait_until(
        lambda: consumed_through([earliest], log_end)
        and all(set(latest.offsets(p)) >= set(range(old_end[p], log_end[p])) for p in log_end),
        lambda: progress(both, log_end),
        both,
    )
    time.sleep(0.5)  # let any stray record arrive
    for p in range(partitions):
        assert latest.offsets(p) == list(range(old_end[p], log_end[p])), p
        assert earliest.offsets(p) == list(range(log_end[p])), p


# ---------------------------------------------------------------------------------------------
# 5. Committed offsets survive a broker crash

CRASH_SESSION_MS = 4000


@pytest.mark.parametrize("broker", [GROUP_OVERRIDES], indirect=True)
@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_broker_kill9(broker, members, client, tmp_path):
    topic, group, partitions = "crash", f"crash-{client}", 3
    create_topic(broker.bootstrap, topic, partitions)
    log_end = produce(broker.bootstrap, topic, partitions, 30)
    caps = {0: 7, 1: 19, 2: 30}
    child = ChildMember(
        client,
        f"{client}-child",
        tmp_path / "child.stderr.log",
        bootstrap=broker.bootstrap,
        topic=topic,
        group=group,
        session_timeout_ms=CRASH_SESSION_MS,
        commit=True,
        commit_below=caps,
    )
    members.append(child)
    wait_until(
        lambda: consumed_through([child], log_end)
        and all(child.committed(p) == c for p, c in caps.items()),
        lambda: f"{progress([child], log_end)}, commits {child.commits[-3:]}",
        [child],
    )
    # The commits were acknowledged: crash the broker at once, and the member with it.
    broker.kill9()
    child.kill9()
    broker.restart()
    log_end = produce(broker.bootstrap, topic, partitions, 5)

    # The group still lists the dead member until its session (restarted with the broker)
    # expires; then the newcomer gets every partition and must resume at the commits.
    after = Member(client, broker.bootstrap, topic, group, f"{client}-after")
    members.append(after)
    wait_until(
        lambda: all(after.offsets(p) and after.offsets(p)[-1] == log_end[p] - 1 for p in caps),
        lambda: progress([after], log_end),
        [after],
    )
    time.sleep(0.5)  # let any duplicate arrive
    for p, cap in caps.items():
        assert after.offsets(p) == list(range(cap, log_end[p])), (
            f"partition {p}: resumed at {after.offsets(p)[:1]}, committed {cap}"
        )


# ---------------------------------------------------------------------------------------------
# 6. Static membership (KIP-345)

STATIC_SESSION_MS = 8000


@pytest.mark.parametrize("broker", [GROUP_OVERRIDES], indirect=True)
@pytest.mark.parametrize("restarting", ["follower", "leader"])
@pytest.mark.parametrize("client", CLIENTS)
def test_static_member_restart_gets_its_partitions_back_without_rebalance(
    broker, members, client, restarting
):
    """kafka-python 2.3.3 and aiokafka 0.13.0 both take group_instance_id; a static member's
    close sends no LeaveGroup (kafka-python: is_dynamic_member(); aiokafka:
    _maybe_leave_group), so the broker keeps its partitions for it for the session timeout.

    The member that joins first is the leader. Neither client sends JoinGroup v9 (KIP-814's
    skip_assignment), so a restarted leader must be answered with the old leader id, act as a
    follower and fetch its old assignment with SyncGroup."""
    topic, group, partitions = "static", f"static-{client}", 4
    create_topic(broker.bootstrap, topic, partitions)
    common = dict(
        bootstrap=broker.bootstrap,
        topic=topic,
        group=group,
        commit=True,
        session_timeout_ms=STATIC_SESSION_MS,
    )
    first = Member(client, name=f"{client}-first", instance_id="first", **common)
    members.append(first)
    wait_until(lambda: len(first.assignment()) == partitions, lambda: "first assignment", [first])
    second = Member(client, name=f"{client}-second", instance_id="second", **common)
    members.append(second)
    wait_until(
        lambda: is_split([first, second], partitions),
        lambda: f"split {assignments([first, second])}",
        [first, second],
    )
    log_end = produce(broker.bootstrap, topic, partitions, 20)
    wait_until(
        lambda: consumed_through([first, second], log_end)
        and all(m.committed(p) == 20 for m in (first, second) for p in m.assignment()),
        lambda: progress([first, second], log_end),
        [first, second],
    )
    restarts, stays = (first, second) if restarting == "leader" else (second, first)
    before = restarts.events[-1]
    stays_events = len(stays.events)
    assert stays.events[-1].generation == before.generation

    restarts.close()  # static: no LeaveGroup
    t_closed = time.monotonic()
    again = Member(
        client, name=f"{restarts.name}-again", instance_id=restarts.config["instance_id"], **common
    )
    members.append(again)
    wait_until(lambda: again.assignment(), lambda: "reassignment of the restarted member", [again])
    assert again.assignment() == before.partitions
    assert again.events[-1].generation == before.generation, "the group rebalanced"

    log_end = produce(broker.bootstrap, topic, partitions, 10)
    wait_until(
        lambda: consumed_through([stays, restarts, again], log_end),
        lambda: progress([stays, again], log_end),
        [stays, again],
    )
    # Had the broker kept the old member id, it would expire after the session timeout and
    # rebalance: wait that out before looking.
    time.sleep(max(0.0, t_closed + STATIC_SESSION_MS / 1000 + 1.5 - time.monotonic()))
    stays.check()
    again.check()
    assert len(stays.events) == stays_events, (
        f"the other member saw a rebalance: {stays.events[stays_events:]}"
    )
    # Both clients report an empty revocation before their first join.
    assert [(e.kind, e.partitions) for e in again.events if e.partitions] == [
        ("assigned", before.partitions)
    ], f"restarted member events {again.events}"
    for p in range(partitions):
        check_partition_history(p, [stays, restarts, again], log_end[p])
