"""Overlays and the originals they replace page by count and bytes through the real handler, on both backends,
and the handler's last guard refuses any answer that would still pass the response cap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.paging import decode_cursor, encode_cursor
from threadloom.api.runtime import Runtime, set_runtime
from threadloom.limits import DEFAULT_LIMITS

from tests.integration.api.test_list_paging import all_pages, request
from tests.support.api import SESSION, TENANT, seeded_runtime, text

LARGE_TEXT = 240 * 1024


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    store: Any = (
        request.getfixturevalue("postgres_store_factory")()
        if request.param == "postgres"
        else SqliteStore(str(tmp_path / "api.db"))
    )
    runtime, _ = seeded_runtime(tmp_path, store=store)
    yield runtime
    set_runtime(None)


def test_the_originals_of_a_large_overlay_page_by_bytes_in_order(runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    big = [text(f"big{index:02d}", "user", "x" * LARGE_TEXT) for index in range(30)]  # about 7 MB replaced
    manager.append_all(SESSION, big)
    stored = manager.add_compaction(SESSION, "thirty large messages", "big00", "big29")

    pages = all_pages(f"/sessions/{SESSION}/compactions/{stored.id}/originals", "messages")

    assert [message["id"] for items, _ in pages for message in items] == [m["id"] for m in big]
    assert len(pages) >= 2
    assert all(size <= DEFAULT_LIMITS.max_response_bytes for _, size in pages)


def test_originals_page_by_count_and_the_cursor_is_tied_to_its_overlay(runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    manager.append_all(SESSION, [text(f"n{index}", "user", f"note {index}") for index in range(7)])
    first = manager.add_compaction(SESSION, "notes", "n0", "n6")
    path = f"/sessions/{SESSION}/compactions/compaction_{first.id}/originals"  # the prefixed id works too

    pages = all_pages(path, "messages", {"limit": "3"})
    assert [[message["id"] for message in items] for items, _ in pages] == [
        ["n0", "n1", "n2"],
        ["n3", "n4", "n5"],
        ["n6"],
    ]
    _, body, _ = request("GET", path, query={"limit": "3"})
    compactions = f"/sessions/{SESSION}/compactions"
    status, refused, _ = request("GET", compactions, query={"cursor": body["nextCursor"]})
    assert status == 400 and "another list" in refused["error"]["message"]
    forged = encode_cursor({**decode_cursor(body["nextCursor"]), "a": "never-stored"})
    status, gone, _ = request("GET", path, query={"cursor": forged})
    assert status == 409 and "never-stored" in gone["error"]["message"]


def test_overlays_with_long_summaries_page_by_bytes(runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    summary = "s" * (250 * 1024)  # near max_summary_bytes: about twenty fit in one page
    ids = []
    for index in range(25):
        manager.append(SESSION, text(f"o{index}", "user", f"turn {index}"))
        ids.append(manager.add_compaction(SESSION, summary, f"o{index}", f"o{index}").id)

    pages = all_pages(f"/sessions/{SESSION}/compactions", "compactions")

    assert [item["id"] for items, _ in pages for item in items] == ids
    assert len(pages) == 2
    assert all(size <= DEFAULT_LIMITS.max_response_bytes for _, size in pages)
    by_ten = all_pages(f"/sessions/{SESSION}/compactions", "compactions", {"limit": "10"})
    assert [len(items) for items, _ in by_ten] == [10, 10, 5]


def test_the_handler_refuses_an_answer_over_the_cap_with_the_envelope() -> None:
    from threadloom_api import within_response_cap

    event: dict[str, Any] = {"headers": {}}
    small = {"statusCode": 200, "body": '{"ok":true}'}
    assert within_response_cap(event, small, 1024) is small
    oversized = {"statusCode": 200, "body": '{"text":"' + "é" * 600 + '"}'}  # 611 characters, 1,211 bytes
    answer = within_response_cap(event, oversized, 1024)
    assert answer["statusCode"] == 500
    assert '"code":"response_too_large"' in answer["body"] and "1024-byte" in answer["body"]
