#!/usr/bin/env bash
# Stand-in for Kafka's bin/kafka-topics.sh, for the librdkafka tests that shell out to it
# through KAFKA_PATH (0052, 0077), and for scripts written against Kafka's tool. A thin
# wrapper around the release strata binary's admin CLI (`strata admin kafka-topics`), which
# takes Kafka's argument forms:
#   --bootstrap-server HOST:PORT (--create --topic T [--partitions N] [--replication-factor R]
#   [--config k=v]... | --delete --topic T | --alter --topic T [--partitions N] [--config k=v]...
#   | --list | --describe [--topic T]) [--if-exists] [--if-not-exists]
# The binary is $STRATA_BIN, else the workspace's target/release/strata.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
BIN="${STRATA_BIN:-$ROOT/target/release/strata}"
if [ ! -x "$BIN" ]; then
    echo "kafka-topics.sh: $BIN not found (cargo build --release --bin strata, or set STRATA_BIN)" >&2
    exit 1
fi
exec "$BIN" admin kafka-topics "$@"
