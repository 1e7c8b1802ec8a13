#!/usr/bin/env bash
# Makes a throwaway certificate authority and certificates for TLS tests and the secured
# Docker Compose cluster, offline, with openssl:
#
#   tests/make-certs.sh DIR [HOST...]
#
# DIR/ca.pem, ca.key                  the authority (clients' ssl.ca.location)
# DIR/server.pem, server.key          the brokers' certificate, for localhost, 127.0.0.1 and
#                                     each HOST given (e.g. the Compose services' names)
# DIR/server-keystore.pem             server key and chain in one file (ssl.keystore.type=PEM)
# DIR/server.p12                      the same as PKCS12, password "strata-test"
# DIR/truststore.p12                  the authority as a PKCS12 truststore, same password
# DIR/client.pem, client.key          a client certificate, CN=client,OU=test,O=Strata
# DIR/other-ca.pem, rogue.pem/.key    a second authority and a client certificate it signed,
#                                     which the brokers do not trust
# DIR/expired.pem, expired.key        a client certificate of the trusted authority that has
#                                     expired
#
# Keys are unencrypted (tests only). Everything is valid for 10 years except expired.pem.
set -euo pipefail
dir="${1:?usage: make-certs.sh DIR [HOST...]}"
shift
mkdir -p "$dir"
cd "$dir"
san="DNS:localhost,IP:127.0.0.1"
for h in "$@"; do san="$san,DNS:$h"; done
days=3650
pass=strata-test

ossl() { openssl "$@" 2>/dev/null; }

ossl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days $days \
    -subj "/CN=Strata Test CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
ossl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem -days $days \
    -subj "/CN=Untrusted CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"

# sign NAME SUBJECT CA EXT [DAYS_ARGS...]
sign() {
    local name="$1" subject="$2" ca="$3" ext="$4"
    shift 4
    ossl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subject"
    printf '%s\n' "$ext" > "$name.ext"
    ossl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial \
        -out "$name.pem" -extfile "$name.ext" "$@"
    rm -f "$name.csr" "$name.ext"
}
sign server "/CN=localhost/O=Strata" ca \
    "subjectAltName=$san
extendedKeyUsage=serverAuth,clientAuth
basicConstraints=CA:FALSE" -days $days
sign client "/O=Strata/OU=test/CN=client" ca \
    "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE" -days $days
sign rogue "/O=Strata/OU=test/CN=rogue" other-ca \
    "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE" -days $days
# Expired: valid from 2 days ago to yesterday. `openssl x509` sets no start date before
# OpenSSL 3.4, so `openssl ca` signs this one, from a minimal configuration.
ossl req -newkey rsa:2048 -nodes -keyout expired.key -out expired.csr -subj "/O=Strata/OU=test/CN=expired"
mkdir -p ca-db && : > ca-db/index.txt && echo 01 > ca-db/serial
cat > ca-db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca-db/index.txt
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
organizationName = optional
organizationalUnitName = optional
[ext]
extendedKeyUsage = clientAuth
basicConstraints = CA:FALSE
CNF
ossl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
    -extensions ext -notext \
    -startdate "$(date -u -d '-2 days' +%Y%m%d%H%M%SZ)" -enddate "$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)"
rm -rf ca-db expired.csr

cat server.key server.pem ca.pem > server-keystore.pem
ossl pkcs12 -export -in server.pem -inkey server.key -certfile ca.pem -name server \
    -out server.p12 -passout "pass:$pass"
# A truststore: the authority as a trusted certificate entry.
ossl pkcs12 -export -nokeys -in ca.pem -out truststore.p12 -passout "pass:$pass" \
    -jdktrust anyExtendedKeyUsage || ossl pkcs12 -export -nokeys -in ca.pem -out truststore.p12 -passout "pass:$pass"
rm -f ./*.srl
echo "certificates in $dir"
