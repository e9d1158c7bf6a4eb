"""PostgreSQL connection handling: one lazy, self-healing pg8000 connection and explicit transactions.

Why it looks like this (see docs/postgres.md):

- One connection per process (a Lambda execution environment), opened on first use and
  reused; a lock serializes threads because a pg8000 connection is not thread-safe.
- Nothing that pins an RDS Proxy session is ever sent: transactions are explicit
  ``START TRANSACTION ... COMMIT`` (the proxy multiplexes at their boundaries), statements
  with parameters use pg8000's unnamed prepared statements, no ``SET`` of any kind, no
  session advisory locks, no temporary tables.
- A connection the server or the proxy has closed while it sat idle is noticed before
  anything is sent (its socket turns readable) and replaced. A request is retried on a new
  connection only where that cannot apply a write twice: a single read statement, or the
  ``START TRANSACTION`` that opens a unit of work. Any other lost connection surfaces as
  :class:`StorageUnavailableError`.

Over 400 lines because the reconnect and retry rules above act on one connection and must be read together.
"""

from __future__ import annotations

import select
import ssl
import threading
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from threadloom.errors import (
    SessionBusyError,
    StorageError,
    StorageTimeoutError,
    StorageUnavailableError,
    ThreadloomError,
    ValidationError,
)
from threadloom.storage.checked_reads import PendingCheck, return_check, settle_alone, take_pending_check
from threadloom.storage.postgres.connection import (
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_STATEMENT_TIMEOUT_S,
    PostgresSettings,
    describe_error,
    is_connection_lost,
    is_server_error,
    settings_factory,
    sqlstate,
)
from threadloom.storage.postgres.pipeline import run_pipelined, run_pipelined_together
from threadloom.storage.postgres.sql import PostgresSql
from threadloom.storage.values import check_storable

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from threadloom.storage.database import Params, Row
    from threadloom.storage.postgres.connection import Connection, ConnectionFactory

BEGIN_READ: Final = "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
# The head-row lock protocol relies on READ COMMITTED: a writer blocked on the row lock
# then reads the row as the previous writer committed it instead of failing.
BEGIN_WRITE: Final = "START TRANSACTION ISOLATION LEVEL READ COMMITTED, READ WRITE"

#: Statements a transaction sends in one round trip (``PostgresExecutor.execute_all``). An answer is
#: about 60 bytes a statement, so a batch's answers stay well inside a socket buffer.
BATCH_STATEMENTS: Final = 256

_LOCK_NOT_AVAILABLE: Final = "55P03"
_QUERY_CANCELED: Final = "57014"
#: threadloom_require_session (migration 0030): the namespace holds no such session.
_SESSION_REFUSED: Final = "TL410"
#: threadloom_require_session: the session has another subject than the caller knew.
_SESSION_CHANGED: Final = "TL412"


@dataclass(frozen=True, slots=True)
class ServerTimeouts:
    """Server-side limits applied to every statement and transaction (seconds; None: the server's default).

    Two exceptions skip the statement that sets them: an append sets its own lock timeout
    (:attr:`lock_setting`, migration 0012) and a read by primary key needs neither.

    They are set per transaction with ``set_config(..., is_local => true)``, so nothing
    outlives the transaction and RDS Proxy can still multiplex the connection. Keep both
    below the client socket timeout: the server then gives up first and rolls the write
    back, so a write the caller was told failed never commits later.
    """

    lock: float | None = DEFAULT_LOCK_TIMEOUT_S
    statement: float | None = DEFAULT_STATEMENT_TIMEOUT_S

    def as_settings(self) -> tuple[str, str] | None:
        if self.lock is None and self.statement is None:
            return None
        return (_milliseconds(self.lock), _milliseconds(self.statement))

    @property
    def lock_setting(self) -> str | None:
        """The lock timeout for a statement that sets its own (the append functions); None: the server's."""
        settings = self.as_settings()
        return None if settings is None else settings[0]

    def begin_suffix(self) -> str:
        """Appended to START TRANSACTION (simple protocol, same round trip); values are our own numbers."""
        settings = self.as_settings()
        if settings is None:
            return ""
        lock, statement = settings
        return (
            f"; SELECT set_config('lock_timeout', '{int(lock)}', true), "
            f"set_config('statement_timeout', '{int(statement)}', true)"
        )


def _milliseconds(seconds: float | None) -> str:
    return "0" if seconds is None else str(max(1, round(seconds * 1000)))


class PostgresExecutor:
    """Runs statements inside the transaction :class:`PostgresDatabase` opened."""

    def __init__(self, database: PostgresDatabase, connection: Connection) -> None:
        self._database = database
        self._connection = connection

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        rows = self._database.run_on(self._connection, sql, params)
        return [tuple(row) for row in rows]

    def execute(self, sql: str, params: Params | None = None) -> None:
        self._database.run_on(self._connection, sql, params)

    def execute_all(self, statements: Sequence[tuple[str, Params]]) -> None:
        """Statements in order, ``BATCH_STATEMENTS`` to a round trip instead of one each.

        Each still runs on its own, so a trigger of one sees what the ones before it wrote. The
        batch bounds what both sides buffer: the client sends a batch before it reads any answer,
        so an unbounded one could fill the server's send buffer while the client is still writing.
        """
        for start in range(0, len(statements), BATCH_STATEMENTS):
            self._database.run_batch(self._connection, statements[start : start + BATCH_STATEMENTS])


class PostgresDatabase:
    """A pg8000 connection (or a factory of them) handing out transactions.

    Given a factory, the connection is opened lazily and replaced when it dies. Given a
    connection, it is used as is and never replaced (a dead one raises
    :class:`StorageUnavailableError`); pass a factory or a DSN to get reconnection.
    """

    dialect = "postgresql"
    #: A tenant's session check waits for the next read and goes in its round trip (``checked_reads``).
    sends_checks_with_reads = True

    def __init__(
        self,
        source: Connection | ConnectionFactory,
        *,
        description: str = "PostgreSQL",
        timeouts: ServerTimeouts | None = None,
        prepared_statements: bool = False,
    ) -> None:
        self.timeouts = timeouts if timeouts is not None else ServerTimeouts()
        #: Name statements on the connection and reuse them (``prepared.py``); off behind a pooler.
        self.prepared_statements = prepared_statements
        self._timeout_settings = self.timeouts.as_settings()
        #: What the append functions are given to set themselves (:attr:`ServerTimeouts.lock_setting`).
        self.lock_setting = self.timeouts.lock_setting
        self._begin_suffix = self.timeouts.begin_suffix()
        self._factory: ConnectionFactory | None = source if callable(source) else None
        self._connection: Connection | None = None if callable(source) else source
        self._owns_connection = callable(source)
        self.description = description
        #: Set once migrate() found or made the schema current: stores sharing this database
        #: (one per invocation, say) then skip the check instead of repeating it.
        self.schema_current = False
        self._lock = threading.RLock()
        self._depth = 0
        self._executor: PostgresExecutor | None = None

    # ------------------------------------------------------------ connection

    def _connect(self) -> Connection:
        if self._factory is None:
            raise StorageUnavailableError(
                f"The {self.description} connection was lost and cannot be reopened "
                "(pass a DSN or a connection factory to PostgresStore to reconnect automatically)"
            )
        try:
            connection = self._factory()
        except StorageUnavailableError:
            raise
        except Exception as error:  # a user factory may raise anything pg8000 or socket raise
            raise StorageUnavailableError(f"Cannot connect to {self.description}: {describe_error(error)}") from error
        self._connection = connection
        return connection

    def _live_connection(self) -> Connection:
        """The cached connection, replaced first if the server closed it while it sat idle."""
        connection = self._connection
        if connection is not None and _closed_by_peer(connection):
            self._discard()
            connection = None
        return connection if connection is not None else self._connect()

    def _discard(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and self._owns_connection:
            with suppress(Exception):  # the socket may already be gone; closing is best effort
                connection.close()

    def close(self) -> None:
        """Close the connection this database opened (a connection passed in is left to its owner)."""
        with self._lock:
            if self._owns_connection:
                self._discard()

    # ------------------------------------------------------------ statements

    def run_on(
        self,
        connection: Connection,
        sql: str,
        params: Mapping[str, Any] | None,
        *,
        timeouts: bool = False,
        cache_commit: bool = False,
    ) -> list[list[Any]]:
        """Run one statement on ``connection``; every failure leaves as a :class:`ThreadloomError`.

        Values are checked before anything is sent. A failure the server reported (an
        ErrorResponse, read up to ReadyForQuery) leaves the connection usable; any other
        failure (socket error, timeout, a driver bug) may have left a half-sent or
        half-read message, so the connection is discarded and never used again.
        ``cache_commit``: the statement's own implicit transaction commits without waiting for
        the WAL flush (only ever for a statement that stands alone).
        """
        check_storable(params)
        try:
            if not params:
                rows = connection.run(sql)  # simple protocol: one round trip, several statements allowed
            else:
                rows = run_pipelined(
                    connection,
                    sql,
                    params,
                    timeouts=self._timeout_settings if timeouts else None,
                    cache_commit=cache_commit,
                    prepare=self.prepared_statements,
                )
        except Exception as error:
            raise self._translate(error) from error
        return rows if rows is not None else []

    def _translate(self, error: Exception) -> ThreadloomError:
        if not is_server_error(error) or is_connection_lost(error):
            self._discard()
            if _timed_out(error):
                return StorageTimeoutError(
                    f"{self.description} did not answer in time; the connection was closed: {describe_error(error)}"
                )
            return StorageUnavailableError(f"Lost the connection to {self.description}: {describe_error(error)}")
        code = sqlstate(error) or ""
        if code == _LOCK_NOT_AVAILABLE:
            busy = SessionBusyError(
                "The session is busy: another write held it longer than the lock timeout "
                f"({_seconds(self.timeouts.lock)}); nothing was written, retry shortly"
            )
            return busy
        if code == _QUERY_CANCELED:
            return StorageTimeoutError(
                f"{self.description} cancelled the statement after the statement timeout "
                f"({_seconds(self.timeouts.statement)}); nothing was written, retry shortly"
            )
        if code.startswith(("53", "58")) or code in ("57P03", "55006"):
            return StorageUnavailableError(f"{self.description} could not serve the request: {describe_error(error)}")
        if code.startswith("22"):
            return ValidationError(f"{self.description} refused a value: {describe_error(error)}")
        return StorageError(f"{self.description} refused the statement: {describe_error(error)}")

    def query_once(self, sql: str, params: Mapping[str, Any] | None = None, *, by_key: bool = False) -> list[list[Any]]:
        """One read statement in its own (implicit) transaction: a single round trip and snapshot.

        Reads change nothing, so a statement that finds the connection dead is retried
        once on a new one; a timed-out read is not (it would wait as long again).
        ``by_key`` (one row by its primary key: a session's stored prompt) leaves out the
        timeouts statement, about 50 µs of server time: such a read cannot run long, and only
        a schema change's table lock can hold it, until the client socket timeout at most.
        """
        timeouts = not by_key
        pending = take_pending_check(self)
        if pending is not None:
            if params:  # a read by key goes with the check (by key too) without the timeouts statement
                return self._checked_reads(pending, [(sql, params)], timeouts=timeouts)[0]
            return_check(pending)  # a parameterless statement goes alone, by the simple protocol
            settle_alone(self)
        with self._lock:
            if self._depth:  # inside an open transaction: join it
                return self.run_on(self._connection, sql, params)
            connection = self._live_connection()
            try:
                return self.run_on(connection, sql, params, timeouts=timeouts)
            except StorageTimeoutError:
                raise
            except StorageUnavailableError:
                if self._connection is not None or self._factory is None:
                    raise  # the server refused the statement itself, or we cannot reconnect
            return self.run_on(self._live_connection(), sql, params, timeouts=timeouts)

    def read_together(
        self, statements: Sequence[tuple[str, Mapping[str, Any]]], *, timeouts: bool = True
    ) -> list[list[list[Any]]]:
        """Several read statements in one round trip (see :func:`run_pipelined_together`), retried as query_once is.

        ``timeouts=False``: every statement reads by key (as ``query_once``'s ``by_key``).
        """
        pending = take_pending_check(self)
        if pending is not None:
            return self._checked_reads(pending, statements, timeouts=timeouts)
        with self._lock:
            if self._depth:  # inside an open transaction: join it
                return [self.run_on(self._connection, sql, params) for sql, params in statements]
            connection = self._live_connection()
            try:
                return self._run_together(connection, statements, timeouts=timeouts)
            except StorageTimeoutError:
                raise
            except StorageUnavailableError:
                if self._connection is not None or self._factory is None:
                    raise
            return self._run_together(self._live_connection(), statements, timeouts=timeouts)

    def _checked_reads(
        self, pending: PendingCheck, statements: Sequence[tuple[str, Mapping[str, Any]]], *, timeouts: bool = True
    ) -> list[list[list[Any]]]:
        """A tenant's check and the reads after it in one round trip; their rows only if the check passed.

        The check goes in the form that fails (``session_required``), so on a refusal the server skips
        the reads: they never run for a session that is not the tenant's.
        """
        check = pending.failing or pending.statement
        try:
            answers = self.read_together([check, *statements], timeouts=timeouts)
        except StorageError as error:
            code = _sqlstate_of(error) if pending.failing is not None else None
            if code in (_SESSION_REFUSED, _SESSION_CHANGED):
                pending.refuse(changed=code == _SESSION_CHANGED)
            return_check(pending)
            raise
        except BaseException:
            return_check(pending)
            raise
        if pending.failing is not None:
            pending.state = "passed"  # it raised on any refusal: its one row says nothing more
        else:
            pending.settle(answers[0])
        return answers[1:]

    def read_when_missing(
        self, first: tuple[str, Mapping[str, Any]], statements: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> tuple[list[list[Any]], list[list[list[Any]]] | None]:
        """``first``'s rows, and only when it found nothing every statement's (else None): one round trip.

        A session's stored prompt and, when there is none, the blocks to render it from are one
        call of ``threadloom_read_when_missing`` (migration 0014): a new session then freezes in
        two round trips instead of three, and a stored prompt costs one lookup. It goes with the
        timeouts statement, as the block reads did: unlike the prompt alone, they count rows.
        Statements the function does not know are read as before: ``first``, then the others.
        """
        call = PostgresSql.read_when_missing(first, statements)
        if call is None:
            rows = self.query_once(*first)
            found = bool(rows) and rows[0][0] is not None
            return rows, None if found else self.read_together(statements)
        sql, params, kinds = call
        [rows] = self.read_together([(sql, params)])
        values = [row[0] for row in rows]
        if values[0] is not None:
            return [[values[0]]], None
        answers = [[[value if kind == "block" else int(value)]] for kind, value in zip(kinds, values[1:], strict=True)]
        return [], answers

    def run_batch(self, connection: Connection, statements: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Statements that return no rows, in one round trip, inside the transaction open on ``connection``."""
        for _, params in statements:
            check_storable(params)
        try:
            run_pipelined_together(connection, statements, prepare=self.prepared_statements, rows=False)
        except Exception as error:
            raise self._translate(error) from error

    def _run_together(
        self, connection: Connection, statements: Sequence[tuple[str, Mapping[str, Any]]], *, timeouts: bool = True
    ) -> list[list[list[Any]]]:
        for _, params in statements:
            check_storable(params)
        try:
            return run_pipelined_together(
                connection,
                statements,
                timeouts=self._timeout_settings if timeouts else None,
                prepare=self.prepared_statements,
            )
        except Exception as error:
            raise self._translate(error) from error

    def execute_once(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        durable: bool = True,
        sets_own_lock_timeout: bool = False,
    ) -> list[list[Any]]:
        """One write statement, atomic on its own (autocommit). Never retried once sent.

        If the connection is lost mid-statement the write may or may not have committed,
        so the error says so and the caller decides (appends are idempotent by id).
        ``durable=False`` (a cache): ``synchronous_commit`` is off for this statement's own
        transaction; joining an open transaction, the statement takes that one's durability.
        ``sets_own_lock_timeout``: the statement sets the lock timeout itself (the append
        function, given :attr:`ServerTimeouts.lock_setting`), so the timeouts statement that
        would go ahead of it, about 60 µs of server time, is left out; it then runs without
        the statement timeout, which no statement can set for itself.
        """
        settle_alone(self)  # a tenant's check waiting for a read goes before any write
        with self._lock:
            if self._depth:
                return self.run_on(self._connection, sql, params)
            connection = self._live_connection()
            try:
                return self.run_on(
                    connection, sql, params, timeouts=not sets_own_lock_timeout, cache_commit=not durable
                )
            except StorageUnavailableError as error:
                if self._connection is None:  # the connection broke after the statement left
                    raise type(error)(
                        f"{error}; the write may or may not have been applied, "
                        "and re-sending it with the same message id is safe"
                    ) from error.__cause__
                raise

    # ---------------------------------------------------------- transactions

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[PostgresExecutor]:
        settle_alone(self)  # a tenant's check waiting for a read goes before the transaction
        with self._lock:
            if self._depth:  # nested use inside an open transaction joins it
                assert self._executor is not None
                self._depth += 1
                try:
                    yield self._executor
                finally:
                    self._depth -= 1
                return
            connection = self._begin(begin)
            executor = PostgresExecutor(self, connection)
            self._executor, self._depth = executor, 1
            try:
                yield executor
            except BaseException:
                self._depth, self._executor = 0, None
                self._rollback(connection)
                raise
            self._depth, self._executor = 0, None
            try:
                self.run_on(connection, "COMMIT", None)
            except StorageUnavailableError as error:
                if self._connection is None:  # lost during COMMIT: the outcome is unknown
                    raise StorageUnavailableError(
                        f"{error}; the transaction may or may not have been committed"
                    ) from error.__cause__
                self._rollback(connection)
                raise
            except Exception:
                self._rollback(connection)
                raise

    def _begin(self, begin: str) -> Connection:
        """Open a transaction; START changes nothing, so a lost connection is replaced once."""
        connection = self._live_connection()
        try:
            self.run_on(connection, begin + self._begin_suffix, None)
        except StorageTimeoutError:
            raise
        except StorageUnavailableError:
            if self._connection is not None or self._factory is None:
                raise
            connection = self._live_connection()
            self.run_on(connection, begin + self._begin_suffix, None)
        return connection

    def _rollback(self, connection: Connection) -> None:
        if self._connection is not connection:
            return  # the connection died inside the transaction; the server rolled it back
        try:
            self.run_on(connection, "ROLLBACK", None)
        except Exception:
            self._discard()

    def read(self) -> AbstractContextManager[PostgresExecutor]:
        return self._transaction(BEGIN_READ)

    def write(self) -> AbstractContextManager[PostgresExecutor]:
        return self._transaction(BEGIN_WRITE)


def _sqlstate_of(error: StorageError) -> str | None:
    """The server's SQLSTATE behind a translated error, if the server raised it."""
    cause = error.__cause__
    return sqlstate(cause) if cause is not None else None


def _timed_out(error: BaseException) -> bool:
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, TimeoutError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _seconds(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g} s"


def _closed_by_peer(connection: Connection) -> bool:
    """True when an idle connection's socket is readable or gone: the server sent its
    goodbye (pg_terminate_backend, restart) or the proxy closed an idle client.

    An idle PostgreSQL connection receives nothing unsolicited except notices we never
    ask for, so readability is a reliable and free (no round trip) staleness test.
    """
    if not hasattr(connection, "_usock"):
        return False  # not a pg8000 connection we know how to inspect: assume alive
    sock: Any = connection._usock
    if sock is None:
        return True  # pg8000 closed it
    try:
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


_shared: dict[PostgresSettings, PostgresDatabase] = {}
_shared_lock = threading.Lock()


def environment_database(settings: PostgresSettings | None = None) -> PostgresDatabase:
    """The process-wide database for ``settings`` (default: from the environment).

    Lambda keeps module state between invocations of one execution environment, so this
    gives one connection per environment, opened on first use and reused afterwards.
    """
    resolved = settings or PostgresSettings.from_env()
    with _shared_lock:
        database = _shared.get(resolved)
        if database is None:
            params = resolved.connect_params()
            database = PostgresDatabase(
                settings_factory(resolved),
                description=f"PostgreSQL at {params.describe()}",
                timeouts=ServerTimeouts(lock=params.lock_timeout, statement=params.statement_timeout),
                prepared_statements=params.prepared_statements,
            )
            _shared[resolved] = database
        return database


def close_environment_databases() -> None:
    """Close every process-wide connection; each reopens on its next statement.

    A SnapStart snapshot must not hold a socket: every restored copy would share it.
    """
    with _shared_lock:
        databases = list(_shared.values())
    for database in databases:
        database.close()
