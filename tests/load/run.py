"""Runs the load test: Lambda-like workers against the private servers, an optional crash, then the checks.

The figures (appends/s, latency percentiles, errors by kind, recovery) come from the workers' own
records; the proofs come from the database afterwards, read directly (never through the pooler):
every acknowledged message id is stored in its session, every session's messages form one chain,
and no server connection the pooler hands out carries state a request left behind.

Over 400 lines because a run's figures and its proofs read the same records and must be read together.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.load.servers import PgBouncer, PrivatePostgres

ROOT = Path(__file__).resolve().parents[2]
#: 503s the API documents for a database that cannot serve now; a client retries them. Anything else is untyped.
TYPED_CODES = frozenset({"storage_unavailable", "storage_timeout", "session_busy"})
#: What nothing Threadloom sends may contain: it would leave state on a pooled server connection.
PINNING_STATEMENT = re.compile(
    r"^\s*(SET|RESET|PREPARE|EXECUTE(?!\s+(FUNCTION|PROCEDURE)\b)|DEALLOCATE|DISCARD|LISTEN|UNLISTEN|LOAD|DECLARE)\b",
    re.IGNORECASE,
)
#: PgBouncer itself sends these, to give a server connection the client's startup parameters.
POOLER_STATEMENT = re.compile(
    r"^SET (application_name|client_encoding|DateStyle|TimeZone|standard_conforming_strings)=", re.IGNORECASE
)
SESSION_LOCK_OR_TEMP = re.compile(
    r"\b(pg_advisory_lock|pg_advisory_lock_shared|pg_try_advisory_lock)\s*\(|\bCREATE\s+(GLOBAL\s+|LOCAL\s+)?(TEMP|TEMPORARY)\b",
    re.IGNORECASE,
)
#: Session state a server connection could carry from one client's transaction to another's.
STATE_SQL = (
    "SELECT pg_backend_pid(), current_setting('lock_timeout'), current_setting('statement_timeout'), "
    "current_setting('synchronous_commit'), current_setting('search_path'), "
    "(SELECT count(*) FROM pg_prepared_statements), (SELECT count(*) FROM pg_cursors), "
    "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()), "
    "(SELECT count(*) FROM pg_namespace WHERE oid = pg_my_temp_schema())"
)


@dataclass(frozen=True)
class LoadPlan:
    """What one run does; the CI test uses a small plan, ``bench/pooler_load.py`` the full one."""

    label: str
    workers: int = 24
    seconds: float = 20.0
    through_pooler: bool = True
    tenants: int = 4
    keys_per_tenant: int = 6
    seed_messages: int = 100
    #: Seconds into the run when PostgreSQL is crashed (None: no crash), and how long it stays down.
    crash_at: float | None = None
    down_for: float = 0.5
    #: A crash run goes on at least this long after PostgreSQL accepts connections again.
    after_recovery: float = 4.0


@dataclass
class LoadResult:
    plan: LoadPlan
    records: list[list[Any]]
    seeded: list[list[Any]]
    started: float
    ended: float
    crashed_at: float | None = None
    accepting_at: float | None = None
    stored: dict[str, dict[str, str | None]] = field(default_factory=dict)
    heads: dict[str, str | None] = field(default_factory=dict)
    server_states: list[list[Any]] = field(default_factory=list)
    default_state: list[Any] = field(default_factory=list)
    pinning_statements: list[str] = field(default_factory=list)
    statements_seen: int = 0
    #: PgBouncer's totals over the run: transactions, queries, and µs clients waited for a server connection.
    pooler: dict[str, int] = field(default_factory=dict)

    # -------------------------------------------------------------- figures

    def successes(self, op: str | None = None) -> list[list[Any]]:
        return [r for r in self.records if r[3] in (200, 201) and (op is None or r[0] == op)]

    def appends_per_second(self) -> float:
        return len(self.successes("append")) / (self.ended - self.started)

    def requests_per_second(self) -> float:
        return len(self.successes()) / (self.ended - self.started)

    def latency_ms(self, op: str) -> tuple[float, float]:
        """p50 and p99 of the successful requests of ``op``, in milliseconds."""
        seconds = sorted(r[2] for r in self.successes(op))
        if not seconds:
            return (float("nan"), float("nan"))
        quantiles = statistics.quantiles(seconds, n=100, method="inclusive") if len(seconds) > 1 else seconds * 99
        return (statistics.median(seconds) * 1000, quantiles[98] * 1000)

    def errors_by_kind(self) -> Counter[tuple[str, int, str]]:
        return Counter((r[0], r[3], r[4]) for r in self.records if r[3] not in (200, 201))

    def error_examples(self) -> dict[str, str]:
        """The first message of each kind of error, to read what a client was told."""
        examples: dict[str, str] = {}
        for r in self.records:
            if r[3] not in (200, 201):
                examples.setdefault(f"{r[0]} {r[3]} {r[4]}", r[7])
        return examples

    def untyped_errors(self) -> list[list[Any]]:
        """Failures that are not a documented, retryable 503: a 500, a 4xx, an exception out of the handler."""
        return [r for r in self.records if r[3] not in (200, 201) and not (r[3] == 503 and r[4] in TYPED_CODES)]

    # --------------------------------------------------------------- proofs

    def acknowledged(self) -> set[tuple[str, str]]:
        return {(r[5], r[6]) for r in [*self.seeded, *self.successes("append")]}

    def lost(self) -> list[tuple[str, str]]:
        """Acknowledged (session, message id) pairs the database does not hold."""
        return sorted(pair for pair in self.acknowledged() if pair[1] not in self.stored.get(pair[0], {}))

    def forks(self) -> list[str]:
        """Sessions whose messages are not one chain from a root to the head's leaf."""
        broken = []
        for session_id, parents in self.stored.items():
            children = Counter(parents.values())
            roots = children.get(None, 0)
            walked, message_id = 0, self.heads.get(session_id)
            while message_id is not None and walked <= len(parents):
                walked += 1
                message_id = parents.get(message_id)
            if roots != 1 or any(count > 1 for count in children.values()) or walked != len(parents):
                broken.append(session_id)
        return broken

    def dirty_server_connections(self) -> list[list[Any]]:
        """Server connections whose state differs from a fresh connection's (settings, statements, locks)."""
        return [state for state in self.server_states if state[1:] != self.default_state[1:]]

    def recovery_seconds(self) -> dict[int, float | None]:
        """Per worker: from PostgreSQL accepting connections to the end of the worker's first success after."""
        if self.accepting_at is None:
            return {}
        first: dict[int, float | None] = {}
        for record in self.records:
            worker = record[8]
            first.setdefault(worker, None)
            finished = record[1] + record[2]
            if record[3] in (200, 201) and finished >= self.accepting_at:
                best = first[worker]
                first[worker] = (
                    finished - self.accepting_at if best is None else min(best, finished - self.accepting_at)
                )
        return first

    def summary(self) -> dict[str, Any]:
        recovery = self.recovery_seconds()
        recovered = [value for value in recovery.values() if value is not None]
        return {
            "label": self.plan.label,
            "through_pooler": self.plan.through_pooler,
            "workers": self.plan.workers,
            "seconds": round(self.ended - self.started, 2),
            "appends_per_second": round(self.appends_per_second(), 1),
            "requests_per_second": round(self.requests_per_second(), 1),
            "latency_ms": {
                op: [round(v, 2) for v in self.latency_ms(op)] for op in ("append", "history", "search", "open")
            },
            "errors": {
                f"{op} {status} {code}": count for (op, status, code), count in sorted(self.errors_by_kind().items())
            },
            "untyped_errors": len(self.untyped_errors()),
            "error_examples": self.error_examples(),
            "acknowledged": len(self.acknowledged()),
            "appends_already_stored": sum(1 for r in self.successes("append") if r[3] == 200),
            "lost": len(self.lost()),
            "sessions": len(self.stored),
            "forked_sessions": len(self.forks()),
            "server_connections_checked": len(self.server_states),
            "dirty_server_connections": len(self.dirty_server_connections()),
            "statements_checked": self.statements_seen,
            "pinning_statements": len(self.pinning_statements),
            "pooler_transactions": self.pooler.get("xact_count"),
            "pooler_wait_us_per_transaction": round(self.pooler["wait_time"] / max(1, self.pooler["xact_count"]), 1)
            if self.pooler
            else None,
            "workers_recovered": f"{len(recovered)}/{len(recovery)}" if recovery else None,
            "recovery_s_max": round(max(recovered), 3) if recovered else None,
            "recovery_s_median": round(statistics.median(recovered), 3) if recovered else None,
            "down_s": round(self.accepting_at - self.crashed_at, 2) if self.accepting_at and self.crashed_at else None,
        }


# ------------------------------------------------------------------ running


def _environment(url: str) -> dict[str, str]:
    """What a deployed API function is given (docs/deploy.md), pointed at ``url``; requests never migrate."""
    return {
        "THREADLOOM_BACKEND": "postgres",
        "THREADLOOM_DATABASE_URL": url,
        "THREADLOOM_DB_MIGRATE": "false",
        "THREADLOOM_COMPACTION_MODE": "inline",
        "POWERTOOLS_SERVICE_NAME": "threadloom-load",
        "POWERTOOLS_METRICS_NAMESPACE": "ThreadloomLoad",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_LOG_LEVEL": "CRITICAL",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def _spawn(config: dict[str, Any], folder: Path, name: str) -> subprocess.Popen[str]:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    python_path = os.pathsep.join([str(ROOT), str(ROOT / "functions" / "api")])
    with (folder / f"{name}.log").open("w", encoding="utf-8") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "tests.load.worker", str(path)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": python_path},
        )


def _failed(process: subprocess.Popen[str], folder: Path, name: str) -> RuntimeError:
    log = (folder / f"{name}.log").read_text(encoding="utf-8")[-3000:]
    return RuntimeError(f"load worker {name} exited with {process.returncode}:\n{log}")


def run_load(postgres: PrivatePostgres, bouncer: PgBouncer, plan: LoadPlan, folder: Path) -> LoadResult:
    """One run of ``plan``; ``folder`` keeps the workers' configs, logs and records."""
    started_processes: list[subprocess.Popen[str]] = []
    try:
        return _run(postgres, bouncer, plan, folder, started_processes)
    finally:
        for process in started_processes:  # still running only after a failure: stop the ones started here
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


def _run(
    postgres: PrivatePostgres,
    bouncer: PgBouncer,
    plan: LoadPlan,
    folder: Path,
    started_processes: list[subprocess.Popen[str]],
) -> LoadResult:
    folder.mkdir(parents=True, exist_ok=True)
    url = bouncer.url() if plan.through_pooler else postgres.url()
    tenants = [f"tenant-{number}" for number in range(plan.tenants)]
    keys = [f"{plan.label}-conversation-{number}" for number in range(plan.keys_per_tenant)]
    end_file = folder / "end"
    base = {"environment": _environment(url), "keys": keys, "end": str(end_file)}

    seeders = {
        f"seed-{tenant}": _spawn(
            {
                **base,
                "index": -1,
                "tenant": tenant,
                "seed": 7,
                "seed_messages": plan.seed_messages,
                "result": str(folder / f"seed-{tenant}.result"),
                "status": "",
            },
            folder,
            f"seed-{tenant}",
        )
        for tenant in tenants
    }
    started_processes.extend(seeders.values())
    seeded: list[list[Any]] = []
    for name, process in seeders.items():
        process.communicate(timeout=300)
        if process.returncode != 0:
            raise _failed(process, folder, name)
        seeded.extend(json.loads((folder / f"{name}.result").read_text(encoding="utf-8")))

    workers = {}
    for index in range(plan.workers):
        name = f"worker-{index}"
        (folder / f"{name}.status").unlink(missing_ok=True)
        config = {
            **base,
            "index": index,
            "tenant": tenants[index % len(tenants)],
            "seed": 1000 + index,
            "result": str(folder / f"{name}.result"),
            "status": str(folder / f"{name}.status"),
        }
        workers[name] = _spawn(config, folder, name)
        started_processes.append(workers[name])
    deadline = time.monotonic() + 300
    for name, process in workers.items():
        while not (folder / f"{name}.status").exists():
            if process.poll() is not None:
                raise _failed(process, folder, name)
            if time.monotonic() > deadline:
                raise RuntimeError(f"load worker {name} did not get ready")
            time.sleep(0.05)

    _reset_statement_statistics(postgres)
    pooler_before = bouncer.totals() if plan.through_pooler else {}
    started = time.time()
    ended = started + plan.seconds
    # A crash run has no end until the database is back: the workers would stop before it otherwise.
    _write_end(end_file, ended if plan.crash_at is None else float("inf"))
    for process in workers.values():
        assert process.stdin is not None
        process.stdin.write("start\n")
        process.stdin.flush()
    result = LoadResult(plan, [], seeded, started, ended)
    if plan.crash_at is not None:
        time.sleep(max(0.0, started + plan.crash_at - time.time()))
        postgres.crash()
        result.crashed_at = time.time()
        time.sleep(plan.down_for)
        postgres.start(wait=False)
        result.accepting_at = postgres.wait_until_accepting()
        ended = max(ended, result.accepting_at + plan.after_recovery)  # a slow recovery must not end it first
        _write_end(end_file, ended)
    for index, (name, process) in enumerate(workers.items()):
        process.communicate(timeout=plan.seconds + 120)
        if process.returncode != 0:
            raise _failed(process, folder, name)
        records = json.loads((folder / f"{name}.result").read_text(encoding="utf-8"))
        result.records.extend([*record, index] for record in records)
    result.ended = max([ended, *(r[1] + r[2] for r in result.records)])
    if plan.through_pooler:
        result.pooler = {name: value - pooler_before[name] for name, value in bouncer.totals().items()}
    _read_statements(postgres, result)
    if plan.through_pooler:
        _read_server_states(postgres, bouncer, result)
    _read_sessions(postgres, result, keys_label=plan.label)
    return result


def _write_end(path: Path, end: float) -> None:
    """Replace the end file in one step, so a worker never reads half of it."""
    scratch = path.with_suffix(".next")
    scratch.write_text(repr(end), encoding="utf-8")
    scratch.replace(path)


def _reset_statement_statistics(postgres: PrivatePostgres) -> None:
    connection = postgres.connect()
    try:
        connection.run("SELECT pg_stat_statements_reset()")
    finally:
        connection.close()


def _read_statements(postgres: PrivatePostgres, result: LoadResult) -> None:
    """Every statement the server ran during the run (pg_stat_statements; after a crash, since the restart).

    The view replaces constants by ``$n``, so whether a ``set_config`` was transaction-local cannot be
    read here: :func:`_read_server_states` shows it instead (a session-wide one would still be set).
    """
    connection = postgres.connect()
    try:
        rows = connection.run("SELECT query FROM pg_stat_statements")
    finally:
        connection.close()
    result.statements_seen = len(rows)
    result.pinning_statements = [
        query
        for (query,) in rows
        if (PINNING_STATEMENT.search(query) or SESSION_LOCK_OR_TEMP.search(query))
        and not POOLER_STATEMENT.search(query)
    ]


def _read_server_states(postgres: PrivatePostgres, bouncer: PgBouncer, result: LoadResult) -> None:
    """The state of every server connection the pooler holds, each read through the pooler.

    As many clients as the pool has server connections each hold a transaction open at once, so
    each is handed its own idle one: together they cover every connection the pool has.
    """
    import pg8000.native  # type: ignore[import-untyped]

    fresh = postgres.connect()
    try:
        result.default_state = list(fresh.run(STATE_SQL)[0])
    finally:
        fresh.close()
    clients = [
        pg8000.native.Connection(
            user="postgres", host="127.0.0.1", port=bouncer.port, database="threadloom", timeout=30
        )
        for _ in range(max(1, sum(1 for row in bouncer.show("SERVERS") if row["database"] == "threadloom")))
    ]
    try:
        for client in clients:
            client.run("START TRANSACTION")
            result.server_states.append(list(client.run(STATE_SQL)[0]))
        for client in clients:
            client.run("COMMIT")
    finally:
        for client in clients:
            client.close()


def _read_sessions(postgres: PrivatePostgres, result: LoadResult, *, keys_label: str) -> None:
    """Each session's messages (id -> parent id) and head leaf, for the sessions of this run."""
    connection = postgres.connect()
    try:
        sessions = connection.run(
            "SELECT s.id, h.leaf_id FROM threadloom_sessions s "
            "LEFT JOIN threadloom_session_heads h ON h.session_id = s.id WHERE s.name LIKE :prefix",
            prefix=f"{keys_label}-conversation-%",
        )
        ids = [session_id for session_id, _ in sessions]
        rows = connection.run(
            "SELECT session_id, id, parent_id FROM threadloom_messages WHERE session_id = ANY(CAST(:ids AS text[]))",
            ids=ids,
        )
    finally:
        connection.close()
    result.heads = dict(sessions)
    stored: dict[str, dict[str, str | None]] = defaultdict(dict)
    for session_id in ids:
        stored[session_id] = {}
    for session_id, message_id, parent_id in rows:
        stored[session_id][message_id] = parent_id
    result.stored = dict(stored)


def format_summary(summary: dict[str, Any]) -> str:
    """A run's figures as a few readable lines."""
    lines = [
        f"{summary['label']}: {summary['workers']} workers, "
        f"{'through PgBouncer (transaction pooling)' if summary['through_pooler'] else 'direct'}, "
        f"{summary['seconds']} s",
        f"  appends/s {summary['appends_per_second']}, requests/s {summary['requests_per_second']}",
        "  p50/p99 ms: " + ", ".join(f"{op} {values[0]}/{values[1]}" for op, values in summary["latency_ms"].items()),
        f"  errors by kind: {summary['errors'] or 'none'}; untyped {summary['untyped_errors']}",
        *(f"    e.g. {kind}: {message}" for kind, message in summary["error_examples"].items()),
        f"  acknowledged {summary['acknowledged']} (of which re-sent appends answered 200, already stored: "
        f"{summary['appends_already_stored']}), lost {summary['lost']}; sessions {summary['sessions']}, "
        f"forked {summary['forked_sessions']}",
    ]
    if summary["through_pooler"]:
        lines.append(
            f"  server connections checked {summary['server_connections_checked']}, with state left behind "
            f"{summary['dirty_server_connections']}; statements checked {summary['statements_checked']}, "
            f"pinning {summary['pinning_statements']}"
        )
        lines.append(
            f"  pooler: {summary['pooler_transactions']} transactions, clients waited for a server connection "
            f"{summary['pooler_wait_us_per_transaction']} µs per transaction"
        )
    if summary["workers_recovered"] is not None:
        lines.append(
            f"  crash: down {summary['down_s']} s; workers recovered {summary['workers_recovered']}, "
            f"after accepting: median {summary['recovery_s_median']} s, max {summary['recovery_s_max']} s"
        )
    return "\n".join(lines)
