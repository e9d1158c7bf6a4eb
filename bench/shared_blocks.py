"""Issue 26's two costs of shared blocks, measured against the code before block scopes (commit c98cb3a).

1. Appends and session opens do not get slower for profiles without shared blocks: the same workload (a profile
   with one session-scoped ``memory`` block and a stored frozen prompt) runs on the code before scopes and on this
   tree, each in its own process over its own database, interleaved round by round (the order alternates, so a
   busier moment of the machine lands on both sides). It prints each round's medians and the ratio this/before.
2. Opening a session with subject blocks costs at most one more round trip: on this tree, the same open with the
   ``memory`` block ``scope: subject``; database calls are counted (each is one round trip on PostgreSQL) and timed.

An *open* is what a new Lambda does for a request: a fresh ``SessionManager``, ``get_session`` and
``freeze_system_prompt`` (which reads the stored prompt and the blocks). An *append* is one ``manager.append``.

Run: .venv/bin/python bench/shared_blocks.py [--rounds 5] [--postgres postgresql://postgres@127.0.0.1:5432/test]
(``--postgres ''``: SQLite only). It needs the git history (``git archive`` of the baseline's library).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "c98cb3a"
"""The newest code without block scopes: the tip of issue 25's PostgreSQL work (its cheaper append), merged as
b033087 after scopes (56bf058) had landed. Its parent line has everything before scopes."""
APPENDS = int(os.environ.get("BENCH_APPENDS", "200"))
OPENS = int(os.environ.get("BENCH_OPENS", "100"))

WORKER = r"""
import json, statistics, sys, time, uuid
from threadloom import SqliteStore
from threadloom.core.manager import SessionManager

backend, target, with_subject = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
appends, opens = int(sys.argv[4]), int(sys.argv[5])
if backend == "sqlite":
    store = SqliteStore(target)
else:
    from threadloom.storage.postgres.store import PostgresStore
    store = PostgresStore(target)
namespace = f"bench-{uuid.uuid4()}"
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "

def manager(subject):
    built = SessionManager(store, namespace=namespace)
    built = built.with_context("memory", scope="subject") if subject else built.with_context("memory")
    return built.with_cached_prompt()

def message(number):
    role = "user" if number % 2 == 0 else "assistant"
    return {"id": f"m{number}", "role": role, "parts": [{"type": "text", "text": TEXT * 3}]}

def count_calls():
    database, calls = store.database, [0]
    for name in ("query_once", "read_together", "read_when_missing", "execute_once", "write", "read"):
        original = getattr(database, name, None)
        if original is None:
            continue
        def counting(*args, _original=original, **kwargs):
            calls[0] += 1
            return _original(*args, **kwargs)
        setattr(database, name, counting)
    return lambda: calls[0]

def run(subject):
    writer = manager(subject)
    create = (lambda name: writer.create_session(name, subject_id="alice")) if subject else writer.create_session
    session_id = create("appends").id
    timings = []
    for number in range(appends):
        started = time.perf_counter()
        writer.append(session_id, message(number))
        timings.append(time.perf_counter() - started)
    append_ms = statistics.median(timings) * 1000
    ids = [create(f"open {n}").id for n in range(opens)]
    for session_id in ids:
        writer.append(session_id, message(0))
        writer.get_session(session_id).freeze_system_prompt()  # stored: later opens read it
    counted, timings, calls = count_calls(), [], []
    for session_id in ids:
        before = counted()
        started = time.perf_counter()
        manager(subject).get_session(session_id).freeze_system_prompt()
        timings.append(time.perf_counter() - started)
        calls.append(counted() - before)
    return append_ms, statistics.median(timings) * 1000, statistics.median(calls)

result = {}
result["append_ms"], result["open_ms"], result["open_calls"] = run(False)
if with_subject:
    _, result["open_subject_ms"], result["open_subject_calls"] = run(True)
print("RESULT " + json.dumps(result))
"""


def baseline_library(folder: Path) -> Path:
    """The baseline's ``layers/threadloom`` extracted into ``folder``; the path to put on ``sys.path``."""
    archive = folder / "baseline.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "-o", str(archive), BASELINE, "layers/threadloom/threadloom"], check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "baseline", filter="data")
    return folder / "baseline" / "layers" / "threadloom"


def measure(library: Path, backend: str, target: str, *, subject: bool) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": str(library), "POWERTOOLS_LOG_LEVEL": "WARNING"}
    arguments = [backend, target, "1" if subject else "0", str(APPENDS), str(OPENS)]
    finished = subprocess.run(
        [sys.executable, "-c", WORKER, *arguments],
        cwd=str(library),
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if finished.returncode != 0:
        raise SystemExit(f"{library}: the worker failed\n{finished.stderr}")
    (line,) = [line for line in finished.stdout.splitlines() if line.startswith("RESULT ")]
    return dict(json.loads(line.removeprefix("RESULT ")))


def admin(url: str, statements: list[str]) -> None:
    import pg8000.native

    parts = urlsplit(url)
    connection = pg8000.native.Connection(
        user=parts.username or "postgres",
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        database=parts.path.lstrip("/") or "test",
        password=parts.password,
    )
    try:
        for statement in statements:
            connection.run(statement)
    finally:
        connection.close()


def other_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def compare(backend: str, before: Path, after: Path, targets: dict[str, str], rounds: int) -> None:
    label = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[backend]
    print(f"\n{label}: {APPENDS} appends and {OPENS} opens a side, medians in ms (ratio = this tree / before)")
    print("round  append before  append now  ratio   open before  open now  ratio   open subject  calls +")
    ratios: dict[str, list[float]] = {"append": [], "open": [], "subject": []}
    extra_calls: list[float] = []
    for number in range(1, rounds + 1):
        sides = [("before", before), ("after", after)]
        if number % 2 == 0:
            sides.reverse()
        results = {side: measure(path, backend, targets[side], subject=side == "after") for side, path in sides}
        old, new = results["before"], results["after"]
        ratios["append"].append(new["append_ms"] / old["append_ms"])
        ratios["open"].append(new["open_ms"] / old["open_ms"])
        ratios["subject"].append(new["open_subject_ms"] / new["open_ms"])
        extra_calls.append(new["open_subject_calls"] - new["open_calls"])
        print(
            f"{number:>5}  {old['append_ms']:>13.3f}  {new['append_ms']:>10.3f}  {ratios['append'][-1]:>5.2f}"
            f"   {old['open_ms']:>11.3f}  {new['open_ms']:>8.3f}  {ratios['open'][-1]:>5.2f}"
            f"   {new['open_subject_ms']:>12.3f}  {extra_calls[-1]:>+7.0f}"
        )
    print(
        f"median ratios: append {statistics.median(ratios['append']):.2f}, open {statistics.median(ratios['open']):.2f}"
        f" (profile without shared blocks, this tree / before); open with a subject block / without:"
        f" {statistics.median(ratios['subject']):.2f}, {max(extra_calls):+.0f} database call(s)"
        f" ({new['open_calls']:.0f} without, {new['open_subject_calls']:.0f} with)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    arguments = parser.parse_args()
    after = ROOT / "layers" / "threadloom"
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        before = baseline_library(folder)
        sqlite = {side: str(folder / f"{side}.db") for side in ("before", "after")}
        compare("sqlite", before, after, sqlite, arguments.rounds)
        if arguments.postgres:
            tag = uuid.uuid4().hex[:8]
            names = {side: f"threadloom_bench_{side}_{tag}" for side in ("before", "after")}
            admin(arguments.postgres, [f'CREATE DATABASE "{name}"' for name in names.values()])
            try:
                urls = {side: other_database(arguments.postgres, name) for side, name in names.items()}
                compare("postgres", before, after, urls, arguments.rounds)
            finally:
                admin(arguments.postgres, [f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)' for name in names.values()])


if __name__ == "__main__":
    main()
