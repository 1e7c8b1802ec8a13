"""ElectLeaders (KIP-460) through confluent-kafka's AdminClient.elect_leaders
(librdkafka's rd_kafka_ElectLeaders, which sends the request to the controller).

On one node every partition's only replica already leads: ELECTION_NOT_NEEDED. On three
nodes with `auto.leader.rebalance.enable=false`, a broker killed with SIGKILL and restarted
rejoins every ISR but leads nothing until a PREFERRED election gives its preferred
partitions back; a second election answers ELECTION_NOT_NEEDED.
"""

import time

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30


def wait_for(what, cond, timeout_s=TIMEOUT_S, poll_s=0.2):
    """Polls `cond` (which returns a truthy value when done) for at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
            if last:
                return last
        except Exception as e:  # a node down or electing: poll again
            last = e
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last: {last!r}")


def code(err) -> int:
    """A per-partition outcome's code: None is success; the value is a KafkaError (the
    docstring says KafkaException, which wraps one)."""
    if err is None:
        return 0
    return err.code() if isinstance(err, KafkaError) else err.args[0].code()


def codes(result: dict) -> dict:
    """elect_leaders' result as {(topic, partition): error code}, 0 for success."""
    return {(tp.topic, tp.partition): code(err) for tp, err in result.items()}


def create(admin: AdminClient, topic: str, partitions: int, rf: int) -> None:
    fs = admin.create_topics([NewTopic(topic, partitions, rf)], request_timeout=TIMEOUT_S)
    fs[topic].result(TIMEOUT_S)


def test_single_node_answers_election_not_needed(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, "single", 2, 1)
    wait_for("the topic's leaders", lambda: all(
        p.leader >= 0
        for p in admin.list_topics("single", timeout=5).topics["single"].partitions.values()
    ))
    tps = [TopicPartition("single", 0), TopicPartition("single", 1)]
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        got = codes(admin.elect_leaders(election, tps).result(TIMEOUT_S))
        assert got == {
            ("single", 0): KafkaError.ELECTION_NOT_NEEDED,
            ("single", 1): KafkaError.ELECTION_NOT_NEEDED,
        }
    # Every partition: those needing nothing are left out.
    assert codes(admin.elect_leaders(ElectionType.PREFERRED, None).result(TIMEOUT_S)) == {}
    got = codes(
        admin.elect_leaders(
            ElectionType.PREFERRED, [TopicPartition("nope", 0), TopicPartition("single", 7)]
        ).result(TIMEOUT_S)
    )
    assert got == {
        ("nope", 0): KafkaError.UNKNOWN_TOPIC_OR_PART,
        ("single", 7): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }


@pytest.mark.parametrize(
    "cluster",
    [
        {
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "leader.imbalance.check.interval.seconds": "1",
            "auto.leader.rebalance.enable": "false",
        }
    ],
    indirect=True,
)
def test_preferred_election_restores_a_restarted_broker(cluster):
    topic, partitions = "restore", 6
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    cluster.wait_registered()
    create(admin, topic, partitions, 3)

    def parts(a):
        return a.list_topics(topic, timeout=5).topics[topic].partitions

    wait_for("preferred leaders with full ISRs", lambda: len(parts(admin)) == partitions and all(
        p.leader == p.replicas[0] and len(p.isrs) == 3 for p in parts(admin).values()
    ))
    controller = admin.list_topics(timeout=5).controller_id
    victim = next(i for i in cluster.nodes if i != controller)
    preferred = sorted(i for i, p in parts(admin).items() if p.replicas[0] == victim)
    assert preferred, "the victim prefers some partition"

    cluster.node(victim).kill9()
    survivors = [i for i in cluster.nodes if i != victim]
    live = AdminClient({"bootstrap.servers": cluster.bootstrap(survivors)})
    wait_for("the victim's leaderships moved", lambda: all(
        p.leader not in (victim, -1) and victim not in p.isrs for p in parts(live).values()
    ))
    cluster.node(victim).restart()
    wait_for("the victim in every ISR", lambda: all(
        victim in p.isrs for p in parts(live).values()
    ), timeout_s=40)
    time.sleep(3)  # three imbalance checks: nothing moves on its own
    assert not [i for i, p in parts(live).items() if p.leader == victim]

    everything = [TopicPartition(topic, i) for i in range(partitions)]
    got = codes(live.elect_leaders(ElectionType.PREFERRED, everything).result(TIMEOUT_S))
    assert got == {
        (topic, i): (0 if i in preferred else KafkaError.ELECTION_NOT_NEEDED)
        for i in range(partitions)
    }
    wait_for("the preferred leaderships back", lambda: sorted(
        i for i, p in parts(live).items() if p.leader == victim
    ) == preferred, timeout_s=15)

    got = codes(live.elect_leaders(ElectionType.PREFERRED, everything).result(TIMEOUT_S))
    assert set(got.values()) == {KafkaError.ELECTION_NOT_NEEDED}
    assert codes(live.elect_leaders(ElectionType.PREFERRED, None).result(TIMEOUT_S)) == {}
