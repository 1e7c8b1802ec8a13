#!/usr/bin/env bash
# TLS against plaintext, same broker, same run: kcat (librdkafka) produces and consumes the
# same records over a PLAINTEXT and an SSL listener of one broker, and over SASL_SSL (SCRAM
# is not used: PLAIN, so that the cost shown is TLS's). Prints MB/s for each and the
# broker's CPU seconds per GB for each consume, from /proc/<pid>/stat.
#
#   bench/scripts/tls.sh [MB]        (default 512; needs kcat, openssl, a release build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MB="${1:-512}"
BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
WORK="$(mktemp -d)"
trap 'kill "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$ROOT/tests/make-certs.sh" "$WORK/certs" >/dev/null
P1=$((20000 + RANDOM % 20000)); P2=$((P1 + 1)); P3=$((P1 + 2))
JAAS='org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'
"$BIN" --override "listeners=PLAINTEXT://127.0.0.1:$P1,SSL://127.0.0.1:$P2,SASL_SSL://127.0.0.1:$P3" \
    --override "log.dirs=$WORK/data" \
    --override "ssl.keystore.location=$WORK/certs/server-keystore.pem" \
    --override "sasl.enabled.mechanisms=PLAIN" \
    --override "listener.name.sasl_ssl.plain.sasl.jaas.config=$JAAS" \
    > "$WORK/broker.log" 2>&1 &
PID=$!
for _ in $(seq 100); do kcat -b "127.0.0.1:$P1" -L >/dev/null 2>&1 && break; sleep 0.1; done
# 1 KB records, as many as MB megabytes.
python3 -c "
import sys
line = (b'x' * 1023) + b'\n'
sys.stdout.buffer.write(line * ($MB * 1024))" > "$WORK/records"

cpu() { awk '{print ($14 + $15) / 100}' "/proc/$PID/stat"; }
declare -A CONF=(
    [plaintext]="-b 127.0.0.1:$P1"
    [ssl]="-b 127.0.0.1:$P2 -X security.protocol=SSL -X ssl.ca.location=$WORK/certs/ca.pem"
    [sasl_ssl]="-b 127.0.0.1:$P3 -X security.protocol=SASL_SSL -X sasl.mechanisms=PLAIN -X sasl.username=bench -X sasl.password=bench-secret -X ssl.ca.location=$WORK/certs/ca.pem"
)
PROD="-X linger.ms=5 -X batch.size=1000000 -X queue.buffering.max.kbytes=1048576"
CONS="-X fetch.wait.max.ms=100"
printf '%-10s %12s %12s %16s\n' protocol "produce MB/s" "consume MB/s" "broker CPU s/GB (consume)"
for p in plaintext ssl sasl_ssl; do
    topic="tls-$p"
    # shellcheck disable=SC2086
    t0=$(date +%s.%N); kcat ${CONF[$p]} $PROD -P -t "$topic" -p 0 -l "$WORK/records"; t1=$(date +%s.%N)
    c0=$(cpu)
    # shellcheck disable=SC2086
    t2=$(date +%s.%N); n=$(kcat ${CONF[$p]} $CONS -C -t "$topic" -p 0 -o beginning -e -q | wc -l); t3=$(date +%s.%N)
    c1=$(cpu)
    [[ "$n" -eq $((MB * 1024)) ]] || { echo "$p: consumed $n of $((MB * 1024))"; exit 1; }
    awk -v mb="$MB" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v u0="$c0" -v u1="$c1" -v p="$p" \
        'BEGIN { printf "%-10s %12.0f %12.0f %16.2f\n", p, mb*1.048576/(b-a), mb*1.048576/(d-c), (u1-u0)/(mb*1.048576/1000) }'
done
