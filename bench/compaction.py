"""Offline compaction of long sessions: one Session.compact() run, end to end, on SQLite and PostgreSQL.

A run reads the branch, summarizes the middle in token-bounded chunks with the
extractive (offline) summarizer and commits one fenced overlay. Targets: 10,000
messages <= 10 s; 100,000 messages within the compaction function's 60 s timeout
(the PostgreSQL store uses the compaction function's timeouts: statement 40 s,
socket 50 s). The run budget is lifted so one run covers the whole middle. On PostgreSQL the
planner statistics are gathered before the measured sessions exist, as autovacuum leaves a
young deployment.

Run: .venv/bin/python bench/compaction.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from threadloom import PostgresStore, Session, SqliteStore
from threadloom.compaction import create_compact_function
from threadloom.compaction.summarizers import ExtractiveSummarizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch import scratch_postgres

TARGET_10K_S = 10.0
FUNCTION_TIMEOUT_S = 60.0


def message(index: int) -> dict[str, Any]:
    role = "user" if index % 2 == 0 else "assistant"
    text = f"Turn {index}: we agreed to ship the importer in batches of {index % 50 + 1} and log every retry."
    return {"id": f"m{index}", "role": role, "parts": [{"type": "text", "text": text}]}


def compact_once(store: Any, count: int) -> tuple[float, int]:
    session_id = f"compact-{count}"
    seed = Session.create(store).for_session(session_id)
    for start in range(0, count, 10_000):
        seed.append_messages([message(i) for i in range(start, min(start + 10_000, count))])
    session = (
        Session.create(store)
        .for_session(session_id)
        .on_compaction(create_compact_function(ExtractiveSummarizer(), run_budget_seconds=None))
    )
    started = time.perf_counter()
    result = session.compact()
    elapsed = time.perf_counter() - started
    assert result is not None
    return elapsed, len(session.get_history())


def young_deployment_statistics(store: Any, url: str) -> None:
    """Statistics as autovacuum leaves a young deployment: gathered while one small session existed.

    Every session measured is then newer than the last ANALYZE, the case where a planner trusting
    per-session statistics once read a whole session per lookup (migration 0006).
    """
    import pg8000.native
    from threadloom.storage.postgres.connection import parse_database_url

    Session.create(store).for_session("early").append_messages([message(i) for i in range(300)])
    params = parse_database_url(url)
    admin = pg8000.native.Connection(
        user=params.user, host=params.host, port=params.port, database=params.database, password=params.password
    )
    admin.run("ANALYZE")
    admin.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    sizes = [int(size) for size in parser.parse_args().sizes.split(",")]
    ok = True
    print("offline compaction, one run (read + chunked extractive summary + fenced commit)")
    print("  backend     messages   seconds   target                    history after")
    with (
        tempfile.TemporaryDirectory() as folder,
        scratch_postgres(os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")) as url,
    ):
        stores = {
            "sqlite": SqliteStore(str(Path(folder) / "bench.db")),
            "postgresql": PostgresStore(f"{url}?statement_timeout=40&timeout=50"),
        }
        young_deployment_statistics(stores["postgresql"], url)
        for backend, store in stores.items():
            for count in sizes:
                elapsed, remaining = compact_once(store, count)
                target = TARGET_10K_S if count <= 10_000 else FUNCTION_TIMEOUT_S
                met = elapsed <= target
                ok = ok and met
                label = f"<= {target:g} s {'ok' if met else 'MISSED'}"
                print(f"  {backend:<10} {count:>9,} {elapsed:9.2f}   {label:<25} {remaining:,} messages")
            store.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
