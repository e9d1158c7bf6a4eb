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

#: ``postgres-prepared``: PostgreSQL with ``prepared_statements=on``, as a deployment without a pooler runs it.
BACKENDS = ["sqlite", "postgres", "postgres-prepared"]


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
    elif backend == "postgres-prepared":
        from tests.support.postgres import postgres_store_factory

        yield from postgres_store_factory(request, prepared_statements=True)
    else:
        factory = request.getfixturevalue("postgres_store_factory")
        yield factory


@pytest.fixture
def store(make_store: Callable[[], Any]) -> Any:
    return make_store()
