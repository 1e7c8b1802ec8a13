#!/usr/bin/env bash
# The long verification campaign (docs/RELIABILITY.md): runs of tests/verify/run.py one after
# another, alternating three and five nodes, every workload and every fault, until a given
# number of faults has been injected or a deadline passes; then the table of runs.
#
#   [INTERVAL=S] tests/verify/campaign.sh [FAULTS] [MINUTES] [RUN_SECONDS]   # defaults: 1000 180 420, 1.5 s
#
# Each run's directory is under target/verify/campaign-<UTC time>/; a clean run keeps only its
# summary.json and run.json, a failing one its history, node logs and data (and the command
# that replays it). Needs root, as run.py does.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
want=${1:-1000}
minutes=${2:-180}
seconds=${3:-420}
out="$ROOT/target/verify/campaign-$(date -u +%Y%m%dT%H%M%S)"
mkdir -p "$out"
end=$((SECONDS + minutes * 60))
total=0
i=0
py="$ROOT/target/venv/bin/python"
while ((total < want && SECONDS + seconds + 120 < end)); do
    nodes=$((i % 2 == 0 ? 3 : 5))
    seed=$(( (RANDOM << 15) | RANDOM ))
    dir="$out/run$(printf %02d "$i")-n$nodes-s$seed"
    echo "== run $i: $nodes nodes, seed $seed ($(date -u +%H:%M:%S))"
    timeout --kill-after=30s $((seconds + 600)) "$py" "$ROOT/tests/verify/run.py" --nodes "$nodes" \
        --seed "$seed" --duration "$seconds" --interval "${INTERVAL:-1.5}" --out "$dir" >"$dir.log" 2>&1
    echo "   exit $? ($(grep -m1 '^RESULT' "$dir.log" || echo 'no result'))"
    n=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['faults_total'])" "$dir/summary.json" 2>/dev/null || echo 0)
    total=$((total + n))
    i=$((i + 1))
    echo "   faults so far: $total"
done
"$py" "$ROOT/tests/verify/table.py" "$out"/run*/summary.json | tee "$out/TABLE.md"
