"""The pg8000 internals the one-round-trip pipeline relies on, checked against the pinned release.

If a pg8000 upgrade moves any of them, these tests fail before anything misbehaves in
production; the version pin in pyproject and the layer's requirements must move with them.
"""

from __future__ import annotations

import inspect
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pg8000.core
import pg8000.native
import pytest
from pg8000.exceptions import DatabaseError
from threadloom.storage.postgres.pipeline import PG8000_VERSION, run_pipelined, run_pipelined_together

from tests.support.postgres import admin_connection

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def connection() -> Iterator[Any]:
    connection = admin_connection()
    yield connection
    connection.close()


def test_the_driver_is_pinned_to_the_release_the_pipeline_is_written_for() -> None:
    assert version("pg8000") == PG8000_VERSION
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert any(item.startswith(f"pg8000=={PG8000_VERSION}") for item in pyproject["project"]["dependencies"])
    layer = (ROOT / "layers" / "threadloom" / "requirements.txt").read_text(encoding="utf-8").split()
    assert f"pg8000=={PG8000_VERSION}" in layer


def test_the_internals_used_are_there_with_the_shapes_relied_on(connection: Any) -> None:
    for name in ("_client_encoding", "py_types", "_sock", "_usock"):
        assert hasattr(connection, name), name
    assert list(inspect.signature(connection.handle_messages).parameters) == ["context"]
    assert list(inspect.signature(pg8000.core.Context).parameters)[:1] == ["statement"]
    assert (pg8000.core.PARSE, pg8000.core.BIND, pg8000.core.NULL_BYTE) == (b"P", b"B", b"\x00")
    assert pg8000.core.SYNC_MSG == b"S\x00\x00\x00\x04"
    assert pg8000.core.FLUSH_MSG == b"H\x00\x00\x00\x04"
    assert pg8000.core.EXECUTE_MSG == b"E\x00\x00\x00\t\x00\x00\x00\x00\x00"


def test_a_statement_returns_typed_rows_and_nulls(connection: Any) -> None:
    rows = run_pipelined(
        connection, "SELECT CAST(:a AS int), CAST(:b AS text), CAST(:c AS text)", {"a": 7, "b": "é", "c": None}
    )
    assert rows == [[7, "é", None]]
    assert run_pipelined(connection, "SELECT 1 WHERE CAST(:a AS int) = 0", {"a": 1}) == []


def test_timeouts_apply_to_the_statement_only(connection: Any) -> None:
    rows = run_pipelined(
        connection,
        "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), CAST(:x AS int)",
        {"x": 1},
        timeouts=("1234", "5678"),
    )
    assert rows == [["1234ms", "5678ms", 1]]
    assert connection.run("SELECT current_setting('lock_timeout'), current_setting('statement_timeout')") == [
        ["0", "0"]
    ]
    with pytest.raises(DatabaseError) as raised:
        run_pipelined(connection, "SELECT pg_sleep(CAST(:s AS float))", {"s": 2}, timeouts=("50", "100"))
    assert raised.value.args[0]["C"] == "57014"
    assert connection.run("SELECT 1") == [[1]]  # a server error leaves the protocol in sync


def test_a_server_error_mid_pipeline_leaves_the_connection_usable(connection: Any) -> None:
    with pytest.raises(DatabaseError) as raised:
        run_pipelined(connection, "SELECT CAST(:a AS int)", {"a": "not a number"})
    assert raised.value.args[0]["C"] == "22P02"
    assert run_pipelined(connection, "SELECT CAST(:a AS int)", {"a": 2}) == [[2]]


def test_statements_sent_together_answer_apart_in_order(connection: Any) -> None:
    # pg8000 assigns Context.input_funcs on each RowDescription and appends DataRows to Context.rows:
    # the split per statement relies on both
    assert "context.input_funcs = input_funcs" in inspect.getsource(pg8000.core.CoreConnection.handle_ROW_DESCRIPTION)
    assert "context.rows.append(row)" in inspect.getsource(pg8000.core.CoreConnection.handle_DATA_ROW)
    results = run_pipelined_together(
        connection,
        [
            ("SELECT g, CAST(:label AS text) FROM generate_series(1, CAST(:n AS int)) AS g", {"label": "a", "n": 3}),
            ("SELECT 1 WHERE CAST(:x AS int) = 0", {"x": 1}),
            ("SELECT CAST(:t AS text), CAST(:b AS boolean)", {"t": "é", "b": True}),
        ],
        timeouts=("1234", "5678"),
    )
    assert results == [[[1, "a"], [2, "a"], [3, "a"]], [], [["é", True]]]


def test_a_failing_statement_among_others_raises_and_leaves_the_connection_usable(connection: Any) -> None:
    with pytest.raises(DatabaseError) as raised:
        run_pipelined_together(
            connection,
            [("SELECT CAST(:a AS int)", {"a": 1}), ("SELECT CAST(:a AS int)", {"a": "not a number"})],
        )
    assert raised.value.args[0]["C"] == "22P02"
    assert run_pipelined_together(connection, [("SELECT CAST(:a AS int)", {"a": 2})]) == [[[2]]]
