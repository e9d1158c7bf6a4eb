"""Lists through the real handler on SQLite and PostgreSQL: branches, the session list and search page by
count and by bytes, so no response can pass Lambda's 6 MB limit however large the data."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.paging import item_budget
from threadloom.api.runtime import Runtime, set_runtime
from threadloom.limits import DEFAULT_LIMITS

from tests.support.api import SESSION, TENANT, invoke, load_event, seeded_runtime, text

LARGE_TEXT = 240 * 1024  # below max_message_bytes (256 KiB), so about twenty fit in one 5 MiB page


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    if request.param == "postgres":
        store: Any = request.getfixturevalue("postgres_store_factory")()
    else:
        store = SqliteStore(str(tmp_path / "api.db"))
    runtime, _ = seeded_runtime(tmp_path, store=store)
    yield runtime
    set_runtime(None)


def request(method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> tuple[int, Any, int]:
    """Status, parsed body and the body's size in bytes (what Lambda would have to return)."""
    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["queryStringParameters"] = query
    event["rawQueryString"] = "&".join(f"{key}={value}" for key, value in (query or {}).items())
    if body is not None:
        event["body"] = json.dumps(body)
    status, parsed = invoke(event)
    return status, parsed, len(json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def all_pages(path: str, key: str, query: dict[str, str] | None = None) -> list[tuple[list[Any], int]]:
    """Every page of a list endpoint as (items, response bytes), following ``nextCursor``."""
    pages: list[tuple[list[Any], int]] = []
    cursor: str | None = None
    while True:
        params = {**(query or {}), **({"cursor": cursor} if cursor else {})}
        status, body, size = request("GET", path, query=params)
        assert status == 200, body
        pages.append((body[key], size))
        cursor = body.get("nextCursor")
        if cursor is None:
            return pages
        assert len(pages) < 10_000, "the cursor never ends"


def test_five_thousand_children_page_completely_without_duplicates_or_gaps(runtime: Runtime) -> None:
    session = runtime.manager(TENANT).get_session(SESSION)
    children = [f"c{index:04d}" for index in range(5000)]
    for child in children:
        session.append_message(text(child, "assistant", f"answer {child}"), "m1")

    pages = all_pages(f"/sessions/{SESSION}/messages/m1/branches", "messages", {"limit": "200"})

    seen = [message["id"] for items, _ in pages for message in items]
    assert seen == ["m2", *children]  # insertion order, every child exactly once
    assert [len(items) for items, _ in pages] == [200] * 25 + [1]
    # Without a limit a page holds the default page size, and existing callers still read `messages`.
    _, first, _ = request("GET", f"/sessions/{SESSION}/messages/m1/branches")
    assert len(first["messages"]) == DEFAULT_LIMITS.default_page_size and first["nextCursor"]


def test_large_children_are_paged_by_bytes(runtime: Runtime) -> None:
    session = runtime.manager(TENANT).get_session(SESSION)
    children = [f"big{index:02d}" for index in range(40)]  # about 9.4 MB of children under one message
    for child in children:
        session.append_message(text(child, "assistant", child[-1] * LARGE_TEXT), "m4")

    pages = all_pages(f"/sessions/{SESSION}/messages/m4/branches", "messages", {"limit": "200"})

    assert [message["id"] for items, _ in pages for message in items] == children
    assert len(pages) >= 2
    for items, size in pages:
        assert size <= DEFAULT_LIMITS.max_response_bytes
        assert 0 < len(items) < 200
    assert sum(size for _, size in pages[:-1]) / (len(pages) - 1) > item_budget(DEFAULT_LIMITS) * 0.9


def test_a_branch_cursor_is_checked(runtime: Runtime) -> None:
    session = runtime.manager(TENANT).get_session(SESSION)
    session.append_message(text("b1", "user", "alt"), "m1")
    status, body, _ = request("GET", f"/sessions/{SESSION}/messages/m1/branches", query={"limit": "1"})
    assert status == 200 and [m["id"] for m in body["messages"]] == ["m2"]
    cursor = body["nextCursor"]
    assert (
        request("GET", f"/sessions/{SESSION}/messages/m1/branches", query={"cursor": cursor})[1]["messages"][0]["id"]
        == "b1"
    )
    # A cursor of another message's children, or garbage, is a 400 with the error envelope.
    status, body, _ = request("GET", f"/sessions/{SESSION}/messages/m2/branches", query={"cursor": cursor})
    assert status == 400 and body["error"]["code"] == "bad_request"
    assert request("GET", f"/sessions/{SESSION}/messages/m1/branches", query={"cursor": "garbage!"})[0] == 400
    assert request("GET", f"/sessions/{SESSION}/messages/m1/branches", query={"limit": "0"})[0] in (400, 422)
    assert request("GET", f"/sessions/{SESSION}/messages/nope/branches")[0] == 404


def test_session_list_pages_by_count_and_bytes(runtime: Runtime) -> None:
    registry = runtime.store.registry(TENANT)
    # Names and metadata at the hard ceiling a profile may allow (4096 characters, 3 UTF-8 bytes each here):
    # about 48 KB a session, so 200 of them would be 9.6 MB.
    long = "名" * 4096
    created = [
        registry.create(f"{index:03d}{long}", model=long, source=long, subject_id=long).id for index in range(300)
    ]

    pages = all_pages("/sessions", "sessions", {"limit": "200"})

    ids = [session["id"] for items, _ in pages for session in items]
    assert len(ids) == len(set(ids)) == 302
    assert set(created) <= set(ids)
    assert all(size <= DEFAULT_LIMITS.max_response_bytes for _, size in pages)
    assert all(len(items) < 200 for items, _ in pages)  # every page was cut by bytes, not by count


def test_search_results_are_capped_by_bytes_and_say_so(runtime: Runtime) -> None:
    session = runtime.manager(TENANT).get_session(SESSION)
    for index in range(40):
        session.append_message(text(f"hit{index:02d}", "user", "needle " + "x" * LARGE_TEXT), "m4")

    for path in (f"/sessions/{SESSION}/search", "/search"):
        status, body, size = request("GET", path, query={"q": "needle", "limit": "100"})
        assert status == 200 and size <= DEFAULT_LIMITS.max_response_bytes
        assert 0 < len(body["results"]) < 40 and body["truncated"] is True
        small_status, small, _ = request("GET", path, query={"q": "needle", "limit": "3"})
        assert small_status == 200 and len(small["results"]) == 3 and small["truncated"] is False
    _, nothing, _ = request("GET", "/search", query={"q": "pirates"})
    assert nothing["truncated"] is False and nothing["results"]
