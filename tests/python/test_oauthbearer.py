"""OAUTHBEARER with confluent-kafka: librdkafka's unsecured JWT on a listener that validates
as Kafka's default (unsecured) validator does, and signed JWTs (RS256, made here with
openssl and handed to the client through `oauth_cb`) on a listener that validates them
against a JWKS file (KIP-768). The token's subject is the principal: the authorizer lets
the super users in and refuses the others."""

import base64
import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import Broker, free_port
from test_security import authenticate, closed, handshake

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
    # librdkafka will not send an expired token; a raw client does, and is refused.
    with socket.create_connection(("127.0.0.1", ports["SIGNED"]), timeout=5) as s:
        assert handshake(s, "OAUTHBEARER")[0] == 0
        token, _ = keys.token("carol", ttl=-120)  # expired beyond the 30 s skew
        err, msg = authenticate(s, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        assert err == 58 and "OAUTHBEARER" in msg, (err, msg)
        assert closed(s)
    with socket.create_connection(("127.0.0.1", ports["SIGNED"]), timeout=5) as s:
        assert handshake(s, "OAUTHBEARER")[0] == 0
        token, _ = keys.token("carol")
        assert authenticate(s, f"n,,\x01auth=Bearer {token}\x01\x01".encode())[0] == 0
