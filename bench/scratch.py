"""A scratch PostgreSQL database for one benchmark run, dropped afterwards."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pg8000.native
from threadloom.storage.postgres.connection import parse_database_url

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextmanager
def scratch_postgres(url: str, suffix: str = "") -> Iterator[str]:
    """Yield the URL of a new, empty database on ``url``'s server; drop it on exit (``suffix`` names a second one)."""
    params = parse_database_url(url)
    admin = pg8000.native.Connection(
        user=params.user, host=params.host, port=params.port, database=params.database, password=params.password
    )
    name = f"threadloom_bench_{os.getpid()}{suffix}"
    admin.run(f'DROP DATABASE IF EXISTS "{name}"')
    admin.run(f'CREATE DATABASE "{name}"')
    parts = urlsplit(url)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, "/" + name, "", ""))
    finally:
        admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
