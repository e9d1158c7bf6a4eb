"""How long PostgreSQL takes to refuse another tenant's read, against an id nobody holds.

A read of a session's data sends the tenant's check in the same round trip as the read
(``SessionManager.checked_session``). The check raises on a refusal (migration 0030), so the
server skips the read: a refused request must take as long for another tenant's large session
as for an unknown id, or its timing tells which ids are sessions and how large. This prints the
p50 of each refusal beside the owner's own read, for branch points and a session search over a
session of 20,000 messages that all contain the word searched for.

Run: .venv/bin/python bench/refused_reads.py [--messages 20000] [--runs 3]
(PostgreSQL from TEST_DATABASE_URL; a scratch database)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from threadloom import PostgresStore
from threadloom.api.runtime import Runtime, Settings
from threadloom.api.use_cases import history
from threadloom.errors import SessionNotFoundError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch import scratch_postgres

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.core.manager import SessionManager

REFUSALS = 200
OWN_READS = 20


def p50_us(call: Callable[[], Any], rounds: int) -> float:
    """The median time of ``call`` in µs; a refusal counts as the answer it is."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        with contextlib.suppress(SessionNotFoundError):
            call()
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    url = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    with scratch_postgres(url) as scratch, tempfile.TemporaryDirectory() as skills:
        runtime = Runtime(Settings(skills_dir=skills, compaction_mode="inline"), store=PostgresStore(scratch))
        owner, intruder = runtime.manager("owner"), runtime.manager("intruder")
        session_id = owner.create("large").id
        for start in range(0, options.messages, 1000):
            owner.append_all(
                session_id,
                [
                    {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": f"lighthouse number {i}"}]}
                    for i in range(start, min(start + 1000, options.messages))
                ],
            )
        reads: dict[str, Callable[[SessionManager, str], Any]] = {
            "branch points": history.branch_points,
            "session search": lambda manager, sid: history.search_session(
                manager, sid, "lighthouse", None, runtime.limits
            ),
        }
        print(f"p50 in µs, a session of {options.messages:,} messages; {options.runs} runs")
        print(f"{'read':<16} {'another tenant':>15} {'unknown id':>11} {'ratio':>6} {'owner':>9}")
        for name, read in reads.items():
            for _ in range(options.runs):
                foreign = p50_us(lambda: read(intruder, session_id), REFUSALS)  # noqa: B023
                unknown = p50_us(lambda: read(intruder, "no-such-session"), REFUSALS)  # noqa: B023
                own = p50_us(lambda: read(owner, session_id), OWN_READS)  # noqa: B023
                print(f"{name:<16} {foreign:>15.0f} {unknown:>11.0f} {foreign / unknown:>6.2f} {own:>9.0f}")


if __name__ == "__main__":
    main()
