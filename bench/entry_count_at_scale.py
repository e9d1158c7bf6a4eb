"""Opening a new session and writing a new knowledge key as a block's entries grow: the count is one row.

The default profile's knowledge block renders "<n> entries indexed." into each new session's first
prompt, and a new key is checked against ``max_entries_per_tenant`` (1,000 by default, up to
1,000,000). Until migration 0036 both counted the block's rows (``COUNT(*)``); now the count is one row
kept by triggers.

For a block of each size (entries stored in bulk, then ``VACUUM ANALYZE``), this prints:

- a new session's open p50 (``SessionManager.get_session`` and ``freeze_system_prompt``, the users'
  configuration of ``bench/users_config.py``), 30 sessions each way in 3 alternating rounds, with
  ``threadloom_read_when_missing`` as migration 0035 left it (counting the rows) and as 0036 ships it;
- side by side, interleaved, on one psycopg connection with both statements prepared: the count as the
  quota check read it before 0036 and as it reads it now;
- one transaction creating N sessions (one statement, as an import's many rows), its commit timed with the
  count moved once per transaction (0036) and once per row (0034: the trigger that notes the change off).

Run: .venv/bin/python bench/entry_count_at_scale.py   (PostgreSQL from TEST_DATABASE_URL; a scratch database)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
from threadloom import PostgresStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch import scratch_postgres
from session_count_at_scale import read_when_missing
from users_config import TENANT, Users

SIZES = (10, 1_000, 10_000, 100_000)
BULK = (1_000, 4_000, 16_000)
OPENS = 30
ROUNDS = 3
COUNTS = 200
LABEL = "knowledge"
BEFORE = "SELECT COUNT(*) FROM threadloom_search_entries WHERE scope = %s AND label = %s"
NOW = "SELECT COALESCE((SELECT entries FROM threadloom_entry_counts WHERE scope = %s AND label = %s), 0)"


def main() -> int:
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    with scratch_postgres(url) as scratch:
        store = PostgresStore(scratch)
        store.migrate()
        users = Users(store)
        connection = psycopg.connect(scratch, autocommit=True)
        counting = read_when_missing("0034_session_counts.sql")
        shipped = read_when_missing("0036_entry_counts.sql")
        print("a new session's open and the entry count it renders, by the entries of its knowledge block (p50, µs)")
        print(
            f"  {'entries':>9}  {'open, 0035':>10}  {'open, 0036':>10}  {'COUNT(*) (0035)':>15}  "
            f"{'count row (0036)':>16}  counts 0035 / 0036"
        )
        stored = 0
        for size in SIZES:
            connection.execute(
                "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
                "SELECT %s, %s, 'bulk-' || g, 'a fact worth finding', now(), now() "
                "FROM generate_series(CAST(%s AS integer), CAST(%s AS integer)) AS g",
                (TENANT, LABEL, stored, size - 1),
            )
            stored = size
            connection.execute("VACUUM ANALYZE threadloom_search_entries")
            opened: dict[str, list[float]] = {"0035": [], "0036": []}
            for round_ in range(ROUNDS):
                for version, function in (("0035", counting), ("0036", shipped)):
                    connection.execute(function)  # each connection compiles it again at its next call
                    users.open(users.create(f"warm-{size}-{version}-{round_}"))
                    for index in range(OPENS // ROUNDS):
                        session_id = users.create(f"open-{size}-{version}-{round_}-{index}")
                        started = time.perf_counter()
                        prompt = users.open(session_id).freeze_system_prompt()
                        opened[version].append((time.perf_counter() - started) * 1_000_000)
                        assert f"{size} entries indexed." in prompt, prompt[-300:]
            before, after = [], []
            for _ in range(COUNTS):
                started = time.perf_counter()
                connection.execute(BEFORE, (TENANT, LABEL), prepare=True).fetchone()
                before.append((time.perf_counter() - started) * 1_000_000)
                started = time.perf_counter()
                connection.execute(NOW, (TENANT, LABEL), prepare=True).fetchone()
                after.append((time.perf_counter() - started) * 1_000_000)
            was, now_read = statistics.median(before), statistics.median(after)
            print(
                f"  {size:>9}  {statistics.median(opened['0035']):>10.1f}  {statistics.median(opened['0036']):>10.1f}"
                f"  {was:>15.1f}  {now_read:>16.1f}  {was / now_read:6.1f}x"
            )
        connection.execute(shipped)
        print("one transaction creating N sessions: its commit, where the count moves (ms, median of 3 rounds)")
        for size in BULK:
            commits: dict[str, list[float]] = {"0034": [], "0036": []}
            for round_ in range(ROUNDS):
                for version in ("0034", "0036"):
                    state = "DISABLE" if version == "0034" else "ENABLE"
                    connection.execute(f"ALTER TABLE threadloom_sessions {state} TRIGGER threadloom_sessions_noted")
                    with connection.transaction():
                        connection.execute(
                            "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, "
                            "activity_seq) SELECT %s || g, %s, 'bulk', now(), now(), g "
                            "FROM generate_series(1, CAST(%s AS integer)) AS g",
                            (f"bulk-{version}-{size}-{round_}-", f"bulk-{version}-{size}-{round_}", size),
                        )
                        started = time.perf_counter()
                        connection.execute("SET CONSTRAINTS ALL IMMEDIATE")  # what the commit runs first
                        commits[version].append((time.perf_counter() - started) * 1_000)
            connection.execute("ALTER TABLE threadloom_sessions ENABLE TRIGGER threadloom_sessions_noted")
            was, now_taken = statistics.median(commits["0034"]), statistics.median(commits["0036"])
            print(f"  {size:>6} sessions: once per row (0034) {was:8.1f}  once per transaction (0036) {now_taken:6.1f}")
        connection.close()
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
