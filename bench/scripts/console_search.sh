#!/usr/bin/env bash
# Produce latency on one node while the web console's search scans a large partition.
#
#   bench/scripts/console_search.sh [GIB] [RATE] [SECS] [ROUNDS]
#
# Fills partition 0 of topic `scan` with GIB GiB of 1 KB records (kcat), then runs
# `strata-bench latency` at RATE records/s for SECS seconds (acks=1, 1 KB, its own topic),
# alternating: alone, and while a loop of console searches (a value no record holds, so every
# call scans until its budget: max_bytes 1 GiB, max_ms 10 s) reads `scan` from its start. It
# prints each run's latency line and the searches' scan rate. Defaults: 1 GiB, 20000 rec/s,
# 20 s, 2 rounds. Everything runs on 127.0.0.1; the node and its data go at exit.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
GIB="${1:-1}" RATE="${2:-20000}" SECS="${3:-20}" ROUNDS="${4:-2}"
WORK="$(mktemp -d "$ROOT/target/console-search.XXXXXX")"
# shellcheck source=bench/scripts/common.sh
source "$ROOT/bench/scripts/common.sh"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
CPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$ROOT/target/release/strata" --override log.dirs="$WORK/data" \
    --override listeners="PLAINTEXT://127.0.0.1:$PORT" --override advertised.listeners="PLAINTEXT://127.0.0.1:$PORT" \
    --override console.listener="http://127.0.0.1:$CPORT" >"$WORK/broker.log" 2>&1 &
BROKER=$!
PIDS+=("$BROKER")
wait_port "$PORT"
wait_port "$CPORT"
RECORDS=$((GIB * 1024 * 1024))
echo "filling scan:0 with $RECORDS records of 1 KB"
python3 -c "
import sys
line = ('x' * 1023 + '\n').encode()
out = sys.stdout.buffer
for _ in range($RECORDS):
    out.write(line)
" >"$WORK/records"
started=$SECONDS
kcat -P -b "127.0.0.1:$PORT" -t scan -p 0 -l -X queue.buffering.max.kbytes=1048576 -X linger.ms=20 "$WORK/records"
rm -f "$WORK/records"
echo "filled in $((SECONDS - started)) s: $(du -sh "$WORK/data/scan-0" | cut -f1)"
search_loop() {
    local calls=0 bytes=0 t0=$SECONDS
    while [[ -e "$WORK/searching" ]]; do
        local b
        b=$(curl -s "http://127.0.0.1:$CPORT/api/search?topic=scan&partition=0&value=needle&max_bytes=1073741824&max_ms=10000" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["scanned_bytes"])')
        calls=$((calls + 1)) bytes=$((bytes + b))
    done
    echo "searches: $calls calls, $((bytes / 1048576)) MiB scanned in $((SECONDS - t0)) s" >"$WORK/search.out"
}
for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round: alone"
    "$ROOT/target/release/strata-bench" latency --bootstrap "127.0.0.1:$PORT" --rates "$RATE" --secs "$SECS" --broker-pid "$BROKER" 2>&1 | tail -4
    echo "== round $round: while searching"
    touch "$WORK/searching"
    search_loop &
    LOOP=$!
    PIDS+=("$LOOP")
    sleep 1
    "$ROOT/target/release/strata-bench" latency --bootstrap "127.0.0.1:$PORT" --rates "$RATE" --secs "$SECS" --broker-pid "$BROKER" 2>&1 | tail -4
    rm -f "$WORK/searching"
    wait "$LOOP" || true
    cat "$WORK/search.out"
done
