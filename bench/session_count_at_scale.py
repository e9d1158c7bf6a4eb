"""Opening a new session as a tenant's sessions grow: the searchable-history count is one row, not a scan.

The default profile's searchable-history block renders "<n> sessions available for search." into each
new session's first prompt. Until migration 0034 that ``n`` was ``COUNT(*)`` over the namespace's
sessions, so a new session's open grew with the tenant. Now the count is one row kept by triggers.

For a namespace of each size (sessions stored in bulk, then ``VACUUM ANALYZE``), this prints:

- a new session's open p50 (``SessionManager.get_session`` and ``freeze_system_prompt``, as a request
  does first; the users' configuration of ``bench/users_config.py``), 30 sessions each way, in 3 alternating rounds:
  with ``threadloom_read_when_missing`` as migration 0015 wrote it (counting the rows) and as 0034
  ships it (reading the count row);
- and what the count costs a session's creation: ``SessionManager.create`` with the trigger that counts
  it and without, alternating.
- side by side, interleaved, on one psycopg connection with both statements prepared: the count as it
  was read before 0034 (``COUNT(*)`` of the namespace's rows) and as it is read now (the count row).

Run: .venv/bin/python bench/session_count_at_scale.py   (PostgreSQL from TEST_DATABASE_URL; a scratch database)
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

import psycopg
from threadloom import PostgresStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch import scratch_postgres
from users_config import TENANT, Users

SIZES = (10, 1_000, 10_000, 50_000)
OPENS = 30
ROUNDS = 3
CREATES = 300
COUNTS = 200
BEFORE = "SELECT COUNT(*) FROM threadloom_sessions WHERE namespace = %s"
NOW = "SELECT COALESCE((SELECT sessions FROM threadloom_namespace_sessions WHERE namespace = %s), 0)"


def read_when_missing(migration: str) -> str:
    """That migration's ``threadloom_read_when_missing``, as a statement that replaces the installed one."""
    sql = (files("threadloom.storage.postgres") / "migrations" / migration).read_text()
    found = re.search(r"CREATE (?:OR REPLACE )?FUNCTION threadloom_read_when_missing\(.*?\n\$\$;", sql, re.S)
    assert found is not None, migration
    return found.group(0).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)


def main() -> int:
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    with scratch_postgres(url) as scratch:
        store = PostgresStore(scratch)
        store.migrate()
        users = Users(store)
        connection = psycopg.connect(scratch, autocommit=True)
        counting = read_when_missing("0015_block_owners.sql")
        shipped = read_when_missing("0034_session_counts.sql")
        print("a new session's open, and the count it renders, by the sessions its namespace holds (p50, µs)")
        print(
            f"  {'sessions':>8}  {'open, 0015':>10}  {'open, 0034':>10}  {'COUNT(*) (0015)':>15}  "
            f"{'count row (0034)':>16}  counts 0015 / 0034"
        )
        stored = 0
        for size in SIZES:
            now = datetime.now(UTC)
            with connection.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
                    "VALUES (%s, %s, 'bulk', %s, %s, %s)",
                    [(f"bulk-{index}", TENANT, now, now, 1_000_000 + index) for index in range(stored, size)],
                )
            stored = size
            connection.execute("VACUUM ANALYZE threadloom_sessions")
            opened: dict[str, list[float]] = {"0015": [], "0034": []}
            for round_ in range(ROUNDS):
                for version, function in (("0015", counting), ("0034", shipped)):
                    connection.execute(function)  # each connection compiles it again at its next call
                    users.open(users.create(f"warm-{size}-{version}-{round_}"))
                    for index in range(OPENS // ROUNDS):
                        session_id = users.create(f"open-{size}-{version}-{round_}-{index}")
                        started = time.perf_counter()
                        users.open(session_id)
                        opened[version].append((time.perf_counter() - started) * 1_000_000)
            before, after = [], []
            for _ in range(COUNTS):
                started = time.perf_counter()
                connection.execute(BEFORE, (TENANT,), prepare=True).fetchone()
                before.append((time.perf_counter() - started) * 1_000_000)
                started = time.perf_counter()
                connection.execute(NOW, (TENANT,), prepare=True).fetchone()
                after.append((time.perf_counter() - started) * 1_000_000)
            held = users.manager.count()
            was, now_read = statistics.median(before), statistics.median(after)
            print(
                f"  {held:>8}  {statistics.median(opened['0015']):>10.1f}  {statistics.median(opened['0034']):>10.1f}"
                f"  {was:>15.1f}  {now_read:>16.1f}  {was / now_read:6.1f}x"
            )
        creations: dict[str, list[float]] = {"with": [], "without": []}
        for round_ in range(ROUNDS):
            for trigger in ("with", "without"):
                state = "ENABLE" if trigger == "with" else "DISABLE"
                connection.execute(f"ALTER TABLE threadloom_sessions {state} TRIGGER threadloom_sessions_counted")
                users.create(f"warm-create-{trigger}-{round_}")
                for index in range(CREATES // ROUNDS):
                    started = time.perf_counter()
                    users.create(f"create-{trigger}-{round_}-{index}")
                    creations[trigger].append((time.perf_counter() - started) * 1_000_000)
        connection.execute("ALTER TABLE threadloom_sessions ENABLE TRIGGER threadloom_sessions_counted")
        with_count, without_count = statistics.median(creations["with"]), statistics.median(creations["without"])
        print(
            f"a session's creation (p50, µs, {CREATES} each way in {ROUNDS} alternating rounds): with the count's "
            f"trigger {with_count:.1f}, without {without_count:.1f} ({with_count / without_count:.2f}x)"
        )
        connection.close()
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
