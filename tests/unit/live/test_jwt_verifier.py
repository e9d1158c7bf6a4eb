"""The $connect JWT check with real RS256 tokens against a JWKS served over local HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from threadloom.errors import ValidationError
from threadloom.live.aws.jwt_verifier import InvalidTokenError, JwtSettings, JwtVerifier, token_from_request

from tests.support.jwks import AUDIENCE, LocalIssuer, hmac_token, serve_issuer, unsigned_token


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    with serve_issuer() as issuer:
        yield issuer


@pytest.fixture
def verifier(issuer: LocalIssuer) -> JwtVerifier:
    return JwtVerifier(JwtSettings(issuer=issuer.issuer, audiences=("other-client", AUDIENCE)))


def test_a_valid_token_gives_its_claims(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    claims = verifier.verify(issuer.token(sub="tenant-7"))
    assert claims["sub"] == "tenant-7"
    assert claims["iss"] == issuer.issuer


def test_the_jwks_is_fetched_once_and_cached(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    before = issuer.jwks_fetches
    for _ in range(3):
        verifier.verify(issuer.token())
    assert issuer.jwks_fetches - before == 1


def test_a_cognito_access_token_matches_on_client_id(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    claims = verifier.verify(issuer.token(aud=None, client_id=AUDIENCE, token_use="access"))
    assert claims["client_id"] == AUDIENCE


def test_an_audience_list_is_accepted_when_one_entry_matches(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    assert verifier.verify(issuer.token(aud=["unrelated", AUDIENCE]))["sub"] == "tenant-a"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"exp": -5}, "expired"),
        ({"aud": "someone-else"}, "audience"),
        ({"aud": None, "client_id": "someone-else"}, "audience"),
        ({"aud": None}, "audience"),
        ({"iss": "https://evil.example"}, "issuer"),
        ({"exp": None}, "exp"),
        ({"nbf": 600}, "not yet valid"),
    ],
)
def test_bad_claims_are_refused(
    issuer: LocalIssuer, verifier: JwtVerifier, overrides: dict[str, object], reason: str
) -> None:
    with pytest.raises(InvalidTokenError, match=reason):
        # exp/nbf are given relative to now: parameters are built at collection, possibly long before the test runs
        now = int(time.time())
        claims = {k: now + v if k in ("exp", "nbf") and isinstance(v, int) else v for k, v in overrides.items()}
        verifier.verify(issuer.token(**claims))


def test_alg_none_is_refused(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    token = unsigned_token(
        {"iss": issuer.issuer, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 600}, issuer.kid
    )
    with pytest.raises(InvalidTokenError):
        verifier.verify(token)


def test_a_tampered_payload_fails_the_signature(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    header, _payload, signature = issuer.token(sub="tenant-a").split(".")
    forged_payload = issuer.token(sub="tenant-b").split(".")[1]
    with pytest.raises(InvalidTokenError, match="Signature verification failed"):
        verifier.verify(f"{header}.{forged_payload}.{signature}")


def test_a_token_signed_by_another_key_is_refused(verifier: JwtVerifier, issuer: LocalIssuer) -> None:
    impostor = LocalIssuer(issuer.base_url, kid=issuer.kid)  # same kid, different private key
    with pytest.raises(InvalidTokenError, match="Signature verification failed"):
        verifier.verify(impostor.token())


def test_hmac_signed_with_the_public_key_is_refused(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    public_pem = issuer.private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    claims = {"iss": issuer.issuer, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 600}
    token = hmac_token(claims, issuer.kid, public_pem)
    with pytest.raises(InvalidTokenError):
        verifier.verify(token)


def test_an_unknown_key_id_is_refused(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    with pytest.raises(InvalidTokenError, match="signing key"):
        verifier.verify(issuer.token(headers={"kid": "rotated-away"}))


@pytest.mark.parametrize("garbage", ["", "not-a-jwt", "a.b.c", "Bearer"])
def test_garbage_is_refused(verifier: JwtVerifier, garbage: str) -> None:
    with pytest.raises(InvalidTokenError):
        verifier.verify(garbage)


def test_an_unreachable_jwks_refuses_the_token() -> None:
    with serve_issuer() as gone:
        token = gone.token()
        url = gone.issuer
    verifier = JwtVerifier(JwtSettings(issuer=url, audiences=(AUDIENCE,), jwks_timeout_seconds=1))
    with pytest.raises(InvalidTokenError, match="could not be fetched"):
        verifier.verify(token)


def test_the_jwks_url_defaults_to_the_issuers_well_known_path() -> None:
    settings = JwtSettings(issuer="https://cognito-idp.eu-west-1.amazonaws.com/pool/", audiences=("c",))
    assert settings.resolved_jwks_url == "https://cognito-idp.eu-west-1.amazonaws.com/pool/.well-known/jwks.json"
    assert (
        JwtSettings(issuer="https://i", audiences=("c",), jwks_url="https://k/keys").resolved_jwks_url
        == "https://k/keys"
    )


def test_settings_come_from_the_environment() -> None:
    settings = JwtSettings.from_env(
        {"THREADLOOM_JWT_ISSUER": "https://i", "THREADLOOM_JWT_AUDIENCE": "a, b", "THREADLOOM_JWKS_URL": ""}
    )
    assert settings.audiences == ("a", "b")
    with pytest.raises(ValidationError, match="THREADLOOM_JWT_ISSUER"):
        JwtSettings.from_env({"THREADLOOM_JWT_AUDIENCE": "a"})
    with pytest.raises(ValidationError, match="THREADLOOM_JWT_AUDIENCE"):
        JwtSettings.from_env({"THREADLOOM_JWT_ISSUER": "https://i", "THREADLOOM_JWT_AUDIENCE": " , "})


def test_the_token_comes_from_the_header_first_then_the_subprotocol_never_the_url() -> None:
    offered = {"Sec-WebSocket-Protocol": "threadloom.live, threadloom.token.xyz"}
    assert token_from_request({"Authorization": "Bearer abc", **offered}) == "abc"
    assert token_from_request({"authorization": "abc"}) == "abc"
    assert token_from_request({"Host": "h", **offered}) == "xyz"
    assert token_from_request({"sec-websocket-protocol": "threadloom.token.a.b.c,threadloom.live"}) == "a.b.c"
    with pytest.raises(InvalidTokenError, match="No token"):
        token_from_request({})
    with pytest.raises(InvalidTokenError, match="not accepted"):
        token_from_request({"Sec-WebSocket-Protocol": "threadloom.live"})
