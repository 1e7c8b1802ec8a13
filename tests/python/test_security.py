"""TLS and SASL (issue 23) against the real broker, with real clients: confluent-kafka
(librdkafka), kafka-python, aiokafka and kcat, and raw sockets for the refusals.

One broker per module, with four listeners (Kafka's keys, as a server.properties would set
them):

- PLAINTEXT, for nothing but the fixture's readiness probe (its clients are ANONYMOUS, who
  has no grants);
- SSL with `ssl.client.auth=required` and a mapping rule that turns the certificate's
  `CN=client,OU=test,O=Strata` into `User:client`;
- SASL_PLAINTEXT and SASL_SSL, with PLAIN users from the JAAS config and SCRAM users from
  AlterUserScramCredentials.

The StandardAuthorizer is on, with `User:admin` a super user, so every grant a test relies
on is one it made, and a principal without grants is refused.
"""

import asyncio
import os
import socket
import ssl
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from conftest import Broker, free_port, make_certs

TIMEOUT_S = 30
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SCRAM_PASSWORD = "scram-Secret-1"


class Secured:
    def __init__(self, tmp: Path):
        self.certs = make_certs(tmp / "certs")
        self.ports = {n: free_port() for n in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
        self.metrics_port = free_port()
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
        jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="admin-secret" {users};'
        )
        (tmp / "b").mkdir()
        self.broker = Broker(
            tmp / "b",
            {
                "listeners": listeners,
                "advertised.listeners": listeners,
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.certs / "server-keystore.pem"),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.certs / "ca.pem"),
                "listener.name.ssl.ssl.client.auth": "required",
                "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=.*$/$1/,DEFAULT",
                # SASL_SSL's server keys as a PKCS12 keystore: both formats are served.
                "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
                "listener.name.sasl_ssl.ssl.keystore.location": str(self.certs / "server.p12"),
                "listener.name.sasl_ssl.ssl.keystore.password": "strata-test",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
                "connections.max.reauth.ms": "3000",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
                "metrics.listener": f"http://127.0.0.1:{self.metrics_port}",
            },
            port=self.ports["PLAINTEXT"],
        )

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def tls(self, **extra) -> dict:
        return {"ssl.ca.location": str(self.certs / "ca.pem"), **extra}

    def sasl_ssl(self, user: str, password: str, mechanism: str = "PLAIN") -> dict:
        return self.tls(
            **{
                "bootstrap.servers": self.bootstrap("SASL_SSL"),
                "security.protocol": "SASL_SSL",
                "sasl.mechanisms": mechanism,
                "sasl.username": user,
                "sasl.password": password,
            }
        )

    def mtls(self, cert: str = "client") -> dict:
        return self.tls(
            **{
                "bootstrap.servers": self.bootstrap("SSL"),
                "security.protocol": "SSL",
                "ssl.certificate.location": str(self.certs / f"{cert}.pem"),
                "ssl.key.location": str(self.certs / f"{cert}.key"),
            }
        )

    def metric(self, name: str) -> float:
        import urllib.request

        body = urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ).read().decode()
        for line in body.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"{name} not in the metrics")


@pytest.fixture(scope="module")
def sec(tmp_path_factory):
    s = Secured(tmp_path_factory.mktemp("secured"))
    admin = AdminClient(s.sasl_ssl("admin", "admin-secret"))
    for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "carol", ScramCredentialInfo(mech, 4096), SCRAM_PASSWORD.encode()
                )
            ]
        )
        for f in futures.values():
            f.result(timeout=TIMEOUT_S)
    yield s
    s.broker.kill()


def grant(admin: AdminClient, principal: str, rtype, name: str, op) -> None:
    b = AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)
    for f in admin.create_acls([b]).values():
        f.result(timeout=TIMEOUT_S)


def topic_for(sec: Secured, principal: str, group: str | None = None) -> str:
    """A new topic that `principal` may write, read and describe (and `group` read)."""
    admin = AdminClient(sec.sasl_ssl("admin", "admin-secret"))
    name = f"sec-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(timeout=TIMEOUT_S)
    for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE):
        grant(admin, principal, ResourceType.TOPIC, name, op)
    if group:
        grant(admin, principal, ResourceType.GROUP, group, AclOperation.READ)
    return name


def round_trip(producer_conf: dict, consumer_conf: dict, topic: str, group: str, n: int = 50) -> list[bytes]:
    p = Producer(producer_conf)
    errors = []
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(TIMEOUT_S) == 0
    assert not errors, errors
    c = Consumer({**consumer_conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert not m.error(), m.error()
        got.append(m.value())
    c.close()
    return got


def test_plain_over_sasl_ssl_with_confluent_kafka(sec):
    group = f"g-{uuid.uuid4().hex[:6]}"
    topic = topic_for(sec, "User:alice", group)
    conf = sec.sasl_ssl("alice", "alice-secret")
    got = round_trip(conf, conf, topic, group)
    assert got == [f"v{i}".encode() for i in range(50)]
    # The records went out through TLS: with sendfile where the kernel holds the session
    # (kernel TLS, tests/ktls/), else read and encrypted in user space. The broker logs which
    # path each listener takes.
    kernel = sec.metric("strata_fetch_ktls_bytes_total")
    user = sec.metric("strata_fetch_tls_bytes_total")
    if "tls=kernel TLS" in sec.broker.stderr_path.read_text(errors="replace"):
        assert kernel > 0
    else:
        assert user > 0 and kernel == 0


def test_mtls_principal_comes_from_the_certificate(sec):
    # The mapping rule makes CN=client,OU=test,O=Strata into User:client: grants to that
    # name, and to nothing else, let the client in.
    group = f"g-{uuid.uuid4().hex[:6]}"
    topic = topic_for(sec, "User:client", group)
    got = round_trip(sec.mtls(), sec.mtls(), topic, group, n=20)
    assert len(got) == 20


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_confluent_kafka(sec, mechanism):
    group = f"g-{uuid.uuid4().hex[:6]}"
    topic = topic_for(sec, "User:carol", group)
    conf = sec.sasl_ssl("carol", SCRAM_PASSWORD, mechanism)
    assert len(round_trip(conf, conf, topic, group, n=10)) == 10
    # A wrong password fails the same way.
    bad = sec.sasl_ssl("carol", "wrong", mechanism)
    admin = AdminClient({**bad, "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def test_scram_sha_512_with_kcat(sec):
    topic = topic_for(sec, "User:carol")
    args = [
        "kcat", "-b", sec.bootstrap("SASL_SSL"),
        "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
        "-X", "sasl.username=carol", "-X", f"sasl.password={SCRAM_PASSWORD}",
        "-X", f"ssl.ca.location={sec.certs / 'ca.pem'}",
    ]
    subprocess.run(args + ["-P", "-t", topic], input=b"a\nb\nc\n", check=True, timeout=TIMEOUT_S)
    out = subprocess.run(args + ["-C", "-t", topic, "-e", "-q"], capture_output=True, check=True, timeout=TIMEOUT_S)
    assert out.stdout.split() == [b"a", b"b", b"c"]


def test_scram_with_kafka_python(sec):
    from kafka import KafkaConsumer, KafkaProducer

    topic = topic_for(sec, "User:carol", "kp")
    common = dict(
        bootstrap_servers=sec.bootstrap("SASL_SSL"),
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="carol",
        sasl_plain_password=SCRAM_PASSWORD,
        ssl_cafile=str(sec.certs / "ca.pem"),
    )
    p = KafkaProducer(**common)
    for i in range(5):
        p.send(topic, f"k{i}".encode()).get(timeout=TIMEOUT_S)
    p.close()
    c = KafkaConsumer(topic, group_id="kp", auto_offset_reset="earliest", consumer_timeout_ms=10000, **common)
    got = [m.value for m in c]
    c.close()
    assert got == [f"k{i}".encode() for i in range(5)]


def test_scram_with_aiokafka(sec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = topic_for(sec, "User:carol", "aio")

    async def run():
        ctx = create_ssl_context(cafile=str(sec.certs / "ca.pem"))
        common = dict(
            bootstrap_servers=sec.bootstrap("SASL_SSL"),
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="carol",
            sasl_plain_password=SCRAM_PASSWORD,
            ssl_context=ctx,
        )
        p = AIOKafkaProducer(**common)
        await p.start()
        try:
            for i in range(5):
                await p.send_and_wait(topic, f"a{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, group_id="aio", auto_offset_reset="earliest", **common)
        await c.start()
        got = []
        try:
            while len(got) < 5:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), TIMEOUT_S)
                for msgs in batch.values():
                    got += [m.value for m in msgs]
        finally:
            await c.stop()
        return got

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(5)]


def test_sessions_reauthenticate_and_keep_consuming(sec):
    # connections.max.reauth.ms=3000: librdkafka re-authenticates (KIP-368) before the
    # session ends, and the connection goes on serving; more authentications than
    # connections show it.
    topic = topic_for(sec, "User:alice", "reauth")
    conf = sec.sasl_ssl("alice", "alice-secret")
    before = sec.metric("kafka_server_socket_server_metrics_successful_authentication_total")
    p = Producer(conf)
    c = Consumer({**conf, "group.id": "reauth", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = 0
    end = time.monotonic() + 8
    i = 0
    while time.monotonic() < end:
        p.produce(topic, f"r{i}".encode())
        p.poll(0)
        i += 1
        m = c.poll(0.2)
        if m is not None and not m.error():
            got += 1
    assert p.flush(TIMEOUT_S) == 0
    deadline = time.monotonic() + TIMEOUT_S
    while got < i and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.close()
    assert got == i, (got, i)
    after = sec.metric("kafka_server_socket_server_metrics_successful_authentication_total")
    # Producer and consumer hold about four connections; 8 s at 3 s sessions re-authenticates each.
    assert after - before >= 8, (before, after)


# ---- refusals, over raw sockets ---------------------------------------------------------------


def frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, corr, 4) + b"test"
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def read_frame(s) -> bytes | None:
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    size = exact(4)
    if size is None:
        return None
    return exact(struct.unpack(">i", size)[0])


def closed(s, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError, OSError):
        return True


def kstr(v: str) -> bytes:
    return struct.pack(">h", len(v)) + v.encode()


def handshake(s, mechanism: str) -> tuple[int, list[str]]:
    s.sendall(frame(17, 1, 1, kstr(mechanism)))
    r = read_frame(s)
    err, n = struct.unpack(">hi", r[4:10])
    pos, mechs = 10, []
    for _ in range(n):
        (ln,) = struct.unpack(">h", r[pos : pos + 2])
        mechs.append(r[pos + 2 : pos + 2 + ln].decode())
        pos += 2 + ln
    return err, mechs


def authenticate(s, token: bytes) -> tuple[int, str | None]:
    s.sendall(frame(36, 1, 2, struct.pack(">i", len(token)) + token))
    r = read_frame(s)
    err, ln = struct.unpack(">hh", r[4:8])
    msg = r[8 : 8 + ln].decode() if ln >= 0 else None
    return err, msg


def sasl_socket(sec: Secured):
    return socket.create_connection(("127.0.0.1", sec.ports["SASL_PLAINTEXT"]), timeout=5)


def test_wrong_password_is_refused_then_closed(sec):
    with sasl_socket(sec) as s:
        err, mechs = handshake(s, "PLAIN")
        assert err == 0 and mechs == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        err, msg = authenticate(s, b"\0alice\0nope")
        assert err == 58, (err, msg)  # SASL_AUTHENTICATION_FAILED
        assert "PLAIN" in msg
        assert closed(s)


def test_unknown_mechanism_is_refused_then_closed(sec):
    with sasl_socket(sec) as s:
        err, mechs = handshake(s, "GSSAPI")
        assert err == 33  # UNSUPPORTED_SASL_MECHANISM
        assert "SCRAM-SHA-512" in mechs
        assert closed(s)


def test_a_request_before_authentication_closes_the_connection(sec):
    # Metadata v1 for every topic: refused by closing, and no topic list leaks.
    with sasl_socket(sec) as s:
        s.sendall(frame(3, 1, 1, struct.pack(">i", -1)))
        assert read_frame(s) is None
    # After a handshake, anything but SaslAuthenticate closes it too.
    with sasl_socket(sec) as s:
        handshake(s, "PLAIN")
        s.sendall(frame(18, 0, 9, b""))  # ApiVersions
        assert read_frame(s) is None


def test_a_second_authenticate_is_an_illegal_state_and_the_session_goes_on(sec):
    with sasl_socket(sec) as s:
        assert handshake(s, "PLAIN")[0] == 0
        assert authenticate(s, b"\0alice\0alice-secret")[0] == 0
        err, msg = authenticate(s, b"\0alice\0alice-secret")
        assert err == 34, (err, msg)  # ILLEGAL_SASL_STATE
        assert "after successful authentication" in msg
        # Still open and still authenticated: ApiVersions v0 is answered.
        s.sendall(frame(18, 0, 7, b""))
        r = read_frame(s)
        assert r is not None and struct.unpack(">ih", r[:6]) == (7, 0)


def test_garbage_scram_messages_are_refused(sec):
    for token in (b"", b"\xff\xfe", b"n,,n=carol", b"y,,n=carol,r=x", os.urandom(64)):
        with sasl_socket(sec) as s:
            assert handshake(s, "SCRAM-SHA-256")[0] == 0
            err, _ = authenticate(s, token)
            assert err == 58
            assert closed(s)


def test_plaintext_and_garbage_on_a_tls_port_close_that_connection_only(sec):
    for port in (sec.ports["SSL"], sec.ports["SASL_SSL"]):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(frame(18, 0, 1, b""))  # a plaintext ApiVersions
            assert closed(s)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"\x00" + os.urandom(511))
            assert closed(s)
        # A handshake record of garbage.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"\x16\x03\x01\x00\x40" + os.urandom(64))
            assert closed(s)
        # A client that stalls mid-handshake is cut off (the handshake is bounded to 10 s).
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"\x16\x03\x01")
            assert closed(s, timeout=15)
    # The broker serves on.
    AdminClient(sec.sasl_ssl("admin", "admin-secret")).list_topics(timeout=10)


@pytest.mark.parametrize("cert", ["rogue", "expired", None])
def test_untrusted_expired_or_missing_client_certificates_are_refused(sec, cert):
    ctx = ssl.create_default_context(cafile=str(sec.certs / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(sec.certs / f"{cert}.pem"), str(sec.certs / f"{cert}.key"))
    with socket.create_connection(("127.0.0.1", sec.ports["SSL"]), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                # TLS 1.3 finishes the client's side before the server checks the certificate:
                # the refusal arrives at the first read.
                s.sendall(frame(18, 0, 1, b""))
                assert read_frame(s) is None
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            pass
    # And with librdkafka: no metadata.
    if cert:
        admin = AdminClient({**sec.mtls(cert), "socket.timeout.ms": 3000})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=4)


def test_a_principal_without_grants_is_refused_everywhere(sec):
    admin = AdminClient(sec.sasl_ssl("admin", "admin-secret"))
    topic = topic_for(sec, "User:alice")
    bob = sec.sasl_ssl("bob", "bob-secret")
    # Metadata: bob sees no topic, not even by name.
    md = AdminClient(bob).list_topics(timeout=10)
    assert topic not in md.topics or md.topics[topic].error is not None
    assert not [t for t in md.topics if t.startswith("sec-") and md.topics[t].error is None]
    # Produce: TOPIC_AUTHORIZATION_FAILED.
    p = Producer({**bob, "message.timeout.ms": 5000})
    errs = []
    p.produce(topic, b"x", on_delivery=lambda e, m: errs.append(e))
    p.flush(10)
    assert errs and errs[0] is not None
    assert errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errs
    # A group: GROUP_AUTHORIZATION_FAILED.
    c = Consumer({**bob, "group.id": "bobs", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen = None
    deadline = time.monotonic() + 15
    while seen is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error():
            seen = m.error().code()
    c.close()
    assert seen in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED), seen
    # The cluster: CLUSTER_AUTHORIZATION_FAILED for an ACL change.
    b = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*",
                   AclOperation.READ, AclPermissionType.ALLOW)
    bob_admin = AdminClient(bob)
    with pytest.raises(KafkaException) as e:
        for f in bob_admin.create_acls([b]).values():
            f.result(timeout=TIMEOUT_S)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # DeleteRecords (DELETE on the topic), CreatePartitions (ALTER on the topic):
    # TOPIC_AUTHORIZATION_FAILED; ElectLeaders (ALTER on the cluster): CLUSTER_AUTHORIZATION_FAILED.
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import NewPartitions
    from confluent_kafka import ElectionType

    def code_of(futures) -> int:
        try:
            for f in (futures.values() if isinstance(futures, dict) else [futures]):
                r = f.result(timeout=TIMEOUT_S)
                # delete_records answers per partition
                if isinstance(r, dict):
                    for v in r.values():
                        if getattr(v, "error", None):
                            return v.error.code()
            return 0
        except KafkaException as ex:
            return ex.args[0].code()

    # Bob may now see the topic (DESCRIBE), which lets the clients ask; the operations
    # themselves stay refused.
    grant(admin, "User:bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    bob_admin = AdminClient(bob)
    assert code_of(bob_admin.delete_records([TopicPartition(topic, 0, 1)])) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(bob_admin.create_partitions([NewPartitions(topic, 2)])) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(bob_admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on a topic.
    fatal = []
    ip = Producer({**bob, "enable.idempotence": True, "message.timeout.ms": 5000,
                   "error_cb": lambda e: fatal.append(e)})
    try:
        ip.produce(topic, b"x")
        ip.flush(10)
    except KafkaException as ex:
        fatal.append(ex.args[0])
    assert any(e.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED for e in fatal), fatal
    # Nothing bob sent was written, and the topic kept its one partition.
    md = admin.list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 1
    c = Consumer({**sec.sasl_ssl("admin", "admin-secret"), "group.id": "check", "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (lo, hi) == (0, 0)


def test_admin_cli_users_and_acls(tmp_path):
    """`strata admin users` and `acls` against a broker whose PLAINTEXT listener is the
    operator's (User:ANONYMOUS is a super user there) and whose SASL_PLAINTEXT listener
    serves clients: a SCRAM user made with the CLI authenticates with kcat, and is refused
    until the CLI grants it WRITE, then again once the grant is removed."""
    from conftest import strata_bin

    plain, sasl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"
    b = Broker(
        tmp_path,
        {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
        port=plain,
    )
    try:
        def admin(*args: str) -> str:
            out = subprocess.run(
                [str(strata_bin()), "admin", "--bootstrap-server", f"127.0.0.1:{plain}", *args],
                capture_output=True, timeout=TIMEOUT_S, check=True,
            )
            return out.stdout.decode()

        admin("users", "add", "--user", "dave", "--password", "d-secret",
              "--mechanism", "SCRAM-SHA-512", "--iterations", "8192")
        assert "dave  SCRAM-SHA-512        8192" in admin("users", "list")
        admin("topics", "create", "--topic", "cli-t", "--partitions", "1")
        kcat = ["kcat", "-b", f"127.0.0.1:{sasl}", "-X", "security.protocol=SASL_PLAINTEXT",
                "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=dave",
                "-X", "sasl.password=d-secret", "-X", "message.timeout.ms=5000"]

        def produce(value: bytes) -> subprocess.CompletedProcess:
            return subprocess.run(kcat + ["-P", "-t", "cli-t"], input=value,
                                  capture_output=True, timeout=TIMEOUT_S)

        assert b"Topic authorization failed" in produce(b"refused\n").stderr
        admin("acls", "add", "--allow-principal", "User:dave", "--operation", "Write", "--topic", "cli-t")
        admin("acls", "add", "--allow-principal", "User:dave", "--operation", "Read",
              "--topic", "cli-", "--prefixed")
        listed = admin("acls", "list")
        assert "User:dave  *     WRITE      ALLOW       TOPIC          cli-t  LITERAL" in listed, listed
        assert "PREFIXED" in listed
        assert produce(b"allowed\n").returncode == 0
        out = subprocess.run(kcat + ["-C", "-t", "cli-t", "-e", "-q"], capture_output=True,
                             timeout=TIMEOUT_S, check=True)
        assert out.stdout.split() == [b"allowed"]
        admin("acls", "remove", "--topic", "cli-t")
        assert "cli-t  LITERAL" not in admin("acls", "list")
        assert b"Topic authorization failed" in produce(b"refused again\n").stderr
        # Without a credential the user no longer authenticates.
        admin("users", "remove", "--user", "dave", "--mechanism", "SCRAM-SHA-512")
        assert "dave" not in admin("users", "list")
        assert b"Authentication failed" in produce(b"x\n").stderr
    finally:
        b.kill()


def test_admin_cli_with_a_command_config_over_sasl_ssl_and_mutual_tls(sec, tmp_path):
    """`strata admin --command-config` reads Kafka's client properties, as kafka-acls.sh and
    kafka-topics.sh do: over SASL_SSL the super user (PLAIN) creates and lists topics and
    lists the ACLs; a SCRAM-SHA-512 user is who the broker then sees (refused the ACL list);
    a wrong password is an authentication error; and over SSL the client certificate is
    the login (User:client, who may not see the topics)."""
    from conftest import strata_bin

    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(sec.certs / "ca.pem")}

    def jaas(module: str, user: str, password: str) -> str:
        return (f"org.apache.kafka.common.security.{module} required "
                f'username="{user}" password="{password}";')

    def admin(listener: str, props: dict, *args: str) -> subprocess.CompletedProcess:
        path = tmp_path / f"{uuid.uuid4().hex}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return subprocess.run(
            [str(strata_bin()), "admin", "--bootstrap-server", sec.bootstrap(listener),
             "--command-config", str(path), "--timeout-ms", "10000", *args],
            capture_output=True, text=True, timeout=TIMEOUT_S,
        )

    su = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
          "sasl.jaas.config": jaas("plain.PlainLoginModule", "admin", "admin-secret"), **trust}
    r = admin("SASL_SSL", su, "topics", "create", "--topic", "cli-secured", "--partitions", "2")
    assert r.returncode == 0, r.stderr
    r = admin("SASL_SSL", su, "topics", "list")
    assert r.returncode == 0 and "cli-secured" in r.stdout, (r.stdout, r.stderr)
    r = admin("SASL_SSL", su, "acls", "list")
    assert r.returncode == 0, r.stderr

    carol = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.jaas.config": jaas("scram.ScramLoginModule", "carol", SCRAM_PASSWORD), **trust}
    r = admin("SASL_SSL", carol, "acls", "list")
    assert r.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in r.stderr, r.stderr
    wrong = {**carol, "sasl.jaas.config": jaas("scram.ScramLoginModule", "carol", "wrong")}
    r = admin("SASL_SSL", wrong, "topics", "list")
    assert r.returncode == 1 and "SaslAuthenticate refused" in r.stderr, r.stderr
    # GSSAPI, Kafka's default mechanism, is a configuration error (exit 2).
    r = admin("SASL_SSL", {k: v for k, v in carol.items() if k != "sasl.mechanism"}, "topics", "list")
    assert r.returncode == 2 and "GSSAPI" in r.stderr, r.stderr

    keystore = tmp_path / "client-keystore.pem"
    keystore.write_text((sec.certs / "client.key").read_text() + (sec.certs / "client.pem").read_text())
    mtls = {"security.protocol": "SSL", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore), **trust}
    r = admin("SSL", mtls, "topics", "list")
    assert r.returncode == 0 and "cli-secured" not in r.stdout, (r.stdout, r.stderr)
    r = admin("SSL", mtls, "acls", "list")
    assert r.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in r.stderr, r.stderr
    # Without the client certificate, the SSL listener (ssl.client.auth=required) refuses.
    r = admin("SSL", trust | {"security.protocol": "SSL"}, "topics", "list")
    assert r.returncode == 1, (r.stdout, r.stderr)


def test_keystores_reload_from_a_changed_file_and_from_alter_configs(tmp_path):
    """A listener's TLS keys are loaded again for new connections, without a restart, when
    the keystore file changes in place, and when IncrementalAlterConfigs sets this node's
    `listener.name.<l>.ssl.keystore.location` (Kafka's dynamic keystore update): a client
    that trusts only the new authority connects once the change is applied, and one that
    trusts only the old one no longer does. A keystore that does not load leaves the one in
    use in place."""
    import shutil

    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    first, second, third = (make_certs(tmp_path / n) for n in ("first", "second", "third"))
    live = tmp_path / "keystore.pem"
    shutil.copy(first / "server-keystore.pem", live)
    plain, tls = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}"
    (tmp_path / "b").mkdir()
    b = Broker(
        tmp_path / "b",
        {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(live),
        },
        port=plain,
    )

    def connects(ca: Path) -> bool:
        ctx = ssl.create_default_context(cafile=str(ca))
        try:
            with socket.create_connection(("127.0.0.1", tls), timeout=5) as s:
                with ctx.wrap_socket(s, server_hostname="127.0.0.1"):
                    return True
        except ssl.SSLError:
            return False

    def becomes_trusted(ca: Path, within: float = 20) -> bool:
        deadline = time.monotonic() + within
        while not connects(ca):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)
        return True

    def set_keystore(path: Path) -> None:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        res = ConfigResource(
            ConfigResource.Type.BROKER, "1",
            incremental_configs=[ConfigEntry("listener.name.ssl.ssl.keystore.location", str(path),
                                             incremental_operation=AlterConfigOpType.SET)],
        )
        admin.incremental_alter_configs([res])[res].result(timeout=TIMEOUT_S)

    try:
        assert connects(first / "ca.pem") and not connects(second / "ca.pem")
        shutil.copy(second / "server-keystore.pem", live)  # the file changes in place
        assert becomes_trusted(second / "ca.pem")
        assert not connects(first / "ca.pem")
        set_keystore(third / "server-keystore.pem")  # the dynamic update
        assert becomes_trusted(third / "ca.pem")
        assert not connects(second / "ca.pem")
        bad = tmp_path / "bad.pem"
        bad.write_text("not a keystore\n")
        set_keystore(bad)
        time.sleep(7)  # a reload pass (every 5 s) has seen it
        assert connects(third / "ca.pem")
        assert "do not load" in b.stderr_path.read_text()
    finally:
        b.kill()
