"""Appends and reads as users configure a session, side by side with the raw drivers, in one run.

"Users' configuration" is the default deployment profile (soul, memory, skills and knowledge
blocks), the cached frozen prompt, the auto-compaction check (threshold 100,000) and an
event listener, built by the same Runtime the HTTP API uses, over PostgresStore or
SqliteStore. Raw baselines do the least a hand-written client would: one INSERT per message
(pg8000 ``Connection.run``; sqlite3 in its own transaction at the same durability) and one
recursive query for a history. Samples of both sides are interleaved so machine drift hits
both equally. Printed ratios and their targets:

- PostgreSQL append p50 / raw pg8000 INSERT                         <= 1.3x
- PostgreSQL open a session (cold, as a new request does) + 10 appends / 10 raw INSERTs <= 1.5x
  (and, for information, opening an existing session the first time in a process / one raw read by key)
- SQLite append p50 / raw sqlite3 (message row, FTS5 row and leaf in one transaction), WAL +
  synchronous=NORMAL and =FULL <= 1.3x
- every page of a 10,000-message history (200 per page) / one library read <= 2x

Threadloom indexes SQLite's full-text search in batches: an append marks its message, and every
64th append (``INDEX_EVERY``) and any search index what waits, many messages per FTS5 segment;
the raw baseline indexes each message in its own transaction. So the SQLite section also prints
the mean append (it includes the batches) and the first search after 63 appends (it indexes them).

Run: .venv/bin/python bench/users_config.py   (PostgreSQL from TEST_DATABASE_URL; a scratch database)
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pg8000.native
from threadloom import PostgresStore, Session, SqliteStore
from threadloom.api.runtime import Runtime, Settings
from threadloom.storage.postgres.connection import parse_database_url
from threadloom.storage.sqlite.search_index import INDEX_EVERY

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch import scratch_postgres

if TYPE_CHECKING:
    from collections.abc import Callable

SAMPLES = 400
OPEN_SAMPLES = 100
PAGING_SAMPLES = 9
SEARCH_SAMPLES = 15
SEARCHED = "lighthouse"  # in no message: the search itself costs little, what it indexes first shows
HISTORY = 10_000
PAGE = 200
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "
RAW_SCHEMA = (
    "CREATE TABLE raw_messages (session_id TEXT NOT NULL, id TEXT NOT NULL, parent_id TEXT, "
    "content TEXT NOT NULL, PRIMARY KEY (session_id, id))"
)
RAW_INSERT_PG = "INSERT INTO raw_messages (session_id, id, parent_id, content) VALUES (:sid, :id, :parent, :content)"
RAW_READ_PG = "SELECT content FROM raw_messages WHERE session_id = :sid AND id = :id"
RAW_INSERT_SQLITE = "INSERT INTO raw_messages (session_id, id, parent_id, content) VALUES (?, ?, ?, ?)"
# SQLite's raw baseline keeps what makes the store searchable and its leaf known, as Threadloom does:
# the message row, its full-text row and the session's leaf, in one transaction.
RAW_FTS_SQLITE = "CREATE VIRTUAL TABLE raw_fts USING fts5(text, tokenize = 'porter unicode61')"
RAW_HEAD_SQLITE = "CREATE TABLE raw_heads (session_id TEXT PRIMARY KEY, leaf_id TEXT)"
TENANT = "bench"


def message(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": TEXT * 2}]}


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1_000_000


class Users:
    """Sessions as the HTTP API builds them: the default profile over one store, plus a listener."""

    def __init__(self, store: Any) -> None:
        skills = tempfile.mkdtemp()
        self.runtime = Runtime(Settings(skills_dir=skills, compaction_mode="inline"), store=store)
        self.manager = self.runtime.manager(TENANT)
        self.events = 0

    def listener(self, event: dict[str, Any]) -> None:
        self.events += 1

    def open(self, session_id: str) -> Any:
        """What a request does first: a fresh session object and its frozen prompt."""
        session = self.manager.get_session(session_id).on_event(self.listener)
        session.freeze_system_prompt()
        return session

    def create(self, name: str) -> str:
        return str(self.manager.create(name).id)


def ratio_line(label: str, ours: float, raw: float, target: float, unit: str = "µs") -> bool:
    ratio = ours / raw
    met = ratio <= target
    verdict = "ok" if met else "MISSED"
    print(f"  {label:<52} {ours:10.1f} {raw:10.1f} {unit}  {ratio:5.2f}x  (target <= {target}) {verdict}")
    return met


def info_line(label: str, ours: float, raw: float, unit: str = "µs") -> None:
    print(f"  {label:<52} {ours:10.1f} {raw:10.1f} {unit}  {ours / raw:5.2f}x")


def postgres(url: str) -> bool:
    store = PostgresStore(url)
    users = Users(store)
    params = parse_database_url(url)
    raw = pg8000.native.Connection(
        user=params.user, host=params.host, port=params.port, database=params.database, password=params.password
    )
    raw.run(RAW_SCHEMA)
    print(f"\nPostgreSQL {raw.run('SHOW server_version')[0][0]} (median of {SAMPLES} interleaved samples)")
    print(f"  {'':<52} {'threadloom':>10} {'raw pg8000':>10}")
    session_id = users.create("append")
    session = users.open(session_id)
    ours, theirs = [], []
    leaf: str | None = None
    for index in range(SAMPLES):
        item = message(f"a{index}")
        ours.append(timed(lambda item=item: session.append_message(item)))
        content = json.dumps(item, separators=(",", ":"))

        def insert(item_id: str = item["id"], parent: str | None = leaf, body: str = content) -> None:
            raw.run(RAW_INSERT_PG, sid="raw-append", id=item_id, parent=parent, content=body)

        theirs.append(timed(insert))
        leaf = item["id"]
    ok = ratio_line("append p50", statistics.median(ours), statistics.median(theirs), 1.3)
    assert users.events >= SAMPLES

    opened, raw_ten, open_ids = [], [], []
    for sample in range(OPEN_SAMPLES):
        sid = users.create(f"open-{sample}")
        open_ids.append(sid)
        items = [message(f"o{sample}-{i}") for i in range(10)]

        def open_and_append(sid: str = sid, items: list[dict[str, Any]] = items) -> None:
            fresh = users.open(sid)
            for item in items:
                fresh.append_message(item)

        def raw_inserts(sample: int = sample, items: list[dict[str, Any]] = items) -> None:
            parent = None
            for item in items:
                raw.run(
                    RAW_INSERT_PG,
                    sid=f"raw-open-{sample}",
                    id=item["id"],
                    parent=parent,
                    content=json.dumps(item, separators=(",", ":")),
                )
                parent = item["id"]

        opened.append(timed(open_and_append))
        raw_ten.append(timed(raw_inserts))
    ok &= ratio_line("open a session + 10 appends", statistics.median(opened), statistics.median(raw_ten), 1.5)

    # An existing session opened for the first time in a process (a new execution environment): one
    # round trip that reads the stored prompt (and would read the blocks if none were stored), against
    # the raw driver reading one row by its primary key.
    reopened, raw_read = [], []
    for sample in range(OPEN_SAMPLES):
        elsewhere = Users(store)  # another process's runtime: no session cached

        def reopen(elsewhere: Users = elsewhere, sid: str = open_ids[sample]) -> None:
            elsewhere.manager.get_session(sid).freeze_system_prompt()

        reopened.append(timed(reopen))
        raw_read.append(timed(lambda sample=sample: raw.run(RAW_READ_PG, sid=f"raw-open-{sample}", id=f"o{sample}-0")))
    info_line(
        "open an existing session (first time in a process)", statistics.median(reopened), statistics.median(raw_read)
    )
    ok &= paging(users, "PostgreSQL")
    raw.close()
    store.close()
    return ok


def paging(users: Users, backend: str) -> bool:
    """Every page of a 10,000-message history through the API's use case vs one library read."""
    from threadloom.api.use_cases.history import history

    session_id = users.create("history")
    seed = Session.create(users.runtime.store).for_session(session_id)  # no auto-compaction while seeding
    for start in range(0, HISTORY, 1_000):
        seed.append_messages([message(f"h{i}") for i in range(start, start + 1_000)])
    one, pages = [], []
    for _ in range(PAGING_SAMPLES):
        one.append(timed(lambda: users.manager.get_history(session_id)))

        def all_pages() -> None:
            cursor: str | None = None
            count = 0
            while True:
                page = history(users.manager, session_id, users.runtime.limits, leaf_id=None, limit=PAGE, cursor=cursor)
                count += len(page.messages)
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert count == HISTORY, count

        pages.append(timed(all_pages))
    return ratio_line(
        f"all {HISTORY // PAGE} pages of {HISTORY:,} vs one read ({backend})",
        statistics.median(pages) / 1000,
        statistics.median(one) / 1000,
        2.0,
        unit="ms",
    )


def sqlite(folder: str, synchronous: str) -> bool:
    store = SqliteStore(str(Path(folder) / f"bench-{synchronous}.db"), synchronous=synchronous)  # type: ignore[arg-type]
    users = Users(store)
    raw = sqlite3.connect(str(Path(folder) / f"raw-{synchronous}.db"), isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute(f"PRAGMA synchronous={synchronous.upper()}")
    raw.execute(RAW_SCHEMA)
    raw.execute(RAW_FTS_SQLITE)
    raw.execute(RAW_HEAD_SQLITE)
    session = users.open(users.create("append"))
    ours, theirs = [], []
    leaf: str | None = None
    for index in range(SAMPLES):
        item = message(f"a{index}")
        ours.append(timed(lambda item=item: session.append_message(item)))
        content = json.dumps(item, separators=(",", ":"))

        def insert(item_id: str = item["id"], parent: str | None = leaf, body: str = content) -> None:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(RAW_INSERT_SQLITE, ("raw", item_id, parent, body))
            raw.execute("INSERT INTO raw_fts (text) VALUES (?)", (TEXT * 2,))
            raw.execute("INSERT OR REPLACE INTO raw_heads (session_id, leaf_id) VALUES ('raw', ?)", (item_id,))
            raw.execute("COMMIT")

        theirs.append(timed(insert))
        leaf = item["id"]
    ok = ratio_line(f"append p50, synchronous={synchronous}", statistics.median(ours), statistics.median(theirs), 1.3)
    info_line(f"append mean, synchronous={synchronous}", statistics.fmean(ours), statistics.fmean(theirs))
    first_search_after_backlog(store, session)
    if synchronous == "normal":
        ok &= paging(users, "SQLite")
    raw.close()
    store.close()
    return ok


def first_search_after_backlog(store: SqliteStore, session: Any) -> None:
    """The median first search after INDEX_EVERY - 1 appends (all waiting to be indexed), and the next one."""
    database = store.database
    first, again = [], []
    session.search(SEARCHED)  # nothing waits from here: the next INDEX_EVERY - 1 appends run no batch
    for sample in range(SEARCH_SAMPLES):
        for index in range(INDEX_EVERY - 1):
            session.append_message(message(f"backlog{sample}-{index}"))
        waiting = database.connection.execute("SELECT COUNT(*) FROM threadloom_message_fts_pending").fetchall()
        assert waiting[0][0] == INDEX_EVERY - 1, waiting
        first.append(timed(lambda: session.search(SEARCHED)))
        again.append(timed(lambda: session.search(SEARCHED)))
    print(
        f"  {f'first search after {INDEX_EVERY - 1} appends (p50)':<52} {statistics.median(first):10.1f} µs"
        f"  (the next search: {statistics.median(again):.1f} µs)"
    )


def main() -> int:
    ok = True
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    with scratch_postgres(url) as scratch:
        ok &= postgres(scratch)
    print(f"\nSQLite {sqlite3.sqlite_version}, WAL (median of {SAMPLES} interleaved samples)")
    print(f"  {'':<52} {'threadloom':>10} {'raw sqlite3':>10}")
    with tempfile.TemporaryDirectory() as folder:
        for synchronous in ("normal", "full"):
            ok &= sqlite(folder, synchronous)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
