"""The local server's SQLite durability is configurable: THREADLOOM_SQLITE_SYNCHRONOUS."""

from __future__ import annotations

from pathlib import Path

import pytest
from threadloom.api.runtime import Runtime, Settings
from threadloom.errors import ValidationError


@pytest.mark.parametrize(("value", "pragma"), [(None, 1), ("normal", 1), ("FULL", 2)])
def test_the_sqlite_store_runs_at_the_configured_durability(tmp_path: Path, value: str | None, pragma: int) -> None:
    environ = {"THREADLOOM_SQLITE_PATH": str(tmp_path / "data" / "threadloom.db")}
    if value is not None:
        environ["THREADLOOM_SQLITE_SYNCHRONOUS"] = value
    store = Runtime(Settings.from_env(environ)).store
    try:
        connection = store.database.connection
        # PRAGMA synchronous: 1 is NORMAL, 2 is FULL; WAL either way
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == pragma
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        store.close()


def test_an_unknown_durability_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValidationError, match="THREADLOOM_SQLITE_SYNCHRONOUS must be normal or full, not 'off'"):
        Settings.from_env({"THREADLOOM_SQLITE_SYNCHRONOUS": "off"})
