"""A tenant's searchable knowledge over HTTP: its entries listed in pages, read, removed; on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from threadloom.api.paging import anchor_cursor
from threadloom.api.runtime import Runtime, set_runtime

from tests.support.api import backend_store, call, seeded_runtime

SESSION = "s-demo"


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    runtime = seeded_runtime(tmp_path, store=backend_store(request))[0]
    yield runtime
    set_runtime(None)


def remember(title: str, content: str, tenant: str | None = None) -> None:
    entry = {"input": {"label": "knowledge", "content": content, "metadata": {"title": title}}}
    options = {"tenant": tenant} if tenant else {}
    session = SESSION
    if tenant:
        assert call("POST", "/sessions", {"name": "own"}, **options)[0] == 201
        session = call("GET", "/sessions", **options)[1]["sessions"][0]["id"]
    status, body = call("POST", f"/sessions/{session}/tools/set_context", entry, **options)
    assert (status, body["isError"]) == (200, False), body


def search(query: str) -> str:
    found = call("POST", f"/sessions/{SESSION}/tools/search_context", {"input": {"label": "knowledge", "query": query}})
    return str(found[1]["output"])


def test_entries_are_listed_in_key_order_one_page_at_a_time(runtime: Runtime) -> None:
    for title in ("Tides", "Anchors", "Moorings", "Gulls", "Buoys"):
        remember(title, f"Notes on {title.lower()}")
    keys: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        status, page = call("GET", "/knowledge/knowledge", query=query)
        assert status == 200, page
        assert len(page["entries"]) <= 2
        keys += [entry["key"] for entry in page["entries"]]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert keys == ["anchors", "buoys", "gulls", "moorings", "tides"]
    assert pages == 3
    first = call("GET", "/knowledge/knowledge", query={"limit": "1"})[1]["entries"][0]
    assert first["content"] == "Notes on anchors"
    assert first["createdAt"].endswith("Z") and first["updatedAt"] >= first["createdAt"]


def test_an_entry_is_read_and_removed_with_its_search_terms(runtime: Runtime) -> None:
    remember("Lighthouse", "The keeper lights the lamp at dusk")
    remember("Harbour", "Boats wait for the tide")
    status, entry = call("GET", "/knowledge/knowledge/entry", query={"key": "lighthouse"})
    assert (status, entry["content"]) == (200, "The keeper lights the lamp at dusk")
    assert "[lighthouse]" in search("keeper")

    assert call("DELETE", "/knowledge/knowledge/entry", query={"key": "lighthouse"}) == (200, {"deleted": True})
    status, body = call("DELETE", "/knowledge/knowledge/entry", query={"key": "lighthouse"})
    assert (status, body["error"]["code"]) == (404, "not_found")
    assert call("GET", "/knowledge/knowledge/entry", query={"key": "lighthouse"})[0] == 404
    assert search("keeper") == "No results found."
    assert [e["key"] for e in call("GET", "/knowledge/knowledge")[1]["entries"]] == ["harbour"]
    assert "[harbour]" in search("tide")
    # The session's blocks are read again (this process held them loaded), and a refresh of its frozen
    # prompt shows the new count too.
    blocks = call("GET", f"/sessions/{SESSION}/context")[1]["blocks"]
    assert [b["content"] for b in blocks if b["label"] == "knowledge"] == ["1 entries indexed."]
    refreshed = call("POST", f"/sessions/{SESSION}/system-prompt/refresh")[1]["systemPrompt"]
    assert "1 entries indexed." in refreshed


def test_labels_that_are_not_searchable_blocks_and_bad_input_are_refused(runtime: Runtime) -> None:
    for label in ("memory", "skills", "nothing-here"):
        status, body = call("GET", f"/knowledge/{label}")
        assert (status, body["error"]["message"]) == (404, f"No searchable block '{label}' in this namespace")
        assert call("DELETE", f"/knowledge/{label}/entry", query={"key": "x"})[0] == 404
    status, body = call("GET", "/knowledge/knowledge/entry")
    assert status == 422 and "key" in body["error"]["message"]
    assert call("DELETE", "/knowledge/knowledge/entry", query={"key": ""})[0] == 422
    status, body = call("GET", "/knowledge/knowledge", query={"cursor": "not a cursor!"})
    assert (status, body["error"]["code"]) == (400, "bad_request")
    other_list = call("GET", "/sessions", query={"limit": "1"})[1]["nextCursor"]
    assert call("GET", "/knowledge/knowledge", query={"cursor": other_list})[0] == 400
    another_label = anchor_cursor("knowledge", "other-label", "a")
    status, body = call("GET", "/knowledge/knowledge", query={"cursor": another_label})
    assert status == 400 and "another list" in body["error"]["message"]
    assert call("GET", "/knowledge/knowledge", query={"limit": "0"})[0] == 422


def test_another_tenant_neither_sees_nor_removes_the_entries(runtime: Runtime) -> None:
    remember("Secret", "A's zanzibar plan")
    remember("Secret", "B's own plan", tenant="tenant-b")
    assert [e["content"] for e in call("GET", "/knowledge/knowledge", tenant="tenant-b")[1]["entries"]] == [
        "B's own plan"
    ]
    assert call("DELETE", "/knowledge/knowledge/entry", query={"key": "secret"}, tenant="tenant-b")[0] == 200
    assert call("DELETE", "/knowledge/knowledge/entry", query={"key": "secret"}, tenant="tenant-b")[0] == 404
    status, entry = call("GET", "/knowledge/knowledge/entry", query={"key": "secret"})
    assert (status, entry["content"]) == (200, "A's zanzibar plan")
    assert "zanzibar" in search("zanzibar")
