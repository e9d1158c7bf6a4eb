"""Headers of the deployed API (issue 23): HSTS on every answer, and the inspector's CSP ``connect-src``.

Through the real Lambda handler with API Gateway events, on SQLite and on the real PostgreSQL server.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.edge import STRICT_TRANSPORT_SECURITY
from threadloom.api.runtime import Runtime, set_runtime
from threadloom.inspector import content_security_policy

from tests.support.api import SESSION, FakeLambdaContext, backend_store, gateway_event, load_event, seeded_runtime


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    return seeded_runtime(tmp_path, store=backend_store(request))[0]


def headers_of(event: dict[str, Any]) -> tuple[int, dict[str, str]]:
    from threadloom_api import lambda_handler

    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    return int(response["statusCode"]), {key.lower(): value for key, value in (response.get("headers") or {}).items()}


def test_every_deployed_answer_carries_hsts(runtime: Runtime) -> None:
    answers = [
        headers_of(gateway_event("GET", f"/sessions/{SESSION}")),  # 200
        headers_of(gateway_event("GET", "/sessions/nope")),  # 404
        headers_of(gateway_event("POST", "/sessions", raw_body=b"x", headers={"content-type": "text/plain"})),  # 415
        headers_of(gateway_event("GET", "/sessions", tenant=None)),  # 401
        headers_of(load_event("inspector_page")),  # the page
    ]
    assert [status for status, _ in answers] == [200, 404, 415, 401, 200]
    for _, headers in answers:
        assert headers["strict-transport-security"] == STRICT_TRANSPORT_SECURITY
    assert "max-age=31536000" in STRICT_TRANSPORT_SECURITY


def page_policy(monkeypatch: pytest.MonkeyPatch, **environment: str) -> str:
    for name in ("THREADLOOM_WEBSOCKET_URL", "THREADLOOM_WEBSOCKET_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    event = copy.deepcopy(load_event("inspector_page"))
    status, headers = headers_of(event)
    assert status == 200
    return headers["content-security-policy"]


def connect_sources(policy: str) -> list[str]:
    directive = next(part.strip() for part in policy.split(";") if part.strip().startswith("connect-src "))
    return directive.split()[1:]


def test_the_inspector_connects_only_to_its_origin_and_the_stacks_websocket(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = "https://abc123.execute-api.eu-west-1.amazonaws.com/dev"
    policy = page_policy(monkeypatch, THREADLOOM_WEBSOCKET_ENDPOINT=endpoint)
    assert connect_sources(policy) == ["'self'", "wss://abc123.execute-api.eu-west-1.amazonaws.com"]
    assert connect_sources(page_policy(monkeypatch)) == ["'self'"]  # no live channel elsewhere: its own origin
    explicit = page_policy(monkeypatch, THREADLOOM_WEBSOCKET_URL="wss://live.example.com:8443/prod")
    assert connect_sources(explicit) == ["'self'", "wss://live.example.com:8443"]


@pytest.mark.parametrize(
    "url", ["ws://", "wss:", "javascript:alert(1)", "wss://a.example; script-src *", "wss://a b", "https://x.example"]
)
def test_a_live_url_that_is_no_websocket_origin_adds_nothing(url: str) -> None:
    assert connect_sources(content_security_policy(url)) == ["'self'"]
    assert "ws:" not in content_security_policy(url).replace("wss://", "")
