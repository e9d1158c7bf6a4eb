"""Moving a knowledge base: export and import of N knowledge entries, next to the raw driver, on both backends.

A namespace holds N entries (default 10,000, the most one file carries) under one ``search`` block,
written on SQLite; ``export_sessions(..., include_knowledge=True)`` writes them, then
``import_sessions`` reads the file into a fresh SQLite file and a fresh PostgreSQL database (another
namespace), and once more into each (every entry unchanged: the plan's reads alone). The raw
baselines write the same rows in one transaction with what a competent user would write: SQLite
``executemany`` into a table keyed like Threadloom's and an FTS5 table, pg8000 one prepared multi-row
``INSERT ... SELECT FROM jsonb_array_elements`` per 500 rows with ``to_tsvector('simple', content)``.
Threadloom also validates every line, checks the labels, keys, times and quota, reads what the
namespace holds, and builds the search vector with its own tokenizer. Each figure is the median of
``RUNS`` runs (spread in brackets).

Run: .venv/bin/python bench/knowledge_transfer.py [N]   (PostgreSQL from TEST_DATABASE_URL; a scratch database)
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pg8000.native
from threadloom import PostgresStore, SqliteStore
from threadloom.lifecycle import export_sessions, import_sessions
from threadloom.limits import DEFAULT_LIMITS
from threadloom.storage.postgres.connection import parse_database_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch import scratch_postgres

SOURCE, TARGET = "source", "target"
RUNS = 3
BATCH = 500
LIMITS = DEFAULT_LIMITS.with_overrides({"max_entries_per_tenant": 1_000_000})


def content(number: int) -> str:
    return f"Fact {number}: the harbour master answers on channel {number % 16} between six and ten."


def timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def source_file(count: int, folder: Path) -> bytes:
    store = SqliteStore(str(folder / "source.db"))
    session = store.registry(SOURCE).create("notes")
    entries = store.search_provider(scope=SOURCE, max_entries=None)
    entries.init("knowledge")
    for number in range(count):
        entries.set(f"fact-{number:06d}", content(number))
    buffer = io.BytesIO()
    report = export_sessions(store.lifecycle(), SOURCE, [session.id], buffer, include_knowledge=True)
    assert report.knowledge_entries == count
    store.close()
    return buffer.getvalue()


def rows_of(data: bytes) -> list[dict[str, Any]]:
    records = (json.loads(line) for line in data.splitlines())
    return [record for record in records if record["type"] == "knowledge_entry"]


def raw_sqlite(path: Path, rows: list[dict[str, Any]]) -> None:
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE entries (scope TEXT, label TEXT, key TEXT, content TEXT, created_at TEXT, updated_at TEXT, "
        "PRIMARY KEY (scope, label, key))"
    )
    connection.execute("CREATE VIRTUAL TABLE entries_fts USING fts5(content, tokenize = 'porter unicode61')")
    with connection:
        cursor = connection.executemany(
            "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)",
            [(TARGET, r["label"], r["key"], r["content"], r["created_at"], r["updated_at"]) for r in rows],
        )
        connection.execute("INSERT INTO entries_fts (rowid, content) SELECT rowid, content FROM entries")
        assert cursor.rowcount == len(rows)
    connection.close()


def raw_postgres(url: str, rows: list[dict[str, Any]], table: str) -> None:
    params = parse_database_url(url)
    connection = pg8000.native.Connection(
        user=params.user, host=params.host, port=params.port, database=params.database, password=params.password
    )
    connection.run(
        f"CREATE TABLE {table} (scope TEXT, label TEXT, key TEXT, content TEXT, created_at TIMESTAMPTZ, "
        f"updated_at TIMESTAMPTZ, search_vector TSVECTOR, PRIMARY KEY (scope, label, key))"
    )
    connection.run(f"CREATE INDEX ON {table} USING gin (scope, label, search_vector)")
    insert = connection.prepare(
        f"INSERT INTO {table} SELECT :scope, e->>'label', e->>'key', e->>'content', "
        "CAST(e->>'created_at' AS timestamptz), CAST(e->>'updated_at' AS timestamptz), "
        "to_tsvector('simple', e->>'content') FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS e"
    )
    connection.run("START TRANSACTION")
    for start in range(0, len(rows), BATCH):
        insert.run(scope=TARGET, rows=json.dumps(rows[start : start + BATCH]))
    connection.run("COMMIT")
    connection.close()


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    figures: dict[str, list[float]] = {}

    def note(name: str, seconds: float) -> None:
        figures.setdefault(name, []).append(seconds)

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        data = source_file(count, folder)
        rows = rows_of(data)
        print(f"{count} knowledge entries, a {len(data) // 1024} KiB export file; median of {RUNS} runs")
        for run in range(RUNS):
            target = SqliteStore(str(folder / f"target-{run}.db"))
            target.migrate()
            note("sqlite import", _import_seconds(target, data, fresh=count))
            note("sqlite import again (all unchanged)", _import_seconds(target, data, unchanged=count))
            note("sqlite export", timed(lambda target=target: _export(target)))
            target.close()
            note("raw sqlite3 executemany + FTS5", timed(lambda run=run: raw_sqlite(folder / f"raw-{run}.db", rows)))
            with scratch_postgres(url, suffix=f"_k{run}") as database:
                cloud = PostgresStore(database)
                cloud.migrate()
                note("postgres import", _import_seconds(cloud, data, fresh=count))
                note("postgres import again (all unchanged)", _import_seconds(cloud, data, unchanged=count))
                note("postgres export", timed(lambda cloud=cloud: _export(cloud)))
                cloud.close()
                note("raw pg8000, 500 rows a statement", timed(lambda d=database: raw_postgres(d, rows, "raw_entries")))
    for name, values in figures.items():
        print(f"  {name:<42} {spread(values)}")
    for backend, raw in (
        ("sqlite", "raw sqlite3 executemany + FTS5"),
        ("postgres", "raw pg8000, 500 rows a statement"),
    ):
        ratio = statistics.median(figures[f"{backend} import"]) / statistics.median(figures[raw])
        print(f"  {backend} import / {raw}: {ratio:.2f}x")


def _import_seconds(store: Any, data: bytes, *, fresh: int = 0, unchanged: int = 0) -> float:
    """One import's time, checked to have written ``fresh`` entries and found ``unchanged`` ones."""
    started = time.perf_counter()
    report = import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), limits=LIMITS)
    seconds = time.perf_counter() - started
    assert (report.knowledge_entries_imported, report.knowledge_entries_unchanged) == (fresh, unchanged), report
    return seconds


def _export(store: Any) -> None:
    (session,) = store.registry(TARGET).list()
    export_sessions(store.lifecycle(), TARGET, [session.id], io.BytesIO(), include_knowledge=True)


if __name__ == "__main__":
    main()
