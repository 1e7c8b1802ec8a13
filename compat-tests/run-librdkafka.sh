#!/usr/bin/env bash
# Runs librdkafka's own test suite (2.12.1, from the rdkafka-sys 4.10.0+2.12.1 crate) against a
# real Strata broker and writes compat-tests/RESULTS.md.
#
#   compat-tests/run-librdkafka.sh [--tier1 | --all | --tests 0001,0002] [options]
#
#   --tier1            the tests in ../shared/compat/librdkafka-tier1.txt, or
#                      compat-tests/librdkafka-tier1.txt if present (default); with
#                      --cluster 3 or more, also compat-tests/librdkafka-tier1-cluster.txt
#   --all              every numbered test in librdkafka's tests/ directory, minus
#                      compat-tests/librdkafka-skip.txt (listed tests are reported as skipped)
#   --tests LIST       only these test numbers (comma or space separated)
#   --broker HOST:PORT use an already running broker (debugging: re-run one test, read its
#                      log); nothing is started or restarted, RESULTS.md is not touched
#   --cluster N        run against N combined nodes (broker and controller) on 127.0.0.1
#                      instead of one, as librdkafka's own test clusters are set up (its
#                      default scenario: auto-created topics of 4 partitions, replication
#                      factor 3): default.replication.factor=min(N,3); results and logs go to
#                      target/compat/results-cluster/ (RESULTS-tier1.md for --tier1)
#   --timeout SECS     per-test wall-clock limit (default 300); a test listed in
#                      compat-tests/librdkafka-timeouts.txt gets its listed limit if longer
#   --budget SECS      stop starting new tests after this many seconds (default: none);
#                      the rest are reported as "not run"
#   --results FILE     where to write the table (default: compat-tests/RESULTS.md for --all,
#                      target/compat/results/RESULTS-tier1.md for --tier1, so CI does not
#                      rewrite the committed table, and .../RESULTS-partial.md otherwise)
#   --from NNNN        skip the selected tests numbered below NNNN (split a long run)
#   --except LIST      leave these test numbers out of the selection (comma separated)
#   --sasl-ssl         clients connect over SASL_SSL (the test authority of
#                      tests/make-certs.sh, SCRAM-SHA-256 as user `testuser`, or the mechanism
#                      in COMPAT_SASL_MECHANISM: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), with
#                      connections.max.reauth.ms=10000 so that every session re-authenticates
#                      (KIP-368) while the tests run; the tests in
#                      compat-tests/librdkafka-tier1-sasl.txt join tier 1 (0135; 0142 with
#                      --cluster 3, as it needs replication factor 3). Each
#                      node keeps a PLAINTEXT listener, LOCAL, for `strata admin`, which adds
#                      the SCRAM user; a --cluster's nodes replicate over SASL_SSL (PLAIN, as
#                      User:broker), and its quorum over PLAINTEXT. Results and logs go to
#                      target/compat/results-sasl_ssl/ (or results-cluster-sasl_ssl/)
#   --keep             keep the broker's data directory
#   --build-only       build librdkafka and its test runner into target/compat and stop (so
#                      that two runs can then go side by side without racing to build it)
#
# Env: STRATA_BIN (default target/release/strata; built if missing), COMPAT_DIR (default
#      target/compat), COMPAT_RESULTS_DIR (default target/compat/results). Per-test logs and JSON reports: target/compat/results/<NNNN>.{log,json};
#      broker log: target/compat/results/broker.log.
#
# Pass/fail comes from the runner's JSON report (TEST_REPORT): a test passes when every
# sub-test it ran PASSED; a missing report (abort, timeout) is a failure. A broker that died
# during a test is restarted and recorded as a broker crash (always a bug).
# Exit status: 1 if any tier-1 test failed (or, with --tests/--broker, any selected test).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$ROOT/compat-tests"
COMPAT_DIR="${COMPAT_DIR:-$ROOT/target/compat}"
SRC_DIR="$COMPAT_DIR/librdkafka"
RES_DIR="${COMPAT_RESULTS_DIR:-$COMPAT_DIR/results}"
mkdir -p "$RES_DIR" && RES_DIR="$(cd "$RES_DIR" && pwd)"
mkdir -p "$COMPAT_DIR" && COMPAT_DIR="$(cd "$COMPAT_DIR" && pwd)" && SRC_DIR="$COMPAT_DIR/librdkafka"
CRATE="rdkafka-sys-4.10.0+2.12.1"
BUILD_CMD='./configure --no-download --enable-ssl --disable-gssapi --disable-curl && make -j2 libs && make -j2 -C tests build'
STAMP="$SRC_DIR/.strata-compat-build-stamp"
STAMP_WANT="$CRATE | $BUILD_CMD"

FROM=0 MODE=tier1 TEST_LIST="" EXCEPT="" EXT_BROKER="" PER_TEST_TIMEOUT=300 BUDGET=0 RESULTS="" KEEP=0 CLUSTER=0 SASL_SSL=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --tier1) MODE=tier1 ;;
        --all) MODE=all ;;
        --tests) MODE=list; TEST_LIST="${2:?--tests needs a list}"; shift ;;
        --broker) EXT_BROKER="${2:?--broker needs HOST:PORT}"; shift ;;
        --timeout) PER_TEST_TIMEOUT="${2:?}"; shift ;;
        --budget) BUDGET="${2:?}"; shift ;;
        --results) RESULTS="${2:?}"; shift ;;
        --from) FROM="${2:?--from needs a test number}"; shift ;;
        --except) EXCEPT="${2:?--except needs a list}"; shift ;;
        --keep) KEEP=1 ;;
        --build-only) MODE=build ;;
        --cluster) CLUSTER="${2:?--cluster needs a node count}"; shift
            [[ "$CLUSTER" =~ ^[1-9]$ ]] || { echo "--cluster takes 1 to 9 nodes" >&2; exit 2; } ;;
        --sasl-ssl) SASL_SSL=1 ;;
        -h|--help) sed -n '2,50p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
    shift
done

# A cluster run, and a SASL_SSL run, keep their logs and results apart from the single
# PLAINTEXT node's.
if [[ ($CLUSTER -gt 0 || $SASL_SSL -eq 1) && -z "${COMPAT_RESULTS_DIR:-}" ]]; then
    RES_DIR="$COMPAT_DIR/results$([[ $CLUSTER -gt 0 ]] && echo -cluster)$([[ $SASL_SSL -eq 1 ]] && echo -sasl_ssl)"
    mkdir -p "$RES_DIR"
fi
SASL_MECHANISM="${COMPAT_SASL_MECHANISM:-SCRAM-SHA-256}"
SASL_USER=testuser SASL_PASSWORD=testuser-secret

log() { echo "[compat] $*"; }

# ---- tier-1 and skip lists --------------------------------------------------------------------

tier1_file() {
    if [[ -f "$HERE/librdkafka-tier1.txt" ]]; then echo "$HERE/librdkafka-tier1.txt"
    else echo "$ROOT/../shared/compat/librdkafka-tier1.txt"; fi
}
TIER1="$(grep -v '^#' "$(tier1_file)" 2>/dev/null | grep -oE '[0-9]{4}' | sort -u | tr '\n' ' ')"
# Tests that need replication factor 3 join tier 1 on a cluster of at least three nodes.
# (The skip file lists them for a single node.)
CLUSTER_TIER1=""
if [[ $CLUSTER -ge 3 && -f "$HERE/librdkafka-tier1-cluster.txt" ]]; then
    CLUSTER_TIER1="$(grep -v '^#' "$HERE/librdkafka-tier1-cluster.txt" | grep -oE '[0-9]{4}' | sort -u | tr '\n' ' ')"
    TIER1="$TIER1 $CLUSTER_TIER1"
fi
# The SASL tests (skipped by the runner over PLAINTEXT) join tier 1 over SASL_SSL.
SASL_TIER1=""
if [[ $SASL_SSL -eq 1 && -f "$HERE/librdkafka-tier1-sasl.txt" ]]; then
    SASL_TIER1="$(awk -v nodes="$CLUSTER" '/^[0-9]{4}/ && ($2 != "cluster" || nodes >= 3) { print $1 }' \
        "$HERE/librdkafka-tier1-sasl.txt" | sort -u | tr '\n' ' ')"
    TIER1="$TIER1 $SASL_TIER1"
fi
[[ -n "$TIER1" ]] || { echo "no tier-1 list found ($(tier1_file))" >&2; exit 2; }
is_tier1() { [[ " $TIER1 " == *" $1 "* ]]; }

# Diagnosed root causes of known failures (NNNN <cause>): shown next to a failing test's row.
declare -A KNOWN_CAUSE=()
if [[ -f "$HERE/librdkafka-known-failures.txt" ]]; then
    while IFS= read -r line; do
        [[ "$line" =~ ^([0-9]{4})[[:space:]]+(.*)$ ]] || continue
        KNOWN_CAUSE["${BASH_REMATCH[1]}"]="${BASH_REMATCH[2]}"
    done <"$HERE/librdkafka-known-failures.txt"
fi

# Tests that need longer than the per-test limit by their own design (NNNN SECS <why>).
declare -A TEST_TIMEOUT=()
if [[ -f "$HERE/librdkafka-timeouts.txt" ]]; then
    while IFS= read -r line; do
        [[ "$line" =~ ^([0-9]{4})[[:space:]]+([0-9]+)([[:space:]]|$) ]] || continue
        TEST_TIMEOUT["${BASH_REMATCH[1]}"]="${BASH_REMATCH[2]}"
    done <"$HERE/librdkafka-timeouts.txt"
fi

declare -A SKIP_REASON=()
if [[ -f "$HERE/librdkafka-skip.txt" ]]; then
    while IFS= read -r line; do
        [[ "$line" =~ ^([0-9]{4})[[:space:]]+(.*)$ ]] || continue
        SKIP_REASON["${BASH_REMATCH[1]}"]="${BASH_REMATCH[2]}"
    done <"$HERE/librdkafka-skip.txt"
fi
for t in $CLUSTER_TIER1 $SASL_TIER1; do unset "SKIP_REASON[$t]"; done

# ---- librdkafka source and build (cached) -----------------------------------------------------

ensure_apt_deps() {
    local missing=() p
    for p in libzstd-dev liblz4-dev rapidjson-dev gcc g++ make pkg-config libssl-dev zlib1g-dev python3 coreutils; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    log "installing: ${missing[*]}"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

find_crate_src() {
    local d
    for d in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$CRATE"/librdkafka; do
        [[ -f "$d/configure" ]] && { echo "$d"; return 0; }
    done
    return 1
}

ensure_built() {
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$STAMP_WANT" && -x "$SRC_DIR/tests/test-runner" ]]; then
        log "librdkafka build cached: $SRC_DIR"
        return 0
    fi
    ensure_apt_deps || return 1
    local src
    if ! src="$(find_crate_src)"; then
        log "fetching $CRATE into the cargo registry"
        (cd "$ROOT" && cargo fetch -q) || return 1
        src="$(find_crate_src)" || { echo "$CRATE not in the cargo registry" >&2; return 1; }
    fi
    log "copying $src -> $SRC_DIR and building (about 3-5 minutes on 2 cores)"
    rm -rf "$SRC_DIR" && mkdir -p "$COMPAT_DIR" && cp -a "$src" "$SRC_DIR" || return 1
    chmod -R u+w "$SRC_DIR"
    (cd "$SRC_DIR" && eval "$BUILD_CMD") >"$COMPAT_DIR/build.log" 2>&1 || {
        echo "librdkafka build failed; see $COMPAT_DIR/build.log" >&2; tail -20 "$COMPAT_DIR/build.log" >&2; return 1; }
    echo "$STAMP_WANT" >"$STAMP"
}

# ---- test selection ---------------------------------------------------------------------------

all_tests() {
    find "$SRC_DIR/tests" -maxdepth 1 -regextype posix-extended -regex '.*/[0-9]{4}-[^/]*\.(c|cpp)' \
        -printf '%f\n' | cut -c1-4 | sort -u | tr '\n' ' '
}

# ---- broker -----------------------------------------------------------------------------------

# One node, or CLUSTER combined nodes: node i (0-based) has BROKER_PIDS[i], PORTS[i] (client),
# CPORTS[i] (controller), DATA_DIRS[i] and its log in LOGS[i]; BROKER_ADDR lists every client
# address. Ports and data directories are kept across a restart of the node.
# With --sasl-ssl, PORTS[i] is the SASL_SSL listener and APORTS[i] the PLAINTEXT one (LOCAL),
# whose addresses ADMIN_ADDR lists (else ADMIN_ADDR is BROKER_ADDR).
declare -a BROKER_PIDS=() PORTS=() CPORTS=() APORTS=() DATA_DIRS=() LOGS=()
BROKER_ADDR="" ADMIN_ADDR="" BROKER_LOG="$RES_DIR/broker.log" CRASHES=0
CERTS="$RES_DIR/certs"
NODES=1
[[ $CLUSTER -gt 0 ]] && NODES=$CLUSTER

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() { # wait_port PORT SECS PID
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        kill -0 "$3" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

start_node() { # start_node I
    local i=$1
    # librdkafka's test clusters (tests/scenarios/default.json) auto-create topics with 4
    # partitions; tests such as 0012 produce to partitions 0..3 of an auto-created topic.
    local extra=(--override num.partitions=4)
    # group.initial.rebalance.delay.ms: Kafka's default (3000) unless COMPAT_REBALANCE_DELAY_MS
    # is set. Not 0: 0118 relies on two consumers created together joining the same first
    # generation, which the delay provides; with 0 the first one gets every partition alone and
    # the test's revoke-then-commit happens at the wrong moment (its commit succeeds).
    if [[ -n "${COMPAT_REBALANCE_DELAY_MS:-}" ]] &&
        grep -q '"group.initial.rebalance.delay.ms"' "$ROOT/broker/src/config.rs" 2>/dev/null; then
        extra+=(--override "group.initial.rebalance.delay.ms=$COMPAT_REBALANCE_DELAY_MS")
    fi
    # 0081's ACL sub-tests and 0109, 0115 and 0119 (through kafka-acls.sh) need the ACL APIs,
    # which answer SECURITY_DISABLED without an authorizer, and bindings that are enforced.
    # With allow.everyone.if.no.acl.found=true a resource without bindings stays open, so
    # every other test runs as it would without an authorizer.
    if grep -q '"authorizer.class.name"' "$ROOT/broker/src/config.rs" 2>/dev/null; then
        extra+=(--override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
            --override allow.everyone.if.no.acl.found=true)
    fi
    [[ -n "${PORTS[$i]:-}" ]] || PORTS[i]="$(free_port)"
    [[ -n "${DATA_DIRS[$i]:-}" ]] || DATA_DIRS[i]="$(mktemp -d "$COMPAT_DIR/broker-data.XXXXXX")"
    local listeners="PLAINTEXT://127.0.0.1:${PORTS[$i]}"
    local advertised="$listeners"
    if [[ $SASL_SSL -eq 1 ]]; then
        # Clients on SASL_SSL, and `strata admin` over LOCAL (PLAINTEXT). The nodes of a
        # cluster replicate over SASL_SSL too, logging in with PLAIN as User:broker and
        # verifying each other's certificates; the quorum keeps its PLAINTEXT listener.
        [[ -n "${APORTS[$i]:-}" ]] || APORTS[i]="$(free_port)"
        listeners="SASL_SSL://127.0.0.1:${PORTS[$i]},LOCAL://127.0.0.1:${APORTS[$i]}"
        advertised="$listeners"
        local jaas="org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER=\"$SASL_PASSWORD\";"
        local inter_broker=LOCAL
        if [[ $CLUSTER -gt 0 ]]; then
            inter_broker=SASL_SSL
            jaas="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" password=\"broker-secret\" user_broker=\"broker-secret\" user_$SASL_USER=\"$SASL_PASSWORD\";"
            extra+=(--override sasl.mechanism.inter.broker.protocol=PLAIN
                --override ssl.truststore.type=PEM
                --override "ssl.truststore.location=$CERTS/ca.pem"
                --override super.users=User:broker)
        fi
        extra+=(--override "listener.security.protocol.map=SASL_SSL:SASL_SSL,LOCAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
            --override "inter.broker.listener.name=$inter_broker"
            --override ssl.keystore.type=PEM
            --override "ssl.keystore.location=$CERTS/server-keystore.pem"
            --override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
            --override "listener.name.sasl_ssl.plain.sasl.jaas.config=$jaas"
            --override connections.max.reauth.ms=10000)
    fi
    if [[ $CLUSTER -gt 0 ]]; then
        # Combined nodes of one quorum, as config/cluster/ sets them up; replication factor 3
        # (or the node count, if smaller) as librdkafka's own clusters.
        local voters="" n
        for ((n = 0; n < NODES; n++)); do voters+="${voters:+,}$((n + 1))@127.0.0.1:${CPORTS[$n]}"; done
        listeners+=",CONTROLLER://127.0.0.1:${CPORTS[$i]}"
        extra+=(--override process.roles=broker,controller --override "node.id=$((i + 1))"
            --override controller.listener.names=CONTROLLER
            --override "controller.quorum.voters=$voters"
            --override "default.replication.factor=$((NODES < 3 ? NODES : 3))")
    fi
    LOGS[i]="$BROKER_LOG"
    [[ $CLUSTER -gt 0 ]] && LOGS[i]="$RES_DIR/broker-$((i + 1)).log"
    echo "---- start $(date -u +%FT%TZ) port ${PORTS[$i]}" >>"${LOGS[$i]}"
    "$STRATA_BIN" --override "listeners=$listeners" \
        --override "advertised.listeners=$advertised" \
        --override "log.dirs=${DATA_DIRS[$i]}" "${extra[@]}" >>"${LOGS[$i]}" 2>&1 &
    BROKER_PIDS[i]=$!
    wait_port "${PORTS[$i]}" 30 "${BROKER_PIDS[$i]}" ||
        { echo "node $((i + 1)) did not come up; see ${LOGS[$i]}" >&2; return 1; }
    log "node $((i + 1)) pid ${BROKER_PIDS[$i]} on 127.0.0.1:${PORTS[$i]}, data ${DATA_DIRS[$i]}"
}

# Waits (at most 60 s) until Metadata through the first node lists every node as a broker.
wait_cluster() {
    local i
    for ((i = 0; i < 600; i++)); do
        kcat -b "$ADMIN_ADDR" -m 5 -L 2>/dev/null | grep -q "^ $NODES brokers:" && return 0
        sleep 0.1
    done
    echo "the $NODES nodes did not all register within 60 s; see $RES_DIR/broker-*.log" >&2
    return 1
}

start_broker() {
    local i
    if [[ $CLUSTER -gt 0 ]]; then
        for ((i = 0; i < NODES; i++)); do [[ -n "${CPORTS[$i]:-}" ]] || CPORTS[i]="$(free_port)"; done
    fi
    if [[ $SASL_SSL -eq 1 && ! -f "$CERTS/server-keystore.pem" ]]; then
        "$ROOT/tests/make-certs.sh" "$CERTS" >/dev/null || { echo "tests/make-certs.sh failed" >&2; return 1; }
    fi
    BROKER_ADDR="" ADMIN_ADDR=""
    for ((i = 0; i < NODES; i++)); do
        start_node "$i" || return 1
        BROKER_ADDR+="${BROKER_ADDR:+,}127.0.0.1:${PORTS[$i]}"
        ADMIN_ADDR+="${ADMIN_ADDR:+,}127.0.0.1:${APORTS[$i]:-${PORTS[$i]}}"
    done
    [[ $CLUSTER -eq 0 ]] || wait_cluster || return 1
    [[ $SASL_SSL -eq 0 ]] || add_scram_user
}

# The SASL_SSL run's SCRAM credentials (both hashes), through LOCAL; bounded retries while the
# node finishes starting.
add_scram_user() {
    local m i
    for m in SCRAM-SHA-256 SCRAM-SHA-512; do
        for ((i = 0; i < 50; i++)); do
            "$STRATA_BIN" admin --bootstrap-server "$ADMIN_ADDR" users add --user "$SASL_USER" \
                --password "$SASL_PASSWORD" --mechanism "$m" >/dev/null 2>&1 && break
            sleep 0.2
        done
        ((i < 50)) || { echo "could not add the SCRAM user ($m)" >&2; return 1; }
    done
}

# Restarts every node that died; returns 1 (and sets DIED) when one had.
restart_dead() {
    local i rc=0
    DIED=""
    for ((i = 0; i < NODES; i++)); do
        if ! kill -0 "${BROKER_PIDS[$i]}" 2>/dev/null; then
            wait "${BROKER_PIDS[$i]}" 2>/dev/null
            DIED+="node $((i + 1)) (exit $?) "
            start_node "$i" || { echo "node $((i + 1)) restart failed" >&2; exit 2; }
            rc=1
        fi
    done
    [[ $rc -eq 0 || $CLUSTER -eq 0 ]] || wait_cluster
    return $rc
}

stop_broker() {
    local i j
    for ((i = 0; i < ${#BROKER_PIDS[@]}; i++)); do
        kill -TERM "${BROKER_PIDS[$i]}" 2>/dev/null
    done
    for ((i = 0; i < ${#BROKER_PIDS[@]}; i++)); do
        for ((j = 0; j < 300; j++)); do kill -0 "${BROKER_PIDS[$i]}" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "${BROKER_PIDS[$i]}" 2>/dev/null
        wait "${BROKER_PIDS[$i]}" 2>/dev/null
    done
    BROKER_PIDS=()
    if [[ $KEEP -eq 0 ]]; then
        for d in "${DATA_DIRS[@]}"; do rm -rf "$d"; done
    fi
}

# ---- running one test -------------------------------------------------------------------------

# run_one NNNN -> sets R_STATE (pass|fail|skip), R_REASON, R_DUR
run_one() {
    local t="$1" json="$RES_DIR/$1.json" out="$RES_DIR/$1.log" rc start limit="$PER_TEST_TIMEOUT"
    if [[ -n "${TEST_TIMEOUT[$1]:-}" ]] && ((TEST_TIMEOUT[$1] > limit)); then limit="${TEST_TIMEOUT[$1]}"; fi
    rm -f "$json"
    start=$(date +%s%N)
    (cd "$SRC_DIR/tests" && KAFKA_PATH="$KAFKA_STUB" BROKERS="$ADMIN_ADDR" TESTS="$t" TEST_KAFKA_VERSION=3.9.0 TEST_REPORT="$json" \
        RDKAFKA_TEST_CONF="$RES_DIR/test.conf" LD_LIBRARY_PATH="$SRC_DIR/src:$SRC_DIR/src-cpp" \
        timeout -k 10 "$limit" stdbuf -oL -eL ./test-runner -p1 </dev/null >"$out" 2>&1)
    rc=$?
    local ms=$((($(date +%s%N) - start) / 1000000))
    R_DUR="$((ms / 1000)).$(((ms % 1000) / 100))"
    local parsed
    parsed="$(python3 - "$json" "$out" "$rc" <<'EOF'
import json, re, sys
path, logp, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    log = re.sub(r"\x1b\[[0-9;]*m", "", open(logp, errors="replace").read())
except OSError:
    log = ""
def first(pats):
    for p in pats:
        m = re.search(p, log)
        if m and m.group(1).strip():
            return m.group(1).strip()[:200]
    return ""
try:
    rep = json.load(open(path))
except Exception:
    if rc == 124 or rc == 137:
        print("fail\ttimeout (no report); " + first([r'### Test "[^"]+" failed[^\n]*\n([^\n]+)']))
    else:
        print("fail\tno report (exit %d, aborted?): %s" % (rc, first([r'### Test "[^"]+" failed[^\n]*\n([^\n]+)', r"(Assertion[^\n]+)"])))
    sys.exit()
tests = [v for k, v in rep.get("tests", {}).items() if k != "<MAIN>"]
failed = [v for v in tests if v["state"] in ("FAILED", "RUNNING")]
passed = [v for v in tests if v["state"] == "PASSED"]
if failed:
    why = first([r"\|\s*[0-9][^|<]*\|\s*FAILED\s*\|[^|]*\|[ \t]*([^\n]+)", r'### Test "[^"]+" failed[^\n]*\n([^\n]+)'])
    print("fail\t" + (why or ", ".join(v["name"] + " " + v["state"] for v in failed)))
elif passed:
    print("pass\t")
else:
    why = first([r"SKIPPING TEST: ([^\n]+)", r"(requires test scenario [^\n]+)", r"(not applicable for broker version [^\n]+)", r"\| *SKIPPED *\|[^|]*\|([^\n]+)"])
    print("skip\t" + (why or "skipped by the runner (no sub-test ran)"))
EOF
)"
    R_STATE="${parsed%%$'\t'*}"
    R_REASON="${parsed#*$'\t'}"
    if [[ $R_STATE == skip && $R_REASON == "skipped by the runner (no sub-test ran)" ]]; then
        local scen
        scen="$(grep -A4 "_TEST(${t}_" "$SRC_DIR/tests/test.c" | grep -o 'scenario = "[a-z]*"' | head -1)"
        [[ -z "$scen" ]] || R_REASON="needs the test ${scen//\"/} (this run uses the default scenario)"
    fi
    R_REASON="${R_REASON//|/\\|}"
}

# ---- main -------------------------------------------------------------------------------------

# Wrapped in a function so that bash parses the whole file before running it.
main() {

mkdir -p "$RES_DIR"
ensure_built || exit 2
[[ $MODE != build ]] || exit 0

case "$MODE" in
    tier1) SELECTED="$TIER1" ;;
    all) SELECTED="$(all_tests)" ;;
    list)
        SELECTED=""
        for n in $(echo "$TEST_LIST" | tr ',' ' '); do
            [[ "$n" =~ ^[0-9]{1,4}$ ]] || { echo "not a test number: $n" >&2; exit 2; }
            SELECTED+="$(printf '%04d' "$((10#$n))") " # 10#: 0118 is not octal
        done ;;
esac
for n in $(echo "$EXCEPT" | tr ',' ' '); do
    [[ "$n" =~ ^[0-9]{1,4}$ ]] || { echo "not a test number: $n" >&2; exit 2; }
    SELECTED="$(tr ' ' '\n' <<<"$SELECTED" | grep -vx "$(printf '%04d' "$((10#$n))")" | tr '\n' ' ')"
done
if [[ -z "$RESULTS" ]]; then
    case "$MODE" in
        all) RESULTS="$HERE/RESULTS.md"; [[ $CLUSTER -eq 0 ]] || RESULTS="$RES_DIR/RESULTS-all.md" ;;
        tier1) RESULTS="$RES_DIR/RESULTS-tier1.md" ;;
        *) RESULTS="$RES_DIR/RESULTS-partial.md" ;;
    esac
    [[ -z "$EXT_BROKER" ]] || RESULTS="$RES_DIR/RESULTS-partial.md"
fi

if [[ -n "$EXT_BROKER" ]]; then
    BROKER_ADDR="$EXT_BROKER" ADMIN_ADDR="$EXT_BROKER"
else
    STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
    [[ "$STRATA_BIN" == /* ]] || STRATA_BIN="$PWD/$STRATA_BIN"
    if [[ ! -x "$STRATA_BIN" ]]; then
        log "building $STRATA_BIN"
        (cd "$ROOT" && cargo build --release --bin strata) || exit 2
    fi
    : >"$BROKER_LOG"
    rm -f "$RES_DIR"/broker-*.log
    # The traps go first: a start that fails part-way (a node that does not come up, or a
    # cluster that does not register) still stops the nodes it did start.
    trap 'stop_broker' EXIT
    trap 'exit 143' TERM INT
    start_broker || exit 2
fi

cat >"$RES_DIR/test.conf" <<EOF
bootstrap.servers=$BROKER_ADDR
broker.address.family=v4
# Each test gets topics of its own, so the tests do not see each other's data.
test.topic.random=true
# A shared 2-core machine: give the runner's own timeouts some slack.
test.timeout.multiplier=2
EOF
if [[ $SASL_SSL -eq 1 ]]; then
    cat >>"$RES_DIR/test.conf" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=$SASL_MECHANISM
sasl.username=$SASL_USER
sasl.password=$SASL_PASSWORD
ssl.ca.location=$CERTS/ca.pem
EOF
fi

# 0052 and 0077 run Kafka's bin/kafka-topics.sh through KAFKA_PATH: point it at our stand-in,
# a wrapper around the broker binary's `strata admin kafka-topics` (the same binary, so
# STRATA_BIN is exported to it).
KAFKA_STUB="$HERE/kafka-stub"
export STRATA_BIN

declare -a ROWS=()
NPASS=0 NFAIL=0 NSKIP=0 NNOTRUN=0 T1FAIL=0 ANYFAIL=0 FLAKY=0
RUN_START=$SECONDS
for t in $SELECTED; do
    [[ $((10#$t)) -ge $((10#$FROM)) ]] || continue
    tier=""; is_tier1 "$t" && tier="tier 1"
    if [[ $MODE != list && -n "${SKIP_REASON[$t]:-}" ]]; then
        ROWS+=("| $t | skip | $tier | - | listed: ${SKIP_REASON[$t]} |"); NSKIP=$((NSKIP + 1))
        is_tier1 "$t" && { T1FAIL=1; log "$t is tier 1 but listed in the skip file"; }
        continue
    fi
    if [[ $BUDGET -gt 0 && $((SECONDS - RUN_START)) -ge $BUDGET ]]; then
        ROWS+=("| $t | not run | $tier | - | time budget ($BUDGET s) used up |"); NNOTRUN=$((NNOTRUN + 1))
        is_tier1 "$t" && T1FAIL=1
        continue
    fi
    run_one "$t"
    crash=""
    if [[ -z "$EXT_BROKER" ]] && ! restart_dead; then
        CRASHES=$((CRASHES + 1))
        crash="BROKER CRASHED during this test: ${DIED}restarted. "
        log "broker died during $t: ${DIED}restarted"
    fi
    if [[ -n "$crash" && $R_STATE == pass ]]; then R_STATE=fail; fi
    # A tier-1 failure with the broker still up is run once more (COMPAT_RETRY=0 disables it):
    # librdkafka's runner itself occasionally crashes while closing consumers (0018, see
    # librdkafka-known-failures.txt). A pass on retry is reported as flaky, never hidden.
    if [[ $R_STATE != pass && $R_STATE != skip && -z "$crash" && "${COMPAT_RETRY:-1}" == 1 ]] && is_tier1 "$t"; then
        first_reason="$R_REASON"
        log "$t failed ($first_reason); running it once more (first run's log: $t.first-run.log)"
        cp -f "$RES_DIR/$t.log" "$RES_DIR/$t.first-run.log" 2>/dev/null
        run_one "$t"
        if [[ $R_STATE == pass ]]; then
            R_REASON="flaky: passed on retry; first run: $first_reason"
            FLAKY=$((FLAKY + 1))
        fi
    fi
    case "$R_STATE" in
        pass) NPASS=$((NPASS + 1)) ;;
        skip) NSKIP=$((NSKIP + 1)) ;;
        *) R_STATE=fail; NFAIL=$((NFAIL + 1)); ANYFAIL=1; is_tier1 "$t" && T1FAIL=1 ;;
    esac
    if [[ $R_STATE == fail && -n "${KNOWN_CAUSE[$t]:-}" ]]; then
        R_REASON="known cause: ${KNOWN_CAUSE[$t]} -- runner: $R_REASON"
    fi
    log "$t ${R_STATE^^} (${R_DUR}s) $crash$R_REASON"
    ROWS+=("| $t | $R_STATE | $tier | ${R_DUR}s | $crash$R_REASON |")
done

# The "Client-library scenarios" section (between its marker comments) belongs to
# compat-tests/scenarios/run.sh: carry it over unchanged, so re-running either tool keeps the
# other's rows.
SCENARIOS_BLOCK=""
if [[ -f "$RESULTS" ]]; then
    SCENARIOS_BLOCK="$(sed -n '/^<!-- client-library-scenarios:begin -->$/,/^<!-- client-library-scenarios:end -->$/p' "$RESULTS")"
fi
{
    echo "# librdkafka test suite against Strata"
    echo
    echo "Generated by \`compat-tests/run-librdkafka.sh $( [[ $MODE == list ]] && echo "--tests $TEST_LIST" || echo "--$MODE")$( [[ $CLUSTER -gt 0 ]] && echo " --cluster $CLUSTER")$( [[ $SASL_SSL -eq 1 ]] && echo " --sasl-ssl")\`"
    [[ $SASL_SSL -eq 0 ]] || echo "over SASL_SSL ($SASL_MECHANISM, connections.max.reauth.ms=10000)"
    [[ $CLUSTER -eq 0 ]] || echo "against $CLUSTER combined nodes (default.replication.factor=$((NODES < 3 ? NODES : 3)))"
    echo "on $(date -u +%F) against librdkafka 2.12.1 ($CRATE), full mode (not -Q),"
    echo "TEST_KAFKA_VERSION=3.9.0, per-test timeout ${PER_TEST_TIMEOUT}s (longer for the tests in \`compat-tests/librdkafka-timeouts.txt\`), runner timeout multiplier 2."
    echo "Skip reasons for listed tests: \`compat-tests/librdkafka-skip.txt\`. Per-test logs: \`target/compat/results/\`."
    echo
    echo "**Totals: $NPASS passed, $NFAIL failed, $NSKIP skipped, $NNOTRUN not run, of $(wc -w <<<"$SELECTED") selected; passed only on retry (flaky): $FLAKY; broker crashes: $CRASHES.**"
    echo
    echo "| test | result | tier | duration | reason |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
    if [[ -n "$SCENARIOS_BLOCK" ]]; then
        echo
        printf '%s\n' "$SCENARIOS_BLOCK"
    fi
} >"$RESULTS.tmp.$$" && mv -f "$RESULTS.tmp.$$" "$RESULTS"
log "totals: $NPASS passed, $NFAIL failed, $NSKIP skipped, $NNOTRUN not run, $FLAKY flaky; broker crashes: $CRASHES"
log "results: $RESULTS"

if [[ $MODE == tier1 || $MODE == all ]]; then
    [[ $T1FAIL -eq 0 && $CRASHES -eq 0 ]] || exit 1
else
    [[ $ANYFAIL -eq 0 && $CRASHES -eq 0 ]] || exit 1
fi
return 0
}

# One line, so bash has read all of it before main runs (editing the file mid-run is safe).
main; exit $?
