#!/usr/bin/env bash
# The secured Compose cluster (docker/docker-compose.secured.yml): SASL_SSL between clients
# and brokers, between brokers, and on the controller listener (mutual TLS there).
# Certificates come from tests/make-certs.sh, offline. Brings the cluster up on free host
# ports, creates a SCRAM user and its ACLs with `strata admin` inside a container, creates a
# topic with replication factor 3 and checks that every ISR fills (the brokers replicate
# over SASL_SSL), produces with kcat from the host as that user (SCRAM-SHA-512 over TLS) and
# reads back through another node, checks that plaintext is refused on the published port,
# then `down -v`.
# Bounded: about a minute plus the image build.
#
#     docker/test-compose-secured.sh [--no-build]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=docker/lib-test.sh
source "$root/docker/lib-test.sh"
require_kcat
started=$SECONDS

[[ ${1:-} == --no-build ]] || "$root/docker/build-offline.sh" strata:local

find_compose
project=strata-test-secured-$$
work=$(mktemp -d)
export STRATA_CERTS=$work/certs
dc() { timeout 180 "${compose[@]}" -p "$project" -f "$root/docker/docker-compose.secured.yml" "$@"; }
cleanup() {
    dc down -v --remove-orphans >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

"$root/tests/make-certs.sh" "$STRATA_CERTS" strata-1 strata-2 strata-3
chmod a+rx "$STRATA_CERTS"
chmod a+r "$STRATA_CERTS"/*

read -r STRATA_EXTERNAL_PORT_1 STRATA_EXTERNAL_PORT_2 STRATA_EXTERNAL_PORT_3 < <(free_ports 3)
export STRATA_EXTERNAL_PORT_1 STRATA_EXTERNAL_PORT_2 STRATA_EXTERNAL_PORT_3
echo "== ${compose[*]} -p $project up -d (host ports $STRATA_EXTERNAL_PORT_1 $STRATA_EXTERNAL_PORT_2 $STRATA_EXTERNAL_PORT_3)"
dc up -d
for n in 1 2 3; do
    wait_healthy "$(dc ps -q "strata-$n")" 60
done
echo "ok: the three nodes are healthy"

admin() { dc exec -T strata-1 strata admin --bootstrap-server 127.0.0.1:9094 "$@"; }
# The user's credential and grants go through the controller like any metadata write; a
# node that does not lead forwards them.
for _ in $(seq 30); do
    admin users add --user alice --password alice-secret --mechanism SCRAM-SHA-512 >/dev/null 2>&1 && break
    sleep 1
done
admin users list | grep -q '^alice ' || { echo "FAIL: no SCRAM credential for alice"; admin users list; exit 1; }
admin acls add --allow-principal User:alice --operation All --topic secured- --prefixed >/dev/null
admin acls add --allow-principal User:alice --operation All --group '*' >/dev/null
admin topics create --topic secured-test --partitions 3 --replication-factor 3 >/dev/null
echo "ok: alice has a SCRAM-SHA-512 credential and ACLs; secured-test has 3 replicas"

# kcat on the host, as alice, over TLS (kcat reads KCAT_CONFIG).
export KCAT_CONFIG=$work/kcat.conf
cat > "$KCAT_CONFIG" <<EOF
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=alice
sasl.password=alice-secret
ssl.ca.location=$STRATA_CERTS/ca.pem
EOF
via1=127.0.0.1:$STRATA_EXTERNAL_PORT_1
via2=127.0.0.1:$STRATA_EXTERNAL_PORT_2
wait_for_topic "$via1" secured-test
full=false
for _ in $(seq 60); do
    isrs=$(timeout 10 kcat -b "$via1" -L -t secured-test 2>/dev/null | grep -c 'isrs: [0-9],[0-9],[0-9]$') || true
    [[ $isrs == 3 ]] && { full=true; break; }
    sleep 1
done
$full || { echo "FAIL: the ISRs of secured-test did not fill"; timeout 10 kcat -b "$via1" -L -t secured-test; dc logs --no-color --tail 20; exit 1; }
echo "ok: every ISR holds the three brokers (replication over SASL_SSL)"
produce_numbered "$via1" secured-test 2000
check_numbered "$via2" secured-test 2000

# A plaintext client on the published SASL_SSL port gets nothing.
if KCAT_CONFIG=/dev/null timeout 10 kcat -b "$via1" -L -m 3 >/dev/null 2>&1; then
    echo "FAIL: a plaintext client read metadata from a SASL_SSL listener"; exit 1
fi
echo "ok: plaintext is refused on the SASL_SSL port"

echo "== down -v"
dc down -v --remove-orphans
left=$( { docker ps -a -q --filter "label=com.docker.compose.project=$project"
          docker volume ls -q --filter "label=com.docker.compose.project=$project"; } )
[[ -z $left ]] || { echo "FAIL: left behind: $left"; exit 1; }
echo "PASS: test-compose-secured in $((SECONDS - started))s"
