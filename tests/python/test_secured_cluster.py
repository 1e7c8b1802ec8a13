"""Three combined nodes with SASL_SSL everywhere: clients, the inter-broker listener and the
controller listener. The controllers log in to each other with PLAIN over mutual TLS (the
controller listener requires a client certificate), the brokers replicate with
SCRAM-SHA-512 using a credential the cluster stores itself, and the nodes' RPCs need
CLUSTER_ACTION (the nodes' principals are super users). Replication, a controller killed
with SIGKILL, and the node's return all run over it, with confluent-kafka as the client.
"""

import socket
import ssl
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from conftest import Broker, free_port, make_certs
from test_security import authenticate, closed, handshake, read_frame

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
TOPIC = "secured"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_AUTHORIZATION_FAILED = 29


def tls_socket(certs: Path, port: int, client_cert: bool = False) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if client_cert:
        ctx.load_cert_chain(str(certs / "client.pem"), str(certs / "client.key"))
    return ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname="127.0.0.1"
    )


def follower_fetch_raw(s, topic: str) -> int:
    """Fetch v4 from offset 0 of partition 0 as replica 1; the partition's error code."""
    body = (
        struct.pack(">iiiib", 1, 0, 0, 1 << 20, 0)
        + struct.pack(">i", 1)
        + struct.pack(">h", len(topic)) + topic.encode()
        + struct.pack(">i", 1)
        + struct.pack(">iqi", 0, 0, 1 << 20)
    )
    header = struct.pack(">hhih", 1, 4, 12, 4) + b"test"
    s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    r = read_frame(s)
    assert r is not None
    (name_len,) = struct.unpack(">h", r[12:14])
    at = 14 + name_len + 4 + 4
    (code,) = struct.unpack(">h", r[at : at + 2])
    return code


def create_topic_raw(s, name: str) -> int:
    """CreateTopics v4 for one topic (1 partition, replication factor 3); its error code."""
    body = (
        struct.pack(">i", 1)
        + struct.pack(">h", len(name)) + name.encode()
        + struct.pack(">ihii", 1, 3, 0, 0)
        + struct.pack(">ib", 10000, 0)
    )
    header = struct.pack(">hhih", 19, 4, 11, 4) + b"test"
    s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    r = read_frame(s)
    assert r is not None
    (name_len,) = struct.unpack(">h", r[12:14])
    (code,) = struct.unpack(">h", r[14 + name_len : 16 + name_len])
    return code


class SecuredCluster:
    def __init__(self, tmp: Path):
        self.certs = make_certs(tmp / "certs")
        ports = [(free_port(), free_port()) for _ in range(3)]
        self.ports = {i + 1: p for i, (p, _) in enumerate(ports)}
        self.controller_ports = {i + 1: c for i, (_, c) in enumerate(ports)}
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
        self.nodes: dict[int, Broker] = {}
        try:
            for node_id, port in self.ports.items():
                d = tmp / f"node{node_id}"
                d.mkdir()
                self.nodes[node_id] = Broker(
                    d,
                    {
                        "process.roles": "broker,controller",
                        "node.id": str(node_id),
                        "cluster.id": CLUSTER_ID,
                        "listeners": f"SASL_SSL://127.0.0.1:{port},"
                        f"CONTROLLER://127.0.0.1:{self.controller_ports[node_id]}",
                        "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
                        "controller.listener.names": "CONTROLLER",
                        "controller.quorum.voters": voters,
                        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
                        "inter.broker.listener.name": "SASL_SSL",
                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                        "sasl.mechanism.controller.protocol": "PLAIN",
                        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                        "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN} '
                        'user_admin="admin-secret" user_alice="alice-secret";',
                        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f'{SCRAM} username="broker" password="broker-secret";',
                        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                        "listener.name.controller.plain.sasl.jaas.config": f'{PLAIN} username="controller" '
                        'password="controller-secret" user_controller="controller-secret" '
                        'user_alice="alice-secret";',
                        "listener.name.controller.ssl.client.auth": "required",
                        "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": str(self.certs / "server-keystore.pem"),
                        "ssl.truststore.type": "PEM",
                        "ssl.truststore.location": str(self.certs / "ca.pem"),
                        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                        "super.users": "User:admin;User:broker;User:controller",
                        "broker.session.timeout.ms": "3000",
                        "broker.heartbeat.interval.ms": "500",
                    },
                    port=port,
                )
        except BaseException:
            self.kill()
            raise

    def conf(self, ids: list[int] | None = None, **extra) -> dict:
        return {
            "bootstrap.servers": ",".join(
                f"127.0.0.1:{p}" for i, p in self.ports.items() if ids is None or i in ids
            ),
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
            "ssl.ca.location": str(self.certs / "ca.pem"),
            **extra,
        }

    def kill(self) -> None:
        for b in self.nodes.values():
            b.kill()

    def tails(self) -> str:
        return "\n".join(f"==== node {i} ====\n{b.tail()}" for i, b in self.nodes.items())


@pytest.fixture
def secured(request, tmp_path):
    c = SecuredCluster(tmp_path)
    yield c
    c.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(c.tails())


def wait_for(what: str, check, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            got = check()
            if got:
                return got
            last = got
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        time.sleep(0.3)
    raise AssertionError(f"{what} within {timeout_s} s: {last!r}")


def partitions(admin: AdminClient):
    md = admin.list_topics(timeout=10)
    return md, md.topics[TOPIC].partitions.values() if TOPIC in md.topics else []


def produce(conf: dict, values: range) -> None:
    errors = []
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce(TOPIC, str(v).encode(), on_delivery=lambda e, _: e and errors.append(e))
        p.poll(0)
    assert p.flush(60) == 0
    assert errors == [], errors[:3]


def consume_all(conf: dict, expected: int) -> list[int]:
    c = Consumer({**conf, "group.id": "reader", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, i, 0) for i in range(3)])
    got: list[int] = []
    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            got.append(int(m.value()))
    c.close()
    return got


def test_replication_and_failover_over_sasl_ssl_between_nodes(secured):
    admin = AdminClient(secured.conf())
    wait_for(
        "three brokers and a controller",
        lambda: (md := admin.list_topics(timeout=5)) and len(md.brokers) == 3 and md.controller_id > 0,
    )
    # The brokers' inter-broker login is a SCRAM credential the cluster stores.
    upsert = UserScramCredentialUpsertion(
        "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"broker-secret"
    )
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result()
    for f in admin.create_topics(
        [NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})]
    ).values():
        f.result()
    # Every follower fetches: the ISR fills over SCRAM-SHA-512 on TLS.
    wait_for(
        "full ISRs",
        lambda: (ps := list(partitions(admin)[1])) and all(len(p.isrs) == 3 for p in ps),
    )
    produce(secured.conf(), range(0, 1000))

    # SIGKILL the active controller: the others elect a leader over the controller
    # listener (PLAIN on mutual TLS), and acks=all writes go on.
    md = admin.list_topics(timeout=10)
    victim = md.controller_id
    secured.nodes[victim].kill9()
    alive = [i for i in secured.ports if i != victim]
    admin = AdminClient(secured.conf(alive))
    wait_for(
        "a new controller",
        lambda: (m := admin.list_topics(timeout=5)).controller_id in alive,
    )
    produce(secured.conf(alive), range(1000, 2000))
    got = consume_all(secured.conf(alive), 2000)
    assert sorted(got) == list(range(2000))

    # The node comes back, authenticates to the others, and catches up.
    secured.nodes[victim].restart()
    wait_for(
        "the restarted node back in every ISR",
        lambda: all(len(p.isrs) == 3 for p in partitions(admin)[1]),
    )

    # A write forwarded to the controller is authorized as the client that sent it, not as
    # the forwarding node (a super user): alice, who has no grant, is refused through a
    # node that does not lead; admin is not.
    leader = admin.list_topics(timeout=10).controller_id
    follower = next(i for i in secured.ports if i != leader)
    for user, topic, expected in (
        ("alice", "alice-topic", TOPIC_AUTHORIZATION_FAILED),
        ("admin", "admin-topic", 0),
    ):
        with tls_socket(secured.certs, secured.ports[follower]) as s:
            assert handshake(s, "PLAIN")[0] == 0
            assert authenticate(s, f"\0{user}\0{user}-secret".encode())[0] == 0
            assert create_topic_raw(s, topic) == expected, user
    assert "alice-topic" not in admin.list_topics(timeout=10).topics
    # A follower's fetch needs CLUSTER_ACTION: alice posing as replica 1 reads nothing.
    with tls_socket(secured.certs, secured.ports[follower]) as s:
        assert handshake(s, "PLAIN")[0] == 0
        assert authenticate(s, b"\0alice\0alice-secret")[0] == 0
        assert follower_fetch_raw(s, TOPIC) == TOPIC_AUTHORIZATION_FAILED

    # What the controller listener refuses.
    cport = secured.controller_ports[alive[0]]
    with socket.create_connection(("127.0.0.1", cport), timeout=5) as s:
        # Plaintext on a TLS port.
        s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, 0))
        assert closed(s)
    ctx = ssl.create_default_context(cafile=str(secured.certs / "ca.pem"))
    with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
        # No client certificate: ssl.client.auth=required.
        with ctx.wrap_socket(
            socket.create_connection(("127.0.0.1", cport), timeout=5),
            server_hostname="127.0.0.1",
        ) as s:
            s.sendall(b"\x00")
            assert s.recv(1) != b""
    ctx.load_cert_chain(str(secured.certs / "client.pem"), str(secured.certs / "client.key"))
    with ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", cport), timeout=5), server_hostname="127.0.0.1"
    ) as s:
        assert handshake(s, "PLAIN")[0] == 0
        assert authenticate(s, b"\0alice\0wrong")[0] == 58
        assert closed(s)
    with ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", cport), timeout=5), server_hostname="127.0.0.1"
    ) as s:
        assert handshake(s, "PLAIN")[0] == 0
        assert authenticate(s, b"\0alice\0alice-secret")[0] == 0
        # DescribeQuorum v0 (flexible): alice is authenticated but has no grant on the
        # cluster.
        topic = b"__cluster_metadata"
        body = (
            b"\x02" + bytes([len(topic) + 1]) + topic + b"\x02" + struct.pack(">i", 0)
            + b"\x00\x00\x00"
        )
        header = struct.pack(">hhih", 55, 0, 9, 4) + b"test" + b"\x00"
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        r = read_frame(s)
        assert r is not None
        corr, tags, err = struct.unpack(">ibh", r[:7])
        assert (corr, tags, err) == (9, 0, CLUSTER_AUTHORIZATION_FAILED)
