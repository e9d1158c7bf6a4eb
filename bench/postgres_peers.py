"""Threadloom on PostgreSQL beside langchain-postgres and the raw baselines, as a store a user might switch from.

Sides (``bench/baselines.py``, printed at the start): Threadloom's ``Session`` on ``PostgresStore``
(one per session, as the library is used), by default (unnamed statements, as behind RDS Proxy) and
with ``prepared_statements=on`` (a direct connection, docs/postgres.md), langchain-postgres's
``PostgresChatMessageHistory`` as documented (psycopg then prepares its statements on the server
after 5 runs) and again with ``prepare_threshold=None`` (as it has to run behind a transaction
pooler), and the raw pg8000 and psycopg 3 clients with prepared statements. Two workloads, each run
``RUNS`` times with the sides interleaved, ratios quoted as the median of the runs and their range:

- append p50 to a session already holding 2,000 messages;
- 500 sessions x (10 appends, one at a time, then a read of the whole history): seconds per side,
  interleaved session by session.

Targets: Threadloom faster than langchain-postgres on both (ratio < 1), each compared with the peer
configured alike: Threadloom by default against langchain unprepared (neither names a statement, as a
transaction pooler needs), Threadloom with prepared_statements against langchain as documented (both
name their statements on a direct connection); with the server's durable commit (as deployed); the
same again with ``synchronous_commit = off`` for information (the disk
flush, the same for every side and noisy on a shared disk, left out). The raw clients are the floor.

Run: .venv/bin/python bench/postgres_peers.py   (PostgreSQL from TEST_DATABASE_URL; a scratch database)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from threadloom import PostgresStore, Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import DESCRIPTIONS, LangchainPeer, Pg8000Raw, PsycopgRaw, create_raw_schema
from scratch import scratch_postgres

RUNS = 3
SAMPLES = 300
HISTORY = 2_000
SESSIONS = 500
APPENDS = 10
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "
NAMES = ("threadloom", "threadloom prepared", "langchain", "langchain unprepared", "raw pg8000", "raw psycopg")
THREADLOOM = ("threadloom", "threadloom prepared")
#: (ours, theirs, a target?): each Threadloom side against the peer configured alike, then for information.
PAIRS = (
    ("threadloom", "langchain unprepared", True),
    ("threadloom prepared", "langchain", True),
    ("threadloom", "langchain", False),
    ("threadloom", "raw pg8000", False),
    ("threadloom", "raw psycopg", False),
    ("threadloom prepared", "raw pg8000", False),
    ("threadloom prepared", "raw psycopg", False),
)


def message(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": TEXT * 2}]}


class Sides:
    """One object per side that appends to and reads a session by key."""

    def __init__(self, url: str) -> None:
        self.store = PostgresStore(url)
        self.prepared_store = PostgresStore(url + "?prepared_statements=on")
        self.langchain = LangchainPeer(url)
        self.langchain_unprepared = LangchainPeer(url, prepare_threshold=None)
        self.raw = [Pg8000Raw(url), PsycopgRaw(url)]
        self.sessions: dict[tuple[str, str], Session] = {}
        self.histories: dict[tuple[str, str], Any] = {}
        self.leaves: dict[str, str | None] = {}

    def append(self, name: str, key: str, item: dict[str, Any]) -> None:
        if name in THREADLOOM:
            if (name, key) not in self.sessions:
                store = self.store if name == "threadloom" else self.prepared_store
                self.sessions[name, key] = Session.create(store).for_session(f"{name}-{key}")
            self.sessions[name, key].append_message(item)
        elif name in ("langchain", "langchain unprepared"):
            if (name, key) not in self.histories:
                peer = self.langchain if name == "langchain" else self.langchain_unprepared
                self.histories[name, key] = peer.session(f"{name}-{key}")
            self.histories[name, key].add_messages([LangchainPeer.message(item)])
        else:
            side = self.raw[0] if name == "raw pg8000" else self.raw[1]
            side.append(f"{name}-{key}", item, self.leaves.get(f"{name}-{key}"))
            self.leaves[f"{name}-{key}"] = item["id"]

    def read(self, name: str, key: str) -> int:
        if name in THREADLOOM:
            return len(self.sessions[name, key].get_history())
        if name in ("langchain", "langchain unprepared"):
            return len(self.histories[name, key].messages)
        side = self.raw[0] if name == "raw pg8000" else self.raw[1]
        leaf = self.leaves[f"{name}-{key}"]
        assert leaf is not None
        return len(side.history(f"{name}-{key}", leaf))

    def seed(self, key: str, count: int) -> None:
        """``count`` messages in each side's session ``key`` (not timed)."""
        items = [message(f"seed-{i}") for i in range(count)]
        for name, store in (("threadloom", self.store), ("threadloom prepared", self.prepared_store)):
            self.sessions[name, key] = Session.create(store).for_session(f"{name}-{key}")
            self.sessions[name, key].append_messages(items)
        for name, peer in (("langchain", self.langchain), ("langchain unprepared", self.langchain_unprepared)):
            self.histories[name, key] = peer.session(f"{name}-{key}")
            self.histories[name, key].add_messages([LangchainPeer.message(item) for item in items])
        for name in ("raw pg8000", "raw psycopg"):
            for item in items:
                self.append(name, key, item)

    def close(self) -> None:
        for side in self.raw:
            side.close()
        self.langchain.close()
        self.langchain_unprepared.close()
        self.store.close()
        self.prepared_store.close()


def timed(action: Any, *args: Any) -> float:
    started = time.perf_counter()
    action(*args)
    return time.perf_counter() - started


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):5.2f}x ({min(values):.2f}-{max(values):.2f})"


def compare(url: str, commit: str) -> bool:
    """Both workloads RUNS times with ``synchronous_commit`` = ``commit``; True if the targets hold."""
    database = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = {commit}')  # new connections take it
    sides = Sides(url)
    print(f"\nsynchronous_commit = {commit}; {RUNS} runs")
    appends: list[dict[str, float]] = []
    workloads: list[dict[str, float]] = []
    for run in range(RUNS):
        key = f"long-{commit}-{run}"
        sides.seed(key, HISTORY)
        samples: dict[str, list[float]] = {name: [] for name in NAMES}
        for index in range(SAMPLES):
            item = message(f"a{index}")
            for name in NAMES:
                samples[name].append(timed(sides.append, name, key, item) * 1_000_000)
        appends.append({name: statistics.median(values) for name, values in samples.items()})
        totals = dict.fromkeys(NAMES, 0.0)
        for session in range(SESSIONS):
            key = f"s{commit}-{run}-{session}"
            items = [message(f"m{index}") for index in range(APPENDS)]
            for name in NAMES:

                def work(name: str = name, key: str = key, items: list[dict[str, Any]] = items) -> None:
                    for item in items:
                        sides.append(name, key, item)
                    assert sides.read(name, key) == APPENDS

                totals[name] += timed(work)
        workloads.append(totals)
        print(
            f"  run {run + 1}: append p50 @{HISTORY:,} (µs) "
            + "  ".join(f"{name} {appends[-1][name]:7.1f}" for name in NAMES)
            + f"\n         {SESSIONS} sessions x {APPENDS} appends + reads (s) "
            + "  ".join(f"{name} {totals[name]:6.2f}" for name in NAMES)
        )
    sides.close()
    ok = True
    for label, figures in ((f"append p50 @{HISTORY:,}", appends), (f"{SESSIONS} x {APPENDS} + reads", workloads)):
        for ours, theirs, target in PAIRS:
            ratios = [run[ours] / run[theirs] for run in figures]
            verdict = ""
            if target:
                met = statistics.median(ratios) < 1.0
                ok &= met
                verdict = f"(target < 1) {'ok' if met else 'MISSED'}" if commit == "on" else "(for information)"
            print(f"  {label:<24} {ours:<19} / {theirs:<20} {spread(ratios)} {verdict}")
    return ok


def main() -> int:
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    for name, description in DESCRIPTIONS.items():
        print(f"  {name:<12} {description}")
    with scratch_postgres(url) as scratch:
        create_raw_schema(scratch)
        with psycopg.connect(scratch, autocommit=True) as admin:
            version = admin.execute("SHOW server_version").fetchone()
        print(f"PostgreSQL {version[0] if version else '?'}")
        ok = compare(scratch, "on")
        compare(scratch, "off")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
