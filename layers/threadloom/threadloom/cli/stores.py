"""Opening the store a command works on, from ``--database``: ``sqlite:///path`` or a PostgreSQL URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threadloom.errors import NotFoundError, StorageUnavailableError, ValidationError

DEFAULT_DATABASE = "sqlite:///.threadloom/threadloom.db"
"""The file ``make serve`` (and ``threadloom serve``) keep their data in."""

TLS_HINT = (
    "TLS defaults to `verify` (certificate and host name checked); sslmode=require (THREADLOOM_DB_TLS=require) "
    "encrypts without checks, sslrootcert=/path/ca.pem trusts a private CA such as the RDS bundle."
)


def open_store(url: str, *, create: bool = False) -> Any:
    """A ``SqliteStore`` or ``PostgresStore``; the caller closes it. A bare path means a SQLite file.

    A SQLite file that does not exist is refused unless ``create``: a misspelt or relative path used
    to leave a new empty database behind and answer "No sessions" as if all were well.
    """
    if "://" not in url and url:
        url = f"sqlite:///{url}"
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        if not path:
            raise ValidationError("A SQLite URL needs a path: sqlite:///relative/file.db or sqlite:////absolute.db")
        from threadloom.storage.sqlite.store import SqliteStore

        if path != ":memory:":
            if not create and not Path(path).is_file():
                raise NotFoundError(
                    f"No database at {path} ({Path(path).resolve()}); check --database, or create one with "
                    f"`threadloom --database {path} migrate` (or add --create)"
                )
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        return SqliteStore(path)
    if url.startswith(("postgresql://", "postgres://")):
        from threadloom.storage.postgres.store import PostgresStore

        return PostgresStore(url)
    raise ValidationError(f"--database must be a file path, sqlite:///path or postgresql://…, not {url!r}")


def with_tls_hint(error: StorageUnavailableError) -> StorageUnavailableError:
    """The error again, with the TLS defaults explained when the failure came from the TLS handshake."""
    text = str(error)
    if any(word in text.lower() for word in ("ssl", "tls", "certificate")):
        return StorageUnavailableError(f"{text}\n{TLS_HINT}")
    return error


__all__ = ["DEFAULT_DATABASE", "TLS_HINT", "open_store", "with_tls_hint"]
