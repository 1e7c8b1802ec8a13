#!/usr/bin/env bash
# One Strata node from the offline image, configured by environment variables only:
# builds strata:local (docker/build-offline.sh), runs it with a published port, waits for
# the image's HEALTHCHECK (`strata healthcheck`) to report healthy, produces numbered
# messages with kcat from the host, reads them back, restarts the container and reads them
# again from its volume. Leaves no container or volume behind. Bounded: about two minutes
# plus the cargo build.
#
#     docker/test-single.sh [--no-build]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=docker/lib-test.sh
source "$root/docker/lib-test.sh"
require_kcat
started=$SECONDS

[[ ${1:-} == --no-build ]] || "$root/docker/build-offline.sh" strata:local

name=strata-test-single-$$
cleanup() { docker rm -f -v "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT

read -r port _ < <(free_ports 1)
bootstrap=127.0.0.1:$port
topic=docker-single
messages=2000

echo "== docker run $name (client port $bootstrap)"
docker run -d --name "$name" \
    -p "$bootstrap:9092" \
    -e KAFKA_NODE_ID=1 \
    -e KAFKA_LISTENERS=PLAINTEXT://:9092 \
    -e KAFKA_ADVERTISED_LISTENERS="PLAINTEXT://$bootstrap" \
    -e KAFKA_NUM_PARTITIONS=3 \
    strata:local >/dev/null
volume=$(docker inspect -f '{{range .Mounts}}{{.Name}}{{end}}' "$name")
wait_healthy "$name" 60
echo "ok: healthy"

uid=$(docker top "$name" -eo pid,uid | awk 'NR == 2 { print $2 }')
[[ $uid == 1000 ]] || { echo "FAIL: strata runs as uid $uid, not 1000"; exit 1; }
echo "ok: runs as uid 1000"

echo "== produce $messages messages to $topic (acks=all)"
produce_numbered "$bootstrap" "$topic" "$messages"
check_numbered "$bootstrap" "$topic" "$messages"
parts=$(timeout 30 kcat -b "$bootstrap" -L -t "$topic" -m 20 | grep -c 'partition [0-9]*, leader') || true
[[ $parts == 3 ]] || { echo "FAIL: $topic has $parts partitions, KAFKA_NUM_PARTITIONS=3"; exit 1; }
echo "ok: $topic was created with KAFKA_NUM_PARTITIONS=3"

echo "== docker restart $name"
docker restart -t 30 "$name" >/dev/null
wait_healthy "$name" 60
check_numbered "$bootstrap" "$topic" "$messages"

cleanup
left=$(docker ps -a -q --filter "name=^/$name\$")
[[ -z $left ]] || { echo "FAIL: container $name left behind"; exit 1; }
if docker volume inspect "$volume" >/dev/null 2>&1; then
    echo "FAIL: volume $volume left behind"; exit 1
fi
echo "PASS: test-single in $((SECONDS - started))s"
