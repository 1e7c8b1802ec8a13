#!/usr/bin/env bash
# Every Docker test, as ./test.sh runs them: builds strata:local offline once, then
# test-single.sh, test-compose.sh, test-compose-secured.sh and test-faults.sh (which ends
# with a rolling restart), each with --no-build. Stops at the first failure; each script cleans up after itself.
# Needs a running Docker engine and Compose (`docker compose` or docker-compose).
#
#     docker/test-all.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
started=$SECONDS
if ! docker info >/dev/null 2>&1; then
    echo "FAIL: no Docker engine answers (docker info); SKIP_DOCKER=1 ./test.sh skips these tests"
    exit 1
fi
"$root/docker/build-offline.sh" strata:local
for t in test-single.sh test-compose.sh test-compose-secured.sh test-faults.sh; do
    echo
    echo "==== docker/$t ===="
    "$root/docker/$t" --no-build
done
echo
echo "docker tests passed in $((SECONDS - started)) s"
