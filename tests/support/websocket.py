"""Driving the WebSocket route and authorizer Lambdas in-process with the sample events of events/websocket."""

from __future__ import annotations

import json
from typing import Any

from tests.support.api import ROOT, FakeLambdaContext

EVENTS = ROOT / "events" / "websocket"
CONNECTION = "L0SM9cOFvHcCIhw="
OTHER_TENANT_CONNECTION = "M1TN0dPGwIdDJix="
OTHER_TENANT = "user-456"


def event_names(prefix: str) -> list[str]:
    return sorted(path.stem for path in EVENTS.glob(f"{prefix}*.json") if not path.name.endswith(".expected.json"))


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def load_expected(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.expected.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def invoke_routes(event: dict[str, Any]) -> dict[str, Any]:
    """The route Lambda's response, with a JSON ``body`` decoded."""
    from threadloom_websocket import lambda_handler

    response = dict(lambda_handler(event, FakeLambdaContext(function_name="threadloom-websocket")))  # type: ignore[arg-type]
    if "body" in response:
        response["body"] = json.loads(response["body"])
    return response


def invoke_authorizer(event: dict[str, Any]) -> dict[str, Any]:
    from threadloom_websocket_authorizer import lambda_handler

    return dict(lambda_handler(event, FakeLambdaContext(function_name="threadloom-websocket-authorizer")))  # type: ignore[arg-type]


def with_tokens(event: dict[str, Any], tokens: dict[str, str]) -> dict[str, Any]:
    """The event with each ``{{token:<kind>}}`` placeholder replaced by a real token of that kind."""
    text = json.dumps(event)
    for kind, token in tokens.items():
        text = text.replace("{{token:" + kind + "}}", token)
    assert "{{token:" not in text, "an event names a token kind the test does not make"
    return json.loads(text)  # type: ignore[no-any-return]
