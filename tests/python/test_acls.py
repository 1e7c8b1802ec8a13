"""ACLs through confluent-kafka's admin client (librdkafka's CreateAcls, DescribeAcls and
DeleteAcls) against the real broker with Kafka's StandardAuthorizer, and KIP-430's
authorized operations as the authorizer computes them.

Every client here is `User:ANONYMOUS` (PLAINTEXT). With allow.everyone.if.no.acl.found a
resource without bindings stays open, so the test can administer ACLs; a binding on a
resource closes it to everything the binding does not allow.
"""

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

TIMEOUT_S = 60
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


def binding(name, op, perm, pattern=ResourcePatternType.LITERAL, rtype=ResourceType.TOPIC):
    return AclBinding(rtype, name, pattern, "User:ANONYMOUS", "*", op, perm)


def everything():
    return AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )


def key(b):
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
            b.operation, b.permission_type)


@pytest.mark.parametrize("broker", [AUTHORIZER], indirect=True)
def test_create_describe_delete_and_authorized_operations(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("acl-topic", 1, 1)]).values():
        f.result(timeout=TIMEOUT_S)
    read = binding("acl-topic", AclOperation.READ, AclPermissionType.ALLOW)
    deny_alter = binding("acl", AclOperation.ALTER, AclPermissionType.DENY,
                         ResourcePatternType.PREFIXED)
    for f in admin.create_acls([read, deny_alter], request_timeout=30).values():
        assert f.result(timeout=TIMEOUT_S) is None
    got = admin.describe_acls(everything(), request_timeout=30).result(timeout=TIMEOUT_S)
    assert sorted(map(key, got)) == sorted(map(key, [read, deny_alter]))
    matching = AclBindingFilter(
        ResourceType.TOPIC, "acl-topic", ResourcePatternType.MATCH, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )
    got = admin.describe_acls(matching, request_timeout=30).result(timeout=TIMEOUT_S)
    assert sorted(map(key, got)) == sorted(map(key, [read, deny_alter]))

    # KIP-430: READ implies DESCRIBE; the DENY on ALTER takes it away; nothing else is
    # allowed on a topic that has bindings.
    md = admin.describe_topics(
        TopicCollection(["acl-topic"]),
        include_authorized_operations=True, request_timeout=30,
    )
    desc = md["acl-topic"].result(timeout=TIMEOUT_S)
    assert set(desc.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}

    # An invalid binding is refused with INVALID_REQUEST, as Kafka refuses it.
    bad = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL,
                     "User:ANONYMOUS", "*", AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        for f in admin.create_acls([bad], request_timeout=30).values():
            f.result(timeout=TIMEOUT_S)
    assert e.value.args[0].code() == KafkaError.INVALID_REQUEST

    deleted = admin.delete_acls([everything()], request_timeout=30)
    (only,) = deleted.values()
    assert sorted(map(key, only.result(timeout=TIMEOUT_S))) == sorted(
        map(key, [read, deny_alter]))
    assert admin.describe_acls(everything(), request_timeout=30).result(
        timeout=TIMEOUT_S) == []


def test_without_an_authorizer_acls_are_security_disabled(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    read = binding("t", AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        for f in admin.create_acls([read], request_timeout=30).values():
            f.result(timeout=TIMEOUT_S)
    assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED
    with pytest.raises(KafkaException) as e:
        for f in admin.delete_acls([everything()], request_timeout=30).values():
            f.result(timeout=TIMEOUT_S)
    assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED
