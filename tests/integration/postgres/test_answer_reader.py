"""read_answer behaves exactly as pg8000's own reader (``handle_messages``) on the same answers.

Against the real server, each scenario is sent twice and read once by each reader; the rows,
row counts, transaction status, notices and errors must be the same. Answers that arrive in
pieces, end early or fail on the socket are replayed from recorded bytes through a stand-in
socket, split in every way that matters, so both readers see exactly the same arrivals.
"""

from __future__ import annotations

import io
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pg8000.core
import pytest
from pg8000.exceptions import DatabaseError, InterfaceError
from threadloom.storage.postgres.connection import is_connection_lost, is_server_error
from threadloom.storage.postgres.database import _timed_out
from threadloom.storage.postgres.pipeline import (
    _payload,
    _ResultPerStatement,
    _send,
    read_answer,
    run_pipelined,
    run_pipelined_together,
)

from tests.support.postgres import admin_connection

pytestmark = pytest.mark.postgres

Reader = Callable[[Any, Any], None]
Statements = Sequence[tuple[str, Mapping[str, Any]]]


def pg8000_reader(connection: Any, context: Any) -> None:
    connection.handle_messages(context)


READERS: dict[str, Reader] = {"pg8000": pg8000_reader, "read_answer": read_answer}

TYPES = (
    "SELECT CAST(:text AS text) AS text, CAST(:none AS text) AS none, CAST(:big AS bigint) AS big,"
    " CAST(:small AS smallint) AS small, CAST(:flag AS boolean) AS flag, CAST(:at AS timestamptz) AS at,"
    " CAST(:amount AS numeric) AS amount, CAST(:ratio AS float8) AS ratio, CAST(:tags AS text[]) AS tags,"
    " CAST(:counts AS int[]) AS counts, CAST(:document AS json) AS document, CAST(:binary AS jsonb) AS binary,"
    " CAST(:day AS date) AS day, CAST(:id AS uuid) AS id, CAST(:none AS int) AS no_number,"
    " CAST(:text AS varchar) AS name_é"
)
TYPE_PARAMS = {
    "text": "héllo — ✓ 日本 \N{GRINNING FACE}",
    "none": None,
    "big": 9_007_199_254_740_993,
    "small": -7,
    "flag": True,
    "at": datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=UTC),
    "amount": Decimal("-12345678901234567890.000000001"),
    "ratio": 0.1,
    "tags": ["a", "é", None, 'quo"te'],
    "counts": [1, 2, 3],
    "document": '{"k": ["v", 1, null, "ü"]}',
    "binary": '{"b": true}',
    "day": "2024-02-29",
    "id": str(uuid.UUID(int=12345)),
}
ROWS = "SELECT g, 'row ' || g, g % 3 = 0 FROM generate_series(1, CAST(:n AS int)) AS g"
NOTICE_FUNCTION = (
    "CREATE FUNCTION pg_temp.say(message text) RETURNS text LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE NOTICE 'said: %', message; RETURN message; END $$"
)
FAIL_FUNCTION = (
    "CREATE FUNCTION pg_temp.fail(code text) RETURNS int LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'failed with %', code USING ERRCODE = code, DETAIL = 'détail', HINT = 'a hint'; END $$"
)


@pytest.fixture
def connection() -> Iterator[Any]:
    connection = admin_connection()
    connection.run(NOTICE_FUNCTION)
    connection.run(FAIL_FUNCTION)
    connection.run("CREATE TEMPORARY TABLE unique_things (id int PRIMARY KEY)")
    yield connection
    connection.close()


def _context(statements: Statements, *, together: bool) -> Any:
    statement = statements[0][0] if statements else ""
    return _ResultPerStatement(statement) if together else pg8000.core.Context(statement)


def _outcome(connection: Any, reader: Reader, context: Any) -> tuple[Any, ...]:
    """What a reader left behind: the result or the error, and what it did to the connection."""
    connection.notices.clear()
    connection.parameter_statuses.pop("application_name", None)
    try:
        reader(connection, context)
    except Exception as error:
        result: tuple[Any, ...] = ("raised", type(error), error.args, type(error.__cause__))
    else:
        result = ("answered", getattr(context, "results", None), context.rows, context.row_count)
    return (
        *result,
        connection._transaction_status,
        list(connection.notices),
        connection.parameter_statuses.get("application_name"),
        connection._client_encoding,
    )


def _both(
    connection: Any,
    statements: Statements,
    *,
    timeouts: tuple[str, str] | None = None,
    together: bool = False,
    before: str | None = None,
) -> list[tuple[Any, ...]]:
    """Send the statements once per reader, as the pipeline does, and what each reader made of the answer.

    ``before`` runs ahead of each sending, so both start from the same state.
    """
    outcomes = []
    for reader in READERS.values():
        if before is not None:
            connection.run(before)
        _send(connection, _payload(connection, statements, timeouts))
        outcomes.append(_outcome(connection, reader, _context(statements, together=together)))
    assert connection.run("SELECT 1") == [[1]]  # in sync: nothing of either answer was left unread
    return outcomes


def test_a_spread_of_types_reads_the_same_as_with_pg8000(connection: Any) -> None:
    theirs, ours = _both(connection, [(TYPES, TYPE_PARAMS)], timeouts=("1000", "2000"))
    assert ours == theirs
    assert [[type(value) for value in row] for row in ours[2]] == [[type(value) for value in row] for row in theirs[2]]
    (row,) = ours[2]
    assert row[0] == TYPE_PARAMS["text"] and row[1] is None and row[14] is None
    assert row[2:9] == [
        9_007_199_254_740_993,
        -7,
        True,
        TYPE_PARAMS["at"],
        TYPE_PARAMS["amount"],
        0.1,
        ["a", "é", None, 'quo"te'],
    ]
    assert row[10] == {"k": ["v", 1, None, "ü"]}


def test_several_statements_together_read_the_same_as_with_pg8000(connection: Any) -> None:
    statements = [(TYPES, TYPE_PARAMS), (ROWS, {"n": 0}), (ROWS, {"n": 5}), ("SELECT pg_temp.say(:m)", {"m": "ö"})]
    theirs, ours = _both(connection, statements, timeouts=("1000", "2000"), together=True)
    assert ours == theirs
    assert [len(result) for result in ours[1]] == [1, 0, 5, 1]
    assert ours[5] == theirs[5] and len(ours[5]) == 1  # the notice


def test_statements_without_rows_read_the_same(connection: Any) -> None:
    theirs, ours = _both(connection, [("SELECT 1 WHERE CAST(:a AS int) = 0", {"a": 1})])
    assert ours == theirs and ours[2] == []
    delete = [("DELETE FROM unique_things WHERE id > CAST(:id AS int)", {"id": 0})]
    theirs, ours = _both(connection, delete, before="INSERT INTO unique_things VALUES (1), (2)")
    assert ours == theirs
    assert (ours[2], ours[3]) == (None, 2)  # NoData: no rows list at all


@pytest.mark.parametrize(
    ("sql", "params", "code"),
    [
        ("INSERT INTO unique_things VALUES (CAST(:id AS int)) RETURNING id", {"id": 1}, "23505"),
        ("SELECT pg_temp.fail(:code)", {"code": "TL042"}, "TL042"),
        ("SELECT CAST(:a AS int)", {"a": "not a number"}, "22P02"),
    ],
)
def test_a_server_error_raises_the_same_and_leaves_the_connection_usable(
    connection: Any, sql: str, params: dict[str, Any], code: str
) -> None:
    connection.run("INSERT INTO unique_things VALUES (1)")
    for together in (False, True):
        statements = [(ROWS, {"n": 2}), (sql, params), (ROWS, {"n": 3})] if together else [(sql, params)]
        theirs, ours = _both(connection, statements, timeouts=("1000", "2000"), together=together)
        assert ours == theirs
        assert ours[1] is DatabaseError and ours[2][0]["C"] == code
        assert is_server_error(DatabaseError(*ours[2]))
        assert run_pipelined(connection, "SELECT CAST(:a AS int)", {"a": 2}) == [[2]]


def test_an_error_inside_a_transaction_block_reads_the_same(connection: Any) -> None:
    outcomes = []
    for reader in READERS.values():
        connection.run("START TRANSACTION")
        steps = []
        for value in ("x", 1):  # the first fails, the second is refused: the transaction failed
            statements = [("SELECT CAST(:a AS int)", {"a": value})]
            _send(connection, _payload(connection, statements, None))
            steps.append(_outcome(connection, reader, _context(statements, together=False)))
        connection.run("ROLLBACK")
        outcomes.append(steps)
    theirs, ours = outcomes
    assert ours == theirs
    assert [(step[2][0]["C"], step[4]) for step in ours] == [("22P02", b"E"), ("25P02", b"E")]


def test_notices_and_parameter_statuses_are_handled_by_pg8000(connection: Any) -> None:
    statements = [
        ("SELECT pg_temp.say(:m), set_config('application_name', :name, false)", {"m": "héllo", "name": "reader"})
    ]
    theirs, ours = _both(connection, statements, before="SET application_name = 'before'")
    assert ours == theirs
    assert ours[2] == [["héllo", "reader"]]
    assert [notice[b"M"] for notice in ours[5]] == ["said: héllo".encode()]
    assert ours[6] == "reader"  # the ParameterStatus the setting sent


def test_answers_bigger_than_the_read_buffer_read_the_same(connection: Any) -> None:
    big = [("SELECT repeat(CAST(:s AS text), 1048576), CAST(:n AS int)", {"s": "é", "n": 1})]
    theirs, ours = _both(connection, big, timeouts=("10000", "10000"))
    assert ours == theirs and len(ours[2][0][0]) == 1_048_576
    many = [(ROWS, {"n": 50_000})]
    theirs, ours = _both(connection, many, timeouts=("10000", "10000"))
    assert ours == theirs and len(ours[2]) == 50_000
    theirs, ours = _both(connection, [*big, *many, *big], together=True)
    assert ours == theirs and [len(result) for result in ours[1]] == [1, 50_000, 1]


def test_an_answer_that_arrives_in_pieces_is_read_whole(connection: Any) -> None:
    # the notice is flushed as soon as it is raised, the row only once the sleep is over
    sql = "SELECT pg_temp.say(:m), pg_sleep(0.05), CAST(:x AS int)"
    assert run_pipelined(connection, sql, {"m": "a", "x": 7}, timeouts=("1000", "2000")) == [["a", "", 7]]
    assert run_pipelined_together(connection, [(sql, {"m": "b", "x": 8}), (ROWS, {"n": 2})]) == [
        [["b", "", 8]],
        [[1, "row 1", False], [2, "row 2", False]],
    ]
    assert connection.notices[-1][b"M"] == b"said: b"


def test_nothing_after_the_ready_for_query_is_consumed(connection: Any) -> None:
    first = _payload(connection, [(ROWS, {"n": 3})], ("1000", "2000"))
    second = _payload(connection, [("SELECT CAST(:t AS text)", {"t": "second"})], None)
    _send(connection, first + second)  # two Syncs: two answers, both on their way at once
    time.sleep(0.1)  # let the second answer arrive behind the first in the buffer
    context = pg8000.core.Context(ROWS)
    read_answer(connection, context)
    assert context.rows == [[1, "row 1", False], [2, "row 2", False], [3, "row 3", True]]
    assert connection._sock.peek()[:1] == b"1"  # the second answer starts, untouched, with its ParseComplete
    context = pg8000.core.Context("SELECT")
    connection.handle_messages(context)
    assert context.rows == [["second"]]
    assert connection.run("SELECT 1") == [[1]]


# ------------------------------------------------------------ replayed answers


class _Arrivals(io.RawIOBase):
    """A socket's reading end that hands out recorded bytes in the given pieces, one piece per read.

    After the last piece it reads nothing (the server closed the connection) or raises ``failure``.
    """

    def __init__(self, pieces: Sequence[bytes], failure: Callable[[], OSError] | None) -> None:
        self._pieces = deque(piece for piece in pieces if piece)
        self._failure = failure

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._pieces:
            if self._failure is not None:
                raise self._failure()
            return 0
        piece = self._pieces.popleft()
        size = min(len(buffer), len(piece))
        buffer[:size] = piece[:size]
        if size < len(piece):
            self._pieces.appendleft(piece[size:])
        return size


@contextmanager
def _arriving(
    connection: Any, pieces: Sequence[bytes], failure: Callable[[], OSError] | None = None
) -> Iterator[io.BufferedRWPair]:
    """The connection reads ``pieces`` instead of its socket while inside."""
    own = connection._sock
    connection._sock = io.BufferedRWPair(_Arrivals(pieces, failure), io.BytesIO())
    try:
        yield connection._sock
    finally:
        connection._sock = own


def _recorded(connection: Any, statements: Statements, timeouts: tuple[str, str] | None = None) -> bytes:
    """The raw bytes of the statements' answer, up to and with its ReadyForQuery."""
    _send(connection, _payload(connection, statements, timeouts))
    answer = bytearray()
    code = b""
    while code != b"Z":
        header = pg8000.core._read(connection._sock, 5)
        code = header[:1]
        answer += header + pg8000.core._read(connection._sock, int.from_bytes(header[1:], "big") - 4)
    return bytes(answer)


def _replayed(
    connection: Any,
    pieces: Sequence[bytes],
    *,
    statements: Statements,
    together: bool = False,
    failure: Callable[[], OSError] | None = None,
) -> list[tuple[Any, ...]]:
    """What each reader makes of the same arrivals, and what it left unread (None if reading on fails)."""
    outcomes = []
    for reader in READERS.values():
        with _arriving(connection, pieces, failure) as sock:
            outcome = _outcome(connection, reader, _context(statements, together=together))
            left = sock.read() if failure is None else None
        outcomes.append((*outcome, left))
    return outcomes


def _splits(answer: bytes) -> Iterator[list[bytes]]:
    """The answer whole, cut once at every byte, byte by byte, and in random pieces."""
    yield [answer]
    for cut in range(1, len(answer)):
        yield [answer[:cut], answer[cut:]]
    yield [answer[index : index + 1] for index in range(len(answer))]
    chance = random.Random(7)
    for _ in range(20):
        cuts = sorted(chance.sample(range(1, len(answer)), min(8, len(answer) - 1)))
        yield [answer[start:stop] for start, stop in zip([0, *cuts], [*cuts, len(answer)], strict=True)]


def test_answers_split_anywhere_read_the_same_and_nothing_after_them(connection: Any) -> None:
    statements = [
        (TYPES, TYPE_PARAMS),
        ("SELECT pg_temp.say(:m), set_config('application_name', :name, false)", {"m": "x", "name": "split"}),
        (ROWS, {"n": 4}),
    ]
    answer = _recorded(connection, statements, ("1000", "2000"))
    failing = [(ROWS, {"n": 2}), ("SELECT pg_temp.fail(:code)", {"code": "TL042"})]
    failed = _recorded(connection, failing, ("1000", "2000"))
    after = _recorded(connection, [("SELECT CAST(:t AS text)", {"t": "after"})])
    for recorded, sent in ((answer, statements), (failed, failing)):
        for pieces in _splits(recorded + after):
            theirs, ours = _replayed(connection, pieces, statements=sent, together=True)
            assert ours == theirs, [len(piece) for piece in pieces]
            assert ours[-1] == after  # the next answer is left whole


def test_a_connection_closed_or_broken_mid_answer_raises_what_pg8000_raises(connection: Any) -> None:
    statements = [(ROWS, {"n": 3})]
    answer = _recorded(connection, statements, ("1000", "2000"))
    failures: list[Callable[[], OSError] | None] = [
        None,  # the server closed the connection: the socket reads nothing
        lambda: TimeoutError("timed out"),
        lambda: ConnectionResetError(104, "Connection reset by peer"),
    ]
    for failure in failures:
        for cut in range(len(answer)):
            theirs, ours = _replayed(connection, [answer[:cut]], statements=statements, failure=failure)
            assert ours == theirs, (failure, cut)
            assert ours[0] == "raised"
    # how database.py classifies them: lost connections (a timeout among them), never server errors
    for failure in failures:
        with _arriving(connection, [answer[:20]], failure), pytest.raises(Exception) as raised:
            read_answer(connection, pg8000.core.Context("SELECT"))
        assert not is_server_error(raised.value)
        if failure is None:
            assert isinstance(raised.value, InterfaceError) and is_connection_lost(raised.value)
        else:
            assert isinstance(raised.value, OSError)  # pg8000 lets the first read's OSError through as it is
        assert _timed_out(raised.value) == isinstance(raised.value, TimeoutError)


def test_a_message_whose_handling_fails_is_consumed_as_pg8000_consumes_it(connection: Any) -> None:
    statements = [(ROWS, {"n": 3})]
    answer = _recorded(connection, statements)
    unknown = b"?\x00\x00\x00\x04"
    for recorded in (unknown + answer, answer.replace(b"C\x00", unknown + b"C\x00", 1)):
        theirs, ours = _replayed(connection, [recorded], statements=statements)
        assert ours == theirs and ours[1] is KeyError

    def failing(text: str) -> int:
        if text == "2":
            raise ValueError(text)
        return int(text)

    connection.register_in_adapter(23, failing)  # int4: the second row's first value fails
    for pieces in ([answer], [answer[:40], answer[40:]]):
        theirs, ours = _replayed(connection, pieces, statements=statements)
        assert ours == theirs and ours[1] is ValueError
        assert ours[-1].startswith(b"D")  # both consumed the failing row and nothing after it
