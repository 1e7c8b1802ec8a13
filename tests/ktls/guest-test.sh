#!/usr/bin/env bash
# Kernel TLS (kTLS) with real clients, in a virtual machine whose kernel has the `tls` module.
#
#   tests/ktls/guest-test.sh [--bench]
#
# The machines Strata is built and tested on may run a kernel without CONFIG_TLS (then every
# TLS session stays in user space, which the other suites cover). This test boots Debian's
# own kernel (linux-image-amd64, CONFIG_TLS=m) under qemu (emulated), from an initramfs holding busybox, the `strata` binary
# under test ($STRATA_BIN, else target/release/strata), kcat, openssl and the shared
# libraries they load. Inside the guest, tests/ktls/guest-init.sh (the guest's /init):
#
#   - loads the tls module and the crypto modules its ciphers need;
#   - starts strata with four TLS listeners: TLS 1.3 (AES-256-GCM, rustls's first choice),
#     TLS 1.2 only, TLS 1.3 with ChaCha20-Poly1305 only, and SASL_SSL (PLAIN) with client
#     certificates required;
#   - on each, produces messages with kcat (many small ones and a few of 900 KB) and
#     consumes them back, and compares what came back with what went in;
#   - sends a TLS 1.3 KeyUpdate from `openssl s_client`, which kernel TLS cannot follow:
#     that connection must be closed and the broker must go on serving;
#   - checks that strata logged kernel TLS on its listeners and that the kTLS fetch counter
#     (strata_fetch_ktls_bytes_total) grew by at least the bytes fetched, while the user-space
#     one (strata_fetch_tls_bytes_total) stayed at zero.
#
# --bench then measures the broker's CPU time per GB fetched over TLS 1.3, with the sessions
# in the kernel and, after a restart with STRATA_KTLS=0, in user space (docs/BENCHMARKS.md).
#
# The guest prints "KTLS-GUEST: PASS" or "KTLS-GUEST: FAIL <why>" on its serial console, which
# this script reads. Everything is made under target/ktls-guest; the kernel package is
# downloaded once (apt-get download) and kept there. Exit status: 0 on PASS, 1 otherwise.
# Needs root for apt-get when qemu-system-x86, busybox-static, kcat or openssl is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$ROOT/target/ktls-guest"
STRATA_BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
TIMEOUT="${KTLS_GUEST_TIMEOUT:-420}"
BENCH=""
if [[ "${1:-}" == --bench ]]; then
    BENCH=" ktls_bench=1"
    TIMEOUT=$((TIMEOUT + 600))
fi

log() { echo "ktls-guest: $*"; }
fail() { echo "ktls-guest: FAILED: $*" >&2; exit 1; }

[[ -x "$STRATA_BIN" ]] || fail "no strata binary at $STRATA_BIN (cargo build --release first)"

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[[ -x /bin/busybox ]] && /bin/busybox --list | grep -qx insmod || need+=(busybox-static)
command -v kcat >/dev/null || need+=(kcat)
command -v openssl >/dev/null || need+=(openssl)
if [[ ${#need[@]} -gt 0 ]]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$WORK"
# The kernel: the package linux-image-amd64 depends on, unpacked once.
kernel_dir="$WORK/kernel"
if [[ ! -f "$kernel_dir/ok" ]]; then
    rm -rf "$kernel_dir"
    mkdir -p "$kernel_dir"
    kernel_package() {
        apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
    }
    pkg="$(kernel_package)"
    if [[ -z "$pkg" ]] || ! (cd "$kernel_dir" && apt-get download -q "$pkg" >/dev/null 2>&1); then
        # No package lists yet, or stale ones naming a kernel no longer served.
        apt-get update -qq
        pkg="$(kernel_package)"
        [[ -n "$pkg" ]] || fail "cannot find Debian's kernel package (linux-image-amd64)"
        (cd "$kernel_dir" && apt-get download -q "$pkg" >/dev/null 2>&1) ||
            fail "apt-get download $pkg failed"
    fi
    log "downloaded $pkg"
    dpkg-deb -x "$kernel_dir"/linux-image-*.deb "$kernel_dir/root"
    rm -f "$kernel_dir"/linux-image-*.deb
    touch "$kernel_dir/ok"
fi
vmlinuz="$(ls "$kernel_dir"/root/boot/vmlinuz-* | head -n1)"
moddir="$(ls -d "$kernel_dir"/root/lib/modules/* | head -n1)"
grep -q '^CONFIG_TLS=[ym]' "$kernel_dir"/root/boot/config-* || fail "the kernel has no CONFIG_TLS"

# The initramfs.
rootfs="$WORK/rootfs"
rm -rf "$rootfs"
mkdir -p "$rootfs"/{bin,lib,lib64,modules,proc,sys,dev,tmp,etc,certs}
cp /bin/busybox "$rootfs/bin/busybox"
for applet in $(/bin/busybox --list); do
    [[ "$applet" == busybox ]] || ln -sf busybox "$rootfs/bin/$applet"
done
copy_with_libs() { # BINARY NAME
    cp "$1" "$rootfs/bin/$2"
    ldd "$1" | awk '$1 ~ /^\// { print $1 } $3 ~ /^\// { print $3 }' | while read -r lib; do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done
}
copy_with_libs "$STRATA_BIN" strata
copy_with_libs "$(command -v kcat)" kcat
copy_with_libs "$(command -v openssl)" openssl
# OpenSSL's providers and configuration, where the binary looks for them.
for d in /usr/lib/x86_64-linux-gnu/ossl-modules /usr/lib/ssl; do
    [[ -d "$d" ]] && mkdir -p "$rootfs$d" && cp -rL "$d/." "$rootfs$d/" 2>/dev/null || true
done

# The modules: tls, and the templates its ciphers are built from, with their dependencies in
# load order (read from each module's own depends= field).
declare -A loaded=()
: >"$rootfs/modules/order"
add_module() { # NAME
    local name="${1//-/_}" file deps d
    [[ -n "${loaded[$name]:-}" ]] && return 0
    loaded[$name]=1
    file="$(find "$moddir/kernel" -name "$name.ko*" -o -name "${1}.ko*" | head -n1)"
    if [[ -z "$file" ]]; then
        # Built into the kernel (modules.builtin) or absent: nothing to load.
        return 0
    fi
    deps="$(strings "$file" | sed -n 's/^depends=//p' | head -n1)"
    for d in ${deps//,/ }; do add_module "$d"; done
    case "$file" in
        *.xz) xz -dc "$file" >"$rootfs/modules/$name.ko" ;;
        *.zst) zstd -qdc "$file" >"$rootfs/modules/$name.ko" ;;
        *) cp "$file" "$rootfs/modules/$name.ko" ;;
    esac
    echo "$name" >>"$rootfs/modules/order"
}
for m in gf128mul ghash-generic ctr gcm aesni-intel chacha_generic poly1305_generic \
    chacha20poly1305 chacha-x86_64 poly1305-x86_64 tls; do
    add_module "$m"
done

tests/make-certs.sh "$rootfs/certs" >/dev/null
cp "$ROOT/tests/ktls/guest-init.sh" "$rootfs/init"
chmod +x "$rootfs/init"
(cd "$rootfs" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$WORK/initrd.gz"
log "initramfs: $(du -h "$WORK/initrd.gz" | cut -f1), kernel $(basename "$vmlinuz"), modules: $(tr '\n' ' ' <"$rootfs/modules/order")"

# Emulated (TCG): KVM is not used, because where this machine is itself a virtual machine
# the nested guest can hang in early boot (seen here: nothing after the BIOS). The guest
# boots in about 10 s emulated.
accel=(-machine accel=tcg -cpu max)
out="$WORK/console.log"
start=$SECONDS
set +e
timeout --kill-after=10s "$TIMEOUT" qemu-system-x86_64 "${accel[@]}" -m 2048 -smp 2 \
    -nographic -no-reboot -nodefaults -serial stdio \
    -kernel "$vmlinuz" -initrd "$WORK/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3$BENCH" </dev/null >"$out" 2>&1
rc=$?
set -e
log "guest ran $((SECONDS - start)) s (qemu exit $rc)"
tr -d '\r' <"$out" | grep -E '^(ktls|KTLS)' || true
if tr -d '\r' <"$out" | grep -q '^KTLS-GUEST: PASS'; then
    exit 0
fi
echo "---- guest console (last 150 lines) ----"
tr -d '\r' <"$out" | tail -n 150
fail "the guest did not report PASS"
