#!/usr/bin/env bash
# Builds the Strata image with no registry: the release binary comes from cargo (the
# workspace's target/ cache), and docker/Dockerfile.offline starts FROM scratch, so nothing
# is pulled.
#
#     docker/build-offline.sh [tag]        # default tag: strata:local
#     STRATA_BIN=target/release/strata docker/build-offline.sh   # package a built binary
#
# The image holds the binary (debug info stripped), the shared libraries `ldd` lists for it
# and the dynamic loader, /etc/passwd and /etc/group with the non-root user `strata`
# (1000:1000), docker/server.properties as /etc/strata/server.properties, and an empty
# data directory owned by that user.
set -euo pipefail

tag=${1:-strata:local}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# STRATA_BIN (as ./test.sh exports it): that binary, already built, is packaged as it is.
# `cargo build --bin strata` alone resolves the workspace's features differently from the
# workspace build and would compile a second copy of the dependencies.
if [[ -n ${STRATA_BIN:-} && -x ${STRATA_BIN} ]]; then
    bin=$STRATA_BIN
    echo "== packaging $bin"
else
    echo "== cargo build --release --bin strata"
    cargo build --release --bin strata
    bin="$root/target/release/strata"
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/strata-image.XXXXXX")
trap 'rm -rf "$stage"' EXIT
rootfs="$stage/rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/strata" "$rootfs/tmp" "$stage/data"
chmod 1777 "$rootfs/tmp"

objcopy --strip-debug "$bin" "$rootfs/usr/local/bin/strata"
cp docker/server.properties "$rootfs/etc/strata/server.properties"

# Every shared object the binary loads, at the path the loader looks for it, and the loader
# itself (the `/lib64/ld-linux-x86-64.so.2` line has no `=>`).
ldd "$bin" | awk '/=> \// { print $3 } /^[[:space:]]*\// { print $1 }' | sort -u | while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
done

cat >"$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
strata:x:1000:1000:strata:/var/lib/strata:/sbin/nologin
PASSWD
cat >"$rootfs/etc/group" <<'GROUP'
root:x:0:
strata:x:1000:
GROUP

cp docker/Dockerfile.offline "$stage/Dockerfile"
echo "== docker build -t $tag (FROM scratch, context $(du -sh "$stage" | cut -f1))"
docker build -t "$tag" "$stage"
docker image ls "$tag"
