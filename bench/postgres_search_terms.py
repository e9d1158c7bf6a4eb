"""What storing a message's search terms instead of its tsvector would save on PostgreSQL, and cost a search.

The stored tsvector is the largest thing in a message row after the JSON. The alternative measured here stores
the terms joined by spaces (``search_text``) and has the GIN index build the vector with
``to_tsvector('simple', search_text)``, an IMMUTABLE expression that gives exactly the stored vector when every
term is a ``[0-9a-z]`` word the parser reads as one token (each row is checked; a row that does not round-trip
keeps its vector as a literal). Search results stay the same, but ``ts_rank`` (and a phrase's recheck) must
rebuild the vector of every candidate. Two scratch databases get the same 20,000 messages of about 60 words
(the vocabulary of ``bench/postgres_bytes.py``), every one holding "lighthouse keeper", in one session:
one as shipped, one then converted to the alternative (``VARIANT`` below, then ``VACUUM FULL``). The bench
prints each one's bytes per message (table and each index), then runs Threadloom's session search statement
(limit 20) on both, interleaved, for a term every message holds, a phrase every message holds and a term one
message in 1,000 holds: 3 runs of 30 calls each, the p50 of each run, their median and the ratio's range.

Run: .venv/bin/python bench/postgres_search_terms.py   (PostgreSQL from TEST_DATABASE_URL; scratch databases)
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from threadloom import PostgresStore, Session
from threadloom.storage.postgres.sql import PostgresSql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from postgres_bytes import SIZES, WORDS
from scratch import scratch_postgres

MESSAGES = 20_000
CHAIN = 500
RUNS = 3
CALLS = 30
QUERIES = {
    "a term in every message": "lighthouse",
    "a phrase in every message": '"lighthouse keeper"',
    "a term in one message in 1,000": "rareword",
}
VECTOR = "bench_message_vector(m.search_text)"
VARIANT = f"""
CREATE FUNCTION bench_message_vector(p_search TEXT) RETURNS TSVECTOR LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN starts_with(p_search, '''') THEN CAST(p_search AS tsvector)
                ELSE to_tsvector('pg_catalog.simple', COALESCE(p_search, '')) END
$$;
ALTER TABLE threadloom_messages ADD COLUMN search_text TEXT;
DROP INDEX threadloom_messages_search;
UPDATE threadloom_messages m SET search_vector = NULL, search_text = (
    SELECT CASE WHEN to_tsvector('pg_catalog.simple', t.terms) = m.search_vector THEN t.terms
                ELSE CAST(m.search_vector AS text) END
    FROM (SELECT COALESCE(string_agg(u.lexeme, ' ' ORDER BY p.position), '') AS terms
          FROM unnest(m.search_vector) AS u(lexeme, positions, weights)
          CROSS JOIN LATERAL unnest(u.positions) AS p(position)) t)
WHERE m.search_vector IS NOT NULL;
ALTER TABLE threadloom_messages DROP COLUMN search_vector;
CREATE INDEX threadloom_messages_search ON threadloom_messages USING gin (session_id, {VECTOR.replace("m.", "")});
"""


def texts() -> list[str]:
    words = random.Random(25)
    result = []
    for index in range(MESSAGES):
        body = " ".join(words.choice(WORDS) for _ in range(58))
        rare = " rareword" if index % 1000 == 0 else ""
        result.append(f"The lighthouse keeper said {body}{rare}.")
    return result


def load(url: str, all_texts: list[str]) -> None:
    store = PostgresStore(url)
    session = Session.create(store).for_session("big")
    messages = [
        {"id": f"m{index}", "role": "user", "parts": [{"type": "text", "text": text}]}
        for index, text in enumerate(all_texts)
    ]
    for start in range(0, len(messages), CHAIN):
        session.append_messages(messages[start : start + CHAIN])
    store.close()


def bytes_per_message(connection: psycopg.Connection[Any], label: str) -> None:
    rows = connection.execute(SIZES, {"table": "threadloom_messages"}).fetchall()
    total = sum(size for _, _, size in rows)
    parts = ", ".join(
        f"{name.removeprefix('threadloom_messages_')} {size / MESSAGES:,.0f}" for name, _, size in rows if size
    )
    print(f"  {label:<28} {total / MESSAGES:,.0f} B per message ({parts})")


def p50_us(connection: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> float:
    samples = []
    for _ in range(CALLS):
        started = time.perf_counter()
        connection.execute(sql, params, prepare=False).fetchall()
        samples.append((time.perf_counter() - started) * 1e6)
    return statistics.median(samples)


def psycopg_style(sql: str) -> str:
    return sql.replace(":sid", "%(sid)s").replace(":match", "%(match)s").replace(":limit", "%(limit)s")


def main() -> int:
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    all_texts = texts()
    with scratch_postgres(url, "_stored") as stored_url, scratch_postgres(url, "_terms") as terms_url:
        load(stored_url, all_texts)
        load(terms_url, all_texts)
        sides = {
            "stored tsvector (shipped)": (stored_url, psycopg_style(PostgresSql.search_session)),
            "terms, vector built": (
                terms_url,
                psycopg_style(PostgresSql.search_session.replace("m.search_vector", VECTOR)),
            ),
        }
        connections = {name: psycopg.connect(side_url, autocommit=True) for name, (side_url, _) in sides.items()}
        try:
            connections["terms, vector built"].execute(VARIANT)
            for connection in connections.values():  # both compacted alike, indexes rebuilt
                connection.execute("VACUUM FULL threadloom_messages")
            print(f"{MESSAGES:,} messages in one session, after VACUUM FULL on both:")
            for name, connection in connections.items():
                connection.execute("VACUUM (ANALYZE)")
                bytes_per_message(connection, name)
            literals = (
                connections["terms, vector built"]
                .execute("SELECT count(*) FROM threadloom_messages WHERE starts_with(search_text, '''')")
                .fetchone()
            )
            print(f"  rows that kept a literal: {literals[0] if literals else '?'}")
            print(f"\nThreadloom's search_session statement, limit 20, p50 of {CALLS} calls a run, {RUNS} runs:")
            for label, query in QUERIES.items():
                params = {"sid": "big", "match": PostgresSql.match_param(query), "limit": 20}
                runs: dict[str, list[float]] = {name: [] for name in sides}
                for _ in range(RUNS):
                    for name, (_, sql) in sides.items():
                        runs[name].append(p50_us(connections[name], sql, params))
                hits = {
                    name: [row[0] for row in connections[name].execute(sql, params, prepare=False).fetchall()]
                    for name, (_, sql) in sides.items()
                }
                first, second = list(sides)
                assert hits[first] == hits[second], "the two forms returned different hits"
                print(f"\n{label} ({query!r}), {len(hits[first])} hits returned, the same on both")
                for name, values in runs.items():
                    median = statistics.median(values)
                    print(f"  {name:<28} {median:>10,.0f} us  (runs: {', '.join(f'{v:,.0f}' for v in values)})")
                ratios = sorted(b / a for a, b in zip(runs[first], runs[second], strict=True))
                print(f"  built / stored: {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})")
        finally:
            for connection in connections.values():
                connection.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
