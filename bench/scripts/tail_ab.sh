#!/usr/bin/env bash
# The produce tail near the disk's limit, A/B in one run: the raw append ceiling of the data
# directory's file system first, then `strata-bench latency` (1 KB, acks=1, one partition,
# paced) against a fresh single node started with each variant's environment in turn,
# alternating variants ROUNDS times so that the machine's drift falls on both.
#
# Usage: bench/scripts/tail_ab.sh RATES SECS ROUNDS VARIANT...
#   e.g. bench/scripts/tail_ab.sh 100000,200000,230000 15 2 STRATA_WRITEBACK_KB=0 STRATA_WRITEBACK_KB=1024
# A variant is a space-separated list of VAR=value for the broker's environment ("-" for none).
# DATA (default /tmp) is where the data directory and the ceiling's file go.
# Needs: cargo build --release --bin strata -p strata-bench
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STRATA="$ROOT/target/release/strata"
BENCH="$ROOT/target/release/strata-bench"
RATES="$1"; SECS="$2"; ROUNDS="$3"; shift 3
WORK="$(mktemp -d "${DATA:-/tmp}/strata-tail.XXXXXX")"
# shellcheck source=bench/scripts/common.sh
. "$ROOT/bench/scripts/common.sh"

"$BENCH" ceiling "$WORK"
for round in $(seq 1 "$ROUNDS"); do
    for variant in "$@"; do
        echo "## round $round: $variant"
        rm -rf "$WORK/data"
        vars=()
        [ "$variant" != "-" ] && read -r -a vars <<< "$variant"
        env "${vars[@]}" "$STRATA" --override listeners=PLAINTEXT://127.0.0.1:39481 \
            --override advertised.listeners=PLAINTEXT://127.0.0.1:39481 \
            --override "log.dirs=$WORK/data" > "$WORK/broker.log" 2>&1 &
        PID=$!
        PIDS=("$PID")
        wait_port 39481
        sleep 1
        for rate in ${RATES//,/ }; do
            before=($(head -1 /proc/stat))
            "$BENCH" latency --bootstrap 127.0.0.1:39481 --broker-pid "$PID" --rates "$rate" \
                --secs "$SECS" | grep -v '^producer settings\|^consumer settings\|^target'
            after=($(head -1 /proc/stat))
            # The whole machine over the run (every process, kernel threads included):
            # fields user nice system idle iowait irq softirq steal.
            awk -v b="${before[*]}" -v a="${after[*]}" 'BEGIN {
                split(b, x); split(a, y); t = 0
                for (i = 2; i <= 9; i++) { d[i] = y[i] - x[i]; t += d[i] }
                printf "    machine: busy %.0f%% (system %.0f%%, softirq %.0f%%), iowait %.0f%%, idle %.0f%%\n",
                    100 * (t - d[5] - d[6]) / t, 100 * d[4] / t, 100 * d[8] / t, 100 * d[6] / t, 100 * d[5] / t
            }'
        done
        kill "$PID"; wait "$PID" 2>/dev/null || true
        PIDS=()
        sync
    done
done
