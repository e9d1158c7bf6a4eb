"""Nothing Threadloom sends would pin an RDS Proxy session (docs/postgres.md, "Pinning").

Checked twice: by the text of every statement sent during a full workload, and by the
server's own view of the session afterwards (no session settings, no named prepared
statements, no advisory locks, no temporary schema).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from threadloom import Session, SessionManager
from threadloom.compaction import create_compact_function
from threadloom.storage.postgres.database import PostgresDatabase
from threadloom.storage.postgres.pipeline import CACHE_COMMIT_SQL, TIMEOUTS_AND_CACHE_COMMIT_SQL, TIMEOUTS_SQL
from threadloom.storage.postgres.schema import postgres_migrations

from tests.support.messages import load_part, text_message
from tests.support.postgres import url_for

pytestmark = pytest.mark.postgres

PINNING_STATEMENT = re.compile(
    # EXECUTE FUNCTION/PROCEDURE is a trigger's clause (a line of CREATE TRIGGER), not the EXECUTE statement.
    r"^\s*(SET|RESET|PREPARE|EXECUTE(?!\s+(FUNCTION|PROCEDURE)\b)|DEALLOCATE|DISCARD|LISTEN|UNLISTEN|LOAD|DECLARE)\b",
    re.IGNORECASE,
)
# set_config(name, value, true) is transaction-local (the server timeouts): it ends with the
# transaction, like a transaction-scoped lock, so only the session-wide form pins.
SESSION_SET_CONFIG = re.compile(r"\bset_config\s*\((?![^)]*,\s*true\s*\))", re.IGNORECASE)
PINNING_ANYWHERE = re.compile(
    r"\b(pg_advisory_lock|pg_advisory_lock_shared|pg_try_advisory_lock|nextval|setval|currval|lastval)\s*\(|"
    r"\bCREATE\s+(GLOBAL\s+|LOCAL\s+)?(TEMP|TEMPORARY)\b",
    re.IGNORECASE,
)


class Skills:
    def get(self) -> str:
        return "- pirate: talk like a pirate"

    def load(self, key: str) -> str | None:
        return "Arr" if key == "pirate" else None


def full_workload(make_store: Callable[[], Any]) -> Any:
    """Every storage feature once: migrate, sessions, blocks, prompt, skills, search, compaction, manager."""
    store = make_store()
    store.migrate()
    manager = SessionManager.create(store, namespace="tenant").with_context("memory", max_tokens=500)
    info = manager.create("chat")
    manager.append(info.id, text_message("a1", "hello there"))
    session = (
        Session.create(store)
        .for_session(info.id)
        .with_context("memory", description="facts", max_tokens=500)
        .with_context("skills", provider=Skills())
        .with_cached_prompt()
        .on_compaction(create_compact_function(lambda prompt: "summary", tail_token_budget=10))
        .compact_after(10**9)
        .on_event(lambda event: None)
    )
    session.freeze_system_prompt()
    session.append_messages([text_message(f"m{i}", f"message number {i}") for i in range(8)])
    session.tools()["set_context"].execute({"label": "memory", "content": "likes tea"})
    session.append_message(
        {"id": "load", "role": "assistant", "parts": [load_part("skills", "pirate", "Arr")]}, expected_leaf_id="m7"
    )
    session.unload_skill("skills", "pirate")
    session.update_message(text_message("m3", "edited"))
    session.search("message")
    session.compact()
    session.get_history()
    session.get_branches("m1")
    session.delete_messages(["m2"])
    manager.search("hello")
    manager.fork(info.id, "m4", "fork")
    manager.add_usage(info.id, 10, 20, 0.5)
    manager.rename(info.id, "renamed")
    manager.list()
    manager.delete(info.id)
    session.clear_messages()
    return store


def test_no_statement_that_pins_is_ever_sent(make_store: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    original = PostgresDatabase.run_on

    def recording(
        self: PostgresDatabase, connection: Any, sql: str, params: Mapping[str, Any] | None, **options: Any
    ) -> Any:
        sent.append(sql)
        return original(self, connection, sql, params, **options)

    monkeypatch.setattr(PostgresDatabase, "run_on", recording)
    full_workload(make_store)
    assert len(sent) > 50
    # what the pipeline sends ahead of single statements
    sent.extend((TIMEOUTS_SQL, CACHE_COMMIT_SQL, TIMEOUTS_AND_CACHE_COMMIT_SQL))
    offending = [
        sql
        for sql in sent
        if PINNING_STATEMENT.match(sql) or PINNING_ANYWHERE.search(sql) or SESSION_SET_CONFIG.search(sql)
    ]
    assert offending == []
    # transactions are explicit, and only transaction-scoped locks and settings are taken
    assert any(sql.startswith("START TRANSACTION") and "set_config('lock_timeout'" in sql for sql in sent)


def test_the_migrations_hold_no_session_state_either() -> None:
    for migration in postgres_migrations():
        for line in migration.sql.splitlines():
            # a PL/pgSQL DECLARE section declares variables, not a cursor
            if line.strip() != "DECLARE":
                assert not PINNING_STATEMENT.match(line), line
        assert not PINNING_ANYWHERE.search(migration.sql)
        assert not SESSION_SET_CONFIG.search(migration.sql)
        assert "CURSOR" not in migration.sql.upper()


def test_the_server_sees_no_session_state_after_a_workload(make_store: Callable[[], Any]) -> None:
    store = full_workload(make_store)
    database: PostgresDatabase = store.database
    # ask on the store's own connection, i.e. from inside the session the proxy would multiplex
    assert database.query_once("SELECT name FROM pg_settings WHERE source = 'session'") == []
    assert database.query_once("SELECT name FROM pg_prepared_statements") == []
    advisory = "SELECT COUNT(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'"
    assert database.query_once(advisory) == [[0]]
    assert database.query_once("SELECT pg_my_temp_schema() = 0")[0][0] is True
    assert database.query_once("SELECT COUNT(*) FROM pg_cursors") == [[0]]


def test_the_startup_packet_carries_only_what_the_proxy_accepts(pg_url: str, make_store: Callable[[], Any]) -> None:
    store = make_store()
    rows = store.database.query_once("SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()")
    assert rows == [["threadloom"]]
    assert url_for("x").endswith("/x") or "/x?" in url_for("x")
