"""Live status over a real WebSocket client (the ``websockets`` library) against the local server in a subprocess."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.support.local_server import RunningServer, call, local_server

pytestmark = pytest.mark.e2e
HARNESS = Path(__file__).with_name("failing_summarizer_server.py")
THRESHOLD = 600
PROFILE = f"""
blocks:
  - {{label: soul, kind: static, content: You are a ship's navigator.}}
compaction: {{threshold: {THRESHOLD}, protect_head: 1, tail_token_budget: 30, min_tail_messages: 2}}
"""
SECRET = "the treasure is buried under the third palm"


def msg(message_id: str, text: str) -> dict[str, Any]:
    role = "assistant" if message_id.endswith(("1", "3", "5", "7", "9")) else "user"
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def receive(ws: ClientConnection, timeout: float = 10.0) -> dict[str, Any]:
    frame = ws.recv(timeout=timeout)
    assert isinstance(frame, str)
    assert SECRET not in frame  # events carry ids, counts and phases, never content
    event: dict[str, Any] = json.loads(frame)
    return event


def subscribe(ws: ClientConnection, session_id: str) -> dict[str, Any]:
    ws.send(json.dumps({"action": "subscribe", "sessionId": session_id}))
    return receive(ws)


def until(ws: ClientConnection, predicate: Any, limit: int = 200) -> list[dict[str, Any]]:
    """Events up to and including the first one ``predicate`` accepts."""
    seen: list[dict[str, Any]] = []
    for _ in range(limit):
        seen.append(receive(ws))
        if predicate(seen[-1]):
            return seen
    raise AssertionError(f"never arrived; saw {seen}")


def settled_status(server: RunningServer, session_id: str) -> dict[str, Any]:
    """``GET /status`` once the worker has recorded the outcome (right after the events it announced)."""
    deadline = time.monotonic() + 10
    while True:
        status, body = call(server.url, "GET", f"/sessions/{session_id}/status")
        assert status == 200
        if body["compaction"]["state"] not in ("queued", "running"):
            return dict(body)
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


def new_session(server: RunningServer) -> str:
    status, created = call(server.url, "POST", "/sessions", {"name": "Watched voyage"})
    assert status == 201
    return str(created["id"])


def test_a_subscriber_sees_the_estimate_rise_then_the_compaction(tmp_path: Path) -> None:
    with local_server(tmp_path / "data", profile=PROFILE) as server, connect(server.ws_url) as ws:
        sid = new_session(server)
        subscribed = subscribe(ws, sid)
        assert subscribed["type"] == "subscribed" and subscribed["sessionId"] == sid
        assert subscribed["status"]["phase"] == "idle" and subscribed["status"]["tokenThreshold"] == THRESHOLD
        start = subscribed["status"]["tokenEstimate"]

        # When messages are appended over HTTP until the estimate passes the threshold
        estimates: list[int] = []
        appended = 0
        while not estimates or estimates[-1] <= THRESHOLD:
            message_id = f"m{appended}"
            text = f"Leg {appended}: {SECRET}, then steer west past the lighthouse and keep the coast on the left."
            status, answer = call(server.url, "POST", f"/sessions/{sid}/messages", {"message": msg(message_id, text)})
            assert status == 201 and answer["tokenThreshold"] == THRESHOLD
            events = until(ws, lambda e, m=message_id: e["type"] == "session_changed" and e.get("leafId") == m)
            statuses = [e for e in events if e["type"] == "session_status"]
            assert statuses[0] == {
                "type": "session_status",
                "sessionId": sid,
                "phase": "idle",
                "tokenEstimate": answer["tokenEstimate"],
                "tokenThreshold": THRESHOLD,
            }
            estimates.append(answer["tokenEstimate"])
            appended += 1
            assert appended < 50

        # Then each write reported a rising estimate, and the background compaction was announced
        assert [start, *estimates] == sorted([start, *estimates]) and len(set(estimates)) == len(estimates)
        rest = until(ws, lambda e: e["type"] == "session_status" and "compacted" in e)
        phases = [e["phase"] for e in rest if e["type"] == "session_status"]
        assert "compacting" in phases and phases[-1] == "idle"
        done = rest[-1]
        assert (
            done["compacted"]["tokensBefore"] > THRESHOLD and done["tokenEstimate"] < done["compacted"]["tokensBefore"]
        )
        changed = until(ws, lambda e: e["type"] == "session_changed")[-1]
        assert changed["change"] == "compaction"
        body = settled_status(server, sid)
        assert body["compaction"]["state"] == "done" and body["phase"] == "idle"
        assert body["tokenEstimate"] == done["tokenEstimate"]


def test_a_failing_summarizer_gives_session_error(tmp_path: Path) -> None:
    with local_server(tmp_path / "data", profile=PROFILE, script=HARNESS) as server, connect(server.ws_url) as ws:
        sid = new_session(server)
        for index in range(6):
            call(server.url, "POST", f"/sessions/{sid}/messages", {"message": msg(f"m{index}", "words " * 40)})
        assert subscribe(ws, sid)["type"] == "subscribed"
        status, queued = call(server.url, "POST", f"/sessions/{sid}/compact", {})
        assert status == 202
        events = until(ws, lambda e: e["type"] == "session_error")
        assert {"type": "session_status", "phase": "compacting"}.items() <= next(
            e for e in events if e["type"] == "session_status"
        ).items()
        assert events[-1]["sessionId"] == sid and "summarizer unavailable" in events[-1]["error"]
        body = settled_status(server, sid)
        assert body["compaction"]["id"] == queued["requestId"] and body["compaction"]["state"] == "failed"
        assert "summarizer unavailable" in body["compaction"]["error"]


def test_another_tenants_session_is_refused_and_nothing_is_subscribed(tmp_path: Path) -> None:
    data = tmp_path / "shared"
    with (
        local_server(data, profile=PROFILE, tenant="alice") as alice,
        local_server(data, profile=PROFILE, tenant="bob") as bob,
        connect(bob.ws_url) as bob_ws,
        connect(alice.ws_url) as alice_ws,
    ):
        sid = new_session(alice)
        assert call(bob.url, "GET", f"/sessions/{sid}/status")[0] == 404  # the same rule as HTTP
        assert subscribe(bob_ws, sid) == {"type": "error", "error": f"Session {sid!r} not found"}
        assert subscribe(alice_ws, sid)["type"] == "subscribed"
        call(alice.url, "POST", f"/sessions/{sid}/messages", {"message": msg("m0", "Ahoy")})
        assert receive(alice_ws)["type"] == "session_status"
        with pytest.raises(TimeoutError):
            bob_ws.recv(timeout=0.5)


def test_bad_messages_are_answered_and_unsubscribe_stops_events(tmp_path: Path) -> None:
    with local_server(tmp_path / "data", profile=PROFILE) as server, connect(server.ws_url) as ws:
        sid = new_session(server)
        ws.send("hello")
        assert receive(ws)["type"] == "error"
        ws.send(json.dumps({"action": "publish", "sessionId": sid}))
        assert "Unknown action 'publish'" in receive(ws)["error"]
        ws.send(b"\x00binary")
        assert receive(ws)["type"] == "error"
        assert subscribe(ws, sid)["type"] == "subscribed"
        ws.send(json.dumps({"action": "unsubscribe", "sessionId": sid}))
        assert subscribe(ws, "no-such-session")["type"] == "error"  # also proves the unsubscribe was handled
        call(server.url, "POST", f"/sessions/{sid}/messages", {"message": msg("m0", "Ahoy")})
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0.5)


def test_a_session_id_no_session_can_hold_is_answered_and_the_connection_keeps_its_subscriptions(
    tmp_path: Path,
) -> None:
    """A NUL or a lone surrogate in ``sessionId`` raised from the store: the server wrote an HTTP 500 into
    the upgraded socket, and the client lost the connection and every subscription on it."""
    with local_server(tmp_path / "data", profile=PROFILE) as server, connect(server.ws_url) as ws:
        sid = new_session(server)
        assert subscribe(ws, sid)["type"] == "subscribed"
        for bad in ("\u0000", "\ud800"):
            ws.send(json.dumps({"action": "subscribe", "sessionId": bad}))  # sent as \u escapes, valid JSON
            answer = receive(ws)
            assert answer["type"] == "error" and "may only use the characters" in answer["error"]
        # The connection is still open and still subscribed: the next append reaches it
        call(server.url, "POST", f"/sessions/{sid}/messages", {"message": msg("m0", "Ahoy")})
        assert until(ws, lambda event: event.get("sessionId") == sid)[-1]["sessionId"] == sid


def test_a_closed_client_is_forgotten(tmp_path: Path) -> None:
    with local_server(tmp_path / "data", profile=PROFILE) as server:
        sid = new_session(server)
        with connect(server.ws_url) as gone:
            assert subscribe(gone, sid)["type"] == "subscribed"
        # Writes after the client left still succeed, and a new subscriber still gets events
        assert call(server.url, "POST", f"/sessions/{sid}/messages", {"message": msg("m0", "Ahoy")})[0] == 201
        with connect(server.ws_url) as ws:
            assert subscribe(ws, sid)["type"] == "subscribed"
            call(server.url, "POST", f"/sessions/{sid}/messages", {"message": msg("m1", "Aye")})
            assert receive(ws)["type"] == "session_status"
        with pytest.raises(ConnectionClosed):
            gone.recv(timeout=0.1)
