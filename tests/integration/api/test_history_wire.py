"""The history page's body spliced from stored texts is byte for byte what the serializer wrote before.

``GET /sessions/{id}/history`` writes each stored message's text into the body unparsed when it is
already the wire form (``threadloom.api.wire``); before, every message was parsed and written again
by pydantic. Both backends, tricky messages (non-ASCII, escapes, control characters, floats pydantic
writes differently, a large message, tool calls) and a summary across a page edge: every page of
every size must be the previous serializer's bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import to_json
from threadloom import SqliteStore
from threadloom.api.runtime import Runtime, set_runtime
from threadloom.api.use_cases import history as use_cases
from threadloom.api.wire import is_wire_form
from threadloom.jscompat import compact_json

from tests.support.api import SESSION, TENANT, FakeLambdaContext, gateway_event, seeded_runtime, text

TOOL_INPUT = {
    "x": 1e16,
    "y": 1e-05,
    "z": 0.1,
    "w": -0.0,
    "f": 1.5e300,
    "big": 2**63 - 1,
    "small": -(2**63),
    "t": True,
    "n": None,
    "s": "e-mail me at 1e+5",
    "nested": [[{"k": [2.5e-7, 3.0, 12345678.9]}]],
}
TRICKY: list[dict[str, Any]] = [
    text("t1", "user", "héllo wörld — 日本語 😀 \u2028\u2029 \ufeff \u00a0"),
    text("t2", "assistant", 'quotes " and \\ backslashes / slashes \\u0041 and \\/ literally'),
    text("t3", "user", "controls \x01\x1f\x7f\t\n\r\b\f end"),
    {
        "id": "t4",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "Let me compute."},
            {"type": "tool-calc", "toolCallId": "call_3e4f5e-9", "state": "input-available", "input": TOOL_INPUT},
        ],
    },
    text("t5", "user", ("é" * 1000 + " a long line\n") * 100),
    {"id": "t6", "role": "user", "parts": [{"type": "text", "text": "e-mail"}], "metadata": {"score": 2.5e-7}},
    {"id": "t7", "role": "user", "parts": [], "metadata": {"empty": {}, "list": [], "str": ""}},
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    # Summaries carry their read time: one fixed time, so two reads of a page are comparable byte for byte.
    monkeypatch.setattr("threadloom.storage.history_pages.now_iso", lambda: "2026-01-02T03:04:05.000Z")
    if request.param == "postgres":
        store: Any = request.getfixturevalue("postgres_store_factory")()
    else:
        store = SqliteStore(str(tmp_path / "api.db"))
    runtime, _ = seeded_runtime(tmp_path, store)
    manager = runtime.manager(TENANT)
    chain = [*TRICKY]
    for index in range(40):  # tricky ones again further down, so pages of every size hold some
        chain.append(text(f"f{index}", "user" if index % 2 else "assistant", f"filler {index} e-{index}"))
        if index % 6 == 0:
            chain.append({**TRICKY[index // 6 % len(TRICKY)], "id": f"again{index}"})
    manager.append_all(SESSION, chain)
    manager.add_compaction(SESSION, 'a summary: é 😀 " \\ 1e+16', "t6", "f3")  # spans page edges
    yield runtime
    set_runtime(None)


def get(query: dict[str, str]) -> tuple[int, str]:
    from threadloom_api import lambda_handler

    event = gateway_event("GET", f"/sessions/{SESSION}/history", query=query)
    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    return int(response["statusCode"]), str(response["body"])


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 50, 200])
def test_every_page_is_the_previous_serializers_bytes(runtime: Runtime, limit: int) -> None:
    manager = runtime.manager(TENANT)
    cursor: str | None = None
    seen: list[dict[str, Any]] = []
    while True:
        query = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
        status, body = get(query)
        assert status == 200, body
        before = use_cases.history(manager, SESSION, runtime.limits, leaf_id=None, limit=limit, cursor=cursor)
        assert body == before.model_dump_json(by_alias=True)  # what the route answered before the splice
        page = json.loads(body)
        seen += page["messages"]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    expected = json.loads(to_json(manager.get_session(SESSION).get_history()))
    assert [without_time(message) for message in seen] == [without_time(message) for message in expected]


def without_time(message: dict[str, Any]) -> dict[str, Any]:
    """A summary without its read time (the full read stamps its own)."""
    return (
        {k: v for k, v in message.items() if k != "createdAt"} if message["id"].startswith("compaction_") else message
    )


def test_sqlite_pages_carry_stored_texts_and_only_the_unsafe_ones_are_serialized_again(runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    envelope, entries = use_cases.history_entries(
        manager, SESSION, runtime.limits, leaf_id=None, limit=200, cursor=None
    )
    assert envelope.messages == [] and len(entries) > 40
    stored = [entry for entry in entries if entry.text is not None]
    if isinstance(runtime.store, SqliteStore):
        assert len(stored) == len(entries) - 1  # every row but the summary comes as its stored text
        unsafe = {entry.message["id"] for entry in stored if not is_wire_form(entry.text or "")}
        assert {"t2", "t3", "t4"} <= unsafe and "t1" not in unsafe and "t5" not in unsafe
    for entry in stored:
        assert entry.text == compact_json(entry.message)  # the stored text is the library's compact JSON


@pytest.mark.parametrize(
    "value",
    [
        *TRICKY,
        {"id": "n", "role": "user", "parts": [], "metadata": {"values": [1e15, 1e16, 1e-4, 1e-5, 1e21, 5e-324]}},
        {"id": "s", "role": "user", "parts": [{"type": "text", "text": "range 1e-5 to 3E+7 in \\u escapes"}]},
    ],
)
def test_a_text_called_wire_form_is_what_the_serializer_writes(value: dict[str, Any]) -> None:
    stored = compact_json(value)
    if is_wire_form(stored):
        assert to_json(json.loads(stored)).decode() == stored
    else:  # a text set aside only costs a parse: still, it must have a reason (an escape or an exponent)
        assert "\\u" in stored or "\\/" in stored or "e+" in stored or "e-" in stored


def test_damaged_rows_are_skipped_as_before(runtime: Runtime) -> None:
    damaged = {"f5": '{"id": "f5", "role": "user", "parts": [', "f6": '{"a": 1}', "f7": "[1, 2]", "f8": ""}
    damaged |= {"f9": '{"id":"f9","role":"user","parts":{}}', "f10": '{"id":7,"role":"user","parts":[]}'}
    with runtime.store.database.write() as tx:
        for message_id, content in damaged.items():
            tx.execute(
                "UPDATE threadloom_messages SET content = :content WHERE session_id = :sid AND id = :id",
                {"content": content, "id": message_id, "sid": SESSION},
            )
    manager = runtime.manager(TENANT)
    for limit in (1, 4, 200):
        cursor, ids = None, []
        while True:
            status, body = get({"limit": str(limit), **({"cursor": cursor} if cursor else {})})
            before = use_cases.history(manager, SESSION, runtime.limits, leaf_id=None, limit=limit, cursor=cursor)
            assert status == 200 and body == before.model_dump_json(by_alias=True)
            page = json.loads(body)
            ids += [message["id"] for message in page["messages"]]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert not set(damaged) & set(ids) and "f4" in ids and "f11" in ids
