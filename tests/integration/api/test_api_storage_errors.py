"""Storage failures reach HTTP clients as typed, retryable answers (503 with Retry-After)."""

from __future__ import annotations

import copy
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import set_runtime
from threadloom.storage.sqlite.database import DEFAULT_BUSY_TIMEOUT_S

from tests.support.api import FakeLambdaContext, load_event, seeded_runtime, text


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


def raw_request(method: str, path: str, body: Any = None) -> dict[str, Any]:
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    if body is not None:
        event["body"] = json.dumps(body)
    return lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type,no-any-return]


def test_a_busy_session_answers_503_with_retry_after_and_writes_nothing(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)  # SQLite with the default busy timeout (2 s)
    assert raw_request("GET", "/sessions/s-demo/history")["statusCode"] == 200  # warm: imports done
    # Another process holds the database's write lock
    other = sqlite3.connect(str(tmp_path / "api.db"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        response = raw_request("POST", "/sessions/s-demo/messages", {"message": text("m5", "user", "Arr?")})
        waited = time.monotonic() - started
        assert DEFAULT_BUSY_TIMEOUT_S <= waited < DEFAULT_BUSY_TIMEOUT_S + 1.5
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert response["statusCode"] == 503
    assert response["headers"]["Retry-After"] == "1"
    error = json.loads(response["body"])["error"]
    assert error["code"] == "session_busy" and "retry" in error["message"]
    history = json.loads(raw_request("GET", "/sessions/s-demo/history")["body"])["messages"]
    assert [message["id"] for message in history] == ["m1", "m2", "m3", "m4"]
    assert raw_request("POST", "/sessions/s-demo/messages", {"message": text("m5", "user", "Arr?")})["statusCode"] in (
        200,
        201,
    )
