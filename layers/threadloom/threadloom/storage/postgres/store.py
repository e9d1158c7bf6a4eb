"""``PostgresStore``: every Threadloom table in PostgreSQL, auto-wired exactly like ``SqliteStore`` (D11)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.errors import ValidationError
from threadloom.storage.postgres.connection import PostgresSettings, dsn_factory, parse_database_url
from threadloom.storage.postgres.database import PostgresDatabase, ServerTimeouts, environment_database
from threadloom.storage.postgres.schema import MIGRATIONS_PACKAGE, apply_postgres_migrations
from threadloom.storage.postgres.sql import PostgresSql
from threadloom.storage.postgres.tree import PostgresSessionProvider, PostgresSessionRegistry
from threadloom.storage.store import SqlStore

if TYPE_CHECKING:
    from collections.abc import Mapping

    from threadloom.storage.blocks import SqlContextProvider
    from threadloom.storage.postgres.connection import Connection, ConnectionFactory
    from threadloom.storage.search_entries import SqlSearchProvider


class PostgresStore(SqlStore):
    """Messages, blocks, prompts, search entries and skill state in PostgreSQL with tsvector search.

    ``conn_or_dsn_or_factory`` is a ``pg8000.native.Connection`` (used as is, never
    replaced), a ``postgresql://`` URL or a zero-argument callable returning a new
    connection (both reconnect when the connection dies). In Lambda use
    :meth:`from_environment`, which shares one lazily opened connection per execution
    environment. The schema is migrated on first use unless ``auto_migrate=False``.

    Examples
    --------
    >>> from threadloom import PostgresStore, Session
    >>> store = PostgresStore("postgresql://app@db.internal:5432/threadloom?sslmode=verify-full")
    >>> session = Session.create(store).for_session("chat-1")
    """

    sql = PostgresSql
    migrations_package = MIGRATIONS_PACKAGE
    database: PostgresDatabase

    def __init__(
        self,
        conn_or_dsn_or_factory: Connection | str | ConnectionFactory | PostgresDatabase,
        *,
        auto_migrate: bool = True,
    ) -> None:
        super().__init__(_database_for(conn_or_dsn_or_factory), auto_migrate=auto_migrate)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, *, auto_migrate: bool = True) -> PostgresStore:
        """A store over the process-wide connection described by ``THREADLOOM_DB_*`` (see docs/postgres.md).

        Nothing connects until the first statement, so this is safe at import time.
        """
        settings = PostgresSettings.from_env(environ)
        return cls(environment_database(settings), auto_migrate=auto_migrate)

    def migrate(self) -> list[int]:
        """Create or upgrade the schema; idempotent and safe to call from many processes at once."""
        with self._migrate_lock:
            applied = apply_postgres_migrations(self.database)
            self._migrated = self.database.schema_current = True
            return applied

    def _ready(self) -> PostgresDatabase:
        if self.database.schema_current:
            self._migrated = True
        super()._ready()
        return self.database

    def session_provider(self, session_id: str = "") -> PostgresSessionProvider:
        return PostgresSessionProvider(self._ready(), session_id)

    def registry(self, namespace: str = "default") -> PostgresSessionRegistry:
        return PostgresSessionRegistry(self._ready(), self.sql, namespace)

    def close(self) -> None:
        """Close the connection the store opened (a connection passed in is left open)."""
        self.database.close()


def _database_for(source: Any) -> PostgresDatabase:
    if isinstance(source, PostgresDatabase):
        return source
    if isinstance(source, str):
        params = parse_database_url(source)
        return PostgresDatabase(
            dsn_factory(source),
            description=f"PostgreSQL at {params.describe()}",
            timeouts=ServerTimeouts(lock=params.lock_timeout, statement=params.statement_timeout),
            prepared_statements=params.prepared_statements,
        )
    if callable(source) or callable(getattr(source, "run", None)):
        return PostgresDatabase(source)
    raise ValidationError(
        "PostgresStore needs a pg8000.native.Connection, a postgresql:// URL or a function returning a connection"
    )


def PostgresContextProvider(store_or_connection: Any, key: str = "") -> SqlContextProvider:
    """The reference's ``PostgresContextProvider``: a writable block stored under ``key``.

    Accepts a :class:`PostgresStore` or anything ``PostgresStore`` accepts.
    """
    return _store_for(store_or_connection).context_provider(key)


def PostgresSearchProvider(store_or_connection: Any, *, scope: str = "") -> SqlSearchProvider:
    """The reference's ``PostgresSearchProvider``: searchable keyed entries (tsvector, dialect D5)."""
    return _store_for(store_or_connection).search_provider(scope=scope)


def _store_for(source: Any) -> PostgresStore:
    return source if isinstance(source, PostgresStore) else PostgresStore(source)
