"""SQLite search and append speed with one FTS5 index per namespace, against the shared index before it.

Issue 23: bm25 counted its statistics over one index every tenant shared, so the order of a
tenant's hits told whether another tenant wrote a word; migration 0024 gives every namespace its
own index. This prints, for the code of this checkout ("after") and of the commit before that
migration ("before", a ``git archive`` of it on ``PYTHONPATH``), run interleaved in fresh
processes:

- search p50: a namespace-wide search (``SessionManager.search``, 20 hits) and a session search
  for a word that 20,000 of the namespace's messages contain, while another namespace holds
  20,000 more messages with that word (the shared index made the first tenant's search walk
  both tenants' rows);
- append p50 (and mean, which carries the batch that indexes every 64th append): appends to a
  session of that namespace, the headline figure that must not regress.

Run: .venv/bin/python bench/search_tenants.py [--runs 3] [--baseline <git ref>]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MATCHING = 20_000
SEARCHES = 30
APPENDS = 2_000
REPO = Path(__file__).resolve().parent.parent
MIGRATION = "layers/threadloom/threadloom/storage/sqlite/migrations/0024_search_index_per_namespace.sql"


def message(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def measure() -> dict[str, float]:
    """One run in this process, with whatever ``threadloom`` the path gives: p50s in milliseconds."""
    from threadloom import Session, SessionManager, SqliteStore

    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(str(Path(folder) / "search.db"))
        mine, theirs = SessionManager.create(store, namespace="mine"), SessionManager.create(store, namespace="theirs")
        ids = {}
        for manager, name in ((mine, "mine"), (theirs, "theirs")):
            session_id = manager.create(name).id
            ids[name] = session_id
            for start in range(0, MATCHING, 1_000):
                batch = [
                    message(f"{name}-{index}", f"note {index} about the harbour and the {name} ledger {index % 97}")
                    for index in range(start, start + 1_000)
                ]
                manager.append_all(session_id, batch)
        assert len(mine.search("harbour", limit=20)) == 20  # indexes whatever still waits
        namespace_ms, session_ms = [], []
        session = mine.get_session(ids["mine"])
        for _ in range(SEARCHES):
            started = time.perf_counter()
            hits = mine.search("harbour", limit=20)
            namespace_ms.append(time.perf_counter() - started)
            started = time.perf_counter()
            session_hits = session.search("harbour", limit=20)
            session_ms.append(time.perf_counter() - started)
            assert len(hits) == len(session_hits) == 20
        appender = Session.create(store).for_session(mine.create("appends").id)
        append_ms = []
        for index in range(APPENDS):
            started = time.perf_counter()
            appender.append_message(message(f"a{index}", f"appended line {index} about the harbour"))
            append_ms.append(time.perf_counter() - started)
        store.close()
    return {
        "namespace_search_p50_ms": statistics.median(namespace_ms) * 1000,
        "session_search_p50_ms": statistics.median(session_ms) * 1000,
        "append_p50_ms": statistics.median(append_ms) * 1000,
        "append_mean_ms": statistics.fmean(append_ms) * 1000,  # with the batch every 64th append runs
    }


def baseline_commit(ref: str | None) -> str:
    """``ref``, or the parent of the commit that added migration 0024."""
    if ref:
        return ref
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", MIGRATION],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return f"{added[-1]}^" if added else "HEAD"


def run_once(library: Path) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": str(library)}
    answer = subprocess.run(
        [sys.executable, __file__, "--measure"], env=environment, check=True, capture_output=True, text=True
    )
    return json.loads(answer.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", help="git ref of the 'before' code (default: just before migration 0024)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.measure:
        print(json.dumps(measure()))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        before = Path(folder)
        ref = baseline_commit(arguments.baseline)
        archive = subprocess.run(
            ["git", "archive", ref, "layers/threadloom/threadloom"], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        libraries = {"before": before / "layers/threadloom", "after": REPO / "layers/threadloom"}
        results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for run in range(arguments.runs):
            for label in ("before", "after") if run % 2 == 0 else ("after", "before"):
                results[label].append(run_once(libraries[label]))
                print(f"run {run + 1} {label:>6}: {json.dumps(results[label][-1])}", flush=True)
    print(f"{MATCHING:,} matching messages in the namespace searched, {MATCHING:,} in another; before = {ref}")
    for key in ("namespace_search_p50_ms", "session_search_p50_ms", "append_p50_ms", "append_mean_ms"):
        figures = {label: statistics.median(run[key] for run in runs) for label, runs in results.items()}
        print(
            f"  {key:<24} before {figures['before']:8.3f}  after {figures['after']:8.3f}"
            f"  (median of {arguments.runs} runs; after/before {figures['after'] / figures['before']:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
