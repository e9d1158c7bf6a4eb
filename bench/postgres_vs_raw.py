"""Threadloom on PostgreSQL against raw clients doing the least work that stores and reads the same tree.

Raw baselines (``bench/baselines.py``, printed at the start): pg8000 with each statement prepared
once (one round trip per call) and psycopg 3 the same way, into a table keyed by (session_id, id)
with parent_id, the message JSON and ``to_tsvector('english', text)`` in a GIN index (Threadloom
also makes every message searchable); an append is one INSERT (the client already knows the
parent), a history read is one recursive query from a known leaf, decoded into the same list of
dicts Threadloom returns. The "+ check" column is an append with auto-compaction armed.

Threadloom does more in its single statement (head-row lock, idempotency check, depth and token
estimate, leaf bookkeeping, two more indexes for paging and branches), so the targets are ratios
against raw pg8000: append <= 1.5x and get_history <= 1.5x at 1,000 and 10,000 messages, and
append time flat from 100 to 10,000 messages. Every side is interleaved so drift on the machine
affects all equally; the whole comparison runs ``RUNS`` times and each ratio is quoted as the median
of the runs and their range. The scratch database runs with ``synchronous_commit = off``: the disk
flush is the same for every side and, on a shared disk, varies by milliseconds from one commit to
the next, which would drown what the sides do differently (``bench/users_config.py`` shows both).

Run: .venv/bin/python bench/postgres_vs_raw.py   (uses TEST_DATABASE_URL, default
postgresql://postgres@127.0.0.1:5432/test; creates and drops a scratch database)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from threadloom import PostgresStore, Session
from threadloom.compaction import create_compact_function

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import DESCRIPTIONS, Pg8000Raw, PsycopgRaw, create_raw_schema, text_of
from scratch import scratch_postgres

RUNS = 3
SAMPLES = 200
READS = 7
APPEND_LENGTHS = (100, 1_000, 10_000)
HISTORY_LENGTHS = (1_000, 10_000)
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "
TARGET = 1.5
RAW_SEED = (
    "INSERT INTO raw_messages (session_id, id, parent_id, content, search_vector) "
    "SELECT %s, i, p, c, to_tsvector('english', t) FROM unnest(CAST(%s AS text[]), CAST(%s AS text[]), "
    "CAST(%s AS text[]), CAST(%s AS text[])) AS u(i, p, c, t)"
)


def message(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": TEXT * 2}]}


def seed(raw: PsycopgRaw, session_id: str, count: int) -> str:
    """``count`` messages in one chain for a raw side (not timed); returns the leaf."""
    items = [message(f"seed-{i}") for i in range(count)]
    ids = [item["id"] for item in items]
    parents: list[str | None] = [None, *ids[:-1]]
    contents = [json.dumps(item, separators=(",", ":")) for item in items]
    raw.connection.execute(RAW_SEED, (session_id, ids, parents, contents, [text_of(item) for item in items]))
    return ids[-1]


def timed(action: Any, *args: Any) -> float:
    started = time.perf_counter()
    action(*args)
    return (time.perf_counter() - started) * 1000


def main() -> int:
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    with scratch_postgres(url) as scratch:
        database = scratch.rsplit("/", 1)[1]
        with psycopg.connect(scratch, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = off')
        return run(scratch)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):5.2f}x ({min(values):.2f}-{max(values):.2f})"


def measure_appends(store: PostgresStore, sides: list[Any], length: int, run: int) -> dict[str, float]:
    """Median µs per side of one append to a session of ``length`` messages."""
    session_id, armed_id = f"append-{length}-{run}", f"armed-{length}-{run}"
    seeded = [message(f"seed-{i}") for i in range(length)]
    Session.create(store).for_session(session_id).append_messages(seeded)
    Session.create(store).for_session(armed_id).append_messages(seeded)
    leaves = {side.name: seed(sides[1], f"{side.name}-{length}-{run}", length) for side in sides}
    session = Session.create(store).for_session(session_id)  # a fresh load, as a new Lambda would do
    armed = (
        Session.create(store)
        .for_session(armed_id)
        .on_compaction(create_compact_function(lambda prompt: "summary"))
        .compact_after(10**12)
    )
    samples: dict[str, list[float]] = {"threadloom": [], "+ check": [], **{side.name: [] for side in sides}}
    for index in range(SAMPLES):
        item = message(f"new-{index}")
        samples["threadloom"].append(timed(session.append_message, item) * 1000)
        samples["+ check"].append(timed(armed.append_message, item) * 1000)
        for side in sides:
            key = f"{side.name}-{length}-{run}"
            samples[side.name].append(timed(side.append, key, item, leaves[side.name]) * 1000)
            leaves[side.name] = item["id"]
    return {name: statistics.median(values) for name, values in samples.items()}


def measure_history(store: PostgresStore, sides: list[Any], length: int) -> list[dict[str, float]]:
    """Per run, the median ms per side of reading a ``length``-message history."""
    session = Session.create(store).for_session(f"history-{length}")
    session.append_messages([message(f"m{i}") for i in range(length)])
    keys = {side.name: f"{side.name}-history-{length}" for side in sides}
    leaves = {side.name: seed(sides[1], keys[side.name], length) for side in sides}
    for side in sides:
        assert len(side.history(keys[side.name], leaves[side.name])) == length
    assert len(session.get_history()) == length
    runs = []
    for _ in range(RUNS):
        samples: dict[str, list[float]] = {"threadloom": [], **{side.name: [] for side in sides}}
        for _ in range(READS):
            samples["threadloom"].append(timed(session.get_history))
            for side in sides:
                samples[side.name].append(timed(side.history, keys[side.name], leaves[side.name]))
        runs.append({name: statistics.median(values) for name, values in samples.items()})
    return runs


def run(url: str) -> int:
    store = PostgresStore(url)
    store.migrate()
    create_raw_schema(url)
    sides = [Pg8000Raw(url), PsycopgRaw(url)]
    version = sides[0].connection.run("SHOW server_version")[0][0]
    print(f"PostgreSQL {version}, synchronous_commit = off, {RUNS} runs of {SAMPLES} interleaved appends per length")
    for name, description in DESCRIPTIONS.items():
        if name != "langchain":
            print(f"  {name:<12} {description}")
    ok = True
    appends = {length: [measure_appends(store, sides, length, run) for run in range(RUNS)] for length in APPEND_LENGTHS}
    print("\nappend p50 (µs, median of runs)   threadloom  + check  raw pg8000  raw psycopg   ratio to raw pg8000")
    for length, runs in appends.items():
        ratios = [figures["threadloom"] / figures["raw pg8000"] for figures in runs]
        ok &= statistics.median(ratios) <= TARGET
        medians = {name: statistics.median(figures[name] for figures in runs) for name in runs[0]}
        print(
            f"  history {length:>6,}               {medians['threadloom']:8.1f} {medians['+ check']:8.1f}"
            f" {medians['raw pg8000']:10.1f} {medians['raw psycopg']:11.1f}   {spread(ratios)} (target <= {TARGET})"
        )
    last, first = appends[APPEND_LENGTHS[-1]], appends[APPEND_LENGTHS[0]]
    flat = [a["threadloom"] / b["threadloom"] for a, b in zip(last, first, strict=True)]
    print(f"  threadloom append 10,000 / 100: {spread(flat)} (flat = 1.0)")

    print("\nget_history (ms, median of runs)  threadloom  raw pg8000  raw psycopg   ratio to raw pg8000")
    for length in HISTORY_LENGTHS:
        runs = measure_history(store, sides, length)
        ratios = [figures["threadloom"] / figures["raw pg8000"] for figures in runs]
        ok &= statistics.median(ratios) <= TARGET
        medians = {name: statistics.median(figures[name] for figures in runs) for name in runs[0]}
        print(
            f"  {length:>6,} messages               {medians['threadloom']:8.2f} {medians['raw pg8000']:11.2f}"
            f" {medians['raw psycopg']:12.2f}   {spread(ratios)} (target <= {TARGET})"
        )
    for side in sides:
        side.close()
    store.close()
    print("\nall targets met" if ok else "\nSOME TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
