"""What the compaction fence's message check costs a commit, on SQLite and PostgreSQL.

A compaction's commit checks, under the session's lock, that every message it summarized is still as
it read it (an edit or a deletion meanwhile stops the commit). This times ``add_compaction`` over one
session of ``--messages`` messages (default 10,000) with the fence as it was (the leaf and the latest
overlay) and with a digest of every message on the branch, alternating, 3 rounds, median (range) in
ms: what appends to that one session wait for while the overlay commits.

Run: .venv/bin/python bench/compaction_fence.py [--messages 10000]   (PostgreSQL from TEST_DATABASE_URL)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from threadloom import PostgresStore, Session, SqliteStore
from threadloom.core.messages import message_digest
from threadloom.records import CompactionFence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch import scratch_postgres

TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. " * 5
ROUNDS = 3


def timed(store: Any, label: str, count: int) -> None:
    session = Session.create(store).for_session("long")
    messages = [
        {"id": f"m{index}", "role": "user" if index % 2 else "assistant", "parts": [{"type": "text", "text": TEXT}]}
        for index in range(count)
    ]
    for start in range(0, count, 500):
        session.append_messages(messages[start : start + 500])
    storage = session.storage
    digests = tuple((str(message["id"]), message_digest(message)) for message in session.get_history())
    sides: dict[str, tuple[tuple[str, str], ...]] = {
        "the leaf and the latest overlay": (),
        "and every message": digests,
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    for round_number in range(ROUNDS):
        for name, checked in sides.items():
            fence = CompactionFence(f"m{count - 1}", storage.get_latest_compaction_id(), checked)
            started = time.perf_counter()
            storage.add_compaction("summary", "m1", f"m{count - 10}", request_key=f"{name}-{round_number}", fence=fence)
            times[name].append((time.perf_counter() - started) * 1000)
    for name, values in times.items():
        print(f"  {label:<10} {name:<32} {statistics.median(values):8.1f} ms ({min(values):.1f}-{max(values):.1f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    count = parser.parse_args().messages
    print(f"add_compaction over one session of {count} messages; fence checks (median of {ROUNDS}, range)")
    with tempfile.TemporaryDirectory() as folder:
        timed(SqliteStore(str(Path(folder) / "fence.db")), "SQLite", count)
    with scratch_postgres(os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")) as url:
        store = PostgresStore(url)
        store.migrate()
        timed(store, "PostgreSQL", count)
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
