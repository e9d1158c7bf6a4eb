"""The deployed shape under load: Lambda-like workers direct and through PgBouncer, then a crash mid-run.

Starts a private PostgreSQL 15 (initdb + pg_ctl on a free port in a temporary folder, never the shared
server) and PgBouncer in transaction pooling mode in front of it, as the stand-in for RDS Proxy. Each
worker is a separate process with one connection that calls the API handler one request at a time
(tests/load/worker.py: 60% appends, 20% history pages, 10% search, 10% opening a keyed conversation
shared with the other workers of its tenant). Runs alternate direct and pooled, ``--repeats`` times
(short runs, many of them: on a shared machine other work comes and goes, and two runs close in time
see the same load), then ``--crash-runs`` pooled runs (and ``--direct-crash-runs`` direct ones, to
compare) crash PostgreSQL (``pg_ctl -m immediate stop``) and restart it.

Targets (issue 25): pooled throughput >= 0.8x direct (median of the repeats, spread shown); after a
crash every worker succeeds again within 2 s of PostgreSQL accepting connections; 0 acknowledged
appends lost, 0 forked sessions, 0 untyped errors, no state left on a pooled server connection.
The exit status is 1 when a correctness check fails (lost, forks, untyped, state), never for speed.

Run: make load-test   (or .venv/bin/python bench/pooler_load.py --workers 24 --seconds 12 --repeats 5)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "functions" / "api")]

from tests.load.run import LoadPlan, LoadResult, format_summary, run_load  # noqa: E402
from tests.load.servers import DEFAULT_POOL_SIZE, missing_programs, private_servers  # noqa: E402

THROUGHPUT_TARGET = 0.8
RECOVERY_TARGET_S = 2.0


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--crash-runs", type=int, default=3)
    parser.add_argument("--direct-crash-runs", type=int, default=1, help="crash runs without the pooler, to compare")
    parser.add_argument(
        "--pool-size", type=int, default=DEFAULT_POOL_SIZE, help="PgBouncer's server connections (the proxy's cap)"
    )
    arguments = parser.parse_args()
    missing = missing_programs()
    if missing:
        print(f"pooler_load: needs {', '.join(missing)}", file=sys.stderr)
        return 2

    results: list[LoadResult] = []
    ratios: list[float] = []
    request_ratios: list[float] = []
    recoveries: list[float] = []
    with (
        private_servers(pool_size=arguments.pool_size) as (postgres, bouncer),
        tempfile.TemporaryDirectory() as scratch,
    ):
        pool = f"PgBouncer (transaction pooling, pool {bouncer.pool_size}) on port {bouncer.port}"
        print(f"private PostgreSQL on port {postgres.port}, {pool}")
        for repeat in range(arguments.repeats):
            pair: dict[bool, LoadResult] = {}
            order = (False, True) if repeat % 2 == 0 else (True, False)  # interleaved: neither side always goes first
            for pooled in order:
                label = f"{'pooled' if pooled else 'direct'}-{repeat}"
                plan = LoadPlan(label, workers=arguments.workers, seconds=arguments.seconds, through_pooler=pooled)
                result = run_load(postgres, bouncer, plan, Path(scratch) / label)
                print(format_summary(result.summary()), flush=True)
                results.append(result)
                pair[pooled] = result
            ratios.append(pair[True].appends_per_second() / pair[False].appends_per_second())
            request_ratios.append(pair[True].requests_per_second() / pair[False].requests_per_second())
        crashes = [True] * arguments.crash_runs + [False] * arguments.direct_crash_runs
        for repeat, pooled in enumerate(crashes):
            plan = LoadPlan(
                f"crash-{'pooled' if pooled else 'direct'}-{repeat}",
                workers=arguments.workers,
                seconds=arguments.seconds,
                through_pooler=pooled,
                crash_at=arguments.seconds / 3,
                down_for=1.0,
            )
            result = run_load(postgres, bouncer, plan, Path(scratch) / plan.label)
            print(format_summary(result.summary()), flush=True)
            results.append(result)
            if pooled:
                recovered = result.recovery_seconds()
                recoveries.append(max((s for s in recovered.values() if s is not None), default=float("inf")))

    steady = [r for r in results if r.plan.crash_at is None]
    direct_rates = [r.appends_per_second() for r in steady if not r.plan.through_pooler]
    pooled_rates = [r.appends_per_second() for r in steady if r.plan.through_pooler]
    print()
    print(f"appends/s direct: {spread(direct_rates)}; through PgBouncer: {spread(pooled_rates)}")
    print(f"pooled / direct appends/s per repeat: {', '.join(f'{r:.2f}' for r in ratios)}; {spread(ratios)}", end="")
    print(f" (target >= {THROUGHPUT_TARGET}: {'met' if statistics.median(ratios) >= THROUGHPUT_TARGET else 'MISSED'})")
    listed = ", ".join(f"{r:.2f}" for r in request_ratios)
    print(f"pooled / direct requests/s per repeat: {listed}; {spread(request_ratios)}")
    if recoveries:
        print(
            f"through PgBouncer, recovery after PostgreSQL accepts connections, slowest worker per crash run (s): "
            f"{', '.join(f'{r:.3f}' for r in recoveries)} "
            f"(target <= {RECOVERY_TARGET_S}: {'met' if max(recoveries) <= RECOVERY_TARGET_S else 'MISSED'})"
        )
    problems = {
        "lost": sum(len(r.lost()) for r in results),
        "forked sessions": sum(len(r.forks()) for r in results),
        "untyped errors": sum(len(r.untyped_errors()) for r in results),
        "server connections with state left": sum(len(r.dirty_server_connections()) for r in results),
        "pinning statements": sum(len(r.pinning_statements) for r in results),
        "workers never recovered": sum(1 for r in results for s in r.recovery_seconds().values() if s is None),
    }
    print("across all runs: " + ", ".join(f"{name} {count}" for name, count in problems.items()))
    return 1 if any(problems.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
