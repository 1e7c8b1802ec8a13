"""Topic and broker configs that change live, DescribeConfigs' sources and synonyms, and
DescribeTopicPartitions, against the real broker with confluent-kafka (librdkafka) and
kafka-python.

Each live change is checked by its effect with no restart: segments deleted, a produce
refused, batches stamped, segments rolled. Broker configs (KIP-226) are set on the broker
id with confluent-kafka's IncrementalAlterConfigs and as the cluster-wide default (empty
name) with kafka-python's AlterConfigs, which librdkafka cannot address (it wants a broker
id). Synonym chains are read with kafka-python, whose response keeps their order and
duplicates (confluent-kafka folds synonyms into a dict by name).
"""

import time
from pathlib import Path

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest

TIMEOUT_S = 60
# Retention runs this often in these tests (`log.retention.check.interval.ms`).
CHECK_MS = 500
FAST_RETENTION = {"log.retention.check.interval.ms": str(CHECK_MS)}


def create_topic(admin: AdminClient, name: str, config=None, partitions: int = 1) -> None:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=30,
    )
    futures[name].result(timeout=TIMEOUT_S)


def alter(admin: AdminClient, restype, name: str, **ops) -> None:
    """IncrementalAlterConfigs: `key=value` SETs, `key=None` DELETEs (dots as `__`)."""
    entries = [
        ConfigEntry(
            k.replace("__", "."),
            v,
            incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET,
        )
        for k, v in ops.items()
    ]
    res = ConfigResource(restype, name, incremental_configs=entries)
    admin.incremental_alter_configs([res])[res].result(timeout=TIMEOUT_S)


def alter_topic(admin: AdminClient, topic: str, **ops) -> None:
    alter(admin, ConfigResource.Type.TOPIC, topic, **ops)


def described(admin: AdminClient, restype, name: str) -> dict:
    res = ConfigResource(restype, name)
    return admin.describe_configs([res])[res].result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, values, timestamp=None, key=b"k", conf=None) -> list:
    """Produces each value as its own batch; returns the delivery errors (None for success)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **(conf or {})})
    errors = []
    for v in values:
        kwargs = {"timestamp": timestamp} if timestamp is not None else {}
        p.produce(topic, value=v, key=key, partition=0,
                  on_delivery=lambda err, _m: errors.append(err), **kwargs)
        p.flush(TIMEOUT_S)
    assert p.flush(TIMEOUT_S) == 0
    return errors


def log_files(broker, topic: str) -> list[str]:
    return sorted(p.name for p in Path(broker.data_dir, f"{topic}-0").glob("*.log"))


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
    finally:
        c.close()


def wait_for(what: str, check, timeout_s: float = 20.0, every_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s}s (last: {last!r})")


@pytest.mark.parametrize("broker", [FAST_RETENTION], indirect=True)
def test_lowering_retention_ms_deletes_old_segments_within_one_check(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "ret", {"segment.bytes": "4096"})
    assert produce(broker.bootstrap, "ret", [b"r" * 1000] * 20) == [None] * 20
    before = log_files(broker, "ret")
    assert len(before) >= 4, before
    # With the default retention (7 days) several checks delete nothing.
    time.sleep(4 * CHECK_MS / 1000)
    assert log_files(broker, "ret") == before
    # The records are older than 1 s once it passes; the next check deletes every segment.
    time.sleep(1.1)
    alter_topic(admin, "ret", retention__ms="1000")
    changed = time.monotonic()
    wait_for("retention deleted the old segments",
             lambda: watermarks(broker.bootstrap, "ret")[0] == 20, timeout_s=10)
    # One check interval, plus slack for a loaded machine.
    assert time.monotonic() - changed < CHECK_MS / 1000 + 3
    assert len(log_files(broker, "ret")) == 1


@pytest.mark.parametrize("broker", [FAST_RETENTION], indirect=True)
def test_cleanup_policy_compact_stops_retention_and_requires_keys(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "pol", {"segment.bytes": "4096", "cleanup.policy": "compact"})
    assert produce(broker.bootstrap, "pol", [b"c" * 1000] * 10) == [None] * 10
    before = log_files(broker, "pol")
    # Compact only: time retention does not apply (Kafka's deleteOldSegments).
    alter_topic(admin, "pol", retention__ms="1")
    time.sleep(4 * CHECK_MS / 1000)
    assert log_files(broker, "pol") == before
    assert watermarks(broker.bootstrap, "pol")[0] == 0
    # A compacted topic refuses keyless records.
    errs = produce(broker.bootstrap, "pol", [b"no key"], key=None)
    assert errs[0] is not None and errs[0].code() == KafkaError.INVALID_RECORD, errs
    # Back to delete: retention applies at the next check, keyless records are accepted.
    alter_topic(admin, "pol", cleanup__policy="delete")
    wait_for("retention deleted the segments",
             lambda: watermarks(broker.bootstrap, "pol")[0] == 10, timeout_s=10)
    assert produce(broker.bootstrap, "pol", [b"no key"], key=None) == [None]


def test_lowering_max_message_bytes_refuses_bigger_batches(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "big")
    assert produce(broker.bootstrap, "big", [b"b" * 5000]) == [None]
    alter_topic(admin, "big", max__message__bytes="1000")
    errs = produce(broker.bootstrap, "big", [b"b" * 5000, b"small"])
    assert errs[0] is not None and errs[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errs
    assert errs[1] is None
    # Removing the override restores the default (1 MiB).
    alter_topic(admin, "big", max__message__bytes=None)
    assert produce(broker.bootstrap, "big", [b"b" * 5000]) == [None]


def consume_all(bootstrap: str, topic: str, n: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m)
        assert len(out) == n, f"read {len(out)} of {n}"
        return out
    finally:
        c.close()


def test_log_append_time_stamps_new_batches(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "stamp")
    assert produce(broker.bootstrap, "stamp", [b"old"], timestamp=1000) == [None]
    alter_topic(admin, "stamp", message__timestamp__type="LogAppendTime")
    start_ms = int(time.time() * 1000)
    assert produce(broker.bootstrap, "stamp", [b"new"], timestamp=1000) == [None]
    end_ms = int(time.time() * 1000)
    first, second = consume_all(broker.bootstrap, "stamp", 2)
    assert first.timestamp() == (TIMESTAMP_CREATE_TIME, 1000)
    kind, ts = second.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert start_ms - 1000 <= ts <= end_ms + 1000, (start_ms, ts, end_ms)


def test_smaller_segment_bytes_rolls_sooner(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "roll")
    assert produce(broker.bootstrap, "roll", [b"s" * 1000] * 10) == [None] * 10
    assert len(log_files(broker, "roll")) == 1
    alter_topic(admin, "roll", segment__bytes="4096")
    assert produce(broker.bootstrap, "roll", [b"s" * 1000] * 10) == [None] * 10
    assert len(log_files(broker, "roll")) >= 3, log_files(broker, "roll")


def kp_admin(broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)


def kp_describe(kp: KafkaAdminClient, restype: int, name: str) -> dict:
    """Raw DescribeConfigs v2 with synonyms: {name: (value, read_only, source, [synonyms])}."""
    req = DescribeConfigsRequest[2](resources=[(restype, name, None)], include_synonyms=True)
    resp = kp.send_request(req)
    (error, message, _, _, entries) = resp.resources[0]
    assert error == 0, message
    return {e[0]: (e[1], e[2], e[3], [tuple(s) for s in e[5]]) for e in entries}


def test_broker_configs_are_dynamic_described_and_survive_a_restart(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "inherit")
    create_topic(admin, "own", {"segment.bytes": "100000"})
    broker_1 = ConfigResource.Type.BROKER

    # Read-only configs are described as such, and refused for change (INVALID_REQUEST).
    configs = described(admin, broker_1, "1")
    assert not configs["log.retention.ms"].is_read_only
    assert not configs["log.segment.bytes"].is_read_only
    assert configs["log.retention.hours"].is_read_only
    assert configs["log.retention.check.interval.ms"].is_read_only
    assert configs["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    for bad in ({"log.retention.check.interval.ms": "1000"}, {"log.dirs": "/tmp/x"},
                {"log.segment.bytes": "lots"}, {"min.insync.replicas": "0"}):
        with pytest.raises(KafkaException) as exc:
            alter(admin, broker_1, "1", **{k.replace(".", "__"): v for k, v in bad.items()})
        assert exc.value.args[0].code() == KafkaError.INVALID_REQUEST, (bad, exc.value)

    # The cluster-wide default (empty name), through kafka-python's AlterConfigs.
    kp = kp_admin(broker)
    try:
        resp = kp.alter_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "", {"log.segment.bytes": "4096"})]
        )
        assert [r[0] for r in resp.resources] == [0], resp
        defaults = kp_describe(kp, 4, "")
        assert list(defaults) == ["log.segment.bytes"]
        assert defaults["log.segment.bytes"][:3] == ("4096", False, 3)
    finally:
        kp.close()
    topic = described(admin, ConfigResource.Type.TOPIC, "inherit")["segment.bytes"]
    assert (topic.value, topic.source) == (
        "4096", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    # It applies live to topics without an override, and not to one with.
    assert produce(broker.bootstrap, "inherit", [b"d" * 1000] * 10) == [None] * 10
    assert len(log_files(broker, "inherit")) >= 3
    assert produce(broker.bootstrap, "own", [b"d" * 1000] * 10) == [None] * 10
    assert len(log_files(broker, "own")) == 1

    # This broker's own value beats the default.
    alter(admin, broker_1, "1", log__segment__bytes="8192", log__retention__ms="3600000")
    mine = described(admin, broker_1, "1")
    assert (mine["log.segment.bytes"].value, mine["log.segment.bytes"].source) == (
        "8192", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    kp = kp_admin(broker)
    try:
        chain = kp_describe(kp, 4, "1")["log.segment.bytes"][3]
        assert chain == [
            ("log.segment.bytes", "8192", 2),
            ("log.segment.bytes", "4096", 3),
            ("log.segment.bytes", "1073741824", 5),
        ], chain
    finally:
        kp.close()

    # Kept in the metadata log: a restart serves the same values.
    broker.kill9()
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    after = wait_for(
        "the broker answers DescribeConfigs",
        lambda: _try(lambda: described(admin, broker_1, "1")),
    )
    assert after["log.segment.bytes"].value == "8192"
    assert after["log.retention.ms"].value == "3600000"
    assert described(admin, ConfigResource.Type.TOPIC, "inherit")["retention.ms"].value == "3600000"

    # DELETE falls back to the default, then to the static value.
    alter(admin, broker_1, "1", log__segment__bytes=None)
    assert described(admin, broker_1, "1")["log.segment.bytes"].value == "4096"


def test_kafkas_other_dynamic_broker_configs_are_accepted_and_described(broker):
    """Kafka's dynamic broker configs beyond the log defaults (`DynamicBrokerConfig`: SASL,
    SSL, listeners, thread pools, ...) are accepted, stored and described even though Strata
    does not act on them; Kafka's own rules about them still refuse what Kafka refuses."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    broker_1 = ConfigResource.Type.BROKER
    before = described(admin, broker_1, "1")
    relogin = before["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source, relogin.is_read_only) == (
        "60000", ConfigSource.DEFAULT_CONFIG.value, False)
    assert before["background.threads"].value == "10"

    # IncrementalAlterConfigs, as librdkafka's test 0081 sets it.
    alter(admin, broker_1, "1", sasl__kerberos__min__time__before__relogin="58000",
          background__threads="9")
    # The legacy AlterConfigs replaces the resource's set: both keys named again.
    legacy = ConfigResource(broker_1, "1", set_config={
        "sasl.kerberos.min.time.before.relogin": "58000",
        "background.threads": "9",
        "listener.name.external.sasl.jaas.config": "secret-jaas",
    })
    admin.alter_configs([legacy])[legacy].result(timeout=TIMEOUT_S)
    after = described(admin, broker_1, "1")
    for key, value in (("sasl.kerberos.min.time.before.relogin", "58000"),
                       ("background.threads", "9")):
        assert (after[key].value, after[key].source) == (
            value, ConfigSource.DYNAMIC_BROKER_CONFIG.value), key
    jaas = after["listener.name.external.sasl.jaas.config"]
    # A password is never described back in clear.
    assert jaas.is_sensitive and jaas.value is None, jaas

    # Kafka's rules: a bad value, a thread pool more than doubled, a keystore without a
    # listener prefix, and a read-only key are all INVALID_REQUEST.
    for bad in ({"sasl.kerberos.min.time.before.relogin": "soon"},
                {"background.threads": "21"},
                {"ssl.keystore.location": "/tmp/k.jks"},
                {"log.dirs": "/tmp/x"}):
        with pytest.raises(KafkaException) as exc:
            alter(admin, broker_1, "1", **{k.replace(".", "__"): v for k, v in bad.items()})
        assert exc.value.args[0].code() == KafkaError.INVALID_REQUEST, (bad, exc.value)
    # A per-broker key at the cluster-wide default (empty name), through kafka-python.
    kp = kp_admin(broker)
    try:
        resp = kp.alter_configs([KpConfigResource(
            ConfigResourceType.BROKER, "", {"sasl.kerberos.min.time.before.relogin": "1"})])
        assert [r[0] for r in resp.resources] == [42], resp
    finally:
        kp.close()

    # Kept in the metadata log.
    broker.kill9()
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    again = wait_for(
        "the broker answers DescribeConfigs",
        lambda: _try(lambda: described(admin, broker_1, "1")),
    )
    assert again["sasl.kerberos.min.time.before.relogin"].value == "58000"
    alter(admin, broker_1, "1", sasl__kerberos__min__time__before__relogin=None)
    gone = described(admin, broker_1, "1")["sasl.kerberos.min.time.before.relogin"]
    assert (gone.value, gone.source) == ("60000", ConfigSource.DEFAULT_CONFIG.value)


def _try(f):
    """f(), or None while the cluster is not there yet (a node starting, metadata not in)."""
    try:
        return f()
    except (KafkaException, KeyError):
        return None


@pytest.mark.parametrize("broker", [{"log.retention.hours": "2"}], indirect=True)
def test_topic_synonyms_in_kafkas_order(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "syn", {"retention.ms": "1234"})
    create_topic(admin, "plain")
    kp = kp_admin(broker)
    try:
        # A static log.retention.hours alone: Kafka reports DEFAULT_CONFIG, no synonyms (the
        # chain does not name log.retention.ms), and the effective value.
        plain = kp_describe(kp, 2, "plain")
        assert plain["retention.ms"] == ("7200000", False, 5, [])
        assert plain["segment.bytes"][3] == [("log.segment.bytes", "1073741824", 5)]
        resp = kp.alter_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "", {"log.retention.ms": "5000"})]
        )
        assert [r[0] for r in resp.resources] == [0], resp
        alter(admin, ConfigResource.Type.BROKER, "1", log__retention__ms="6000")
        syn = kp_describe(kp, 2, "syn")["retention.ms"]
        assert syn == ("1234", False, 1, [
            ("retention.ms", "1234", 1),
            ("log.retention.ms", "6000", 2),
            ("log.retention.ms", "5000", 3),
            ("log.retention.hours", "2", 4),
            ("log.retention.hours", "168", 5),
        ]), syn
        assert kp_describe(kp, 2, "plain")["retention.ms"][:3] == ("6000", False, 2)
    finally:
        kp.close()
    # confluent-kafka's view: source, read-only, sensitivity, and the type (v3+).
    entry = described(admin, ConfigResource.Type.TOPIC, "syn")["retention.ms"]
    assert entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not entry.is_read_only and not entry.is_sensitive


def test_describe_topics_through_describe_topic_partitions(broker):
    # Advertised (key 75, v0), so librdkafka's DescribeTopics sends it instead of Metadata.
    kp = kp_admin(broker)
    try:
        assert kp._client.get_api_versions().get(75) == (0, 0)
    finally:
        kp.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "dtp-a", partitions=3)
    create_topic(admin, "dtp-b", partitions=2)
    futures = admin.describe_topics(
        TopicCollection(["dtp-a", "dtp-b", "dtp-none"]), include_authorized_operations=True
    )
    a = futures["dtp-a"].result(timeout=TIMEOUT_S)
    b = futures["dtp-b"].result(timeout=TIMEOUT_S)
    assert [p.id for p in a.partitions] == [0, 1, 2]
    assert [p.id for p in b.partitions] == [0, 1]
    assert a.topic_id is not None and str(a.topic_id) != str(b.topic_id)
    for p in a.partitions + b.partitions:
        assert p.leader.id == 1
        assert [r.id for r in p.replicas] == [1] and [r.id for r in p.isr] == [1]
    assert not a.is_internal
    assert AclOperation.READ in a.authorized_operations
    assert AclOperation.ALTER_CONFIGS in a.authorized_operations
    with pytest.raises(KafkaException) as exc:
        futures["dtp-none"].result(timeout=TIMEOUT_S)
    assert exc.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def acks_all_errors(bootstrap: str, topic: str, n: int = 1) -> list:
    """acks=all produces with no retries: each delivery's error code (0 for success)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                  "linger.ms": 0, "message.timeout.ms": 20_000})
    out = []
    for _ in range(n):
        p.produce(TOPIC_MIN_ISR, value=b"m", partition=0,
                  on_delivery=lambda err, _m: out.append(0 if err is None else err.code()))
        p.flush(TIMEOUT_S)
    assert p.flush(TIMEOUT_S) == 0
    return out


TOPIC_MIN_ISR = "min-isr"


@pytest.mark.parametrize(
    "cluster",
    [{"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}],
    indirect=True,
)
def test_min_insync_replicas_changes_live_on_the_leader(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    cluster.wait_registered()
    create_topic_rf(admin, TOPIC_MIN_ISR, 3)

    def partition(a):
        return a.list_topics(TOPIC_MIN_ISR, timeout=5).topics[TOPIC_MIN_ISR].partitions[0]

    p = wait_for("a full ISR", lambda: _try(lambda: (lambda p: p if len(p.isrs) == 3 else None)(
        partition(admin))), timeout_s=TIMEOUT_S)
    controller = admin.list_topics(timeout=5).controller_id
    victim = next(i for i in cluster.nodes if i not in (p.leader, controller))
    cluster.node(victim).kill9()
    survivors = [i for i in cluster.nodes if i != victim]
    live = AdminClient({"bootstrap.servers": cluster.bootstrap(survivors)})
    wait_for("the ISR without the killed broker", lambda: _try(
        lambda: sorted(partition(live).isrs) == survivors), timeout_s=TIMEOUT_S)
    bootstrap = cluster.bootstrap(survivors)
    assert acks_all_errors(bootstrap, TOPIC_MIN_ISR) == [0]

    # Above the ISR (two of three): acks=all is NOT_ENOUGH_REPLICAS, with no restart.
    alter_topic(live, TOPIC_MIN_ISR, min__insync__replicas="3")
    wait_for("acks=all refused", lambda: acks_all_errors(bootstrap, TOPIC_MIN_ISR) == [
        KafkaError.NOT_ENOUGH_REPLICAS], timeout_s=15)
    alter_topic(live, TOPIC_MIN_ISR, min__insync__replicas="2")
    wait_for("acks=all accepted", lambda: acks_all_errors(bootstrap, TOPIC_MIN_ISR) == [0],
             timeout_s=15)
    # The cluster-wide broker default reaches the leader too, once the override is gone.
    alter_topic(live, TOPIC_MIN_ISR, min__insync__replicas=None)
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        resp = kp.alter_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "", {"min.insync.replicas": "3"})]
        )
        assert [r[0] for r in resp.resources] == [0], resp
    finally:
        kp.close()
    wait_for("acks=all refused by the broker default",
             lambda: acks_all_errors(bootstrap, TOPIC_MIN_ISR) == [KafkaError.NOT_ENOUGH_REPLICAS],
             timeout_s=15)


def create_topic_rf(admin: AdminClient, name: str, rf: int) -> None:
    futures = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=rf)],
                                  operation_timeout=30)
    futures[name].result(timeout=TIMEOUT_S)
