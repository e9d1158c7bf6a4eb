"""Compaction requests a client can follow: recorded as ``queued`` when enqueued, then moved by the worker.

A record is found by the worker's request key (``threadloom.compaction.queue.request_key``), the
value the overlay is stored under and SQS deduplicates on, so one request has one record (and one
client-facing id) however often it is sent.
States: ``queued`` → ``running`` → ``done`` | ``nothing_to_summarize`` | ``failed``. A request the inner queue
refuses to take (its ``enqueue`` raises, e.g. SQS unavailable) goes from ``queued`` straight to ``failed``, with an
error saying it could not be queued, so nobody waits for a worker that will never see it and asking again re-queues it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from threadloom.compaction.queue import request_key

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.compaction.queue import CompactionQueue, CompactionRequest
    from threadloom.records import CompactionState, TrackedCompaction

logger = logging.getLogger(__name__)

NOT_QUEUED_ERROR = "the request could not be queued"
"""How the ``error`` of a request the inner queue refused begins (followed by ``": <the queue's error>"``)."""


class CompactionRequestLog(Protocol):
    """One namespace's tracked requests (``SqlStore.compaction_requests(namespace)``)."""

    def record_queued(self, request_key: str, session_id: str, leaf_id: str | None) -> TrackedCompaction: ...

    def mark_running(self, request_key: str, session_id: str, leaf_id: str | None) -> None: ...

    def finish(
        self,
        request_key: str,
        state: CompactionState,
        *,
        from_message_id: str | None = None,
        to_message_id: str | None = None,
        error: str | None = None,
    ) -> None: ...

    def get(self, request_id: str) -> TrackedCompaction | None: ...

    def latest(self, session_id: str) -> TrackedCompaction | None: ...


class TrackedCompactionQueue:
    """A ``CompactionQueue`` that records each request as ``queued`` before handing it to ``inner``.

    If ``inner.enqueue`` raises, the record it just queued is marked ``failed`` (``NOT_QUEUED_ERROR``) and the
    error is re-raised unchanged.
    """

    def __init__(self, inner: CompactionQueue, requests_for: Callable[[str], CompactionRequestLog]) -> None:
        self.inner = inner
        self._requests_for = requests_for

    def enqueue(self, request: CompactionRequest) -> None:
        if request.kind != "compaction":  # a reflection keeps its own records (threadloom.reflection)
            self.inner.enqueue(request)
            return
        self.submit(request)

    def submit(self, request: CompactionRequest) -> TrackedCompaction:
        """Enqueue and return the tracked record (its id answers ``POST /compact``).

        When the inner queue raises, the record is moved to ``failed`` (if it is still ``queued``: one already
        running or finished is left alone) and the inner queue's error propagates unchanged.
        """
        log = self._requests_for(request.namespace)
        key = request_key(request)
        record = log.record_queued(key, request.session_id, request.leaf_id)
        try:
            self.inner.enqueue(request)
        except Exception as error:
            if record.state == "queued":
                _mark_not_queued(log, key, record, error)
            raise
        return record


def _mark_not_queued(log: CompactionRequestLog, key: str, record: TrackedCompaction, error: Exception) -> None:
    """Record that ``record`` never reached the queue; best effort, so the queue's own error is the one raised."""
    try:
        current = log.get(record.id)  # a send that timed out may still have reached a worker that moved it on
        if current is not None and current.state != "queued":
            return
        log.finish(key, "failed", error=f"{NOT_QUEUED_ERROR}: {str(error) or type(error).__name__}")
    except Exception:
        logger.exception(
            "Could not mark compaction request %s of session %r as failed after the queue refused it",
            record.id,
            record.session_id,
        )


__all__ = ["NOT_QUEUED_ERROR", "CompactionRequestLog", "TrackedCompactionQueue"]
