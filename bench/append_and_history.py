"""Append and history speed on the embedded default (SQLite file), printed as figures and ratios.

Targets (issue #2): the median append at 10,000 messages is at most 1.3x the median at 100
(an append, its auto-compaction trigger check and the session load never scan the history);
get_history grows linearly; a path 20,000 deep is returned whole.

Run: .venv/bin/python bench/append_and_history.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from threadloom import Session, SqliteStore
from threadloom.compaction import create_compact_function

SAMPLES = 300
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "


def message(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": TEXT * 2}]}


def configured_session(store: SqliteStore, session_id: str) -> Session:
    """A realistic session: blocks, cached prompt and an armed (never firing) auto-compaction."""
    return (
        Session.create(store)
        .for_session(session_id)
        .with_context("memory", description="Learned facts", max_tokens=1100)
        .with_cached_prompt()
        .on_compaction(create_compact_function(lambda prompt: "summary"))
        .compact_after(10**12)
    )


def median_append_ms(store: SqliteStore, history_length: int) -> float:
    session_id = f"append-{history_length}"
    seed = configured_session(store, session_id)
    seed.append_messages([message(f"seed-{i}") for i in range(history_length)])
    session = configured_session(store, session_id)  # a fresh load, as a new Lambda would do
    session.freeze_system_prompt()
    timings = []
    for index in range(SAMPLES):
        started = time.perf_counter()
        session.append_message(message(f"new-{index}"))
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def history_ms(store: SqliteStore, length: int, repeats: int = 5) -> float:
    session = configured_session(store, f"history-{length}")
    session.append_messages([message(f"m{i}") for i in range(length)])
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        history = session.get_history()
        timings.append(time.perf_counter() - started)
        assert len(history) == length
    return statistics.median(timings) * 1000


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(str(Path(folder) / "bench.db"))
        appends = {length: median_append_ms(store, length) for length in (100, 1_000, 10_000)}
        print("append (median of", SAMPLES, "appends, SQLite file, auto-compaction check armed)")
        for length, value in appends.items():
            print(f"  history {length:>6,}: {value:.3f} ms")
        ratio = appends[10_000] / appends[100]
        print(f"  ratio 10,000 / 100: {ratio:.2f} (target <= 1.3)")

        histories = {length: history_ms(store, length) for length in (1_000, 10_000)}
        print("get_history (median of 5)")
        for length, value in histories.items():
            print(f"  {length:>6,} messages: {value:.1f} ms ({value / length * 1000:.1f} us per message)")
        print(f"  ratio 10,000 / 1,000: {histories[10_000] / histories[1_000]:.2f} (linear = 10)")

        deep = configured_session(store, "deep")
        deep.append_messages([message(f"d{i}") for i in range(20_000)])
        started = time.perf_counter()
        whole = deep.get_history()
        elapsed = (time.perf_counter() - started) * 1000
        print(f"path 20,000 deep: {len(whole):,} messages returned in {elapsed:.1f} ms")
        store.close()
        return 0 if len(whole) == 20_000 else 1


if __name__ == "__main__":
    sys.exit(main())
