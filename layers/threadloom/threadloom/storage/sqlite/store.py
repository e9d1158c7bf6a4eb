"""``SqliteStore``: the embedded default, one file (or memory) holding every Threadloom table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.storage.sqlite.database import DEFAULT_BUSY_TIMEOUT_S, DEFAULT_SYNCHRONOUS, SqliteDatabase
from threadloom.storage.sqlite.dialect import SqliteDialect
from threadloom.storage.sqlite.tree import SqliteSessionProvider
from threadloom.storage.store import SqlStore

if TYPE_CHECKING:
    import sqlite3

    from threadloom.storage.blocks import SqlContextProvider
    from threadloom.storage.search_entries import SqlSearchProvider
    from threadloom.storage.sqlite.database import Synchronous


class SqliteStore(SqlStore):
    """Messages, blocks, prompts, search entries and skill state in SQLite with FTS5.

    Examples
    --------
    >>> from threadloom import Session, SqliteStore
    >>> session = Session.create(SqliteStore("chat.db")).for_session("chat-1")
    """

    sql = SqliteDialect
    migrations_package = "threadloom.storage.sqlite"

    def __init__(
        self,
        path_or_connection: str | sqlite3.Connection = ":memory:",
        *,
        auto_migrate: bool = True,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S,
        synchronous: Synchronous = DEFAULT_SYNCHRONOUS,
    ):
        """``synchronous``: ``normal`` (WAL; survives a process crash, may lose the last commits on
        power loss) or ``full`` (every commit synced); ``busy_timeout``: seconds a writer waits for
        another process's lock before :class:`SessionBusyError`."""
        super().__init__(
            SqliteDatabase(path_or_connection, busy_timeout=busy_timeout, synchronous=synchronous),
            auto_migrate=auto_migrate,
        )

    def session_provider(self, session_id: str = "") -> SqliteSessionProvider:
        database = self._ready()
        assert isinstance(database, SqliteDatabase)
        return SqliteSessionProvider(database, session_id)

    def close(self) -> None:
        database = self.database
        if isinstance(database, SqliteDatabase):
            database.close()


def SqliteContextProvider(store: SqliteStore, key: str = "") -> SqlContextProvider:
    """The reference's ``AgentContextProvider``: a writable block in ``store`` under ``key``."""
    return store.context_provider(key)


def SqliteSearchProvider(store: SqliteStore, *, scope: str = "") -> SqlSearchProvider:
    """The reference's ``AgentSearchProvider``: searchable keyed entries in ``store``."""
    return store.search_provider(scope=scope)
