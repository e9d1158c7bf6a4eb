"""Every sample event in events/api goes through the real handler over a fresh, seeded SQLite store."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import set_runtime

from tests.support.api import EVENTS, invoke, load_event, seeded_runtime

EVENT_NAMES = sorted(path.stem for path in EVENTS.glob("*.json") if not path.name.endswith(".expected.json"))


def assert_subset(expected: Any, actual: Any, where: str = "body") -> None:
    """Dicts: every expected key matches; lists: same length, element-wise; scalars: equal."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing"
            assert_subset(value, actual[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r}"
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            assert_subset(want, got, f"{where}[{index}]")
    else:
        assert actual == expected, f"{where}: expected {expected!r}, got {actual!r}"


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_event_gives_expected_response(name: str, tmp_path: Path) -> None:
    # Given a fresh store seeded with the demo sessions
    seeded_runtime(tmp_path)
    expected = json.loads((EVENTS / f"{name}.expected.json").read_text(encoding="utf-8"))
    # When the event is handled
    status, body = invoke(load_event(name))
    # Then the status and the stable parts of the body match
    assert status == expected["statusCode"], body
    if "bodyContains" in expected:  # a page or script: its stable landmarks
        assert isinstance(body, str) and all(part in body for part in expected["bodyContains"]), body[:200]
    else:
        assert_subset(expected["body"], body)
    if status >= 400:
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}


def test_every_route_has_a_sample_event() -> None:
    from threadloom_api import app

    covered = {(event["requestContext"]["http"]["method"], event["rawPath"]) for event in map(load_event, EVENT_NAMES)}
    for route in app._static_routes + app._dynamic_routes:
        pattern = re.compile("^" + re.sub(r"<\w+>", "[^/]+", route.path) + "$")
        assert any(method == route.method and pattern.match(path) for method, path in covered), route.path


def test_compact_event_enqueues_for_the_tenant(tmp_path: Path) -> None:
    # Given the seeded runtime with a recording queue
    _, queue = seeded_runtime(tmp_path)
    # When compaction is requested
    status, _ = invoke(load_event("compact"))
    # Then one request for the tenant's session up to its leaf is queued
    assert status == 202
    assert [(r.namespace, r.session_id, r.leaf_id) for r in queue.requests] == [("user-123", "s-demo", "m4")]
