"""Compaction requests a client can follow: recorded as ``queued`` when enqueued, then moved by the worker.

A record is found by the worker's request key (``threadloom.compaction.queue.request_key``), the
value the overlay is stored under and SQS deduplicates on, so one request has one record (and one
client-facing id) however often it is sent.
States: ``queued`` → ``running`` → ``done`` | ``nothing_to_summarize`` | ``failed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from threadloom.compaction.queue import request_key

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.compaction.queue import CompactionQueue, CompactionRequest
    from threadloom.records import CompactionState, TrackedCompaction


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
    """A ``CompactionQueue`` that records each request as ``queued`` before handing it to ``inner``."""

    def __init__(self, inner: CompactionQueue, requests_for: Callable[[str], CompactionRequestLog]) -> None:
        self.inner = inner
        self._requests_for = requests_for

    def enqueue(self, request: CompactionRequest) -> None:
        if request.kind != "compaction":  # a reflection keeps its own records (threadloom.reflection)
            self.inner.enqueue(request)
            return
        self.submit(request)

    def submit(self, request: CompactionRequest) -> TrackedCompaction:
        """Enqueue and return the tracked record (its id answers ``POST /compact``)."""
        record = self._requests_for(request.namespace).record_queued(
            request_key(request), request.session_id, request.leaf_id
        )
        self.inner.enqueue(request)
        return record


__all__ = ["CompactionRequestLog", "TrackedCompactionQueue"]
