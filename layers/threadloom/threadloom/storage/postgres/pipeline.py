"""Parameterized statements in one network round trip each: the only code that touches pg8000 internals.

pg8000's ``run`` sends an unnamed statement's Parse, Describe, Bind and Execute but waits
for the server after Parse and after Describe: three round trips to learn nothing it uses.
Here the messages leave together, closed by one Sync, as libpq's PQexecParams sends them.
Independent reads can also share one round trip (:func:`run_pipelined_together`). The answer
is parsed by :func:`read_answer` rather than pg8000's ``handle_messages``, which every round
trip would otherwise pay for with two reads and two copies per message: an append's answer
(ten small messages, already arrived) takes about 10 µs instead of about 30 µs, both counting
about 4 µs to take it off the socket (``bench/answer_reader.py``, a busy 2-core VM).

The methods used below are not pg8000's public API, so the driver is pinned to exactly
:data:`PG8000_VERSION` (pyproject and the layer's requirements) and
``tests/integration/postgres/test_pipeline.py`` checks that each one is still there and
behaves as relied on. Everything a statement needs is encoded *before* the first byte is
written, so a value pg8000 cannot encode fails without leaving a partial message on the
socket.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from struct import Struct
from typing import TYPE_CHECKING, Any, Final

from pg8000.converters import make_param  # type: ignore[import-untyped]
from pg8000.core import (  # type: ignore[import-untyped]
    EXECUTE_MSG,
    SYNC_MSG,
    Context,
    _read,
    ci_unpack,
)
from pg8000.exceptions import InterfaceError  # type: ignore[import-untyped]

from threadloom.storage.postgres.prepared import plan_free, prepared_on
from threadloom.storage.postgres.protocol import (
    bind,
    close_statement,
    compiled,
    describe_portal,
    parse,
    parse_and_describe,
    parse_named,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from threadloom.storage.postgres.connection import Connection
    from threadloom.storage.postgres.prepared import PreparedStatements

#: The pg8000 release whose internals this module is written and tested against.
PG8000_VERSION: Final = "1.31.6"

#: Sets the server-side timeouts for the implicit transaction the pipeline runs in
#: (``is_local``: gone at the Sync, so no session state is left behind). Returns no row (so no
#: Describe is needed), and ``||`` makes both calls run. No FROM: the cheapest statement to plan,
#: and it goes before every statement.
TIMEOUTS_SQL: Final = (
    "SELECT WHERE (set_config('lock_timeout', $1, true) || set_config('statement_timeout', $2, true)) IS NULL"
)

#: Makes the implicit transaction commit without waiting for the WAL flush (``is_local``: that
#: transaction only; PostgreSQL reads the setting at commit). For a cache the caller can rebuild.
CACHE_COMMIT_SQL: Final = "SELECT WHERE set_config('synchronous_commit', 'off', true) IS NULL"

#: Both at once, for a cache write with timeouts: every statement ahead of the real one is parsed,
#: planned and run, about 50 µs of server time each.
TIMEOUTS_AND_CACHE_COMMIT_SQL: Final = (
    "SELECT WHERE (set_config('synchronous_commit', 'off', true) || set_config('lock_timeout', $1, true) "
    "|| set_config('statement_timeout', $2, true)) IS NULL"
)

_NULL: Final = 0


def run_pipelined(
    connection: Connection,
    sql: str,
    params: Mapping[str, Any],
    *,
    timeouts: tuple[str, str] | None = None,
    cache_commit: bool = False,
    prepare: bool = False,
) -> list[list[Any]] | None:
    """Run ``sql`` with ``params`` in one round trip; ``timeouts`` (lock, statement) in ms apply to it.

    ``cache_commit`` sends :data:`CACHE_COMMIT_SQL` first, in the same implicit transaction.
    ``prepare``: every statement is named on the connection and reused (``prepared.py``).
    If any step fails the server skips the rest up to the Sync and the error is raised
    once everything up to ReadyForQuery was read, so the connection stays usable.
    """
    statement, _ = compiled(sql)
    prepared = prepared_on(connection) if prepare else None
    context = Context(statement)
    if prepared is None:  # nothing to settle: no context manager on the common path
        _send(connection, _payload(connection, [(sql, params)], timeouts, cache_commit=cache_commit))
        read_answer(connection, context)
    else:
        with _settled(prepared):
            payload = _payload(connection, [(sql, params)], timeouts, cache_commit=cache_commit, prepared=prepared)
            _send(connection, payload)
            read_answer(connection, context)
    rows: list[list[Any]] | None = context.rows
    return rows


def run_pipelined_together(
    connection: Connection,
    statements: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    timeouts: tuple[str, str] | None = None,
    prepare: bool = False,
    rows: bool = True,
) -> list[list[list[Any]]]:
    """Run several row-returning statements in one round trip; one list of rows per statement, in order.

    They run in one implicit transaction (one Sync), each with its own snapshot under READ
    COMMITTED, as if sent one by one. If one fails the server skips the rest and the error is
    raised once everything up to ReadyForQuery was read, so the connection stays usable.
    ``rows=False``: statements that return none (the answer is then empty).
    """
    prepared = prepared_on(connection) if prepare else None
    context = _ResultPerStatement(statements[0][0] if statements else "")
    with _settled(prepared):
        _send(connection, _payload(connection, statements, timeouts, prepared=prepared))
        read_answer(connection, context)
    if rows and len(context.results) != len(statements):
        raise InterfaceError(f"expected {len(statements)} results, the server described {len(context.results)}")
    return context.results


class _ResultPerStatement(Context):  # type: ignore[misc]
    """A pg8000 Context that keeps each statement's rows apart.

    A RowDescription is handled by assigning ``input_funcs`` (and ``rows`` when unset), then
    every DataRow is appended to ``rows``, by :func:`read_answer` as by pg8000; each described
    statement's RowDescription comes before its rows, so starting a new list there separates
    the results.
    """

    def __init__(self, statement: str) -> None:
        self.results: list[list[list[Any]]] = []
        super().__init__(statement)
        self.results.clear()  # Context.__init__ assigned input_funcs once, before any statement

    @property
    def input_funcs(self) -> list[Any]:
        return self._input_funcs

    @input_funcs.setter
    def input_funcs(self, functions: list[Any]) -> None:
        self._input_funcs = functions
        rows: list[list[Any]] = []
        self.rows = rows
        self.results.append(rows)


#: Messages whose pg8000 handler does nothing: ParseComplete, BindComplete, CloseComplete,
#: NoData, ParameterDescription, PortalSuspended, EmptyQueryResponse.
_NOTHING_TO_DO: Final = frozenset(b"123ntsI")
_ROW_DESCRIPTION: Final = ord("T")
_DATA_ROW: Final = ord("D")
_COMMAND_COMPLETE: Final = ord("C")
_READY_FOR_QUERY: Final = ord("Z")
_READY_FOR_QUERY_CODE: Final = b"Z"
#: A message's code (one byte) and its length (four, counting themselves but not the code).
_HEADER: Final = 5
#: What follows a column's name in a RowDescription: table oid, column number, type oid, type
#: size, type modifier, format code. The type oid starts 6 bytes in.
_COLUMN_FIELDS: Final = 18
_TYPE_OID_OFFSET: Final = 6
_int32: Final = Struct("!i").unpack_from
_uint16: Final = Struct("!H").unpack_from


def read_answer(connection: Connection, context: Any) -> None:
    """What pg8000's ``handle_messages`` does with one answer, without its per-message cost.

    pg8000 reads each message's header and body with a read call each, copying both twice,
    and builds a dict per column of a RowDescription. Here every complete message already
    buffered is parsed from one ``peek``, then exactly those bytes are consumed, so nothing
    after the ReadyForQuery that ends this answer leaves the socket's buffer (the next
    reader, ours or pg8000's, finds its answer whole). A message not all there yet (a row
    bigger than the buffer, or one still arriving) is read and handled by pg8000 itself, so
    reading nothing or a socket error raises what pg8000 raises, for database.py to classify.
    Only the messages of a normal answer are parsed here; any other (an error, a notice, a
    parameter status) goes to pg8000's handler. As in pg8000, the server's error is raised
    once the ReadyForQuery was read, so the connection stays in sync.
    """
    sock = connection._sock
    functions: list[Any] = context.input_funcs
    rows: list[list[Any]] | None = context.rows
    encoding: str = connection._client_encoding
    finished = False
    while not finished:
        buffered: bytes = sock.peek()  # at most one read from the socket, only when nothing is buffered
        end = len(buffered)
        position = 0
        try:
            while position + _HEADER <= end:
                code = buffered[position]
                start = position + _HEADER
                stop = position + 1 + _int32(buffered, position + 1)[0]
                if stop > end:
                    break
                message_start, position = position, stop
                if code in _NOTHING_TO_DO:
                    continue
                if code == _DATA_ROW:
                    rows.append(_row(buffered, start, functions, encoding))  # type: ignore[union-attr]
                elif code == _ROW_DESCRIPTION:
                    functions = _input_functions(connection, buffered, start, stop)
                    context.input_funcs = functions  # the attribute: _ResultPerStatement starts a list here
                    if context.rows is None:
                        context.rows = []
                    rows = context.rows
                elif code == _COMMAND_COMPLETE:
                    connection.handle_COMMAND_COMPLETE(buffered[start:stop], context)
                elif code == _READY_FOR_QUERY:
                    connection._transaction_status = buffered[start:stop]
                    finished = True
                    break
                else:
                    connection.message_types[buffered[message_start : message_start + 1]](buffered[start:stop], context)
                    functions, rows, encoding = context.input_funcs, context.rows, connection._client_encoding
        finally:
            if position:
                sock.read(position)  # what was parsed (and any message whose handler raised), no more
        if not position:  # not one whole message buffered: pg8000 reads and handles the next one
            finished = _read_message_as_pg8000_does(connection, context)
            functions, rows, encoding = context.input_funcs, context.rows, connection._client_encoding
    if context.error is not None:
        raise context.error


@contextmanager
def _settled(prepared: PreparedStatements | None) -> Iterator[None]:
    """Keep the names a round trip gave only if it was encoded, sent and answered without an error."""
    if prepared is None:
        yield
        return
    succeeded = False
    try:
        yield
        succeeded = True
    finally:
        prepared.settle(succeeded=succeeded)


def _row(buffered: bytes, start: int, functions: list[Any], encoding: str) -> list[Any]:
    """A DataRow's values, each converted by its column's input function from text (None for NULL)."""
    row: list[Any] = []
    index = start + 2  # past the column count: like pg8000, go by the RowDescription's
    for function in functions:
        length = _int32(buffered, index)[0]
        index += 4
        if length == -1:
            row.append(None)
        else:
            row.append(function(buffered[index : index + length].decode(encoding)))
            index += length
    return row


def _read_message_as_pg8000_does(connection: Connection, context: Any) -> bool:
    """Read one message with pg8000's own reads and handle it with its handler; True if it ended the answer."""
    code, length = ci_unpack(_read(connection._sock, _HEADER))
    connection.message_types[code](_read(connection._sock, length - 4), context)
    return code == _READY_FOR_QUERY_CODE  # type: ignore[no-any-return]


def _input_functions(connection: Connection, buffered: bytes, start: int, stop: int) -> list[Any]:
    """The input function of each column a RowDescription describes, looked up by type oid as pg8000 does."""
    types = connection.pg_types
    functions: list[Any] = []
    index = start + 2
    for _ in range(_uint16(buffered, start)[0]):
        index = buffered.find(_NULL, index, stop) + 1  # past the column's name
        functions.append(types[_int32(buffered, index + _TYPE_OID_OFFSET)[0]])
        index += _COLUMN_FIELDS
    return functions


def _payload(
    connection: Connection,
    statements: Sequence[tuple[str, Mapping[str, Any]]],
    timeouts: tuple[str, str] | None,
    *,
    cache_commit: bool = False,
    prepared: PreparedStatements | None = None,
) -> bytearray:
    """Every message of the cache-commit and timeouts statements (if asked) and of ``statements``, then Sync.

    Everything is encoded before anything is sent: a value pg8000 cannot encode fails here.
    No Flush before the Sync (pg8000 sends one): the server sends its answer when it reaches
    the Sync anyway, and a Flush made it two writes, the ReadyForQuery apart, so the reader
    woke twice per round trip (about 20 µs more each). With ``prepared``, each statement is
    bound to its name on the connection (parsed first the first time) instead of parsed anew.
    """
    encoding = connection._client_encoding
    if prepared is not None:
        payload = bytearray(_prepared_setup(prepared, timeouts, encoding, cache_commit=cache_commit))
    elif timeouts is None:
        payload = bytearray(_cache_commit_messages(encoding) if cache_commit else b"")
    else:
        payload = bytearray(_timeouts_messages(timeouts, encoding, cache_commit))
    for sql, params in statements:
        statement, make_values = compiled(sql)
        encoded = _encoded(connection.py_types, make_values(params), encoding)
        name, first_use = prepared.name_for(statement) if prepared and plan_free(statement) else (None, False)
        if name is None:
            payload += parse_and_describe(statement, encoding)
            payload += bind(encoded)
        else:
            if first_use:
                payload += close_statement(name) + parse_named(statement, encoding, name)
            payload += bind(encoded, name) + describe_portal()
        payload += EXECUTE_MSG
    payload += SYNC_MSG
    return payload


def _encoded(py_types: Mapping[type, Any], values: Sequence[Any], encoding: str) -> list[bytes | None]:
    """Each value in pg8000's text format, encoded; None for NULL.

    Text is its own text format, so it skips pg8000's converter lookup (``make_param``), which
    every other value still takes: most of an append's eleven values are text.
    """
    encoded: list[bytes | None] = []
    for value in values:
        text = value if value.__class__ is str else make_param(py_types, value)
        encoded.append(None if text is None else text.encode(encoding))
    return encoded


def _prepared_setup(
    prepared: PreparedStatements, timeouts: tuple[str, str] | None, encoding: str, *, cache_commit: bool
) -> bytes:
    """The cache-commit and timeouts statement, bound to their names (they return no row: no Describe)."""
    if timeouts is None and not cache_commit:
        return b""
    if timeouts is None:
        sql, values = CACHE_COMMIT_SQL, []
    else:
        sql = TIMEOUTS_AND_CACHE_COMMIT_SQL if cache_commit else TIMEOUTS_SQL
        values = [value.encode(encoding) for value in timeouts]
    name, first_use = prepared.name_for(sql)
    if name is None:
        return _timeouts_messages(timeouts, encoding, cache_commit) if timeouts else _cache_commit_messages(encoding)
    head = close_statement(name) + parse(sql, encoding, (), name) if first_use else b""
    execute: bytes = EXECUTE_MSG
    return head + bind(values, name) + execute


def _send(connection: Connection, payload: bytearray) -> None:
    sock = connection._sock
    if sock is None:
        raise InterfaceError("connection is closed")
    try:
        sock.write(payload)
        sock.flush()
    except OSError as error:
        raise InterfaceError("network error") from error


@lru_cache(maxsize=16)
def _timeouts_messages(timeouts: tuple[str, str], encoding: str, cache_commit: bool = False) -> bytes:
    """The timeouts statement's messages (with the cache commit, if asked); a database's timeouts are fixed, so
    this is encoded once."""
    execute: bytes = EXECUTE_MSG
    sql = TIMEOUTS_AND_CACHE_COMMIT_SQL if cache_commit else TIMEOUTS_SQL
    return parse(sql, encoding) + bind([value.encode(encoding) for value in timeouts]) + execute


@lru_cache(maxsize=4)
def _cache_commit_messages(encoding: str) -> bytes:
    execute: bytes = EXECUTE_MSG
    return parse(CACHE_COMMIT_SQL, encoding) + bind([]) + execute
