"""One exception hierarchy, so callers (and the HTTP layer) can map failures by type.

Messages reuse the reference implementation's texts wherever it has one, because
tools surface them to the model verbatim (``Error: <message>``).
"""

from __future__ import annotations


class ThreadloomError(Exception):
    """Base class of every error Threadloom raises on purpose."""


class ValidationError(ThreadloomError, ValueError):
    """The caller passed something malformed (a message without ``id``, a bad key...)."""


class PayloadTooLargeError(ValidationError):
    """Something exceeds a size limit of the limits table (HTTP 413)."""


class NotFoundError(ThreadloomError, LookupError):
    """A session, message or block that the call needs does not exist."""


class SessionNotFoundError(NotFoundError):
    """The session does not exist in the caller's namespace (a read that checks the tenant itself says so)."""


class ConflictError(ThreadloomError):
    """A precondition failed: the leaf moved, or an idempotency key was reused with another body."""


class SessionChangedError(ConflictError):
    """The session was deleted and created again under the same id (a keyed session, for another subject)
    since this process last read it: nothing was read or written with what it knew; retry the request."""

    @classmethod
    def of(cls, session_id: str) -> SessionChangedError:
        """The error as every check words it (reads, the frozen prompt, appends)."""
        return cls(
            f"Session {session_id!r} was deleted and created again for another subject since this process "
            "last read it; nothing was read or written: retry the request"
        )


class StaleVersionError(ConflictError):
    """A block replacement was based on a version that is no longer current: nothing was written.

    ``current_version`` and ``current_content`` are the block as stored now, so a caller (or the
    model, through the tool result) can re-read and decide again. Over HTTP (the client) only the
    version is known: ``current_content`` is None there.
    """

    def __init__(self, message: str, *, current_version: int, current_content: str | None) -> None:
        super().__init__(message)
        self.current_version = current_version
        self.current_content = current_content


class CompactionAlreadyStoredError(ConflictError):
    """A fenced compaction found its request key already stored: another worker committed it first."""


class ReadOnlyBlockError(ThreadloomError):
    """A write targeted a block whose provider cannot be written."""


class BlockLimitError(ThreadloomError):
    """A write would push a block past its ``max_tokens``."""


class CompactionError(ThreadloomError):
    """Compaction could not run (no function registered, or the summarizer failed)."""


class QuotaExceededError(ThreadloomError):
    """A tenant already holds as many skills or knowledge entries as its quota allows."""


class StorageUnavailableError(ThreadloomError):
    """The backing store (database, bucket, table) cannot be reached right now; retrying may help.

    ``retry_after`` is how many seconds a caller should wait before retrying (the HTTP
    layer sends it as ``Retry-After``).
    """

    retry_after: int = 1


class StorageTimeoutError(StorageUnavailableError):
    """The store did not answer within the configured timeout; the connection was discarded.

    A write that timed out was rolled back by the server unless the message says its
    outcome is unknown; re-sending it with the same message id is always safe.
    """


class SessionBusyError(StorageUnavailableError):
    """Another writer held the session longer than the lock timeout; nothing was written, retry."""


class StorageError(ThreadloomError):
    """The store refused a statement for a reason that is neither the input nor availability."""


class SkillStoreError(ThreadloomError):
    """A skill document store refused a request (missing bucket, denied access)."""


__all__ = [
    "BlockLimitError",
    "CompactionAlreadyStoredError",
    "CompactionError",
    "ConflictError",
    "NotFoundError",
    "PayloadTooLargeError",
    "QuotaExceededError",
    "ReadOnlyBlockError",
    "SessionBusyError",
    "SessionNotFoundError",
    "SkillStoreError",
    "StorageError",
    "StorageTimeoutError",
    "StorageUnavailableError",
    "ThreadloomError",
    "ValidationError",
]
