"""The endpoints the inspector page needs, through the handler: page and files, branch points, context
window, compaction originals."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import get_runtime, set_runtime

from tests.support.api import TENANT, FakeLambdaContext, load_event, seeded_runtime, text


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


def request(method: str, path: str, body: Any = None, *, page: bool = False) -> tuple[int, Any, dict[str, str]]:
    """One call through the handler: status, body (JSON parsed, else text) and lower-cased headers."""
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("inspector_page" if page else "get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    if body is not None:
        event["body"] = json.dumps(body)
    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    headers = {key.lower(): value for key, value in (response.get("headers") or {}).items()}
    payload = response.get("body")
    if payload and headers.get("content-type", "").startswith("application/json"):
        payload = json.loads(payload)
    return int(response["statusCode"]), payload, headers


def test_the_page_and_its_files_are_served_without_a_token(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    status, html, headers = request("GET", "/", page=True)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in headers["content-security-policy"]
    assert all(f"/inspector/{name}" in html for name in ("app.js", "inspector.css", "favicon.svg"))
    for name in ("app.js", "api.js", "conversation.js", "inspector.css", "favicon.svg"):
        status, body, headers = request("GET", f"/inspector/{name}", page=True)
        assert status == 200 and body, name
    assert headers["content-type"] == "image/svg+xml"
    # Only flat names of known types: no traversal, no Python source
    for name in ("..%2Fapi%2Fservice.py", "__init__.py", "index.htm", ".hidden.js"):
        status, body, _ = request("GET", f"/inspector/{name}", page=True)
        assert status == 404 and body["error"]["code"] == "not_found", name


def test_config_names_the_live_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seeded_runtime(tmp_path)
    # Deployed without a WebSocket API: none
    assert request("GET", "/inspector/config.json", page=True)[1] == {"websocketUrl": None}
    # With the stack's WebSocket API (its management endpoint): the same address over wss
    monkeypatch.setenv("THREADLOOM_WEBSOCKET_ENDPOINT", "https://abc.execute-api.eu-west-1.amazonaws.com/dev")
    expected = {"websocketUrl": "wss://abc.execute-api.eu-west-1.amazonaws.com/dev"}
    assert request("GET", "/inspector/config.json", page=True)[1] == expected
    # An explicit URL wins
    monkeypatch.setenv("THREADLOOM_WEBSOCKET_URL", "wss://ws.example.com/live")
    assert request("GET", "/inspector/config.json", page=True)[1] == {"websocketUrl": "wss://ws.example.com/live"}


def test_every_module_the_page_imports_is_packaged() -> None:
    from importlib import resources

    folder = resources.files("threadloom.inspector")
    modules = {entry.name for entry in folder.iterdir() if entry.name.endswith(".js")}
    for module in modules:
        source = folder.joinpath(module).read_text(encoding="utf-8")
        for line in source.splitlines():
            if line.startswith("import ") and " from " in line:
                target = line.rsplit(" from ", 1)[1].strip(' ";').removeprefix("./")
                assert target in modules, f"{module} imports {target}, which is not packaged"


def test_branch_points_through_the_api(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    manager = get_runtime().manager(TENANT)
    manager.append("s-demo", text("m2b", "assistant", "Another answer"), "m1")
    status, body, _ = request("GET", "/sessions/s-demo/branch-points")
    assert status == 200
    assert body == {
        "branchPoints": [{"parentId": "m1", "children": [{"id": "m2", "leafId": "m4"}, {"id": "m2b", "leafId": "m2b"}]}]
    }
    assert request("GET", "/sessions/s-nope/branch-points")[0] == 404


def test_context_window_shows_a_stale_frozen_prompt_until_refreshed(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    _, before, _ = request("GET", "/sessions/s-demo/context-window")
    assert before["frozenPrompt"] is None
    assert before["totalTokens"] == before["systemPromptTokens"] + before["historyTokens"]
    assert before["historyMessages"] == 4 and before["threshold"] == 100_000
    request("GET", "/sessions/s-demo/system-prompt")  # freeze
    assert request("PUT", "/sessions/s-demo/context/memory", {"content": "Keeps receipts"})[0] == 200
    _, stale, _ = request("GET", "/sessions/s-demo/context-window")
    assert "Keeps receipts" in stale["freshPrompt"] and "Keeps receipts" not in stale["frozenPrompt"]
    memory = next(block for block in stale["blocks"] if block["label"] == "memory")
    assert memory["tokens"] > 0 and memory["maxTokens"] == 1100
    request("POST", "/sessions/s-demo/system-prompt/refresh")
    _, fresh, _ = request("GET", "/sessions/s-demo/context-window")
    assert fresh["frozenPrompt"] == fresh["freshPrompt"]


def test_compaction_originals_are_the_stored_messages_of_the_range(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    stored = get_runtime().manager(TENANT).add_compaction("s-demo", "They talked taxes.", "m2", "m3")
    _, history, _ = request("GET", "/sessions/s-demo/history")
    overlay_id = history["messages"][1]["id"]
    assert overlay_id == f"compaction_{stored.id}"
    for name in (overlay_id, stored.id):
        status, body, _ = request("GET", f"/sessions/s-demo/compactions/{name}/originals")
        assert status == 200 and [m["id"] for m in body["messages"]] == ["m2", "m3"]
    status, body, _ = request("GET", f"/sessions/s-other/compactions/{stored.id}/originals")
    assert status == 404 and "not found" in body["error"]["message"]
