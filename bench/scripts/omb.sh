#!/usr/bin/env bash
# The OpenMessaging Benchmark's workload 1-topic-100-partitions-1kb (`strata-bench omb`)
# against Strata on this machine: three combined nodes from config/cluster (RF 3, acks=all),
# then one node (RF 1). Each run finds the maximum sustained rate, then measures latency and
# each broker's CPU per GB at half of it. Everything binds to 127.0.0.1 and is stopped at
# the end; data goes under a temporary directory.
#
# Usage: bench/scripts/omb.sh [SEARCH_SECS] [SECS]   (defaults 60 and 60)
# Needs: cargo build --release --bin strata -p strata-bench
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STRATA="$ROOT/target/release/strata"
BENCH="$ROOT/target/release/strata-bench"
SEARCH="${1:-60}"
SECS="${2:-60}"
WORK="$(mktemp -d /tmp/strata-omb.XXXXXX)"
# shellcheck source=bench/scripts/common.sh
. "$ROOT/bench/scripts/common.sh"

echo "## three nodes, RF 3"
cd "$WORK"
for n in 1 2 3; do
    "$STRATA" "$ROOT/config/cluster/node$n.properties" > "$WORK/node$n.log" 2>&1 &
    PIDS+=("$!")
done
for port in 19092 29092 39092; do wait_port "$port"; done
"$BENCH" wait-ready --bootstrap 127.0.0.1:19092 > /dev/null 2>&1 || sleep 5
sleep 5
"$BENCH" omb --bootstrap 127.0.0.1:19092,127.0.0.1:29092,127.0.0.1:39092 --rf 3 \
    --search-secs "$SEARCH" --secs "$SECS" --pids "$(IFS=,; echo "${PIDS[*]}")"
for p in "${PIDS[@]}"; do kill "$p"; done
wait 2>/dev/null || true
PIDS=()

echo "## one node, RF 1"
"$STRATA" --override listeners=PLAINTEXT://127.0.0.1:39481 \
    --override advertised.listeners=PLAINTEXT://127.0.0.1:39481 \
    --override "log.dirs=$WORK/single" > "$WORK/single.log" 2>&1 &
PIDS+=("$!")
wait_port 39481
sleep 2
"$BENCH" omb --bootstrap 127.0.0.1:39481 --rf 1 --search-secs "$SEARCH" --secs "$SECS" \
    --pids "${PIDS[0]}"
