"""The storage contract suite runs unchanged against every backend: each test gets ``make_store``.

``make_store()`` returns a new store over the same data on each call, which is how the
tests simulate another process or a restarted Lambda.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    if backend == "sqlite":
        path = str(tmp_path / "threadloom.db")
        opened: list[SqliteStore] = []

        def sqlite_factory() -> SqliteStore:
            store = SqliteStore(path)
            opened.append(store)
            return store

        yield sqlite_factory
        for store in opened:
            store.close()
    else:
        factory = request.getfixturevalue("postgres_store_factory")
        yield factory


@pytest.fixture
def store(make_store: Callable[[], Any]) -> Any:
    return make_store()
