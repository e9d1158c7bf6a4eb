"""The id of the request being served, carried from the HTTP API to the work it queues.

The API handler binds its request id here; the SQS compaction queue sends it as a message attribute and the
compaction worker's logs show it, so one id follows a request across both functions. A context variable keeps
concurrent requests (threads of the local server) apart.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

#: The SQS message attribute that carries the id to the compaction function.
MESSAGE_ATTRIBUTE: Final = "threadloom-correlation-id"

_current: ContextVar[str | None] = ContextVar("threadloom_correlation_id", default=None)


@contextmanager
def bound(correlation_id: str | None) -> Iterator[None]:
    """Make ``correlation_id`` the current request's id for the ``with`` block (None: no request)."""
    token = _current.set(correlation_id or None)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> str | None:
    """The current request's id, if one was bound."""
    return _current.get()


__all__ = ["MESSAGE_ATTRIBUTE", "bound", "current"]
