"""``GET /sessions`` gives each session's message count and a preview, on SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.runtime import Runtime, Settings, set_runtime

from tests.support.api import RecordingQueue, invoke, load_event, text

TENANT = "user-123"  # the claim in the sample events


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    if request.param == "postgres":
        store: Any = request.getfixturevalue("postgres_store_factory")()
    else:
        store = SqliteStore(str(tmp_path / "api.db"))
    runtime = Runtime(Settings(skills_dir=str(tmp_path / "skills")), store=store, queue=RecordingQueue())
    set_runtime(runtime)
    yield runtime
    set_runtime(None)


def call(method: str, path: str, body: Any = None, tenant: str = TENANT, query: str = "") -> tuple[int, Any]:
    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = tenant
    event["queryStringParameters"] = dict(item.split("=", 1) for item in query.split("&")) if query else None
    event["rawQueryString"] = query
    event["body"] = json.dumps(body) if body is not None else None
    return invoke(event)


def new_session(name: str, tenant: str = TENANT) -> str:
    status, created = call("POST", "/sessions", {"name": name}, tenant=tenant)
    assert status == 201
    return str(created["id"])


def listed(tenant: str = TENANT) -> dict[str, dict[str, Any]]:
    status, page = call("GET", "/sessions", tenant=tenant)
    assert status == 200, page
    return {item["id"]: item for item in page["sessions"]}


def test_count_and_preview_follow_the_latest_leaf(runtime: Runtime) -> None:
    sid = new_session("Voyage")
    chain = [text("u1", "user", "Plot a course to Lisbon"), text("a1", "assistant", "Steer west.")]
    assert call("POST", f"/sessions/{sid}/messages", {"messages": chain})[0] == 201
    branch = {"message": text("a1b", "assistant", "Head for Porto instead."), "parentId": "u1"}
    assert call("POST", f"/sessions/{sid}/messages", branch)[0] == 201
    item = listed()[sid]
    # Root → latest leaf is u1, a1b: two messages, whatever the other branch holds
    assert (item["messageCount"], item["preview"], item["previewRole"]) == (2, "Head for Porto instead.", "assistant")
    # The single session's answer is unchanged: the overview belongs to the list
    _, single = call("GET", f"/sessions/{sid}")
    assert "messageCount" not in single and "preview" not in single


def test_an_empty_session_has_no_messages_and_no_preview(runtime: Runtime) -> None:
    sid = new_session("Empty")
    item = listed()[sid]
    assert (item["messageCount"], item["preview"], item["previewRole"]) == (0, None, None)


def test_the_preview_is_the_first_non_empty_text_cut_at_160_characters(runtime: Runtime) -> None:
    sid = new_session("Long")
    words = "Ôlá, marinheiro! 🧭 " * 30  # non-ASCII and astral characters: counted as characters on both backends
    message = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "tool-get_weather", "toolCallId": "c1", "state": "output-available", "input": {}, "output": 1},
            {"type": "text", "text": ""},
            {"type": "text", "text": words},
        ],
    }
    assert call("POST", f"/sessions/{sid}/messages", {"message": message})[0] == 201
    item = listed()[sid]
    assert item["messageCount"] == 1 and item["preview"] == words[:160]


def test_a_leaf_without_text_has_a_count_but_no_preview(runtime: Runtime) -> None:
    sid = new_session("Tools only")
    message = {
        "id": "a1",
        "role": "assistant",
        "parts": [{"type": "tool-x", "toolCallId": "c1", "state": "output-available", "input": {}, "output": 1}],
    }
    assert call("POST", f"/sessions/{sid}/messages", {"message": message})[0] == 201
    item = listed()[sid]
    assert (item["messageCount"], item["preview"], item["previewRole"]) == (1, None, "assistant")


def test_another_tenants_sessions_give_nothing_away(runtime: Runtime) -> None:
    mine = new_session("Mine")
    theirs = new_session("Theirs", tenant="someone-else")
    secret = text("s1", "user", "The treasure is under the third palm")
    assert call("POST", f"/sessions/{theirs}/messages", {"message": secret}, tenant="someone-else")[0] == 201
    assert set(listed()) == {mine}
    assert "treasure" not in json.dumps(listed())
    # The statement itself is scoped: asked for the other tenant's id, the registry finds nothing
    assert runtime.manager(TENANT).overviews([theirs, mine]) == {}
