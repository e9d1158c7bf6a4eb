"""Verifying the bearer JWT of a WebSocket ``$connect``, as the HTTP API's JWT authorizer verifies it.

API Gateway's WebSocket APIs have no built-in JWT authorizer, so a Lambda authorizer does the same checks with
PyJWT: the signature against the issuer's JWKS (fetched once per process and cached), the issuer, the audience
(``aud``, or ``client_id`` as in Cognito access tokens, exactly like the HTTP API's authorizer) and the expiry.
Only asymmetric algorithms are accepted, and the key's own algorithm must match the token's, so ``alg: none`` and
HMAC-with-the-public-key tokens fail before any claim is read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jwt

from threadloom.errors import ThreadloomError, ValidationError
from threadloom.live.subprotocol import (
    LIVE_SUBPROTOCOL,
    SUBPROTOCOL_HEADER,
    TOKEN_SUBPROTOCOL_PREFIX,
    token_from_subprotocols,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jwt import PyJWKClient

logger = logging.getLogger(__name__)

ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")

_BEARER = "bearer "


class InvalidTokenError(ThreadloomError):
    """The JWT is missing, malformed, unsigned, badly signed, expired, or for another issuer or audience."""


@dataclass(frozen=True, slots=True)
class JwtSettings:
    """Who may connect: the same issuer and audiences as the HTTP API's JWT authorizer."""

    issuer: str
    audiences: tuple[str, ...]
    jwks_url: str = ""
    leeway_seconds: int = 0
    jwks_lifespan_seconds: int = 300
    jwks_timeout_seconds: float = 3.0
    algorithms: tuple[str, ...] = field(default=ASYMMETRIC_ALGORITHMS)

    def __post_init__(self) -> None:
        if not self.issuer:
            raise ValidationError("The JWT issuer is not configured (THREADLOOM_JWT_ISSUER)")
        if not [audience for audience in self.audiences if audience]:
            raise ValidationError("No JWT audience is configured (THREADLOOM_JWT_AUDIENCE)")

    @property
    def resolved_jwks_url(self) -> str:
        """The JWKS URL, by default ``<issuer>/.well-known/jwks.json`` (Cognito user pools publish it there)."""
        return self.jwks_url or self.issuer.rstrip("/") + "/.well-known/jwks.json"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> JwtSettings:
        """``THREADLOOM_JWT_ISSUER``, ``THREADLOOM_JWT_AUDIENCE`` (comma-separated) and ``THREADLOOM_JWKS_URL``."""
        audiences = tuple(a.strip() for a in environ.get("THREADLOOM_JWT_AUDIENCE", "").split(",") if a.strip())
        return cls(
            issuer=environ.get("THREADLOOM_JWT_ISSUER", "").strip(),
            audiences=audiences,
            jwks_url=environ.get("THREADLOOM_JWKS_URL", "").strip(),
        )


class JwtVerifier:
    """Verifies tokens against one issuer; the JWKS client (and its key cache) lives as long as the verifier.

    Parameters
    ----------
    settings:
        The issuer, audiences and JWKS location.
    jwks_client:
        A ready ``PyJWKClient``, for tests; by default one is built on first use with a cached key set.

    Examples
    --------
    >>> verifier = JwtVerifier(JwtSettings("https://issuer.example", ("my-client",)))
    >>> claims = verifier.verify(token)  # doctest: +SKIP
    """

    def __init__(self, settings: JwtSettings, *, jwks_client: PyJWKClient | None = None) -> None:
        self._settings = settings
        self._jwks_client = jwks_client

    @property
    def settings(self) -> JwtSettings:
        return self._settings

    def _client(self) -> PyJWKClient:
        if self._jwks_client is None:
            settings = self._settings
            self._jwks_client = jwt.PyJWKClient(
                settings.resolved_jwks_url,
                cache_jwk_set=True,
                lifespan=settings.jwks_lifespan_seconds,
                timeout=settings.jwks_timeout_seconds,
            )
        return self._jwks_client

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims once signature, issuer, audience and expiry all check out; else ``InvalidTokenError``."""
        settings = self._settings
        try:
            signing_key = self._client().get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key=signing_key,
                algorithms=list(settings.algorithms),
                issuer=settings.issuer,
                leeway=settings.leeway_seconds,
                # The audience may sit in ``client_id`` instead of ``aud``; checked below, as API Gateway does.
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except jwt.PyJWKClientConnectionError as exc:
            logger.warning("Could not fetch the issuer's JWKS from %s: %s", settings.resolved_jwks_url, exc)
            raise InvalidTokenError("The token's signing keys could not be fetched") from exc
        except jwt.PyJWTError as exc:
            raise InvalidTokenError(f"Invalid token: {exc}") from exc
        if not self._audience_matches(claims):
            raise InvalidTokenError("Invalid token: the audience is not accepted")
        return claims

    def _audience_matches(self, claims: Mapping[str, Any]) -> bool:
        accepted = set(self._settings.audiences)
        audience = claims.get("aud")
        if audience is not None:
            values = [audience] if isinstance(audience, str) else audience
            return isinstance(values, list) and any(isinstance(v, str) and v in accepted for v in values)
        client_id = claims.get("client_id")
        return isinstance(client_id, str) and client_id in accepted


def token_from_request(headers: Mapping[str, str] | None) -> str:
    """The JWT from ``Authorization: Bearer <jwt>`` (or a bare token), else the ``threadloom.token.<jwt>`` subprotocol.

    Browsers cannot set ``Authorization`` on a WebSocket handshake; they offer the token as a subprotocol
    (``threadloom.live.subprotocol``). A token in the URL is not read: URLs are written to proxy and access logs.
    """
    authorization = _lookup(headers or {}, "authorization")
    if authorization:
        value = authorization.strip()
        return value[len(_BEARER) :].strip() if value.lower().startswith(_BEARER) else value
    token = token_from_subprotocols(_lookup(headers or {}, SUBPROTOCOL_HEADER)).strip()
    if token:
        return token
    raise InvalidTokenError(
        "No token: send 'Authorization: Bearer <jwt>' or, from a browser, the subprotocols "
        f"'{LIVE_SUBPROTOCOL}' and '{TOKEN_SUBPROTOCOL_PREFIX}<jwt>' (a token in the URL is not accepted)"
    )


def _lookup(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name and isinstance(value, str):
            return value
    return ""


__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "InvalidTokenError",
    "JwtSettings",
    "JwtVerifier",
    "token_from_request",
]
