"""The two tiny interfaces a backend implements so the shared storage logic can run on it.

Both SQLite and pg8000.native take ``:name`` parameters, so the shared code passes a
dict of named parameters and each backend keeps its SQL text in one module.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from threadloom.clock import timestamp_text

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractContextManager

Params = dict[str, Any]
Row = tuple[Any, ...]


class Executor(Protocol):
    """Runs statements inside whatever transaction the surrounding context opened."""

    def query(self, sql: str, params: Params | None = None) -> list[Row]: ...

    def execute(self, sql: str, params: Params | None = None) -> None: ...

    def execute_all(self, statements: Sequence[tuple[str, Params]]) -> None:
        """Run statements that return no rows, in order (on PostgreSQL many to a round trip)."""
        ...


class Database(Protocol):
    """A connection (or connection factory) that hands out transactional executors."""

    dialect: str

    def read(self) -> AbstractContextManager[Executor]:
        """A consistent read (a snapshot, where the backend offers one)."""
        ...

    def write(self) -> AbstractContextManager[Executor]:
        """One write transaction; it commits when the block exits normally, else rolls back."""
        ...

    def query_once(self, sql: str, params: Params | None = None, *, by_key: bool = False) -> Sequence[Sequence[Any]]:
        """One read statement on its own (joining a transaction this thread has open).

        A single statement is its own snapshot, so it needs no transaction around it; on
        PostgreSQL that is one round trip instead of three (begin, statement, commit).
        ``by_key``: the statement reads at most one row by its primary key, so it cannot run
        long and takes no row lock; PostgreSQL then sends it without the timeouts statement.
        """
        ...

    def read_together(self, statements: Sequence[tuple[str, Params]]) -> Sequence[Sequence[Sequence[Any]]]:
        """Several independent read statements, answered in order; one round trip on PostgreSQL.

        Each is its own snapshot, as with :meth:`query_once`. The database is then the
        ``ReadChannel`` of the providers' ``BlockRead``s.
        """
        ...

    def read_when_missing(
        self, first: tuple[str, Params], statements: Sequence[tuple[str, Params]]
    ) -> tuple[Sequence[Sequence[Any]], Sequence[Sequence[Sequence[Any]]] | None]:
        """``first``'s rows, and only when it found nothing, every statement's rows (else None).

        Every statement answers at most one row of one column. On PostgreSQL they are read in
        one statement (one round trip), the others only evaluated when ``first`` is NULL; a
        missing row and a NULL value both count as nothing found.
        """
        ...

    def execute_once(self, sql: str, params: Params | None = None, *, durable: bool = True) -> Sequence[Sequence[Any]]:
        """One write statement, atomic and committed on its own; returns the rows it returns.

        Never retried once sent: if the connection is lost the outcome is unknown, and the
        error says so. ``durable=False`` marks a cache the caller can rebuild (the frozen
        prompt): a backend may then commit without waiting for the disk, never when the
        statement joins an open transaction.
        """
        ...


def to_timestamp_text(value: Any) -> str:
    """Normalize a timestamp read back from a backend (``datetime`` or text) to the ISO form above."""
    if isinstance(value, datetime):
        return timestamp_text(value)
    return "" if value is None else f"{value}"
