"""Threadloom on PostgreSQL against raw pg8000 doing the least work that stores and reads the same tree.

Raw baseline: a table keyed by (session_id, id) with parent_id and the message JSON; an append
is one parameterized INSERT (the client already knows the parent), a history read is one
recursive query from a known leaf, decoded into the same list of dicts Threadloom returns.

Threadloom sends each parameterized statement in one round trip (Parse, Describe, Bind,
Execute, Sync written together) where pg8000's Connection.run takes three; the raw baseline
uses Connection.run, as a hand-written client would, and the append table also prints the
raw INSERT sent in one round trip for comparison. The "+ compaction check" column is an
append with auto-compaction armed (one extra single-row read for the running estimate).

Threadloom does more in its single statement (head-row lock, idempotency check, depth and
token estimate, search vector in a GIN index, leaf bookkeeping), so the targets are ratios:
append <= 1.5x the raw INSERT and get_history <= 1.5x the raw query at 1,000 and 10,000
messages, and append time flat from 100 to 10,000 messages. Appends and reads of both sides
are interleaved so drift on the machine affects both equally.

Run: .venv/bin/python bench/postgres_vs_raw.py   (uses TEST_DATABASE_URL, default
postgresql://postgres@127.0.0.1:5432/test; creates and drops a scratch database)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pg8000.native
from threadloom import PostgresStore, Session
from threadloom.compaction import create_compact_function
from threadloom.storage.postgres.connection import parse_database_url
from threadloom.storage.postgres.pipeline import run_pipelined

SAMPLES = 300
READS = 9
APPEND_LENGTHS = (100, 1_000, 10_000)
HISTORY_LENGTHS = (1_000, 10_000)
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "
TARGET = 1.5

RAW_SCHEMA = (
    "CREATE TABLE raw_messages (session_id TEXT NOT NULL, id TEXT NOT NULL, parent_id TEXT, "
    "content TEXT NOT NULL, PRIMARY KEY (session_id, id))"
)
RAW_INSERT = "INSERT INTO raw_messages (session_id, id, parent_id, content) VALUES (:sid, :id, :parent, :content)"
RAW_SEED = (
    "INSERT INTO raw_messages (session_id, id, parent_id, content) "
    "SELECT :sid, i, p, c FROM unnest(CAST(:ids AS text[]), CAST(:parents AS text[]), CAST(:contents AS text[])) "
    "AS t(i, p, c)"
)
RAW_HISTORY = (
    "WITH RECURSIVE path(id, parent_id, content) AS ("
    " SELECT id, parent_id, content FROM raw_messages WHERE session_id = :sid AND id = :leaf"
    " UNION ALL"
    " SELECT m.id, m.parent_id, m.content FROM raw_messages m JOIN path p ON m.session_id = :sid AND m.id = p.parent_id"
    ") SELECT content FROM path"
)


def message(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": TEXT * 2}]}


class Raw:
    """The baseline: what a hand-written pg8000 client would minimally do."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.leaf: dict[str, str | None] = {}

    def seed(self, session_id: str, count: int) -> None:
        ids = [f"seed-{i}" for i in range(count)]
        parents: list[str | None] = [None, *ids[:-1]]
        contents = [json.dumps(message(i), separators=(",", ":")) for i in ids]
        self.connection.run(RAW_SEED, sid=session_id, ids=ids, parents=parents, contents=contents)
        self.leaf[session_id] = ids[-1] if ids else None

    def append(self, session_id: str, item: dict[str, Any]) -> None:
        content = json.dumps(item, separators=(",", ":"))
        self.connection.run(
            RAW_INSERT, sid=session_id, id=item["id"], parent=self.leaf.get(session_id), content=content
        )
        self.leaf[session_id] = item["id"]

    def append_one_round_trip(self, session_id: str, item: dict[str, Any]) -> None:
        """The same INSERT sent the way Threadloom sends statements (Parse..Sync in one write)."""
        content = json.dumps(item, separators=(",", ":"))
        params = {"sid": session_id, "id": item["id"], "parent": self.leaf.get(session_id), "content": content}
        run_pipelined(self.connection, RAW_INSERT, params)
        self.leaf[session_id] = item["id"]

    def history(self, session_id: str) -> list[dict[str, Any]]:
        rows = self.connection.run(RAW_HISTORY, sid=session_id, leaf=self.leaf[session_id])
        return [json.loads(content) for (content,) in reversed(rows)]

    def history_rows(self, session_id: str) -> int:
        return len(self.connection.run(RAW_HISTORY, sid=session_id, leaf=self.leaf[session_id]))


def timed(action: Any, *args: Any) -> float:
    started = time.perf_counter()
    action(*args)
    return (time.perf_counter() - started) * 1000


def scratch_database(url: str) -> tuple[str, Any]:
    params = parse_database_url(url)
    admin = pg8000.native.Connection(
        user=params.user, host=params.host, port=params.port, database=params.database, password=params.password
    )
    name = f"threadloom_bench_{os.getpid()}"
    admin.run(f'DROP DATABASE IF EXISTS "{name}"')
    admin.run(f'CREATE DATABASE "{name}"')
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment)), admin


def main() -> int:
    base_url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    url, admin = scratch_database(base_url)
    name = urlsplit(url).path.lstrip("/")
    try:
        return run(url)
    finally:
        admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def measure_appends(store: PostgresStore, raw: Raw, length: int) -> tuple[float, float, float, float]:
    """Median ms of: Threadloom append, raw INSERT, Threadloom append with the compaction check, raw in 1 trip."""
    session_id, armed_id = f"append-{length}", f"armed-{length}"
    seed = [message(f"seed-{i}") for i in range(length)]
    Session.create(store).for_session(session_id).append_messages(seed)
    Session.create(store).for_session(armed_id).append_messages(seed)
    raw.seed(session_id, length)
    raw.seed(armed_id, length)
    session = Session.create(store).for_session(session_id)  # a fresh load, as a new Lambda would do
    armed = (
        Session.create(store)
        .for_session(armed_id)
        .on_compaction(create_compact_function(lambda prompt: "summary"))
        .compact_after(10**12)
    )
    ours, theirs, checked, one_trip = [], [], [], []
    for index in range(SAMPLES):
        item = message(f"new-{index}")
        ours.append(timed(session.append_message, item))
        theirs.append(timed(raw.append, session_id, item))
        checked.append(timed(armed.append_message, item))
        one_trip.append(timed(raw.append_one_round_trip, armed_id, item))
    medians = [statistics.median(values) for values in (ours, theirs, checked, one_trip)]
    return medians[0], medians[1], medians[2], medians[3]


def run(url: str) -> int:
    store = PostgresStore(url)
    store.migrate()
    params = parse_database_url(url)
    raw = Raw(
        pg8000.native.Connection(
            user=params.user, host=params.host, port=params.port, database=params.database, password=params.password
        )
    )
    raw.connection.run(RAW_SCHEMA)
    print(f"PostgreSQL {raw.connection.run('SHOW server_version')[0][0]}, {SAMPLES} interleaved appends per length")
    print("Threadloom = Session.append_message / get_history on PostgresStore; raw = one INSERT / one recursive query")

    append_ms = {length: measure_appends(store, raw, length) for length in APPEND_LENGTHS}

    print("\nappend (median ms)       threadloom      raw   ratio | + compaction check   raw sent in 1 round trip")
    ok = True
    for length, (ours_ms, raw_ms, checked_ms, one_trip_ms) in append_ms.items():
        ratio = ours_ms / raw_ms
        ok = ok and ratio <= TARGET
        print(
            f"  history {length:>6,}       {ours_ms:8.3f} {raw_ms:8.3f}   {ratio:5.2f}x (target <= {TARGET})"
            f" | {checked_ms:8.3f} ({checked_ms / raw_ms:4.2f}x)   {one_trip_ms:8.3f}"
        )
    flat = append_ms[APPEND_LENGTHS[-1]][0] / append_ms[APPEND_LENGTHS[0]][0]
    print(f"  threadloom append 10,000 / 100: {flat:.2f} (flat = 1.0)")

    print("\nget_history (median ms)  threadloom      raw   ratio   raw rows only")
    for length in HISTORY_LENGTHS:
        session_id = f"history-{length}"
        session = Session.create(store).for_session(session_id)
        session.append_messages([message(f"m{i}") for i in range(length)])
        raw.seed(session_id, length)
        assert len(session.get_history()) == len(raw.history(session_id)) == length
        ours, theirs, rows_only = [], [], []
        for _ in range(READS):
            ours.append(timed(session.get_history))
            theirs.append(timed(raw.history, session_id))
            rows_only.append(timed(raw.history_rows, session_id))
        ours_ms, raw_ms = statistics.median(ours), statistics.median(theirs)
        ratio = ours_ms / raw_ms
        ok = ok and ratio <= TARGET
        print(
            f"  {length:>6,} messages       {ours_ms:8.2f} {raw_ms:8.2f}   {ratio:5.2f}x"
            f"   {statistics.median(rows_only):8.2f} (target <= {TARGET})"
        )
    raw.connection.close()
    store.close()
    print("\nall targets met" if ok else "\nSOME TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
