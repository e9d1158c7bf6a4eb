"""Each adapter runs on the library (SQLite, PostgreSQL) and through the client against a local server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.driver import open_backend
from tests.support.local_server import local_server


@dataclass
class Target:
    """Where a test keeps its conversations: ``spec`` names it for another process."""

    name: str
    spec: str

    def backend(self) -> Any:
        return open_backend(self.spec)


@pytest.fixture(scope="session")
def integration_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("integrations-server") / "d") as server:
        yield server.url


@pytest.fixture(params=["sqlite", "postgres", "http"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "sqlite":
        return Target("sqlite", f"sqlite:{tmp_path / 'agents.db'}")
    if request.param == "postgres":
        from tests.support.postgres import url_for, worker_database

        request.getfixturevalue("postgres_store_factory")  # skips (or fails in CI) without a server; empties the db
        return Target("postgres", f"postgres:{url_for(worker_database(request))}")
    return Target("http", f"http:{request.getfixturevalue('integration_server')}")


@pytest.fixture
def unique_key(request: pytest.FixtureRequest) -> str:
    """A conversation key no other test (or earlier run against the shared server) uses."""
    import uuid

    return f"{request.node.name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def backend(target: Target) -> Iterator[Any]:
    """The target opened in this process (a SessionManager or a ThreadloomClient), closed afterwards."""
    opened = target.backend()
    yield opened
    close = getattr(opened, "close", None) or getattr(getattr(opened, "store", None), "close", None)
    if callable(close):
        close()
