"""The wire protocol's shapes: exactly the fields the issue specifies, no message content, clear parse errors."""

from __future__ import annotations

import json

import pytest
from threadloom.errors import ValidationError
from threadloom.live import (
    SessionStatus,
    encode,
    error,
    parse_client_message,
    session_changed,
    session_error,
    session_status,
    subscribed,
)

STATUS = SessionStatus(phase="idle", token_estimate=120, token_threshold=4000)


def test_event_shapes() -> None:
    assert subscribed("s1", STATUS) == {
        "type": "subscribed",
        "sessionId": "s1",
        "status": {"phase": "idle", "tokenEstimate": 120, "tokenThreshold": 4000},
    }
    assert error("Session 'x' not found") == {"type": "error", "error": "Session 'x' not found"}
    assert session_status("s1", STATUS) == {
        "type": "session_status",
        "sessionId": "s1",
        "phase": "idle",
        "tokenEstimate": 120,
        "tokenThreshold": 4000,
    }
    assert session_status("s1", SessionStatus("idle", 50, None), compacted={"tokensBefore": 120})["compacted"] == {
        "tokensBefore": 120
    }
    assert session_error("s1", "model down") == {"type": "session_error", "sessionId": "s1", "error": "model down"}
    assert session_changed("s1", "append", "m9") == {
        "type": "session_changed",
        "sessionId": "s1",
        "change": "append",
        "leafId": "m9",
    }
    assert "leafId" not in session_changed("s1", "clear")


def test_unknown_change_kind_is_refused() -> None:
    with pytest.raises(ValidationError, match="Unknown change kind"):
        session_changed("s1", "rename")  # type: ignore[arg-type]


def test_encode_puts_type_first_and_is_compact() -> None:
    text = encode(session_changed("s1", "fork"))
    assert text == '{"type":"session_changed","sessionId":"s1","change":"fork"}'
    assert json.loads(text)["change"] == "fork"


def test_parse_client_message() -> None:
    action = parse_client_message('{"action": "subscribe", "sessionId": "abc"}')
    assert (action.action, action.session_id) == ("subscribe", "abc")
    assert parse_client_message(b'{"action":"unsubscribe","sessionId":"abc"}').action == "unsubscribe"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"action": "publish", "sessionId": "a"}', "Unknown action 'publish'"),
        ('{"sessionId": "a"}', "Unknown action None"),
        ('{"action": "subscribe"}', "The sessionId must be a non-empty string"),
        ('{"action": "subscribe", "sessionId": ""}', "The sessionId must be a non-empty string"),
        ('{"action": "subscribe", "sessionId": 7}', "The sessionId must be a non-empty string"),
        ('{"action": "subscribe", "sessionId": "' + "x" * 300 + '"}', "longer than 256"),
        # The REST API's rule for an id: what no session id holds never reaches a store or a table key
        ('{"action": "subscribe", "sessionId": "\\u0000"}', "may only use the characters"),
        ('{"action": "unsubscribe", "sessionId": "\\ud800"}', "may only use the characters"),
        ('{"action": "unsubscribe", "sessionId": "' + "\N{GRINNING FACE}" * 200 + '"}', "may only use the characters"),
        ('{"action": "subscribe", "sessionId": "a/b"}', "may only use the characters"),
        ('{"action": "subscribe", "sessionId": ".."}', "not only dots"),
        ("{" + " " * 5000 + "}", "too large"),
    ],
)
def test_parse_client_message_says_what_is_wrong(raw: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_client_message(raw)
