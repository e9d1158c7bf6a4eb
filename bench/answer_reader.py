"""The Python cost of reading one pipelined answer: pg8000's ``handle_messages`` against ``read_answer``.

Each kind of answer is taken once from the server (the exact bytes of a real round trip), then
written again and again into a local socket pair whose reading end stands in for the
connection's socket, so both readers parse an answer that has already arrived, as after a
round trip. Samples of both readers alternate (and which goes first alternates too), so machine
drift hits both equally. Printed: median µs per answer, the ratio, and the time to take the
same bytes off the socket without parsing them (the part of both figures that is not parsing).

Run: .venv/bin/python bench/answer_reader.py   (uses TEST_DATABASE_URL, default
postgresql://postgres@127.0.0.1:5432/test; only reads)
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pg8000.native
from pg8000.core import Context
from threadloom.storage.postgres.connection import parse_database_url
from threadloom.storage.postgres.pipeline import _payload, _ResultPerStatement, _send, read_answer

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

SAMPLES = 3000
TIMEOUTS = ("2000", "5000")
# The columns threadloom_append returns, with the timeouts statement in front as every append sends it.
APPEND = (
    "SELECT CAST(:id AS text) AS out_id, CAST(:parent AS text) AS out_parent_id, "
    "CAST(:inserted AS boolean) AS out_inserted, CAST(:tokens AS bigint) AS out_path_tokens"
)
APPEND_PARAMS = {
    "id": "01JB2Q7W9ZC5V3K8R4N6M0XH2D",
    "parent": "01JB2Q7W9ZC5V3K8R4N6M0XH2C",
    "inserted": True,
    "tokens": 4211,
}
# Opening a session reads three kinds of blocks together.
BLOCKS = (
    "SELECT CAST(:kind AS text) AS kind, 'block ' || g AS label, repeat('notes ', 20) AS content, "
    "now() AS updated_at FROM generate_series(1, CAST(:n AS int)) AS g"
)
# No timestamptz here: pg8000's converter for it (strptime, about 8 µs a value) is the same for
# both readers and would hide the difference; the blocks read together below have one per row.
ROWS = (
    "SELECT g AS seq, 'msg-' || g AS id, repeat('x', 80) AS content, g % 2 = 0 AS flag"
    " FROM generate_series(1, 200) AS g WHERE CAST(:x AS int) = 1"
)
PAGE = "SELECT CAST(:page AS json)"
PAGE_PARAMS = {"page": '{"messages": [' + ",".join(['{"role": "user", "text": "' + "w" * 480 + '"}'] * 200) + "]}"}


def answer_bytes(connection: Any, statements: Sequence[tuple[str, Mapping[str, Any]]], timeouts: Any) -> bytes:
    """Send the statements as the pipeline does and keep the raw answer, up to and with its ReadyForQuery."""
    _send(connection, _payload(connection, statements, timeouts))
    answer = bytearray()
    code = b""
    while code != b"Z":
        header = connection._sock.read(5)
        code = header[:1]
        answer += header + connection._sock.read(int.from_bytes(header[1:], "big") - 4)
    return bytes(answer)


@contextmanager
def replayed(connection: Any) -> Iterator[socket.socket]:
    """The connection reads from a local socket pair while inside; its own socket is put back after."""
    reading, writing = socket.socketpair()
    own = connection._sock
    connection._sock = reading.makefile("rwb")
    try:
        yield writing
    finally:
        connection._sock.close()
        connection._sock = own
        reading.close()
        writing.close()


def pg8000_reader(connection: Any, context: Any) -> None:
    connection.handle_messages(context)


def socket_alone(connection: Any, context: Any) -> None:
    """Only take the answer off the socket, unparsed: what both readers pay before any parsing."""
    sock = connection._sock
    while sock.read(len(sock.peek()))[-6:-5] != b"Z":
        pass


def compare(connection: Any, label: str, answer: bytes, new_context: Callable[[], Any]) -> None:
    readers = {"pg8000": pg8000_reader, "read_answer": read_answer, "socket": socket_alone}
    timings: dict[str, list[float]] = {name: [] for name in readers}
    results: dict[str, Any] = {}
    with replayed(connection) as writing:
        for sample in range(SAMPLES):
            order = list(readers) if sample % 2 == 0 else list(reversed(readers))
            for name in order:
                writing.sendall(answer)
                context = new_context()
                started = time.perf_counter_ns()
                readers[name](connection, context)
                timings[name].append((time.perf_counter_ns() - started) / 1000)
                results[name] = getattr(context, "results", context.rows)
    assert results["pg8000"] == results["read_answer"], label
    before, after, floor = (statistics.median(timings[name]) for name in readers)
    print(
        f"{label:<40} {len(answer):>7} B  pg8000 {before:7.1f} µs  read_answer {after:7.1f} µs  "
        f"{before / after:.2f}x  (socket alone {floor:5.1f} µs)"
    )


def main() -> None:
    params = parse_database_url(os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    connection = pg8000.native.Connection(
        user=params.user, host=params.host, port=params.port, database=params.database, password=params.password
    )
    try:
        cases = [
            ("append (timeouts statement + one row)", [(APPEND, APPEND_PARAMS)], TIMEOUTS),
            ("200 rows (int, text, text, boolean)", [(ROWS, {"x": 1})], TIMEOUTS),
            ("history page (one JSON row of ~100 KB)", [(PAGE, PAGE_PARAMS)], TIMEOUTS),
        ]
        print(f"median of {SAMPLES} answers each, readers interleaved")
        for label, statements, timeouts in cases:
            answer = answer_bytes(connection, statements, timeouts)
            compare(connection, label, answer, lambda: Context(APPEND))
        together = [(BLOCKS, {"kind": kind, "n": 3}) for kind in ("memory", "knowledge", "history")]
        answer = answer_bytes(connection, together, TIMEOUTS)
        compare(connection, "3 statements together (3 rows each)", answer, lambda: _ResultPerStatement(BLOCKS))
    finally:
        connection.close()


if __name__ == "__main__":
    main()
