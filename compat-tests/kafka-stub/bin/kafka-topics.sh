#!/usr/bin/env bash
# Stand-in for Kafka's bin/kafka-topics.sh, for the librdkafka tests that shell out to it
# through KAFKA_PATH (0052, 0077). Supports only what they use:
#   --bootstrap-server HOST:PORT (--create --topic T [--partitions N] [--replication-factor R]
#   [--config k=v]... | --delete --topic T | --alter --topic T --partitions N)
# It talks to the broker with confluent-kafka's admin client (the venv that test.sh builds, or
# $COMPAT_PYTHON), so it exercises the broker's CreateTopics/DeleteTopics/CreatePartitions.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
PY="${COMPAT_PYTHON:-$ROOT/target/venv/bin/python}"
exec "$PY" - "$@" <<'PYEOF'
import sys
from confluent_kafka.admin import AdminClient, NewTopic, NewPartitions
args = sys.argv[1:]
bootstrap, op, topic, parts, rf, configs = None, None, None, -1, -1, {}
i = 0
while i < len(args):
    a = args[i]
    if a == "--bootstrap-server": bootstrap = args[i + 1]; i += 1
    elif a in ("--create", "--delete", "--alter"): op = a[2:]
    elif a == "--topic": topic = args[i + 1]; i += 1
    elif a == "--partitions": parts = int(args[i + 1]); i += 1
    elif a == "--replication-factor": rf = int(args[i + 1]); i += 1
    elif a == "--config":
        k, v = args[i + 1].split("=", 1); configs[k] = v; i += 1
    else:
        sys.exit("kafka-topics.sh stand-in: unsupported argument %r" % a)
    i += 1
if not bootstrap or not op or not topic:
    sys.exit("kafka-topics.sh stand-in: need --bootstrap-server, an operation and --topic")
admin = AdminClient({"bootstrap.servers": bootstrap})
if op == "create":
    fut = admin.create_topics([NewTopic(topic, parts, rf, config=configs)], request_timeout=30)
elif op == "delete":
    fut = admin.delete_topics([topic], request_timeout=30)
else:
    fut = admin.create_partitions([NewPartitions(topic, parts)], request_timeout=30)
for t, f in fut.items():
    f.result(timeout=60)
    print("%s topic %s: ok" % (op, t))
PYEOF
