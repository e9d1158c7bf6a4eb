"""Fixtures for the PostgreSQL-specific tests: the worker database's URL and an admin connection to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.postgres import admin_connection, url_for, worker_database


@pytest.fixture
def make_store(postgres_store_factory: Callable[[], Any]) -> Callable[[], Any]:
    """A new PostgresStore (own connection) over this worker's emptied database on each call."""
    return postgres_store_factory


@pytest.fixture
def pg_url(make_store: Callable[[], Any], request: pytest.FixtureRequest) -> str:
    """URL of this worker's database (emptied for the test)."""
    return url_for(worker_database(request))


@pytest.fixture
def admin(pg_url: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A plain pg8000 connection to the worker database, outside Threadloom."""
    connection = admin_connection(worker_database(request))
    yield connection
    connection.close()
