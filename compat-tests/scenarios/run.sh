#!/usr/bin/env bash
# Runs the client-library scenarios (confluent-kafka, kafka-python, aiokafka, kcat, sarama and
# the old clients kafka-python-2.0.2, confluent-kafka-debian, kcat-librdkafka-1.9.2), each
# against a fresh Strata broker of its own, and records one row per client and step.
#
#   compat-tests/scenarios/run.sh [--clients LIST] [--markdown FILE | --no-markdown] [options]
#
#   --clients LIST   comma separated, from: confluent-kafka,kafka-python,aiokafka,kcat,sarama,
#                    kafka-python-2.0.2,confluent-kafka-debian,kcat-librdkafka-1.9.2 (default:
#                    all eight)
#   --markdown FILE  the Markdown file whose "Client-library scenarios" section (between marker
#                    comments) is rewritten (default: compat-tests/RESULTS.md); the rest of the
#                    file is left alone
#   --no-markdown    only write the TSV
#   --tsv FILE       machine-readable results (default: target/compat/scenarios.tsv); columns
#                    client, step, result (pass|fail|skip|n/a), seconds, detail
#   --timeout SECS   wall-clock limit for one client's whole scenario (default 600)
#   --setup-timeout SECS   wall-clock limit for one client's setup script (default 1200)
#   --no-setup       do not run the setup scripts (a client missing what it needs then fails)
#
# Setup: before its broker starts, each client that needs one runs its setup script (idempotent,
# about a second when everything is in place): sarama runs setup_sarama.sh (Debian's Go and
# Sarama), the old clients setup_old_clients.sh CLIENT (kafka-python 2.0.2's venv, Debian's
# python3-confluent-kafka, librdkafka 1.9.2 built for kcat). A setup that fails or times out
# gives that client a failed row for every step (its output: <client>.setup.log).
#
# Env: STRATA_BIN (default target/release/strata; built if missing), COMPAT_PYTHON (default
#      target/venv/bin/python, the venv test.sh builds), KCAT (default kcat).
# Pythons: kafka-python-2.0.2 runs with target/venv-kafka-python-2.0.2/bin/python,
#      confluent-kafka-debian with /usr/bin/python3, the others with $COMPAT_PYTHON.
#      confluent-kafka-debian and kcat-librdkafka-1.9.2 get STRATA_DATA_DIR (the broker's
#      log.dirs, to check stored codecs) and kcat-librdkafka-1.9.2 LD_LIBRARY_PATH (the
#      librdkafka 1.9.2 build), on the scenario's command line only: never the broker's.
# Logs: target/compat/scenarios/<client>.log (client output), <client>.broker.log (broker),
#      <client>.setup.log (setup script).
# Python runs with -B: no __pycache__ in the source tree.
#
# Each client gets a broker on a free 127.0.0.1 port with its own temporary data directory; it
# is stopped (SIGTERM, then SIGKILL) when that client is done, and on any exit (trap). A broker
# that died during a scenario is recorded as a failed "broker" row: always a bug.
# Exit status: 1 if any step failed (skip and n/a do not fail the run), 2 on setup errors.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ALL_CLIENTS="confluent-kafka,kafka-python,aiokafka,kcat,sarama,kafka-python-2.0.2,confluent-kafka-debian,kcat-librdkafka-1.9.2"
CLIENTS="$ALL_CLIENTS" MARKDOWN="$ROOT/compat-tests/RESULTS.md" TSV="$ROOT/target/compat/scenarios.tsv"
SCENARIO_TIMEOUT=600 SETUP_TIMEOUT=1200 SETUP=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --clients) CLIENTS="${2:?--clients needs a list}"; shift ;;
        --markdown) MARKDOWN="${2:?--markdown needs a file}"; shift ;;
        --no-markdown) MARKDOWN="" ;;
        --tsv) TSV="${2:?--tsv needs a file}"; shift ;;
        --timeout) SCENARIO_TIMEOUT="${2:?}"; shift ;;
        --setup-timeout) SETUP_TIMEOUT="${2:?}"; shift ;;
        --no-setup) SETUP="" ;;
        -h|--help) sed -n '2,/^set -uo/{/^set -uo/d;p}' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
    shift
done

log() { echo "[scenarios] $*"; }

LOG_DIR="$ROOT/target/compat/scenarios"
PY="${COMPAT_PYTHON:-$ROOT/target/venv/bin/python}"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
[[ "$STRATA_BIN" == /* ]] || STRATA_BIN="$PWD/$STRATA_BIN"
KP_2_0_2_PYTHON="$ROOT/target/venv-kafka-python-2.0.2/bin/python"
DEBIAN_PYTHON=/usr/bin/python3
RDK_1_9_2_LIB="$ROOT/target/compat/librdkafka-1.9.2/src"

# ---- per client -------------------------------------------------------------------------------

# client_python CLIENT: the Python its scenario runs with.
client_python() {
    case "$1" in
        kafka-python-2.0.2) echo "$KP_2_0_2_PYTHON" ;;
        confluent-kafka-debian) echo "$DEBIAN_PYTHON" ;;
        *) echo "$PY" ;;
    esac
}

# client_steps CLIENT: the steps its scenario reports (scenario.py's eight, and "compression"
# for the two on old librdkafka, which check the codecs of the stored batches).
client_steps() {
    echo create-topic list-topics describe-configs produce group-consume committed-offsets latest-group delete-topic
    case "$1" in confluent-kafka-debian | kcat-librdkafka-1.9.2) echo compression ;; esac
}

# client_setup CLIENT: sets SETUP_CMD to the command that installs what it needs (empty: none).
client_setup() {
    SETUP_CMD=()
    case "$1" in
        sarama) SETUP_CMD=("$HERE/setup_sarama.sh") ;;
        kafka-python-2.0.2 | confluent-kafka-debian | kcat-librdkafka-1.9.2) SETUP_CMD=("$HERE/setup_old_clients.sh" "$1") ;;
    esac
}

# ---- broker -----------------------------------------------------------------------------------

BROKER_PID="" BROKER_PORT="" DATA_DIR="" BROKER_LOG=""

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_broker LOG [--override k=v]...: a fresh broker on a free port with a new data directory.
start_broker() {
    BROKER_LOG="$1"; shift
    BROKER_PORT="$(free_port)"
    DATA_DIR="$(mktemp -d "${TMPDIR:-/tmp}/strata-scenario.XXXXXX")"
    NO_COLOR=1 RUST_LOG="${RUST_LOG:-info}" "$STRATA_BIN" \
        --override "listeners=PLAINTEXT://127.0.0.1:$BROKER_PORT" \
        --override "advertised.listeners=PLAINTEXT://127.0.0.1:$BROKER_PORT" \
        --override "log.dirs=$DATA_DIR" "$@" >"$BROKER_LOG" 2>&1 </dev/null &
    BROKER_PID=$!
    local i
    for ((i = 0; i < 300; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$BROKER_PORT") 2>/dev/null && return 0
        kill -0 "$BROKER_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "broker did not come up within 30s; see $BROKER_LOG" >&2
    tail -20 "$BROKER_LOG" >&2
    return 1
}

stop_broker() {
    [[ -n "$BROKER_PID" ]] || return 0
    kill -TERM "$BROKER_PID" 2>/dev/null
    local i
    for ((i = 0; i < 300; i++)); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$BROKER_PID" 2>/dev/null
    wait "$BROKER_PID" 2>/dev/null
    BROKER_PID=""
    [[ -z "$DATA_DIR" ]] || rm -rf "$DATA_DIR"
    DATA_DIR=""
}

# ---- one client -------------------------------------------------------------------------------

# run_client CLIENT: starts its broker, runs its scenario (appending rows to $RUN_TSV), stops it.
run_client() {
    local client="$1" script overrides=() python setup
    script="$HERE/scenario_${client//[-.]/_}.py"
    # kcat has no admin API: its topic is auto-created on produce, with 6 partitions.
    [[ $client == kcat* ]] && overrides+=(--override num.partitions=6)
    local client_log="$LOG_DIR/$client.log" setup_log="$LOG_DIR/$client.setup.log" start=$SECONDS rc=0
    : >"$client_log"
    rm -f "$setup_log"
    client_setup "$client"
    setup="${SETUP_CMD[*]#"$HERE/"}"
    if [[ -n "$SETUP" && ${#SETUP_CMD[@]} -gt 0 ]]; then
        timeout -k 10 "$SETUP_TIMEOUT" "${SETUP_CMD[@]}" >"$setup_log" 2>&1 </dev/null || rc=$?
        if [[ $rc -ne 0 ]]; then
            local why="setup failed: $setup exited $rc"
            [[ $rc -eq 124 || $rc -eq 137 ]] && why="setup timed out: $setup ran over ${SETUP_TIMEOUT}s"
            log "$client: $why; log tail ($setup_log):"
            tail -15 "$setup_log" | sed 's/^/  /'
            local tail_
            tail_="$(tail -c 300 "$setup_log" | tr '\t\n' '  ')"
            fill_missing "$client" "$why${tail_:+: $tail_}"
            log "$client: done in $((SECONDS - start))s"
            return
        fi
        log "$client: setup ok in $((SECONDS - start))s ($(tail -1 "$setup_log"))"
    fi
    python="$(client_python "$client")"
    if ! start_broker "$LOG_DIR/$client.broker.log" "${overrides[@]}"; then
        printf '%s\tbroker\tfail\t0.0\tbroker did not start (see %s)\n' "$client" "$LOG_DIR/$client.broker.log" >>"$RUN_TSV"
        stop_broker
        return
    fi
    log "$client: broker pid $BROKER_PID on 127.0.0.1:$BROKER_PORT, data $DATA_DIR"
    local before
    before="$(cut -f1 "$RUN_TSV" | grep -cx -- "$client")"
    # Environment only the scenario sees (the broker reads STRATA_* variables as its config).
    local scenario_env=(KCAT="${KCAT:-kcat}")
    case "$client" in
        confluent-kafka-debian) scenario_env+=(STRATA_DATA_DIR="$DATA_DIR") ;;
        kcat-librdkafka-1.9.2) scenario_env+=(STRATA_DATA_DIR="$DATA_DIR" LD_LIBRARY_PATH="$RDK_1_9_2_LIB") ;;
    esac
    (cd "$HERE" && env "${scenario_env[@]}" timeout -k 10 "$SCENARIO_TIMEOUT" "$python" -B -u "$script" \
        --bootstrap "127.0.0.1:$BROKER_PORT" --results "$RUN_TSV" --topic "scenario-$client") \
        >"$client_log" 2>&1 </dev/null || rc=$?
    grep "^\[$client\]" "$client_log" | sed 's/^/  /'
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        log "$client: scenario timed out after ${SCENARIO_TIMEOUT}s"
        fill_missing "$client" "scenario timed out after ${SCENARIO_TIMEOUT}s"
    elif [[ "$(cut -f1 "$RUN_TSV" | grep -cx -- "$client")" -eq "$before" ]]; then
        fill_missing "$client" "scenario exited $rc without results: $(tail -c 300 "$client_log" | tr '\t\n' '  ')"
    else
        # A scenario that died part-way (a crash in a client library) leaves steps unreported.
        fill_missing "$client" "scenario exited $rc before reporting this step: $(tail -c 200 "$client_log" | tr '\t\n' '  ')"
    fi
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then
        wait "$BROKER_PID" 2>/dev/null
        local crash_rc=$?
        printf '%s\tbroker\tfail\t0.0\tBROKER CRASHED (exit %s) during the scenario; see %s\n' \
            "$client" "$crash_rc" "$LOG_DIR/$client.broker.log" >>"$RUN_TSV"
        BROKER_PID=""
    fi
    stop_broker
    if awk -F'\t' -v c="$client" '$1 == c && $3 == "fail" { found = 1 } END { exit !found }' "$RUN_TSV"; then
        log "$client: failures; broker log tail ($LOG_DIR/$client.broker.log):"
        grep -E 'WARN|ERROR|panic' "$LOG_DIR/$client.broker.log" | tail -15 | sed 's/^/  /'
    fi
    log "$client: done in $((SECONDS - start))s"
}

# fill_missing CLIENT WHY: a fail row for each step the scenario did not report.
fill_missing() {
    local step
    for step in $(client_steps "$1"); do
        awk -F'\t' -v c="$1" -v s="$step" '$1 == c && $2 == s { found = 1 } END { exit !found }' "$RUN_TSV" ||
            printf '%s\t%s\tfail\t0.0\t%s\n' "$1" "$step" "$2" >>"$RUN_TSV"
    done
}

# kcat_version: "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)" -> "1.7.1
# (librdkafka 2.0.2)", for the kcat and librdkafka that $KCAT finds (LD_LIBRARY_PATH counts).
kcat_version() {
    "${KCAT:-kcat}" -V 2>/dev/null | sed -nE 's/^Version ([^ ]+) .*librdkafka ([0-9.]+).*/\1 (librdkafka \2)/p' | head -1
}

# client_versions: the versions of every client that is installed, this run's or not (the
# Markdown section keeps the rows of clients the run did not cover), joined by ", ".
client_versions() {
    local parts=() v
    v="$("$PY" - <<'EOF' 2>/dev/null
from importlib.metadata import version
import confluent_kafka
print(f"confluent-kafka {version('confluent-kafka')} (librdkafka {confluent_kafka.libversion()[0]}), "
      f"kafka-python {version('kafka-python')}, aiokafka {version('aiokafka')}", end="")
EOF
)" && parts+=("$v")
    v="$(kcat_version)" && [[ -n "$v" ]] && parts+=("kcat $v")
    v="$(dpkg-query -W -f='${Version}' golang-github-shopify-sarama-dev 2>/dev/null)" && [[ -n "$v" ]] &&
        parts+=("Sarama ${v%-*} (Debian's golang-github-shopify-sarama-dev $v; $(go version 2>/dev/null | awk '{print $3}'))")
    v="$("$KP_2_0_2_PYTHON" -c 'import kafka, sys; print(f"kafka-python {kafka.__version__} (Python {sys.version.split()[0]})")' 2>/dev/null)" &&
        parts+=("kafka-python-2.0.2: $v")
    v="$("$DEBIAN_PYTHON" -c 'import confluent_kafka as c; print(f"confluent-kafka {c.version()[0]} (Debian, librdkafka {c.libversion()[0]})")' 2>/dev/null)" &&
        parts+=("confluent-kafka-debian: $v")
    v="$(LD_LIBRARY_PATH="$RDK_1_9_2_LIB" kcat_version)" && [[ "$v" == *"librdkafka 1.9.2"* ]] &&
        parts+=("kcat-librdkafka-1.9.2: kcat $v")
    local out="" p
    for p in "${parts[@]}"; do out+="${out:+, }$p"; done
    echo -n "$out"
}

# ---- main -------------------------------------------------------------------------------------

main() {
    local c
    for c in ${CLIENTS//,/ }; do
        [[ ",$ALL_CLIENTS," == *",$c,"* ]] || { echo "unknown client: $c (know $ALL_CLIENTS)" >&2; exit 2; }
    done
    [[ -x "$PY" ]] || { echo "no Python at $PY (./test.sh builds target/venv; or set COMPAT_PYTHON)" >&2; exit 2; }
    if [[ ! -x "$STRATA_BIN" ]]; then
        log "building $STRATA_BIN"
        (cd "$ROOT" && cargo build --release --bin strata) || exit 2
    fi
    mkdir -p "$LOG_DIR" "$(dirname "$TSV")"
    [[ -z "$MARKDOWN" ]] || mkdir -p "$(dirname "$MARKDOWN")"
    RUN_TSV="$(mktemp "$LOG_DIR/run.XXXXXX.tsv")"
    trap 'stop_broker; rm -f "$RUN_TSV"' EXIT
    trap 'exit 143' TERM INT

    local total_start=$SECONDS
    for c in ${CLIENTS//,/ }; do
        run_client "$c"
    done

    local md_args=()
    [[ -z "$MARKDOWN" ]] || md_args=(--markdown "$MARKDOWN")
    (cd "$HERE" && "$PY" -B results_md.py --run "$RUN_TSV" --tsv "$TSV" --clients "$CLIENTS" \
        --versions "$(client_versions)" "${md_args[@]}") || { echo "writing results failed" >&2; exit 2; }

    local npass nfail nna nskip
    npass="$(awk -F'\t' '$3 == "pass"' "$RUN_TSV" | wc -l)"
    nfail="$(awk -F'\t' '$3 == "fail"' "$RUN_TSV" | wc -l)"
    nna="$(awk -F'\t' '$3 == "n/a"' "$RUN_TSV" | wc -l)"
    nskip="$(awk -F'\t' '$3 == "skip"' "$RUN_TSV" | wc -l)"
    log "totals: $npass passed, $nfail failed, $nna n/a, $nskip skipped in $((SECONDS - total_start))s"
    log "results: $TSV${MARKDOWN:+ and $MARKDOWN}"
    [[ $nfail -eq 0 ]]
}

# One line, so bash has read all of it before main runs (editing the file mid-run is safe).
main; exit $?
