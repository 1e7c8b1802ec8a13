#!/bin/sh
# The guest's /init for tests/ktls/guest-test.sh (busybox sh; see that script). Prints
# "KTLS-GUEST: PASS" or "KTLS-GUEST: FAIL <why>" and powers the guest off.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
ip link set lo up
export OPENSSL_CONF=/usr/lib/ssl/openssl.cnf

result() {
    echo "KTLS-GUEST: $*"
    sync
    poweroff -f
    sleep 5
}
fail() {
    echo "---- strata log ----"
    tail -n 60 /tmp/strata.log 2>/dev/null
    result "FAIL $*"
}

for m in $(cat /modules/order); do
    insmod "/modules/$m.ko" 2>/tmp/insmod.err || echo "ktls-guest: insmod $m: $(cat /tmp/insmod.err)"
done
echo "ktls-guest: kernel $(uname -r), tcp_available_ulp: $(cat /proc/sys/net/ipv4/tcp_available_ulp)"

C=/certs
JAAS='org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
start_strata() {
    RUST_LOG=info,strata_broker::server::connection=debug NO_COLOR=1 strata \
        --override node.id=1 \
        --override log.dirs=/tmp/data \
        --override "listeners=PLAINTEXT://127.0.0.1:9092,TLS13://127.0.0.1:9093,TLS12://127.0.0.1:9094,CHACHA://127.0.0.1:9095,SASL_SSL://127.0.0.1:9096" \
        --override "advertised.listeners=PLAINTEXT://127.0.0.1:9092,TLS13://127.0.0.1:9093,TLS12://127.0.0.1:9094,CHACHA://127.0.0.1:9095,SASL_SSL://127.0.0.1:9096" \
        --override "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,TLS13:SSL,TLS12:SSL,CHACHA:SSL,SASL_SSL:SASL_SSL" \
        --override ssl.keystore.type=PEM \
        --override ssl.keystore.location=$C/server-keystore.pem \
        --override ssl.truststore.type=PEM \
        --override ssl.truststore.location=$C/ca.pem \
        --override listener.name.tls12.ssl.enabled.protocols=TLSv1.2 \
        --override listener.name.chacha.ssl.cipher.suites=TLS_CHACHA20_POLY1305_SHA256 \
        --override listener.name.sasl_ssl.ssl.client.auth=required \
        --override sasl.enabled.mechanisms=PLAIN \
        --override "listener.name.sasl_ssl.plain.sasl.jaas.config=$JAAS" \
        --override metrics.listener=http://127.0.0.1:9404/metrics \
        >/tmp/strata.log 2>&1 &
}
wait_for_strata() {
    i=0
    until kcat -b 127.0.0.1:9092 -L -m 2 >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 60 ] || fail "strata did not answer on 9092 within 60 s"
        sleep 1
    done
}
start_strata
wait_for_strata
grep -i "listening" /tmp/strata.log | sed 's/^/ktls-guest: /' | cut -c1-400

metric() { wget -qO- http://127.0.0.1:9404/metrics | awk -v m="$1" '$1 == m { print $2 }'; }

tls_opts() { # PORT
    case "$1" in
        9096) echo "-X security.protocol=SASL_SSL -X sasl.mechanisms=PLAIN -X sasl.username=alice -X sasl.password=alice-secret -X ssl.ca.location=$C/ca.pem -X ssl.certificate.location=$C/client.pem -X ssl.key.location=$C/client.key" ;;
        *) echo "-X security.protocol=SSL -X ssl.ca.location=$C/ca.pem" ;;
    esac
}

# 3000 small messages, then three of 900 KB: the large ones make fetch responses whose
# record regions are bigger than a socket buffer, so sendfile is resumed after partial writes.
seq 1 3000 | sed 's/$/ a line of text to fetch back through kernel TLS/' >/tmp/small.txt
head -c 2700000 /dev/urandom | base64 -w 900000 >/tmp/large.txt
[ "$(wc -l </tmp/large.txt)" -ge 3 ] || fail "could not make large messages"
cat /tmp/small.txt /tmp/large.txt >/tmp/expected.txt
want_bytes=$(wc -c </tmp/expected.txt)

for port in 9093 9094 9095 9096; do
    topic="t$port"
    # shellcheck disable=SC2046
    kcat -b 127.0.0.1:$port $(tls_opts $port) -X message.max.bytes=2000000 -P -t $topic -l /tmp/small.txt ||
        fail "produce of small messages on $port"
    # shellcheck disable=SC2046
    kcat -b 127.0.0.1:$port $(tls_opts $port) -X message.max.bytes=2000000 -P -t $topic -l /tmp/large.txt ||
        fail "produce of large messages on $port"
    # shellcheck disable=SC2046
    kcat -b 127.0.0.1:$port $(tls_opts $port) -X fetch.message.max.bytes=2000000 -C -t $topic -o beginning -e -q \
        >/tmp/got-$port.txt 2>/tmp/kcat-$port.err || fail "consume on $port: $(tail -n 3 /tmp/kcat-$port.err)"
    if ! cmp -s /tmp/expected.txt /tmp/got-$port.txt; then
        fail "port $port: consumed $(wc -c </tmp/got-$port.txt) bytes, $(wc -l </tmp/got-$port.txt) lines; expected $want_bytes bytes"
    fi
    echo "ktls-guest: port $port: $(wc -l </tmp/got-$port.txt) messages ($want_bytes bytes) back intact"
done

# The sessions' ciphers, as the broker logged them when handing each to the kernel.
grep 'kernel TLS session' /tmp/strata.log | grep -o 'cipher=[^ ]*' | sort | uniq -c | sed 's/^/ktls-guest: sessions handed to the kernel: /'
for c in TLS13_AES_256_GCM_SHA384 TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 TLS13_CHACHA20_POLY1305_SHA256; do
    grep 'kernel TLS session' /tmp/strata.log | grep -q "cipher=Some($c)" || fail "no session with $c was handed to the kernel"
done
grep -q 'listening.*listener=TLS13.*kernel TLS' /tmp/strata.log || fail "the TLS13 listener did not log kernel TLS"

ktls=$(metric strata_fetch_ktls_bytes_total)
user=$(metric strata_fetch_tls_bytes_total)
echo "ktls-guest: strata_fetch_ktls_bytes_total=$ktls strata_fetch_tls_bytes_total=$user (4 x $want_bytes bytes of values fetched)"
[ -n "$ktls" ] && [ "$ktls" -ge $((4 * want_bytes)) ] || fail "the kTLS fetch counter is $ktls"
[ "$user" = "0" ] || fail "fetches went through user-space TLS: $user bytes"

# A TLS 1.3 KeyUpdate ("k" in s_client) cannot be followed by the kernel: that connection is
# closed, and the broker keeps serving.
(echo k; sleep 3) | openssl s_client -connect 127.0.0.1:9093 -CAfile $C/ca.pem >/tmp/s_client.out 2>&1
grep -q "key update" /tmp/strata.log || fail "the KeyUpdate was not logged"
# shellcheck disable=SC2046
kcat -b 127.0.0.1:9093 $(tls_opts 9093) -C -t t9093 -o beginning -c 10 -q >/tmp/after.txt ||
    fail "consume after the KeyUpdate"
[ "$(wc -l </tmp/after.txt)" = 10 ] || fail "consume after the KeyUpdate got $(wc -l </tmp/after.txt) messages"
echo "ktls-guest: a KeyUpdate closed its connection only"

# --bench: the broker's CPU time per GB fetched over TLS 1.3 (AES-256-GCM), with the session
# in the kernel and then, after a restart with STRATA_KTLS=0, in user space.
if grep -q ktls_bench /proc/cmdline; then
    cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
    now_ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
    head -c 1000000 /dev/urandom | base64 -w 1000 | head -n 1000 >/tmp/kb.txt
    for i in $(seq 1 40); do cat /tmp/kb.txt; done >/tmp/bench.txt
    kcat -b 127.0.0.1:9092 -P -t bench -l /tmp/bench.txt -X linger.ms=50 || fail "bench produce"
    bench_bytes=$(wc -c </tmp/bench.txt)
    for mode in kernel user; do
        pid=$(pidof strata)
        for rep in 1 2 3; do
            t0=$(cpu_ticks "$pid"); s0=$(now_ms)
            # shellcheck disable=SC2046
            kcat -b 127.0.0.1:9093 $(tls_opts 9093) -C -t bench -o beginning -e -q >/dev/null ||
                fail "bench consume ($mode)"
            t1=$(cpu_ticks "$pid"); s1=$(now_ms)
            echo "ktls-bench: $mode TLS: $bench_bytes bytes fetched, broker CPU $(((t1 - t0) * 10)) ms, wall $((s1 - s0)) ms"
        done
        echo "ktls-bench: $mode counters: ktls=$(metric strata_fetch_ktls_bytes_total) user=$(metric strata_fetch_tls_bytes_total)"
        [ "$mode" = user ] && break
        kill "$pid"
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
        export STRATA_KTLS=0
        start_strata
        wait_for_strata
    done
fi

result PASS
