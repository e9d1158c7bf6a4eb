"""A real token issuer for tests: an RSA key pair, its JWKS served over local HTTP, and signed tokens on demand."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

AUDIENCE = "threadloom-web"


@dataclass
class LocalIssuer:
    """Mints RS256 tokens whose public key is published at ``jwks_url``; counts JWKS fetches."""

    base_url: str
    kid: str = "test-key-1"
    private_key: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    jwks_fetches: int = 0

    @property
    def issuer(self) -> str:
        return self.base_url

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/.well-known/jwks.json"

    def jwks(self) -> dict[str, Any]:
        public = json.loads(RSAAlgorithm.to_jwk(self.private_key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def token(self, *, headers: dict[str, Any] | None = None, **overrides: Any) -> str:
        """A valid token for tenant ``tenant-a`` unless ``overrides`` change a claim (``None`` drops it)."""
        now = int(time.time())
        claims: dict[str, Any] = {"iss": self.issuer, "aud": AUDIENCE, "sub": "tenant-a", "iat": now, "exp": now + 600}
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.private_key, algorithm="RS256", headers={"kid": self.kid, **(headers or {})})


def _part(value: dict[str, Any] | bytes) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsigned_token(claims: dict[str, Any], kid: str) -> str:
    """An ``alg: none`` token: header and claims with an empty signature."""
    return f"{_part({'alg': 'none', 'typ': 'JWT', 'kid': kid})}.{_part(claims)}."


def hmac_token(claims: dict[str, Any], kid: str, secret: bytes) -> str:
    """An HS256 token keyed with ``secret`` (built by hand: PyJWT refuses to use a public key as an HMAC secret)."""
    signing_input = f"{_part({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{_part(claims)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_part(signature)}"


@contextmanager
def serve_issuer() -> Iterator[LocalIssuer]:
    """A ``LocalIssuer`` whose JWKS is served on 127.0.0.1 for the duration of the block."""
    holder: dict[str, LocalIssuer] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer = holder["issuer"]
            if self.path != "/.well-known/jwks.json":
                self.send_error(404)
                return
            issuer.jwks_fetches += 1
            body = json.dumps(issuer.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["issuer"] = LocalIssuer(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield holder["issuer"]
    finally:
        server.shutdown()
        server.server_close()
