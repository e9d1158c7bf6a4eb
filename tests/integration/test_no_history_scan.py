"""Cost independent of history length (contract §1.3), checked by the statements issued, not by timing."""

from __future__ import annotations

from typing import Any

import pytest
from threadloom import Session, SqliteStore
from threadloom.compaction import create_compact_function
from threadloom.storage.sqlite.database import SqliteExecutor
from threadloom.storage.sqlite.sql import SqliteSql

from tests.support.messages import text_message

HISTORY_READS = {SqliteSql.path_rows, SqliteSql.subtree, SqliteSql.find_latest_leaf}


class Skills:
    def get(self) -> str:
        return "- pirate"

    def load(self, key: str) -> str | None:
        return "Arr" if key == "pirate" else None


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    statements: list[str] = []
    original_query, original_execute = SqliteExecutor.query, SqliteExecutor.execute

    def query(self: SqliteExecutor, sql: str, params: Any = None) -> Any:
        statements.append(sql)
        return original_query(self, sql, params)

    def execute(self: SqliteExecutor, sql: str, params: Any = None) -> None:
        statements.append(sql)
        original_execute(self, sql, params)

    monkeypatch.setattr(SqliteExecutor, "query", query)
    monkeypatch.setattr(SqliteExecutor, "execute", execute)
    return statements


def session_over(store: SqliteStore, session_id: str) -> Session:
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


def statements_for_a_turn(store: SqliteStore, session_id: str, recorded: list[str]) -> list[str]:
    recorded.clear()
    session = session_over(store, session_id)  # a cold load, as in a new Lambda invocation
    session.tools()
    session.freeze_system_prompt()
    session.append_message(text_message(f"{session_id}-next"))
    session.get_path_length()
    return list(recorded)


def test_a_turn_issues_the_same_statements_at_any_history_length(recorded: list[str]) -> None:
    # Given two sessions, one with 10 and one with 2,000 messages
    store = SqliteStore()
    for session_id, length in (("short", 10), ("long", 2_000)):
        seed = session_over(store, session_id)
        seed.append_messages([text_message(f"{session_id}-{i}") for i in range(length)])
        seed.freeze_system_prompt()
    # When a turn runs (load, tools, frozen prompt, append with the auto-compaction check)
    short = statements_for_a_turn(store, "short", recorded)
    long = statements_for_a_turn(store, "long", recorded)
    # Then both issue exactly the same statements, none of which walks the history
    assert short == long
    assert not HISTORY_READS & set(long)
