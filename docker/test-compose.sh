#!/usr/bin/env bash
# The three-node Compose cluster (docker/docker-compose.yml) from the offline image: builds
# strata:local, brings the cluster up on free host ports (`up -d` returns once the three
# nodes are healthy), checks that the metadata quorum elected a leader that the other two
# follow, produces numbered messages with kcat from the host through the leader's node and
# reads them back through another, then `down -v` and checks that no container, network or
# volume is left.
# Bounded: about two minutes plus the cargo build.
#
#     docker/test-compose.sh [--no-build]
#
# Not yet: replication factor 3 and faults (docker kill, network disconnect) while
# producing, which wait for partition replication between the nodes.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=docker/lib-test.sh
source "$root/docker/lib-test.sh"
require_kcat
started=$SECONDS

[[ ${1:-} == --no-build ]] || "$root/docker/build-offline.sh" strata:local

find_compose
project=strata-test-compose-$$
dc() { timeout 180 "${compose[@]}" -p "$project" -f "$root/docker/docker-compose.yml" "$@"; }
cleanup() { dc down -v --remove-orphans >/dev/null 2>&1 || true; }
trap cleanup EXIT

read -r STRATA_EXTERNAL_PORT_1 STRATA_EXTERNAL_PORT_2 STRATA_EXTERNAL_PORT_3 STRATA_CONSOLE_PORT < <(free_ports 4)
export STRATA_EXTERNAL_PORT_1 STRATA_EXTERNAL_PORT_2 STRATA_EXTERNAL_PORT_3 STRATA_CONSOLE_PORT
echo "== ${compose[*]} -p $project up -d (host ports $STRATA_EXTERNAL_PORT_1 $STRATA_EXTERNAL_PORT_2 $STRATA_EXTERNAL_PORT_3)"
dc up -d
for n in 1 2 3; do
    wait_healthy "$(dc ps -q "strata-$n")" 60
done
ready=$(docker inspect -f '{{.State.ExitCode}}' "$(dc ps -q cluster-ready)")
[[ $ready == 0 ]] || { echo "FAIL: cluster-ready exited with $ready"; exit 1; }
echo "ok: the three nodes are healthy"

# The quorum: one node reports itself leader, and the others follow it, in one epoch.
leader=""
for _ in $(seq 60); do
    for n in 1 2 3; do
        if dc logs --no-color "strata-$n" 2>/dev/null | grep -q 'metadata quorum role changed role=Leader'; then
            leader=$n
        fi
    done
    [[ -n $leader ]] && break
    sleep 1
done
[[ -n $leader ]] || { echo "FAIL: no node became the quorum leader within 60s"; dc logs --no-color --tail 20; exit 1; }
epoch=$(dc logs --no-color "strata-$leader" | grep 'metadata quorum role changed role=Leader' | tail -1 | sed 's/.*epoch=\([0-9]*\).*/\1/')
for n in 1 2 3; do
    [[ $n == "$leader" ]] && continue
    follows=false
    for _ in $(seq 30); do
        if dc logs --no-color "strata-$n" | grep -q "role=Follower epoch=$epoch leader=$leader"; then
            follows=true; break
        fi
        sleep 1
    done
    $follows || { echo "FAIL: strata-$n does not follow strata-$leader in epoch $epoch"; dc logs --no-color --tail 20 "strata-$n"; exit 1; }
done
echo "ok: the metadata quorum elected strata-$leader (epoch $epoch); the other two follow it"

# Produced through the quorum leader's node: a topic is auto-created by the active controller,
# and the other nodes answer NOT_CONTROLLER for now (Kafka forwards the request, KIP-590).
# Read back through another node: the metadata is the cluster's, and every broker is reached
# through the address it advertises to the host.
leader_port_var=STRATA_EXTERNAL_PORT_$leader
other=$(( leader % 3 + 1 ))
other_port_var=STRATA_EXTERNAL_PORT_$other
produce_via=127.0.0.1:${!leader_port_var}
consume_via=127.0.0.1:${!other_port_var}
topic=compose-test
messages=2000
echo "== produce $messages messages to $topic through strata-$leader ($produce_via, acks=all)"
produce_numbered "$produce_via" "$topic" "$messages"
echo "== read them back through strata-$other ($consume_via)"
wait_for_topic "$consume_via" "$topic"
check_numbered "$consume_via" "$topic" "$messages"
brokers=$(timeout 30 kcat -b "$consume_via" -L -m 20 | grep -c '^  broker [0-9]* at 127\.0\.0\.1:') || true
[[ $brokers == 3 ]] || { echo "FAIL: Metadata lists $brokers brokers at host addresses, not 3"; exit 1; }
echo "ok: Metadata lists the three brokers at their host addresses"
# The console on the host: strata-1's overview names the three brokers alive, and its page
# of the topic above answers.
alive=$(timeout 30 curl -sf "http://127.0.0.1:$STRATA_CONSOLE_PORT/api/overview" | grep -o '"alive":true' | wc -l) || true
[[ $alive == 3 ]] || { echo "FAIL: the console's overview shows $alive brokers alive, not 3"; exit 1; }
timeout 30 curl -sf "http://127.0.0.1:$STRATA_CONSOLE_PORT/api/topics/$topic" | grep -q "\"name\":\"$topic\"" ||
    { echo "FAIL: the console does not show topic $topic"; exit 1; }
echo "ok: the console shows the three brokers alive and the topic"

echo "== down -v"
containers=$(dc ps -q -a 2>/dev/null || dc ps -q)
dc down -v --remove-orphans
left=$( { docker ps -a -q --filter "label=com.docker.compose.project=$project"
          docker network ls -q --filter "label=com.docker.compose.project=$project"
          docker volume ls -q --filter "label=com.docker.compose.project=$project"; } )
[[ -z $left ]] || { echo "FAIL: left behind: $left"; exit 1; }
for c in $containers; do
    if docker inspect "$c" >/dev/null 2>&1; then echo "FAIL: container $c left behind"; exit 1; fi
done
echo "ok: nothing left behind"
echo "PASS: test-compose in $((SECONDS - started))s"
