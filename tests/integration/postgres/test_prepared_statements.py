"""``prepared_statements=on``: function calls are named once per connection, nothing else is, and failures heal.

The server's own view (``pg_prepared_statements`` of the store's backend) is the evidence: which
statements it holds under a name, and that a name survives only what the server really parsed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from threadloom import PostgresStore, Session
from threadloom.errors import NotFoundError, ValidationError
from threadloom.storage.postgres import prepared as prepared_module
from threadloom.storage.postgres.connection import PostgresSettings, parse_database_url
from threadloom.storage.postgres.pipeline import _payload, compiled, run_pipelined
from threadloom.storage.postgres.prepared import PreparedStatements, plan_free, prepared_on
from threadloom.storage.postgres.sql import PostgresSql

from tests.support.messages import text_message
from tests.support.postgres import admin_connection, url_for, worker_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def prepared_store(postgres_store_factory: Callable[[], Any], request: pytest.FixtureRequest) -> Iterator[Any]:
    store = PostgresStore(url_for(worker_database(request)) + "?prepared_statements=on")
    yield store
    store.close()


def _named(store: Any) -> dict[str, str]:
    """The statements the store's server connection holds by name: name -> text."""
    rows = store.database.query_once("SELECT name, statement FROM pg_prepared_statements")
    return {str(name): str(text) for name, text in rows}


def test_an_append_and_a_history_read_are_named_once_and_a_query_over_the_tables_never(prepared_store: Any) -> None:
    session = Session.create(prepared_store).for_session("prepared-1")
    for index in range(7):  # past the five custom plans after which PostgreSQL may switch to a generic one
        session.append_message(text_message(f"m{index}", f"message {index}"))
    assert [message["id"] for message in session.get_history()] == [f"m{index}" for index in range(7)]
    named = _named(prepared_store)
    assert sum("threadloom_append_message(" in text for text in named.values()) == 1
    assert any("set_config('lock_timeout'" in text for text in named.values())  # the reads' timeouts statement
    assert any("threadloom_history(" in text for text in named.values())  # a function call: its plan is the call
    session.delete_messages(["m3"])  # recomputes the estimates below it: a recursive walk down the subtree
    assert [message["id"] for message in session.get_history()][:3] == ["m0", "m1", "m2"]
    named = _named(prepared_store)
    assert not any("WITH RECURSIVE" in text for text in named.values())  # planned with its values, every time
    assert all(name.startswith("threadloom_") for name in named)


def test_the_default_names_nothing(make_store: Callable[[], Any]) -> None:
    store = make_store()
    session = Session.create(store).for_session("unnamed-1")
    session.append_message(text_message("m0", "hello"))
    assert session.get_history()[0]["id"] == "m0"
    assert _named(store) == {}


def test_a_second_call_binds_the_name_without_parsing_again(prepared_store: Any) -> None:
    statement = compiled(PostgresSql.append_one)[0]
    registry = PreparedStatements()
    connection = admin_connection()
    try:
        params = {"sid": "x", "id": "y", "role": "user", "content": "{}", "tokens": 1, "vector": ""}
        params |= {"parent_omitted": True, "parent_id": None, "expected_leaf_id": None}
        params |= {"created_at": "2026-01-01T00:00:00Z", "lock_timeout": None}
        first = bytes(_payload(connection, [(PostgresSql.append_one, params)], None, prepared=registry))
        registry.settle(succeeded=True)
        second = bytes(_payload(connection, [(PostgresSql.append_one, params)], None, prepared=registry))
    finally:
        connection.close()
    name = registry.names[statement]
    assert first[:1] == b"C"  # Close of the name first (a failed round trip may have left it), then Parse
    assert b"P" in first and name + b"\x00" + statement.split("(")[0].encode() in first
    assert statement.split("(")[0].encode() not in second  # no statement text: Bind, Describe, Execute, Sync
    assert second[:1] == b"B" and name in second


def test_a_round_trip_that_fails_forgets_its_names_and_the_next_call_parses_again(prepared_store: Any) -> None:
    session = Session.create(prepared_store).for_session("prepared-2")
    with pytest.raises(NotFoundError):  # the append function raises: parent not found
        session.append_message(text_message("orphan", "no parent"), parent_id="missing")
    connection = prepared_store.database._connection
    registry = prepared_on(connection)
    assert not any("threadloom_append_message(" in text for text in registry.names)  # forgotten
    before = {text for text in _named(prepared_store).values() if "threadloom_append_message(" in text}
    assert len(before) == 1  # the server did parse it before the call failed
    session.append_message(text_message("m0", "hello"))  # Close, then Parse under the same name: no clash
    session.append_message(text_message("m1", "again"))
    assert [message["id"] for message in session.get_history()] == ["m0", "m1"]
    assert any("threadloom_append_message(" in text for text in registry.names)
    after = [text for text in _named(prepared_store).values() if "threadloom_append_message(" in text]
    assert len(after) == 1  # the same name, closed and parsed again: nothing left orphaned on the server


def test_a_value_that_cannot_be_encoded_leaves_no_name_behind(prepared_store: Any) -> None:
    connection = admin_connection()
    try:
        sql = "SELECT threadloom_append_message(CAST(:a AS text))"
        with pytest.raises(Exception):  # noqa: B017 (pg8000 raises its own error for an unknown type)
            run_pipelined(connection, sql, {"a": object()}, prepare=True)
        assert prepared_on(connection).names == {}
        assert run_pipelined(connection, "SELECT CAST(:a AS int)", {"a": 2}, prepare=True) == [[2]]
    finally:
        connection.close()


def test_past_the_cap_statements_run_unnamed(prepared_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepared_module, "MAX_PREPARED_PER_CONNECTION", 1)
    session = Session.create(prepared_store).for_session("prepared-3")
    session.append_message(text_message("m0", "hello"))
    session.append_message(text_message("m1", "again"))
    assert [message["id"] for message in session.get_history()] == ["m0", "m1"]
    assert len(_named(prepared_store)) == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("append_one", True),
        ("append", True),
        ("history", True),
        ("history_page_rows", True),
        ("raw_path", False),
        ("get_message", False),
    ],
)
def test_only_calls_of_a_function_on_parameters_are_plan_free(name: str, expected: bool) -> None:
    assert plan_free(compiled(getattr(PostgresSql, name))[0]) is expected


def test_a_call_with_a_literal_or_a_table_is_not_plan_free() -> None:
    assert not plan_free("SELECT threadloom_append_message($1, 'x')")
    assert not plan_free("SELECT id FROM threadloom_messages, threadloom_history_page_in($1)")
    assert not plan_free("SELECT threadloom_append_message($1); DROP TABLE x")


def test_the_switch_is_read_from_the_url_and_the_environment() -> None:
    assert parse_database_url("postgresql://u@h/db").prepared_statements is False
    assert parse_database_url("postgresql://u@h/db?prepared_statements=on").prepared_statements is True
    assert parse_database_url("postgresql://u@h/db?prepared_statements=off").prepared_statements is False
    with pytest.raises(ValidationError, match="prepared_statements must be on or off, not 'maybe'"):
        parse_database_url("postgresql://u@h/db?prepared_statements=maybe")
    settings = PostgresSettings.from_env({"THREADLOOM_DB_PREPARED_STATEMENTS": "on", "THREADLOOM_DB_HOST": "h"})
    assert settings.connect_params().prepared_statements is True
    with pytest.raises(ValidationError, match="THREADLOOM_DB_PREPARED_STATEMENTS must be on or off"):
        PostgresSettings.from_env({"THREADLOOM_DB_PREPARED_STATEMENTS": "sometimes"})
