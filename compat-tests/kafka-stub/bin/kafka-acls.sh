#!/usr/bin/env bash
# Stand-in for Kafka's bin/kafka-acls.sh, for the librdkafka tests that shell out to it
# through KAFKA_PATH (0109, 0115, 0119). Supports only what they use, in Kafka's spelling:
#   --bootstrap-server HOST:PORT (--add | --remove [--force] | --list)
#   [--allow-principal P]... [--deny-principal P]... [--allow-host H]... [--deny-host H]...
#   [--operation OP]... [--topic T | --group G | --cluster] [--resource-pattern-type TYPE]
# As Kafka's tool does, each principal is paired with each host and operation of its
# permission type (a missing host is '*'), and --remove deletes exactly those bindings. It
# talks to the broker with confluent-kafka's admin client (the venv that test.sh builds, or
# $COMPAT_PYTHON), so it exercises the broker's CreateAcls/DeleteAcls/DescribeAcls.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
PY="${COMPAT_PYTHON:-$ROOT/target/venv/bin/python}"
exec "$PY" - "$@" <<'PYEOF'
import sys
from confluent_kafka.admin import (AdminClient, AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, ResourcePatternType, ResourceType)
args = sys.argv[1:]
bootstrap, op = None, None
principals = {"ALLOW": [], "DENY": []}
hosts = {"ALLOW": [], "DENY": []}
operations, resource, pattern = [], None, ResourcePatternType.LITERAL
i = 0
def value():
    global i
    if i + 1 >= len(args):
        sys.exit("kafka-acls.sh stand-in: %s needs a value" % args[i])
    i += 1
    return args[i]
while i < len(args):
    a = args[i]
    if a == "--bootstrap-server": bootstrap = value()
    elif a in ("--add", "--remove", "--list"): op = a[2:]
    elif a == "--force": pass
    elif a == "--allow-principal": principals["ALLOW"].append(value())
    elif a == "--deny-principal": principals["DENY"].append(value())
    elif a == "--allow-host": hosts["ALLOW"].append(value())
    elif a == "--deny-host": hosts["DENY"].append(value())
    elif a == "--operation": operations.append(value())
    elif a == "--topic": resource = (ResourceType.TOPIC, value())
    elif a == "--group": resource = (ResourceType.GROUP, value())
    elif a == "--cluster": resource = (ResourceType.BROKER, "kafka-cluster")
    elif a == "--resource-pattern-type": pattern = ResourcePatternType[value().upper()]
    else:
        sys.exit("kafka-acls.sh stand-in: unsupported argument %r" % a)
    i += 1
if not bootstrap or not op or (op != "list" and not resource):
    sys.exit("kafka-acls.sh stand-in: need --bootstrap-server, an operation and a resource")
admin = AdminClient({"bootstrap.servers": bootstrap})
if op == "list":
    f = AclBindingFilter(resource[0] if resource else ResourceType.ANY,
                         resource[1] if resource else None,
                         ResourcePatternType.ANY if resource is None else pattern,
                         None, None, AclOperation.ANY, AclPermissionType.ANY)
    for b in admin.describe_acls(f, request_timeout=30).result(timeout=60):
        print(b)
    sys.exit(0)
# Kafka's tool: the operation names are case-insensitive and camel-cased (All, Describe,
# IdempotentWrite); with none given, --add/--remove mean All.
def operation(name):
    key = "".join("_" + c if c.isupper() and k else c for k, c in enumerate(name)).upper()
    return AclOperation[key]
ops = [operation(o) for o in operations] or [AclOperation.ALL]
bindings = []
for perm in ("ALLOW", "DENY"):
    for p in principals[perm]:
        for h in hosts[perm] or ["*"]:
            for o in ops:
                bindings.append((p, h, o, AclPermissionType[perm]))
if not bindings:
    sys.exit("kafka-acls.sh stand-in: need --allow-principal or --deny-principal")
if op == "add":
    acls = [AclBinding(resource[0], resource[1], pattern, p, h, o, perm)
            for p, h, o, perm in bindings]
    for b, f in admin.create_acls(acls, request_timeout=30).items():
        f.result(timeout=60)
        print("Adding ACL: %s" % b)
else:
    filters = [AclBindingFilter(resource[0], resource[1], pattern, p, h, o, perm)
               for p, h, o, perm in bindings]
    for b, f in admin.delete_acls(filters, request_timeout=30).items():
        print("Removed ACLs: %s" % f.result(timeout=60))
PYEOF
