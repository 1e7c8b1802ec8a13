#!/usr/bin/env bash
# Installs and builds the three OLD clients of the client-library scenarios, unpatched:
#
#   kafka-python-2.0.2       kafka-python 2.0.2 (PyPI) in its own venv, target/venv-kafka-python-2.0.2,
#                            made with a Python <= 3.11 (2.0.2's vendored six does not import on 3.12+)
#   confluent-kafka-debian   Debian's python3-confluent-kafka (1.7.0 on bookworm) on Debian's
#                            librdkafka1 (2.0.2), run with /usr/bin/python3
#   kcat-librdkafka-1.9.2    Debian's kcat (1.7.1) on librdkafka 1.9.2, built from the vendored
#                            source of the crates.io crate rdkafka-sys 4.3.0+1.9.2 into
#                            target/compat/librdkafka-1.9.2 (LD_LIBRARY_PATH=<that>/src)
#
#   compat-tests/scenarios/setup_old_clients.sh [CLIENT...]    (default: all three)
#
# Idempotent: what is already in place is checked, not redone (about a second when warm). apt-get
# update runs only when a Debian package is missing; pip installs from PyPI only; the crate comes
# through `cargo fetch` in a scratch project (target/compat/old-librdkafka-fetch) and its
# librdkafka directory is copied out of the cargo registry before building (never built in
# place). Cold, with the Debian packages present: about 2.5 minutes on 2 cores (146 s measured,
# with another build running), nearly all of it librdkafka's `make -j2 libs`; warm: about 1 s.
# Env: OLD_KAFKA_PYTHON: the Python for the kafka-python venv (default: the first of python3,
#      /usr/bin/python3 that is older than 3.12).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ALL="kafka-python-2.0.2 confluent-kafka-debian kcat-librdkafka-1.9.2"
CLIENTS=("$@")
[[ ${#CLIENTS[@]} -gt 0 ]] || read -r -a CLIENTS <<<"$ALL"

KP_VERSION=2.0.2
KP_VENV="$ROOT/target/venv-kafka-python-$KP_VERSION"
RDK_CRATE=rdkafka-sys RDK_CRATE_VERSION=4.3.0 RDK_VERSION=1.9.2
RDK_FETCH="$ROOT/target/compat/old-librdkafka-fetch"
RDK_DIR="$ROOT/target/compat/librdkafka-$RDK_VERSION"
RDK_CONFIGURE=(--no-download --disable-gssapi --disable-curl)

log() { echo "[setup_old_clients] $*"; }
die() { echo "[setup_old_clients] error: $*" >&2; exit 1; }
want() { [[ " ${CLIENTS[*]} " == *" $1 "* ]]; }

for c in "${CLIENTS[@]}"; do
    [[ " $ALL " == *" $c "* ]] || die "unknown client $c (know: $ALL)"
done

# ---- Debian packages --------------------------------------------------------------------------

# A Python older than 3.12 that can make a venv with pip.
venv_python() {
    local py
    for py in ${OLD_KAFKA_PYTHON:-} python3 /usr/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || continue
        "$py" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info >= (3, 12))' 2>/dev/null || continue
        command -v "$py"
        return 0
    done
    return 1
}

packages=()
# Debian's python3 (3.11 on bookworm) needs python3-venv for a venv with pip.
want kafka-python-2.0.2 && ! venv_python >/dev/null && packages+=(python3-venv)
want confluent-kafka-debian && packages+=(python3 python3-confluent-kafka librdkafka1)
want kcat-librdkafka-1.9.2 && packages+=(kcat gcc g++ make perl pkg-config python3 libssl-dev zlib1g-dev libzstd-dev liblz4-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    log "installing Debian packages: ${missing[*]}"
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o DPkg::Lock::Timeout=300 "${missing[@]}"
fi

# ---- kafka-python 2.0.2 -----------------------------------------------------------------------

setup_kafka_python() {
    local check="import kafka, sys; sys.exit(kafka.__version__ != '$KP_VERSION')"
    if [[ -x "$KP_VENV/bin/python" ]] && "$KP_VENV/bin/python" -c "$check" 2>/dev/null; then
        return 0
    fi
    local py
    py="$(venv_python)" || die "no Python older than 3.12 with venv and ensurepip (kafka-python $KP_VERSION needs one); set OLD_KAFKA_PYTHON"
    log "making $KP_VENV with $py ($("$py" -V 2>&1)), kafka-python==$KP_VERSION from PyPI"
    rm -rf "$KP_VENV"
    "$py" -m venv "$KP_VENV"
    "$KP_VENV/bin/python" -m pip install -q --disable-pip-version-check "kafka-python==$KP_VERSION"
    "$KP_VENV/bin/python" -c "$check" || die "kafka-python $KP_VERSION did not install into $KP_VENV"
}

# ---- librdkafka 1.9.2 -------------------------------------------------------------------------

# The crate's unpacked source directory in the cargo registry (fetched if not there yet).
crate_dir() {
    mkdir -p "$RDK_FETCH/src"
    cat >"$RDK_FETCH/Cargo.toml" <<EOF
# Scratch project of setup_old_clients.sh: fetches $RDK_CRATE $RDK_CRATE_VERSION (librdkafka $RDK_VERSION).
[package]
name = "old-librdkafka-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$RDK_CRATE = "=$RDK_CRATE_VERSION"

[workspace]
EOF
    [[ -f "$RDK_FETCH/src/main.rs" ]] || echo 'fn main() {}' >"$RDK_FETCH/src/main.rs"
    (cd "$RDK_FETCH" && cargo fetch -q) >&2
    (cd "$RDK_FETCH" && cargo metadata -q --format-version 1) | python3 -c '
import json, os, sys
name, version = sys.argv[1], sys.argv[2]
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == name and p["version"].split("+")[0] == version:
        print(os.path.dirname(p["manifest_path"]))
        break
else:
    sys.exit(f"{name} {version} not in cargo metadata")
' "$RDK_CRATE" "$RDK_CRATE_VERSION"
}

setup_librdkafka() {
    local stamp="$RDK_DIR/.setup-old-clients-built" want_stamp
    want_stamp="librdkafka $RDK_VERSION from $RDK_CRATE $RDK_CRATE_VERSION; configure ${RDK_CONFIGURE[*]}; make libs"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" && -f "$RDK_DIR/src/librdkafka.so.1" ]]; then
        return 0
    fi
    local src
    src="$(crate_dir)/librdkafka"
    [[ -x "$src/configure" ]] || die "no librdkafka source at $src"
    log "copying $src to $RDK_DIR and building it (configure ${RDK_CONFIGURE[*]}; make -j2 libs: a few minutes)"
    rm -rf "$RDK_DIR" "$RDK_DIR.tmp"
    mkdir -p "$(dirname "$RDK_DIR")"
    cp -a "$src" "$RDK_DIR.tmp"
    chmod -R u+w "$RDK_DIR.tmp"
    mv "$RDK_DIR.tmp" "$RDK_DIR"
    # Logs beside the tree, not in it: mklove takes any ./configure.* file for a module.
    (cd "$RDK_DIR" && ./configure "${RDK_CONFIGURE[@]}" >"$RDK_DIR.configure.out" 2>&1) ||
        { tail -30 "$RDK_DIR.configure.out" >&2; die "configure failed; see $RDK_DIR.configure.out"; }
    (cd "$RDK_DIR" && make -j2 libs >"$RDK_DIR.make.out" 2>&1) ||
        { tail -30 "$RDK_DIR.make.out" >&2; die "make failed; see $RDK_DIR.make.out"; }
    echo "$want_stamp" >"$stamp"
}

# ---- main -------------------------------------------------------------------------------------

start=$SECONDS
if want kafka-python-2.0.2; then
    setup_kafka_python
    log "kafka-python-2.0.2: kafka-python $("$KP_VENV/bin/python" -c 'import kafka; print(kafka.__version__)') on $("$KP_VENV/bin/python" -V 2>&1) in $KP_VENV"
    log "  run: $KP_VENV/bin/python -B -u $HERE/scenario_kafka_python_2_0_2.py --bootstrap HOST:PORT --results FILE"
fi
if want confluent-kafka-debian; then
    v="$(/usr/bin/python3 -c 'import confluent_kafka as c; print(f"confluent-kafka {c.version()[0]} (librdkafka {c.libversion()[0]})")')" ||
        die "/usr/bin/python3 cannot import confluent_kafka (python3-confluent-kafka)"
    log "confluent-kafka-debian: $v on /usr/bin/python3 ($(/usr/bin/python3 -V 2>&1))"
    log "  run: STRATA_DATA_DIR=LOG_DIRS /usr/bin/python3 -B -u $HERE/scenario_confluent_kafka_debian.py --bootstrap HOST:PORT --results FILE"
fi
if want kcat-librdkafka-1.9.2; then
    setup_librdkafka
    v="$(LD_LIBRARY_PATH="$RDK_DIR/src" kcat -V | sed -nE "s/^Version ([^ ]+) .*(librdkafka [0-9.]+).*/\1 on \2/p")"
    [[ "$v" == *"librdkafka $RDK_VERSION"* ]] || die "kcat with LD_LIBRARY_PATH=$RDK_DIR/src reports: $v"
    log "kcat-librdkafka-1.9.2: kcat $v, LD_LIBRARY_PATH=$RDK_DIR/src"
    log "  run (broker with num.partitions=6): STRATA_DATA_DIR=LOG_DIRS LD_LIBRARY_PATH=$RDK_DIR/src python3 -B -u $HERE/scenario_kcat_librdkafka_1_9_2.py --bootstrap HOST:PORT --results FILE"
fi
log "done in $((SECONDS - start))s"
