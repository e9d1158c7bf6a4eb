"""SQLite connection handling: explicit transactions, one lock per connection, WAL for files."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Final, Literal

from threadloom.errors import (
    SessionBusyError,
    StorageError,
    StorageUnavailableError,
    ThreadloomError,
    ValidationError,
)
from threadloom.storage.values import check_storable

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractContextManager
    from types import TracebackType

    from threadloom.storage.database import Params, Row

#: How long a writer waits for another process's write lock before answering "busy".
#: Below the API function's timeout, like PostgreSQL's lock timeout.
DEFAULT_BUSY_TIMEOUT_S: Final = 2.0
#: WAL with synchronous=NORMAL: a commit survives a crash of the process, and the last
#: commits before a power loss or OS crash may be lost. ``full`` syncs every commit.
Synchronous = Literal["normal", "full"]
DEFAULT_SYNCHRONOUS: Final[Synchronous] = "normal"


class SqliteExecutor:
    """Runs statements on a connection whose transaction the caller manages."""

    def __init__(self, connection: sqlite3.Connection, busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self._connection = connection
        self._busy_timeout = busy_timeout

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        check_storable(params)
        try:
            return self._connection.execute(sql, params or {}).fetchall()
        except sqlite3.Error as error:
            raise translate_sqlite_error(error, self._busy_timeout) from error

    def execute(self, sql: str, params: Params | None = None) -> None:
        check_storable(params)
        try:
            self._connection.execute(sql, params or {})
        except sqlite3.Error as error:
            raise translate_sqlite_error(error, self._busy_timeout) from error

    def execute_all(self, statements: Sequence[tuple[str, Params]]) -> None:
        for sql, params in statements:
            self.execute(sql, params)


def translate_sqlite_error(error: sqlite3.Error, busy_timeout: float) -> ThreadloomError:
    """The same error types PostgreSQL's driver failures become (see the PostgreSQL database)."""
    text = str(error)
    if isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return SessionBusyError(
            "The session is busy: another write held it longer than the lock timeout "
            f"({busy_timeout:g} s); nothing was written, retry shortly"
        )
    if isinstance(error, sqlite3.OperationalError) and ("disk" in text or "unable to open" in text):
        return StorageUnavailableError(f"SQLite database is unavailable: {text}")
    if isinstance(error, (sqlite3.DataError, sqlite3.InterfaceError)):
        return ValidationError(f"SQLite refused a value: {text}")
    return StorageError(f"SQLite refused the statement: {text}")


class SqliteDatabase:
    """One SQLite connection shared by the threads of a process, guarded by a lock.

    Writes use ``BEGIN IMMEDIATE`` so a transaction takes the write lock before it
    reads the session head: two processes appending to one file then serialize
    instead of failing with a lock upgrade error.
    """

    dialect = "sqlite"

    def __init__(
        self,
        path_or_connection: str | sqlite3.Connection = ":memory:",
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S,
        synchronous: Synchronous = DEFAULT_SYNCHRONOUS,
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ValidationError(f"synchronous must be 'normal' or 'full', not {synchronous!r}")
        if not busy_timeout > 0:
            raise ValidationError(f"busy_timeout must be a positive number of seconds, not {busy_timeout!r}")
        self.synchronous = synchronous
        if isinstance(path_or_connection, sqlite3.Connection):
            self._connection = path_or_connection
        else:
            self._connection = sqlite3.connect(
                path_or_connection,
                check_same_thread=False,
                isolation_level=None,
                timeout=busy_timeout,
                uri=_is_uri(path_or_connection),  # "file:...": SQLite's URI form (a shared in-memory database)
            )
            if not _in_memory(path_or_connection):
                _enter_wal(self._connection, busy_timeout)
                self._connection.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self._connection.isolation_level = None
        self._connection.execute(f"PRAGMA busy_timeout={round(busy_timeout * 1000)}")
        self._lock = threading.RLock()
        self._busy_timeout = busy_timeout
        self._executor = SqliteExecutor(self._connection, busy_timeout)
        self._depth = 0
        # A connection this object opened is used by nobody else, so every write to the file comes
        # either through it (counted by its ``total_changes``) or through another connection (which
        # moves its ``PRAGMA data_version``): see :meth:`unchanged_since`. A connection handed in may be
        # shared in ways neither counter sees (a shared cache), so nothing is inferred from it; nor from a
        # URI, which may name a shared cache too.
        self._counts_changes = isinstance(path_or_connection, str) and not _is_uri(path_or_connection)
        self.last_append: object | None = None
        """What the last append through this database left (SqliteSessionProvider's to read and set)."""
        self.appends_to_next_index = 0
        """Appends through this database before the next one also indexes waiting messages for search
        (:mod:`threadloom.storage.sqlite.search_index`'s to read and set, under the write lock)."""

    @property
    def connection(self) -> sqlite3.Connection:
        return self._connection

    @property
    def busy_timeout(self) -> float:
        return self._busy_timeout

    @property
    def counts_changes(self) -> bool:
        """Whether ``connection.total_changes`` and :meth:`data_version` together see every write.

        Both read under the write lock: the first moves with every row this connection writes,
        committed or rolled back (read it after a COMMIT: FTS5 writes during one), the second with
        every commit by another connection. Equal readings then mean nothing was written in between.
        """
        return self._counts_changes

    def data_version(self) -> int:
        """``PRAGMA data_version``: it moves when another connection commits (one statement, ~1 µs)."""
        try:
            return int(self._connection.execute("PRAGMA data_version").fetchall()[0][0])
        except sqlite3.Error as error:
            raise translate_sqlite_error(error, self._busy_timeout) from error

    def read(self) -> AbstractContextManager[SqliteExecutor]:
        return _Transaction(self, "BEGIN")

    def query_once(self, sql: str, params: Params | None = None, *, by_key: bool = False) -> list[Row]:
        """One read statement in autocommit mode: its own snapshot, no BEGIN/COMMIT around it (any ``by_key``)."""
        with self._lock:
            return self._executor.query(sql, params)

    def read_together(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """Several read statements one after the other, each its own snapshot (as :meth:`query_once`)."""
        with self._lock:
            return [self._executor.query(sql, params) for sql, params in statements]

    def read_when_missing(
        self, first: tuple[str, Params], statements: Sequence[tuple[str, Params]]
    ) -> tuple[list[Row], list[list[Row]] | None]:
        """``first``'s rows, and only when it found nothing every statement's (else None), one by one."""
        with self._lock:
            rows = self._executor.query(*first)
            if rows and rows[0][0] is not None:
                return rows, None
            return rows, [self._executor.query(sql, params) for sql, params in statements]

    def execute_once(self, sql: str, params: Params | None = None, *, durable: bool = True) -> list[Row]:
        """One write statement in autocommit mode: atomic on its own, committed when it returns.

        Every commit here has the connection's durability (``synchronous``), ``durable`` or not.
        """
        with self._lock:
            return self._executor.query(sql, params)

    def write(self) -> _Transaction:
        """A write transaction (``BEGIN IMMEDIATE``); after it, ``committed_changes`` tells what it left."""
        return _Transaction(self, "BEGIN IMMEDIATE")

    def close(self) -> None:
        with self._lock:
            self._connection.close()


class _Transaction:
    """One use of :meth:`SqliteDatabase.read` or ``write``: the lock, then BEGIN, then COMMIT or ROLLBACK.

    Nested use inside an open transaction (same thread: the lock is reentrant) joins it. A plain
    class rather than a generator context manager: this runs around every append.
    """

    __slots__ = ("_begin", "_database", "_nested", "committed_changes")

    def __init__(self, database: SqliteDatabase, begin: str) -> None:
        self._database = database
        self._begin = begin
        self._nested = False
        self.committed_changes: int | None = None
        """The connection's ``total_changes`` right after this transaction committed, still under its
        lock (FTS5 writes its segments during COMMIT); None if it joined an outer one or rolled back."""

    def __enter__(self) -> SqliteExecutor:
        database = self._database
        database._lock.acquire()
        if database._depth:
            database._depth += 1
            self._nested = True
            return database._executor
        try:
            database._connection.execute(self._begin)
        except BaseException as error:
            database._lock.release()
            if isinstance(error, sqlite3.Error):
                raise translate_sqlite_error(error, database._busy_timeout) from error
            raise
        database._depth = 1
        return database._executor

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        database = self._database
        try:
            if self._nested:
                database._depth -= 1
                return
            database._depth = 0
            if kind is not None:
                database._connection.execute("ROLLBACK")
                return
            try:
                database._connection.execute("COMMIT")
            except sqlite3.Error as failure:
                database._connection.execute("ROLLBACK")
                raise translate_sqlite_error(failure, database._busy_timeout) from failure
            self.committed_changes = database._connection.total_changes
        finally:
            database._lock.release()


def _is_uri(path: str) -> bool:
    return path.startswith("file:")


def _in_memory(path: str) -> bool:
    """No file behind it (WAL and the sync mode do not apply)."""
    return path == ":memory:" or path.startswith("file::memory:") or (_is_uri(path) and "mode=memory" in path)


def _enter_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL, waiting up to ``busy_timeout`` for another connection doing the same.

    Two processes opening a new file at once both switch it: the switch needs the file to itself, and
    SQLite answers "database is locked" at once rather than call the busy handler (waiting could
    deadlock), so without a retry one store in three failed to open in that race. Once the file is in
    WAL the switch is a no-op that takes no lock.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
