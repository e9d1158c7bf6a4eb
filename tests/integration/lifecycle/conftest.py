"""Lifecycle tests run on both backends; ``other_store`` gives the second backend for cross-backend trips."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        sqlite = SqliteStore(str(tmp_path / "lifecycle.db"))
        yield sqlite
        sqlite.close()
    else:
        yield request.getfixturevalue("postgres_store_factory")()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "second.db"))
    yield store
    store.close()
