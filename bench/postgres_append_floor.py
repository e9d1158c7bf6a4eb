"""Where a PostgreSQL append's time and WAL go, from the server's own evidence, against the raw baseline's.

Every side runs on one psycopg 3 connection with the statement prepared once (the least client
work, so what differs is the server's), with ``synchronous_commit = off`` (the disk flush, the
same for every side, would hide the rest), interleaved, ``RUNS`` runs of ``SAMPLES``:

- a call of a PL/pgSQL function of the append's signature that does nothing (a round trip and a call);
- the raw baseline's INSERT (``bench/baselines.py``: PK, parent, JSON, ``to_tsvector('english')`` in GIN);
- ``threadloom_append_message`` as migration 0013 wrote it (installed under another name);
- ``threadloom_append_message`` as shipped (0017: one UPDATE locks and moves the head);
- the same without a search vector (``NULL``, its own session): what search costs an append on the
  server (parsing the vector, the wider row, its GIN entries); the client's part, building the
  vector, is timed apart and printed after the table;
- ``threadloom_append_registered_message`` (0026, 0031, 0033), what a SessionManager's append (so the
  HTTP API's) calls, here with the check of the session's subject (a profile with a subject block): it
  stamps the session's registry row (``updated_at``, and ``activity_seq``, the order sessions are
  listed in, unless the session is already first: a HOT update since 0033) and then calls the
  shipped function; the session appended to is the namespace's latest, and the registry holds 200
  sessions in the namespace and its statistics are fresh (``ANALYZE``), as autovacuum keeps them;
- the shipped function sent as Threadloom sends it, an unnamed statement parsed and planned on every
  call (a named prepared statement would pin an RDS Proxy session and break under PgBouncer's
  transaction pooling, docs/postgres.md), and ``Session.append_message`` itself (all client work),
  by default and with ``prepared_statements=on`` (a direct connection, docs/postgres.md).

Then, per append: the WAL records that touch this database's relations (``pg_walinspect`` between two
WAL positions, by record type), the function's own time (``track_functions``) and each statement
inside it (``auto_explain`` loaded in the session, nested statements, ``log_analyze``; its timing adds
overhead, so compare statements with each other). ``pg_stat_statements`` needs ``shared_preload_libraries``
and a server restart, so it is not used. Last, what the disk flush adds to a one-column INSERT, the raw INSERT
and the shipped function, durable and not, alternating (the WAL each writes differs).

Run: .venv/bin/python bench/postgres_append_floor.py   (PostgreSQL from TEST_DATABASE_URL; superuser)
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
import timeit
from collections import defaultdict
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

import psycopg
from threadloom import PostgresStore, Session
from threadloom.search import to_tsvector_literal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import RAW_INSERT, create_raw_schema, text_of
from scratch import scratch_postgres

RUNS = 3
SAMPLES = 300
WAL_SAMPLES = 200
EXPLAINED = 100
FLUSH_RUNS = 4
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "
SIGNATURE = (
    "p_session_id TEXT, p_id TEXT, p_role TEXT, p_content TEXT, p_tokens BIGINT, p_vector TEXT, "
    "p_parent_omitted BOOLEAN, p_parent_id TEXT, p_expected_leaf_id TEXT, p_created_at TIMESTAMPTZ, "
    "p_lock_timeout TEXT"
)
CALL = "SELECT {function}({namespace}%s, %s, 'user', %s, CAST(40 AS bigint), %s, true, NULL, NULL, %s, '2000'{tail})"
NAMESPACE_SESSIONS = 200
INSERT = RAW_INSERT.format(sid="%s", id="%s", parent="%s", content="%s", text="%s")


def message(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": TEXT * 2}]}


def register_sessions(connection: psycopg.Connection[Any]) -> None:
    """The registered function's session and others in its namespace, with fresh statistics."""
    now = datetime.now(UTC)
    for index in range(NAMESPACE_SESSIONS):
        connection.execute(
            "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
            "VALUES (%s, 'bench', %s, %s, %s, %s)",
            ("registered" if index == 0 else f"other-{index}", f"session {index}", now, now, index + 1),
        )
    connection.execute("ANALYZE threadloom_sessions")


def install_0013(connection: psycopg.Connection[Any]) -> None:
    """Migration 0013's append function, under the name threadloom_append_message_v13, and a no-op one."""
    sql = (files("threadloom.storage.postgres") / "migrations" / "0013_append_one_message.sql").read_text()
    connection.execute(sql.replace("FUNCTION threadloom_append_message(", "FUNCTION threadloom_append_message_v13("))
    connection.execute(
        f"CREATE FUNCTION bench_noop({SIGNATURE}) RETURNS TEXT LANGUAGE plpgsql VOLATILE AS $$ BEGIN RETURN 't'; END $$"
    )


class Sides:
    """One append per side, each with its own session (or raw key) so none sees another's rows."""

    def __init__(self, url: str, store: PostgresStore, prepared_store: PostgresStore) -> None:
        self.connection = psycopg.connect(url, autocommit=True)
        self.session = Session.create(store).for_session("threadloom")
        self.prepared_session = Session.create(prepared_store).for_session("threadloom-prepared")
        self.leaf: str | None = None
        self.actions = {
            "no-op function call": lambda item: self.call("bench_noop", "noop", item),
            "raw INSERT": self.raw,
            "0013 function": lambda item: self.call("threadloom_append_message_v13", "v13", item),
            "shipped function": lambda item: self.call("threadloom_append_message", "v17", item),
            "shipped, no search vector": lambda item: self.call(
                "threadloom_append_message", "unsearched", item, searchable=False
            ),
            "registered function": lambda item: self.call(
                "threadloom_append_registered_message", "registered", item, namespace="'bench', ", tail=", true, NULL"
            ),
            "shipped, unnamed statement": lambda item: self.call("threadloom_append_message", "unnamed", item, False),
            "Session.append_message": self.session.append_message,
            "Session, prepared_statements": self.prepared_session.append_message,
        }

    def call(
        self,
        function: str,
        session_id: str,
        item: dict[str, Any],
        prepare: bool = True,
        *,
        namespace: str = "",
        tail: str = "",
        searchable: bool = True,
    ) -> None:
        content = json.dumps(item, separators=(",", ":"))
        vector = to_tsvector_literal(text_of(item)) if searchable else None
        params = (session_id, item["id"], content, vector, datetime.now(UTC))
        self.connection.execute(CALL.format(function=function, namespace=namespace, tail=tail), params, prepare=prepare)

    def raw(self, item: dict[str, Any]) -> None:
        content = json.dumps(item, separators=(",", ":"))
        self.connection.execute(INSERT, ("raw", item["id"], self.leaf, content, text_of(item)), prepare=True)
        self.leaf = item["id"]


def timings(sides: Sides) -> None:
    runs: dict[str, list[float]] = defaultdict(list)
    for run in range(RUNS):
        samples: dict[str, list[float]] = defaultdict(list)
        for index in range(SAMPLES):
            item = message(f"t{run}-{index}")
            for name, action in sides.actions.items():
                started = time.perf_counter()
                action(item)
                samples[name].append((time.perf_counter() - started) * 1_000_000)
        for name, values in samples.items():
            runs[name].append(statistics.median(values))
    raw = runs["raw INSERT"]
    print(f"\nappend p50 in µs, synchronous_commit = off ({RUNS} runs of {SAMPLES} interleaved; median (range))")
    for name, values in runs.items():
        ratios = [ours / theirs for ours, theirs in zip(values, raw, strict=True)]
        print(
            f"  {name:<28} {statistics.median(values):7.1f} ({min(values):.0f}-{max(values):.0f})"
            f"   / raw INSERT {statistics.median(ratios):5.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        )
    item = message("vector")
    building = min(timeit.repeat(lambda: to_tsvector_literal(text_of(item)), number=2_000, repeat=5)) / 2_000
    print(f"  building the message's search vector on the client: {building * 1_000_000:.1f} µs (timeit, best of 5)")


def flush_wal(connection: psycopg.Connection[Any]) -> None:
    """A durable commit, so pg_walinspect may read everything written before it."""
    connection.execute("SET synchronous_commit = on")
    connection.execute("INSERT INTO bench_flush VALUES (1)")
    connection.execute("SET synchronous_commit = off")


def wal(sides: Sides) -> None:
    connection = sides.connection
    connection.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    connection.execute("CREATE TABLE bench_flush (x int)")
    database_oid = connection.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
    assert database_oid is not None
    print(f"\nWAL per append: records on this database's relations ({WAL_SAMPLES} appends; + a ~34 B commit record)")
    for name in ("raw INSERT", "0013 function", "shipped function", "shipped, no search vector", "registered function"):
        action = sides.actions[name]
        flush_wal(connection)
        start = connection.execute("SELECT pg_current_wal_lsn()").fetchone()
        for index in range(WAL_SAMPLES):
            action(message(f"w-{name}-{index}"))
        end = connection.execute("SELECT pg_current_wal_lsn()").fetchone()
        flush_wal(connection)
        assert start is not None and end is not None
        rows = connection.execute(
            "SELECT resource_manager || '/' || record_type, count(*), sum(record_length), sum(fpi_length) "
            "FROM pg_get_wal_records_info(%s, %s) WHERE block_ref LIKE %s GROUP BY 1 ORDER BY 3 DESC",
            (start[0], end[0], f"%/{database_oid[0]}/%"),
        ).fetchall()
        total = sum(int(row[2]) for row in rows) / WAL_SAMPLES
        detail = ", ".join(
            f"{kind} {int(size) / WAL_SAMPLES:.0f}" for kind, _, size, _ in rows if size / WAL_SAMPLES >= 1
        )
        print(f"  {name:<26} {total:6.0f} B: {detail}")


def server_time(sides: Sides) -> None:
    connection = sides.connection
    connection.execute("SET track_functions = 'all'")
    for name in ("0013 function", "shipped function", "registered function"):
        for index in range(SAMPLES):
            sides.actions[name](message(f"f-{name}-{index}"))
    connection.execute("SET track_functions = 'none'")
    connection.execute("SELECT pg_stat_force_next_flush()")
    connection.execute("SELECT pg_stat_clear_snapshot()")
    print("\nthe function's own time per call (track_functions; the call's parse, plan and protocol excluded)")
    for function, calls, self_time in connection.execute(
        "SELECT funcname, calls, self_time FROM pg_stat_user_functions "
        "WHERE funcname LIKE 'threadloom_append_%message%'"
    ):
        print(f"  {function:<38} {self_time * 1000 / calls:6.1f} µs over {calls} calls")
    print("  (self time: the registered function's excludes the shipped function it calls, so it is the stamp's)")

    notes: list[str] = []
    connection.add_notice_handler(lambda diagnostic: notes.append(diagnostic.message_primary or ""))
    connection.execute("LOAD 'auto_explain'")
    for setting in (
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_analyze = on",
        "auto_explain.log_buffers = on",
        "auto_explain.log_nested_statements = on",
        "auto_explain.log_triggers = on",
        "client_min_messages = log",
    ):
        connection.execute(f"SET {setting}")
    for index in range(EXPLAINED):
        sides.actions["registered function"](message(f"e-{index}"))
    connection.execute("SET client_min_messages = notice")
    connection.execute("SET auto_explain.log_min_duration = -1")
    per_statement: dict[str, list[float]] = defaultdict(list)
    buffers: dict[str, str] = {}
    for note in notes:
        found = re.search(r"duration: ([\d.]+) ms\s+plan:\s*\n\s*Query Text: (.*?)\n(.*)", note, re.S)
        if found:
            text = " ".join(found.group(2).split())[:80]
            per_statement[text].append(float(found.group(1)) * 1000)
            hits = re.search(r"Buffers: ([^\n]*)", found.group(3))
            buffers[text] = hits.group(1) if hits else ""
    print(
        f"\neach statement of the registered function and the shipped one it calls "
        f"(auto_explain, median of {EXPLAINED} calls, µs, buffers)"
    )
    for text, values in sorted(per_statement.items(), key=lambda item: -statistics.median(item[1])):
        if len(values) >= EXPLAINED // 2:
            print(f"  {statistics.median(values):6.1f}  {text:<80} {buffers[text]}")


def flush_cost(sides: Sides) -> None:
    """What the disk flush adds to each side's commit: the same statements durable and not, alternating.

    The flush is ``XLogFlush`` at commit; on a VM whose flush is cheap it grows with the WAL the commit
    writes, and then a statement that writes more pays more for it (docs/postgres.md).
    """
    connection = sides.connection
    connection.execute("CREATE TABLE bench_one_column (x int)")

    def one_column(item: dict[str, Any]) -> None:
        connection.execute("INSERT INTO bench_one_column VALUES (1)", prepare=True)

    actions = {
        "a one-column INSERT": one_column,
        "raw INSERT": sides.actions["raw INSERT"],
        "shipped function": sides.actions["shipped function"],
    }
    medians: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in range(FLUSH_RUNS):
        for commit in ("on", "off"):
            connection.execute(f"SET synchronous_commit = {commit}")
            samples: dict[str, list[float]] = defaultdict(list)
            for index in range(SAMPLES):
                item = message(f"flush-{run}-{commit}-{index}")
                for name, action in actions.items():
                    started = time.perf_counter()
                    action(item)
                    samples[name].append((time.perf_counter() - started) * 1_000_000)
            for name, values in samples.items():
                medians[(name, commit)].append(statistics.median(values))
    connection.execute("SET synchronous_commit = off")
    print(
        f"\nthe disk flush: p50 in µs durable and without it ({FLUSH_RUNS} rounds of {SAMPLES}, alternating; "
        "the flush is the difference, median (range))"
    )
    for name in actions:
        durable, unflushed = medians[(name, "on")], medians[(name, "off")]
        flush = [on - off for on, off in zip(durable, unflushed, strict=True)]
        print(
            f"  {name:<22} durable {statistics.median(durable):6.1f}  without {statistics.median(unflushed):6.1f}"
            f"  flush {statistics.median(flush):6.1f} ({min(flush):.0f}-{max(flush):.0f})"
        )


def main() -> int:
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    with scratch_postgres(url) as scratch:
        database = scratch.rsplit("/", 1)[1]
        with psycopg.connect(scratch, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = off')
        store = PostgresStore(scratch)
        store.migrate()
        prepared_store = PostgresStore(scratch + "?prepared_statements=on")
        create_raw_schema(scratch)
        sides = Sides(scratch, store, prepared_store)
        install_0013(sides.connection)
        register_sessions(sides.connection)
        version = sides.connection.execute("SHOW server_version").fetchone()
        print(f"PostgreSQL {version[0] if version else '?'}; every side on one connection, statements prepared once")
        timings(sides)
        wal(sides)
        server_time(sides)
        flush_cost(sides)
        sides.connection.close()
        store.close()
        prepared_store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
