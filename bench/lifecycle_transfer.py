"""Export and import throughput on SQLite and PostgreSQL, next to the raw driver writing the same rows.

One session of N messages (a chain with a branch every 50 messages and one overlay) is built
on SQLite, exported, then imported into a fresh SQLite file and a fresh PostgreSQL database.
The raw baselines insert the same (session, id, parent, seq, JSON) rows with one
``executemany`` (SQLite) or one multi-row INSERT per 500 rows (pg8000), in one transaction,
which is the least an import can do; Threadloom also validates every line against the limits,
checks the tree, computes depth and token estimates and fills the full-text index.

Run: .venv/bin/python bench/lifecycle_transfer.py [N]   (PostgreSQL from TEST_DATABASE_URL,
default postgresql://postgres@127.0.0.1:5432/test; a scratch database is created and dropped)
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pg8000.native
from threadloom import PostgresStore, SessionManager, SqliteStore
from threadloom.lifecycle import export_sessions, import_sessions, read_export

NAMESPACE = "bench"
SCRATCH = f"threadloom_bench_lifecycle_{os.getpid()}"


def build(store: SqliteStore, count: int) -> str:
    manager = SessionManager.create(store, namespace=NAMESPACE)
    sid = manager.create("bench").id
    messages = [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "parts": [{"type": "text", "text": f"line {i} " * 8}],
        }
        for i in range(count)
    ]
    manager.append_all(sid, messages)
    for i in range(0, count, 50):
        manager.append(
            sid, {"id": f"b{i}", "role": "assistant", "parts": [{"type": "text", "text": "branch"}]}, f"m{i}"
        )
    manager.add_compaction(sid, "summary of the start", "m0", "m9")
    return sid


def timed(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def raw_rows(data: bytes) -> list[tuple[str, str, str | None, int, str]]:
    _, snapshots = read_export(io.BytesIO(data))
    return [
        (snapshot.id, row.id, row.parent_id, row.seq, json.dumps(row.message))
        for snapshot in snapshots
        for row in snapshot.messages
    ]


def raw_sqlite(path: Path, rows: list[tuple[str, str, str | None, int, str]]) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(
        "CREATE TABLE m (session_id TEXT, id TEXT, parent_id TEXT, seq INTEGER, content TEXT, "
        "PRIMARY KEY (session_id, id))"
    )
    connection.execute("BEGIN")
    connection.executemany("INSERT INTO m VALUES (?, ?, ?, ?, ?)", rows)
    connection.execute("COMMIT")
    connection.close()


def raw_postgres(url: str, rows: list[tuple[str, str, str | None, int, str]]) -> None:
    parts = urlsplit(url)
    connection = pg8000.native.Connection(
        user=parts.username or "postgres",
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        database=parts.path.lstrip("/"),
        password=parts.password,
    )
    connection.run(
        "CREATE TABLE raw_m (session_id TEXT, id TEXT, parent_id TEXT, seq BIGINT, content TEXT, "
        "PRIMARY KEY (session_id, id))"
    )
    connection.run("BEGIN")
    for start in range(0, len(rows), 500):
        chunk = rows[start : start + 500]
        values = ", ".join(f"(:s{i}, :i{i}, :p{i}, :q{i}, :c{i})" for i in range(len(chunk)))
        params = {}
        for i, (sid, mid, parent, seq, content) in enumerate(chunk):
            params.update({f"s{i}": sid, f"i{i}": mid, f"p{i}": parent, f"q{i}": seq, f"c{i}": content})
        connection.run(f"INSERT INTO raw_m VALUES {values}", **params)
    connection.run("COMMIT")
    connection.close()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    base = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    parts = urlsplit(base)
    scratch_url = urlunsplit((parts.scheme, parts.netloc, "/" + SCRATCH, parts.query, parts.fragment))
    admin = pg8000.native.Connection(
        user=parts.username or "postgres",
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        database=parts.path.lstrip("/") or "test",
        password=parts.password,
    )
    admin.run(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)')
    admin.run(f'CREATE DATABASE "{SCRATCH}"')
    try:
        with tempfile.TemporaryDirectory() as folder:
            source = SqliteStore(str(Path(folder) / "source.db"))
            sid = build(source, count)
            buffer = io.BytesIO()
            export_s = timed(lambda: export_sessions(source.lifecycle(), NAMESPACE, [sid], buffer))
            data = buffer.getvalue()
            rows = raw_rows(data)
            target = SqliteStore(str(Path(folder) / "target.db"))
            target.migrate()
            sqlite_s = timed(lambda: import_sessions(target.lifecycle(), NAMESPACE, io.BytesIO(data)))
            raw_sqlite_s = timed(lambda: raw_sqlite(Path(folder) / "raw.db", rows))
            cloud = PostgresStore(scratch_url)
            cloud.migrate()
            postgres_s = timed(lambda: import_sessions(cloud.lifecycle(), NAMESPACE, io.BytesIO(data)))
            cloud_back = io.BytesIO()
            (imported,) = cloud.registry(NAMESPACE).list()  # renamed: its id was minted by the source database
            pg_export_s = timed(lambda: export_sessions(cloud.lifecycle(), NAMESPACE, [imported.id], cloud_back))
            cloud.close()
            raw_postgres_s = timed(lambda: raw_postgres(scratch_url, rows))
            source.close()
            target.close()
    finally:
        admin.run(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)')
        admin.close()
    total = len(rows)
    print(f"one session, {total} messages, export file {len(data) / 1024:.0f} KiB")
    print(f"{'operation':38} {'seconds':>8} {'msgs/s':>9} {'vs raw':>7}")
    table = [
        ("export from SQLite", export_s, None),
        ("export from PostgreSQL", pg_export_s, None),
        ("import into SQLite (Threadloom)", sqlite_s, raw_sqlite_s),
        ("  raw sqlite3 executemany", raw_sqlite_s, None),
        ("import into PostgreSQL (Threadloom)", postgres_s, raw_postgres_s),
        ("  raw pg8000 multi-row INSERT", raw_postgres_s, None),
    ]
    for name, seconds, raw in table:
        ratio = f"{seconds / raw:6.1f}x" if raw else ""
        print(f"{name:38} {seconds:8.3f} {total / seconds:9.0f} {ratio:>7}")


if __name__ == "__main__":
    main()
