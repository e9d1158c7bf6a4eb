"""Bytes on disk per message on PostgreSQL: Threadloom's table, each index and TOAST, against the JSON itself.

20,000 messages of about 430 bytes of JSON (English words drawn from a fixed vocabulary with a
fixed seed, so the text neither repeats nor compresses unusually well), with UUID session and
message ids as the HTTP API makes them, 100 sessions of 200 messages, stored by Threadloom
(``Session.append_messages`` in chains of 50), by the raw baseline of ``bench/baselines.py`` (the
message JSON, its parent and ``to_tsvector('english', text)`` in a GIN index, under a primary key)
and by langchain-postgres's history (no search). After ``VACUUM (ANALYZE)`` (the GIN pending list
is then merged into the index), each relation's main fork is measured with ``pg_relation_size``.
Target: Threadloom's bytes per message <= 2.5x the message's JSON, or the feature that needs more.

Run: .venv/bin/python bench/postgres_bytes.py   (PostgreSQL from TEST_DATABASE_URL; a scratch database)
"""

from __future__ import annotations

import json
import os
import random
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from threadloom import PostgresStore, Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import LANGCHAIN_TABLE, LangchainPeer, create_raw_schema, text_of
from scratch import scratch_postgres

SESSIONS = 100
PER_SESSION = 200
CHAIN = 50
TARGET = 2.5
WORDS = [
    "agent",
    "tool",
    "call",
    "result",
    "memory",
    "prompt",
    "context",
    "summary",
    "user",
    "assistant",
    "model",
    "token",
    "request",
    "reply",
    "session",
    "history",
    "branch",
    "search",
    "index",
    "table",
    "query",
    "answer",
    "question",
    "note",
    "plan",
    "step",
    "task",
    "error",
    "retry",
    "file",
    "path",
    "line",
    "code",
    "test",
    "build",
    "deploy",
    "server",
    "client",
    "network",
    "storage",
    "cache",
    "queue",
    "event",
    "status",
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "that",
    "it",
    "for",
    "on",
    "with",
    "as",
    "was",
    "at",
    "by",
    "this",
    "be",
    "from",
    "or",
    "have",
    "an",
    "are",
    "not",
    "but",
    "which",
    "careful",
    "quick",
    "brown",
    "lazy",
    "fox",
    "dog",
    "jumps",
    "over",
    "while",
    "takes",
    "notes",
    "reads",
    "writes",
    "checks",
    "finds",
    "returns",
]


def message(random_words: random.Random, message_id: str) -> dict[str, Any]:
    """A user or assistant message of about 430 bytes of JSON."""
    words: list[str] = []
    size = 0
    while size < 330:
        word = random_words.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    role = "user" if random_words.random() < 0.5 else "assistant"
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": " ".join(words).capitalize() + "."}]}


SIZES = """
SELECT c.relname, c.relkind, pg_relation_size(c.oid)
FROM pg_class c
WHERE c.relname = %(table)s
   OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %(table)s::regclass)
   OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE relname = %(table)s)
   OR c.oid IN (SELECT indexrelid FROM pg_index
                WHERE indrelid = (SELECT reltoastrelid FROM pg_class WHERE relname = %(table)s))
ORDER BY c.relkind DESC, c.relname
"""


def report(connection: psycopg.Connection[Any], label: str, table: str, count: int, json_bytes: float) -> float:
    """Print each relation's bytes per message; return the total per message."""
    rows = connection.execute(SIZES, {"table": table}).fetchall()
    total = sum(size for _, _, size in rows)
    print(f"\n{label}: {total / count:,.0f} B per message = {total / count / json_bytes:.2f}x the JSON")
    for name, kind, size in rows:
        what = {"r": "table", "i": "index", "t": "TOAST"}.get(kind, kind)
        print(f"  {what:<6} {name:<44} {size / count:8,.0f} B")
    return float(total / count)


#: What each of Threadloom's indexes on messages buys (docs/postgres.md, Layout).
FEATURES = {
    "threadloom_messages_pkey": "the primary key (session, id): an append by id is idempotent, lookups by id",
    "threadloom_messages_by_seq": "(session, seq): pages in order, jump pointers, the leaf rescan",
    "threadloom_messages_children": "(hash of session and parent, seq): branches (children, subtrees, leaf rescan)",
    "threadloom_messages_search": "search: the GIN index of (session, vector)",
}


def line(what: str, size: float, json_bytes: float) -> None:
    print(f"  {what:<72} {size:6,.0f} B  {size / json_bytes:.2f}x")


def by_feature(connection: psycopg.Connection[Any], count: int, json_bytes: float) -> None:
    """The bytes per message each feature costs, measured: the table is copied without the search vector."""
    columns = "session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at, jump"
    connection.execute(f"CREATE TABLE bench_rows_without_search AS SELECT {columns} FROM threadloom_messages")
    connection.execute("VACUUM (ANALYZE) bench_rows_without_search")
    rows = connection.execute(SIZES, {"table": "threadloom_messages"}).fetchall()
    sizes = {name: size for name, _, size in rows}
    without = connection.execute("SELECT pg_relation_size('bench_rows_without_search')").fetchone()
    assert without is not None
    table, bare = sizes["threadloom_messages"] / count, without[0] / count
    print("\nThreadloom, by what each part buys (B per message; x the JSON):")
    line("the rows without the search vector (JSON, ids, counters, time)", bare, json_bytes)
    vector = table - bare
    line("search: the vector in the row (fewer rows fit a page)", vector, json_bytes)
    total_without = {"search": table - vector, "search and branches": table - vector}
    for index, what in FEATURES.items():
        size = sizes.get(index, 0) / count
        line(what, size, json_bytes)
        if index != "threadloom_messages_search":
            total_without["search"] += size
            if index != "threadloom_messages_children":
                total_without["search and branches"] += size
    for left_out, total in total_without.items():
        line(f"all but {left_out}", total, json_bytes)


def main() -> int:
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    random_words = random.Random(25)
    sessions = [[message(random_words, str(uuid.uuid4())) for _ in range(PER_SESSION)] for _ in range(SESSIONS)]
    count = SESSIONS * PER_SESSION
    json_bytes = sum(len(json.dumps(item, separators=(",", ":")).encode()) for chain in sessions for item in chain)
    json_bytes /= count
    with scratch_postgres(url) as scratch:
        database = scratch.rsplit("/", 1)[1]
        with psycopg.connect(scratch, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = off')  # loading only
        store = PostgresStore(scratch)
        create_raw_schema(scratch)
        peer = LangchainPeer(scratch)
        with psycopg.connect(scratch, autocommit=True) as raw:  # the raw baseline's own connection
            for chain in sessions:
                session_id = str(uuid.uuid4())
                session = Session.create(store).for_session(session_id)
                for start in range(0, PER_SESSION, CHAIN):
                    session.append_messages(chain[start : start + CHAIN])
                parent = None
                with raw.transaction():
                    for item in chain:
                        raw.execute(
                            "INSERT INTO raw_messages (session_id, id, parent_id, content, search_vector) "
                            "VALUES (%s, %s, %s, %s, to_tsvector('english', %s))",
                            (session_id, item["id"], parent, json.dumps(item, separators=(",", ":")), text_of(item)),
                        )
                        parent = item["id"]
                peer.session(session_id).add_messages([LangchainPeer.message(item) for item in chain])
            raw.execute("VACUUM (ANALYZE)")
            print(f"{count:,} messages in {SESSIONS} sessions; the JSON of one: {json_bytes:.0f} B on average")
            ours = report(raw, "Threadloom (threadloom_messages)", "threadloom_messages", count, json_bytes)
            report(raw, "raw baseline (raw_messages)", "raw_messages", count, json_bytes)
            report(raw, "langchain-postgres (no search)", LANGCHAIN_TABLE, count, json_bytes)
            columns = raw.execute(
                "SELECT avg(pg_column_size(content)), avg(pg_column_size(search_vector)), "
                "avg(pg_column_size(m.*)) FROM threadloom_messages m"
            ).fetchone()
            assert columns is not None
            print(
                f"\nThreadloom row, average: content {columns[0]:.0f} B, search_vector {columns[1]:.0f} B, "
                f"whole row {columns[2]:.0f} B (plus a 4 B line pointer and the page's free space)"
            )
            by_feature(raw, count, json_bytes)
        peer.close()
        store.close()
    ratio = ours / json_bytes
    met = ratio <= TARGET
    print(f"\nThreadloom / JSON: {ratio:.2f}x (target <= {TARGET}) {'ok' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
