"""DescribeCluster, DescribeLogDirs and the legacy AlterConfigs against the real broker.

AlterConfigs goes through confluent-kafka's and kafka-python's admin clients. Neither
client's admin sends DescribeCluster (both answer describe_cluster from a Metadata request)
nor DescribeLogDirs v1+ (kafka-python's admin sends only v0, which Kafka 4.0 removed and
Strata does not serve), so those requests are declared with kafka-python's own protocol
classes and sent through its admin client's connection. DescribeLogDirs v1 has v0's fields
(only throttling changed; kafka-python's v0 request schema has `partitions` as one int32
instead of an array). DescribeCluster v1 is flexible, with KIP-919's endpoint type.
"""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    ConfigResource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import DescribeLogDirsResponse_v0
from kafka.protocol.api import Request, Response
from kafka.protocol.types import (
    Array,
    Boolean,
    CompactArray,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    String,
    TaggedFields,
)

TIMEOUT_S = 60

# The legacy AlterConfigs is what these tests are about; confluent-kafka warns on each use.
pytestmark = pytest.mark.filterwarnings(
    "ignore:alter_configs has been deprecated:DeprecationWarning"
)


class DescribeLogDirsResponse_v1(DescribeLogDirsResponse_v0):
    API_VERSION = 1


class DescribeLogDirsRequest_v1(Request):
    API_KEY = 35
    API_VERSION = 1
    RESPONSE_TYPE = DescribeLogDirsResponse_v1
    SCHEMA = Schema(
        ("topics", Array(("topic", String("utf-8")), ("partitions", Array(Int32)))),
    )


class DescribeClusterResponse_v1(Response):
    API_KEY = 60
    API_VERSION = 1
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", CompactString("utf-8")),
        ("endpoint_type", Int8),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        (
            "brokers",
            CompactArray(
                ("broker_id", Int32),
                ("host", CompactString("utf-8")),
                ("port", Int32),
                ("rack", CompactString("utf-8")),
                ("_tagged_fields", TaggedFields),
            ),
        ),
        ("cluster_authorized_operations", Int32),
        ("_tagged_fields", TaggedFields),
    )


class DescribeClusterRequest_v1(Request):
    API_KEY = 60
    API_VERSION = 1
    RESPONSE_TYPE = DescribeClusterResponse_v1
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("include_cluster_authorized_operations", Boolean),
        ("endpoint_type", Int8),
        ("_tagged_fields", TaggedFields),
    )


# KIP-430 bits of the cluster operations Kafka reports without an authorizer: CREATE(5)
# ALTER(7) DESCRIBE(8) CLUSTER_ACTION(9) DESCRIBE_CONFIGS(10) ALTER_CONFIGS(11)
# IDEMPOTENT_WRITE(12).
CLUSTER_OPS = sum(1 << b for b in (5, 7, 8, 9, 10, 11, 12))


def create_topic(admin: AdminClient, name: str, partitions: int, config=None) -> None:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=30,
    )
    futures[name].result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, partition: int, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed = []
    for i in range(n):
        p.produce(
            topic,
            value=b"x" * size,
            key=str(i).encode(),
            partition=partition,
            on_delivery=lambda err, _msg: err is not None and failed.append(err),
        )
        p.poll(0)
    assert p.flush(TIMEOUT_S) == 0
    assert failed == []


def describe_cluster(kp: KafkaAdminClient, ops: bool, endpoint_type: int = 1):
    resp = kp.send_request(DescribeClusterRequest_v1(ops, endpoint_type, {}))
    assert resp.API_VERSION == 1
    return resp


@pytest.mark.parametrize("broker", [{"broker.rack": "rack-a"}], indirect=True)
def test_describe_cluster(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=TIMEOUT_S)
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        r = describe_cluster(kp, ops=False)
        assert (r.error_code, r.error_message, r.endpoint_type) == (0, None, 1)
        assert r.cluster_id == md.cluster_id and len(r.cluster_id) == 22
        # Single node: this broker, which Metadata also names as the controller.
        assert r.controller_id == md.controller_id
        assert [tuple(b[:4]) for b in r.brokers] == [
            (md.controller_id, "127.0.0.1", broker.port, "rack-a")
        ]
        assert r.cluster_authorized_operations == -(2**31)  # not requested

        r = describe_cluster(kp, ops=True)
        # No authorizer: every operation that applies to the cluster, as Kafka reports it.
        assert r.cluster_authorized_operations == CLUSTER_OPS

        # A broker serves only the BROKER endpoint type (KIP-919).
        r = describe_cluster(kp, ops=False, endpoint_type=2)
        assert r.error_code == 114  # MISMATCHED_ENDPOINT_TYPE
        assert r.brokers == []
    finally:
        kp.close()

    # librdkafka answers describe_cluster from Metadata; it must agree with the above.
    desc = admin.describe_cluster(
        include_authorized_operations=True, request_timeout=30
    ).result(timeout=TIMEOUT_S)
    assert desc.cluster_id == md.cluster_id
    assert [(n.id, n.port, n.rack) for n in desc.nodes] == [
        (md.controller_id, broker.port, "rack-a")
    ]
    assert set(desc.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    }


def describe_log_dirs(kp: KafkaAdminClient, topics=None):
    """{log_dir: {(topic, partition): size}} from a DescribeLogDirs v1 request."""
    resp = kp.send_request(DescribeLogDirsRequest_v1(topics))
    assert resp.API_VERSION == 1
    out = {}
    for error_code, log_dir, dir_topics in resp.log_dirs:
        assert error_code == 0
        sizes = out.setdefault(log_dir, {})
        for topic, partitions in dir_topics:
            for partition, size, offset_lag, is_future in partitions:
                assert offset_lag == 0
                assert is_future is False
                sizes[(topic, partition)] = size
    return out


def test_describe_log_dirs(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "dirs-a", 2)
    create_topic(admin, "dirs-b", 1)
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        data_dir = str(broker.data_dir.resolve())
        dirs = describe_log_dirs(kp)
        assert list(dirs) == [data_dir]
        before = dirs[data_dir]
        assert {("dirs-a", 0), ("dirs-a", 1), ("dirs-b", 0)} <= set(before)
        assert before[("dirs-a", 0)] == 0

        produce(broker.bootstrap, "dirs-a", 0, 200, 500)
        after = describe_log_dirs(kp)[data_dir]
        # 200 records of 500 bytes: the batches hold at least the values.
        assert after[("dirs-a", 0)] >= 200 * 500
        assert after[("dirs-a", 1)] == before[("dirs-a", 1)]
        assert after[("dirs-b", 0)] == before[("dirs-b", 0)]

        # A request naming topics lists only the partitions it names; unknown ones are absent.
        only = describe_log_dirs(
            kp, [("dirs-a", [0]), ("dirs-b", [7]), ("no-such-topic", [0])]
        )
        assert only == {data_dir: {("dirs-a", 0): after[("dirs-a", 0)]}}
        # An empty list names nothing: the directory, with no partitions.
        assert describe_log_dirs(kp, []) == {data_dir: {}}
    finally:
        kp.close()


def effective(admin: AdminClient, topic: str) -> dict:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(timeout=TIMEOUT_S)
    return {k: (e.value, e.source) for k, e in entries.items()}


def test_alter_configs_replaces_the_overrides(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(
        admin, "legacy", 1, {"retention.ms": "123456", "cleanup.policy": "compact"}
    )
    default_retention = effective(admin, "legacy")["retention.ms"]
    assert default_retention[0] == "123456"
    dynamic_topic = default_retention[1]

    # validate_only (confluent-kafka's legacy alter_configs): accepted, nothing changes.
    res = ConfigResource(ConfigResource.Type.TOPIC, "legacy", set_config={"segment.ms": "100000"})
    admin.alter_configs([res], validate_only=True)[res].result(timeout=TIMEOUT_S)
    assert effective(admin, "legacy")["segment.ms"][0] == "604800000"
    assert effective(admin, "legacy")["retention.ms"][0] == "123456"

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        # The whole set is replaced: segment.ms set, cleanup.policy kept by naming it,
        # retention.ms (not named) back to its default.
        resp = kp.alter_configs(
            [
                KpConfigResource(
                    ConfigResourceType.TOPIC,
                    "legacy",
                    {"segment.ms": "100000", "cleanup.policy": "compact"},
                )
            ]
        )
        assert [r[0] for r in resp.resources] == [0], resp
    finally:
        kp.close()

    configs = effective(admin, "legacy")
    assert configs["segment.ms"] == ("100000", dynamic_topic)
    assert configs["cleanup.policy"] == ("compact", dynamic_topic)
    assert configs["retention.ms"][0] == "604800000"
    assert configs["retention.ms"][1] != dynamic_topic


def test_alter_configs_validation(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "legacy-bad", 1, {"retention.ms": "123456"})

    # confluent-kafka's legacy alter_configs: an unknown key and a bad value are
    # INVALID_CONFIG and change nothing.
    for configs in ({"no.such.config": "1"}, {"retention.ms": "soon"}):
        res = ConfigResource(ConfigResource.Type.TOPIC, "legacy-bad", set_config=configs)
        with pytest.raises(KafkaException) as exc:
            admin.alter_configs([res])[res].result(timeout=TIMEOUT_S)
        assert exc.value.args[0].code() == KafkaError.INVALID_CONFIG, exc.value
    assert effective(admin, "legacy-bad")["retention.ms"][0] == "123456"

    # An unknown topic.
    res = ConfigResource(ConfigResource.Type.TOPIC, "no-such", set_config={"retention.ms": "1"})
    with pytest.raises(KafkaException) as exc:
        admin.alter_configs([res])[res].result(timeout=TIMEOUT_S)
    assert exc.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Broker resources: a read-only broker config cannot change (KIP-226), INVALID_REQUEST.
    res = ConfigResource(ConfigResource.Type.BROKER, "1", set_config={"log.retention.hours": "1"})
    with pytest.raises(KafkaException) as exc:
        admin.alter_configs([res])[res].result(timeout=TIMEOUT_S)
    assert exc.value.args[0].code() == KafkaError.INVALID_REQUEST

    # A good change still goes through afterwards, through the same client.
    res = ConfigResource(ConfigResource.Type.TOPIC, "legacy-bad", set_config={"retention.ms": "777"})
    admin.alter_configs([res])[res].result(timeout=TIMEOUT_S)
    deadline = time.monotonic() + 10
    while effective(admin, "legacy-bad")["retention.ms"][0] != "777":
        assert time.monotonic() < deadline
        time.sleep(0.1)
