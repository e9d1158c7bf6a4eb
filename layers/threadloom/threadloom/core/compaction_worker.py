"""The consumer side of queued compaction (contract D9): one ``CompactionRequest`` in, at most one overlay out.

A request is only a trigger. It names the leaf the producing append created, but by the time a worker runs the
session may have grown, lost that leaf, compacted, or been deleted. The worker therefore re-reads the session and
relies on ``Session.compact``'s fence (contract §4) rather than on the request being fresh:

* the session is gone → ``SESSION_GONE``, acknowledged (there is nothing left to compact), also when it was
  deleted while the summary was computed, or deleted and opened again for another subject (checked in the
  commit's transaction: a summary of one subject's conversation never lands in another's);
* an overlay is already stored under the request's key → ``DUPLICATE`` (a redelivery; the summarizer is not called);
* the named leaf still exists → compact the branch ending there; it was deleted → compact the current latest leaf;
* the branch, the overlays or a summarized message (edited, deleted) changed between the snapshot and the commit
  (``ConflictError``) → ``SKIPPED_STALE``,
  acknowledged: whatever moved the branch appended or compacted after this request was made, and an append that
  keeps the session over its threshold enqueues a newer request behind this one;
* the compaction function failed (``CompactionError``) → raised, so the queue retries that request alone.

The same request key stored with the overlay makes a redelivery that races past the ``DUPLICATE`` check a no-op in
the database too, so duplicates always leave one effective overlay. Logs carry ids and outcomes, never message text.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import TYPE_CHECKING

from threadloom.compaction.queue import request_key
from threadloom.errors import CompactionAlreadyStoredError, ConflictError, SessionChangedError, SessionNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.compaction.queue import CompactionRequest
    from threadloom.compaction.tracking import CompactionRequestLog
    from threadloom.core.manager import SessionManager
    from threadloom.core.session import Session

logger = logging.getLogger(__name__)

STALE_ERROR = "The session changed while the summary was computed; nothing was stored (ask again to compact it now)"
GONE_ERROR = "The session was deleted while the summary was computed; nothing was stored"


class CompactionOutcome(StrEnum):
    """What handling one request did; every outcome but a raised error means "acknowledge the message"."""

    COMPACTED = "compacted"
    """A new overlay was stored by this call (the only outcome counted as a completed compaction)."""
    NOTHING_TO_DO = "nothing_to_do"
    """The compaction function found nothing worth summarizing (history short enough, or empty)."""
    DUPLICATE = "duplicate"
    """This request was handled before; its overlay is already stored."""
    SKIPPED_STALE = "skipped_stale"
    """The branch or the overlays changed while the summary was computed; nothing was stored."""
    SESSION_GONE = "session_gone"
    """The session no longer exists in the request's namespace."""


class CompactionWorker:
    """Handles compaction requests for any namespace, given a way to find that namespace's configured manager.

    Parameters
    ----------
    resolve_manager:
        Returns the ``SessionManager`` of a namespace (tenant), configured with the deployment's compaction
        function. Called once per request; it should cache managers.

    Examples
    --------
    >>> manager = SessionManager.create(store, namespace="tenant-1").on_compaction(compact_fn)
    >>> worker = CompactionWorker(lambda namespace: manager)
    >>> worker.handle(CompactionRequest.create("tenant-1", session_id, leaf_id))  # doctest: +SKIP
    <CompactionOutcome.COMPACTED: 'compacted'>
    """

    def __init__(self, resolve_manager: Callable[[str], SessionManager]) -> None:
        self._resolve_manager = resolve_manager

    def __call__(self, request: CompactionRequest) -> CompactionOutcome:
        """Same as :meth:`handle`, so a worker can be passed wherever a request handler is expected."""
        return self.handle(request)

    def handle(self, request: CompactionRequest) -> CompactionOutcome:
        """Compact the requested session once; raises ``CompactionError`` (retry) when its function fails.

        When the store tracks requests, the request's record moves to ``running`` and then to its final state.
        """
        manager = self._resolve_manager(request.namespace)
        if manager.get(request.session_id) is None:
            logger.info(
                "Compaction skipped: session %r not found in namespace %r", request.session_id, manager.namespace
            )
            return CompactionOutcome.SESSION_GONE
        session = manager.get_session(request.session_id)
        key = request_key(request)
        tracker = _tracker(manager)
        if tracker is None:
            return self._compact(session, request, key)
        tracker.mark_running(key, request.session_id, request.leaf_id)
        try:
            outcome = self._compact(session, request, key)
        except Exception as error:
            tracker.finish(key, "failed", error=str(error) or type(error).__name__)
            raise
        _record_outcome(tracker, session, key, outcome)
        return outcome

    def _compact(self, session: Session, request: CompactionRequest, key: str) -> CompactionOutcome:
        if _stored_under(session, key):
            logger.info("Compaction request for session %r already handled", request.session_id)
            return CompactionOutcome.DUPLICATE
        leaf_id = _target_leaf(session, request.leaf_id)
        try:
            # Registered: the commit checks that the namespace still holds this session for its subject
            result = session.compact(leaf_id=leaf_id, request_key=key, registered=True)
        except (SessionNotFoundError, SessionChangedError):
            logger.info("Compaction of session %r skipped: it was deleted meanwhile", request.session_id)
            return CompactionOutcome.SESSION_GONE
        except CompactionAlreadyStoredError:
            # Two deliveries of one request raced past the check above; the other one committed.
            logger.info("Compaction request for session %r was committed by another worker", request.session_id)
            return CompactionOutcome.DUPLICATE
        except ConflictError as error:
            logger.info(
                "Compaction of session %r skipped, the session changed meanwhile: %s", request.session_id, error
            )
            return CompactionOutcome.SKIPPED_STALE
        if result is None:
            logger.info("Compaction of session %r had nothing to summarize", request.session_id)
            return CompactionOutcome.NOTHING_TO_DO
        logger.info(
            "Compacted session %r: messages %r to %r now read as one summary",
            request.session_id,
            result.from_message_id,
            result.to_message_id,
        )
        return CompactionOutcome.COMPACTED


def _tracker(manager: SessionManager) -> CompactionRequestLog | None:
    """The namespace's request log when the store keeps one (the SQL stores do)."""
    factory = getattr(manager.store, "compaction_requests", None)
    return factory(manager.namespace) if callable(factory) else None


def _record_outcome(tracker: CompactionRequestLog, session: Session, key: str, outcome: CompactionOutcome) -> None:
    if outcome in (CompactionOutcome.COMPACTED, CompactionOutcome.DUPLICATE):
        lookup = getattr(session.storage, "get_compaction_by_request", None)
        stored = lookup(key) if callable(lookup) else None
        tracker.finish(
            key,
            "done",
            from_message_id=stored.from_message_id if stored is not None else None,
            to_message_id=stored.to_message_id if stored is not None else None,
        )
    elif outcome is CompactionOutcome.NOTHING_TO_DO:
        tracker.finish(key, "nothing_to_summarize")
    elif outcome is CompactionOutcome.SKIPPED_STALE:
        tracker.finish(key, "failed", error=STALE_ERROR)
    elif outcome is CompactionOutcome.SESSION_GONE:
        tracker.finish(key, "failed", error=GONE_ERROR)


def _stored_under(session: Session, key: str) -> bool:
    """Whether an overlay carries ``key`` (storage without the lookup answers no; its commit still deduplicates)."""
    lookup = getattr(session.storage, "get_compaction_by_request", None)
    return callable(lookup) and lookup(key) is not None


def _target_leaf(session: Session, leaf_id: str | None) -> str | None:
    """The requested leaf while it exists; otherwise ``None``, which ``compact`` reads as the latest leaf."""
    if leaf_id is None or session.get_message(leaf_id) is not None:
        return leaf_id
    logger.info("Leaf %r of session %r was deleted; compacting its latest leaf instead", leaf_id, session.session_id)
    return None


__all__ = ["CompactionOutcome", "CompactionWorker", "request_key"]
