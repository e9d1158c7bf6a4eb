"""Access to a real PostgreSQL server for tests.

``TEST_DATABASE_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``) names
the server. Each pytest worker gets its own database so parallel workers never share
rows. When no server answers, the tests are skipped with the reason, unless
``THREADLOOM_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), where they fail instead.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

import pytest

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


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


def postgres_store_factory(request: pytest.FixtureRequest) -> object:
    """Filled in by the PostgreSQL backend; until then the Postgres half of the contract suite is skipped."""
    try:
        from threadloom.storage.postgres.store import PostgresStore  # noqa: F401
    except ImportError as error:
        unavailable(f"PostgresStore cannot be imported: {error}")
    raise NotImplementedError
