"""GET /sessions/{id}/history through the handler: pages by count and bytes, keyset cursors, overlays at edges.

Both backends. The response bodies are measured as the Lambda returns them: no page may pass
``max_response_bytes``, and the pages concatenated are the library's ``get_history``.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.paging import encode_cursor
from threadloom.api.runtime import Runtime, set_runtime

from tests.support.api import SESSION, TENANT, FakeLambdaContext, gateway_event, seeded_runtime, text


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    if request.param == "postgres":
        store: Any = request.getfixturevalue("postgres_store_factory")()
    else:
        store = SqliteStore(str(tmp_path / "api.db"))
    runtime, _ = seeded_runtime(tmp_path, store)
    yield runtime
    set_runtime(None)


def get(path: str, **query: str) -> tuple[int, bytes, Any]:
    """Status, raw body bytes and parsed body of a GET, as the Lambda answers it."""
    from threadloom_api import lambda_handler

    response = lambda_handler(gateway_event("GET", path, query=query), FakeLambdaContext())  # type: ignore[arg-type]
    body: str = response["body"]
    return int(response["statusCode"]), body.encode("utf-8"), json.loads(body)


def all_pages(path: str, **query: str) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        status, _, body = get(path, **query, **({"cursor": cursor} if cursor else {}))
        assert status == 200, body
        pages.append(body)
        cursor = body["nextCursor"]
        if cursor is None:
            return pages
        assert len(pages) < 1000, "the cursor does not advance"


def without_summary_times(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in m.items() if k != "createdAt"} if m["id"].startswith("compaction_") else m for m in messages
    ]


def test_large_messages_page_under_the_response_cap(runtime: Runtime) -> None:
    # 30 messages of ~240 KB (ASCII and two-byte text): the default page size would be ~7 MB
    manager = runtime.manager(TENANT)
    words = " ".join(f"word{index}" for index in range(400))
    for index in range(30):
        base = words if index % 2 else "é" * 2000 + " " + words
        manager.append(SESSION, text(f"big{index}", "user", base * (240_000 // len(base.encode()))))
    cap = runtime.limits.max_response_bytes
    pages: list[bytes] = []
    seen: list[str] = []
    cursor: str | None = None
    while True:
        status, raw, body = get(f"/sessions/{SESSION}/history", **({"cursor": cursor} if cursor else {}))
        assert status == 200 and body["messages"]
        assert len(raw) <= cap, f"page of {len(raw)} bytes passes the {cap}-byte cap"
        pages.append(raw)
        seen += [message["id"] for message in body["messages"]]
        assert body["total"] == 34
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert seen == ["m1", "m2", "m3", "m4"] + [f"big{index}" for index in range(30)]
    assert len(pages) >= 2  # the bytes, not the count (default 50), ended the first page


def test_pages_with_overlays_equal_the_library_history_for_every_page_size(runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    manager.append_all(SESSION, [text(f"x{index}", "user", f"turn {index}") for index in range(150)])
    manager.append(SESSION, text("alt", "user", "a branch"), "x40")
    manager.add_compaction(SESSION, "first summary", "m2", "x10")
    manager.add_compaction(SESSION, "a long one", "x20", "x120")
    manager.add_compaction(SESSION, "on the branch only", "x30", "alt")
    session = manager.get_session(SESSION)
    for leaf in ("x149", "alt"):
        expected = without_summary_times(session.get_history(leaf))
        for limit in ("1", "2", "7", "50", "200"):
            pages = all_pages(f"/sessions/{SESSION}/history", limit=limit, leafId=leaf)
            assert all(len(page["messages"]) <= int(limit) for page in pages)
            assert {page["total"] for page in pages} == {len(expected)}
            assert {page["leafId"] for page in pages} == {leaf}
            flat = [message for page in pages for message in page["messages"]]
            assert without_summary_times(flat) == expected, f"leaf {leaf}, limit {limit}"


def test_the_cursor_pins_the_leaf_while_the_session_grows(runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    _, _, first = get(f"/sessions/{SESSION}/history", limit="2")
    manager.append(SESSION, text("m5", "assistant", "a later answer"))
    _, _, second = get(f"/sessions/{SESSION}/history", limit="2", cursor=first["nextCursor"])
    assert [m["id"] for m in first["messages"] + second["messages"]] == ["m1", "m2", "m3", "m4"]
    assert second["nextCursor"] is None and second["leafId"] == "m4"


def test_bad_cursors_are_400_and_a_stale_one_a_clear_4xx(runtime: Runtime) -> None:
    path = f"/sessions/{SESSION}/history"
    _, _, first = get(path, limit="2")
    cursor = first["nextCursor"]
    state = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    tampered = [
        "garbage!",
        base64.urlsafe_b64encode(b"[1,2]").decode(),
        encode_cursor({**state, "d": -1}),
        encode_cursor({**state, "d": "2"}),
        encode_cursor({**state, "d": True}),
        encode_cursor({**state, "l": 5}),
        encode_cursor({**state, "a": None}),
        encode_cursor({**state, "t": -3}),
        encode_cursor({key: value for key, value in state.items() if key != "l"}),
        encode_cursor({**state, "j": [1]}),
        encode_cursor({**state, "j": ["1", "m3"]}),
        encode_cursor({**state, "j": [-1, "m3"]}),
        encode_cursor({**state, "j": [True, "m3"]}),
        encode_cursor({**state, "j": [2**63, "m3"]}),
        encode_cursor({**state, "j": [3, None]}),
        encode_cursor({**state, "j": {"s": 3}}),
    ]
    for bad in tampered:
        status, _, body = get(path, cursor=bad)
        assert status == 400 and body["error"]["message"] == "Invalid cursor", bad
    # A walk anchor that is no row of the session (or not at or below the page) is only not used
    for anchor in ([3, "m3"], [999, "m4"], [1, "m1"]):
        status, _, body = get(path, limit="2", cursor=encode_cursor({**state, "j": anchor}))
        assert status == 200 and [m["id"] for m in body["messages"]] == ["m3", "m4"], anchor
    status, _, body = get(path, cursor=encode_cursor({**state, "d": 10**9}))
    assert status == 409 and "without a cursor" in body["error"]["message"]
    status, _, body = get(path, cursor=encode_cursor({**state, "a": "m3"}))
    assert status == 409 and "without a cursor" in body["error"]["message"]
    manager = runtime.manager(TENANT)
    manager.delete_messages(SESSION, ["m2"])  # the tree changed under the cursor
    status, _, body = get(path, cursor=cursor)
    assert status == 409 and "changed" in body["error"]["message"]
    manager.delete_messages(SESSION, ["m4"])  # the cursor's leaf is gone
    status, _, body = get(path, cursor=cursor)
    assert status == 404 and "no longer exists" in body["error"]["message"]


def test_random_trees_page_like_the_library(runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    rng = random.Random(11)
    ids = ["m4"]
    for index in range(120):
        parent = ids[-1] if rng.random() < 0.85 else rng.choice(ids)
        manager.append(SESSION, text(f"r{index}", "user", "word " * rng.randint(1, 40)), parent)
        ids.append(f"r{index}")
    session = manager.get_session(SESSION)
    for _ in range(6):
        path = [m["id"] for m in session.get_history(rng.choice(ids)) if not m["id"].startswith("compaction_")]
        first, second = sorted(rng.sample(range(len(path)), 2)) if len(path) > 1 else (0, 0)
        manager.add_compaction(SESSION, f"summary {first}", path[first], path[second])
    leaves = [message_id for message_id in ids if not session.get_branches(message_id)]
    for leaf in leaves[:8]:
        expected = without_summary_times(session.get_history(leaf))
        limit = str(rng.randint(1, 30))
        flat = [
            m for page in all_pages(f"/sessions/{SESSION}/history", limit=limit, leafId=leaf) for m in page["messages"]
        ]
        assert without_summary_times(flat) == expected
