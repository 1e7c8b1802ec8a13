# Shared by the docker/test-*.sh scripts (sourced, not run).

# Sets the array `compose` to the Compose command this machine has (`docker compose`, else
# docker-compose); exits if it has neither.
find_compose() {
    if docker compose version >/dev/null 2>&1; then
        compose=(docker compose)
    elif command -v docker-compose >/dev/null; then
        compose=(docker-compose)
    else
        echo "neither \`docker compose\` nor docker-compose is installed"
        exit 1
    fi
}

# Three free ports on 127.0.0.1 (bound and released at once, as the Rust tests do).
free_ports() {
    python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks:
    s.close()' "$1"
}

# Waits (at most $2 seconds) until container $1 reports healthy; fails if it stops.
wait_healthy() {
    local container=$1 limit=$2 start=$SECONDS status
    while :; do
        status=$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$container")
        case $status in
            "running healthy") return 0 ;;
            running*) ;;
            *) echo "FAIL: $container is $status"; docker logs --tail 40 "$container"; return 1 ;;
        esac
        if (( SECONDS - start >= limit )); then
            echo "FAIL: $container not healthy within ${limit}s ($status)"
            docker logs --tail 40 "$container"
            return 1
        fi
        sleep 1
    done
}

# Produces messages msg-000001..msg-N (N = $3) to topic $2 through bootstrap $1 with
# acks=all, keyed k0..k9 so that they spread over the partitions.
produce_numbered() {
    seq 1 "$3" | awk '{ printf "k%d:msg-%06d\n", $1 % 10, $1 }' |
        timeout 60 kcat -P -b "$1" -t "$2" -K: -X acks=all -X message.timeout.ms=30000
}

# Waits (at most 15 s) until the node at bootstrap $1 lists topic $2 with its partitions: a
# node learns of a topic another node created when its metadata log catches up, as a Kafka
# broker does, so a consumer that asks a third node at once may be told it is unknown.
wait_for_topic() {
    local i
    for i in $(seq 30); do
        if timeout 10 kcat -b "$1" -L -t "$2" -m 5 2>/dev/null | grep -q '^    partition 0,'; then
            return 0
        fi
        sleep 0.5
    done
    echo "FAIL: the node at $1 does not list topic $2 after 15 s"
    timeout 10 kcat -b "$1" -L -t "$2" -m 5 || true
    return 1
}

# Reads topic $2 through bootstrap $1 from the beginning to its end and checks that it holds
# exactly msg-000001..msg-N (N = $3), each once, in order within each partition.
check_numbered() {
    local out last
    last=$(printf 'msg-%06d' "$3")
    out=$(timeout 60 kcat -C -b "$1" -t "$2" -o beginning -e -q -f '%p %s\n') || {
        echo "FAIL: kcat could not read $2"; return 1; }
    local got want
    got=$(printf '%s\n' "$out" | awk 'NF' | cut -d' ' -f2 | sort | sha256sum)
    want=$(seq -f 'msg-%06g' 1 "$3" | sort | sha256sum)
    if [[ $got != "$want" ]]; then
        echo "FAIL: $2 does not hold exactly msg-000001..$last ($(printf '%s\n' "$out" | awk 'NF' | wc -l) messages read)"
        return 1
    fi
    # Within a partition, numbers only grow (kcat produced them in order).
    if ! printf '%s\n' "$out" | awk 'NF { n = substr($2, 5) + 0; if (($1 in last) && n <= last[$1]) bad = 1; last[$1] = n }
                                  END { exit bad }'; then
        echo "FAIL: $2 is out of order within a partition"
        return 1
    fi
    echo "ok: $2 holds msg-000001..$last, each once, in order per partition ($(printf '%s\n' "$out" | awk 'NF { print $1 }' | sort -u | wc -l) partitions)"
}

require_kcat() {
    command -v kcat >/dev/null || { echo "kcat is required (apt-get install -y kcat)"; exit 1; }
}
