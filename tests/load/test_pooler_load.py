"""The deployed shape under load, short mode: Lambda-like workers through PgBouncer (transaction pooling).

A private PostgreSQL (started here, never the shared server) behind PgBouncer; workers are separate
processes calling the API handler, one request at a time, one connection each. One run is steady,
one crashes PostgreSQL (``pg_ctl -m immediate stop``) and restarts it mid-run. Both must end with
every acknowledged append stored, every session one chain, no error other than a typed 503, and no
state left on any pooled server connection; after the crash every worker must succeed again.
``make load-test`` (``bench/pooler_load.py``) runs the full mode and prints the figures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from threadloom import PostgresStore, SessionManager
from threadloom.errors import SessionBusyError

from tests.load.run import LoadPlan, LoadResult, format_summary, run_load
from tests.load.servers import PgBouncer, PrivatePostgres, missing_programs, private_servers
from tests.support.messages import text_message

pytestmark = [pytest.mark.load, pytest.mark.timeout(240)]

WORKERS = 8
#: Fewer server connections than workers: every worker's transactions move between connections.
POOL_SIZE = 4
#: The issue's target, from PostgreSQL accepting connections to a worker's next success.
RECOVERY_TARGET_S = 2.0


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[PrivatePostgres, PgBouncer]]:
    missing = missing_programs()
    if missing:
        message = f"the load test needs {', '.join(missing)}"
        if os.environ.get("THREADLOOM_REQUIRE_POSTGRES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with private_servers(pool_size=POOL_SIZE) as pair:
        yield pair


def check_integrity(result: LoadResult) -> None:
    summary = result.summary()
    print(format_summary(summary))
    assert summary["acknowledged"] > 0 and result.successes("append"), summary
    assert result.lost() == [], "acknowledged appends missing from the database"
    assert result.forks() == [], "sessions whose messages are not one chain"
    assert result.untyped_errors() == [], "errors other than a documented, retryable 503"
    assert result.pinning_statements == [], "statements that leave session state on a pooled connection"
    assert result.server_states and result.dirty_server_connections() == [], (
        result.default_state,
        result.server_states,
    )


def test_steady_load_through_the_pooler_keeps_every_append_and_every_chain(
    servers: tuple[PrivatePostgres, PgBouncer], tmp_path: Path
) -> None:
    postgres, bouncer = servers
    result = run_load(postgres, bouncer, LoadPlan("steady", workers=WORKERS, seconds=5, seed_messages=60), tmp_path)
    check_integrity(result)
    assert {op for op, *_ in result.successes()} == {"append", "history", "search", "open"}
    lost_connections = [r for r in result.records if r[4] == "storage_unavailable"]
    assert lost_connections == [], "no connection is lost while the database is up"


def test_a_crash_mid_run_loses_nothing_and_every_worker_recovers(
    servers: tuple[PrivatePostgres, PgBouncer], tmp_path: Path
) -> None:
    postgres, bouncer = servers
    plan = LoadPlan("crash", workers=WORKERS, seconds=9, seed_messages=60, crash_at=2.5, down_for=0.5)
    result = run_load(postgres, bouncer, plan, tmp_path)
    check_integrity(result)
    recovery = result.recovery_seconds()
    assert len(recovery) == WORKERS
    assert all(seconds is not None for seconds in recovery.values()), f"workers that never succeeded again: {recovery}"
    assert max(s for s in recovery.values() if s is not None) <= RECOVERY_TARGET_S, recovery


def test_transaction_local_timeouts_still_apply_through_the_pooler(servers: tuple[PrivatePostgres, PgBouncer]) -> None:
    """The lock timeout is set inside the transaction it governs, so the pooler cannot separate the two.

    A ``SessionBusyError`` is PostgreSQL's own lock_not_available (55P03): the server's lock timeout
    fired, not the client socket's 8 s. Checked for the append (the function sets it) and for a read
    (the pipelined timeouts statement goes ahead of it, closed by the same Sync).
    """
    postgres, bouncer = servers
    store = PostgresStore(bouncer.url(), auto_migrate=False)
    holder = postgres.connect()
    try:
        manager = SessionManager.create(store, namespace="tenant-timeouts")
        session_id = manager.create_session("held").id
        manager.append(session_id, text_message("m1", "before the lock"))
        holder.run("START TRANSACTION")
        holder.run("SELECT 1 FROM threadloom_session_heads WHERE session_id = :sid FOR UPDATE", sid=session_id)
        with pytest.raises(SessionBusyError):
            manager.append(session_id, text_message("m2", "while another writer holds the session"))
        holder.run("LOCK TABLE threadloom_messages IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(SessionBusyError):
            manager.get_history(session_id)
        holder.run("ROLLBACK")
        manager.append(session_id, text_message("m2", "while another writer holds the session"))
        assert [message["id"] for message in manager.get_history(session_id)] == ["m1", "m2"]
    finally:
        holder.close()
        store.close()
