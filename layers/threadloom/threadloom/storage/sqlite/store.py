"""``SqliteStore``: the embedded default, one file (or memory) holding every Threadloom table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.storage.sqlite.database import SqliteDatabase
from threadloom.storage.sqlite.sql import SqliteSql
from threadloom.storage.store import SqlStore

if TYPE_CHECKING:
    import sqlite3

    from threadloom.storage.blocks import SqlContextProvider
    from threadloom.storage.search_entries import SqlSearchProvider


class SqliteStore(SqlStore):
    """Messages, blocks, prompts, search entries and skill state in SQLite with FTS5.

    Examples
    --------
    >>> from threadloom import Session, SqliteStore
    >>> session = Session.create(SqliteStore("chat.db")).for_session("chat-1")
    """

    sql = SqliteSql
    migrations_package = "threadloom.storage.sqlite"

    def __init__(self, path_or_connection: str | sqlite3.Connection = ":memory:", *, auto_migrate: bool = True):
        super().__init__(SqliteDatabase(path_or_connection), auto_migrate=auto_migrate)

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
