"""A tenant's check of its session, sent with the first read that follows it.

Every session-level request of the HTTP API checks first that the session is the tenant's (the
registry row in its namespace), then reads what it asked for: on PostgreSQL two round trips where
the read alone is one. Inside :func:`checked_first` the check waits, and the database sends it in
the same round trip as the block's first read (a pipeline: the check, then the read, each its own
snapshot). That check is the form that fails when it finds nothing (migration 0030): the server
then skips the read, so a refused request runs the lookup by key and nothing else, and its timing
cannot tell another tenant's session (or its size) from an id nobody holds. The read's rows are
handed back only when the check passed. Anything else the block sends first (a write, a
transaction) runs the check alone before it, and a block that sends nothing runs it when it ends,
so no outcome of a block ever leaves it without the check, whatever path the block took.

A database that cannot send two statements in one round trip (SQLite, in process) runs the check at
once, where the block starts. The pending check is held in a context variable, so it belongs to the
thread (or task) that opened the block and never to a request served beside it.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from threadloom.storage.database import Database, Params

Statement = tuple[str, "Params"]


@dataclass(slots=True)
class PendingCheck:
    """A check not yet answered: ``statement`` finds a row when the session is the tenant's.

    ``statement``'s one row, when it finds the session, is its subject. ``failing``: the same check
    as a statement that raises when it refuses, sent ahead of reads in one pipeline (the server skips
    what follows an error); None where there is none. ``subject``: the subject the session must have
    (in a 1-tuple, as it may be None), else ``changed()`` is raised; None to take any.
    ``state``: ``waiting`` (not sent), ``sent`` (in a round trip not answered yet), ``passed`` or ``refused``.
    """

    database: Any
    statement: Statement
    refused: Callable[[], Exception]
    failing: Statement | None = None
    subject: tuple[str | None] | None = None
    changed: Callable[[], Exception] | None = None
    state: str = "waiting"

    def settle(self, rows: Sequence[Any]) -> None:
        """Take ``statement``'s rows: raise the refusal when it found none, or another subject."""
        if not rows:
            self.refuse()
        if self.subject is not None and rows[0][0] != self.subject[0]:
            self.refuse(changed=True)
        self.state = "passed"

    def refuse(self, *, changed: bool = False) -> NoReturn:
        """The block is refused, now and at every later statement; ``changed``: for another subject."""
        if changed and self.changed is not None:
            self.refused = self.changed
        self.state = "refused"
        raise self.refused() from None


_pending: ContextVar[PendingCheck | None] = ContextVar("threadloom_pending_session_check", default=None)


def take_pending_check(database: object) -> PendingCheck | None:
    """The check waiting for ``database``'s next read, if any; the caller sends it first and ``settle``s it.

    Marked sent as it leaves, so a statement the caller runs to send it does not pick it up again. A
    caller whose round trip failed before the answer was read hands it back with :func:`return_check`.
    Once refused, every later statement of the block on ``database`` raises the refusal before it is sent.
    """
    pending = _pending.get()
    if pending is None or pending.database is not database:
        return None
    if pending.state == "refused":  # whatever the block does after a refusal it caught is refused again
        raise pending.refused()
    if pending.state != "waiting":
        return None
    pending.state = "sent"
    return pending


def return_check(pending: PendingCheck) -> None:
    """The round trip that carried ``pending`` failed before its answer was read: it waits again."""
    if pending.state == "sent":
        pending.state = "waiting"


def settle_alone(database: Database) -> None:
    """Run the check waiting for ``database`` on its own (before a write or a transaction)."""
    pending = take_pending_check(database)
    if pending is not None:
        _settle_now(database, pending)


def settle_waiting_check() -> None:
    """Run the block's waiting check now, alone: before a side effect no statement gates (a skill written to S3)."""
    pending = _pending.get()
    if pending is None:
        return
    if pending.state == "refused":
        raise pending.refused()
    if pending.state == "waiting":
        _settle_now(pending.database, pending)


@contextmanager
def checked_first(
    database: Database,
    statement: Statement,
    refused: Callable[[], Exception],
    *,
    failing: Statement | None = None,
    subject: tuple[str | None] | None = None,
    changed: Callable[[], Exception] | None = None,
) -> Iterator[None]:
    """Within the block, ``statement`` (the session's check) goes with ``database``'s first read.

    When it finds no row, ``refused()`` is raised: by that read, by whatever the block sends first,
    or when the block ends. An error the block raised before the check was answered gives way to
    the refusal, as does a refusal the block caught: another tenant's session is refused the same
    way whatever path the block took. ``failing``, ``subject``, ``changed``: see :class:`PendingCheck`.
    """
    outer = _pending.get()
    if outer is not None and outer.state == "waiting":
        settle_alone(outer.database)  # a block inside another: the outer check goes first, alone
    pending = PendingCheck(database, statement, refused, failing, subject, changed)
    if not getattr(database, "sends_checks_with_reads", False):
        _settle_now(database, pending)
        yield
        return
    token = _pending.set(pending)
    try:
        yield
    except BaseException:
        _pending.reset(token)
        _settle_after_error(database, pending)
        raise
    _pending.reset(token)
    _settle_at_end(database, pending)


def _settle_after_error(database: Database, pending: PendingCheck) -> None:
    """The refusal wins over the block's own error; a check that cannot run either leaves that error.

    A block whose round trip failed (a timeout, a lost connection) still has its check waiting: run
    again, it may fail the same way, and the block's error is then the one that says what happened.
    """
    try:
        _settle_at_end(database, pending)
    except Exception:
        if pending.state == "refused":
            raise


def _settle_at_end(database: Database, pending: PendingCheck) -> None:
    if pending.state in ("waiting", "sent"):
        _settle_now(database, pending)
    if pending.state == "refused":
        raise pending.refused() from None


def _settle_now(database: Database, pending: PendingCheck) -> None:
    pending.state = "sent"
    try:
        rows = database.query_once(*pending.statement, by_key=True)
    except BaseException:
        pending.state = "waiting"
        raise
    pending.settle(rows)
