"""SCRAM credentials (KIP-554): AlterUserScramCredentials and DescribeUserScramCredentials
against the real broker with confluent-kafka (librdkafka).

Credentials are kept in the metadata log (`UserScramCredentialRecord`), so they survive a
crash and restart. Only the mechanism and the iteration count are described back. Strata
authenticates SASL clients with them (test_security.py).
"""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka.admin import KafkaAdminClient
from kafka.protocol.api import Request, Response
from kafka.protocol.types import (
    CompactArray,
    CompactBytes,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

TIMEOUT_S = 60


def alter(admin: AdminClient, alterations) -> dict:
    """{user: None on success, else the KafkaError code}."""
    out = {}
    for user, future in admin.alter_user_scram_credentials(alterations).items():
        try:
            future.result(timeout=TIMEOUT_S)
            out[user] = None
        except KafkaException as e:
            out[user] = e.args[0].code()
    return out


def describe(admin: AdminClient, users=None):
    """Named users: {user: [(mechanism, iterations)] or the KafkaError code}; no users: every
    user with a credential, {user: [(mechanism, iterations)]}."""
    if users is None:
        got = admin.describe_user_scram_credentials().result(timeout=TIMEOUT_S)
        return {u: creds(d) for u, d in got.items()}
    out = {}
    for user, future in admin.describe_user_scram_credentials(users).items():
        try:
            out[user] = creds(future.result(timeout=TIMEOUT_S))
        except KafkaException as e:
            out[user] = e.args[0].code()
    return out


def creds(description) -> list:
    return sorted(
        (i.mechanism, i.iterations) for i in description.scram_credential_infos
    )


def upsert(user: str, mechanism=ScramMechanism.SCRAM_SHA_256, iterations: int = 8192,
           password: bytes = b"pencil", salt: bytes | None = b"a-salt"):
    return UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), password, salt)


class AlterUserScramCredentialsResponse_v0(Response):
    API_KEY = 51
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("results", CompactArray(
            ("user", CompactString("utf-8")),
            ("error_code", Int16),
            ("error_message", CompactString("utf-8")),
            ("tags", TaggedFields),
        )),
        ("tags", TaggedFields),
    )


class AlterUserScramCredentialsRequest_v0(Request):
    """KIP-554's request as Kafka's schema has it, for what librdkafka refuses to send (an
    empty user name)."""

    API_KEY = 51
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = AlterUserScramCredentialsResponse_v0
    SCHEMA = Schema(
        ("deletions", CompactArray(
            ("name", CompactString("utf-8")),
            ("mechanism", Int8),
            ("tags", TaggedFields),
        )),
        ("upsertions", CompactArray(
            ("name", CompactString("utf-8")),
            ("mechanism", Int8),
            ("iterations", Int32),
            ("salt", CompactBytes),
            ("salted_password", CompactBytes),
            ("tags", TaggedFields),
        )),
        ("tags", TaggedFields),
    )


def test_credentials_are_stored_described_and_survive_a_restart(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # Unknown user.
    assert describe(admin, ["alice"]) == {"alice": KafkaError.RESOURCE_NOT_FOUND}
    assert describe(admin) == {}

    assert alter(admin, [upsert("alice", iterations=8192)]) == {"alice": None}
    assert alter(admin, [upsert("bob", ScramMechanism.SCRAM_SHA_512, 4096)]) == {"bob": None}
    # A second mechanism for alice, in a request of its own.
    assert alter(admin, [upsert("alice", ScramMechanism.SCRAM_SHA_512, 16384)]) == {
        "alice": None}
    want = {
        "alice": [(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 16384)],
        "bob": [(ScramMechanism.SCRAM_SHA_512, 4096)],
    }
    assert describe(admin, ["alice", "bob"]) == want
    assert describe(admin) == want

    # Kept in the metadata log: a crash and restart serves the same credentials.
    broker.kill9()
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert describe(admin) == want

    # Deleting one mechanism leaves the other; deleting the last removes the user.
    assert alter(admin, [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)]) \
        == {"alice": None}
    assert describe(admin, ["alice"]) == {"alice": [(ScramMechanism.SCRAM_SHA_512, 16384)]}
    assert alter(admin, [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]) \
        == {"bob": None}
    assert describe(admin, ["bob"]) == {"bob": KafkaError.RESOURCE_NOT_FOUND}
    # Deleting what is not there.
    assert alter(admin, [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]) \
        == {"bob": KafkaError.RESOURCE_NOT_FOUND}


@pytest.mark.parametrize(
    ("alteration", "code"),
    [
        (upsert("carol", iterations=4095), KafkaError.UNACCEPTABLE_CREDENTIAL),
        (upsert("carol", iterations=16385), KafkaError.UNACCEPTABLE_CREDENTIAL),
    ],
    ids=["too-few-iterations", "too-many-iterations"],
)
def test_bad_alterations_get_kafkas_error_codes(broker, alteration, code):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert alter(admin, [alteration]) == {alteration.user: code}
    assert describe(admin) == {}


@pytest.mark.parametrize(
    ("user", "mechanism", "code"),
    [
        ("", 1, KafkaError.UNACCEPTABLE_CREDENTIAL),
        ("frank", 0, KafkaError.UNSUPPORTED_SASL_MECHANISM),
        ("frank", 3, KafkaError.UNSUPPORTED_SASL_MECHANISM),
    ],
    ids=["empty-user", "unknown-mechanism", "mechanism-3"],
)
def test_what_librdkafka_will_not_send_gets_kafkas_error_codes(broker, user, mechanism, code):
    # librdkafka refuses an empty name and an unknown mechanism before sending; Kafka's
    # controller answers them UNACCEPTABLE_CREDENTIAL and UNSUPPORTED_SASL_MECHANISM.
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        upsertion = AlterUserScramCredentialsRequest_v0(
            deletions=[],
            upsertions=[(user, mechanism, 8192, b"salt", b"x" * 32, {})],
            tags={},
        )
        deletion = AlterUserScramCredentialsRequest_v0(
            deletions=[(user, mechanism, {})], upsertions=[], tags={})
        got = [[(r[0], r[1]) for r in kp.send_request(req).results]
               for req in (upsertion, deletion)]
    finally:
        kp.close()
    assert got == [[(user, code)], [(user, code)]], got
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert describe(admin) == {}


def test_a_user_altered_twice_in_one_request_is_a_duplicate(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # Kafka's ScramControlManager: two alterations of one user, whatever the mechanisms.
    got = alter(admin, [upsert("dave", ScramMechanism.SCRAM_SHA_256),
                        upsert("dave", ScramMechanism.SCRAM_SHA_512),
                        upsert("erin")])
    assert got == {"dave": KafkaError.DUPLICATE_RESOURCE, "erin": None}
    assert describe(admin) == {"erin": [(ScramMechanism.SCRAM_SHA_256, 8192)]}


def test_every_node_takes_an_alteration_and_every_node_describes_it(cluster):
    """On a cluster the controller writes the credential (a node that is not the active
    controller forwards the request), and every node describes it from its own image."""
    cluster.wait_registered()
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    try:
        for node in (1, 2, 3):
            req = AlterUserScramCredentialsRequest_v0(
                deletions=[],
                upsertions=[(f"user-{node}", 1, 4096 * node, b"salt", b"x" * 32, {})],
                tags={},
            )
            resp = kp.send_request(req, node_id=node)
            assert [(r[0], r[1]) for r in resp.results] == [(f"user-{node}", 0)], (node, resp)
    finally:
        kp.close()
    want = {f"user-{n}": [(ScramMechanism.SCRAM_SHA_256, 4096 * n)] for n in (1, 2, 3)}
    for node in (1, 2, 3):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap([node])})
        deadline = time.monotonic() + 30
        while (got := describe(admin, list(want))) != want:
            assert time.monotonic() < deadline, (node, got)
            time.sleep(0.2)
