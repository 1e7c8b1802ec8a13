#!/usr/bin/env bash
# Installs what the Sarama scenario (scenario_sarama.py) needs: Go and Sarama as Debian packages
# them (the sources land under /usr/share/gocode; the scenario builds offline in GOPATH mode).
# Idempotent: exits 0 at once when both are installed; runs apt-get update only when not.
set -euo pipefail

PACKAGES=(golang-go golang-github-shopify-sarama-dev)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "[setup_sarama] already installed: ${PACKAGES[*]}"
    exit 0
fi

echo "[setup_sarama] installing: ${missing[*]}"
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 "${PACKAGES[@]}"
