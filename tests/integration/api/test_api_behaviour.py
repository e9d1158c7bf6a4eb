"""Handler behaviour beyond the sample events: pagination, limits, branching, idempotency, compaction."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from threadloom.api.profile import load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime

from tests.support.api import invoke, load_event, seeded_runtime, text


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


def request(method: str, path: str, body: Any = None, query: dict[str, str] | None = None, **headers: str) -> Any:
    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["queryStringParameters"] = query
    event["rawQueryString"] = "&".join(f"{key}={value}" for key, value in (query or {}).items())
    event["headers"].update(headers)
    if body is not None:
        event["body"] = json.dumps(body)
    return invoke(event)


def test_history_pages_follow_the_cursor(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        query = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        status, body = request("GET", "/sessions/s-demo/history", query=query)
        assert status == 200
        seen += [message["id"] for message in body["messages"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert seen == ["m1", "m2", "m3", "m4"]
    assert request("GET", "/sessions/s-demo/history", query={"cursor": "garbage!"})[0] == 400


def test_sessions_list_paginates(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    status, first = request("GET", "/sessions", query={"limit": "1"})
    assert status == 200 and len(first["sessions"]) == 1 and first["nextCursor"]
    _, second = request("GET", "/sessions", query={"limit": "1", "cursor": first["nextCursor"]})
    assert {first["sessions"][0]["id"], second["sessions"][0]["id"]} == {"s-demo", "s-other"}


def test_too_large_message_is_413(tmp_path: Path) -> None:
    runtime, _ = seeded_runtime(tmp_path)
    limit = runtime.profile.limits.max_message_bytes
    status, body = request("POST", "/sessions/s-demo/messages", {"message": text("big", "user", "x" * limit)})
    assert status == 413 and body["error"]["code"] == "payload_too_large"


def test_branch_then_branches_lists_both_children(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    assert (
        request("POST", "/sessions/s-demo/messages", {"message": text("b1", "user", "alt"), "parentId": "m2"})[0] == 201
    )
    _, body = request("GET", "/sessions/s-demo/messages/m2/branches")
    assert sorted(message["id"] for message in body["messages"]) == ["b1", "m3"]
    _, history = request("GET", "/sessions/s-demo/history", query={"leafId": "m4"})
    assert [message["id"] for message in history["messages"]] == ["m1", "m2", "m3", "m4"]


def test_inline_compaction_runs_on_the_request(tmp_path: Path) -> None:
    runtime = Runtime(
        Settings(sqlite_path=str(tmp_path / "inline.db"), compaction_mode="inline"),
        profile=load_profile().model_copy(
            update={"compaction": load_profile().compaction.model_copy(update={"tail_token_budget": 10})}
        ),
    )
    set_runtime(runtime)
    runtime.store.registry("user-123").create("Long", session_id="s-long")
    runtime.manager("user-123").append_all(
        "s-long", [text(f"x{i}", "user" if i % 2 == 0 else "assistant", f"Turn {i} about ships.") for i in range(12)]
    )
    status, body = request("POST", "/sessions/s-long/compact", {})
    assert status == 200 and body["status"] == "compacted"
    _, history = request("GET", "/sessions/s-long/history")
    assert history["messages"][3]["id"].startswith("compaction_")


def test_idempotency_key_replays_and_rejects_a_different_body(tmp_path: Path) -> None:
    with mock_aws():
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="idem",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        seeded_runtime(tmp_path, idempotency_table="idem")
        first = request("POST", "/sessions", {"name": "Once"}, **{"idempotency-key": "k-1"})
        again = request("POST", "/sessions", {"name": "Once"}, **{"idempotency-key": "k-1"})
        other = request("POST", "/sessions", {"name": "Other"}, **{"idempotency-key": "k-1"})
    assert first[0] == again[0] == 201 and first[1]["id"] == again[1]["id"]
    assert other[0] == 409 and other[1]["error"]["code"] == "idempotency_key_reused"


def test_unknown_tool_and_label_are_404(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    assert request("POST", "/sessions/s-demo/tools/nope", {"input": {}})[0] == 404
    assert request("GET", "/sessions/s-demo/context/nope")[0] == 404
    assert request("GET", "/sessions/s-demo/messages/nope")[0] == 404
