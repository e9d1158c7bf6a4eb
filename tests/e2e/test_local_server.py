"""A whole conversation over real HTTP against ``python -m threadloom.local_server`` in a subprocess."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.local_server import call, local_server

pytestmark = pytest.mark.e2e
PROFILE = """
blocks:
  - {label: soul, kind: static, content: You are a ship's navigator.}
  - {label: memory, kind: writable, max_tokens: 1100}
  - {label: skills, kind: skills}
compaction: {threshold: 100000, protect_head: 1, tail_token_budget: 30, min_tail_messages: 2}
searchable_history: history
"""


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("local-server") / "d", profile=PROFILE) as server:
        yield server.url


def msg(message_id: str, role: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def test_a_whole_conversation(base_url: str) -> None:
    # Given a running server with a fresh session
    assert call(base_url, "GET", "/health") == (200, {"status": "ok", "storage": "reachable"})
    status, session = call(base_url, "POST", "/sessions", {"name": "Voyage"})
    assert status == 201
    sid = session["id"]

    # When a conversation is appended (one message, then a chain)
    assert (
        call(base_url, "POST", f"/sessions/{sid}/messages", {"message": msg("u1", "user", "Plot a course to Lisbon")})[
            0
        ]
        == 201
    )
    chain = [
        msg(f"t{i}", "assistant" if i % 2 else "user", f"Leg {i}: steer west past the lighthouse.") for i in range(8)
    ]
    status, appended = call(base_url, "POST", f"/sessions/{sid}/messages", {"messages": chain})
    assert status == 201 and appended["id"] == "t7"
    assert call(base_url, "POST", f"/sessions/{sid}/messages", {"message": chain[-1]})[0] == 200  # duplicate

    # Then history and the frozen prompt read back
    status, history = call(base_url, "GET", f"/sessions/{sid}/history?limit=100")
    assert status == 200 and [m["id"] for m in history["messages"]] == ["u1"] + [f"t{i}" for i in range(8)]
    status, prompt = call(base_url, "GET", f"/sessions/{sid}/system-prompt")
    assert status == 200 and "You are a ship's navigator." in prompt["systemPrompt"]

    # set_context through the tools endpoint, a skill load, and the tool specs
    status, out = call(
        base_url,
        "POST",
        f"/sessions/{sid}/tools/set_context",
        {"input": {"label": "memory", "content": "Destination: Lisbon"}},
    )
    assert status == 200 and out["output"].startswith("Written to memory.")
    assert call(base_url, "GET", f"/sessions/{sid}/context/memory")[1]["content"] == "Destination: Lisbon"
    status, loaded = call(
        base_url, "POST", f"/sessions/{sid}/tools/load_context", {"input": {"label": "skills", "key": "pirate"}}
    )
    assert status == 200 and "arr" in loaded["output"]
    status, specs = call(base_url, "GET", f"/sessions/{sid}/tools?format=anthropic")
    assert status == 200 and {"set_context", "session_search"} <= {tool["name"] for tool in specs["tools"]}

    # Search in the session and across sessions
    other = call(base_url, "POST", "/sessions", {"name": "Harbour"})[1]["id"]
    call(base_url, "POST", f"/sessions/{other}/messages", {"message": msg("h1", "user", "The lighthouse keeper waved")})
    status, found = call(base_url, "GET", f"/sessions/{sid}/search?q=Lisbon")
    assert status == 200 and [hit["id"] for hit in found["results"]] == ["u1"]
    status, everywhere = call(base_url, "GET", "/search?q=lighthouse")
    assert status == 200 and {hit["sessionId"] for hit in everywhere["results"]} == {sid, other}
    status, tool_search = call(
        base_url, "POST", f"/sessions/{sid}/tools/session_search", {"input": {"query": "keeper"}}
    )
    assert status == 200 and "keeper" in tool_search["output"]

    # Branch at t1, list the branches, fork at t3
    status, branch = call(
        base_url, "POST", f"/sessions/{sid}/messages", {"message": msg("b1", "user", "Or Porto?"), "parentId": "t1"}
    )
    assert status == 201 and branch["parentId"] == "t1"
    status, children = call(base_url, "GET", f"/sessions/{sid}/messages/t1/branches")
    assert sorted(m["id"] for m in children["messages"]) == ["b1", "t2"]
    status, fork = call(base_url, "POST", f"/sessions/{sid}/fork", {"atMessageId": "t3", "name": "Side trip"})
    assert status == 201 and fork["parentSessionId"] == sid
    assert call(base_url, "GET", f"/sessions/{fork['id']}/history")[1]["total"] == 5

    # Compaction is queued, then appears in the history of the main branch
    assert (
        call(
            base_url,
            "POST",
            f"/sessions/{sid}/messages",
            {"message": msg("t8", "user", "Back on course"), "parentId": "t7"},
        )[0]
        == 201
    )
    status, queued = call(base_url, "POST", f"/sessions/{sid}/compact", {})
    assert status == 202 and queued["status"] == "queued"
    deadline = time.monotonic() + 15
    ids: list[str] = []
    while time.monotonic() < deadline:
        ids = [m["id"] for m in call(base_url, "GET", f"/sessions/{sid}/history")[1]["messages"]]
        if any(i.startswith("compaction_") for i in ids):
            break
        time.sleep(0.1)
    assert any(i.startswith("compaction_") for i in ids), ids
    assert len(call(base_url, "GET", f"/sessions/{sid}/compactions")[1]["compactions"]) == 1

    # Another tenant's view and errors keep the envelope
    status, missing = call(base_url, "GET", "/sessions/nope")
    assert status == 404 and missing["error"]["code"] == "not_found"
