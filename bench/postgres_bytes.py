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
        peer.close()
        store.close()
    ratio = ours / json_bytes
    met = ratio <= TARGET
    print(f"\nThreadloom / JSON: {ratio:.2f}x (target <= {TARGET}) {'ok' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
