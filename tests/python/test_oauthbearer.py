"""OAUTHBEARER with confluent-kafka: librdkafka's unsecured JWT on a listener that validates
as Kafka's default (unsecured) validator does, and signed JWTs (RS256, made here with
openssl and handed to the client through `oauth_cb`) on a listener that validates them
against a JWKS file (KIP-768). The token's subject is the principal: the authorizer lets
the super users in and refuses the others."""

import base64
import json
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import Broker, free_port
from test_security import authenticate, closed, frame, handshake, read_frame

AUD = "strata"
ISS = "https://issuer.test"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Keys:
    def __init__(self, tmp: Path):
        self.dir = tmp
        for name in ("good", "rogue"):
            subprocess.run(
                ["openssl", "genrsa", "-out", str(tmp / f"{name}.pem"), "2048"],
                check=True,
                capture_output=True,
            )
        modulus = subprocess.run(
            ["openssl", "rsa", "-in", str(tmp / "good.pem"), "-noout", "-modulus"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip().split("=", 1)[1]
        jwks = {"keys": [{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
                          "n": b64url(bytes.fromhex(modulus)), "e": "AQAB"}]}
        self.jwks = tmp / "jwks.json"
        self.jwks.write_text(json.dumps(jwks))

    def token(self, sub: str, key: str = "good", aud: str = AUD, ttl: int = 300) -> tuple[str, float]:
        now = int(time.time())
        exp = now + ttl
        header = b64url(json.dumps({"alg": "RS256", "kid": "k1", "typ": "JWT"}).encode())
        claims = b64url(json.dumps({"sub": sub, "aud": aud, "iss": ISS, "iat": now, "exp": exp}).encode())
        signing_input = f"{header}.{claims}".encode()
        sig = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self.dir / f"{key}.pem")],
            input=signing_input,
            check=True,
            capture_output=True,
        ).stdout
        return f"{header}.{claims}.{b64url(sig)}", float(exp)


@pytest.fixture
def oauth(tmp_path):
    keys = Keys(tmp_path)
    ports = {"UNSECURED": free_port(), "SIGNED": free_port(), "PLAINTEXT": free_port()}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    (tmp_path / "b").mkdir()
    b = Broker(
        tmp_path / "b",
        {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "UNSECURED:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.signed.oauthbearer.sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            "listener.name.signed.sasl.oauthbearer.jwks.endpoint.url": f"file://{keys.jwks}",
            "listener.name.signed.sasl.oauthbearer.expected.audience": AUD,
            "listener.name.signed.sasl.oauthbearer.expected.issuer": ISS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:alice;User:carol;User:ANONYMOUS",
        },
        port=ports["PLAINTEXT"],
    )
    yield b, ports, keys
    b.kill()


def unsecured(port: int, principal: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": f"principal={principal}",
    }


def signed(port: int, make) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "oauth_cb": lambda _config: make(),
    }


def round_trip(conf: dict, topic: str) -> None:
    p = Producer({**conf, "acks": "all"})
    errors = []
    for i in range(20):
        p.produce(topic, str(i).encode(), on_delivery=lambda e, _: e and errors.append(e))
    assert p.flush(30) == 0 and errors == [], errors[:2]
    c = Consumer({**conf, "group.id": f"g-{topic}"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            got += 1
    c.close()
    assert got == 20


def refused(conf: dict) -> str:
    """The error a client that cannot authenticate gets."""
    errors = []
    p = Producer({**conf, "error_cb": lambda e: errors.append(e)})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=3)
    return " ".join(str(e) for e in errors)


def raw_authenticate(s, token: bytes) -> tuple[int, str | None, bytes]:
    """SaslAuthenticate v1: the error code, the message and the server's bytes."""
    s.sendall(frame(36, 1, 2, struct.pack(">i", len(token)) + token))
    r = read_frame(s)
    err, ln = struct.unpack(">hh", r[4:8])
    msg = r[8 : 8 + ln].decode() if ln >= 0 else None
    pos = 8 + max(ln, 0)
    (n,) = struct.unpack(">i", r[pos : pos + 4])
    return err, msg, r[pos + 4 : pos + 4 + max(n, 0)]


def oauth_login(s, token: str) -> tuple[int, str | None, bytes]:
    """Logs in with `token`. A refusal comes as RFC 7628's error challenge: the client
    answers %x01 and gets the error. Returns the final code and message, and the
    challenge (empty when accepted)."""
    err, msg, challenge = raw_authenticate(s, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    if err == 0 and challenge:
        err, msg = authenticate(s, b"\x01")
    return err, msg, challenge


def test_unsecured_jwt_from_librdkafka(oauth):
    b, ports, _ = oauth
    round_trip(unsecured(ports["UNSECURED"], "alice"), "oauth-unsecured")
    # bob authenticates, but the authorizer does not let him write.
    p = Producer({**unsecured(ports["UNSECURED"], "bob"), "message.timeout.ms": 5000})
    errors = []
    p.produce("oauth-unsecured", b"x", on_delivery=lambda e, _: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None and "AUTHORIZATION" in errors[0].name(), errors
    # An unsecured token is worth nothing on the JWKS listener.
    assert "uthentication" in refused(unsecured(ports["SIGNED"], "alice"))


def test_signed_jwt_against_a_jwks_file(oauth):
    b, ports, keys = oauth
    round_trip(signed(ports["SIGNED"], lambda: keys.token("carol")), "oauth-signed")
    for bad in (
        lambda: keys.token("carol", key="rogue"),  # not signed by the set's key
        lambda: keys.token("carol", aud="someone-else"),  # another audience
    ):
        assert "uthentication" in refused(signed(ports["SIGNED"], bad))
    # librdkafka will not send an expired token; a raw client does, and is refused with
    # RFC 7628's error challenge, then SASL_AUTHENTICATION_FAILED once it answers %x01.
    with socket.create_connection(("127.0.0.1", ports["SIGNED"]), timeout=5) as s:
        assert handshake(s, "OAUTHBEARER")[0] == 0
        token, _ = keys.token("carol", ttl=-120)  # expired beyond the 30 s skew
        err, msg, challenge = oauth_login(s, token)
        assert json.loads(challenge) == {"status": "invalid_token"}, challenge
        assert err == 58 and "invalid_token" in msg, (err, msg)
        assert closed(s)
    # After the error challenge, a second token is a new attempt (as Kafka's server).
    with socket.create_connection(("127.0.0.1", ports["SIGNED"]), timeout=5) as s:
        assert handshake(s, "OAUTHBEARER")[0] == 0
        token, _ = keys.token("carol", ttl=-120)
        err, _, challenge = raw_authenticate(s, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        assert err == 0 and challenge, (err, challenge)
        token, _ = keys.token("carol")
        err, _, challenge = oauth_login(s, token)
        assert (err, challenge) == (0, b"")


def der_signature_to_jws(der: bytes, size: int = 32) -> bytes:
    """An ECDSA signature as openssl writes it (DER) to JWS's r || s (RFC 7518 §3.4)."""
    assert der[0] == 0x30
    i = 2 + (der[1] & 0x7F if der[1] & 0x80 else 0)
    out = b""
    for _ in range(2):
        assert der[i] == 0x02
        n = der[i + 1]
        out += der[i + 2 : i + 2 + n].lstrip(b"\0").rjust(size, b"\0")
        i += 2 + n
    return out


class RotatingKeys:
    """Two RSA keys (k1, k2) and a P-256 key (e1), and tokens signed by any of them."""

    def __init__(self, tmp: Path):
        self.dir = tmp
        self.jwk = {}
        for kid in ("k1", "k2"):
            subprocess.run(["openssl", "genrsa", "-out", str(tmp / f"{kid}.pem"), "2048"],
                           check=True, capture_output=True)
            modulus = subprocess.run(
                ["openssl", "rsa", "-in", str(tmp / f"{kid}.pem"), "-noout", "-modulus"],
                check=True, capture_output=True, text=True,
            ).stdout.strip().split("=", 1)[1]
            self.jwk[kid] = {"kty": "RSA", "kid": kid, "use": "sig",
                             "n": b64url(bytes.fromhex(modulus)), "e": "AQAB"}
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout",
                        "-out", str(tmp / "e1.pem")], check=True, capture_output=True)
        point = subprocess.run(["openssl", "ec", "-in", str(tmp / "e1.pem"), "-pubout",
                                "-outform", "DER"], check=True, capture_output=True).stdout[-65:]
        assert point[0] == 4
        self.jwk["e1"] = {"kty": "EC", "crv": "P-256", "kid": "e1", "use": "sig",
                          "x": b64url(point[1:33]), "y": b64url(point[33:])}

    def set_of(self, *kids: str) -> bytes:
        return json.dumps({"keys": [self.jwk[k] for k in kids]}).encode()

    def token(self, sub: str, kid: str) -> tuple[str, float]:
        now = int(time.time())
        alg = "ES256" if kid.startswith("e") else "RS256"
        header = b64url(json.dumps({"alg": alg, "kid": kid, "typ": "JWT"}).encode())
        claims = b64url(json.dumps({"sub": sub, "aud": AUD, "iss": ISS, "iat": now,
                                    "exp": now + 300}).encode())
        sig = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self.dir / f"{kid}.pem")],
            input=f"{header}.{claims}".encode(), check=True, capture_output=True,
        ).stdout
        if alg == "ES256":
            sig = der_signature_to_jws(sig)
        return f"{header}.{claims}.{b64url(sig)}", float(now + 300)


class JwksServer:
    """An HTTPS endpoint serving a key set (`body`, replaceable), counting its fetches."""

    def __init__(self, certs: Path, body: bytes):
        import http.server
        import ssl
        import threading

        self.body = body
        self.fetches = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                server.fetches += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(certs / "server.pem"), str(certs / "server.key"))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def authenticates(port: int, keys: RotatingKeys, kid: str, within: float) -> bool:
    """Whether a raw client with a token of `kid` authenticates, tried until `within` s."""
    deadline = time.monotonic() + within
    while True:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            assert handshake(s, "OAUTHBEARER")[0] == 0
            token, _ = keys.token("carol", kid)
            err, _, _ = oauth_login(s, token)
        if err == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def test_a_jwks_endpoint_over_https_is_fetched_and_its_rotation_followed(tmp_path):
    """KIP-768's JWKS endpoint URL over HTTPS: the key set is fetched at start, its server's
    certificate checked against the truststore named in the listener's JAAS options (a
    listener without one trusts only the public roots and refuses every token), and a key
    that appears at the endpoint (here an RSA key and an ES256 one) is served as soon as a
    token names it, long before the hour-long refresh period; a removed key is refused."""
    from conftest import make_certs

    certs = make_certs(tmp_path / "certs")
    keys = RotatingKeys(tmp_path)
    jwks = JwksServer(certs, keys.set_of("k1"))
    ports = {"SIGNED": free_port(), "UNTRUSTED": free_port(), "PLAINTEXT": free_port()}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    (tmp_path / "b").mkdir()
    jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            f'ssl.truststore.location="{certs / "ca.pem"}" ssl.truststore.type="PEM";')
    b = Broker(
        tmp_path / "b",
        {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map":
                "SIGNED:SASL_PLAINTEXT,UNTRUSTED:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.jwks.endpoint.url": jwks.url,
            "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
            "sasl.oauthbearer.expected.audience": AUD,
            "sasl.oauthbearer.expected.issuer": ISS,
            "listener.name.signed.oauthbearer.sasl.jaas.config": jaas,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:carol;User:ANONYMOUS",
        },
        port=ports["PLAINTEXT"],
    )
    try:
        assert jwks.fetches >= 1
        round_trip(signed(ports["SIGNED"], lambda: keys.token("carol", "k1")), "oauth-https")
        # The untrusted listener could not fetch the set: it holds no key.
        assert not authenticates(ports["UNTRUSTED"], keys, "k1", within=0)
        # Rotation: k2 and e1 replace k1 at the endpoint.
        jwks.body = keys.set_of("k2", "e1")
        before = jwks.fetches
        assert authenticates(ports["SIGNED"], keys, "k2", within=15)
        assert jwks.fetches > before
        assert authenticates(ports["SIGNED"], keys, "e1", within=0)
        round_trip(signed(ports["SIGNED"], lambda: keys.token("carol", "e1")), "oauth-es256")
        assert not authenticates(ports["SIGNED"], keys, "k1", within=0)
    finally:
        b.kill()
        jwks.close()
