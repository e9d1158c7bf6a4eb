"""Contract §1.3 on PostgreSQL: a turn issues the same statements at any history length, none reading history."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from threadloom import Session
from threadloom.compaction import create_compact_function
from threadloom.storage.postgres.database import PostgresDatabase
from threadloom.storage.postgres.sql import PostgresSql

from tests.support.messages import text_message

pytestmark = pytest.mark.postgres

HISTORY_READS = {
    PostgresSql.history,
    PostgresSql.raw_path,
    PostgresSql.path_rows,
    PostgresSql.subtree,
    PostgresSql.find_latest_leaf,
}


class Skills:
    def get(self) -> str:
        return "- pirate"

    def load(self, key: str) -> str | None:
        return "Arr" if key == "pirate" else None


def session_over(store: Any, session_id: str) -> Session:
    return (
        Session.create(store)
        .for_session(session_id)
        .with_context("memory", max_tokens=1000)
        .with_context("skills", provider=Skills())
        .with_cached_prompt()
        .on_compaction(create_compact_function(lambda prompt: "summary"))
        .compact_after(10**9)
        .on_event(lambda event: None)
    )


def test_a_turn_costs_the_same_statements_at_10_and_2000_messages(
    make_store: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    for session_id, length in (("short", 10), ("long", 2_000)):
        seed = session_over(store, session_id)
        seed.append_messages([text_message(f"{session_id}-{i}") for i in range(length)])
        seed.freeze_system_prompt()
    sent: list[str] = []
    original = PostgresDatabase.run_on

    def recording(
        self: PostgresDatabase, connection: Any, sql: str, params: Mapping[str, Any] | None, **options: Any
    ) -> Any:
        sent.append(sql)
        return original(self, connection, sql, params, **options)

    monkeypatch.setattr(PostgresDatabase, "run_on", recording)

    def turn(session_id: str) -> list[str]:
        sent.clear()
        session = session_over(make_store(), session_id)  # a cold load, as in a new Lambda invocation
        session.tools()
        session.freeze_system_prompt()
        session.append_message(text_message(f"{session_id}-next"))
        session.get_path_length()
        return list(sent)

    short, long = turn("short"), turn("long")
    assert short == long
    assert not HISTORY_READS & set(long)
    assert long.count(PostgresSql.append_one) == 1
