"""Bad input to the library raises a ThreadloomError subclass with the same message on every backend.

Covers what used to escape raw: RecursionError (deep nesting), UnicodeEncodeError (lone
surrogates), OverflowError (integers past 64 bits) and driver errors (NUL, non-finite
numbers). Both backends run each case in the same test so their messages can be compared.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from threadloom import Session, SessionManager, SqliteStore, ThreadloomError

from tests.support.messages import text_message


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"v": value}
    return value


def deep_message() -> dict[str, Any]:
    return {"id": "deep", "role": "user", "parts": [{"type": "data-x", "data": nested(5_000)}]}


Case = Callable[[Session, SessionManager, str], Any]

CASES: dict[str, Case] = {
    "deeply nested message": lambda s, m, sid: s.append_message(deep_message()),
    "NUL in message text": lambda s, m, sid: s.append_message(text_message("nul", "a\x00b")),
    "lone surrogate in message text": lambda s, m, sid: s.append_message(text_message("sur", "a\ud800b")),
    "lone surrogate in message id": lambda s, m, sid: s.append_message(text_message("id\udc00")),
    "NUL in message id": lambda s, m, sid: s.append_message(text_message("id\x00")),
    "NUL in update": lambda s, m, sid: s.update_message(text_message("m1", "x\x00")),
    "surrogate in parent id": lambda s, m, sid: s.append_message(text_message("p"), "\ud800"),
    "NUL in a history leaf id": lambda s, m, sid: s.get_history("m\x00"),
    "surrogate in get_message": lambda s, m, sid: s.get_message("\udfff"),
    "surrogate in branches": lambda s, m, sid: s.get_branches("\udfff"),
    "huge search limit": lambda s, m, sid: s.search("hello", limit=2**70),
    "NUL in block content": lambda s, m, sid: s.replace_context_block("memory", "x\x00y"),
    "surrogate in block content": lambda s, m, sid: s.replace_context_block("memory", "x\ud800"),
    "NUL in summary": lambda s, m, sid: s.add_compaction("sum\x00", "m1", "m1"),
    "NUL in session name": lambda s, m, sid: m.create("name\x00"),
    "surrogate in rename": lambda s, m, sid: m.rename(sid, "\ud800"),
    "huge usage": lambda s, m, sid: m.add_usage(sid, 2**64, 1, 0.0),
    "negative huge usage": lambda s, m, sid: m.add_usage(sid, 1, -(2**64), 0.0),
    "infinite cost": lambda s, m, sid: m.add_usage(sid, 1, 1, float("inf")),
    "NaN cost": lambda s, m, sid: m.add_usage(sid, 1, 1, float("nan")),
    "NUL in fork name": lambda s, m, sid: m.fork(sid, "m1", "f\x00"),
    "surrogate in manager get": lambda s, m, sid: m.get("\ud800"),
}


def outcome(store: Any, case: Case) -> tuple[str, str]:
    manager = SessionManager.create(store, namespace="bad-input")
    info = manager.create("target")
    session = Session.create(store).for_session(info.id).with_context("memory", description="Facts", max_tokens=1000)
    session.append_message(text_message("m1", "hello"))
    try:
        case(session, manager, info.id)
    except ThreadloomError as error:
        message = str(error).replace(info.id, "<sid>")
        # the store still works after the refusal
        assert [m["id"] for m in session.get_history()] == ["m1"]
        return type(error).__name__, message
    return "accepted", ""


@pytest.mark.postgres
@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_a_typed_error_identical_on_both_backends(
    name: str, tmp_path: Path, postgres_store_factory: Callable[[], Any]
) -> None:
    sqlite = SqliteStore(str(tmp_path / "bad.db"))
    try:
        on_sqlite = outcome(sqlite, CASES[name])
    finally:
        sqlite.close()
    on_postgres = outcome(postgres_store_factory(), CASES[name])
    assert on_sqlite[0] != "accepted", f"{name} was accepted"
    assert on_sqlite == on_postgres


@pytest.mark.postgres
@pytest.mark.parametrize("query", ["hello\x00", "hello\ud800", "\ud800", "\x00"])
def test_characters_a_search_ignores_give_the_same_hits_on_both_backends(
    query: str, tmp_path: Path, postgres_store_factory: Callable[[], Any]
) -> None:
    # The query tokenizer drops NUL and lone surrogates, so nothing unstorable reaches a statement.
    hits = []
    for store in (SqliteStore(str(tmp_path / "q.db")), postgres_store_factory()):
        session = Session.create(store).for_session("s")
        session.append_message(text_message("m1", "hello"))
        hits.append([hit.id for hit in session.search(query)])
        hits.append([hit.id for hit in SessionManager.create(store).search(query)])
    assert hits[0] == hits[2] and hits[1] == hits[3]
