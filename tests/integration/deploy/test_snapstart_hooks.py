"""SnapStart hooks against the real PostgreSQL server: no connection survives the snapshot, one is back after it."""

from __future__ import annotations

import sys
import types
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from threadloom.api import snapstart
from threadloom.api.runtime import Runtime, Settings, set_runtime

from tests.support.postgres import admin_connection, connect_kwargs, worker_database

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.postgres


def backends(application_name: str) -> int:
    connection = admin_connection()
    try:
        rows = connection.run(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name", name=application_name
        )
        return int(rows[0][0])
    finally:
        connection.close()


@pytest.fixture
def postgres_runtime(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The process runtime configured from THREADLOOM_DB_* as a deployed function is, with a traceable name."""
    application_name = f"snapstart-{uuid.uuid4().hex[:8]}"
    server = connect_kwargs()
    for name, value in {
        "THREADLOOM_DB_HOST": str(server["host"]),
        "THREADLOOM_DB_PORT": str(server["port"]),
        "THREADLOOM_DB_NAME": worker_database(request),
        "THREADLOOM_DB_USER": str(server["user"]),
        "THREADLOOM_DB_AUTH": "password",
        "THREADLOOM_DB_TLS": "off",
        "THREADLOOM_DB_APPLICATION_NAME": application_name,
    }.items():
        monkeypatch.setenv(name, value)
    set_runtime(Runtime(Settings(backend="postgres", db_migrate=False)))
    yield application_name
    from threadloom.storage.postgres.database import close_environment_databases

    close_environment_databases()
    set_runtime(None)


def test_before_snapshot_warms_up_then_leaves_no_connection_open(postgres_runtime: str) -> None:
    snapstart.before_snapshot()
    assert backends(postgres_runtime) == 0


def test_after_restore_reopens_the_connection(postgres_runtime: str) -> None:
    snapstart.before_snapshot()
    snapstart.after_restore()
    assert backends(postgres_runtime) == 1
    # and the restored process serves reads on it
    from threadloom.api.runtime import get_runtime

    assert get_runtime().manager("tenant-snap").list() is not None


def test_register_hands_both_hooks_to_the_lambda_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: dict[str, Callable[[], Any]] = {}
    fake = types.ModuleType("snapshot_restore_py")
    fake.register_before_snapshot = lambda hook: registered.setdefault("before", hook)  # type: ignore[attr-defined]
    fake.register_after_restore = lambda hook: registered.setdefault("after", hook)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    assert snapstart.register() is True
    assert registered == {"before": snapstart.before_snapshot, "after": snapstart.after_restore}


def test_register_is_a_no_op_outside_lambda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails as it does off Lambda
    assert snapstart.register() is False
