"""The pg8000 internals the one-round-trip pipeline relies on, checked against the pinned release.

If a pg8000 upgrade moves any of them, these tests fail before anything misbehaves in
production; the version pin in pyproject and the layer's requirements must move with them.
"""

from __future__ import annotations

import dis
import inspect
import io
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pg8000.core
import pg8000.native
import pytest
from pg8000.converters import string_in
from pg8000.exceptions import DatabaseError
from threadloom.storage.postgres.pipeline import (
    PG8000_VERSION,
    _payload,
    compiled,
    run_pipelined,
    run_pipelined_together,
)
from threadloom.storage.postgres.protocol import typed_parameters

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


def test_the_internals_used_are_there_with_the_shapes_relied_on(connection: Any) -> None:
    for name in ("_client_encoding", "py_types", "_sock", "_usock"):
        assert hasattr(connection, name), name
    assert list(inspect.signature(connection.handle_messages).parameters) == ["context"]
    assert list(inspect.signature(pg8000.core.Context).parameters)[:1] == ["statement"]
    assert (pg8000.core.PARSE, pg8000.core.BIND, pg8000.core.NULL_BYTE) == (b"P", b"B", b"\x00")
    assert pg8000.core.SYNC_MSG == b"S\x00\x00\x00\x04"
    assert pg8000.core.EXECUTE_MSG == b"E\x00\x00\x00\t\x00\x00\x00\x00\x00"


def _instructions(function: Any) -> list[tuple[str, Any]]:
    return [
        (step.opname, step.argval) for step in dis.get_instructions(function) if step.opname not in ("RESUME", "NOP")
    ]


def test_the_internals_the_answer_reader_uses_are_there_with_the_shapes_relied_on(connection: Any) -> None:
    core = pg8000.core.CoreConnection
    # read_answer peeks at the socket's buffer and consumes exactly what it parsed
    assert isinstance(connection._sock, io.BufferedRWPair)
    assert callable(connection._sock.peek)
    # messages it does not parse go to pg8000's handler for their one-byte code
    for code in (b"E", b"N", b"S", b"A", b"T", b"D", b"C", b"Z"):
        assert connection.message_types[code].__func__ is not None, code
    assert connection.message_types[b"E"].__func__ is core.handle_ERROR_RESPONSE
    assert connection.message_types[b"N"].__func__ is core.handle_NOTICE_RESPONSE
    # the codes it skips are the ones whose handlers do nothing
    nothing = _instructions(lambda self, data, context: None)
    for code in (b"1", b"2", b"3", b"n", b"t", b"s", b"I"):
        assert _instructions(connection.message_types[code]) == nothing, code
    # a RowDescription's columns: name, then table oid, column number, type oid, size, modifier, format
    assert pg8000.core.ihihih_unpack.__self__.format == "!ihihih"
    row_description = inspect.getsource(core.handle_ROW_DESCRIPTION)
    assert 'input_funcs.append(self.pg_types[field["type_oid"]])' in row_description
    assert "context.columns = columns" in row_description  # columns: nothing of ours reads them
    assert "if context.rows is None:" in row_description
    assert isinstance(connection.pg_types, defaultdict)
    assert connection.pg_types[23] is pg8000.converters.PG_TYPES[23]
    assert connection.pg_types[-12345] is string_in  # a defaultdict: unknown types read as text
    # a DataRow's values: NULL for length -1, else text in the client encoding through the input function
    data_row = inspect.getsource(core.handle_DATA_ROW)
    assert "for func in context.input_funcs:" in data_row
    assert "v = func(str(data[idx : idx + vlen], encoding=self._client_encoding))" in data_row
    # CommandComplete is pg8000's own; ReadyForQuery stores the transaction status byte
    assert list(inspect.signature(connection.handle_COMMAND_COMPLETE).parameters) == ["data", "context"]
    assert "self._transaction_status = data" in inspect.getsource(core.handle_READY_FOR_QUERY)
    assert hasattr(connection, "_transaction_status")
    # the loop read_answer replaces, and the reads it falls back to for a message not all buffered
    handle_messages = inspect.getsource(core.handle_messages)
    assert "code, data_len = ci_unpack(_read(self._sock, 5))" in handle_messages
    assert "if context.error is not None:" in handle_messages
    assert list(inspect.signature(pg8000.core._read).parameters) == ["sock", "size"]
    assert pg8000.core.ci_unpack(b"Z\x00\x00\x00\x05") == (b"Z", 5)
    assert {"error", "rows", "input_funcs", "row_count", "statement"} <= set(vars(pg8000.core.Context("x")))


def test_a_statement_returns_typed_rows_and_nulls(connection: Any) -> None:
    rows = run_pipelined(
        connection, "SELECT CAST(:a AS int), CAST(:b AS text), CAST(:c AS text)", {"a": 7, "b": "é", "c": None}
    )
    assert rows == [[7, "é", None]]
    assert run_pipelined(connection, "SELECT 1 WHERE CAST(:a AS int) = 0", {"a": 1}) == []


def test_the_answer_comes_in_one_write_at_the_sync(connection: Any) -> None:
    # no Flush ahead of the Sync: the server would send the answer up to CommandComplete, then
    # ReadyForQuery apart, and the reader would wake up twice
    payload = _payload(connection, [("SELECT CAST(:a AS int)", {"a": 1})], ("1000", "2000"), cache_commit=True)
    assert payload.endswith(pg8000.core.EXECUTE_MSG + pg8000.core.SYNC_MSG)
    assert pg8000.core.FLUSH_MSG not in payload


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


def test_a_cast_that_only_types_a_parameter_is_sent_as_its_type_in_parse() -> None:
    # $1 only ever cast to text, $3 to an array type: typed and their casts gone; $2 is also used
    # bare, and $4 cast to two types, so both stay as written and are inferred (type 0)
    statement = (
        "SELECT CAST($1 AS text), $2, CAST($3 AS bigint[]), CAST($2 AS integer), CAST($4 AS text) || CAST($4 AS bigint)"
    )
    text, types = typed_parameters(statement)
    assert text == "SELECT $1, $2, $3, CAST($2 AS integer), CAST($4 AS text) || CAST($4 AS bigint)"
    assert types == [25, 0, 1016, 0]
    assert typed_parameters("SELECT $1 + 1") == ("SELECT $1 + 1", [])


def test_typed_parameters_answer_as_the_casts_did(make_store: Callable[[], Any]) -> None:
    store = make_store()
    sql = (
        "SELECT CAST(:a AS text), CAST(:b AS bigint), CAST(:c AS boolean), CAST(:d AS text[]), CAST(:e AS timestamptz)"
    )
    assert typed_parameters(compiled(sql)[0])[1] == [25, 20, 16, 1009, 1184]
    rows = store.database.query_once(
        sql, {"a": "x\u00e9", "b": 2**40, "c": False, "d": ["p", None, "q,r"], "e": "2026-12-03T01:02:03.456Z"}
    )
    [[text, number, flag, array, moment]] = rows
    assert (text, number, flag, array) == ("x\u00e9", 2**40, False, ["p", None, "q,r"])
    assert moment.isoformat() == "2026-12-03T01:02:03.456000+00:00"
    assert store.database.query_once(sql, dict.fromkeys("abcde")) == [[None] * 5]


@pytest.mark.parametrize(
    ("sql", "params", "expected"),
    [
        ("SELECT :a, :b, :a, :c", {"c": 3, "a": 1, "b": 2, "unused": 4}, ("SELECT $1, $2, $1, $3", (1, 2, 3))),
        ("SELECT :only", {"only": None}, ("SELECT $1", (None,))),
        ("SELECT ':quoted', :real", {"real": "x"}, ("SELECT ':quoted', $1", ("x",))),
        ("SELECT 1", {}, ("SELECT 1", ())),
    ],
)
def test_compiled_statements_pick_values_in_placeholder_order_as_pg8000_does(
    sql: str, params: dict[str, Any], expected: tuple[str, tuple[Any, ...]]
) -> None:
    statement, make_values = compiled(sql)
    pg8000_statement, pg8000_values = pg8000.native.to_statement(sql)
    assert (statement, make_values(params)) == expected == (pg8000_statement, pg8000_values(params))


def test_a_missing_parameter_is_named_as_pg8000_names_it() -> None:
    _, make_values = compiled("SELECT :present, :absent")
    with pytest.raises(pg8000.exceptions.InterfaceError, match="placeholder 'absent'"):
        make_values({"present": 1})


def test_values_of_every_kind_reach_the_server_as_pg8000_sends_them(connection: Any) -> None:
    """Text skips pg8000's converter lookup; everything else still takes it, and both read back alike."""
    from datetime import UTC, datetime

    moment = datetime(2026, 12, 4, 15, 30, 1, 250, tzinfo=UTC)
    sql = (
        "SELECT CAST(:text AS text), CAST(:number AS bigint), CAST(:flag AS boolean), CAST(:moment AS timestamptz),"
        " CAST(:nothing AS text), CAST(:words AS text[]), CAST(:empty AS text)"
    )
    params = {"text": "naïve ☃", "number": -(2**63), "flag": False, "moment": moment, "nothing": None}
    params |= {"words": ["a", "b c"], "empty": ""}
    rows = run_pipelined(connection, sql, params)
    assert rows == [["naïve ☃", -(2**63), False, moment, None, ["a", "b c"], ""]]
