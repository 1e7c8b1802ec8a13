#!/usr/bin/env bash
# The three-node Compose cluster under faults (issue 8). Builds strata:local offline, brings
# docker/docker-compose.yml up under its own project name on free host ports, creates a topic
# with 3 partitions, replication factor 3 and min.insync.replicas=2, and produces numbered
# messages from the host (confluent-kafka, acks=all, idempotent) while it:
#   1. docker kill's the node leading partition 0, and waits for another leader;
#   2. disconnects another node from the compose network for 10 s, then reconnects it;
#   3. docker start's the killed node, and waits for every ISR to be full;
#   4. restarts the three nodes one at a time (docker restart), waiting for the node to be
#      healthy and every ISR to be full between them.
# Then it stops producing, reads every partition from the beginning, and fails if an
# acknowledged message is missing or not at its acknowledged offset, if a partition's order
# is broken, or if a message is stored twice (docker/faults_check.py). A trap always runs
# `down -v` and checks that no container, network or volume is left.
# Bounded: the fault run is killed after STRATA_FAULTS_TIMEOUT seconds (default 300); it
# takes about two to three minutes, plus the cargo build.
#
#     docker/test-faults.sh [--no-build]
#
# Python with confluent-kafka: $STRATA_PYTHON, else target/venv (./test.sh makes it), else a
# venv made at target/venv-faults with pip.
#
# The stock docker/docker-compose.yml, as users run it: the host reaches the nodes on their
# EXTERNAL listeners' published 127.0.0.1 ports, and the nodes follow one another on
# INTERNAL; each listener's Metadata names that listener's addresses.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=docker/lib-test.sh
source "$root/docker/lib-test.sh"
started=$SECONDS

python=${STRATA_PYTHON:-$root/target/venv/bin/python}
if ! "$python" -c 'import confluent_kafka' 2>/dev/null; then
    python=$root/target/venv-faults/bin/python
    if ! "$python" -c 'import confluent_kafka' 2>/dev/null; then
        echo "== python3 -m venv target/venv-faults; pip install confluent-kafka"
        python3 -m venv "$root/target/venv-faults"
        "$python" -m pip install -q --disable-pip-version-check confluent-kafka
    fi
fi
helper() { timeout 150 "$python" "$root/docker/faults_check.py" "$@"; }

[[ ${1:-} == --no-build ]] || "$root/docker/build-offline.sh" strata:local

find_compose
project=strata-test-faults-$$
dc() { timeout 180 "${compose[@]}" -p "$project" -f "$root/docker/docker-compose.yml" "$@"; }
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-faults.XXXXXX")
producer=""
watchdog=""
faults=()

# Always: stop the producer, `down -v`, check that nothing of the project is left.
cleanup() {
    local rc=$?
    set +e
    trap - EXIT TERM INT
    [[ -n $watchdog ]] && kill "$watchdog" 2>/dev/null
    [[ -n $producer ]] && kill "$producer" 2>/dev/null && wait "$producer" 2>/dev/null
    if (( rc != 0 )); then
        echo "== logs (last 30 lines of each node)"
        dc logs --no-color --tail 30 2>/dev/null || true
    fi
    echo "== down -v"
    dc down -v --remove-orphans >/dev/null 2>&1 || true
    local left
    left=$( { docker ps -a -q --filter "label=com.docker.compose.project=$project"
              docker network ls -q --filter "label=com.docker.compose.project=$project"
              docker volume ls -q --filter "label=com.docker.compose.project=$project"; } 2>/dev/null)
    if [[ -n $left ]]; then
        echo "FAIL: left behind: $left"; rc=1
    else
        echo "ok: nothing left behind"
    fi
    rm -rf "$work"
    if (( rc == 0 )); then
        echo "PASS: test-faults in $((SECONDS - started))s"
    else
        echo "FAIL: test-faults (exit $rc) after $((SECONDS - started))s"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted"; exit 130' INT
trap 'echo "FAIL: timed out after ${STRATA_FAULTS_TIMEOUT:-300}s"; exit 124' TERM
# Every foreground command below is bounded itself, so the TERM trap runs within their bound.
( trap 'kill "$nap" 2>/dev/null' TERM; sleep "${STRATA_FAULTS_TIMEOUT:-300}" & nap=$!; wait "$nap" && kill -TERM $$ ) 2>/dev/null &
watchdog=$!

read -r STRATA_EXTERNAL_PORT_1 STRATA_EXTERNAL_PORT_2 STRATA_EXTERNAL_PORT_3 < <(free_ports 3)
export STRATA_EXTERNAL_PORT_1 STRATA_EXTERNAL_PORT_2 STRATA_EXTERNAL_PORT_3
# Clients on the host use the EXTERNAL listener's published ports; the nodes follow one
# another on INTERNAL (inter.broker.listener.name), and each listener's Metadata names that
# listener's addresses.
bootstrap=127.0.0.1:$STRATA_EXTERNAL_PORT_1,127.0.0.1:$STRATA_EXTERNAL_PORT_2,127.0.0.1:$STRATA_EXTERNAL_PORT_3
echo "== ${compose[*]} -p $project up -d (nodes at $bootstrap)"
dc up -d
# Container ids, taken once: a killed container keeps its id.
ids=("" "$(dc ps -q strata-1)" "$(dc ps -q strata-2)" "$(dc ps -q strata-3)")
container() { echo "${ids[$1]}"; }
for n in 1 2 3; do
    wait_healthy "$(container "$n")" 60
done
echo "ok: the three nodes are healthy"

topic=faults
helper create "$bootstrap" "$topic"
helper isr-full "$bootstrap" "$topic" 60

echo "== produce numbered messages in the background (acks=all, enable.idempotence=true)"
# Not through helper(): $producer is timeout's pid, and timeout passes a kill on to Python.
timeout 600 "$python" "$root/docker/faults_check.py" produce "$bootstrap" "$topic" "$work/acked" "$work/stop" \
    >"$work/producer.log" 2>&1 &
producer=$!
acked() { cat "$work/acked" 2>/dev/null | wc -l; }
# Waits (at most $1 seconds) until the producer has $2 more acknowledgements than now: the
# cluster takes writes again.
wait_progress() {
    local limit=$1 want=$(( $(acked) + $2 )) start=$SECONDS
    while (( $(acked) < want )); do
        if (( SECONDS - start >= limit )); then
            echo "FAIL: fewer than $2 acknowledgements in ${limit}s"; return 1
        fi
        kill -0 "$producer" 2>/dev/null || { echo "FAIL: the producer exited"; cat "$work/producer.log"; return 1; }
        sleep 0.5
    done
    echo "   producing: $(acked) acknowledged"
}
wait_progress 30 200

# 1. kill -9 the leader of partition 0.
killed=$(helper leader "$bootstrap" "$topic" 0)
echo "== docker kill strata-$killed (leads partition 0)"
docker kill "$(container "$killed")" >/dev/null
faults+=("docker kill strata-$killed (leader of partition 0)")
new_leader=""
for _ in $(seq 60); do
    new_leader=$(helper leader "$bootstrap" "$topic" 0 2>/dev/null) || true
    [[ -n $new_leader && $new_leader != "$killed" ]] && break
    sleep 0.5
done
[[ -n $new_leader && $new_leader != "$killed" ]] || { echo "FAIL: partition 0 has no new leader in 30s"; exit 1; }
echo "ok: strata-$new_leader leads partition 0 now"
wait_progress 60 200

# 2. Cut another node off the network for 10 s (the cluster is down to one reachable node:
#    writes wait for min.insync.replicas until the link is back).
cut=$(( killed % 3 + 1 ))
network=$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "$(container "$cut")")
echo "== docker network disconnect $network strata-$cut (10 s)"
docker network disconnect "$network" "$(container "$cut")"
faults+=("docker network disconnect strata-$cut for 10 s")
sleep 10
docker network connect --alias "strata-$cut" "$network" "$(container "$cut")"
echo "   reconnected strata-$cut"
wait_progress 60 200

# 3. Bring the killed node back.
echo "== docker start strata-$killed"
docker start "$(container "$killed")" >/dev/null
faults+=("docker start strata-$killed")
wait_healthy "$(container "$killed")" 60
helper isr-full "$bootstrap" "$topic" 60
wait_progress 30 200

# 4. Rolling restart.
for n in 1 2 3; do
    echo "== docker restart strata-$n"
    timeout 60 docker restart -t 10 "$(container "$n")" >/dev/null
    faults+=("docker restart strata-$n")
    wait_healthy "$(container "$n")" 60
    helper isr-full "$bootstrap" "$topic" 60
    wait_progress 30 200
done

echo "== stop producing"
touch "$work/stop"
wait "$producer" || { echo "FAIL: the producer failed"; cat "$work/producer.log"; producer=""; exit 1; }
producer=""
cat "$work/producer.log"

echo "== faults injected while producing"
printf '   %s\n' "${faults[@]}"
echo "== read every partition from the beginning and check"
helper check "$bootstrap" "$topic" "$work/acked"
