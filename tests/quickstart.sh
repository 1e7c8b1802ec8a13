#!/usr/bin/env bash
# Runs the README's "Quickstart with kcat" exactly as written, so that a command a newcomer is
# told to type cannot break unnoticed.
#
#   tests/quickstart.sh
#
# The fenced `sh` block under the README heading "## Quickstart with kcat" is read line by line:
# its first line must be `cargo run --release &`, or the same with the broker's arguments after
# `--` (the broker, started in a process group of its own so that it can be stopped whole); every other line runs as written, in order, after the
# broker's port (localhost:9092, the no-configuration default) answers. The commands run in a
# fresh scratch directory inside the checkout (target/quickstart), so `cargo run` finds the
# workspace as it does from the root and the broker's `./data` starts empty.
#
# Checks: every line exits 0, the metadata listing names broker 1 at port 9092, and the
# consumer prints both messages with their keys (the block's own output format). Exit status:
# 0 when all hold, 1 otherwise (the broker's log and each command's output are printed).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$ROOT/target/quickstart"
PORT=9092

# The block, one command a line (comments after `#` are kept: bash ignores them).
mapfile -t LINES < <(awk '
    /^## Quickstart with kcat/ { in_section = 1; next }
    in_section && /^## / { exit }
    in_section && /^```sh/ { in_block = 1; next }
    in_block && /^```/ { exit }
    in_block && NF { print }
' "$ROOT/README.md")

fail() { echo "quickstart: FAILED: $*" >&2; exit 1; }

[[ ${#LINES[@]} -ge 2 ]] || fail "no quickstart block found in README.md"
first="${LINES[0]%%#*}"
first="${first%"${first##*[![:space:]]}"}"
[[ "$first" == "cargo run --release &" || "$first" =~ ^cargo\ run\ --release\ --\ [^\&\;\|]+\ \&$ ]] ||
    fail "the quickstart's first line is '${LINES[0]}', expected 'cargo run --release [-- ARGS] &'"
command -v kcat >/dev/null || fail "kcat is not installed (./test.sh installs it)"
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    fail "something already listens on 127.0.0.1:$PORT; the quickstart needs that port"
fi

rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK"

BROKER_PID=""
stop_broker() {
    [[ -n "$BROKER_PID" ]] || return 0
    # The whole group: cargo and the strata it started.
    kill -TERM -- "-$BROKER_PID" 2>/dev/null
    local i
    for ((i = 0; i < 150; i++)); do
        kill -0 -- "-$BROKER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$BROKER_PID" 2>/dev/null
    wait "$BROKER_PID" 2>/dev/null
    BROKER_PID=""
}
trap stop_broker EXIT
trap 'exit 143' TERM INT

echo "\$ ${LINES[0]}"
# setsid: a process group of its own, so stop_broker reaches strata as well as cargo.
setsid bash -c "${LINES[0]%&*}" >"$WORK/broker.log" 2>&1 </dev/null &
BROKER_PID=$!

# The build is normally done already (./test.sh builds first); a cold one may take minutes.
up=0
for ((i = 0; i < 6000; i++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then up=1; break; fi
    kill -0 "$BROKER_PID" 2>/dev/null || break
    sleep 0.1
done
if [[ $up -ne 1 ]]; then
    tail -30 "$WORK/broker.log" >&2
    fail "the broker did not listen on localhost:$PORT (log above)"
fi
# Past the port: the broker may still be electing itself; ApiVersions answers once it serves.
"$ROOT/target/release/strata" healthcheck --bootstrap "127.0.0.1:$PORT" --timeout-ms 30000 >/dev/null 2>&1 ||
    fail "the broker did not answer a healthcheck within 30 s"

outputs=()
for ((n = 1; n < ${#LINES[@]}; n++)); do
    line="${LINES[$n]}"
    echo "\$ $line"
    out="$(timeout 60 bash -o pipefail -c "$line" 2>"$WORK/stderr.$n")"
    rc=$?
    echo "$out" | sed 's/^/  /'
    if [[ $rc -ne 0 ]]; then
        sed 's/^/  stderr: /' "$WORK/stderr.$n" >&2
        fail "line $n exited $rc: $line"
    fi
    outputs+=("$out")
done

all="$(printf '%s\n' "${outputs[@]}")"
grep -qE 'broker 1 at (localhost|127\.0\.0\.1):9092' <<<"$all" || fail "the metadata listing names no broker 1 at :9092"
grep -qE '^k1:hello \(partition [0-9]+, offset [0-9]+\)$' <<<"$all" || fail "the consumer did not print k1:hello"
grep -qE '^k2:world \(partition [0-9]+, offset [0-9]+\)$' <<<"$all" || fail "the consumer did not print k2:world"
# The console, where the block starts one (console.listener): its search finds k2's record.
if [[ "$first" == *console.listener=* ]]; then
    grep -q '"text":"world"' <<<"$all" || fail "the console's search did not find k2:world"
fi
stop_broker
echo "quickstart: ok (${#LINES[@]} lines of README.md run as written)"
