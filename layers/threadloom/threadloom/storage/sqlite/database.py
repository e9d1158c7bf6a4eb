"""SQLite connection handling: explicit transactions, one lock per connection, WAL for files."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from threadloom.errors import StorageUnavailableError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from threadloom.storage.database import Params, Row

BUSY_TIMEOUT_MS = 30_000


class SqliteExecutor:
    """Runs statements on a connection whose transaction the caller manages."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        return self._connection.execute(sql, params or {}).fetchall()

    def execute(self, sql: str, params: Params | None = None) -> None:
        self._connection.execute(sql, params or {})


class SqliteDatabase:
    """One SQLite connection shared by the threads of a process, guarded by a lock.

    Writes use ``BEGIN IMMEDIATE`` so a transaction takes the write lock before it
    reads the session head: two processes appending to one file then serialize
    instead of failing with a lock upgrade error.
    """

    dialect = "sqlite"

    def __init__(self, path_or_connection: str | sqlite3.Connection = ":memory:") -> None:
        if isinstance(path_or_connection, sqlite3.Connection):
            self._connection = path_or_connection
        else:
            self._connection = sqlite3.connect(
                path_or_connection, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
            )
            if path_or_connection != ":memory:" and not path_or_connection.startswith("file::memory:"):
                self._connection.execute("PRAGMA journal_mode=WAL")
                self._connection.execute("PRAGMA synchronous=NORMAL")
        self._connection.isolation_level = None
        self._connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self._lock = threading.RLock()
        self._executor = SqliteExecutor(self._connection)
        self._depth = 0

    @property
    def connection(self) -> sqlite3.Connection:
        return self._connection

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[SqliteExecutor]:
        with self._lock:
            if self._depth:  # nested use inside an open transaction joins it
                self._depth += 1
                try:
                    yield self._executor
                finally:
                    self._depth -= 1
                return
            try:
                self._connection.execute(begin)
            except sqlite3.OperationalError as error:
                raise StorageUnavailableError(f"SQLite database is unavailable: {error}") from error
            self._depth = 1
            try:
                yield self._executor
            except BaseException:
                self._depth = 0
                self._connection.execute("ROLLBACK")
                raise
            self._depth = 0
            try:
                self._connection.execute("COMMIT")
            except sqlite3.OperationalError as error:
                self._connection.execute("ROLLBACK")
                raise StorageUnavailableError(f"SQLite commit failed: {error}") from error

    def read(self) -> AbstractContextManager[SqliteExecutor]:
        return self._transaction("BEGIN")

    def write(self) -> AbstractContextManager[SqliteExecutor]:
        return self._transaction("BEGIN IMMEDIATE")

    def close(self) -> None:
        with self._lock:
            self._connection.close()
