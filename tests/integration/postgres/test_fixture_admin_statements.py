"""The fixtures' administrative statements survive a busy server (issue 30).

Under load a teardown's ``DROP DATABASE ... WITH (FORCE)`` hit pg8000's 10 s timeout and failed the
run. :func:`run_admin` runs them with a long timeout and runs the sequence again on a new connection
when a timeout strikes. Here another session holds a lock for longer than a deliberately short
timeout: with retries the statement gets through once the lock goes; the control, one attempt,
fails exactly as the run did.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pg8000.native
import pytest

from tests.support.postgres import ADMIN_TIMEOUT_SECONDS, admin_connection, run_admin, worker_database

pytestmark = pytest.mark.postgres
HOLD_SECONDS = 1.5


@pytest.fixture
def database(request: pytest.FixtureRequest) -> Iterator[str]:
    admin_connection().close()  # skip, or fail in CI, when there is no server
    name = worker_database(request)
    run_admin(["DROP TABLE IF EXISTS admin_probe", "CREATE TABLE admin_probe (value integer)"], database=name)
    yield name
    run_admin(["DROP TABLE IF EXISTS admin_probe"], database=name)


def hold_lock(database: str) -> threading.Timer:
    """Lock the probe table in another session; a timer releases it after HOLD_SECONDS."""
    holder = admin_connection(database)
    holder.run("BEGIN")
    holder.run("LOCK TABLE admin_probe IN ACCESS EXCLUSIVE MODE")

    def release() -> None:
        holder.run("ROLLBACK")
        holder.close()

    timer = threading.Timer(HOLD_SECONDS, release)
    timer.start()
    return timer


def test_a_statement_that_times_out_is_run_again_and_gets_through(database: str) -> None:
    timer = hold_lock(database)
    started = time.perf_counter()
    run_admin(["TRUNCATE admin_probe"], database=database, timeout=0.5, attempts=10)
    assert time.perf_counter() - started >= HOLD_SECONDS - 0.1  # it did wait for the lock, through timeouts
    timer.join()


def test_control_one_short_attempt_fails_as_the_busy_run_did(database: str) -> None:
    timer = hold_lock(database)
    with pytest.raises((pg8000.native.InterfaceError, TimeoutError)):
        run_admin(["TRUNCATE admin_probe"], database=database, timeout=0.5, attempts=1)
    timer.join()


def test_the_default_timeout_is_longer_than_the_one_that_failed() -> None:
    assert ADMIN_TIMEOUT_SECONDS > 10
