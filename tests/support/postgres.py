"""Access to a real PostgreSQL server for tests.

``TEST_DATABASE_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``) names
the server. Each pytest worker gets its own database so parallel workers never share
rows. When no server answers, the tests are skipped with the reason, unless
``THREADLOOM_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), where they fail instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse, urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    from threadloom.storage.postgres.store import PostgresStore

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
THREADLOOM_TABLES = (
    "threadloom_sessions",
    "threadloom_session_heads",
    "threadloom_messages",
    "threadloom_compactions",
    "threadloom_context_blocks",
    "threadloom_search_entries",
    "threadloom_loaded_skills",
    "threadloom_compaction_requests",
    "threadloom_shared_blocks",
    "threadloom_block_versions",
    "threadloom_reflection_marks",
    "threadloom_reflection_runs",
    "threadloom_reflection_proposals",
)
# Databases of this machine's runs share the prefix; the pid lets a later run drop a crashed run's leftovers.
_HOST_TAG = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
_DATABASE_PREFIX = f"threadloom_test_{_HOST_TAG}_"
_worker_database: str | None = None
# Administrative statements (DROP DATABASE ... WITH (FORCE), CREATE DATABASE, TRUNCATE) wait for other
# sessions and the disk: on a busy machine one took longer than pg8000's 10 s and failed a whole run.
ADMIN_TIMEOUT_SECONDS = 60.0
ADMIN_ATTEMPTS = 3
_unreachable: str | None = None


def database_url() -> str:
    return os.environ.get("TEST_DATABASE_URL", DEFAULT_URL)


def connect_kwargs(url: str | None = None, *, database: str | None = None) -> dict[str, object]:
    parsed = urlparse(url or database_url())
    kwargs: dict[str, object] = {
        "user": parsed.username or "postgres",
        "host": parsed.hostname or "127.0.0.1",
        "port": parsed.port or 5432,
        "database": database or (parsed.path.lstrip("/") or "test"),
    }
    if parsed.password:
        kwargs["password"] = parsed.password
    return kwargs


def unavailable(reason: str) -> None:
    """Skip, or fail when CI requires PostgreSQL."""
    message = f"PostgreSQL is not reachable ({reason}); set TEST_DATABASE_URL or start the server"
    if os.environ.get("THREADLOOM_REQUIRE_POSTGRES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def admin_connection(database: str | None = None, *, timeout: float = 10.0) -> Any:
    """A plain pg8000 connection to the server (skips or fails the test when there is none)."""
    import pg8000.native

    global _unreachable
    if _unreachable is not None:  # do not wait for a dead server's timeout once per test
        unavailable(_unreachable)
    try:
        return pg8000.native.Connection(**connect_kwargs(database=database), timeout=timeout)
    except Exception as error:
        if database is None:
            _unreachable = f"{database_url()}: {error}"
        unavailable(f"{database_url()}: {error}")
        raise  # unreachable: unavailable() always raises


def run_admin(
    statements: Sequence[str],
    *,
    database: str | None = None,
    timeout: float = ADMIN_TIMEOUT_SECONDS,
    attempts: int = ADMIN_ATTEMPTS,
) -> None:
    """Run administrative statements on their own connection with a long timeout, again on a new one if it runs out.

    The whole sequence is retried, so it must be safe to repeat (``DROP ... IF EXISTS`` before ``CREATE``,
    ``TRUNCATE``): a statement the client gave up on may still have finished on the server.
    """
    import pg8000.native

    for attempt in range(1, attempts + 1):
        admin = admin_connection(database, timeout=timeout)
        try:
            for statement in statements:
                admin.run(statement)
            return
        except (pg8000.native.InterfaceError, TimeoutError) as error:
            if attempt == attempts or not _timed_out(error):
                raise
        finally:
            with contextlib.suppress(Exception):  # a connection whose socket timed out cannot say goodbye
                admin.close()


def _timed_out(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is a socket timeout, the one failure a busy server explains."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def url_for(database: str) -> str:
    """TEST_DATABASE_URL pointing at another database of the same server."""
    parts = urlsplit(database_url())
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


def create_database(name: str) -> None:
    run_admin([f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"'])


def drop_database(name: str) -> None:
    import pg8000.native

    try:
        pg8000.native.Connection(**connect_kwargs(), timeout=10).close()
    except Exception:  # no server (any more): nothing to drop
        return
    run_admin([f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'])


def _drop_abandoned_databases() -> None:
    """Drop databases left by runs on this machine whose process is gone (a crash or a kill -9)."""
    admin = admin_connection(timeout=ADMIN_TIMEOUT_SECONDS)
    try:
        names = [
            row[0]
            for row in admin.run("SELECT datname FROM pg_database WHERE datname LIKE :p", p=_DATABASE_PREFIX + "%")
        ]
        for name in names:
            pid = name[len(_DATABASE_PREFIX) :].split("_", 1)[0]
            if pid.isdigit() and not _process_alive(int(pid)):
                admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_database(request: pytest.FixtureRequest) -> str:
    """This pytest worker's database: created and migrated once, dropped when the run ends."""
    global _worker_database
    if _worker_database is None:
        from threadloom.storage.postgres.store import PostgresStore

        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        name = f"{_DATABASE_PREFIX}{os.getpid()}_{worker}"
        _drop_abandoned_databases()
        create_database(name)
        request.config.add_cleanup(lambda: drop_database(name))
        store = PostgresStore(url_for(name))
        try:
            store.migrate()
        finally:
            store.close()
        _worker_database = name
    return _worker_database


def backend_pid(store: Any) -> int:
    """The server process behind a store's current connection."""
    return int(store.database.query_once("SELECT pg_backend_pid()")[0][0])


def terminate(admin: Any, pid: int) -> None:
    """Kill a backend as a failover or an RDS Proxy idle timeout would, and wait until it is gone."""
    admin.run("SELECT pg_terminate_backend(CAST(:pid AS integer), 5000)", pid=pid)


def truncate_all(database: str) -> None:
    run_admin([f"TRUNCATE {', '.join(THREADLOOM_TABLES)}"], database=database)


def postgres_store_factory(
    request: pytest.FixtureRequest, *, prepared_statements: bool = False
) -> Iterator[Callable[[], PostgresStore]]:
    """Yield a factory of PostgresStore objects over this worker's freshly emptied database.

    Each call opens a new store with its own connection over the same data, which is how
    tests stand in for another process or a restarted Lambda. Stores are closed afterwards.
    ``prepared_statements``: the stores name their function calls on the connection, as a
    deployment that connects without a pooler may ask.
    """
    try:
        from threadloom.storage.postgres.store import PostgresStore
    except ImportError as error:
        unavailable(f"PostgresStore cannot be imported: {error}")
    admin_connection().close()  # skip (or fail in CI) before creating anything
    name = worker_database(request)
    truncate_all(name)
    url = url_for(name) + ("?prepared_statements=on" if prepared_statements else "")
    opened: list[PostgresStore] = []

    def factory() -> PostgresStore:
        store = PostgresStore(url)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


def plan(admin: Any, sql: str, **params: Any) -> str:
    """``EXPLAIN`` of ``sql`` with sequential scans off: the tables of a test are tiny, so the planner
    would happily scan them, and the plan then shows which index a query is able to use."""
    admin.run("START TRANSACTION")
    try:
        admin.run("SET LOCAL enable_seqscan = off")  # test connection only, never sent by Threadloom
        rows = admin.run("EXPLAIN " + sql, **params)
    finally:
        admin.run("ROLLBACK")
    return "\n".join(row[0] for row in rows)
